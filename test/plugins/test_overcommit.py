"""overcommit: jobs are let in up to the cluster's capacity times the factor."""

from caldera.hack.scenario import cluster, node, pod, podgroup, run_session

CONF = 'actions: "enqueue"\ntiers:\n- plugins:\n  - name: overcommit\n    arguments:\n      overcommit-factor: {f}\n'


def inqueue(factor):
    pgs = [podgroup(f"j{i}", phase="Pending", min_resources={"cpu": "4"}) for i in range(5)]
    pods = [pod(f"j{i}-0", cpu="4", group=f"j{i}") for i in range(5)]
    ssn, _ = run_session(
        cluster(nodes=[node("n1", cpu="8")], pods=pods, podgroups=pgs), CONF.format(f=factor)
    )
    return sum(1 for j in ssn.jobs.values() if j.phase == "Inqueue")


def test_factor_decides_how_many_jobs_are_let_in():
    assert inqueue(1.0) == 2
    assert inqueue(1.5) == 3
    assert inqueue(2.5) == 5
