#!/usr/bin/env bash
# The biz_type bound: scrape size, series count and exporter memory as the
# number of distinct biz types grows, with the bound (--max-biz-types, default 100) and, for
# contrast, with the bound lifted out of the way (--max-biz-types 100000, what an unbounded
# exporter would do). Each biz type is as wide as the v2 schema allows (64 characters), each
# has one claim and every tenth a DEBIT, written before the exporter starts (so they name labels
# but are not counted: counters start at the exporter's start). A private cluster under /tmp, stopped on every exit.
#
#   bench/exporter/cardinality.sh [BUILD_DIR]
#   env: COUNTS ("0 100 1000 5000"), OUT (default /tmp/idemwatch-bench-cardinality.txt)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build}
source "$root/scripts/lib/pg.sh"

COUNTS=${COUNTS:-"0 100 1000 5000"}
OUT=${OUT:-/tmp/idemwatch-bench-cardinality.txt}
exporter=$build/exporter/idemwatch-exporter
idemctl=$build/tools/idemctl/idemctl
for bin in "$exporter" "$idemctl"; do
  [ -x "$bin" ] || { echo "missing $bin: build the exporter and idemctl first" >&2; exit 1; }
done

dir=$(mktemp -d /tmp/idemwatch-bench-cardinality-XXXXXX)
chmod 755 "$dir"
pid=
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  pg_stop "$dir"
  rm -rf "$dir"
}
trap cleanup EXIT
pg_start "$dir"
: >"$OUT"
report() { echo "$*" | tee -a "$OUT"; }
report "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(free -g | awk '/Mem:/ {print $2}') GiB RAM; $(date -u +%Y-%m-%dT%H:%MZ)"

collected() {  # URL: has a collection completed?
  curl -s "$1" 2>/dev/null | grep -q '^idempotency_exporter_last_collect_success_timestamp_seconds [1-9]'
}

for bound in 100 100000; do
  for count in $COUNTS; do
    db=card_${bound}_$count
    db_dsn="host=$PG_SOCKDIR port=$PG_PORT user=postgres dbname=$db"
    psql "$PG_DSN" -qc "DROP DATABASE IF EXISTS $db WITH (FORCE)" -c "CREATE DATABASE $db"
    "$idemctl" migrate --db.dsn "$db_dsn" >/dev/null
    psql "$db_dsn" -qAt >/dev/null <<SQL
SELECT idem.begin('k-' || i, 'biz.' || lpad(i::text, 60, '0'), 'o-' || i, 'pay', NULL,
                  'initial', '{}'::jsonb) FROM generate_series(1, $count) AS i;
SELECT idem.record_fund_flow('biz.' || lpad(i::text, 60, '0'), 'o-' || i, 'DEBIT', 100, 'CNY',
                             'gw-' || i) FROM generate_series(1, $count, 10) AS i;
SQL
    port=$(pg_free_port)
    "$exporter" --db.dsn "$db_dsn" --web.listen-address "127.0.0.1:$port" \
      --max-biz-types "$bound" >"$dir/exporter.log" 2>&1 &
    pid=$!
    url="http://127.0.0.1:$port/metrics"
    until collected "$url"; do sleep 0.1; done
    sleep 3  # a few more collections: every row read
    curl -s -o "$dir/scrape.txt" "$url"
    bytes=$(stat -c %s "$dir/scrape.txt")
    series=$(grep -vc '^#' "$dir/scrape.txt")
    rss=$(awk '/VmRSS/ {printf "%.1f", $2/1024}' "/proc/$pid/status")
    report "max-biz-types $bound, $count biz types: $series series, scrape $bytes bytes, RSS $rss MiB, $(grep -o 'biz_type="[^"]*"' "$dir/scrape.txt" | sort -u | wc -l) biz_type labels"
    kill "$pid"; wait "$pid" 2>/dev/null || true
    pid=
  done
done
echo "results in $OUT"
