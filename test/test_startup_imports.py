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


BLAS_PROBE = """
import os
os.environ.pop("OPENBLAS_NUM_THREADS", None)
from caldera.scheduler.cli import main
code = main(["--listen-address", "no-port"])  # a usage error: main() returns before its imports
import numpy  # as the scheduler's imports would, after main() began
print(code, os.environ.get("OPENBLAS_NUM_THREADS"), len(os.listdir("/proc/self/task")))
"""


def test_the_binary_imports_numpy_with_one_blas_thread() -> None:
    """OpenBLAS's threads spin at numpy's import (about 0.1 s of CPU on 2 cores) and the scheduler
    calls no BLAS routine: the binary runs it single-threaded, so its process has just one thread."""
    out = subprocess.run([sys.executable, "-c", BLAS_PROBE], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["2", "1", "1"]


METADATA_PROBE = """
import sys
import caldera.scheduler.app, caldera.scheduler.cli, caldera.scheduler.memory, caldera.scheduler.registry
print("importlib.metadata" in sys.modules)
from caldera.scheduler.cli import package_version
print(package_version() != "", "importlib.metadata" in sys.modules)
"""


def test_the_package_metadata_is_read_for_the_version_not_at_start() -> None:
    """importlib.metadata (and the zipfile, csv and email modules it brings) is ~15 ms of start-up;
    only ``--version`` needs it."""
    out = subprocess.run([sys.executable, "-c", METADATA_PROBE], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "True", "True"]


GC_PROBE = """
import gc, sys
import caldera.scheduler.cli as cli

async def serve(args):  # in place of the scheduler: what holds when its imports begin
    print(gc.get_threshold() == (50_000, 20, 100), "caldera.scheduler.app" in sys.modules, "aiohttp" in sys.modules)
    return 0

cli._serve = serve
print(cli.main(["--log-level", "warning"]))
"""


def test_the_collector_thresholds_are_set_before_the_scheduler_is_imported() -> None:
    """The flags are checked without importing the scheduler (its HTTP server, aiohttp), and the
    collector's thresholds (scheduler/memory.py) are set before the imports, not after them."""
    out = subprocess.run([sys.executable, "-c", GC_PROBE], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "False", "False", "0"]
