"""Resource vectors with Volcano's semantics, and arithmetic that never raises out of a cycle.

Units: ``cpu`` in millicores, ``memory`` in bytes, ``pods`` as a count, and every other (scalar)
resource in thousandths of its quantity, as Volcano keeps them (``nvidia.com/gpu: 1`` is 1000).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Iterator, Mapping
from typing import Literal

from caldera.framework.quantity import (
    QuantityError,
    parse_bytes,
    parse_cpu_millis,
    parse_quantity,
    parse_scalar,
)

__all__ = ["MIN_RESOURCE", "Resource", "ResourceError", "underflow_count"]

log = logging.getLogger("caldera.resource")

#: Differences below this are equal: Volcano's minResource, so float noise never decides a fit.
MIN_RESOURCE = 0.1

CPU = "cpu"
MEMORY = "memory"
PODS = "pods"

Missing = Literal["zero", "infinity"]


class ResourceError(ValueError):
    """A resource list that cannot be read (bad quantity); names the resource and the value."""


_underflows = 0
_last_underflow_log = 0.0


def underflow_count() -> int:
    """How many subtractions would have gone below zero and were clamped (for metrics)."""
    return _underflows


def _report_underflow(dimension: str, have: float, take: float) -> None:
    global _underflows, _last_underflow_log
    _underflows += 1
    now = time.monotonic()
    if now - _last_underflow_log > 10.0:
        _last_underflow_log = now
        log.warning(
            "resource subtraction below zero clamped: %s has %g, asked to take %g (%d clamped so far)",
            dimension,
            have,
            take,
            _underflows,
        )


_new_resource = object.__new__


class Resource:
    """A resource vector. Mutating methods work in place and return ``self`` so they chain."""

    __slots__ = ("cpu", "memory", "pods", "scalars")

    def __init__(
        self,
        cpu: float = 0.0,
        memory: float = 0.0,
        pods: float = 0.0,
        scalars: dict[str, float] | None = None,
    ) -> None:
        self.cpu = float(cpu)
        self.memory = float(memory)
        self.pods = float(pods)
        self.scalars: dict[str, float] = scalars if scalars is not None else {}

    # -- construction ------------------------------------------------------------------------------
    @classmethod
    def from_resource_list(
        cls, items: Mapping[str, str | int | float] | None, *, allow_negative: bool = True
    ) -> Resource:
        """Read a Kubernetes ResourceList (``{"cpu": "500m", "memory": "1Gi", ...}``). With
        ``allow_negative=False`` a value below zero is a :class:`ResourceError` (the API server refuses
        a negative request or limit: ``ValidateResourceQuantityValue`` in Kubernetes'
        pkg/apis/core/validation; one that reached us anyway must not be summed into totals)."""
        res = cls()
        if not items:
            return res
        for name, value in items.items():
            try:
                if name == CPU:
                    amount = parse_cpu_millis(value)
                    res.cpu += amount
                elif name == MEMORY:
                    amount = parse_bytes(value)
                    res.memory += amount
                elif name == PODS:
                    amount = float(parse_quantity(value))
                    res.pods += amount
                else:
                    amount = parse_scalar(name, value)
                    res.scalars[name] = res.scalars.get(name, 0.0) + amount
            except QuantityError as exc:
                raise ResourceError(f"resource {name!r}: {exc}") from None
            if amount < 0 and not allow_negative:
                raise ResourceError(f"resource {name!r}: negative quantity {value!r} (must be 0 or more)")
        return res

    def clone(self) -> Resource:
        out = _new_resource(Resource)  # the fields are floats already: no conversions
        out.cpu = self.cpu
        out.memory = self.memory
        out.pods = self.pods
        out.scalars = dict(self.scalars) if self.scalars else {}
        return out

    # -- access ------------------------------------------------------------------------------------
    def get(self, name: str) -> float:
        if name == CPU:
            return self.cpu
        if name == MEMORY:
            return self.memory
        if name == PODS:
            return self.pods
        return self.scalars.get(name, 0.0)

    def set(self, name: str, value: float) -> None:
        if name == CPU:
            self.cpu = value
        elif name == MEMORY:
            self.memory = value
        elif name == PODS:
            self.pods = value
        else:
            self.scalars[name] = value

    def names(self) -> Iterator[str]:
        """The dimensions that share math works over: cpu, memory and every scalar (not pods)."""
        yield CPU
        yield MEMORY
        yield from self.scalars

    def items(self) -> Iterator[tuple[str, float]]:
        yield CPU, self.cpu
        yield MEMORY, self.memory
        yield from self.scalars.items()

    def is_empty(self) -> bool:
        """True when every dimension (pods aside) is below the minimum that counts."""
        if self.cpu >= MIN_RESOURCE or self.memory >= MIN_RESOURCE:
            return False
        return all(v < MIN_RESOURCE for v in self.scalars.values())

    def is_zero(self, name: str) -> bool:
        return self.get(name) < MIN_RESOURCE

    # -- arithmetic (in place) ---------------------------------------------------------------------
    def add(self, other: Resource) -> Resource:
        self.cpu += other.cpu
        self.memory += other.memory
        self.pods += other.pods
        if other.scalars:
            mine = self.scalars
            for name, value in other.scalars.items():
                mine[name] = mine.get(name, 0.0) + value
        return self

    def sub(self, other: Resource) -> Resource:
        """Subtract; a dimension that would go below zero is clamped to zero and reported, never raised."""
        cpu = self.cpu - other.cpu
        if cpu < 0:
            if cpu < -MIN_RESOURCE:
                _report_underflow(CPU, self.cpu, other.cpu)
            cpu = 0.0
        self.cpu = cpu
        mem = self.memory - other.memory
        if mem < 0:
            if mem < -MIN_RESOURCE:
                _report_underflow(MEMORY, self.memory, other.memory)
            mem = 0.0
        self.memory = mem
        pods = self.pods - other.pods
        if pods < 0:
            if pods < -MIN_RESOURCE:
                _report_underflow(PODS, self.pods, other.pods)
            pods = 0.0
        self.pods = pods
        if other.scalars:
            mine = self.scalars
            for name, value in other.scalars.items():
                have = mine.get(name, 0.0)
                left = have - value
                if left < 0:
                    if left < -MIN_RESOURCE:
                        _report_underflow(name, have, value)
                    left = 0.0
                mine[name] = left
        return self

    def multiply(self, ratio: float) -> Resource:
        self.cpu *= ratio
        self.memory *= ratio
        self.pods *= ratio
        for name in self.scalars:
            self.scalars[name] *= ratio
        return self

    def set_max(self, other: Resource) -> Resource:
        """Each dimension becomes the larger of the two."""
        self.cpu = max(self.cpu, other.cpu)
        self.memory = max(self.memory, other.memory)
        self.pods = max(self.pods, other.pods)
        for name, value in other.scalars.items():
            if value > self.scalars.get(name, 0.0):
                self.scalars[name] = value
        return self

    def min_dimension(self, other: Resource, missing: Missing = "infinity") -> Resource:
        """Each dimension becomes the smaller of the two. A scalar that ``other`` lacks is taken as
        ``missing``: ``infinity`` keeps ours (no limit), ``zero`` drops it to 0."""
        self.cpu = min(self.cpu, other.cpu)
        self.memory = min(self.memory, other.memory)
        for name, value in self.scalars.items():
            if name in other.scalars:
                self.scalars[name] = min(value, other.scalars[name])
            elif missing == "zero":
                self.scalars[name] = 0.0
        return self

    # -- new vectors -------------------------------------------------------------------------------
    def __add__(self, other: Resource) -> Resource:
        return self.clone().add(other)

    def __sub__(self, other: Resource) -> Resource:
        return self.clone().sub(other)

    def exceeded_part(self, other: Resource) -> Resource:
        """The part of ``self`` above ``other``, per dimension, never negative."""
        out = Resource(max(0.0, self.cpu - other.cpu), max(0.0, self.memory - other.memory))
        out.pods = max(0.0, self.pods - other.pods)
        for name, value in self.scalars.items():
            diff = value - other.scalars.get(name, 0.0)
            if diff > 0:
                out.scalars[name] = diff
        return out

    def diff(self, other: Resource) -> tuple[Resource, Resource]:
        """(what self has more of, what other has more of), both non-negative."""
        return self.exceeded_part(other), other.exceeded_part(self)

    # -- comparisons (Volcano's semantics) ---------------------------------------------------------
    def less_equal(self, other: Resource, missing: Missing = "zero") -> bool:
        """Every dimension of ``self`` fits in ``other`` (within MIN_RESOURCE). A scalar that ``self``
        has and ``other`` lacks counts as ``missing`` on the right: ``zero`` (does not fit unless ours is
        zero too) or ``infinity`` (always fits). A dimension ``self`` lacks is zero, which always fits."""
        if self.cpu > other.cpu + MIN_RESOURCE or self.memory > other.memory + MIN_RESOURCE:
            return False
        if self.pods > other.pods + MIN_RESOURCE and (other.pods > 0 or missing == "zero"):
            return False
        for name, value in self.scalars.items():
            right = other.scalars.get(name)
            if right is None:
                if missing == "infinity":
                    continue
                right = 0.0
            if value > right + MIN_RESOURCE:
                return False
        return True

    def less_equal_in(self, other: Resource, dimensions: Iterable[str]) -> bool:
        """``less_equal`` restricted to the named dimensions (a dimension ``other`` lacks is unlimited)."""
        for name in dimensions:
            if name in (CPU, MEMORY, PODS) or name in other.scalars:
                if self.get(name) > other.get(name) + MIN_RESOURCE:
                    return False
        return True

    def less(self, other: Resource, missing: Missing = "zero") -> bool:
        """Every dimension strictly smaller (a scalar missing on the right counts as ``missing``)."""
        if not (self.cpu < other.cpu and self.memory < other.memory):
            return False
        for name, value in self.scalars.items():
            right = other.scalars.get(name)
            if right is None:
                if missing == "infinity":
                    continue
                right = 0.0
            if not value < right:
                return False
        return True

    def less_partly(self, other: Resource) -> bool:
        """Some dimension that either side has is strictly smaller here."""
        if self.cpu < other.cpu - MIN_RESOURCE or self.memory < other.memory - MIN_RESOURCE:
            return True
        return any(self.scalars.get(n, 0.0) < v - MIN_RESOURCE for n, v in other.scalars.items())

    def less_equal_partly(self, other: Resource) -> bool:
        """Some dimension fits: used where any progress counts (Volcano's LessEqualPartly)."""
        if self.cpu <= other.cpu + MIN_RESOURCE or self.memory <= other.memory + MIN_RESOURCE:
            return True
        return any(v <= other.scalars.get(n, 0.0) + MIN_RESOURCE for n, v in self.scalars.items())

    def fit_shortfall(self, idle: Resource) -> list[str]:
        """The dimensions in which this request does not fit ``idle``, in kube-scheduler's words."""
        out = []
        if self.cpu > idle.cpu + MIN_RESOURCE:
            out.append(CPU)
        if self.memory > idle.memory + MIN_RESOURCE:
            out.append(MEMORY)
        if self.pods > idle.pods + MIN_RESOURCE:
            out.append(PODS)
        for name, value in self.scalars.items():
            if value > idle.scalars.get(name, 0.0) + MIN_RESOURCE:
                out.append(name)
        return out

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Resource):
            return NotImplemented
        if abs(self.cpu - other.cpu) >= MIN_RESOURCE or abs(self.memory - other.memory) >= MIN_RESOURCE:
            return False
        if abs(self.pods - other.pods) >= MIN_RESOURCE:
            return False
        names = set(self.scalars) | set(other.scalars)
        return all(abs(self.scalars.get(n, 0.0) - other.scalars.get(n, 0.0)) < MIN_RESOURCE for n in names)

    __hash__ = None  # type: ignore[assignment]

    def to_dict(self) -> dict[str, float]:
        out = {CPU: self.cpu, MEMORY: self.memory}
        if self.pods:
            out[PODS] = self.pods
        out.update(self.scalars)
        return out

    def __repr__(self) -> str:
        parts = [f"cpu={self.cpu:g}m", f"memory={self.memory:g}"]
        if self.pods:
            parts.append(f"pods={self.pods:g}")
        parts.extend(f"{n}={v:g}" for n, v in self.scalars.items())
        return f"Resource({', '.join(parts)})"
