#!/usr/bin/env bash
# Runs one client's tests against a real PostgreSQL: a database of their own, migrated with the
# built idemctl, and a login role holding only idem_writer (the client gets protocol rights, no
# table rights, as an agent runtime would). The server is scripts/test's cluster when
# IDEMWATCH_TEST_DSN is set, else a private one under /tmp. The database, the role and a private
# cluster are removed on every exit path.
#   clients/run_tests.sh python|typescript IDEMCTL WORK_DIR
# With IDEMWATCH_CLIENT_BENCH=N it runs the client's overhead benchmark (N calls per series) instead.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
lang=${1:?usage: run_tests.sh python|typescript IDEMCTL WORK_DIR}
idemctl=${2:?usage: run_tests.sh python|typescript IDEMCTL WORK_DIR}
work=${3:?usage: run_tests.sh python|typescript IDEMCTL WORK_DIR}
case $lang in python | typescript) ;; *)
  echo "run_tests.sh: unknown client '$lang' (python or typescript)" >&2
  exit 2
  ;;
esac
# shellcheck source=../scripts/lib/pg.sh
source "$here/../scripts/lib/pg.sh"
# shellcheck source=../scripts/lib/python.sh
source "$here/../scripts/lib/python.sh"
# shellcheck source=../scripts/lib/node.sh
source "$here/../scripts/lib/node.sh"
mkdir -p "$work"

suffix="$$_$(od -An -N4 -tx4 /dev/urandom | tr -d ' ')"
db="idem_clients_${lang}_$suffix"
writer="idem_clients_writer_$suffix"
ledger="idem_clients_ledger_$suffix"
private_dir=''
server_ready=''
pooler_dir=''

cleanup() {
  local status=$?
  if [ -n "$server_ready" ]; then
    "$PG_BIN/psql" -X -q -d "$admin_base dbname=postgres" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" \
      -c "DROP ROLE IF EXISTS $writer" -c "DROP ROLE IF EXISTS $ledger" >/dev/null 2>&1 || true
  fi
  if [ -n "$pooler_dir" ] && [ -s "$pooler_dir/pgbouncer.pid" ]; then
    kill "$(cat "$pooler_dir/pgbouncer.pid")" 2>/dev/null || true
  fi
  [ -z "$pooler_dir" ] || rm -rf "$pooler_dir"
  if [ -n "$private_dir" ]; then
    pg_stop "$private_dir"
    rm -rf "$private_dir"
  fi
  exit "$status"
}
trap cleanup EXIT

# The server: host, port, superuser, from IDEMWATCH_TEST_DSN's "key=value" words or a private cluster.
if [ -n "${IDEMWATCH_TEST_DSN:-}" ]; then
  PG_BIN=$(pg_bin)
  host='' port='' user=postgres
  for word in $IDEMWATCH_TEST_DSN; do
    case $word in
      host=*) host=${word#host=} ;;
      port=*) port=${word#port=} ;;
      user=*) user=${word#user=} ;;
    esac
  done
else
  private_dir=$(mktemp -d /tmp/idemwatch-test-clients.XXXXXX)
  PG_EXTRA_OPTS="-c fsync=off -c synchronous_commit=off -c full_page_writes=off" pg_start "$private_dir"
  echo "private PostgreSQL on port $PG_PORT (data $private_dir)"
  host=$PG_SOCKDIR port=$PG_PORT user=postgres
fi
admin_base="host=$host port=$port user=$user"
server_ready=1

"$PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 -d "$admin_base dbname=postgres" \
  -c "CREATE DATABASE $db" -c "CREATE ROLE $writer LOGIN" -c "CREATE ROLE $ledger LOGIN" >/dev/null
"$idemctl" migrate --db.dsn "$admin_base dbname=$db" >/dev/null
"$PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 -d "$admin_base dbname=$db" -c "GRANT idem_writer TO $writer" \
  -c "GRANT idem_ledger TO $ledger" >/dev/null

# Both spellings: libpq DSNs for Python, the discrete parts for node-postgres.
export IDEMWATCH_CLIENT_DSN="host=$host port=$port dbname=$db user=$writer"
# The gateway's side (webhooks, statements): a login holding only idem_ledger.
export IDEMWATCH_CLIENT_LEDGER_DSN="host=$host port=$port dbname=$db user=$ledger"
export IDEMWATCH_CLIENT_LEDGER_USER=$ledger
export IDEMWATCH_CLIENT_ADMIN_DSN="$admin_base dbname=$db"
export IDEMWATCH_CLIENT_HOST=$host IDEMWATCH_CLIENT_PORT=$port IDEMWATCH_CLIENT_DATABASE=$db
export IDEMWATCH_CLIENT_USER=$writer IDEMWATCH_CLIENT_ADMIN_USER=$user

# PgBouncer in transaction mode in front of the same server, as platforms deploy it, with fewer
# server connections than a test opens clients: the writer through it, as IDEMWATCH_CLIENT_POOLED_DSN
# (Python) and IDEMWATCH_CLIENT_POOLED_HOST / _PORT (node-postgres).
start_pooler() {
  pooler_dir=$(mktemp -d /tmp/idemwatch-test-pooler.XXXXXX)
  chmod 777 "$pooler_dir"
  local pooler_port
  pooler_port=$(pg_free_port)
  printf '"%s" ""\n' "$writer" >"$pooler_dir/userlist.txt"
  cat >"$pooler_dir/pgbouncer.ini" <<EOF
[databases]
* = host=$host port=$port

[pgbouncer]
pool_mode = transaction
default_pool_size = 2
listen_addr = 127.0.0.1
listen_port = $pooler_port
unix_socket_dir =
auth_type = trust
auth_file = $pooler_dir/userlist.txt
pidfile = $pooler_dir/pgbouncer.pid
logfile = $pooler_dir/pgbouncer.log
EOF
  pg_as_owner /usr/sbin/pgbouncer -d "$pooler_dir/pgbouncer.ini"
  export IDEMWATCH_CLIENT_POOLED_DSN="host=127.0.0.1 port=$pooler_port dbname=$db user=$writer"
  export IDEMWATCH_CLIENT_POOLED_HOST=127.0.0.1 IDEMWATCH_CLIENT_POOLED_PORT=$pooler_port
}

run_python() {
  local python
  python=$(psycopg_python) || return 1
  start_pooler
  cd "$here/python"
  if [ -n "${IDEMWATCH_CLIENT_BENCH:-}" ]; then
    PYTHONDONTWRITEBYTECODE=1 "$python" bench/overhead.py "$IDEMWATCH_CLIENT_BENCH"
    return
  fi
  PYTHONDONTWRITEBYTECODE=1 "$python" -m unittest discover -s tests -t . -v
}

run_typescript() {
  # Built in WORK_DIR (the build tree), never in the checkout: concurrent runs from other build
  # trees must not share node_modules or dist.
  local src=$here/typescript dst=$work/typescript
  mkdir -p "$dst"
  rm -rf "$dst/src" "$dst/test" "$dst/examples" "$dst/bench" "$dst/dist"
  cp -R "$src/src" "$src/test" "$src/examples" "$src/bench" "$src/package.json" \
    "$src/package-lock.json" "$src/tsconfig.json" "$dst/"
  node_install "$dst"
  start_pooler
  cd "$dst"
  node_modules/.bin/tsc -p tsconfig.json
  if [ -n "${IDEMWATCH_CLIENT_BENCH:-}" ]; then
    node dist/bench/overhead.js "$IDEMWATCH_CLIENT_BENCH"
    return
  fi
  node --test dist/test/*.test.js
}

"run_$lang"
