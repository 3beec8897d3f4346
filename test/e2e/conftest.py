"""End-to-end fixtures: a simulated cluster (or the one ``CALDERA_E2E_KUBECONFIG`` names), an API
helper that sees what a user sees, and caldera-scheduler running in-process against it.

The scheduler runs as deployed: ``deploy/base/namespace.yaml`` and ``deploy/base/rbac.yaml`` are applied to the cluster
and the scheduler talks to it with a token of its ServiceAccount (minted by the TokenRequest API), so it holds
only the permissions the manifests grant. The test set-up (the ``api`` helper) is an administrator. Against the
simulator, every request of the scheduler that RBAC refused fails the test that made it; test_rbac_grants.py
replays the scenarios that need each grant in clusters of its own (``e2e_cluster``) and checks every grant was
needed."""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import msgspec
import pytest
import yaml

from caldera.cache.client import ApiClient, ApiError, ClusterConfig
from caldera.config.conf import parse_conf
from caldera.framework.model import TaskStatus
from caldera.framework.plugin import Action, Registry
from caldera.framework.session import Session
from caldera.hack.sim import SimCluster
from caldera.hack.sim.rbac import Record
from caldera.scheduler.app import Options, SchedulerApp
from caldera.scheduler.registry import builtin_registry

REAL_KUBECONFIG = os.environ.get("CALDERA_E2E_KUBECONFIG")
SCHEDULER = "caldera-e2e"
DEPLOY = Path(__file__).resolve().parents[2] / "deploy" / "base"
# The deployed scheduler's identity and home (deploy/base/rbac.yaml): leases and the conf ConfigMap live there.
DEPLOY_NS = "caldera-system"
SERVICE_ACCOUNT = "caldera-scheduler"
SCHEDULER_USER = f"system:serviceaccount:{DEPLOY_NS}:{SERVICE_ACCOUNT}"
_PLURALS = {
    "Namespace": "namespaces",
    "ServiceAccount": "serviceaccounts",
    "Role": "roles",
    "ClusterRole": "clusterroles",
    "RoleBinding": "rolebindings",
    "ClusterRoleBinding": "clusterrolebindings",
}


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
        self,
        name: str,
        cpu: str = "4",
        memory: str = "16Gi",
        pods: str = "110",
        labels: dict[str, str] | None = None,
        extended: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        """A Ready node; ``extended``: more resources it has (``nvidia.com/gpu``: "4")."""
        cap = {"cpu": cpu, "memory": memory, "pods": pods, **(extended or {})}
        self.created_nodes.append(name)
        return await self.create(
            "/api/v1/nodes",
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
                "status": {
                    "capacity": cap,
                    "allocatable": cap,
                    "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
                },
            },
        )

    async def podgroup(
        self,
        name: str,
        min_member: int,
        queue: str = "default",
        annotations: dict[str, str] | None = None,
        priority: str | None = None,
    ) -> dict[str, Any]:
        meta: dict[str, Any] = {"name": name, "namespace": self.ns}
        if annotations:
            meta["annotations"] = annotations
        spec: dict[str, Any] = {"minMember": min_member, "queue": queue}
        if priority:
            spec["priorityClassName"] = priority
        return await self.create(
            f"/apis/scheduling.volcano.sh/v1beta1/namespaces/{self.ns}/podgroups",
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "PodGroup",
                "metadata": meta,
                "spec": spec,
            },
        )

    async def pod(
        self,
        name: str,
        cpu: str = "1",
        group: str | None = None,
        scheduler: str = SCHEDULER,
        node: str | None = None,
        annotations: dict[str, str] | None = None,
        priority: str | None = None,
        extended: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        """A pod of one container; ``priority``: its priorityClassName (it then goes at once when
        evicted: grace period 0); ``extended``: more resources it requests."""
        meta: dict[str, Any] = {"name": name, "namespace": self.ns}
        if group or annotations:
            meta["annotations"] = {**(annotations or {})}
            if group:
                meta["annotations"]["scheduling.k8s.io/group-name"] = group
        requests = {"cpu": cpu, "memory": "64Mi", **(extended or {})}
        spec: dict[str, Any] = {
            "schedulerName": scheduler,
            "containers": [{"name": "main", "image": "busybox", "resources": {"requests": requests}}],
        }
        if node:
            spec["nodeName"] = node
        if priority:
            spec["priorityClassName"] = priority
            spec["terminationGracePeriodSeconds"] = 0
        return await self.create(
            f"/api/v1/namespaces/{self.ns}/pods",
            {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec},
        )

    async def priority_class(self, name: str, value: int) -> None:
        await self.create(
            "/apis/scheduling.k8s.io/v1/priorityclasses",
            {
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": name},
                "value": value,
            },
        )

    async def queue(self, name: str, **spec: Any) -> dict[str, Any]:
        """A Volcano Queue (cluster-scoped) of weight 1 unless ``spec`` says otherwise."""
        return await self.create(
            "/apis/scheduling.volcano.sh/v1beta1/queues",
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "Queue",
                "metadata": {"name": name},
                "spec": {"weight": 1, **spec},
            },
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

    async def placed(self, *names: str) -> dict[str, str]:
        """The named pods' nodes once all of them are bound, else {} (for ``eventually``)."""
        nodes = await self.node_of()
        return {n: nodes[n] for n in names} if all(nodes.get(n) for n in names) else {}

    async def read_podgroup(self, name: str) -> dict[str, Any]:
        return await self.get(f"/apis/scheduling.volcano.sh/v1beta1/namespaces/{self.ns}/podgroups/{name}")

    async def events(self) -> list[dict[str, Any]]:
        return await self.items(f"/api/v1/namespaces/{self.ns}/events")

    async def evict_events(self) -> dict[tuple[str, str], str]:
        """The ``Evict`` Events: (kind, name) -> message."""
        return {
            (e["involvedObject"]["kind"], e["involvedObject"]["name"]): e["message"]
            for e in await self.events()
            if e.get("reason") == "Evict"
        }


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


def deploy_manifests() -> list[dict[str, Any]]:
    """deploy/base/namespace.yaml and deploy/base/rbac.yaml, as kubectl would apply them."""
    docs: list[dict[str, Any]] = []
    for name in ("namespace.yaml", "rbac.yaml"):
        docs.extend(d for d in yaml.safe_load_all((DEPLOY / name).read_text()) if d)
    return docs


def manifest_path(doc: dict[str, Any]) -> str:
    group_version = doc["apiVersion"]
    base = f"/api/{group_version}" if "/" not in group_version else f"/apis/{group_version}"
    ns = doc["metadata"].get("namespace")
    return base + (f"/namespaces/{ns}" if ns else "") + "/" + _PLURALS[doc["kind"]]


async def apply_deploy_rbac(client: ApiClient) -> None:
    """Create deploy/'s namespace and RBAC objects (those already there are kept)."""
    for doc in deploy_manifests():
        try:
            await client.request("POST", manifest_path(doc), body=doc)
        except ApiError as exc:
            if exc.code != 409:
                raise


async def scheduler_token(client: ApiClient) -> str:
    raw = await client.request(
        "POST",
        f"/api/v1/namespaces/{DEPLOY_NS}/serviceaccounts/{SERVICE_ACCOUNT}/token",
        body={
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"expirationSeconds": 3600},
        },
    )
    return msgspec.json.decode(raw)["status"]["token"]  # type: ignore[no-any-return]


