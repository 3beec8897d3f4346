"""The `resource.k8s.io/v1` fields new in Kubernetes 1.34-1.36 (partitionable devices, device taints and
tolerations, binding conditions, consumable capacity, shares), validated as kube-apiserver 1.36 does.

Each case is a case of kube-apiserver's own tests, named ``GoTest/case`` (in
`pkg/apis/resource/validation/validation_resourceslice_test.go`, or the declarative validation tests of
`pkg/registry/resource/resourceclaim/declarative_validation_test.go`), sent to the server as JSON: the object is
refused with 422 and exactly those causes (field, reason, and the message where the Go case fixes it), or
accepted. Cases the Go tests have no equivalent for name the Go function whose rule they check."""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from .conftest import Cluster
from .test_dra import API, claim, claims, exactly, put_status, refused

BAD_NAME = "!@#$%^"
DRIVER = "test.example.com"
QUALIFIED = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
    "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
LABEL_VALUE = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must "
    "start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for "
    "validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)
DNS_LABEL = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and "
    "end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
PER_DEVICE = (
    "exactly one of `nodeName`, `nodeSelector`, or `allNodes` is required when `perDeviceNodeSelection` is set "
    "to true in the ResourceSlice spec"
)
EFFECTS = 'supported values: "NoExecute", "NoSchedule", "None"'
VALID_UUID = "123e4567-e89b-12d3-a456-426614174000"

Expected = tuple[str, str, str | None]  # field, reason, message (None: not fixed by the Go case)


# ---- ResourceSlice, as `testResourceSlice` and its siblings build it ----------------------------------------


def slice_spec(devices: int = 1, **spec: Any) -> dict[str, Any]:
    """`testResourceSlice(goodName, goodName, driverName, n)`: devices `device-i` with four attributes and a
    1Gi capacity, on node `foo`."""
    body: dict[str, Any] = {
        "driver": DRIVER,
        "nodeName": "foo",
        "pool": {"name": "foo", "resourceSliceCount": 1},
        "devices": [
            {
                "name": f"device-{d}",
                "attributes": {
                    "int": {"int": 42},
                    "string": {"string": "hello world"},
                    "version": {"version": "1.2.3"},
                    "bool": {"bool": True},
                },
                "capacity": {"memory": {"value": "1Gi"}},
            }
            for d in range(devices)
        ],
    }
    body.update(spec)
    return {k: v for k, v in body.items() if v is not None}


def counters(n: int = 1) -> dict[str, Any]:
    if n == 1:
        return {"memory": {"value": "1Gi"}}
    return {f"memory-{i}": {"value": "1Gi"} for i in range(n)}


def counter_sets(n: int) -> list[dict[str, Any]]:
    return [{"name": f"counterset-{i}", "counters": counters()} for i in range(n)]


def consumptions(n: int) -> list[dict[str, Any]]:
    return [{"counterSet": f"counterset-{i}", "counters": counters()} for i in range(n)]


def shared_counters_slice(sets: list[dict[str, Any]]) -> dict[str, Any]:
    """`testResourceSliceWithSharedCounters`: a slice of counter sets and no devices."""
    spec = slice_spec(devices=0)
    del spec["devices"]
    return {**spec, "sharedCounters": sets}


def with_devices(spec: dict[str, Any], change: Callable[[int, dict[str, Any]], None]) -> dict[str, Any]:
    spec = copy.deepcopy(spec)
    for i, device in enumerate(spec["devices"]):
        change(i, device)
    return spec


def on_device(index: int, **fields: Any) -> Callable[[int, dict[str, Any]], None]:
    def change(i: int, device: dict[str, Any]) -> None:
        if i == index:
            for key, value in fields.items():
                if value is None:
                    device.pop(key, None)
                else:
                    device[key] = value

    return change


def on_every_device(**fields: Any) -> Callable[[int, dict[str, Any]], None]:
    return lambda _i, device: device.update(fields)


TAINT = {"key": "example.com/taint", "effect": "NoExecute"}


def binding(conditions: list[str] | None, failures: list[str] | None) -> dict[str, Any]:
    """`testResourceSliceWithBindingConditions(..., 1, conditions, failures)`."""
    return with_devices(
        slice_spec(), on_every_device(bindingConditions=conditions, bindingFailureConditions=failures)
    )


def consumable(
    devices: int, changes: dict[int, Callable[[dict[str, Any]], None]] | None = None
) -> dict[str, Any]:
    """`testResourceSliceWithConsumableCapacity`: devices that allow multiple allocations, with a capacity `a`
    of 100 whose request policy offers 5, 10 or 100 (default 10); ``changes`` edit device i's capacity `a`."""
    spec = slice_spec(devices)
    for i, device in enumerate(spec["devices"]):
        device.pop("attributes")
        device["allowMultipleAllocations"] = True
        device["capacity"] = {
            "a": {"value": "100", "requestPolicy": {"default": "10", "validValues": ["5", "10", "100"]}}
        }
        if changes and i in changes:
            changes[i](device["capacity"]["a"])
    return spec


