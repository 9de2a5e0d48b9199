#!/usr/bin/env bash
# The .debs that scripts/package made, checked as a platform team would take them:
#   check_packages.sh CHECK DEB_DIR VERSION SOURCE_DIR
# CHECK is one of
#   fields    the five packages exist, with the project's version, their fields, dependencies
#             found by dpkg-shlibdeps (libc6 at least) and their /etc files as conffiles
#   lintian   no errors and no warnings: those left are overridden with a reason in packaging/lintian/
#   versions  every program of the unpacked packages runs with --version, with the libraries
#             as installed (nothing "not found" by the loader)
#   units     systemd-analyze verify of every unit, in the unpacked root
#   exposure  systemd-analyze security --offline rates every service 2.0 or better
#   manpages  every flag (and subcommand) a program's --help prints is in its man page
# Each check unpacks the packages (dpkg-deb -x) into a temporary root of its own.
set -euo pipefail
check=${1:?usage: check_packages.sh CHECK DEB_DIR VERSION SOURCE_DIR}
deb_dir=${2:?}
version=${3:?}
source_dir=${4:?}
# shellcheck source=../../packaging/man/help_text.sh
source "$source_dir/packaging/man/help_text.sh"

packages=(idemwatch-exporter idemwatch-admin idemwatch-proxy idemwatch-tools idemwatch-monitoring)
exposure_bound=2.0
failures=0
fail() {
  printf 'FAIL: %s\n' "$*"
  failures=$((failures + 1))
}
pass() { printf 'ok: %s\n' "$*"; }

root=$(mktemp -d /tmp/idemwatch-packaging.XXXXXX)
trap 'rm -rf "$root"' EXIT

deb_of() {
  local matches=("$deb_dir/$1"_*.deb)
  [ -f "${matches[0]}" ] || {
    echo "no $1 package in $deb_dir (run scripts/package $deb_dir)" >&2
    return 1
  }
  printf '%s\n' "${matches[0]}"
}

unpack_all() {
  local p
  for p in "${packages[@]}"; do dpkg-deb -x "$(deb_of "$p")" "$root"; done
}

check_fields() {
  local p deb field
  for p in "${packages[@]}"; do
    deb=$(deb_of "$p")
    [ "$(dpkg-deb -f "$deb" Package)" = "$p" ] || fail "$p: Package field"
    [ "$(dpkg-deb -f "$deb" Version)" = "$version" ] || fail "$p: Version is not $version"
    for field in Maintainer Section Priority Homepage Description Installed-Size; do
      [ -n "$(dpkg-deb -f "$deb" "$field")" ] || fail "$p: no $field field"
    done
    # Arch-dependent packages get their Depends from dpkg-shlibdeps, which always names libc6.
    if [ "$(dpkg-deb -f "$deb" Architecture)" = all ]; then
      [ "$p" = idemwatch-monitoring ] || fail "$p: Architecture all"
    else
      [ "$p" != idemwatch-monitoring ] || fail "$p: should be Architecture all"
      dpkg-deb -f "$deb" Depends | grep -q 'libc6 (>=' || fail "$p: Depends lacks libc6 (shlibdeps?)"
    fi
    # Every file under /etc is a conffile.
    local etc conffiles
    etc=$(dpkg-deb -c "$deb" | awk '$NF ~ /^\.\/etc\/.*[^\/]$/ {sub(/^\./, "", $NF); print $NF}' | sort)
    conffiles=$(dpkg-deb --ctrl-tarfile "$deb" | tar -xO ./conffiles 2>/dev/null | sort || true)
    [ "$etc" = "$conffiles" ] || fail "$p: conffiles [$conffiles] differ from /etc files [$etc]"
    pass "$p fields: $(dpkg-deb -f "$deb" Depends | cut -c1-100)"
  done
  dpkg-deb -f "$(deb_of idemwatch-admin)" Depends | grep -q libqt6widgets6 ||
    fail "idemwatch-admin: Depends lacks Qt's widgets library"
}

check_lintian() {
  local p out
  for p in "${packages[@]}"; do
    out=$(lintian --fail-on error,warning --display-info "$(deb_of "$p")" 2>&1) || fail "$p: lintian errors or warnings"
    printf '%s: %s\n' "$p" "${out:-clean}"
  done
}

check_versions() {
  unpack_all
  local programs=("$root"/usr/bin/*) program out
  [ ${#programs[@]} -eq 4 ] || fail "expected 4 programs in /usr/bin, found: ${programs[*]##*/}"
  for program in "${programs[@]}"; do
    if ldd "$program" | grep -q 'not found'; then
      fail "${program##*/}: libraries not found: $(ldd "$program" | grep 'not found' | tr -s ' \n' ' ')"
    fi
    out=$(QT_QPA_PLATFORM=offscreen "$program" --version 2>/dev/null) || fail "${program##*/} --version failed"
    grep -q "$version" <<<"$out" || fail "${program##*/} --version does not say $version: $out"
    pass "${program##*/} --version: $out"
  done
  # The exporter needs no library of its own beside it (its web server is built in).
  [ ! -e "$root/usr/lib/idemwatch" ] || fail "/usr/lib/idemwatch should not exist any more"
}

