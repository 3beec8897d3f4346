"""The cdp plugin end to end: an elastic job's pod that asked for a cooldown is not preempted while
it lasts; once it is over, the high-priority pod waiting for room takes it.

Volcano's rule (pkg/scheduler/plugins/cdp/cdp.go, ``filterVictimFn`` and ``podCooldownTime``): the
pod's ``volcano.sh/cooldown-time`` label (else annotation), a Go duration, counted from the moment its
``PodScheduled`` condition turned True; a Running pod inside it is no victim of preempt or reclaim.
cdp sits in the tier that decides victims, beside priority and gang (whose ``preemptableFn``, in
pkg/scheduler/plugins/gang/gang.go, takes only pods of a job above its minAvailable: the elastic job's
second pod)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from caldera.framework.objects import parse_timestamp

from .conftest import Api, eventually

pytestmark = pytest.mark.e2e

CONF = """
actions: "enqueue, allocate, preempt"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
  - name: cdp
- plugins:
  - name: predicates
  - name: proportion
  - name: nodeorder
"""
COOLDOWN = 5.0


async def test_a_pod_in_its_cooldown_is_not_preempted_until_the_cooldown_is_over(
    api: Api, start_scheduler: Any, conf_file: Any
) -> None:
    _, path = conf_file
    path.write_text(CONF)
    await api.priority_class("high", 1000)
    await api.priority_class("low", 1)
    await api.node("n1", cpu="2")
    await start_scheduler()

    # an elastic job: minMember 1 and two pods, so gang lets one of them go
    await api.podgroup("elastic", 1, priority="low")
    for i in range(2):
        await api.pod(
            f"elastic-{i}",
            cpu="1",
            group="elastic",
            priority="low",
            annotations={
                "volcano.sh/preemptable": "true",
                "volcano.sh/cooldown-time": f"{COOLDOWN:.0f}s",
            },
        )

    async def scheduled_at() -> dict[str, float]:
        """When each elastic pod's PodScheduled condition turned True, once both run."""
        out = {}
        for pod in await api.pods():
            status = pod.get("status", {})
            conditions = [c for c in status.get("conditions", []) if c["type"] == "PodScheduled"]
            if status.get("phase") == "Running" and conditions:
                out[pod["metadata"]["name"]] = parse_timestamp(conditions[0]["lastTransitionTime"])
        return out if len(out) == 2 else {}

    started = await eventually(scheduled_at)

    # the urgent pod needs one of the two cpus
    await api.podgroup("urgent", 1, priority="high")
    await api.pod("urgent-0", cpu="1", group="urgent", priority="high")

    async def one_gone() -> tuple[str, float] | None:
        names = {p["metadata"]["name"] for p in await api.pods()}
        gone = set(started) - names
        return (gone.pop(), time.time()) if gone else None

    victim, at = await eventually(one_gone, timeout=COOLDOWN + 10)
    # (the condition's time is whole seconds, no later than the bind: the plugin counts from it too)
    assert at >= started[victim] + COOLDOWN, (
        f"{victim} preempted {at - started[victim]:.1f}s after it started"
    )

    async def urgent_node() -> str:
        return (await api.node_of()).get("urgent-0", "")

    assert await eventually(urgent_node) == "n1"
    # the elastic job keeps its minimum: its other pod runs on
    assert set(started) - {victim} <= {p["metadata"]["name"] for p in await api.pods()}

    async def evict_events() -> bool:
        return await api.evict_events() == {
            ("Pod", victim): "Pod is evicted, because of preempt",
            ("PodGroup", "elastic"): "preempt",
        }

    await eventually(evict_events)
