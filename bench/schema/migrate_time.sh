#!/usr/bin/env bash
# idemctl migrate's wall time on a private cluster, each figure the median of RUNS: an empty
# database installed from the baseline (what migrate does now), the same through every numbered
# migration (the way it was installed before the baseline: --sql-dir with the migrations alone),
# and a database already up to date (nothing to do).
#   bench/schema/migrate_time.sh [BUILD_DIR] [RUNS]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build}
runs=${2:-9}
idemctl=$build/tools/idemctl/idemctl
source "$root/scripts/lib/pg.sh"
pg_scratch migrate-bench
export PGOPTIONS="-c client_min_messages=warning"

# Milliseconds of one run of "$@".
millis() {
  local start end
  start=$(date +%s%N)
  "$@" >/dev/null
  end=$(date +%s%N)
  echo $(((end - start) / 1000000))
}
median() { sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }

declare -A times
for ((i = 0; i < runs; i++)); do
  for path in baseline migrations; do
    psql "$PG_DSN" -qc "DROP DATABASE IF EXISTS m_$path" -c "CREATE DATABASE m_$path"
    dsn="${PG_DSN/dbname=postgres/dbname=m_$path}"
    if [ "$path" = baseline ]; then
      times[$path]+="$(millis "$idemctl" migrate --db.dsn="$dsn") "
    else
      times[$path]+="$(millis "$idemctl" migrate --db.dsn="$dsn" --sql-dir "$root/sql/migrations") "
    fi
  done
  dsn="${PG_DSN/dbname=postgres/dbname=m_baseline}"
  times[noop]+="$(millis "$idemctl" migrate --db.dsn="$dsn") "
done
echo "machine: $(nproc) cores; $(date -u +%FT%H:%MZ); PostgreSQL $(psql "$PG_DSN" -Atc 'SHOW server_version'); median of $runs runs"
for path in baseline migrations noop; do
  # shellcheck disable=SC2086
  printf '%-11s %6s ms   (%s)\n' "$path" "$(printf '%s\n' ${times[$path]} | median)" "${times[$path]% }"
done
