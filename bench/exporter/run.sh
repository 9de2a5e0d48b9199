#!/usr/bin/env bash
# The exporter benchmark: idemwatch-exporter against the generic SQL exporters a user would
# otherwise pick (Debian's prometheus-sql-exporter 0.4.5 and prometheus-postgres-exporter 0.11.1
# with --extend.query-path), on the same database, with 1M and 10M attempt rows and steady
# simulated traffic. For each exporter and size it measures:
#   - database time per collection: pg_stat_statements' total_exec_time of the exporter's own
#     login role, divided by its collections, over a steady window (reset before it);
#   - /metrics latency: median and p99 of $SCRAPES sequential scrapes;
#   - peak memory: VmHWM of the process at the end;
#   - for idemwatch, the start: launch to the first complete collection.
# With STANDBY=1, idemwatch is also measured against a streaming hot standby of the same cluster
# (pg_basebackup -R -X stream; its own pg_stat_statements), and with EXPORTER_BEFORE=BINARY the
# same runs are made with that binary too (an earlier build), for before/after figures.
# A private cluster with normal settings (fsync on), under /tmp, stopped on every exit.
#
#   bench/exporter/run.sh [BUILD_DIR]
#   env: SIZES ("1000000 10000000"), EXPORTERS ("idemwatch sqlexp pgexp"), SCRAPES (200), MEASURE_SECONDS (120), PER_DAY (100000),
#        TRAFFIC_RATE (20 operations/s), OUT (a results file, default /tmp/idemwatch-bench-exporter.txt),
#        STANDBY (0), EXPORTER_BEFORE (none), IDEMCTL (BUILD_DIR/tools/idemctl/idemctl)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build}
here=$root/bench/exporter
source "$root/scripts/lib/pg.sh"

SIZES=${SIZES:-"1000000 10000000"}
SCRAPES=${SCRAPES:-200}
EXPORTERS=${EXPORTERS:-"idemwatch sqlexp pgexp"}
MEASURE_SECONDS=${MEASURE_SECONDS:-120}
PER_DAY=${PER_DAY:-100000}
TRAFFIC_RATE=${TRAFFIC_RATE:-20}
OUT=${OUT:-/tmp/idemwatch-bench-exporter.txt}
exporter=$build/exporter/idemwatch-exporter
idemctl=${IDEMCTL:-$build/tools/idemctl/idemctl}
STANDBY=${STANDBY:-0}
EXPORTER_BEFORE=${EXPORTER_BEFORE:-}
for bin in "$exporter" "$idemctl" ${EXPORTER_BEFORE:+"$EXPORTER_BEFORE"}; do
  [ -x "$bin" ] || { echo "missing $bin: build the exporter and idemctl first" >&2; exit 1; }
done

if ! command -v prometheus-sql-exporter >/dev/null || ! command -v prometheus-postgres-exporter >/dev/null; then
  echo "installing the peers (Debian packages)"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq prometheus-sql-exporter prometheus-postgres-exporter >/dev/null
fi

dir=$(mktemp -d /tmp/idemwatch-bench-exporter-XXXXXX)
chmod 755 "$dir"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  pg_stop "$dir/standby"
  pg_stop "$dir"
  rm -rf "$dir"
}
trap cleanup EXIT
pg_start "$dir"
echo "cluster in $dir, port $PG_PORT"
if [ "$STANDBY" = 1 ]; then
  # The standby streams everything from here on, the generated rows included.
  mkdir -p "$dir/standby/sock"
  chown -R postgres: "$dir/standby" 2>/dev/null || true
  pg_as_owner "$PG_BIN/pg_basebackup" -h 127.0.0.1 -p "$PG_PORT" -U postgres -D "$dir/standby/data" -R -X stream -c fast
  STANDBY_PORT=$(pg_free_port)
  pg_as_owner "$PG_BIN/pg_ctl" -D "$dir/standby/data" -l "$dir/standby/postgres.log" -w -t 60 start \
    -o "-p $STANDBY_PORT -k $dir/standby/sock -c listen_addresses=127.0.0.1 -c max_connections=200 \
        -c shared_preload_libraries=pg_stat_statements -c hot_standby=on ${PG_EXTRA_OPTS:-}" >/dev/null
  echo "standby in $dir/standby, port $STANDBY_PORT"
fi
: >"$OUT"
report() { echo "$*" | tee -a "$OUT"; }

report "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(free -g | awk '/Mem:/ {print $2}') GiB RAM; $(date -u +%Y-%m-%dT%H:%MZ)"
report "PostgreSQL $(psql "$PG_DSN" -qAtc 'SHOW server_version'), fsync $(psql "$PG_DSN" -qAtc 'SHOW fsync'), shared_buffers $(psql "$PG_DSN" -qAtc 'SHOW shared_buffers')"
report "$(prometheus-sql-exporter -version 2>&1 | head -1); $(prometheus-postgres-exporter --version 2>&1 | head -1)"

