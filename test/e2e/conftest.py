"""End-to-end fixtures: a simulated cluster (or the one ``CALDERA_E2E_KUBECONFIG`` names), an API
helper that sees what a user sees, and caldera-scheduler running in-process against it."""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest

from caldera.cache.client import ApiClient, ApiError, ClusterConfig
from caldera.config.conf import parse_conf
from caldera.framework.model import TaskStatus
from caldera.framework.plugin import Action, Registry
from caldera.framework.session import Session
from caldera.hack.sim import SimCluster
from caldera.scheduler.app import Options, SchedulerApp
from caldera.scheduler.registry import builtin_registry

REAL_KUBECONFIG = os.environ.get("CALDERA_E2E_KUBECONFIG")
SCHEDULER = "caldera-e2e"

pytestmark = pytest.mark.e2e


class GangAllocate(Action):
    """A minimal gang allocate for e2e tests while the real actions are not registered: place every
    pending task of a job on the node with the most free cpu, commit only a whole gang."""

    name = "allocate"

    def execute(self, ssn: Session) -> None:
        for job in sorted(ssn.jobs.values(), key=lambda j: (j.creation, j.uid)):
            pending = sorted(job.tasks_in(TaskStatus.PENDING), key=lambda t: t.name)
            if not pending:
                continue
            stmt = ssn.statement()
            failed = 0
            for task in pending:
                fits = [
                    n
                    for n in ssn.node_list
                    if n.ready and not n.unschedulable and task.resreq.less_equal(n.idle)
                ]
                if not fits:
                    failed += 1
                    continue
                best = max(fits, key=lambda n: (n.idle.get("cpu"), n.name))
                stmt.allocate(task, best.name)
            if ssn.job_ready(job) and job.ready_task_num() >= job.min_available:
                stmt.commit()
            else:
                stmt.discard()
                n = len(ssn.node_list)
                job.job_fit_error = (
                    f"{len(pending)}/{len(job.tasks)} tasks in gang unschedulable: pod group is not ready, "
                    f"{len(pending)} Pending, {job.min_available} minAvailable; "
                    f"0/{n} nodes are available: {n} Insufficient cpu."
                )
                for task in pending:
                    job.fit_errors[task.uid] = f"0/{n} nodes are available: {n} Insufficient cpu."


def e2e_registry() -> tuple[Registry, str]:
    """The real actions and plugins when they are there, else the minimal gang allocate."""
    real = builtin_registry()
    if "allocate" in real.actions and "gang" in real.plugins:
        conf = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: predicates
  - name: proportion
  - name: nodeorder
"""
        try:
            parse_conf(conf, real)
            return real, conf
        except Exception:
            pass
    registry = Registry()
    registry.register_action(GangAllocate)
    return registry, 'actions: "allocate"\ntiers: []\n'


class Api:
    """What a user sees, through plain HTTP (the scheduler's own client class, a separate session)."""

    def __init__(self, client: ApiClient, namespace: str) -> None:
        self.client = client
        self.ns = namespace
        self.created_nodes: list[str] = []

    async def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        return msgspec.json.decode(await self.client.request("POST", path, body=body))  # type: ignore[no-any-return]

    async def get(self, path: str) -> dict[str, Any]:
        return msgspec.json.decode(await self.client.request("GET", path))  # type: ignore[no-any-return]

    async def delete(self, path: str, body: dict[str, Any] | None = None) -> None:
        try:
            await self.client.request("DELETE", path, body=body)
        except ApiError as exc:
            if exc.code != 404:
                raise

    async def items(self, path: str, **params: str) -> list[dict[str, Any]]:
        raw = await self.client.request("GET", path, params=params or None)
        return msgspec.json.decode(raw)["items"]  # type: ignore[no-any-return]

    # -- builders ----------------------------------------------------------------------------------
    async def node(
        self, name: str, cpu: str = "4", memory: str = "16Gi", pods: str = "110"
    ) -> dict[str, Any]:
        cap = {"cpu": cpu, "memory": memory, "pods": pods}
        self.created_nodes.append(name)
        return await self.create(
            "/api/v1/nodes",
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
                "status": {
                    "capacity": cap,
                    "allocatable": cap,
                    "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
                },
            },
        )

    async def podgroup(self, name: str, min_member: int, queue: str = "default") -> dict[str, Any]:
        return await self.create(
            f"/apis/scheduling.volcano.sh/v1beta1/namespaces/{self.ns}/podgroups",
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "PodGroup",
                "metadata": {"name": name, "namespace": self.ns},
                "spec": {"minMember": min_member, "queue": queue},
            },
        )

    async def pod(
        self,
        name: str,
        cpu: str = "1",
        group: str | None = None,
        scheduler: str = SCHEDULER,
        node: str | None = None,
    ) -> dict[str, Any]:
        meta: dict[str, Any] = {"name": name, "namespace": self.ns}
        if group:
            meta["annotations"] = {"scheduling.k8s.io/group-name": group}
        spec: dict[str, Any] = {
            "schedulerName": scheduler,
            "containers": [
                {
                    "name": "main",
                    "image": "busybox",
                    "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}},
                }
            ],
        }
        if node:
            spec["nodeName"] = node
        return await self.create(
            f"/api/v1/namespaces/{self.ns}/pods",
            {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec},
        )

    async def gang(self, name: str, size: int, cpu: str = "1", min_member: int | None = None) -> None:
        await self.podgroup(name, size if min_member is None else min_member)
        for i in range(size):
            await self.pod(f"{name}-{i}", cpu=cpu, group=name)

    # -- reading -----------------------------------------------------------------------------------
    async def pods(self) -> list[dict[str, Any]]:
        return await self.items(f"/api/v1/namespaces/{self.ns}/pods")

    async def node_of(self) -> dict[str, str]:
        return {p["metadata"]["name"]: p["spec"].get("nodeName", "") for p in await self.pods()}

    async def read_podgroup(self, name: str) -> dict[str, Any]:
        return await self.get(f"/apis/scheduling.volcano.sh/v1beta1/namespaces/{self.ns}/podgroups/{name}")

    async def events(self) -> list[dict[str, Any]]:
        return await self.items(f"/api/v1/namespaces/{self.ns}/events")


