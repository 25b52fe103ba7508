#!/usr/bin/env bash
# Install what the test suite needs: Python packages, and for the browser tests Debian's
# Chromium and a CJK font (skipped when already present or when apt is unavailable).
set -euo pipefail
cd "$(dirname "$0")/.."
python -m pip install -q -r requirements-dev.txt
# the lab itself, editable: bench/ scripts, tests and `sdlab` import core and app from this checkout
python -m pip install -q -e . --no-deps
if ! command -v chromium >/dev/null || ! fc-list 2>/dev/null | grep -qi "noto.*cjk"; then
  if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium fonts-noto-cjk >/dev/null
  else
    echo "note: install chromium and fonts-noto-cjk for the browser tests" >&2
  fi
fi