free_port() { pg_free_port; }
scrape_latency() {  # URL -> "median_ms p99_ms"
  local url=$1 i
  for i in $(seq "$SCRAPES"); do curl -s -o /dev/null -w '%{time_total}\n' "$url"; done |
    sort -n | awk '{a[NR]=$1} END {printf "%.2f %.2f", a[int((NR+1)/2)]*1000, a[int(NR*0.99+0.999)]*1000}'
}
peak_rss_mib() { awk '/VmHWM/ {printf "%.1f", $2/1024}' "/proc/$1/status"; }
# stat ROLE SIGNATURE [DSN]: "total_ms collections" of ROLE's statements since the last reset;
# collections = calls of the statement matching SIGNATURE (it runs once per collection).
stat() {
  psql "${3:-$db_dsn}" -qAt -F' ' -v role="$1" -v sig="$2" <<'SQL'
SELECT round(coalesce(sum(total_exec_time), 0)::numeric, 2),
       coalesce(max(calls) FILTER (WHERE query LIKE :'sig'), 0)
  FROM pg_stat_statements s JOIN pg_roles r ON r.oid = s.userid
 WHERE r.rolname = :'role' AND s.dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
SQL
}
reset_stats() { psql "${1:-$db_dsn}" -qAtc "SELECT pg_stat_statements_reset()" >/dev/null; }
wait_http() { for _ in $(seq 300); do curl -s -o /dev/null "$1" && return 0; sleep 0.1; done; return 1; }

# measure_idemwatch LABEL BINARY SOCKDIR PORT STATS_DSN: one idemwatch run against the server at
# SOCKDIR:PORT, its statements counted in that server's pg_stat_statements.
measure_idemwatch() {
  local label=$1 binary=$2 sockdir=$3 server_port=$4 stats_dsn=$5 port t0 pid start_ms start_db total calls lat
  port=$(free_port)
  t0=$(date +%s%N)
  "$binary" --db.dsn "host=$sockdir port=$server_port user=bench_idemwatch dbname=$db" \
    --web.listen-address "127.0.0.1:$port" >"$dir/idemwatch-$size-$port.log" 2>&1 &
  pid=$!
  pids+=("$pid")
  until curl -s "http://127.0.0.1:$port/metrics" 2>/dev/null |
      grep -q '^idempotency_exporter_last_collect_success_timestamp_seconds [1-9]'; do
    sleep 0.01
  done
  start_ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  read -r start_db _ <<<"$(stat bench_idemwatch '%GROUP BY biz_type, status%' "$stats_dsn")"
  reset_stats "$stats_dsn"
  sleep "$MEASURE_SECONDS"
  read -r total calls <<<"$(stat bench_idemwatch '%GROUP BY biz_type, status%' "$stats_dsn")"
  lat=$(scrape_latency "http://127.0.0.1:$port/metrics")
  report "size $size $label: start ${start_ms} ms (database ${start_db} ms); $calls collections, database $total ms, per collection $(awk -v t="$total" -v c="$calls" 'BEGIN {printf "%.2f", t / c}') ms; scrape median/p99 ${lat/ /\/} ms; peak RSS $(peak_rss_mib $pid) MiB"
  psql "$stats_dsn" -qAt -F' | ' -c "SELECT round(total_exec_time::numeric, 2), calls, regexp_replace(left(query, 90), '\s+', ' ', 'g') FROM pg_stat_statements s JOIN pg_roles r ON r.oid = s.userid WHERE r.rolname = 'bench_idemwatch' ORDER BY total_exec_time DESC LIMIT 6" | tee -a "$OUT"
  kill "$pid"; wait "$pid" 2>/dev/null || true
}

