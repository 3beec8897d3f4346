"""The README's demo, shortened: it runs, shows progress, and ends with a summary and a clean exit."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import REAL_KUBECONFIG


@pytest.mark.skipif(bool(REAL_KUBECONFIG), reason="the demo brings its own simulated cluster")
@pytest.mark.parametrize("gangs", ["volcano", "native"])
def test_demo_runs_jobs_to_completion_and_summarises(gangs: str) -> None:
    """With Volcano's PodGroups, and with Kubernetes' own (``--native-gang``: pods join their
    scheduling.k8s.io/v1alpha2 PodGroup through ``spec.schedulingGroup``): every gang bound whole."""
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "caldera.hack.cli",
            "demo",
            *(["--native-gang"] if gangs == "native" else []),
            "--nodes",
            "8",
            "--jobs",
            "6",
            "--rate",
            "20",
            "--run-seconds",
            "1",
            "--max-size",
            "4",
            "--timeout",
            "60",
        ],
        capture_output=True,
        text=True,
        cwd=root,
        timeout=120,
    )
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    assert "pods bound:" in out.stdout and "jobs:" in out.stdout
    assert "6 submitted, 6 completed" in out.stdout
    assert "partly bound gangs: 0" in out.stdout
    assert "stopped on SIGTERM with exit code 0" in out.stdout
