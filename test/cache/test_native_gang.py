"""Kubernetes' own gang API in the cache: ``scheduling.k8s.io/v1alpha2`` PodGroups and Workloads
decoded, pods joining them through ``spec.schedulingGroup``, a pod waiting for a group made after
it, and a pod naming both a native group and a Volcano PodGroup."""

from __future__ import annotations

from caldera.cache.store import ClusterCache
from caldera.framework.model import native_job_key
from caldera.framework.objects import NativePodGroup, Pod, Workload, decode
from caldera.hack.scenario import (
    load,
    native_member,
    native_podgroup,
    node,
    pod,
    podgroup,
    priority_class,
    queue,
)


def test_decodes_a_native_podgroup_as_a_1_36_server_serves_it() -> None:
    raw = b"""{"apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup",
      "metadata": {"name": "train", "namespace": "ml"},
      "spec": {"schedulingPolicy": {"gang": {"minCount": 4}},
               "schedulingConstraints": {"topology": [{"key": "topology.kubernetes.io/zone"}]},
               "priorityClassName": "high", "priority": 1000, "disruptionMode": "PodGroup",
               "podGroupTemplateRef": {"workload": {"workloadName": "w", "podGroupTemplateName": "workers"}},
               "resourceClaims": [{"name": "shared"}]},
      "status": {"conditions": [{"type": "PodGroupScheduled", "status": "False", "reason": "Unschedulable",
                                 "message": "0/4", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}"""
    pg = decode(NativePodGroup, raw)
    assert pg.spec.scheduling_policy is not None and pg.spec.scheduling_policy.gang is not None
    assert pg.spec.scheduling_policy.gang.min_count == 4
    assert pg.spec.scheduling_constraints is not None
    assert pg.spec.scheduling_constraints.keys() == ("topology.kubernetes.io/zone",)
    assert (pg.spec.priority_class_name, pg.spec.priority) == ("high", 1000)
    assert pg.spec.pod_group_template_ref is not None
    assert pg.spec.pod_group_template_ref.names() == ("w", "workers")
    assert [(c.type, c.status, c.reason) for c in pg.status.conditions] == [
        ("PodGroupScheduled", "False", "Unschedulable")
    ]


def test_decodes_the_types_go_spelling_of_the_topology_constraint_and_a_flat_template_ref() -> None:
    raw = b"""{"metadata": {"name": "g"}, "spec": {"schedulingPolicy": {"basic": {}},
      "schedulingConstraints": {"topologyConstraints": [{"topologyKey": "rack"}]},
      "podGroupTemplateRef": {"workloadName": "w", "podGroupTemplateName": "t"}}}"""
    pg = decode(NativePodGroup, raw)
    assert pg.spec.scheduling_constraints is not None and pg.spec.scheduling_constraints.keys() == ("rack",)
    assert pg.spec.pod_group_template_ref is not None and pg.spec.pod_group_template_ref.names() == ("w", "t")


def test_decodes_a_workload_and_a_pods_scheduling_group() -> None:
    w = decode(
        Workload,
        b"""{"metadata": {"name": "w", "namespace": "ml"}, "spec": {"podGroupTemplates": [
            {"name": "workers", "schedulingPolicy": {"gang": {"minCount": 3}}}]}}""",
    )
    (template,) = w.spec.pod_group_templates
    assert template.name == "workers" and template.scheduling_policy is not None
    assert template.scheduling_policy.gang is not None and template.scheduling_policy.gang.min_count == 3
    p = decode(
        Pod, b"""{"metadata": {"name": "p"}, "spec": {"schedulingGroup": {"podGroupName": "train"}}}"""
    )
    assert p.spec.scheduling_group is not None and p.spec.scheduling_group.pod_group_name == "train"


def test_gang_min_count_is_the_jobs_min_member_and_basic_makes_pods_independent() -> None:
    cache = load(ClusterCache(), nodes=[node("n1")])
    cache.upsert_native_podgroup(native_podgroup("gang", min_count=3))
    cache.upsert_native_podgroup(native_podgroup("loose"))
    for i in range(4):
        cache.upsert_pod(native_member(f"gang-{i}", "gang"))
        cache.upsert_pod(native_member(f"loose-{i}", "loose"))
    gang, loose = (
        cache.jobs[native_job_key("default", "gang")],
        cache.jobs[native_job_key("default", "loose")],
    )
    assert (gang.min_available, len(gang.tasks)) == (3, 4)
    assert (loose.min_available, len(loose.tasks)) == (1, 4)
    assert gang.native is not None and gang.podgroup is None


