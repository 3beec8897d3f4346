"""Jobs with sub-group policies (``spec.subGroupPolicy``) in preempt, reclaim's and preempt's gang
forms (gangpreempt, gangreclaim) and backfill, as Volcano's actions treat them. Each test names the
Volcano function whose rule it checks; the ports of Volcano's own tests of those rules are marked
with the Go test's name (pkg/scheduler/actions/utils/bundle_test.go, simulate_test.go,
util_test.go, volcano-sh/volcano ed72c7c8)."""

from __future__ import annotations

from typing import Any

from caldera.actions.gang_eviction import candidate_domains, gang_pending, job_bundles
from caldera.config.conf import parse_conf
from caldera.framework.objects import HyperNode, PriorityClass, convert
from caldera.framework.session import close_session, open_session
from caldera.framework.subjobs import sub_jobs
from caldera.framework.topology import CLUSTER_GROUP
from caldera.hack.scenario import cluster, node, pod, podgroup, run_session
from caldera.scheduler.registry import builtin_registry
from test.actions.test_subgroups import hn

REGISTRY = builtin_registry()
GANG_ONLY = 'actions: "enqueue"\ntiers:\n- plugins:\n  - name: priority\n  - name: gang\n'


def pcs() -> list[PriorityClass]:
    return [
        convert(PriorityClass, {"metadata": {"name": n}, "value": v})
        for n, v in (("high", 1000), ("low", 10))
    ]


def leaves() -> dict[str, HyperNode]:
    """Leaf a holds a-n0 and a-n1, leaf b holds b-n0 and b-n1, one spine above."""
    return {
        "a": hn("a", 1, ["a-n0", "a-n1"]),
        "b": hn("b", 1, ["b-n0", "b-n1"]),
        "spine": hn("spine", 2, ["a", "b"], "HyperNode"),
    }


def four_nodes(cpu: str = "1") -> list[Any]:
    return [node(f"{leaf}-n{i}", cpu=cpu) for leaf in "ab" for i in range(2)]


def opened(pods, pgs, nodes=None, text=GANG_ONLY, hns=None):
    snap = cluster(nodes=nodes or [node("n", cpu="64")], pods=pods, podgroups=pgs, priority_classes=pcs())
    if hns:
        snap.hypernodes = hns
    parsed = parse_conf(text, REGISTRY)
    return open_session(snap, parsed.tiers, REGISTRY.plugins, parsed.configurations)


def running(name: str, group: str, sj: str, priority: int, role: str = "worker", node_name: str = "n"):
    return pod(
        name,
        cpu="1",
        group=group,
        labels={"sj": sj},
        role=role,
        priority=priority,
        node_name=node_name,
        phase="Running",
    )


# -- CreateJobBundles with sub-jobs (bundle_test.go) -------------------------------------------------
def bundles_of(pods, min_member, policies, task_min=None):
    pg = podgroup("job", min_member=min_member, sub_group_policy=policies, min_task_member=task_min)
    ssn = opened(pods, [pg])
    try:
        job = ssn.jobs["default/job"]
        local = [t for t in job.tasks.values() if t.name in LOCAL]
        return [
            (b.whole, sorted(t.name for t in b.tasks)) for b in job_bundles(job, local, sub_jobs(ssn, job))
        ]
    finally:
        close_session(ssn)


LOCAL: set[str] = set()


def test_bundles_group_slack_caps_safe():
    """TestCreateJobBundles_SubJobGroupSlackCapsSafe: three ready sub-groups of two, minSubGroups 2
    (one to spare), job minMember 4 of 6 (two to spare): one pod goes safe, the rest whole."""
    pods = [
        running(f"t{i}{x}", "job", str(i), 100 + 2 * (i - 1) + (x == "b")) for i in (1, 2, 3) for x in "ab"
    ]
    LOCAL.clear()
    LOCAL.update({"t1a", "t2a", "t3a"})
    policy = [{"name": "g", "matchLabelKeys": ["sj"], "subGroupSize": 2, "minSubGroups": 2}]
    assert bundles_of(pods, 4, policy) == [(False, ["t1a"]), (True, ["t2a", "t3a"])]