for size in $SIZES; do
  db=bench_$size
  db_dsn="host=$PG_SOCKDIR port=$PG_PORT user=postgres dbname=$db"
  psql "$PG_DSN" -qc "DROP DATABASE IF EXISTS $db WITH (FORCE)" -c "CREATE DATABASE $db"
  psql "$db_dsn" -qc "CREATE EXTENSION pg_stat_statements"
  "$idemctl" migrate --db.dsn "$db_dsn" >/dev/null
  echo "generating $size attempt rows ..."
  start=$(date +%s)
  psql "$db_dsn" -q -v attempts="$size" -v per_day="$PER_DAY" -f "$here/generate.sql" | tee -a "$OUT"
  report "size $size: generated in $(( $(date +%s) - start )) s; table sizes (a partitioned table's partitions together): $(psql "$db_dsn" -qAtc "SELECT string_agg(name || ' ' || pg_size_pretty(bytes) || CASE WHEN parts > 1 THEN ' in ' || parts || ' partitions' ELSE '' END, ', ' ORDER BY name) FROM (SELECT coalesce(pg_partition_root(c.oid), c.oid)::regclass::text AS name, sum(pg_total_relation_size(c.oid)) AS bytes, count(*) AS parts FROM pg_class AS c WHERE c.relnamespace = 'idem'::regnamespace AND c.relkind = 'r' GROUP BY 1) AS t")"
  for role in bench_idemwatch bench_sqlexp bench_pgexp; do
    psql "$db_dsn" -qc "DO \$\$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '$role') THEN CREATE ROLE $role LOGIN; END IF; END \$\$" -c "GRANT idem_reader TO $role"
  done

  "$idemctl" simulate --db.dsn "$db_dsn" --requests 0 --rate "$TRAFFIC_RATE" --agents 2 --quiet \
    --run-id "bench$size" --double-charge-rate 0.01 >"$dir/traffic-$size.log" 2>&1 &
  traffic=$!
  pids+=("$traffic")
  sleep 10

  # idemwatch-exporter: start time, then a steady window; on the primary, and on the standby.
  if [[ " $EXPORTERS " == *" idemwatch "* ]]; then
    for binary in "$exporter" $EXPORTER_BEFORE; do
      label=idemwatch
      [ "$binary" = "$exporter" ] || label="idemwatch (before: $binary)"
      measure_idemwatch "$label" "$binary" "$PG_SOCKDIR" "$PG_PORT" "$db_dsn"
      if [ "$STANDBY" = 1 ]; then
        standby_dsn="host=$dir/standby/sock port=$STANDBY_PORT user=postgres dbname=$db"
        until [ "$(psql "$standby_dsn" -qAtc "SELECT pg_last_wal_replay_lsn() >= '$(psql "$db_dsn" -qAtc 'SELECT pg_current_wal_lsn()')'")" = t ]; do sleep 0.2; done
        measure_idemwatch "$label on the standby" "$binary" "$dir/standby/sock" "$STANDBY_PORT" "$standby_dsn"
      fi
    done
  fi

  # prometheus-sql-exporter: collects on its own interval (15 s), scrapes answer from its cache.
  if [[ " $EXPORTERS " == *" sqlexp "* ]]; then
  port=$(free_port)
  sed "s|@DSN@|postgres://bench_sqlexp@127.0.0.1:$PG_PORT/$db?sslmode=disable|" "$here/sql_exporter.yml.in" >"$dir/sql_exporter.yml"
  reset_stats
  prometheus-sql-exporter -config.file "$dir/sql_exporter.yml" -web.listen-address "127.0.0.1:$port" >"$dir/sqlexp-$size.log" 2>&1 &
  pid=$!
  pids+=("$pid")
  wait_http "http://127.0.0.1:$port/metrics"
  sleep "$MEASURE_SECONDS"
  read -r total calls <<<"$(stat bench_sqlexp '%FROM idem.attempts GROUP BY%')"
  lat=$(scrape_latency "http://127.0.0.1:$port/metrics")
  report "size $size sql-exporter: $calls collections, database $total ms, per collection $(awk -v t="$total" -v c="$calls" 'BEGIN {if (c > 0) printf "%.2f", t / c; else print "n/a"}') ms; scrape median/p99 ${lat/ /\/} ms; peak RSS $(peak_rss_mib $pid) MiB"
  kill "$pid"; wait "$pid" 2>/dev/null || true
  fi

  # prometheus-postgres-exporter: every scrape runs the queries.
  if [[ " $EXPORTERS " == *" pgexp "* ]]; then
  port=$(free_port)
  reset_stats
  DATA_SOURCE_NAME="postgresql://bench_pgexp@127.0.0.1:$PG_PORT/$db?sslmode=disable" \
    prometheus-postgres-exporter --web.listen-address "127.0.0.1:$port" --extend.query-path "$here/peer_queries.yaml" \
    --disable-default-metrics --disable-settings-metrics >"$dir/pgexp-$size.log" 2>&1 &
  pid=$!
  pids+=("$pid")
  wait_http "http://127.0.0.1:$port/metrics"
  lat=$(scrape_latency "http://127.0.0.1:$port/metrics")
  read -r total calls <<<"$(stat bench_pgexp '%FROM idem.attempts GROUP BY%')"
  report "size $size postgres-exporter: $calls collections, database $total ms, per collection $(awk -v t="$total" -v c="$calls" 'BEGIN {if (c > 0) printf "%.2f", t / c; else print "n/a"}') ms; scrape median/p99 ${lat/ /\/} ms; peak RSS $(peak_rss_mib $pid) MiB"
  kill "$pid"; wait "$pid" 2>/dev/null || true
  fi

  kill "$traffic"; wait "$traffic" 2>/dev/null || true
done
echo "results in $OUT"
