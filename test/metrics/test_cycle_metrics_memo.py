"""The cycle metrics set a queue's series only when what they show moved (metrics/cycle.py
``_queues``) and keep the labelled latency histograms at hand (``_latencies``): the series read
the same as when every one is set every cycle.

A stream of cycles through the loop: gangs arrive in two queues, a queue's weight changes, a
capability is set and taken away again, a queue is deleted and comes back, and at last a
capability is set while nothing else moves. After each cycle, what
the metrics observer left in the registry is compared with what a fresh observer (nothing
remembered) sets from the same result."""

from __future__ import annotations

from typing import Any

from prometheus_client import REGISTRY

from caldera.cache.store import ClusterCache
from caldera.config.conf import DEFAULT_CONF, parse_conf
from caldera.framework.result import SessionResult
from caldera.hack.scenario import gang, load, node, queue
from caldera.metrics.cycle import CycleMetrics
from caldera.scheduler.loop import RecordingBinder, SchedulerLoop
from caldera.scheduler.registry import builtin_registry

QUEUE_FAMILIES = ("volcano_queue_",)


def queue_series() -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of the queue families now in the registry."""
    out = {}
    for family in REGISTRY.collect():
        for sample in family.samples:
            if sample.name.startswith(QUEUE_FAMILIES):
                out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def latency_count(plugin: str, point: str) -> float:
    labels = {"plugin": plugin, "OnSession": point}
    return REGISTRY.get_sample_value("volcano_plugin_scheduling_latency_milliseconds_count", labels) or 0.0


def test_queue_series_read_as_if_every_one_were_set_every_cycle() -> None:
    registry = builtin_registry()
    conf = parse_conf(DEFAULT_CONF, registry)
    cache = ClusterCache()
    load(cache, nodes=[node(f"n{i}", cpu="8", memory="32Gi") for i in range(2)])
    load(cache, queues=[queue("default"), queue("research", weight=2)])
    results: list[SessionResult] = []
    loop = SchedulerLoop(
        cache,
        lambda: conf,
        registry,
        RecordingBinder(),
        on_cycle=lambda r, d, e: results.append(r),  # type: ignore[arg-type,misc]
    )
    observer = CycleMetrics()
    changes: dict[int, Any] = {
        3: lambda: load(cache, queues=[queue("research", weight=5)]),
        5: lambda: load(
            cache, queues=[queue("research", weight=5, capability={"cpu": "4", "memory": "8Gi"})]
        ),
        7: lambda: load(cache, queues=[queue("research", weight=5)]),
        9: lambda: cache.delete_queue(cache.queues["research"].queue),
        11: lambda: load(cache, queues=[queue("research", weight=1)]),
        # nothing else moves: a capability far above the cluster changes no share figure
        13: lambda: load(
            cache, queues=[queue("research", weight=1, capability={"cpu": "1000", "memory": "1Ti"})]
        ),
    }
    seen_research = []
    before = latency_count("drf", "OnSessionClose")
    for c in range(14):
        for k, queue_name in enumerate(("default", "research") if c < 12 else ()):
            pg, pods = gang(f"g{c}-{k}", 1, cpu="1", queue=queue_name)
            load(cache, podgroups=[pg], pods=pods)
        if c in changes:
            changes[c]()
        loop.run_once()
        result = results[-1]
        observer.observe(result, 0.01, None)
        mine = queue_series()
        CycleMetrics()._queues(result.queues, result.report.queue_shares)  # every series set afresh
        assert queue_series() == mine
        seen_research.append(any(dict(labels).get("queue_name") == "research" for _, labels in mine))
    assert seen_research[8] and not seen_research[9] and seen_research[11]  # deleted, then back
    # every cycle's close was observed into the same, exported histogram
    assert latency_count("drf", "OnSessionClose") - before == 14


def test_the_cycle_history_counts_the_explained_jobs_pending_tasks() -> None:
    """/debug/scheduler's pending tasks per cycle: the pending tasks of the jobs left pending with a
    reason (taken from the metrics' count of the same), as gangs that cannot fit pile up."""
    from caldera.framework.model import TaskStatus
    from caldera.scheduler.debug import Observatory

    registry = builtin_registry()
    conf = parse_conf(DEFAULT_CONF, registry)
    cache = ClusterCache()
    load(cache, nodes=[node("n0", cpu="8", memory="32Gi")])
    observatory = Observatory()
    loop = SchedulerLoop(cache, lambda: conf, registry, RecordingBinder(), on_cycle=observatory.on_cycle)
    for c in range(4):
        pg, pods = gang(f"fits-{c}", 1, cpu="1")
        big_pg, big_pods = gang(f"too-big-{c}", 2 + c, cpu="16")
        load(cache, podgroups=[pg, big_pg], pods=pods + big_pods)
        result = loop.run_once()
        assert result is not None
        explained = result.report.explanations
        assert observatory.cycles[-1].pending_tasks == sum(
            result.jobs[uid].count(TaskStatus.PENDING) for uid in explained
        )
    assert observatory.cycles[-1].pending_tasks == 2 + 3 + 4 + 5  # every big gang, none of the small
