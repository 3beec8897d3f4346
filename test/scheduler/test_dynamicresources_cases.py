"""kube-scheduler's dynamicresources plugin cases, ported as data and run through Caldera's path: the
cache, a session (the predicates plugin's ``dra`` parts: PreFilter/Filter/Reserve), the cache's
assumption and the binder (PreBind's claim writes, then the binding) against a fake API server.

Source: ``TestPlugin`` in ``pkg/scheduler/framework/plugins/dynamicresources/dynamicresources_test.go``
(kubernetes/kubernetes, resource.k8s.io/v1). Each :class:`Case` names its Go case; the objects are the
Go file's (``podWithClaimName``, ``pendingClaim``, ``allocatedClaim``, ``workerNodeSlice``...). Where Go
checks a status code and message, the port checks that the pod is or is not placed and that Caldera's
reason (why-pending) says the same; where Go checks the claim after PreBind, the port checks the claim
the fake API server holds after the binder ran (finalizer, allocation, reservedFor).

Not ported, each for a feature Caldera does not implement (README, Differences from Volcano): the
``extended-resource-*``, ``implicit-extended-resource-*`` and ``non-DRA-extended-resource-*`` cases (DRA
for extended resources), the filter timeout (``canceled``, ``timeout``, ``timeout_disabled``,
``timeout_zero``), the prioritized-list scores (``*-prioritized-list-scoring``), and the cases of feature
gates Caldera has no switch for (``request-admin-access-without-DRAAdminAccess-featuregate``,
``claim-with-prioritized-list-feature-disabled``, ``tainted-device-disabled``: admin access, prioritized
lists and device taints are always on). PostFilter's deallocation is not ported (Caldera never
deallocates a claim): ``wrong-topology``, ``bound-claim-with-failed-binding``,
``bound-claim-with-timed-out-binding``, ``bound-claim-with-mixed-binding-conditions`` and
``multi-claims-binding-conditions-one-fail`` port their Filter half (the pod is not placed, with a
reason). ``prebind-fail-with-binding-timeout`` lets the claim time out 0.5 s into the wait instead of
Go's 10 s.

``DRA-disabled`` differs on purpose (``differs``; README): with DRA off kube-scheduler binds a pod with
claims unallocated, Caldera refuses it with a reason; the case checks Caldera's refusal.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import msgspec
import pytest

from caldera.cache.store import ClusterCache
from caldera.framework.dra.objects import DeviceClass, ResourceClaim, ResourceSlice
from caldera.framework.dra.view import BINDING_TIMEOUT
from caldera.framework.objects import Pod, convert
from caldera.hack.scenario import load, node, pod_dict, podgroup, resource_slice, run_session
from caldera.scheduler.binder import Binder

WORKER, WORKER2, WORKER3 = "worker", "worker-2", "worker-3"
DRIVER, DRIVER2 = "some-driver", "some-driver-2"
POD, POD_UID = "my-pod", "1234"
RESOURCE, RESOURCE2 = "my-resource", "my-resource-2"
CLAIM, CLAIM2 = f"{POD}-{RESOURCE}", f"{POD}-{RESOURCE2}"
CLASS = "my-resource-class"
FINALIZER = "resource.kubernetes.io/delete-protection"
BROKEN = f'device.attributes["{DRIVER}"].healthy'  # brokenSelector: not set on the worker's device
#: ``bindingConditions`` / ``bindingFailureConditions`` of the fabric devices
CONDITIONS = (["condition"], ["failed"])
#: ``prebind-fail-with-binding-timeout`` lets the claim time out 10 s into PreBind; the port, 0.5 s
TIMEOUT_AFTER = 0.5


# --- the Go file's objects --------------------------------------------------------------------------
def device_class(selectors: list[str] = ()) -> DeviceClass:  # type: ignore[assignment]
    """``deviceClass``: no selectors (every device), or these CEL expressions."""
    spec = {"selectors": [{"cel": {"expression": e}} for e in selectors]}
    return convert(DeviceClass, {"metadata": {"name": CLASS}, "spec": spec})


def claim(
    name: str = CLAIM,
    requests: list[dict[str, Any]] | None = None,
    allocation: dict[str, Any] | None = None,
    reserved: bool = False,
    owned: bool = True,
    devices: list[dict[str, Any]] | None = None,
    **meta: Any,
) -> ResourceClaim:
    """``pendingClaim`` (owned by the pod, one request ``req-1`` of the class), or with ``allocation``
    ``allocatedClaim`` (with the finalizer), and ``reserved`` ``inUseClaim``; ``devices`` is
    ``status.devices`` (``AllocatedDeviceStatuses``)."""
    metadata: dict[str, Any] = {"name": name, "namespace": "default", "uid": f"uid-{name}", **meta}
    if allocation is not None:
        metadata.setdefault("finalizers", [FINALIZER])  # as the Go builder's Allocation() sets it
    if owned:
        metadata["ownerReferences"] = [
            {"apiVersion": "v1", "kind": "Pod", "name": POD, "uid": POD_UID, "controller": True}
        ]
    status: dict[str, Any] = {}
    if allocation is not None:
        status["allocation"] = allocation
    if reserved:
        status["reservedFor"] = [{"resource": "pods", "name": POD, "uid": POD_UID}]
    if devices is not None:
        status["devices"] = devices
    spec = {"devices": {"requests": requests or [request()]}}
    return convert(ResourceClaim, {"metadata": metadata, "spec": spec, "status": status})


def request(name: str = "req-1", device_class: str = CLASS, **exactly: Any) -> dict[str, Any]:
    return {
        "name": name,
        "exactly": {"deviceClassName": device_class, "allocationMode": "ExactCount", "count": 1, **exactly},
    }


def prioritized(device_class: str = CLASS) -> dict[str, Any]:
    """``claimWithPrioritzedList``: one request of one subrequest ``subreq-1``."""
    sub = {"name": "subreq-1", "deviceClassName": device_class, "allocationMode": "ExactCount", "count": 1}
    return {"name": "req-1", "firstAvailable": [sub]}


def allocation(
    device: str = "instance-1",
    request_name: str = "req-1",
    admin: bool = False,
    driver: str = DRIVER,
    binding: tuple[list[str], list[str]] | None = None,
    timestamp: str | None = None,
    **kw: Any,
) -> dict[str, Any]:
    """``allocationResult``: the worker's instance-1, pinned to the worker by name; with ``binding``
    ``allocationResultWithBindingConditions`` (and ``allocationTimestamp`` when given)."""
    result: dict[str, Any] = {"request": request_name, "driver": driver, "pool": WORKER, "device": device}
    if admin:
        result["adminAccess"] = True
    if binding is not None:
        result["bindingConditions"], result["bindingFailureConditions"] = binding
    selector = kw.get(
        "node_selector",
        {
            "nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [WORKER]}]}
            ]
        },
    )
    out: dict[str, Any] = {"devices": {"results": [result]}, "nodeSelector": selector}
    if timestamp is not None:
        out["allocationTimestamp"] = timestamp
    return out


def device_status(driver: str, device: str, **conditions: bool) -> dict[str, Any]:
    """One ``AllocatedDeviceStatus`` of the worker's pool with these conditions (type -> status)."""
    return {
        "driver": driver,
        "pool": WORKER,
        "device": device,
        "conditions": [{"type": t, "status": "True" if v else "False"} for t, v in conditions.items()],
    }


