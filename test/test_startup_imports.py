"""What the scheduler imports at start: a cluster without Dynamic Resource Allocation never needs the
CEL library, whose package also imports its command-line tool (prompt_toolkit, typer, rich), so the
binary does not import it until a claim's selector is compiled (framework/dra/cel.py ``_library``)."""

import subprocess
import sys

PROBE = """
import sys
import caldera.scheduler.app, caldera.scheduler.cli, caldera.scheduler.registry
from caldera.framework.dra.cel import Selector
print(sorted(m for m in ("cel", "prompt_toolkit", "typer") if m in sys.modules))
Selector('device.driver == "gpu.example.com"')
print(sorted(m for m in ("cel",) if m in sys.modules))
"""


def test_the_cel_library_is_imported_when_a_selector_is_first_compiled_not_at_start() -> None:
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True)
    at_start, after_compile = out.stdout.splitlines()
    assert at_start == "[]"
    assert after_compile == "['cel']"
