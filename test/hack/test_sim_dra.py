"""caldera-sim does the resourceclaim controller's work (pkg/controller/resourceclaim/controller.go): claims
made from templates for pods, reservations dropped when a pod ends, claims deallocated and removed."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from typing import Any

from caldera.hack.sim import SimCluster
from caldera.hack.sim.dra import FINALIZER, POD_CLAIM_ANNOTATION, RESOURCE_CLAIMS, generate_name
from caldera.hack.sim.resources import PODS
from caldera.hack.sim.testing import pod_manifest

NS = "default"
GROUP = "resource.k8s.io"


async def until(check: Callable[[], Any], timeout: float = 3.0) -> Any:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        got = check()
        if got:
            return got
        assert loop.time() < deadline, "condition not reached in time"
        await asyncio.sleep(0.02)


def request(name: str = "gpu") -> dict[str, Any]:
    return {"name": name, "exactly": {"deviceClassName": "gpu.example.com"}}


def template(sim: SimCluster, name: str, labels: dict[str, str] | None = None) -> None:
    sim.create(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": name, "namespace": NS},
            "spec": {
                "metadata": {"labels": labels or {}, "annotations": {"team": "ml"}},
                "spec": {"devices": {"requests": [request()]}},
            },
        }
    )


def user_claim(sim: SimCluster, name: str) -> dict[str, Any]:
    return sim.create(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"devices": {"requests": [request()]}},
        }
    )


def gpu_pod(name: str, entry: dict[str, Any], **annotations: str) -> dict[str, Any]:
    body = pod_manifest(name, annotations=annotations or None, resourceClaims=[entry])
    body["spec"]["containers"][0]["resources"] = {"claims": [{"name": entry["name"]}]}
    return body


def claim(sim: SimCluster, name: str) -> dict[str, Any] | None:
    return sim.get("resourceclaims", name, NS, GROUP)


def allocate(sim: SimCluster, name: str, *pods: str, finalizer: bool = True) -> None:
    """What a scheduler does before binding: the finalizer, then allocation and reservation in one write."""
    if finalizer:
        sim.store.patch(
            RESOURCE_CLAIMS,
            NS,
            name,
            "application/merge-patch+json",
            {"metadata": {"finalizers": [FINALIZER]}},
        )
    consumers = []
    for p in pods:
        obj = sim.get("pods", p)
        assert obj is not None
        consumers.append({"resource": "pods", "name": p, "uid": obj["metadata"]["uid"]})
    results = [{"request": "gpu", "driver": "gpu.example.com", "pool": "node-0", "device": "gpu-0"}]
    status: dict[str, Any] = {"allocation": {"devices": {"results": results}}}
    if consumers:
        status["reservedFor"] = consumers
    sim.store.put_status(RESOURCE_CLAIMS, NS, name, status)


def bind(sim: SimCluster, pod: str, node: str = "node-0") -> None:
    sim.store.bind(NS, pod, {"metadata": {"name": pod}, "target": {"kind": "Node", "name": node}})


def reserved_for(sim: SimCluster, name: str) -> list[str]:
    obj = claim(sim, name)
    assert obj is not None
    return [r["name"] for r in (obj.get("status") or {}).get("reservedFor") or ()]


async def test_a_template_entry_gets_a_claim_named_and_owned_as_the_controller_makes_it() -> None:
    async with SimCluster(nodes=1, kubelet_delay=0.05, seed=1) as sim:
        template(sim, "one-gpu", labels={"app": "train"})
        sim.create(gpu_pod("train-0", {"name": "gpu", "resourceClaimTemplateName": "one-gpu"}))
        statuses = await until(
            lambda: (sim.get("pods", "train-0") or {}).get("status", {}).get("resourceClaimStatuses")
        )
        (status,) = statuses
        assert status["name"] == "gpu"
        made = claim(sim, status["resourceClaimName"])
        assert made is not None
        assert re.fullmatch(r"train-0-gpu-[a-z0-9]{5}", made["metadata"]["name"])
        assert made["metadata"]["generateName"] == "train-0-gpu-"
        pod = sim.get("pods", "train-0")
        assert pod is not None
        (owner,) = made["metadata"]["ownerReferences"]
        assert owner == {
            "apiVersion": "v1",
            "kind": "Pod",
            "name": "train-0",
            "uid": pod["metadata"]["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
        assert made["metadata"]["annotations"] == {"team": "ml", POD_CLAIM_ANNOTATION: "gpu"}
        assert made["metadata"]["labels"] == {"app": "train"}
        assert made["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] == "gpu.example.com"
        # Once recorded, nothing more is made for the pod, whatever else changes on it.
        sim.store.patch(
            PODS, NS, "train-0", "application/merge-patch+json", {"metadata": {"labels": {"x": "y"}}}
        )
        await asyncio.sleep(0.1)
        assert len(sim.objects("resourceclaims", NS, GROUP)) == 1


async def test_a_missing_template_is_an_event_and_the_claim_follows_the_template() -> None:
    async with SimCluster(nodes=1, kubelet_delay=0.05, seed=1) as sim:
        sim.create(gpu_pod("wait-0", {"name": "gpu", "resourceClaimTemplateName": "later"}))

        def warned() -> list[dict[str, Any]]:
            return [e for e in sim.objects("events", NS) if e.get("reason") == "FailedResourceClaimCreation"]

        (event,) = await until(warned)
        assert event["type"] == "Warning" and event["involvedObject"]["name"] == "wait-0"
        assert event["message"] == (
            'PodResourceClaim gpu: resource claim template "later": '
            'resourceclaimtemplates.resource.k8s.io "later" not found'
        )
        assert sim.objects("resourceclaims", NS, GROUP) == []
        template(sim, "later")
        await until(lambda: sim.objects("resourceclaims", NS, GROUP))
        await until(lambda: (sim.get("pods", "wait-0") or {}).get("status", {}).get("resourceClaimStatuses"))


def test_long_names_are_cut_in_proportion_to_fit_a_63_character_claim_name() -> None:
    pod_name, entry = "p" * 60, "c" * 30
    base = generate_name(pod_name, entry)
    assert len(base) <= 57 and len(base) + 5 <= 63
    kept_pod, kept_entry = base.split("-")
    # Both parts keep a share of their length; neither is dropped.
    assert 30 < len(kept_pod) < 60 and 10 < len(kept_entry) < 30
    assert generate_name("train-0", "gpu") == "train-0-gpu-"


async def test_a_finished_pod_releases_its_claim_which_is_deallocated_and_removed() -> None:
    async with SimCluster(nodes=1, kubelet_delay=0.05, seed=1) as sim:
        template(sim, "one-gpu")
        sim.create(
            gpu_pod(
                "job-0",
                {"name": "gpu", "resourceClaimTemplateName": "one-gpu"},
                **{"sim.caldera.io/run-seconds": "0.2"},
            )
        )
        statuses = await until(
            lambda: (sim.get("pods", "job-0") or {}).get("status", {}).get("resourceClaimStatuses")
        )
        name = statuses[0]["resourceClaimName"]
        allocate(sim, name, "job-0")
        bind(sim, "job-0")
        await until(lambda: (sim.get("pods", "job-0") or {}).get("status", {}).get("phase") == "Running")
        assert reserved_for(sim, name) == ["job-0"]
        await until(lambda: (sim.get("pods", "job-0") or {}).get("status", {}).get("phase") == "Succeeded")
        # Reservation dropped and allocation cleared (the finalizer allowed it), then the claim of a pod
        # that will not run again is deleted.
        await until(lambda: claim(sim, name) is None)
        assert sim.get("pods", "job-0") is not None, "the finished pod itself stays"


async def test_a_shared_claim_stays_allocated_while_one_of_its_pods_still_runs() -> None:
    async with SimCluster(nodes=1, kubelet_delay=0.05, seed=1) as sim:
        user_claim(sim, "shared")
        for p in ("a", "b"):
            sim.create(gpu_pod(p, {"name": "gpu", "resourceClaimName": "shared"}))
        allocate(sim, "shared", "a", "b")
        for p in ("a", "b"):
            bind(sim, p)
        sim.store.delete(PODS, NS, "a", {"gracePeriodSeconds": 0})
        await until(lambda: reserved_for(sim, "shared") == ["b"])
        obj = claim(sim, "shared")
        assert obj is not None and obj["status"]["allocation"], "b still uses the devices"
        sim.store.delete(PODS, NS, "b", {"gracePeriodSeconds": 0})
        await until(lambda: not reserved_for(sim, "shared"))
        obj = claim(sim, "shared")
        assert obj is not None, "a claim the user made is not the controller's to delete"
        assert "allocation" not in obj.get("status", {}) and FINALIZER not in (
            obj["metadata"].get("finalizers") or ()
        )


async def test_without_the_finalizer_an_unreserved_claim_keeps_its_allocation() -> None:
    """The controller deallocates only what an allocator protected with the finalizer (`syncClaim`)."""
    async with SimCluster(nodes=1, kubelet_delay=0.05, seed=1) as sim:
        user_claim(sim, "bare")
        sim.create(gpu_pod("p", {"name": "gpu", "resourceClaimName": "bare"}))
        allocate(sim, "bare", "p", finalizer=False)
        sim.store.delete(PODS, NS, "p", {"gracePeriodSeconds": 0})
        await until(lambda: not reserved_for(sim, "bare"))
        obj = claim(sim, "bare")
        assert obj is not None and obj["status"]["allocation"]


async def test_the_claim_of_a_deleted_pod_is_removed_even_while_allocated() -> None:
    async with SimCluster(nodes=1, kubelet_delay=0.05, seed=1) as sim:
        template(sim, "one-gpu")
        sim.create(gpu_pod("gone", {"name": "gpu", "resourceClaimTemplateName": "one-gpu"}))
        statuses = await until(
            lambda: (sim.get("pods", "gone") or {}).get("status", {}).get("resourceClaimStatuses")
        )
        name = statuses[0]["resourceClaimName"]
        allocate(sim, name, "gone")
        bind(sim, "gone")
        sim.store.delete(PODS, NS, "gone", {"gracePeriodSeconds": 0})
        # The garbage collector marks it deleted (the finalizer holds it), the controller drops the reservation,
        # the allocation and the finalizer, and it goes.
        await until(lambda: claim(sim, name) is None)


async def test_a_bound_pod_gets_an_allocated_claim_reserved() -> None:
    """`syncPod` reserves an allocated claim for a pod bound without a reservation (`reserveForPod`)."""
    async with SimCluster(nodes=1, kubelet_delay=0.05, seed=1) as sim:
        user_claim(sim, "late")
        sim.create(gpu_pod("p", {"name": "gpu", "resourceClaimName": "late"}))
        bind(sim, "p")
        await asyncio.sleep(0.05)
        assert reserved_for(sim, "late") == [], "nothing to reserve before it is allocated"
        allocate(sim, "late")
        await until(lambda: reserved_for(sim, "late") == ["p"])
        pod = sim.get("pods", "p")
        obj = claim(sim, "late")
        assert pod is not None and obj is not None
        assert obj["status"]["reservedFor"][0] == {
            "resource": "pods",
            "name": "p",
            "uid": pod["metadata"]["uid"],
        }


async def test_a_pod_recreated_under_the_same_name_does_not_inherit_the_reservation() -> None:
    async with SimCluster(nodes=1, kubelet_delay=0.05, seed=1) as sim:
        user_claim(sim, "c")
        sim.create(gpu_pod("p", {"name": "gpu", "resourceClaimName": "c"}))
        allocate(sim, "c", "p")
        old_uid = claim(sim, "c")["status"]["reservedFor"][0]["uid"]  # type: ignore[index]
        sim.store.delete(PODS, NS, "p", {"gracePeriodSeconds": 0})
        sim.create(gpu_pod("p", {"name": "gpu", "resourceClaimName": "c"}))
        await until(lambda: not reserved_for(sim, "c"))
        new = sim.get("pods", "p")
        assert new is not None and new["metadata"]["uid"] != old_uid
