#!/usr/bin/env bash
# idemctl import-statement of a Stripe itemized report of LINES lines (bench/statements/generate.py),
# against a ledger that has records for 90% of its charges, a third of them UNKNOWN
# (bench/statements/setup.sql), on a fresh database of a private cluster, as a login granted
# idem_ledger. Side by side, for each size, the bare cost of getting the same file into PostgreSQL:
# psql \copy of the CSV into a plain table with its columns, UNLOGGED and logged.
# Prints for each size: the baselines' time and rate, the import's wall time, lines/s, idemctl's
# peak RSS, and the statement's lines by result.
#
#   bench/statements/run.sh [--build BUILD_DIR] [LINES...]     (default: 100000 1000000)
#   env: BATCH_CHECK=1 also imports the file into a database without records (nothing to match:
#        the parser, the JSON and the inserts alone); KEEP_CSV=DIR keeps the generated files there;
#        UNKNOWN_PCT (30) and CALLBACK_PCT (30): the shares of the charges whose record is UNKNOWN
#        and whose flow a callback already recorded (bench/statements/setup.sql); PG_EXTRA_OPTS:
#        server settings for the private cluster (scripts/lib/pg.sh); FLOOR=1 also runs
#        bench/statements/floor.sql before the import: the least any import keeping what this one
#        keeps can cost, step by step.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$root/build
if [ "${1:-}" = --build ]; then
  build=$2
  shift 2
fi
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(100000 1000000)
idemctl=$build/tools/idemctl/idemctl
[ -x "$idemctl" ] || { echo "no idemctl at $idemctl: build it first (ninja -C $build idemctl)" >&2; exit 1; }
# shellcheck source-path=SCRIPTDIR source=../../scripts/lib/pg.sh disable=SC1091
source "$root/scripts/lib/pg.sh"
pg_scratch statement-bench
dir=$SCRATCH_DIR
export PGOPTIONS="-c client_min_messages=warning"
gateway=stripe-bench
csv_dir=${KEEP_CSV:-$dir}
mkdir -p "$csv_dir"
chmod 755 "$csv_dir"

now_ns() { date +%s%N; }
# peak RSS in KiB of "$@", its exit status kept; with /usr/bin/time when there is one, else polled
# from /proc/PID/status (VmHWM) until it ends.
PEAK_KB=0
peak_rss() {
  local status=0
  if [ -x /usr/bin/time ]; then
    /usr/bin/time -f %M -o "$dir/rss" "$@" || status=$?
    PEAK_KB=$(tail -n 1 "$dir/rss")
  else
    "$@" &
    local pid=$! hwm=0 v
    while kill -0 "$pid" 2>/dev/null; do
      v=$(awk '/^VmHWM/ {print $2}' "/proc/$pid/status" 2>/dev/null || true)
      [ -n "$v" ] && hwm=$v
      sleep 0.05
    done
    wait "$pid" || status=$?
    PEAK_KB=$hwm
  fi
  return "$status"
}
rate() { awk -v n="$1" -v ns="$2" 'BEGIN { printf "%.0f", n / (ns / 1e9) }'; }
secs() { awk -v ns="$1" 'BEGIN { printf "%.2f", ns / 1e9 }'; }

# The file's columns, typed as a plain table would hold them.
columns="balance_transaction_id text, created_utc timestamp, available_on_utc timestamp,
  currency text, gross numeric, fee numeric, net numeric, reporting_category text, source_id text,
  description text, charge_id text, payment_intent_id text, customer_facing_amount numeric,
  payment_method_type text, card_brand text, idempotency_key text, biz_id text"

import() {  # import DSN FILE: prints wall ns and peak KiB; the report goes to $dir/import.out
  local dsn=$1 file=$2 start end
  start=$(now_ns)
  peak_rss "$idemctl" import-statement "$file" --format stripe --gateway "$gateway" \
    --db.dsn "$dsn" >"$dir/import.out" 2>&1 || { cat "$dir/import.out" >&2; return 1; }
  end=$(now_ns)
  echo "$((end - start)) $PEAK_KB"
}

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(free -g | awk '/^Mem/ {print $2}') GiB;" \
  "$(date -u +%FT%TZ); PostgreSQL $(psql "$PG_DSN" -Atc 'SHOW server_version') (fsync $(psql "$PG_DSN" -Atc 'SHOW fsync'), shared_buffers $(psql "$PG_DSN" -Atc 'SHOW shared_buffers'))"
for n in "${sizes[@]}"; do
  file=$csv_dir/stripe_$n.csv
  start=$(now_ns)
  /usr/bin/python3 "$root/bench/statements/generate.py" "$n" "$file"
  chmod 644 "$file"
  echo
  echo "== $n lines, $(($(stat -c %s "$file") / 1048576)) MiB (generated in $(secs $(($(now_ns) - start))) s);" \
    "load average $(cut -d' ' -f1-3 /proc/loadavg)"

  dsn=$(pg_migrated_database "stmt_$n" "$idemctl")
  # The gateway's login (idem_ledger exists once the first database is migrated).
  psql "$PG_DSN" -qc "DO \$\$ BEGIN CREATE ROLE bench_ledger LOGIN IN ROLE idem_ledger;
                      EXCEPTION WHEN duplicate_object THEN NULL; END \$\$"
  start=$(now_ns)
  psql "$dsn" -q -v lines="$n" -v gateway="$gateway" -v unknown_pct="${UNKNOWN_PCT:-30}" \
    -v callback_pct="${CALLBACK_PCT:-30}" -f "$root/bench/statements/setup.sql" >/dev/null
  echo "setup: $(psql "$dsn" -Atc "SELECT count(*) || ' records (' || count(*) FILTER (WHERE status = 'UNKNOWN') || ' UNKNOWN), ' || (SELECT count(*) FROM idem.fund_flows) || ' flows' FROM idem.records") in $(secs $(($(now_ns) - start))) s"

  # The baseline: the same file through psql \copy, into an UNLOGGED table, then a logged one.
  for kind in unlogged logged; do
    persistence=
    if [ "$kind" = unlogged ]; then persistence=UNLOGGED; fi
    psql "$dsn" -qc "CREATE $persistence TABLE bench_copy_$kind ($columns)"
    psql "$dsn" -qc CHECKPOINT
    start=$(now_ns)
    psql "$dsn" -qc "\\copy bench_copy_$kind FROM '$file' WITH (FORMAT csv, HEADER true)"
    ns=$(($(now_ns) - start))
    printf '%-34s %8s s %10s lines/s\n' "baseline: psql \\copy, $kind" "$(secs "$ns")" "$(rate "$n" "$ns")"
    psql "$dsn" -qc "DROP TABLE bench_copy_$kind"
  done

  if [ "${FLOOR:-0}" = 1 ]; then
    # Each step's label, then psql's time for each statement of it; the clock runs from BEGIN to COMMIT.
    psql "$dsn" -q -v file="$file" -v gateway="$gateway" -f "$root/bench/statements/floor.sql" 2>&1 |
      awk -v n="$n" '
        /floor: lines/ { sub(/^ +/, ""); summary = $0; next }
        /^floor: / { step = substr($0, 8); if (step == "begin") on = 1; order[++steps] = step; next }
        /^Time: / && on { ms[step] += $2; total += $2 }
        END {
          for (i = 1; i <= steps; i++) printf "  floor: %-32s %9.0f ms %6.1f us a line\n", order[i], ms[order[i]], ms[order[i]] * 1000 / n
          printf "%-34s %8.2f s %10.0f lines/s   (%s)\n", "floor (floor.sql, one transaction)", total / 1000, n / (total / 1000), substr(summary, 8)
        }'
  fi

  ledger_dsn="${dsn/user=postgres/user=bench_ledger}"
  if [ "${BATCH_CHECK:-0}" = 1 ]; then
    empty=$(pg_migrated_database "stmt_empty_$n" "$idemctl")
    psql "$empty" -qc CHECKPOINT
    read -r ns kb < <(import "${empty/user=postgres/user=bench_ledger}" "$file")
    printf '%-34s %8s s %10s lines/s %8s MiB peak RSS\n' "import, nothing to match" "$(secs "$ns")" \
      "$(rate "$n" "$ns")" "$((kb / 1024))"
    psql "$PG_DSN" -qc "DROP DATABASE stmt_empty_$n"
  fi

  psql "$dsn" -qc CHECKPOINT
  read -r ns kb < <(import "$ledger_dsn" "$file")
  printf '%-34s %8s s %10s lines/s %8s MiB peak RSS   (load average %s)\n' "import-statement" \
    "$(secs "$ns")" "$(rate "$n" "$ns")" "$((kb / 1024))" "$(cut -d' ' -f1-3 /proc/loadavg)"
  psql "$dsn" -At -F ' ' -c "
    SELECT '  ' || rpad(result, 11) || lpad(count(*)::text, 9) FROM idem.statement_lines
     GROUP BY result ORDER BY result" \
    -c "SELECT '  records resolved SUCCESS by the statement: ' || count(*) FROM idem.transitions
         WHERE actor_kind = 'reconciler' AND to_status = 'SUCCESS'" \
    -c "SELECT '  records still UNKNOWN: ' || count(*) FROM idem.records WHERE status = 'UNKNOWN'"
  # A second import of the same file finds it and changes nothing.
  read -r ns _ < <(import "$ledger_dsn" "$file")
  grep -qi already "$dir/import.out" || { echo "the second import did not find the first:" >&2; cat "$dir/import.out" >&2; }
  printf '%-34s %8s s\n' "the same file again (already held)" "$(secs "$ns")"
  psql "$PG_DSN" -qc "DROP DATABASE stmt_$n"
  [ -n "${KEEP_CSV:-}" ] || rm -f "$file"
done
