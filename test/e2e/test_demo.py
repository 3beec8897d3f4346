"""The README's demo, shortened: it runs, shows progress, and ends with a summary and a clean exit."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import REAL_KUBECONFIG


@pytest.mark.skipif(bool(REAL_KUBECONFIG), reason="the demo brings its own simulated cluster")
@pytest.mark.parametrize("gangs", ["volcano", "native", "dra"])
def test_demo_runs_jobs_to_completion_and_summarises(gangs: str) -> None:
    """With Volcano's PodGroups, with Kubernetes' own (``--native-gang``: pods join their
    scheduling.k8s.io/v1alpha2 PodGroup through ``spec.schedulingGroup``), and with DRA gangs (``--dra``:
    each pod claims one of 2 GPUs per node, 16 in all, fewer than the jobs ask for at once): every gang
    bound whole, and with DRA every pod bound with its claim allocated and reserved for it."""
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "caldera.hack.cli",
            "demo",
            *(["--native-gang"] if gangs == "native" else []),
            *(["--dra", "--gpus-per-node", "2"] if gangs == "dra" else []),
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
    if gangs == "dra":
        bound = re.search(r"pods bound: +(\d+) \([\d.]+/s average", out.stdout)
        in_place = re.search(
            r"devices: +(\d+) pods bound with their claims allocated and reserved, 0 without", out.stdout
        )
        assert bound and in_place, out.stdout[-2000:]
        # a pod that finished between two samples is not checked; all others were, and none lacked its claim
        assert 0 < int(in_place.group(1)) <= int(bound.group(1))
        assert "devices allocated: " in out.stdout
