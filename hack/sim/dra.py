"""Dynamic Resource Allocation (`resource.k8s.io/v1`) in the simulated cluster: defaults, validation, and the
resourceclaim controller's work, as kube-apiserver and kube-controller-manager 1.36 do them.

Defaults (`pkg/apis/resource/v1/defaults.go`, `SetDefaults_ExactDeviceRequest`, `SetDefaults_DeviceSubRequest`):
an `exactly` request or a `firstAvailable` sub-request without `allocationMode` gets `ExactCount`, and an
`ExactCount` one without `count` gets 1. They are filled before validation, on every write, as decoding does.

Validation (`pkg/apis/resource/validation/validation.go`; the text of each message is the source's):
- ResourceClaim (`validateDeviceRequest`, `validateExactDeviceRequest`, `validateDeviceSubRequest`,
  `validateDeviceAllocationMode`, `validateDeviceConstraint`, `validateRequestNameRef`): a request has exactly
  one of `exactly` / `firstAvailable`; class names, request names, counts, constraint and config request
  references; CEL selectors compiled (see `cel_problem`). `spec` is immutable (`ValidateResourceClaimUpdate`).
  A class that does not exist is accepted: nothing checks it at create.
- ResourceClaim status (`validateResourceClaimStatusUpdate`, `validateAllocationResult`): `reservedFor`
  entries need resource, name and uid, unique by uid; `reservedFor` without `allocation` is forbidden (so an
  allocation cannot be removed while the claim is reserved); no new `reservedFor` entry once the claim is being
  deleted; an allocation once set is immutable; each result names a request of the claim (or
  `request/subrequest` of a `firstAvailable` one), a driver, a pool and a device.
- ResourceClaimTemplate (`ValidateResourceClaimTemplate`): its `spec.spec` as a claim's spec; `spec` immutable.
- DeviceClass (`validateDeviceClassSpec`): every selector is a compiling CEL expression.
- ResourceSlice (`validateResourceSliceSpec`, `validateResourcePool`): driver and `pool.name` required,
  `pool.resourceSliceCount` > 0, `pool.generation` >= 0, exactly one of `nodeName`, `nodeSelector` (with
  exactly one term), `allNodes`, `perDeviceNodeSelection`; device names required and unique; `pool.name`,
  `driver` and `nodeName` immutable.
- Pods (`pkg/apis/core/validation/validation.go`, `validatePodResourceClaim`, `validateResourceClaimNames`):
  each `spec.resourceClaims[i]` has a unique name and at most (and at least) one of `resourceClaimName` /
  `resourceClaimTemplateName`; a container's `resources.claims[].name` names one of them. Nothing checks that
  the claim exists, at create or at binding.

The fields new in 1.34-1.36 (partitionable devices, device taints and tolerations, binding conditions, consumable
capacity, shares and `status.devices`) are checked by `dra_fields.py`, called from here.

Field errors are rendered as `field.Error.ErrorBody` does (`Required value`, `Invalid value: "x": ...`,
`Forbidden: ...`); where the real server prints a Go struct as the bad value (`%#v`), the simulator prints it
as JSON.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

import orjson

from . import dra_fields
from .dra_fields import Cause
from .dra_fields import as_dict as _dict
from .dra_fields import as_list as _list
from .dra_fields import dns_subdomain as _dns_subdomain
from .dra_fields import duplicate as _duplicate
from .dra_fields import forbidden as _forbidden
from .dra_fields import invalid_value as _invalid
from .dra_fields import not_supported as _not_supported
from .dra_fields import required as _required
from .dra_fields import show as _show
from .dra_fields import unique_label as _unique_label
from .errors import invalid
from .loop import BackgroundLoop
from .resources import BY_ID, CORE_EVENTS, PODS, Resource, resource

if TYPE_CHECKING:
    from .store import Store, WatchEvent

log = logging.getLogger("caldera.sim.dra")

GROUP = "resource.k8s.io"
DEVICE_CLASSES = resource("deviceclasses", GROUP)
RESOURCE_SLICES = resource("resourceslices", GROUP)
RESOURCE_CLAIMS = resource("resourceclaims", GROUP)
RESOURCE_CLAIM_TEMPLATES = resource("resourceclaimtemplates", GROUP)
#: Kubernetes' own PodGroups (served only with the native gang API on)
NATIVE_PODGROUPS = BY_ID["podgroups.scheduling.k8s.io"]

#: `AllocationConfigSourceClaim` / `AllocationConfigSourceClass`: where a configuration in an allocation came from
FROM_CLAIM = "FromClaim"
FROM_CLASS = "FromClass"
#: The finalizer kube-scheduler puts on a claim it allocates (`resourceapi.Finalizer`); the resourceclaim
#: controller clears the allocation of an unreserved claim only when it is there.
FINALIZER = "resource.kubernetes.io/delete-protection"
#: The annotation a claim made from a template carries: the pod's `spec.resourceClaims[].name`
#: (`podResourceClaimAnnotation` in pkg/controller/resourceclaim/controller.go).
POD_CLAIM_ANNOTATION = "resource.kubernetes.io/pod-claim-name"
#: `resource.CELSelectorExpressionMaxLength`: a longer selector is not compiled.
CEL_MAX_LENGTH = 10 * 1024
#: `resource.ResourceClaimReservedForMaxSize`: how many consumers may reserve one claim.
RESERVED_FOR_MAX = 256

_REQUEST_REF = (
    "must be the name of a request in the claim or the name of a request and a subrequest separated by '/'"
)
_ALLOCATION_MODES = ("All", "ExactCount")


# ---- CEL selectors ------------------------------------------------------------------------------------------

# Result types of the DRA CEL environment that the check knows for certain (`k8s.io/dynamic-resource-allocation
# /cel/compile.go`: `device.driver` is a string, attribute values are of the unknown type, capacities are
# quantities). Anything it cannot type is the unknown type, which the real compiler also accepts.
_DEVICE_FIELDS = {
    "driver": "string",
    "attributes": "map",
    "capacity": "map",
    "allowMultipleAllocations": "bool",
}
_BOOL_METHODS = frozenset(
    {
        "startsWith",
        "endsWith",
        "contains",
        "matches",
        "isGreaterThan",
        "isLessThan",
        "all",
        "exists",
        "exists_one",
    }
)
_INT_METHODS = frozenset({"size", "compareTo", "sign", "major", "minor", "patch", "asInteger"})
_STRING_METHODS = frozenset({"lowerAscii", "upperAscii", "trim", "replace", "substring", "join"})
_CONVERSIONS = {
    "size": "int",
    "int": "int",
    "uint": "uint",
    "double": "double",
    "string": "string",
    "bytes": "bytes",
    "bool": "bool",
    "has": "bool",
    "matches": "bool",
}
_LITERALS = {
    "INT_LIT": "int",
    "UINT_LIT": "uint",
    "FLOAT_LIT": "double",
    "STRING_LIT": "string",
    "MLSTRING_LIT": "string",
    "BYTES_LIT": "bytes",
    "BOOL_LIT": "bool",
    "NULL_LIT": "null_type",
}
#: Grammar rules that only wrap their one child, and operator rules when they have no operator.
_PASS_THROUGH = frozenset({"member", "primary", "paren_expr"})
_OPERATORS = frozenset(
    {"expr", "conditionalor", "conditionaland", "relation", "addition", "multiplication", "unary"}
)
#: Types a selector may not evaluate to, named as cel-go names them.
_REPORTED = frozenset({"int", "uint", "double", "string", "bytes", "null_type"})


@functools.cache
def _cel_environment() -> Any:
    import celpy  # cel-python: parsing CEL needs its grammar; imported on first use (about 0.2 s)

    return celpy.Environment()


def _cel_type(node: Any) -> str | None:
    """The type of a parsed CEL expression (cel-python's tree of its `cel.lark` grammar) where it is certain;
    None for the unknown type."""
    data = getattr(node, "data", None)
    children = getattr(node, "children", ())
    if data is None:
        return None
    if data in _PASS_THROUGH or (len(children) == 1 and data in _OPERATORS):
        return _cel_type(children[0]) if children else None
    if data == "expr":
        a, b = _cel_type(children[1]), _cel_type(children[2])
        return a if a == b else None
    if data in ("conditionalor", "conditionaland", "relation"):
        return "bool"
    if data in ("addition", "multiplication"):
        left, right = _cel_type(children[0].children[0]), _cel_type(children[1])
        allowed = (
            ("int", "uint", "double")
            if data == "multiplication"
            else ("int", "uint", "double", "string", "bytes")
        )
        return left if left == right and left in allowed else None
    if data == "unary":
        if getattr(children[0], "data", None) == "unary_not":
            return "bool"
        inner = _cel_type(children[1])
        return inner if inner in ("int", "double") else None
    if data == "literal":
        token = children[0]
        return _LITERALS.get(getattr(token, "type", ""))
    if data == "ident":
        return "device" if str(children[0]) == "device" else None
    if data == "member_dot":
        if _cel_type(children[0]) == "device":
            return _DEVICE_FIELDS.get(str(children[1]))
        return None
    if data == "member_dot_arg":
        method = str(children[1])
        if method in _BOOL_METHODS:
            return "bool"
        if method in _INT_METHODS:
            return "int"
        if method in _STRING_METHODS:
            return "string"
        return None
    if data == "ident_arg":
        return _CONVERSIONS.get(str(children[0]))
    return None


def cel_problem(expression: str) -> str | None:
    """Why a DRA CEL selector does not compile, worded as `dracel.CompileCELExpression` words it; None if it does.

    The syntax is checked by cel-python (`celpy`), the result type by `_cel_type` over its parse tree: an
    expression whose type is certainly not bool (a literal, `device.driver`, arithmetic or conversions of those)
    is refused with `must evaluate to bool or the unknown type, not T`. cel-python has no type checker, so an
    ill-typed sub-expression (`device.driver > 1`) passes here where cel-go refuses it. Positions come from
    cel-python's parser (the offending token; at the end of the input, the last token, where cel-go names
    `<EOF>` one column further), and the text after `Syntax error:` is not ANTLR's.
    """
    import celpy

    env = _cel_environment()
    try:
        tree = env.compile(expression)
        result = _cel_type(tree)
    except RecursionError:
        # cel-go's parser stops at a nesting depth of its own (250); cel-python's recursion stops first.
        return "compilation failed: ERROR: <input>:1:1: expression recursion limit exceeded"
    except celpy.CELParseError as exc:
        line = exc.line or 1
        column = exc.column or 1
        source = expression.splitlines()[line - 1] if expression.splitlines() else expression
        return (
            f"compilation failed: ERROR: <input>:{line}:{column}: Syntax error: unexpected input\n"
            f" | {source}\n | {'.' * (column - 1)}^"
        )
    if result in _REPORTED:
        return f"must evaluate to bool or the unknown type, not {result}"
    return None


def _selectors(selectors: Any, path: str) -> list[Cause]:
    causes: list[Cause] = []
    for i, selector in enumerate(_list(selectors)):
        cel = _dict(selector).get("cel")
        if not isinstance(cel, dict):
            causes.append(_required(f"{path}[{i}].cel"))
            continue
        expression = cel.get("expression")
        where = f"{path}[{i}].cel.expression"
        if not isinstance(expression, str):
            causes.append(_required(where))
            continue
        if len(expression) > CEL_MAX_LENGTH:  # too long to compile at all
            causes.append(
                (where, "FieldValueTooLong", f"Too long: may not be more than {CEL_MAX_LENGTH} bytes")
            )
            continue
        problem = cel_problem(expression)
        if problem is not None:
            causes.append(_invalid(where, expression, problem))
    return causes


# ---- defaults -----------------------------------------------------------------------------------------------


def _default_request(request: Any) -> Any:
    if not isinstance(request, dict):
        return request
    out = dict(request)
    if out.get("allocationMode") in (None, ""):
        out["allocationMode"] = "ExactCount"
    if out["allocationMode"] == "ExactCount" and not out.get("count"):
        out["count"] = 1
    if "tolerations" in out:
        out["tolerations"] = dra_fields.default_tolerations(out["tolerations"])
    return out


def default_claim_spec(spec: Any) -> Any:
    """The claim spec as decoding with the v1 defaults makes it (a new dict; the input is not changed)."""
    if not isinstance(spec, dict) or not isinstance(spec.get("devices"), dict):
        return spec
    devices = dict(spec["devices"])
    requests = []
    for request in _list(devices.get("requests")):
        if isinstance(request, dict):
            request = dict(request)
            if isinstance(request.get("exactly"), dict):
                request["exactly"] = _default_request(request["exactly"])
            if isinstance(request.get("firstAvailable"), list):
                request["firstAvailable"] = [_default_request(r) for r in request["firstAvailable"]]
        requests.append(request)
    if "requests" in devices:
        devices["requests"] = requests
    return {**spec, "devices": devices}


# ---- validation of the four kinds ---------------------------------------------------------------------------


def _allocation_mode(request: dict[str, Any], path: str) -> list[Cause]:
    mode, count = request.get("allocationMode"), request.get("count") or 0
    if mode == "All":
        return (
            [_invalid(f"{path}.count", count, "must not be specified when allocationMode is 'All'")]
            if count
            else []
        )
    if mode == "ExactCount":
        return (
            []
            if isinstance(count, int) and count > 0
            else [_invalid(f"{path}.count", count, "must be greater than zero")]
        )
    return [_not_supported(f"{path}.allocationMode", mode, _ALLOCATION_MODES)]


def _device_class_name(name: Any, path: str) -> list[Cause]:
    return [_required(path)] if not name else _dns_subdomain(name, path)


def _request_names(devices: dict[str, Any]) -> dict[str, set[str] | None]:
    """`gatherRequestNames`: request name -> its sub-request names (None for an `exactly` request)."""
    names: dict[str, set[str] | None] = {}
    for request in _list(devices.get("requests")):
        request = _dict(request)
        subs = _list(request.get("firstAvailable"))
        names[str(request.get("name", ""))] = {str(_dict(s).get("name", "")) for s in subs} if subs else None
    return names


def _names_request(names: dict[str, set[str] | None], ref: str) -> bool:
    parts = ref.split("/")
    if len(parts) > 2 or parts[0] not in names:
        return False
    subs = names[parts[0]]
    return len(parts) == 1 or (subs is not None and parts[1] in subs)


def _request_refs(refs: Any, path: str, names: dict[str, set[str] | None]) -> list[Cause]:
    causes: list[Cause] = []
    for i, ref in enumerate(_list(refs)):
        if not isinstance(ref, str) or not _names_request(names, ref):
            causes.append(_invalid(f"{path}[{i}]", ref, _REQUEST_REF))
    return causes


def _claim_spec(spec: Any, path: str) -> list[Cause]:
    """`validateResourceClaimSpec` / `validateDeviceClaim` on a defaulted spec."""
    devices = _dict(_dict(spec).get("devices"))
    base = f"{path}.devices"
    causes: list[Cause] = []
    seen: set[str] = set()
    for i, request in enumerate(_list(devices.get("requests"))):
        where = f"{base}.requests[{i}]"
        request = _dict(request)
        causes += _unique_label(request.get("name"), seen, f"{where}.name")
        exactly, first = request.get("exactly"), _list(request.get("firstAvailable"))
        if exactly is None and not first:
            causes.append(_required(where, "exactly one of `exactly` or `firstAvailable` is required"))
        elif exactly is not None and first:
            causes.append(
                _invalid(
                    where,
                    None,
                    "exactly one of `exactly` or `firstAvailable` is required, but multiple fields are set",
                )
            )
        elif first:
            sub_seen: set[str] = set()
            for j, sub in enumerate(first):
                sub_path = f"{where}.firstAvailable[{j}]"
                sub = _dict(sub)
                causes += _unique_label(sub.get("name"), sub_seen, f"{sub_path}.name")
                causes += _device_class_name(sub.get("deviceClassName"), f"{sub_path}.deviceClassName")
                causes += _selectors(sub.get("selectors"), f"{sub_path}.selectors")
                causes += _allocation_mode(sub, sub_path)
                causes += dra_fields.tolerations(sub.get("tolerations"), f"{sub_path}.tolerations")
        else:
            exact = _dict(exactly)
            causes += _device_class_name(exact.get("deviceClassName"), f"{where}.exactly.deviceClassName")
            causes += _selectors(exact.get("selectors"), f"{where}.exactly.selectors")
            causes += _allocation_mode(exact, f"{where}.exactly")
            causes += dra_fields.tolerations(exact.get("tolerations"), f"{where}.exactly.tolerations")
    names = _request_names(devices)
    for i, constraint in enumerate(_list(devices.get("constraints"))):
        constraint = _dict(constraint)
        where = f"{base}.constraints[{i}]"
        causes += _request_refs(constraint.get("requests"), f"{where}.requests", names)
        if constraint.get("matchAttribute") is not None:
            causes += dra_fields.fully_qualified_name(constraint["matchAttribute"], f"{where}.matchAttribute")
        elif constraint.get("distinctAttribute") is not None:
            causes += dra_fields.fully_qualified_name(
                constraint["distinctAttribute"], f"{where}.distinctAttribute"
            )
        else:  # the message of the `DRAConsumableCapacity` gate, on in 1.36
            causes.append(
                _required(
                    where,
                    'exactly one of "matchAttribute" or "distinctAttribute" is required, but multiple fields are set',
                )
            )
    for i, config in enumerate(_list(devices.get("config"))):
        config = _dict(config)
        where = f"{base}.config[{i}]"
        causes += _request_refs(config.get("requests"), f"{where}.requests", names)
        causes += dra_fields.device_configuration(config, where)
    return causes


def _allocation_configs(configs: Any, path: str, names: dict[str, set[str] | None]) -> list[Cause]:
    """`validateDeviceAllocationConfiguration` over `status.allocation.devices.config` (at most twice
    `DeviceConfigMaxSize`: the class's and the claim's): a source, requests of the claim named once each,
    and a configuration."""
    configs = _list(configs)
    most = 2 * dra_fields.DEVICE_CONFIG_MAX_SIZE
    if len(configs) > most:
        return [dra_fields.too_many(path, len(configs), most)]
    causes: list[Cause] = []
    for i, config in enumerate(configs):
        config = _dict(config)
        where = f"{path}[{i}]"
        source = config.get("source")
        if not source:
            causes.append(_required(f"{where}.source"))
        elif source not in (FROM_CLAIM, FROM_CLASS):
            causes.append(dra_fields.not_supported(f"{where}.source", source, (FROM_CLAIM, FROM_CLASS)))
        requests = _list(config.get("requests"))
        causes += _request_refs(requests, f"{where}.requests", names)
        seen: set[Any] = set()
        for j, ref in enumerate(requests):
            if dra_fields.key_of(ref) in seen:
                causes.append(_duplicate(f"{where}.requests[{j}]", ref))
            seen.add(dra_fields.key_of(ref))
        causes += dra_fields.device_configuration(config, where)
    return causes


def _slice_spec(spec: Any, old: dict[str, Any] | None) -> list[Cause]:
    """`validateResourceSliceSpec` and `validateResourcePool`."""
    spec = _dict(spec)
    causes: list[Cause] = []
    if not spec.get("driver"):
        causes.append(_required("spec.driver"))
    pool = _dict(spec.get("pool"))
    if not pool.get("name"):
        causes.append(_required("spec.pool.name"))
    else:
        for part in str(pool["name"]).split("/"):
            causes += _dns_subdomain(part, "spec.pool.name")
    count = pool.get("resourceSliceCount", 0)
    if not isinstance(count, int) or count <= 0:
        causes.append(_invalid("spec.pool.resourceSliceCount", count, "must be greater than zero"))
    generation = pool.get("generation", 0)
    if not isinstance(generation, int) or generation < 0:
        causes.append(_invalid("spec.pool.generation", generation, "must be greater than or equal to zero"))
    if old is not None:
        old_pool = _dict(old.get("pool"))
        for where, new_value, old_value in (
            ("spec.pool.name", pool.get("name"), old_pool.get("name")),
            ("spec.driver", spec.get("driver"), old.get("driver")),
            ("spec.nodeName", spec.get("nodeName"), old.get("nodeName")),
        ):
            if new_value != old_value:
                causes.append(_invalid(where, new_value, "field is immutable"))
    placed: list[str] = []
    if spec.get("nodeName"):
        placed.append("`nodeName`")
    if spec.get("nodeSelector") is not None:
        placed.append("`nodeSelector`")
        terms = _list(_dict(spec["nodeSelector"]).get("nodeSelectorTerms"))
        if len(terms) != 1:
            causes.append(
                _invalid(
                    "spec.nodeSelector.nodeSelectorTerms",
                    terms or None,
                    "must have exactly one node selector term",
                )
            )
    for flag in ("allNodes", "perDeviceNodeSelection"):
        if spec.get(flag) is True:
            placed.append(f"`{flag}`")
        elif spec.get(flag) is not None:
            causes.append(_invalid(f"spec.{flag}", spec[flag], "must be either unset or set to true"))
    which = "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required"
    if not placed:
        causes.append(_required("spec", which))
    elif len(placed) > 1:
        causes.append(
            _invalid("spec", "{" + ", ".join(placed) + "}", which + ", but multiple fields are set")
        )
    return causes + dra_fields.slice_devices(spec, old)


def _raise(res: Resource, name: str, causes: list[Cause]) -> None:
    if causes:
        raise invalid(res.kind, name, causes, res.group)


def admit(res: Resource, obj: dict[str, Any], old: dict[str, Any] | None = None) -> None:
    """Defaults and validation of a create (old None) or an update of a resource.k8s.io object, in place."""
    name = obj["metadata"]["name"]
    if res is RESOURCE_CLAIMS:
        obj["spec"] = default_claim_spec(obj.get("spec"))
        if old is None:
            obj.pop("status", None)  # the strategy's PrepareForCreate drops a status sent on create
            _raise(res, name, _claim_spec(obj.get("spec"), "spec"))
        elif obj.get("spec") != old.get("spec"):
            _raise(res, name, [_invalid("spec", obj.get("spec"), "field is immutable")])
    elif res is RESOURCE_CLAIM_TEMPLATES:
        spec = dict(_dict(obj.get("spec")))
        spec["spec"] = default_claim_spec(spec.get("spec"))
        obj["spec"] = spec
        if old is None:
            _raise(res, name, _claim_spec(spec.get("spec"), "spec.spec"))
        elif obj.get("spec") != old.get("spec"):
            _raise(res, name, [_invalid("spec", obj.get("spec"), "field is immutable")])
    elif res is DEVICE_CLASSES:
        spec = _dict(obj.get("spec"))
        old_spec = _dict(_dict(old).get("spec"))
        causes: list[Cause] = []
        if old is None or spec.get("selectors") != old_spec.get("selectors"):
            causes += _selectors(spec.get("selectors"), "spec.selectors")
        configs = _list(spec.get("config"))
        if len(configs) > dra_fields.DEVICE_CONFIG_MAX_SIZE:
            causes.append(dra_fields.too_many("spec.config", len(configs), dra_fields.DEVICE_CONFIG_MAX_SIZE))
        else:
            # (`validateDeviceClassSpec`: configurations exactly as before count as stored)
            stored = old is not None and spec.get("config") == old_spec.get("config")
            for i, config in enumerate(configs):
                causes += dra_fields.device_configuration(config, f"spec.config[{i}]", stored)
        _raise(res, name, causes)
    elif res is RESOURCE_SLICES:
        obj["spec"] = dra_fields.default_slice_spec(obj.get("spec"))
        _raise(res, name, _slice_spec(obj.get("spec"), None if old is None else _dict(old.get("spec"))))


def check_claim_status(name: str, old: dict[str, Any], new: dict[str, Any]) -> None:
    """`validateResourceClaimStatusUpdate` on a write of `resourceclaims/status`."""
    status, old_status = _dict(new.get("status")), _dict(old.get("status"))
    status = dra_fields.drop_deallocated_devices(_default_results(status), old_status)
    if status or new.get("status"):
        new["status"] = status
    causes: list[Cause] = []
    reserved = _list(status.get("reservedFor"))
    uids: set[str] = set()
    for i, ref in enumerate(reserved):
        ref = _dict(ref)
        for key in ("resource", "name", "uid"):
            if not ref.get(key):
                causes.append(_required(f"status.reservedFor[{i}].{key}"))
        if ref.get("uid") in uids:
            causes.append(_duplicate(f"status.reservedFor[{i}]", ref.get("uid")))
        uids.add(str(ref.get("uid")))
    allocation, old_allocation = status.get("allocation"), old_status.get("allocation")
    if reserved:
        if allocation is None:
            causes.append(
                _forbidden("status.reservedFor", "may not be specified when `allocated` is not set")
            )
        elif new["metadata"].get("deletionTimestamp"):
            before = {str(_dict(r).get("uid")) for r in _list(old_status.get("reservedFor"))}
            if uids - before:
                causes.append(
                    _forbidden(
                        "status.reservedFor",
                        "new entries may not be added while `deallocationRequested` or `deletionTimestamp` are set",
                    )
                )
    if allocation is not None and old_allocation is not None:
        if allocation != old_allocation:
            causes.append(_invalid("status.allocation", allocation, "field is immutable"))
    elif allocation is not None:
        names = _request_names(_dict(_dict(new.get("spec")).get("devices")))
        results = _list(_dict(_dict(allocation).get("devices")).get("results"))
        for i, result in enumerate(results):
            result = _dict(result)
            where = f"status.allocation.devices.results[{i}]"
            request = result.get("request")
            if not isinstance(request, str) or not _names_request(names, request):
                causes.append(_invalid(f"{where}.request", request, _REQUEST_REF))
            for key in ("driver", "pool", "device"):
                if not result.get(key):
                    causes.append(_required(f"{where}.{key}"))
            causes += dra_fields.result_fields(result, where)
        causes += _allocation_configs(
            _dict(_dict(allocation).get("devices")).get("config"), "status.allocation.devices.config", names
        )
    causes += dra_fields.device_statuses(status)
    _raise(RESOURCE_CLAIMS, name, causes)


def _default_results(status: dict[str, Any]) -> dict[str, Any]:
    """The tolerations of allocation results default their operator to `Equal`, as decoding does."""
    allocation = status.get("allocation")
    results = _dict(_dict(allocation).get("devices")).get("results")
    if not isinstance(results, list) or not any(isinstance(r, dict) and "tolerations" in r for r in results):
        return status
    results = [
        {**r, "tolerations": dra_fields.default_tolerations(r["tolerations"])}
        if isinstance(r, dict) and "tolerations" in r
        else r
        for r in results
    ]
    devices = {**_dict(allocation)["devices"], "results": results}
    return {**status, "allocation": {**_dict(allocation), "devices": devices}}


def check_pod_claims(name: str, spec: dict[str, Any]) -> None:
    """`validatePodResourceClaim` and `validateResourceClaimNames` on a pod's spec."""
    causes: list[Cause] = []
    names: set[str] = set()
    for i, claim in enumerate(_list(spec.get("resourceClaims"))):
        where = f"spec.resourceClaims[{i}]"
        claim = _dict(claim)
        causes += _unique_label(claim.get("name"), names, f"{where}.name")
        by_name, by_template = claim.get("resourceClaimName"), claim.get("resourceClaimTemplateName")
        if by_name is not None and by_template is not None:
            causes.append(
                _invalid(
                    where,
                    claim,
                    "at most one of `resourceClaimName` or `resourceClaimTemplateName` may be specified",
                )
            )
        if by_name is None and by_template is None:
            causes.append(
                _invalid(
                    where, claim, "must specify one of: `resourceClaimName`, `resourceClaimTemplateName`"
                )
            )
    listed = ": " + ", ".join(sorted(names)) if names else " which is empty"
    for group in ("initContainers", "containers"):
        for j, container in enumerate(_list(spec.get(group))):
            refs = _list(_dict(_dict(container).get("resources")).get("claims"))
            for k, ref in enumerate(refs):
                ref_name = _dict(ref).get("name")
                where = f"spec.{group}[{j}].resources.claims[{k}]"
                if not ref_name:
                    causes.append(_required(where))
                elif ref_name not in names:
                    causes.append(
                        (
                            where,
                            "FieldValueNotFound",
                            f"Not found: {_show(ref_name)}: must be one of the names in pod.spec.resourceClaims{listed}",
                        )
                    )
    if causes:
        raise invalid("Pod", name, causes)


