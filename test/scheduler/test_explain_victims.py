"""Explain says which plugin refused which victim: when preempt could not take the pods a job
needs because a plugin's victim function refused them (pdb, gang, conformance, ...), the job's
explanation (``/debug/jobs``, ``caldera-scheduler explain``) names the plugin and the pod."""

from caldera.hack.scenario import InProcessCluster, node, pdb, pod, podgroup, priority_class
from caldera.scheduler.explain_cli import render

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


def running(name, group, namespace="default", app="db"):
    return pod(
        name,
        cpu="2",
        group=group,
        namespace=namespace,
        node_name="n1",
        phase="Running",
        annotations={"volcano.sh/preemptable": "true"},
        labels={"app": app},
        priority_class="low",
    )


def pending_after_preempt(pods, podgroups, pdbs=()):
    sim = InProcessCluster(
        CONF,
        nodes=[node("n1", cpu="4")],
        pods=pods,
        podgroups=podgroups,
        pdbs=list(pdbs),
        priority_classes=[priority_class("high", 1000), priority_class("low", 1)],
    )
    sim.add(
        podgroups=[podgroup("urgent", priority_class="high")],
        pods=[pod("urgent", cpu="2", group="urgent", priority_class="high")],
    )
    result = sim.cycle()
    assert result.evictions == []
    return result.report.explanations["default/urgent"]


def test_a_victim_the_disruption_budget_protects_is_named_with_pdb():
    doc = pending_after_preempt(
        [running("db-0", "db"), running("db-1", "db")],
        [podgroup("db", min_member=1, phase="Running")],
        [pdb("db", {"app": "db"}, allowed=0)],
    )
    # gang lets one of db's two pods go (its minimum is 1), not the other; the budget allows no
    # disruption of the one gang would let go
    assert doc["victims_refused"] == [
        {"action": "preempt", "victim": "default/db-0", "plugin": "pdb"},
        {"action": "preempt", "victim": "default/db-1", "plugin": "gang"},
    ]
    lines = render({**doc, "cycle": 1}).splitlines()
    assert "  Victim:     preempt could not take pod default/db-0: refused by pdb" in lines


def test_a_victim_its_gang_cannot_spare_is_named_with_gang():
    doc = pending_after_preempt(
        [running("db-0", "db"), running("db-1", "db")], [podgroup("db", min_member=2, phase="Running")]
    )
    assert {(v["victim"], v["plugin"]) for v in doc["victims_refused"]} == {
        ("default/db-0", "gang"),
        ("default/db-1", "gang"),
    }


def test_a_system_pod_is_named_with_conformance():
    doc = pending_after_preempt(
        [running("dns-0", "dns", namespace="kube-system"), running("dns-1", "dns", namespace="kube-system")],
        # minimum 0: gang would let both go
        [podgroup("dns", min_member=0, phase="Running", namespace="kube-system")],
    )
    assert {(v["victim"], v["plugin"]) for v in doc["victims_refused"]} == {
        ("kube-system/dns-0", "conformance"),
        ("kube-system/dns-1", "conformance"),
    }


def test_no_refusal_no_entry():
    # room on the node: nothing to preempt, nothing refused
    sim = InProcessCluster(CONF, nodes=[node("n1", cpu="1")], priority_classes=[priority_class("high", 1000)])
    sim.add(podgroups=[podgroup("big", priority_class="high")], pods=[pod("big", cpu="2", group="big")])
    doc = sim.cycle().report.explanations["default/big"]
    assert doc["victims_refused"] == []
