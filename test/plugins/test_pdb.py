"""pdb: preempt and reclaim take victims whose eviction violates no PodDisruptionBudget, and never
one that does; the budget also pays for evictions decided earlier in the same cycle.

The conf puts pdb in the tier that decides victims, with no victim-selecting plugin (drf) in a later
tier: in Volcano's tier semantics a tier that selects no victim hands the decision to the next."""

from caldera.hack.scenario import InProcessCluster, node, pdb, pod, podgroup, priority_class

PREEMPTABLE = {"volcano.sh/preemptable": "true"}
CONF = """
actions: "enqueue, allocate, preempt"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
  - name: pdb
- plugins:
  - name: predicates
  - name: proportion
  - name: nodeorder
"""


def low(name, app, node_name="n1", cpu="2"):
    return pod(
        name,
        cpu=cpu,
        group=app,
        node_name=node_name,
        phase="Running",
        annotations=PREEMPTABLE,
        labels={"app": app},
        priority_class="low-pc",
    )


def cluster_with(pods, pdbs, nodes=("n1",), cpu="4", min_member=1):
    return InProcessCluster(
        CONF,
        nodes=[node(n, cpu=cpu) for n in nodes],
        pods=pods,
        podgroups=[
            podgroup(app, min_member=min_member, phase="Running")
            for app in sorted({p.metadata.labels["app"] for p in pods})
        ],
        priority_classes=[priority_class("high", 1000), priority_class("low-pc", 1)],
        pdbs=pdbs,
    )


def preemptor(sim, name="high", cpu="2"):
    sim.add(
        podgroups=[podgroup(name, priority_class="high")],
        pods=[pod(name, cpu=cpu, group=name, priority_class="high")],
    )


def test_the_victim_is_the_pod_no_budget_protects():
    # two workloads of two 1-cpu pods each (gang minimum 1: one of each may go); "db" comes first in
    # victim order but its budget allows nothing
    pods = [
        low("db-0", "db", cpu="1"),
        low("db-1", "db", cpu="1"),
        low("web-0", "web", cpu="1"),
        low("web-1", "web", cpu="1"),
    ]
    sim = cluster_with(pods, [pdb("db", {"app": "db"}, allowed=0)])
    preemptor(sim, cpu="1")
    result = sim.cycle()
    victims = sorted(e.task.name for e in result.evictions)
    assert victims and all(v.startswith("web-") for v in victims)


def test_no_victim_when_every_candidate_is_protected():
    sim = cluster_with([low("db-0", "db"), low("db-1", "db")], [pdb("db", {"app": "db"}, allowed=0)])
    preemptor(sim)
    for _ in range(2):
        assert sim.cycle().evictions == []
    assert "high" not in sim.running_on()


def test_a_budget_of_one_is_spent_once_in_a_cycle():
    # three nodes, each full with one protected pod; the budget allows one disruption; two preemptors
    sim = cluster_with(
        [
            low("db-0", "db", "n1", cpu="4"),
            low("db-1", "db", "n2", cpu="4"),
            low("db-2", "db", "n3", cpu="4"),
        ],
        [pdb("db", {"app": "db"}, allowed=1)],
        nodes=("n1", "n2", "n3"),
    )
    preemptor(sim, "high-a", cpu="4")
    preemptor(sim, "high-b", cpu="4")
    result = sim.cycle()
    assert len(result.evictions) == 1


def test_a_pod_the_budget_already_counted_costs_nothing():
    sim = cluster_with(
        [low("db-1", "db"), low("db-0", "db")],
        [pdb("db", {"app": "db"}, allowed=0, disrupted=["db-0"])],
        min_member=0,
    )
    preemptor(sim)
    assert [e.task.name for e in sim.cycle().evictions] == ["db-0"]


def test_without_the_plugin_budgets_are_not_consulted():
    conf = CONF.replace("  - name: pdb\n", "")
    pods = [
        low("db-0", "db", cpu="1"),
        low("db-1", "db", cpu="1"),
        low("web-0", "web", cpu="1"),
        low("web-1", "web", cpu="1"),
    ]
    sim = cluster_with(pods, [pdb("db", {"app": "db"}, allowed=0)])
    sim.conf = __import__("caldera.config.conf", fromlist=["parse_conf"]).parse_conf(
        conf, __import__("caldera.scheduler.registry", fromlist=["builtin_registry"]).builtin_registry()
    )
    preemptor(sim)
    assert "db-0" in [e.task.name for e in sim.cycle().evictions]
