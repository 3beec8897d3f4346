"""Queue allocated figures under churn.

A long random run drives a ClusterCache and a SchedulerLoop the way the watches, the binder and the
kubelet would: gangs and group-less pods created (the PodGroup controller makes their group later),
binds that stay in flight for a few cycles, succeed (confirmed or not) or fail (assumption forgotten),
stale pod events while a bind is in flight, pods running, finishing, deleted gracefully or at once,
PodGroups deleted and recreated, victims evicted, and leader failovers (a fresh cache listed from the
API). After every cycle each queue's allocated CPU, in the session's ``queue_shares`` and in the
exported ``volcano_queue_allocated_milli_cpu`` gauge, must equal the figure recomputed from the pods:
requests of the pods that hold a node (bound, or bind in flight) and are neither finished nor being
deleted, in a PodGroup that exists — plus what the cycle itself reserved and not yet handed over
(tasks of pipelined gangs), minus what it evicted. That is Volcano's figure (proportion.go: the tasks
in ``AllocatedStatus`` of the session's jobs at open, then ``AllocateFunc`` for each task allocated or
pipelined and ``DeallocateFunc`` for each evicted); test/metrics/test_queue_allocated_states.py holds
one pod in each state, and the soak compares the leader's gauge with the same definition.
"""

from __future__ import annotations

import random

import msgspec
import pytest
from prometheus_client import REGISTRY

from caldera.cache.store import ClusterCache
from caldera.config.conf import DEFAULT_CONF, parse_conf
from caldera.framework.model import GROUP_NAME_ANNOTATION, TaskStatus
from caldera.framework.objects import Pod, PodGroup
from caldera.framework.result import SessionResult
from caldera.hack.scenario import gang, load, node, pod, podgroup, queue
from caldera.metrics.cycle import CycleMetrics
from caldera.scheduler.loop import RecordingBinder, SchedulerLoop
from caldera.scheduler.registry import builtin_registry

PREEMPTING_CONF = """\
actions: "enqueue, allocate, preempt, reclaim, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: overcommit
  - name: drf
  - name: predicates
  - name: proportion
  - name: nodeorder
"""

QUEUES = ("default", "research")
FINISHED = ("Succeeded", "Failed")


def _replace(
    p: Pod,
    *,
    node_name: str | None = None,
    phase: str | None = None,
    deleting: bool = False,
    annotations: dict[str, str] | None = None,
) -> Pod:
    spec = p.spec if node_name is None else msgspec.structs.replace(p.spec, node_name=node_name)
    status = p.status if phase is None else msgspec.structs.replace(p.status, phase=phase)
    meta = p.metadata
    if deleting:
        meta = msgspec.structs.replace(meta, deletion_timestamp="2024-01-01T00:00:00Z")
    if annotations:
        meta = msgspec.structs.replace(meta, annotations={**meta.annotations, **annotations})
    return msgspec.structs.replace(p, metadata=meta, spec=spec, status=status)


