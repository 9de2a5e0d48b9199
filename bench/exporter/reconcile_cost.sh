#!/usr/bin/env bash
# What one reconciliation costs the exporter as the day grows: at 10,000, 100,000 and 1,000,000
# charged business objects a day (bench/money/generate.sql, one day of records ending now, about
# 55% of them charged payments), under steady simulated traffic, side by side in one run:
#   - before: the whole-window statements the exporter ran at each reconciliation, median of RUNS
#     runs: the counts of idem.money_moved_without_success and idem.success_without_money_moved
#     over 24 h (the reconciliation collector), and idem.overcharged_objects grouped by biz type
#     and currency (the overcharges collector);
#   - after: both collectors as they are now, reading what each interval added: their
#     idempotency_exporter_collector_duration_seconds sampled after each reconciliation for
#     MEASURE_SECONDS (median and max), and the exporter's start (the open questions taken once
#     from the definitions);
#   - the answers: the exporter's gauges and the functions' counts, read together at the end.
# A private cluster with normal settings (fsync on), under /tmp, stopped on every exit.
#
#   bench/exporter/reconcile_cost.sh [BUILD_DIR]
#   env: SIZES (charged objects a day: "10000 100000 1000000"), MEASURE_SECONDS (60),
#        INTERVAL (reconcile interval, 5s), RUNS (3), TRAFFIC_RATE (operations/s, 12),
#        OUT (/tmp/idemwatch-bench-reconcile.txt)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build}
source "$root/scripts/lib/pg.sh"

SIZES=${SIZES:-"10000 100000 1000000"}
MEASURE_SECONDS=${MEASURE_SECONDS:-60}
INTERVAL=${INTERVAL:-5s}
RUNS=${RUNS:-3}
TRAFFIC_RATE=${TRAFFIC_RATE:-12}
OUT=${OUT:-/tmp/idemwatch-bench-reconcile.txt}
exporter=$build/exporter/idemwatch-exporter
idemctl=$build/tools/idemctl/idemctl
for bin in "$exporter" "$idemctl"; do
  [ -x "$bin" ] || { echo "missing $bin: build the exporter and idemctl first" >&2; exit 1; }
done

dir=$(mktemp -d /tmp/idemwatch-bench-reconcile-XXXXXX)
chmod 755 "$dir"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  pg_stop "$dir"
  rm -rf "$dir"
}
trap cleanup EXIT
pg_start "$dir"
: >"$OUT"
report() { echo "$*" | tee -a "$OUT"; }
report "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(free -g | awk '/Mem:/ {print $2}') GiB RAM; $(date -u +%Y-%m-%dT%H:%MZ); load $(cut -d' ' -f1-3 /proc/loadavg)"
report "PostgreSQL $(psql "$PG_DSN" -qAtc 'SHOW server_version'), fsync $(psql "$PG_DSN" -qAtc 'SHOW fsync'), shared_buffers $(psql "$PG_DSN" -qAtc 'SHOW shared_buffers')"

# The statement the exporter ran at each reconciliation before it kept the open questions.
whole_window() {
  psql "$db_dsn" -qAt -c "SET jit = off" -c "SET max_parallel_workers_per_gather = 0" -c '\timing on' -c "
SELECT (SELECT count(*) FROM idem.money_moved_without_success('{payment}', '24 hours', '5 minutes')),
       (SELECT count(*) FROM idem.success_without_money_moved('{payment}', '24 hours', '5 minutes'))" |
    awk '/^Time:/ {print $2}'
}
overcharges_window() {
  psql "$db_dsn" -qAt -c "SET jit = off" -c "SET max_parallel_workers_per_gather = 0" -c '\timing on' -c "
SELECT biz_type, currency, count(DISTINCT biz_id)::float8, sum(owed_minor)::float8
  FROM idem.overcharged_objects('{payment}', '24 hours')
 GROUP BY GROUPING SETS ((biz_type, currency), (biz_type))" |
    awk '/^Time:/ {print $2}'
}
gauge() {  # NAME_AND_LABELS: its value in the exporter's /metrics
  curl -s "http://127.0.0.1:$port/metrics" | awk -v k="$1" 'index($0, k " ") == 1 {print $2}'
}
median() { sort -n | awk '{a[NR]=$1} END {if (NR) printf "%.2f", a[int((NR+1)/2)]}'; }

