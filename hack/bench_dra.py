"""``caldera-sim bench core --dra``: gangs whose pods each claim one device (DRA), in process, against
the same gangs without claims: scheduler CPU per placed pod of one session (snapshot to result)."""

from __future__ import annotations

import time

from caldera.cache.store import ClusterCache
from caldera.hack.scenario import (
    claim_pod_spec,
    device_class,
    load,
    node,
    pod,
    podgroup,
    resource_claim,
    resource_slice,
    run_session,
)

GPU = "gpu.example.com"
DEVICES_PER_NODE = 8


def _cache(nodes: int, gangs: int, size: int, claims: bool) -> ClusterCache:
    cache = ClusterCache()
    dra: list[object] = []
    if claims:
        dra = [device_class(GPU)]
        dra += [
            resource_slice(f"n{i}", GPU, [f"gpu-{d}" for d in range(DEVICES_PER_NODE)]) for i in range(nodes)
        ]
    pods = []
    for g in range(gangs):
        for i in range(size):
            spec = claim_pod_spec(f"g{g}-c{i}") if claims else None
            pods.append(pod(f"g{g}-{i}", group=f"g{g}", spec_extra=spec))
            if claims:
                dra.append(resource_claim(f"g{g}-c{i}", GPU))
    return load(
        cache,
        nodes=[node(f"n{i}", cpu="64", memory="256Gi") for i in range(nodes)],
        podgroups=[podgroup(f"g{g}", min_member=size) for g in range(gangs)],
        pods=pods,
        dra=dra,
    )


def _per_pod(nodes: int, gangs: int, size: int, claims: bool, repeat: int) -> tuple[float, int]:
    best = float("inf")
    placed = 0
    for _ in range(repeat):
        snap = _cache(nodes, gangs, size, claims).snapshot()
        started = time.process_time()
        _, result = run_session(snap)
        spent = time.process_time() - started
        placed = len(result.placements)
        best = min(best, spent / max(placed, 1))
    return best, placed


def run_dra(nodes: int, gangs: int, size: int, repeat: int = 3) -> None:
    run_session(_cache(2, 1, 2, True).snapshot())  # imports and first-use costs out of the figures
    print(
        f"DRA: {nodes} nodes with {DEVICES_PER_NODE} devices each, {gangs} gangs of {size}, each pod claiming"
        f" one device; one session in process, best of {repeat}"
    )
    with_claims, placed = _per_pod(nodes, gangs, size, True, repeat)
    without, placed_plain = _per_pod(nodes, gangs, size, False, repeat)
    print(f"  with claims:    {placed} pods placed, {with_claims * 1000:.3f} ms CPU per placed pod")
    print(f"  without claims: {placed_plain} pods placed, {without * 1000:.3f} ms CPU per placed pod")
    print(f"  with / without: {with_claims / max(without, 1e-12):.2f}x")
