#!/usr/bin/env bash
# Code, tests, SQL and docs speak of the product's behaviour, not of the plan that produced it: a
# reader cannot resolve a tracker's numbers ("issue N", "hole N", "finding N", "stop N"), so none
# may appear.
# Fails naming each file and line that does. Upstream links (a project's /issues/N) are allowed.
#   planning_history_check.sh SOURCE_DIR
set -euo pipefail
root=$1
pattern='\b(issues?|holes?|findings?|stops?|tickets?|points?) #?[0-9]+\b'
list() {
  if git -C "$root" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    git -C "$root" ls-files
  else
    (cd "$root" && find . -type f ! -path './build*' ! -path '*/node_modules/*' | sed 's|^\./||')
  fi
}
scan() {
  cd "$root"
  list | grep -vE '^(\.ci/|tests/lint/planning_history_check\.sh$)' |
    while IFS= read -r f; do if [ -f "$f" ]; then printf '%s\0' "$f"; fi; done |
    xargs -0 grep -InHiE "$pattern" 2>/dev/null | grep -viE 'https?://[^ ]*/issues/[0-9]+'
}
found=$(scan || true)
if [ -n "$found" ]; then
  printf '%s\n' "$found"
  echo "planning history check: the lines above name the plan (issue, hole, finding or stop" \
    "numbers); name the behaviour instead" >&2
  exit 1
fi
echo "planning history check: clean"
