"""drf's namespace shares at session close, kept from the last close and redone only for the jobs
that changed (plugins/drf.py ``on_session_close``), equal those summed afresh over every job.

Each scenario runs the same cluster through two loops side by side: one as the scheduler runs (what
one session leaves for the next is carried), one that forgets everything between cycles, and
compares every cycle's namespace and job shares; it also counts how often the carried sums were
used, so that a scenario that never takes the short path cannot pass unnoticed."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from caldera.cache.store import ClusterCache
from caldera.framework.objects import Pod, PodGroup
from caldera.hack import twins
from caldera.hack.scenario import gang, node, queue
from caldera.plugins import drf


class Twins(twins.Twins):
    def cycle(self, bind: bool = True, meanwhile: Callable[[ClusterCache], None] | None = None) -> Any:
        self.set_meanwhile(meanwhile)
        return super().cycle(bind)


@pytest.fixture
def closes(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """How many closes summed every job ("each") and how many took the last close's sums ("carried")."""
    counts = {"each": 0, "carried": 0}
    each, changed = drf.DrfPlugin._close_each, drf.DrfPlugin._close_changed

    def count_each(self: Any, ssn: Any) -> Any:
        counts["each"] += 1
        return each(self, ssn)

    def count_changed(self: Any, ssn: Any, carried: Any, redo: set[str]) -> Any:
        out = changed(self, ssn, carried, redo)
        counts["carried"] += out is not None
        return out

    monkeypatch.setattr(drf.DrfPlugin, "_close_each", count_each)
    monkeypatch.setattr(drf.DrfPlugin, "_close_changed", count_changed)
    return counts


def arrivals(c: int) -> list[tuple[PodGroup, list[Pod]]]:
    """Cycle ``c``'s gangs: one in team-a (default queue), one in team-b (research), every third
    asking for a GPU per pod; team-c gets a gang every fourth cycle only."""
    out = []
    for k, (queue_name, namespace) in enumerate((("default", "team-a"), ("research", "team-b"))):
        extra = {"nvidia.com/gpu": "1"} if (c + k) % 3 == 0 else None
        out.append(gang(f"g{c}-{k}", 2 + k, cpu="1", queue=queue_name, namespace=namespace, extra=extra))
    if c % 4 == 0:
        out.append(gang(f"c{c}", 1, cpu="2", namespace="team-c"))
    return out


@pytest.mark.parametrize("reader", [False, True], ids=["snapshots-in-a-row", "a-reader-in-between"])
def test_namespace_shares_of_a_stream_equal_a_fresh_sum(reader: bool, closes: dict[str, int]) -> None:
    """Gangs arrive in three namespaces every cycle, run, and finish four cycles later (their pods
    deleted; every other time the PodGroup too, the other time it stays with no pod, holding
    nothing). team-c runs one gang at a time, so it leaves the namespace shares and comes back.
    A node joins halfway (the cluster total moves). A gang too big for any node is tried every
    cycle and fails (its allocation is changed and changed back within the session)."""
    pair = Twins()
    pair.load(
        nodes=[node(f"n{i}", cpu="16", memory="64Gi", extra={"nvidia.com/gpu": "4"}) for i in range(3)],
        queues=[queue("default"), queue("research", weight=2)],
    )
    big_pg, big_pods = gang("too-big", 3, cpu="12", namespace="team-a")
    pair.load(podgroups=[big_pg], pods=big_pods)
    running: list[list[tuple[PodGroup, list[Pod]]]] = []
    seen_c = set()
    for c in range(14):
        gangs = arrivals(c)
        pair.load(podgroups=[pg for pg, _ in gangs], pods=[p for _, pods in gangs for p in pods])
        if c == 7:
            pair.load(nodes=[node("n7", cpu="32", memory="128Gi")])
        if len(running) > 3:
            for i, (pg, pods) in enumerate(running.pop(0)):
                for p in pods:
                    pair.each("delete_pod", p)
                if (c + i) % 2:
                    pair.each("delete_podgroup", pg)
        if reader and c % 3 == 1:
            pair.caches[0].snapshot()  # a /debug reader: the next snapshot does not follow the last
        result = pair.cycle()
        running.append(gangs)
        seen_c.add("team-c" in result.report.namespace_shares)
        assert set(result.report.namespace_shares) >= {"team-a", "team-b"}
    assert seen_c == {True, False}  # team-c left the shares and came back
    assert closes["carried"] >= (5 if reader else 10)
    assert closes["each"] >= (4 if reader else 1)


def test_a_namespace_whose_jobs_hold_nothing_any_more_is_not_named(closes: dict[str, int]) -> None:
    pair = Twins()
    pair.load(nodes=[node("n0", cpu="8", memory="32Gi")])
    pg_a, pods_a = gang("a", 2, cpu="1", namespace="team-a")
    pg_b, pods_b = gang("b", 1, cpu="1", namespace="team-b")
    pair.load(podgroups=[pg_a, pg_b], pods=pods_a + pods_b)
    first = pair.cycle()
    assert set(first.report.namespace_shares) == {"team-a", "team-b"}
    assert first.report.namespace_shares["team-a"] == pytest.approx(2 / 8)
    for p in pods_b:
        pair.each("delete_pod", p)  # its PodGroup stays, with no pod
    after = pair.cycle()
    assert set(after.report.namespace_shares) == {"team-a"}
    assert closes["carried"] == 1


def test_sums_beyond_the_exact_range_are_made_afresh_each_time(closes: dict[str, int]) -> None:
    """Memory of 2**53 bytes per pod: a namespace's sum leaves the range where float sums are
    exact in any order, so nothing is carried and every close sums every job."""
    pair = Twins()
    pair.load(nodes=[node(f"n{i}", cpu="8", memory="16Pi") for i in range(2)])
    for c in range(3):
        pg, pods = gang(f"huge-{c}", 1, cpu="1", memory="8Pi")  # 8 Pi = 2**53 bytes
        pair.load(podgroups=[pg], pods=pods)
        result = pair.cycle()
        assert result.report.namespace_shares["default"] > 0
    assert closes["carried"] == 0


def test_a_placement_the_cache_could_not_take_is_taken_out_again(closes: dict[str, int]) -> None:
    """The session places a pod on a node that is deleted before its result reaches the cache: the
    cache drops the placement and the job stays as it was, unchanged. The next session cannot place
    it anywhere (its selector names that node only) and does not touch it: its namespace holds
    nothing again, although the last close counted the placement."""
    pair = Twins()
    n1 = node("n1", cpu="8", memory="32Gi", labels={"pool": "one"})
    pair.load(nodes=[node("n0", cpu="8", memory="32Gi"), n1])
    pg, pods = gang("picky", 1, cpu="1", namespace="team-a", node_selector={"pool": "one"})
    pair.load(podgroups=[pg], pods=pods)
    placed = pair.cycle(meanwhile=lambda cache: cache.delete_node(n1))
    assert [(p.task.name, p.node) for p in placed.placements] == [("picky-0", "n1")]
    assert "team-a" in placed.report.namespace_shares  # the session's own view, at its close
    after = pair.cycle()
    assert after.placements == []
    assert after.report.namespace_shares == {}
    assert closes["carried"] == 1
