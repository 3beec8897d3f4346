"""A simulated cluster with the controllers running against it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest

from caldera.cache.client import ApiClient, ClusterConfig
from caldera.hack.sim import SimCluster
from caldera.hack.sim.resources import PODS, resource
from caldera.scheduler.controllers import Controllers

PODGROUPS = resource("podgroups", "scheduling.volcano.sh")
QUEUES = resource("queues", "scheduling.volcano.sh")


async def eventually(
    check: Callable[[], bool | Awaitable[bool]], timeout: float = 5.0, what: str = ""
) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        result = check()
        if not isinstance(result, bool):
            result = await result
        if result:
            return
        if loop.time() > deadline:
            raise AssertionError(f"not reached in {timeout}s: {what or check}")
        await asyncio.sleep(0.02)


@dataclass
class Running:
    """Controllers running in the background until stopped (a 'process' that can be restarted)."""

    controllers: Controllers
    stop: asyncio.Event
    task: asyncio.Task[None]

    async def halt(self) -> None:
        self.stop.set()
        await self.task


class Harness:
    def __init__(self, sim: SimCluster, client: ApiClient) -> None:
        self.sim = sim
        self.client = client
        self.running: list[Running] = []

    def start(self, **kwargs: Any) -> Controllers:
        kwargs.setdefault("workers", 4)
        controllers = Controllers(self.client, **kwargs)
        stop = asyncio.Event()
        task = asyncio.create_task(controllers.run(stop))
        self.running.append(Running(controllers, stop, task))
        return controllers

    eventually = staticmethod(eventually)

    def record_deletes(self, fail_rate: float = 0.0) -> DeleteRecorder:
        return DeleteRecorder(self.sim, fail_rate)

    async def halt_all(self) -> None:
        for r in self.running:
            await r.halt()
        self.running.clear()

    # -- the cluster, read and written directly ----------------------------------------------------
    def pod(self, name: str, ns: str = "default") -> dict[str, Any] | None:
        return self.sim.store.get_obj(PODS, ns, name)

    def pods(self, ns: str = "default") -> list[dict[str, Any]]:
        return self.sim.store.objects(PODS, ns)

    def podgroups(self, ns: str = "default") -> list[dict[str, Any]]:
        return self.sim.store.objects(PODGROUPS, ns)

    def podgroup(self, name: str, ns: str = "default") -> dict[str, Any] | None:
        return self.sim.store.get_obj(PODGROUPS, ns, name)

    def queue(self, name: str) -> dict[str, Any] | None:
        return self.sim.store.get_obj(QUEUES, "", name)

    def create_pod(
        self,
        name: str,
        *,
        ns: str = "default",
        owner: tuple[str, str, str] | None = None,
        annotations: dict[str, str] | None = None,
        scheduler: str = "caldera",
        priority_class: str = "",
    ) -> dict[str, Any]:
        meta: dict[str, Any] = {"name": name, "namespace": ns, "annotations": dict(annotations or {})}
        if owner is not None:
            kind, owner_name, uid = owner
            api = {"ReplicaSet": "apps/v1", "StatefulSet": "apps/v1", "Job": "batch/v1"}.get(kind, "v1")
            meta["ownerReferences"] = [
                {"apiVersion": api, "kind": kind, "name": owner_name, "uid": uid, "controller": True}
            ]
        spec: dict[str, Any] = {
            "schedulerName": scheduler,
            "containers": [{"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "100m"}}}],
        }
        if priority_class:
            spec["priorityClassName"] = priority_class
        return self.sim.store.create(PODS, ns, {"metadata": meta, "spec": spec}).obj

    def delete_pod(self, name: str, ns: str = "default") -> None:
        self.sim.store.delete(PODS, ns, name, {"gracePeriodSeconds": 0})


@pytest.fixture
async def sim() -> AsyncIterator[SimCluster]:
    async with SimCluster(nodes=2, kubelet_delay=0.02, kubelet_stop_delay=0.02, seed=7) as cluster:
        yield cluster


@pytest.fixture
async def harness(sim: SimCluster) -> AsyncIterator[Harness]:
    client = ApiClient(ClusterConfig(host=sim.url, token=sim.token))
    h = Harness(sim, client)
    try:
        yield h
    finally:
        await h.halt_all()
        await client.close()


class DeleteRecorder:
    """Watches the simulated API server's PodGroup DELETEs, and fails a share of them: half answered 500
    before anything happens, half answered 500 after the delete was carried out (the reply was lost)."""

    def __init__(self, sim: SimCluster, fail_rate: float = 0.0, seed: int = 3) -> None:
        import random

        self.sim = sim
        self.fail_rate = fail_rate
        self.rng = random.Random(seed)
        self.bodies: list[dict[str, Any]] = []
        self.failed_before = 0
        self.failed_after = 0
        self._original = sim.server._fault
        sim.server._fault = self._fault  # type: ignore[method-assign]

    async def _fault(self, request: Any) -> None:
        import orjson

        from caldera.hack.sim.errors import ApiError as SimApiError

        if request.method == "DELETE" and "/podgroups/" in request.path:
            raw = await request.read()
            body = orjson.loads(raw) if raw else {}
            self.bodies.append(body)
            if self.rng.random() < self.fail_rate:
                if self.rng.random() < 0.5:
                    self.failed_before += 1
                else:
                    self.failed_after += 1
                    parts = request.path.strip("/").split("/")
                    try:
                        self.sim.store.delete(PODGROUPS, parts[4], parts[6], body)
                    except SimApiError:
                        pass
                raise SimApiError(500, "InternalError", "Internal error occurred: injected by the test")
        await self._original(request)

    @property
    def failed(self) -> int:
        return self.failed_before + self.failed_after

    def all_preconditioned(self) -> bool:
        return all(
            (b.get("preconditions") or {}).get("uid")
            and (b.get("preconditions") or {}).get("resourceVersion")
            for b in self.bodies
        )
