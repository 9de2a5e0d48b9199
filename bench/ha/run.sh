#!/usr/bin/env bash
# The replicated cluster's figures (scripts/ha): the protocol's throughput with a synchronous
# standby against none, at 1 and 8 clients, interleaved in one run (pgbench: idem.begin then
# idem.complete of a fresh key, through HAProxy's read-write port); then claims under failover
# (bench/ha/failover_load.py), synchronous and asynchronous: kill to the first claim committed on
# the new leader, calls failed meanwhile, acknowledged claims lost.
#
#   bench/ha/run.sh [BUILD_DIR]
#   env: SECONDS_EACH (10), REPEAT (2), CLIENTS ("1 8"), FAILOVERS (3)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build}
# shellcheck source=../../scripts/lib/pg.sh
source "$root/scripts/lib/pg.sh"
# shellcheck source=../../scripts/lib/python.sh
source "$root/scripts/lib/python.sh"
SECONDS_EACH=${SECONDS_EACH:-10}
REPEAT=${REPEAT:-2}
CLIENTS=${CLIENTS:-"1 8"}
FAILOVERS=${FAILOVERS:-3}
export IDEMWATCH_HA_DIR
IDEMWATCH_HA_DIR=$(mktemp -d /tmp/idemwatch-bench-ha-XXXXXX)
rmdir "$IDEMWATCH_HA_DIR"
trap 'bash "$root/scripts/ha" down >/dev/null 2>&1 || true' EXIT
python=$(psycopg_python)

up() {  # up [--async]: a fresh cluster with a migrated database `bench`
  bash "$root/scripts/ha" down >/dev/null 2>&1 || true
  bash "$root/scripts/ha" up "$@" >/dev/null
  eval "$(bash "$root/scripts/ha" env)"
  psql "$HA_DSN" -qc "CREATE DATABASE bench"
  "$build/tools/idemctl/idemctl" migrate --db.dsn "${HA_DSN/dbname=postgres/dbname=bench}" >/dev/null
}

# synchronous_mode on or off, and wait until the leader's synchronous_standby_names says so.
set_mode() {
  patronictl -c "$IDEMWATCH_HA_DIR/n1.yml" edit-config --force -s "synchronous_mode=$1" >/dev/null
  local names
  for _ in $(seq 60); do
    names=$(psql "$HA_DSN" -XAtc "SHOW synchronous_standby_names")
    if [ "$1" = true ] && [ -n "$names" ]; then return 0; fi
    if [ "$1" = false ] && [ -z "$names" ]; then return 0; fi
    sleep 1
  done
  echo "synchronous_mode=$1 did not take effect (synchronous_standby_names '$names')" >&2
  return 1
}

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); $(date -u +%FT%TZ)"
up
echo "PostgreSQL $(psql "$HA_DSN" -XAtc 'SHOW server_version'), 3 nodes under Patroni $(patroni --version | cut -d' ' -f2), HAProxy in front; fsync $(psql "$HA_DSN" -XAtc 'SHOW fsync')"
work=$IDEMWATCH_HA_DIR
cat >"$work/claim.sql" <<'SQL'
\set n random(1, 2000000000)
SELECT claim_token AS tok FROM idem.begin('k-' || :client_id || '-' || :n, 'payment', 'o-' || :client_id || '-' || :n, 'pay', NULL, 'initial', '{"amount_minor": 100}') \gset
SELECT * FROM idem.complete('k-' || :client_id || '-' || :n, 1, '{}', ':tok');
SQL
[ "$(id -u)" -eq 0 ] && chown postgres: "$work/claim.sql"
printf '%-12s %-8s %4s %10s %14s\n' standby clients run "claims/s" "latency ms"
for round in $(seq "$REPEAT"); do
  for mode in true false; do
    set_mode "$mode"
    for c in $CLIENTS; do
      out=$(pg_as_owner pgbench -n -h 127.0.0.1 -p "$HA_RW" -U postgres -c "$c" -j "$c" \
        -T "$SECONDS_EACH" -f "$work/claim.sql" bench 2>&1)
      tps=$(sed -n 's/^tps = \([0-9.]*\).*/\1/p' <<<"$out" | head -n 1)
      lat=$(sed -n 's/^latency average = \([0-9.]*\) ms/\1/p' <<<"$out")
      [ -n "$tps" ] || { echo "pgbench failed: $out" >&2; exit 1; }
      printf '%-12s %-8s %4s %10.0f %14s\n' "$([ "$mode" = true ] && echo synchronous || echo none)" \
        "$c" "$round" "$tps" "$lat"
    done
  done
done

for replication in sync async; do
  echo
  echo "claims under failover, $replication replication, 8 workers, $FAILOVERS failovers:"
  if [ "$replication" = sync ]; then up; else up --async; fi
  "$python" "$root/bench/ha/failover_load.py" --ha-dir "$IDEMWATCH_HA_DIR" \
    --dsn "${HA_DSN/dbname=postgres/dbname=bench}" --failovers "$FAILOVERS" || true
done
