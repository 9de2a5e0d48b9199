#!/usr/bin/env bash
# idemwatch-proxy end to end: a private PostgreSQL, migrated, then tests/proxy/proxy_test.py
# (a real upstream and the proxy in front of it). run.sh PROXY IDEMCTL
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../../scripts/lib/pg.sh
source "$here/../../scripts/lib/pg.sh"
# shellcheck source=../../scripts/lib/python.sh
source "$here/../../scripts/lib/python.sh"
proxy=$1 idemctl=$2
python=$(psycopg_python)
pg_scratch proxy
dsn=$(pg_migrated_database proxy "$idemctl")
"$python" "$here/proxy_test.py" --proxy "$proxy" --dsn "$dsn" --idemctl "$idemctl"
