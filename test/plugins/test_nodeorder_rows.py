"""A node's score and fit are the same bits whether computed over every row (a full evaluation) or
for one or two rows alone (a placement patching its cache, which takes a scalar path)."""

from __future__ import annotations

import random

import numpy as np
import pytest

from caldera.framework.model import TaskInfo
from caldera.framework.plugin import Arguments
from caldera.framework.session import Session
from caldera.hack.scenario import cluster, node, pod
from caldera.plugins.nodeorder import NodeOrderPlugin


def _cluster(rng: random.Random):
    nodes = [
        node(
            f"n{i:02d}",
            cpu=rng.choice(["2", "4", "7", "16", "0"]),
            memory=rng.choice(["3Gi", "8Gi", "30Gi", "0"]),
            labels={"zone": rng.choice(["a", "b"]), "disk": rng.choice(["ssd", "hdd"])},
            taints=[{"key": "slow", "value": "1", "effect": "PreferNoSchedule"}] if i % 3 == 0 else [],
        )
        for i in range(24)
    ]
    running = [
        pod(
            f"r{i}",
            cpu=rng.choice(["100m", "1", "3"]),
            memory=rng.choice(["100Mi", "2Gi", "5Gi"]),
            scheduler="default-scheduler",
            node_name=f"n{rng.randrange(24):02d}",
            phase="Running",
        )
        for i in range(30)
    ]
    return cluster(nodes=nodes, pods=running)


PREFERRED = {
    "nodeAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {
                "weight": 7,
                "preference": {"matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]},
            },
            {
                "weight": 3,
                "preference": {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]},
            },
        ]
    }
}


@pytest.mark.parametrize(
    "weights",
    [
        {},
        {"mostrequested.weight": 2, "leastrequested.weight": 0},
        {"mostrequested.weight": 1, "balancedresource.weight": 3, "tainttoleration.weight": 0},
        {"leastrequested.weight": 0, "balancedresource.weight": 0},
    ],
    ids=["volcano-defaults", "most", "most-balanced-no-taints", "static-only"],
)
def test_one_or_two_rows_score_the_same_bits_as_every_row(weights):
    rng = random.Random(5)
    snap = _cluster(rng)
    ssn = Session(snap, [])
    plugin = NodeOrderPlugin(Arguments("nodeorder", weights))
    plugin.on_session_open(ssn)
    for i, (cpu, memory, affinity) in enumerate(
        [("1", "1Gi", None), ("250m", "7Gi", PREFERRED), ("5", "100Mi", PREFERRED), ("0", "0", None)]
    ):
        task_pod = pod(f"p{i}", cpu=cpu, memory=memory, affinity=affinity)
        task = TaskInfo.from_pod(task_pod)
        every = plugin.score(task, ssn.all_rows)
        for row in range(ssn.table.rows):
            one = plugin.score(task, np.array([row], dtype=np.intp))
            assert one.tobytes() == every[row : row + 1].tobytes(), (weights, i, row)
        pair = np.array([3, 17], dtype=np.intp)
        assert plugin.score(task, pair).tobytes() == every[pair].tobytes()


def test_a_few_rows_fit_as_every_row_does():
    rng = random.Random(9)
    snap = _cluster(rng)
    table = snap.table
    for cpu, memory in [("1", "1Gi"), ("3", "20Gi"), ("100m", "0"), ("0", "0")]:
        req = TaskInfo.from_pod(pod("p", cpu=cpu, memory=memory)).init_resreq
        for future in (True, False):
            every = table.fits(req, table.all_rows, future=future)
            for row in range(table.rows):
                assert table.fits(req, np.array([row], dtype=np.intp), future=future)[0] == every[row]
            rows = np.array([0, 5, 11], dtype=np.intp)
            assert list(table.fits(req, rows, future=future)) == list(every[rows])


def test_most_requested_counts_a_request_above_allocatable_as_full():
    """kube-scheduler's mostRequestedScore (noderesources/most_allocated.go): requested above
    capacity is taken as capacity, so a node the pod would overfill scores 100, not 0."""
    snap = cluster(nodes=[node("small", cpu="2", memory="4Gi"), node("big", cpu="8", memory="16Gi")])
    ssn = Session(snap, [])
    only_most = {
        "mostrequested.weight": 1,
        "leastrequested.weight": 0,
        "balancedresource.weight": 0,
        "nodeaffinity.weight": 0,
        "tainttoleration.weight": 0,
        "podaffinity.weight": 0,
        "podtopologyspread.weight": 0,
    }
    plugin = NodeOrderPlugin(Arguments("nodeorder", only_most))
    plugin.on_session_open(ssn)
    task = TaskInfo.from_pod(pod("p", cpu="4", memory="8Gi"))
    small, big = (ssn.nodes[n].row for n in ("small", "big"))
    scores = plugin.score(task, ssn.all_rows)
    assert scores[small] == 100.0
    assert scores[big] == 50.0
    assert plugin.score(task, np.array([small], dtype=np.intp))[0] == 100.0
