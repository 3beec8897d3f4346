"""enqueue: Pending PodGroups move to Inqueue when the enqueueable votes allow."""

from caldera.hack.scenario import cluster, node, pod, podgroup, queue, run_session


def test_job_that_fits_its_queue_is_let_in_and_placed_in_the_same_cycle():
    pg = podgroup("small", phase="Pending", min_resources={"cpu": "2"})
    snap = cluster(nodes=[node("n1", cpu="4")], pods=[pod("small-0", cpu="2", group="small")], podgroups=[pg])
    ssn, result = run_session(snap)
    assert ssn.jobs["default/small"].phase == "Inqueue"
    assert [p.task.name for p in result.placements] == ["small-0"]


def test_job_larger_than_queue_capability_stays_pending():
    pg = podgroup("huge", phase="Pending", queue="capped", min_resources={"cpu": "3"})
    snap = cluster(
        nodes=[node("n1", cpu="8")],
        pods=[pod("huge-0", cpu="3", group="huge")],
        podgroups=[pg],
        queues=[queue("capped", capability={"cpu": "2"})],
    )
    ssn, result = run_session(snap)
    job = ssn.jobs["default/huge"]
    assert job.phase == "Pending"
    assert "quota" in job.job_fit_error
    assert result.placements == []


def test_overcommit_lets_in_jobs_up_to_its_factor_only():
    pgs = [podgroup(f"j{i}", phase="Pending", min_resources={"cpu": "4"}) for i in range(4)]
    pods = [pod(f"j{i}-0", cpu="4", group=f"j{i}") for i in range(4)]
    snap = cluster(nodes=[node("n1", cpu="10")], pods=pods, podgroups=pgs)
    conf = 'actions: "enqueue"\ntiers:\n- plugins:\n  - name: gang\n  - name: overcommit\n'
    ssn, _ = run_session(snap, conf)
    inqueue = sorted(j.name for j in ssn.jobs.values() if j.phase == "Inqueue")
    # 10 cpu x 1.2 = 12: three jobs of 4 are let in, the fourth waits
    assert len(inqueue) == 3
    # with proportion too, the queue's real capability (10 cpu) admits only two
    ssn, _ = run_session(cluster(nodes=[node("n1", cpu="10")], pods=pods, podgroups=pgs))
    assert len([j for j in ssn.jobs.values() if j.phase == "Inqueue"]) == 2


def test_job_without_min_resources_is_always_let_in():
    pg = podgroup("free", phase="Pending")
    snap = cluster(nodes=[], pods=[pod("free-0", group="free")], podgroups=[pg])
    ssn, _ = run_session(snap)
    assert ssn.jobs["default/free"].phase == "Inqueue"
