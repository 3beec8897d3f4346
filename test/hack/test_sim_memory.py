"""The simulator holds each stored object's JSON in bytes of that JSON's size: it is the oracle of the
end-to-end benchmarks at 150,000 pods, so what it keeps per object is what its memory grows by."""

from __future__ import annotations

import tracemalloc

from caldera.hack.sim.resources import NAMESPACES, PODS
from caldera.hack.sim.store import Store
from caldera.hack.workload.manifests import pod_manifest


def test_stored_json_takes_no_more_memory_than_its_length() -> None:
    store = Store(history_size=10_000)
    store.create(NAMESPACES, "", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n"}})
    pods = [
        pod_manifest(f"p-{i:04d}", "n", workload="w", group="g", requests={"cpu": "100m", "memory": "1Gi"})
        for i in range(300)
    ]
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot()
        for pod in pods:
            store.create(PODS, "n", pod)
        after = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    average = sum(len(store.get(PODS, "n", p["metadata"]["name"]).raw) for p in pods) / len(pods)
    per_pod = {
        stat.traceback[0].lineno: stat.size_diff / stat.count_diff
        for stat in after.compare_to(before, "lineno")
        if stat.traceback[0].filename.endswith("/sim/store.py") and stat.count_diff >= len(pods)
    }
    assert per_pod  # the store's own allocations were seen
    # nothing the store allocates once per pod is bigger than the pod's JSON (orjson's own output
    # buffer was 8 KiB and more for a 1.9 KB pod)
    assert max(per_pod.values()) < 1.2 * average + 64, (per_pod, average)
