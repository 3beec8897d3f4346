"""conformance: system-critical pods are never chosen as victims."""

from caldera.hack.scenario import InProcessCluster, node, pod, podgroup, priority_class

CONF = 'actions: "allocate, preempt"\ntiers:\n- plugins:\n  - name: priority\n  - name: gang\n  - name: conformance\n- plugins:\n  - name: predicates\n'
P = {"volcano.sh/preemptable": "true"}


def test_kube_system_and_critical_pods_are_not_preempted():
    pods = [
        pod(
            "sys-0",
            cpu="2",
            group="sys",
            namespace="kube-system",
            node_name="n1",
            phase="Running",
            annotations=P,
        ),
        pod(
            "crit-0",
            cpu="2",
            group="crit",
            node_name="n1",
            phase="Running",
            annotations=P,
            priority_class="system-node-critical",
        ),
    ]
    pgs = [podgroup("sys", namespace="kube-system", phase="Running"), podgroup("crit", phase="Running")]
    sim = InProcessCluster(
        CONF,
        nodes=[node("n1", cpu="4")],
        pods=pods,
        podgroups=pgs,
        priority_classes=[priority_class("top", 10**6)],
    )
    sim.add(podgroups=[podgroup("vip", priority_class="top")], pods=[pod("vip-0", cpu="2", group="vip")])
    assert sim.cycle().evictions == []
