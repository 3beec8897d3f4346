"""`caldera-sim workload`: synthetic workloads, reproducible by seed.

Every generator turns (seed, rate, duration) into a *plan*: a time-ordered list of API actions (create these
objects, scale that Deployment, cordon that node...). The same seed gives the same plan, so a failing soak
can be replayed; the plan is then executed against any API server (caldera-sim or a real cluster) by
`Executor`, which also plays the part of the controllers a bare API server lacks: finished pods are deleted
and a job's PodGroup goes with its last pod, so the cluster turns over. Jobs finish through the simulator's
`sim.caldera.io/run-seconds` annotation.

Generators: `gang` (training jobs, min member 2-256, cpu/memory/GPU), `mpi` (gangs held to one InfiniBand
group by a hard network-topology requirement), `besteffort` (single pods without PodGroup or requests),
`preempt` (high-priority gangs sized to need preemption), `deploy` (Deployments scaled up and down, with
rapid 0<->1 flips), `vgpu` (pods asking for random vGPU slices), `queues` (queues whose guarantees exceed the
cluster, fed with jobs) and `churn` (nodes added, cordoned, uncordoned and deleted).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import yaml

GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"
RUN_SECONDS = "sim.caldera.io/run-seconds"
WORKLOAD_LABEL = "caldera.io/workload"
JOB_LABEL = "caldera.io/job"
IB_LABEL = "sim.caldera.io/ib-group"
HIGH_PRIORITY_CLASS = "caldera-soak-high"
SCHEDULER = "caldera"
VG = "/apis/scheduling.volcano.sh/v1beta1"


# -- a small, fast API client ------------------------------------------------------------------------------
class ApiError(Exception):
    def __init__(self, status: int, body: bytes = b"") -> None:
        super().__init__(f"{status}: {body[:200]!r}")
        self.status = status


class Api:
    """Raw aiohttp over one keep-alive session; transient answers (429, 5xx, resets) are retried."""

    def __init__(self, url: str, token: str, concurrency: int = 64) -> None:
        self.url = url.rstrip("/")
        self.token = token
        self.concurrency = concurrency
        self._session: aiohttp.ClientSession | None = None
        self.retries = 0

    @classmethod
    def from_kubeconfig(cls, path: str | Path, concurrency: int = 64) -> Api:
        cfg = yaml.safe_load(Path(path).read_text())
        return cls(
            cfg["clusters"][0]["cluster"]["server"], cfg["users"][0]["user"].get("token", ""), concurrency
        )

    async def __aenter__(self) -> Api:
        self._session = aiohttp.ClientSession(
            headers={"Authorization": f"Bearer {self.token}"},
            connector=aiohttp.TCPConnector(limit=self.concurrency + 8),
            timeout=aiohttp.ClientTimeout(total=60),
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._session is not None:
            await self._session.close()

    @property
    def session(self) -> aiohttp.ClientSession:
        assert self._session is not None, "use `async with Api(...)`"
        return self._session

    async def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        params: dict[str, str] | None = None,
        content_type: str = "application/json",
        attempts: int = 12,
    ) -> tuple[int, bytes]:
        data = orjson.dumps(body) if body is not None else None
        headers = {"Content-Type": content_type} if data is not None else None
        delay = 0.05
        for attempt in range(attempts):
            try:
                async with self.session.request(
                    method, self.url + path, data=data, params=params, headers=headers
                ) as resp:
                    raw = await resp.read()
                    if resp.status == 429 or resp.status >= 500:
                        raise ApiError(resp.status, raw)
                    return resp.status, raw
            except (TimeoutError, ApiError, aiohttp.ClientError) as exc:
                if attempt == attempts - 1:
                    if isinstance(exc, ApiError):
                        raise
                    raise ApiError(0, str(exc).encode()) from exc
                self.retries += 1
                await asyncio.sleep(delay)
                delay = min(delay * 2, 2.0)
        raise AssertionError("unreachable")

    async def create(self, path: str, body: dict[str, Any]) -> bool:
        """True when created; an existing object (409, e.g. a retried create that landed) is not an error."""
        status, raw = await self.request("POST", path, body)
        if status in (200, 201, 202):
            return True
        if status == 409:
            return False
        raise ApiError(status, raw)

    async def delete(self, path: str, grace: int | None = None) -> None:
        body = {"gracePeriodSeconds": grace} if grace is not None else None
        status, raw = await self.request("DELETE", path, body)
        if status not in (200, 202, 404, 409):
            raise ApiError(status, raw)

    async def patch(self, path: str, body: dict[str, Any]) -> None:
        status, raw = await self.request("PATCH", path, body, content_type="application/merge-patch+json")
        if status not in (200, 201, 404):
            raise ApiError(status, raw)

    async def list(self, path: str, **params: str) -> tuple[list[dict[str, Any]], str]:
        status, raw = await self.request("GET", path, params=params or None)
        if status != 200:
            raise ApiError(status, raw)
        doc = orjson.loads(raw)
        return doc.get("items") or [], doc["metadata"].get("resourceVersion", "")


# -- object builders (what a user would submit) -------------------------------------------------------------
def pods_path(ns: str) -> str:
    return f"/api/v1/namespaces/{ns}/pods"


def podgroups_path(ns: str) -> str:
    return f"{VG}/namespaces/{ns}/podgroups"


def pod_manifest(
    name: str,
    ns: str,
    *,
    workload: str,
    job: str = "",
    group: str = "",
    requests: dict[str, str] | None = None,
    limits: dict[str, str] | None = None,
    run_seconds: float | None = None,
    scheduler: str = SCHEDULER,
    node_selector: dict[str, str] | None = None,
    tolerations: list[dict[str, Any]] | None = None,
    priority_class: str = "",
    queue: str = "",
) -> dict[str, Any]:
    annotations: dict[str, str] = {}
    if group:
        annotations[GROUP_ANNOTATION] = group
    if queue:
        annotations[QUEUE_ANNOTATION] = queue
    if run_seconds is not None:
        annotations[RUN_SECONDS] = f"{run_seconds:g}"
    resources: dict[str, Any] = {}
    if requests:
        resources["requests"] = requests
    if limits:
        resources["limits"] = limits
    spec: dict[str, Any] = {
        "schedulerName": scheduler,
        "containers": [{"name": "main", "image": "busybox", "resources": resources}],
        "terminationGracePeriodSeconds": 0,
    }
    if node_selector:
        spec["nodeSelector"] = node_selector
    if tolerations:
        spec["tolerations"] = tolerations
    if priority_class:
        spec["priorityClassName"] = priority_class
    labels = {WORKLOAD_LABEL: workload}
    if job:
        labels[JOB_LABEL] = job
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "labels": labels, "annotations": annotations},
        "spec": spec,
    }


def podgroup_manifest(
    name: str,
    ns: str,
    min_member: int,
    *,
    workload: str,
    queue: str = "default",
    priority_class: str = "",
    network_topology: dict[str, Any] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"minMember": min_member, "queue": queue}
    if priority_class:
        spec["priorityClassName"] = priority_class
    if network_topology:
        spec["networkTopology"] = network_topology
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": ns, "labels": {WORKLOAD_LABEL: workload, JOB_LABEL: name}},
        "spec": spec,
    }


def queue_manifest(name: str, weight: int = 1, guarantee: dict[str, str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"weight": weight, "reclaimable": True}
    if guarantee:
        spec["guarantee"] = {"resource": guarantee}
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": name, "labels": {WORKLOAD_LABEL: "queues"}},
        "spec": spec,
    }


def node_manifest(name: str, capacity: dict[str, str], labels: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **labels}},
        "status": {
            "capacity": capacity,
            "allocatable": capacity,
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
        },
    }


def deployment_manifest(name: str, ns: str, replicas: int, requests: dict[str, str]) -> dict[str, Any]:
    labels = {"app": name, WORKLOAD_LABEL: "deploy"}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": ns, "labels": {WORKLOAD_LABEL: "deploy"}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "schedulerName": SCHEDULER,
                    "terminationGracePeriodSeconds": 0,
                    "containers": [{"name": "main", "image": "busybox", "resources": {"requests": requests}}],
                },
            },
        },
    }


# -- plans ----------------------------------------------------------------------------------------------
@dataclass(order=True)
class Action:
    """One step of a plan: at `at` seconds from the start, do `op` with `objects` (or `target`/`value`)."""

    at: float
    seq: int
    op: str = field(compare=False)  # submit | scale | add-node | cordon | uncordon | delete-node | setup
    workload: str = field(compare=False, default="")
    objects: list[dict[str, Any]] = field(compare=False, default_factory=list)
    target: str = field(compare=False, default="")
    value: int = field(compare=False, default=0)

    def pods(self) -> list[dict[str, Any]]:
        return [o for o in self.objects if o.get("kind") == "Pod"]


@dataclass
class ClusterShape:
    """What the generators may assume about the cluster (for sizing jobs, not for placing them)."""

    ib_groups: int = 4
    gpu_per_node: int = 8
    cpu_per_node: int = 32
    nodes: int = 64
    vgpu_memory: int = 32768  # MiB per card


@dataclass
class Generator:
    """A workload generator: `rate` jobs (or operations) per second for `duration` seconds from `start`."""

    name: str = ""
    rate: float = 1.0
    duration: float = 60.0
    start: float = 0.0
    namespace: str = "soak"

    def times(self, rng: random.Random) -> Iterable[float]:
        """Poisson arrivals."""
        if self.rate <= 0:
            return
        t = self.start
        end = self.start + self.duration
        while True:
            t += rng.expovariate(self.rate)
            if t >= end:
                return
            yield t

    def plan(self, rng: random.Random, shape: ClusterShape) -> list[Action]:
        raise NotImplementedError

    def run_seconds(self, rng: random.Random) -> float:
        return round(rng.uniform(3.0, 15.0), 1)


GANG_SIZES = (2, 2, 4, 4, 4, 8, 8, 8, 16, 16, 32, 64, 128, 256)


@dataclass
class GangJobs(Generator):
    name: str = "gang"
    queues: tuple[str, ...] = ("default",)
    gpu_fraction: float = 0.2

    def plan(self, rng: random.Random, shape: ClusterShape) -> list[Action]:
        out = []
        for i, at in enumerate(self.times(rng)):
            size = rng.choice(GANG_SIZES)
            gpu = rng.random() < self.gpu_fraction and size <= 16
            if gpu:
                req = {"cpu": str(rng.choice((2, 4, 8))), "memory": f"{rng.choice((8, 16, 32))}Gi"}
                req["nvidia.com/gpu"] = str(rng.choice((1, 2, 4, 8)))
            else:
                cpu = (
                    rng.choice(("250m", "500m", "1", "2"))
                    if size > 32
                    else rng.choice(("500m", "1", "2", "4"))
                )
                req = {"cpu": cpu, "memory": f"{rng.choice((1, 2, 4, 8))}Gi"}
            job = f"{self.name}-{i:05d}"
            queue = rng.choice(self.queues)
            run = self.run_seconds(rng)
            objs: list[dict[str, Any]] = [
                podgroup_manifest(job, self.namespace, size, workload=self.name, queue=queue)
            ]
            tolerations = (
                [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}] if gpu else None
            )
            for k in range(size):
                objs.append(
                    pod_manifest(
                        f"{job}-{k}",
                        self.namespace,
                        workload=self.name,
                        job=job,
                        group=job,
                        queue=queue,
                        requests=req,
                        limits={"nvidia.com/gpu": req["nvidia.com/gpu"]} if gpu else None,
                        tolerations=tolerations,
                        run_seconds=run,
                    )
                )
            out.append(Action(at, 0, "submit", self.name, objs))
        return out


@dataclass
class MpiJobs(Generator):
    """Gangs that must land inside one InfiniBand group: a hard network-topology requirement at tier 1
    (the group label, through the topology plugin's `topologyKeys`)."""

    name: str = "mpi"

    def plan(self, rng: random.Random, shape: ClusterShape) -> list[Action]:
        out = []
        per_group_cpu = max(1, shape.nodes // max(1, shape.ib_groups)) * shape.cpu_per_node
        for i, at in enumerate(self.times(rng)):
            size = rng.choice((2, 4, 8, 16, 32))
            cpu = rng.choice((1, 2, 4))
            if size * cpu > per_group_cpu // 2:
                size = max(2, per_group_cpu // (2 * cpu))
            job = f"{self.name}-{i:05d}"
            run = self.run_seconds(rng)
            objs: list[dict[str, Any]] = [
                podgroup_manifest(
                    job,
                    self.namespace,
                    size,
                    workload=self.name,
                    network_topology={"mode": "hard", "highestTierAllowed": 1},
                )
            ]
            for k in range(size):
                objs.append(
                    pod_manifest(
                        f"{job}-{k}",
                        self.namespace,
                        workload=self.name,
                        job=job,
                        group=job,
                        requests={"cpu": str(cpu), "memory": f"{cpu * 2}Gi"},
                        run_seconds=run,
                    )
                )
            out.append(Action(at, 0, "submit", self.name, objs))
        return out


@dataclass
class BestEffort(Generator):
    """Single pods, no PodGroup (the scheduler's controller makes one), mostly without requests."""

    name: str = "besteffort"
    burst: int = 5

    def plan(self, rng: random.Random, shape: ClusterShape) -> list[Action]:
        out = []
        n = 0
        for at in self.times(rng):
            objs = []
            for _ in range(rng.randint(1, self.burst)):
                req = None if rng.random() < 0.7 else {"cpu": "100m", "memory": "128Mi"}
                objs.append(
                    pod_manifest(
                        f"{self.name}-{n:06d}",
                        self.namespace,
                        workload=self.name,
                        requests=req,
                        run_seconds=round(rng.uniform(1.0, 8.0), 1),
                    )
                )
                n += 1
            out.append(Action(at, 0, "submit", self.name, objs))
        return out


@dataclass
class HighPriority(Generator):
    """High-priority gangs large enough that, on a busy cluster, they only fit by preempting."""

    name: str = "preempt"

    def plan(self, rng: random.Random, shape: ClusterShape) -> list[Action]:
        out = [
            Action(
                self.start,
                0,
                "setup",
                self.name,
                [
                    {
                        "apiVersion": "scheduling.k8s.io/v1",
                        "kind": "PriorityClass",
                        "metadata": {"name": HIGH_PRIORITY_CLASS, "labels": {WORKLOAD_LABEL: self.name}},
                        "value": 100_000,
                    }
                ],
            )
        ]
        for i, at in enumerate(self.times(rng)):
            size = rng.choice((1, 2, 4, 8))
            job = f"{self.name}-{i:05d}"
            run = self.run_seconds(rng)
            cpu = str(rng.choice((8, 16, 24)))
            objs: list[dict[str, Any]] = [
                podgroup_manifest(
                    job, self.namespace, size, workload=self.name, priority_class=HIGH_PRIORITY_CLASS
                )
            ]
            for k in range(size):
                objs.append(
                    pod_manifest(
                        f"{job}-{k}",
                        self.namespace,
                        workload=self.name,
                        job=job,
                        group=job,
                        requests={"cpu": cpu, "memory": "16Gi"},
                        priority_class=HIGH_PRIORITY_CLASS,
                        run_seconds=run,
                    )
                )
            out.append(Action(at, 0, "submit", self.name, objs))
        return out


@dataclass
class Deployments(Generator):
    """`count` Deployments; each scaling event picks one and sets a random size, and `flip_fraction` of them
    are rapid 0<->1 flips (scale to 0 and back to 1 within a fraction of a second)."""

    name: str = "deploy"
    count: int = 4
    max_replicas: int = 20
    flip_fraction: float = 0.3

    def plan(self, rng: random.Random, shape: ClusterShape) -> list[Action]:
        names = [f"{self.name}-{i}" for i in range(self.count)]
        out = [
            Action(
                self.start,
                0,
                "setup",
                self.name,
                [
                    deployment_manifest(n, self.namespace, 1, {"cpu": "200m", "memory": "256Mi"})
                    for n in names
                ],
            )
        ]
        for at in self.times(rng):
            name = rng.choice(names)
            if rng.random() < self.flip_fraction:
                out.append(Action(at, 0, "scale", self.name, target=name, value=0))
                out.append(Action(at + rng.uniform(0.01, 0.3), 0, "scale", self.name, target=name, value=1))
            else:
                out.append(
                    Action(at, 0, "scale", self.name, target=name, value=rng.randint(0, self.max_replicas))
                )
        return out


@dataclass
class VgpuPods(Generator):
    """Pods asking for one vGPU slice of random memory (and cores)."""

    name: str = "vgpu"

    def plan(self, rng: random.Random, shape: ClusterShape) -> list[Action]:
        out = []
        for i, at in enumerate(self.times(rng)):
            memory = rng.choice((1024, 2048, 4096, 8192, 16384))
            limits = {
                "volcano.sh/vgpu-number": "1",
                "volcano.sh/vgpu-memory": str(memory),
                "volcano.sh/vgpu-cores": str(rng.choice((0, 10, 25, 50))),
            }
            pod = pod_manifest(
                f"{self.name}-{i:05d}",
                self.namespace,
                workload=self.name,
                requests={"cpu": "500m", "memory": "1Gi"},
                limits=limits,
                run_seconds=self.run_seconds(rng),
            )
            out.append(Action(at, 0, "submit", self.name, [pod]))
        return out


@dataclass
class OversubscribedQueues(Generator):
    """Queues whose guarantees together exceed the cluster, then gang jobs into them."""

    name: str = "queues"
    queues: int = 3
    guarantee_factor: float = 1.5

    def queue_names(self) -> tuple[str, ...]:
        return tuple(f"soak-q{i}" for i in range(self.queues))

    def plan(self, rng: random.Random, shape: ClusterShape) -> list[Action]:
        cpu = int(shape.nodes * shape.cpu_per_node * self.guarantee_factor / max(1, self.queues))
        setup = [
            queue_manifest(q, weight=rng.randint(1, 4), guarantee={"cpu": str(cpu), "memory": f"{cpu * 4}Gi"})
            for q in self.queue_names()
        ]
        out = [Action(self.start, 0, "setup", self.name, setup)]
        jobs = GangJobs(
            name=self.name,
            rate=self.rate,
            duration=self.duration,
            start=self.start + 0.5,
            namespace=self.namespace,
            queues=self.queue_names(),
            gpu_fraction=0.0,
        )
        out += jobs.plan(rng, shape)
        return out


@dataclass
class NodeChurn(Generator):
    """Nodes added, cordoned, uncordoned and deleted. Only nodes this generator added are deleted, and a
    deleted node's pods are deleted with it (a real cluster's pod garbage collector does that)."""

    name: str = "churn"

    def plan(self, rng: random.Random, shape: ClusterShape) -> list[Action]:
        out = []
        live: list[str] = []
        cordoned: set[str] = set()
        n = 0
        for at in self.times(rng):
            x = rng.random()
            if x < 0.4 or not live:
                name = f"{self.name}-{n:04d}"
                n += 1
                labels = {IB_LABEL: f"ib-{rng.randrange(shape.ib_groups)}"}
                cap = {"cpu": "32", "memory": "128Gi", "pods": "110"}
                out.append(
                    Action(at, 0, "add-node", self.name, [node_manifest(name, cap, labels)], target=name)
                )
                live.append(name)
            elif x < 0.7:
                name = rng.choice(live)
                op = "uncordon" if name in cordoned else "cordon"
                (cordoned.discard if name in cordoned else cordoned.add)(name)
                out.append(Action(at, 0, op, self.name, target=name))
            else:
                name = live.pop(rng.randrange(len(live)))
                cordoned.discard(name)
                out.append(Action(at, 0, "delete-node", self.name, target=name))
        return out


GENERATORS: dict[str, type[Generator]] = {
    "gang": GangJobs,
    "mpi": MpiJobs,
    "besteffort": BestEffort,
    "preempt": HighPriority,
    "deploy": Deployments,
    "vgpu": VgpuPods,
    "queues": OversubscribedQueues,
    "churn": NodeChurn,
}

#: jobs (or operations) per second per generator in the standard mix, before scaling
DEFAULT_MIX: dict[str, float] = {
    "gang": 0.6,
    "mpi": 0.15,
    "besteffort": 2.0,
    "preempt": 0.05,
    "deploy": 0.5,
    "vgpu": 1.0,
    "queues": 0.2,
    "churn": 0.2,
}


#: a generator's rate, or (rate, duration, start) for one that runs only part of the time
MixEntry = float | tuple[float, float, float]


def make_generators(
    mix: dict[str, MixEntry], duration: float, namespace: str = "soak", start: float = 0.0
) -> list[Generator]:
    out = []
    for name, entry in mix.items():
        if name not in GENERATORS:
            raise ValueError(f"unknown generator {name!r} (known: {', '.join(GENERATORS)})")
        if isinstance(entry, tuple):
            rate, own_duration, own_start = entry
            own_duration = min(own_duration, max(0.0, duration - own_start))
        else:
            rate, own_duration, own_start = entry, duration, 0.0
        out.append(
            GENERATORS[name](rate=rate, duration=own_duration, namespace=namespace, start=start + own_start)
        )
    return out


def build_plan(generators: list[Generator], seed: int, shape: ClusterShape | None = None) -> list[Action]:
    """One reproducible plan: each generator draws from its own stream (seed, name), so adding a generator
    to a mix leaves the others' plans unchanged."""
    shape = shape or ClusterShape()
    actions: list[Action] = []
    for g in generators:
        actions += g.plan(random.Random(f"{seed}/{g.name}"), shape)
    actions.sort(key=lambda a: (a.at, a.workload))
    for i, a in enumerate(actions):
        a.seq = i
    return actions


def parse_mix(text: str) -> dict[str, MixEntry]:
    """`gang=0.5,vgpu=1` (rates per second); `gang=0.5@30+10` runs for 30 s from second 10; `default` is
    the standard mix and `default*2` doubles its rates."""
    text = text.strip()
    if text.startswith("default"):
        factor = float(text.split("*", 1)[1]) if "*" in text else 1.0
        return {k: v * factor for k, v in DEFAULT_MIX.items()}
    mix: dict[str, MixEntry] = {}
    for part in text.split(","):
        if not part.strip():
            continue
        name, _, spec = part.partition("=")
        name = name.strip()
        rate_text, _, window = spec.partition("@")
        rate = float(rate_text or DEFAULT_MIX.get(name, 1.0))
        if window:
            length, _, begin = window.partition("+")
            mix[name] = (rate, float(length), float(begin or 0.0))
        else:
            mix[name] = rate
    return mix


# -- execution ------------------------------------------------------------------------------------------
@dataclass
class ExecStats:
    submitted_pods: int = 0
    submitted_jobs: int = 0
    deleted_pods: int = 0
    deleted_groups: int = 0
    scales: int = 0
    node_ops: int = 0
    errors: int = 0
    created_at: dict[str, float] = field(default_factory=dict)  # pod name -> monotonic creation time


class Executor:
    """Runs a plan against an API server and keeps the cluster turning over (the janitor)."""

    def __init__(
        self,
        api: Api,
        plan: list[Action],
        namespace: str = "soak",
        *,
        concurrency: int = 32,
        janitor_interval: float = 2.0,
        finished_ttl: float = 0.0,
        on_error: Callable[[str], None] | None = None,
    ) -> None:
        self.api = api
        self.plan = plan
        self.ns = namespace
        self.sem = asyncio.Semaphore(concurrency)
        self.stats = ExecStats()
        self.janitor_interval = janitor_interval
        self.finished_ttl = finished_ttl
        self._finished_seen: dict[str, float] = {}  # finished pod -> when the janitor first saw it so
        self._deleting: set[str] = set()
        self.on_error = on_error or (lambda msg: None)
        self.groups: dict[str, int] = {}  # PodGroup name -> pods of it still existing
        self._tasks: set[asyncio.Task[None]] = set()
        self.paused = False

    async def setup_namespace(self) -> None:
        await self.api.create(
            "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": self.ns}}
        )

    async def _guard(self, what: str, coro: Any) -> None:
        try:
            async with self.sem:
                await coro
        except Exception as exc:
            self.stats.errors += 1
            self.on_error(f"{what}: {exc}")

    def _spawn(self, what: str, coro: Any) -> None:
        t = asyncio.create_task(self._guard(what, coro))
        self._tasks.add(t)
        t.add_done_callback(self._tasks.discard)

    async def _create(self, obj: dict[str, Any]) -> None:
        kind = obj["kind"]
        ns = obj["metadata"].get("namespace", self.ns)
        if kind == "Pod":
            self.stats.created_at[obj["metadata"]["name"]] = time.monotonic()
            await self.api.create(pods_path(ns), obj)
            self.stats.submitted_pods += 1
        elif kind == "PodGroup":
            await self.api.create(podgroups_path(ns), obj)
        elif kind == "Queue":
            await self.api.create(f"{VG}/queues", obj)
        elif kind == "PriorityClass":
            await self.api.create("/apis/scheduling.k8s.io/v1/priorityclasses", obj)
        elif kind == "Deployment":
            await self.api.create(f"/apis/apps/v1/namespaces/{ns}/deployments", obj)
        elif kind == "Node":
            await self.api.create("/api/v1/nodes", obj)
        else:
            raise ValueError(f"cannot create {kind}")

    async def _submit(self, action: Action) -> None:
        groups = [o for o in action.objects if o["kind"] == "PodGroup"]
        for g in groups:  # the group first, so its pods never wait for it
            await self._create(g)
        pods = action.pods()
        for g in groups:
            self.groups[g["metadata"]["name"]] = sum(
                1 for p in pods if p["metadata"]["annotations"].get(GROUP_ANNOTATION) == g["metadata"]["name"]
            )
        self.stats.submitted_jobs += 1
        await asyncio.gather(*(self._create(p) for p in pods))

    async def _apply(self, action: Action) -> None:
        op = action.op
        if op == "submit":
            await self._submit(action)
        elif op == "setup" or op == "add-node":
            for obj in action.objects:
                await self._create(obj)
            self.stats.node_ops += op == "add-node"
        elif op == "scale":
            await self.api.patch(
                f"/apis/apps/v1/namespaces/{self.ns}/deployments/{action.target}/scale",
                {"spec": {"replicas": action.value}},
            )
            self.stats.scales += 1
        elif op in ("cordon", "uncordon"):
            await self.api.patch(
                f"/api/v1/nodes/{action.target}", {"spec": {"unschedulable": op == "cordon"}}
            )
            self.stats.node_ops += 1
        elif op == "delete-node":
            await self.api.delete(f"/api/v1/nodes/{action.target}")
            pods, _ = await self.api.list("/api/v1/pods", fieldSelector=f"spec.nodeName={action.target}")
            for p in pods:
                meta = p["metadata"]
                await self.api.delete(f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}", grace=0)
            self.stats.node_ops += 1
        else:
            raise ValueError(f"unknown op {op}")

    async def janitor_pass(self) -> None:
        """Delete pods finished for `finished_ttl` seconds (what a Job's ttlSecondsAfterFinished does) and
        the PodGroups they leave without pods. Finished pods that linger are part of a real cluster: the
        scheduler and its metrics must not count them."""
        now = time.monotonic()
        finished: set[str] = set()
        for phase in ("Succeeded", "Failed"):
            pods, _ = await self.api.list(pods_path(self.ns), fieldSelector=f"status.phase={phase}")
            for p in pods:
                meta = p["metadata"]
                name = meta["name"]
                finished.add(name)
                seen = self._finished_seen.setdefault(name, now)
                if now - seen < self.finished_ttl or name in self._deleting:
                    continue
                self._deleting.add(name)
                self._spawn("janitor", self._delete_pod(name, meta.get("annotations") or {}))
        for name in list(self._finished_seen):
            if name not in finished and name not in self._deleting:
                del self._finished_seen[name]

    async def _delete_pod(self, name: str, annotations: dict[str, str]) -> None:
        try:
            await self.api.delete(f"{pods_path(self.ns)}/{name}", grace=0)
        finally:
            self._deleting.discard(name)
            self._finished_seen.pop(name, None)
        self.stats.deleted_pods += 1
        group = annotations.get(GROUP_ANNOTATION, "")
        if group in self.groups:
            self.groups[group] -= 1
            if self.groups[group] <= 0:
                del self.groups[group]
                await self.api.delete(f"{podgroups_path(self.ns)}/{group}")
                self.stats.deleted_groups += 1

    async def _janitor(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stop.wait(), self.janitor_interval)
            try:
                await self.janitor_pass()
            except Exception as exc:
                self.stats.errors += 1
                self.on_error(f"janitor: {exc}")

    async def run(
        self,
        stop: asyncio.Event | None = None,
        t0: float | None = None,
        janitor_stop: asyncio.Event | None = None,
    ) -> ExecStats:
        """Apply the plan on time. The janitor runs until the plan is done, or until `janitor_stop` when
        given (so that a cluster keeps turning over after the last arrival)."""
        stop = stop or asyncio.Event()
        await self.setup_namespace()
        t0 = time.monotonic() if t0 is None else t0
        janitor_stop = janitor_stop or stop
        janitor = asyncio.create_task(self._janitor(janitor_stop))
        self.janitor_task = janitor
        try:
            for action in self.plan:
                delay = t0 + action.at - time.monotonic()
                if delay > 0:
                    with contextlib.suppress(asyncio.TimeoutError):
                        await asyncio.wait_for(stop.wait(), delay)
                if stop.is_set():
                    break
                self._spawn(f"{action.op} {action.target or action.workload}", self._apply(action))
            if self._tasks:
                await asyncio.gather(*list(self._tasks))
        finally:
            stop.set()
            if janitor_stop is stop:
                await janitor
        return self.stats

    async def wait_janitor(self) -> None:
        task = getattr(self, "janitor_task", None)
        if task is not None:
            await task


# -- CLI ------------------------------------------------------------------------------------------------
def register(subparsers: Any) -> None:
    p: argparse.ArgumentParser = subparsers.add_parser(
        "workload",
        help="run synthetic workloads (reproducible by seed) against a cluster",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--kubeconfig", help="the cluster (e.g. one `caldera-sim serve` wrote)")
    p.add_argument(
        "--mix", default="default", help="`default`, `default*2`, or `gang=0.5,vgpu=1,churn=2@30+10,...`"
    )
    p.add_argument("--duration", type=float, default=60.0, help="seconds of arrivals")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--namespace", default="soak")
    p.add_argument("--plan", action="store_true", help="print the plan (one line per action) and exit")
    p.set_defaults(func=run)


def describe(action: Action) -> str:
    if action.op == "submit":
        pods = action.pods()
        groups = [o for o in action.objects if o["kind"] == "PodGroup"]
        mm = groups[0]["spec"]["minMember"] if groups else "-"
        req = pods[0]["spec"]["containers"][0]["resources"] if pods else {}
        return f"{action.at:8.2f} submit {action.workload} pods={len(pods)} minMember={mm} {orjson.dumps(req).decode()}"
    if action.op in ("setup", "add-node"):
        names = ",".join(o["metadata"]["name"] for o in action.objects)
        return f"{action.at:8.2f} {action.op} {action.workload} {names}"
    return f"{action.at:8.2f} {action.op} {action.target} {action.value if action.op == 'scale' else ''}".rstrip()


def run(args: argparse.Namespace) -> int:
    plan = build_plan(make_generators(parse_mix(args.mix), args.duration, args.namespace), args.seed)
    if args.plan or not args.kubeconfig:
        for a in plan:
            print(describe(a))
        return 0

    async def go() -> ExecStats:
        async with Api.from_kubeconfig(args.kubeconfig) as api:
            ex = Executor(api, plan, args.namespace, on_error=lambda m: print("error:", m, flush=True))
            return await ex.run()

    stats = asyncio.run(go())
    print(
        f"workload: {stats.submitted_jobs} jobs, {stats.submitted_pods} pods submitted, {stats.scales} scalings, "
        f"{stats.node_ops} node operations, {stats.deleted_pods} finished pods deleted, {stats.errors} errors"
    )
    return 0 if stats.errors == 0 else 1
