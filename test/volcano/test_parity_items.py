"""Issue 14: one scenario per difference found between Caldera and Volcano (items 1-7 and 10;
items 8 and 9, the conf arguments and extension points, are in test_arguments.py)."""

import logging

from caldera.config.conf import DEFAULT_CONF, parse_conf
from caldera.framework.objects import Pod, convert
from caldera.framework.session import open_session
from caldera.hack.scenario import (
    InProcessCluster,
    cluster,
    node,
    pod,
    pod_dict,
    podgroup,
    priority_class,
    queue,
)
from caldera.scheduler.registry import builtin_registry

PREEMPT = """
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
RECLAIM = PREEMPT.replace("allocate, preempt", "allocate, reclaim")
PCS = [priority_class("high", 1000), priority_class("low-pc", 1)]


def low_running(n, cpu="1", node_name="n1", group="low", **kw):
    return [
        pod(f"{group}-{i}", cpu=cpu, group=group, node_name=node_name, phase="Running", **kw)
        for i in range(n)
    ]


def evicted(result):
    return sorted(e.task.name for e in result.evictions)


# -- item 1: preemptable by default -----------------------------------------------------------------
def test_item1_pods_without_the_preemptable_mark_are_victims():
    """A full node of ordinary low-priority pods (no volcano.sh/preemptable anywhere): a
    high-priority pod preempts one of them, as Volcano's GetPodPreemptable takes them as preemptable."""
    sim = InProcessCluster(
        PREEMPT,
        nodes=[node("n1", cpu="2")],
        podgroups=[podgroup("low", min_member=1, phase="Running")],
        pods=low_running(2),
        priority_classes=PCS,
    )
    sim.add(podgroups=[podgroup("high", priority_class="high")], pods=[pod("high-0", cpu="1", group="high")])
    assert len(evicted(sim.cycle())) == 1
    sim.cycle()
    assert sim.running_on()["high-0"] == "n1"


def test_item1_label_is_read_when_there_is_no_annotation_and_a_bad_value_is_false(caplog):
    protected = low_running(1, labels={"volcano.sh/preemptable": "false"}, group="lab")
    garbled = low_running(1, annotations={"volcano.sh/preemptable": "maybe"}, group="bad")
    sim = InProcessCluster(
        PREEMPT,
        nodes=[node("n1", cpu="2")],
        podgroups=[podgroup("lab", phase="Running"), podgroup("bad", phase="Running")],
        pods=protected + garbled,
        priority_classes=PCS,
    )
    sim.add(podgroups=[podgroup("high", priority_class="high")], pods=[pod("high-0", cpu="1", group="high")])
    with caplog.at_level(logging.WARNING):
        assert evicted(sim.cycle()) == []
    assert "invalid volcano.sh/preemptable=maybe" in caplog.text


# -- item 2: preempt until the queue allows the preemptor -------------------------------------------
def test_item2_preempt_keeps_evicting_until_the_queue_allows_the_preemptor():
    """Queue capped at 2 cpu and full; the node still has 2 free cpu. Room on the node is not
    enough: the high-priority pod needs its queue to allow it, so one low pod of the queue goes."""
    sim = InProcessCluster(
        PREEMPT,
        nodes=[node("n1", cpu="4")],
        queues=[queue("capped", capability={"cpu": "2"})],
        podgroups=[podgroup("low", queue="capped", phase="Running")],
        pods=low_running(2),
        priority_classes=PCS,
    )
    sim.add(
        podgroups=[podgroup("high", queue="capped", priority_class="high")],
        pods=[pod("high-0", cpu="1", group="high")],
    )
    assert len(evicted(sim.cycle())) == 1
    sim.cycle()
    assert sim.running_on()["high-0"] == "n1"


# -- item 3: preemptionPolicy Never -----------------------------------------------------------------
def test_item3_a_pod_with_preemption_policy_never_evicts_nothing():
    sim = InProcessCluster(
        PREEMPT,
        nodes=[node("n1", cpu="2")],
        podgroups=[podgroup("low", phase="Running")],
        pods=low_running(2, annotations={"volcano.sh/preemptable": "true"}),
        priority_classes=PCS,
    )
    polite = convert(Pod, pod_dict("high-0", cpu="1", group="high", preemption_policy="Never"))
    sim.add(podgroups=[podgroup("high", priority_class="high")], pods=[polite])
    assert evicted(sim.cycle()) == []


