"""The allocator's search is exhaustive and can take factorial time (every ordering of a node's devices
when no combination fits); it is bounded by a count of steps, as kube-scheduler bounds it by a time
(``filterTimeout``), and the count, not the clock, decides the answer."""

from __future__ import annotations

from caldera.framework.dra.allocator import SEARCH_STEPS, TIMED_OUT, Allocator, DeviceLedger, Inventory
from caldera.hack.scenario import device_class, resource_claim, resource_slice

GPU = "gpu.example.com"
NUMA = f"{GPU}/numa"


def gpus(node: str, numa_of: list[int]) -> object:
    """A node's GPUs, ``gpu-i`` on NUMA node ``numa_of[i]``."""
    return resource_slice(node, GPU, {f"gpu-{i}": {"numa": {"int": n}} for i, n in enumerate(numa_of)})


def allocator(*slices: object) -> Allocator:
    return Allocator(Inventory(slices), {GPU: device_class(GPU)}, DeviceLedger())  # type: ignore[arg-type]


def test_nine_gpus_on_one_numa_node_asked_of_eight_fail_within_the_steps_naming_the_request() -> None:
    # Every ordering of the eight would be tried (109,601 steps) before the search gives up.
    claim = resource_claim("c", GPU, count=9, match_attribute=NUMA)
    outcome = allocator(gpus("n1", [0] * 8)).allocate([claim], "n1", {})
    assert outcome.allocations is None
    assert outcome.steps == SEARCH_STEPS
    assert outcome.reason == (
        "no free device of class gpu.example.com for claim default/c request req: 8 devices, 0 allocated"
    )


def test_a_search_that_outlasts_its_steps_times_out_as_kube_schedulers_filter_does() -> None:
    # Sixteen GPUs, eight per NUMA node: enough in all, never nine on one NUMA node.
    claim = resource_claim("c", GPU, count=9, match_attribute=NUMA)
    outcome = allocator(gpus("n1", [0] * 8 + [1] * 8)).allocate([claim], "n1", {})
    assert (outcome.allocations, outcome.reason, outcome.steps) == (None, TIMED_OUT, SEARCH_STEPS)


def test_the_steps_decide_the_answer_not_the_clock() -> None:
    claim = resource_claim("c", GPU, count=4, match_attribute=NUMA)
    devices = gpus("n1", [0, 1, 1, 1, 1])  # the first GPU leads the search astray
    found = allocator(devices).allocate([claim], "n1", {})
    assert found.allocations is not None
    assert [r.device for r in found.allocations[0].devices.results] == ["gpu-1", "gpu-2", "gpu-3", "gpu-4"]
    for _ in range(3):
        short = allocator(devices).allocate([claim], "n1", {}, steps=found.steps - 1)
        assert (short.allocations, short.reason, short.steps) == (None, TIMED_OUT, found.steps - 1)
        again = allocator(devices).allocate([claim], "n1", {}, steps=found.steps)
        assert again.allocations == found.allocations