def test_a_native_group_and_a_volcano_podgroup_of_one_name_never_merge() -> None:
    cache = load(ClusterCache(), nodes=[node("n1")], podgroups=[podgroup("train", min_member=2)])
    cache.upsert_native_podgroup(native_podgroup("train", min_count=4))
    cache.upsert_pod(pod("volcano-0", group="train"))
    cache.upsert_pod(native_member("native-0", "train"))
    assert [t.name for t in cache.jobs["default/train"].tasks.values()] == ["volcano-0"]
    native = cache.jobs[native_job_key("default", "train")]
    assert [t.name for t in native.tasks.values()] == ["native-0"] and native.min_available == 4


def test_a_pod_naming_both_belongs_to_its_native_group_and_the_conflict_is_reported() -> None:
    cache = load(ClusterCache(), nodes=[node("n1")], podgroups=[podgroup("old", min_member=1)])
    cache.upsert_native_podgroup(native_podgroup("new", min_count=1))
    both = native_member("both", "new", group="old")
    cache.upsert_pod(both)
    assert not cache.jobs["default/old"].tasks
    assert [t.name for t in cache.jobs[native_job_key("default", "new")].tasks.values()] == ["both"]
    (conflict,) = cache.problems().group_conflicts
    assert (conflict.task.name, conflict.native_group, conflict.volcano_group) == ("both", "new", "old")
    cache.delete_pod(both)
    assert not cache.problems().group_conflicts


def test_a_pod_created_before_its_group_waits_with_a_reason_then_joins_it() -> None:
    cache = load(ClusterCache(), nodes=[node("n1")])
    cache.set_native_gang_api(True)
    cache.upsert_pod(native_member("early-0", "later"))
    (missing,) = cache.problems().missing_podgroups
    assert (missing.native, missing.name, missing.api_served) == (True, "later", True)
    assert missing.key == native_job_key("default", "later")
    cache.upsert_native_podgroup(native_podgroup("later", min_count=1))
    assert not cache.problems().missing_podgroups
    assert list(cache.jobs[native_job_key("default", "later")].tasks) == [p.uid for p in missing.pods]
    # the group deleted: its pod waits for it again
    cache.delete_native_podgroup(
        native_podgroup("later", uid=cache.native_podgroups[missing.key].metadata.uid)
    )
    assert cache.problems().missing_podgroups[0].key == missing.key


def test_queue_priority_and_a_workload_template_fill_the_job() -> None:
    cache = load(
        ClusterCache(),
        nodes=[node("n1")],
        queues=[queue("research")],
        priority_classes=[priority_class("hi", 500)],
    )
    cache.upsert_native_podgroup(native_podgroup("a", min_count=2, queue="research", priority_class="hi"))
    cache.upsert_native_podgroup(native_podgroup("b", min_count=2, priority=7))
    cache.upsert_native_podgroup(native_podgroup("c", template=("w", "workers")))
    a, b = cache.jobs[native_job_key("default", "a")], cache.jobs[native_job_key("default", "b")]
    assert (a.queue, a.priority) == ("research", 500)
    assert (b.queue, b.priority) == ("default", 7)
    # the Workload arrives after its PodGroup: the group is built again from its template
    assert cache.jobs[native_job_key("default", "c")].min_available == 1
    cache.upsert_workload(
        decode(
            Workload,
            b"""{"metadata": {"name": "w", "namespace": "default"}, "spec": {"podGroupTemplates": [
                {"name": "workers", "schedulingPolicy": {"gang": {"minCount": 3}},
                 "schedulingConstraints": {"topology": [{"key": "zone"}]}}]}}""",
        )
    )
    c = cache.jobs[native_job_key("default", "c")]
    assert (c.min_available, c.topology_keys) == (3, ("zone",))
    snap = cache.snapshot()
    assert snap.jobs[native_job_key("default", "b")].priority == 7
