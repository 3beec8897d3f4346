"""Kubernetes resource quantities: every valid form, and a clear error naming a bad one.

The grammar follows the API machinery's: an optional sign, a decimal number (digits, an optional
fraction), then either a binary suffix (Ki Mi Gi Ti Pi Ei), a decimal suffix (n u m "" k M G T P E)
or a decimal exponent (e3, E-2).
"""

from __future__ import annotations

import math
import re
from decimal import Decimal, InvalidOperation
from functools import lru_cache

__all__ = ["QuantityError", "format_quantity", "parse_bytes", "parse_cpu_millis", "parse_quantity"]


class QuantityError(ValueError):
    """A quantity string that Kubernetes would reject; the message names the value."""


_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
}
_QUANTITY = re.compile(
    r"^(?P<num>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
    r"(?:(?P<bin>Ki|Mi|Gi|Ti|Pi|Ei)|(?P<exp>[eE][+-]?[0-9]+)|(?P<dec>[numkMGTPE]?))$"
)


@lru_cache(maxsize=4096)
def _parse_str(text: str) -> Decimal:
    match = _QUANTITY.match(text.strip())
    if match is None or not text.strip():
        raise QuantityError(
            f"invalid quantity {text!r}: expected a number with an optional suffix such as 100m, 2Gi or 1e3"
        )
    try:
        number = Decimal(match.group("num"))
    except InvalidOperation as exc:  # pragma: no cover - the regex admits only valid decimals
        raise QuantityError(f"invalid quantity {text!r}") from exc
    try:
        if match.group("bin"):
            return _in_range(number * _BINARY[match.group("bin")], text)
        if match.group("exp"):
            return _in_range(number * (Decimal(10) ** int(match.group("exp")[1:])), text)
        return _in_range(number * _DECIMAL[match.group("dec") or ""], text)
    except ArithmeticError:  # an exponent beyond what Decimal holds (1e999999999)
        raise QuantityError(f"invalid quantity {text!r}: out of range") from None


def _in_range(value: Decimal, text: object) -> Decimal:
    """``value``, unless it is beyond what a float holds (the scheduler sums in floats)."""
    if not math.isfinite(float(value)):
        raise QuantityError(f"invalid quantity {text!r}: out of range")
    return value


def parse_quantity(value: str | int | float) -> Decimal:
    """The exact value of a quantity, in base units (cores, bytes, counts)."""
    if isinstance(value, bool):
        raise QuantityError(f"invalid quantity {value!r}: a boolean is not a quantity")
    if isinstance(value, int):
        return _in_range(Decimal(value), value)
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise QuantityError(f"invalid quantity {value!r}")
        return Decimal(repr(value))
    if not isinstance(value, str):
        raise QuantityError(f"invalid quantity {value!r}: expected a string or a number")
    return _parse_str(value)


@lru_cache(maxsize=4096, typed=True)  # typed: True is no quantity, 1 is
def _rounded_up(value: str | int | float, scale: int) -> float:
    """``value`` times ``scale``, rounded up to a whole number; a QuantityError if a float cannot
    hold it. Remembered: a cluster's nodes (and a gang's pods) repeat the same few quantities, and
    the Decimal arithmetic is most of reading a node's allocatable."""
    try:
        amount = float((parse_quantity(value) * scale).to_integral_value(rounding="ROUND_CEILING"))
    except ArithmeticError:
        amount = math.inf
    if not math.isfinite(amount):
        raise QuantityError(f"invalid quantity {value!r}: out of range")
    return amount


def parse_cpu_millis(value: str | int | float) -> float:
    """CPU in millicores; Kubernetes rounds a fraction of a millicore up."""
    return _rounded_up(value, 1000)


def parse_bytes(value: str | int | float) -> float:
    """Memory (or any byte count) in bytes, rounded up to a whole byte."""
    return _rounded_up(value, 1)


def parse_scalar(name: str, value: str | int | float) -> float:
    """An extended or scalar resource in Volcano's unit: thousandths of the quantity (like cpu)."""
    return _rounded_up(value, 1000)


def format_quantity(value: float, unit: str) -> str:
    """A short human form for messages: cpu as cores or millicores, memory in binary units."""
    if unit == "cpu":
        return f"{value / 1000:g}" if value % 1000 == 0 else f"{value:g}m"
    if unit == "memory":
        for suffix, size in (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
            if value >= size and value % size == 0:
                return f"{int(value // size)}{suffix}"
        for suffix, size in (("Gi", 2**30), ("Mi", 2**20)):
            if value >= size:
                return f"{value / size:.1f}{suffix}"
        return f"{value:g}"
    return f"{value:g}"
