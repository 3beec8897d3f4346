"""The DRA part with its counting fast path (framework/dra/freeindex.py: node-local answers shared by
claim shape) decides as it does with the full allocator alone: random small clusters of gangs whose pods
claim devices (one or two devices, a request selector, a claim shared by two pods, two claims, a claim
already allocated), one session each way; same pods on the same nodes with the same devices, same reasons
for those left pending."""

from __future__ import annotations

import random
from typing import Any

import msgspec
import pytest

from caldera.hack.scenario import (
    claim_pod_spec,
    cluster,
    device_class,
    node,
    pod,
    podgroup,
    resource_claim,
    resource_slice,
    run_session,
)
from caldera.plugins import dra as dra_part

GPU = "gpu.example.com"


def _world(seed: int) -> Any:
    rng = random.Random(seed)
    nodes = [node(f"n{i}", cpu="16", memory="64Gi") for i in range(rng.randint(2, 6))]
    dra: list[Any] = [device_class(GPU)]
    for n in nodes:
        name = n.metadata.name
        devices = {
            f"gpu-{d}": {"model": {"string": rng.choice(["a100", "h100"])}} for d in range(rng.randint(0, 4))
        }
        if devices:
            dra.append(resource_slice(name, GPU, devices))
    pods: list[Any] = []
    podgroups = []
    claim = 0
    for g in range(rng.randint(1, 6)):
        size = rng.randint(1, 4)
        podgroups.append(podgroup(f"g{g}", min_member=size))
        shared = ""
        for i in range(size):
            kind = rng.random()
            names = []
            if kind < 0.1 and shared:
                names = [shared]  # the claim of the gang's first pod, shared
            else:
                for _ in range(2 if kind > 0.9 else 1):
                    claim += 1
                    c = f"c{claim}"
                    names.append(c)
                    roll = rng.random()
                    selector = 'device.attributes["gpu.example.com"].model == "h100"' if roll < 0.2 else ""
                    dra.append(resource_claim(c, GPU, count=2 if roll > 0.85 else 1, selector=selector))
                shared = shared or names[0]
            pods.append(pod(f"g{g}-{i}", group=f"g{g}", cpu="1", spec_extra=claim_pod_spec(*names)))
    return cluster(nodes=nodes, pods=pods, podgroups=podgroups, dra=dra)


def _decisions(result: Any) -> dict[str, Any]:
    return {p.task.name: (p.node, msgspec.to_builtins(list(p.claims or ()))) for p in result.placements}


@pytest.mark.parametrize("seed", range(30))
def test_the_counts_decide_as_the_full_allocator(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    ssn, fast = run_session(_world(seed))
    fast_reasons = {k: j.job_fit_error for k, j in ssn.jobs.items()}
    with monkeypatch.context() as m:
        m.setattr(dra_part, "simple_shape", lambda *args: None)
        ssn_full, full = run_session(_world(seed))
        full_reasons = {k: j.job_fit_error for k, j in ssn_full.jobs.items()}
    assert _decisions(fast) == _decisions(full)
    assert fast_reasons == full_reasons


def test_the_twin_runs_the_fast_path() -> None:
    """(the twins compare something: the counts answer for claims of these worlds)"""
    ssn, result = run_session(_world(0))
    part = next(iter(_parts(ssn)))
    assert any(index is not None for index in part._indexes.values())
    assert result.placements


def _parts(ssn: Any) -> list[Any]:
    return [
        value
        for plugin in ssn.plugins.values()
        for value in vars(plugin).values()
        if isinstance(value, dra_part.DraPart)
    ]
