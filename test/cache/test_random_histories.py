"""Random cluster histories against one invariant: whenever the watches have caught up and no bind is
in flight, the snapshot a cycle takes from the cache that followed the history step by step (with its
assumptions, confirmations, forgotten binds and its copies carried from cycle to cycle) holds exactly
what a snapshot of a fresh cache loaded with the API's objects holds: the same pods on the same nodes
with the same statuses, the same requested and free resources per node, in the nodes' objects and in
the node table the predicates read.

The history mixes what a soak does to a scheduler: gangs created and deleted, pods created again
under the name of a deleted one, binds that succeed (the answer before or after the watch shows
them), fail, or land although their answer was lost, pods deleted while their bind is in flight,
kubelets starting and finishing pods, pods of another scheduler, nodes deleted and created again
while their pods stay bound, nodes whose allocatable is raised or lowered under their pods, and watch
events delivered late, in bursts; with preempt and reclaim in the conf, evictions accepted or refused;
and a standby replica that follows the same watches and takes the lease mid-history. Each case is a seed:
a failure names it, and the same seed replays the same history."""

from __future__ import annotations

import asyncio
import random
from collections import deque
from typing import Any

import msgspec
import pytest

from caldera.cache.store import ClusterCache
from caldera.config.conf import DEFAULT_CONF, parse_conf
from caldera.framework.dra.objects import ResourceClaim, ResourceClaimConsumerReference, ResourceClaimStatus
from caldera.framework.objects import Node, Pod, PodGroup
from caldera.framework.result import Placement
from caldera.framework.snapshot import Snapshot
from caldera.hack.scenario import (
    claim_pod_spec,
    device_class,
    load,
    node,
    pod,
    podgroup,
    resource_claim,
    resource_slice,
)
from caldera.scheduler.loop import RecordingBinder, SchedulerLoop
from caldera.scheduler.registry import builtin_registry

NODES = [f"n{i}" for i in range(6)]
REGISTRY = builtin_registry()
CONF = parse_conf(DEFAULT_CONF, REGISTRY)
#: with evictions: Volcano's default conf with preempt and reclaim (gangs of higher priority preempt,
#: queues reclaim)
EVICTING_CONF = parse_conf(
    DEFAULT_CONF.replace('"enqueue, allocate, backfill"', '"enqueue, allocate, preempt, reclaim, backfill"'),
    REGISTRY,
)
assert EVICTING_CONF.actions != CONF.actions
DELETING = "2026-01-01T00:00:00Z"


def _node_state(snap: Snapshot) -> dict[str, tuple[Any, ...]]:
    """Per node what the cycle reads of it without loading its pods: requested, free, releasing and
    pipelined resources in its object and in its node-table row, and whether it takes pods."""
    table = snap.table
    out: dict[str, tuple[Any, ...]] = {}
    for name, info in snap.nodes.items():
        row = info.row
        out[name] = (
            (info.used.cpu, info.used.memory),
            (info.idle.cpu, info.idle.memory),
            (info.releasing.cpu, info.releasing.memory),
            (info.pipelined.cpu, info.pipelined.memory),
            tuple(table.used[row, :2]),
            tuple(table.idle[row, :2]),
            tuple(table.releasing[row, :2]),
            tuple(table.pipelined[row, :2]),
            bool(table.ready[row]),
            bool(table.unschedulable[row]),
        )
    return out


def _job_state(snap: Snapshot) -> tuple[dict[str, tuple[Any, ...]], list[str]]:
    """Per job its gang size, queue and pods (status, node), and which jobs have pending work."""
    jobs = {
        key: (
            job.uid,
            job.min_available,
            job.queue,
            sorted((t.uid, t.status.name, t.node_name) for t in job.tasks.values()),
        )
        for key, job in snap.jobs.items()
    }
    return jobs, sorted(snap.pending_jobs or ())


def _pods_on_nodes(snap: Snapshot) -> dict[str, list[tuple[str, str]]]:
    return {
        name: sorted((t.uid, t.status.name) for t in info.tasks.values()) for name, info in snap.nodes.items()
    }


