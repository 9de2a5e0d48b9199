#!/usr/bin/env bash
# A gap flood against the exporter's reader (bench/exporter/gap_flood.py): a duplicate DEBIT held
# open while a writer burns ids, on a private cluster; with --baseline, another exporter build runs
# against the same flood.
#   bench/exporter/gap_flood.sh [BUILD_DIR] [gap_flood.py flags]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build}
shift $(($# > 0 ? 1 : 0))
source "$root/scripts/lib/pg.sh"
source "$root/scripts/lib/python.sh"
pg_scratch gap-flood
dsn=$(pg_migrated_database flood "$build/tools/idemctl/idemctl")
"$(psycopg_python)" "$root/bench/exporter/gap_flood.py" "$dsn" "$build/exporter/idemwatch-exporter" "$@"
