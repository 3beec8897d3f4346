"""numa-aware: Guaranteed pods placed against the nodes' Numatopologies (Volcano's numaaware plugin).

Node "wide" has two NUMA nodes of 8 CPUs, node "narrow" four NUMA nodes of 4 CPUs; both run the
kubelet's static CPU manager with the single-numa-node topology policy unless a test says otherwise."""

from __future__ import annotations

import logging

from caldera.cache.store import ClusterCache
from caldera.config.conf import parse_conf
from caldera.framework.numa import PodMeta
from caldera.framework.session import open_session
from caldera.hack import scenario
from caldera.scheduler.registry import builtin_registry

POLICY = "volcano.sh/numa-topology-policy"
CONF = """
actions: "enqueue, allocate"
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: predicates
  - name: proportion
  - name: numa-aware
"""


def nodes():
    return [scenario.node("wide", cpu="16", memory="64Gi"), scenario.node("narrow", cpu="16", memory="64Gi")]


def topologies(policy="single-numa-node", **kw):
    return [
        scenario.numatopology("wide", scenario.cpu_detail(2, 4), topology_policy=policy, **kw),
        scenario.numatopology("narrow", scenario.cpu_detail(4, 2), topology_policy=policy, **kw),
    ]


def guaranteed(name, cpus, group, policy="single-numa-node", **kw):
    return scenario.pod(
        name,
        cpu=cpus,
        memory="1Gi",
        limits={"cpu": cpus, "memory": "1Gi"},
        group=group,
        annotations={POLICY: policy} if policy else {},
        **kw,
    )


def run(pods, groups, topos=None, node_list=None, conf=CONF):
    snap = scenario.cluster(
        nodes=node_list or nodes(),
        pods=pods,
        podgroups=[scenario.podgroup(g, min_member=m) for g, m in groups.items()],
        queues=[scenario.queue("default")],
        numatopologies=topologies() if topos is None else topos,
    )
    _, result = scenario.run_session(snap, conf)
    placed = {p.task.name: p.node for p in result.placements}
    numa = {p.task.name: p.numa for p in result.placements}
    errors = {uid.split("/")[1]: j.job_fit_error for uid, j in result.jobs.items() if j.job_fit_error}
    return placed, numa, errors


def test_a_single_numa_node_pod_goes_where_one_numa_node_holds_it_and_gets_that_nodes_cpus():
    placed, numa, _ = run([guaranteed("six", "6", "g")], {"g": 1})
    assert placed == {"six": "wide"}  # narrow's NUMA nodes have 4 CPUs each
    cpus = numa["six"]["cpu"]
    assert len(cpus) == 6 and (cpus <= set(range(8)) or cpus <= set(range(8, 16)))


def test_a_pod_that_fits_no_single_numa_node_stays_pending_with_volcanos_reason():
    placed, _, errors = run([guaranteed("ten", "10", "g")], {"g": 1})
    assert placed == {}
    assert errors == {"g": "0/2 nodes are available: 2 container main cannot be assigned by numa."}


def test_later_tasks_of_the_cycle_see_the_cpus_earlier_ones_took():
    pods = [guaranteed(f"w{i}", "8", "g") for i in range(3)]
    placed, numa, _ = run(pods, {"g": 2})
    # wide holds two 8-CPU pods (one per NUMA node); narrow none; the third finds no room
    assert sorted(placed.values()) == ["wide", "wide"]
    a, b = (numa[name]["cpu"] for name in placed)
    assert not a & b


def test_a_discarded_gang_gives_its_cpus_back_to_the_next_job():
    # "first" needs three 8-CPU pods at once: two fit on wide, then the gang is given up (its
    # statement discarded); "second" then gets both of wide's NUMA nodes
    first = [guaranteed(f"f{i}", "8", "first") for i in range(3)]
    second = [guaranteed(f"s{i}", "8", "second") for i in range(2)]
    placed, _, errors = run(first + second, {"first": 3, "second": 2})
    assert placed == {"s0": "wide", "s1": "wide"}
    assert "first" in errors


def test_the_pods_policy_must_be_the_nodes():
    placed, _, errors = run([guaranteed("p", "2", "g", policy="best-effort")], {"g": 1})
    assert placed == {}
    assert errors["g"] == (
        "0/2 nodes are available: 2 task topology policy[best-effort] is different with node[single-numa-node]."
    )


def test_a_node_without_a_numatopology_refuses_a_pod_with_a_policy():
    placed, _, errors = run(
        [guaranteed("p", "2", "g")],
        {"g": 1},
        topos=[],
        node_list=[scenario.node("plain", cpu="16", memory="64Gi")],
    )
    assert placed == {} and errors["g"] == "0/1 nodes are available: 1 numa info is empty."


def test_a_pod_that_is_not_guaranteed_is_not_checked():
    burstable = scenario.pod("b", cpu="10", memory="1Gi", group="g", annotations={POLICY: "single-numa-node"})
    placed, numa, _ = run([burstable], {"g": 1})
    assert placed.get("b") in ("wide", "narrow") and numa["b"] is None


def test_a_guaranteed_pod_without_a_policy_is_held_to_the_nodes_own_policy_where_numa_is_managed():
    # 10 CPUs fit no NUMA node of a single-numa-node kubelet; the plain node is not checked
    node_list = [*nodes(), scenario.node("plain", cpu="16", memory="64Gi")]
    placed, numa, _ = run([guaranteed("p", "10", "g", policy="")], {"g": 1}, node_list=node_list)
    assert placed == {"p": "plain"} and numa["p"] is None


