"""Kubernetes resource quantities ("100m", "64Mi", "1e3") as exact fractions, for the kubelet's admission check."""

from __future__ import annotations

import functools
import re
from fractions import Fraction
from typing import Any

_SUFFIX = {
    "": Fraction(1),
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 1000),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
    "Ki": Fraction(2**10),
    "Mi": Fraction(2**20),
    "Gi": Fraction(2**30),
    "Ti": Fraction(2**40),
    "Pi": Fraction(2**50),
    "Ei": Fraction(2**60),
}
_QUANTITY = re.compile(r"^([+-]?[0-9.]+)(?:([eE][+-]?[0-9]+)|(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?)$")


def parse_quantity(value: Any) -> Fraction:
    if isinstance(value, bool):
        raise ValueError(f"not a quantity: {value!r}")
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        return Fraction(value).limit_denominator(10**9)
    try:
        return _parse_text(str(value))
    except ValueError:
        raise ValueError(f"not a quantity: {value!r}") from None


@functools.lru_cache(maxsize=4096)
def _parse_text(text: str) -> Fraction:
    """A quantity written as text; the same few texts ("100m", "1Gi") come with every pod, and a
    Fraction is immutable, so each is parsed once (the kubelet's admission parsed them per pod)."""
    m = _QUANTITY.match(text.strip())
    if not m:
        raise ValueError(f"not a quantity: {text!r}")
    number = Fraction(m.group(1))
    if m.group(2):
        return number * Fraction(10) ** int(m.group(2)[1:])
    return number * _SUFFIX[m.group(3) or ""]


def pod_requests(spec: dict[str, Any]) -> dict[str, Fraction]:
    """What a pod asks of its node: the sum over containers, at least the largest init container."""
    total: dict[str, Fraction] = {}
    for c in spec.get("containers") or ():
        for name, q in ((c.get("resources") or {}).get("requests") or {}).items():
            total[name] = total.get(name, Fraction(0)) + parse_quantity(q)
    for c in spec.get("initContainers") or ():
        for name, q in ((c.get("resources") or {}).get("requests") or {}).items():
            total[name] = max(total.get(name, Fraction(0)), parse_quantity(q))
    for name, q in (spec.get("overhead") or {}).items():
        total[name] = total.get(name, Fraction(0)) + parse_quantity(q)
    return total
