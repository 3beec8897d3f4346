"""The rescheduling plugin with the shuffle action: which running pods leave an over-loaded node, and
when (plugins/rescheduling.py; Volcano's pkg/scheduler/plugins/rescheduling/, which has no unit
tests of its own: each case here is a situation its functions decide, named in the docstring).

The cluster: three nodes of 4 cpu and 8Gi. Node "hot" is measured at 90 % cpu and 80 % memory;
"cool-a" and "cool-b" at 10 %. The conf's thresholds are 20 % (a node below both is low) and its
targets 50 % (a node above either is high). Every pod on "hot" asks for 1 cpu and 1Gi (25 % and
12.5 % of the node)."""

from __future__ import annotations

import logging
import time

import pytest

from caldera.config.arguments import ArgumentError
from caldera.config.conf import ConfError, parse_conf
from caldera.framework.plugin import Arguments
from caldera.framework.session import close_session, open_session
from caldera.framework.usage import NodeUsage, UsageView
from caldera.hack.scenario import cluster, node, pdb, pod, podgroup, queue
from caldera.plugins.rescheduling import _LastRun
from caldera.scheduler.registry import builtin_registry

REGISTRY = builtin_registry()
G = 1024**3


def conf(extra_plugins: str = "", params: str | None = None, period: str = "10m") -> str:
    params = (
        params
        if params is not None
        else (
            "          thresholds: {cpu: 20, memory: 20, pods: 20}\n"
            "          targetThresholds: {cpu: 50, memory: 50, pods: 50}\n"
        )
    )
    return (
        'actions: "shuffle"\ntiers:\n- plugins:\n'
        + extra_plugins
        + "  - name: rescheduling\n    arguments:\n      interval: 1m\n"
        + f"      metricsPeriod: {period}\n"
        + "      strategies:\n      - name: lowNodeUtilization\n        params:\n"
        + params
    )


def hot_pod(name: str, priority: int | None, qos: str = "burstable", labels=None):
    limits = {"cpu": "1", "memory": "1Gi"} if qos == "guaranteed" else None
    return pod(
        name,
        cpu="1",
        memory="1Gi",
        limits=limits,
        group=name,
        node_name="hot",
        phase="Running",
        priority=priority,
        labels=labels,
    )


def snapshot(pods, use=None, nodes=None, pdbs=(), measured=True):
    nodes = nodes or [node(n, cpu="4", memory="8Gi") for n in ("hot", "cool-a", "cool-b")]
    snap = cluster(
        nodes=nodes,
        pods=pods,
        podgroups=[podgroup(p.metadata.name, min_member=1) for p in pods],
        queues=[queue("default")],
        pdbs=pdbs,
    )
    use = use or {"hot": (90, 80), "cool-a": (10, 10), "cool-b": (10, 10)}
    if measured:  # as the conf's metrics source reported it a moment ago
        now = time.time()
        snap.node_usage = UsageView({n: NodeUsage(c, m, now - 1) for n, (c, m) in use.items()}, now)
    return snap


def shuffle(snap, text, standing=None):
    """One session; the plugin's last run an interval ago unless ``standing`` says otherwise."""
    parsed = parse_conf(text, REGISTRY)
    if standing is None:
        standing = {_LastRun: _LastRun(-1e9)}
    ssn = open_session(snap, parsed.tiers, REGISTRY.plugins, parsed.configurations, standing=standing)
    for name in parsed.actions:
        REGISTRY.actions[name](Arguments(name)).execute(ssn)
    result = close_session(ssn)
    return [e.task.name for e in result.evictions], result


SPECS = [
    ("high", 100, "burstable"),
    ("mid", 50, "burstable"),
    ("low-guaranteed", 10, "guaranteed"),
    ("low-burstable", 10, "burstable"),
    ("no-priority", None, "burstable"),
]
HOT = [hot_pod(*spec) for spec in SPECS]


def test_pods_leave_the_hot_node_lowest_priority_first_until_it_is_below_its_target():
    """sortPods and isContinueEvictPods: no priority first, then priority 10 Burstable before
    Guaranteed; after three (cpu 90 → 15 %, memory 80 → 42.5 %) the node is below its target and
    the priority 50 and 100 pods stay."""
    evicted, result = shuffle(snapshot(HOT), conf())
    assert evicted == ["no-priority", "low-burstable", "low-guaranteed"]
    events = [e for e in result.report.events if e[2] == "Evict"]
    assert [e[1] for e in events] == [
        "default/no-priority",
        "default/low-burstable",
        "default/low-guaranteed",
    ]
    assert "node hot is at or above its target cpu 90% >= 50%, memory 80% >= 50%" in events[0][3]