def policy(**fields: Any) -> Callable[[dict[str, Any]], None]:
    def change(capacity: dict[str, Any]) -> None:
        for key, value in fields.items():
            target = capacity if key == "value" else capacity["requestPolicy"]
            if value is None:
                target.pop(key, None)
            else:
                target[key] = value

    return change


def cap_path(device: int) -> str:
    return f"spec.devices[{device}].capacity[a].requestPolicy"


@dataclass(frozen=True)
class SliceCase:
    go: str
    spec: dict[str, Any]
    causes: tuple[Expected, ...] = field(default_factory=tuple)


SLICE = "TestValidateResourceSlice/"
SLICE_CASES = [
    SliceCase(
        SLICE + "too-large",
        slice_spec(129),
        (("spec.devices", "FieldValueTooMany", "Too many: 129: must have at most 128 items"),),
    ),
    SliceCase(SLICE + "good-taints", with_devices(slice_spec(64), on_every_device(taints=[TAINT]))),
    SliceCase(
        SLICE + "too-large-taints",
        with_devices(slice_spec(65), on_every_device(taints=[TAINT])),
        (("spec.devices", "FieldValueTooMany", "Too many: 65: must have at most 64 items"),),
    ),
    SliceCase(
        SLICE + "taints",
        with_devices(
            slice_spec(3),
            on_device(
                0,
                taints=[
                    TAINT,
                    {
                        "key": "taint",
                        "value": "tainted",
                        "effect": "NoSchedule",
                        "timeAdded": "2026-11-25T10:00:00Z",
                    },
                    {},
                    {"key": BAD_NAME, "value": BAD_NAME, "effect": "some-other-effect"},
                ],
            ),
        ),
        (
            (
                "spec.devices[0].taints[2].key",
                "FieldValueInvalid",
                'Invalid value: "": name part must be non-empty',
            ),
            ("spec.devices[0].taints[2].key", "FieldValueInvalid", f'Invalid value: "": {QUALIFIED}'),
            ("spec.devices[0].taints[2].effect", "FieldValueRequired", "Required value"),
            (
                "spec.devices[0].taints[3].key",
                "FieldValueInvalid",
                f'Invalid value: "{BAD_NAME}": {QUALIFIED}',
            ),
            (
                "spec.devices[0].taints[3].value",
                "FieldValueInvalid",
                f'Invalid value: "{BAD_NAME}": {LABEL_VALUE}',
            ),
            (
                "spec.devices[0].taints[3].effect",
                "FieldValueNotSupported",
                f'Unsupported value: "some-other-effect": {EFFECTS}',
            ),
        ),
    ),
    SliceCase(
        SLICE + "too-many-taints",
        with_devices(slice_spec(), on_device(0, taints=[TAINT] * 17)),
        (("spec.devices[0].taints", "FieldValueTooMany", "Too many: 17: must have at most 16 items"),),
    ),
    SliceCase(
        SLICE + "bad-PerDeviceNodeSelection",
        slice_spec(nodeName="worker", perDeviceNodeSelection=True),
        (
            (
                "spec",
                "FieldValueInvalid",
                'Invalid value: "{`nodeName`, `perDeviceNodeSelection`}": exactly one of `nodeName`, '
                "`nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required, but multiple fields are set",
            ),
            ("spec.devices[0]", "FieldValueRequired", f"Required value: {PER_DEVICE}"),
        ),
    ),
    SliceCase(
        SLICE + "invalid-node-selector-in-basicdevice",
        with_devices(
            slice_spec(nodeName=None, perDeviceNodeSelection=True), on_device(0, nodeName="", allNodes=False)
        ),
        (
            ("spec.devices[0].nodeName", "FieldValueInvalid", 'Invalid value: "": must not be empty'),
            (
                "spec.devices[0].allNodes",
                "FieldValueInvalid",
                "Invalid value: false: must be either unset or set to true",
            ),
            ("spec.devices[0]", "FieldValueRequired", f"Required value: {PER_DEVICE}"),
        ),
    ),
    SliceCase(
        SLICE + "bad-node-selector-in-basicdevice",
        with_devices(
            slice_spec(nodeName=None, perDeviceNodeSelection=True),
            on_device(0, nodeName="worker", allNodes=True),
        ),
        (
            (
                "spec.devices[0]",
                "FieldValueInvalid",
                f'Invalid value: "{{`nodeName`, `allNodes`}}": {PER_DEVICE}',
            ),
        ),
    ),
    SliceCase(
        SLICE + "both-shared-counters-and-devices",
        slice_spec(sharedCounters=[{"name": "counterset", "counters": counters()}]),
        (
            (
                "spec",
                "FieldValueInvalid",
                'Invalid value: "": only one of `sharedCounters` or `devices` is allowed',
            ),
        ),
    ),
    SliceCase(
        SLICE + "missing-name-shared-counters",
        shared_counters_slice([{"counters": counters()}]),
        (("spec.sharedCounters[0].name", "FieldValueRequired", "Required value"),),
    ),
    SliceCase(
        SLICE + "bad-name-shared-counters",
        shared_counters_slice([{"name": BAD_NAME, "counters": counters()}]),
        (("spec.sharedCounters[0].name", "FieldValueInvalid", f'Invalid value: "{BAD_NAME}": {DNS_LABEL}'),),
    ),
    SliceCase(
        SLICE + "missing-counter-shared-counters",
        shared_counters_slice([{"name": "foo"}]),
        (("spec.sharedCounters[0].counters", "FieldValueRequired", "Required value"),),
    ),
    SliceCase(
        SLICE + "bad-countername-shared-counters",
        shared_counters_slice([{"name": "foo", "counters": {BAD_NAME: {"value": "1Gi"}}}]),
        (
            (
                "spec.sharedCounters[0].counters",
                "FieldValueInvalid",
                f'Invalid value: "{BAD_NAME}": {DNS_LABEL}',
            ),
        ),
    ),
    SliceCase(
        SLICE + "duplicate-shared-counters",
        shared_counters_slice([{"name": "foo", "counters": counters()}] * 2),
        (("spec.sharedCounters[1]", "FieldValueDuplicate", 'Duplicate value: "foo"'),),
    ),
    SliceCase(SLICE + "max-shared-counters", shared_counters_slice(counter_sets(8))),
    SliceCase(
        SLICE + "too-many-shared-counters",
        shared_counters_slice(counter_sets(9)),
        (("spec.sharedCounters", "FieldValueTooMany", "Too many: 9: must have at most 8 items"),),
    ),
    SliceCase(
        SLICE + "max-counters-in-counter-set",
        shared_counters_slice([{"name": "counterset-0", "counters": counters(32)}]),
    ),
    SliceCase(
        SLICE + "too-many-counters-in-counter-set",
        shared_counters_slice([{"name": "counterset-0", "counters": counters(33)}]),
        (
            (
                "spec.sharedCounters[0].counters",
                "FieldValueTooMany",
                "Too many: 33: must have at most 32 items",
            ),
        ),
    ),
    SliceCase(
        SLICE + "missing-name-counterset-consumes-counter",
        with_devices(slice_spec(), on_device(0, consumesCounters=[{"counters": counters()}])),
        (("spec.devices[0].consumesCounters[0].counterSet", "FieldValueRequired", "Required value"),),
    ),
    SliceCase(
        SLICE + "bad-name-counterset-consumes-counter",
        with_devices(
            slice_spec(), on_device(0, consumesCounters=[{"counterSet": BAD_NAME, "counters": counters()}])
        ),
        (
            (
                "spec.devices[0].consumesCounters[0].counterSet",
                "FieldValueInvalid",
                f'Invalid value: "{BAD_NAME}": {DNS_LABEL}',
            ),
        ),
    ),
    SliceCase(
        SLICE + "duplicate-counterset-consumes-counter",
        with_devices(
            slice_spec(), on_device(0, consumesCounters=[{"counterSet": "foo", "counters": counters()}] * 2)
        ),
        (("spec.devices[0].consumesCounters[1]", "FieldValueDuplicate", 'Duplicate value: "foo"'),),
    ),
    SliceCase(
        SLICE + "missing-counter-consumes-counter",
        with_devices(slice_spec(), on_device(0, consumesCounters=[{"counterSet": "counterset-0"}])),
        (("spec.devices[0].consumesCounters[0].counters", "FieldValueRequired", "Required value"),),
    ),
    SliceCase(
        SLICE + "max-device-counter-consumption-for-device",
        with_devices(
            slice_spec(), on_device(0, attributes=None, capacity=None, consumesCounters=consumptions(2))
        ),
    ),
    SliceCase(
        SLICE + "too-many-device-counter-consumption-for-device",
        with_devices(
            slice_spec(), on_device(0, attributes=None, capacity=None, consumesCounters=consumptions(3))
        ),
        (
            (
                "spec.devices[0].consumesCounters",
                "FieldValueTooMany",
                "Too many: 3: must have at most 2 items",
            ),
        ),
    ),
    SliceCase(
        SLICE + "max-counters-in-device-counter-consumption",
        with_devices(
            slice_spec(),
            on_device(0, consumesCounters=[{"counterSet": "counterset-0", "counters": counters(32)}]),
        ),
    ),
    SliceCase(
        SLICE + "too-many-counters-in-device-counter-consumption",
        with_devices(
            slice_spec(),
            on_device(0, consumesCounters=[{"counterSet": "counterset-0", "counters": counters(33)}]),
        ),
        (
            (
                "spec.devices[0].consumesCounters[0].counters",
                "FieldValueTooMany",
                "Too many: 33: must have at most 32 items",
            ),
        ),
    ),
    SliceCase(
        SLICE + "max-number-of-devices-with-consumes-counters",
        with_devices(slice_spec(64), on_every_device(consumesCounters=consumptions(1))),
    ),
    SliceCase(
        SLICE + "too-many-devices-with-consumes-counters",
        with_devices(slice_spec(65), on_device(0, consumesCounters=consumptions(1))),
        (("spec.devices", "FieldValueTooMany", "Too many: 65: must have at most 64 items"),),
    ),
    SliceCase(
        SLICE + "good-binding-conditions",
        binding(["example.com/condition1", "condition2"], ["example.com/condition3", "condition4"]),
    ),
    SliceCase(
        SLICE + "too-many-binding-conditions",
        binding([f"condition{i}" for i in range(1, 6)], ["condition6", "condition7"]),
        (
            (
                "spec.devices[0].bindingConditions",
                "FieldValueTooMany",
                "Too many: 5: must have at most 4 items",
            ),
        ),
    ),
    SliceCase(
        SLICE + "too-many-binding-failure-conditions",
        binding(["condition1", "condition2"], [f"condition{i}" for i in range(3, 8)]),
        (
            (
                "spec.devices[0].bindingFailureConditions",
                "FieldValueTooMany",
                "Too many: 5: must have at most 4 items",
            ),
        ),
    ),
    SliceCase(
        SLICE + "invalid-binding-conditions",
        binding(["condition1", "condition2!"], ["condition3", "condition4"]),
        (
            (
                "spec.devices[0].bindingConditions[1]",
                "FieldValueInvalid",
                f'Invalid value: "condition2!": {QUALIFIED}',
            ),
        ),
    ),
    SliceCase(
        SLICE + "invalid-binding-failure-conditions",
        binding(["condition1", "condition2"], ["condition3!", "condition4"]),
        (
            (
                "spec.devices[0].bindingFailureConditions[0]",
                "FieldValueInvalid",
                f'Invalid value: "condition3!": {QUALIFIED}',
            ),
        ),
    ),
    SliceCase(
        SLICE + "invalid-slice-has-binding-failure-but-no-binding-conditions",
        binding(None, ["condition1", "condition2"]),
        (
            (
                "spec.devices[0].bindingConditions",
                "FieldValueInvalid",
                "Invalid value: []string(nil): bindingConditions are required to use bindingFailureConditions",
            ),
        ),
    ),
    SliceCase(
        SLICE + "invalid-slice-has-binding-conditions-but-no-binding-failure-conditions",
        binding(["condition1", "condition2"], None),
        (
            (
                "spec.devices[0].bindingFailureConditions",
                "FieldValueInvalid",
                "Invalid value: []string(nil): bindingFailureConditions are required to use bindingConditions",
            ),
        ),
    ),
    SliceCase(
        SLICE + "duplicate-binding-conditions",
        binding(["condition1", "condition1"], ["condition2", "condition3"]),
        (("spec.devices[0].bindingConditions[1]", "FieldValueDuplicate", 'Duplicate value: "condition1"'),),
    ),
    SliceCase(
        SLICE + "duplicate-binding-failure-conditions",
        binding(["condition1", "condition2"], ["condition3", "condition3"]),
        (
            (
                "spec.devices[0].bindingFailureConditions[1]",
                "FieldValueDuplicate",
                'Duplicate value: "condition3"',
            ),
        ),
    ),
    SliceCase(
        SLICE + "overlapping-binding-conditions",
        binding(["condition1", "condition2"], ["condition1", "condition3"]),
        (
            (
                "spec.devices[0].bindingFailureConditions[0]",
                "FieldValueInvalid",
                'Invalid value: "condition1": bindingFailureConditions must not overlap with bindingConditions',
            ),
        ),
    ),
    SliceCase(
        SLICE + "forbidden-request-policy-on-single-allocatable-capacity",
        with_devices(
            slice_spec(2),
            on_device(
                1,
                capacity={
                    "cap": {"value": "1Gi", "requestPolicy": {"default": "1Mi", "validRange": {"min": "1Mi"}}}
                },
            ),
        ),
        (
            (
                "spec.devices[1].capacity[cap].requestPolicy",
                "FieldValueForbidden",
                "Forbidden: allowMultipleAllocations must be true",
            ),
        ),
    ),
    *[
        SliceCase(
            SLICE + f"invalid-request-policy-{name}-step",
            with_devices(
                slice_spec(2),
                on_device(
                    1,
                    allowMultipleAllocations=True,
                    capacity={
                        "cap": {
                            "value": "1Gi",
                            "requestPolicy": {
                                "default": "10Mi",
                                "validRange": {"min": "1Mi", "max": "100Mi", "step": step},
                            },
                        }
                    },
                ),
            ),
            (
                (
                    "spec.devices[1].capacity[cap].requestPolicy.validRange.step",
                    "FieldValueInvalid",
                    f'Invalid value: "{step}": must be greater than zero',
                ),
            ),
        )
        for name, step in (("zero", "0"), ("negative", "-1Mi"))
    ],
    SliceCase(
        SLICE + "consumable-capacity-integer",
        consumable(
            12,
            {
                1: policy(value="-1"),
                2: policy(default="-1"),
                3: policy(validValues=None),
                4: policy(validRange={"min": "10"}),
                5: policy(validRange={"min": "1"}, validValues=None),
                6: policy(default="10.1", validValues=["5.1", "10.1", "100"]),
                7: policy(default="1.05", validRange={"min": "1.1"}, validValues=None),
                8: policy(validValues=["9.9", "10", "100"]),
                9: lambda cap: cap.update(
                    value=str(2**63 - 1),
                    requestPolicy={
                        "default": str(2**63 - 1),
                        "validRange": {"min": "0", "step": "1", "max": str(2**63 - 1)},
                    },
                ),
                10: lambda cap: cap.update(
                    value=f"{2**63 - 1}m",
                    requestPolicy={
                        "default": f"{2**63 - 1}m",
                        "validRange": {"min": "0", "step": "1m", "max": f"{2**63 - 1}m"},
                    },
                ),
                11: lambda cap: cap.update(
                    value=str(2**63 - 1),
                    requestPolicy={
                        "default": str(2**63 - 1),
                        "validRange": {"min": "0", "step": "1m", "max": str(2**63 - 1)},
                    },
                ),
            },
        ),
        (
            *(
                (
                    f"{cap_path(1)}.validValues[{i}]",
                    "FieldValueInvalid",
                    f'Invalid value: "{v}": option is larger than capacity value: -1',
                )
                for i, v in enumerate(("5", "10", "100"))
            ),
            (
                f"{cap_path(2)}.validValues",
                "FieldValueInvalid",
                'Invalid value: "-1": default value is not valid according to the requestPolicy',
            ),
            (
                cap_path(4),
                "FieldValueForbidden",
                'Forbidden: exactly one policy can be specified, cannot specify "validValues" and "validRange" at the '
                "same time",
            ),
            (
                f"{cap_path(7)}.validRange.default",
                "FieldValueInvalid",
                'Invalid value: "1050m": default is less than min: 1100m',
            ),
            (f"{cap_path(8)}.validValues[1]", "FieldValueDuplicate", 'Duplicate value: "10"'),
        ),
    ),
]


