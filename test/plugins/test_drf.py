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
