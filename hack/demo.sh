#!/usr/bin/env bash
# The project's one run command: installs Caldera from this checkout and runs the demo
# (caldera-sim with a few dozen nodes, a stream of gang jobs, and caldera-scheduler binding them).
set -euo pipefail
cd "$(dirname "$0")/.."
bash hack/install.sh
exec .venv/bin/caldera-sim demo "$@"
