# shellcheck shell=bash
# A minimal Debian 12 root (debootstrap --variant=minbase, plus git, ca-certificates and sudo: what a
# new user's machine has) to run the README's commands in, so that nothing installed on this
# machine by earlier work can hide a missing install step. Sourced by scripts/fresh-check.
#
# The pristine base is made once and kept as a tarball under $IDEMWATCH_FRESH_CACHE; each run
# unpacks a new copy, so nothing installed during a run survives it. Downloaded .deb files are kept
# in the same cache (apt's archive folder, bind-mounted): a run still installs every package.
#
#   fresh_root_usable         says in one line why a fresh root cannot be made here, or nothing
#   fresh_root_run CMD...     runs CMD in a new root with the checkout copied to /src; proc, sys
#                             and dev are mounted for the run and unmounted on every exit path

IDEMWATCH_FRESH_CACHE=${IDEMWATCH_FRESH_CACHE:-/var/cache/idemwatch}
IDEMWATCH_FRESH_SUITE=bookworm
IDEMWATCH_FRESH_EXTRA=git,ca-certificates,sudo

# The mirror this machine's apt already uses (the archive is the one network we have).
fresh_mirror() {
  local uri
  uri=$(grep -hoE '^(URIs:[[:space:]]*|deb[[:space:]]+(\[[^]]*\][[:space:]]+)?)https?://[^[:space:]]+/debian/?' \
    /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null |
    grep -oE 'https?://[^[:space:]]+' | grep -v security | head -n 1) || true
  echo "${uri:-http://deb.debian.org/debian}"
}

fresh_root_usable() {
  if [ "$(id -u)" -ne 0 ]; then
    echo "not root: a fresh root needs debootstrap, chroot and mount"
    return 1
  fi
  if ! command -v debootstrap >/dev/null 2>&1; then
    if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      debootstrap >/dev/null 2>&1; then
      echo "debootstrap is not installed and apt-get could not install it"
      return 1
    fi
  fi
  if ! unshare --mount --propagation private mount -t tmpfs none /mnt >/dev/null 2>&1; then
    echo "no mount rights here (mount in a private namespace was refused)"
    return 1
  fi
  return 0
}

# The pristine base as a tarball; made when missing. Only the base: nothing of a run goes back in.
fresh_base_tarball() {
  local tarball=$IDEMWATCH_FRESH_CACHE/$IDEMWATCH_FRESH_SUITE-minbase.tar
  if [ ! -s "$tarball" ]; then
    mkdir -p "$IDEMWATCH_FRESH_CACHE"
    local tmp
    tmp=$(mktemp -d "$IDEMWATCH_FRESH_CACHE/base.XXXXXX")
    say "making the pristine $IDEMWATCH_FRESH_SUITE base with debootstrap (once; cached as $tarball)"
    if ! debootstrap --variant=minbase --include="$IDEMWATCH_FRESH_EXTRA" \
      "$IDEMWATCH_FRESH_SUITE" "$tmp/root" "$(fresh_mirror)" >"$tmp/debootstrap.log" 2>&1; then
      echo "debootstrap failed; see $tmp/debootstrap.log" >&2
      tail -n 5 "$tmp/debootstrap.log" >&2
      return 1
    fi
    tar -C "$tmp/root" -cf "$tarball.part" . && mv "$tarball.part" "$tarball"
    rm -rf "$tmp"
  fi
  echo "$tarball"
}

# Runs inside a private mount namespace (unshare), so that even a killed run leaves no mount
# behind on the host; the trap unmounts on every ordinary exit path as well.
fresh_root_unmount() {
  local root=$1 m
  # Processes left in the root (a server a step forgot to stop) would keep its mounts busy.
  for m in /proc/[0-9]*; do
    [ "$(readlink "$m/root" 2>/dev/null)" = "$root" ] && kill -9 "${m#/proc/}" 2>/dev/null
  done
  for m in var/cache/apt/archives dev/shm dev/pts dev sys proc; do
    mountpoint -q "$root/$m" && umount -l "$root/$m"
  done
  return 0
}

