#!/usr/bin/env bash
# What schema contract v3's trust model costs on the write path, against version 2 in the same run:
# two databases of one private cluster (PostgreSQL's default settings, fsync on), one migrated up
# to 013 (version 2), one to the latest, driven by pgbench in interleaved rounds.
#   claim+report  begin, the claimant's own flow (v3: with its claim token; v2: any writer), complete
#   gateway line  one line of the gateway's ledger (the same call in both; v3 touches its object's
#                 row of idem.ledger_objects)
#   claim         begin + complete alone
# Prints operations per second and the server's CPU per operation (utime + stime of the backends).
#
#   bench/protocol/trust_cost.sh [BUILD_DIR]     env: SECONDS_EACH (10), REPEAT (3), CLIENTS ("1 4")
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build}
source "$root/scripts/lib/pg.sh"
SECONDS_EACH=${SECONDS_EACH:-10}
REPEAT=${REPEAT:-3}
CLIENTS=${CLIENTS:-"1 4"}
pg_scratch trust-cost
dir=$SCRATCH_DIR
pg_migrated_database v2 "$build/tools/idemctl/idemctl" --up-to 13 >/dev/null
pg_migrated_database v3 "$build/tools/idemctl/idemctl" >/dev/null

key="'k-' || :client_id || '-' || :n"
object="'o-' || :client_id || '-' || :n"
for v in v2 v3; do
  token=''
  [ "$v" = v3 ] && token=", ':tok'"
  cat >"$dir/claim_report_$v.sql" <<SQL
\set n random(1, 2000000000)
SELECT claim_token AS tok FROM idem.begin($key, 'payment', $object, 'pay', NULL, 'initial', '{"amount_minor": 100}') \gset
SELECT * FROM idem.record_fund_flow('payment', $object, 'DEBIT', 100, 'CNY', 'gw-' || :client_id || '-' || :n, $key$token);
SELECT * FROM idem.complete($key, 1, '{}', ':tok');
SQL
  cat >"$dir/gateway_line_$v.sql" <<SQL
\set n random(1, 2000000000)
SELECT * FROM idem.record_fund_flow('payment', $object, 'DEBIT', 100, 'CNY', 'gl-' || :client_id || '-' || :n, NULL);
SQL
  cat >"$dir/claim_$v.sql" <<SQL
\set n random(1, 2000000000)
SELECT claim_token AS tok FROM idem.begin('c' || $key, 'payment', 'c' || $object, 'pay', NULL, 'initial', '{"amount_minor": 100}') \gset
SELECT * FROM idem.complete('c' || $key, 1, '{}', ':tok');
SQL
done

server_cpu_ticks() {  # the backends of database $1: utime + stime, in clock ticks
  local total=0 pid
  for pid in $(pgrep -u postgres -f "postgres: .* $1 " || true); do
    total=$((total + $(awk '{print $14 + $15}' "/proc/$pid/stat" 2>/dev/null || echo 0)))
  done
  echo "$total"
}
hz=$(getconf CLK_TCK)
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); $(date -u +%FT%TZ); PostgreSQL $(psql "$PG_DSN" -Atc 'SHOW server_version'), fsync $(psql "$PG_DSN" -Atc 'SHOW fsync')"
printf '%-13s %-6s %-8s %4s %10s %14s\n' workload schema clients run "ops/s" "server µs/op"
for round in $(seq "$REPEAT"); do
  for workload in claim_report gateway_line claim; do
    for c in $CLIENTS; do
      for v in v2 v3; do
        out=$(pg_as_owner pgbench -n -h "$PG_SOCKDIR" -p "$PG_PORT" -U postgres -c "$c" -j "$c" \
                -T "$SECONDS_EACH" -f "$dir/${workload}_$v.sql" "$v" 2>&1 &
              sleep 1; before=$(server_cpu_ticks "$v"); sleep $((SECONDS_EACH - 2)); after=$(server_cpu_ticks "$v")
              echo "cpu $before $after"; wait)
        tps=$(echo "$out" | awk '/^tps/ {print $3; exit}')
        [ -n "$tps" ] || { echo "pgbench failed: $out" >&2; exit 1; }
        read -r _ before after < <(echo "$out" | grep '^cpu')
        cpu_us=$(awk -v t="$tps" -v b="$before" -v a="$after" -v hz="$hz" -v s="$((SECONDS_EACH - 2))" \
                 'BEGIN { if (t > 0) printf "%.0f", (a - b) / hz * 1e6 / (t * s); else print "n/a" }')
        printf '%-13s %-6s %-8s %4s %10.0f %14s\n' "$workload" "$v" "$c" "$round" "$tps" "$cpu_us"
      done
    done
  done
done
