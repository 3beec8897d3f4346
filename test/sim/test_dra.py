"""Dynamic Resource Allocation (resource.k8s.io/v1) as kube-apiserver 1.36 serves it: discovery, the four
kinds, their defaults and validation (shared/KUBE-FACTS.md, "Dynamic Resource Allocation"), pods that use
claims, and RBAC over the group."""

from __future__ import annotations

import re
from typing import Any

import orjson

from .conftest import Cluster
from .test_rbac import account, grant

API = "/apis/resource.k8s.io/v1"
IMMUTABLE = "field is immutable"
REQUEST_REF = (
    "must be the name of a request in the claim or the name of a request and a subrequest separated by '/'"
)
PLACEMENT = "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required"


def claims(c: Cluster) -> str:
    return f"{API}/namespaces/{c.ns}/resourceclaims"


def claim(name: str, *requests: dict[str, Any], **devices: Any) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name},
        "spec": {"devices": {"requests": list(requests), **devices}},
    }


def exactly(name: str, device_class: str = "gpu.example.com", **more: Any) -> dict[str, Any]:
    return {"name": name, "exactly": {"deviceClassName": device_class, **more}}


def device_class(name: str, *expressions: str) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": e}} for e in expressions]},
    }


def resource_slice(name: str, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "driver": "gpu.example.com",
        "pool": {"name": "node-a", "generation": 0, "resourceSliceCount": 1},
        "devices": [
            {
                "name": "gpu-0",
                "attributes": {
                    "gpu.example.com/model": {"string": "a100"},
                    "gpu.example.com/index": {"int": 0},
                },
                "capacity": {"gpu.example.com/memory": {"value": "40Gi"}},
            }
        ],
    }
    body.update(spec)
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": body,
    }


def pod(name: str, resource_claims: list[dict[str, Any]], uses: list[str] | None = None) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "main", "image": "busybox"}
    if uses is not None:
        container["resources"] = {"claims": [{"name": n} for n in uses]}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"containers": [container], "resourceClaims": resource_claims},
    }


def allocation(*results: dict[str, Any]) -> dict[str, Any]:
    return {"devices": {"results": list(results)}}


def result(request: str, device: str = "gpu-0") -> dict[str, Any]:
    return {"request": request, "driver": "gpu.example.com", "pool": "node-a", "device": device}


async def refused(c: Cluster, method: str, path: str, body: Any) -> dict[str, Any]:
    code, doc = await c.http(method, path, body)
    assert code == 422, f"{method} {path}: {code} {doc}"
    assert doc["reason"] == "Invalid"
    return doc


def only_cause(doc: dict[str, Any]) -> dict[str, Any]:
    (cause,) = doc["details"]["causes"]
    return cause


async def put_status(c: Cluster, name: str, status: dict[str, Any]) -> tuple[int, Any]:
    current = await c.http.ok("GET", f"{claims(c)}/{name}")
    current["status"] = status
    return await c.http("PUT", f"{claims(c)}/{name}/status", current)


# ---- discovery and the verbs ------------------------------------------------------------------------------


async def test_discovery_serves_only_v1_with_the_four_kinds(cluster: Cluster) -> None:
    group = await cluster.http.ok("GET", "/apis/resource.k8s.io")
    assert [v["version"] for v in group["versions"]] == ["v1"]
    assert group["preferredVersion"]["groupVersion"] == "resource.k8s.io/v1"
    listing = await cluster.http.ok("GET", API)
    served = {r["name"]: (r["kind"], r["namespaced"]) for r in listing["resources"]}
    assert served["deviceclasses"] == ("DeviceClass", False)
    assert served["resourceslices"] == ("ResourceSlice", False)
    assert served["resourceclaims"] == ("ResourceClaim", True)
    assert served["resourceclaims/status"] == ("ResourceClaim", True)
    assert served["resourceclaimtemplates"] == ("ResourceClaimTemplate", True)
    assert "resourceclaimtemplates/status" not in served
    groups = await cluster.http.ok("GET", "/apis")
    (entry,) = [g for g in groups["groups"] if g["name"] == "resource.k8s.io"]
    assert [v["version"] for v in entry["versions"]] == ["v1"]


