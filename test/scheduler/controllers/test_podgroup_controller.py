"""The PodGroup controller against a simulated cluster: groups for plain pods, per owner kind, from the
annotations; groups removed (with preconditions) once no pod needs them; status counts; restarts."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from caldera.framework.model import GROUP_NAME_ANNOTATION
from caldera.hack.sim.resources import PODS, resource
from caldera.scheduler.controllers import Controllers
from caldera.scheduler.controllers.state import MANAGED_BY, MANAGED_BY_LABEL, PodGroup
from caldera.scheduler.controllers.state import Meta as LeanMeta

GROUP = GROUP_NAME_ANNOTATION
PODGROUPS = resource("podgroups", "scheduling.volcano.sh")
QUEUES = resource("queues", "scheduling.volcano.sh")


def group_of(h: Any, pod: str) -> str | None:
    obj = h.pod(pod)
    return None if obj is None else (obj["metadata"].get("annotations") or {}).get(GROUP)


def grouped(h: Any, *pods: str) -> bool:
    for name in pods:
        group = group_of(h, name)
        if not group or h.podgroup(group) is None:
            return False
    return True


async def test_a_bare_pod_gets_a_podgroup_named_after_itself(harness: Any) -> None:
    pod = harness.create_pod("lonely")
    harness.start()
    await harness.eventually(lambda: grouped(harness, "lonely"), what="the pod is grouped")
    uid = pod["metadata"]["uid"]
    assert group_of(harness, "lonely") == f"podgroup-{uid}"
    pg = harness.podgroup(f"podgroup-{uid}")
    assert pg is not None
    assert pg["spec"] == {"minMember": 1, "queue": "default"}
    assert pg["metadata"]["labels"][MANAGED_BY_LABEL] == MANAGED_BY
    assert pg["metadata"]["ownerReferences"][0] | {} == {
        "apiVersion": "v1",
        "kind": "Pod",
        "name": "lonely",
        "uid": uid,
        "controller": True,
    }
    assert len(harness.podgroups()) == 1


@pytest.mark.parametrize("kind", ["ReplicaSet", "StatefulSet", "Job"])
async def test_replicas_of_one_owner_share_one_podgroup(harness: Any, kind: str) -> None:
    owner = (kind, "web", f"{kind.lower()}-uid-1")
    other = (kind, "db", f"{kind.lower()}-uid-2")
    for i in range(3):
        harness.create_pod(f"web-{i}", owner=owner)
    harness.create_pod("db-0", owner=other)
    harness.start()
    await harness.eventually(lambda: grouped(harness, "web-0", "web-1", "web-2", "db-0"), what="all grouped")
    assert {group_of(harness, f"web-{i}") for i in range(3)} == {f"podgroup-{kind.lower()}-uid-1"}
    assert group_of(harness, "db-0") == f"podgroup-{kind.lower()}-uid-2"
    pg = harness.podgroup(f"podgroup-{kind.lower()}-uid-1")
    assert pg is not None
    ref = pg["metadata"]["ownerReferences"][0]
    assert (ref["kind"], ref["name"], ref["uid"]) == owner
    assert len(harness.podgroups()) == 2


async def test_min_member_queue_and_priority_class_come_from_the_pod(harness: Any) -> None:
    harness.sim.store.create(QUEUES, "", {"metadata": {"name": "research"}, "spec": {"weight": 2}})
    harness.create_pod(
        "trainer-0",
        owner=("StatefulSet", "trainer", "sts-1"),
        annotations={
            "scheduling.volcano.sh/group-min-member": "4",
            "scheduling.volcano.sh/queue-name": "research",
        },
        priority_class="system-cluster-critical",
    )
    harness.create_pod(
        "odd", annotations={"scheduling.volcano.sh/group-min-member": "lots"}
    )  # malformed: defaults to 1
    harness.start()
    await harness.eventually(lambda: grouped(harness, "trainer-0", "odd"), what="grouped")
    pg = harness.podgroup("podgroup-sts-1")
    assert pg is not None
    assert pg["spec"] == {"minMember": 4, "queue": "research", "priorityClassName": "system-cluster-critical"}
    odd = harness.podgroup(group_of(harness, "odd") or "")
    assert odd is not None and odd["spec"]["minMember"] == 1


async def test_pods_of_other_schedulers_and_pods_that_name_a_group_are_left_alone(harness: Any) -> None:
    harness.create_pod("theirs", scheduler="default-scheduler")
    harness.create_pod(
        "vcjob-0", annotations={GROUP: "vcjob"}
    )  # a Volcano job's group, made by its controller
    controllers = harness.start()
    await harness.eventually(lambda: controllers.synced and controllers.idle, what="settled")
    await asyncio.sleep(0.2)
    assert harness.podgroups() == []
    assert GROUP not in (harness.pod("theirs") or {})["metadata"].get("annotations", {})
    assert controllers.podgroups.stats.created == 0


async def test_a_podgroup_is_deleted_with_preconditions_once_its_owner_has_no_pods(harness: Any) -> None:
    recorder = harness.record_deletes()
    owner = ("ReplicaSet", "web-abc", "rs-1")
    harness.create_pod("web-abc-1", owner=owner)
    harness.create_pod("web-abc-2", owner=owner)
    controllers = harness.start()
    await harness.eventually(lambda: grouped(harness, "web-abc-1", "web-abc-2"), what="grouped")
    pg = harness.podgroup("podgroup-rs-1")
    assert pg is not None
    harness.delete_pod("web-abc-1")
    await asyncio.sleep(0.3)
    assert harness.podgroup("podgroup-rs-1") is not None  # one pod still needs it
    harness.delete_pod("web-abc-2")  # scaled to zero; the ReplicaSet itself stays
    await harness.eventually(lambda: harness.podgroup("podgroup-rs-1") is None, what="the group is removed")
    assert controllers.podgroups.stats.deleted == 1
    assert len(recorder.bodies) == 1
    assert recorder.bodies[0]["preconditions"]["uid"] == pg["metadata"]["uid"]
    assert recorder.all_preconditioned()


async def test_a_delete_never_touches_a_newer_podgroup_of_the_same_name(harness: Any) -> None:
    # Not started: only its delete path runs, so nothing else can touch the groups.
    controllers = Controllers(harness.client)
    body = {
        "metadata": {
            "name": "podgroup-rs-9",
            "namespace": "default",
            "labels": {MANAGED_BY_LABEL: MANAGED_BY},
        },
        "spec": {"minMember": 1},
    }
    old = harness.sim.store.create(PODGROUPS, "default", body).obj
    harness.sim.store.delete(PODGROUPS, "default", "podgroup-rs-9", {})
    new = harness.sim.store.create(PODGROUPS, "default", body).obj
    stale = PodGroup(
        metadata=LeanMeta(
            name="podgroup-rs-9",
            namespace="default",
            uid=old["metadata"]["uid"],
            resource_version=old["metadata"]["resourceVersion"],
            labels={MANAGED_BY_LABEL: MANAGED_BY},
        )
    )
    # A delete decided on the old object (a retry, a late worker) meets the new one: 409, re-read, leave it.
    await controllers.podgroups._delete_obsolete(stale)
    survivor = harness.podgroup("podgroup-rs-9")
    assert survivor is not None and survivor["metadata"]["uid"] == new["metadata"]["uid"]
    assert controllers.podgroups.stats.delete_conflicts == 1
    assert controllers.podgroups.stats.deleted == 0


async def test_a_group_that_vanished_under_an_annotated_pod_is_made_again(harness: Any) -> None:
    harness.create_pod("job-x-0", owner=("Job", "job-x", "job-uid-1"))
    harness.start()
    await harness.eventually(lambda: grouped(harness, "job-x-0"), what="grouped")
    first = harness.podgroup("podgroup-job-uid-1")
    assert first is not None
    harness.sim.store.delete(PODGROUPS, "default", "podgroup-job-uid-1", {})  # someone removed it
    await harness.eventually(
        lambda: (
            (harness.podgroup("podgroup-job-uid-1") or first)["metadata"]["uid"] != first["metadata"]["uid"]
        ),
        what="re-created",
    )
    assert group_of(harness, "job-x-0") == "podgroup-job-uid-1"


async def test_status_counts_follow_the_pods(harness: Any) -> None:
    owner = ("ReplicaSet", "w", "rs-status")
    harness.create_pod("w-1", owner=owner)
    harness.create_pod("w-2", owner=owner)
    harness.start()
    await harness.eventually(lambda: grouped(harness, "w-1", "w-2"), what="grouped")
    for name, node in (("w-1", "node-0"), ("w-2", "node-1")):
        harness.sim.store.bind(
            "default", name, {"metadata": {"name": name}, "target": {"kind": "Node", "name": node}}
        )

    def counted() -> bool:
        pg = harness.podgroup("podgroup-rs-status") or {}
        status = pg.get("status") or {}
        return status.get("running") == 2 and status.get("phase") == "Running"

    await harness.eventually(counted, what="two running")


async def test_a_restart_mid_way_converges_without_duplicates_or_orphans(harness: Any) -> None:
    owners = [("ReplicaSet", f"rs{i}", f"rs-uid-{i}") for i in range(8)]
    for i, owner in enumerate(owners):
        for j in range(3):
            harness.create_pod(f"rs{i}-{j}", owner=owner)
    for i in range(6):
        harness.create_pod(f"bare-{i}")
    # A group the previous incarnation made just before it died, before it annotated the pods.
    made_earlier = harness.sim.store.create(
        PODGROUPS,
        "default",
        {
            "metadata": {
                "name": "podgroup-rs-uid-0",
                "namespace": "default",
                "labels": {MANAGED_BY_LABEL: MANAGED_BY},
                "ownerReferences": [
                    {
                        "apiVersion": "apps/v1",
                        "kind": "ReplicaSet",
                        "name": "rs0",
                        "uid": "rs-uid-0",
                        "controller": True,
                    }
                ],
            },
            "spec": {"minMember": 1, "queue": "default"},
        },
    ).obj
    # An orphan: a group of ours whose owner's pods are all gone.
    harness.sim.store.create(
        PODGROUPS,
        "default",
        {
            "metadata": {
                "name": "podgroup-gone",
                "namespace": "default",
                "labels": {MANAGED_BY_LABEL: MANAGED_BY},
            },
            "spec": {"minMember": 1},
        },
    )
    harness.sim.set_faults(latency=0.01)  # so the first incarnation is caught with work in flight
    first = harness.start(workers=2)
    await harness.eventually(lambda: first.podgroups.stats.created >= 2, what="some progress")
    await harness.halt_all()
    assert first.podgroups.stats.created < 13, "the restart should interrupt the work"
    # While no controller runs, the world moves on.
    harness.delete_pod("rs7-0")
    harness.delete_pod("rs7-1")
    harness.delete_pod("rs7-2")
    harness.delete_pod("bare-5")
    harness.create_pod("rs6-3", owner=owners[6])
    harness.sim.set_faults(latency=0.0)
    second = harness.start()
    await harness.eventually(lambda: second.synced, what="the second incarnation synced")

    def converged() -> bool:
        pods = [p for p in harness.pods() if p["spec"].get("schedulerName") == "caldera"]
        groups = {pg["metadata"]["name"] for pg in harness.podgroups()}
        wanted = {(p["metadata"].get("annotations") or {}).get(GROUP) for p in pods}
        return None not in wanted and wanted == groups

    await harness.eventually(converged, timeout=10, what="every pod grouped, every group needed")
    groups = {pg["metadata"]["name"] for pg in harness.podgroups()}
    assert groups == {f"podgroup-rs-uid-{i}" for i in range(7)} | {
        f"podgroup-{harness.pod(f'bare-{i}')['metadata']['uid']}"
        for i in range(5)  # type: ignore[index]
    }
    pre_existing = harness.podgroup("podgroup-rs-uid-0")
    assert pre_existing is not None and pre_existing["metadata"]["uid"] == made_earlier["metadata"]["uid"]
    assert harness.podgroup("podgroup-gone") is None
    assert len(harness.sim.store.objects(PODS, "default")) == 8 * 3 - 3 + 1 + 5


def test_a_pod_of_a_kubernetes_podgroup_gets_no_volcano_podgroup() -> None:
    """A pod with ``spec.schedulingGroup`` belongs to a ``scheduling.k8s.io/v1alpha2`` PodGroup:
    the controller neither makes a Volcano PodGroup for it nor counts it in one."""
    from caldera.framework.objects import convert
    from caldera.scheduler.controllers.state import ControllerState, Pod

    state = ControllerState(["caldera"], "default", lambda key: None, lambda key: None)
    native = convert(
        Pod,
        {
            "metadata": {"name": "w-0", "namespace": "ml", "uid": "u1"},
            "spec": {"schedulerName": "caldera", "schedulingGroup": {"podGroupName": "train"}},
        },
    )
    plain = convert(
        Pod, {"metadata": {"name": "p", "namespace": "ml", "uid": "u2"}, "spec": {"schedulerName": "caldera"}}
    )
    assert state.group_key(native) is None
    assert state.group_key(plain) is not None
