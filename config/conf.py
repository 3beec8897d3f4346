"""Volcano's scheduler conf (YAML: actions, tiers, configurations) parsed into a typed SchedulerConf.

Every error names what is wrong: the unknown action or plugin, or the argument of the wrong type.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, ClassVar, Protocol

import yaml

from caldera.config.arguments import ArgumentError, Arguments, check_arguments
from caldera.config.metrics import MetricsConfError, check_metrics
from caldera.config.model import (
    HIERARCHY_PLUGINS,
    NO_EFFECT_SWITCHES,
    SWITCH_KEYS,
    PluginOption,
    SchedulerConf,
    Tier,
)


class _Declares(Protocol):
    name: ClassVar[str]
    arguments_schema: ClassVar[dict[str, type]]


class Registry(Protocol):
    """What parsing needs of the framework's registry: the names and schemas of actions and plugins."""

    @property
    def plugins(self) -> Mapping[str, type[_Declares]]: ...

    @property
    def actions(self) -> Mapping[str, type[_Declares]]: ...


log = logging.getLogger("caldera.config")

__all__ = ["DEFAULT_CONF", "ConfError", "default_conf", "parse_conf"]

#: Volcano's built-in default.
DEFAULT_CONF = """\
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: overcommit
  - name: drf
  - name: predicates
  - name: proportion
  - name: nodeorder
"""


#: Names Volcano registers (pkg/scheduler/actions/factory.go, pkg/scheduler/plugins/factory.go) that
#: Caldera does not implement yet: a conf naming one is refused with that said (issue 25 tracks them).
VOLCANO_ACTIONS_NOT_IMPLEMENTED: frozenset[str] = frozenset()
VOLCANO_PLUGINS_NOT_IMPLEMENTED: frozenset[str] = frozenset()


class ConfError(ValueError):
    """A scheduler conf that cannot be used; the message says exactly what and where."""


def _unknown(kind: str, name: str, known: Mapping[str, object], where: str = "") -> ConfError:
    if name in (VOLCANO_ACTIONS_NOT_IMPLEMENTED if kind == "action" else VOLCANO_PLUGINS_NOT_IMPLEMENTED):
        return ConfError(
            f"unknown {kind} {name!r}{where}: a Volcano {kind} that Caldera does not implement yet"
        )
    return ConfError(f"unknown {kind} {name!r}{where} (known {kind}s: {', '.join(sorted(known))})")


