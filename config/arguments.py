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


def check_arguments(owner: str, schema: Mapping[str, type], values: Mapping[str, Any]) -> Arguments:
    """Validate ``values`` against ``schema``: a known key with a value of the wrong type is an error
    naming it; unknown keys are kept (Volcano ignores them too) and logged once."""
    checked: dict[str, Any] = {}
    for key, value in values.items():
        kind = schema.get(key)
        if kind is None:
            for pattern, pkind in schema.items():
                if pattern.endswith("*") and key.startswith(pattern[:-1]):
                    kind = pkind
                    break
        if kind is None:
            if schema:
                log.warning("%s: unknown argument %r ignored", owner, key)
            checked[key] = value
            continue
        checked[key] = coerce(owner, key, value, kind) if value is not None else None
    return Arguments(owner, checked)
