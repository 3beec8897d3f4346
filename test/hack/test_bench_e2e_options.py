"""`caldera-sim bench e2e --topology` and `--ceiling` at a few dozen pods: what they print (the
structure, not the figures), that topology-aware gangs land in one HyperNode leaf each, and that the
decision-free binder binds every pod."""

from __future__ import annotations

import os
import re

import pytest

from caldera.hack.bench_e2e import split_gangs, topology_cluster
from caldera.hack.bench_hypernodes import LEAF_LABEL
from caldera.hack.cli import main

NUMBER = r"[0-9]+(?:\.[0-9]+)?"


def _blocks(text: str) -> dict[str, str]:
    """Each run's report by its first line's bracket: ``backlog``, ``stream``, ``backlog, decision-free
    binder (the binding ceiling)``."""
    out = {}
    for block in re.split(r"^(?=e2e \[)", text, flags=re.M)[1:]:
        match = re.match(r"e2e \[([^\]]+)\]", block)
        assert match is not None
        out[match.group(1)] = block
    return out


def test_topology_and_ceiling_runs_print_their_figures(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "e2e", "--nodes", "20", "--pods", "100", "--topology", "--ceiling"]) == 0
    text = capsys.readouterr().out
    runs = _blocks(text)
    assert set(runs) == {
        "backlog",
        "stream",
        "backlog, decision-free binder (the binding ceiling)",
        "backlog, decision-free binder (the binding ceiling), one core held busy beside it",
    }
    ceiling = runs["backlog, decision-free binder (the binding ceiling)"]
    busy = runs["backlog, decision-free binder (the binding ceiling), one core held busy beside it"]
    for shape in ("backlog", "stream"):
        block = runs[shape]
        assert "networkTopology hard tier 1 over HyperNode leaves of 8" in block
        assert "bound: 100/100" in block
        # hard mode at tier 1: every gang of 10 in one leaf of 8 nodes, read from the bindings
        assert re.search(r"topology check: 10 of 10 gangs inside one leaf \(0 spread", block), block
        assert re.search(
            rf"scheduler cycles: p50={NUMBER}ms p99={NUMBER}ms longest={NUMBER}ms over [1-9][0-9]* cycles",
            block,
        ), block
        assert re.search(rf"caldera-sim RSS at the end: {NUMBER} MiB \(.* -?{NUMBER} KiB per pod\)", block), (
            block
        )
        assert re.search(rf"latency to bound: p50={NUMBER}ms p99={NUMBER}ms", block)
    for binder in (ceiling, busy):
        assert "bound: 100/100" in binder
        assert re.search(rf"binder CPU: {NUMBER}s", binder)
        assert "topology check" not in binder  # the binder ignores topology: nothing to check
    assert re.search(rf"binding ceiling: {NUMBER} pods/s; Caldera {NUMBER} pods/s = {NUMBER} of it", text), (
        text
    )
    # and how much of the binder's pace the simulator's own work for Caldera's run leaves possible
    assert re.search(
        rf"caldera-sim spent {NUMBER}s of CPU up to Caldera's last bind, the binder's whole run took"
        rf" {NUMBER}s: about {NUMBER} at most",
        text,
    ), text
    # and how much the scheduler's own CPU, in one interpreter, leaves possible
    assert re.search(
        rf"Caldera itself spent {NUMBER}s of CPU up to its last bind, in one interpreter .*: about"
        rf" {NUMBER} at most while it does that much",
        text,
    ), text
    # and when each bound its first pod after its start
    assert re.search(
        rf"its first pod was bound {NUMBER}s after it started \(the binder's {NUMBER}s after its own start\)",
        text,
    ), text
    # and the binder's pace with one of the machine's cores taken by a process that makes no request
    assert re.search(
        rf"with one of the machine's [0-9]+ cores held busy by a process that makes no request, the binder"
        rf" reached {NUMBER} pods/s .*: Caldera {NUMBER} of that",
        text,
    ), text


def test_the_busy_core_beside_the_binder_is_gone_when_its_run_ends() -> None:
    from caldera.hack.bench_e2e import BUSY_LOOP, bench

    result = bench(4, 10, 2, shape="backlog", binder="ceiling", busy_core=True)
    assert result.bound == 10 and result.busy_core
    loops = [pid for pid in os.listdir("/proc") if pid.isdigit() and BUSY_LOOP.encode() in _cmdline(pid)]
    assert loops == []


def _cmdline(pid: str) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ")
    except OSError:
        return b""


def test_only_the_decision_free_binder_runs_beside_a_busy_core() -> None:
    from caldera.hack.bench_e2e import bench

    with pytest.raises(ValueError, match="busy_core"):
        bench(4, 10, 2, shape="backlog", busy_core=True)


def test_ceiling_needs_the_backlog_shape() -> None:
    with pytest.raises(SystemExit, match="backlog"):
        main(["bench", "e2e", "--nodes", "4", "--pods", "10", "--shape", "stream", "--ceiling"])


def test_ceiling_is_refused_with_claims_the_decision_free_binder_would_not_allocate() -> None:
    with pytest.raises(SystemExit, match="allocates no claims"):
        main(["bench", "e2e", "--nodes", "4", "--pods", "10", "--ceiling", "--dra"])


def test_topology_cluster_puts_nodes_in_leaves_of_eight_under_spines_of_sixteen() -> None:
    cluster = topology_cluster(nodes=20 * 8 + 3, node_pods=110)
    templates = cluster["nodes"]
    assert [t["count"] for t in templates] == [8] * 20 + [3]
    assert all(t["labels"] == {LEAF_LABEL: t["name"]} for t in templates)
    tiers: dict[int, list[str]] = {}
    for hn in cluster["objects"]:
        tiers.setdefault(hn["spec"]["tier"], []).append(hn["metadata"]["name"])
    assert len(tiers[1]) == 21 and tiers[2] == ["spine-000", "spine-001"] and tiers[3] == ["root"]
    spine_1 = next(hn for hn in cluster["objects"] if hn["metadata"]["name"] == "spine-001")
    assert [m["selector"]["exactMatch"]["name"] for m in spine_1["spec"]["members"]] == [
        "leaf-0016",
        "leaf-0017",
        "leaf-0018",
        "leaf-0019",
        "leaf-0020",
    ]


def test_split_gangs_counts_a_gang_on_two_leaves() -> None:
    bound = {
        "p-000000": "leaf-0000-1",
        "p-000001": "leaf-0000-7",  # gang 0: one leaf
        "p-000002": "leaf-0003-0",
        "p-000003": "leaf-0004-0",  # gang 1: two leaves
    }
    assert split_gangs(bound, gang_size=2) == (2, 1)
