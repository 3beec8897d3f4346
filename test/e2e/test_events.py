"""Events as the scheduler writes them to a cluster: a repeat updates the Event already there."""

from __future__ import annotations

from caldera.cache.client import ApiClient, ClusterConfig
from caldera.scheduler.events import EventRecorder

from .conftest import Api


async def test_a_repeated_event_is_one_event_object_with_a_count(api: Api, kubeconfig: str) -> None:
    clock = [0.0]
    recorder = EventRecorder(component="caldera", clock=lambda: clock[0], patch_interval=1.0)
    ref = {"apiVersion": "v1", "kind": "Pod", "name": "p", "namespace": api.ns, "uid": "u-1"}
    client = ApiClient(await ClusterConfig.load(kubeconfig))
    try:
        for i in range(5):
            clock[0] = float(i)
            recorder.record(ref, "Warning", "FailedScheduling", f"attempt {i}")
            for w in recorder.due():
                path = f"/api/v1/namespaces/{w.namespace}/events"
                if w.method == "POST":
                    await client.request("POST", path, body=w.body)
                else:
                    await client.request(
                        "PATCH", f"{path}/{w.name}", body=w.body, content_type="application/merge-patch+json"
                    )
                recorder.written(w, True)
    finally:
        await client.close()
    events = [e for e in await api.events() if e["involvedObject"].get("uid") == "u-1"]
    assert len(events) == 1
    assert events[0]["count"] == 5 and events[0]["message"] == "attempt 4"