def test_bundles_mixed_legacy_and_sub_job_both_enforced():
    """TestCreateJobBundles_MixedLegacyAndSubJobBothEnforced: the master (no role minimum) goes safe
    on its policy's slack; the worker is held by its role's minimum alone."""
    pods = [
        running("m1", "job", "m1", 0, "master"),
        running("m2", "job", "m2", 10, "master"),
        pod(
            "w1a",
            cpu="1",
            group="job",
            labels={"w": "1"},
            role="worker",
            priority=1,
            node_name="n",
            phase="Running",
        ),
    ] + [
        pod(
            f"w{i}{x}",
            cpu="1",
            group="job",
            labels={"w": str(i)},
            role="worker",
            priority=10 + 2 * (i - 2) + (x == "b") + 1,
            node_name="n",
            phase="Running",
        )
        for i in (2, 3)
        for x in "ab"
    ]
    LOCAL.clear()
    LOCAL.update({"m1", "w1a"})
    policies = [
        {"name": "m-g", "matchLabelKeys": ["sj"], "subGroupSize": 1, "minSubGroups": 1},
        {"name": "w-g", "matchLabelKeys": ["w"], "subGroupSize": 2, "minSubGroups": 2},
    ]
    assert bundles_of(pods, 5, policies, {"worker": 5}) == [(False, ["m1"]), (True, ["w1a"])]


def test_bundles_an_already_broken_sub_job_is_subject_to_further_eviction():
    """TestCreateJobBundles_AlreadyBrokenSubJobIsSubjectToFurtherEviction: sj1 lacks a pod, the
    policy has no ready sub-group to spare: sj1's pod is safe, the ready ones' whole."""
    pods = [running("sj1a", "job", "1", 1)] + [
        running(f"sj{i}{x}", "job", str(i), 2 * (i - 1) + (x == "b")) for i in (2, 3) for x in "ab"
    ]
    LOCAL.clear()
    LOCAL.update({"sj1a", "sj2a", "sj3a"})
    policy = [{"name": "g", "matchLabelKeys": ["sj"], "subGroupSize": 2, "minSubGroups": 2}]
    assert bundles_of(pods, 3, policy) == [(False, ["sj1a"]), (True, ["sj2a", "sj3a"])]


def test_bundles_a_job_not_ready_short_circuits_all_safe():
    """TestCreateJobBundles_JobNotReadyShortCircuitsAllSafe: below minMember, nothing to protect."""
    pods = [running("a", "job", "1", 0), running("b", "job", "1", 1)]
    LOCAL.clear()
    LOCAL.update({"a", "b"})
    policy = [{"name": "g", "matchLabelKeys": ["sj"], "subGroupSize": 3, "minSubGroups": 2}]
    pg = podgroup("job", min_member=10, sub_group_policy=policy)
    ssn = opened(pods, [pg])
    try:
        job = ssn.jobs["default/job"]
        got = job_bundles(job, list(job.tasks.values()), sub_jobs(ssn, job))
        assert [(b.whole, sorted(t.name for t in b.tasks)) for b in got] == [(False, ["a", "b"])]
    finally:
        close_session(ssn)


# -- CollectPendingTasksForGangEviction (simulate_test.go) ------------------------------------------
def _pending_names(placed_late: bool) -> list[str]:
    policy = [{"name": "g1", "matchLabelKeys": ["idx"], "subGroupSize": 1, "minSubGroups": 0}]
    pods = [
        pod("t1", cpu="1", group="job", labels={"idx": "1"}),
        pod("t2", cpu="1", group="job", labels={"idx": "2"}),
    ]
    if placed_late:  # the job runs (ready): what it asks for is one sub-group's pods
        pods.append(pod("t0", cpu="1", group="job", labels={"idx": "0"}, node_name="n", phase="Running"))
    ssn = opened(pods, [podgroup("job", min_member=1, sub_group_policy=policy)])
    try:
        return [t.name for t in gang_pending(ssn, ssn.jobs["default/job"])]
    finally:
        close_session(ssn)


def test_collect_pending_for_job_startup_in_worksheet_order():
    """TestCollectPendingTasksForJobStartup_WorksheetOrder: every sub-group, lower match index first."""
    assert _pending_names(False) == ["t1", "t2"]


def test_collect_pending_for_running_job_first_worksheet_sub_job_only():
    """TestCollectPendingTasksForRunningJob_FirstWorksheetSubJobOnly."""
    assert _pending_names(True) == ["t1"]