def bound(
    name: str = CLAIM,
    second: bool = False,
    ready: bool = True,
    timestamp: str | None = None,
    **conditions: bool,
) -> ResourceClaim:
    """``boundClaim`` (``ready``: its device reports ``condition`` True, ``failed`` False) or
    ``failedBindingClaim`` (not ready: ``condition`` False, ``failed`` True); ``second``: the
    ``...2`` variant (driver-2's instance-2 for request req-2). ``conditions`` replace the reported ones."""
    driver, device, request_name = (
        (DRIVER2, "instance-2", "req-2") if second else (DRIVER, "instance-1", "req-1")
    )
    reported = conditions or {"condition": ready, "failed": not ready}
    return claim(
        name,
        allocation=allocation(device, request_name, driver=driver, binding=CONDITIONS, timestamp=timestamp),
        devices=[device_status(driver, device, **reported)],
    )


def ago(seconds: float) -> str:
    """An RFC 3339 time ``seconds`` before now (negative: after)."""
    return datetime.fromtimestamp(time.time() - seconds, UTC).isoformat()


def topology(label: str, value: str) -> dict[str, Any]:
    """``allocatedClaimWith{Wrong,Good}Topology``'s allocation: only a node selector."""
    return {
        "nodeSelector": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": label, "operator": "In", "values": [value]}]}]
        }
    }