async def eventually(
    check: Callable[[], Awaitable[Any]], timeout: float = 10.0, interval: float = 0.05
) -> Any:
    """Poll until ``check`` returns something truthy (then return it) or fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        try:
            last = await check()
            if last:
                return last
        except (ApiError, KeyError, AssertionError) as exc:
            last = exc
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s; last: {last!r}")
        await asyncio.sleep(interval)


@pytest.fixture
async def sim() -> AsyncIterator[SimCluster | None]:
    if REAL_KUBECONFIG:
        yield None
        return
    async with SimCluster(nodes=0, kubelet_delay=0.05, seed=3) as cluster:
        yield cluster


def needs_sim(sim: SimCluster | None) -> SimCluster:
    if sim is None:
        pytest.skip("needs fault injection: runs against caldera-sim only")
    return sim


@pytest.fixture
def kubeconfig(sim: SimCluster | None) -> str:
    return REAL_KUBECONFIG or str(sim.kubeconfig_path)  # type: ignore[union-attr]


@pytest.fixture
async def api(kubeconfig: str) -> AsyncIterator[Api]:
    client = ApiClient(await ClusterConfig.load(kubeconfig), user_agent="caldera-e2e")
    namespace = "default"
    created_ns = False
    if REAL_KUBECONFIG:
        namespace = f"caldera-e2e-{uuid.uuid4().hex[:6]}"
        await client.request("POST", "/api/v1/namespaces", body={"metadata": {"name": namespace}})
        created_ns = True
    helper = Api(client, namespace)
    yield helper
    if REAL_KUBECONFIG:
        for name in helper.created_nodes:
            await helper.delete(f"/api/v1/nodes/{name}")
    if created_ns:
        await helper.delete(f"/api/v1/namespaces/{namespace}")
    await client.close()


@pytest.fixture
def conf_file(tmp_path: Path) -> tuple[Registry, Path]:
    registry, text = e2e_registry()
    path = tmp_path / "scheduler.conf"
    path.write_text(text)
    return registry, path


class Running:
    """caldera-scheduler running in-process; ``stop()`` is SIGTERM."""

    def __init__(self, app: SchedulerApp, task: asyncio.Task[int], stop: asyncio.Event) -> None:
        self.app = app
        self.task = task
        self.stop_event = stop

    async def stop(self) -> int:
        self.stop_event.set()
        return await asyncio.wait_for(self.task, 30)


@pytest.fixture
async def start_scheduler(
    kubeconfig: str, conf_file: tuple[Registry, Path]
) -> AsyncIterator[Callable[..., Awaitable[Running]]]:
    running: list[Running] = []

    async def start(wait_ready: bool = True, **overrides: Any) -> Running:
        registry, path = conf_file
        opts = Options(
            kubeconfig=kubeconfig,
            scheduler_names=[SCHEDULER],
            scheduler_conf=str(path),
            schedule_period=0.1,
            listen_address="127.0.0.1:0",
            conf_poll_interval=0.1,
            shutdown_timeout=10.0,
        )
        for key, value in overrides.items():
            setattr(opts, key, value)
        app = SchedulerApp(opts, registry=overrides.pop("registry", registry))
        stop = asyncio.Event()
        task = asyncio.create_task(app.run(stop))
        r = Running(app, task, stop)
        running.append(r)
        if wait_ready:
            await eventually(lambda: _ready(app, task), timeout=10)
        return r

    yield start
    for r in running:
        if not r.task.done():
            await r.stop()


async def _ready(app: SchedulerApp, task: asyncio.Task[int]) -> bool:
    if task.done():
        raise RuntimeError(f"scheduler exited early with {task.result()}")
    return app.readiness()[0]
