"""What the scheduler imports at start: a cluster without Dynamic Resource Allocation never needs the
CEL library, so the binary does not load it until a claim's selector is compiled, and then only its
extension module: the library's package also imports its command-line tool (prompt_toolkit, typer,
rich), which a scheduler never runs (framework/dra/cel.py ``_library``)."""

import subprocess
import sys

LIBRARY = ("cel", "cel.cel", "prompt_toolkit", "typer", "rich")

PROBE = f"""
import sys
import caldera.scheduler.app, caldera.scheduler.cli, caldera.scheduler.registry
from caldera.framework.dra.cel import DeviceContext, Selector
from caldera.framework.dra.objects import Device
print(sorted(m for m in {LIBRARY!r} if m in sys.modules))
selector = Selector('device.driver == "gpu.example.com"')
print(selector.matches(DeviceContext("gpu.example.com", "pool", Device(name="gpu-0"))))
print(sorted(m for m in {LIBRARY!r} if m in sys.modules))
import cel  # the package, imported after: it re-exports the module already loaded
print(cel.compile is sys.modules["cel.cel"].compile)
"""


def test_the_cel_extension_is_loaded_when_a_selector_is_first_compiled_without_the_cli() -> None:
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True)
    at_start, matched, after_compile, same = out.stdout.splitlines()
    assert at_start == "[]"
    assert matched == "True"
    assert after_compile == "['cel.cel']"
    assert same == "True"


FALLBACK_PROBE = """
import importlib.util, sys, tempfile
real = importlib.util.find_spec
empty = tempfile.mkdtemp()

def elsewhere(name, *args):  # another layout: no extension file beside the package
    spec = real(name, *args)
    if name == "cel" and spec is not None:
        spec.submodule_search_locations = [empty]
    return spec

importlib.util.find_spec = elsewhere
from caldera.framework.dra.cel import DeviceContext, Selector
from caldera.framework.dra.objects import Device
selector = Selector('device.driver == "gpu.example.com"')
print(selector.matches(DeviceContext("gpu.example.com", "pool", Device(name="gpu-0"))), "cel" in sys.modules)
"""


def test_the_cel_package_is_imported_when_its_extension_is_not_where_expected() -> None:
    out = subprocess.run([sys.executable, "-c", FALLBACK_PROBE], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "True"]


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


SWITCH_PROBE = """
import sys
import caldera.scheduler.cli as cli

async def serve(args):  # in place of the scheduler: the interval it runs with
    print(sys.getswitchinterval())
    return 0

cli._serve = serve
print(cli.main(["--log-level", "warning"]))
"""


def test_the_binary_hands_the_gil_to_its_event_loop_within_a_millisecond() -> None:
    """A cycle decides in a worker thread; the event loop binds meanwhile. CPython's default switch
    interval (5 ms) made each turn of the loop wait that long for the GIL during a long cycle."""
    out = subprocess.run([sys.executable, "-c", SWITCH_PROBE], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["0.001", "0"]