fresh_root_inner() {
  local root=$1
  shift
  # shellcheck disable=SC2064  # the root is fixed now, not when the trap runs
  trap "fresh_root_unmount '$root'" EXIT
  mount -t proc proc "$root/proc"
  mount -t sysfs sysfs "$root/sys"
  mount --bind /dev "$root/dev"
  mount -t devpts -o newinstance,ptmxmode=0666 devpts "$root/dev/pts" 2>/dev/null ||
    mount --bind /dev/pts "$root/dev/pts"
  mount -t tmpfs -o mode=1777 shm "$root/dev/shm"
  mkdir -p "$IDEMWATCH_FRESH_CACHE/apt-archives/partial"
  mount --bind "$IDEMWATCH_FRESH_CACHE/apt-archives" "$root/var/cache/apt/archives"
  # A clean environment, but for the machine's network settings (proxies, CA bundles).
  local passed=() name
  for name in http_proxy https_proxy no_proxy HTTP_PROXY HTTPS_PROXY NO_PROXY SSL_CERT_FILE \
    SSL_CERT_DIR NODE_EXTRA_CA_CERTS CURL_CA_BUNDLE REQUESTS_CA_BUNDLE GIT_SSL_CAINFO; do
    [ -n "${!name:-}" ] && passed+=("$name=${!name}")
  done
  chroot "$root" /usr/bin/env -i HOME=/root PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 \
    TERM="${TERM:-dumb}" CI="${CI:-}" "${passed[@]}" "$@"
}

fresh_root_run() {
  local tarball work root status=0
  tarball=$(fresh_base_tarball) || return 1
  work=$(mktemp -d /var/tmp/idemwatch-fresh.XXXXXX)
  root=$work/root
  mkdir -p "$root"
  tar -C "$root" -xf "$tarball"
  # The machine's package sources, name resolution and hosts, as a new machine would have them.
  cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true
  if ls /etc/apt/sources.list.d/*.sources >/dev/null 2>&1; then
    rm -f "$root/etc/apt/sources.list"
    cp /etc/apt/sources.list.d/*.sources "$root/etc/apt/sources.list.d/"
  fi
  # The network's trust as this machine has it: the CA bundle (which may hold a certificate the
  # network's proxy presents, beyond Debian's own) and npm's global settings. Kept as a local CA
  # too, so that a later update-ca-certificates in the root keeps it.
  if [ -s /etc/ssl/certs/ca-certificates.crt ]; then
    mkdir -p "$root/usr/local/share/ca-certificates"
    cp /etc/ssl/certs/ca-certificates.crt "$root/usr/local/share/ca-certificates/host-trust.crt"
    cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"
  fi
  [ -f /etc/npmrc ] && cp /etc/npmrc "$root/etc/npmrc"
  # apt keeps what it downloads (Debian's default); the cache folder is shared between runs.
  echo 'Binary::apt::APT::Keep-Downloaded-Packages "true";' >"$root/etc/apt/apt.conf.d/10keep"
  # The checkout as it is (tracked and untracked files, not ignored ones such as build trees).
  mkdir -p "$root/src"
  local file files=()
  while IFS= read -r -d '' file; do
    [ -e "$IDEMWATCH_ROOT/$file" ] && files+=("$file")  # a deleted file is still listed as tracked
  done < <(git -C "$IDEMWATCH_ROOT" ls-files -z --cached --others --exclude-standard)
  tar -C "$IDEMWATCH_ROOT" -cf - "${files[@]}" | tar -C "$root/src" -xf -
  cp -a "$IDEMWATCH_ROOT/.git" "$root/src/.git"
  # A copy of shared/ beside the checkout, as CI lays it (read-only).
  if [ -d "$IDEMWATCH_ROOT/../shared" ]; then
    cp -a "$IDEMWATCH_ROOT/../shared" "$root/shared"
    chmod -R a-w "$root/shared"
  fi
  say "fresh Debian root in $root (checkout copied to /src)"
  unshare --mount --propagation private bash -c "$(declare -f say fresh_root_unmount fresh_root_inner); \
    IDEMWATCH_FRESH_CACHE='$IDEMWATCH_FRESH_CACHE' fresh_root_inner \"\$@\"" \
    fresh "$root" "$@" || status=$?
  rm -rf "$work"
  return "$status"
}
