#!/usr/bin/env bash
# Runs tests/chaos/chaos.py with Debian's interpreter (python3-psycopg) and the newest installed
# PostgreSQL server: run_chaos.sh IDEMCTL EXPORTER [chaos.py flags...]. The cluster is a private
# one under /tmp, since the run crashes it.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../../scripts/lib/pg.sh
source "$here/../../scripts/lib/pg.sh"
# shellcheck source=../../scripts/lib/python.sh
source "$here/../../scripts/lib/python.sh"
idemctl=$1 exporter=$2
shift 2
python=$(psycopg_python)
exec "$python" "$here/chaos.py" --idemctl "$idemctl" --exporter "$exporter" --pg-bin "$(pg_bin)" "$@"