def test_item3_reclaim_skips_a_never_pod_too():
    sim = InProcessCluster(
        RECLAIM,
        nodes=[node("n1", cpu="4")],
        queues=[queue("a"), queue("b")],
        podgroups=[podgroup("hog", queue="a", phase="Running")],
        pods=low_running(4, group="hog", annotations={"volcano.sh/preemptable": "true"}),
    )
    polite = convert(Pod, pod_dict("new-0", cpu="1", group="new", preemption_policy="Never"))
    sim.add(podgroups=[podgroup("new", queue="b")], pods=[polite])
    assert evicted(sim.cycle()) == []


# -- item 4: best-effort pods ------------------------------------------------------------------------
def test_item4_best_effort_pods_can_be_victims():
    """The node's pod slots are taken by best-effort low-priority pods; a high-priority pod with
    requests preempts one of them (Volcano only forbids a best-effort *preemptor* to evict pods with requests)."""
    sim = InProcessCluster(
        PREEMPT,
        nodes=[node("n1", cpu="4", pods="2")],
        podgroups=[podgroup("low", phase="Running")],
        pods=low_running(2, cpu=None, memory=None),
        priority_classes=PCS,
    )
    sim.add(podgroups=[podgroup("high", priority_class="high")], pods=[pod("high-0", cpu="1", group="high")])
    assert len(evicted(sim.cycle())) == 1


def test_item4_a_best_effort_preemptor_does_not_evict_pods_with_requests():
    sim = InProcessCluster(
        PREEMPT,
        nodes=[node("n1", cpu="4", pods="2")],
        podgroups=[podgroup("low", phase="Running")],
        pods=low_running(2),
        priority_classes=PCS,
    )
    sim.add(
        podgroups=[podgroup("high", priority_class="high")],
        pods=[pod("high-0", cpu=None, memory=None, group="high")],
    )
    assert evicted(sim.cycle()) == []


# -- item 5: reclaim per proportion's reclaimable, queue priority, no pods in shares -----------------
def test_item5_reclaim_takes_from_a_queue_over_its_share_even_below_deserved():
    """Queue a runs 3 cpu of a 4-cpu node (deserved 2 once b asks); b needs one 2-cpu pod. Volcano's
    proportion lets a's pods go while a is over deserved: a ends at 1 cpu, below its deserved 2."""
    sim = InProcessCluster(
        RECLAIM,
        nodes=[node("n1", cpu="4")],
        queues=[queue("a"), queue("b")],
        podgroups=[podgroup("hog", queue="a", phase="Running")],
        pods=low_running(3, group="hog"),
    )
    sim.add(podgroups=[podgroup("new", queue="b")], pods=[pod("new-0", cpu="2", group="new")])
    assert len(evicted(sim.cycle())) == 1
    sim.cycle()
    assert sim.running_on()["new-0"] == "n1"


def test_item5_queues_are_ordered_by_spec_priority():
    """Two queues with equal shares: the one with the higher spec.priority is served first
    although it was created later."""
    sim = InProcessCluster(
        PREEMPT,
        nodes=[node("n1", cpu="4")],
        queues=[queue("first"), queue("urgent", priority=10)],
        podgroups=[podgroup("a", queue="first"), podgroup("b", queue="urgent")],
        pods=[pod("a-0", cpu="1", group="a"), pod("b-0", cpu="1", group="b")],
    )
    result = sim.cycle()
    assert [p.task.name for p in result.placements] == ["b-0", "a-0"]


def test_item5_pods_count_in_deserved_and_allocated_as_in_volcano():
    """Issue 14 saw ``overused`` differ and blamed ``pods``; Volcano's source does count pods
    (GetPodResourceRequest in pkg/scheduler/api/pod_info.go adds pods: 1 to every request, NewResource
    keeps node ``pods`` as a scalar, Resource.LessEqual compares scalars) but caps a queue's deserved
    pods by its request (MinDimensionResource), which Caldera did not: its deserved pod count stayed
    at a share of every node's pod slots, so a queue at its share was never overused. A queue at its
    cpu share with a pod still pending is not overused; with none pending it is."""
    snap = cluster(
        nodes=[node("n1", cpu="4")],
        queues=[queue("a"), queue("b")],
        podgroups=[podgroup("ja", queue="a", phase="Running"), podgroup("jb", queue="b")],
        pods=low_running(2, group="ja", memory=None)
        + [pod("ja-9", cpu="1", memory=None, group="ja")]
        + [pod(f"jb-{i}", cpu="1", memory=None, group="jb") for i in range(2)],
    )
    registry = builtin_registry()
    conf = parse_conf(DEFAULT_CONF, registry)
    ssn = open_session(snap, conf.tiers, registry.plugins)
    assert not ssn.overused(ssn.queues["a"])
    # without the pending pod its pod count is reached too: overused
    snap2 = cluster(
        nodes=[node("n1", cpu="4")],
        queues=[queue("a"), queue("b")],
        podgroups=[podgroup("ja", queue="a", phase="Running"), podgroup("jb", queue="b")],
        pods=low_running(2, group="ja", memory=None)
        + [pod(f"jb-{i}", cpu="1", memory=None, group="jb") for i in range(2)],
    )
    ssn2 = open_session(snap2, conf.tiers, registry.plugins)
    assert ssn2.overused(ssn2.queues["a"])


