#!/usr/bin/env bash
# Runs one of the replicated cluster's Python tests with Debian's python3 that has psycopg 3
# (python3-psycopg): run_python.sh SCRIPT [flags...].
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../../scripts/lib/python.sh
source "$here/../../scripts/lib/python.sh"
python=$(psycopg_python)
exec "$python" "$@"
