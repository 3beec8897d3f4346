"""Plugins and actions: their base classes, typed arguments and the registry that names them."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, ClassVar

from caldera.config.arguments import (
    ArgumentError,
    Arguments,
    check_arguments,
    coerce,
    structured,
    unsupported,
)

if TYPE_CHECKING:
    from caldera.framework.session import Session

log = logging.getLogger("caldera.framework")

__all__ = [
    "Action",
    "ArgumentError",
    "Arguments",
    "Plugin",
    "PluginBuilder",
    "Registry",
    "check_arguments",
    "coerce",
    "structured",
    "unsupported",
]


class Plugin:
    """A plugin registers callbacks on a session when it opens; it never touches the API."""

    name: ClassVar[str] = ""
    #: argument name → expected type (``int``, ``float``, ``bool``, ``str``, ``list``, ``dict``);
    #: a name ending in ``*`` covers every argument with that prefix.
    arguments_schema: ClassVar[dict[str, type]] = {}

    def __init__(self, arguments: Arguments) -> None:
        self.arguments = arguments

    def on_session_open(self, ssn: Session) -> None:
        raise NotImplementedError

    def on_session_close(self, ssn: Session) -> None:
        return None


class Action:
    """An action walks jobs and tasks through the session's callbacks and changes it by statements."""

    name: ClassVar[str] = ""
    arguments_schema: ClassVar[dict[str, type]] = {}

    def __init__(self, arguments: Arguments) -> None:
        self.arguments = arguments

    def execute(self, ssn: Session) -> None:
        raise NotImplementedError


PluginBuilder = Callable[[Arguments], Plugin]


class Registry:
    """Names → plugin and action classes. The binary fills one with the built-ins; tests make their own."""

    def __init__(self) -> None:
        self.plugins: dict[str, type[Plugin]] = {}
        self.actions: dict[str, type[Action]] = {}

    def register_plugin(self, cls: type[Plugin]) -> type[Plugin]:
        if not cls.name:
            raise ValueError(f"plugin class {cls.__name__} has no name")
        self.plugins[cls.name] = cls
        return cls

    def register_action(self, cls: type[Action]) -> type[Action]:
        if not cls.name:
            raise ValueError(f"action class {cls.__name__} has no name")
        self.actions[cls.name] = cls
        return cls

    def copy(self) -> Registry:
        out = Registry()
        out.plugins = dict(self.plugins)
        out.actions = dict(self.actions)
        return out
