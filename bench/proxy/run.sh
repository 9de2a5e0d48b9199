#!/usr/bin/env bash
# idemwatch-proxy's cost per request, side by side in one run against the same upstream (nginx
# answering 201 with a small JSON body):
#   direct     wrk straight to the upstream
#   nginx      wrk through nginx's proxy_pass (no idempotency): the yardstick for a proxy
#   protocol   pgbench: idem.begin + idem.complete alone, the two calls the proxy makes
#   proxy      wrk through idemwatch-proxy: a fresh Idempotency-Key and order each request, a new
#              upstream connection each request
#   proxy-ka   the same with upstream_keepalive: 2s (upstream connections reused)
#   baseline   proxy-ka run by another build of idemwatch-proxy (BASELINE_PROXY), when given:
#              a change's figures beside the previous ones, in the same rounds
# at 1 and 64 connections, p50 and p99 latency and requests/s. The proxy's own overhead is its
# latency less the direct call's and the two protocol calls'.
#
#   bench/proxy/run.sh [BUILD_DIR]
#   env: SECONDS_EACH (10), CONNECTIONS ("1 64"), REPEAT (2), PROXY_WORKERS (8),
#        BASELINE_PROXY (an idemwatch-proxy binary to compare with), UPSTREAM_DELAY_MS (the
#        upstream's own time per request), PG_EXTRA_OPTS (e.g. "-c synchronous_commit=off": the proxy's own ceiling, without the
#        commits' flush, which otherwise bounds every path through the database)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build}
# shellcheck source=../../scripts/lib/pg.sh
source "$root/scripts/lib/pg.sh"
SECONDS_EACH=${SECONDS_EACH:-10}
CONNECTIONS=${CONNECTIONS:-"1 64"}
REPEAT=${REPEAT:-2}
for tool in wrk nginx pgbench; do
  command -v "$tool" >/dev/null || { echo "$tool is not installed (Debian: wrk, nginx-light, postgresql)" >&2; exit 1; }
done
pg_scratch bench-proxy
work=$SCRATCH_DIR
dsn=$(pg_migrated_database bench "$build/tools/idemctl/idemctl")
trap 'kill $(cat "$work"/*.pid 2>/dev/null) 2>/dev/null || true; pg_stop "$work"; rm -rf "$work"' EXIT

upstream_port=$(pg_free_port) nginx_port=$(pg_free_port) proxy_port=$(pg_free_port)
keepalive_port=$(pg_free_port) baseline_port=$(pg_free_port)
# UPSTREAM_DELAY_MS: the upstream answers after that long (nginx's echo module, which Debian's
# nginx-light carries), as a real tool does; unset, at once.
answer="return 201 '{\"charge\": \"ch_1\", \"status\": \"succeeded\"}';" load=""
if [ -n "${UPSTREAM_DELAY_MS:-}" ]; then
  load="load_module /usr/lib/nginx/modules/ngx_http_echo_module.so;"
  answer="echo_sleep $(awk -v ms="$UPSTREAM_DELAY_MS" 'BEGIN {printf "%.3f", ms / 1000}'); echo '{\"charge\": \"ch_1\", \"status\": \"succeeded\"}';"
