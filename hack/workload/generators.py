"""The nine workload generators and the mixes that combine them (see `caldera.hack.workload`)."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from caldera.hack.workload.manifests import (
    IB_LABEL,
    WORKLOAD_LABEL,
    claim_manifest,
    claim_template_manifest,
    deployment_manifest,
    device_class_manifest,
    gang_manifests,
    node_manifest,
    pod_manifest,
    queue_manifest,
    resource_slice_manifest,
    sharing,
)
from caldera.hack.workload.plan import Action, ClusterShape, Generator

HIGH_PRIORITY_CLASS = "caldera-soak-high"
#: the DRA generator's driver, DeviceClass and ResourceClaimTemplate (one device of the class)
DRA_DRIVER = "gpu.example.com"
DRA_CLASS = "gpu.example.com"
DRA_TEMPLATE = "one-gpu"

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
            tolerations = (
                [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}] if gpu else None
            )
            objs = gang_manifests(
                job,
                self.namespace,
                size,
                workload=self.name,
                group={"queue": queue},
                queue=queue,
                requests=req,
                limits={"nvidia.com/gpu": req["nvidia.com/gpu"]} if gpu else None,
                tolerations=tolerations,
                run_seconds=run,
                native=self.native(rng),
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
            objs = gang_manifests(
                job,
                self.namespace,
                size,
                workload=self.name,
                group={"network_topology": {"mode": "hard", "highestTierAllowed": 1}},
                requests={"cpu": str(cpu), "memory": f"{cpu * 2}Gi"},
                run_seconds=run,
                native=self.native(rng),
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
            objs = gang_manifests(
                job,
                self.namespace,
                size,
                workload=self.name,
                group={"priority_class": HIGH_PRIORITY_CLASS},
                requests={"cpu": cpu, "memory": "16Gi"},
                priority_class=HIGH_PRIORITY_CLASS,
                run_seconds=run,
                native=self.native(rng),
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
            native_fraction=self.native_fraction,
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


@dataclass
class DraJobs(Generator):
    """Gangs whose pods use GPUs through Dynamic Resource Allocation (`resource.k8s.io/v1`).

    At `start` (a setup action): the DeviceClass `gpu.example.com`, one ResourceSlice per node of
    `shape.dra_nodes` (a node-local driver publishing `shape.dra_devices` GPUs in a pool of its own) and the
    ResourceClaimTemplate `one-gpu`. Then gangs of 1 to 8 pods: with probability `shared_fraction` the gang
    shares one ResourceClaim for one device (created with the gang, `<job>-gpu`: every pod lands on the
    device's node), else each pod names the template and gets a claim of its own from the resourceclaim
    controller. The class carries the driver's time-slicing configuration and a shared claim its own
    (MPS, for the pods that share the device): the allocations carry both to the driver."""

    name: str = "dra"
    shared_fraction: float = 0.25

    def setup(self, shape: ClusterShape) -> list[dict[str, Any]]:
        return [
            device_class_manifest(DRA_CLASS, DRA_DRIVER, sharing("TimeSlicing")),
            *(resource_slice_manifest(n, DRA_DRIVER, shape.dra_devices) for n in shape.dra_nodes),
            claim_template_manifest(DRA_TEMPLATE, self.namespace, DRA_CLASS),
        ]

    def plan(self, rng: random.Random, shape: ClusterShape) -> list[Action]:
        out = [Action(self.start, 0, "setup", self.name, self.setup(shape))]
        for i, at in enumerate(self.times(rng)):
            job = f"{self.name}-{i:05d}"
            size = rng.choice((1, 2, 4, 4, 8))
            shared = rng.random() < self.shared_fraction
            if shared:
                claims = [{"name": "gpu", "resourceClaimName": f"{job}-gpu"}]
                extra = [
                    claim_manifest(
                        f"{job}-gpu",
                        self.namespace,
                        DRA_CLASS,
                        workload=self.name,
                        driver=DRA_DRIVER,
                        parameters=sharing("MPS"),
                    )
                ]
            else:
                claims = [{"name": "gpu", "resourceClaimTemplateName": DRA_TEMPLATE}]
                extra = []
            objs = gang_manifests(
                job,
                self.namespace,
                size,
                workload=self.name,
                requests={"cpu": rng.choice(("500m", "1", "2")), "memory": "2Gi"},
                resource_claims=claims,
                run_seconds=self.run_seconds(rng),
            )
            out.append(Action(at, 0, "submit", self.name, extra + objs))
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
    "dra": DraJobs,
}

#: jobs (or operations) per second per generator in the standard mix, before scaling (`dra` is not in it:
#: it needs nodes with devices, which `caldera-sim soak --dra` adds)
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
    mix: dict[str, MixEntry],
    duration: float,
    namespace: str = "soak",
    start: float = 0.0,
    native_fraction: float = 0.0,
) -> list[Generator]:
    """The mix's generators; ``native_fraction`` of the gangs they make are Kubernetes' own PodGroups."""
    if not 0.0 <= native_fraction <= 1.0:
        raise ValueError(f"the native gang fraction must be within 0..1, not {native_fraction}")
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
            GENERATORS[name](
                rate=rate,
                duration=own_duration,
                namespace=namespace,
                start=start + own_start,
                native_fraction=native_fraction,
            )
        )
    return out


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
