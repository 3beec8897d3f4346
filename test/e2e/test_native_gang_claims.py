"""A native PodGroup's own ResourceClaims end to end (KEP-5729), against caldera-sim serving
``scheduling.k8s.io/v1alpha2`` and ``resource.k8s.io/v1``: a group-level claim is allocated once and
shared by the gang, reserved for the PodGroup; one made from a template by the resourceclaim
controller for the group likewise; a gang whose group claim cannot be satisfied binds nothing, with
the reason in ``/debug/jobs``; deleting the PodGroup releases its claim; the simulator validates a
PodGroup's ``resourceClaims`` and ``disruptionMode`` as types.go declares them."""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest

from caldera.cache.client import ApiError

from .conftest import SCHEDULER, Api, eventually
from .test_dra import RESOURCE, claim, claim_spec, device_class, devices, gpus, read_claim

pytestmark = pytest.mark.e2e
NATIVE_GANG_API = True
V1A2 = "/apis/scheduling.k8s.io/v1alpha2"
FINALIZER = "resource.kubernetes.io/delete-protection"


async def group(api: Api, name: str, min_count: int, claims: list[dict[str, str]]) -> dict[str, Any]:
    return await api.create(
        f"{V1A2}/namespaces/{api.ns}/podgroups",
        {
            "apiVersion": "scheduling.k8s.io/v1alpha2",
            "kind": "PodGroup",
            "metadata": {"name": name},
            "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}, "resourceClaims": claims},
        },
    )


async def member(api: Api, name: str, group_name: str, entry: dict[str, str]) -> None:
    """A pod of the group whose ``spec.resourceClaims`` entry equals the group's ``entry``."""
    await api.create(
        f"/api/v1/namespaces/{api.ns}/pods",
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": api.ns},
            "spec": {
                "schedulerName": SCHEDULER,
                "schedulingGroup": {"podGroupName": group_name},
                "resourceClaims": [entry],
                "containers": [
                    {
                        "name": "main",
                        "image": "busybox",
                        "resources": {
                            "requests": {"cpu": "1", "memory": "64Mi"},
                            "claims": [{"name": entry["name"]}],
                        },
                    }
                ],
            },
        },
    )


async def bound(api: Api, n: int) -> dict[str, str] | None:
    nodes = await api.node_of()
    return nodes if len(nodes) == n and all(nodes.values()) else None


async def test_a_group_level_claim_is_allocated_once_and_shared(api: Api, start_scheduler: Any) -> None:
    await api.node("n1", cpu="8")
    await api.node("n2", cpu="8")
    await device_class(api)
    await gpus(api, "n2", 1)  # one GPU: three pods with a claim each could not all run
    await claim(api, "fabric")
    entry = {"name": "fabric", "resourceClaimName": "fabric"}
    pg = await group(api, "train", 3, [entry])
    for i in range(3):
        await member(api, f"train-{i}", "train", entry)
    await start_scheduler()
    nodes = await eventually(lambda: bound(api, 3), timeout=15)
    assert set(nodes.values()) == {"n2"}
    shared = await read_claim(api, "fabric")
    assert devices(shared) == [("n2", "gpu-0")]
    assert shared["status"]["reservedFor"] == [
        {
            "apiGroup": "scheduling.k8s.io",
            "resource": "podgroups",
            "name": "train",
            "uid": pg["metadata"]["uid"],
        }
    ]
    assert FINALIZER in shared["metadata"]["finalizers"]


