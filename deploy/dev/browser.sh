#!/usr/bin/env bash
# Make sure a Chromium from Debian packages is at /usr/bin/chromium for the browser tests.
# The tests drive it with Playwright's Python package; Playwright never downloads a browser here.
# On Debian as root, install it when missing; elsewhere say exactly what is missing.
set -euo pipefail

CHROMIUM=/usr/bin/chromium  # the path tests/browser/conftest.py launches

can_install() { [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; }
apt_lists_present() { compgen -G "/var/lib/apt/lists/*_Packages*" >/dev/null; }

chromium_ok() { [ -x "$CHROMIUM" ] && "$CHROMIUM" --headless --no-sandbox --version >/dev/null 2>&1; }

if ! chromium_ok; then
  if can_install; then
    # apt-get update only when the package is unknown (no lists yet, or stale ones without it).
    # A failure here falls through to the check below, which says what is missing.
    {
      if ! apt_lists_present || ! apt-cache show chromium >/dev/null 2>&1; then
        apt-get update -qq
      fi
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
    } || true
  fi
fi

if ! chromium_ok; then
  echo "The browser tests need Chromium at $CHROMIUM, and it is missing or does not start." >&2
  if [ "$(id -u)" != 0 ]; then
    echo "  Not root, so it was not installed. Debian: sudo apt-get install chromium" >&2
  elif ! command -v apt-get >/dev/null; then
    echo "  No apt-get here. Install a Chromium build at $CHROMIUM." >&2
  else
    echo "  apt-get install chromium did not give a working $CHROMIUM." >&2
    echo "  Try: $CHROMIUM --headless --no-sandbox --version" >&2
  fi
  exit 1
fi

echo "browser: $("$CHROMIUM" --headless --no-sandbox --version 2>/dev/null | head -n 1)"