def _bound(pod_: Pod, node_name: str) -> Pod:
    """The pod as the API has it once a binding to ``node_name`` is accepted."""
    return msgspec.structs.replace(pod_, spec=msgspec.structs.replace(pod_.spec, node_name=node_name))


class CheckingBinder(RecordingBinder):
    """The binder's side of the invariant: it is never handed a pod to a node the cache knows is gone,
    nor a pod whose bind it still has."""

    def __init__(self, cache: ClusterCache, in_flight: set[str]) -> None:
        super().__init__()
        self.cache = cache
        self.in_flight = in_flight

    def bind(self, placements: list[Placement]) -> None:
        for p in placements:
            assert p.node in self.cache.nodes, f"{p.task.key} handed to the binder for {p.node}, a node gone"
            assert p.task.uid not in self.in_flight, f"{p.task.key} handed to the binder twice"
            self.in_flight.add(p.task.uid)
        super().bind(placements)


class History:
    """The API's objects, the watch events not delivered yet, the binds in flight, and the
    scheduler's cache and loop following them."""

    def __init__(self, seed: int, evicting: bool = False, standby: bool = False) -> None:
        self.rng = random.Random(seed)
        self.evicting = evicting
        self.nodes: dict[str, Node] = {}
        self.pods: dict[str, Pod] = {}  # uid -> pod as the API has it
        self.groups: dict[str, PodGroup] = {}
        self.events: dict[str, deque[tuple[str, Any]]] = {
            "pods": deque(),
            "nodes": deque(),
            "podgroups": deque(),
        }
        self.in_flight: list[tuple[str, str]] = []  # (pod uid, node) handed to the binder
        self.binding: set[str] = set()  # uids whose bind the binder has
        self.seen: list[tuple[dict[str, tuple[Any, ...]], tuple[dict[str, tuple[Any, ...]], list[str]]]] = []
        self.gangs = 0
        self.foreign = 0
        self.cache = ClusterCache(("caldera",))
        #: a second replica's cache: it follows the same watches and runs no cycle until it leads
        self.standby = ClusterCache(("caldera",)) if standby else None
        self._lead(self.cache)
        for name in NODES:
            self._put_node(node(name, cpu="4", memory="8Gi"))

    def _lead(self, cache: ClusterCache) -> None:
        """``cache``'s replica leads: its cycles run, with a binder of its own; every snapshot its
        cycles take is noted (``seen``) before the session changes its copies."""
        self.cache = cache
        self.binder = CheckingBinder(cache, self.binding)
        conf = EVICTING_CONF if self.evicting else CONF
        self.loop = SchedulerLoop(
            cache, lambda: conf, REGISTRY, self.binder, between_steps=self._between_steps
        )
        take = cache.snapshot

        def snapshot() -> Snapshot:
            snap = take()
            self.seen.append((_node_state(snap), _job_state(snap)))
            return snap

        cache.snapshot = snapshot  # type: ignore[method-assign]
        take_async = cache.snapshot_async

        async def snapshot_async(step_seconds: float = 0.0, between: Any = None) -> Snapshot:
            # (in steps of one unit of copying each, whatever the caller asks: events come between)
            snap = await take_async(0.0, between)
            self.seen.append((_node_state(snap), _job_state(snap)))
            return snap

        cache.snapshot_async = snapshot_async  # type: ignore[method-assign]

    def take_over(self) -> None:
        """The leader is gone (its lease lost): the binds it had in flight land or not without it,
        and the standby, which followed every watch and ran no cycle, leads from its next cycle."""
        assert self.standby is not None
        for uid, node_name in self.in_flight:
            current = self.pods.get(uid)
            if current is not None and not current.spec.node_name and self.rng.random() < 0.5:
                self._put_pod(_bound(current, node_name))
        self.in_flight = []
        self.binding.clear()
        standby, self.standby = self.standby, None
        self._lead(standby)

    # -- the API side ------------------------------------------------------------------------------
    def _put_node(self, obj: Node) -> None:
        self.nodes[obj.metadata.name] = obj
        self.events["nodes"].append(("upsert", obj))

    def _put_pod(self, obj: Pod) -> None:
        self.pods[obj.metadata.uid] = obj
        self.events["pods"].append(("upsert", obj))

    def _drop_pod(self, uid: str) -> None:
        obj = self.pods.pop(uid)
        self.events["pods"].append(("delete", obj))

    def new_gang(self, name: str = "") -> None:
        if not name:
            self.gangs += 1
            name = f"g{self.gangs}"
        size = self.rng.randint(1, 4)
        pg = podgroup(name, min_member=self.rng.randint(1, size))
        self.groups[name] = pg
        self.events["podgroups"].append(("upsert", pg))
        priority = self.rng.choice([None, 10, 1000]) if self.evicting else None
        for i in range(size):
            cpu = self.rng.choice(["500m", "1", "2"])
            self._put_pod(pod(f"{name}-{i}", cpu=cpu, memory="1Gi", group=name, priority=priority))

    def recreate_deleted_member(self) -> None:
        """A gang's controller makes a pod again under the name of one that is gone (a new uid)."""
        live = {p.metadata.name for p in self.pods.values()}
        for name in self.groups:
            for i in range(4):
                pod_name = f"{name}-{i}"
                if pod_name not in live and self.rng.random() < 0.3:
                    self._put_pod(pod(pod_name, cpu="1", memory="1Gi", group=name))
                    return

    def recreate_deleted_gang(self) -> None:
        """A gang deleted earlier made again under its name (its PodGroup and pods with new uids),
        as a Deployment scaled 0 -> 1 -> 0 -> 1 or a job re-submitted does."""
        gone = [f"g{i}" for i in range(1, self.gangs + 1) if f"g{i}" not in self.groups]
        if gone:
            self.new_gang(self.rng.choice(gone))

    def delete_some_pod(self) -> None:
        if self.pods:
            self._drop_pod(self.rng.choice(sorted(self.pods)))

    def delete_gang(self) -> None:
        if not self.groups:
            return
        name = self.rng.choice(sorted(self.groups))
        for uid in [u for u, p in self.pods.items() if p.metadata.name.startswith(f"{name}-")]:
            self._drop_pod(uid)
        self.events["podgroups"].append(("delete", self.groups.pop(name)))

    def foreign_pod(self) -> None:
        """A pod of another scheduler, bound and running on a node of ours."""
        self.foreign += 1
        self._put_pod(
            pod(
                f"other-{self.foreign}",
                cpu="500m",
                memory="512Mi",
                scheduler="default-scheduler",
                node_name=self.rng.choice(NODES),
                phase="Running",
            )
        )

    def kubelet(self) -> None:
        """A pod being deleted goes, a bound pod starts, or a running one finishes."""
        deleting = sorted(u for u, p in self.pods.items() if p.metadata.deletion_timestamp)
        if deleting and self.rng.random() < 0.5:
            self._drop_pod(self.rng.choice(deleting))
            return
        bound = sorted(
            u for u, p in self.pods.items() if p.spec.node_name and p.status.phase in ("Pending", "Running")
        )
        if not bound:
            return
        uid = self.rng.choice(bound)
        old = self.pods[uid]
        phase = "Running" if old.status.phase == "Pending" else self.rng.choice(["Succeeded", "Failed"])
        self._put_pod(msgspec.structs.replace(old, status=msgspec.structs.replace(old.status, phase=phase)))

    def node_churn(self) -> None:
        """A node deleted (its pods stay bound to its name), or one deleted earlier created again."""
        gone = [n for n in NODES if n not in self.nodes]
        if gone and self.rng.random() < 0.6:
            name = self.rng.choice(gone)
            fresh = node(name, cpu="4", memory="8Gi")
            meta = msgspec.structs.replace(fresh.metadata, uid=f"node-{name}-{self.rng.random()}")
            self._put_node(msgspec.structs.replace(fresh, metadata=meta))
        elif len(self.nodes) > 2:
            name = self.rng.choice(sorted(self.nodes))
            self.events["nodes"].append(("delete", self.nodes.pop(name)))

    def node_update(self) -> None:
        """A node's allocatable changes (raised, or lowered under its pods), or it is cordoned or
        uncordoned."""
        if not self.nodes:
            return
        name = self.rng.choice(sorted(self.nodes))
        fresh = node(
            name,
            cpu=self.rng.choice(["2", "4", "6"]),
            memory=self.rng.choice(["4Gi", "8Gi"]),
            unschedulable=self.rng.random() < 0.2,
        )
        meta = msgspec.structs.replace(fresh.metadata, uid=self.nodes[name].metadata.uid)
        self._put_node(msgspec.structs.replace(fresh, metadata=meta))

    # -- the watches ---------------------------------------------------------------------------------
    def appliers(self, cache: ClusterCache) -> dict[str, tuple[Any, Any]]:
        """Per kind, the cache's watch handlers (upsert, delete)."""
        return {
            "pods": (cache.upsert_pod, cache.delete_pod),
            "nodes": (cache.upsert_node, cache.delete_node),
            "podgroups": (cache.upsert_podgroup, cache.delete_podgroup),
        }

    def deliver(self, everything: bool = False) -> None:
        """Some (or all) of each kind's events, in order within the kind, as the watches bring them."""
        followers = [self.appliers(self.cache)]
        if self.standby is not None:
            followers.append(self.appliers(self.standby))
        for kind in self.rng.sample(sorted(self.events), k=len(self.events)):
            queue = self.events[kind]
            n = len(queue) if everything else self.rng.randint(0, len(queue))
            for _ in range(n):
                what, obj = queue.popleft()
                for apply in followers:
                    upsert, delete = apply[kind]
                    (upsert if what == "upsert" else delete)(obj)

    # -- the binder ----------------------------------------------------------------------------------
    def cycle(self) -> None:
        """One cycle, as the tests run it (snapshot, decision and hand-over in one go) or as the binary
        does: the snapshot made in steps with watch events applied between them, and the placements
        of each committed gang assumed and handed to the binder while the session goes on."""
        self.binder.placements.clear()
        self.binder.evictions.clear()
        if self.rng.random() < 0.5:
            self.loop.run_once()
        else:
            asyncio.run(self._cycle_in_steps())
        self.hand_over()

    async def _cycle_in_steps(self) -> None:
        await self.loop.cycle()

    def _between_steps(self) -> None:
        if self.rng.random() < 0.3:
            self.deliver()

    def hand_over(self) -> None:
        """The binder takes the cycle's placements; the API answers its evictions."""
        self.in_flight += [(p.task.uid, p.node) for p in self.binder.placements]
        for eviction in self.binder.evictions:
            uid = eviction.task.uid
            current = self.pods.get(uid)
            if current is None or current.metadata.deletion_timestamp:
                continue
            if self.rng.random() < 0.8:
                # the eviction is accepted: the pod is deleted gracefully (the kubelet removes it later)
                meta = msgspec.structs.replace(current.metadata, deletion_timestamp=DELETING)
                self._put_pod(msgspec.structs.replace(current, metadata=meta))
            else:
                self.cache.forget_eviction(uid)  # a disruption budget kept refusing it

    def settle_binds(self, everything: bool = False) -> None:
        """Binds in flight (some, or all) get their answers."""
        keep: list[tuple[str, str]] = []
        for uid, node_name in self.in_flight:
            if not everything and self.rng.random() < 0.4:
                keep.append((uid, node_name))
                continue
            current = self.pods.get(uid)
            if current is None or current.spec.node_name:
                self.cache.forget_assumption(uid)  # 404, or 409: bound already
                self.given_up(uid)
                continue
            self.answer(current, node_name)
        self.in_flight = keep
        self.binding.intersection_update(uid for uid, _ in keep)

    def given_up(self, uid: str) -> None:
        """The binder gave the pod's placement up before writing anything."""

    def answer(self, current: Pod, node_name: str) -> None:
        """Bound (the answer before or after the watch shows it), refused, or lost although the API
        bound the pod."""
        uid = current.metadata.uid
        roll = self.rng.random()
        if roll < 0.75:
            self._put_pod(_bound(current, node_name))
            if self.rng.random() < 0.5:
                self.deliver()  # the watch may show the bind before the answer arrives
            self.cache.confirm_bound(uid)
        elif roll < 0.9:
            self.cache.forget_assumption(uid)  # refused, or retries ran out
        else:
            # the answer was lost although the API bound it: the binder gives the pod up, the
            # watch shows it bound later
            self._put_pod(_bound(current, node_name))
            self.cache.forget_assumption(uid)

    # -- the invariant -------------------------------------------------------------------------------
    def quiesce_and_check(self, step: int) -> None:
        """Twice (the cache keeps two sets of copies, used in turn): let every bind be answered and
        every event arrive, then compare the next cycle's snapshot with a fresh cache's."""
        for _ in range(2):
            self._compare(step)

    def fresh_cache(self) -> ClusterCache:
        """A cache loaded with the API's objects as they are now."""
        return load(
            ClusterCache(("caldera",)),
            nodes=self.nodes.values(),
            podgroups=self.groups.values(),
            pods=self.pods.values(),
        )

    def _compare(self, step: int) -> None:
        self.settle_binds(everything=True)
        self.deliver(everything=True)
        expected = self.fresh_cache().snapshot()
        self.seen.clear()
        self.binder.placements.clear()
        self.binder.evictions.clear()
        self.loop.run_once()  # its snapshot is the one compared
        assert self.seen, "the cycle took no snapshot"
        nodes_seen, jobs_seen = self.seen[0]
        where = f"at step {step}"
        assert nodes_seen == _node_state(expected), where
        assert jobs_seen == _job_state(expected), where
        # What the cache holds once the cycle is handed over: what it held before, with the cycle's
        # placements binding and its victims releasing. (The pods on each node are read last: reading
        # them marks the copies as read.)
        want = _pods_on_nodes(expected)
        for placement in self.binder.placements:
            want[placement.node] = sorted([*want[placement.node], (placement.task.uid, "BINDING")])
        for eviction in self.binder.evictions:
            held = want[eviction.task.node_name]
            want[eviction.task.node_name] = sorted(
                (uid, "RELEASING" if uid == eviction.task.uid else status) for uid, status in held
            )
        assert _pods_on_nodes(self.cache.snapshot()) == want, where
        self.hand_over()

    def step(self) -> None:
        """One thing happens (by the weights below), and the watches may bring some events."""
        what = self.rng.choices(
            [
                self.new_gang,
                self.recreate_deleted_member,
                self.recreate_deleted_gang,
                self.delete_some_pod,
                self.delete_gang,
                self.foreign_pod,
                self.kubelet,
                self.node_churn,
                self.node_update,
                self.cycle,
                self.settle_binds,
            ],
            weights=[22, 5, 3, 8, 4, 4, 16, 2, 2, 20, 14],
        )[0]
        what()
        if self.rng.random() < 0.5:
            self.deliver()