async def test_claims_are_listed_watched_patched_and_deleted_like_other_kinds(cluster: Cluster) -> None:
    c = cluster
    await c.create(claims(c), claim("a", exactly("gpu")))
    await c.create(claims(c), claim("b", exactly("gpu")))
    listed = await c.http.ok("GET", claims(c), params={"labelSelector": ""})
    assert [i["metadata"]["name"] for i in listed["items"]] == ["a", "b"]
    assert (listed["kind"], listed["apiVersion"]) == ("ResourceClaimList", "resource.k8s.io/v1")
    code, stream = await c.http(
        "GET", claims(c), params={"watch": "1", "resourceVersion": "0", "timeoutSeconds": "1"}
    )
    assert code == 200
    text = stream if isinstance(stream, str) else orjson.dumps(stream).decode()
    events = [orjson.loads(line) for line in text.splitlines() if line.strip()]
    assert {(e["type"], e["object"]["metadata"]["name"]) for e in events} == {("ADDED", "a"), ("ADDED", "b")}
    patched = await c.http.ok(
        "PATCH",
        f"{claims(c)}/a",
        {"metadata": {"labels": {"team": "ml"}}},
        content_type="application/merge-patch+json",
    )
    assert patched["metadata"]["labels"] == {"team": "ml"}
    await c.http.ok("DELETE", f"{claims(c)}/a")
    code, doc = await c.http("GET", f"{claims(c)}/a")
    assert code == 404 and doc["message"] == 'resourceclaims.resource.k8s.io "a" not found'


async def test_slices_are_selected_by_node_name_and_driver(cluster: Cluster) -> None:
    c = cluster
    on_a, on_b = c.name("on-a"), c.name("on-b")
    await c.create(f"{API}/resourceslices", resource_slice(on_a, nodeName="node-a"), cluster_scoped=True)
    await c.create(
        f"{API}/resourceslices",
        resource_slice(on_b, nodeName="node-b", pool={"name": "node-b", "resourceSliceCount": 1}),
        cluster_scoped=True,
    )
    found = await c.http.ok("GET", f"{API}/resourceslices", params={"fieldSelector": "spec.nodeName=node-a"})
    assert [i["metadata"]["name"] for i in found["items"] if i["metadata"]["name"] in (on_a, on_b)] == [on_a]
    by_driver = await c.http.ok(
        "GET", f"{API}/resourceslices", params={"fieldSelector": "spec.driver=gpu.example.com"}
    )
    assert {on_a, on_b} <= {i["metadata"]["name"] for i in by_driver["items"]}
    stored = await c.http.ok("GET", f"{API}/resourceslices/{on_a}")
    assert stored["spec"]["devices"][0]["attributes"]["gpu.example.com/model"] == {"string": "a100"}
    assert stored["spec"]["devices"][0]["capacity"]["gpu.example.com/memory"] == {"value": "40Gi"}


# ---- CEL selectors --------------------------------------------------------------------------------------------


async def test_a_selector_with_a_syntax_error_is_refused_at_create(cluster: Cluster) -> None:
    c = cluster
    name = c.name("broken")
    doc = await refused(c, "POST", f"{API}/deviceclasses", device_class(name, "device.driver == "))
    cause = only_cause(doc)
    assert cause["field"] == "spec.selectors[0].cel.expression"
    assert cause["reason"] == "FieldValueInvalid"
    assert cause["message"].startswith(
        'Invalid value: "device.driver == ": compilation failed: ERROR: <input>:1:'
    ), cause["message"]
    assert "Syntax error" in cause["message"]
    assert doc["message"].startswith(f'DeviceClass.resource.k8s.io "{name}" is invalid: spec.selectors[0]')


async def test_a_selector_that_is_not_a_bool_is_refused_with_its_type(cluster: Cluster) -> None:
    c = cluster
    name = c.name("typed")
    doc = await refused(c, "POST", f"{API}/deviceclasses", device_class(name, "device.driver"))
    assert only_cause(doc)["message"] == (
        'Invalid value: "device.driver": must evaluate to bool or the unknown type, not string'
    )
    doc = await refused(
        c, "POST", claims(c), claim("n", exactly("gpu", selectors=[{"cel": {"expression": "1"}}]))
    )
    cause = only_cause(doc)
    assert cause["field"] == "spec.devices.requests[0].exactly.selectors[0].cel.expression"
    assert cause["message"] == 'Invalid value: "1": must evaluate to bool or the unknown type, not int'


