# kubectl: the lab tests drive the machine's kubectl against the lab API server (no cluster needed).
if ! command -v kubectl >/dev/null 2>&1; then
  # Debian's kubernetes-client if it installs; otherwise 40-helm.sh puts its kubectl 1.32 on PATH.
  apt-get install -y -q kubernetes-client >/dev/null 2>&1 || echo "no Debian kubectl: 40-helm.sh provides one"
fi
