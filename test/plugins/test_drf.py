"""drf: the job with the smaller dominant share goes first."""

from caldera.hack.scenario import cluster, node, pod, podgroup, run_session


def test_job_with_smaller_share_is_served_first():
    pgs = [podgroup("rich", min_member=1, phase="Running"), podgroup("poor", min_member=1)]
    pods = [pod("rich-run", cpu="2", group="rich", node_name="n1", phase="Running")]
    pods += [pod("rich-more", cpu="2", group="rich"), pod("poor-0", cpu="2", group="poor")]
    _, result = run_session(cluster(nodes=[node("n1", cpu="4")], pods=pods, podgroups=pgs))
    assert [p.task.name for p in result.placements] == ["poor-0"]


def test_two_jobs_take_turns():
    pgs = [podgroup("a", min_member=1), podgroup("b", min_member=1)]
    pods = [pod(f"a-{i}", cpu="1", group="a") for i in range(6)] + [
        pod(f"b-{i}", cpu="1", group="b") for i in range(6)
    ]
    _, result = run_session(cluster(nodes=[node("n1", cpu="6")], pods=pods, podgroups=pgs))
    assert sorted(p.task.job for p in result.placements).count("default/a") == 3


def _hq(name, path, weights):
    from caldera.framework.objects import Queue, convert
    from caldera.hack.scenario import queue_dict

    d = queue_dict(name)
    d["metadata"]["annotations"] = {"volcano.sh/hierarchy": path, "volcano.sh/hierarchy-weights": weights}
    return convert(Queue, d)


def test_hierarchical_drf_splits_the_cluster_by_hierarchy_weights():
    """enableHierarchy (Volcano's hdrf): queues root/big (weight 3) and root/small (weight 1) both
    want the whole 8-cpu node; weighted shares split it 6:2. Without the switch it is 4:4."""
    from caldera.hack.scenario import cluster, node, pod, podgroup, run_session

    def placed(hierarchy):
        conf = f"""
actions: "allocate"
tiers:
- plugins:
  - name: drf
    enableHierarchy: {str(hierarchy).lower()}
  - name: proportion
    enabledOverused: false
    enabledAllocatable: false
"""
        pods = [pod(f"b-{i}", cpu="1", memory=None, group="b") for i in range(8)]
        pods += [pod(f"s-{i}", cpu="1", memory=None, group="s") for i in range(8)]
        snap = cluster(
            nodes=[node("n1", cpu="8")],
            queues=[_hq("big", "root/big", "1/3"), _hq("small", "root/small", "1/1")],
            podgroups=[podgroup("b", min_member=0, queue="big"), podgroup("s", min_member=0, queue="small")],
            pods=pods,
        )
        _, result = run_session(snap, conf)
        counts = {"b": 0, "s": 0}
        for p in result.placements:
            counts[p.task.name[0]] += 1
        return counts

    assert placed(True) == {"b": 6, "s": 2}
    assert placed(False) == {"b": 4, "s": 4}


def test_share_without_scalars_equals_the_general_walk():
    """The unrolled cpu/memory path of share() gives what walking every dimension gives (a zero
    scalar resource sends a vector down the general walk without changing its share)."""
    import random

    from caldera.framework.resource import Resource
    from caldera.plugins.helpers import share

    rng = random.Random(3)
    values = [0.0, 0.5, 1.0, 250.0, 4000.0, 3.5e9, 1e-9]
    for _ in range(2000):
        allocated = Resource(rng.choice(values), rng.choice(values), rng.choice(values))
        total = Resource(rng.choice(values), rng.choice(values), rng.choice(values))
        walked = Resource(allocated.cpu, allocated.memory, allocated.pods, {"example.com/widget": 0.0})
        assert share(allocated, total) == share(walked, total)
