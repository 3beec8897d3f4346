"""The built-in actions and plugins, by the names a Volcano conf uses."""

from __future__ import annotations

from caldera import actions, plugins
from caldera.framework.plugin import Registry


def builtin_registry() -> Registry:
    registry = Registry()
    for action in actions.ALL:
        registry.register_action(action)
    for plugin in plugins.ALL:
        registry.register_plugin(plugin)
    return registry