@pytest.mark.parametrize("seed", range(24))
@pytest.mark.parametrize("evicting", [False, True], ids=["allocate", "preempt-reclaim"])
def test_a_cycle_after_any_history_sees_what_a_fresh_cache_of_the_api_objects_sees(
    seed: int, evicting: bool
) -> None:
    history = History(seed, evicting)
    for step in range(1, 161):
        history.step()
        if step % 40 == 0:
            history.quiesce_and_check(step)


@pytest.mark.parametrize("seed", range(8))
def test_a_standby_that_takes_the_lease_mid_history_cycles_on_what_a_fresh_cache_sees(seed: int) -> None:
    """A second replica follows the watches for 100 steps without running a cycle (its copies never
    handed out, the changes it was told of never taken), then leads: its cycles see what a fresh
    cache of the API's objects sees, as the first leader's did."""
    history = History(seed, evicting=seed % 2 == 1, standby=True)
    for step in range(1, 161):
        history.step()
        if step == 100:
            history.take_over()
        if step % 40 == 0:
            history.quiesce_and_check(step)


GPU = "gpu.example.com"
GPUS_PER_NODE = 2


def _held(claims: Any) -> dict[tuple[str, str, str], list[str]]:
    """Device -> the claims whose allocation holds it."""
    out: dict[tuple[str, str, str], list[str]] = {}
    for claim in claims:
        allocation = claim.status.allocation
        if allocation is None:
            continue
        for r in allocation.devices.results:
            out.setdefault((r.driver, r.pool, r.device), []).append(claim.metadata.name)
    return out


