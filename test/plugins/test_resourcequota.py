"""resourcequota: a namespace's Kubernetes ResourceQuota holds back the jobs it has no room for, at
enqueue, counting what the quota controller counted as used and what this cycle already let in."""

from caldera.hack.scenario import cluster, node, podgroup, resource_quota, run_session

CONF = """
actions: "enqueue"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: resourcequota
- plugins:
  - name: proportion
"""


def job(name, cpu, namespace="team-a", memory="1Gi"):
    return podgroup(name, namespace=namespace, phase="Pending", min_resources={"cpu": cpu, "memory": memory})


def enqueue(podgroups, quotas):
    snap = cluster(nodes=[node("n1", cpu="64", memory="256Gi")], podgroups=podgroups, resource_quotas=quotas)
    _, result = run_session(snap, CONF)
    return {uid: (j.phase, j.job_fit_error) for uid, j in result.jobs.items()}, result.report.events


def test_what_the_quota_controller_counted_as_used_leaves_no_room():
    quota = resource_quota("compute", {"cpu": "4"}, used={"cpu": "3"}, namespace="team-a")
    phases, events = enqueue([job("train", "2")], [quota])
    message = "resource quota insufficient, requested: cpu=2, used: cpu=3, limited: cpu=4"
    assert phases["team-a/train"] == ("Pending", message)
    assert events == [("PodGroup", "team-a/train", "Unschedulable", message)]


def test_a_job_that_fits_beside_what_is_used_is_let_in():
    quota = resource_quota("compute", {"cpu": "4"}, used={"cpu": "2"}, namespace="team-a")
    phases, events = enqueue([job("train", "2")], [quota])
    assert phases["team-a/train"] == ("Inqueue", "")
    assert events == []


def test_two_jobs_that_each_fit_but_not_together_are_not_both_let_in_in_one_cycle():
    quota = resource_quota("compute", {"cpu": "3", "memory": "100Gi"}, namespace="team-a")
    phases, _ = enqueue([job("first", "2"), job("second", "2")], [quota])
    assert sorted(phase for phase, _ in phases.values()) == ["Inqueue", "Pending"]


def test_every_quota_of_the_namespace_must_have_room():
    roomy = resource_quota("cpu", {"cpu": "100"}, namespace="team-a")
    tight = resource_quota("memory", {"memory": "1Gi"}, used={"memory": "512Mi"}, namespace="team-a")
    phases, _ = enqueue([job("train", "1", memory="1Gi")], [roomy, tight])
    assert phases["team-a/train"] == (
        "Pending",
        "resource quota insufficient, requested: memory=1Gi, used: memory=512Mi, limited: memory=1Gi",
    )


def test_a_quota_limits_only_its_own_namespace():
    quota = resource_quota("compute", {"cpu": "1"}, namespace="team-a")
    phases, _ = enqueue([job("train", "2", namespace="team-b")], [quota])
    assert phases["team-b/train"] == ("Inqueue", "")


def test_a_quota_on_requests_cpu_does_not_limit_min_resources_cpu_as_in_volcano():
    # Volcano masks minResources by the quota's names as written: requests.cpu is another name.
    quota = resource_quota("compute", {"requests.cpu": "1"}, namespace="team-a")
    phases, _ = enqueue([job("train", "2")], [quota])
    assert phases["team-a/train"] == ("Inqueue", "")


def test_an_unreadable_quantity_in_a_quota_is_left_out_not_a_crash(caplog):
    quota = resource_quota("compute", {"cpu": "lots", "memory": "1Gi"}, namespace="team-a")
    phases, _ = enqueue([job("train", "2", memory="2Gi")], [quota])
    assert phases["team-a/train"][0] == "Pending"
    assert "status.hard[cpu] left out" in caplog.text
