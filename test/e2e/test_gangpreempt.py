"""The gangpreempt action end to end: a high-priority gang takes its room from a lower-priority gang
of its queue whole, and binds once the victims are gone.

Volcano 1.15's rules (pkg/scheduler/actions/gangpreempt/gangpreempt.go, the bundles of
pkg/scheduler/actions/utils/bundle.go ``CreateJobBundles``): a starving job asks for room for all its
pending pods at once; a victim gang's pods beyond its minAvailable are a "safe" bundle, the rest a
"whole" bundle taken only all together, so a victim gang is never left partly running. Here the
victim gang runs at its minimum: one of its pods would make room, yet all of them go."""

from __future__ import annotations

from typing import Any

import pytest

from .conftest import Api, eventually

pytestmark = pytest.mark.e2e

CONF = """
actions: "enqueue, allocate, gangpreempt"
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


async def job(api: Api, name: str, size: int, priority: str) -> None:
    """A gang of ``size`` 1-cpu pods, all needed (minMember = size)."""
    await api.podgroup(name, size, priority=priority)
    for i in range(size):
        await api.pod(f"{name}-{i}", cpu="1", group=name, priority=priority)


async def test_a_high_priority_gang_preempts_a_lower_one_whole_and_binds_once_it_is_gone(
    api: Api, start_scheduler: Any, conf_file: Any
) -> None:
    _, path = conf_file
    path.write_text(CONF)
    await api.priority_class("high", 1000)
    await api.priority_class("low", 1)
    await api.node("n1", cpu="2")
    await api.node("n2", cpu="2")
    await start_scheduler()

    sweep = [f"sweep-{i}" for i in range(3)]
    urgent = ["urgent-0", "urgent-1"]

    await job(api, "sweep", 3, "low")  # 3 of the 4 cpus
    await eventually(lambda: api.placed(*sweep))

    await job(api, "urgent", 2, "high")  # needs 2: one sweep pod would do, but it is a gang at its minimum
    seen_together: list[dict[str, str]] = []

    async def urgent_bound() -> bool:
        """Both urgent pods bound; in each look at the pods, one bound beside a victim not yet gone
        is noted."""
        nodes = await api.node_of()
        if any(nodes.get(n) for n in urgent) and set(sweep) & set(nodes):
            seen_together.append(nodes)
        return all(nodes.get(n) for n in urgent)

    await eventually(urgent_bound, timeout=15)
    left = {p["metadata"]["name"] for p in await api.pods()}
    assert not left & set(sweep), f"the victim gang was left partly running: {sorted(left & set(sweep))}"
    assert not seen_together, f"an urgent pod was bound before the victims were gone: {seen_together[0]}"

    async def urgent_running() -> bool:
        return (await api.read_podgroup("urgent")).get("status", {}).get("phase") == "Running"

    await eventually(urgent_running)

    # each victim, and its PodGroup, says why it went (Volcano's cache.go ``Evict`` Events)
    told = {("Pod", name): "Pod is evicted, because of gangpreempt" for name in sweep}
    told["PodGroup", "sweep"] = "gangpreempt"

    async def evict_events() -> bool:
        return await api.evict_events() == told

    await eventually(evict_events)