class _Churn:
    """The API's truth (pods, PodGroups), a cache fed from it as the watches would, a scheduler loop
    and a pretend binder and kubelet."""

    def __init__(self, seed: int, conf_text: str) -> None:
        self.rng = random.Random(seed)
        self.nodes = [node(f"n{i}", cpu="8", memory="32Gi") for i in range(6)]
        self.queues = [queue(q, weight=1 + i) for i, q in enumerate(QUEUES)]
        self.pods: dict[str, Pod] = {}
        self.cpu: dict[str, int] = {}  # pod uid → requested cores, as written in the pod
        self.groups: dict[str, PodGroup] = {}  # PodGroups that exist, by name
        self.group_queue: dict[str, str] = {}  # every group name ever used → its queue
        self.inflight: dict[str, str] = {}  # pod uid → node, binds issued and not settled
        self.serial = 0
        self.registry = builtin_registry()
        self.conf = parse_conf(conf_text, self.registry)
        self.binder = RecordingBinder()
        self.metrics = CycleMetrics()
        self.failover()

    def failover(self) -> None:
        """A new leader: a fresh cache listed from the API (in-flight binds of the old one are lost)."""
        for uid in self.inflight:
            if uid in self.pods:
                self.cache.forget_assumption(uid)
        self.inflight.clear()
        self.cache = ClusterCache(("caldera",))
        load(self.cache, nodes=self.nodes, queues=self.queues, podgroups=self.groups.values())
        for p in self.pods.values():
            self.cache.upsert_pod(p)
        self.loop = SchedulerLoop(
            self.cache, lambda: self.conf, self.registry, self.binder, on_cycle=self.metrics.observe
        )

    # -- the API side --------------------------------------------------------------------------
    def put(self, p: Pod) -> None:
        self.pods[p.metadata.uid] = p
        self.cache.upsert_pod(p)

    def delete(self, uid: str) -> None:
        self.inflight.pop(uid, None)
        self.cache.delete_pod(self.pods.pop(uid))

    def create_group(self, name: str, q: str, min_member: int) -> None:
        pg = podgroup(name, min_member=min_member, queue=q)
        self.groups[name] = pg
        self.group_queue[name] = q
        self.cache.upsert_podgroup(pg)

    def create_gang(self) -> None:
        self.serial += 1
        name = f"job-{self.serial}"
        size = self.rng.randint(1, 4)
        cores = self.rng.randint(1, 3)
        q = self.rng.choice(QUEUES)
        _, pods = gang(name, size, cpu=str(cores), memory="1Gi", queue=q)
        self.create_group(name, q, self.rng.randint(1, size))
        for p in pods:
            self.cpu[p.metadata.uid] = cores
            self.put(p)

    def create_ungrouped(self) -> None:
        """A pod without a group; the PodGroup controller makes one for it in a later step."""
        self.serial += 1
        cores = self.rng.randint(1, 2)
        p = pod(f"solo-{self.serial}", cpu=str(cores), memory="1Gi")
        self.cpu[p.metadata.uid] = cores
        self.put(p)

    def group_of(self, p: Pod) -> str:
        return p.metadata.annotations.get(GROUP_NAME_ANNOTATION, "")

    def expected(self, result: SessionResult) -> dict[str, float]:
        out = dict.fromkeys(QUEUES, 0.0)
        for uid, p in self.pods.items():
            group = self.group_of(p)
            if group not in self.groups:
                continue
            if p.status.phase in FINISHED or p.metadata.deletion_timestamp is not None:
                continue
            if p.spec.node_name or uid in self.inflight:
                out[self.group_queue[group]] += self.cpu[uid] * 1000.0
        # What this cycle decided: placements (handed over), reservations of pipelined gangs kept in
        # the session (not handed over), victims (no longer allocated to their queue).
        for job in result.jobs.values():
            for task in job.tasks_in(TaskStatus.ALLOCATED, TaskStatus.PIPELINED):
                out[job.queue] += self.cpu[task.uid] * 1000.0
        for eviction in result.evictions:
            p = self.pods.get(eviction.task.uid)
            group = self.group_of(p) if p is not None else ""
            if group in self.groups and p is not None and p.metadata.deletion_timestamp is None:
                out[self.group_queue[group]] -= self.cpu[eviction.task.uid] * 1000.0
        return out

    # -- the binder and the kubelet ------------------------------------------------------------
    def hand_over(self) -> None:
        for placement in self.binder.placements:
            self.inflight[placement.task.uid] = placement.node
        for eviction in self.binder.evictions:
            uid = eviction.task.uid
            if uid in self.pods:
                self.put(_replace(self.pods[uid], deleting=True))
        self.binder.placements.clear()
        self.binder.evictions.clear()

    def settle_binds(self) -> None:
        rng = self.rng
        for uid, node_name in list(self.inflight.items()):
            roll = rng.random()
            if roll < 0.25:
                if rng.random() < 0.3:  # a stale event (an annotation patch) while the bind is in flight
                    self.put(_replace(self.pods[uid], annotations={"example.com/seen": str(rng.random())}))
                continue
            del self.inflight[uid]
            if roll < 0.4:  # the bind failed for good (429/500 storm)
                self.cache.forget_assumption(uid)
                continue
            if roll < 0.7:
                self.cache.confirm_bound(uid)
                if rng.random() < 0.5:
                    continue  # the watch brings the bound pod later (it is bound in the API already)
            self.put(_replace(self.pods[uid], node_name=node_name, phase="Pending"))
        # pods the API shows bound whose watch event is late
        for uid, p in self.pods.items():
            if p.spec.node_name and self.cache.task(uid).pod.spec.node_name != p.spec.node_name:
                if rng.random() < 0.5:
                    self.cache.upsert_pod(p)

    def bind_in_api(self) -> None:
        """Confirmed binds exist in the API at once (the watch may lag, see settle_binds)."""
        for uid, task in self.cache.tasks.items():
            p = self.pods.get(uid)
            if p is not None and task.status == TaskStatus.BOUND and not p.spec.node_name:
                self.pods[uid] = _replace(p, node_name=task.node_name, phase="Pending")

    def churn(self) -> None:
        rng = self.rng
        for uid, p in list(self.pods.items()):
            if uid in self.inflight:
                if rng.random() < 0.02:
                    self.delete(uid)
                continue
            if p.metadata.deletion_timestamp is not None:
                if rng.random() < 0.6:
                    self.delete(uid)
            elif p.status.phase == "Pending" and p.spec.node_name:
                if rng.random() < 0.7:
                    self.put(_replace(p, phase="Running"))
            elif p.status.phase == "Running":
                roll = rng.random()
                if roll < 0.2:
                    self.put(_replace(p, phase=rng.choice(FINISHED)))
                elif roll < 0.25:
                    self.put(_replace(p, deleting=True))
            elif p.status.phase in FINISHED:
                if rng.random() < 0.5:
                    self.delete(uid)
            elif rng.random() < 0.02:
                self.delete(uid)
        for name in list(self.groups):
            if rng.random() < 0.05:  # the PodGroup goes; its pods stay a while
                self.cache.delete_podgroup(self.groups.pop(name))
        for name, q in list(self.group_queue.items()):
            if name in self.groups:
                continue
            members = [uid for uid, p in self.pods.items() if self.group_of(p) == name]
            if not members:
                del self.group_queue[name]
            elif rng.random() < 0.4:  # recreated (a new uid, same name and queue)
                self.create_group(name, q, 1)
            elif rng.random() < 0.3:
                for uid in members:
                    self.delete(uid)
        # the PodGroup controller: a group for each pod without one, then the pod annotated
        for uid, p in list(self.pods.items()):
            if not self.group_of(p) and rng.random() < 0.7:
                name = f"podgroup-{uid}"
                self.create_group(name, rng.choice(QUEUES), 1)
                self.put(_replace(p, annotations={GROUP_NAME_ANNOTATION: name}))
        for _ in range(rng.randint(0, 3)):
            self.create_gang()
        if rng.random() < 0.3:
            self.create_ungrouped()


@pytest.mark.parametrize(
    ("seed", "conf_text"),
    [(1, DEFAULT_CONF), (2, DEFAULT_CONF), (3, PREEMPTING_CONF), (4, PREEMPTING_CONF)],
)
def test_queue_allocated_matches_bound_pods_under_churn(seed: int, conf_text: str) -> None:
    churn = _Churn(seed, conf_text)
    for _ in range(4):
        churn.create_gang()
    for step in range(200):
        result = churn.loop.run_once()
        assert result is not None, churn.loop.stats.last_error
        expected = churn.expected(result)
        shares = result.report.queue_shares
        for q in QUEUES:
            allocated = shares[q].allocated.get("cpu", 0.0)
            gauge = REGISTRY.get_sample_value("volcano_queue_allocated_milli_cpu", {"queue_name": q})
            assert (step, q, allocated) == (step, q, expected[q])
            assert (step, q, gauge) == (step, q, expected[q])
        churn.hand_over()
        churn.settle_binds()
        churn.bind_in_api()
        churn.churn()
        if churn.rng.random() < 0.03:
            churn.failover()
