#!/usr/bin/env bash
# The protocol benchmark on a fresh cluster with PostgreSQL's default settings (fsync on).
#   bench/protocol/run.sh [--seconds N] [--repeat N] [--threads 1,2,8] [--floor] [--v1.prepared]
# (--floor: also the rows a round trip writes, by hand, on their keys alone and on all the
# shipped tables' indexes: the least any design keeping those rows costs)
# Besides the schema as shipped (database bench) it measures schema version 1 (database bench_v1,
# migrations 001..005 only) in the same run, so that v2's cost is read against v1 directly.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
source "$root/scripts/lib/common.sh"
source "$root/scripts/lib/pg.sh"
build_dir=${IDEMWATCH_BUILD_DIR:-$root/build}
install_packages
build_tree "$build_dir"
dir=$(mktemp -d /tmp/idemwatch-bench-pg.XXXXXX)
trap 'pg_stop "$dir"; rm -rf "$dir"' EXIT
pg_start "$dir"
psql "$PG_DSN" -qc "CREATE DATABASE bench" -c "CREATE DATABASE bench_v1"
"$build_dir/tools/idemctl/idemctl" migrate --db.dsn "$PG_DSN dbname=bench" >/dev/null
mkdir "$dir/sql_v1" && cp "$root"/sql/migrations/00[1-5]_*.sql "$dir/sql_v1/"
"$build_dir/tools/idemctl/idemctl" migrate --sql-dir "$dir/sql_v1" --db.dsn "$PG_DSN dbname=bench_v1" >/dev/null
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(free -g | awk '/Mem:/ {print $2}') GiB; $(date -u +%F); PostgreSQL $(psql "$PG_DSN" -Atc 'SHOW server_version')"
"$build_dir/bench/protocol/bench_protocol" --db.dsn "$PG_DSN dbname=bench" --v1.dsn "$PG_DSN dbname=bench_v1" "$@"