async def test_selectors_that_compile_are_accepted(cluster: Cluster) -> None:
    c = cluster
    expressions = (
        'device.driver == "gpu.example.com"',
        'device.attributes["gpu.example.com"].model == "a100"',
        'device.capacity["gpu.example.com"].memory.compareTo(quantity("40Gi")) >= 0',
        '"gpu.example.com" in device.attributes',
    )
    created = await c.create(
        f"{API}/deviceclasses", device_class(c.name("ok"), *expressions), cluster_scoped=True
    )
    assert [s["cel"]["expression"] for s in created["spec"]["selectors"]] == list(expressions)


# ---- ResourceSlice ------------------------------------------------------------------------------------------


async def test_a_slice_needs_a_pool_name_and_a_positive_slice_count(cluster: Cluster) -> None:
    c = cluster
    path = f"{API}/resourceslices"
    doc = await refused(
        c, "POST", path, resource_slice(c.name("s"), nodeName="n", pool={"resourceSliceCount": 1})
    )
    assert only_cause(doc) == {
        "field": "spec.pool.name",
        "reason": "FieldValueRequired",
        "message": "Required value",
    }
    doc = await refused(
        c,
        "POST",
        path,
        resource_slice(c.name("s"), nodeName="n", pool={"name": "p", "resourceSliceCount": 0}),
    )
    assert only_cause(doc)["field"] == "spec.pool.resourceSliceCount"
    assert only_cause(doc)["message"] == "Invalid value: 0: must be greater than zero"


async def test_a_slice_names_exactly_one_kind_of_node_placement(cluster: Cluster) -> None:
    c = cluster
    path = f"{API}/resourceslices"
    doc = await refused(c, "POST", path, resource_slice(c.name("two"), nodeName="n", allNodes=True))
    assert only_cause(doc) == {
        "field": "spec",
        "reason": "FieldValueInvalid",
        "message": 'Invalid value: "{`nodeName`, `allNodes`}": '
        + PLACEMENT
        + ", but multiple fields are set",
    }
    doc = await refused(c, "POST", path, resource_slice(c.name("none")))
    assert only_cause(doc) == {
        "field": "spec",
        "reason": "FieldValueRequired",
        "message": "Required value: " + PLACEMENT,
    }
    selector = {"nodeSelectorTerms": [{"matchExpressions": [{"key": "gpu", "operator": "Exists"}]}]}
    # with `perDeviceNodeSelection` each device says where it is (here: on every node)
    per_device = {"perDeviceNodeSelection": True, "devices": [{"name": "gpu-0", "allNodes": True}]}
    for placement in ({"allNodes": True}, {"nodeSelector": selector}, per_device):
        await c.create(
            path, resource_slice(c.name(f"one-{len(c.cleanup)}"), **placement), cluster_scoped=True
        )


async def test_a_slice_keeps_its_pool_driver_and_node(cluster: Cluster) -> None:
    c = cluster
    name = c.name("fixed")
    created = await c.create(
        f"{API}/resourceslices", resource_slice(name, nodeName="node-a"), cluster_scoped=True
    )
    moved = {**created, "spec": {**created["spec"], "nodeName": "node-b"}}
    doc = await refused(c, "PUT", f"{API}/resourceslices/{name}", moved)
    assert only_cause(doc) == {
        "field": "spec.nodeName",
        "reason": "FieldValueInvalid",
        "message": f'Invalid value: "node-b": {IMMUTABLE}',
    }
    grown = {**created, "spec": {**created["spec"], "pool": {**created["spec"]["pool"], "generation": 1}}}
    updated = await c.http.ok("PUT", f"{API}/resourceslices/{name}", grown)
    assert updated["spec"]["pool"]["generation"] == 1


# ---- ResourceClaim and ResourceClaimTemplate ------------------------------------------------------------------