async def test_a_claim_made_from_a_template_for_the_group_is_shared(api: Api, start_scheduler: Any) -> None:
    await api.node("n1", cpu="8")
    await device_class(api)
    await gpus(api, "n1", 2)
    await api.create(
        f"{RESOURCE}/namespaces/{api.ns}/resourceclaimtemplates",
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": "fabric-template"},
            "spec": {"spec": claim_spec()},
        },
    )
    entry = {"name": "fabric", "resourceClaimTemplateName": "fabric-template"}
    pg = await group(api, "train", 2, [entry])
    for i in range(2):
        await member(api, f"train-{i}", "train", entry)
    await start_scheduler()
    await eventually(lambda: bound(api, 2), timeout=15)
    made = await api.items(f"{RESOURCE}/namespaces/{api.ns}/resourceclaims")
    (generated,) = made  # one claim for the group, none per pod
    owner = generated["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["uid"]) == ("PodGroup", pg["metadata"]["uid"])
    assert len(devices(generated)) == 1
    assert [r["resource"] for r in generated["status"]["reservedFor"]] == ["podgroups"]
    status = (await api.get(f"{V1A2}/namespaces/{api.ns}/podgroups/train"))["status"]
    assert status["resourceClaimStatuses"] == [
        {"name": "fabric", "resourceClaimName": generated["metadata"]["name"]}
    ]


async def test_a_gang_whose_group_claim_cannot_be_satisfied_binds_nothing_and_says_why(
    api: Api, start_scheduler: Any
) -> None:
    await api.node("n1", cpu="8")
    await device_class(api)
    await gpus(api, "n1", 1)
    await api.create(
        f"{RESOURCE}/namespaces/{api.ns}/resourceclaims",
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": "two-gpus"},
            "spec": {
                "devices": {
                    "requests": [
                        {"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com", "count": 2}}
                    ]
                }
            },
        },
    )
    entry = {"name": "fabric", "resourceClaimName": "two-gpus"}
    await group(api, "train", 2, [entry])
    for i in range(2):
        await member(api, f"train-{i}", "train", entry)
    running = await start_scheduler()
    server = f"http://127.0.0.1:{running.app.http.port}"  # type: ignore[union-attr]

    async def explained() -> dict[str, Any] | None:
        async with aiohttp.ClientSession() as http, http.get(f"{server}/debug/jobs") as resp:
            listing = await resp.json()
        rows = [j for j in listing["jobs"] if j["name"] == "train" and j.get("native")]
        return rows[0] if rows and "two-gpus" in rows[0].get("reason", "") else None

    row = await eventually(explained, timeout=15)
    assert "no free device" in row["reason"]
    assert not any((await api.node_of()).values())
    assert "allocation" not in ((await read_claim(api, "two-gpus")).get("status") or {})


async def test_deleting_the_podgroup_releases_its_claim(api: Api, start_scheduler: Any) -> None:
    await api.node("n1", cpu="8")
    await device_class(api)
    await gpus(api, "n1", 1)
    await claim(api, "fabric")
    entry = {"name": "fabric", "resourceClaimName": "fabric"}
    await group(api, "train", 1, [entry])
    await member(api, "train-0", "train", entry)
    await start_scheduler()
    await eventually(lambda: bound(api, 1), timeout=15)
    assert devices(await read_claim(api, "fabric")) == [("n1", "gpu-0")]
    # the pod is gone but the group stays: the claim is still the group's
    await api.delete(f"/api/v1/namespaces/{api.ns}/pods/train-0", {"gracePeriodSeconds": 0})
    await api.delete(f"{V1A2}/namespaces/{api.ns}/podgroups/train")

    async def released() -> dict[str, Any] | None:
        c = await read_claim(api, "fabric")
        return c if not (c.get("status") or {}).get("allocation") else None

    c = await eventually(released, timeout=15)
    assert FINALIZER not in (c["metadata"].get("finalizers") or [])


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"disruptionMode": "Everything"}, "spec.disruptionMode"),
        (
            {"resourceClaims": [{"name": "c", "resourceClaimName": "a", "resourceClaimTemplateName": "t"}]},
            "spec.resourceClaims[0]",
        ),
        (
            {"resourceClaims": [{"name": "Not_A_Label", "resourceClaimName": "a"}]},
            "spec.resourceClaims[0].name",
        ),
    ],
)
async def test_the_sim_validates_a_podgroups_claims_and_disruption_mode(
    api: Api, spec: dict[str, Any], field: str
) -> None:
    body = {"metadata": {"name": "bad"}, "spec": {"schedulingPolicy": {"gang": {"minCount": 1}}, **spec}}
    with pytest.raises(ApiError) as exc:
        await api.create(f"{V1A2}/namespaces/{api.ns}/podgroups", body)
    assert exc.value.code == 422 and field in str(exc.value)
