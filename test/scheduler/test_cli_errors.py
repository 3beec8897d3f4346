"""An operator's common mistakes, tried on the installed binary: each ends in one line that says what is
wrong and what to do, and a non-zero exit, never a traceback."""

from __future__ import annotations

import asyncio
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from caldera.hack.sim import SimCluster

BINARY = Path(sys.executable).with_name("caldera-scheduler")
ENTRY = "from caldera.scheduler.cli import main; raise SystemExit(main())"


def command(*args: str) -> list[str]:
    """The console script when it is installed next to this Python (as hack/test.sh does), else its
    entry point."""
    if BINARY.exists():
        return [str(BINARY), *args]
    return [sys.executable, "-c", ENTRY, *args]


def clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST")}
    env["HOME"] = "/nonexistent-home"  # no ~/.kube/config to fall back on
    return env


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command(*args), capture_output=True, text=True, timeout=60, env=env or clean_env(), check=False
    )


def error_lines(stderr: str) -> list[str]:
    """The lines that report a problem: a plain line from the command line check, or an ERROR log line."""
    return [
        line for line in stderr.splitlines() if " ERROR " in line or line.startswith("caldera-scheduler:")
    ]


def assert_one_line(proc: subprocess.CompletedProcess[str], code: int, *phrases: str) -> str:
    assert proc.returncode == code, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout, proc.stderr
    lines = error_lines(proc.stderr)
    assert len(lines) == 1, proc.stderr
    for phrase in phrases:
        assert phrase in lines[0], lines[0]
    return lines[0]


def test_a_kubeconfig_that_does_not_exist() -> None:
    proc = run("--kubeconfig", "/nonexistent")
    line = assert_one_line(proc, 2, "--kubeconfig /nonexistent", "does not exist", "pass the path")
    assert proc.stderr.strip() == line  # nothing else: the check runs before anything starts


def test_a_kubeconfig_that_is_not_yaml(tmp_path: Path) -> None:
    bad = tmp_path / "kubeconfig"
    bad.write_text("clusters: [\n")
    proc = run("--kubeconfig", str(bad))
    assert_one_line(proc, 3, f"cannot use the kubeconfig {bad}", "kubectl --kubeconfig")


def test_no_kubeconfig_at_all_outside_a_cluster() -> None:
    proc = run()
    assert_one_line(proc, 3, "no cluster to talk to", "--kubeconfig PATH")


@pytest.mark.parametrize(
    ("address", "phrase"),
    [
        ("nonsense", "'nonsense' is not HOST:PORT"),
        ("127.0.0.1:http", "no valid port"),
        ("127.0.0.1:70000", "no valid port"),
    ],
)
def test_a_listen_address_that_is_not_host_and_port(address: str, phrase: str) -> None:
    proc = run("--listen-address", address)
    line = assert_one_line(proc, 2, "--listen-address", phrase)
    assert proc.stderr.strip() == line


async def test_a_port_already_in_use(tmp_path: Path) -> None:
    holder = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    port = holder.getsockname()[1]
    try:
        async with SimCluster(nodes=1, kubelet_delay=0.05) as sim:
            # The simulator runs on this event loop: the binary must run beside it, not block it.
            proc = await asyncio.create_subprocess_exec(
                *command("--kubeconfig", str(sim.kubeconfig_path), "--listen-address", f"127.0.0.1:{port}"),
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=clean_env(),
            )
            out, err = await asyncio.wait_for(proc.communicate(), 60)
    finally:
        holder.close()
    done = subprocess.CompletedProcess([], proc.returncode or 0, out.decode(), err.decode())
    assert_one_line(done, 3, f"cannot listen on 127.0.0.1:{port}", "already in use", "--listen-address")
    assert re.search(r"stopped \(exit 3\)", done.stderr), done.stderr


def test_help_lists_the_explain_command_and_every_default() -> None:
    proc = run("--help")
    assert proc.returncode == 0
    text = proc.stdout
    assert "explain NAMESPACE/NAME" in text and "explain pod NAMESPACE/NAME" in text
    flat = " ".join(text.split())
    for flag, default in [
        ("--schedule-period", "1s"),
        ("--listen-address", "127.0.0.1:8080"),
        ("--default-queue", "default"),
        ("--bind-workers", "64"),
        ("--leader-elect-lease-duration", "15s"),
        ("--shutdown-timeout", "30s"),
        ("--log-format", "text"),
        ("--log-level", "info"),
        ("--leader-elect", "off"),
        ("--ui", "on"),
        ("--scheduler-name", "caldera"),
    ]:
        assert re.search(re.escape(flag) + r"\b.*?\(.*?default: " + re.escape(default), flat), flag
    # every flag but --help and --version names its default
    options = re.findall(r"^  (--[a-z-]+)", text, re.M)
    assert len(options) >= 15
    for block in re.split(r"\n(?=  --)", text.split("options:", 1)[1].split("commands:", 1)[0]):
        flag = block.split()[0].rstrip(",")
        if flag not in ("--version", "-h"):
            assert "default" in block, block


def test_explain_without_a_scheduler_says_where_it_looked() -> None:
    proc = run("explain", "pod", "default/p", "--server", "http://127.0.0.1:9")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "cannot reach the scheduler at http://127.0.0.1:9" in proc.stderr
    proc = run("explain", "pods", "default/p")
    assert proc.returncode == 2 and "expected [job|pod] NAMESPACE/NAME" in proc.stderr
