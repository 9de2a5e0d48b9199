#!/usr/bin/env bash
# The history by day (migration 017) at size, side by side with the layout before it, on one
# private cluster (default settings but fsync on):
#   1. the in-place upgrade of a populated database from version 16: its wall time, which is how
#      long writers wait (the migration holds both history tables ACCESS EXCLUSIVE);
#   2. begin + complete (pgbench, one client, WRITE_SECONDS each, two interleaved rounds) on the
#      populated version 16 and 17 databases and on an empty version 17 one;
#   3. retention of DAYS_OLD days of history out of DAYS: idem.purge on version 16 (row by row),
#      on version 17 (whole day partitions, one transaction) and `idemctl purge` on a copy of the
#      same version 17 database (records in batches, each its own transaction, then the history),
#      each with a writer claiming and completing keys beside it (pgbench), whose slowest round
#      trip during the purge is printed.
# The data is generated (INSERT ... SELECT of generated rows, triggers off), not claimed: RECORDS
# SUCCESS records spread evenly over DAYS days, each with one attempt and two transitions.
#   bench/schema/history_by_day.sh [BUILD_DIR]
#   env RECORDS (1000000), DAYS (60), DAYS_OLD (30), WRITER_SECONDS (30: longer than any purge),
#       PARTS (upgrade,write,retention: any of them), WRITE_SECONDS (15), PURGE_BATCH (10000: the
#       records a transaction of `idemctl purge`, the third purge), PURGES (rows,days,batches: which
#       of the three purges run; at tens of millions of records, "batches" alone keeps the disk
#       to two databases' size)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build}
idemctl=$build/tools/idemctl/idemctl
records=${RECORDS:-1000000}
days=${DAYS:-60}
old=${DAYS_OLD:-30}
writer_seconds=${WRITER_SECONDS:-30}
parts=${PARTS:-upgrade,write,retention}
purges=${PURGES:-rows,days,batches}
write_seconds=${WRITE_SECONDS:-15}
# A name mistyped would skip its step in silence, after a generation that can take an hour.
only_of() {  # only_of VAR VALUE ALLOWED...: each comma-separated name of VALUE is one of ALLOWED
  local var=$1 value=$2 name
  shift 2
  [ -n "$value" ] || { echo "$var is empty: name at least one of $*" >&2; exit 2; }
  for name in ${value//,/ }; do
    [[ " $* " == *" $name "* ]] || { echo "$var: unknown '$name' (expected any of: $*)" >&2; exit 2; }
  done
}
only_of PARTS "$parts" upgrade write retention
only_of PURGES "$purges" rows days batches
# shellcheck source=../../scripts/lib/pg.sh
source "$root/scripts/lib/pg.sh"
pg_scratch history-bench
export PGOPTIONS="-c client_min_messages=warning"
dsn_of() { echo "${PG_DSN/dbname=postgres/dbname=$1}"; }
millis() {
  local start end
  start=$(date +%s%N)
  "$@" >/dev/null
  end=$(date +%s%N)
  echo $(((end - start) / 1000000))
}

# generate DSN: the records and their history, created_at spread over the last $days days.
generate() {
  psql "$1" -q -v ON_ERROR_STOP=1 <<SQL
SET session_replication_role = replica;
INSERT INTO idem.records (idempotency_key, biz_type, biz_id, tool, request_hash, status, version,
                          created_at, updated_at)
SELECT 'k-' || g, 'payment', 'o-' || g, 'pay', 'h', 'SUCCESS', 2, at, at
  FROM (SELECT g, now() - (g::float8 / $records) * interval '$days days' AS at
          FROM generate_series(1, $records) g) s;
INSERT INTO idem.attempts (idempotency_key, biz_type, biz_id, tool, trigger_source, outcome,
                           request_hash, created_at)
SELECT idempotency_key, biz_type, biz_id, tool, 'initial', 'executed', 'h', created_at
  FROM idem.records;
INSERT INTO idem.transitions (idempotency_key, from_status, to_status, version, actor_kind,
                              created_at)
SELECT idempotency_key, NULL, 'PROCESSING', 1, 'system', created_at FROM idem.records
UNION ALL
SELECT idempotency_key, 'PROCESSING', 'SUCCESS', 2, 'system', created_at FROM idem.records;
VACUUM ANALYZE;
SQL
}

# The day partitions of the last $days days, as prepare_history_partitions makes them ahead.
past_days() {
  psql "$1" -q -v ON_ERROR_STOP=1 -c "DO \$\$ DECLARE t text; d date; BEGIN
    FOREACH t IN ARRAY ARRAY['attempts', 'transitions'] LOOP
      FOR d IN SELECT g::date FROM generate_series((now() AT TIME ZONE 'UTC')::date - $days - 1,
                                                   (now() AT TIME ZONE 'UTC')::date - 1, interval '1 day') g LOOP
        EXECUTE format('CREATE TABLE idem.%I PARTITION OF idem.%I FOR VALUES FROM (%L) TO (%L)',
                       t || '_p' || to_char(d, 'YYYYMMDD'), t, d::timestamp AT TIME ZONE 'UTC',
                       (d + 1)::timestamp AT TIME ZONE 'UTC');
      END LOOP;
    END LOOP; END \$\$"
}

# A writer beside the purge: begin + complete of fresh keys, one client.
cat >"$SCRATCH_DIR/claim.sql" <<'SQL'
\set n random(1, 9000000000000000000)
SELECT claim_token AS token FROM idem.begin('w-' || :n, 'payment', 'w-' || :n, 'pay', 'h', 'initial', '{"amount_minor": 1, "currency": "CNY"}', interval '1 minute') \gset
SELECT result FROM idem.complete('w-' || :n, 1, '{}', ':token'::uuid);
SQL

# purge_beside DSN LABEL [BATCH]: purge with a writer running beside it for $writer_seconds
# seconds from 2 s before; prints the purge's time and the writer's slowest round trip that ended
# while the purge ran (or within a second after it). With BATCH, `idemctl purge --batch BATCH`
# (records a batch a transaction, then the history); without, idem.purge in one transaction.
purge_beside() {
  local dsn=$1 label=$2 batch=${3:-} logdir="$SCRATCH_DIR/log-$2" result ms start end
  mkdir -p "$logdir"
  (cd "$logdir" && "$PG_BIN/pgbench" -n -c 1 -T "$writer_seconds" -f "$SCRATCH_DIR/claim.sql" -l "$dsn" >pgbench.out 2>&1) &
  local writer=$!
  sleep 2
  start=$(date +%s%N)
  if [[ -n $batch ]]; then
    result=$("$idemctl" purge --older-than "${old}d" --batch "$batch" --db.dsn "$dsn" |
      sed -n 's/^purged rows older than [^:]*: \([0-9]*\) records, \([0-9]*\) attempts, \([0-9]*\) transitions; \([0-9]*\) tombstones.*/(\1,\2,\3,\4)/p')
  else
    result=$(psql "$dsn" -Atc "SELECT (p)::text FROM idem.purge(interval '$old days') p")
  fi
  end=$(date +%s%N)
  ms=$(((end - start) / 1000000))
  wait "$writer" || { cat "$logdir/pgbench.out"; return 1; }
  # pgbench -l: client, transaction, latency µs, script, epoch s, µs.
  local slowest count
  read -r slowest count < <(awk -v s="$((start / 1000))" -v e="$((end / 1000 + 1000000))" \
    '{t = $5 * 1000000 + $6; if (t >= s && t <= e) {n++; if ($3 > m) m = $3}} END {printf "%.1f %d\n", m / 1000, n}' \
    "$logdir"/pgbench_log.*)
  printf '%-28s purge %7d ms  (records, attempts, transitions, tombstones) = %s  writer: %s round trips during it, slowest %s ms\n' \
    "$label" "$ms" "$result" "$count" "$slowest"
}

echo "machine: $(nproc) cores; $(date -u +%FT%H:%MZ); PostgreSQL $(psql "$PG_DSN" -Atc 'SHOW server_version'); $records records over $days days, purge of $old days"

# 1. The in-place upgrade of a populated version-16 database.
psql "$PG_DSN" -qc "CREATE DATABASE h16"
"$idemctl" migrate --db.dsn="$(dsn_of h16)" --up-to 16 >/dev/null
start=$(date +%s%N)
generate "$(dsn_of h16)"
echo "generated in $((($(date +%s%N) - start) / 1000000000)) s: $(psql "$(dsn_of h16)" -Atc "SELECT pg_size_pretty(pg_database_size(current_database()))")"
if [[ $parts == *upgrade* ]]; then
  # Copies by file (a checkpoint and a copy), where the default would write the copy to the WAL.
  psql "$PG_DSN" -qc "CREATE DATABASE h17 TEMPLATE h16 STRATEGY FILE_COPY"
  ms=$(millis "$idemctl" migrate --db.dsn="$(dsn_of h17)")
  echo "upgrade 16 -> 17 in place: $ms ms (writers to the history wait this long)"
  psql "$PG_DSN" -qc "DROP DATABASE h17"
fi

# 2 and 3. A version 17 database whose generated history went into its days, then the write path
#    on each, then retention: row by row (version 16) against day partitions (version 17).
if [[ $parts == *retention* || $parts == *write* ]]; then
  psql "$PG_DSN" -qc "CREATE DATABASE d17"
  "$idemctl" migrate --db.dsn="$(dsn_of d17)" >/dev/null
  past_days "$(dsn_of d17)"
  generate "$(dsn_of d17)"
fi
if [[ $parts == *write* ]]; then
  psql "$PG_DSN" -qc "CREATE DATABASE e17"
  "$idemctl" migrate --db.dsn="$(dsn_of e17)" >/dev/null
  for round in 1 2; do
    for db in h16 d17 e17; do
      tps=$("$PG_BIN/pgbench" -n -c 1 -T "$write_seconds" -f "$SCRATCH_DIR/claim.sql" "$(dsn_of "$db")" 2>&1 |
        awk '/^tps/ {printf "%.0f", $3}')
      echo "begin + complete, round $round, $db: $tps per second"
    done
  done
fi
if [[ $parts == *retention* ]]; then
  # With both day-partition purges, the batches run on a copy (disk: one more database's size).
  batches_db=d17
  if [[ $purges == *days* && $purges == *batches* ]]; then
    psql "$PG_DSN" -qc "CREATE DATABASE b17 TEMPLATE d17 STRATEGY FILE_COPY"
    batches_db=b17
  fi
  if [[ $purges == *rows* ]]; then purge_beside "$(dsn_of h16)" "version 16, row by row"; fi
  if [[ $purges == *days* ]]; then purge_beside "$(dsn_of d17)" "version 17, day partitions"; fi
  if [[ $purges == *batches* ]]; then
    purge_beside "$(dsn_of "$batches_db")" "version 17, batches" "${PURGE_BATCH:-10000}"
  fi
fi
