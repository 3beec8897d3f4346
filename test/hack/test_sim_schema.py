"""Structural pruning and defaulting of custom resources (hack/sim/schema.py), on schemas written for the test."""

from __future__ import annotations

from caldera.hack.sim.schema import DEFAULT_CRD_DIR, crd_files, load_crd_schemas, prune_and_default

SCHEMA = {
    "type": "object",
    "properties": {
        "apiVersion": {"type": "string"},
        "kind": {"type": "string"},
        "metadata": {"type": "object"},
        "spec": {
            "type": "object",
            "properties": {
                "size": {"type": "integer", "default": 1},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "items": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "name": {"type": "string"},
                            "mode": {"type": "string", "default": "a"},
                        },
                    },
                },
                "template": {
                    "type": "object",
                    "x-kubernetes-embedded-resource": True,
                    "properties": {"spec": {"type": "object"}},
                },
            },
        },
    },
}


def test_undeclared_fields_are_dropped_at_every_depth() -> None:
    obj = {
        "apiVersion": "x/v1",
        "kind": "X",
        "metadata": {"name": "x", "labels": {"a": "b"}},
        "top": 1,
        "spec": {"size": 2, "bogus": 1, "items": [{"name": "n", "bogus": 2}]},
    }
    assert prune_and_default(obj, SCHEMA) == {
        "apiVersion": "x/v1",
        "kind": "X",
        "metadata": {"name": "x", "labels": {"a": "b"}},
        "spec": {"size": 2, "items": [{"name": "n", "mode": "a"}]},
    }


def test_preserved_and_additional_properties_are_kept() -> None:
    obj = {"spec": {"free": {"anything": {"deep": [1, 2]}}, "labels": {"k": "v", "k2": "v2"}}}
    assert prune_and_default(obj, SCHEMA)["spec"] == {
        "size": 1,
        "free": {"anything": {"deep": [1, 2]}},
        "labels": {"k": "v", "k2": "v2"},
    }


def test_an_embedded_resource_keeps_its_type_and_metadata() -> None:
    obj = {
        "spec": {
            "template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "t"}, "spec": {}, "junk": 1}
        }
    }
    assert prune_and_default(obj, SCHEMA)["spec"]["template"] == {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "t"},
        "spec": {},
    }


def test_defaults_fill_only_objects_that_are_present() -> None:
    assert prune_and_default({"metadata": {}}, SCHEMA) == {"metadata": {}}
    assert prune_and_default({"spec": {}}, SCHEMA) == {"spec": {"size": 1}}


def test_the_deploy_crds_are_loaded_for_the_four_volcano_kinds() -> None:
    schemas = load_crd_schemas(crd_files(DEFAULT_CRD_DIR))
    assert set(schemas) == {
        "podgroups.scheduling.volcano.sh",
        "queues.scheduling.volcano.sh",
        "hypernodes.topology.volcano.sh",
        "numatopologies.nodeinfo.volcano.sh",
    }


def test_a_queues_node_group_affinity_survives_pruning_and_is_decoded() -> None:
    """The nodegroup plugin reads spec.affinity of a Queue: the installed CRD declares it, so a
    server keeps it, and the scheduler's Queue decodes it."""
    from caldera.framework.objects import Queue, convert

    schema = load_crd_schemas(crd_files(DEFAULT_CRD_DIR))["queues.scheduling.volcano.sh"]
    affinity = {
        "nodeGroupAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": ["a"],
            "preferredDuringSchedulingIgnoredDuringExecution": ["b"],
        },
        "nodeGroupAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": ["c"],
            "preferredDuringSchedulingIgnoredDuringExecution": ["d"],
        },
    }
    obj = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": "q"},
        "spec": {"affinity": {**affinity, "unknown": 1}},
    }
    kept = prune_and_default(obj, schema)
    assert kept["spec"]["affinity"] == affinity
    decoded = convert(Queue, kept).spec.affinity
    assert decoded is not None and decoded.node_group_anti_affinity is not None
    assert decoded.node_group_affinity is not None
    assert decoded.node_group_affinity.preferred_during_scheduling_ignored_during_execution == ["b"]
    assert decoded.node_group_anti_affinity.required_during_scheduling_ignored_during_execution == ["c"]
