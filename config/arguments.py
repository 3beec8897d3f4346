"""Typed arguments of plugins and actions, as a conf gives them.

This lives in ``config`` (the lowest room) so that parsing a conf needs nothing from the framework;
the framework's Plugin and Action classes declare their schemas with these types.
"""

from __future__ import annotations

import builtins
import logging
from collections.abc import Mapping
from typing import Any

log = logging.getLogger("caldera.config")


class ArgumentError(ValueError):
    """An argument of the wrong type; the message names the plugin or action and the argument."""


_TYPE_NAMES = {
    int: "an integer",
    float: "a number",
    bool: "a boolean",
    str: "a string",
    list: "a list",
    dict: "a mapping",
}


def coerce(owner: str, key: str, value: Any, kind: type) -> Any:
    """Check (and, for Volcano's string-valued maps, convert) one argument value."""
    where = f"argument {key!r} of {owner}"
    if kind is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in ("true", "false"):
            return value.strip().lower() == "true"
    elif kind is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, str):
            try:
                return int(value.strip())
            except ValueError:
                pass
    elif kind is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):
            try:
                return float(value.strip())
            except ValueError:
                pass
    elif kind is str:
        if isinstance(value, str):
            return value
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return str(value)
    elif kind is list:
        if isinstance(value, list):
            return value
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
    elif kind is dict:
        if isinstance(value, dict):
            return value
    else:  # pragma: no cover - schema authoring error
        raise TypeError(f"unsupported argument type {kind!r} for {where}")
    raise ArgumentError(f"{where} must be {_TYPE_NAMES.get(kind, kind.__name__)}, got {value!r}")


class Arguments(Mapping[str, Any]):
    """A plugin's or action's arguments, already checked against its schema."""

    def __init__(self, owner: str, values: Mapping[str, Any] | None = None) -> None:
        self.owner = owner
        self._values = dict(values or {})

    def __getitem__(self, key: str) -> Any:
        return self._values[key]

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def get_typed(self, key: str, kind: type, default: Any) -> Any:
        if key not in self._values or self._values[key] is None:
            return default
        return coerce(self.owner, key, self._values[key], kind)

    def int(self, key: str, default: int) -> int:
        return self.get_typed(key, int, default)  # type: ignore[no-any-return]

    def float(self, key: str, default: float) -> float:
        return self.get_typed(key, float, default)  # type: ignore[no-any-return]

    def bool(self, key: str, default: bool) -> bool:
        return self.get_typed(key, bool, default)  # type: ignore[no-any-return]

    def str(self, key: str, default: str) -> str:
        return self.get_typed(key, str, default)  # type: ignore[no-any-return]

    def list(self, key: builtins.str, default: builtins.list[Any]) -> builtins.list[Any]:
        return self.get_typed(key, list, default)  # type: ignore[no-any-return]


class UnsupportedArgument:
    """Base of the schema entries made by :func:`unsupported` (never instantiated)."""

    kind: type = bool
    reason: str = ""
    #: the one value that asks for what Caldera does anyway (``_ANY`` when no value is accepted)
    accepted: Any = None


_NO_VALUE = object()


def unsupported(kind: type, reason: str, accepted: Any = _NO_VALUE) -> type:
    """A schema entry for an argument Volcano documents and Caldera does not implement: the conf is
    refused with ``reason`` unless the value is ``accepted`` (the value that asks for Caldera's own
    behaviour, e.g. ``enableTopologyAwarePreemption: false``). A type, so schemas stay
    ``dict[str, type]``."""
    return builtins.type(
        "Unsupported",
        (UnsupportedArgument,),
        {"kind": kind, "reason": reason, "accepted": accepted},
    )


class StructuredArgument:
    """Base of the schema entries made by :func:`structured` (never instantiated)."""

    kind: type = dict

    @staticmethod
    def check(where: str, value: Any) -> Any:  # pragma: no cover - replaced by structured()
        return value


def structured(kind: type, check: Any) -> type:
    """A schema entry for an argument with a nested structure (a mapping of settings, as Volcano
    decodes into a struct): ``check(key, value)`` gets the value once it is of ``kind`` and returns
    it as the plugin will read it, or raises :class:`ArgumentError` naming the setting at fault
    (``resources['cpu'].weight``); the message then names the owner too.
    A type, so schemas stay ``dict[str, type]``."""
    return builtins.type("Structured", (StructuredArgument,), {"kind": kind, "check": staticmethod(check)})


def _lookup(schema: Mapping[str, type], key: str) -> type | None:
    kind = schema.get(key)
    if kind is None:
        for pattern, pkind in schema.items():
            if pattern.endswith("*") and key.startswith(pattern[:-1]):
                return pkind
    return kind


def check_arguments(owner: str, schema: Mapping[str, type], values: Mapping[str, Any]) -> Arguments:
    """Validate ``values`` against ``schema``. Every argument is implemented or refused: an unknown
    name, a value of the wrong type, or an argument Caldera does not implement (:func:`unsupported`)
    is an :class:`ArgumentError` naming it, so no argument is ever accepted and ignored."""
    checked: dict[str, Any] = {}
    for key, value in values.items():
        kind = _lookup(schema, key)
        if kind is None:
            known = ", ".join(sorted(k for k, v in schema.items() if not _is_unsupported(v)))
            raise ArgumentError(
                f"{owner} has no argument {key!r}"
                + (f" (its arguments: {known})" if known else " (it takes no arguments)")
            )
        if _is_unsupported(kind):
            spec: builtins.type[UnsupportedArgument] = kind  # type: ignore[assignment]
            got = coerce(owner, key, value, spec.kind) if value is not None else None
            if spec.accepted is _NO_VALUE or got != spec.accepted:
                raise ArgumentError(f"argument {key!r} of {owner} is not supported by Caldera: {spec.reason}")
            checked[key] = got
            continue
        if isinstance(kind, builtins.type) and issubclass(kind, StructuredArgument):
            if value is not None:
                value = coerce(owner, key, value, kind.kind)
                try:
                    value = kind.check(key, value)
                except ArgumentError as exc:
                    raise ArgumentError(f"{exc} (in the arguments of {owner})") from None
            checked[key] = value
            continue
        checked[key] = coerce(owner, key, value, kind) if value is not None else None
    return Arguments(owner, checked)


def _is_unsupported(kind: type) -> bool:
    return isinstance(kind, builtins.type) and issubclass(kind, UnsupportedArgument)
