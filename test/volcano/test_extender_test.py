"""Volcano's pkg/scheduler/plugins/extender/extender_test.go, ported as data.

TestMaxBodySizeLimit2: an answer over maxBodySize (10 MiB) is a failure. TestIsInterested,
TestHasManagedResources, TestHasResourcesInList: which tasks, containers and resource lists concern
an extender with ``extender.managedResources`` (every case, named as in Go)."""

from __future__ import annotations

import pytest

from caldera.framework.model import TaskInfo
from caldera.framework.objects import Container, Pod, convert
from caldera.hack.extender import extender
from caldera.plugins.extender import (
    MAX_BODY,
    ExtenderClient,
    ExtenderError,
    has_managed_resources,
    has_resources_in_list,
    interested,
)

GPU = "nvidia.com/gpu"


def test_max_body_size_limit2():
    """TestMaxBodySizeLimit2."""
    padding = b'{"padding":"' + b"a" * (MAX_BODY + 1) + b'"}'
    with extender({"test": lambda body: (200, padding)}) as ext:
        with pytest.raises(ExtenderError, match="answer over"):
            ExtenderClient(ext.url, 10.0).send("test", {"task": {}, "node": {}}, dict)


def c(requests=None, limits=None):
    return {"name": "c", "resources": {"requests": requests or {}, "limits": limits or {}}}


IS_INTERESTED = [
    ("empty managed resources - should return true", [], [c({"cpu": "100m"})], [], True),
    ("container has managed resource in requests", [GPU], [c({"cpu": "100m", GPU: "1"})], [], True),
    ("container has managed resource in limits", [GPU], [c(limits={GPU: "1"})], [], True),
    ("init container has managed resource", [GPU], [c({"cpu": "100m"})], [c({GPU: "1"})], True),
    ("no managed resources in containers", [GPU], [c({"cpu": "100m", "memory": "128Mi"})], [], False),
    (
        "multiple managed resources - one match",
        [GPU, "amd.com/gpu"],
        [c({"cpu": "100m", "amd.com/gpu": "1"})],
        [],
        True,
    ),
]


@pytest.mark.parametrize(
    ("name", "managed", "containers", "init", "expected"), IS_INTERESTED, ids=[x[0] for x in IS_INTERESTED]
)
def test_is_interested(name, managed, containers, init, expected):
    """TestIsInterested."""
    pod = convert(
        Pod, {"metadata": {"name": "p"}, "spec": {"containers": containers, "initContainers": init}}
    )
    task = TaskInfo.from_pod(pod)
    assert interested(frozenset(managed), task) is expected, name


HAS_MANAGED = [
    ("no containers", [GPU], [], False),
    ("container with managed resource in requests", [GPU], [c({GPU: "1"})], True),
    ("container with managed resource in limits", [GPU], [c(limits={GPU: "1"})], True),
    ("container with managed resource in both requests and limits", [GPU], [c({GPU: "1"}, {GPU: "1"})], True),
    ("multiple containers - one has managed resource", [GPU], [c({"cpu": "100m"}), c({GPU: "1"})], True),
    ("container with no managed resources", [GPU], [c({"cpu": "100m", "memory": "128Mi"})], False),
    ("empty resource requirements", [GPU], [{"name": "c"}], False),
    (
        "multiple managed resources - partial match",
        [GPU, "amd.com/gpu"],
        [c({GPU: "1", "intel.com/gpu": "1"})],
        True,
    ),
]


@pytest.mark.parametrize(
    ("name", "managed", "containers", "expected"), HAS_MANAGED, ids=[x[0] for x in HAS_MANAGED]
)
def test_has_managed_resources(name, managed, containers, expected):
    """TestHasManagedResources."""
    got = has_managed_resources(frozenset(managed), [convert(Container, x) for x in containers])
    assert got is expected, name


IN_LIST = [
    ("empty resource list", [GPU], {}, False),
    ("nil resource list", [GPU], None, False),
    ("resource list contains managed resource", [GPU], {"cpu": "100m", GPU: "1"}, True),
    ("resource list contains no managed resources", [GPU], {"cpu": "100m", "memory": "128Mi"}, False),
    (
        "resource list contains multiple managed resources",
        [GPU, "amd.com/gpu"],
        {"cpu": "100m", GPU: "1", "amd.com/gpu": "1"},
        True,
    ),
    (
        "resource list contains one of multiple managed resources",
        [GPU, "amd.com/gpu"],
        {"cpu": "100m", "amd.com/gpu": "1"},
        True,
    ),
    ("empty managed resources - should return false", [], {"cpu": "100m", GPU: "1"}, False),
]


@pytest.mark.parametrize(("name", "managed", "resources", "expected"), IN_LIST, ids=[x[0] for x in IN_LIST])
def test_has_resources_in_list(name, managed, resources, expected):
    """TestHasResourcesInList."""
    assert has_resources_in_list(frozenset(managed), resources) is expected, name