@pytest.mark.parametrize("case", SLICE_CASES, ids=lambda c: c.go)
async def test_resource_slice_cases_of_kube_apiserver(cluster: Cluster, case: SliceCase) -> None:
    c = cluster
    body = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": c.name("slice")},
        "spec": case.spec,
    }
    await expect(c, "POST", f"{API}/resourceslices", body, case.causes, cluster_scoped=True)


async def expect(
    c: Cluster,
    method: str,
    path: str,
    body: Any,
    causes: tuple[Expected, ...],
    *,
    cluster_scoped: bool = False,
) -> None:
    if not causes:
        if method == "POST":
            await c.create(path, body, cluster_scoped=cluster_scoped)
        else:
            await c.http.ok(method, path, body)
        return
    assert_causes(await refused(c, method, path, body), causes)


def assert_causes(doc: dict[str, Any], causes: tuple[Expected, ...]) -> None:
    """The 422's causes are exactly these (in any order), with these messages where one is given."""
    got = sorted((x["field"], x["reason"], x["message"]) for x in doc["details"]["causes"])
    want = sorted(causes, key=lambda x: (x[0], x[1], x[2] or ""))
    assert [(f, r) for f, r, _ in got] == [(f, r) for f, r, _ in want], got
    for (_f, _r, message), (_wf, _wr, wanted) in zip(got, want, strict=True):
        if wanted is not None:
            assert message == wanted


