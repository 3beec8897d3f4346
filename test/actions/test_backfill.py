"""backfill: best-effort pods (no requests) go onto nodes that pass the predicates."""

from caldera.hack.scenario import cluster, node, pod, podgroup, run_session


def test_best_effort_pod_is_placed_on_a_full_node():
    full = pod("hog", cpu="4", node_name="n1", phase="Running", scheduler="other")
    pg = podgroup("be", min_member=1)
    be = pod("be-0", cpu=None, memory=None, group="be")
    snap = cluster(nodes=[node("n1", cpu="4")], pods=[full, be], podgroups=[pg])
    _, result = run_session(snap)
    assert {p.task.name: p.node for p in result.placements} == {"be-0": "n1"}


def test_best_effort_pod_respects_node_selector():
    pg = podgroup("be", min_member=1)
    be = pod("be-0", cpu=None, memory=None, group="be", node_selector={"zone": "b"})
    snap = cluster(
        nodes=[node("a1", labels={"zone": "a"}), node("b1", labels={"zone": "b"})], pods=[be], podgroups=[pg]
    )
    _, result = run_session(snap)
    assert {p.task.name: p.node for p in result.placements} == {"be-0": "b1"}


def test_best_effort_pod_with_no_matching_node_gets_a_reason():
    pg = podgroup("be", min_member=1)
    be = pod("be-0", cpu=None, memory=None, group="be", node_selector={"zone": "z"})
    snap = cluster(nodes=[node("a1")], pods=[be], podgroups=[pg])
    ssn, result = run_session(snap)
    assert result.placements == []
    assert "didn't match Pod's node affinity/selector" in ssn.jobs["default/be"].job_fit_error
