#!/usr/bin/env bash
# require.sh PATH PACKAGE [PATH PACKAGE ...]: make sure each program the tests use is there.
# On Debian as root, install the missing ones from Debian's packages; elsewhere say exactly what
# is missing. (The browser tests drive Debian's Chromium with Playwright, which never downloads
# a browser here; the sandbox tests need bubblewrap and the system's Python.)
set -euo pipefail

can_install() { [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; }

missing=()
while [ $# -ge 2 ]; do
  path=$1 package=$2; shift 2
  [ -x "$path" ] || missing+=("$path:$package")
done
[ ${#missing[@]} -eq 0 ] && { echo "required programs: all there"; exit 0; }

if can_install; then
  packages=("${missing[@]#*:}")
  # apt-get update only when a package is unknown (no lists yet, or stale ones).
  for package in "${packages[@]}"; do
    if ! apt-cache show "$package" >/dev/null 2>&1; then apt-get update -qq; break; fi
  done
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${packages[@]}" >/dev/null || true
fi

still=()
for entry in "${missing[@]}"; do [ -x "${entry%%:*}" ] || still+=("$entry"); done
if [ ${#still[@]} -gt 0 ]; then
  echo "The tests need these programs, which are missing and could not be installed here:" >&2
  for entry in "${still[@]}"; do echo "  - ${entry%%:*} (Debian package ${entry#*:})" >&2; done
  [ "$(id -u)" = 0 ] || echo "  Not root, so nothing was installed." >&2
  exit 1
fi
echo "required programs: installed ${missing[*]#*:}"
