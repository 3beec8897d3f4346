"""The same cluster without Kubernetes' gang API (the default of a 1.36 server): the scheduler does
not watch it and runs as before; a pod's ``spec.schedulingGroup`` is dropped by the server."""

from __future__ import annotations

import pytest

from .conftest import SCHEDULER, eventually

pytestmark = pytest.mark.e2e


async def test_without_the_api_a_volcano_gang_binds_as_before(sim, api, start_scheduler) -> None:  # type: ignore[no-untyped-def]
    await api.node("n1", cpu="4")
    await api.gang("train", 4)
    running = await start_scheduler()
    await eventually(lambda: _bound(api, 4), timeout=15)
    assert running.app.informers is not None
    assert "native-podgroups" not in running.app.informers.reflectors
    assert running.app.cache.native_gang_api is False
    pod = await api.create(
        f"/api/v1/namespaces/{api.ns}/pods",
        {
            "metadata": {"name": "grouped"},
            "spec": {
                "schedulerName": SCHEDULER,
                "schedulingGroup": {"podGroupName": "g"},
                "containers": [{"name": "main", "image": "busybox"}],
            },
        },
    )
    assert "schedulingGroup" not in pod["spec"]


async def _bound(api, n: int) -> bool:  # type: ignore[no-untyped-def]
    nodes = await api.node_of()
    return len(nodes) == n and all(nodes.values())
