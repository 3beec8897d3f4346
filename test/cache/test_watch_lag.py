"""How late the pod watch brings this replica's binds back (cache/lag.py): measured from the API's
answer to the binding to the watch event showing the pod bound, 0 when the watch comes first, and
forgotten for a pod that goes before its event comes."""

import msgspec
from prometheus_client import REGISTRY

from caldera.cache.lag import WatchLag
from caldera.cache.store import ClusterCache
from caldera.config.conf import DEFAULT_CONF, parse_conf
from caldera.hack.scenario import gang, load, node
from caldera.scheduler.loop import RecordingBinder, SchedulerLoop
from caldera.scheduler.registry import builtin_registry


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _bound(p, node_name):
    """The pod as the watch shows it after its binding."""
    return msgspec.structs.replace(p, spec=msgspec.structs.replace(p.spec, node_name=node_name))


def _placed_gang(clock):
    """A gang of two placed by a cycle and handed to the binder (its tasks Binding in the cache)."""
    registry = builtin_registry()
    conf = parse_conf(DEFAULT_CONF, registry)
    pg, pods = gang("train", 2)
    cache = load(ClusterCache(), nodes=[node("n1"), node("n2")], pods=pods, podgroups=[pg])
    cache.watch_lag = WatchLag(clock=clock)
    binder = RecordingBinder()
    SchedulerLoop(cache, lambda: conf, registry, binder, period=0.01).run_once()
    placed = {p.task.name: p.node for p in binder.placements}
    assert sorted(placed) == ["train-0", "train-1"]
    return cache, pods, placed


def _histogram_count() -> float:
    return REGISTRY.get_sample_value("caldera_watch_bind_delay_seconds_count") or 0.0


def test_a_bind_seen_back_late_is_measured_from_the_api_answer():
    clock = Clock()
    cache, pods, placed = _placed_gang(clock)
    first, second = pods
    before = _histogram_count()
    cache.confirm_bound(first.metadata.uid)  # the API answered at 100.0
    clock.now = 100.25
    cache.confirm_bound(second.metadata.uid)  # and at 100.25
    doc = cache.watch_lag.summary()
    assert doc["awaiting"] == 2 and doc["oldest_awaiting_ms"] == 250.0 and doc["observed"] == 0

    clock.now = 101.5
    cache.upsert_pod(_bound(first, placed[first.metadata.name]))  # the watch, 1.5 s after the answer
    cache.upsert_pod(_bound(second, placed[second.metadata.name]))  # 1.25 s after it

    doc = cache.watch_lag.summary()
    assert doc["observed"] == 2 and doc["awaiting"] == 0 and "oldest_awaiting_ms" not in doc
    assert doc["max_ms"] == 1500.0 and doc["recent"] == 2
    assert _histogram_count() == before + 2
    # the kubelet's update of a pod seen bound is no bind coming back
    cache.upsert_pod(_bound(first, placed[first.metadata.name]))
    assert cache.watch_lag.summary()["observed"] == 2


def test_a_watch_ahead_of_the_answer_counts_zero_and_leaves_nothing_behind():
    clock = Clock()
    cache, pods, placed = _placed_gang(clock)
    p = pods[0]
    cache.upsert_pod(_bound(p, placed[p.metadata.name]))  # the watch first, the task still Binding
    clock.now = 100.4
    cache.confirm_bound(p.metadata.uid)  # then the answer: nothing left to wait for
    doc = cache.watch_lag.summary()
    assert doc["observed"] == 1 and doc["max_ms"] == 0.0 and doc["awaiting"] == 0


def test_a_pod_deleted_before_its_bind_is_seen_is_forgotten():
    clock = Clock()
    cache, pods, _ = _placed_gang(clock)
    for p in pods:
        cache.confirm_bound(p.metadata.uid)
    cache.delete_pod(pods[0])
    doc = cache.watch_lag.summary()
    assert doc["awaiting"] == 1 and doc["observed"] == 0


def test_pods_this_replica_did_not_bind_measure_nothing():
    _, pods = gang("train", 2)
    fresh = ClusterCache()
    fresh.watch_lag = WatchLag(clock=Clock())
    # a list bringing pods already bound (by another replica before this one started), then updated
    load(fresh, nodes=[node("n1")], pods=[_bound(p, "n1") for p in pods])
    fresh.upsert_pod(_bound(pods[0], "n1"))
    assert fresh.watch_lag.summary() == {"observed": 0, "recent": 0, "awaiting": 0}