async def test_a_request_has_exactly_one_of_exactly_and_first_available(cluster: Cluster) -> None:
    c = cluster
    doc = await refused(c, "POST", claims(c), claim("none", {"name": "gpu"}))
    assert only_cause(doc) == {
        "field": "spec.devices.requests[0]",
        "reason": "FieldValueRequired",
        "message": "Required value: exactly one of `exactly` or `firstAvailable` is required",
    }
    both = {**exactly("gpu"), "firstAvailable": [{"name": "big", "deviceClassName": "gpu.example.com"}]}
    doc = await refused(c, "POST", claims(c), claim("both", both))
    assert only_cause(doc)["message"] == (
        "Invalid value: null: exactly one of `exactly` or `firstAvailable` is required, but multiple fields are set"
    )
    assert doc["message"].startswith(
        'ResourceClaim.resource.k8s.io "both" is invalid: spec.devices.requests[0]'
    )


async def test_create_fills_allocation_mode_and_count(cluster: Cluster) -> None:
    c = cluster
    prioritized = {
        "name": "any",
        "firstAvailable": [
            {"name": "big", "deviceClassName": "big.example.com"},
            {"name": "all-small", "deviceClassName": "small.example.com", "allocationMode": "All"},
        ],
    }
    created = await c.create(claims(c), claim("d", exactly("gpu"), prioritized))
    requests = created["spec"]["devices"]["requests"]
    assert requests[0]["exactly"] == {
        "deviceClassName": "gpu.example.com",
        "allocationMode": "ExactCount",
        "count": 1,
    }
    big, all_small = requests[1]["firstAvailable"]
    assert (big["allocationMode"], big["count"]) == ("ExactCount", 1)
    assert all_small["allocationMode"] == "All" and "count" not in all_small
    doc = await refused(c, "POST", claims(c), claim("zero", exactly("gpu", count=-1)))
    assert only_cause(doc)["field"] == "spec.devices.requests[0].exactly.count"