# ---- ResourceSlice updates (`TestValidateResourceSliceUpdate`) -----------------------------------------------


async def test_a_new_taint_effect_in_an_old_device_is_refused(cluster: Cluster) -> None:
    """TestValidateResourceSliceUpdate/invalid-new-effect-in-old-device."""
    c = cluster
    name = c.name("tainted")
    created = await c.create(
        f"{API}/resourceslices",
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": name},
            "spec": slice_spec(),
        },
        cluster_scoped=True,
    )
    created["spec"]["devices"][0]["taints"] = [
        {"key": "unhealthy-power", "effect": "NoExecute"},
        {"key": "unhealthy-mem", "effect": "some-other-effect"},
    ]
    await expect(
        c,
        "PUT",
        f"{API}/resourceslices/{name}",
        created,
        (
            (
                "spec.devices[0].taints[1].effect",
                "FieldValueNotSupported",
                f'Unsupported value: "some-other-effect": {EFFECTS}',
            ),
        ),
    )


async def test_a_valid_value_that_rounds_onto_another_is_refused_on_update(cluster: Cluster) -> None:
    """TestValidateResourceSliceUpdate/consumable-capacity-valid-values-integer: 9.9 counts as 10 (integer keys,
    `DRAFractionalCapacityRange` being no gate of 1.36), a duplicate of the 10 after it."""
    c = cluster
    name = c.name("consumable")
    created = await c.create(
        f"{API}/resourceslices",
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": name},
            "spec": consumable(1),
        },
        cluster_scoped=True,
    )
    created["spec"]["devices"][0]["capacity"]["a"]["requestPolicy"]["validValues"][0] = "9.9"
    await expect(
        c,
        "PUT",
        f"{API}/resourceslices/{name}",
        created,
        ((f"{cap_path(0)}.validValues[1]", "FieldValueDuplicate", 'Duplicate value: "10"'),),
    )


