#!/usr/bin/env bash
# The write cost of the ledger's fund-flow triggers: idem.record_fund_flow through pgbench, one flow
# a call, interleaved on a fresh database of a private cluster, with
#   statement  the triggers as shipped (statement-level: one upsert a business object a statement);
#   row        the row-level triggers they replaced (bench/money/row_triggers.sql);
#   without    the charge count (fund_flows_count_charges) disabled.
# Prints flows per second and the server's CPU per flow (utime + stime of the backends, /proc).
#
#   bench/money/flow_cost.sh [BUILD_DIR]
#   env: SECONDS_EACH (10), REPEAT (3), CLIENTS ("1 4"), VARIANTS ("statement row without")
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build}
source "$root/scripts/lib/pg.sh"
SECONDS_EACH=${SECONDS_EACH:-10}
REPEAT=${REPEAT:-3}
CLIENTS=${CLIENTS:-"1 4"}
VARIANTS=${VARIANTS:-"statement row without"}
pg_scratch flow-cost
dir=$SCRATCH_DIR
dsn=$(pg_migrated_database flows "$build/tools/idemctl/idemctl")
# Random business objects (a few repeat, as duplicates do), a fresh gateway reference each time.
cat >"$dir/flow.sql" <<'SQL'
\set n random(1, 50000000)
\set r random(1, 2000000000)
SELECT * FROM idem.record_fund_flow('payment', 'o-' || :n, 'DEBIT', 100, 'CNY', 'gw-' || :client_id || '-' || :r || '-' || :n, NULL);
SQL
server_cpu_ticks() {  # all backends' utime + stime, in clock ticks
  local total=0 pid
  for pid in $(pgrep -u postgres -f "postgres: .*flows" || true); do
    total=$((total + $(awk '{print $14 + $15}' "/proc/$pid/stat" 2>/dev/null || echo 0)))
  done
  echo "$total"
}
hz=$(getconf CLK_TCK)
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); $(date -u +%FT%TZ)"
printf '%-8s %-8s %4s %12s %16s\n' variant clients run "flows/s" "server CPU µs/flow"
for round in $(seq "$REPEAT"); do
  for variant in $VARIANTS; do
    if [ "$variant" = row ]; then
      psql "$dsn" -q -f "$root/bench/money/row_triggers.sql"
    else
      psql "$dsn" -q -f "$root/sql/objects/triggers/fund_flows_count_charges.sql" \
        -f "$root/sql/objects/triggers/fund_flows_touch_object.sql"
    fi
    if [ "$variant" = without ]; then
      psql "$dsn" -qc "ALTER TABLE idem.fund_flows DISABLE TRIGGER fund_flows_count_charges"
    else
      psql "$dsn" -qc "ALTER TABLE idem.fund_flows ENABLE TRIGGER fund_flows_count_charges"
    fi
    for c in $CLIENTS; do
      out=$(pg_as_owner pgbench -n -h "$PG_SOCKDIR" -p "$PG_PORT" -U postgres -c "$c" -j "$c" \
              -T "$SECONDS_EACH" -f "$dir/flow.sql" flows 2>&1 &
            sleep 1; before=$(server_cpu_ticks); sleep $((SECONDS_EACH - 2)); after=$(server_cpu_ticks)
            echo "cpu $before $after"; wait)
      tps=$(echo "$out" | awk '/^tps/ {print $3; exit}')
      [ -n "$tps" ] || { echo "pgbench failed: $out" >&2; exit 1; }
      read -r _ before after < <(echo "$out" | grep '^cpu')
      cpu_us=$(awk -v t="$tps" -v b="$before" -v a="$after" -v hz="$hz" -v s="$((SECONDS_EACH - 2))" \
               'BEGIN { if (t > 0) printf "%.0f", (a - b) / hz * 1e6 / (t * s); else print "n/a" }')
      printf '%-8s %-8s %4s %12.0f %16s\n' "$variant" "$c" "$round" "$tps" "$cpu_us"
    done
  done
done
psql "$dsn" -qc "ALTER TABLE idem.fund_flows ENABLE TRIGGER fund_flows_count_charges"
psql "$dsn" -Atc "SELECT 'flows ' || count(*) FROM idem.fund_flows"
