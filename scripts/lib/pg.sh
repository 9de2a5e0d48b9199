# shellcheck shell=bash
# A private PostgreSQL cluster for the demo and the tests: own data folder, own socket folder, a free
# port, never the system's 5432. Run as the `postgres` user when we are root (initdb and postgres
# refuse root). Source this file, then: pg_start DIR; ...; pg_stop DIR.

# The newest installed server, resolved when first needed: on a fresh machine PostgreSQL is only
# installed by install_packages, after this file is sourced.
pg_bin() {
  if [ -z "${PG_BIN:-}" ]; then
    local dirs=("${IDEMWATCH_PG_LIB:-/usr/lib/postgresql}"/*/bin)
    [ -x "${dirs[-1]}/initdb" ] || {
      echo "PostgreSQL server binaries not found in ${IDEMWATCH_PG_LIB:-/usr/lib/postgresql}/*/bin (is the postgresql package installed?)" >&2
      return 1
    }
    PG_BIN=$(printf '%s\n' "${dirs[@]}" | sort -V | tail -n 1)
  fi
  printf '%s\n' "$PG_BIN"
}

# Run a command as the cluster's owner.
pg_as_owner() {
  if [ "$(id -u)" -eq 0 ]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

# A TCP port nobody listens on.
pg_free_port() {
  # Below the kernel's ephemeral range (ip_local_port_range), whose ports any outgoing connection
  # may hold as its own end: the connect() test sees only listeners, and a server told such a port
  # fails to bind it.
  local port first=20000 last=40000 low
  if read -r low _ 2>/dev/null </proc/sys/net/ipv4/ip_local_port_range && [ "$low" -gt 21000 ]; then
    last=$((low - 1))
  fi
  for port in ${PG_PREFERRED_PORT:-} $(shuf -i "$first-$last" -n 50); do
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      echo "$port"
      return 0
    fi
  done
  echo "no free TCP port found between $first and $last" >&2
  return 1
}

# pg_start DIR: create (if needed) and start a cluster under DIR; sets PG_PORT, PG_SOCKDIR, PG_DSN.
# DIR must be reachable by the postgres user when we are root.
pg_start() {
  local dir=$1
  PG_BIN=$(pg_bin) || return 1
  export PG_BIN
  mkdir -p "$dir"
  if [ "$(id -u)" -eq 0 ]; then chown postgres: "$dir"; fi
  if ! pg_as_owner test -w "$dir"; then
    echo "the postgres user cannot write $dir (a parent folder is closed to it); use a folder under /tmp" >&2
    return 1
  fi
  if [ ! -f "$dir/data/PG_VERSION" ]; then
    pg_as_owner "$PG_BIN/initdb" -D "$dir/data" -U postgres --auth=trust --encoding=UTF8 \
      --locale=C.UTF-8 >"$dir/initdb.log" 2>&1 || {
      echo "initdb failed; see $dir/initdb.log" >&2
      return 1
    }
  fi
  mkdir -p "$dir/sock"
  if [ "$(id -u)" -eq 0 ]; then chown postgres: "$dir/sock"; fi
  PG_SOCKDIR=$dir/sock
  if pg_as_owner "$PG_BIN/pg_ctl" -D "$dir/data" status >/dev/null 2>&1; then
    PG_PORT=$(sed -n 4p "$dir/data/postmaster.pid" | tr -d ' ')
  else
    PG_PORT=$(pg_free_port) || return 1
    pg_as_owner "$PG_BIN/pg_ctl" -D "$dir/data" -l "$dir/postgres.log" -w -t 60 start \
      -o "-p $PG_PORT -k $PG_SOCKDIR -c listen_addresses=127.0.0.1 -c max_connections=200 \
          -c shared_preload_libraries=pg_stat_statements ${PG_EXTRA_OPTS:-}" >/dev/null || {
      echo "PostgreSQL did not start; see $dir/postgres.log" >&2
      tail -n 20 "$dir/postgres.log" >&2
      return 1
    }
  fi
  PG_DSN="host=$PG_SOCKDIR port=$PG_PORT user=postgres dbname=postgres"
  export PG_PORT PG_SOCKDIR PG_DSN
}

pg_stop() {
  local dir=$1
  [ -f "$dir/data/postmaster.pid" ] || return 0
  PG_BIN=$(pg_bin) || return 0
  pg_as_owner "$PG_BIN/pg_ctl" -D "$dir/data" -m fast -w -t 60 stop >/dev/null 2>&1 || true
}

# pg_scratch TAG: a private cluster in a fresh folder /tmp/idemwatch-TAG-XXXXXX, stopped and removed
# on exit (this sets the EXIT trap). Sets SCRATCH_DIR; PG_DSN as pg_start sets it.
pg_scratch() {
  SCRATCH_DIR=$(mktemp -d "/tmp/idemwatch-$1-XXXXXX")
  chmod 755 "$SCRATCH_DIR"
  trap 'pg_stop "$SCRATCH_DIR"; rm -rf "$SCRATCH_DIR"' EXIT
  pg_start "$SCRATCH_DIR"
}

# pg_migrated_database NAME IDEMCTL [migrate flags...]: creates database NAME in the running
# cluster, migrates it with IDEMCTL, and prints its DSN.
pg_migrated_database() {
  local name=$1 idemctl=$2
  shift 2
  local dsn="${PG_DSN/dbname=postgres/dbname=$name}"
  psql "$PG_DSN" -qc "CREATE DATABASE $name" >&2
  "$idemctl" migrate --db.dsn="$dsn" "$@" >/dev/null || return
  echo "$dsn"
}
