"""The allocator's search is exhaustive and can take factorial time (every ordering of a node's devices
when no combination fits). Branches that cannot hold a solution are given up once the search is past a
few steps (the same first solution as the full search: the twin test), and what is left is bounded by
a count of steps, as kube-scheduler bounds it by a time (``filterTimeout``); the count, not the clock,
decides the answer."""

from __future__ import annotations

import random
from typing import Any

import pytest

from caldera.framework.dra import allocator as dra_allocator
from caldera.framework.dra.allocator import (
    PRUNE_AFTER,
    SEARCH_STEPS,
    TIMED_OUT,
    Allocator,
    DeviceLedger,
    Inventory,
)
from caldera.framework.dra.objects import ResourceClaim
from caldera.hack.scenario import convert, device_class, resource_claim, resource_slice

GPU = "gpu.example.com"
NUMA = f"{GPU}/numa"


def gpus(node: str, numa_of: list[int]) -> object:
    """A node's GPUs, ``gpu-i`` on NUMA node ``numa_of[i]``."""
    return resource_slice(node, GPU, {f"gpu-{i}": {"numa": {"int": n}} for i, n in enumerate(numa_of)})


def allocator(*slices: object, in_use: list[str] = ()) -> Allocator:  # type: ignore[assignment]
    ledger = DeviceLedger([(GPU, "n1", d) for d in in_use])
    return Allocator(Inventory(slices), {GPU: device_class(GPU)}, ledger)  # type: ignore[arg-type]


def one_device_each(name: str, requests: int, constraint: str = "matchAttribute") -> ResourceClaim:
    """A claim of ``requests`` requests of one GPU each, all on one NUMA node (``distinctAttribute``:
    each on a NUMA node of its own)."""
    attribute = {"match_attribute" if constraint == "matchAttribute" else "distinct_attribute": NUMA}
    return resource_claim(name, GPU, requests=requests, **attribute)  # type: ignore[no-any-return]


def test_nine_gpus_on_one_numa_node_asked_of_a_node_of_eight_fail_in_a_few_steps_naming_the_request() -> None:
    # The full search would try every ordering of the eight (109,601 steps) before giving up.
    claim = resource_claim("c", GPU, count=9, match_attribute=NUMA)
    outcome = allocator(gpus("n1", [0] * 8)).allocate([claim], "n1", {})
    assert outcome.allocations is None
    assert outcome.steps <= 2 * PRUNE_AFTER
    assert outcome.reason == (
        "no free device of class gpu.example.com for claim default/c request req: 8 devices, 0 allocated"
    )