async def test_a_taint_gets_the_time_it_was_added(cluster: Cluster) -> None:
    """`SetDefaults_DeviceTaint`: a taint sent without `timeAdded` gets the time of the write; one sent with it
    keeps it."""
    c = cluster
    spec = with_devices(
        slice_spec(),
        on_device(
            0, taints=[TAINT, {**TAINT, "key": "example.com/old", "timeAdded": "2026-01-02T03:04:05Z"}]
        ),
    )
    created = await c.create(
        f"{API}/resourceslices",
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": c.name("t")},
            "spec": spec,
        },
        cluster_scoped=True,
    )
    fresh, old = created["spec"]["devices"][0]["taints"]
    assert fresh["timeAdded"].endswith("Z") and fresh["timeAdded"] > "2026-01-02T03:04:05Z"
    assert old["timeAdded"] == "2026-01-02T03:04:05Z"


# ---- ResourceClaim spec: tolerations and constraints ---------------------------------------------------------


@dataclass(frozen=True)
class ClaimCase:
    go: str
    request: dict[str, Any]
    causes: tuple[Expected, ...] = field(default_factory=tuple)
    constraints: list[dict[str, Any]] | None = None


def with_tolerations(*tolerations: dict[str, Any]) -> dict[str, Any]:
    return exactly("foo", "class", tolerations=list(tolerations))


