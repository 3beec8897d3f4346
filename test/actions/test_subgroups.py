"""Sub-groups (``spec.subGroupPolicy``) in one session: how pods split, what a bad policy does, and
each of Volcano's five sub-job / HyperNode switches, off against on."""

from __future__ import annotations

from typing import Any

from caldera.framework.objects import HyperNode, convert
from caldera.framework.subjobs import sub_jobs
from caldera.hack.scenario import cluster, node, pod, podgroup, run_session

ROLE = {"name": "role", "matchLabelKeys": ["role"], "subGroupSize": 2, "minSubGroups": 2}
HARD1 = {"mode": "hard", "highestTierAllowed": 1}


def conf(gang: str = "", nta: str = "") -> str:
    return f"""actions: "allocate"
tiers:
- plugins:
  - name: gang
{gang}
- plugins:
  - name: predicates
  - name: nodeorder
  - name: network-topology-aware
{nta}
"""


def hn(name: str, tier: int, members: list[str], kind: str = "Node") -> HyperNode:
    body = {
        "tier": tier,
        "members": [{"type": kind, "selector": {"exactMatch": {"name": m}}} for m in members],
    }
    return convert(HyperNode, {"metadata": {"name": name}, "spec": body})


def two_leaves(cpu_a: str = "4", cpu_b: str = "4", used_b: str = "") -> tuple[list[Any], list[Any], dict]:
    """Leaves a and b of two nodes each under one spine; ``used_b``: cpu another scheduler holds on b's nodes."""
    nodes = [node(f"{leaf}-n{i}", cpu=c) for leaf, c in (("a", cpu_a), ("b", cpu_b)) for i in range(2)]
    fillers = (
        [
            pod(f"fill-{i}", cpu=used_b, node_name=f"b-n{i}", phase="Running", scheduler="other")
            for i in range(2)
        ]
        if used_b
        else []
    )
    hns = {"a": hn("a", 1, ["a-n0", "a-n1"]), "b": hn("b", 1, ["b-n0", "b-n1"])}
    hns["spine"] = hn("spine", 2, ["a", "b"], "HyperNode")
    return nodes, fillers, hns


def session(nodes, pods, pgs, hns, text):
    snap = cluster(nodes=nodes, pods=pods, podgroups=pgs)
    snap.hypernodes = hns
    return run_session(snap, text)


def roles(*names: str, cpu: str = "1", size: int = 2) -> list[Any]:
    return [pod(f"{r}-{i}", cpu=cpu, group="llm", labels={"role": r}) for r in names for i in range(size)]


# -- splitting and checking -------------------------------------------------------------------------
def test_pods_split_by_the_values_of_match_label_keys_and_the_rest_go_to_the_default_group():
    pg = podgroup("llm", min_member=1, sub_group_policy=[{**ROLE, "minSubGroups": 0}])
    pods = [*roles("prefill", "decode"), pod("sidecar", cpu="1", group="llm")]
    ssn, _ = session([node("n", cpu="16")], pods, [pg], {}, conf())
    split = {s.uid: sorted(t.name for t in s.tasks.values()) for s in sub_jobs(ssn, ssn.jobs["default/llm"])}
    assert split == {
        "default/llm/role-prefill": ["prefill-0", "prefill-1"],
        "default/llm/role-decode": ["decode-0", "decode-1"],
        "default/llm": ["sidecar"],
    }


def test_a_policy_the_api_server_would_refuse_keeps_the_job_off_and_says_why():
    pg = podgroup("llm", min_member=1, sub_group_policy=[{**ROLE, "subGroupSize": 0}])
    ssn, result = session([node("n", cpu="16")], roles("prefill"), [pg], {}, conf())
    assert not result.placements
    events = [e for e in ssn.report.events if e[0] == "PodGroup"]
    assert events == [
        (
            "PodGroup",
            "default/llm",
            "InvalidSubGroupPolicy",
            "subGroupPolicy[0] (role): subGroupSize must be at least 1, got 0",
        )
    ]


