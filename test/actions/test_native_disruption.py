"""A native PodGroup's ``disruptionMode`` (KEP-5710) through preempt, reclaim and gangpreempt: with
``Pod`` (the default) a victim group gives up only the pods it can spare; with ``PodGroup`` it is
evicted whole even where one pod would make room, or not at all."""

from __future__ import annotations

from typing import Any

import pytest

from caldera.cache.store import ClusterCache
from caldera.hack.scenario import (
    load,
    native_member,
    native_podgroup,
    node,
    priority_class,
    queue,
    run_session,
)

PREEMPT = """
actions: "enqueue, allocate, preempt"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: drf
  - name: predicates
  - name: proportion
  - name: nodeorder
"""
GANG_PREEMPT = PREEMPT.replace("preempt", "gangpreempt")
RECLAIM = PREEMPT.replace("preempt", "reclaim")


def _world(mode: str, victim_queue: str = "default", wanting_queue: str = "default") -> Any:
    """n1 (4 cpu) full with the four running pods of a low-priority native group of minCount 2
    (``mode``); a high-priority native group wants one cpu."""
    cache = load(
        ClusterCache(),
        nodes=[node("n1", cpu="4")],
        priority_classes=[priority_class("high", 1000), priority_class("low", 10)],
        queues=[queue("default"), queue("a"), queue("b")],
    )
    cache.upsert_native_podgroup(
        native_podgroup("batch", min_count=2, priority_class="low", disruption_mode=mode, queue=victim_queue)
    )
    cache.upsert_native_podgroup(
        native_podgroup("urgent", min_count=1, priority_class="high", queue=wanting_queue)
    )
    for i in range(4):
        cache.upsert_pod(
            native_member(
                f"batch-{i}", "batch", cpu="1", node_name="n1", phase="Running", priority_class="low"
            )
        )
    cache.upsert_pod(native_member("urgent-0", "urgent", cpu="1", priority_class="high"))
    return cache.snapshot()


def _evicted(result: Any) -> list[str]:
    return sorted(e.task.name for e in result.evictions)


@pytest.mark.parametrize("mode", ["", "Pod"])
def test_preempt_takes_one_pod_of_a_group_disrupted_pod_by_pod(mode: str) -> None:
    _, result = run_session(_world(mode), PREEMPT)
    assert len(_evicted(result)) == 1


def test_preempt_takes_a_group_disrupted_as_a_whole_entirely() -> None:
    _, result = run_session(_world("PodGroup"), PREEMPT)
    assert _evicted(result) == [f"batch-{i}" for i in range(4)]


def test_gangpreempt_takes_a_group_disrupted_as_a_whole_entirely() -> None:
    _, result = run_session(_world("PodGroup"), GANG_PREEMPT)
    assert _evicted(result) == [f"batch-{i}" for i in range(4)]


def test_gangpreempt_takes_only_what_a_group_disrupted_pod_by_pod_can_spare() -> None:
    # gangpreempt takes bundles: the group's "safe" one is its two pods above minCount
    _, result = run_session(_world("Pod"), GANG_PREEMPT)
    assert len(_evicted(result)) == 2


def test_reclaim_takes_a_group_disrupted_as_a_whole_entirely() -> None:
    snap = _world("PodGroup", victim_queue="a", wanting_queue="b")
    _, result = run_session(snap, RECLAIM)
    assert _evicted(result) == [f"batch-{i}" for i in range(4)]


def test_reclaim_takes_one_pod_of_a_group_disrupted_pod_by_pod() -> None:
    snap = _world("Pod", victim_queue="a", wanting_queue="b")
    _, result = run_session(snap, RECLAIM)
    assert len(_evicted(result)) == 1
