#!/usr/bin/env bash
# The long bank test: tests/chaos/chaos.py for ten minutes by default, three simulators and three
# exporters, PostgreSQL crashed five times, then each reintroduced hole for a shorter run, which
# must be caught. Prints every check and a line per run.
#   bench/chaos/run.sh [--duration S] [more chaos.py flags]    env: HOLES=0 skips the holes
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
source "$root/scripts/lib/common.sh"
build_dir=${IDEMWATCH_BUILD_DIR:-$root/build}
install_packages
IDEMWATCH_BUILD_TARGETS="idemctl idemwatch-exporter" build_tree "$build_dir"
run() { bash "$root/tests/chaos/run_chaos.sh" "$build_dir/tools/idemctl/idemctl" \
          "$build_dir/exporter/idemwatch-exporter" "$@"; }
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); $(date -u +%F)"
start=$SECONDS
run --duration 600 --simulators 3 --exporters 3 --pg-crashes 5 --operations 4000 --seed 21 "$@"
echo "long run: every check held in $((SECONDS - start)) s"
if [ "${HOLES:-1}" != 0 ]; then
  for hole in refund-read-as-charge coupon-read-as-charge writers-record-ledger; do
    start=$SECONDS
    run --duration 60 --pg-crashes 1 --seed 23 --reintroduce "$hole" --expect-to-fail
    echo "$hole: caught in $((SECONDS - start)) s"
  done
fi
