"""Every action and plugin name Volcano registers, walked against Caldera's conf parser: each that
Caldera implements loads from a conf; each it does not yet implement is refused by name, saying so.
The set of refused names is asserted exactly: it is the list of what remains, and this test fails
when a name is implemented (or refused) without it being updated."""

import pytest

from caldera.config.conf import ConfError, parse_conf
from caldera.scheduler.registry import builtin_registry

#: The names registered in volcano-sh/volcano at commit ed72c7c815a9fd547a787134676f73d42e9d049c:
#: pkg/scheduler/actions/factory.go (``framework.RegisterAction``) ...
VOLCANO_COMMIT = "ed72c7c815a9fd547a787134676f73d42e9d049c"
VOLCANO_ACTIONS = [
    "reclaim",
    "allocate",
    "backfill",
    "preempt",
    "gangpreempt",
    "gangreclaim",
    "enqueue",
    "shuffle",
]
#: ... and pkg/scheduler/plugins/factory.go (``framework.RegisterPluginBuilder``, each PluginName).
VOLCANO_PLUGINS = [
    "drf",
    "gang",
    "deviceshare",
    "predicates",
    "priority",
    "nodeorder",
    "conformance",
    "binpack",
    "resource-strategy-fit",
    "tdm",
    "overcommit",
    "sla",
    "task-topology",
    "numa-aware",
    "cdp",
    "rescheduling",
    "usage",
    "pdb",
    "nodegroup",
    "network-topology-aware",
    "proportion",
    "capacity",
    "extender",
    "resourcequota",
]
#: What Caldera does not implement yet (issue 25).
NOT_YET_ACTIONS: set[str] = set()
NOT_YET_PLUGINS: set[str] = set()

REGISTRY = builtin_registry()


def action_conf(name):
    return f'actions: "{name}"\ntiers:\n- plugins:\n  - name: gang\n'


def plugin_conf(name):
    return f'actions: "allocate"\ntiers:\n- plugins:\n  - name: {name}\n'


def refused(conf):
    try:
        parse_conf(conf, REGISTRY)
    except ConfError as exc:
        return str(exc)
    return None


def test_the_names_are_volcanos_counts_at_that_commit():
    # 8 actions and 24 plugins, each once (as the two factory files register them)
    assert len(set(VOLCANO_ACTIONS)) == len(VOLCANO_ACTIONS) == 8
    assert len(set(VOLCANO_PLUGINS)) == len(VOLCANO_PLUGINS) == 24


@pytest.mark.parametrize("name", VOLCANO_ACTIONS)
def test_each_volcano_action_loads_or_is_refused_by_name(name):
    error = refused(action_conf(name))
    if name in NOT_YET_ACTIONS:
        assert error == f"unknown action {name!r}: a Volcano action that Caldera does not implement yet"
    else:
        assert error is None
        assert parse_conf(action_conf(name), REGISTRY).actions == [name]


@pytest.mark.parametrize("name", VOLCANO_PLUGINS)
def test_each_volcano_plugin_loads_or_is_refused_by_name(name):
    error = refused(plugin_conf(name))
    if name in NOT_YET_PLUGINS:
        assert (
            error
            == f"unknown plugin {name!r} in tier 1: a Volcano plugin that Caldera does not implement yet"
        )
    else:
        assert error is None
        assert parse_conf(plugin_conf(name), REGISTRY).plugin_names() == [name]


def test_exactly_these_names_remain_to_be_implemented():
    assert {n for n in VOLCANO_ACTIONS if refused(action_conf(n))} == NOT_YET_ACTIONS
    assert {n for n in VOLCANO_PLUGINS if refused(plugin_conf(n))} == NOT_YET_PLUGINS


def test_a_name_volcano_does_not_have_is_refused_as_unknown_with_the_known_names():
    error = refused(plugin_conf("magic"))
    assert error is not None and error.startswith("unknown plugin 'magic' in tier 1 (known plugins: binpack,")