def token_kubeconfig(admin_kubeconfig: str, token: str, target: Path) -> str:
    """The admin kubeconfig with its current user replaced by a bearer token."""
    config = yaml.safe_load(Path(admin_kubeconfig).read_text())
    current = config["current-context"]
    context = next(c["context"] for c in config["contexts"] if c["name"] == current)
    config["users"] = [{"name": "caldera-scheduler", "user": {"token": token}}]
    context["user"] = "caldera-scheduler"
    config["contexts"] = [{"name": current, "context": context}]
    target.write_text(yaml.safe_dump(config))
    target.chmod(0o600)
    return str(target)


def refused_requests(cluster: SimCluster) -> dict[Record, int]:
    """The scheduler's requests the simulator's RBAC (deploy/base/rbac.yaml) refused."""
    return {
        rec: n
        for rec, n in cluster.server.authz.record.items()
        if rec.user == SCHEDULER_USER and not rec.allowed
    }


def e2e_sim(native_gang: bool = False) -> SimCluster:
    return SimCluster(nodes=0, kubelet_delay=0.05, seed=3, native_gang=native_gang)


@pytest.fixture
async def sim(request: pytest.FixtureRequest) -> AsyncIterator[SimCluster | None]:
    if REAL_KUBECONFIG:
        yield None
        return
    # a test module with NATIVE_GANG_API = True gets a simulator serving scheduling.k8s.io/v1alpha2
    async with e2e_sim(bool(getattr(request.module, "NATIVE_GANG_API", False))) as cluster:
        yield cluster
        refused = refused_requests(cluster)
        assert not refused, f"RBAC (deploy/base/rbac.yaml) refused requests the scheduler made: {refused}"


