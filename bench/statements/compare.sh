#!/usr/bin/env bash
# The same statement import with the import's SQL functions as two or more revisions wrote them,
# side by side in one run: one private cluster, one database prepared once (migrated by BUILD_DIR's
# idemctl and filled by bench/statements/setup.sql), and for each round and each revision a copy of
# it with that revision's text of FUNCTIONS applied over it, then `idemctl import-statement` of
# one generated Stripe report as a login granted idem_ledger. Prints for each import its wall time,
# lines per second, the cluster's CPU time over the import (every server process, the checkpointer
# and WAL writer included) and the WAL it wrote, with the lines by result and the records the
# statement decided, which must agree across revisions.
#
#   bench/statements/compare.sh [--build BUILD_DIR] LINES ROUNDS FUNCTIONS REV...
#     FUNCTIONS  comma-separated names of sql/objects/functions/*.sql (add_statement_lines,...)
#     REV        a git revision, or . for the working tree
#   env: UNKNOWN_PCT, CALLBACK_PCT (bench/statements/setup.sql), PG_EXTRA_OPTS (scripts/lib/pg.sh)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$root/build
if [ "${1:-}" = --build ]; then
  build=$2
  shift 2
fi
[ $# -ge 5 ] || { sed -n '2,14p' "$0" >&2; exit 2; }
lines=$1 rounds=$2 functions=$3
shift 3
revisions=("$@")
idemctl=$build/tools/idemctl/idemctl
[ -x "$idemctl" ] || { echo "no idemctl at $idemctl: build it first" >&2; exit 1; }
# shellcheck source-path=SCRIPTDIR source=../../scripts/lib/pg.sh disable=SC1091
source "$root/scripts/lib/pg.sh"
pg_scratch statement-compare
dir=$SCRATCH_DIR
chmod 755 "$dir"
export PGOPTIONS="-c client_min_messages=warning"
dsn_of() { echo "${PG_DSN/dbname=postgres/dbname=$1}"; }

# Each revision's text of the functions, as files to apply.
for i in "${!revisions[@]}"; do
  mkdir -p "$dir/rev$i"
  for f in ${functions//,/ }; do
    path=sql/objects/functions/$f.sql
    if [ "${revisions[$i]}" = . ]; then
      cp "$root/$path" "$dir/rev$i/$f.sql"
    else
      git -C "$root" show "${revisions[$i]}:$path" >"$dir/rev$i/$f.sql"
    fi
  done
done

# CPU seconds the cluster has spent: the postmaster, its live children and those it reaped.
cluster_cpu() {
  local pm
  pm=$(head -1 "$dir/data/postmaster.pid")
  {
    awk '{print $14 + $15 + $16 + $17}' "/proc/$pm/stat"
    for c in $(pgrep -P "$pm"); do awk '{print $14 + $15}' "/proc/$c/stat" 2>/dev/null || true; done
  } | awk -v hz="$(getconf CLK_TCK)" '{s += $1} END {printf "%.2f", s / hz}'
}

file=$dir/stripe_$lines.csv
/usr/bin/python3 "$root/bench/statements/generate.py" "$lines" "$file"
chmod 644 "$file"
pg_migrated_database prepared "$idemctl" >/dev/null
psql "$PG_DSN" -qc "DO \$\$ BEGIN CREATE ROLE bench_ledger LOGIN IN ROLE idem_ledger;
                    EXCEPTION WHEN duplicate_object THEN NULL; END \$\$"
psql "$(dsn_of prepared)" -q -v lines="$lines" -v gateway=stripe-bench \
  -v unknown_pct="${UNKNOWN_PCT:-30}" -v callback_pct="${CALLBACK_PCT:-30}" \
  -f "$root/bench/statements/setup.sql" >/dev/null
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs);" \
  "$(date -u +%FT%TZ); $lines lines, functions $functions"
for round in $(seq 1 "$rounds"); do
  for i in "${!revisions[@]}"; do
    psql "$PG_DSN" -qc "DROP DATABASE IF EXISTS run" -qc "CREATE DATABASE run TEMPLATE prepared"
    for f in "$dir/rev$i"/*.sql; do psql "$(dsn_of run)" -q -v ON_ERROR_STOP=1 -f "$f" >/dev/null; done
    psql "$(dsn_of run)" -qc CHECKPOINT
    wal=$(psql "$(dsn_of run)" -Atc "SELECT pg_current_wal_lsn()")
    cpu=$(cluster_cpu)
    start=$(date +%s%N)
    "$idemctl" import-statement "$file" --format stripe --gateway stripe-bench \
      --db.dsn "$(dsn_of run | sed 's/user=postgres/user=bench_ledger/')" >"$dir/import.out" 2>&1 ||
      { cat "$dir/import.out" >&2; exit 1; }
    ns=$(($(date +%s%N) - start))
    sleep 1  # the session's backend has ended and been counted
    cpu=$(awk -v a="$cpu" -v b="$(cluster_cpu)" 'BEGIN {printf "%.1f", b - a}')
    printf '%-12s round %s: %7.2f s %7.0f lines/s  server CPU %6s s  WAL %s  %s  decided %s  (load %s)\n' \
      "${revisions[$i]}" "$round" "$(awk -v ns="$ns" 'BEGIN {print ns / 1e9}')" \
      "$(awk -v n="$lines" -v ns="$ns" 'BEGIN {print n / (ns / 1e9)}')" "$cpu" \
      "$(psql "$(dsn_of run)" -Atc "SELECT pg_size_pretty(pg_current_wal_lsn() - '$wal')")" \
      "$(psql "$(dsn_of run)" -Atc "SELECT string_agg(result || '=' || n, ' ' ORDER BY result)
                                      FROM (SELECT result, count(*) AS n FROM idem.statement_lines
                                             GROUP BY 1) AS x")" \
      "$(psql "$(dsn_of run)" -Atc "SELECT count(*) FROM idem.transitions WHERE actor_kind = 'reconciler'")" \
      "$(cut -d' ' -f1 /proc/loadavg)"
  done
done
