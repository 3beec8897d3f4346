"""nodeorder: each score picks the node it should, and its weight argument switches it."""

from caldera.hack.scenario import cluster, node, pod, podgroup, run_session


def conf(**weights):
    args = "".join(f"\n      {k}.weight: {v}" for k, v in weights.items())
    return (
        'actions: "allocate"\ntiers:\n- plugins:\n  - name: gang\n  - name: predicates\n  - name: nodeorder\n'
        f"    arguments:{args or ' {}'}\n"
    )


ALL_OFF = dict(
    leastrequested=0, mostrequested=0, balancedresource=0, nodeaffinity=0, podaffinity=0, tainttoleration=0
)


def where(nodes, the_pod, others=(), **weights):
    snap = cluster(nodes=nodes, pods=[*others, the_pod], podgroups=[podgroup("g", min_member=1)])
    _, result = run_session(snap, conf(**{**ALL_OFF, **weights}))
    return result.placements[0].node


def busy(node_name, cpu, memory="1Gi"):
    return pod(
        f"busy-{node_name}-{cpu}",
        cpu=cpu,
        memory=memory,
        node_name=node_name,
        phase="Running",
        scheduler="other",
    )


def test_least_requested_prefers_the_emptier_node_and_most_requested_the_fuller():
    nodes = [node("empty", cpu="8"), node("half", cpu="8")]
    others = [busy("half", "4")]
    assert where(nodes, pod("p", group="g"), others, leastrequested=1) == "empty"
    assert where(nodes, pod("p", group="g"), others, mostrequested=1) == "half"


def test_balanced_allocation_prefers_even_cpu_and_memory_use():
    nodes = [node("a", cpu="8", memory="8Gi"), node("b", cpu="8", memory="8Gi")]
    others = [busy("a", "4", "1Gi"), busy("b", "4", "4Gi")]
    assert where(nodes, pod("p", group="g", cpu="1", memory="1Gi"), others, balancedresource=1) == "b"


def test_preferred_node_affinity_and_its_weight():
    nodes = [node("a", labels={"tier": "cold"}), node("b", labels={"tier": "hot"})]
    aff = {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 10,
                    "preference": {
                        "matchExpressions": [{"key": "tier", "operator": "In", "values": ["hot"]}]
                    },
                }
            ]
        }
    }
    assert where(nodes, pod("p", group="g", affinity=aff), nodeaffinity=1) == "b"
    # a heavier least-requested score outweighs it when the preferred node is busier
    others = [busy("b", "6")]
    assert where(nodes, pod("p", group="g", affinity=aff), others, nodeaffinity=1, leastrequested=5) == "a"
    assert where(nodes, pod("p", group="g", affinity=aff), others, nodeaffinity=10, leastrequested=1) == "b"


def test_taint_toleration_avoids_prefer_no_schedule():
    nodes = [node("a", taints=[{"key": "k", "value": "v", "effect": "PreferNoSchedule"}]), node("b")]
    assert where(nodes, pod("p", group="g"), tainttoleration=1) == "b"
    tol = [{"key": "k", "operator": "Exists"}]
    nodes2 = [node("a", taints=[{"key": "k", "value": "v", "effect": "PreferNoSchedule"}]), node("b")]
    # tolerated: both score the same and the tie goes to the first name
    assert where(nodes2, pod("p", group="g", tolerations=tol), tainttoleration=1) == "a"


def test_preferred_pod_affinity():
    nodes = [node("a", labels={"zone": "z1"}), node("b", labels={"zone": "z2"})]
    cache = pod("cache", node_name="b", phase="Running", labels={"app": "cache"}, scheduler="other")
    term = {"labelSelector": {"matchLabels": {"app": "cache"}}, "topologyKey": "zone"}
    near = {
        "podAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 5, "podAffinityTerm": term}]
        }
    }
    far = {
        "podAntiAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 5, "podAffinityTerm": term}]
        }
    }
    assert where(nodes, pod("p", group="g", affinity=near), [cache], podaffinity=1) == "b"
    assert where(nodes, pod("p", group="g", affinity=far), [cache], podaffinity=1) == "a"


def test_preferred_pod_affinity_counts_the_matching_pods_in_each_domain():
    nodes = [
        node("a", labels={"zone": "z1"}),
        node("b", labels={"zone": "z2"}),
        node("c", labels={"zone": "z3"}),
    ]
    caches = [
        pod("c1", node_name="a", phase="Running", labels={"app": "cache"}, scheduler="other"),
        pod("c2", node_name="b", phase="Running", labels={"app": "cache"}, scheduler="other"),
        pod("c3", node_name="b", phase="Running", labels={"app": "cache"}, scheduler="other"),
    ]
    term = {"labelSelector": {"matchLabels": {"app": "cache"}}, "topologyKey": "zone"}
    near = {
        "podAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 5, "podAffinityTerm": term}]
        }
    }
    # zone z2 holds two cache pods, z1 one: the count decides, not just presence
    assert where(nodes, pod("p", group="g", affinity=near), caches, podaffinity=1) == "b"


def test_placed_pods_preferred_terms_attract_and_repel_the_incoming_pod():
    nodes = [node("a", labels={"zone": "z1"}), node("b", labels={"zone": "z2"})]
    term = {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "zone"}
    likes_web = {
        "podAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 10, "podAffinityTerm": term}]
        }
    }
    dislikes_web = {
        "podAntiAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 10, "podAffinityTerm": term}]
        }
    }
    friend = pod("friend", node_name="b", phase="Running", scheduler="other", affinity=likes_web)
    enemy = pod("enemy", node_name="a", phase="Running", scheduler="other", affinity=dislikes_web)
    web = pod("web", group="g", labels={"app": "web"})
    # the incoming pod has no terms of its own: the placed pods' terms decide (kube's symmetry)
    assert where(nodes, web, [friend], podaffinity=1) == "b"
    assert where(nodes, web, [enemy], podaffinity=1) == "b"
    plain = pod("plain", group="g", labels={"app": "db"})
    assert where(nodes, plain, [enemy], podaffinity=1) == "a", (
        "terms that do not match it leave it alone (name order)"
    )


def test_volcano_default_weights():
    from caldera.framework.plugin import Arguments
    from caldera.plugins.nodeorder import NodeOrderPlugin

    snap = cluster(nodes=[node("a")])
    from caldera.framework.session import Session

    plugin = NodeOrderPlugin(Arguments("nodeorder"))
    plugin.on_session_open(Session(snap, []))
    weights = (
        plugin.least,
        plugin.most,
        plugin.balanced,
        plugin.node_affinity,
        plugin.pod_affinity,
        plugin.taint,
    )
    assert weights == (1, 0, 1, 2, 2, 3)
    assert plugin.spread_weight == 2
