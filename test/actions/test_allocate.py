"""allocate: gangs all-or-nothing, order of queues/jobs/tasks, pipelining, reasons, speed."""

from caldera.cache.store import ClusterCache
from caldera.hack.scenario import cluster, gang, load, node, pod, podgroup, priority_class, run_session


def placed(result):
    return {p.task.name: p.node for p in result.placements}


def test_gang_of_four_on_room_for_three_places_nothing():
    pg, pods = gang("big", 4, cpu="2")
    snap = cluster(nodes=[node("n1", cpu="4"), node("n2", cpu="2")], pods=pods, podgroups=[pg])
    ssn, result = run_session(snap)
    assert result.placements == []
    job = ssn.jobs["default/big"]
    assert job.job_fit_error.startswith("0/2 nodes are available: 2 Insufficient cpu.")
    assert len(job.fit_errors) == 1
    # the session is left as it was: nothing held on the nodes
    assert all(n.used.cpu == 0 for n in ssn.nodes.values())


def test_gang_that_fits_is_placed_whole():
    pg, pods = gang("fits", 3, cpu="2")
    snap = cluster(nodes=[node("n1", cpu="4"), node("n2", cpu="2")], pods=pods, podgroups=[pg])
    _, result = run_session(snap)
    assert sorted(placed(result)) == ["fits-0", "fits-1", "fits-2"]
    per_node = {}
    for n in placed(result).values():
        per_node[n] = per_node.get(n, 0) + 1
    assert per_node == {"n1": 2, "n2": 1}


def test_elastic_job_places_its_minimum_and_more_where_room():
    pg, pods = gang("elastic", 5, min_member=2, cpu="2")
    snap = cluster(nodes=[node("n1", cpu="6")], pods=pods, podgroups=[pg])
    _, result = run_session(snap)
    assert len(result.placements) == 3


def test_higher_priority_job_goes_first_when_room_for_one():
    hi_pg = podgroup("hi", min_member=1, priority_class="high")
    lo_pg = podgroup("lo", min_member=1)
    pods = [pod("lo-0", cpu="3", group="lo"), pod("hi-0", cpu="3", group="hi")]
    snap = cluster(
        nodes=[node("n1", cpu="4")],
        pods=pods,
        podgroups=[lo_pg, hi_pg],
        priority_classes=[priority_class("high", 1000)],
    )
    _, result = run_session(snap)
    assert placed(result) == {"hi-0": "n1"}


def test_pending_podgroup_is_not_allocated_when_enqueue_runs():
    pg = podgroup("waiting", min_member=1, phase="Pending", min_resources={"cpu": "100"})
    snap = cluster(nodes=[node("n1", cpu="4")], pods=[pod("w-0", group="waiting")], podgroups=[pg])
    ssn, result = run_session(snap)
    assert result.placements == []
    assert ssn.jobs["default/waiting"].phase == "Pending"


def test_without_enqueue_pending_podgroups_are_allocated():
    pg = podgroup("waiting", min_member=1, phase="Pending")
    snap = cluster(nodes=[node("n1", cpu="4")], pods=[pod("w-0", group="waiting")], podgroups=[pg])
    conf = 'actions: "allocate"\ntiers:\n- plugins:\n  - name: gang\n  - name: predicates\n'
    _, result = run_session(snap, conf)
    assert placed(result) == {"w-0": "n1"}


def test_task_waits_as_pipelined_on_a_node_whose_pods_are_leaving():
    leaving = pod("old", cpu="4", node_name="n1", phase="Running", scheduler="other")
    leaving = leaving.__class__(
        metadata=leaving.metadata.__class__(
            name="old", namespace="default", uid="old-uid", deletion_timestamp="2026-01-01T00:00:00Z"
        ),
        spec=leaving.spec,
        status=leaving.status,
    )
    pg, pods = gang("next", 1, cpu="4")
    snap = cluster(nodes=[node("n1", cpu="4")], pods=[leaving, *pods], podgroups=[pg])
    ssn, result = run_session(snap)
    assert result.placements == []  # nothing to bind yet
    from caldera.framework.model import TaskStatus

    assert ssn.jobs["default/next"].count(TaskStatus.PIPELINED) == 1


def test_closed_queue_schedules_nothing():
    from caldera.hack.scenario import queue

    pg, pods = gang("j", 1, queue="shut")
    snap = cluster(nodes=[node("n1")], pods=pods, podgroups=[pg], queues=[queue("shut", state="Closed")])
    _, result = run_session(snap)
    assert result.placements == []


def test_thousand_identical_pods_share_one_predicate_evaluation():
    nodes = [node(f"n{i:03d}", cpu="64", memory="256Gi") for i in range(100)]
    pg, pods = gang("wide", 1000, min_member=1000, cpu="500m", memory="512Mi")
    snap = cluster(nodes=nodes, pods=pods, podgroups=[pg])
    ssn, result = run_session(snap)
    assert len(result.placements) == 1000
    # one pod template: the template-level predicates ran once for all 1,000 pods, not 1,000 x 100 times
    assert len(ssn.placement._static_masks) == 1


def test_a_gpu_pod_is_not_placed_on_a_node_whose_device_plugin_went_away():
    """The node had 4 GPUs; its allocatable lists none now (the kubelet drops a resource whose device
    plugin stopped). The next cycle must not place a GPU pod there as if the GPUs were still free."""
    cache = ClusterCache(("caldera",))
    load(cache, nodes=[node("gpu-node", extra={"nvidia.com/gpu": "4"}), node("cpu-node")])
    cache.snapshot()  # a cycle saw the GPUs
    cache.upsert_node(node("gpu-node"))
    pg, pods = gang("train", 1, extra={"nvidia.com/gpu": "1"})
    load(cache, pods=pods, podgroups=[pg])
    ssn, result = run_session(cache.snapshot())
    assert result.placements == []
    assert "Insufficient nvidia.com/gpu" in ssn.jobs["default/train"].job_fit_error