def sub_tolerations(*tolerations: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": "foo",
        "firstAvailable": [{"name": "sub-0", "deviceClassName": "class", "tolerations": list(tolerations)}],
    }


def match(attribute: str) -> list[dict[str, Any]]:
    return [{"matchAttribute": attribute}]


DECL = "TestDeclarativeValidate/"
EXACT_TOL = "spec.devices.requests[0].exactly.tolerations[0]"
SUB_TOL = "spec.devices.requests[0].firstAvailable[0].tolerations[0]"
CONSTRAINT = "spec.devices.constraints[0]"
EXISTS = {"operator": "Exists", "effect": "NoSchedule"}
CLAIM_CASES = [
    ClaimCase(DECL + "valid Exactly.Tolerations.Key", with_tolerations({"key": "valid-key", **EXISTS})),
    ClaimCase(DECL + "valid Exactly.Tolerations.Key empty", with_tolerations({"key": "", **EXISTS})),
    ClaimCase(
        DECL + "invalid Exactly.Tolerations.Key",
        with_tolerations({"key": "invalid_key!", **EXISTS}),
        ((f"{EXACT_TOL}.key", "FieldValueInvalid", f'Invalid value: "invalid_key!": {QUALIFIED}'),),
    ),
    ClaimCase(
        DECL + "invalid  Exactly.Tolerations.Key - multiple slashes",
        with_tolerations({"key": "a/b/c", **EXISTS}),
        ((f"{EXACT_TOL}.key", "FieldValueInvalid", None),),
    ),
    ClaimCase(DECL + "valid FirstAvailable.Tolerations.Key", sub_tolerations({"key": "valid-key", **EXISTS})),
    ClaimCase(DECL + "valid FirstAvailable.Tolerations.Key empty", sub_tolerations({"key": "", **EXISTS})),
    ClaimCase(
        DECL + "invalid FirstAvailable.Tolerations.Key",
        sub_tolerations({"key": "invalid_key!", **EXISTS}),
        ((f"{SUB_TOL}.key", "FieldValueInvalid", f'Invalid value: "invalid_key!": {QUALIFIED}'),),
    ),
    ClaimCase(
        DECL + "invalid FirstAvailable.Tolerations.Key - multiple slashes",
        sub_tolerations({"key": "a/b/c", **EXISTS}),
        ((f"{SUB_TOL}.key", "FieldValueInvalid", None),),
    ),
    ClaimCase(
        DECL + "valid DeviceTolerationOperator/Effect - Exactly",
        with_tolerations({"key": "key", "operator": "Equal", "value": "value", "effect": "NoSchedule"}),
    ),
    ClaimCase(
        DECL + "invalid DeviceTolerationOperator - Exactly",
        with_tolerations({"key": "key", "operator": "InvalidOp", "value": "value", "effect": "NoSchedule"}),
        (
            (
                f"{EXACT_TOL}.operator",
                "FieldValueNotSupported",
                'Unsupported value: "InvalidOp": supported values: "Equal", "Exists"',
            ),
        ),
    ),
    ClaimCase(
        DECL + "invalid DeviceTaintEffect - Exactly",
        with_tolerations({"key": "key", "operator": "Equal", "value": "value", "effect": "InvalidEffect"}),
        (
            (
                f"{EXACT_TOL}.effect",
                "FieldValueNotSupported",
                f'Unsupported value: "InvalidEffect": {EFFECTS}',
            ),
        ),
    ),
    ClaimCase(
        DECL + "valid DeviceTolerationOperator/Effect - FirstAvailable",
        sub_tolerations({"key": "key", "operator": "Equal", "value": "value", "effect": "NoSchedule"}),
    ),
    ClaimCase(
        DECL + "invalid DeviceTolerationOperator - FirstAvailable",
        sub_tolerations({"key": "key", "operator": "InvalidOp", "value": "value", "effect": "NoSchedule"}),
        ((f"{SUB_TOL}.operator", "FieldValueNotSupported", None),),
    ),
    ClaimCase(
        DECL + "invalid DeviceTaintEffect - FirstAvailable",
        sub_tolerations({"key": "key", "operator": "Equal", "value": "value", "effect": "InvalidEffect"}),
        ((f"{SUB_TOL}.effect", "FieldValueNotSupported", None),),
    ),
    ClaimCase(
        "validateDeviceToleration: a value with operator Exists",
        with_tolerations({"key": "key", "operator": "Exists", "value": "v"}),
        (
            (
                f"{EXACT_TOL}.value",
                "FieldValueInvalid",
                'Invalid value: "v": must be empty for operator `Exists`',
            ),
        ),
    ),
    ClaimCase(
        "validateDeviceToleration: an Equal value that is no label value",
        with_tolerations({"key": "key", "value": BAD_NAME}),  # the operator defaults to Equal
        ((f"{EXACT_TOL}.value", "FieldValueInvalid", f'Invalid value: "{BAD_NAME}": {LABEL_VALUE}'),),
    ),
    ClaimCase(
        DECL + "match attribute without domain",
        exactly("foo", "class"),
        (
            (
                f"{CONSTRAINT}.matchAttribute",
                "FieldValueInvalid",
                'Invalid value: "nodomain": a fully qualified name must be a domain and a name separated by a slash',
            ),
        ),
        constraints=match("nodomain"),
    ),
    ClaimCase(
        DECL + "match attribute with empty domain",
        exactly("foo", "class"),
        (
            (
                f"{CONSTRAINT}.matchAttribute",
                "FieldValueInvalid",
                'Invalid value: "": the domain must not be empty',
            ),
        ),
        constraints=match("/foo"),
    ),
    ClaimCase(
        DECL + "match attribute with empty name",
        exactly("foo", "class"),
        (
            (
                f"{CONSTRAINT}.matchAttribute",
                "FieldValueInvalid",
                'Invalid value: "": the name must not be empty',
            ),
        ),
        constraints=match("foo/"),
    ),
    ClaimCase(
        DECL + "match attribute with invalid domain",
        exactly("foo", "class"),
        ((f"{CONSTRAINT}.matchAttribute", "FieldValueInvalid", None),),
        constraints=match("invalid_domain/foo"),
    ),
    ClaimCase(
        DECL + "match attribute with invalid name",
        exactly("foo", "class"),
        ((f"{CONSTRAINT}.matchAttribute", "FieldValueInvalid", None),),
        constraints=match("domain/invalid-name"),
    ),
    ClaimCase(
        DECL + "match attribute with long name",
        exactly("foo", "class"),
        ((f"{CONSTRAINT}.matchAttribute", "FieldValueTooLong", None),),
        constraints=match("domain/" + "a" * 65),
    ),
    ClaimCase(
        "validateDeviceConstraint: a distinctAttribute without a domain",
        exactly("foo", "class"),
        (
            (
                f"{CONSTRAINT}.distinctAttribute",
                "FieldValueInvalid",
                'Invalid value: "nodomain": a fully qualified name must be a domain and a name separated by a slash',
            ),
        ),
        constraints=[{"distinctAttribute": "nodomain"}],
    ),
    ClaimCase(
        "validateDeviceConstraint: a distinctAttribute",
        exactly("foo", "class"),
        constraints=[{"requests": ["foo"], "distinctAttribute": "dra.example.com/pcieRoot"}],
    ),
    ClaimCase(
        "validateDeviceConstraint: neither attribute (DRAConsumableCapacity on)",
        exactly("foo", "class"),
        (
            (
                CONSTRAINT,
                "FieldValueRequired",
                'Required value: exactly one of "matchAttribute" or "distinctAttribute" is required, but multiple '
                "fields are set",
            ),
        ),
        constraints=[{"requests": ["foo"]}],
    ),
]