def test_a_selector_that_does_not_parse_matches_no_pod_and_is_reported():
    bad = {
        **ROLE,
        "minSubGroups": 0,
        "labelSelector": {"matchExpressions": [{"key": "role", "operator": "Near"}]},
    }
    pg = podgroup("llm", min_member=2, sub_group_policy=[bad])
    ssn, result = session([node("n", cpu="16")], roles("prefill"), [pg], {}, conf())
    assert len(result.placements) == 2  # the pods are the default group's: a plain gang of two
    assert [s.uid for s in sub_jobs(ssn, ssn.jobs["default/llm"])] == ["default/llm"]
    assert any(e[2] == "InvalidSubGroupPolicy" and "Near" in e[3] for e in ssn.report.events)


def test_fewer_sub_groups_than_min_sub_groups_is_not_a_valid_job():
    pg = podgroup("llm", min_member=2, sub_group_policy=[{**ROLE, "minSubGroups": 3}])
    _, result = session([node("n", cpu="16")], roles("prefill", "decode"), [pg], {}, conf())
    assert not result.placements


# -- the switches -----------------------------------------------------------------------------------
def _unplaced(text: str):
    pg = podgroup("llm", min_member=4, sub_group_policy=[ROLE])
    nodes = [node("n", cpu="1")]  # no room: nothing is placed, every sub-group stays unready
    ssn, _ = session(nodes, roles("prefill", "decode"), [pg], {}, text)
    job = ssn.jobs["default/llm"]
    return ssn, job, sorted(sub_jobs(ssn, job), key=lambda s: s.uid)


def test_enabled_sub_job_ready_off_leaves_no_sub_group_test():
    ssn, job, subs = _unplaced(conf())
    assert not any(ssn.sub_job_ready(job, s) for s in subs)
    ssn, job, subs = _unplaced(conf(gang="    enabledSubJobReady: false"))
    assert all(ssn.sub_job_ready(job, s) for s in subs)


def test_enabled_sub_job_pipelined_off_leaves_no_sub_group_vote():
    ssn, job, subs = _unplaced(conf())
    assert not any(ssn.sub_job_pipelined(job, s) for s in subs)
    ssn, job, subs = _unplaced(conf(gang="    enabledSubJobPipelined: false"))
    assert all(ssn.sub_job_pipelined(job, s) for s in subs)


def test_enabled_sub_job_order_off_orders_sub_groups_by_index_and_uid_only():
    # "decode" sorts first by uid; gang's order puts the unready "prefill" before the ready "decode"
    pg = podgroup("llm", min_member=1, sub_group_policy=[{**ROLE, "minSubGroups": 0}])
    pods = [
        pod(f"decode-{i}", cpu="1", group="llm", labels={"role": "decode"}, node_name="n", phase="Running")
        for i in range(2)
    ] + roles("prefill")
    for text, first in ((conf(), "prefill"), (conf(gang="    enabledSubJobOrder: false"), "decode")):
        ssn, _ = session([node("n", cpu="1")], pods, [pg], {}, text)
        job = ssn.jobs["default/llm"]
        subs = [s for s in sub_jobs(ssn, job) if s.policy]
        assert sorted(subs, key=ssn.sub_job_key)[0].uid == f"default/llm/role-{first}"


def test_enabled_hypernode_order_off_takes_the_first_leaf_that_fits_by_name():
    # leaf b is already half used: the tighter fit; without hypernode order leaf a (first by name) wins
    nodes, fillers, hns = two_leaves(used_b="2")
    for text, leaf in ((conf(), "b"), (conf(nta="    enabledHyperNodeOrder: false"), "a")):
        pg = podgroup(
            "llm", min_member=2, sub_group_policy=[{**ROLE, "minSubGroups": 1, "networkTopology": HARD1}]
        )
        _, result = session(nodes, fillers + roles("prefill"), [pg], hns, text)
        assert {p.node[0] for p in result.placements} == {leaf}, text
        # a whole gang without sub-groups (actions/topology.py) follows the same switch
        gang = podgroup("job", min_member=2, network_topology=HARD1)
        pods = [pod(f"job-{i}", cpu="1", group="job") for i in range(2)]
        _, result = session(nodes, fillers + pods, [gang], hns, text)
        assert {p.node[0] for p in result.placements} == {leaf}, text


