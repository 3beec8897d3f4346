"""The scheduler's rarer API calls, each in the situation that needs it, run with deploy/'s permissions:
a binding whose answer was lost, a PodGroup create that meets its own earlier attempt, a user queue that gets
the drain finalizer and is let go, and a preemption whose eviction is refused so the evictor deletes."""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web

from caldera.hack.sim import SimCluster
from caldera.hack.sim.errors import ApiError
from caldera.hack.sim.resources import resource
from caldera.scheduler.controllers.state import QUEUE_FINALIZER

from .conftest import SCHEDULER, Api, eventually, needs_sim

QUEUES = "/apis/scheduling.volcano.sh/v1beta1/queues"


async def _bound(api: Api, *names: str) -> bool:
    nodes = await api.node_of()
    return all(nodes.get(n) for n in names)


async def test_a_binding_whose_answer_was_lost_is_confirmed_by_reading_the_pod(
    sim: SimCluster | None, api: Api, start_scheduler: Any
) -> None:
    sim = needs_sim(sim)
    lost: list[str] = []

    async def lose_the_answer(request: web.Request) -> None:
        # The first binding lands, but its answer never reaches the scheduler (a 500 instead).
        if request.method == "POST" and request.path.endswith("/binding") and not lost:
            parts = request.path.split("/")
            namespace, name = parts[4], parts[6]
            sim.store.bind(namespace, name, await request.json())
            lost.append(name)
            raise ApiError(500, "InternalError", "Internal error occurred: the connection was reset")

    sim.add_request_hook(lose_the_answer)
    await api.node("n1", cpu="8")
    running = await start_scheduler()
    await api.gang("job", 2)
    await eventually(lambda: _bound(api, "job-0", "job-1"))
    assert lost, "the first binding's answer was lost"
    binder = running.app.binder
    assert binder is not None
    await eventually(lambda: _async(binder.bound_count == 2))
    assert not binder.failures, "the retried binding's 409 was recognised as our own earlier binding"


async def _async(value: Any) -> Any:
    return value


async def test_a_podgroup_create_that_meets_its_own_earlier_attempt_adopts_it(
    sim: SimCluster | None, api: Api, start_scheduler: Any
) -> None:
    sim = needs_sim(sim)
    landed: list[str] = []

    async def earlier_attempt_landed(request: web.Request) -> None:
        # As if an earlier create had landed and the watch had not brought it yet: this one meets 409.
        if request.method == "POST" and request.path.endswith("/podgroups") and not landed:
            body = await request.json()
            sim.store.create(resource("podgroups", "scheduling.volcano.sh"), api.ns, body)
            landed.append(body["metadata"]["name"])

    sim.add_request_hook(earlier_attempt_landed)
    await api.node("n1", cpu="8")
    running = await start_scheduler()
    await api.pod("plain", cpu="1")  # no PodGroup: the controller makes one
    await eventually(lambda: _bound(api, "plain"))
    assert landed
    controllers = running.app.controllers
    assert controllers is not None and controllers.podgroups.stats.adopted == 1


async def test_a_user_queue_gets_the_drain_finalizer_and_is_let_go_once_empty(
    api: Api, start_scheduler: Any
) -> None:
    await start_scheduler()
    await api.create(
        QUEUES,
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "Queue",
            "metadata": {"name": "team-q"},
            "spec": {"weight": 2},
        },
    )

    async def has_finalizer() -> bool:
        return QUEUE_FINALIZER in ((await api.get(f"{QUEUES}/team-q"))["metadata"].get("finalizers") or [])

    await eventually(has_finalizer)
    await api.client.request("DELETE", f"{QUEUES}/team-q")

    async def gone() -> bool:
        return not any(q["metadata"]["name"] == "team-q" for q in await api.items(QUEUES))

    await eventually(gone)


PREEMPT_CONF = """
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


async def test_preemption_evicts_and_deletes_when_the_eviction_api_is_refused(
    sim: SimCluster | None, api: Api, start_scheduler: Any, conf_file: Any
) -> None:
    sim = needs_sim(sim)
    refused: list[str] = []

    async def no_eviction_api(request: web.Request) -> None:
        # A server without the eviction subresource: the evictor falls back to a uid-checked delete.
        if request.method == "POST" and request.path.endswith("/eviction"):
            refused.append(request.path.split("/")[6])
            raise ApiError(
                405, "MethodNotAllowed", "the server does not allow this method on the requested resource"
            )

    sim.add_request_hook(no_eviction_api)
    _, path = conf_file
    path.write_text(PREEMPT_CONF)
    for name, value in (("high", 1000), ("low", 1)):
        await api.create(
            "/apis/scheduling.k8s.io/v1/priorityclasses",
            {
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": name},
                "value": value,
            },
        )
    await api.node("n1", cpu="4")
    await start_scheduler()

    async def job(name: str, size: int, priority: str) -> None:
        await api.create(
            f"/apis/scheduling.volcano.sh/v1beta1/namespaces/{api.ns}/podgroups",
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "PodGroup",
                "metadata": {"name": name},
                "spec": {"minMember": 1, "priorityClassName": priority},
            },
        )
        for i in range(size):
            await api.create(
                f"/api/v1/namespaces/{api.ns}/pods",
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {
                        "name": f"{name}-{i}",
                        "annotations": {
                            "scheduling.k8s.io/group-name": name,
                            "volcano.sh/preemptable": "true",
                        },
                    },
                    "spec": {
                        "schedulerName": SCHEDULER,
                        "priorityClassName": priority,
                        "terminationGracePeriodSeconds": 0,
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

    await job("low", 4, "low")
    await eventually(lambda: _bound(api, *(f"low-{i}" for i in range(4))))
    await job("high", 1, "high")
    await eventually(lambda: _bound(api, "high-0"), timeout=20)
    assert refused, "the scheduler asked for an eviction first"
    names = {p["metadata"]["name"] for p in await api.pods()}
    assert len({f"low-{i}" for i in range(4)} - names) == 1, "exactly one low-priority pod made room"
    await asyncio.sleep(0)
