"""A pod update that changes nothing the scheduler derives from the pod but its status (the bind
coming back, the kubelet reporting Running, a condition) takes the cache's fast path; the cache is
then exactly as the full path (remove the old task, add the new one) would leave it. Any other
change takes the full path. Sessions never see a cache object change under them either way."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from caldera.cache.store import ClusterCache
from caldera.framework.model import TaskStatus
from caldera.framework.objects import Pod, PodCondition
from caldera.framework.result import Placement, SessionResult
from caldera.hack.scenario import gang, load, node, pod, podgroup


def _bound(p: Pod, node_name: str) -> Pod:
    """The pod as the watch brings it back once bound: nodeName set, still Pending."""
    return msgspec.structs.replace(p, spec=msgspec.structs.replace(p.spec, node_name=node_name))


def _phase(p: Pod, phase: str, **meta: Any) -> Pod:
    out = msgspec.structs.replace(p, status=msgspec.structs.replace(p.status, phase=phase))
    if meta:
        out = msgspec.structs.replace(out, metadata=msgspec.structs.replace(out.metadata, **meta))
    return out


def _with_condition(p: Pod, ctype: str, status: str) -> Pod:
    cond = PodCondition(type=ctype, status=status)
    return msgspec.structs.replace(p, status=msgspec.structs.replace(p.status, conditions=[cond]))


def _state(cache: ClusterCache) -> dict[str, Any]:
    """Everything the cache derives from its pods, dict orders included."""
    cache.sync_table()

    def task(t: Any) -> tuple[Any, ...]:
        return (
            t.uid,
            t.name,
            t.namespace,
            t.job,
            t.resreq.to_dict(),
            t.init_resreq.to_dict(),
            t.status,
            t.node_name,
            t.priority,
            t.role,
            t.creation,
            id(t.pod),
            t.template,
            t.preemptable,
            t.best_effort,
        )

    return {
        "tasks": [task(t) for t in cache.tasks.values()],
        "jobs": {
            key: (
                [task(t) for t in job.tasks.values()],
                {s: list(bucket) for s, bucket in job.by_status.items()},
                job.allocated.to_dict(),
                job.total_request.to_dict(),
                job.ready_count,
            )
            for key, job in cache.jobs.items()
        },
        "nodes": {
            name: (
                [task(t) for t in info.tasks.values()],
                info.idle.to_dict(),
                info.used.to_dict(),
                info.releasing.to_dict(),
                info.pipelined.to_dict(),
                cache.table.idle[info.row].tolist(),
                cache.table.used[info.row].tolist(),
                cache.table.releasing[info.row].tolist(),
                cache.table.future[info.row].tolist(),
            )
            for name, info in cache.nodes.items()
        },
        "orphans": {n: [task(t) for t in ts.values()] for n, ts in cache._orphans_by_node.items()},
        "affinity": [task(t) for t in cache._affinity.values()],
        "ungrouped": list(cache.ungrouped),
        "waiting": {k: list(v) for k, v in cache.waiting.items()},
        "revisions": (cache.revision, cache.decision_revision),
        "pending work": (sorted(cache._pending_jobs), cache.has_pending_work()),
    }


class Twins:
    """Two caches fed the same events: ``fast`` as shipped, ``full`` with the fast path switched off.
    Each pod update says which path it must take in ``fast``; after it, both caches must agree."""

    def __init__(self, **objects: Any) -> None:
        self.fast = load(ClusterCache(), **objects)
        self.full = load(ClusterCache(), **objects)
        self.full._update_in_place = lambda old, pod: False  # type: ignore[method-assign]
        self.taken: list[bool] = []
        real = self.fast._update_in_place

        def spy(old: Any, pod: Pod) -> bool:
            taken = real(old, pod)
            self.taken.append(taken)
            return taken

        self.fast._update_in_place = spy  # type: ignore[method-assign]

    def update(self, p: Pod, *, fast: bool) -> None:
        self.taken.clear()
        self.fast.upsert_pod(p)
        self.full.upsert_pod(p)
        assert self.taken == [fast], f"{p.metadata.name}: expected the {'fast' if fast else 'full'} path"
        assert _state(self.fast) == _state(self.full)

    def each(self, fn: Any) -> None:
        fn(self.fast)
        fn(self.full)
        assert _state(self.fast) == _state(self.full)

    def place(self, p: Pod, node_name: str) -> None:
        """A session placed ``p`` on ``node_name`` (the cache assumes it), and the bind call succeeded."""

        def apply(cache: ClusterCache) -> None:
            task = cache.tasks[p.metadata.uid]
            assumed = cache.apply(SessionResult(placements=[Placement(task, node_name)]))
            assert assumed == [cache.tasks[task.uid]] and assumed[0].status == TaskStatus.BINDING
            assert task.status == TaskStatus.PENDING  # a task object once made is never changed
            cache.confirm_bound(task.uid)

        self.each(apply)


def test_a_gang_pod_from_creation_to_running_takes_the_fast_path_after_it_is_bound():
    pg, (p0, p1) = gang("job", 2, cpu="2")
    twins = Twins(nodes=[node("n1", cpu="8")], podgroups=[pg], pods=[p0, p1])
    twins.place(p0, "n1")
    twins.place(p1, "n1")  # p0 is not the last task anywhere: dict orders are checked too
    twins.update(_bound(p0, "n1"), fast=True)  # the bind comes back (BOUND, as assumed)
    running = _phase(_bound(p0, "n1"), "Running")
    twins.update(running, fast=True)  # the kubelet: BOUND -> RUNNING, held on n1 the same way
    twins.update(_with_condition(running, "Ready", "True"), fast=True)  # a condition only
    job = twins.fast.jobs["default/job"]
    assert [t.name for t in job.tasks_in(TaskStatus.RUNNING)] == ["job-0"]
    assert job.ready_count == 2 and job.allocated.cpu == 4000
    assert twins.fast.nodes["n1"].idle.cpu == 4000
    # Being deleted makes it RELEASING: held differently on the node, so the full path.
    twins.update(_phase(running, "Running", deletion_timestamp="2026-01-01T00:00:00Z"), fast=False)
    assert twins.fast.nodes["n1"].releasing.cpu == 2000


def test_a_bind_that_comes_back_before_the_binder_confirmed_it_moves_binding_to_bound():
    pg, (p0,) = gang("job", 1, cpu="1")
    twins = Twins(nodes=[node("n1", cpu="4")], podgroups=[pg], pods=[p0])

    def assume(cache: ClusterCache) -> None:
        cache.apply(SessionResult(placements=[Placement(cache.tasks[p0.metadata.uid], "n1")]))

    twins.each(assume)
    assert twins.fast.tasks[p0.metadata.uid].status == TaskStatus.BINDING
    twins.update(_bound(p0, "n1"), fast=True)
    assert twins.fast.tasks[p0.metadata.uid].status == TaskStatus.BOUND
    assert twins.fast.jobs["default/job"].count(TaskStatus.BINDING) == 0


def test_pending_pods_and_pods_of_other_schedulers_take_the_fast_path_on_status_updates():
    pg, (p0,) = gang("job", 1, cpu="1")
    foreign = pod("web", cpu="3", scheduler="default-scheduler", node_name="n1", phase="Running")
    elsewhere = pod("db", cpu="1", scheduler="default-scheduler", node_name="n9", phase="Running")
    twins = Twins(nodes=[node("n1", cpu="4")], podgroups=[pg], pods=[p0, foreign, elsewhere])
    twins.update(_with_condition(p0, "PodScheduled", "False"), fast=True)
    twins.update(_with_condition(foreign, "Ready", "True"), fast=True)
    # bound to a node the cache has not seen: it waits there, and is swapped there too
    twins.update(_with_condition(elsewhere, "Ready", "True"), fast=True)
    twins.each(lambda cache: cache.upsert_node(node("n9", cpu="4")))
    assert twins.fast.nodes["n9"].idle.cpu == 3000
    assert twins.fast.nodes["n1"].idle.cpu == 1000


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(lambda p: _bound(p, "n2"), id="bound to another node than assumed"),
        pytest.param(
            lambda p: msgspec.structs.replace(
                p, metadata=msgspec.structs.replace(p.metadata, labels={"tier": "gold"})
            ),
            id="labels",
        ),
        pytest.param(
            lambda p: msgspec.structs.replace(
                p,
                metadata=msgspec.structs.replace(
                    p.metadata, annotations={**p.metadata.annotations, "volcano.sh/preemptable": "false"}
                ),
            ),
            id="annotations",
        ),
        pytest.param(
            lambda p: msgspec.structs.replace(
                p,
                spec=msgspec.structs.replace(
                    p.spec,
                    node_name="n1",
                    containers=[
                        msgspec.structs.replace(
                            p.spec.containers[0],
                            resources=msgspec.structs.replace(
                                p.spec.containers[0].resources, requests={"cpu": "3", "memory": "1Gi"}
                            ),
                        )
                    ],
                ),
            ),
            id="resources",
        ),
        pytest.param(
            lambda p: msgspec.structs.replace(
                p, spec=msgspec.structs.replace(p.spec, node_name="n1", priority=7)
            ),
            id="priority",
        ),
        pytest.param(lambda p: _phase(_bound(p, "n1"), "Succeeded"), id="status that frees the node"),
        pytest.param(lambda p: p, id="pending again while the bind is in flight"),
    ],
)
def test_an_update_that_changes_what_the_scheduler_reads_takes_the_full_path(change):
    pg, (p0,) = gang("job", 1, cpu="1")
    twins = Twins(nodes=[node("n1", cpu="4"), node("n2", cpu="4")], podgroups=[pg], pods=[p0])
    twins.place(p0, "n1")
    twins.update(change(p0), fast=False)


def test_pods_waiting_for_their_podgroup_or_without_one_take_the_full_path():
    waiting = pod("w", group="missing")
    ungrouped = pod("u")
    twins = Twins(nodes=[node("n1")], pods=[waiting, ungrouped])
    twins.update(_with_condition(waiting, "PodScheduled", "False"), fast=False)
    twins.update(_with_condition(ungrouped, "PodScheduled", "False"), fast=False)
    assert list(twins.fast.waiting["default/missing"]) == [waiting.metadata.uid]
    assert list(twins.fast.ungrouped) == [ungrouped.metadata.uid]


def test_snapshots_see_a_fast_path_update_from_the_next_one_on_and_never_before():
    pg, (p0, p1) = gang("job", 2, cpu="2")
    cache = load(ClusterCache(), nodes=[node("n1", cpu="8")], podgroups=[pg], pods=[p0, p1])
    for p in (p0, p1):
        task = cache.tasks[p.metadata.uid]
        cache.apply(SessionResult(placements=[Placement(task, "n1")]))
        cache.confirm_bound(task.uid)
        cache.upsert_pod(_bound(p, "n1"))
    older = cache.snapshot()
    held = older.jobs["default/job"].tasks[p0.metadata.uid]
    held_node_tasks = dict(older.nodes["n1"].tasks)
    cache.upsert_pod(_phase(_bound(p0, "n1"), "Running"))
    # the session that copied before the update keeps what it copied
    assert held.status == TaskStatus.BOUND
    assert older.jobs["default/job"].count(TaskStatus.RUNNING) == 0
    assert {t.status for t in held_node_tasks.values()} == {TaskStatus.BOUND}
    # every later snapshot (from either set of copies) sees it, on the job and on the node
    for _ in range(3):
        snap = cache.snapshot()
        job = snap.jobs["default/job"]
        assert [t.name for t in job.tasks_in(TaskStatus.RUNNING)] == ["job-0"]
        assert job.tasks[p0.metadata.uid] is not cache.tasks[p0.metadata.uid]
        assert snap.nodes["n1"].tasks[p0.metadata.uid].status == TaskStatus.RUNNING
        assert snap.nodes["n1"].idle.cpu == 4000


def test_a_podgroup_update_after_fast_path_updates_keeps_every_task():
    pg, pods = gang("job", 3, cpu="1")
    cache = load(ClusterCache(), nodes=[node("n1", cpu="8")], podgroups=[pg], pods=pods)
    for p in pods:
        task = cache.tasks[p.metadata.uid]
        cache.apply(SessionResult(placements=[Placement(task, "n1")]))
        cache.confirm_bound(task.uid)
        cache.upsert_pod(_phase(_bound(p, "n1"), "Running"))
    cache.upsert_podgroup(podgroup("job", min_member=3, phase="Running"))
    job = cache.jobs["default/job"]
    assert job.count(TaskStatus.RUNNING) == 3
    assert all(job.tasks[uid] is cache.tasks[uid] for uid in job.tasks)
    assert cache.nodes["n1"].idle.cpu == 5000


def test_a_new_pod_of_a_gang_reuses_its_siblings_requests_only_when_made_from_the_same_template():
    pg, (a, b) = gang("job", 2, cpu="1")
    bigger = pod("job-2", cpu="3", group="job")
    labelled = pod("job-3", cpu="1", group="job", labels={"role": "ps"})
    spread = pod(
        "job-4",
        cpu="1",
        group="job",
        spec_extra={
            "topologySpreadConstraints": [
                {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}
            ]
        },
    )
    cache = load(ClusterCache(), nodes=[node("n1")], podgroups=[pg], pods=[a, b, bigger, labelled, spread])
    ta, tb, tbig, tlab, tspread = (cache.tasks[p.metadata.uid] for p in (a, b, bigger, labelled, spread))
    assert tb.resreq is ta.resreq and tb.template == ta.template
    assert tbig.resreq.cpu == 3000 and tbig.template != ta.template
    assert tlab.resreq.cpu == 1000 and tlab.resreq is not tbig.resreq
    assert tspread.template != tlab.template  # spread reads the pod's labels: its own template


def _job_state(cache: ClusterCache) -> dict[str, Any]:
    out: dict[str, Any] = {
        "revisions": (cache.revision, cache.decision_revision),
        "pending work": (sorted(cache._pending_jobs), cache.has_pending_work()),
    }
    for key, job in cache.jobs.items():
        out[key] = (
            job.uid,
            job.name,
            job.namespace,
            job.queue,
            job.priority,
            job.priority_class,
            job.min_available,
            job.task_min_available,
            job.min_resources.to_dict() if job.min_resources is not None else None,
            job.creation,
            job.phase,
            job.podgroup,
            job.network_topology,
            job.preemptable,
            list(job.tasks),
            {status: list(bucket) for status, bucket in job.by_status.items()},
            job.allocated.to_dict(),
            job.total_request.to_dict(),
            job.ready_count,
            job.fit_errors,
            job.job_fit_error,
            job.version,
        )
    return out


@pytest.mark.parametrize(
    ("change", "fast"),
    [
        pytest.param(lambda pg: {"status": {"phase": "Running", "running": 2}}, True, id="status only"),
        pytest.param(lambda pg: {"status": {"running": 2}}, True, id="status counts only (settled)"),
        pytest.param(lambda pg: {"spec": {"minMember": 3}}, False, id="min member"),
        pytest.param(lambda pg: {"spec": {"queue": "other"}}, False, id="queue"),
        pytest.param(lambda pg: {"metadata": {"labels": {"team": "a"}}}, False, id="labels"),
        pytest.param(
            lambda pg: {"metadata": {"annotations": {"volcano.sh/preemptable": "true"}}},
            False,
            id="annotations",
        ),
        pytest.param(lambda pg: {"metadata": {"uid": "a-new-one"}}, False, id="re-created"),
    ],
)
def test_a_podgroup_update_takes_the_fast_path_only_when_just_its_status_changed(change, fast: bool) -> None:
    from caldera.framework.objects import PodGroup, convert
    from caldera.hack.scenario import podgroup_dict

    base = podgroup_dict("job", min_member=2)
    pg = convert(PodGroup, base)
    p0, p1, p2 = (pod(f"job-{i}", cpu="1", group="job") for i in range(3))
    caches = [
        load(ClusterCache(), nodes=[node("n1", cpu="8")], podgroups=[pg], pods=[p0, p1, p2]) for _ in range(2)
    ]
    fast_cache, full_cache = caches
    full_cache._podgroup_status_only = lambda key, job, new: False  # type: ignore[method-assign]
    for cache in caches:
        # statuses arrive in another order than the tasks were added: bucket orders differ from the task order
        for p in (p2, p0):
            task = cache.tasks[p.metadata.uid]
            cache.apply(SessionResult(placements=[Placement(task, "n1")]))
            cache.confirm_bound(task.uid)
            cache.upsert_pod(_phase(_bound(p, "n1"), "Running"))
    updated = {**base}
    for section, fields in change(pg).items():
        updated[section] = {**base.get(section, {}), **fields}
    new = convert(PodGroup, updated)
    taken: list[bool] = []
    real = fast_cache._podgroup_status_only

    def spy(key: str, job: Any, pg: Any) -> bool:
        taken.append(real(key, job, pg))
        return taken[-1]

    fast_cache._podgroup_status_only = spy  # type: ignore[method-assign]
    for cache in caches:
        cache.upsert_podgroup(new)
    assert taken == [fast]
    assert _job_state(fast_cache) == _job_state(full_cache)
    job = fast_cache.jobs["default/job"]
    assert job.podgroup is new and job.count(TaskStatus.RUNNING) == 2
    # the next snapshot sees the update
    assert fast_cache.snapshot().jobs["default/job"].phase == job.phase
