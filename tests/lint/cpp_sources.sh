# shellcheck shell=bash
# cpp_sources ROOT [DIR...]: the project's own C++ files under the given folders (all of them when
# none is given), one per line: what git tracks in a checkout, else what find sees (a tarball).
cpp_sources() {
  local root=$1
  shift
  local dirs=("$@")
  [ ${#dirs[@]} -gt 0 ] || dirs=(shared exporter gui proxy tools dashboards tests bench)
  if git -C "$root" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    git -C "$root" ls-files -- "${dirs[@]/%//*.cpp}" "${dirs[@]/%//*.hpp}" "${dirs[@]/%//*.h}" |
      sed "s|^|$root/|"
  else
    (cd "$root" && find "${dirs[@]}" -name '*.cpp' -o -name '*.hpp' -o -name '*.h') | sed "s|^|$root/|"
  fi
}