# ---- the resourceclaim controller ---------------------------------------------------------------------------


class _ClaimNotFound(Exception):
    """`resourceclaim.ErrClaimNotFound`: the pod's status does not name the claim made from its template yet."""


def pod_claim_name(pod: dict[str, Any], pod_claim: dict[str, Any]) -> tuple[str | None, bool]:
    """`resourceclaim.Name` (k8s.io/dynamic-resource-allocation/resourceclaim): the claim a pod's
    `spec.resourceClaims` entry stands for, and whether its owner must be checked. A template entry is
    looked up in `status.resourceClaimStatuses` (raises _ClaimNotFound when it is not there yet); a
    recorded entry without a claim name means the pod needs no claim for it (None)."""
    if pod_claim.get("resourceClaimName"):
        return str(pod_claim["resourceClaimName"]), False
    if pod_claim.get("resourceClaimTemplateName"):
        for entry in _list(_dict(pod.get("status")).get("resourceClaimStatuses")):
            if _dict(entry).get("name") == pod_claim.get("name"):
                claim = entry.get("resourceClaimName")
                return (str(claim) if claim else None), True
        raise _ClaimNotFound
    raise ValueError(f"pod claim {pod_claim.get('name')!r} names neither a claim nor a template")


def _is_for_pod(pod: dict[str, Any], claim: dict[str, Any]) -> bool:
    """`resourceclaim.IsForPod`: the claim's controller owner is this pod."""
    uid = pod["metadata"]["uid"]
    return any(
        ref.get("uid") == uid and ref.get("controller")
        for ref in claim["metadata"].get("ownerReferences") or ()
    )


