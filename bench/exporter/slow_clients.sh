#!/usr/bin/env bash
# The exporter's web door under hostile clients (bench/exporter/slow_clients.py): an authorised
# scrape's p50/p99 with 0, 300 and 1,000 connections held open that never finish their TLS
# handshake or request head, beside anonymous clients, on a private cluster.
#   bench/exporter/slow_clients.sh [BUILD_DIR] [slow_clients.py flags]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build}
shift $(($# > 0 ? 1 : 0))
source "$root/scripts/lib/pg.sh"
source "$root/scripts/lib/python.sh"
ulimit -n 65536 2>/dev/null || ulimit -n 8192
pg_scratch door-bench
dsn=$(pg_migrated_database door "$build/tools/idemctl/idemctl")
"$(psycopg_python)" "$root/bench/exporter/slow_clients.py" "$build/exporter/idemwatch-exporter" "$dsn" "$@"
