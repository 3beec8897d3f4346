"""tdm: revocable nodes take only pods that may use them, and only while their zone's window is open;
a job that is not preemptable preempts preemptable pods on ordinary nodes only; when a window has
closed, the preemptable pods on its nodes are the victims the shuffle action is handed."""

from datetime import datetime
from types import SimpleNamespace

import pytest

from caldera.config.conf import parse_conf
from caldera.hack.scenario import InProcessCluster, node, pod, podgroup, priority_class
from caldera.plugins import tdm
from caldera.scheduler.registry import builtin_registry

REGISTRY = builtin_registry()

CONF = """
actions: "enqueue, allocate, preempt"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: tdm
    arguments:
      tdm.revocable-zone.night: "20:00-23:00"
- plugins:
  - name: predicates
  - name: proportion
  - name: nodeorder
"""
DAY = datetime(2026, 3, 2, 12, 0).astimezone()
NIGHT = datetime(2026, 3, 2, 21, 30).astimezone()
NEXT_MORNING = datetime(2026, 3, 3, 8, 0).astimezone()
SPOT = {"volcano.sh/revocable-zone": "night"}


@pytest.fixture
def clock():
    """The time the scheduler of ``cluster(clock)`` reads: set ``clock.now`` to move it."""
    return SimpleNamespace(now=lambda: DAY)


def cluster(clock):
    registry = builtin_registry()
    registry.register_plugin(tdm.with_clock(lambda: clock.now()))
    return InProcessCluster(
        CONF,
        registry=registry,
        nodes=[
            node("spot-1", cpu="4", labels=SPOT),
            node("spot-2", cpu="4", labels=SPOT),
            node("plain", cpu="2"),
        ],
        priority_classes=[priority_class("high", 1000), priority_class("low", 1)],
    )


def batch(name, n, preemptable, min_member=1, priority_class=""):
    # a pod without the annotation is preemptable (Volcano's GetPodPreemptable): say it either way
    annotations = {"volcano.sh/preemptable": "true" if preemptable else "false"}
    return {
        "podgroups": [podgroup(name, min_member=min_member, priority_class=priority_class)],
        "pods": [
            pod(f"{name}-{i}", cpu="1", group=name, annotations=annotations, priority_class=priority_class)
            for i in range(n)
        ],
    }


def test_in_the_day_preemptable_pods_stay_off_the_spot_nodes(clock):
    sim = cluster(clock)
    sim.add(**batch("spare", 3, preemptable=True))
    result = sim.cycle()
    # two fit the ordinary node; the third waits, with the reason
    assert sorted(sim.running_on().values()) == ["plain", "plain"]
    why = result.report.explanations["default/spare"]["reason"]
    assert (
        "0/3 nodes are available: 1 Insufficient cpu, 2 current time beyond revocable zone night:20:00-23:00."
        in why
    )


def test_at_night_preemptable_pods_go_to_the_spot_nodes_and_others_never(clock):
    clock.now = lambda: NIGHT
    sim = cluster(clock)
    sim.add(**batch("spare", 3, preemptable=True))
    sim.add(**batch("steady", 3, preemptable=False, min_member=3))
    sim.cycle()
    placed = sim.running_on()
    # the spot nodes score 100 for pods that may use them: every spare pod goes there
    assert {placed[f"spare-{i}"] for i in range(3)} <= {"spot-1", "spot-2"}
    # the steady job needs 3 cpu; only the 2-cpu ordinary node takes it: it waits whole
    assert not any(f"steady-{i}" in placed for i in range(3))


def test_a_steady_job_preempts_preemptable_pods_on_ordinary_nodes_only(clock):
    sim = cluster(clock)
    sim.add(**batch("spare", 2, preemptable=True, priority_class="low"))
    sim.cycle()
    assert sorted(sim.running_on().values()) == ["plain", "plain"]
    sim.add(**batch("urgent", 1, preemptable=False, priority_class="high"))
    result = sim.cycle()
    # spare's budget (no annotation: one pod at a time) lets one go
    assert len([e.task.name for e in result.evictions if e.task.name.startswith("spare-")]) == 1


def test_a_preemptable_preemptor_preempts_nobody(clock):
    sim = cluster(clock)
    sim.add(**batch("spare", 2, preemptable=True, priority_class="low"))
    sim.cycle()
    sim.add(**batch("greedy", 1, preemptable=True, priority_class="high"))
    assert sim.cycle().evictions == []
    # and the spot nodes, closed in the day, do not take it either
    assert "greedy-0" not in sim.running_on()


def test_when_the_window_closes_shuffle_evicts_the_pods_on_its_nodes(clock):
    """Volcano's tdm hands its victims to the shuffle action (victimsFn, AddVictimTasksFns): with
    shuffle in the conf, once the night window has closed the preemptable pods on the spot nodes
    are evicted, one per evict period (no disruption budget: Volcano's default of one)."""
    clock.now = lambda: NIGHT
    sim = cluster(clock)
    sim.conf = parse_conf(
        CONF.replace('"enqueue, allocate, preempt"', '"enqueue, allocate, shuffle"'), REGISTRY
    )
    sim.add(**batch("spare", 4, preemptable=True))
    sim.cycle()
    assert set(sim.running_on().values()) <= {"spot-1", "spot-2"}
    clock.now = lambda: NEXT_MORNING
    evicted = sim.cycle().evictions
    assert len(evicted) == 1 and evicted[0].task.node_name.startswith("spot-")
    # within the evict period (default 1m) nobody else goes
    assert sim.cycle().evictions == []


def test_two_schedulers_keep_their_own_evict_period(clock):
    """Volcano keeps when tdm last looked for victims in a package variable, one per scheduler
    process; here it is each scheduler's standing state: one scheduler's eviction does not hold
    back another's in the same process."""
    clock.now = lambda: NIGHT
    conf = CONF.replace('"enqueue, allocate, preempt"', '"enqueue, allocate, shuffle"')
    first, second = cluster(clock), cluster(clock)
    for sim in (first, second):
        sim.conf = parse_conf(conf, REGISTRY)
        sim.add(**batch("spare", 2, preemptable=True))
        sim.cycle()
    clock.now = lambda: NEXT_MORNING
    assert len(first.cycle().evictions) == 1
    assert len(second.cycle().evictions) == 1
    # and each remembers its own: within the period neither evicts again
    assert first.cycle().evictions == [] and second.cycle().evictions == []