def _pod_done(pod: dict[str, Any]) -> bool:
    """`isPodDone`: terminal, or deleted before it was scheduled."""
    if _dict(pod.get("status")).get("phase") in ("Succeeded", "Failed"):
        return True
    return bool(pod["metadata"].get("deletionTimestamp")) and not pod["spec"].get("nodeName")


def _owning_pod(claim: dict[str, Any]) -> tuple[str, str]:
    """`owningPod`: name and uid of the pod that controls the claim, or empty strings."""
    for ref in claim["metadata"].get("ownerReferences") or ():
        if ref.get("controller") and ref.get("apiVersion") == "v1" and ref.get("kind") == "Pod":
            return str(ref.get("name", "")), str(ref.get("uid", ""))
    return "", ""


def generate_name(pod_name: str, claim_name: str) -> str:
    """The `generateName` of a claim made from a template (`handleClaim`): `<pod>-<claim>-`, both parts cut in
    proportion when longer than 57 characters, leaving room for the 5 random characters of a 63-long name."""
    base = f"{pod_name}-{claim_name}-"
    limit = 57
    if len(base) <= limit:
        return base
    return (
        pod_name[: len(pod_name) * limit // len(base)]
        + "-"
        + claim_name[: len(claim_name) * limit // len(base)]
    )


def group_entry(pod: dict[str, Any], group: dict[str, Any] | None, pod_claim: dict[str, Any]) -> bool:
    """KEP-5729 "Pod": the pod's `spec.resourceClaims` entry equals one of its PodGroup's
    `spec.resourceClaims` (name, `resourceClaimName`, `resourceClaimTemplateName`), so it stands for
    the group's claim, reserved (and for a template, made) for the PodGroup."""
    if group is None:
        return False

    def norm(entry: Any) -> tuple[Any, Any, Any]:
        entry = _dict(entry)
        return entry.get("name"), entry.get("resourceClaimName"), entry.get("resourceClaimTemplateName")

    mine = norm(pod_claim)
    return any(norm(e) == mine for e in _list(_dict(group.get("spec")).get("resourceClaims")))


def _pods_group(store: Store, pod: dict[str, Any]) -> dict[str, Any] | None:
    """The native PodGroup the pod names in `spec.schedulingGroup`, if served and there."""
    name = _dict(pod["spec"].get("schedulingGroup")).get("podGroupName")
    if not name or not store.native_gang:
        return None
    return store.get_obj(NATIVE_PODGROUPS, pod["metadata"]["namespace"], str(name))


def _claim_status_name(group: dict[str, Any], entry: str) -> str | None:
    for status in _list(_dict(group.get("status")).get("resourceClaimStatuses")):
        if _dict(status).get("name") == entry and status.get("resourceClaimName"):
            return str(status["resourceClaimName"])
    return None


class ResourceClaimController(BackgroundLoop):
    """What kube-controller-manager's resourceclaim controller does (pkg/controller/resourceclaim/controller.go):

    - `syncPod` / `handleClaim`: for each `resourceClaimTemplateName` entry of a pod that is not being deleted
      (nor done: see `sync_pod`),
      a claim is created from the template (generateName `<pod>-<entry>-`, the pod as controlling owner, the
      template's labels and annotations plus `resource.kubernetes.io/pod-claim-name: <entry>`, the template's
      `spec.spec`) unless one the pod owns with that annotation exists (`findPodResourceClaim`), and recorded in
      the pod's `status.resourceClaimStatuses` (merged by name, as its server-side apply does). A missing
      template is a Warning Event `FailedResourceClaimCreation` on the pod; the pod is retried when the template
      appears. For a bound pod, an allocated claim not yet reserved for it is reserved (`reserveForPod`).
    - `syncClaim`: `reservedFor` entries of pods that are gone, replaced (other uid) or done (`isPodDone`) are
      removed; when none is left and the claim has the `resource.kubernetes.io/delete-protection` finalizer the
      allocation is cleared in the same status write and the finalizer removed; a claim being deleted with no
      consumers loses its allocation and the finalizer. An unreserved claim whose owning pod is done or replaced
      is deleted; one whose pod is gone is left to the garbage collector (the ownerReference), as in the real
      controller.

    Pods are tracked from the moment they are seen, so a deleted pod is known to be gone (`deletedObjects`).

    PodGroups' claims (KEP-5729, `keps/sig-scheduling/5729-resourceclaim-support-for-workloads`, "ResourceClaim
    Lifecycle"), with the native gang API served: for each `resourceClaimTemplateName` entry of a PodGroup's
    `spec.resourceClaims` a claim is made once for the group (generateName `<podgroup>-<entry>-`, the PodGroup as
    controlling owner, `resource.kubernetes.io/pod-claim-name: <entry>`) and named in the PodGroup's
    `status.resourceClaimStatuses`; a pod whose entry equals the group's gets that name in its own status instead
    of a claim of its own, and is never reserved by the controller (the scheduler reserves the claim for the
    PodGroup). A `reservedFor` entry of a PodGroup stays while that PodGroup exists; the garbage collector deletes
    the group's claims with it. Not modelled: the PodGroup deletion finalizer kube-controller-manager keeps until
    the group's pods are done.
    """

    task_name = "sim-resourceclaim-controller"

    def __init__(self, store: Store):
        super().__init__()
        self.store = store
        self._pods: set[tuple[str, str]] = set()
        self._claims: set[tuple[str, str]] = set()
        # claim (namespace, name) -> pods that use it: `podResourceClaimIndex`
        self._users: dict[tuple[str, str], set[str]] = {}
        # template (namespace, name) -> pods waiting for it
        self._waiting: dict[tuple[str, str], set[str]] = {}
        self._deleted: OrderedDict[str, None] = (
            OrderedDict()
        )  # uids of deleted pods (an LRU of 500, as there)
        self._reported: set[tuple[str, str]] = set()  # (pod uid, entry) whose missing template has an Event
        # PodGroups whose claims to make, and pods waiting for their group's claim: (namespace, group) -> pods
        self._groups: set[tuple[str, str]] = set()
        self._group_waiting: dict[tuple[str, str], set[str]] = {}
        store.subscribe(PODS, self._on_pod)
        store.subscribe(RESOURCE_CLAIMS, self._on_claim)
        store.subscribe(RESOURCE_CLAIM_TEMPLATES, self._on_template)
        store.subscribe(NATIVE_PODGROUPS, self._on_podgroup)

    # -- event handlers (`enqueuePod`, `enqueueResourceClaim`) --

    def _wake_up(self) -> None:
        if not self._wake.is_set():
            self._wake.set()

    def _on_pod(self, ev: WatchEvent) -> None:
        pod = ev.obj
        claims = _list(pod["spec"].get("resourceClaims"))
        if not claims:
            return
        meta = pod["metadata"]
        ns, name = meta["namespace"], meta["name"]
        deleted = ev.type == "DELETED"
        if deleted:
            self._deleted[meta["uid"]] = None
            while len(self._deleted) > 500:
                self._deleted.popitem(last=False)
        still_needs = not deleted and not _pod_done(pod)
        for pod_claim in claims:
            try:
                claim_name, _ = pod_claim_name(pod, _dict(pod_claim))
            except (_ClaimNotFound, ValueError):
                continue
            if claim_name is None:
                continue
            users = self._users.setdefault((ns, claim_name), set())
            if deleted:
                users.discard(name)
                if not users:
                    del self._users[(ns, claim_name)]
            else:
                users.add(name)
            if not still_needs:
                self._claims.add((ns, claim_name))
        if not deleted and not meta.get("deletionTimestamp"):
            self._pods.add((ns, name))
        self._wake_up()

    def _on_claim(self, ev: WatchEvent) -> None:
        meta = ev.obj["metadata"]
        key = (meta["namespace"], meta["name"])
        if ev.type != "DELETED":
            self._claims.add(key)
        for pod in self._users.get(key, ()):
            self._pods.add((key[0], pod))
        self._wake_up()

    def _on_template(self, ev: WatchEvent) -> None:
        if ev.type == "DELETED":
            return
        meta = ev.obj["metadata"]
        for pod in self._waiting.pop((meta["namespace"], meta["name"]), ()):
            if pod.startswith("podgroup/"):
                self._groups.add((meta["namespace"], pod.partition("/")[2]))
            else:
                self._pods.add((meta["namespace"], pod))
        self._wake_up()

    def _on_podgroup(self, ev: WatchEvent) -> None:
        meta = ev.obj["metadata"]
        ns, name = meta["namespace"], meta["name"]
        if ev.type == "DELETED":
            # its reservations go (`syncClaim`): every claim of the namespace is looked at again
            for claim in self.store.objects(RESOURCE_CLAIMS, ns):
                if any(
                    _dict(r).get("uid") == meta["uid"]
                    for r in _list(_dict(claim.get("status")).get("reservedFor"))
                ):
                    self._claims.add((ns, claim["metadata"]["name"]))
        else:
            self._groups.add((ns, name))
            for pod in self._group_waiting.pop((ns, name), ()):
                self._pods.add((ns, pod))
        self._wake_up()

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            await asyncio.sleep(0.005)  # let a burst of changes land, like a work queue
            while self._pods or self._claims or self._groups:
                groups, self._groups = self._groups, set()
                for ns, name in sorted(groups):
                    self._guard(self.sync_podgroup, ns, name)
                pods, self._pods = self._pods, set()
                for ns, name in sorted(pods):
                    self._guard(self.sync_pod, ns, name)
                claims, self._claims = self._claims, set()
                for ns, name in sorted(claims):
                    self._guard(self.sync_claim, ns, name)
                await asyncio.sleep(0)  # never hold the loop, whatever the writes trigger

    # -- syncPod --

    def sync_pod(self, ns: str, name: str) -> None:
        pod = self.store.get_obj(PODS, ns, name)
        if pod is None or pod["metadata"].get("deletionTimestamp") or _pod_done(pod):
            # A done pod gets no claim and no reservation: the real `podNeedsWork` does not check this, and would
            # make again the claim `syncClaim` just deleted for it (bounded there by its work queue's backoff).
            return
        made: dict[str, str] = {}
        group = _pods_group(self.store, pod)
        for pod_claim in _list(pod["spec"].get("resourceClaims")):
            if group_entry(pod, group, _dict(pod_claim)):
                named = self._group_claim(pod, group or {}, _dict(pod_claim))
                if named is not None:
                    made[str(pod_claim["name"])] = named
                continue
            created = self._handle_claim(pod, _dict(pod_claim))
            if created is not None:
                made[str(pod_claim["name"])] = created
        if made:
            status = dict(_dict(pod.get("status")))
            entries = [
                e for e in _list(status.get("resourceClaimStatuses")) if _dict(e).get("name") not in made
            ]
            entries += [{"name": entry, "resourceClaimName": claim} for entry, claim in made.items()]
            status["resourceClaimStatuses"] = entries
            pod = self.store.put_status(PODS, ns, name, status).obj
        if not pod["spec"].get("nodeName"):
            return  # the scheduler reserves the claims of a pod it binds
        for pod_claim in _list(pod["spec"].get("resourceClaims")):
            if group_entry(pod, group, _dict(pod_claim)):
                continue  # reserved for the PodGroup, by the scheduler
            try:
                claim_name, check_owner = pod_claim_name(pod, _dict(pod_claim))
            except (_ClaimNotFound, ValueError):
                continue
            if claim_name is None:
                continue
            claim = self.store.get_obj(RESOURCE_CLAIMS, ns, claim_name)
            if claim is None or (check_owner and not _is_for_pod(pod, claim)):
                continue
            self._reserve(pod, claim)

    def _handle_claim(self, pod: dict[str, Any], pod_claim: dict[str, Any]) -> str | None:
        """`handleClaim`: the name of a claim created (or found orphaned) for the entry, to record in the pod's
        status; None when there is nothing to record."""
        ns = pod["metadata"]["namespace"]
        try:
            claim_name, check_owner = pod_claim_name(pod, pod_claim)
        except _ClaimNotFound:
            pass
        except ValueError as exc:
            log.warning("pod %s/%s: %s", ns, pod["metadata"]["name"], exc)
            return None
        else:
            if claim_name is None:
                return None
            claim = self.store.get_obj(RESOURCE_CLAIMS, ns, claim_name)
            if claim is not None and (not check_owner or _is_for_pod(pod, claim)):
                return None  # already made
        template_name = pod_claim.get("resourceClaimTemplateName")
        if not template_name:
            return None
        entry = str(pod_claim.get("name", ""))
        claim = self._find_pod_claim(pod, entry)
        if claim is None:
            template = self.store.get_obj(RESOURCE_CLAIM_TEMPLATES, ns, template_name)
            if template is None:
                self._waiting.setdefault((ns, template_name), set()).add(pod["metadata"]["name"])
                self._report_missing_template(pod, entry, template_name)
                return None
            claim = self._create_from_template(pod, entry, template)
        return str(claim["metadata"]["name"])

    def _group_claim(
        self, pod: dict[str, Any], group: dict[str, Any], pod_claim: dict[str, Any]
    ) -> str | None:
        """The name of the group's claim a template entry of the pod stands for, to record in the pod's status
        (None when it is there already, names a claim directly, or the group has none yet: the pod waits)."""
        if not pod_claim.get("resourceClaimTemplateName"):
            return None
        entry = str(pod_claim.get("name", ""))
        name = _claim_status_name(group, entry)
        if name is None:
            ns = pod["metadata"]["namespace"]
            self._group_waiting.setdefault((ns, group["metadata"]["name"]), set()).add(
                pod["metadata"]["name"]
            )
            return None
        for status in _list(_dict(pod.get("status")).get("resourceClaimStatuses")):
            if _dict(status).get("name") == entry and status.get("resourceClaimName") == name:
                return None
        return name

    def sync_podgroup(self, ns: str, name: str) -> None:
        """KEP-5729 "Create": a claim from each template entry of the PodGroup, made once, owned by the group."""
        group = self.store.get_obj(NATIVE_PODGROUPS, ns, name)
        if group is None or group["metadata"].get("deletionTimestamp"):
            return
        made: dict[str, str] = {}
        for entry in _list(_dict(group.get("spec")).get("resourceClaims")):
            entry = _dict(entry)
            template_name = entry.get("resourceClaimTemplateName")
            if not template_name or _claim_status_name(group, str(entry.get("name"))) is not None:
                continue
            claim = self._find_pod_claim(group, str(entry.get("name", "")))
            if claim is None:
                template = self.store.get_obj(RESOURCE_CLAIM_TEMPLATES, ns, str(template_name))
                if template is None:
                    self._waiting.setdefault((ns, str(template_name)), set()).add(f"podgroup/{name}")
                    continue
                claim = self._create_from_template(
                    group, str(entry.get("name", "")), template, NATIVE_PODGROUPS.api_version, "PodGroup"
                )
            made[str(entry["name"])] = str(claim["metadata"]["name"])
        if not made:
            return
        status = dict(_dict(group.get("status")))
        entries = [e for e in _list(status.get("resourceClaimStatuses")) if _dict(e).get("name") not in made]
        entries += [{"name": entry, "resourceClaimName": claim} for entry, claim in made.items()]
        status["resourceClaimStatuses"] = entries
        self.store.put_status(NATIVE_PODGROUPS, ns, name, status)
        for pod in self._group_waiting.pop((ns, name), ()):
            self._pods.add((ns, pod))

    def _create_from_template(
        self,
        owner: dict[str, Any],
        entry: str,
        template: dict[str, Any],
        api_version: str = "v1",
        kind: str = "Pod",
    ) -> dict[str, Any]:
        """A claim from the template, controlled by ``owner`` (a pod or a PodGroup), annotated with the entry."""
        meta = owner["metadata"]
        tspec = _dict(template.get("spec"))
        tmeta = _dict(tspec.get("metadata"))
        body = {
            "apiVersion": RESOURCE_CLAIMS.api_version,
            "kind": RESOURCE_CLAIMS.kind,
            "metadata": {
                "generateName": generate_name(meta["name"], entry),
                "namespace": meta["namespace"],
                "ownerReferences": [
                    {
                        "apiVersion": api_version,
                        "kind": kind,
                        "name": meta["name"],
                        "uid": meta["uid"],
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
                "annotations": {**_dict(tmeta.get("annotations")), POD_CLAIM_ANNOTATION: entry},
                **({"labels": dict(tmeta["labels"])} if tmeta.get("labels") else {}),
            },
            "spec": orjson.loads(orjson.dumps(tspec.get("spec") or {})),
        }
        return self.store.create(RESOURCE_CLAIMS, meta["namespace"], body).obj

    def _find_pod_claim(self, pod: dict[str, Any], entry: str) -> dict[str, Any] | None:
        """`findPodResourceClaim`: a claim the pod (or PodGroup) controls that was made for this entry."""
        for _res_id, (ns, name) in self.store.dependents(pod["metadata"]["uid"], RESOURCE_CLAIMS):
            claim = self.store.get_obj(RESOURCE_CLAIMS, ns, name)
            if claim is None or not _is_for_pod(pod, claim):
                continue
            if (claim["metadata"].get("annotations") or {}).get(POD_CLAIM_ANNOTATION) == entry:
                return claim
        return None

    def _report_missing_template(self, pod: dict[str, Any], entry: str, template: str) -> None:
        meta = pod["metadata"]
        if (meta["uid"], entry) in self._reported:
            return
        self._reported.add((meta["uid"], entry))
        message = (
            f'PodResourceClaim {entry}: resource claim template "{template}": '
            f'resourceclaimtemplates.resource.k8s.io "{template}" not found'
        )
        self.store.create(
            CORE_EVENTS,
            meta["namespace"],
            {
                "metadata": {"generateName": f"{meta['name']}.", "namespace": meta["namespace"]},
                "involvedObject": {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "name": meta["name"],
                    "namespace": meta["namespace"],
                    "uid": meta["uid"],
                },
                "type": "Warning",
                "reason": "FailedResourceClaimCreation",
                "message": message,
                "source": {"component": "resource_claim"},
                "count": 1,
            },
        )

    def _reserve(self, pod: dict[str, Any], claim: dict[str, Any]) -> None:
        """`reserveForPod`, when the claim is allocated, not reserved for the pod, and can be reserved."""
        status = _dict(claim.get("status"))
        reserved = _list(status.get("reservedFor"))
        uid = pod["metadata"]["uid"]
        if status.get("allocation") is None or len(reserved) >= RESERVED_FOR_MAX:
            return
        if any(_dict(r).get("uid") == uid for r in reserved):
            return
        new_status = {
            **status,
            "reservedFor": [*reserved, {"resource": "pods", "name": pod["metadata"]["name"], "uid": uid}],
        }
        self._write_status(claim, new_status)

    def _write_status(self, claim: dict[str, Any], status: dict[str, Any]) -> dict[str, Any]:
        meta = claim["metadata"]
        body = {"metadata": {"resourceVersion": meta["resourceVersion"]}, "status": status}
        return self.store.replace(RESOURCE_CLAIMS, meta["namespace"], meta["name"], body, "status").obj

    # -- syncClaim --

    def _keeps(self, ns: str, ref: dict[str, Any]) -> bool:
        """Whether a `reservedFor` entry of a pod stays: the pod exists with that uid and is not done."""
        uid = ref.get("uid")
        if uid in self._deleted:
            return False
        pod = self.store.get_obj(PODS, ns, str(ref.get("name", "")))
        return pod is not None and pod["metadata"]["uid"] == uid and not _pod_done(pod)

    def sync_claim(self, ns: str, name: str) -> None:
        claim = self.store.get_obj(RESOURCE_CLAIMS, ns, name)
        if claim is None:
            return
        status = _dict(claim.get("status"))
        reserved = _list(status.get("reservedFor"))
        valid = []
        for ref in reserved:
            ref = _dict(ref)
            if ref.get("apiGroup") == "scheduling.k8s.io" and ref.get("resource") == "podgroups":
                # KEP-5729 "Deallocate": a PodGroup's reservation stays while the PodGroup does
                group = (
                    self.store.get_obj(NATIVE_PODGROUPS, ns, str(ref.get("name", "")))
                    if self.store.native_gang
                    else None
                )
                if group is not None and group["metadata"]["uid"] == ref.get("uid"):
                    valid.append(ref)
                continue
            if ref.get("apiGroup", "") != "" or ref.get("resource") != "pods":
                log.warning("claim %s/%s: unsupported ReservedFor entry %s", ns, name, ref)
                return
            if self._keeps(ns, ref):
                valid.append(ref)
        finalizers = list(claim["metadata"].get("finalizers") or ())
        protected = FINALIZER in finalizers
        if len(valid) < len(reserved):
            new_status = {**status, "reservedFor": valid}
            if not valid:
                new_status.pop("reservedFor")
                if protected:
                    # Deallocate as soon as the last consumer is gone, so the devices are free for others.
                    new_status.pop("allocation", None)
            claim = self._write_status(claim, new_status)
            if protected and _dict(claim.get("status")).get("allocation") is None:
                claim = self._drop_finalizer(claim)
        elif protected and claim["metadata"].get("deletionTimestamp") and not valid:
            if status.get("allocation") is not None:
                claim = self._write_status(claim, {k: v for k, v in status.items() if k != "allocation"})
            claim = self._drop_finalizer(claim)
        if valid or claim is None:
            return
        pod_name, pod_uid = _owning_pod(claim)
        if not pod_name:
            return
        pod = self.store.get_obj(PODS, ns, pod_name)
        if pod is not None and (pod["metadata"]["uid"] != pod_uid or _pod_done(pod)):
            self.store.delete(RESOURCE_CLAIMS, ns, name)
        # A pod that is gone: the garbage collector deletes the claim through its ownerReference.

    def _drop_finalizer(self, claim: dict[str, Any]) -> dict[str, Any] | None:
        meta = claim["metadata"]
        finalizers = [f for f in meta.get("finalizers") or () if f != FINALIZER]
        body = {"metadata": {"resourceVersion": meta["resourceVersion"], "finalizers": finalizers or None}}
        self.store.patch(
            RESOURCE_CLAIMS, meta["namespace"], meta["name"], "application/merge-patch+json", body
        )
        return self.store.get_obj(RESOURCE_CLAIMS, meta["namespace"], meta["name"])
