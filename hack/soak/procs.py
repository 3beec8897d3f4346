"""Child processes for the soak and the end-to-end benchmark: the simulated cluster and caldera-scheduler.

Both run as real processes, so the scheduler's CPU and memory are its own (read from /proc) and the driver's
work never shares their event loop. The simulator child (`hack.soak.simproc`) takes fault commands on stdin,
so faults can be switched on and off while it runs; it is `caldera-sim serve` plus that control channel.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]

#: the replicas' leader election (seconds): a lease renewed every RETRY_PERIOD, given up at
#: RENEW_DEADLINE without a renewal, taken over by another LEASE_DURATION after its last renewal
LEASE_DURATION = 4.0
RENEW_DEADLINE = 3.0
RETRY_PERIOD = 0.5


#: the checkout's packages (hack/install.sh compiles the same)
PACKAGES = ("cmd", "scheduler", "cache", "framework", "plugins", "actions", "metrics", "config", "hack")


def compile_checkout() -> None:
    """Bring the checkout's bytecode up to date, as hack/install.sh does at install: with
    PYTHONDONTWRITEBYTECODE set, a module edited since would be compiled again at every scheduler
    start, and counted in the start-up and CPU a benchmark reports (an installed package is compiled
    once). Only what changed is compiled."""
    import compileall

    for package in PACKAGES:
        compileall.compile_dir(str(ROOT / package), quiet=1)


def child_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}


def cpu_seconds(pid: int) -> float | None:
    """utime + stime of a process, from its own kernel accounting."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def rss_bytes(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_file(path: Path, proc: subprocess.Popen[Any], what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError(f"{what} did not start (exit {proc.poll()})")
        time.sleep(0.02)


@dataclass
class SimProcess:
    """The simulated cluster in a child process, with a stdin control channel for faults."""

    proc: subprocess.Popen[bytes]
    kubeconfig: Path
    url: str
    token: str

    @classmethod
    def start(cls, workdir: str | Path, log_path: Path | None = None, **config: Any) -> SimProcess:
        kubeconfig = Path(workdir) / "sim.kubeconfig"
        config["kubeconfig_path"] = str(kubeconfig)
        log = open(log_path, "wb") if log_path else subprocess.DEVNULL
        proc = subprocess.Popen(
            [sys.executable, "-m", "caldera.hack.soak.simproc", json.dumps(config)],
            env=child_env(),
            stdin=subprocess.PIPE,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=str(ROOT),
        )
        _wait_file(kubeconfig, proc, "caldera-sim")
        cfg = yaml.safe_load(kubeconfig.read_text())
        return cls(
            proc, kubeconfig, cfg["clusters"][0]["cluster"]["server"], cfg["users"][0]["user"]["token"]
        )

    @property
    def pid(self) -> int:
        return self.proc.pid

    def command(self, op: str, **kw: Any) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"op": op, **kw}).encode() + b"\n")
        self.proc.stdin.flush()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@dataclass
class SchedulerProcess:
    """One `caldera-scheduler` replica as a child process."""

    name: str
    proc: subprocess.Popen[bytes]
    port: int
    started: float
    args: list[str] = field(default_factory=list)

    @classmethod
    def start(
        cls,
        name: str,
        kubeconfig: str | Path,
        *,
        period: str = "200ms",
        conf: str | None = None,
        leader_elect: bool = False,
        extra: list[str] | None = None,
        log_path: Path | None = None,
        launcher: str = "caldera.scheduler.cli",
        env: dict[str, str] | None = None,
    ) -> SchedulerProcess:
        """``launcher`` is the module whose ``main`` runs the scheduler (the soak's wraps it with
        its faults, hack/soak/hardening.py); ``env`` is added to the child's environment."""
        port = free_port()
        args = [
            "--kubeconfig",
            str(kubeconfig),
            "--schedule-period",
            period,
            "--listen-address",
            f"127.0.0.1:{port}",
            "--log-level",
            "warning",
        ]
        if conf:
            args += ["--scheduler-conf", conf]
        if leader_elect:
            args += [
                "--leader-elect",
                "--leader-elect-resource-namespace",
                "kube-system",
                "--leader-elect-lease-duration",
                f"{LEASE_DURATION:g}s",
                "--leader-elect-renew-deadline",
                f"{RENEW_DEADLINE:g}s",
                "--leader-elect-retry-period",
                f"{RETRY_PERIOD * 1000:g}ms",
            ]
        args += extra or []
        log = open(log_path, "ab") if log_path else subprocess.DEVNULL
        proc = subprocess.Popen(
            [
                sys.executable,
                "-c",
                f"import sys; from {launcher} import main; sys.exit(main())",
                *args,
            ],
            env={**child_env(), **(env or {})},
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=str(ROOT),
        )
        return cls(name, proc, port, time.monotonic(), args)

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def kill(self) -> None:
        if self.alive:
            self.proc.kill()
            self.proc.wait()

    def stop(self, timeout: float = 15.0) -> int | None:
        if self.alive:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode
