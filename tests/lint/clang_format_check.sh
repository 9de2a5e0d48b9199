#!/usr/bin/env bash
# Fails when any C++ file differs from what clang-format makes of it (.clang-format at the root),
# and names each file with the first lines that differ, so the fix is `clang-format -i FILE`.
#   clang_format_check.sh SOURCE_DIR [CLANG_FORMAT]
set -euo pipefail
root=$1
clang_format=${2:-clang-format}
# shellcheck source=cpp_sources.sh
source "$(dirname "$0")/cpp_sources.sh"

mapfile -t files < <(cpp_sources "$root")
[ ${#files[@]} -gt 0 ] || { echo "clang-format check: no C++ files found under $root" >&2; exit 1; }
bad=0
for f in "${files[@]}"; do
  if ! out=$("$clang_format" --style=file "$f" | diff -u --label "$f" --label "$f (formatted)" "$f" -); then
    bad=$((bad + 1))
    printf '%s\n' "$out" | head -12
  fi
done
if [ "$bad" -gt 0 ]; then
  echo "clang-format check: $bad of ${#files[@]} files are not formatted (run clang-format -i on them)" >&2
  exit 1
fi
echo "clang-format check: ${#files[@]} files formatted"
