"""Plans: a time-ordered list of API actions, drawn by generators from (seed, rate, duration)."""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any


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
    dra_nodes: tuple[str, ...] = ()  # nodes whose DRA driver publishes `dra_devices` GPUs each
    dra_devices: int = 8


@dataclass
class Generator:
    """A workload generator: `rate` jobs (or operations) per second for `duration` seconds from `start`."""

    name: str = ""
    rate: float = 1.0
    duration: float = 60.0
    start: float = 0.0
    namespace: str = "soak"
    #: the share of the gangs it makes that are Kubernetes' own PodGroups (scheduling.k8s.io/v1alpha2)
    native_fraction: float = 0.0

    def native(self, rng: random.Random) -> bool:
        """Whether the next gang is a native one (no draw at all when none is, so plans stay as they were)."""
        return self.native_fraction > 0 and rng.random() < self.native_fraction

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