async def test_a_claim_of_a_class_that_does_not_exist_is_accepted(cluster: Cluster) -> None:
    created = await cluster.create(
        claims(cluster), claim("ghost", exactly("gpu", "no-such-class.example.com"))
    )
    assert (
        created["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] == "no-such-class.example.com"
    )
    assert "status" not in created or not created["status"].get("allocation")


async def test_a_claim_spec_is_immutable_but_its_metadata_is_not(cluster: Cluster) -> None:
    c = cluster
    created = await c.create(claims(c), claim("fixed", exactly("gpu")))
    more = orjson.loads(orjson.dumps(created))
    more["spec"]["devices"]["requests"][0]["exactly"]["count"] = 2
    doc = await refused(c, "PUT", f"{claims(c)}/fixed", more)
    cause = only_cause(doc)
    assert (cause["field"], cause["reason"]) == ("spec", "FieldValueInvalid")
    assert cause["message"].endswith(IMMUTABLE)
    # The same spec as sent at create (before defaults) is the same spec: only the label changes.
    resent = claim("fixed", exactly("gpu"))
    resent["metadata"] = {**created["metadata"], "labels": {"a": "b"}}
    updated = await c.http.ok("PUT", f"{claims(c)}/fixed", resent)
    assert updated["metadata"]["labels"] == {"a": "b"}


async def test_a_template_is_validated_and_defaulted_like_a_claim(cluster: Cluster) -> None:
    c = cluster
    path = f"{API}/namespaces/{c.ns}/resourceclaimtemplates"

    def template(name: str, request: dict[str, Any]) -> dict[str, Any]:
        return {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": name},
            "spec": {"metadata": {"labels": {"app": "train"}}, "spec": {"devices": {"requests": [request]}}},
        }

    doc = await refused(c, "POST", path, template("bad", {"name": "gpu"}))
    assert only_cause(doc)["field"] == "spec.spec.devices.requests[0]"
    created = await c.create(path, template("good", exactly("gpu")))
    assert created["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"] == 1
    changed = orjson.loads(orjson.dumps(created))
    changed["spec"]["metadata"]["labels"] = {"app": "other"}
    doc = await refused(c, "PUT", f"{path}/good", changed)
    assert only_cause(doc)["field"] == "spec" and only_cause(doc)["message"].endswith(IMMUTABLE)


# ---- ResourceClaim status -------------------------------------------------------------------------------------


async def test_status_is_written_only_through_its_subresource(cluster: Cluster) -> None:
    c = cluster
    body = claim("s", exactly("gpu"))
    body["status"] = {"allocation": allocation(result("gpu"))}
    created = await c.create(claims(c), body)
    assert not (created.get("status") or {}).get("allocation"), "a status sent on create is dropped"
    code, stored = await put_status(c, "s", {"allocation": allocation(result("gpu"))})
    assert code == 200 and stored["status"]["allocation"]["devices"]["results"][0]["device"] == "gpu-0"
    stored["status"] = {}
    again = await c.http.ok("PUT", f"{claims(c)}/s", stored)
    assert again["status"]["allocation"], "an update of the object keeps the status"


async def test_reserved_for_needs_an_allocation(cluster: Cluster) -> None:
    c = cluster
    await c.create(claims(c), claim("r", exactly("gpu")))
    consumer = {"resource": "pods", "name": "p", "uid": "2f1e0c7a-0000-4000-8000-000000000001"}
    code, doc = await put_status(c, "r", {"reservedFor": [consumer]})
    assert code == 422
    assert only_cause(doc) == {
        "field": "status.reservedFor",
        "reason": "FieldValueForbidden",
        "message": "Forbidden: may not be specified when `allocated` is not set",
    }
    # Allocation and reservation in one write are accepted; the allocation cannot then go while reserved.
    code, doc = await put_status(c, "r", {"allocation": allocation(result("gpu")), "reservedFor": [consumer]})
    assert code == 200, doc
    code, doc = await put_status(c, "r", {"reservedFor": [consumer]})
    assert code == 422 and only_cause(doc)["field"] == "status.reservedFor"
    code, doc = await put_status(c, "r", {})
    assert code == 200 and not doc.get("status")


async def test_an_allocation_cannot_move_to_other_devices(cluster: Cluster) -> None:
    c = cluster
    await c.create(claims(c), claim("m", exactly("gpu")))
    assert (await put_status(c, "m", {"allocation": allocation(result("gpu", "gpu-0"))}))[0] == 200
    code, doc = await put_status(c, "m", {"allocation": allocation(result("gpu", "gpu-1"))})
    assert code == 422
    cause = only_cause(doc)
    assert (cause["field"], cause["reason"]) == ("status.allocation", "FieldValueInvalid")
    assert cause["message"].endswith(IMMUTABLE)


async def test_an_allocation_result_names_a_request_of_the_claim(cluster: Cluster) -> None:
    c = cluster
    prioritized = {"name": "any", "firstAvailable": [{"name": "big", "deviceClassName": "big.example.com"}]}
    await c.create(claims(c), claim("q", exactly("gpu"), prioritized))
    for wrong in ("nic", "any/small", "gpu/big", "a/b/c"):
        code, doc = await put_status(c, "q", {"allocation": allocation(result(wrong))})
        assert code == 422, wrong
        assert only_cause(doc) == {
            "field": "status.allocation.devices.results[0].request",
            "reason": "FieldValueInvalid",
            "message": f'Invalid value: "{wrong}": {REQUEST_REF}',
        }
    code, doc = await put_status(
        c, "q", {"allocation": allocation(result("gpu"), result("any/big", "gpu-1"))}
    )
    assert code == 200, doc


def opaque(parameters: Any, driver: str = "gpu.example.com") -> dict[str, Any]:
    return {"opaque": {"driver": driver, "parameters": parameters}}


async def test_a_configuration_names_a_driver_and_has_a_json_object_of_parameters(cluster: Cluster) -> None:
    c = cluster
    doc = await refused(
        c, "POST", claims(c), claim("c", exactly("gpu"), config=[opaque(["not", "an", "object"])])
    )
    assert only_cause(doc) == {
        "field": "spec.devices.config[0].opaque.parameters",
        "reason": "FieldValueInvalid",
        "message": 'Invalid value: "<value omitted>": must be a valid JSON object',
    }
    no_driver = device_class("configured.example.com", "true")
    no_driver["spec"]["config"] = [{"opaque": {"parameters": {"a": 1}}}]
    doc = await refused(c, "POST", f"{API}/deviceclasses", no_driver)
    assert only_cause(doc) == {
        "field": "spec.config[0].opaque.driver",
        "reason": "FieldValueRequired",
        "message": "Required value",
    }
    sharing = {
        "apiVersion": "gpu.example.com/v1",
        "kind": "GpuConfig",
        "sharing": {"strategy": "TimeSlicing"},
    }
    await c.create(claims(c), claim("ok", exactly("gpu"), config=[{"requests": ["gpu"], **opaque(sharing)}]))
    stored = await c.http.ok("GET", f"{claims(c)}/ok")
    assert stored["spec"]["devices"]["config"] == [{"requests": ["gpu"], **opaque(sharing)}]


async def test_an_allocation_carries_configurations_from_the_class_or_the_claim(cluster: Cluster) -> None:
    c = cluster
    await c.create(claims(c), claim("q", exactly("gpu")))

    def with_config(**config: Any) -> dict[str, Any]:
        entry = {"source": "FromClass", "requests": ["gpu"], **opaque({"a": 1}), **config}
        return {"allocation": {"devices": {"results": [result("gpu")], "config": [entry]}}}

    code, doc = await put_status(c, "q", with_config(source="Elsewhere"))
    assert code == 422
    assert only_cause(doc) == {
        "field": "status.allocation.devices.config[0].source",
        "reason": "FieldValueNotSupported",
        "message": 'Unsupported value: "Elsewhere": supported values: "FromClaim", "FromClass"',
    }
    code, doc = await put_status(c, "q", with_config(requests=["nic"]))
    assert code == 422
    assert only_cause(doc) == {
        "field": "status.allocation.devices.config[0].requests[0]",
        "reason": "FieldValueInvalid",
        "message": f'Invalid value: "nic": {REQUEST_REF}',
    }
    code, doc = await put_status(c, "q", with_config())
    assert code == 200, doc
    assert (
        doc["status"]["allocation"]["devices"]["config"] == with_config()["allocation"]["devices"]["config"]
    )


# ---- pods -------------------------------------------------------------------------------------------------------


async def test_a_pod_claim_names_a_claim_or_a_template_not_both(cluster: Cluster) -> None:
    c = cluster
    entry = {"name": "gpu", "resourceClaimName": "a", "resourceClaimTemplateName": "b"}
    doc = await refused(c, "POST", f"/api/v1/namespaces/{c.ns}/pods", pod("both", [entry]))
    cause = only_cause(doc)
    assert (cause["field"], cause["reason"]) == ("spec.resourceClaims[0]", "FieldValueInvalid")
    assert cause["message"].endswith(
        ": at most one of `resourceClaimName` or `resourceClaimTemplateName` may be specified"
    )
    assert doc["message"].startswith('Pod "both" is invalid: spec.resourceClaims[0]: Invalid value: ')


async def test_a_container_uses_only_claims_the_pod_declares(cluster: Cluster) -> None:
    c = cluster
    declared = [{"name": "gpu", "resourceClaimName": "c0"}, {"name": "nic", "resourceClaimName": "c1"}]
    doc = await refused(c, "POST", f"/api/v1/namespaces/{c.ns}/pods", pod("stray", declared, uses=["fpga"]))
    assert only_cause(doc) == {
        "field": "spec.containers[0].resources.claims[0]",
        "reason": "FieldValueNotFound",
        "message": 'Not found: "fpga": must be one of the names in pod.spec.resourceClaims: gpu, nic',
    }
    doc = await refused(c, "POST", f"/api/v1/namespaces/{c.ns}/pods", pod("empty", [], uses=["gpu"]))
    assert only_cause(doc)["message"].endswith(
        "must be one of the names in pod.spec.resourceClaims which is empty"
    )


async def test_a_pod_whose_claim_does_not_exist_is_accepted_and_bound(cluster: Cluster) -> None:
    """Nothing but the scheduler keeps a pod without its devices from being bound."""
    c = cluster
    created = await c.http.ok(
        "POST",
        f"/api/v1/namespaces/{c.ns}/pods",
        pod("orphan", [{"name": "gpu", "resourceClaimName": "missing"}], uses=["gpu"]),
    )
    assert created["spec"]["resourceClaims"] == [{"name": "gpu", "resourceClaimName": "missing"}]
    binding = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": "orphan"},
        "target": {"kind": "Node", "name": "node-a"},
    }
    code, doc = await c.http("POST", f"/api/v1/namespaces/{c.ns}/pods/orphan/binding", binding)
    assert code == 201, doc
    assert (await c.http.ok("GET", f"/api/v1/namespaces/{c.ns}/pods/orphan"))["spec"]["nodeName"] == "node-a"


