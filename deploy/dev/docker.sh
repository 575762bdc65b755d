#!/usr/bin/env bash
# Make sure a Docker engine answers and the sandbox's base images are there.
# On Debian as root: install docker.io and debootstrap if missing, start dockerd (no bridge, no
# iptables: nothing here may send traffic to private address ranges) and build the base images
# with debootstrap (no image registry is reachable; manage.py build_base_images): bookworm has Python 3.11, bullseye 3.9, so
# the environment builder has an older Python to search. Elsewhere say exactly what is missing.
# Run again, it does nothing (quickly).
set -euo pipefail

RELEASES=${COMMITGYM_BASE_RELEASES:-bookworm bullseye}
PACKAGES=python3,python3-venv,git,ca-certificates
LOG=/tmp/commitgym-dockerd.log

can_install() { [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; }
engine_answers() { command -v docker >/dev/null && docker info >/dev/null 2>&1; }
fail() {
  echo "The Docker sandbox needs something that is missing and could not be set up here:" >&2
  printf '  - %s\n' "$@" >&2
  [ "$(id -u)" = 0 ] || echo "  Not root, so nothing was installed or started." >&2
  exit 1
}
apt_updated=""
apt_install() {
  for package in "$@"; do
    if ! apt-cache show "$package" >/dev/null 2>&1 && [ -z "$apt_updated" ]; then apt-get update -qq; apt_updated=1; fi
  done
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

# 1. The engine.
if ! engine_answers; then
  if can_install; then
    missing=()
    command -v dockerd >/dev/null || missing+=(docker.io)
    command -v debootstrap >/dev/null || missing+=(debootstrap)
    [ ${#missing[@]} -eq 0 ] || apt_install "${missing[@]}"
    if ! pgrep -x dockerd >/dev/null; then
      echo "docker: starting dockerd (log: $LOG)"
      setsid nohup dockerd --bridge=none --iptables=false >"$LOG" 2>&1 </dev/null &
    fi
    for _ in $(seq 60); do engine_answers && break; sleep 1; done
  fi
  engine_answers || fail "a Docker engine answering 'docker info' (Debian: apt-get install docker.io, then dockerd --bridge=none --iptables=false; see $LOG)"
fi

# 2. The base images, built by the project's own command (after `make install`), which leaves an image
# that has every Python it should be (its label says which) as it is, quickly.
releases=()
for release in $RELEASES; do releases+=(--release "$release"); done
if ! command -v debootstrap >/dev/null; then
  can_install && apt_install debootstrap
fi
PROJECT=$(cd "$(dirname "$0")/../.." && pwd)
[ -x "$PROJECT/.venv/bin/python" ] || fail "the project's .venv (make install)"
"$PROJECT/.venv/bin/python" "$PROJECT/manage.py" build_base_images "${releases[@]}" \
  || fail "base images built with debootstrap (see the error above)"
