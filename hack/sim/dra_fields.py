"""Field errors of `resource.k8s.io/v1` validation, and the checks of the fields new in Kubernetes 1.34-1.36, as
kube-apiserver 1.36 makes them (`pkg/apis/resource/validation/validation.go`; each function names the Go function
it follows, and the text of each message is the source's).

With the default feature gates of 1.36 (`DRAPartitionableDevices`, `DRADeviceTaints`, `DRADeviceBindingConditions`,
`DRAConsumableCapacity`, `DRAResourceClaimDeviceStatus` all beta and on) none of these fields is dropped by the
strategies' `dropDisabledFields`: they are all validated.

- Partitionable devices (`validateResourceSliceSpec`, `validateCounterSet`, `validateDeviceCounterConsumption`): a
  slice has `sharedCounters` or `devices`, not both; at most 8 counter sets of at most 32 counters, names DNS
  labels and unique; a device consumes from at most 2 counter sets (unique) with at most 32 counters each; a slice
  whose devices have taints or consume counters holds at most 64 devices (128 otherwise).
- Per-device node selection (`validateDevice`): with `perDeviceNodeSelection` each device has exactly one of
  `nodeName`, `nodeSelector`, `allNodes`; without it none.
- Device taints (`validateDeviceTaint`): at most 16 a device; key a label name, value a label value, effect one of
  `NoExecute`, `NoSchedule`, `None`; a taint without `timeAdded` gets the time of the write
  (`SetDefaults_DeviceTaint`). Unchanged taints are not validated again on update.
- Tolerations in requests and results (`validateDeviceToleration`): key a label name, operator `Exists` (no value)
  or `Equal` (a label value; the default, `+default="Equal"`), effect as for taints.
- Binding conditions (`validateDeviceBindingParameters`, on devices and allocation results): at most 4 of each,
  label names, no duplicates, no overlap, each list only with the other. `bindsToNode` has no rule.
- Consumable capacity (`validateMultiAllocatableDeviceCapacity`, `validateRequestPolicy`,
  `validateRequestPolicyValidValues`, `validateRequestPolicyRange`): a `requestPolicy` only on a device with
  `allowMultipleAllocations`; `validValues` (sorted, unique, at most 10, none above the capacity, the default among
  them) or `validRange` (min required, within the capacity, default within it, step > 0 and one step within the
  capacity, default and max on a step from min), not both; a default is required with either. Unchanged capacity is
  not validated again on update. Request `capacity.requests` and result `consumedCapacity` have no rule.
- `distinctAttribute` / `matchAttribute` constraints (`validateDeviceConstraint`, `validateFullyQualifiedName`).
- Allocation results' `shareID` and `status.devices[].shareID` (`validateUID`); `status.devices`
  (`validateDeviceStatus`): driver, pool and device named, an allocated device (with its share), unique, at most 8
  conditions; entries of devices a status write deallocates are dropped first (`dropDeallocatedStatusDevices`).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from fractions import Fraction
from typing import Any

import orjson

from .quantity import parse_quantity

Cause = tuple[str, str, str]  # (field, reason, message), as errors.invalid takes them

# `pkg/apis/resource/types.go`
SLICE_MAX_DEVICES = 128
SLICE_MAX_DEVICES_ADVANCED = (
    64  # `ResourceSliceMaxDevicesWithAdvancedFeatures`: taints or counter consumption
)
MAX_COUNTER_SETS = 8
MAX_COUNTERS_PER_SET = 32
MAX_CONSUMPTIONS_PER_DEVICE = 2
MAX_COUNTERS_PER_CONSUMPTION = 32
MAX_TAINTS = 16
MAX_BINDING_CONDITIONS = 4
MAX_VALID_VALUES = 10  # `CapacityRequestPolicyDiscreteMaxOptions`
MAX_DEVICE_STATUS_CONDITIONS = 8
_MAX_KEY_LENGTH = 63 + 1 + 32  # `attributeAndCapacityMaxKeyLength`: a domain, '/', an identifier
TAINT_EFFECTS = ("NoExecute", "NoSchedule", "None")  # `sets.List(validDeviceTaintEffects)`
TOLERATION_OPERATORS = ("Equal", "Exists")

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_QUALIFIED = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_C_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_NORMALIZED_UID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")

_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must "
    "start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
_LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and "
    "end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
_QUALIFIED_MSG = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric "
    "character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
    "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
_LABEL_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start "
    "and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for "
    "validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)
_C_IDENTIFIER_MSG = (
    "a valid C identifier must start with alphabetic character or '_', followed by a string of alphanumeric "
    "characters or '_' (e.g. 'my_name',  or 'MY_NAME',  or 'MyName', regex used for validation is "
    "'[A-Za-z_][A-Za-z0-9_]*')"
)


# ---- field errors, worded as k8s.io/apimachinery/pkg/util/validation/field renders them ---------------------


def show(value: Any) -> str:
    """A bad value as `ErrorBody` prints it; a Go struct (printed `%#v` there) is printed as JSON."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    return orjson.dumps(value).decode()