def slice_(node_name: str = WORKER, healthy: bool | None = None) -> ResourceSlice:
    """``workerNodeSlice`` (instance-1, no attributes), or with the ``healthy`` attribute
    (``workerNode2Slice``)."""
    attrs = {} if healthy is None else {"healthy": {"bool": healthy}}
    return resource_slice(node_name, DRIVER, {"instance-1": attrs})


def tainted(sl: ResourceSlice) -> ResourceSlice:
    """``taintDevices``: every device gets the NoSchedule taint ``taint-key=taint-value``."""
    raw = msgspec.to_builtins(sl)
    for d in raw["spec"]["devices"]:
        d["taints"] = [{"key": "taint-key", "value": "taint-value", "effect": "NoSchedule"}]
    return convert(ResourceSlice, raw)


def fabric(driver: str = DRIVER, device: str = "instance-1") -> ResourceSlice:
    """``fabricSlice``/``fabricSlice2``: a device for the worker (by node selector) that binds to the
    node and has the binding conditions."""
    raw = msgspec.to_builtins(resource_slice(WORKER, driver, [device]))
    raw["spec"].pop("nodeName", None)
    raw["spec"]["nodeSelector"] = allocation()["nodeSelector"]
    raw["spec"]["devices"][0].update(
        bindsToNode=True, bindingConditions=CONDITIONS[0], bindingFailureConditions=CONDITIONS[1]
    )
    return convert(ResourceSlice, raw)


def broken(c: ResourceClaim) -> ResourceClaim:
    """``breakCELInClaim``."""
    raw = msgspec.to_builtins(c)
    for r in raw["spec"]["devices"]["requests"]:
        r["exactly"]["selectors"] = [{"cel": {"expression": BROKEN}}]
    return convert(ResourceClaim, raw)


def admin(c: ResourceClaim) -> ResourceClaim:
    """``adminAccess``: the requests (and the allocation's results) with admin access."""
    raw = msgspec.to_builtins(c)
    for r in raw["spec"]["devices"]["requests"]:
        r["exactly"]["adminAccess"] = True
    for r in (raw.get("status", {}).get("allocation") or {}).get("devices", {}).get("results", []):
        r["adminAccess"] = True
    return convert(ResourceClaim, raw)


# --- a case -----------------------------------------------------------------------------------------
@dataclass
class Case:
    go: str
    claims: list[ResourceClaim] = field(default_factory=list)
    classes: list[DeviceClass] = field(default_factory=list)
    slices: list[ResourceSlice] = field(default_factory=list)
    #: "name": podWithClaimName; "template": podWithClaimTemplateInStatus; "template-unnamed":
    #: podWithClaimTemplate (status not set); "two": podWithTwoClaimNames; "none": a pod without claims
    pod: str = "name"
    nodes: list[str] = field(default_factory=lambda: [WORKER])
    #: the node the pod lands on; None: not placed, with ``reason`` in why-pending
    placed: str | None = WORKER
    reason: str = ""
    #: after the binder: claim name -> its allocation's results as (request, device, admin access)
    allocated: dict[str, list[tuple[str, str, bool]]] = field(default_factory=dict)
    #: after the binder, the claim is reserved for the pod (False: reservedFor empty)
    reserved: bool = True
    #: a change on the API server between Reserve and PreBind (``prepare.prebind``)
    before_prebind: Callable[[dict[str, Any]], None] | None = None
    #: the binding's answer (404: the pod is gone, not retried)
    bind_code: int = 201
    conf: str | None = None
    #: the pod's gang has a second pod that fits nowhere: the statement is discarded after Reserve
    discarded: bool = False
    #: the binder gives the placement up (PreBind fails) with this in its reason: nothing is bound and
    #: the claim's reservation is taken back (as Unreserve does after a failed PreBind)
    prebind_fails: str = ""
    #: claims made when the case runs (``patchTestCase``: they carry time stamps), after ``claims``
    late_claims: Callable[[], list[ResourceClaim]] | None = None
    #: why Caldera deliberately differs from Go here (README lists it); the case then expects what
    #: Caldera does instead
    differs: str = ""


