"""Run the simulated cluster from a checkout without installing: python cmd/caldera-sim/main.py --help."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from hack.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
