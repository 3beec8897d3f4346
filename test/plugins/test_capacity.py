"""capacity: explicit deserved shares and capabilities, in a hierarchy of queues."""

from caldera.hack.scenario import cluster, node, pod, podgroup, queue, run_session

CONF = 'actions: "enqueue, allocate"\ntiers:\n- plugins:\n  - name: gang\n- plugins:\n  - name: predicates\n  - name: capacity\n'


def jobs(*names, n=8):
    pgs = [podgroup(name, min_member=1, queue=name.split("-")[0]) for name in names]
    pods = [pod(f"{name}-{i}", cpu="1", group=name) for name in names for i in range(n)]
    return pgs, pods


def count(result, prefix):
    return sum(1 for p in result.placements if p.task.name.startswith(prefix))


def test_queue_capability_is_a_ceiling():
    pgs, pods = jobs("a-job")
    snap = cluster(
        nodes=[node("n1", cpu="8")], queues=[queue("a", capability={"cpu": "3"})], podgroups=pgs, pods=pods
    )
    _, result = run_session(snap, CONF)
    assert count(result, "a-job") == 3


def test_child_queues_share_their_parents_capability():
    pgs, pods = jobs("x-job", "y-job")
    queues = [
        queue("parent", capability={"cpu": "4"}),
        queue("x", parent="parent"),
        queue("y", parent="parent"),
    ]
    snap = cluster(nodes=[node("n1", cpu="16")], queues=queues, podgroups=pgs, pods=pods)
    _, result = run_session(snap, CONF)
    assert count(result, "x-job") + count(result, "y-job") == 4


def test_guarantees_above_the_cluster_do_not_crash():
    pgs, pods = jobs("a-job", "b-job", n=4)
    queues = [queue("a", guarantee={"cpu": "6"}), queue("b", guarantee={"cpu": "6"})]
    ssn, result = run_session(
        cluster(nodes=[node("n1", cpu="8")], queues=queues, podgroups=pgs, pods=pods), CONF
    )
    assert len(result.placements) == 8
    assert set(ssn.report.queue_guarantee_scaled) == {"a", "b"}
