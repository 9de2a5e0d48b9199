#!/usr/bin/env bash
# Runs clang-tidy (.clang-tidy at the root) over the programs' and libraries' own sources in the
# folders named, with the build's compile_commands.json, and fails on any diagnostic: the checks
# the file declares are the checks that hold. Tests and benchmarks are left out to keep the run
# within a few minutes.
#   clang_tidy_check.sh SOURCE_DIR BUILD_DIR RUN_CLANG_TIDY DIR...
set -euo pipefail
root=$1
build=$2
runner=$3
shift 3
dirs=("$@")
[ ${#dirs[@]} -gt 0 ] || { echo "clang-tidy check: no folders given" >&2; exit 2; }
# shellcheck source=cpp_sources.sh
source "$(dirname "$0")/cpp_sources.sh"

[ -f "$build/compile_commands.json" ] || {
  echo "clang-tidy check: $build/compile_commands.json is missing (configure with CMAKE_EXPORT_COMPILE_COMMANDS)" >&2
  exit 1
}
mapfile -t units < <(cpp_sources "$root" "${dirs[@]}" | grep '\.cpp$')
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# run-clang-tidy picks the translation units of compile_commands.json that match this expression:
# the sources under those folders, not the generated ones in the build folder.
alternatives=$(IFS='|'; echo "${dirs[*]}")
"$runner" -p "$build" -j "$(nproc)" -quiet "^$root/($alternatives)/" \
  2>&1 | sed 's/\x1b\[[0-9;]*m//g' >"$log" || true
# The runner prints each clang-tidy command it starts: none means nothing was checked (no
# compilation database entry matched, or clang-tidy could not run), which must not pass as clean.
ran=$(grep -c -- ' -p=' "$log" || true)
if [ "$ran" -eq 0 ]; then
  tail -20 "$log"
  echo "clang-tidy check: no translation unit was checked (expected ${#units[@]})" >&2
  exit 1
fi
if grep -qE '(warning|error): ' "$log"; then
  grep -E -A3 '(warning|error): ' "$log" | head -200
  count=$(grep -cE '(warning|error): ' "$log")
  echo "clang-tidy check: $count diagnostics in ${#units[@]} files" >&2
  exit 1
fi
echo "clang-tidy check: $ran of ${#units[@]} files checked, clean"
