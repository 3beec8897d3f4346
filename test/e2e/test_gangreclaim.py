"""The gangreclaim action end to end: a queue under its deserved share takes room from a queue that
overuses the cluster, a whole gang at a time, and its gang binds.

Volcano 1.15's rules (pkg/scheduler/actions/gangreclaim/gangreclaim.go, the bundles of
pkg/scheduler/actions/utils/bundle.go ``CreateJobBundles``): a starving job of a queue that is not
overused asks for room for all its pending pods at once, from running pods of other, reclaimable
queues (proportion's ``reclaimableFn``: only from a queue above its deserved share); a victim gang at
its minimum is a "whole" bundle, taken only all together. Two queues of equal weight deserve half of
the four cpus each."""

from __future__ import annotations

from typing import Any

import pytest

from .conftest import Api, eventually

pytestmark = pytest.mark.e2e

CONF = """
actions: "enqueue, allocate, gangreclaim"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: predicates
  - name: proportion
  - name: nodeorder
"""


async def job(api: Api, name: str, queue: str) -> list[str]:
    """A gang of two 1-cpu pods, both needed."""
    await api.podgroup(name, 2, queue=queue)
    pods = [f"{name}-{i}" for i in range(2)]
    for pod in pods:
        await api.pod(pod, cpu="1", group=name)
    return pods


async def test_a_queue_under_its_share_reclaims_a_whole_gang_from_an_overusing_queue(
    api: Api, start_scheduler: Any, conf_file: Any
) -> None:
    _, path = conf_file
    path.write_text(CONF)
    await api.queue("research")
    await api.queue("prod")
    await api.node("n1", cpu="2")
    await api.node("n2", cpu="2")
    await start_scheduler()

    # research has the cluster to itself: its two gangs take all four cpus
    research = {name: await job(api, name, "research") for name in ("sweep-a", "sweep-b")}
    await eventually(lambda: api.placed(*(p for pods in research.values() for p in pods)))

    # prod's gang needs two cpus, its share; research is over its own
    serving = await job(api, "serving", "prod")
    looks: list[dict[str, str]] = []  # each look at the pods once a serving pod was bound

    async def serving_bound() -> bool:
        nodes = await api.node_of()
        if any(nodes.get(n) for n in serving):
            looks.append(nodes)
        return all(nodes.get(n) for n in serving)

    await eventually(serving_bound, timeout=15)

    left = {p["metadata"]["name"] for p in await api.pods()}
    kept = {name for name, pods in research.items() if set(pods) <= left}
    lost = {name for name, pods in research.items() if not set(pods) & left}
    assert len(kept) == 1 and len(lost) == 1, (
        f"research's gangs were not taken whole: pods left {sorted(left)}"
    )