fi
cat >"$work/nginx.conf" <<CONF
$load
daemon off;
worker_processes 1;
pid $work/nginx.pid;
error_log $work/nginx-error.log;
events { worker_connections 4096; }
http {
  access_log off;
  upstream tool { server 127.0.0.1:$upstream_port; keepalive 64; }
  server {
    listen 127.0.0.1:$upstream_port;
    location / { default_type application/json; $answer }
  }
  server {
    listen 127.0.0.1:$nginx_port;
    location / { proxy_pass http://tool; proxy_http_version 1.1; proxy_set_header Connection ""; }
  }
}
CONF
nginx -c "$work/nginx.conf" -p "$work" >"$work/nginx.log" 2>&1 &
write_proxy_config() {  # write_proxy_config FILE PORT [ROUTE LINE]
  cat >"$1" <<CONF
listen: 127.0.0.1:$2
database:
  dsn: "$dsn"
  workers: ${PROXY_WORKERS:-8}
routes:
  - name: charge
    path: /charges/{order_id}
    upstream: http://127.0.0.1:$upstream_port
    biz_type: payment
    biz_id: path:order_id
    ${3:-}
CONF
}
write_proxy_config "$work/proxy.yml" "$proxy_port"
write_proxy_config "$work/proxy-ka.yml" "$keepalive_port" "upstream_keepalive: 2s"
"$build/proxy/idemwatch-proxy" --config.file "$work/proxy.yml" 2>"$work/proxy.log" &
echo $! >"$work/proxy.pid"
"$build/proxy/idemwatch-proxy" --config.file "$work/proxy-ka.yml" 2>"$work/proxy-ka.log" &
echo $! >"$work/proxy-ka.pid"
ports="$upstream_port $nginx_port $proxy_port $keepalive_port"
if [ -n "${BASELINE_PROXY:-}" ]; then
  write_proxy_config "$work/proxy-base.yml" "$baseline_port" "upstream_keepalive: 2s"
  "$BASELINE_PROXY" --config.file "$work/proxy-base.yml" 2>"$work/proxy-base.log" &
  echo $! >"$work/proxy-base.pid"
  ports="$ports $baseline_port"
fi
for port in $ports; do
  for _ in $(seq 50); do (echo >"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.1; done
done
# A fresh key a transaction: drawn from 9e18, so that no round meets an earlier round's key (a
# collision would be answered `replayed`, with no claim token for complete).
cat >"$work/claim.sql" <<'SQL'
\set n random(1, 9000000000000000000)
SELECT claim_token AS tok FROM idem.begin('k-' || :client_id || '-' || :n, 'payment', 'o-' || :client_id || '-' || :n, 'charge', NULL, 'initial', '{"amount_minor": 100}') \gset
SELECT * FROM idem.complete('k-' || :client_id || '-' || :n, 1, '{}', ':tok');
SQL
[ "$(id -u)" -eq 0 ] && chown postgres: "$work/claim.sql"

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); $(date -u +%FT%TZ); load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "PostgreSQL $(psql "$dsn" -XAtc 'SHOW server_version') (fsync $(psql "$dsn" -XAtc 'SHOW fsync'), synchronous_commit $(psql "$dsn" -XAtc 'SHOW synchronous_commit')), $(nginx -v 2>&1 | cut -d' ' -f3), $(wrk -v 2>&1 | head -n 1 | cut -d' ' -f1-2)"
printf '%-9s %5s %4s %10s %9s %9s\n' path conns run "req/s" "p50 ms" "p99 ms"
# wrk's --latency table: "50%  1.23ms" in us, ms or s.
ms() { awk -v want="$1" '$1 == want { v = $2; u = v; gsub(/[0-9.]/, "", u); gsub(/[a-z]/, "", v);
  if (u == "us") v /= 1000; else if (u == "s") v *= 1000; printf "%.3f", v }'; }
run_wrk() {  # run_wrk NAME CONNECTIONS ROUND URL [LUA]
  local out threads=$(( $2 < 2 ? 1 : 2 ))
  out=$(wrk -t "$threads" -c "$2" -d "${SECONDS_EACH}s" --latency ${5:+-s "$5"} "$4")
  printf '%-9s %5s %4s %10.0f %9s %9s\n' "$1" "$2" "$3" "$(awk '/^Requests\/sec/ {print $2}' <<<"$out")" \
    "$(ms 50% <<<"$out")" "$(ms 99% <<<"$out")"
  if grep -q "Non-2xx" <<<"$out"; then grep "Non-2xx" <<<"$out" | sed 's/^/          /'; fi
}
for round in $(seq "$REPEAT"); do
  for c in $CONNECTIONS; do
    run_wrk direct "$c" "$round" "http://127.0.0.1:$upstream_port/charges/x"
    run_wrk nginx "$c" "$round" "http://127.0.0.1:$nginx_port/charges/x"
    rm -rf "$work/pgbench-log" && mkdir "$work/pgbench-log"
    [ "$(id -u)" -eq 0 ] && chown postgres: "$work/pgbench-log"
    out=$(pg_as_owner pgbench -n -h "$PG_SOCKDIR" -p "$PG_PORT" -U postgres -c "$c" -j "$(( c < 2 ? 1 : 2 ))" \
      -T "$SECONDS_EACH" -l --log-prefix="$work/pgbench-log/tx" -f "$work/claim.sql" bench 2>&1) ||
      { echo "pgbench failed: $out" >&2; exit 1; }
    # Each transaction's latency (µs) is the log's third column.
    read -r p50 p99 < <(cat "$work"/pgbench-log/tx* | awk '{print $3}' | sort -n |
      awk '{v[NR] = $1} END {printf "%.3f %.3f\n", v[int(NR * 0.5)] / 1000, v[int(NR * 0.99)] / 1000}')
    printf '%-9s %5s %4s %10.0f %9s %9s\n' protocol "$c" "$round" \
      "$(sed -n 's/^tps = \([0-9.]*\).*/\1/p' <<<"$out" | head -n 1)" "$p50" "$p99"
    run_wrk proxy "$c" "$round" "http://127.0.0.1:$proxy_port" "$root/bench/proxy/keys.lua"
    run_wrk proxy-ka "$c" "$round" "http://127.0.0.1:$keepalive_port" "$root/bench/proxy/keys.lua"
    if [ -n "${BASELINE_PROXY:-}" ]; then
      run_wrk baseline "$c" "$round" "http://127.0.0.1:$baseline_port" "$root/bench/proxy/keys.lua"
    fi
  done
done
echo "proxy peak RSS: $(awk '/VmHWM/ {print $2, $3}' "/proc/$(cat "$work/proxy.pid")/status")," \
  "with upstream keep-alive: $(awk '/VmHWM/ {print $2, $3}' "/proc/$(cat "$work/proxy-ka.pid")/status")"
if [ -n "${BASELINE_PROXY:-}" ]; then
  echo "baseline peak RSS: $(awk '/VmHWM/ {print $2, $3}' "/proc/$(cat "$work/proxy-base.pid")/status"), threads: $(awk '/Threads/ {print $2}' "/proc/$(cat "$work/proxy-base.pid")/status");" \
    "proxy-ka threads: $(awk '/Threads/ {print $2}' "/proc/$(cat "$work/proxy-ka.pid")/status")"
fi
# The proxy's own CPU per request served, over the whole run: user + system time of the process
# (/proc/PID/stat, in clock ticks) over its requests_total.
cpu_per_request() {  # cpu_per_request PID PORT
  local ticks requests
  ticks=$(awk '{print $14 + $15}' "/proc/$1/stat")
  requests=$(curl -s "http://127.0.0.1:$2/metrics" | awk '/^idemwatch_proxy_requests_total/ {n += $2} END {print n}')
  awk -v t="$ticks" -v hz="$(getconf CLK_TCK)" -v n="$requests" 'BEGIN {printf "%.0f µs (%d requests)", t / hz * 1e6 / n, n}'
}
echo "proxy CPU per request: proxy $(cpu_per_request "$(cat "$work/proxy.pid")" "$proxy_port")," \
  "proxy-ka $(cpu_per_request "$(cat "$work/proxy-ka.pid")" "$keepalive_port")" \
  "${BASELINE_PROXY:+, baseline $(cpu_per_request "$(cat "$work/proxy-base.pid")" "$baseline_port")}"
echo "upstream connections of the keep-alive proxy: $(curl -s "http://127.0.0.1:$keepalive_port/metrics" |
  awk '/^idemwatch_proxy_upstream_connections_total/ {printf "%s %s; ", $1, $2}')"