@pytest.mark.parametrize("case", CLAIM_CASES, ids=lambda c: c.go)
async def test_resource_claim_cases_of_kube_apiserver(cluster: Cluster, case: ClaimCase) -> None:
    devices = {"constraints": case.constraints} if case.constraints is not None else {}
    await expect(cluster, "POST", claims(cluster), claim("c", case.request, **devices), case.causes)


async def test_a_toleration_without_operator_gets_equal(cluster: Cluster) -> None:
    """`+default="Equal"` on `DeviceToleration.operator` (zz_generated.defaults.go), in requests and results."""
    c = cluster
    created = await c.create(
        claims(c), claim("t", with_tolerations({"key": "example.com/taint", "value": "v"}))
    )
    assert created["spec"]["devices"]["requests"][0]["exactly"]["tolerations"] == [
        {"key": "example.com/taint", "value": "v", "operator": "Equal"}
    ]
    result = {**device_result(), "tolerations": [{"key": "example.com/taint", "value": "v"}]}
    code, doc = await put_status(c, "t", {"allocation": {"devices": {"results": [result]}}})
    assert code == 200, doc
    assert doc["status"]["allocation"]["devices"]["results"][0]["tolerations"][0]["operator"] == "Equal"


# ---- ResourceClaim status: shares, binding conditions, device status --------------------------------------


def device_result(**more: Any) -> dict[str, Any]:
    return {"request": "foo", "driver": DRIVER, "pool": "pool", "device": "device-0", **more}


def device_status(**more: Any) -> dict[str, Any]:
    return {"driver": DRIVER, "pool": "pool", "device": "device-0", **more}


@dataclass(frozen=True)
class StatusCase:
    go: str
    status: dict[str, Any]
    causes: tuple[Expected, ...] = field(default_factory=tuple)


