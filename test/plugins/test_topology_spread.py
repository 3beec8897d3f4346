"""Pod topology spread as kube-scheduler's PodTopologySpread: DoNotSchedule filters, ScheduleAnyway
scores, maxSkew / minDomains / inclusion policies / matchLabelKeys, the cluster defaults, and
counting that sees the pods placed earlier in the same cycle."""

import msgspec

from caldera.framework.model import TaskStatus
from caldera.framework.objects import OwnerReference
from caldera.hack.scenario import InProcessCluster, cluster, gang, node, pod, podgroup, run_session

ZONE = "topology.kubernetes.io/zone"


def zone_node(name, zone, cpu="8", **kw):
    labels = {"kubernetes.io/hostname": name, **({ZONE: zone} if zone else {})}
    labels.update(kw.pop("labels", {}))
    return node(name, cpu=cpu, labels=labels, **kw)


def spread(key=ZONE, skew=1, when="DoNotSchedule", app="web", **extra):
    c = {
        "maxSkew": skew,
        "topologyKey": key,
        "whenUnsatisfiable": when,
        "labelSelector": {"matchLabels": {"app": app}},
    }
    c.update(extra)
    return {"topologySpreadConstraints": [c]}


def running(name, node_name, app="web", **kw):
    return pod(name, node_name=node_name, phase="Running", scheduler="other", labels={"app": app}, **kw)


def placed(result):
    return {p.task.name: p.node for p in result.placements}


def test_do_not_schedule_sends_the_pod_to_the_emptiest_zone():
    nodes = [zone_node("a1", "a"), zone_node("b1", "b"), zone_node("c1", "c")]
    existing = [running("w1", "a1"), running("w2", "a1"), running("w3", "b1")]
    new = pod("new", group="g", labels={"app": "web"}, spec_extra=spread())
    _, result = run_session(cluster(nodes=nodes, pods=[*existing, new], podgroups=[podgroup("g")]))
    assert placed(result) == {"new": "c1"}


def test_a_gang_spreading_over_zones_counts_its_own_members_placed_in_the_same_cycle():
    nodes = [zone_node(f"{z}{i}", z) for z in "abc" for i in range(2)]
    pg, pods = gang("spread", 6, cpu="1", labels={"app": "web"}, spec_extra=spread())
    _, result = run_session(cluster(nodes=nodes, pods=pods, podgroups=[pg]))
    zones = sorted(p.node[0] for p in result.placements)
    assert zones == ["a", "a", "b", "b", "c", "c"]


def test_skew_that_cannot_be_kept_leaves_the_gang_unplaced_with_kube_schedulers_reason():
    # zone b has no room: two pods in zone a would be a skew of 2 against b's 0
    nodes = [zone_node("a1", "a"), zone_node("b1", "b", cpu="1")]
    blocker = pod("blocker", cpu="1", node_name="b1", phase="Running", scheduler="other")
    pg, pods = gang("pair", 3, cpu="1", labels={"app": "web"}, spec_extra=spread())
    ssn, result = run_session(cluster(nodes=nodes, pods=[blocker, *pods], podgroups=[pg]))
    assert result.placements == []
    assert "node(s) didn't match pod topology spread constraints" in ssn.jobs["default/pair"].job_fit_error


def test_a_node_without_the_topology_key_never_takes_the_pod():
    nodes = [zone_node("nolabel", None, cpu="64"), zone_node("a1", "a", cpu="2")]
    p = pod("p", cpu="1", group="g", labels={"app": "web"}, spec_extra=spread())
    ssn, result = run_session(cluster(nodes=nodes, pods=[p], podgroups=[podgroup("g")]))
    assert placed(result) == {"p": "a1"}
    task = next(iter(ssn.jobs["default/g"].tasks.values()))
    counts = ssn.explain_predicates(task, ssn.all_rows)
    assert counts == {"node(s) didn't match pod topology spread constraints (missing required label)": 1}


