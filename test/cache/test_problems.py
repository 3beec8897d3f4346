"""What the cache holds that no session can schedule: pods waiting for a PodGroup that does not exist,
and pods whose spec cannot be read (an invalid or a negative quantity). A negative request is refused,
never summed into a node's or a job's totals."""

from __future__ import annotations

import msgspec
import pytest

from caldera.cache.store import ClusterCache
from caldera.framework.model import TaskInfo, pod_requests
from caldera.framework.objects import Pod
from caldera.framework.resource import Resource, ResourceError
from caldera.hack.scenario import load, node, pod, podgroup, queue


def with_cpu(p: Pod, cpu: str) -> Pod:
    """The same pod (same uid) asking for ``cpu``: an update a watch could deliver."""
    (container,) = p.spec.containers
    resources = msgspec.structs.replace(container.resources, requests={"cpu": cpu, "memory": "1Gi"})
    container = msgspec.structs.replace(container, resources=resources)
    return msgspec.structs.replace(p, spec=msgspec.structs.replace(p.spec, containers=[container]))


def test_pods_waiting_for_a_missing_podgroup_are_a_problem_until_it_arrives() -> None:
    cache = load(ClusterCache(), nodes=[node("n1")])
    first = pod("ghost-0", group="ghost")
    cache.upsert_pod(first)
    cache.upsert_pod(pod("ghost-1", group="ghost"))
    (missing,) = cache.problems().missing_podgroups
    assert missing.key == "default/ghost" and [t.name for t in missing.pods] == ["ghost-0", "ghost-1"]
    since = missing.since
    # an update of a waiting pod does not restart its wait
    cache.upsert_pod(first)
    assert cache.problems().missing_podgroups[0].since == since
    cache.upsert_podgroup(podgroup("ghost", min_member=2))
    assert not cache.problems()
    assert cache.jobs["default/ghost"].tasks and "default/ghost" not in cache.waiting


def test_problems_are_rebuilt_only_when_they_change() -> None:
    cache = load(ClusterCache(), nodes=[node("n1")], pods=[pod("ghost-0", group="ghost")])
    first = cache.problems()
    assert cache.problems() is first
    cache.upsert_node(node("n2"))
    assert cache.problems() is first
    cache.upsert_pod(pod("ghost-1", group="ghost"))
    assert cache.problems() is not first


def test_deleting_a_podgroup_makes_its_pending_pods_wait_again() -> None:
    pg = podgroup("job", min_member=1)
    cache = load(ClusterCache(), nodes=[node("n1")], pods=[pod("job-0", group="job")], podgroups=[pg])
    assert not cache.problems()
    cache.delete_podgroup(pg)
    (missing,) = cache.problems().missing_podgroups
    assert missing.name == "job" and missing.pods[0].name == "job-0"


@pytest.mark.parametrize(
    ("cpu", "phrase"),
    [("abc", "invalid quantity 'abc'"), ("-1", "negative quantity '-1'"), ("-500m", "negative quantity")],
)
def test_a_pod_that_cannot_be_read_is_a_problem_with_its_reason(cpu: str, phrase: str) -> None:
    good = pod("p-0", cpu="1", group="job")
    cache = load(ClusterCache(), nodes=[node("n1")], pods=[good], podgroups=[podgroup("job", min_member=1)])
    cache.upsert_pod(with_cpu(good, cpu))
    (bad,) = cache.problems().unreadable_pods
    assert bad.key == "default/p-0" and bad.job == "default/job" and bad.uid == good.metadata.uid
    assert phrase in bad.reason and "container main" in bad.reason
    # gone from its job, and from every total
    assert not cache.jobs["default/job"].tasks and good.metadata.uid not in cache.tasks
    # fixed by an update (a real pod would be re-created; the cache does not care which)
    cache.upsert_pod(with_cpu(good, "2"))
    assert not cache.problems() and cache.jobs["default/job"].tasks