def test_enabled_hypernode_gradient_off_lets_a_hard_sub_group_span_leaves():
    # a sub-group of four 3-cpu pods fits no leaf (two 4-cpu nodes each) but fits the cluster
    nodes, _, hns = two_leaves()
    policy = [{**ROLE, "subGroupSize": 4, "minSubGroups": 1, "networkTopology": HARD1}]
    for text, placed in ((conf(), 0), (conf(nta="    enabledHyperNodeGradient: false"), 4)):
        pg = podgroup("llm", min_member=4, sub_group_policy=policy)
        _, result = session(nodes, roles("prefill", cpu="3", size=4), [pg], hns, text)
        assert len(result.placements) == placed, text
        gang = podgroup("job", min_member=4, network_topology=HARD1)
        pods = [pod(f"job-{i}", cpu="3", group="job") for i in range(4)]
        _, result = session(nodes, pods, [gang], hns, text)
        assert len(result.placements) == placed, text


# -- highestTierName --------------------------------------------------------------------------------
def named_leaves() -> tuple[list[Any], dict]:
    """two_leaves' nodes (4 cpu each) with the leaves' tier named "leaf" and the spine's "spine"."""
    nodes, _, hns = two_leaves()
    named = {}
    for name, h in hns.items():
        spec = {
            "tier": h.spec.tier,
            "tierName": "leaf" if h.spec.tier == 1 else "spine",
            "members": [
                {"type": m.type, "selector": {"exactMatch": {"name": m.selector.exact_match.name}}}
                for m in h.spec.members
            ],
        }
        named[name] = convert(HyperNode, {"metadata": {"name": name}, "spec": spec})
    return nodes, named


def test_a_sub_group_bounded_by_tier_name_stays_inside_the_tier_it_names(caplog):
    # four 3-cpu pods fit no leaf (two 4-cpu nodes) but fit the spine: "leaf" keeps them off, "spine" lets them in
    nodes, hns = named_leaves()
    placed = {}
    for name in ("leaf", "spine"):
        policy = [
            {
                **ROLE,
                "subGroupSize": 4,
                "minSubGroups": 1,
                "networkTopology": {"mode": "hard", "highestTierName": name},
            }
        ]
        pg = podgroup("llm", min_member=4, sub_group_policy=policy)
        _, result = session(nodes, roles("prefill", cpu="3", size=4), [pg], hns, conf())
        placed[name] = len(result.placements)
    assert placed == {"leaf": 0, "spine": 4}


def test_a_tier_name_no_hypernode_carries_bounds_nothing_and_is_reported(caplog):
    nodes, hns = named_leaves()
    policy = [
        {
            **ROLE,
            "subGroupSize": 4,
            "minSubGroups": 1,
            "networkTopology": {"mode": "hard", "highestTierName": "rack"},
        }
    ]
    pg = podgroup("llm", min_member=4, sub_group_policy=policy)
    ssn, result = session(nodes, roles("prefill", cpu="3", size=4), [pg], hns, conf())
    assert len(result.placements) == 4  # Volcano skips the translation: no tier bound at all
    events = [e for e in ssn.report.events if e[2] == "UnknownHighestTierName"]
    assert len(events) == 1 and events[0][1] == "default/llm"
    assert "subGroupPolicy role networkTopology" in events[0][3] and "'rack'" in events[0][3]
    assert "leaf (tier 1), spine (tier 2)" in events[0][3]
    assert [r for r in caplog.records if "'rack'" in r.getMessage()]


