"""Validation and admission of pods as a real kube-apiserver 1.36 does them (messages as it words them)."""

from __future__ import annotations

import re
from typing import Any

from .conftest import Cluster

GATED = "Scheduling is blocked due to non-empty scheduling gates"
QUANTITY_RE = "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"


def pod(name: str, requests: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "main", "image": "busybox"}
    if requests:
        container["resources"] = {"requests": requests}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"containers": [container], **spec},
    }


async def test_an_unparsable_quantity_is_400(cluster: Cluster) -> None:
    code, doc = await cluster.http("POST", f"/api/v1/namespaces/{cluster.ns}/pods", pod("q", {"cpu": "abc"}))
    assert code == 400 and doc["reason"] == "BadRequest"
    assert doc["message"] == (
        f'Pod in version "v1" cannot be handled as a Pod: quantities must match the regular expression {QUANTITY_RE}'
    )


async def test_a_negative_request_is_422(cluster: Cluster) -> None:
    code, doc = await cluster.http(
        "POST", f"/api/v1/namespaces/{cluster.ns}/pods", pod("neg", {"memory": "-1Gi"})
    )
    assert code == 422 and doc["reason"] == "Invalid"
    field = "spec.containers[0].resources.requests[memory]"
    assert (
        doc["message"]
        == f'Pod "neg" is invalid: {field}: Invalid value: "-1Gi": must be greater than or equal to 0'
    )
    assert {"reason": "FieldValueInvalid", "field": field}.items() <= doc["details"]["causes"][0].items()


async def test_admission_fills_the_defaults_every_pod_carries(cluster: Cluster) -> None:
    created = await cluster.http.ok("POST", f"/api/v1/namespaces/{cluster.ns}/pods", pod("d"))
    spec = created["spec"]
    assert spec["priority"] == 0
    assert spec["preemptionPolicy"] == "PreemptLowerPriority"
    assert spec["enableServiceLinks"] is True
    for key in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"):
        assert {"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300} in spec[
            "tolerations"
        ]


async def test_a_pod_that_tolerates_everything_gets_no_default_tolerations(cluster: Cluster) -> None:
    created = await cluster.http.ok(
        "POST", f"/api/v1/namespaces/{cluster.ns}/pods", pod("t", tolerations=[{"operator": "Exists"}])
    )
    assert created["spec"]["tolerations"] == [{"operator": "Exists"}]


async def test_creation_timestamps_have_one_second_resolution(cluster: Cluster) -> None:
    stamps = []
    for i in range(3):
        created = await cluster.http.ok("POST", f"/api/v1/namespaces/{cluster.ns}/pods", pod(f"ts-{i}"))
        stamps.append(created["metadata"]["creationTimestamp"])
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", s) for s in stamps), stamps


async def test_a_gated_pod_is_marked_and_cannot_be_bound(cluster: Cluster) -> None:
    c = cluster
    created = await c.http.ok(
        "POST", f"/api/v1/namespaces/{c.ns}/pods", pod("g", schedulingGates=[{"name": "example.com/wait"}])
    )
    (cond,) = [x for x in created["status"]["conditions"] if x["type"] == "PodScheduled"]
    assert (cond["status"], cond["reason"], cond["message"]) == ("False", "SchedulingGated", GATED)
    binding = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": "g"},
        "target": {"kind": "Node", "name": "n1"},
    }
    code, doc = await c.http("POST", f"/api/v1/namespaces/{c.ns}/pods/g/binding", binding)
    assert code == 409 and doc["reason"] == "Conflict"
    assert (
        doc["message"]
        == 'Operation cannot be fulfilled on pods/binding "g": pod g has non-empty .spec.schedulingGates'
    )


async def _update(c: Cluster, name: str, change: Any) -> tuple[int, Any]:
    current = await c.http.ok("GET", f"/api/v1/namespaces/{c.ns}/pods/{name}")
    change(current["spec"])
    return await c.http("PUT", f"/api/v1/namespaces/{c.ns}/pods/{name}", current)


async def test_pod_spec_updates_allow_only_what_the_api_allows(cluster: Cluster) -> None:
    c = cluster
    await c.http.ok(
        "POST",
        f"/api/v1/namespaces/{c.ns}/pods",
        pod("u", {"cpu": "100m"}, schedulingGates=[{"name": "a"}, {"name": "b"}]),
    )

    def image(spec: dict[str, Any]) -> None:
        spec["containers"][0]["image"] = "busybox:1.36"

    def deadline(value: int | None) -> Any:
        def set_it(spec: dict[str, Any]) -> None:
            if value is None:
                spec.pop("activeDeadlineSeconds", None)
            else:
                spec["activeDeadlineSeconds"] = value

        return set_it

    def add_toleration(spec: dict[str, Any]) -> None:
        spec["tolerations"].append({"key": "k", "operator": "Equal", "value": "v", "effect": "NoSchedule"})

    def drop_toleration(spec: dict[str, Any]) -> None:
        spec["tolerations"] = [t for t in spec["tolerations"] if t.get("key") != "k"]

    def remove_gate(spec: dict[str, Any]) -> None:
        spec["schedulingGates"] = [{"name": "a"}]

    def add_gate(spec: dict[str, Any]) -> None:
        spec["schedulingGates"].append({"name": "c"})

    def resources(spec: dict[str, Any]) -> None:
        spec["containers"][0]["resources"]["requests"]["cpu"] = "200m"

    def node_name(spec: dict[str, Any]) -> None:
        spec["nodeName"] = "n1"

    allowed = [image, deadline(600), deadline(300), add_toleration, remove_gate]
    for change in allowed:
        code, doc = await _update(c, "u", change)
        assert code == 200, (change, doc)
    refused = {
        "raise the deadline": (
            deadline(900),
            "spec.activeDeadlineSeconds",
            "must be less than or equal to previous value",
        ),
        "clear the deadline": (
            deadline(None),
            "spec.activeDeadlineSeconds",
            "must not update from a positive integer to nil value",
        ),
        "drop a toleration": (
            drop_toleration,
            "spec.tolerations",
            "existing toleration can not be modified except its tolerationSeconds",
        ),
        "add a gate": (
            add_gate,
            "spec.schedulingGates[1].name",
            "only deletion is allowed, but found new scheduling gate 'c'",
        ),
        "change a request": (resources, "spec", "pod updates may not change fields other than"),
        "set the node": (node_name, "spec", "pod updates may not change fields other than"),
    }
    for what, (change, field, text) in refused.items():
        code, doc = await _update(c, "u", change)
        assert code == 422, (what, doc)
        assert doc["details"]["causes"][0]["field"] == field, (what, doc)
        assert text in doc["message"], (what, doc)