# -- GetCandidateDomains (util_test.go) -------------------------------------------------------------
def test_candidate_domains_hard_without_gradient_has_no_fallback_and_soft_falls_back_to_the_cluster():
    """TestGetCandidateDomains_EmptyGradient_HardTopologyNoFallback and
    _NonHardTopologyFallbackToRoot: a gang no leaf can ever hold (its minimum exceeds every leaf's
    allocatable) has no eviction domain when hard-bound to the leaves, the cluster when soft."""
    pods = [pod(f"p{i}", cpu="1", group="job") for i in range(3)]
    for mode, want in (("hard", []), ("soft", [CLUSTER_GROUP])):
        pg = podgroup(
            "job",
            min_member=3,
            network_topology={"mode": mode, "highestTierAllowed": 1},
            min_resources={"cpu": "3"},
        )
        ssn = opened(pods, [pg], four_nodes(), hns={k: v for k, v in leaves().items() if k != "spine"})
        try:
            got = [g.name for g in candidate_domains(ssn, ssn.jobs["default/job"], 8)]
        finally:
            close_session(ssn)
        if mode == "soft":
            got = got[:1]  # soft: the cluster first (the widest gradient), then leaves that could hold it
        assert got == want, mode


# -- whole sessions -----------------------------------------------------------------------------------
def conf(action: str, arguments: str = "") -> str:
    text = f"""actions: "{action}"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: predicates
  - name: proportion
  - name: network-topology-aware
"""
    if arguments:
        text += f"configurations:\n- name: {action}\n  arguments:\n    {arguments}\n"
    return text


ROLES = [{"name": "role", "matchLabelKeys": ["role"], "subGroupSize": 2, "minSubGroups": 2}]


def llm(priority_class: str = "high", hard: bool = True) -> tuple[list[Any], Any]:
    """A prefill and a decode sub-group of two 1-cpu pods each; with ``hard``, each inside one leaf."""
    policy = [
        {**ROLES[0], **({"networkTopology": {"mode": "hard", "highestTierAllowed": 1}} if hard else {})}
    ]
    pods = [
        pod(f"{r}-{i}", cpu="1", group="llm", labels={"role": r}, priority_class=priority_class)
        for r in ("prefill", "decode")
        for i in range(2)
    ]
    return pods, podgroup("llm", min_member=4, sub_group_policy=policy, priority_class=priority_class)


def test_gangpreempt_plans_each_hard_sub_group_inside_one_leaf():
    # a-n0 and b-n0 are idle, a-n1 and b-n1 run a low-priority gang. Placed flat, idle nodes first,
    # prefill would take a-n0 and b-n0 and span both leaves; BuildNominationPlanInDomain tries each
    # sub-group in its eviction gradient's groups (HyperNodeGradientForSubJobFn) one by one
    pods, pg = llm()
    victims = [
        pod(f"v{i}", cpu="1", group="victim", node_name=f"{leaf}-n1", phase="Running", priority_class="low")
        for i, leaf in enumerate("ab")
    ]
    snap = cluster(
        nodes=four_nodes(),
        pods=pods + victims,
        podgroups=[pg, podgroup("victim", min_member=1, priority_class="low", phase="Running")],
        priority_classes=pcs(),
    )
    snap.hypernodes = leaves()
    ssn, result = run_session(snap, conf("gangpreempt"))
    assert sorted(e.task.name for e in result.evictions) == ["v0", "v1"]
    job = ssn.jobs["default/llm"]
    for role in ("prefill", "decode"):
        where = {t.node_name[0] for t in job.tasks.values() if t.name.startswith(role)}
        assert len(where) == 1, (role, where)