CASES = [
    Case("empty", pod="none"),
    Case("empty-with-extended-resources-enabled", pod="none"),
    Case(
        "claim-reference",
        claims=[claim(allocation=allocation()), claim("not-my-claim", owned=False)],
        allocated={CLAIM: [("req-1", "instance-1", False)]},
    ),
    Case(
        "claim-template",
        pod="template",
        claims=[claim(allocation=allocation()), claim("not-my-claim", owned=False)],
        allocated={CLAIM: [("req-1", "instance-1", False)]},
    ),
    Case(
        "missing-claim",
        pod="template-unnamed",
        claims=[claim(allocation=allocation())],
        placed=None,
        reason="to be created",
    ),
    Case(
        "deleted-claim",
        pod="template",
        claims=[claim(allocation=allocation(), deletionTimestamp="2026-01-01T00:00:00Z")],
        placed=None,
        reason="is being deleted",
    ),
    Case(
        "wrong-claim",
        pod="template",
        claims=[claim(allocation=allocation(), owned=False)],
        placed=None,
        reason="was not created for pod",
    ),
    Case(
        "no-resources",
        claims=[claim()],
        classes=[device_class()],
        placed=None,
        reason="no free device of class my-resource-class",
    ),
    Case(
        "with-resources",
        claims=[claim()],
        classes=[device_class()],
        slices=[slice_()],
        allocated={CLAIM: [("req-1", "instance-1", False)]},
    ),
    Case(
        "with-resources-has-finalizer",
        claims=[claim(finalizers=[FINALIZER])],
        classes=[device_class()],
        slices=[slice_()],
        allocated={CLAIM: [("req-1", "instance-1", False)]},
    ),
    Case(
        "with-resources-finalizer-gets-removed",
        claims=[claim(finalizers=[FINALIZER])],
        classes=[device_class()],
        slices=[slice_()],
        allocated={CLAIM: [("req-1", "instance-1", False)]},
        before_prebind=lambda c: c["metadata"].update(finalizers=[]),
    ),
    Case(
        "with-resources-finalizer-gets-added",
        claims=[claim()],
        classes=[device_class()],
        slices=[slice_()],
        allocated={CLAIM: [("req-1", "instance-1", False)]},
        before_prebind=lambda c: c["metadata"].update(finalizers=[FINALIZER]),
    ),
    # Unreserve before PreBind: the pod's gang cannot start, its statement is discarded, nothing written
    Case(
        "skip-bind",
        claims=[claim()],
        classes=[device_class()],
        slices=[slice_()],
        discarded=True,
        placed=None,
    ),
    Case(
        "exhausted-resources",
        claims=[claim(), claim("not-my-claim", owned=False, allocation=allocation())],
        classes=[device_class()],
        slices=[slice_()],
        placed=None,
        reason="no free device of class my-resource-class",
    ),
    Case(
        "request-admin-access-with-DRAAdminAccess-featuregate",
        claims=[admin(claim()), claim("not-my-claim", owned=False, allocation=allocation())],
        classes=[device_class()],
        slices=[slice_()],
        allocated={CLAIM: [("req-1", "instance-1", True)]},
    ),
    Case(
        "structured-ignore-allocated-admin-access",
        claims=[claim(), admin(claim("not-my-claim", owned=False, allocation=allocation()))],
        classes=[device_class()],
        slices=[slice_()],
        allocated={CLAIM: [("req-1", "instance-1", False)]},
    ),
    Case(
        "claim-parameters-CEL-runtime-error",
        claims=[broken(claim())],
        classes=[device_class()],
        slices=[slice_()],
        placed=None,
        reason="healthy",
    ),
    Case(
        "class-parameters-CEL-runtime-error",
        claims=[claim()],
        classes=[device_class([BROKEN])],
        slices=[slice_()],
        placed=None,
        reason="healthy",
    ),
    Case(
        "CEL-runtime-error-for-one-of-two-nodes",
        nodes=[WORKER, WORKER2],
        claims=[broken(claim())],
        classes=[device_class()],
        slices=[slice_(), slice_(WORKER2, healthy=True)],
        placed=None,
        reason="healthy",
    ),
    Case(
        "CEL-runtime-error-for-one-of-three-nodes",
        nodes=[WORKER, WORKER2, WORKER3],
        claims=[broken(claim())],
        classes=[device_class()],
        slices=[slice_(), slice_(WORKER2, healthy=True), slice_(WORKER3, healthy=True)],
        placed=None,
        reason="healthy",
    ),
    Case("missing-class", claims=[claim()], placed=None, reason=f"{CLASS}"),
    Case(
        "wrong-topology",
        claims=[claim(allocation=topology("no-such-label", "no-such-value"))],
        placed=None,
        reason="could not reach the devices allocated",
    ),
    Case(
        "good-topology",
        claims=[claim(allocation=topology("kubernetes.io/hostname", WORKER))],
        allocated={CLAIM: []},
    ),
    Case(
        "bind-failure",
        claims=[claim(allocation=topology("kubernetes.io/hostname", WORKER))],
        allocated={CLAIM: []},
        bind_code=404,
        reserved=False,
    ),
    Case(
        "reserved-okay",
        claims=[claim(allocation=allocation(), reserved=True)],
        allocated={CLAIM: [("req-1", "instance-1", False)]},
    ),
    Case(
        "DRA-disabled",
        claims=[claim(allocation=allocation(), reserved=True)],
        conf="predicate.DynamicResourceAllocationEnable: false",
        placed=None,
        reason="dynamic resource allocation is disabled",
        differs="with DRA off kube-scheduler skips the plugin and binds the pod; Caldera never binds a "
        "pod with claims unallocated (issue 24 item 7: it is refused with a reason)",
    ),
    Case(
        "claim-with-request-with-unknown-device-class",
        claims=[claim(requests=[request(device_class="does-not-exist")])],
        placed=None,
        reason="does-not-exist",
    ),
    Case(
        "claim-with-prioritized-list-unknown-device-class",
        claims=[claim(requests=[prioritized("does-not-exist")])],
        placed=None,
        reason="does-not-exist",
    ),
    Case(
        "claim-with-prioritized-list",
        claims=[claim(requests=[prioritized()])],
        classes=[device_class()],
        slices=[slice_()],
        allocated={CLAIM: [("req-1/subreq-1", "instance-1", False)]},
    ),
    Case(
        "bound-claim-without-binding-conditions",
        pod="template",
        claims=[claim(allocation=allocation()), claim("not-my-claim", owned=False)],
        allocated={CLAIM: [("req-1", "instance-1", False)]},
    ),
    # --- device taints (the allocator has the rest: test/framework/dra/test_allocator_features.py)
    Case(
        "tainted-device-enabled",
        claims=[claim()],
        classes=[device_class()],
        slices=[tainted(slice_())],
        placed=None,
        reason="devices exist but not in a combination",
    ),
    # --- binding conditions: PreBind waits for them; Filter refuses a claim whose binding failed or
    # timed out (its PostFilter then deallocates the claim, which Caldera does not do: README)
    Case(
        "bound-claim-with-succeeded-binding-conditions",
        claims=[bound()],
        allocated={CLAIM: [("req-1", "instance-1", False)]},
    ),
    Case(
        "bound-claim-with-failed-binding",
        claims=[bound(ready=False)],
        slices=[slice_()],
        placed=None,
        reason=f"ResourceClaim default/{CLAIM} is not available: claim {CLAIM} binding failed",
    ),
    Case(
        "bound-claim-with-timed-out-binding",
        claims=[
            claim(
                allocation=allocation(binding=CONDITIONS, timestamp=ago(BINDING_TIMEOUT)),
                devices=[device_status(DRIVER, "instance-1")],
            )
        ],
        placed=None,
        reason=f"ResourceClaim default/{CLAIM} is not available: claim {CLAIM} binding timeout",
    ),
    Case(
        "prebind-fail-with-binding-timeout",
        late_claims=lambda: [
            claim(
                allocation=allocation(binding=CONDITIONS, timestamp=ago(BINDING_TIMEOUT - TIMEOUT_AFTER)),
                devices=[device_status(DRIVER, "instance-1")],
            )
        ],
        prebind_fails=f"claim {CLAIM} binding timeout",
    ),
    Case(
        "bound-claim-with-mixed-binding-conditions",
        claims=[bound(timestamp=ago(BINDING_TIMEOUT), condition1=True, condition2=False)],
        placed=None,
        reason=f"ResourceClaim default/{CLAIM} is not available: claim {CLAIM} binding timeout",
    ),
    Case(
        "multi-claims-binding-conditions-all-success",
        pod="two",
        claims=[bound(), bound(CLAIM2, second=True)],
        classes=[device_class()],
        slices=[fabric(), fabric(DRIVER2, "instance-2")],
        allocated={CLAIM: [("req-1", "instance-1", False)], CLAIM2: [("req-2", "instance-2", False)]},
    ),
    Case(
        "multi-claims-binding-conditions-one-fail",
        pod="two",
        claims=[bound(), bound(CLAIM2, second=True, ready=False)],
        classes=[device_class()],
        slices=[fabric(), fabric(DRIVER2, "instance-2")],
        placed=None,
        reason=f"ResourceClaim default/{CLAIM2} is not available: claim {CLAIM2} binding failed",
    ),
]