def _mapping(value: Any, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ConfError(f"{where} must be a mapping, got {type(value).__name__}")
    return value


def parse_conf(text: str, registry: Registry) -> SchedulerConf:
    """Parse and validate a conf against the registered actions and plugins."""
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfError(f"scheduler conf is not valid YAML: {exc}") from None
    if doc is None:
        raise ConfError("scheduler conf is empty")
    doc = _mapping(doc, "scheduler conf")
    for key in doc:
        if key not in ("actions", "tiers", "configurations", "metrics"):
            raise ConfError(
                f"scheduler conf has an unknown key {key!r} (expected actions, tiers, configurations, metrics)"
            )

    actions_raw = doc.get("actions")
    if isinstance(actions_raw, list):
        actions = [str(a).strip() for a in actions_raw if str(a).strip()]
    elif isinstance(actions_raw, str):
        actions = [a.strip() for a in actions_raw.split(",") if a.strip()]
    else:
        raise ConfError(
            "scheduler conf needs 'actions': a comma-separated string such as \"enqueue, allocate, backfill\""
        )
    if not actions:
        raise ConfError("scheduler conf lists no actions")
    for name in actions:
        if name not in registry.actions:
            raise _unknown("action", name, registry.actions)

    tiers_raw = doc.get("tiers") or []
    if not isinstance(tiers_raw, list):
        raise ConfError("'tiers' must be a list of {plugins: [...]}")
    tiers: list[Tier] = []
    seen: set[str] = set()
    #: switch → the plugins that carry it, of the switches that have no effect (one warning at the end)
    no_effect: dict[str, list[str]] = {}
    for ti, tier_raw in enumerate(tiers_raw, start=1):
        tier_map = _mapping(tier_raw, f"tier {ti}")
        plugins_raw = tier_map.get("plugins") or []
        if not isinstance(plugins_raw, list):
            raise ConfError(f"tier {ti}: 'plugins' must be a list")
        options: list[PluginOption] = []
        for pi, plugin_raw in enumerate(plugins_raw, start=1):
            pmap = _mapping(plugin_raw, f"tier {ti} plugin {pi}")
            plugin_name = pmap.get("name")
            if not isinstance(plugin_name, str) or not plugin_name:
                raise ConfError(f"tier {ti} plugin {pi} has no name")
            name = plugin_name
            cls = registry.plugins.get(name)
            if cls is None:
                raise _unknown("plugin", name, registry.plugins, f" in tier {ti}")
            if name in seen:
                raise ConfError(f"plugin {name!r} appears twice in the conf")
            seen.add(name)
            switches: dict[str, bool] = {}
            for key, value in pmap.items():
                if key in ("name", "arguments"):
                    continue
                if key in NO_EFFECT_SWITCHES:
                    if not isinstance(value, bool):
                        raise ConfError(
                            f"option {key!r} of plugin {name!r} must be true or false, got {value!r}"
                        )
                    no_effect.setdefault(key, []).append(name)
                    continue
                if key not in SWITCH_KEYS:
                    raise ConfError(f"plugin {name!r} in tier {ti} has an unknown option {key!r}")
                if not isinstance(value, bool):
                    raise ConfError(f"option {key!r} of plugin {name!r} must be true or false, got {value!r}")
                switches[key] = value
            args_raw = _mapping(pmap.get("arguments"), f"arguments of plugin {name!r}")
            if switches.get("enableHierarchy"):
                if name not in HIERARCHY_PLUGINS:
                    reason = "only capacity, drf (hdrf) and nodegroup have a hierarchical mode"
                    raise ConfError(
                        f"option 'enableHierarchy' of plugin {name!r} is not supported by Caldera: {reason}"
                    )
                # Volcano reads capacity's and drf's hierarchy from the plugin option: hand it to the plugin
                args_raw = {**args_raw, "enableHierarchy": True}
            try:
                args = check_arguments(f"plugin {name!r}", cls.arguments_schema, args_raw)
            except ArgumentError as exc:
                raise ConfError(str(exc)) from None
            options.append(PluginOption(name=name, arguments=args, switches=switches))
        tiers.append(Tier(plugins=options))

    configurations: dict[str, Arguments] = {}
    conf_raw = doc.get("configurations") or []
    if not isinstance(conf_raw, list):
        raise ConfError("'configurations' must be a list of {name, arguments}")
    for ci, item in enumerate(conf_raw, start=1):
        cmap = _mapping(item, f"configuration {ci}")
        action_name = cmap.get("name")
        if not isinstance(action_name, str) or action_name not in registry.actions:
            raise ConfError(f"configuration {ci} names an unknown action {action_name!r}")
        name = action_name
        args_raw = _mapping(cmap.get("arguments"), f"arguments of action {name!r}")
        try:
            configurations[name] = check_arguments(
                f"action {name!r}", registry.actions[name].arguments_schema, args_raw
            )
        except ArgumentError as exc:
            raise ConfError(str(exc)) from None
    if no_effect:
        log.warning(
            "scheduler conf: options with no effect, in Caldera as in Volcano's current actions "
            "(nothing calls them): %s",
            "; ".join(
                f"{key} ({NO_EFFECT_SWITCHES[key]}; plugins {', '.join(plugins)})"
                for key, plugins in no_effect.items()
            ),
        )
    try:
        metrics = check_metrics(doc.get("metrics"))
    except MetricsConfError as exc:
        raise ConfError(str(exc)) from None
    return SchedulerConf(
        actions=actions, tiers=tiers, configurations=configurations, source=text, metrics=metrics
    )


def default_conf(registry: Registry) -> SchedulerConf:
    return parse_conf(DEFAULT_CONF, registry)
