"""predicates: each filter, alone, decides where one pod may go, and says why not."""

import pytest

from caldera.hack.scenario import cluster, node, pod, podgroup, run_session

CONF = 'actions: "allocate"\ntiers:\n- plugins:\n  - name: gang\n  - name: predicates\n'


def place(nodes, the_pod, others=()):
    pg = podgroup("g", min_member=1)
    snap = cluster(nodes=nodes, pods=[*others, the_pod], podgroups=[pg])
    ssn, result = run_session(snap, CONF)
    where = {p.task.name: p.node for p in result.placements}.get(the_pod.metadata.name)
    return where, ssn.jobs["default/g"].job_fit_error


def test_unschedulable_and_not_ready_nodes_are_skipped():
    where, why = place([node("cordoned", unschedulable=True), node("down", ready=False)], pod("p", group="g"))
    assert where is None
    assert why == "0/2 nodes are available: 1 node(s) were not ready, 1 node(s) were unschedulable."
    where, _ = place([node("cordoned", unschedulable=True), node("ok")], pod("p", group="g"))
    assert where == "ok"


def test_node_selector():
    nodes = [node("a", labels={"disk": "hdd"}), node("b", labels={"disk": "ssd"})]
    assert place(nodes, pod("p", group="g", node_selector={"disk": "ssd"}))[0] == "b"
    where, why = place(nodes, pod("p", group="g", node_selector={"disk": "nvme"}))
    assert where is None and "2 node(s) didn't match Pod's node affinity/selector" in why


@pytest.mark.parametrize(
    ("operator", "values", "expected"),
    [
        ("In", ["ssd"], "b"),
        ("NotIn", ["ssd"], "a"),
        ("Exists", [], "b"),
        ("DoesNotExist", [], "a"),
        ("Gt", ["5"], "b"),
    ],
)
def test_required_node_affinity(operator, values, expected):
    nodes = [node("a", labels={"size": "1"}), node("b", labels={"disk": "ssd", "size": "9"})]
    key = "size" if operator == "Gt" else "disk"
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": key, "operator": operator, "values": values}]}
                ]
            }
        }
    }
    assert place(nodes, pod("p", group="g", affinity=affinity))[0] == expected


def test_taints_and_tolerations():
    tainted = node("gpu", taints=[{"key": "gpu", "value": "yes", "effect": "NoSchedule"}])
    where, why = place([tainted], pod("p", group="g"))
    assert where is None and "1 node(s) had untolerated taint" in why
    tol = [{"key": "gpu", "operator": "Equal", "value": "yes", "effect": "NoSchedule"}]
    assert place([tainted], pod("p", group="g", tolerations=tol))[0] == "gpu"
    soft = node("soft", taints=[{"key": "x", "value": "y", "effect": "PreferNoSchedule"}])
    assert place([soft], pod("p", group="g"))[0] == "soft"


def test_host_ports():
    busy = pod("web", group=None, node_name="a", phase="Running", host_ports=[8080], scheduler="other")
    assert place([node("a"), node("b")], pod("p", group="g", host_ports=[8080]), [busy])[0] == "b"
    where, why = place([node("a")], pod("p", group="g", host_ports=[8080]), [busy])
    assert where is None and "free ports" in why


def test_pod_count():
    full = [pod(f"x{i}", cpu="10m", node_name="a", phase="Running", scheduler="other") for i in range(2)]
    where, why = place([node("a", pods="2")], pod("p", group="g"), full)
    assert where is None and why == "0/1 nodes are available: 1 Too many pods."


def test_resource_fit_including_extended_resources():
    nodes = [node("cpu-only", cpu="16"), node("gpu", cpu="4", extra={"nvidia.com/gpu": "2"})]
    assert place(nodes, pod("p", group="g", cpu="2", extra={"nvidia.com/gpu": "1"}))[0] == "gpu"
    where, why = place(nodes, pod("p", group="g", cpu="2", extra={"nvidia.com/gpu": "4"}))
    assert where is None and why == "0/2 nodes are available: 2 Insufficient nvidia.com/gpu."
    where, why = place(nodes, pod("p", group="g", cpu="32"))
    assert why == "0/2 nodes are available: 2 Insufficient cpu."


def test_required_pod_affinity_and_anti_affinity():
    nodes = [node("a", labels={"zone": "z1"}), node("b", labels={"zone": "z2"})]
    db = pod("db", group=None, node_name="b", phase="Running", labels={"app": "db"}, scheduler="other")
    term = {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "zone"}
    near = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    far = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    assert place(nodes, pod("p", group="g", affinity=near), [db])[0] == "b"
    assert place(nodes, pod("p", group="g", affinity=far), [db])[0] == "a"
    where, why = place(nodes[1:], pod("p", group="g", affinity=far), [db])
    assert where is None and "anti-affinity" in why


def test_anti_affinity_spreads_a_gang_one_per_node():
    nodes = [node(f"n{i}", labels={"kubernetes.io/hostname": f"n{i}"}) for i in range(3)]
    term = {"labelSelector": {"matchLabels": {"app": "spread"}}, "topologyKey": "kubernetes.io/hostname"}
    aff = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    pods = [pod(f"s{i}", group="g", labels={"app": "spread"}, affinity=aff) for i in range(3)]
    snap = cluster(nodes=nodes, pods=pods, podgroups=[podgroup("g", min_member=3)])
    _, result = run_session(snap, CONF)
    assert sorted(p.node for p in result.placements) == ["n0", "n1", "n2"]
    pods4 = [pod(f"s{i}", group="g", labels={"app": "spread"}, affinity=aff) for i in range(4)]
    snap = cluster(nodes=nodes, pods=pods4, podgroups=[podgroup("g", min_member=4)])
    assert run_session(snap, CONF)[1].placements == []
