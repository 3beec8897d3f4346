"""Volcano's pkg/scheduler/api/sub_job_info_test.go and the sub-job / topology parts of
job_info_test.go (volcano-sh/volcano ed72c7c8), as data; each case is named by Go test and ``name``.

Caldera's sub-jobs are framework/subjobs.py (``SubJob``, ``SubJobs``, ``match_values``); the
network topology a sub-job or job is placed under after Volcano's ``adjustNetworkTopologySpec`` is
actions/subjobs.py's ``sub_job_tier`` / ``job_tier`` (None: not hard-bound), which stand for
``IsHardTopologyMode`` after ``ConvertToHardTopology``. Not ported: Go internals with no
counterpart (a JobInfo without a PodGroup, ``SetPodGroup``'s deep copy: Caldera's specs are
immutable; the expected JobInfo structs of TestAddTaskInfo / TestDeleteTaskInfo, whose sub-job
part, every task in the default sub-job, is checked below)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from caldera.actions.subjobs import sub_job_tier
from caldera.actions.topology import job_requirement, session_topology
from caldera.config.conf import parse_conf
from caldera.framework.model import TaskStatus
from caldera.framework.objects import LabelSelector, NetworkTopologySpec, SubGroupPolicySpec, convert
from caldera.framework.session import close_session, open_session
from caldera.framework.subgroups import selector_error
from caldera.framework.subjobs import SubJob, match_values, sub_jobs
from caldera.framework.topology import TopologySettings
from caldera.hack.scenario import cluster, node, pod, podgroup
from volcano.port import REGISTRY

S = TaskStatus


def session(pods=(), pgs=()):
    snap = cluster(nodes=[node("n")], pods=list(pods), podgroups=list(pgs))
    parsed = parse_conf('actions: "enqueue"\ntiers:\n- plugins:\n  - name: gang\n', REGISTRY)
    return open_session(snap, parsed.tiers, REGISTRY.plugins, parsed.configurations)


def nt(mode: str, tier: int | None = None) -> dict[str, Any]:
    return {"mode": mode, **({"highestTierAllowed": tier} if tier is not None else {})}


# -- TestNewSubJobInfo --------------------------------------------------------------------------
NEW = {
    "All field provided": ({"subGroupSize": 4, "networkTopology": nt("hard", 1)}, "1", 4, 1, nt("hard", 1)),
    "No SubGroupSize provided": ({"networkTopology": nt("hard", 1)}, "1", 1, 1, nt("hard", 1)),
    "No NetworkTopology provided": ({"subGroupSize": 2}, "x", 2, 0, None),
}


@pytest.mark.parametrize("name", list(NEW))
def test_new_sub_job_info(name):
    policy, value, size, index, topology = NEW[name]
    pg = podgroup("job", sub_group_policy=[{"name": "p", "matchLabelKeys": ["k"], **policy}])
    ssn = session([pod("a", group="job", labels={"k": value})], [pg])
    try:
        (sub,) = list(sub_jobs(ssn, ssn.jobs["default/job"]))
        assert (sub.gid, sub.uid) == ("default/job/p", f"default/job/p-{value}")
        assert (sub.min_available, sub.match_index) == (size, index)
        want = convert(NetworkTopologySpec, topology) if topology else None
        assert sub.network_topology == want
    finally:
        close_session(ssn)


def test_new_sub_job_info_no_policy_provided():
    """ "No policy provided": the default sub-job of a job with policies: min 1, no topology."""
    pg = podgroup("job", sub_group_policy=[{"name": "p", "matchLabelKeys": ["k"]}])
    ssn = session([pod("a", group="job")], [pg])
    try:
        (sub,) = list(sub_jobs(ssn, ssn.jobs["default/job"]))
        assert (sub.uid, sub.min_available, sub.network_topology) == ("default/job", 1, None)
    finally:
        close_session(ssn)


# -- TestSubJobInfo_IsHardTopologyMode, _IsSoftTopologyMode, TestConvertToHardTopology -------------
#: name → (networkTopology, the job's bound (maxTier), tier the sub-job is bounded by or None)
TOPOLOGY = {
    "TestSubJobInfo_IsHardTopologyMode/NetworkTopology is nil": (None, None, None),
    "TestSubJobInfo_IsHardTopologyMode/HighestTierAllowed is nil": (nt("hard"), None, None),
    "TestSubJobInfo_IsHardTopologyMode/Mode is HardNetworkTopologyMode and HighestTierAllowed is not nil": (
        nt("hard", 1),
        None,
        1,
    ),
    "TestConvertToHardTopology/soft mode is converted to hard mode": (nt("soft"), 4, 4),
    "TestConvertToHardTopology/hard mode is not changed": (nt("hard", 2), 4, 2),
    "TestConvertToHardTopology/nil networkTopology is not changed": (None, 4, None),
    "TestConvertToHardTopology/soft mode with existing HighestTierAllowed is overwritten": (
        nt("soft", 1),
        5,
        5,
    ),
}


@pytest.mark.parametrize("name", list(TOPOLOGY))
def test_sub_job_topology(name):
    spec, bound, want = TOPOLOGY[name]
    ssn = session()
    try:
        topo, _ = session_topology(ssn)
        job = SimpleNamespace(uid="default/job")
        sub = SubJob("g", "g-1", job, 4, convert(NetworkTopologySpec, spec) if spec else None, "p")  # type: ignore[arg-type]
        assert sub_job_tier(ssn, job, sub, topo, bound) == want  # type: ignore[arg-type]
    finally:
        close_session(ssn)


def test_soft_sub_job_without_a_job_bound_reaches_the_cluster():
    """TestSubJobInfo_IsSoftTopologyMode/Mode is SoftNetworkTopologyMode, after adjustNetworkTopologySpec:
    soft becomes hard up to the cluster's top tier (convertSoftToHardTopology's maxTier)."""
    ssn = session()
    try:
        topo, _ = session_topology(ssn)
        job = SimpleNamespace(uid="default/job")
        sub = SubJob("g", "g-1", job, 1, convert(NetworkTopologySpec, nt("soft")), "p")  # type: ignore[arg-type]
        assert sub_job_tier(ssn, job, sub, topo, None) == topo.top_tier  # type: ignore[arg-type]
    finally:
        close_session(ssn)


# -- TestGetSubJobMatchValues_Basic / _Boundary / _Error --------------------------------------------
MATCH = {
    "Basic/match label selector and collect match values": (
        {"labelSelector": {"matchLabels": {"app": "test"}}, "matchLabelKeys": ["version", "env"]},
        {"app": "test", "version": "v1", "env": "dev"},
        ["v1", "dev"],
    ),
    "Basic/no label selector with match keys": ({"matchLabelKeys": ["zone"]}, {"zone": "zone-1"}, ["zone-1"]),
    "Basic/no match keys returns empty slice": (
        {"labelSelector": {"matchLabels": {"app": "test"}}},
        {"app": "test"},
        [],
    ),
    "Boundary/empty label selector matches all": (
        {"labelSelector": {}, "matchLabelKeys": ["key"]},
        {"key": "value"},
        ["value"],
    ),
    "Boundary/match expression selector": (
        {
            "labelSelector": {
                "matchExpressions": [{"key": "app", "operator": "In", "values": ["test", "demo"]}]
            },
            "matchLabelKeys": ["app"],
        },
        {"app": "demo"},
        ["demo"],
    ),
    "Boundary/multiple match keys with empty values": (
        {"matchLabelKeys": ["a", "b"]},
        {"a": "", "b": "val"},
        None,
    ),
    "Error/invalid label selector": (
        {"labelSelector": {"matchExpressions": [{"key": "app", "operator": "invalid"}]}},
        {"app": "test"},
        None,
    ),
    "Error/pod labels do not match selector": (
        {"labelSelector": {"matchLabels": {"app": "test"}}, "matchLabelKeys": ["version"]},
        {"app": "prod"},
        None,
    ),
    "Error/missing label key in pod": ({"matchLabelKeys": ["missing"]}, {"existing": "value"}, None),
    "Error/pod has no labels": ({"matchLabelKeys": ["any"]}, {}, None),
}


@pytest.mark.parametrize("name", list(MATCH))
def test_get_sub_job_match_values(name):
    """TestGetSubJobMatchValues_<name>: a policy's values for a pod (None: not the policy's)."""
    policy_d, labels, want = MATCH[name]
    policy = convert(SubGroupPolicySpec, {"name": "p", **policy_d})
    broken = policy.label_selector is not None and bool(selector_error(policy.label_selector))
    assert match_values(policy, labels, broken) == want
    if policy.label_selector is not None:
        assert isinstance(policy.label_selector, LabelSelector)


# -- TestSubJobInfo_getPodSubJobID ---------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "values", "want"),
    [
        ("Normale case with non-empty policy and matchValues", ["value1", "value2"], "policy1-value1-value2"),
        ("Single matchValue", ["value1"], "policy1-value1"),
    ],
)
def test_get_sub_job_id(name, values, want):
    keys = [f"k{i}" for i in range(len(values))]
    pg = podgroup("job1", sub_group_policy=[{"name": "policy1", "matchLabelKeys": keys}])
    ssn = session([pod("a", group="job1", labels=dict(zip(keys, values, strict=True)))], [pg])
    try:
        assert [s.uid for s in sub_jobs(ssn, ssn.jobs["default/job1"])] == [f"default/job1/{want}"]
    finally:
        close_session(ssn)


# -- TestSubJobInfo_IsPipelined / _IsReady ----------------------------------------------------------
def sub_of(min_available: int, tasks: list[tuple[TaskStatus, bool]]) -> SubJob:
    sub = SubJob("g", "g-1", SimpleNamespace(uid="j"), min_available, None)  # type: ignore[arg-type]
    for i, (status, best_effort) in enumerate(tasks):
        sub.tasks[f"task{i + 1}"] = SimpleNamespace(status=status, best_effort=best_effort, priority=0)  # type: ignore[assignment]
    return sub


HELD = [(S.ALLOCATED, False), (S.BINDING, False), (S.BOUND, False), (S.RUNNING, False)]
READY_SET = [
    (S.ALLOCATED, False),
    (S.PIPELINED, False),
    (S.BINDING, False),
    (S.BOUND, False),
    (S.RUNNING, False),
]
PIPELINED = {
    "All tasks are pipelined": (3, [(S.PIPELINED, False)] * 3, True),
    "Some tasks are ready and some are pipelined": (6, [*READY_SET, (S.SUCCEEDED, False)], True),
    "Some tasks are pending best-effort and some are pipelined": (
        3,
        [(S.PENDING, True), (S.PENDING, True), (S.PIPELINED, False)],
        True,
    ),
    "Some tasks are ready, some tasks are pending best-effort and some are pipelined": (
        8,
        [(S.PENDING, True), (S.PENDING, True), *READY_SET, (S.SUCCEEDED, False)],
        True,
    ),
    "Some tasks are pending not best-effort": (
        8,
        [(S.PENDING, True), (S.PENDING, False), *READY_SET, (S.SUCCEEDED, False)],
        False,
    ),
    "Some tasks are failed": (
        8,
        [(S.PENDING, True), (S.PENDING, True), *READY_SET, (S.FAILED, False)],
        False,
    ),
    "Some tasks are unknown": (3, [(S.PENDING, True), (S.PENDING, True), (S.UNKNOWN, False)], False),
}
READY = {
    "All tasks are pipelined": (3, [(S.PENDING, False)] * 3, False),  # (Go's data: all pending)
    "All tasks are pending bestEffort": (2, [(S.PENDING, True)] * 2, True),
    "Some tasks are pending best-effort and some are waiting": (
        6,
        [(S.PENDING, True), *HELD, (S.SUCCEEDED, False)],
        True,
    ),
    "Some tasks are failed": (1, [(S.FAILED, False)], False),
    "Some tasks are pending not best-effort": (
        7,
        [(S.PENDING, True), (S.PENDING, False), *HELD, (S.SUCCEEDED, False)],
        False,
    ),
}


@pytest.mark.parametrize("name", list(PIPELINED))
def test_is_pipelined(name):
    min_available, tasks, want = PIPELINED[name]
    assert sub_of(min_available, tasks).is_pipelined() is want


@pytest.mark.parametrize("name", list(READY))
def test_is_ready(name):
    min_available, tasks, want = READY[name]
    assert sub_of(min_available, tasks).is_ready() is want


# -- TestSubJobInfo_getTaskHighestPriority ---------------------------------------------------------
@pytest.mark.parametrize(
    ("priorities", "want"), [([], 0), ([1], 1), ([1, 2, 3], 3), ([-1, -2, -3], 0)], ids=["1", "2", "3", "4"]
)
def test_get_task_highest_priority(priorities, want):
    sub = SubJob("g", "g-1", SimpleNamespace(uid="j"), 1, None)  # type: ignore[arg-type]
    for i, p in enumerate(priorities):
        sub.tasks[str(i)] = SimpleNamespace(status=S.PENDING, best_effort=False, priority=p)  # type: ignore[assignment]
    assert sub.priority == want


# -- job_info_test.go ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "topology", "want"),
    [
        ("Nil NetworkTopologies", None, None),
        ("Hard Mode", nt("hard", 2), ("hard", 2)),
        ("Soft Mode", nt("soft", 3), ("soft", 3)),
    ],
)
def test_has_topology_hard_constrain(name, topology, want):
    """TestHasTopologyHardConstrain: the job's own networkTopology as read (before the session
    turns soft into hard up to the cluster)."""
    ssn = session([pod("a", group="job")], [podgroup("job", network_topology=topology)])
    try:
        req = job_requirement(ssn.jobs["default/job"], TopologySettings(), ssn)
        assert (None if req is None else (req.mode, req.highest_tier)) == want
    finally:
        close_session(ssn)


def test_add_task_info_puts_every_task_of_a_job_without_policies_in_its_default_sub_job():
    """TestAddTaskInfo / TestDeleteTaskInfo: SubJobs holds one sub-job, the job's own uid, with every task."""
    pods = [pod(f"t{i}", group="job") for i in range(4)]
    ssn = session(pods, [podgroup("job", min_member=2)])
    try:
        job = ssn.jobs["default/job"]
        (sub,) = list(sub_jobs(ssn, job))
        assert sub.uid == sub.gid == job.uid and sorted(t.name for t in sub.tasks.values()) == [
            "t0",
            "t1",
            "t2",
            "t3",
        ]
        assert sub.min_available == job.min_available
    finally:
        close_session(ssn)
