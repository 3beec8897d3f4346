"""preempt: a starving high-priority job takes room from preemptable low-priority pods of its
queue, never below a running gang's minimum, and only when its whole gang then fits."""

from caldera.hack.scenario import InProcessCluster, node, pod, podgroup, priority_class

PREEMPTABLE = {"volcano.sh/preemptable": "true"}
CONF = """
actions: "enqueue, allocate, preempt"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: drf
  - name: predicates
  - name: proportion
  - name: nodeorder
"""


def running(name, n, cpu, node_name, group, **kw):
    return [
        pod(
            f"{name}-{i}",
            cpu=cpu,
            group=group,
            node_name=node_name,
            phase="Running",
            annotations=PREEMPTABLE,
            **kw,
        )
        for i in range(n)
    ]


def base(low_min):
    return dict(
        nodes=[node("n1", cpu="4")],
        podgroups=[podgroup("low", min_member=low_min, phase="Running")],
        pods=running("low", 4, "1", "n1", "low"),
        priority_classes=[priority_class("high", 1000), priority_class("low-pc", 1)],
    )


def test_high_priority_job_preempts_low_priority_pods():
    sim = InProcessCluster(CONF, **base(low_min=1))
    sim.add(
        podgroups=[podgroup("high", min_member=2, priority_class="high")],
        pods=[pod(f"high-{i}", cpu="1", group="high") for i in range(2)],
    )
    result = sim.cycle()
    victims = sorted(e.task.name for e in result.evictions)
    assert len(victims) == 2 and all(v.startswith("low-") for v in victims)
    # once the victims are gone the preemptor is placed
    sim.cycle()
    assert {"high-0", "high-1"} <= set(sim.running_on())


def test_preemption_never_leaves_a_running_gang_partly_running():
    """Issue 14 item 10: the low gang (min 3 of 4) can spare one pod; the second preemptor pod
    needs a pod it cannot spare, which takes the whole gang (Volcano 1.15's whole bundle) rather
    than leaving two pods of a gang of three running."""
    sim = InProcessCluster(CONF, **base(low_min=3))
    sim.add(
        podgroups=[podgroup("high", min_member=2, priority_class="high")],
        pods=[pod(f"high-{i}", cpu="1", group="high") for i in range(2)],
    )
    result = sim.cycle()
    victims = sorted(e.task.name for e in result.evictions)
    assert victims == ["low-0", "low-1", "low-2", "low-3"]
    sim.cycle()
    assert {"high-0", "high-1"} <= set(sim.running_on())


def test_a_gang_that_can_spare_enough_loses_only_its_surplus():
    sim = InProcessCluster(CONF, **base(low_min=2))
    sim.add(
        podgroups=[podgroup("high", min_member=2, priority_class="high")],
        pods=[pod(f"high-{i}", cpu="1", group="high") for i in range(2)],
    )
    assert len(sim.cycle().evictions) == 2


def test_pods_marked_not_preemptable_are_not_evicted():
    kw = base(low_min=1)
    kw["pods"] = [
        pod(
            f"low-{i}",
            cpu="1",
            group="low",
            node_name="n1",
            phase="Running",
            annotations={"volcano.sh/preemptable": "false"},
        )
        for i in range(4)
    ]
    sim = InProcessCluster(CONF, **kw)
    sim.add(
        podgroups=[podgroup("high", min_member=1, priority_class="high")],
        pods=[pod("high-0", cpu="1", group="high")],
    )
    assert sim.cycle().evictions == []


def test_equal_priority_preempts_only_through_drf_shares():
    # tier 1 (priority) selects nobody, so drf in tier 2 decides, as in Volcano: the peer's share
    # after taking one cpu (1/4) stays below the low job's after losing one (3/4)
    sim = InProcessCluster(CONF, **base(low_min=1))
    sim.add(podgroups=[podgroup("peer", min_member=1)], pods=[pod("peer-0", cpu="1", group="peer")])
    assert len(sim.cycle().evictions) == 1


def test_equal_priority_does_not_preempt_when_drf_preemption_is_off():
    sim = InProcessCluster(
        CONF.replace("  - name: drf", "  - name: drf\n    enablePreemptable: false"), **base(low_min=1)
    )
    sim.add(podgroups=[podgroup("peer", min_member=1)], pods=[pod("peer-0", cpu="1", group="peer")])
    assert sim.cycle().evictions == []


