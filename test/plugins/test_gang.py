"""gang: a PodGroup with too few pods is invalid; ready jobs make way for those not ready."""

from caldera.hack.scenario import cluster, gang, node, pod, podgroup, run_session


def test_job_with_fewer_pods_than_its_minimum_is_not_scheduled():
    pg = podgroup("short", min_member=3)
    snap = cluster(
        nodes=[node("n1")], pods=[pod(f"short-{i}", group="short") for i in range(2)], podgroups=[pg]
    )
    ssn, result = run_session(snap)
    assert result.placements == []
    assert "valid: 2, min: 3" in ssn.jobs["default/short"].job_fit_error


def test_role_minimums_are_required():
    pg = podgroup("roles", min_member=3, min_task_member={"ps": 1, "worker": 2})
    pods = [
        pod("roles-w0", group="roles", role="worker"),
        pod("roles-ps", group="roles", role="ps"),
        pod("roles-ps2", group="roles", role="ps"),
    ]
    _, result = run_session(cluster(nodes=[node("n1")], pods=pods, podgroups=[pg]))
    assert result.placements == []


def test_role_minimums_are_not_enforced_when_min_member_is_below_their_sum():
    """Volcano's CheckTaskReady/CheckTaskValid skip the role check when minMember < sum of role minimums."""
    pg = podgroup("roles", min_member=2, min_task_member={"ps": 1, "worker": 2})
    pods = [pod("roles-w0", group="roles", role="worker"), pod("roles-ps", group="roles", role="ps")]
    _, result = run_session(cluster(nodes=[node("n1")], pods=pods, podgroups=[pg]))
    assert len(result.placements) == 2


def test_two_gangs_compete_and_only_whole_ones_are_placed():
    a_pg, a = gang("a", 3, cpu="2")
    b_pg, b = gang("b", 3, cpu="2")
    _, result = run_session(cluster(nodes=[node("n1", cpu="8")], pods=[*a, *b], podgroups=[a_pg, b_pg]))
    jobs = {p.task.job for p in result.placements}
    assert len(result.placements) == 3 and len(jobs) == 1
