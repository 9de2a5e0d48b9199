# shellcheck shell=bash
# Node.js helpers for tests that run JavaScript: source, then call.

# node_install DIR: checks for node and npm, then installs DIR's package-lock.json into
# DIR/node_modules with npm ci, unless the installed tree was made from the same lock.
node_install() {
  local dir=$1 tool
  for tool in node npm; do
    command -v "$tool" >/dev/null || {
      echo "$tool not found (Debian: apt-get install nodejs npm)" >&2
      return 1
    }
  done
  if ! cmp -s "$dir/package-lock.json" "$dir/node_modules/.idemwatch-lock" 2>/dev/null; then
    (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error) || return
    cp "$dir/package-lock.json" "$dir/node_modules/.idemwatch-lock"
  fi
}
