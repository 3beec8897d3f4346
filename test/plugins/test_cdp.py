"""cdp: a pod that asks for a cooldown (``volcano.sh/cooldown-time``) is not preempted until it has
run that long; the others are victims as usual."""

import time
from datetime import UTC, datetime

from caldera.framework.objects import Pod, convert
from caldera.hack.scenario import InProcessCluster, node, pod, pod_dict, podgroup, priority_class

CONF = """
actions: "enqueue, allocate, preempt"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
  - name: cdp
- plugins:
  - name: predicates
  - name: proportion
  - name: nodeorder
"""


def running(name, started_ago, cooldown="10m", where="labels", group=None):
    """A low-priority preemptable 1-cpu pod, scheduled ``started_ago`` seconds ago."""
    meta = {where: {"volcano.sh/cooldown-time": cooldown}} if cooldown else {}
    d = pod_dict(
        name,
        cpu="1",
        group=group or name.rsplit("-", 1)[0],
        node_name="n1",
        phase="Running",
        priority_class="low",
        annotations={"volcano.sh/preemptable": "true", **meta.get("annotations", {})},
        labels=meta.get("labels", {}),
    )
    at = datetime.fromtimestamp(time.time() - started_ago, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    d["status"]["conditions"] = [{"type": "PodScheduled", "status": "True", "lastTransitionTime": at}]
    return convert(Pod, d)


def gang(name, started_ago, **kw):
    """Two such pods of one gang of minimum 1 (one may go without breaking it)."""
    return [running(f"{name}-{i}", started_ago, **kw) for i in range(2)]


def preempt(pods):
    """The 4-cpu node is full; a high-priority 1-cpu pod comes: which pods are evicted."""
    groups = sorted({p.metadata.name.rsplit("-", 1)[0] for p in pods})
    sim = InProcessCluster(
        CONF,
        nodes=[node("n1", cpu="4")],
        pods=pods,
        podgroups=[podgroup(g, min_member=1, phase="Running") for g in groups],
        priority_classes=[priority_class("high", 1000), priority_class("low", 1)],
    )
    sim.add(
        podgroups=[podgroup("urgent", priority_class="high")],
        pods=[pod("urgent", cpu="1", group="urgent", priority_class="high")],
    )
    return sorted(e.task.name for e in sim.cycle().evictions)


def victim_gangs(pods):
    return sorted({name.rsplit("-", 1)[0] for name in preempt(pods)})


# Without cdp the victim here would be of the gang "warm" (the later name, all else equal), which
# is the one still cooling down in each case: so these cases fail if the plugin does nothing.


def test_the_pods_still_cooling_down_are_spared_and_a_settled_one_preempted():
    assert victim_gangs([*gang("aged", 3600), *gang("warm", 60)]) == ["aged"]
    assert len(preempt([*gang("aged", 3600), *gang("warm", 60)])) == 1


def test_no_victim_while_every_candidate_cools_down():
    # the annotation counts as the label does
    assert preempt([*gang("a", 30, where="annotations"), *gang("b", 90, cooldown="5m")]) == []


def test_a_pod_without_cooldown_or_with_an_unreadable_one_is_a_victim_as_before():
    assert victim_gangs([*gang("plain", 5, cooldown=""), *gang("warm", 5)]) == ["plain"]
    assert victim_gangs([*gang("typo", 5, cooldown="10 minutes"), *gang("warm", 5)]) == ["typo"]