def test_eight_on_one_numa_node_are_found_past_three_numa_nodes_that_lack_one() -> None:
    # Four NUMA nodes of eight, a GPU of each of the first three in use: the full search tries every
    # ordering of each of their seven before the fourth (about 15,000 steps).
    numa_of = [i // 8 for i in range(32)]
    claim = resource_claim("c", GPU, count=8, match_attribute=NUMA)
    outcome = allocator(gpus("n1", numa_of), in_use=["gpu-0", "gpu-8", "gpu-16"]).allocate([claim], "n1", {})
    assert outcome.allocations is not None
    assert [r.device for r in outcome.allocations[0].devices.results] == [f"gpu-{i}" for i in range(24, 32)]
    assert outcome.steps < 1000


def test_nine_requests_on_one_numa_node_asked_of_eight_plus_eight_fail_in_a_few_steps() -> None:
    # Each request on its own finds a GPU; together they need nine of one NUMA node.
    outcome = allocator(gpus("n1", [0] * 8 + [1] * 8)).allocate([one_device_each("c", 9)], "n1", {})
    assert outcome.allocations is None
    assert outcome.reason.endswith(
        "devices exist but not in a combination that satisfies the requests and constraints"
    )
    assert outcome.steps <= 3 * PRUNE_AFTER


def test_a_search_that_outlasts_its_steps_times_out_as_kube_schedulers_filter_does() -> None:
    # Nine requests of one GPU, each on a NUMA node of its own, sixteen GPUs two per NUMA node: the
    # counts see enough GPUs for every request, only the orderings tell that the ninth never gets one.
    claim = one_device_each("c", 9, "distinctAttribute")
    outcome = allocator(gpus("n1", [i // 2 for i in range(16)])).allocate([claim], "n1", {})
    assert (outcome.allocations, outcome.reason, outcome.steps) == (None, TIMED_OUT, SEARCH_STEPS)
    assert outcome.timed_out


def test_the_steps_decide_the_answer_not_the_clock() -> None:
    claim = one_device_each("c", 4)
    devices = gpus("n1", [0, 1, 1, 1, 1])  # the first GPU leads the search astray
    found = allocator(devices).allocate([claim], "n1", {})
    assert found.allocations is not None
    assert [r.device for r in found.allocations[0].devices.results] == ["gpu-1", "gpu-2", "gpu-3", "gpu-4"]
    for _ in range(3):
        short = allocator(devices).allocate([claim], "n1", {}, steps=found.steps - 1)
        assert (short.allocations, short.reason, short.steps) == (None, TIMED_OUT, found.steps - 1)
        again = allocator(devices).allocate([claim], "n1", {}, steps=found.steps)
        assert again.allocations == found.allocations


def _random_case(rng: random.Random) -> tuple[object, list[str], ResourceClaim]:
    numa_of = [rng.randrange(3) for _ in range(rng.randint(1, 7))]
    in_use = [f"gpu-{i}" for i in range(len(numa_of)) if rng.random() < 0.2]

    def exactly() -> dict[str, Any]:
        return {"deviceClassName": GPU, "count": rng.randint(1, 4), "allocationMode": "ExactCount"}

    requests: list[dict[str, Any]] = []
    names: list[str] = []
    for i in range(rng.randint(1, 3)):
        if rng.random() < 0.3:  # a prioritized list of two
            subs = [{"name": f"s{j}", **exactly()} for j in range(2)]
            requests.append({"name": f"r{i}", "firstAvailable": subs})
            names += [f"r{i}", f"r{i}/s{rng.randrange(2)}"]
        else:
            requests.append({"name": f"r{i}", "exactly": exactly()})
            names.append(f"r{i}")
    constraints: list[dict[str, Any]] = []
    for kind in ("matchAttribute", "distinctAttribute"):
        if rng.random() < (0.8 if kind == "matchAttribute" else 0.2):
            named = sorted({n for n in names if rng.random() < 0.6})
            constraints.append({kind: NUMA, **({"requests": named} if named else {})})
    claim = convert(
        ResourceClaim,
        {
            "metadata": {"name": "c", "namespace": "default", "uid": "rc-c"},
            "spec": {"devices": {"requests": requests, "constraints": constraints}},
        },
    )
    return gpus("n1", numa_of), in_use, claim  # type: ignore[return-value]


@pytest.mark.parametrize("seed", range(30))
def test_giving_up_branches_finds_what_the_full_search_finds(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(seed)
    for _ in range(20):
        devices, in_use, claim = _random_case(rng)
        monkeypatch.setattr(dra_allocator, "PRUNE_AFTER", 10**9)
        full = allocator(devices, in_use=in_use).allocate([claim], "n1", {}, steps=10**9)
        monkeypatch.setattr(dra_allocator, "PRUNE_AFTER", 0)
        pruned = allocator(devices, in_use=in_use).allocate([claim], "n1", {}, steps=10**9)
        assert (pruned.allocations, pruned.reason) == (full.allocations, full.reason)
        assert pruned.steps <= full.steps


def test_a_time_bound_stops_the_search_as_kube_schedulers_filter_timeout_does() -> None:
    # (Volcano's dynamicresources.filterTimeoutSeconds; the clock is read every 256 steps)
    claim = one_device_each("c", 9, "distinctAttribute")
    devices = gpus("n1", [i // 2 for i in range(16)])
    outcome = allocator(devices).allocate([claim], "n1", {}, steps=None, seconds=1e-9)
    assert (outcome.allocations, outcome.reason, outcome.steps) == (None, TIMED_OUT, 256)
    assert outcome.timed_out