def test_gang_bundles_keep_a_victims_min_sub_groups_whole():
    # the victim runs two sub-groups (prefill on leaf a, decode on leaf b), of which it needs one
    # whole; its pods by priority: prefill-0, decode-0, prefill-1, decode-1. CreateJobBundles'
    # groupSurplus takes prefill-0 and prefill-1 as its spare pods, never one of each
    victim_policy = [{"name": "role", "matchLabelKeys": ["role"], "subGroupSize": 2, "minSubGroups": 1}]
    order = {"prefill-0": 1, "decode-0": 2, "prefill-1": 3, "decode-1": 4}
    victims = [
        pod(
            name,
            cpu="1",
            group="victim",
            labels={"role": name[:-2]},
            priority=p,
            node_name=("a" if name.startswith("prefill") else "b") + f"-n{name[-1]}",
            phase="Running",
        )
        for name, p in order.items()
    ]
    preemptor = [pod(f"p{i}", cpu="1", group="gang", priority_class="high") for i in range(2)]
    snap = cluster(
        nodes=four_nodes(),
        pods=victims + preemptor,
        podgroups=[
            podgroup(
                "victim", min_member=2, sub_group_policy=victim_policy, priority_class="low", phase="Running"
            ),
            podgroup("gang", min_member=2, priority_class="high"),
        ],
        priority_classes=pcs(),
    )
    _, result = run_session(snap, conf("gangpreempt", "allowWholeBundle: false"))
    assert sorted(e.task.name for e in result.evictions) == ["prefill-0", "prefill-1"]


def test_preempt_commits_only_when_every_required_sub_group_is_pipelined():
    # preempt.go goes on while the preemptor is starving (gang's JobStarvingFn: its waiting and ready
    # pods below minMember, sub-groups not counted) and commits only when it is pipelined (gang's
    # JobPipelinedFn asks CheckSubJobPipelined too). Two sub-groups of two under minMember 2: preempt
    # stops after two pods, short of the sub-groups, and evicts nothing; under minMember 4 it evicts
    # room for all four
    def evicted(policies, min_member):
        pods = [
            pod(
                f"v{i}",
                cpu="1",
                group="victim",
                node_name=f"{leaf}-n{i % 2}",
                phase="Running",
                priority_class="low",
            )
            for i, leaf in enumerate("aaaabbbb")
        ] + [
            pod(f"{r}-{i}", cpu="1", group="llm", labels={"role": r}, priority_class="high")
            for r in ("prefill", "decode")
            for i in range(2)
        ]
        pgs = [
            podgroup("victim", min_member=1, priority_class="low", phase="Running"),
            podgroup("llm", min_member=min_member, sub_group_policy=policies, priority_class="high"),
        ]
        snap = cluster(nodes=four_nodes("2"), pods=pods, podgroups=pgs, priority_classes=pcs())
        _, result = run_session(snap, conf("preempt"))
        return len(result.evictions)

    assert evicted([], 2) == 2
    assert evicted(ROLES, 2) == 0
    assert evicted(ROLES, 4) == 4


def test_preempt_victims_may_break_a_sub_group_above_the_victims_min_member():
    # gang's preemptableFn counts the victim's ready pods against its minMember only (its sub-groups
    # are not consulted): one pod of a sub-group the victim needs whole is taken
    pods = [
        pod(
            f"{r}-{i}",
            cpu="1",
            group="victim",
            labels={"role": r},
            node_name=f"{leaf}-n{i}",
            phase="Running",
            priority_class="low",
        )
        for r, leaf in (("prefill", "a"), ("decode", "b"))
        for i in range(2)
    ] + [pod("p", cpu="1", group="one", priority_class="high")]
    pgs = [
        podgroup("victim", min_member=1, sub_group_policy=ROLES, priority_class="low", phase="Running"),
        podgroup("one", min_member=1, priority_class="high"),
    ]
    _, result = run_session(
        cluster(nodes=four_nodes(), pods=pods, podgroups=pgs, priority_classes=pcs()), conf("preempt")
    )
    assert len(result.evictions) == 1


def test_backfill_places_a_sub_group_job_of_best_effort_pods():
    # best-effort pods are not on allocate's worksheet (organizeJobWorksheet skips them) and count
    # toward a sub-group's readiness while pending (SubJobInfo.IsReady); backfill places them
    pods = [
        pod(f"{r}-{i}", cpu=None, memory=None, group="llm", labels={"role": r})
        for r in ("prefill", "decode")
        for i in range(2)
    ]
    pg = podgroup("llm", min_member=4, sub_group_policy=ROLES)
    _, result = run_session(
        cluster(nodes=four_nodes(), pods=pods, podgroups=[pg]), conf("allocate, backfill")
    )
    assert len(result.placements) == 4