def go_strings(values: Any) -> str:
    """A `[]string` as `%#v` prints it: `[]string(nil)` or `[]string{"a", "b"}`."""
    if not values:
        return "[]string(nil)" if values is None else "[]string{}"
    return "[]string{" + ", ".join(orjson.dumps(str(v)).decode() for v in values) + "}"


def required(path: str, detail: str = "") -> Cause:
    return (path, "FieldValueRequired", "Required value" + (f": {detail}" if detail else ""))


def invalid_value(path: str, value: Any, detail: str, shown: str | None = None) -> Cause:
    return (path, "FieldValueInvalid", f"Invalid value: {show(value) if shown is None else shown}: {detail}")


def forbidden(path: str, detail: str) -> Cause:
    return (path, "FieldValueForbidden", f"Forbidden: {detail}")


def duplicate(path: str, value: Any, shown: str | None = None) -> Cause:
    return (path, "FieldValueDuplicate", f"Duplicate value: {show(value) if shown is None else shown}")


def not_supported(path: str, value: Any, supported: tuple[str, ...]) -> Cause:
    listed = ", ".join(show(s) for s in supported)
    return (path, "FieldValueNotSupported", f"Unsupported value: {show(value)}: supported values: {listed}")


def too_many(path: str, actual: int, most: int) -> Cause:
    return (path, "FieldValueTooMany", f"Too many: {actual}: must have at most {most} items")


def too_long(path: str, most: int) -> Cause:
    return (path, "FieldValueTooLong", f"Too long: may not be more than {most} bytes")


def key_of(value: Any) -> Any:
    """A value to compare list entries by: itself, or its JSON for what a set cannot hold (a list, an object)."""
    return value if isinstance(value, (str, int, float, bool, type(None))) else orjson.dumps(value)


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


# ---- name formats (k8s.io/apimachinery/pkg/util/validation) --------------------------------------------------


def dns_label(value: Any, path: str) -> list[Cause]:
    if isinstance(value, str) and len(value) <= 63 and _DNS_LABEL.match(value):
        return []
    return [invalid_value(path, value, _LABEL_MSG)]


def _subdomain_problems(value: str) -> list[str]:
    """`IsDNS1123Subdomain`."""
    problems = ["must be no more than 253 characters"] if len(value) > 253 else []
    if not _DNS_SUBDOMAIN.match(value):
        problems.append(_SUBDOMAIN_MSG)
    return problems


def dns_subdomain(value: Any, path: str) -> list[Cause]:
    if isinstance(value, str) and len(value) <= 253 and _DNS_SUBDOMAIN.match(value):
        return []
    return [invalid_value(path, value, _SUBDOMAIN_MSG)]


def unique_label(name: Any, seen: set[Any], path: str) -> list[Cause]:
    """A list entry's name: required, not seen before in the list (then remembered), a DNS label."""
    if not name:
        return [required(path)]
    if key_of(name) in seen:
        return [duplicate(path, name)]
    seen.add(key_of(name))
    return dns_label(name, path)


def label_name(value: Any, path: str) -> list[Cause]:
    """`metav1validation.ValidateLabelName`: one error for each problem `IsQualifiedName` finds."""
    text = value if isinstance(value, str) else ""
    parts = text.split("/")
    problems: list[str] = []
    if len(parts) > 2:
        problems.append(
            "a qualified name "
            + _QUALIFIED_MSG
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        )
    else:
        if len(parts) == 2:
            if not parts[0]:
                problems.append("prefix part must be non-empty")
            else:
                problems += ["prefix part " + p for p in _subdomain_problems(parts[0])]
        name = parts[-1]
        if not name:
            problems.append("name part must be non-empty")
        elif len(name) > 63:
            problems.append("name part must be no more than 63 characters")
        if not _QUALIFIED.match(name):
            problems.append("name part " + _QUALIFIED_MSG)
    return [invalid_value(path, text, p) for p in problems]


