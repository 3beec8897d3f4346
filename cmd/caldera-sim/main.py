"""Run the simulated cluster from a checkout without installing: python cmd/caldera-sim/main.py --help.

The checkout's folders are the subpackages of ``caldera`` (pyproject.toml maps them with package-dir);
here the same mapping is made by giving ``caldera`` the checkout as its path.
"""

import sys
import types
from pathlib import Path

if "caldera" not in sys.modules:
    package = types.ModuleType("caldera")
    package.__path__ = [str(Path(__file__).resolve().parents[2])]
    sys.modules["caldera"] = package

from caldera.hack.cli import main

if __name__ == "__main__":
    sys.exit(main())
