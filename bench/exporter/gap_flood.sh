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
dir=$(mktemp -d /tmp/idemwatch-gap-flood-XXXXXX)
chmod 755 "$dir"
trap 'pg_stop "$dir"; rm -rf "$dir"' EXIT
pg_start "$dir"
psql "$PG_DSN" -qc "CREATE DATABASE flood"
dsn="${PG_DSN/dbname=postgres/dbname=flood}"
"$build/tools/idemctl/idemctl" migrate --db.dsn="$dsn" >/dev/null
"$(psycopg_python)" "$root/bench/exporter/gap_flood.py" "$dsn" "$build/exporter/idemwatch-exporter" "$@"