units() { find "$root/usr/lib/systemd/system" -name 'idemwatch-*' -type f | sort; }

check_units() {
  unpack_all
  # What the units refer to must be there: systemd's own units (sysinit.target, ...) from the
  # host, the Exec*= programs and the Documentation= man pages from the packages.
  cp -a --no-clobber /lib/systemd/system/. "$root/usr/lib/systemd/system/"
  # The one program of another package a unit calls: kill (procps), for the proxy's reload.
  mkdir -p "$root/bin"
  cp /bin/kill "$root/bin/kill"
  export MANPATH=$root/usr/share/man
  local unit out
  [ "$(units | wc -l)" -eq 8 ] || fail "expected 8 units, found: $(units | xargs -n1 basename | tr '\n' ' ')"
  for unit in $(units); do
    if out=$(systemd-analyze verify --root="$root" "$unit" 2>&1) && [ -z "$out" ]; then
      pass "verify ${unit##*/}"
    else
      fail "verify ${unit##*/}: $out"
    fi
  done
  # The TLS key reaches the dynamic user as a credential; no shipped text asks for a readable key.
  local example=$root/etc/idemwatch/web-config.yml.example
  grep -Eq '^ *key_file: /run/credentials/idemwatch-exporter\.service/' "$example" ||
    fail "web-config.yml.example: key_file is not the service's credential"
  if grep -Rn '0644\|0640\|0444' "$example" "$root/usr/share/doc/idemwatch-exporter/README.Debian"; then
    fail "the exporter's documents suggest a key mode others may read"
  else
    pass "the TLS key is handed over as a credential"
  fi
}

# exposure_of UNIT_FILE: the overall exposure systemd-analyze gives it, e.g. 1.8.
exposure_of() {
  systemd-analyze security --offline=true --root="$root" --no-pager "$1" 2>&1 |
    sed -nE 's/.*Overall exposure level for [^:]*: ([0-9.]+).*/\1/p'
}

check_exposure() {
  unpack_all
  # The bound bites: an unhardened service rates far worse than it.
  printf '[Service]\nExecStart=/usr/bin/idemctl version\n' >"$root/usr/lib/systemd/system/bare.service"
  local bare
  bare=$(exposure_of "$root/usr/lib/systemd/system/bare.service")
  awk -v s="${bare:-0}" -v b="$exposure_bound" 'BEGIN {exit !(s > b)}' ||
    fail "an unhardened unit rated ${bare:-nothing}, not above $exposure_bound: the figure is not read"
  rm "$root/usr/lib/systemd/system/bare.service"
  local unit score
  for unit in $(units | grep '\.service$'); do
    score=$(exposure_of "$unit")
    if [ -n "$score" ] && awk -v s="$score" -v b="$exposure_bound" 'BEGIN {exit !(s <= b)}'; then
      pass "exposure ${unit##*/}: $score (bound $exposure_bound; unhardened: $bare)"
    else
      fail "exposure ${unit##*/}: ${score:-unreadable} (bound $exposure_bound)"
    fi
  done
}

# missing_flags HELP_TEXT MAN_TEXT: the flags of the help text that the man page does not name.
missing_flags() {
  comm -23 <(help_flags <<<"$1") <(help_flags <<<"$2")
}

check_manpages() {
  unpack_all
  # The check sees a stale page: a flag the page lacks is reported.
  [ "$(missing_flags '  --in-page  --not-in-page=N' 'the --in-page flag')" = --not-in-page ] ||
    fail "missing_flags does not report a flag the page lacks"
  local program name page man help command missing
  for program in "$root"/usr/bin/*; do
    name=${program##*/}
    page=$root/usr/share/man/man1/$name.1.gz
    if [ ! -f "$page" ]; then
      fail "$name: no man page $page"
      continue
    fi
    man=$(man_text "$page")
    help=$(QT_QPA_PLATFORM=offscreen "$program" --help 2>&1)
    missing=$(missing_flags "$help" "$man")
    [ -z "$missing" ] || fail "$name: --help flags missing from the man page: $(tr '\n' ' ' <<<"$missing")"
    for command in $(help_commands <<<"$help"); do
      grep -qF "$name $command" <<<"$man" || fail "$name: the man page has no section for '$command'"
      missing=$(missing_flags "$(QT_QPA_PLATFORM=offscreen "$program" "$command" --help 2>&1)" "$man")
      [ -z "$missing" ] || fail "$name $command: flags missing from the man page: $(tr '\n' ' ' <<<"$missing")"
    done
    pass "$name.1: $(help_flags <<<"$help" | wc -l) flags, commands: $(help_commands <<<"$help" | tr '\n' ' ')"
  done
}

case $check in
  fields | lintian | versions | units | exposure | manpages) "check_$check" ;;
  *)
    echo "unknown check '$check'" >&2
    exit 2
    ;;
esac
[ "$failures" -eq 0 ]
