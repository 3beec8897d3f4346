"""Issue 7: a Deployment flipped between 0 and 1 replicas, again and again, while the API server fails
a share of PodGroup deletes (some before, some after carrying them out), must never strand a pod.

In Volcano the retried delete of the old PodGroup removed the new one and the new pod stayed Pending
forever. Here every delete carries the uid and resourceVersion of the object seen to be obsolete, and
the scheduler's cache ignores events about an older PodGroup of the same name.
"""

from __future__ import annotations

import asyncio
import random
import time
from typing import Any

import orjson

from caldera.cache.client import ApiError
from caldera.framework.model import GROUP_NAME_ANNOTATION
from caldera.hack.sim.errors import ApiError as SimApiError
from caldera.hack.sim.resources import resource
from caldera.scheduler.controllers import Controllers

from .conftest import SCHEDULER, Api, eventually, needs_sim

PODGROUPS = resource("podgroups", "scheduling.volcano.sh")
FLIPS = 200
PERIOD = 0.1


class FailingDeletes:
    """Fails a share of PodGroup DELETEs: half before anything happens, half after the delete was
    carried out (the answer was lost). Records every delete's options."""

    def __init__(self, sim: Any, rate: float, seed: int = 11) -> None:
        self.sim = sim
        self.rate = rate
        self.rng = random.Random(seed)
        self.bodies: list[dict[str, Any]] = []
        self.failed_before = 0
        self.failed_after = 0
        self._original = sim.server._fault
        sim.server._fault = self._fault

    async def _fault(self, request: Any) -> None:
        if request.method == "DELETE" and "/podgroups/" in request.path:
            raw = await request.read()
            body = orjson.loads(raw) if raw else {}
            self.bodies.append(body)
            if self.rng.random() < self.rate:
                if self.rng.random() < 0.5:
                    self.failed_before += 1
                else:
                    self.failed_after += 1
                    parts = request.path.strip("/").split("/")
                    try:
                        self.sim.store.delete(PODGROUPS, parts[4], parts[6], body)
                    except SimApiError:
                        pass
                raise SimApiError(500, "InternalError", "Internal error occurred: injected by the test")
        await self._original(request)


def deployment(name: str, replicas: int) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "schedulerName": SCHEDULER,
                    "terminationGracePeriodSeconds": 1,
                    "containers": [
                        {"name": "web", "image": "nginx", "resources": {"requests": {"cpu": "100m"}}}
                    ],
                },
            },
        },
    }


async def scale(api: Api, path: str, replicas: int) -> None:
    for attempt in range(20):
        try:
            await api.client.request(
                "PATCH",
                path,
                body={"spec": {"replicas": replicas}},
                content_type="application/merge-patch+json",
            )
            return
        except ApiError as exc:
            if not exc.transient or attempt == 19:
                raise
            await asyncio.sleep(0.01)


async def test_flipping_a_deployment_never_strands_a_pod(sim: Any, api: Api, start_scheduler: Any) -> None:
    cluster = needs_sim(sim)
    faults = FailingDeletes(cluster, rate=0.3)
    await api.node("n1")
    await api.node("n2")
    running = await start_scheduler(schedule_period=PERIOD)
    app = running.app
    controllers = app.controllers
    assert isinstance(controllers, Controllers), "the binary runs the controllers by default"
    try:
        await api.create(f"/apis/apps/v1/namespaces/{api.ns}/deployments", deployment("web", 1))
        path = f"/apis/apps/v1/namespaces/{api.ns}/deployments/web"
        cluster.set_faults(error_500_rate=0.02)  # and a little trouble everywhere else
        rng = random.Random(5)
        started = time.monotonic()
        for flip in range(FLIPS):
            replicas = 0 if flip % 2 == 0 else 1
            await scale(api, path, replicas)
            await asyncio.sleep(rng.uniform(0.0, 0.04))
        flipped = time.monotonic()

        async def settled() -> bool:
            pods = await api.pods()
            live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
            if len(live) != 1:
                return False
            return all(p["spec"].get("nodeName") for p in pods)

        # "Within a few scheduling periods": the last flip leaves one pod, bound well inside 15 periods.
        await eventually(settled, timeout=15 * PERIOD, interval=0.02)
        bound_after = time.monotonic() - flipped
        cluster.set_faults(error_500_rate=0.0)

        async def consistent() -> bool:
            if not controllers.idle:
                return False
            pods = await api.pods()
            groups = {
                pg["metadata"]["name"]: pg
                for pg in await api.items(
                    f"/apis/scheduling.volcano.sh/v1beta1/namespaces/{api.ns}/podgroups"
                )
            }
            wanted = {(p["metadata"].get("annotations") or {}).get(GROUP_NAME_ANNOTATION) for p in pods}
            return None not in wanted and wanted == set(groups)

        # No PodGroup is left without pods, and none is missing for an existing pod.
        await eventually(consistent, timeout=5.0)
        pods = await api.pods()
        for pod in pods:
            group = pod["metadata"]["annotations"][GROUP_NAME_ANNOTATION]
            job = app.cache.jobs.get(f"{api.ns}/{group}")
            assert job is not None, f"the scheduler's cache lost the job of {pod['metadata']['name']}"
            assert pod["metadata"]["uid"] in job.tasks
        assert all(p["spec"]["nodeName"] for p in pods)

        stats = controllers.podgroups.stats
        failed = faults.failed_before + faults.failed_after
        print(
            f"\n{FLIPS} flips in {flipped - started:.2f}s; PodGroups created {stats.created}, deleted "
            f"{stats.deleted}, delete conflicts {stats.delete_conflicts}; PodGroup deletes sent "
            f"{len(faults.bodies)}, failed {failed} ({faults.failed_after} after being carried out); "
            f"last pod bound {bound_after:.2f}s after the last flip"
        )
        assert stats.created >= 20 and stats.deleted >= 10, "the flips should churn PodGroups"
        assert failed >= 5, "a share of the deletes should have failed"
        assert faults.bodies and all(
            b["preconditions"]["uid"] and b["preconditions"]["resourceVersion"] for b in faults.bodies
        ), "every PodGroup delete carries preconditions"
    finally:
        cluster.set_faults(error_500_rate=0.0)


async def test_the_binary_runs_no_controllers_when_told_not_to(api: Api, start_scheduler: Any) -> None:
    await api.node("n1")
    await api.pod("plain")  # names no PodGroup
    running = await start_scheduler(enable_controllers=False)
    await asyncio.sleep(0.5)
    assert running.app.controllers is None
    pod = await api.get(f"/api/v1/namespaces/{api.ns}/pods/plain")
    assert GROUP_NAME_ANNOTATION not in (pod["metadata"].get("annotations") or {})
    assert not (await api.node_of())["plain"], "without a PodGroup the pod waits"
