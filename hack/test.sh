#!/usr/bin/env bash
# The project's one test command: installs everything from this checkout's own files, then runs the suite.
# README.md and .ci/run both call this script, so they can never disagree.
set -euo pipefail
cd "$(dirname "$0")/.."
bash hack/install.sh test
set +e
.venv/bin/python -m pytest "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
  echo "hack/test.sh: pytest collected no tests; that is a broken suite, not a pass" >&2
  exit 1
fi
exit "$rc"
