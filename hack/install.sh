#!/usr/bin/env bash
# Shared by hack/demo.sh and hack/test.sh: create .venv in the checkout and install Caldera from this
# checkout's own files (pyproject.toml), showing progress (one line per package pip fetches or builds,
# then a summary) instead of a silent minute, and short when everything is already installed.
# Usage: bash hack/install.sh [EXTRAS]   e.g.  bash hack/install.sh test
set -euo pipefail
cd "$(dirname "$0")/.."
target=.
[ -n "${1:-}" ] && target=".[$1]"
started=$SECONDS
if [ ! -x .venv/bin/python ]; then
    echo "install: creating .venv (python3 -m venv)"
    python3 -m venv .venv
fi
echo "install: pip install -e '$target' (dependencies from pyproject.toml)"
# pip's own lines for each package it collects, builds or installs; "already satisfied" lines are
# dropped so that a re-run (and a CI log) stays a few lines long.
.venv/bin/python -m pip install --disable-pip-version-check --progress-bar off -e "$target" |
    awk '/^(Collecting|Building|Installing collected|Successfully installed)/ { print "  " $0; fflush() }'
# Compile the checkout's modules once, as installing a wheel does: an editable install imports them
# from here, and with PYTHONDONTWRITEBYTECODE set (or a read-only checkout) every process would
# otherwise compile them again at start (about 0.45 s of CPU per scheduler start on this machine kind).
.venv/bin/python -m compileall -q -j 0 cmd scheduler cache framework plugins actions metrics config hack >/dev/null
echo "install: done in $((SECONDS - started))s"