def test_fewer_numa_nodes_score_higher_times_the_weight():
    conf = """
actions: "allocate"
tiers:
- plugins:
  - name: numa-aware
    arguments: {weight: 3}
"""
    parsed = parse_conf(conf, builtin_registry())
    snap = scenario.cluster(
        nodes=nodes(),
        pods=[guaranteed("six", "6", "g", policy="best-effort")],
        podgroups=[scenario.podgroup("g", min_member=1)],
        queues=[scenario.queue("default")],
        numatopologies=topologies("best-effort"),
    )
    ssn = open_session(snap, parsed.tiers, builtin_registry().plugins, parsed.configurations)
    task = next(t for j in ssn.jobs.values() for t in j.tasks.values())
    scores = dict(zip([n.name for n in ssn.node_list], ssn.node_scores(task, ssn.all_rows), strict=True))
    # wide: 6 CPUs on one NUMA node; narrow: on two. NormalizeScore(100, reverse): 100 - 100*1/2, 0
    assert scores == {"wide": 50.0 * 3, "narrow": 0.0}


# --- the cache: what was assigned stays taken until the exporter reports it -----------------------
def cache_with(pods, topos):
    return scenario.load(
        ClusterCache(("caldera",)),
        nodes=nodes(),
        pods=pods,
        podgroups=[scenario.podgroup("g", min_member=1)],
        queues=[scenario.queue("default")],
        numatopologies=topos,
    )


def test_assigned_cpus_stay_taken_in_later_snapshots_until_the_numatopology_reports_the_pod():
    pod = guaranteed("eight", "8", "g", uid="u-eight")
    cache = cache_with([pod], topologies())
    _, result = scenario.run_session(cache.snapshot(), CONF)
    cache.apply(result)
    taken = result.placements[0].numa["cpu"]
    assert not cache.snapshot().numa.nodes["wide"].free["cpu"] & taken
    # the exporter reports the pod (with the CPUs gone from allocatable): the assumption is dropped
    left = set(range(16)) - taken
    cache.upsert_numatopology(
        scenario.numatopology(
            "wide",
            scenario.cpu_detail(2, 4),
            allocatable=",".join(map(str, sorted(left))),
            pod_allocations=[{"uid": "u-eight", "name": "eight", "namespace": "default"}],
        )
    )
    assert cache.snapshot().numa.nodes["wide"].free["cpu"] == left
    assert cache.numa_assumed == {}


def test_a_deleted_pod_gives_its_assumed_cpus_back():
    pod = guaranteed("eight", "8", "g", uid="u-eight")
    cache = cache_with([pod], topologies())
    _, result = scenario.run_session(cache.snapshot(), CONF)
    cache.apply(result)
    assert cache.numa_assumed["wide"] == {PodMeta("u-eight", "eight", "default"): result.placements[0].numa}
    cache.delete_pod(pod)
    assert cache.snapshot().numa.nodes["wide"].free["cpu"] == frozenset(range(16))


def test_a_cluster_without_numatopologies_has_no_view_and_the_default_conf_registers_nothing():
    snap = scenario.cluster(
        nodes=nodes(), pods=[guaranteed("p", "2", "g")], podgroups=[scenario.podgroup("g")]
    )
    assert snap.numa is None
    ssn, result = scenario.run_session(snap)
    assert "numa-aware" not in ssn.plugins and result.placements[0].numa is None


def test_an_unreadable_numatopology_is_logged_and_read_as_volcano_reads_it(caplog):
    bad = scenario.numatopology(
        "wide", scenario.cpu_detail(2, 4), allocatable="7-3", res_reserved={"cpu": "lots"}
    )
    with caplog.at_level(logging.WARNING, logger="caldera.numa"):
        cache = cache_with([], [bad])
    info = cache.snapshot().numa.nodes["wide"]
    assert info.free["cpu"] == frozenset() and info.reserved_cpus is None
    assert len(caplog.records) == 1 and "7-3" in caplog.records[0].getMessage()
    _, _, errors = run([guaranteed("p", "2", "g")], {"g": 1}, topos=[bad], node_list=[nodes()[0]])
    assert errors["g"] == "0/1 nodes are available: 1 cpu allocatable map is empty."


def test_reserved_cpus_are_never_assigned():
    # resReserved cpu 1500m: 2 CPUs, taken by takeByTopology over all CPUs as a whole core: core 0.
    # The exporter's core ids repeat per socket and CPUsInCores reads them as they are, so core 0 is
    # CPUs 0, 1 (NUMA node 0) and 8, 9 (NUMA node 1), as in Volcano: 6 CPUs left on each NUMA node.
    topo = [scenario.numatopology("wide", scenario.cpu_detail(2, 4), res_reserved={"cpu": "1500m"})]
    placed, numa, errors = run([guaranteed("p", "6", "g")], {"g": 1}, topos=topo, node_list=[nodes()[0]])
    assert placed == {"p": "wide"}
    assert numa["p"]["cpu"] in (frozenset(range(2, 8)), frozenset(range(10, 16)))
    placed, _, errors = run([guaranteed("p", "7", "g")], {"g": 1}, topos=topo, node_list=[nodes()[0]])
    assert placed == {} and "cannot be assigned by numa" in errors["g"]
