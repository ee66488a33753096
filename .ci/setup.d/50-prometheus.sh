# Prometheus and Alertmanager (Debian bookworm: prometheus 2.42, prometheus-alertmanager 0.25) for the alert
# intake's live tests. Sourced by .ci/run under `set -euo pipefail`: no `exit`, idempotent.
# Nothing is started here: tests/bot/alerts/test_alertmanager_live.py and tests/handlers/ops/test_prometheus_scrape.py
# start their own processes on ephemeral loopback ports (config written by the test, pointing at a `serve`
# the test starts) and stop them by PID. Any system service the package may start is left alone.
_prom_bins() {
  command -v prometheus >/dev/null 2>&1 \
    && { command -v prometheus-alertmanager >/dev/null 2>&1 || command -v alertmanager >/dev/null 2>&1; }
}
if ! _prom_bins; then
  if ! apt-get install -y -q --no-install-recommends prometheus prometheus-alertmanager >/dev/null 2>&1; then
    apt-get update -q >/dev/null
    apt-get install -y -q --no-install-recommends prometheus prometheus-alertmanager >/dev/null \
      || echo "WARNING: could not install prometheus/prometheus-alertmanager; the live alert tests will skip" >&2
  fi
fi
if _prom_bins; then
  export TRIAGE_TEST_PROMETHEUS="$(command -v prometheus)"
  export TRIAGE_TEST_ALERTMANAGER="$(command -v prometheus-alertmanager || command -v alertmanager)"
  echo "prometheus: $("$TRIAGE_TEST_PROMETHEUS" --version 2>&1 | sed -n 1p)"
  echo "alertmanager: $("$TRIAGE_TEST_ALERTMANAGER" --version 2>&1 | sed -n 1p)"
fi
unset -f _prom_bins
