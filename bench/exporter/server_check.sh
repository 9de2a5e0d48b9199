#!/usr/bin/env bash
# What following the server costs the exporter: the statement each collection now runs to learn
# which server answers (role, replay lag, WAL timeline, postmaster start; before, a primary ran it
# only at connect), and the look-up of counted rows on a server that replaced the last one (2,000
# ids a statement, as the readers send them, in a table of ROWS rows). The role statement is read
# from exporter/src/collection_loop.cpp, so the figure is the shipped one's. A private cluster
# under /tmp, stopped on every exit.
#
#   bench/exporter/server_check.sh
#   env: ROWS (1000000), SECONDS_EACH (8)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
source "$root/scripts/lib/pg.sh"
ROWS=${ROWS:-1000000}
SECONDS_EACH=${SECONDS_EACH:-8}
pgbench=$(pg_bin)/pgbench

pg_scratch server-check
work=$SCRATCH_DIR/work
mkdir -p "$work"
sed -n '/kServerRole = R"SQL(/,/)SQL";/p' "$root/exporter/src/collection_loop.cpp" |
  sed '1d;$d' >"$work/role.sql"
echo ";" >>"$work/role.sql"
[ -s "$work/role.sql" ] || { echo "server_check: no kServerRole in collection_loop.cpp" >&2; exit 1; }
psql -q "$PG_DSN" -c "CREATE TABLE counted (id bigint PRIMARY KEY, pad text)" \
  -c "INSERT INTO counted SELECT g, repeat('x', 100) FROM generate_series(1, $ROWS) g" \
  -c "VACUUM ANALYZE counted"
cat >"$work/lookup.sql" <<SQL
\set first random(1, $ROWS - 2000)
SELECT count(*) FROM counted
 WHERE id = ANY((SELECT array_agg(g) FROM generate_series(:first, :first + 1999) g)::bigint[]);
SQL
run() {
  "$pgbench" -n -T "$SECONDS_EACH" -f "$2" "$PG_DSN" 2>&1 |
    awk -v what="$1" '/latency average/ {printf "%-48s %s ms\n", what, $4}'
}
echo "$(date -u +%FT%TZ), load average $(cut -d' ' -f1-3 /proc/loadavg), $ROWS rows"
run "which server answers (each collection)" "$work/role.sql"
run "2,000 counted ids looked up (after a change)" "$work/lookup.sql"
