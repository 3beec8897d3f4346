"""Volcano's PluginOption switches (pkg/scheduler/conf/scheduler_conf.go, volcano-sh/volcano
ed72c7c8): each one Caldera accepts removes, when false, that plugin's callback of that kind from
every decision the session makes; each it refuses is refused by name with the reason. The switches
whose callbacks no Volcano action calls are accepted with one warning. Every switch Volcano's
PluginOption has is one of the three."""

import pytest

from caldera.config.conf import parse_conf
from caldera.config.model import NO_EFFECT_SWITCHES, SWITCHES
from caldera.framework.callbacks import CallbackPoint
from caldera.framework.session import close_session, open_session
from caldera.hack import scenario
from caldera.scheduler.registry import builtin_registry

#: The yaml keys of Volcano's PluginOption at ed72c7c815a9fd547a787134676f73d42e9d049c
VOLCANO_SWITCHES = [
    "enableJobOrder",
    "enableHierarchy",
    "enableJobReady",
    "enableJobPipelined",
    "enableTaskOrder",
    "enablePreemptable",
    "enableReclaimable",
    "enablePreemptive",
    "enableQueueOrder",
    "enabledClusterOrder",
    "enablePredicate",
    "enableBestNode",
    "enableNodeOrder",
    "enableTargetJob",
    "enableReservedNodes",
    "enableJobEnqueued",
    "enabledVictim",
    "enableJobStarving",
    "enabledOverused",
    "enabledAllocatable",
    "enabledHyperNodeOrder",
    "enabledSubJobReady",
    "enabledSubJobPipelined",
    "enabledSubJobOrder",
    "enabledHyperNodeGradient",
]
#: Volcano's switches no Volcano action calls: accepted with a warning (NO_EFFECT_SWITCHES)
NO_EFFECT = {"enabledClusterOrder", "enableTargetJob", "enableReservedNodes"}
REGISTRY = builtin_registry()
#: every plugin Caldera has that opens without extra arguments, in one tier
PLUGINS = sorted(REGISTRY.plugins)


def conf(off: tuple[str, str] | None = None) -> str:
    lines = ['actions: "allocate"', "tiers:", "- plugins:"]
    for name in PLUGINS:
        lines.append(f"  - name: {name}")
        if off is not None and off[0] == name:
            lines.append(f"    {off[1]}: false")
    return "\n".join(lines) + "\n"


def opened(text):
    parsed = parse_conf(text, REGISTRY)
    snap = scenario.cluster(
        nodes=[scenario.node("n1", cpu="4")],
        queues=[scenario.queue("default")],
        podgroups=[scenario.podgroup("pg", min_member=1)],
        pods=[scenario.pod("p", cpu="1", group="pg")],
    )
    return open_session(snap, parsed.tiers, REGISTRY.plugins, parsed.configurations)


def registered(ssn) -> set[tuple[str, str, str]]:
    """(switch, plugin, callback attribute) of every switchable callback the plugins registered."""
    out = set()
    for attr, point in vars(ssn).items():
        if isinstance(point, CallbackPoint) and point.kind in SWITCHES:
            out.update((SWITCHES[point.kind], name, attr) for name in point._fns)
    for name in ssn.bulk_predicate_fns:
        out.add(("enablePredicate", name, "bulk_predicate_fns"))
    return out


def walked(ssn, attr: str) -> list:
    """What the session's decisions walk for that callback kind."""
    if attr == "bulk_predicate_fns":
        return ssn.bulk_predicates()
    return getattr(ssn, attr).flat()


def functions(ssn, attr: str, plugin: str) -> list:
    if attr == "bulk_predicate_fns":
        return list(ssn.bulk_predicate_fns[plugin].values())
    return [getattr(ssn, attr)._fns[plugin]]


_all_on = opened(conf())
PAIRS = sorted(registered(_all_on))
close_session(_all_on)


def test_every_volcano_switch_switches_a_callback_or_is_one_no_volcano_action_calls():
    accepted = set(SWITCHES.values())
    assert set(VOLCANO_SWITCHES) - accepted == NO_EFFECT
    assert NO_EFFECT <= set(NO_EFFECT_SWITCHES)


def test_every_accepted_switch_switches_some_plugins_callback():
    # enableHierarchy is an argument to capacity, drf and nodegroup (tested with them); no plugin
    # registers a best-node function (none of Volcano's does either: AddBestNodeFn has no caller)
    assert {s for s, _, _ in PAIRS} == set(SWITCHES.values()) - {"enableHierarchy", "enableBestNode"}


@pytest.mark.parametrize(("switch", "plugin", "attr"), PAIRS, ids=[f"{s}-{p}-{a}" for s, p, a in PAIRS])
def test_switching_off_removes_that_plugins_callback_from_the_decision(switch, plugin, attr):
    on = opened(conf())
    off = opened(conf((plugin, switch)))
    try:
        mine_on = functions(on, attr, plugin)
        assert all(any(fn is w for w in walked(on, attr)) for fn in mine_on)
        mine_off = functions(off, attr, plugin)
        assert not any(fn is w for fn in mine_off for w in walked(off, attr))
        # the other plugins' callbacks of that kind are still walked
        others_on = len(walked(on, attr)) - len(mine_on)
        assert len(walked(off, attr)) == others_on
    finally:
        close_session(on)
        close_session(off)