for size in $SIZES; do
  db=reconcile_$size
  db_dsn="host=$PG_SOCKDIR port=$PG_PORT user=postgres dbname=$db"
  psql "$PG_DSN" -qc "DROP DATABASE IF EXISTS $db WITH (FORCE)" -c "CREATE DATABASE $db"
  "$idemctl" migrate --db.dsn "$db_dsn" >/dev/null
  records=$(( size * 100 / 55 ))
  start=$(date +%s)
  psql "$db_dsn" -q -v n="$records" -v per_day="$records" -f "$root/bench/money/generate.sql" >/dev/null
  psql "$db_dsn" -qc "VACUUM ANALYZE"
  charged=$(psql "$db_dsn" -qAtc "SELECT count(DISTINCT biz_id) FROM idem.fund_flows WHERE biz_type = 'payment' AND kind IN ('DEBIT', 'CAPTURE') AND created_at >= now() - interval '24 hours'")
  report "size $size: $records records, $charged charged payments in the last 24 h, generated in $(( $(date +%s) - start )) s"

  "$idemctl" simulate --db.dsn "$db_dsn" --requests 0 --rate "$TRAFFIC_RATE" --agents 2 --quiet \
    --run-id "reconcile$size" --double-charge-rate 0.01 >"$dir/traffic-$size.log" 2>&1 &
  traffic=$!
  pids+=("$traffic")
  sleep 5

  before=$(for _ in $(seq "$RUNS"); do whole_window; done | median)
  obefore=$(for _ in $(seq "$RUNS"); do overcharges_window; done | median)
  report "size $size before: the whole-window statements, median of $RUNS: reconciliation $before ms, overcharges $obefore ms"

  port=$(pg_free_port)
  t0=$(date +%s%N)
  "$exporter" --db.dsn "$db_dsn" --web.listen-address "127.0.0.1:$port" \
    --reconcile-interval "$INTERVAL" >"$dir/exporter-$size.log" 2>&1 &
  pid=$!
  pids+=("$pid")
  until [ -n "$(gauge 'idempotency_exporter_last_reconcile_success_timestamp_seconds' 2>/dev/null | grep -v '^0$')" ]; do
    sleep 0.05
  done
  start_ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  key='idempotency_exporter_collector_duration_seconds{collector="reconciliation"}'
  okey='idempotency_exporter_collector_duration_seconds{collector="overcharges"}'
  samples=()
  osamples=()
  last=$(gauge 'idempotency_exporter_last_reconcile_success_timestamp_seconds')
  deadline=$(( $(date +%s) + MEASURE_SECONDS ))
  while [ "$(date +%s)" -lt "$deadline" ]; do
    now=$(gauge 'idempotency_exporter_last_reconcile_success_timestamp_seconds')
    if [ "$now" != "$last" ]; then
      samples+=("$(awk -v s="$(gauge "$key")" 'BEGIN {printf "%.2f", s * 1000}')")
      osamples+=("$(awk -v s="$(gauge "$okey")" 'BEGIN {printf "%.2f", s * 1000}')")
      last=$now
    fi
    sleep 0.2
  done
  after=$(printf '%s\n' "${samples[@]}" | median)
  worst=$(printf '%s\n' "${samples[@]}" | sort -n | tail -1)
  report "size $size after: start ${start_ms} ms; ${#samples[@]} reconciliations, median $after ms, max $worst ms; overcharges: median $(printf '%s\n' "${osamples[@]}" | median) ms, max $(printf '%s\n' "${osamples[@]}" | sort -n | tail -1) ms"
  kill "$traffic"; wait "$traffic" 2>/dev/null || true
  sleep $(( 2 * ${INTERVAL%s} + 1 ))  # two reconciliations on a still database (INTERVAL in seconds)
  report "size $size answers: exporter $(gauge 'idempotency_reconciliation_mismatches{kind="debit_without_success"}') / $(gauge 'idempotency_reconciliation_mismatches{kind="success_without_debit"}'), functions $(psql "$db_dsn" -qAt -F' / ' -c "SELECT (SELECT count(*) FROM idem.money_moved_without_success('{payment}', '24 hours', '5 minutes')), (SELECT count(*) FROM idem.success_without_money_moved('{payment}', '24 hours', '5 minutes'))"); overcharged objects: exporter $(gauge 'idempotency_overcharged_business_objects{biz_type="payment"}'), function $(psql "$db_dsn" -qAtc "SELECT count(DISTINCT biz_id) FROM idem.overcharged_objects('{payment}', '24 hours')"); peak RSS $(awk '/VmHWM/ {printf "%.1f", $2/1024}' "/proc/$pid/status") MiB"
  kill "$pid"; wait "$pid" 2>/dev/null || true
  psql "$PG_DSN" -qc "DROP DATABASE $db WITH (FORCE)"
done