# -- item 6: task-spec label -------------------------------------------------------------------------
def test_item6_task_roles_from_the_label_satisfy_min_task_member():
    label = "volcano.sh/task-spec"
    pods = [pod("tf-ps", cpu="1", group="tf", labels={label: "ps"})] + [
        pod(f"tf-worker-{i}", cpu="1", group="tf", labels={label: "worker"}) for i in range(2)
    ]
    sim = InProcessCluster(
        nodes=[node("n1", cpu="4")],
        podgroups=[podgroup("tf", min_member=3, min_task_member={"ps": 1, "worker": 2})],
        pods=pods,
    )
    sim.cycle()
    assert set(sim.running_on()) == {"tf-ps", "tf-worker-0", "tf-worker-1"}


# -- item 7: allocate goes on while the job can reach minMember -------------------------------------
def test_item7_one_unplaceable_task_does_not_stop_its_job():
    """Three pods, min member 2; the first in task order asks for a node label nobody has. Volcano
    goes on with the other two ("continue on until min member meet") and the job starts."""
    pods = [pod("job-0", cpu="1", group="job", node_selector={"disk": "ssd"})] + [
        pod(f"job-{i}", cpu="1", group="job") for i in (1, 2)
    ]
    sim = InProcessCluster(nodes=[node("n1", cpu="4")], podgroups=[podgroup("job", min_member=2)], pods=pods)
    sim.cycle()
    assert set(sim.running_on()) == {"job-1", "job-2"}


def test_item7_a_gang_that_needs_every_pod_still_stops_at_the_first_failure():
    pods = [pod("job-0", cpu="1", group="job", node_selector={"disk": "ssd"})] + [
        pod(f"job-{i}", cpu="1", group="job") for i in (1, 2)
    ]
    sim = InProcessCluster(nodes=[node("n1", cpu="4")], podgroups=[podgroup("job", min_member=3)], pods=pods)
    sim.cycle()
    assert sim.running_on() == {}


# -- item 10: gang-aware eviction --------------------------------------------------------------------
def test_item10_surplus_replicas_go_before_a_gang_is_touched():
    """Two victim jobs of the same low priority: a gang at its minimum (2 of 2) and a job with two
    surplus replicas (min 1 of 3). The preemptor needs two cpu: the surplus replicas go."""
    pods = low_running(2, group="tight") + low_running(3, group="loose")
    sim = InProcessCluster(
        PREEMPT,
        nodes=[node("n1", cpu="5")],
        podgroups=[
            podgroup("tight", min_member=2, phase="Running"),
            podgroup("loose", min_member=1, phase="Running"),
        ],
        pods=pods,
        priority_classes=PCS,
    )
    sim.add(
        podgroups=[podgroup("high", min_member=2, priority_class="high")],
        pods=[pod(f"high-{i}", cpu="1", group="high") for i in range(2)],
    )
    victims = evicted(sim.cycle())
    assert len(victims) == 2 and all(v.startswith("loose-") for v in victims)


def test_item10_nothing_is_evicted_for_a_gang_that_still_cannot_start():
    """The preemptor gang needs 3 cpu; only 2 pods on the node are preemptable: no eviction at all."""
    pods = low_running(2, group="low") + low_running(
        2, group="keep", annotations={"volcano.sh/preemptable": "false"}
    )
    sim = InProcessCluster(
        PREEMPT,
        nodes=[node("n1", cpu="4")],
        podgroups=[podgroup("low", phase="Running"), podgroup("keep", phase="Running")],
        pods=pods,
        priority_classes=PCS,
    )
    sim.add(
        podgroups=[podgroup("high", min_member=3, priority_class="high")],
        pods=[pod(f"high-{i}", cpu="1", group="high") for i in range(3)],
    )
    assert evicted(sim.cycle()) == []