class DraHistory(History):
    """The same histories with devices: two GPUs per node (a ResourceSlice each), and most gangs'
    pods each claiming one GPU through a ResourceClaim of their own. The binder writes a placement's
    allocation and reservation on its claims before the binding (and takes them back when the binding
    then fails); the resourceclaim controller deallocates a claim once its pod has finished and
    removes it with its pod. What the API holds may never give one device to two claims, and at each
    quiet moment the cycle's view of the devices in use is a fresh cache's."""

    def __init__(self, seed: int) -> None:
        self.claims: dict[str, ResourceClaim] = {}  # claim name -> claim as the API has it
        self.placed: dict[str, Placement] = {}  # pod uid -> its placement, while in flight
        self.version = 0  # the API's resourceVersions
        #: claims the binder took the reservation back from, for the controller to deallocate
        self.unreserved: list[str] = []
        super().__init__(seed, evicting=False)
        self.events["claims"] = deque()
        self.cache.upsert_device_class(device_class(GPU))
        for name in NODES:
            self.cache.upsert_resource_slice(
                resource_slice(name, GPU, [f"gpu-{i}" for i in range(GPUS_PER_NODE)])
            )

    def _put_claim(self, claim: ResourceClaim) -> str:
        """The claim written to the API; returns the resourceVersion the API gave it."""
        self.version += 1
        version = str(self.version)
        claim = msgspec.structs.replace(
            claim, metadata=msgspec.structs.replace(claim.metadata, resource_version=version)
        )
        self.claims[claim.metadata.name] = claim
        self.events["claims"].append(("upsert", claim))
        doubled = {device: names for device, names in _held(self.claims.values()).items() if len(names) > 1}
        assert not doubled, f"devices allocated to two claims at once: {doubled}"
        return version

    def _claim_of(self, pod_: Pod) -> str:
        refs = pod_.spec.resource_claims
        return refs[0].resource_claim_name if refs else ""

    def _drop_pod(self, uid: str) -> None:
        name = self._claim_of(self.pods[uid])
        super()._drop_pod(uid)
        if name and name in self.claims:
            self.events["claims"].append(("delete", self.claims.pop(name)))

    def new_gang(self, name: str = "") -> None:
        before = set(self.pods)
        super().new_gang(name)
        if self.rng.random() < 0.3:
            return  # a gang without devices
        for uid in sorted(set(self.pods) - before, key=lambda u: self.pods[u].metadata.name):
            self._with_claim(uid)

    def recreate_deleted_member(self) -> None:
        before = set(self.pods)
        super().recreate_deleted_member()
        for uid in set(self.pods) - before:
            self._with_claim(uid)

    def _with_claim(self, uid: str) -> None:
        """The pod made again, claiming one GPU through a claim named after it (a new one each time)."""
        old = self.pods[uid]
        claim = resource_claim(f"{old.metadata.name}-gpu-{uid[-4:]}", GPU)
        self._put_claim(claim)
        spec = pod(
            old.metadata.name,
            cpu="1",
            memory="1Gi",
            group=old.metadata.annotations.get("scheduling.k8s.io/group-name"),
            uid=uid,
            spec_extra=claim_pod_spec(claim.metadata.name),
        ).spec
        self.pods[uid] = msgspec.structs.replace(old, spec=spec)
        self.events["pods"].append(("upsert", self.pods[uid]))

    def kubelet(self) -> None:
        if self.unreserved and self.rng.random() < 0.5:
            self._deallocate(self.unreserved.pop(0))
            return
        before = {u: p.status.phase for u, p in self.pods.items()}
        super().kubelet()
        for uid, p in self.pods.items():
            if before.get(uid) != p.status.phase and p.status.phase in ("Succeeded", "Failed"):
                self._deallocate(self._claim_of(p))

    def _deallocate(self, name: str) -> None:
        """The resourceclaim controller: a claim no pod can use any more is reserved for nobody and
        deallocated."""
        claim = self.claims.get(name)
        if claim is not None and claim.status.allocation is not None:
            self._put_claim(msgspec.structs.replace(claim, status=ResourceClaimStatus()))

    def appliers(self, cache: ClusterCache) -> dict[str, tuple[Any, Any]]:
        return {
            **super().appliers(cache),
            "claims": (cache.upsert_resource_claim, cache.delete_resource_claim),
        }

    def hand_over(self) -> None:
        for p in self.binder.placements:
            self.placed[p.task.uid] = p
        super().hand_over()

    def given_up(self, uid: str) -> None:
        self.placed.pop(uid)

    def fresh_cache(self) -> ClusterCache:
        fresh = super().fresh_cache()
        fresh.upsert_device_class(device_class(GPU))
        for name in NODES:
            fresh.upsert_resource_slice(resource_slice(name, GPU, [f"gpu-{i}" for i in range(GPUS_PER_NODE)]))
        for claim in self.claims.values():
            fresh.upsert_resource_claim(claim)
        return fresh

    def answer(self, current: Pod, node_name: str) -> None:
        """As the binder does it: the claims written first (allocation and reservation), then the
        binding; a binding refused after its claims were written takes the reservation back (the
        controller then deallocates)."""
        uid = current.metadata.uid
        placement = self.placed.pop(uid)
        written = []
        for ca in placement.claims or ():
            claim = self.claims.get(ca.name)
            if claim is None or claim.metadata.uid != ca.uid:
                break  # deleted meanwhile: nothing more is written
            reserved = ResourceClaimConsumerReference(resource="pods", name=current.metadata.name, uid=uid)
            version = self._put_claim(
                msgspec.structs.replace(
                    claim, status=ResourceClaimStatus(allocation=ca.allocation, reserved_for=[reserved])
                )
            )
            self.cache.claim_written(ca.key, ca.uid, version)
            written.append(ca.name)
        if len(written) == len(placement.claims or ()) and self.rng.random() < 0.85:
            self._put_pod(_bound(current, node_name))
            if self.rng.random() < 0.5:
                self.deliver()
            self.cache.confirm_bound(uid)
            return
        # the binder takes the reservations back; the controller deallocates later
        for name in written:
            claim = self.claims[name]
            unreserved = msgspec.structs.replace(claim.status, reserved_for=[])
            self._put_claim(msgspec.structs.replace(claim, status=unreserved))
            self.unreserved.append(name)
        self.cache.forget_assumption(uid)

    def _compare(self, step: int) -> None:
        super()._compare(step)
        # the cycle just compared placed pods: their binds answered, the watches caught up
        self.settle_binds(everything=True)
        self.deliver(everything=True)
        fresh = self.fresh_cache()
        mine, theirs = self.cache.dra_view(), fresh.dra_view()
        assert mine is not None and theirs is not None
        assert dict(mine.holders) == dict(theirs.holders), f"at step {step}"
        assert set(mine.allocated) == set(theirs.allocated), f"at step {step}"


@pytest.mark.parametrize("seed", range(16))
def test_devices_in_use_after_any_history_are_a_fresh_caches_and_never_given_twice(seed: int) -> None:
    history = DraHistory(seed)
    for step in range(1, 161):
        history.step()
        if step % 40 == 0:
            history.quiesce_and_check(step)