def test_min_domains_counts_missing_domains_as_empty():
    # two zones, minDomains 3: the global minimum is 0, so each zone takes at most maxSkew pods
    nodes = [zone_node("a1", "a"), zone_node("b1", "b")]
    pg, pods = gang("g", 3, min_member=1, cpu="1", labels={"app": "web"}, spec_extra=spread(minDomains=3))
    _, result = run_session(cluster(nodes=nodes, pods=pods, podgroups=[pg]))
    assert sorted(placed(result).values()) == ["a1", "b1"]


def test_node_affinity_policy_honor_leaves_zones_the_pod_cannot_use_out_of_the_minimum():
    nodes = [zone_node("a1", "a"), zone_node("b1", "b"), zone_node("c1", "c", labels={"pool": "other"})]
    existing = [running("w1", "a1")]
    selector = {"pool": "main"}
    main_nodes = [zone_node("a1", "a", labels=selector), zone_node("b1", "b", labels=selector), nodes[2]]
    honor = pod("honor", group="g", labels={"app": "web"}, node_selector=selector, spec_extra=spread())
    _, result = run_session(cluster(nodes=main_nodes, pods=[*existing, honor], podgroups=[podgroup("g")]))
    assert placed(result) == {"honor": "b1"}
    # Ignore: zone c (not usable, empty) counts, min is 0, zone a (1 pod) is at skew 2 for a second pod
    existing2 = [running("w1", "a1"), running("w2", "b1")]
    ignore = pod(
        "ignore",
        group="g",
        labels={"app": "web"},
        node_selector=selector,
        spec_extra=spread(nodeAffinityPolicy="Ignore"),
    )
    _, result = run_session(cluster(nodes=main_nodes, pods=[*existing2, ignore], podgroups=[podgroup("g")]))
    assert result.placements == []
    honor2 = pod("honor2", group="g2", labels={"app": "web"}, node_selector=selector, spec_extra=spread())
    _, result = run_session(cluster(nodes=main_nodes, pods=[*existing2, honor2], podgroups=[podgroup("g2")]))
    assert list(placed(result)) == ["honor2"]


def test_node_taints_policy_honor_leaves_tainted_zones_out():
    taint = [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]
    nodes = [zone_node("a1", "a"), zone_node("b1", "b"), zone_node("c1", "c", taints=taint)]
    existing = [running("w1", "a1"), running("w2", "b1")]
    ignored = pod("p", group="g", labels={"app": "web"}, spec_extra=spread())
    _, result = run_session(cluster(nodes=nodes, pods=[*existing, ignored], podgroups=[podgroup("g")]))
    assert result.placements == [], "taints ignored by default: empty zone c keeps the minimum at 0"
    honored = pod("p", group="g", labels={"app": "web"}, spec_extra=spread(nodeTaintsPolicy="Honor"))
    _, result = run_session(cluster(nodes=nodes, pods=[*existing, honored], podgroups=[podgroup("g")]))
    assert next(iter(placed(result).values())) in ("a1", "b1")


def test_match_label_keys_count_only_pods_of_the_same_revision():
    nodes = [zone_node("a1", "a"), zone_node("b1", "b")]
    old = [
        pod(f"old{i}", node_name="a1", phase="Running", scheduler="other", labels={"app": "web", "rev": "1"})
        for i in range(3)
    ]
    new = pod("new", group="g", labels={"app": "web", "rev": "2"}, spec_extra=spread(matchLabelKeys=["rev"]))
    _, result = run_session(cluster(nodes=nodes, pods=[*old, new], podgroups=[podgroup("g")]))
    assert list(placed(result)) == ["new"], "revision 1 pods are not counted: both zones are empty for rev 2"
    plain = pod("plain", group="g", labels={"app": "web", "rev": "2"}, spec_extra=spread())
    _, result = run_session(cluster(nodes=nodes, pods=[*old, plain], podgroups=[podgroup("g")]))
    assert placed(result) == {"plain": "b1"}