def test_a_best_effort_pod_with_room_is_left_to_backfill():
    """preempt runs before backfill here: a best-effort pod that fits needs no preemption, and
    pipelining it in preempt would keep backfill from binding it."""
    sim = InProcessCluster(
        CONF.replace('"enqueue, allocate, preempt"', '"enqueue, allocate, preempt, backfill"'),
        nodes=[node("n1", cpu="4")],
        podgroups=[podgroup("be")],
        pods=[pod("be-0", cpu=None, memory=None, group="be")],
    )
    sim.cycle()
    assert sim.running_on() == {"be-0": "n1"}


def test_a_podgroup_marked_not_preemptable_is_never_evicted_whole():
    """As Volcano's IsJobPreemptableForGangEviction: the low gang (min 3 of 4) would have to go whole
    for the second preemptor pod, but its PodGroup says volcano.sh/preemptable: "false"."""
    import msgspec

    kw = base(low_min=3)
    pg = kw["podgroups"][0]
    kw["podgroups"] = [
        msgspec.structs.replace(
            pg,
            metadata=msgspec.structs.replace(pg.metadata, annotations={"volcano.sh/preemptable": "false"}),
        )
    ]
    sim = InProcessCluster(CONF, **kw)
    sim.add(
        podgroups=[podgroup("high", min_member=2, priority_class="high")],
        pods=[pod(f"high-{i}", cpu="1", group="high") for i in range(2)],
    )
    # one surplus pod could go, but that is not enough for a gang of two: nothing is evicted
    assert sim.cycle().evictions == []


def test_a_gang_taken_whole_takes_its_pods_on_a_deleted_node_too_and_the_cycle_goes_on():
    """Soak seed 11 (default*2 mix): a node was deleted while pods were still bound to it (as until
    the pod garbage collector removes them); a gang with a pod there was taken whole, and evicting
    that pod failed every cycle ("node 'churn-0025' is not in the session"). Volcano's
    ``Statement.Evict`` (pkg/scheduler/framework/statement.go) updates the job and skips a node it
    does not find: the pod is evicted, the cycle goes on, and undoing it leaves the session as it was."""
    low = [
        *running("low", 3, "1", "n1", "low"),
        pod("low-gone", cpu="1", group="low", node_name="gone", phase="Running", annotations=PREEMPTABLE),
    ]
    sim = InProcessCluster(
        CONF,
        nodes=[node("n1", cpu="4")],
        podgroups=[podgroup("low", min_member=4, phase="Running")],
        pods=low,
        priority_classes=[priority_class("high", 1000), priority_class("low-pc", 1)],
    )
    sim.add(
        podgroups=[podgroup("high", min_member=2, priority_class="high")],
        pods=[pod(f"high-{i}", cpu="1", group="high") for i in range(2)],
    )
    result = sim.cycle()
    assert sorted(e.task.name for e in result.evictions) == ["low-0", "low-1", "low-2", "low-gone"]
    sim.cycle()
    assert {"high-0", "high-1"} <= set(sim.running_on())


def test_a_node_that_cannot_hold_the_preemptor_even_emptied_asks_no_plugin_for_victims(monkeypatch):
    """The plugins' votes on victims are the costly part of a preemptor that fits nowhere; on a node
    where the task would not fit even with every candidate evicted, no choice of victims could pass
    Volcano's ValidateVictims, so none is asked for, and nothing is evicted."""
    from caldera.framework.session import Session

    asked = []
    vote = Session.preemptable

    def counting(self, preemptor, preemptees):
        asked.append(preemptor.name)
        return vote(self, preemptor, preemptees)

    monkeypatch.setattr(Session, "preemptable", counting)
    sim = InProcessCluster(CONF, **base(low_min=1))
    sim.add(
        podgroups=[podgroup("big", min_member=1, priority_class="high")],
        pods=[pod("big-0", cpu="5", group="big")],
    )
    result = sim.cycle()
    assert result.evictions == [] and asked == []
    # a preemptor the emptied node would hold is still given its victims
    sim.add(
        podgroups=[podgroup("high", min_member=1, priority_class="high")],
        pods=[pod("high-0", cpu="2", group="high")],
    )
    result = sim.cycle()
    assert "high-0" in asked
    assert len(result.evictions) == 2