def test_a_job_level_tier_name_bounds_the_whole_gang():
    nodes, hns = named_leaves()
    for name, placed in (("leaf", 0), ("spine", 4)):
        gang = podgroup("job", min_member=4, network_topology={"mode": "hard", "highestTierName": name})
        pods = [pod(f"job-{i}", cpu="3", group="job") for i in range(4)]
        _, result = session(nodes, pods, [gang], hns, conf())
        assert len(result.placements) == placed, name


def test_both_tier_fields_set_reads_the_number_and_warns():
    nodes, hns = named_leaves()
    nt = {"mode": "hard", "highestTierAllowed": 2, "highestTierName": "leaf"}
    pg = podgroup(
        "llm",
        min_member=4,
        sub_group_policy=[{**ROLE, "subGroupSize": 4, "minSubGroups": 1, "networkTopology": nt}],
    )
    ssn, result = session(nodes, roles("prefill", cpu="3", size=4), [pg], hns, conf())
    assert len(result.placements) == 4  # tier 2, not the leaf
    assert any("both highestTierAllowed and highestTierName" in e[3] for e in ssn.report.events)


# -- where a sub-group's pods go inside its HyperNode --------------------------------------------------
def small_leaves(cpu: str) -> tuple[list[Any], dict]:
    """Leaves a and b of two nodes of ``cpu`` each, under one spine."""
    nodes = [node(f"{leaf}-n{i}", cpu=cpu) for leaf in "ab" for i in range(2)]
    hns = {"a": hn("a", 1, ["a-n0", "a-n1"]), "b": hn("b", 1, ["b-n0", "b-n1"])}
    hns["spine"] = hn("spine", 2, ["a", "b"], "HyperNode")
    return nodes, hns


def per_leaf(result) -> list[int]:
    counts = {"a": 0, "b": 0}
    for p in result.placements:
        counts[p.node[0]] += 1
    return sorted(counts.values())


def test_a_sub_group_spanning_leaves_keeps_its_pods_in_as_few_leaves_as_it_can():
    # five 1-cpu pods fit no leaf (two 2-cpu nodes) but fit the spine; nodeorder's least-requested
    # spreads them 3 + 2 over the leaves; network-topology-aware's node order
    # (batchNodeOrderFnForNetworkAwarePods) prefers the leaf its pods already use: 4 + 1
    nodes, hns = small_leaves("2")
    policy = [
        {
            **ROLE,
            "subGroupSize": 5,
            "minSubGroups": 1,
            "networkTopology": {"mode": "hard", "highestTierAllowed": 2},
        }
    ]
    for text, split in ((conf(nta="    arguments: {weight: 0}"), [2, 3]), (conf(), [1, 4])):
        pg = podgroup("llm", min_member=5, sub_group_policy=policy)
        _, result = session(nodes, roles("prefill", size=5), [pg], hns, text)
        assert per_leaf(result) == split, text


def test_a_soft_sub_group_takes_the_narrowest_hypernode_it_fits():
    # three 1-cpu pods: least-requested alone would spread them over both leaves; a soft sub-group is
    # tried narrowest tier first (Volcano's convertSoftToHardTopology) and lands in one leaf
    nodes, hns = small_leaves("4")
    policy = [{**ROLE, "subGroupSize": 3, "minSubGroups": 1, "networkTopology": {"mode": "soft"}}]
    pg = podgroup("llm", min_member=3, sub_group_policy=policy)
    _, result = session(nodes, roles("prefill", size=3), [pg], hns, conf(nta="    enableNodeOrder: false"))
    assert per_leaf(result) == [0, 3]
    gang = podgroup("llm", min_member=3)  # the same pods without a policy spread
    _, result = session(nodes, roles("prefill", size=3), [gang], hns, conf(nta="    enableNodeOrder: false"))
    assert per_leaf(result) == [1, 2]
