"""What a pod preempted by the scheduler shows before it goes, end to end.

Volcano's evictor (pkg/scheduler/cache/cache.go, ``defaultEvictor.Evict``) writes ``Ready`` False
(reason ``Evict``) and ``DisruptionTarget`` True (``PreemptionByScheduler``) in one status update,
then deletes the pod. Caldera evicts through the eviction subresource, which writes the pod's
``DisruptionTarget`` itself (``EvictionByEvictionAPI``); the evictor adds ``Ready`` False once the
eviction is accepted. Where the subresource is refused, the evictor falls back to Volcano's own
write and delete.

The victim holds a finalizer, so that what it shows while it terminates can be read at leisure;
the test lets it go at the end."""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp import web

from caldera.hack.sim import SimCluster
from caldera.hack.sim.errors import ApiError

from .conftest import SCHEDULER, Api, eventually, needs_sim

pytestmark = pytest.mark.e2e

CONF = """
actions: "enqueue, allocate, preempt"
tiers:
- plugins:
  - name: priority
  - name: conformance
- plugins:
  - name: predicates
  - name: proportion
  - name: nodeorder
"""
HOLD = "example.com/hold"


async def job(api: Api, name: str, priority: str, finalizer: bool = False) -> None:
    """A PodGroup of one 1-cpu pod of ``priority``, with a grace period (the default 30 s)."""
    await api.podgroup(name, 1, priority=priority)
    meta: dict[str, Any] = {
        "name": name,
        "annotations": {"scheduling.k8s.io/group-name": name, "volcano.sh/preemptable": "true"},
    }
    if finalizer:
        meta["finalizers"] = [HOLD]
    await api.create(
        f"/api/v1/namespaces/{api.ns}/pods",
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": meta,
            "spec": {
                "schedulerName": SCHEDULER,
                "priorityClassName": priority,
                "containers": [
                    {
                        "name": "main",
                        "image": "busybox",
                        "resources": {"requests": {"cpu": "1", "memory": "64Mi"}},
                    }
                ],
            },
        },
    )


async def preempt(api: Api, start_scheduler: Any, conf_file: Any) -> dict[str, tuple[str, str, str]]:
    """One node of 1 cpu; ``low`` runs there, ``high`` comes: ``low``'s conditions (type -> status,
    reason, message) once it terminates marked ``Ready`` False, read before it is let go."""
    _, path = conf_file
    path.write_text(CONF)
    await api.priority_class("high", 1000)
    await api.priority_class("low", 1)
    await api.node("n1", cpu="1")
    await start_scheduler()
    await job(api, "low", "low", finalizer=True)
    await eventually(lambda: api.placed("low"))
    await job(api, "high", "high")
    victim = f"/api/v1/namespaces/{api.ns}/pods/low"

    async def marked() -> dict[str, tuple[str, str, str]] | None:
        pod = await api.get(victim)
        conditions = {
            c["type"]: (c["status"], c.get("reason", ""), c.get("message", ""))
            for c in pod["status"].get("conditions") or []
        }
        if pod["metadata"].get("deletionTimestamp") and conditions.get("Ready", ("",))[0] == "False":
            return conditions
        return None

    shown = await eventually(marked, timeout=15)
    await api.client.request(
        "PATCH", victim, body={"metadata": {"finalizers": None}}, content_type="application/merge-patch+json"
    )
    await eventually(lambda: api.placed("high"), timeout=15)
    return shown  # type: ignore[no-any-return]


async def test_an_evicted_pod_shows_the_eviction_apis_disruption_target_and_volcanos_ready_false(
    api: Api, start_scheduler: Any, conf_file: Any
) -> None:
    shown = await preempt(api, start_scheduler, conf_file)
    assert shown["Ready"] == ("False", "Evict", "Pod is evicted, because of preempt")
    # one DisruptionTarget, the API server's: the evictor writes none beside it
    assert shown["DisruptionTarget"] == ("True", "EvictionByEvictionAPI", "Eviction API: evicting")


async def test_without_the_eviction_api_volcanos_marks_are_written_before_the_delete(
    sim: SimCluster | None, api: Api, start_scheduler: Any, conf_file: Any
) -> None:
    sim = needs_sim(sim)
    calls: list[str] = []

    async def no_eviction_api(request: web.Request) -> None:
        if request.path.endswith("/pods/low") or "/pods/low/" in request.path:
            calls.append(f"{request.method} {request.path.rsplit('/low', 1)[1] or '/'}")
        if request.method == "POST" and request.path.endswith("/eviction"):
            raise ApiError(
                405, "MethodNotAllowed", "the server does not allow this method on the requested resource"
            )

    sim.add_request_hook(no_eviction_api)
    shown = await preempt(api, start_scheduler, conf_file)
    assert shown["Ready"] == ("False", "Evict", "Pod is evicted, because of preempt")
    assert shown["DisruptionTarget"] == (
        "True",
        "PreemptionByScheduler",
        f"{SCHEDULER}: preempting to accommodate a higher priority pod",
    )
    writes = [c for c in calls if not c.startswith("GET")]
    assert writes.index("PATCH /status") < writes.index("DELETE /")