def test_a_deleted_unreadable_pod_is_no_longer_a_problem() -> None:
    bad = with_cpu(pod("p-0", group="job"), "-1")
    cache = load(ClusterCache(), nodes=[node("n1")], pods=[bad])
    assert cache.problems().unreadable_pods
    cache.delete_pod(bad)
    assert not cache.problems()


def test_an_unreadable_pod_of_another_scheduler_is_skipped_but_is_not_ours_to_report() -> None:
    foreign = with_cpu(pod("other", scheduler="default-scheduler"), "-1")
    cache = load(ClusterCache(), nodes=[node("n1")], pods=[foreign])
    assert not cache.problems() and cache.stats.skipped_objects == 1


def test_a_negative_request_is_refused_not_clamped() -> None:
    with pytest.raises(ResourceError, match="container main: resource 'memory': negative quantity '-1Gi'"):
        pod_requests(with_memory(pod("p"), "-1Gi"))
    with pytest.raises(ResourceError):
        TaskInfo.from_pod(with_cpu(pod("p"), "-1"))
    # where a negative value is meaningful (arithmetic, a node's report), reading it is still allowed
    assert Resource.from_resource_list({"cpu": "-1"}).cpu == -1000


def with_memory(p: Pod, memory: str) -> Pod:
    (container,) = p.spec.containers
    resources = msgspec.structs.replace(container.resources, requests={"cpu": "1", "memory": memory})
    return msgspec.structs.replace(
        p,
        spec=msgspec.structs.replace(
            p.spec, containers=[msgspec.structs.replace(container, resources=resources)]
        ),
    )


def test_a_pending_pod_without_a_group_is_listed_with_the_queue_it_names() -> None:
    cache = load(ClusterCache(), nodes=[node("n1")])
    plain = pod("plain-0", annotations={"scheduling.volcano.sh/queue-name": "research"})
    cache.upsert_pod(plain)
    (ungrouped,) = cache.problems().ungrouped_pods
    assert ungrouped.key == "default/plain-0" and ungrouped.queue == "research"
    assert ungrouped.queue_exists is False
    since = ungrouped.since
    cache.upsert_queue(queue("research"))
    (ungrouped,) = cache.problems().ungrouped_pods
    assert ungrouped.queue_exists is True and ungrouped.since == since
    # bound (by anyone): no longer a problem
    cache.upsert_pod(pod("plain-0", uid=plain.metadata.uid, node_name="n1", phase="Running"))
    assert not cache.problems()


def test_with_a_max_age_the_problems_are_rebuilt_at_most_that_often() -> None:
    cache = load(ClusterCache(), nodes=[node("n1")])
    cache.upsert_pod(pod("ghost-0", group="ghost"))
    first = cache.problems(max_age=3600.0)
    cache.upsert_pod(pod("ghost-1", group="ghost"))
    assert cache.problems(max_age=3600.0) is first  # changed, but built less than an hour ago
    assert len(cache.problems().missing_podgroups[0].pods) == 2  # no max age: rebuilt at once


def test_a_podgroup_reported_missing_is_not_reported_once_it_arrives_whatever_the_max_age() -> None:
    # The report is rebuilt at most every max_age seconds; a problem solved is not held that long: a
    # pod bound while /debug/jobs still said its PodGroup was not found.
    cache = load(ClusterCache(), nodes=[node("n1")])
    cache.upsert_pod(pod("ghost-0", group="ghost"))
    cache.upsert_pod(pod("other-0", group="other"))
    assert [m.name for m in cache.problems(max_age=3600.0).missing_podgroups] == ["ghost", "other"]
    cache.upsert_podgroup(podgroup("ghost", min_member=1))
    assert [m.name for m in cache.problems(max_age=3600.0).missing_podgroups] == ["other"]
    # a PodGroup no report named (its pods came after the last rebuild) changes nothing sooner
    cache.upsert_pod(pod("late-0", group="late"))
    cache.upsert_podgroup(podgroup("late", min_member=1))
    assert [m.name for m in cache.problems(max_age=3600.0).missing_podgroups] == ["other"]
