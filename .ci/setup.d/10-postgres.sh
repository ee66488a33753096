# PostgreSQL: this machine kind runs one; start it if it stopped, and point the storage tests at it.
if ! pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; then
  pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -1)" main start || true
fi
export TRIAGE_TEST_POSTGRES_URL="${TRIAGE_TEST_POSTGRES_URL:-postgresql+psycopg://postgres@127.0.0.1:5432/test}"
