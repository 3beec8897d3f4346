"""The resource-strategy-fit plugin end to end: GPUs packed, CPU spread, as the conf says per resource.

Volcano's rule (pkg/scheduler/plugins/resource-strategy-fit/, ``Score``): over the resources a pod
requests that have a setting, MostAllocated scores (used + request) / allocatable and LeastAllocated
(allocatable - used - request) / allocatable, times the resource's weight, over the sum of weights,
times 100 and ``resourceStrategyFitWeight``. Here ``nvidia.com/gpu`` is MostAllocated (pack GPU pods
so that whole GPU nodes stay free) and cpu LeastAllocated (spread CPU-bound pods); memory has no
setting and does not count."""

from __future__ import annotations

from typing import Any

import pytest

from .conftest import Api, eventually

pytestmark = pytest.mark.e2e

CONF = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: resource-strategy-fit
    arguments:
      resourceStrategyFitWeight: 10
      resources:
        nvidia.com/gpu:
          type: MostAllocated
          weight: 2
        cpu:
          type: LeastAllocated
          weight: 1
"""
GPU = "nvidia.com/gpu"


async def test_gpu_pods_are_packed_so_a_whole_node_stays_free_and_cpu_pods_spread(
    api: Api, start_scheduler: Any, conf_file: Any
) -> None:
    _, path = conf_file
    path.write_text(CONF)
    for name in ("gpu-1", "gpu-2"):
        await api.node(name, cpu="16", memory="64Gi", extended={GPU: "4"})
    await start_scheduler()

    # three 1-GPU pods, one after the other: each goes where the GPUs are most allocated already
    for i in range(3):
        await api.podgroup(f"infer-{i}", 1)
        await api.pod(f"infer-{i}", cpu="1", group=f"infer-{i}", extended={GPU: "1"})
        await eventually(lambda: api.placed(f"infer-{i}"))  # noqa: B023 (awaited here)
    nodes = await api.placed("infer-0", "infer-1", "infer-2")
    assert len(set(nodes.values())) == 1, f"the GPU pods were spread: {nodes}"
    packed = nodes["infer-0"]
    free = "gpu-2" if packed == "gpu-1" else "gpu-1"

    # so a trainer asking for a whole node's 4 GPUs finds one
    await api.podgroup("trainer", 1)
    await api.pod("trainer", cpu="1", group="trainer", extended={GPU: "4"})
    assert await eventually(lambda: api.placed("trainer")) == {"trainer": free}

    # CPU-bound pods (6 cpu each) are spread: the first to the node with less cpu in use (the
    # trainer's, 1 of 16, against 3 of 16), the second to the other (then 7 against 3)
    for i in range(2):
        await api.podgroup(f"web-{i}", 1)
        await api.pod(f"web-{i}", cpu="6", group=f"web-{i}")
        await eventually(lambda: api.placed(f"web-{i}"))  # noqa: B023 (awaited here)
    assert await api.placed("web-0", "web-1") == {"web-0": free, "web-1": packed}
