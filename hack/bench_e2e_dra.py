"""`caldera-sim bench e2e --dra`: the DRA objects of the end-to-end benchmark (hack/bench_e2e.py).

Every node publishes one ResourceSlice of ``DEVICES_PER_NODE`` GPUs (driver ``gpu.example.com``, a
pool per node, as a node-local DRA driver does); one DeviceClass selects them by CEL (the manifests are
hack/workload/manifests.py's); each pod names
the ResourceClaimTemplate ``one-gpu`` (one device of that class) in ``spec.resourceClaims``, so
caldera-sim's resourceclaim controller (hack/sim/dra.py) creates a claim per pod and names it in the
pod's ``status.resourceClaimStatuses``, and the scheduler allocates and reserves it before the binding.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from caldera.hack.workload.client import Api
from caldera.hack.workload.manifests import (
    claim_template_manifest,
    device_class_manifest,
    resource_slice_manifest,
)

if TYPE_CHECKING:
    from caldera.hack.bench_e2e import E2EResult

GPU = "gpu.example.com"
DEVICES_PER_NODE = 8
TEMPLATE = "one-gpu"
RESOURCE = "/apis/resource.k8s.io/v1"
#: the scheduler's counter of the binder's ResourceClaim writes (metrics/scheduler.py CLAIM_WRITES)
CLAIM_WRITES = "caldera_resourceclaim_writes"


def claiming(pod: dict[str, Any]) -> dict[str, Any]:
    """The pod (a manifest) claiming one device through the template; its container uses the claim."""
    spec = pod["spec"]
    spec["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": TEMPLATE}]
    for container in spec["containers"]:
        container.setdefault("resources", {})["claims"] = [{"name": "gpu"}]
    return pod


async def create_objects(api: Api, namespace: str) -> int:
    """The DeviceClass, a ResourceSlice per node of the cluster, and the claim template; returns the
    number of devices published."""
    await api.create(f"{RESOURCE}/deviceclasses", device_class_manifest(GPU, GPU))
    nodes, _ = await api.list("/api/v1/nodes")
    await asyncio.gather(
        *(
            api.create(
                f"{RESOURCE}/resourceslices",
                resource_slice_manifest(n["metadata"]["name"], GPU, DEVICES_PER_NODE),
            )
            for n in nodes
        )
    )
    await api.create(
        f"{RESOURCE}/namespaces/{namespace}/resourceclaimtemplates",
        claim_template_manifest(TEMPLATE, namespace, GPU),
    )
    return len(nodes) * DEVICES_PER_NODE


def claim_writes(name: str, tags: dict[str, str], value: float, writes: dict[str, float]) -> bool:
    """Count a /metrics sample of the binder's claim writes into ``writes``; False when it is not one."""
    if name != CLAIM_WRITES:
        return False
    key = f"resourceclaim {tags.get('write', '?')}"
    writes[key] = writes.get(key, 0.0) + value
    return True


def comparison(with_claims: E2EResult, without: E2EResult) -> str:
    """The run with claims against the same run without: scheduler CPU and API writes per bound pod."""

    def writes(res: E2EResult) -> float:
        return sum(res.writes.values()) / max(1, res.bound)

    a, b = with_claims.cpu_ms_per_pod, without.cpu_ms_per_pod
    cpu = f"{a:.3f} / {b:.3f} ms = {a / b:.2f}x" if a is not None and b else "not measured"
    return (
        f"DRA [{with_claims.shape}]: scheduler CPU per bound pod with / without claims: {cpu};"
        f" API writes per bound pod {writes(with_claims):.2f} / {writes(without):.2f}"
    )
