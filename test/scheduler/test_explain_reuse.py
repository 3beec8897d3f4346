"""An unschedulable backlog is not re-analysed in detail every cycle: a job keeps its explanation
while its one-line reason stays the same, for a few seconds at most."""

from caldera.hack.scenario import cluster, gang, node, run_session
from caldera.scheduler.explain import BUILT_AT, explain_session


def explained(snap, previous=None, now=0.0):
    ssn, _ = run_session(snap)
    ssn.report.explanations.clear()
    return explain_session(ssn, previous=previous, now=now, max_age=5.0)


def test_unchanged_reason_reuses_the_document_until_it_is_too_old():
    pg, pods = gang("big", 3, cpu="6")
    snap = lambda: cluster(nodes=[node("n1", cpu="4"), node("n2", cpu="4")], pods=pods, podgroups=[pg])  # noqa: E731
    first = explained(snap(), now=100.0)
    doc = first["default/big"]
    assert "Insufficient cpu" in doc["reason"] and doc[BUILT_AT] == 100.0
    again = explained(snap(), previous=first, now=103.0)
    assert again["default/big"] is doc  # same reason, young enough: reused as is
    later = explained(snap(), previous=first, now=106.0)
    assert later["default/big"] is not doc and later["default/big"][BUILT_AT] == 106.0
    # the cluster changed so that the reason changed: rebuilt at once
    pg2, pods2 = gang("big", 3, cpu="6")
    changed = cluster(nodes=[node("n1", cpu="4")], pods=pods2, podgroups=[pg2])
    fresh = explained(changed, previous=first, now=101.0)
    assert fresh["default/big"] is not doc
    assert fresh["default/big"]["reason"] != doc["reason"]
