"""The eviction step of preempt and reclaim: free room is only taken when the caller allows a plain
placement (the queue is within its share); victims come only from running pods not marked
``volcano.sh/preemptable: "false"`` (unmarked pods are preemptable, as Volcano's GetPodPreemptable)."""

from caldera.actions.helpers import evict_and_pipeline, evictable_by_row
from caldera.config.conf import DEFAULT_CONF, parse_conf
from caldera.framework.model import TaskStatus
from caldera.framework.session import open_session
from caldera.hack.scenario import cluster, gang, node, pod, podgroup
from caldera.scheduler.registry import builtin_registry


def session(pods, groups):
    registry = builtin_registry()
    conf = parse_conf(DEFAULT_CONF, registry)
    snap = cluster(nodes=[node("n1", cpu="4"), node("n2", cpu="4")], pods=pods, podgroups=groups)
    return open_session(snap, conf.tiers, registry.plugins)


def everyone(task, candidates):
    return list(candidates)


def test_free_room_is_taken_only_when_allowed():
    pg, pods = gang("new", 1, cpu="2")
    ssn = session(pods, [pg])
    task = next(iter(ssn.jobs["default/new"].tasks.values()))
    stmt = ssn.statement()
    assert not evict_and_pipeline(
        ssn, stmt, task, lambda t: True, everyone, "preempt", without_eviction=False
    )
    assert len(stmt) == 0
    assert evict_and_pipeline(ssn, stmt, task, lambda t: True, everyone, "preempt", without_eviction=True)
    assert task.status == TaskStatus.PIPELINED


def test_victims_come_from_preemptable_running_pods_only():
    running = [
        pod(
            "keep",
            cpu="4",
            group="old",
            node_name="n1",
            phase="Running",
            annotations={"volcano.sh/preemptable": "false"},
        ),
        pod("go", cpu="4", group="old2", node_name="n2", phase="Running"),
    ]
    pg, pods = gang("new", 1, cpu="3")
    ssn = session(running + pods, [pg, podgroup("old"), podgroup("old2")])
    index = evictable_by_row(ssn)
    assert [t.name for tasks in index.values() for t in tasks] == ["go"]
    task = next(iter(ssn.jobs["default/new"].tasks.values()))
    stmt = ssn.statement()
    assert evict_and_pipeline(ssn, stmt, task, lambda t: True, everyone, "preempt", without_eviction=False)
    evicted = [
        t.name for j in ssn.jobs.values() for t in j.tasks.values() if t.status == TaskStatus.RELEASING
    ]
    assert evicted == ["go"]
    assert task.node_name == "n2"