def test_the_low_nodes_room_bounds_the_evictions():
    """evictPodsFromSourceNodes: with thresholds of 48 %, "cool-a" at 45 % cpu is the one low node
    ("cool-b" at 49 % is neither low nor high) and has 5 % of 4 cpu (200m) below its target; the
    first eviction (1 cpu) uses that up, so only one pod leaves (Volcano goes on past zero, stopping
    only at exactly zero: Caldera's choice is a subset of its)."""
    params = (
        "          thresholds: {cpu: 48, memory: 48}\n          targetThresholds: {cpu: 50, memory: 50}\n"
    )
    use = {"hot": (90, 80), "cool-a": (45, 15), "cool-b": (49, 49)}
    evicted, _ = shuffle(snapshot(HOT, use=use), conf(params=params))
    assert evicted == ["no-priority"]


@pytest.mark.parametrize(
    ("case", "use"),
    [
        ("no node is low", {"hot": (90, 80), "cool-a": (30, 30), "cool-b": (30, 30)}),
        ("every node is low", {"hot": (15, 15), "cool-a": (10, 10), "cool-b": (10, 10)}),
        ("no node is high", {"hot": (45, 45), "cool-a": (10, 10), "cool-b": (10, 10)}),
    ],
)
def test_nothing_moves_without_both_low_and_high_nodes(case, use):
    """victimsFnForLnu's three early returns."""
    evicted, _ = shuffle(snapshot(HOT, use=use), conf())
    assert evicted == [], case


def test_an_unschedulable_node_is_never_low():
    """lowThresholdFilter: the two cool nodes cordoned; no low node, nothing moves."""
    nodes = [node("hot", cpu="4", memory="8Gi")] + [
        node(n, cpu="4", memory="8Gi", unschedulable=True) for n in ("cool-a", "cool-b")
    ]
    evicted, _ = shuffle(snapshot(HOT, nodes=nodes), conf())
    assert evicted == []


def test_the_load_is_read_for_the_metrics_period():
    """getNodeUtilization reads the averages of ``metricsPeriod`` (default 5m); the metrics sources
    store theirs under 10m (NODE_METRICS_PERIOD), so with the default period every node reads 0 %
    (all low: nothing moves), as in Volcano; without a metrics source nothing moves either."""
    assert shuffle(snapshot(HOT), conf(period="10m"))[0]
    assert shuffle(snapshot(HOT), conf(period="5m"))[0] == []
    assert shuffle(snapshot(HOT, measured=False), conf(period="10m"))[0] == []


def test_the_plugin_runs_once_per_interval():
    """timeToRun: the first session after the scheduler starts waits an interval; a run records the
    time, so the next session does not run again until the interval has passed."""
    standing: dict = {}
    assert shuffle(snapshot(HOT), conf(), standing)[0] == []  # started now: an interval to wait
    standing[_LastRun].at -= 61
    assert shuffle(snapshot(HOT), conf(), standing)[0]
    assert shuffle(snapshot(HOT), conf(), standing)[0] == []  # ran just now


def test_a_pod_its_budget_protects_stays_and_the_next_one_goes_instead():
    """The pdb plugin guards shuffle's victims: "no-priority" is under a budget that allows no
    disruption, so it stays; the others chosen stay chosen (the choice is not recomputed)."""
    pods = [hot_pod(name, prio, qos, labels={"app": name}) for name, prio, qos in SPECS]
    budget = pdb("keep", {"app": "no-priority"}, allowed=0)
    evicted, _ = shuffle(snapshot(pods, pdbs=[budget]), conf("  - name: pdb\n"))
    assert evicted == ["low-burstable", "low-guaranteed"]


def test_enabled_victim_false_switches_the_plugin_off():
    text = conf().replace("  - name: rescheduling\n", "  - name: rescheduling\n    enabledVictim: false\n")
    assert shuffle(snapshot(HOT), text)[0] == []


def test_arguments_volcano_ignores_load_with_a_warning(caplog):
    """Volcano's design doc's example strategies and parameters: accepted, and said to do nothing."""
    params = (
        "          thresholds: {cpu: 20, memory: 20, pods: 20}\n"
        "          targetThresholds: {cpu: 50, memory: 50, pods: 50}\n"
        "          nodeFit: true\n"
    )
    text = conf(params=params).replace(
        "      strategies:\n", "      strategies:\n      - name: offlineOnly\n"
    )
    with caplog.at_level(logging.WARNING, "caldera.plugins.rescheduling"):
        assert shuffle(snapshot(HOT), text)[0] == ["no-priority", "low-burstable", "low-guaranteed"]
    assert "'offlineOnly' has no effect" in caplog.text
    assert "'nodeFit' has no effect" in caplog.text


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ("      interval: soon\n", "interval: not a duration"),
        (
            "      strategies:\n      - name: lowNodeUtilization\n        params:\n          thresholds: {cpu: high}\n",
            "thresholds['cpu'] must be a number",
        ),
        ("      strategies:\n      - params: {}\n", "must be a mapping with a 'name'"),
    ],
)
def test_bad_arguments_are_refused_by_name(arguments, message):
    text = 'actions: "shuffle"\ntiers:\n- plugins:\n  - name: rescheduling\n    arguments:\n' + arguments
    with pytest.raises((ConfError, ArgumentError)) as err:
        parse_conf(text, REGISTRY)
    assert message in str(err.value)
