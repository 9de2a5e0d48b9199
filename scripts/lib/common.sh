# shellcheck shell=bash
# Shared by scripts/demo and scripts/test: Debian packages, the build.

IDEMWATCH_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

# Everything the build, the tests and the demo need, from Debian's archive.
IDEMWATCH_PACKAGES=(
  build-essential cmake ninja-build pkg-config git
  libpqxx-dev libssl-dev nlohmann-json3-dev prometheus-cpp-dev libcivetweb-dev libboost-dev
  qt6-base-dev qt6-charts-dev libgl-dev
  postgresql postgresql-contrib pgbouncer patroni etcd-server haproxy
  prometheus xvfb openssl curl shellcheck
  libcli11-dev libyaml-cpp-dev libpugixml-dev clang-format clang-tidy
  help2man lintian dpkg-dev systemd
)
# The protocol clients' tests (clients/): Python's psycopg, and Node.js with npm. A NodeSource
# nodejs already ships npm and conflicts with Debian's npm package, so npm only when missing.
IDEMWATCH_PACKAGES+=(nodejs python3-psycopg)
command -v npm >/dev/null 2>&1 || IDEMWATCH_PACKAGES+=(npm)

say() { printf '==> %s\n' "$*" >&2; }

# Under `set -e` a failing command ends the script; say which one, in one line, so that no script
# of ours ever exits silently.
idem_on_error() {
  local status=$1 line=$2 command=$3
  printf '%s: failed (exit %s) at line %s: %s\n' "$(basename "$0")" "$status" "$line" "$command" >&2
}
set -o errtrace
trap 'idem_on_error $? "$LINENO" "$BASH_COMMAND"' ERR

# Installs what is missing; with sudo when not root.
install_packages() {
  local missing=()
  local p
  for p in "${IDEMWATCH_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  say "installing Debian packages: ${missing[*]}"
  local sudo=()
  [ "$(id -u)" -eq 0 ] || sudo=(sudo)
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# release_config_args: sets RELEASE_ARGS to the cmake arguments of the build a Debian package is
# made from: Release (-O3) with Debian's hardening flags (dpkg-buildflags: fortify, stack
# protector, relro, now). The demo, the tests and scripts/package all build this way, so what is
# tested is what is packaged, and the packaging tests reuse the test build instead of compiling
# everything a second time. Asked from the source folder: the flags' -ffile-prefix-map names the
# current folder, and flags that differ between runs would rebuild everything.
release_config_args() {
  local cxxflags ldflags
  cxxflags=$(cd "$IDEMWATCH_ROOT" && export DEB_BUILD_MAINT_OPTIONS=hardening=+all &&
    echo "$(dpkg-buildflags --get CPPFLAGS) $(dpkg-buildflags --get CXXFLAGS)")
  ldflags=$(cd "$IDEMWATCH_ROOT" && DEB_BUILD_MAINT_OPTIONS=hardening=+all dpkg-buildflags --get LDFLAGS)
  RELEASE_ARGS=(-DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS="$cxxflags"
    -DCMAKE_EXE_LINKER_FLAGS="$ldflags" -DCMAKE_SHARED_LINKER_FLAGS="$ldflags"
    -DCMAKE_SKIP_INSTALL_ALL_DEPENDENCY=ON)
}

# build DIR [cmake args...]: configure and build everything, or only the targets named in
# IDEMWATCH_BUILD_TARGETS (space-separated: "tst_protocol idemctl").
build_tree() {
  local dir=$1
  shift
  release_config_args
  # Configured on every run (a second run takes a moment), so that the arguments given here
  # always hold, even in a build folder configured otherwise before.
  cmake -S "$IDEMWATCH_ROOT" -B "$dir" -G Ninja "${RELEASE_ARGS[@]}" "$@" >/dev/null
  local targets=()
  if [ -n "${IDEMWATCH_BUILD_TARGETS:-}" ]; then
    read -r -a targets <<<"$IDEMWATCH_BUILD_TARGETS"
    say "building ${targets[*]} in $dir"
    cmake --build "$dir" --parallel "$(nproc)" --target "${targets[@]}"
  else
    say "building in $dir"
    cmake --build "$dir" --parallel "$(nproc)"
  fi
}
