"""reclaim: a queue below its deserved share takes back resources from an overused queue."""

from caldera.hack.scenario import InProcessCluster, node, pod, podgroup, queue

PREEMPTABLE = {"volcano.sh/preemptable": "true"}
CONF = """
actions: "enqueue, allocate, reclaim"
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


def greedy(reclaimable=None, annotations=PREEMPTABLE):
    return dict(
        nodes=[node("n1", cpu="4"), node("n2", cpu="4")],
        queues=[queue("a", weight=1, reclaimable=reclaimable), queue("b", weight=1)],
        podgroups=[podgroup("hog", min_member=1, queue="a", phase="Running")],
        pods=[
            pod(
                f"hog-{i}",
                cpu="1",
                group="hog",
                node_name=f"n{1 + i % 2}",
                phase="Running",
                annotations=annotations,
            )
            for i in range(8)
        ],
    )


def newcomer():
    return dict(
        podgroups=[podgroup("new", min_member=4, queue="b")],
        pods=[pod(f"new-{i}", cpu="1", group="new") for i in range(4)],
    )


def test_reclaim_returns_resources_to_an_under_served_queue():
    sim = InProcessCluster(CONF, **greedy())
    sim.add(**newcomer())
    result = sim.cycle()
    victims = [e.task.name for e in result.evictions]
    assert victims and all(v.startswith("hog-") for v in victims)
    assert {e.reason for e in result.evictions} == {"reclaim"}
    for _ in range(3):
        sim.cycle()
    placed = sim.running_on()
    assert sum(1 for name in placed if name.startswith("new-")) == 4
    # queue a keeps its deserved half
    assert sum(1 for name in placed if name.startswith("hog-")) == 4


def test_queue_marked_not_reclaimable_keeps_its_pods():
    sim = InProcessCluster(CONF, **greedy(reclaimable=False))
    sim.add(**newcomer())
    assert sim.cycle().evictions == []


def test_pods_marked_not_preemptable_are_not_reclaimed():
    sim = InProcessCluster(CONF, **greedy(annotations={"volcano.sh/preemptable": "false"}))
    sim.add(**newcomer())
    assert sim.cycle().evictions == []