# ---- RBAC ---------------------------------------------------------------------------------------------------


async def test_rbac_guards_claims_and_their_status_separately(cluster: Cluster) -> None:
    c = cluster
    token, user = await account(c, "allocator")
    await c.create(claims(c), claim("g", exactly("gpu")))
    code, doc = await c.http("GET", claims(c), token=token)
    assert code == 403
    assert doc["message"] == (
        f'resourceclaims.resource.k8s.io is forbidden: User "{user}" cannot list resource "resourceclaims" '
        f'in API group "resource.k8s.io" in the namespace "{c.ns}"'
    )
    await grant(
        c,
        "allocator",
        [
            {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims"], "verbs": ["get", "list"]},
            {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims/status"], "verbs": ["update"]},
        ],
    )
    current = await c.http.ok("GET", f"{claims(c)}/g", token=token)
    current["status"] = {"allocation": allocation(result("gpu"))}
    code, doc = await c.http("PUT", f"{claims(c)}/g/status", current, token=token)
    assert code == 200, doc
    code, doc = await c.http("PUT", f"{claims(c)}/g", doc, token=token)
    assert code == 403 and re.search(
        r'cannot update resource "resourceclaims" in API group "resource.k8s.io"', doc["message"]
    )
    code, doc = await c.http("GET", f"{API}/deviceclasses", token=token)
    assert code == 403 and doc["message"].endswith("at the cluster scope")


async def test_several_errors_are_reported_together(cluster: Cluster) -> None:
    c = cluster
    doc = await refused(c, "POST", claims(c), claim("two", {"name": "a"}, exactly("b", count=-1)))
    assert [x["field"] for x in doc["details"]["causes"]] == [
        "spec.devices.requests[0]",
        "spec.devices.requests[1].exactly.count",
    ]
    assert doc["message"] == (
        'ResourceClaim.resource.k8s.io "two" is invalid: [spec.devices.requests[0]: Required value: exactly one '
        "of `exactly` or `firstAvailable` is required, spec.devices.requests[1].exactly.count: Invalid value: -1: "
        "must be greater than zero]"
    )


async def test_a_claim_being_deleted_takes_no_new_consumers(cluster: Cluster) -> None:
    c = cluster
    await c.create(claims(c), claim("leaving", exactly("gpu")))
    first = {"resource": "pods", "name": "p", "uid": "2f1e0c7a-0000-4000-8000-000000000001"}
    second = {"resource": "pods", "name": "q", "uid": "2f1e0c7a-0000-4000-8000-000000000002"}
    await c.http.ok(
        "PATCH",
        f"{claims(c)}/leaving",
        {"metadata": {"finalizers": ["example.com/hold"]}},
        content_type="application/merge-patch+json",
    )
    code, doc = await put_status(
        c, "leaving", {"allocation": allocation(result("gpu")), "reservedFor": [first]}
    )
    assert code == 200, doc
    await c.http.ok("DELETE", f"{claims(c)}/leaving")
    code, doc = await put_status(
        c, "leaving", {"allocation": allocation(result("gpu")), "reservedFor": [first, second]}
    )
    assert code == 422 and only_cause(doc)["message"] == (
        "Forbidden: new entries may not be added while `deallocationRequested` or `deletionTimestamp` are set"
    )
    code, doc = await put_status(c, "leaving", {"allocation": allocation(result("gpu"))})
    assert code == 200, "consumers may still go"
    await c.http.ok(
        "PATCH",
        f"{claims(c)}/leaving",
        {"metadata": {"finalizers": None}},
        content_type="application/merge-patch+json",
    )


async def test_a_selector_longer_than_10_kib_is_not_compiled(cluster: Cluster) -> None:
    c = cluster
    long_expression = "true && " * 1300 + "true"  # 10,404 bytes of valid CEL
    doc = await refused(c, "POST", f"{API}/deviceclasses", device_class(c.name("long"), long_expression))
    cause = only_cause(doc)
    assert (cause["field"], cause["reason"]) == ("spec.selectors[0].cel.expression", "FieldValueTooLong")
    assert cause["message"] == "Too long: may not be more than 10240 bytes"