def label_value(value: Any, path: str) -> list[Cause]:
    """`validateLabelValue` (`IsValidLabelValue`)."""
    text = value if isinstance(value, str) else ""
    causes = [invalid_value(path, text, "must be no more than 63 characters")] if len(text) > 63 else []
    if not _LABEL_VALUE.match(text):
        causes.append(invalid_value(path, text, _LABEL_VALUE_MSG))
    return causes


def _driver_name(value: str, path: str) -> list[Cause]:
    """`corevalidation.ValidateCSIDriverName` (the `validateDriverName` of DRA) on a non-empty name."""
    causes = [too_long(path, 63)] if len(value) > 63 else []
    return causes + [invalid_value(path, value, p) for p in _subdomain_problems(value.lower())]


#: `resource.OpaqueParametersMaxLength`
OPAQUE_PARAMETERS_MAX_LENGTH = 10 * 1024
#: `resource.DeviceConfigMaxSize`: configurations of a class or a claim (a result holds both: twice that)
DEVICE_CONFIG_MAX_SIZE = 32


def device_configuration(config: Any, path: str, stored: bool = False) -> list[Cause]:
    """`validateDeviceConfiguration` and `validateOpaqueConfiguration` (pkg/apis/resource/validation/
    validation.go): an `opaque` part naming a driver, whose `parameters` (`validateRawExtension`) are a JSON
    object of at most 10 KiB, the size checked on new objects only (``stored`` False)."""
    opaque = as_dict(config).get("opaque")
    if not isinstance(opaque, dict):
        return [required(f"{path}.opaque")]
    where = f"{path}.opaque"
    driver = opaque.get("driver")
    if not isinstance(driver, str) or not driver:
        causes = [required(f"{where}.driver")]
    else:
        causes = _driver_name(driver, f"{where}.driver")
    parameters = opaque.get("parameters")
    if parameters is None:
        causes.append(required(f"{where}.parameters"))
    elif not stored and len(orjson.dumps(parameters)) > OPAQUE_PARAMETERS_MAX_LENGTH:
        causes.append(too_long(f"{where}.parameters", OPAQUE_PARAMETERS_MAX_LENGTH))
    elif not isinstance(parameters, dict):
        causes.append(invalid_value(f"{where}.parameters", "<value omitted>", "must be a valid JSON object"))
    return causes


def _c_identifier(value: str, path: str) -> list[Cause]:
    causes = [too_long(path, 32)] if len(value) > 32 else []  # `resource.DeviceMaxIDLength`
    if not _C_IDENTIFIER.match(value):
        causes.append(invalid_value(path, value, _C_IDENTIFIER_MSG))
    return causes


def fully_qualified_name(value: Any, path: str) -> list[Cause]:
    """`validateFullyQualifiedName` (`validateQualifiedName`, then a domain is required)."""
    text = value if isinstance(value, str) else ""
    parts = text.split("/")
    causes: list[Cause] = []
    if len(parts) == 1:
        causes += _c_identifier(parts[0], path)
    elif len(parts) == 2:
        domain, name = parts
        causes += (
            [invalid_value(path, "", "the domain must not be empty")]
            if not domain
            else _driver_name(domain, path)
        )
        causes += (
            [invalid_value(path, "", "the name must not be empty")] if not name else _c_identifier(name, path)
        )
    else:
        causes.append(invalid_value(path, text, "must not contain more than one slash"))
    if "/" not in text:
        causes.append(
            invalid_value(
                path, text, "a fully qualified name must be a domain and a name separated by a slash"
            )
        )
    return causes


def _uid(value: Any, path: str) -> list[Cause]:
    """`validateUID`: google/uuid must parse it, and it must be in the normalized form."""
    text = value if isinstance(value, str) else ""
    if _NORMALIZED_UID.match(text):
        return []
    try:
        uuid.UUID(text)
    except ValueError:
        if len(text) not in (32, 36, 38, 45):
            problem = f"invalid UUID length: {len(text)}"
        else:
            problem = "invalid UUID format"
        return [invalid_value(path, text, f"error validating uid: {problem}")]
    return [
        invalid_value(
            path,
            text,
            "uid must be in RFC 4122 normalized form, `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx` with lowercase "
            "hexadecimal characters",
        )
    ]


