#!/usr/bin/env bash
# A simulated day of payments as production knows it, on a private cluster: the agents lose a share
# of the gateway's responses (UNKNOWN), the gateway calls back about some of its charges and sends
# the day's statement of all of them. Prints how many UNKNOWN records the gateway's word decided
# without a person (callbacks, then the statement, then the status lookup when the stand-in is
# built), what is left by reason, and the wrong decisions against what the gateway did (its truth
# file): the product's figure is 0.
#   bench/gateway/simulated_day.sh [BUILD_DIR] [PAYMENTS] [LOSS_RATE] [CALLBACK_SHARE]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build}
payments=${2:-100000}
loss=${3:-0.05}
share=${4:-0.6}
idemctl=$build/tools/idemctl/idemctl
source "$root/scripts/lib/pg.sh"
pg_scratch gateway-day
export PGOPTIONS="-c client_min_messages=warning"
dsn=$(pg_migrated_database day "$idemctl")
work=$SCRATCH_DIR/day
mkdir -p "$work"
chmod 777 "$work"

q() { psql "$dsn" -Atc "$1"; }
unknown_by_type() {
  q "SELECT coalesce(string_agg(biz_type || ' ' || n, ', ' ORDER BY biz_type), 'none')
       FROM (SELECT biz_type, count(*) AS n FROM idem.records WHERE status = 'UNKNOWN'
              GROUP BY biz_type) x"
}

# The stand-in knows every call at once (its ground truth is the simulator's journal): its "did not
# happen" may count at once too.
"$idemctl" declare-gateway sim-gateway --biz-types payment,refund --settlement-delay 0s \
  --not-found-after 0s --db.dsn="$dsn" >/dev/null
start=$(date +%s)
"$idemctl" simulate --db.dsn="$dsn" --requests "$payments" --agents 8 --seed 2026 --quiet \
  --biz-types payment,refund --response-loss-rate "$loss" --callback-resolves-rate 0 \
  --gateway-reports callbacks --gateway-callback-share "$share" \
  --gateway-callback-repeat-rate 0.1 --lease 5s \
  --statement-out "$work/day.csv" --gateway-truth "$work/truth.jsonl" >"$work/simulate.log"
simulated=$(($(date +%s) - start))
sleep 6  # past the last leases
"$idemctl" expire-leases --db.dsn="$dsn" >/dev/null

lost=$(q "SELECT count(DISTINCT idempotency_key) FROM idem.transitions
           WHERE to_status = 'UNKNOWN' AND actor_kind = 'system'")
by_callback=$(q "SELECT count(*) FROM idem.transitions WHERE from_status = 'UNKNOWN'
                  AND evidence->>'source' = 'callback'")
before_statement=$(q "SELECT count(*) FROM idem.records WHERE status = 'UNKNOWN'")

start_ms=$(date +%s%3N)
"$idemctl" import-statement "$work/day.csv" --format stripe --gateway sim-gateway \
  --db.dsn="$dsn" >"$work/import.log"
import_ms=$(($(date +%s%3N) - start_ms))
statement_lines=$(q "SELECT count(*) FROM idem.statement_lines")
by_statement=$(q "SELECT count(*) FROM idem.transitions WHERE from_status = 'UNKNOWN'
                   AND evidence->>'source' = 'statement'")
"$idemctl" reconcile --db.dsn="$dsn" >/dev/null
by_lookup=0
standin=$build/tools/gateway/idemwatch-gateway-standin
if [ -x "$standin" ] && [ "$(q "SELECT count(*) FROM idem.records WHERE status = 'UNKNOWN'")" != 0 ]; then
  "$standin" --listen 127.0.0.1:0 --truth "$work/truth.jsonl" >"$work/standin.out" 2>"$work/standin.log" &
  standin_pid=$!
  for _ in $(seq 50); do grep -q listening "$work/standin.out" && break; sleep 0.1; done
  port=$(sed -n 's/.*listening on [^:]*:\([0-9]*\).*/\1/p' "$work/standin.out")
  cat >"$work/lookup.yaml" <<YAML
gateway: sim-gateway
biz_types: [payment, refund]
url: "http://127.0.0.1:$port/v1/payments/{key}"
method: GET
timeout: 5s
rate_limit: 1000/s
max_per_round: 100000
status:
  pointer: /status
  happened: [succeeded]
  not_happened: [failed]
  not_found_status: 404
amount: {pointer: /amount, unit: minor}
currency: {pointer: /currency}
reference: {pointer: /id}
YAML
  "$idemctl" reconcile --lookup "$work/lookup.yaml" --db.dsn="$dsn" --ledger-dsn="$dsn" \
    >"$work/lookup.log" 2>&1 || true
  kill "$standin_pid" 2>/dev/null || true
  by_lookup=$(q "SELECT count(*) FROM idem.transitions WHERE from_status = 'UNKNOWN'
                  AND evidence->>'source' = 'lookup'")
fi

# What the gateway did, against what was decided from its word.
psql "$dsn" -qc "CREATE TABLE truth (line jsonb)"
psql "$dsn" -qc "\\copy truth FROM '$work/truth.jsonl' WITH (FORMAT text)"
wrong_success=$(q "SELECT count(*) FROM idem.transitions t
                    WHERE t.actor_kind = 'reconciler' AND t.to_status = 'SUCCESS'
                      AND NOT EXISTS (SELECT FROM truth WHERE line->>'key' = t.idempotency_key)")
wrong_failed=$(q "SELECT count(*) FROM idem.transitions t
                   WHERE t.actor_kind = 'reconciler' AND t.to_status = 'FAILED'
                     AND EXISTS (SELECT FROM truth WHERE line->>'key' = t.idempotency_key)")
left=$(q "SELECT count(*) FROM idem.records WHERE status = 'UNKNOWN'")
decided=$((lost - left))

echo "machine: $(nproc) cores; $(date -u +%FT%H:%MZ); PostgreSQL $(q 'SHOW server_version')"
echo "payments+refunds $payments, response loss $loss, callbacks for $share of movements; simulated in ${simulated}s"
echo "UNKNOWN records            $lost   (lost responses, and leases that ran out)"
echo "  decided by callbacks     $by_callback"
echo "  left for the statement   $before_statement"
echo "  decided by the statement $by_statement   (import: $statement_lines lines in $import_ms ms)"
echo "  decided by the lookup    $by_lookup"
echo "  decided without a person $decided of $lost"
echo "  left for a person        $left   ($(unknown_by_type))"
echo "wrong decisions            $((wrong_success + wrong_failed))   (SUCCESS the gateway never did: $wrong_success; FAILED it did: $wrong_failed)"
