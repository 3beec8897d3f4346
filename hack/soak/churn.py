"""Pods churned through a soak (``churn``): created at an even rate through the load and each deleted
a moment later, half of them small enough to be bound first, half too big for any node (they stay
pending, and the scheduler writes their PodScheduled condition). Both kinds belong to two PodGroups
that live through the run, so what comes and goes is pods.

What it must leave behind is nothing: once the churn is over and the cluster is quiet, each
replica's maps kept per object (``caldera_remembered_objects``) hold no more than the live objects
the API holds, and its RSS late in the churn is within ``RSS_TOLERANCE`` of what it was half-way
(:func:`judge_churn`). The RSS half-way is the reference, not the RSS before: CPython keeps the
memory it took at the peak of pods alive (its allocator seldom gives arenas back), so RSS before
and after differ by the working set; what must not happen is growth with the pods churned since.
"""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass, field
from typing import Any

from caldera.hack.soak.checker import Checker
from caldera.hack.workload.client import Api, ApiError, podgroups_path, pods_path
from caldera.hack.workload.manifests import pod_manifest, podgroup_manifest

#: the groups churned pods belong to: bound ones, and ones that fit no node
FIT, NOFIT = "churn-fit", "churn-nofit"
#: how much a replica's RSS may grow from the middle of the churn to its end (fraction, and MiB)
RSS_TOLERANCE = (0.10, 24.0)
#: entries a map kept per object may hold beyond the live objects (writes still in flight)
SLACK = 50
#: a replica started less than this before half-way (seconds) is not judged on its RSS: it was still
#: listing and filling its cache then (a replica replaced 0.4 s before half-way measured 53 MiB there)
RSS_WARMUP = 30.0


def halfway_record(pid: int, rss: int, led: bool, age: float) -> dict[str, Any]:
    """What a replica's end is judged against: its RSS half-way and whether it led then; a replica
    too young then gets a note instead of an RSS judgement."""
    record: dict[str, Any] = {"pid": pid, "rss_halfway": rss, "led_halfway": led}
    if age < RSS_WARMUP:
        record["note"] = f"RSS not judged: started {age:.1f}s before half-way, its cache still filling"
    return record


@dataclass
class ChurnStats:
    asked: int = 0
    created: int = 0
    deleted: int = 0
    errors: int = 0
    seconds: float = 0.0
    #: per replica: RSS (bytes) half-way and at the end, and the remembered counts at the end
    replicas: dict[str, dict[str, Any]] = field(default_factory=dict)


class Churn:
    def __init__(
        self,
        api: Api,
        pods: int,
        seconds: float,
        namespace: str = "soak",
        lifetime: tuple[float, float] = (0.3, 1.5),
        in_flight: int = 256,
        seed: int = 1,
    ) -> None:
        self.api = api
        self.pods = pods
        self.seconds = max(1.0, seconds)
        self.namespace = namespace
        self.lifetime = lifetime
        self._slots = asyncio.Semaphore(in_flight)
        self._rng = random.Random(seed)
        self.stats = ChurnStats(asked=pods)
        self.halfway = asyncio.Event()
        self.done = asyncio.Event()

    async def run(self, stop: asyncio.Event) -> None:
        for group in (FIT, NOFIT):
            await self.api.create(
                podgroups_path(self.namespace), podgroup_manifest(group, self.namespace, 1, workload="churn")
            )
        start = time.monotonic()
        rate = self.pods / self.seconds
        tasks: set[asyncio.Task[None]] = set()
        try:
            for i in range(self.pods):
                if stop.is_set():
                    break
                if i == self.pods // 2:
                    self.halfway.set()
                delay = start + i / rate - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
                await self._slots.acquire()
                task = asyncio.create_task(self._one(i))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
            await asyncio.gather(*tasks, return_exceptions=True)
        finally:
            self.stats.seconds = round(time.monotonic() - start, 1)
            self.halfway.set()
            self.done.set()

    async def _one(self, i: int) -> None:
        try:
            name = f"churn-{i}"
            fits = i % 2 == 0
            body = pod_manifest(
                name,
                self.namespace,
                workload="churn",
                group=FIT if fits else NOFIT,
                requests={"cpu": "10m", "memory": "16Mi"} if fits else {"cpu": "1000"},
            )
            try:
                if not await self.api.create(pods_path(self.namespace), body):
                    self.stats.errors += 1
                    return
                self.stats.created += 1
                await asyncio.sleep(self._rng.uniform(*self.lifetime))
                await self.api.delete(f"{pods_path(self.namespace)}/{name}", grace=0)
                self.stats.deleted += 1
            except (ApiError, OSError, TimeoutError):
                self.stats.errors += 1
        finally:
            self._slots.release()


def judge_churn(
    checker: Checker,
    stats: ChurnStats,
    live: dict[str, int],
) -> None:
    """Each replica's remembered maps against the live objects (``live``: pods, podgroups), and its RSS
        at the end against half-way (unless it took or lost the lease in between: a leader runs cycles, binds
    and status writes a standby does not, and its RSS is not comparable); violations are the checker's."""
    for name, r in stats.replicas.items():
        remembered: dict[tuple[str, str], float] = r.get("remembered") or {}
        bounds = {
            ("cache", "pods"): live["pods"],
            ("cache", "podgroups"): live["podgroups"],
            ("cache", "binds_unseen"): live["pods"],
            ("binder", "bound"): live["pods"],
            ("binder", "issued"): live["pods"],
            ("binder", "in_hand"): live["pods"],
            ("evictor", "issued"): live["pods"],
            ("status", "pod_conditions"): live["pods"],
            ("status", "pod_condition_times"): live["pods"],
            ("status", "pod_conditions_deferred"): live["pods"],
            ("status", "podgroup_status"): live["podgroups"],
            ("status", "podgroup_condition_times"): live["podgroups"],
            ("status", "podgroup_conditions_deferred"): live["podgroups"],
            ("status", "observed"): live["podgroups"],
            ("status", "event_objects"): live["pods"] + live["podgroups"] + live["queues"],
            ("status", "event_series"): 2 * (live["pods"] + live["podgroups"] + live["queues"]),
        }
        for key, bound in bounds.items():
            got = remembered.get(key)
            if got is not None and got > bound + SLACK:
                checker.violate(
                    "memory",
                    f"{name} {key[0]}/{key[1]}",
                    f"{got:g} entries after the churn of {stats.created} pods; the API holds {bound} live",
                )
        mid, end = r.get("rss_halfway"), r.get("rss_end")
        if mid and end and "note" not in r:
            fraction, mib = RSS_TOLERANCE
            if end > mid * (1 + fraction) + mib * 2**20:
                checker.violate(
                    "memory",
                    f"{name} rss",
                    f"RSS {mid / 2**20:.0f} MiB half-way through the churn, {end / 2**20:.0f} MiB at its end "
                    f"(more than {fraction:.0%} + {mib:g} MiB)",
                )
