"""Volcano's pkg/scheduler/plugins/task-topology/topology_test.go, ported as data:
Test_readTopologyFromPgAnnotations, each case by its description (the job's roles, the PodGroup's
three annotations, the topology read or Volcano's error)."""

from __future__ import annotations

import pytest

from caldera.framework.model import JobInfo, TaskInfo
from caldera.framework.objects import PodGroup, convert
from caldera.hack.scenario import pod, podgroup_dict
from caldera.plugins.task_topology import TaskTopology, TopologyError, read_topology

AFF, ANTI, ORDER = (
    "volcano.sh/task-topology-affinity",
    "volcano.sh/task-topology-anti-affinity",
    "volcano.sh/task-topology-task-order",
)
SIX = ["ps", "ps", "worker", "worker", "chief", "evaluator"]
DASHED = ["ps-some", "ps-some", "worker-another-some", "worker-another-some", "chief-kk", "evaluator-tt"]
FOUR = ["ps", "ps", "worker", "worker"]


def job(roles: list[str], annotations: dict[str, str] | None) -> JobInfo:
    d = podgroup_dict("job1", namespace="default")
    if annotations is not None:
        d["metadata"]["annotations"] = annotations
    out = JobInfo.from_podgroup(convert(PodGroup, d))
    for i, role in enumerate(roles):
        out.add_task(TaskInfo.from_pod(pod(f"job1-{role}-{i}", group="job1", role=role), job=out.uid))
    return out


CASES = [
    (
        "correct annotation",
        SIX,
        {AFF: "ps,worker;ps,chief", ANTI: "ps;worker,chief", ORDER: "ps,worker,chief,evaluator"},
        TaskTopology(
            [["ps", "worker"], ["ps", "chief"]],
            [["ps"], ["worker", "chief"]],
            ["ps", "worker", "chief", "evaluator"],
        ),
    ),
    (
        "correct annotation with tasks whose names contain `-`",
        DASHED,
        {
            AFF: "ps-some,worker-another-some;ps-some,chief-kk",
            ANTI: "ps-some;worker-another-some,chief-kk",
            ORDER: "ps-some,worker-another-some,chief-kk,evaluator-tt",
        },
        TaskTopology(
            [["ps-some", "worker-another-some"], ["ps-some", "chief-kk"]],
            [["ps-some"], ["worker-another-some", "chief-kk"]],
            ["ps-some", "worker-another-some", "chief-kk", "evaluator-tt"],
        ),
    ),
    ("nil annotation", [], None, None),
    (
        "invalid annotation",
        SIX,
        {
            AFF: "$%GF$^trtqwrg^",
            ANTI: "ps;worker,chief;#@FGEW^vfa897bgs;;",
            ORDER: "ps,worker,chief,evaluator,,,",
        },
        "task $%GF$^trtqwrg^ do not exist in job <default/job1>",
    ),
    (
        "invalid task name",
        FOUR,
        {AFF: "ps,worker", ANTI: "ps", ORDER: "ps,worker,chief"},
        "task chief do not exist in job <default/job1>",
    ),
    (
        "duplicate task name",
        FOUR,
        {AFF: "ps,worker", ANTI: "ps,ps", ORDER: "ps,worker"},
        "task ps is duplicate in job <default/job1>",
    ),
    (
        "redundant punctuations",
        SIX,
        {AFF: "ps,worker;ps,,chief,;", ANTI: "ps;worker,chief;;;", ORDER: "ps,worker,chief,evaluator,,,"},
        TaskTopology(
            [["ps", "worker"], ["ps", "", "chief", ""], [""]],
            [["ps"], ["worker", "chief"], [""], [""], [""]],
            ["ps", "worker", "chief", "evaluator", "", "", ""],
        ),
    ),
]


@pytest.mark.parametrize(
    ("description", "roles", "annotations", "expected"), CASES, ids=[c[0] for c in CASES]
)
def test_read_topology_from_pg_annotations(description, roles, annotations, expected):
    j = job(roles, annotations)
    if isinstance(expected, str):
        with pytest.raises(TopologyError) as err:
            read_topology(j)
        assert str(err.value) == expected, description
    else:
        assert read_topology(j) == expected, description