def _key_path(path: str, key: str) -> str:
    """`fldPath.Key(truncateIfTooLong(key, ...))`."""
    if len(key) > _MAX_KEY_LENGTH:
        remaining = _MAX_KEY_LENGTH - 3
        key = key[: (remaining + 1) // 2] + "..." + key[len(key) - remaining // 2 :]
    return f"{path}[{key}]"


# ---- quantities, printed as `resource.Quantity.String()` does ---------------------------------------------


def _quantity(value: Any) -> Fraction | None:
    try:
        return parse_quantity(value)
    except (ValueError, ZeroDivisionError):
        return None


def _binary(text: Any) -> bool:
    return isinstance(text, str) and text.rstrip().endswith("i")


def show_quantity(amount: Fraction, binary: bool) -> str:
    """The canonical form of a quantity: the largest suffix of its format (binary `Ki`..`Ei`, decimal `k`..`E`,
    or `m` for thousandths) that keeps the number whole."""
    if amount.denominator == 1:
        number = int(amount)
        base, suffixes = (1024, ("Ki", "Mi", "Gi", "Ti", "Pi", "Ei")) if binary else (1000, "kMGTPE")
        best = (number, "")
        for power, suffix in enumerate(suffixes, start=1):
            if number and number % base**power == 0:
                best = (number // base**power, suffix)
        return f"{best[0]}{best[1]}"
    milli = amount * 1000
    return f"{int(milli)}m" if milli.denominator == 1 else str(float(amount))


# ---- ResourceSlice ------------------------------------------------------------------------------------------


def _counters(counters: Any, most: int, path: str) -> list[Cause]:
    """The `counters` map of a counter set or consumption (`validateMap` with `validateCounterName`): required,
    at most ``most``, keys DNS labels (reported on the map's path, as `validateMap` does)."""
    counters = as_dict(counters)
    if not counters:
        return [required(path)]
    if len(counters) > most:
        return [too_many(path, len(counters), most)]
    causes: list[Cause] = []
    for key in counters:
        causes += dns_label(key, path)
    return causes


def _named_entries(
    entries: list[Any], key: str, most: int, path: str, each: Callable[[dict[str, Any], str], list[Cause]]
) -> list[Cause]:
    """`validateSet` over entries keyed by ``key``: too many stops there; each is checked, then duplicates."""
    if len(entries) > most:
        return [too_many(path, len(entries), most)]
    causes: list[Cause] = []
    for i, entry in enumerate(entries):
        causes += each(as_dict(entry), f"{path}[{i}]")
    seen: set[Any] = set()
    for i, entry in enumerate(entries):
        name = as_dict(entry).get(key, "")
        if key_of(name) in seen:
            causes.append(duplicate(f"{path}[{i}]", name))
        seen.add(key_of(name))
    return causes


def _counter_set(entry: dict[str, Any], path: str) -> list[Cause]:
    """`validateCounterSet`."""
    name = entry.get("name")
    causes = [required(f"{path}.name")] if not name else dns_label(name, f"{path}.name")
    return causes + _counters(entry.get("counters"), MAX_COUNTERS_PER_SET, f"{path}.counters")


def _counter_consumption(entry: dict[str, Any], path: str) -> list[Cause]:
    """`validateDeviceCounterConsumption`."""
    name = entry.get("counterSet")
    causes = [required(f"{path}.counterSet")] if not name else dns_label(name, f"{path}.counterSet")
    return causes + _counters(entry.get("counters"), MAX_COUNTERS_PER_CONSUMPTION, f"{path}.counters")


def _strings_slice(values: Any, most: int, path: str) -> list[Cause]:
    values = as_list(values)
    if len(values) > most:
        return [too_many(path, len(values), most)]
    causes: list[Cause] = []
    for i, value in enumerate(values):
        causes += label_name(value, f"{path}[{i}]")
    return causes


def binding_parameters(conditions: Any, failures: Any, path: str) -> list[Cause]:
    """`validateDeviceBindingParameters`, on a device or on an allocation result at ``path``."""
    causes = _strings_slice(conditions, MAX_BINDING_CONDITIONS, f"{path}.bindingConditions")
    causes += _strings_slice(failures, MAX_BINDING_CONDITIONS, f"{path}.bindingFailureConditions")
    wanted, failing = as_list(conditions), as_list(failures)
    seen: set[Any] = set()
    for i, condition in enumerate(wanted):
        if key_of(condition) in seen:
            causes.append(duplicate(f"{path}.bindingConditions[{i}]", condition))
        seen.add(key_of(condition))
    seen_failures: set[Any] = set()
    for i, condition in enumerate(failing):
        where = f"{path}.bindingFailureConditions[{i}]"
        if key_of(condition) in seen_failures:
            causes.append(duplicate(where, condition))
        seen_failures.add(key_of(condition))
        if key_of(condition) in seen:
            causes.append(
                invalid_value(
                    where, condition, "bindingFailureConditions must not overlap with bindingConditions"
                )
            )
    if not wanted and failing:
        causes.append(
            invalid_value(
                f"{path}.bindingConditions",
                None,
                "bindingConditions are required to use bindingFailureConditions",
                shown=go_strings(conditions if isinstance(conditions, list) else None),
            )
        )
    if not failing and wanted:
        causes.append(
            invalid_value(
                f"{path}.bindingFailureConditions",
                None,
                "bindingFailureConditions are required to use bindingConditions",
                shown=go_strings(failures if isinstance(failures, list) else None),
            )
        )
    return causes


def _taint(taint: dict[str, Any], path: str) -> list[Cause]:
    """`validateDeviceTaint` (a new taint: the effect is checked)."""
    causes = label_name(taint.get("key", ""), f"{path}.key")
    if taint.get("value"):
        causes += label_value(taint["value"], f"{path}.value")
    effect = taint.get("effect")
    if not effect:
        causes.append(required(f"{path}.effect"))
    elif effect not in TAINT_EFFECTS:
        causes.append(not_supported(f"{path}.effect", effect, TAINT_EFFECTS))
    return causes


def toleration(entry: Any, path: str) -> list[Cause]:
    """`validateDeviceToleration` on a defaulted toleration (the operator defaults to `Equal`)."""
    entry = as_dict(entry)
    causes = label_name(entry["key"], f"{path}.key") if entry.get("key") else []
    operator, value = entry.get("operator", ""), entry.get("value", "")
    if operator == "Exists":
        if value:
            causes.append(invalid_value(f"{path}.value", value, "must be empty for operator `Exists`"))
    elif operator == "Equal":
        causes += label_value(value, f"{path}.value")
    elif not operator:
        causes.append(required(f"{path}.operator"))
    else:
        causes.append(not_supported(f"{path}.operator", operator, TOLERATION_OPERATORS))
    effect = entry.get("effect")
    if effect and effect not in TAINT_EFFECTS:
        causes.append(not_supported(f"{path}.effect", effect, TAINT_EFFECTS))
    return causes


def tolerations(entries: Any, path: str) -> list[Cause]:
    causes: list[Cause] = []
    for i, entry in enumerate(as_list(entries)):
        causes += toleration(entry, f"{path}[{i}]")
    return causes


def default_tolerations(entries: Any) -> Any:
    """`+default="Equal"` on `DeviceToleration.operator` (zz_generated.defaults.go)."""
    if not isinstance(entries, list):
        return entries
    return [
        {**e, "operator": "Equal"} if isinstance(e, dict) and not e.get("operator") else e for e in entries
    ]


def default_slice_spec(spec: Any, now: datetime | None = None) -> Any:
    """`SetDefaults_DeviceTaint`: a taint without `timeAdded` gets the time of the write, to the second."""
    if not isinstance(spec, dict) or not isinstance(spec.get("devices"), list):
        return spec
    stamp = (now or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%SZ")
    devices = []
    for device in spec["devices"]:
        if isinstance(device, dict) and isinstance(device.get("taints"), list):
            taints = [
                {**t, "timeAdded": stamp} if isinstance(t, dict) and not t.get("timeAdded") else t
                for t in device["taints"]
            ]
            device = {**device, "taints": taints}
        devices.append(device)
    return {**spec, "devices": devices}


def _valid_values(
    default: Fraction, capacity: Fraction, values: list[Any], binary: bool, path: str
) -> list[Cause]:
    """`validateRequestPolicyValidValues` (integer keys: `DRAFractionalCapacityRange` is not in 1.36)."""
    amounts = [_quantity(v) for v in values]
    causes: list[Cause] = []
    for i in range(len(amounts) - 1):
        a, b = amounts[i], amounts[i + 1]
        if a is not None and b is not None and a > b:
            causes.append(
                invalid_value(
                    f"{path}[{i + 1}]", show_quantity(b, binary), "values must be sorted in ascending order"
                )
            )
    found = False
    if len(amounts) > MAX_VALID_VALUES:
        causes.append(too_many(path, len(amounts), MAX_VALID_VALUES))
    else:
        seen: set[int] = set()
        for i, amount in enumerate(amounts):
            if amount is None:
                continue
            if amount > capacity:
                causes.append(
                    invalid_value(
                        f"{path}[{i}]",
                        show_quantity(amount, binary),
                        f"option is larger than capacity value: {show_quantity(capacity, binary)}",
                    )
                )
            found = found or amount == default
        for i, amount in enumerate(amounts):
            if amount is None:
                continue
            key = int(amount)  # `quantityKeyInt`: `Quantity.Value()`, rounded up
            key += 1 if amount > key else 0
            if key in seen:
                causes.append(duplicate(f"{path}[{i}]", str(key)))
            seen.add(key)
    if not found:
        causes.append(
            invalid_value(
                path,
                show_quantity(default, binary),
                "default value is not valid according to the requestPolicy",
            )
        )
    return causes


def _valid_range(
    default: Fraction, capacity: Fraction, bounds: dict[str, Any], binary: bool, path: str
) -> list[Cause]:
    """`validateRequestPolicyRange` and `validateRequestPolicyRangeStep` (integer arithmetic)."""
    low = _quantity(bounds.get("min")) if bounds.get("min") is not None else None
    if low is None:
        return [required(f"{path}.min", "required when validRange is defined")]
    q = lambda amount: show_quantity(amount, binary)  # noqa: E731
    causes: list[Cause] = []
    if low > capacity:
        causes.append(
            invalid_value(f"{path}.min", q(low), f"min is larger than capacity value: {q(capacity)}")
        )
    if default < low:
        causes.append(invalid_value(f"{path}.default", q(default), f"default is less than min: {q(low)}"))
    high = _quantity(bounds.get("max")) if bounds.get("max") is not None else None
    if high is not None:
        if low > high:
            causes.append(invalid_value(f"{path}.max", q(low), f"min is larger than max: {q(high)}"))
        if high > capacity:
            causes.append(
                invalid_value(f"{path}.max", q(high), f"max is larger than capacity value: {q(capacity)}")
            )
        if default > high:
            causes.append(
                invalid_value(f"{path}.default", q(default), f"default is more than max: {q(high)}")
            )
    step = _quantity(bounds.get("step")) if bounds.get("step") is not None else None
    if step is None:
        return causes
    if step <= 0:
        return [*causes, invalid_value(f"{path}.step", q(step), "must be greater than zero")]
    if low + step > capacity:
        causes.append(
            invalid_value(
                f"{path}.step",
                q(step),
                f"one step {q(low + step)} is larger than capacity value: {q(capacity)}",
            )
        )
    whole = lambda amount: -((-amount.numerator) // amount.denominator)  # noqa: E731 - `Value()` rounds up
    for value in (default, high):
        if value is not None and (whole(value) - whole(low)) % whole(step) != 0:
            causes.append(
                invalid_value(
                    f"{path}.step",
                    q(value),
                    f"value is not a multiple of a given step ({q(step)}) from ({q(low)})",
                )
            )
    return causes


def _request_policy(capacity: dict[str, Any], path: str) -> list[Cause]:
    """`validateRequestPolicy` on a capacity of a device that allows multiple allocations."""
    policy = as_dict(capacity.get("requestPolicy"))
    values, bounds = as_list(policy.get("validValues")), policy.get("validRange")
    if values and bounds is not None:
        return [
            forbidden(
                path,
                'exactly one policy can be specified, cannot specify "validValues" and "validRange" at the same time',
            )
        ]
    if not values and bounds is None:
        return []
    which = "validValues" if values else "validRange"
    default = _quantity(policy.get("default")) if policy.get("default") is not None else None
    if default is None:
        return [required(f"{path}.default", f"required when {which} is defined")]
    amount = _quantity(capacity.get("value"))
    if amount is None:
        return []
    binary = _binary(capacity.get("value"))
    if values:
        return _valid_values(default, amount, values, binary, f"{path}.validValues")
    return _valid_range(default, amount, as_dict(bounds), binary, f"{path}.validRange")


def _capacity(device: dict[str, Any], path: str) -> list[Cause]:
    """`validateMultiAllocatableDeviceCapacity` / `validateSingleAllocatableDeviceCapacity` for each entry."""
    shared = device.get("allowMultipleAllocations") is True
    causes: list[Cause] = []
    for key, capacity in as_dict(device.get("capacity")).items():
        capacity = as_dict(capacity)
        if capacity.get("requestPolicy") is None:
            continue
        where = _key_path(path, str(key)) + ".requestPolicy"
        if shared:
            causes += _request_policy(capacity, where)
        else:
            causes.append(forbidden(where, "allowMultipleAllocations must be true"))
    return causes


def _node_selection(device: dict[str, Any], per_device: bool, path: str) -> list[Cause]:
    """The per-device `nodeName` / `nodeSelector` / `allNodes` rules of `validateDevice`."""
    present = [k for k in ("nodeName", "nodeSelector", "allNodes") if device.get(k) is not None]
    if not per_device:
        if present:
            return [
                invalid_value(
                    path,
                    None,
                    "`nodeName`, `nodeSelector` and `allNodes` can only be set if `perDeviceNodeSelection` is "
                    "set to true in the ResourceSlice spec",
                )
            ]
        return []
    causes: list[Cause] = []
    chosen: list[str] = []
    if device.get("nodeName") is not None:
        if device["nodeName"]:
            chosen.append("`nodeName`")
        else:
            causes.append(invalid_value(f"{path}.nodeName", "", "must not be empty"))
    if device.get("nodeSelector") is not None:
        chosen.append("`nodeSelector`")
    if device.get("allNodes") is not None:
        if device["allNodes"] is True:
            chosen.append("`allNodes`")
        else:
            causes.append(
                invalid_value(f"{path}.allNodes", device["allNodes"], "must be either unset or set to true")
            )
    which = (
        "exactly one of `nodeName`, `nodeSelector`, or `allNodes` is required when `perDeviceNodeSelection` is "
        "set to true in the ResourceSlice spec"
    )
    if not chosen:
        causes.append(required(path, which))
    elif len(chosen) > 1:
        causes.append(invalid_value(path, "{" + ", ".join(chosen) + "}", which))
    return causes


def _device(device: dict[str, Any], old: dict[str, Any] | None, per_device: bool, path: str) -> list[Cause]:
    """`validateDevice`, without the name (checked with the list) and the attributes."""
    causes: list[Cause] = []
    if old is None or old.get("capacity") != device.get("capacity"):
        causes += _capacity(device, f"{path}.capacity")
    if old is None or old.get("taints") != device.get("taints"):
        taints = as_list(device.get("taints"))
        if len(taints) > MAX_TAINTS:
            causes.append(too_many(f"{path}.taints", len(taints), MAX_TAINTS))
        else:
            for i, taint in enumerate(taints):
                causes += _taint(as_dict(taint), f"{path}.taints[{i}]")
    causes += _named_entries(
        as_list(device.get("consumesCounters")),
        "counterSet",
        MAX_CONSUMPTIONS_PER_DEVICE,
        f"{path}.consumesCounters",
        _counter_consumption,
    )
    causes += _node_selection(device, per_device, path)
    causes += binding_parameters(
        device.get("bindingConditions"), device.get("bindingFailureConditions"), path
    )
    return causes


def slice_devices(spec: dict[str, Any], old: dict[str, Any] | None) -> list[Cause]:
    """The parts of `validateResourceSliceSpec` about devices and counter sets."""
    causes: list[Cause] = []
    if spec.get("sharedCounters") is not None and spec.get("devices") is not None:
        causes.append(invalid_value("spec", "", "only one of `sharedCounters` or `devices` is allowed"))
    devices = as_list(spec.get("devices"))
    advanced = any(as_dict(d).get("taints") or as_dict(d).get("consumesCounters") for d in devices)
    most = SLICE_MAX_DEVICES_ADVANCED if advanced else SLICE_MAX_DEVICES
    if len(devices) > most:
        causes.append(too_many("spec.devices", len(devices), most))
    else:
        old_devices = {
            key_of(as_dict(d).get("name")): as_dict(d) for d in as_list(as_dict(old).get("devices"))
        }
        per_device = spec.get("perDeviceNodeSelection") is True
        seen: set[str] = set()
        for i, device in enumerate(devices):
            device = as_dict(device)
            where = f"spec.devices[{i}]"
            causes += unique_label(device.get("name"), seen, f"{where}.name")
            causes += _device(device, old_devices.get(key_of(device.get("name"))), per_device, where)
    causes += _named_entries(
        as_list(spec.get("sharedCounters")), "name", MAX_COUNTER_SETS, "spec.sharedCounters", _counter_set
    )
    return causes


# ---- ResourceClaim status -----------------------------------------------------------------------------------


def _device_id(entry: dict[str, Any]) -> str:
    """`structured.SharedDeviceID.String()`: driver/pool/device, then /shareID for a share."""
    text = f"{entry.get('driver', '')}/{entry.get('pool', '')}/{entry.get('device', '')}"
    return text + (f"/{entry['shareID']}" if entry.get("shareID") is not None else "")


def result_fields(result: dict[str, Any], path: str) -> list[Cause]:
    """The checks of `validateDeviceRequestAllocationResult` on the fields new in 1.34-1.36."""
    causes = binding_parameters(result.get("bindingConditions"), result.get("bindingFailureConditions"), path)
    causes += tolerations(result.get("tolerations"), f"{path}.tolerations")
    if result.get("shareID") is not None:
        causes += _uid(result["shareID"], f"{path}.shareID")
    return causes


def _result_ids(status: dict[str, Any]) -> set[str]:
    results = as_list(as_dict(as_dict(status.get("allocation")).get("devices")).get("results"))
    return {_device_id(as_dict(r)) for r in results}


def drop_deallocated_devices(status: dict[str, Any], old_status: dict[str, Any]) -> dict[str, Any]:
    """`dropDeallocatedStatusDevices` (the resourceclaim strategy, `PrepareForUpdate` of the status): entries of
    `status.devices` for devices (or shares) the old allocation had and the new one has not are removed, so a
    client that deallocates need not know of them. Returns the status (a new dict when something went)."""
    gone = _result_ids(old_status) - _result_ids(status)
    devices = status.get("devices")
    if not gone or not isinstance(devices, list):
        return status
    kept = [d for d in devices if _device_id(as_dict(d)) not in gone]
    if len(kept) == len(devices):
        return status
    out = {k: v for k, v in status.items() if k != "devices"}
    return {**out, "devices": kept} if kept else out


def device_statuses(status: dict[str, Any]) -> list[Cause]:
    """`status.devices` (`validateDeviceStatus`, each entry keyed by driver, pool, device and shareID)."""
    allocated = _result_ids(status)
    causes: list[Cause] = []
    entries = [as_dict(e) for e in as_list(status.get("devices"))]
    for i, entry in enumerate(entries):
        where = f"status.devices[{i}]"
        driver = entry.get("driver", "")
        causes += (
            [required(f"{where}.driver")] if not driver else _driver_name(str(driver), f"{where}.driver")
        )
        pool = entry.get("pool", "")
        if not pool:
            causes.append(required(f"{where}.pool"))
        else:
            for part in str(pool).split("/"):
                causes += dns_subdomain(part, f"{where}.pool")
        causes += dns_label(entry.get("device", ""), f"{where}.device")
        if entry.get("shareID") is not None:
            causes += _uid(entry["shareID"], f"{where}.shareID")
        if _device_id(entry) not in allocated:
            causes.append(
                invalid_value(
                    where, None, "must be an allocated device in the claim", shown=_device_id(entry)
                )
            )
        conditions = as_list(entry.get("conditions"))
        if len(conditions) > MAX_DEVICE_STATUS_CONDITIONS:
            causes.append(too_many(f"{where}.conditions", len(conditions), MAX_DEVICE_STATUS_CONDITIONS))
    seen: set[str] = set()
    for i, entry in enumerate(entries):
        key = _device_id(entry)
        if key in seen:
            causes.append(duplicate(f"status.devices[{i}]", None, shown=key))
        seen.add(key)
    return causes