def needs_sim(sim: SimCluster | None) -> SimCluster:
    if sim is None:
        pytest.skip("needs fault injection: runs against caldera-sim only")
    return sim


@pytest.fixture
def admin_kubeconfig(sim: SimCluster | None) -> str:
    """For test set-up: the cluster's administrator."""
    return REAL_KUBECONFIG or str(sim.kubeconfig_path)  # type: ignore[union-attr]


async def scheduler_kubeconfig(admin_kubeconfig: str, directory: Path) -> str:
    """deploy/'s namespace and RBAC applied, and a kubeconfig with a token of its ServiceAccount."""
    client = ApiClient(await ClusterConfig.load(admin_kubeconfig), user_agent="caldera-e2e-setup")
    try:
        await apply_deploy_rbac(client)
        token = await scheduler_token(client)
    finally:
        await client.close()
    return token_kubeconfig(admin_kubeconfig, token, directory / "scheduler.kubeconfig")


@pytest.fixture
async def kubeconfig(admin_kubeconfig: str, tmp_path: Path) -> str:
    """For the scheduler: deploy/'s namespace and RBAC applied, a token of its ServiceAccount."""
    return await scheduler_kubeconfig(admin_kubeconfig, tmp_path)


@asynccontextmanager
async def admin_api(admin_kubeconfig: str) -> AsyncIterator[Api]:
    """The ``api`` helper: the cluster's administrator (in a namespace of its own on a real cluster)."""
    client = ApiClient(await ClusterConfig.load(admin_kubeconfig), user_agent="caldera-e2e")
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
async def api(admin_kubeconfig: str) -> AsyncIterator[Api]:
    async with admin_api(admin_kubeconfig) as helper:
        yield helper


def write_conf(directory: Path) -> tuple[Registry, Path]:
    registry, text = e2e_registry()
    path = directory / "scheduler.conf"
    path.write_text(text)
    return registry, path


@pytest.fixture
def conf_file(tmp_path: Path) -> tuple[Registry, Path]:
    return write_conf(tmp_path)


class Running:
    """caldera-scheduler running in-process; ``stop()`` is SIGTERM."""

    def __init__(self, app: SchedulerApp, task: asyncio.Task[int], stop: asyncio.Event) -> None:
        self.app = app
        self.task = task
        self.stop_event = stop

    async def stop(self) -> int:
        self.stop_event.set()
        return await asyncio.wait_for(self.task, 30)


@asynccontextmanager
async def scheduler_starter(
    kubeconfig: str, conf_file: tuple[Registry, Path]
) -> AsyncIterator[Callable[..., Awaitable[Running]]]:
    """``start_scheduler``: starts caldera-scheduler in-process (each start another replica); every one
    still running is stopped on the way out."""
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


@pytest.fixture
async def start_scheduler(
    kubeconfig: str, conf_file: tuple[Registry, Path]
) -> AsyncIterator[Callable[..., Awaitable[Running]]]:
    async with scheduler_starter(kubeconfig, conf_file) as start:
        yield start


@asynccontextmanager
async def e2e_cluster(directory: Path, native_gang: bool = False) -> AsyncIterator[dict[str, Any]]:
    """The fixtures of one test, by name (sim, admin_kubeconfig, kubeconfig, api, conf_file,
    start_scheduler, tmp_path), around a simulator of its own (``native_gang``: serving
    scheduling.k8s.io/v1alpha2): for a test that runs other tests' scenarios each in a fresh cluster."""
    async with e2e_sim(native_gang) as cluster:
        admin = str(cluster.kubeconfig_path)
        kubeconfig = await scheduler_kubeconfig(admin, directory)
        conf = write_conf(directory)
        async with admin_api(admin) as api, scheduler_starter(kubeconfig, conf) as start:
            yield {
                "sim": cluster,
                "admin_kubeconfig": admin,
                "kubeconfig": kubeconfig,
                "api": api,
                "conf_file": conf,
                "start_scheduler": start,
                "tmp_path": directory,
            }


async def _ready(app: SchedulerApp, task: asyncio.Task[int]) -> bool:
    if task.done():
        raise RuntimeError(f"scheduler exited early with {task.result()}")
    return app.readiness()[0]
