#!/usr/bin/env bash
# The protocol benchmark on a fresh cluster with PostgreSQL's default settings (fsync on).
#   bench/protocol/run.sh [--seconds N] [--repeat N] [--threads 1,2,8]
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
psql "$PG_DSN" -qc "CREATE DATABASE bench"
"$build_dir/tools/idemctl/idemctl" migrate --db.dsn "$PG_DSN dbname=bench" >/dev/null
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(free -g | awk '/Mem:/ {print $2}') GiB; $(date -u +%F); PostgreSQL $(psql "$PG_DSN" -Atc 'SHOW server_version')"
"$build_dir/bench/protocol/bench_protocol" --db.dsn "$PG_DSN dbname=bench" "$@"
