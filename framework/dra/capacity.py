"""Consumable capacity: how much of a shared device's capacity a request consumes, and whether it fits.

Semantics of ``staging/src/k8s.io/dynamic-resource-allocation/structured/internal/experimental/
consumable_capacity.go`` (kubernetes/kubernetes): ``CmpRequestOverCapacity`` (a request naming a capacity
the device does not have is an error, and the device is skipped; every capacity of the device is
consumed, by the requested amount rounded up by its ``requestPolicy``, or by the policy's default, or
in full; the sum over the allocations already made, those made in this search and this one must not
exceed the capacity's value), ``calculateConsumedCapacity``, ``roundUpRange``, ``roundUpValidValues``,
``violatesPolicy`` and ``GetConsumedCapacityFromRequest``.

Quantities are exact decimals (``framework/quantity.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import ROUND_CEILING, Decimal

from caldera.framework.dra.objects import CapacityRequestPolicy, DeviceCapacity
from caldera.framework.quantity import QuantityError, parse_quantity

#: capacity name -> amount
Consumed = dict[str, Decimal]


class CapacityError(ValueError):
    """The request names a capacity the device does not define."""


def _q(value: str | int | float | None) -> Decimal | None:
    if value is None:
        return None
    try:
        return parse_quantity(value)
    except QuantityError:
        return None


def request_amounts(requests: Mapping[str, str | int | float] | None) -> dict[str, Decimal] | None:
    """A request's ``capacity.requests`` as decimals (None: the request names no capacity)."""
    if not requests:
        return None
    out = {}
    for name, value in requests.items():
        amount = _q(value)
        if amount is not None:
            out[name] = amount
    return out


def _fill_empty(capacity: DeviceCapacity) -> Decimal:
    """``fillEmptyRequest``: the policy's default, else the whole capacity."""
    policy = capacity.request_policy
    if policy is not None and policy.default is not None:
        default = _q(policy.default)
        if default is not None:
            return default
    return _q(capacity.value) or Decimal(0)


def _consumed(requested: Decimal | None, capacity: DeviceCapacity) -> Decimal:
    """``calculateConsumedCapacity``."""
    if requested is None:
        return _fill_empty(capacity)
    policy = capacity.request_policy
    if policy is None:
        return requested
    valid_range = policy.valid_range
    if valid_range is not None and valid_range.min is not None:
        low = _q(valid_range.min) or Decimal(0)
        if requested < low:
            return low
        step = _q(valid_range.step)
        if step is None or step == 0:
            return requested
        # roundUpRange works on whole numbers (Quantity.Value())
        steps = ((requested.to_integral_value(ROUND_CEILING) - low) / step).to_integral_value(ROUND_CEILING)
        return low + step * steps
    if policy.valid_values:
        for value in (_q(v) for v in policy.valid_values):
            if value is not None and requested <= value:
                return value
    return requested


def _violates(amount: Decimal, policy: CapacityRequestPolicy | None) -> bool:
    """``violatesPolicy``."""
    if policy is None:
        return False
    if policy.default is not None and _q(policy.default) == amount:
        return False
    if policy.valid_range is not None:
        high = _q(policy.valid_range.max)
        if high is not None and amount > high:
            return True
        step = _q(policy.valid_range.step)
        if step:
            low = _q(policy.valid_range.min) or Decimal(0)
            if (amount.to_integral_value(ROUND_CEILING) - low) % step != 0:
                return True
        return False
    if policy.valid_values:
        return all(_q(v) != amount for v in policy.valid_values)
    return False


def consumed_from_request(
    requested: Mapping[str, Decimal] | None, capacities: Mapping[str, DeviceCapacity]
) -> Consumed:
    """``GetConsumedCapacityFromRequest``: what one allocation consumes of each capacity."""
    return {
        name: _consumed(requested.get(name) if requested else None, cap) for name, cap in capacities.items()
    }


def fits_capacity(
    in_use: Mapping[str, Decimal] | None,
    requested: Mapping[str, Decimal] | None,
    capacities: Mapping[str, DeviceCapacity],
    allocating: Mapping[str, Decimal] | None,
) -> bool:
    """``CmpRequestOverCapacity``: whether one more allocation of the request fits the device."""
    if requested and any(name not in capacities for name in requested):
        raise CapacityError("some requested capacity has not been defined")
    for name, cap in capacities.items():
        amount = _consumed(requested.get(name) if requested else None, cap)
        if _violates(amount, cap.request_policy):
            return False
        total = amount + (in_use or {}).get(name, Decimal(0)) + (allocating or {}).get(name, Decimal(0))
        if total > (_q(cap.value) or Decimal(0)):
            return False
    return True


def add_consumed(into: dict[str, Decimal], amounts: Mapping[str, Decimal]) -> None:
    for name, amount in amounts.items():
        into[name] = into.get(name, Decimal(0)) + amount


def sub_consumed(into: dict[str, Decimal], amounts: Mapping[str, Decimal]) -> None:
    for name, amount in amounts.items():
        into[name] = into.get(name, Decimal(0)) - amount


def quantity_text(amount: Decimal) -> str:
    """A decimal as a canonical quantity string (whole numbers plain, else in milli-units)."""
    if amount == amount.to_integral_value():
        return str(int(amount))
    return f"{int((amount * 1000).to_integral_value(ROUND_CEILING))}m"