STATUS = "TestValidateStatusUpdateForDeclarative/"
RESULT = "status.allocation.devices.results[0]"


def allocated(*results: dict[str, Any], devices: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    status: dict[str, Any] = {"allocation": {"devices": {"results": list(results)}}}
    if devices is not None:
        status["devices"] = devices
    return status


STATUS_CASES = [
    StatusCase(
        STATUS + "valid status.Allocation.Devices.Results[].ShareID",
        allocated(device_result(shareID=VALID_UUID)),
    ),
    StatusCase(
        STATUS + "invalid status.Allocation.Devices.Results[].ShareID",
        allocated(device_result(shareID="invalid-uid")),
        (
            (
                f"{RESULT}.shareID",
                "FieldValueInvalid",
                'Invalid value: "invalid-uid": error validating uid: invalid UUID length: 11',
            ),
        ),
    ),
    StatusCase(
        STATUS + "invalid uppercase status.Allocation.Devices.Results[].ShareID ",
        allocated(device_result(shareID="123e4567-E89b-12d3-A456-426614174000")),
        (
            (
                f"{RESULT}.shareID",
                "FieldValueInvalid",
                'Invalid value: "123e4567-E89b-12d3-A456-426614174000": uid must be in RFC 4122 normalized form, '
                "`xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx` with lowercase hexadecimal characters",
            ),
        ),
    ),
    StatusCase(
        STATUS + "valid status.Devices[].ShareID",
        allocated(device_result(shareID=VALID_UUID), devices=[device_status(shareID=VALID_UUID)]),
    ),
    StatusCase(
        "validateDeviceStatus: the status of a device not allocated",
        allocated(device_result(), devices=[device_status(device="device-1")]),
        (
            (
                "status.devices[0]",
                "FieldValueInvalid",
                f"Invalid value: {DRIVER}/pool/device-1: must be an allocated device in the claim",
            ),
        ),
    ),
    StatusCase(
        "validateDeviceStatus: the status of a share the allocation does not name",
        allocated(device_result(shareID=VALID_UUID), devices=[device_status()]),
        (
            (
                "status.devices[0]",
                "FieldValueInvalid",
                f"Invalid value: {DRIVER}/pool/device-0: must be an allocated device in the claim",
            ),
        ),
    ),
    StatusCase(
        "validateResourceClaimStatusUpdate: one device status twice",
        allocated(device_result(), devices=[device_status(), device_status()]),
        (("status.devices[1]", "FieldValueDuplicate", f"Duplicate value: {DRIVER}/pool/device-0"),),
    ),
    StatusCase(
        "validateDeviceRequestAllocationResult: binding conditions without failure conditions",
        allocated(device_result(bindingConditions=["ready"])),
        (
            (
                f"{RESULT}.bindingFailureConditions",
                "FieldValueInvalid",
                "Invalid value: []string(nil): bindingFailureConditions are required to use bindingConditions",
            ),
        ),
    ),
    StatusCase(
        "validateDeviceRequestAllocationResult: binding conditions",
        allocated(device_result(bindingConditions=["ready"], bindingFailureConditions=["failed"])),
    ),
    StatusCase(
        "validateDeviceRequestAllocationResult: a toleration of an unknown effect",
        allocated(device_result(tolerations=[{"operator": "Exists", "effect": "Sometimes"}])),
        (
            (
                f"{RESULT}.tolerations[0].effect",
                "FieldValueNotSupported",
                f'Unsupported value: "Sometimes": {EFFECTS}',
            ),
        ),
    ),
]


@pytest.mark.parametrize("case", STATUS_CASES, ids=lambda c: c.go)
async def test_resource_claim_status_cases_of_kube_apiserver(cluster: Cluster, case: StatusCase) -> None:
    c = cluster
    await c.create(claims(c), claim("s", exactly("foo", "class")))
    code, doc = await put_status(c, "s", case.status)
    if not case.causes:
        assert code == 200, doc
        return
    assert code == 422, doc
    assert_causes(doc, case.causes)


async def test_a_device_status_needs_an_allocation(cluster: Cluster) -> None:
    """`validateDeviceStatus`: without an allocation no device is allocated, so no device status is valid."""
    c = cluster
    await c.create(claims(c), claim("d", exactly("foo", "class")))
    code, doc = await put_status(c, "d", {"devices": [device_status()]})
    assert code == 422
    assert [x["field"] for x in doc["details"]["causes"]] == ["status.devices[0]"]


async def test_deallocating_drops_the_status_of_the_devices_that_went(cluster: Cluster) -> None:
    """`dropDeallocatedStatusDevices` (pkg/registry/resource/resourceclaim/strategy.go): a status write that
    removes the allocation also removes the device statuses of what it allocated, so a client unaware of
    `status.devices` can deallocate."""
    c = cluster
    await c.create(claims(c), claim("g", exactly("foo", "class")))
    status = allocated(device_result(), devices=[device_status(conditions=[])])
    code, doc = await put_status(c, "g", status)
    assert code == 200, doc
    assert doc["status"]["devices"] == [device_status(conditions=[])]
    code, doc = await put_status(c, "g", {"devices": doc["status"]["devices"]})
    assert code == 200, doc
    assert "devices" not in (doc.get("status") or {})