def test_schedule_anyway_prefers_the_emptier_zone_but_still_places():
    nodes = [zone_node("a1", "a", cpu="4"), zone_node("b1", "b", cpu="4")]
    existing = [running(f"w{i}", "a1", cpu="100m") for i in range(3)]
    soft = pod("soft", group="g", cpu="100m", labels={"app": "web"}, spec_extra=spread(when="ScheduleAnyway"))
    _, result = run_session(cluster(nodes=nodes, pods=[*existing, soft], podgroups=[podgroup("g")]))
    assert placed(result) == {"soft": "b1"}
    full = [pod("fill", cpu="4", node_name="b1", phase="Running", scheduler="other")]
    soft2 = pod(
        "soft2", group="g2", cpu="100m", labels={"app": "web"}, spec_extra=spread(when="ScheduleAnyway")
    )
    _, result = run_session(cluster(nodes=nodes, pods=[*existing, *full, soft2], podgroups=[podgroup("g2")]))
    assert placed(result) == {"soft2": "a1"}


def test_pods_of_a_replicaset_are_spread_over_hosts_by_the_cluster_defaults():
    nodes = [zone_node(f"n{i}", "a", cpu="16") for i in range(3)]
    owner = OwnerReference(
        kind="ReplicaSet", name="web-abc", uid="rs-1", api_version="apps/v1", controller=True
    )
    pods = []
    for i in range(3):
        p = pod(f"web-{i}", cpu="1", group=f"g{i}", labels={"app": "web"})
        pods.append(
            msgspec.structs.replace(p, metadata=msgspec.structs.replace(p.metadata, owner_references=[owner]))
        )
    # without spreading, least-requested alone would also spread; make it prefer packing
    conf = (
        'actions: "allocate"\ntiers:\n- plugins:\n  - name: gang\n- plugins:\n  - name: predicates\n'
        "  - name: nodeorder\n    arguments: {leastrequested.weight: 0, balancedresource.weight: 0, mostrequested.weight: 1}\n"
    )
    sim = InProcessCluster(conf, nodes=nodes, pods=pods, podgroups=[podgroup(f"g{i}") for i in range(3)])
    sim.cycle()
    assert sorted(sim.running_on().values()) == ["n0", "n1", "n2"]
    # the same pods without a controller pack onto one node
    loose = [pod(f"loose-{i}", cpu="1", group=f"l{i}", labels={"app": "web"}) for i in range(3)]
    sim = InProcessCluster(conf, nodes=nodes, pods=loose, podgroups=[podgroup(f"l{i}") for i in range(3)])
    sim.cycle()
    assert len(set(sim.running_on().values())) == 1


def test_evicted_pods_stop_counting_and_a_discarded_gang_gives_its_counts_back():
    nodes = [zone_node("a1", "a"), zone_node("b1", "b")]
    pg, pods = gang("g", 2, cpu="1", labels={"app": "web"}, spec_extra=spread())
    snap = cluster(nodes=nodes, pods=pods, podgroups=[pg])
    from caldera.config.conf import DEFAULT_CONF, parse_conf
    from caldera.framework.session import open_session
    from caldera.scheduler.registry import builtin_registry

    registry = builtin_registry()
    conf = parse_conf(DEFAULT_CONF, registry)
    ssn = open_session(snap, conf.tiers, registry.plugins)
    t0, t1 = sorted(ssn.jobs["default/g"].tasks.values(), key=lambda t: t.name)
    stmt = ssn.statement()
    stmt.allocate(t0, "a1")
    assert ssn.best_placement(t1) == (ssn.nodes["b1"].row, True)
    stmt.discard()
    assert t0.status == TaskStatus.PENDING
    # with a1's pod gone again, both zones are empty: a1 is a valid choice once more
    assert ssn.feasible_mask(t1).all()
