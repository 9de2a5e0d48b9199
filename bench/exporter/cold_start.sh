#!/usr/bin/env bash
# The exporter's start on a cold cache: an exporter restarted on a server whose memory holds other
# things reads what its start needs from disk. One private cluster (fsync on), one database of
# SIZE attempt rows generated as bench/exporter/run.sh generates them; then for each round and each
# binary: PostgreSQL stopped, the kernel's page cache dropped (root only: without it the figure is
# PostgreSQL's own cache cold only, and the script says so), PostgreSQL started, and the time from
# launching the exporter to its first complete collection, with the database's execution and
# planning time of its statements (pg_stat_statements, planning tracked) and the three that took
# longest.
#
#   bench/exporter/cold_start.sh [BUILD_DIR]
#   env: SIZE (3000000), PER_DAY (10000: 300 days at the default size), ROUNDS (2),
#        EXPORTER_BEFORE (an earlier build's binary, measured in turn with this one)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build}
# shellcheck source-path=SCRIPTDIR source=../../scripts/lib/pg.sh disable=SC1091
source "$root/scripts/lib/pg.sh"

SIZE=${SIZE:-3000000}
PER_DAY=${PER_DAY:-10000}
ROUNDS=${ROUNDS:-2}
binaries=("$build/exporter/idemwatch-exporter")
[ -n "${EXPORTER_BEFORE:-}" ] && binaries=("$EXPORTER_BEFORE" "${binaries[@]}")
idemctl=$build/tools/idemctl/idemctl
for bin in "${binaries[@]}" "$idemctl"; do
  [ -x "$bin" ] || { echo "missing $bin: build the exporter and idemctl first" >&2; exit 1; }
done

pg_scratch exporter-cold
dir=$SCRATCH_DIR
db=cold
dsn=$(pg_migrated_database "$db" "$idemctl")
psql "$dsn" -qc "CREATE EXTENSION pg_stat_statements" \
  -c "CREATE ROLE bench_cold LOGIN" -c "GRANT idem_reader TO bench_cold" \
  -c "ALTER ROLE bench_cold SET pg_stat_statements.track_planning = on"
echo "generating $SIZE attempt rows, $PER_DAY a day ..."
psql "$dsn" -q -v attempts="$SIZE" -v per_day="$PER_DAY" -f "$root/bench/exporter/generate.sql" >/dev/null
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //');" \
  "$(date -u +%FT%TZ); PostgreSQL $(psql "$dsn" -qAtc 'SHOW server_version');" \
  "database $(psql "$dsn" -qAtc "SELECT pg_size_pretty(pg_database_size('$db'))")"

can_drop=0
if [ -w /proc/sys/vm/drop_caches ]; then can_drop=1; else
  echo "cannot drop the page cache (not root): PostgreSQL's own cache only is cold"
fi

cold_start() {  # BINARY: prints one line of figures
  local binary=$1 port t0 pid ms
  pg_stop "$dir"
  sync
  if [ "$can_drop" = 1 ]; then echo 3 >/proc/sys/vm/drop_caches; fi
  pg_start "$dir"
  dsn="${PG_DSN/dbname=postgres/dbname=$db}"
  psql "$dsn" -qAtc "SELECT pg_stat_statements_reset()" >/dev/null
  port=$(pg_free_port)
  t0=$(date +%s%N)
  "$binary" --db.dsn "host=$PG_SOCKDIR port=$PG_PORT user=bench_cold dbname=$db" \
    --web.listen-address "127.0.0.1:$port" >"$dir/exporter-$port.log" 2>&1 &
  pid=$!
  until curl -s "http://127.0.0.1:$port/metrics" 2>/dev/null |
      grep -q '^idempotency_exporter_last_collect_success_timestamp_seconds [1-9]'; do
    kill -0 "$pid" 2>/dev/null || { cat "$dir/exporter-$port.log" >&2; return 1; }
    sleep 0.01
  done
  ms=$((($(date +%s%N) - t0) / 1000000))
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  echo "$binary: start $ms ms; $(psql "$dsn" -qAt -F' ' -c "
    SELECT 'database ' || round(sum(total_exec_time)::numeric) || ' ms executing, '
           || round(sum(total_plan_time)::numeric) || ' ms planning'
      FROM pg_stat_statements AS s JOIN pg_roles AS r ON r.oid = s.userid
     WHERE r.rolname = 'bench_cold'")"
  psql "$dsn" -qAt -F' | ' -c "
    SELECT '    ' || round(total_exec_time::numeric) || ' + ' || round(total_plan_time::numeric)
           || ' ms', calls, regexp_replace(left(query, 80), '\s+', ' ', 'g')
      FROM pg_stat_statements AS s JOIN pg_roles AS r ON r.oid = s.userid
     WHERE r.rolname = 'bench_cold'
     ORDER BY total_exec_time + total_plan_time DESC LIMIT 3"
}

for round in $(seq "$ROUNDS"); do
  echo "round $round"
  for binary in "${binaries[@]}"; do cold_start "$binary"; done
done
