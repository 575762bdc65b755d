#!/usr/bin/env bash
# Make sure PostgreSQL and Redis answer for the test suite.
# On Debian as root, install and start what is missing; elsewhere say exactly what is missing.
set -euo pipefail

PG_HOST=${PG_HOST:-127.0.0.1}
PG_PORT=${PG_PORT:-5432}
REDIS_HOST=${REDIS_HOST:-127.0.0.1}
REDIS_PORT=${REDIS_PORT:-6379}

can_install() { [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; }
apt_updated=""
apt_install() {
  if [ -z "$apt_updated" ]; then apt-get update -qq; apt_updated=1; fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

pg_ready() { pg_isready -q -h "$PG_HOST" -p "$PG_PORT" 2>/dev/null; }
redis_ready() { [ "$(redis-cli -h "$REDIS_HOST" -p "$REDIS_PORT" ping 2>/dev/null)" = PONG ]; }

missing=()

if ! command -v pg_isready >/dev/null || ! pg_ready; then
  if can_install; then
    command -v pg_ctlcluster >/dev/null || apt_install postgresql
    version=$(ls /etc/postgresql | sort -V | tail -n 1)
    pg_ctlcluster --skip-systemctl-redirect "$version" main start 2>/dev/null || true
    for _ in $(seq 30); do pg_ready && break; sleep 1; done
  fi
  pg_ready || missing+=("PostgreSQL on $PG_HOST:$PG_PORT (Debian: apt-get install postgresql, then pg_ctlcluster VERSION main start)")
fi

if ! command -v redis-cli >/dev/null || ! redis_ready; then
  if can_install; then
    command -v redis-server >/dev/null || apt_install redis-server
    redis-server --daemonize yes --bind 127.0.0.1 --port "$REDIS_PORT" --save "" --appendonly no \
      --dir /tmp --logfile /tmp/commitgym-redis.log
    for _ in $(seq 30); do redis_ready && break; sleep 1; done
  fi
  redis_ready || missing+=("Redis on $REDIS_HOST:$REDIS_PORT (Debian: apt-get install redis-server)")
fi

if [ ${#missing[@]} -gt 0 ]; then
  echo "The test suite needs services that are not running and could not be started here:" >&2
  printf '  - %s\n' "${missing[@]}" >&2
  exit 1
fi

# The test database role: trust auth as postgres locally; a password comes in DATABASE_URL elsewhere.
echo "services: PostgreSQL and Redis answer"
