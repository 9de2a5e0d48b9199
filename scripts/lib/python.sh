# shellcheck shell=bash
# psycopg_python: prints Debian's python3 that has psycopg 3 (python3-psycopg), or says how to get
# one and fails. A python3 earlier on PATH (a virtualenv, a pyenv shim) may lack it.
psycopg_python() {
  local candidate
  for candidate in ${IDEMWATCH_PYTHON:-} /usr/bin/python3 python3; do
    if "$candidate" -c 'import psycopg' >/dev/null 2>&1; then
      printf '%s\n' "$candidate"
      return 0
    fi
  done
  echo "no python3 with psycopg 3 found (Debian: apt-get install python3-psycopg)" >&2
  return 1
}
