"""The soak's production faults: the scheduler's token rotated with the old one revoked at once, and a
watch handler that fails on a node event.

The replicas read their bearer token from a file (a kubeconfig ``tokenFile``, as a projected
ServiceAccount token is read in a pod); ``rotate`` grants a new token in the simulator, writes it
to the file as the kubelet does (a new file renamed over the old) and revokes the old one: every
replica's next request is answered 401, and must be retried once with the token read again. A
401 storm (failures that go on once the rotation settled) is a violation.

The replicas run through :func:`main`, which makes ``ClusterCache.upsert_node`` raise once when a
trigger file for the process exists (``arm``): the watch must count the failure, re-list nodes and
reconcile. The fault is armed on the leader and a node is cordoned: if the event were lost, the
leader's cache would keep the node schedulable, which its ``/debug/nodes`` shows.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import sys
from pathlib import Path
from typing import Any

import aiohttp
import yaml

from caldera.hack.soak.procs import SimProcess
from caldera.hack.workload.client import Api, ApiError

#: the folder where trigger files for the node handler fault are looked for (one per process id)
FAULT_DIR_ENV = "CALDERA_SOAK_FAULT_DIR"


def trigger_path(folder: str | Path, pid: int) -> Path:
    return Path(folder) / f"node-fault-{pid}"


def install_node_fault(folder: str) -> None:
    """Make this process's cache fail once on a node event after ``arm`` (the product is not
    changed: this wraps its method in the soak's child process only)."""
    from caldera.cache.store import ClusterCache

    real = ClusterCache.upsert_node
    trigger = trigger_path(folder, os.getpid())

    def upsert_node(self: ClusterCache, node: Any) -> None:
        try:
            trigger.unlink()
        except FileNotFoundError:
            return real(self, node)
        raise RuntimeError(f"soak: injected fault applying node {node.metadata.name}")

    ClusterCache.upsert_node = upsert_node  # type: ignore[method-assign]


def main() -> int:
    """caldera-scheduler, with the node handler fault installed when the soak asks for it."""
    folder = os.environ.get(FAULT_DIR_ENV)
    if folder:
        install_node_fault(folder)
    from caldera.scheduler.cli import main as scheduler_main

    return scheduler_main()


def arm(folder: str | Path, pid: int) -> None:
    trigger_path(folder, pid).touch()


class Credentials:
    """The replicas' token: a file, a kubeconfig that names it, and rotation in the simulator."""

    def __init__(self, sim: SimProcess, workdir: Path) -> None:
        self.sim = sim
        self.path = workdir / "scheduler.token"
        self.kubeconfig = workdir / "scheduler.kubeconfig"
        self.token = ""
        self.rotations = 0

    async def start(self) -> None:
        self.token = secrets.token_hex(16)
        await self._grant(self.token)
        self._write(self.token)
        doc = yaml.safe_load(self.sim.kubeconfig.read_text())
        for user in doc.get("users") or []:
            user["user"] = {"tokenFile": str(self.path)}
        self.kubeconfig.write_text(yaml.safe_dump(doc))

    async def rotate(self) -> None:
        """A new token in the file; the old one revoked at once."""
        new = secrets.token_hex(16)
        await self._grant(new)
        self._write(new)
        self.sim.command("revoke_token", token=self.token)
        self.token = new
        self.rotations += 1

    def _write(self, token: str) -> None:
        fresh = self.path.with_suffix(".new")
        fresh.write_text(token + "\n")
        fresh.replace(self.path)  # readers see the old file or the new one, never half of one

    async def _grant(self, token: str, timeout: float = 10.0) -> None:
        self.sim.command("grant_token", token=token)
        async with Api(self.sim.url, token) as api:
            for _ in range(int(timeout / 0.05)):
                try:
                    status, _ = await api.request("GET", "/api/v1/namespaces/kube-system")
                except (aiohttp.ClientError, OSError, ApiError):
                    status = 0
                if status != 401 and status != 0:
                    return
                await asyncio.sleep(0.05)
        raise RuntimeError("the simulator did not take the scheduler's new token")


async def node_unschedulable(http: aiohttp.ClientSession, base: str, node: str) -> bool | None:
    """Whether the replica at ``base`` holds ``node`` as unschedulable (its last cycle's view)."""
    try:
        async with http.get(base + "/debug/nodes", timeout=aiohttp.ClientTimeout(total=5)) as r:
            if r.status != 200:
                return None
            doc = await r.json()
    except (TimeoutError, aiohttp.ClientError, OSError, ValueError):
        return None
    for group in doc.get("groups") or []:
        for n in group.get("nodes") or []:
            if n.get("name") == node:
                return bool(n.get("unschedulable"))
    return None


if __name__ == "__main__":
    sys.exit(main())
