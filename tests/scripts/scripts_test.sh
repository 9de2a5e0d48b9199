#!/usr/bin/env bash
# What the scripts promise a new machine, checked without one: sourcing them needs nothing
# installed, a missing PostgreSQL is named when it is needed, a failing command is named in one
# line, and fresh-check refuses a bad mode with a usage line.
#   bash tests/scripts/scripts_test.sh SOURCE_DIR
set -uo pipefail
root=${1:?usage: scripts_test.sh SOURCE_DIR}
failures=0 passes=0
check() {
  local name=$1
  shift
  if "$@"; then
    passes=$((passes + 1))
    echo "PASS: $name"
  else
    failures=$((failures + 1))
    echo "FAIL: $name"
  fi
}
empty=$(mktemp -d)
trap 'rm -rf "$empty"' EXIT

# 1. pg.sh sourced under set -euo pipefail on a machine without PostgreSQL: the script goes on
#    (before the fix it ended silently with status 2, before install_packages could install it).
out=$(IDEMWATCH_PG_LIB=$empty PG_BIN='' bash -c "set -euo pipefail; source '$root/scripts/lib/common.sh'; \
  source '$root/scripts/lib/pg.sh'; echo sourced" 2>&1)
check "pg.sh sources without PostgreSQL installed" test "$out" = sourced

# 2. ...and when a cluster is wanted, it says what is missing in one line and fails.
out=$(IDEMWATCH_PG_LIB=$empty PG_BIN='' bash -c "set -euo pipefail; source '$root/scripts/lib/common.sh'; \
  source '$root/scripts/lib/pg.sh'; pg_start '$empty/pg'; echo started" 2>&1)
status=$?
check "pg_start without PostgreSQL fails" test "$status" -ne 0
check "pg_start names the missing binaries" grep -q "PostgreSQL server binaries not found in $empty" <<<"$out"
check "pg_start does not go on" test "$(grep -c started <<<"$out")" -eq 0

# 3. A failing command in a script that sources common.sh is named, with its line and status.
cat >"$empty/fails" <<SH
#!/usr/bin/env bash
set -euo pipefail
source '$root/scripts/lib/common.sh'
echo before
ls /nonexistent-idemwatch-path >/dev/null
echo after
SH
out=$(bash "$empty/fails" 2>&1)
status=$?
check "a failing command still fails the script" test "$status" -ne 0
check "the failing command is named in one line" \
  grep -qE '^fails: failed \(exit 2\) at line 5: ls /nonexistent-idemwatch-path' <<<"$out"
check "nothing runs after it" test "$(grep -c after <<<"$out")" -eq 0

# 4. fresh-check: a mode it does not know is refused with a usage line, before anything is made.
out=$("$root/scripts/fresh-check" bogus 2>&1)
status=$?
check "fresh-check refuses an unknown mode" test "$status" -eq 2
check "fresh-check says its usage" grep -q "usage: scripts/fresh-check \[test|demo\] (got 'bogus')" <<<"$out"

echo "$passes passed, $failures failed"
[ "$failures" -eq 0 ]
