"""explain and /debug/jobs for a job with sub-group policies: which sub-groups are whole, which
could not be placed and why, and which HyperNode each went to."""

from __future__ import annotations

import json

from caldera.hack.scenario import cluster, node, pod, podgroup, run_session
from caldera.scheduler.explain import explain_session
from caldera.scheduler.explain_cli import render
from test.actions.test_subgroups import hn

CONF = """actions: "allocate"
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: predicates
  - name: nodeorder
  - name: network-topology-aware
"""
POLICY = [
    {
        "name": "role",
        "matchLabelKeys": ["role"],
        "subGroupSize": 2,
        "minSubGroups": 2,
        "networkTopology": {"mode": "hard", "highestTierAllowed": 1},
    }
]


def session(fill_b: bool):
    """Leaves a and b of two 2-cpu nodes each (one sub-group of two 2-cpu pods a leaf); ``fill_b``:
    another scheduler holds a cpu of each of b's nodes."""
    nodes = [node(f"{leaf}-n{i}", cpu="2") for leaf in "ab" for i in range(2)]
    pods = [
        pod(f"{r}-{i}", cpu="2", group="llm", labels={"role": r})
        for r in ("prefill", "decode")
        for i in range(2)
    ]
    if fill_b:
        pods += [
            pod(f"fill-{i}", cpu="1", node_name=f"b-n{i}", phase="Running", scheduler="other")
            for i in range(2)
        ]
    snap = cluster(nodes=nodes, pods=pods, podgroups=[podgroup("llm", min_member=4, sub_group_policy=POLICY)])
    snap.hypernodes = {"a": hn("a", 1, ["a-n0", "a-n1"]), "b": hn("b", 1, ["b-n0", "b-n1"])}
    snap.hypernodes["spine"] = hn("spine", 2, ["a", "b"], "HyperNode")
    ssn, _ = run_session(snap, CONF)
    explain_session(ssn)
    return ssn


def test_a_pending_job_says_which_sub_group_fits_where_and_which_fits_nowhere():
    # leaf b is half full: one sub-group fits leaf a, the other fits nowhere,
    # but the job needs both whole, so nothing is placed
    ssn = session(fill_b=True)
    doc = ssn.report.explanations["default/llm"]
    assert json.loads(json.dumps(doc)) == doc
    sub = doc["sub_groups"]
    assert sub["policies"] == [{"policy": "role", "min_sub_groups": 2, "whole": 0}]
    rows = {g["name"]: g for g in sub["groups"]}
    assert set(rows) == {"role-prefill", "role-decode"}
    fitted = [g for g in rows.values() if g["fit_in"]]
    failed = [g for g in rows.values() if g["reason"]]
    assert [g["fit_in"] for g in fitted] == ["a"]
    assert len(failed) == 1 and failed[0]["reason"] == (
        "no group up to tier 1 within <cluster> has the room its pods ask for"
    )
    assert all(not g["whole"] and g["hypernode"] == "" and g["highest_tier"] == 1 for g in rows.values())
    text = render({**doc, "cycle": 1})
    assert "policy role: 0 whole of the 2 needed" in text and "fits in a" in text


def test_a_placed_job_shows_the_hypernode_each_sub_group_went_to():
    ssn = session(fill_b=False)
    sub = ssn.report.sub_groups["default/llm"]
    assert sub["policies"] == [{"policy": "role", "min_sub_groups": 2, "whole": 2}]
    where = {g["name"]: g["hypernode"] for g in sub["groups"]}
    assert sorted(where.values()) == ["a", "b"] and all(g["whole"] for g in sub["groups"])
    assert "default/llm" not in ssn.report.explanations  # not pending: only its sub-group state is kept
