#!/usr/bin/env bash
# The proxy's Grafana dashboard, every query run against a Prometheus scraping a proxy under
# traffic: a private PostgreSQL, migrated, then tests/proxy/dashboard_test.py.
#   run_dashboard.sh PROXY IDEMCTL LINT
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../../scripts/lib/pg.sh
source "$here/../../scripts/lib/pg.sh"
# shellcheck source=../../scripts/lib/python.sh
source "$here/../../scripts/lib/python.sh"
proxy=$1 idemctl=$2 lint=$3
python=$(psycopg_python)
pg_scratch proxy_dashboard
dsn=$(pg_migrated_database proxy_dashboard "$idemctl")
PYTHONDONTWRITEBYTECODE=1 "$python" "$here/dashboard_test.py" --proxy "$proxy" --dsn "$dsn" --lint "$lint" \
  --dashboard "$here/../../dashboards/grafana/dashboards/idemwatch-proxy.json"