def the_pod(kind: str) -> Pod:
    """``kind``: see :attr:`Case.pod`; "two" is ``podWithTwoClaimNames``."""
    entries: list[dict[str, Any]] = [{"name": RESOURCE}]
    if kind in ("name", "two"):
        entries[0]["resourceClaimName"] = CLAIM
    elif kind.startswith("template"):
        entries[0]["resourceClaimTemplateName"] = CLAIM
    if kind == "two":
        entries.append({"name": RESOURCE2, "resourceClaimName": CLAIM2})
    raw = pod_dict(
        POD, uid=POD_UID, group=POD, spec_extra={"resourceClaims": entries} if kind != "none" else None
    )
    if kind == "template":
        raw["status"]["resourceClaimStatuses"] = [{"name": RESOURCE, "resourceClaimName": CLAIM}]
    return convert(Pod, raw)


CONF_OFF = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: predicates
    arguments:
      {arg}
  - name: nodeorder
"""


async def binder_run(client: Any, cache: ClusterCache, placements: list[Any]) -> Binder:
    """The binder's PreBind and binding for the placements, waits for binding conditions included
    (polled every 50 ms rather than kube-scheduler's 5 s)."""
    binder = Binder(client, cache, binding_poll=0.05)
    binder.start()
    binder.bind(placements)
    assert await binder.drain(10)
    return binder


@pytest.mark.parametrize("case", [pytest.param(c, id=c.go) for c in CASES])
async def test_plugin(case: Case, server: Any) -> None:
    """``TestPlugin/<case.go>``."""
    srv, client = server
    made = [*case.claims, *(case.late_claims() if case.late_claims is not None else [])]
    for c in made:
        srv.add(c)
    claims = [convert(ResourceClaim, srv.claims[c.metadata.name]) for c in made]
    the = the_pod(case.pod)
    nodes = [node(n, labels={"kubernetes.io/hostname": n}) for n in case.nodes]
    pods = [the]
    if case.discarded:
        pods.append(convert(Pod, pod_dict("too-big", group=POD, cpu="1000")))
    cache = load(
        ClusterCache(),
        nodes=nodes,
        pods=pods,
        podgroups=[podgroup(POD, min_member=len(pods))],
        dra=[*case.classes, *case.slices, *claims],
    )
    conf = CONF_OFF.format(arg=case.conf) if case.conf else None
    ssn, result = run_session(cache.snapshot(), conf)
    if case.placed is None:
        assert result.placements == []
        [task] = [t for j in ssn.jobs.values() for t in j.tasks.values() if t.name == POD]
        reasons = " | ".join(ssn.explain_predicates(task))
        assert case.reason in reasons, reasons
        assert srv.log == []  # nothing written
        return
    [placement] = result.placements
    assert placement.node == case.placed
    cache.apply(result)
    if case.before_prebind is not None:
        raw = srv.claims[CLAIM]
        case.before_prebind(raw)
        raw["metadata"]["resourceVersion"] = str(int(raw["metadata"]["resourceVersion"]) + 1)
    # PreBind writes no finalizer to a claim that has it (and nobody took it away meanwhile)
    kept = {
        c.metadata.name
        for c in case.claims
        if c.metadata.name in case.allocated
        and FINALIZER in c.metadata.finalizers
        and case.before_prebind is None
    }
    srv.bind_codes[POD] = case.bind_code
    binder = await binder_run(client, cache, result.placements)
    if case.prebind_fails:
        assert ("bind", POD) not in srv.log
        assert case.prebind_fails in binder.failures[POD_UID].reason
        assert (srv.claims[CLAIM].get("status") or {}).get("reservedFor", []) == []
        return
    assert not kept & {name for kind, name in srv.log if kind == "finalizer"}
    assert ("bind", POD) in srv.log
    for name, results in case.allocated.items():
        stored = srv.claims[name]
        status = stored.get("status") or {}
        got = [
            (r["request"], r["device"], bool(r.get("adminAccess")))
            for r in (status.get("allocation") or {}).get("devices", {}).get("results", [])
        ]
        assert got == results
        want = [{"resource": "pods", "name": POD, "uid": POD_UID}] if case.reserved else []
        assert (status.get("reservedFor") or []) == want
        if results:
            assert stored["metadata"].get("finalizers") == [FINALIZER]
