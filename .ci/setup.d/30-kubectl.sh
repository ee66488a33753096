# kubectl: the lab tests drive the machine's kubectl against the lab API server (no cluster needed).
if ! command -v kubectl >/dev/null 2>&1; then
  apt-get install -y -q kubernetes-client >/dev/null 2>&1 || echo "kubectl unavailable: tests marked kubectl will skip"
fi
