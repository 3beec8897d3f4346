#!/usr/bin/env bash
# Installs what the browser tests of the web view (test/ui/) drive: Debian's Chromium and ChromeDriver.
# Idempotent: does nothing when both are already there. Exits non-zero, saying why, when it cannot.
set -euo pipefail

CHROMIUM=${CALDERA_CHROMIUM:-/usr/bin/chromium}
CHROMEDRIVER=${CALDERA_CHROMEDRIVER:-/usr/bin/chromedriver}

if [ -x "$CHROMIUM" ] && [ -x "$CHROMEDRIVER" ]; then
    exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
        SUDO="sudo -n"
    else
        echo "install-browser: $CHROMIUM or $CHROMEDRIVER is missing, and installing them needs root" \
             "(run: apt-get install -y chromium chromium-driver)" >&2
        exit 2
    fi
else
    SUDO=""
fi

if ! command -v apt-get >/dev/null 2>&1; then
    echo "install-browser: no apt-get here; install Chromium and ChromeDriver by other means" \
         "and set CALDERA_CHROMIUM / CALDERA_CHROMEDRIVER" >&2
    exit 3
fi

export DEBIAN_FRONTEND=noninteractive
if ! $SUDO apt-get update -q >&2; then
    echo "install-browser: apt-get update failed" >&2
    exit 4
fi
if ! $SUDO apt-get install -y -q --no-install-recommends chromium chromium-driver >&2; then
    echo "install-browser: apt-get install chromium chromium-driver failed" >&2
    exit 5
fi
if [ ! -x "$CHROMIUM" ] || [ ! -x "$CHROMEDRIVER" ]; then
    echo "install-browser: installed, but $CHROMIUM or $CHROMEDRIVER is still missing" >&2
    exit 6
fi
