"""The executor: runs a plan against an API server on time, and plays the controllers a bare API server
lacks (the janitor deletes finished pods, and a job's PodGroup and the ResourceClaims its pods shared with
its last pod)."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from caldera.hack.workload.client import VG, Api, podgroups_path, pods_path
from caldera.hack.workload.manifests import NATIVE_API_VERSION, RESOURCE_API, group_of
from caldera.hack.workload.plan import Action

DRA_PLURALS = {
    "DeviceClass": "deviceclasses",
    "ResourceSlice": "resourceslices",
    "ResourceClaim": "resourceclaims",
    "ResourceClaimTemplate": "resourceclaimtemplates",
}


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
        self.groups: dict[tuple[str, bool], int] = {}  # (PodGroup, native) -> pods of it still existing
        #: (PodGroup, native) -> ResourceClaims submitted with it
        self.group_claims: dict[tuple[str, bool], list[str]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self.paused = False

    async def setup_namespace(self) -> None:
        await self.api.create(
            "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": self.ns}}
        )

    async def _guard(self, what: str, make: Callable[[], Awaitable[None]]) -> None:
        # The coroutine is made once the work may start: a task cancelled before that (the run
        # ending, or waiting for the semaphore) leaves no coroutine behind that was never awaited.
        try:
            async with self.sem:
                await make()
        except Exception as exc:
            self.stats.errors += 1
            self.on_error(f"{what}: {exc}")

    def _spawn(self, what: str, make: Callable[[], Awaitable[None]]) -> None:
        t = asyncio.create_task(self._guard(what, make))
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
            await self.api.create(podgroups_path(ns, obj["apiVersion"] == NATIVE_API_VERSION), obj)
        elif kind == "Queue":
            await self.api.create(f"{VG}/queues", obj)
        elif kind == "PriorityClass":
            await self.api.create("/apis/scheduling.k8s.io/v1/priorityclasses", obj)
        elif kind == "Deployment":
            await self.api.create(f"/apis/apps/v1/namespaces/{ns}/deployments", obj)
        elif kind == "Node":
            await self.api.create("/api/v1/nodes", obj)
        elif kind in ("DeviceClass", "ResourceSlice"):
            await self.api.create(f"/apis/{RESOURCE_API}/{DRA_PLURALS[kind]}", obj)
        elif kind in ("ResourceClaim", "ResourceClaimTemplate"):
            await self.api.create(f"/apis/{RESOURCE_API}/namespaces/{ns}/{DRA_PLURALS[kind]}", obj)
        else:
            raise ValueError(f"cannot create {kind}")

    async def _submit(self, action: Action) -> None:
        groups = [o for o in action.objects if o["kind"] == "PodGroup"]
        claims = [o["metadata"]["name"] for o in action.objects if o["kind"] == "ResourceClaim"]
        for o in action.objects:  # the group and shared claims first, so its pods never wait for them
            if o["kind"] in ("PodGroup", "ResourceClaim"):
                await self._create(o)
        pods = action.pods()
        for g in groups:
            key = (g["metadata"]["name"], g["apiVersion"] == NATIVE_API_VERSION)
            self.groups[key] = sum(1 for p in pods if group_of(p) == key)
            if claims:
                self.group_claims[key] = claims
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
                self._spawn("janitor", functools.partial(self._delete_pod, name, group_of(p)))
        for name in list(self._finished_seen):
            if name not in finished and name not in self._deleting:
                del self._finished_seen[name]

    async def _delete_pod(self, name: str, group: tuple[str, bool] | None) -> None:
        try:
            await self.api.delete(f"{pods_path(self.ns)}/{name}", grace=0)
        finally:
            self._deleting.discard(name)
            self._finished_seen.pop(name, None)
        self.stats.deleted_pods += 1
        if group is not None and group in self.groups:
            self.groups[group] -= 1
            if self.groups[group] <= 0:
                del self.groups[group]
                await self.api.delete(f"{podgroups_path(self.ns, group[1])}/{group[0]}")
                self.stats.deleted_groups += 1
                for claim in self.group_claims.pop(group, ()):
                    await self.api.delete(f"/apis/{RESOURCE_API}/namespaces/{self.ns}/resourceclaims/{claim}")

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
                self._spawn(
                    f"{action.op} {action.target or action.workload}", functools.partial(self._apply, action)
                )
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
