"""Kubernetes' own gang API end to end: caldera-sim serving ``scheduling.k8s.io/v1alpha2`` (as a
1.36 server with GenericWorkload on), pods joining PodGroups through ``spec.schedulingGroup``."""

from __future__ import annotations

from typing import Any

import pytest

from caldera.cache.client import ApiError

from .conftest import SCHEDULER, Api, eventually, needs_sim

pytestmark = pytest.mark.e2e
#: the sim fixture serves scheduling.k8s.io/v1alpha2 for this module
NATIVE_GANG_API = True
ZONE = "topology.kubernetes.io/zone"
V1A2 = "/apis/scheduling.k8s.io/v1alpha2"


async def native_group(api: Api, name: str, min_count: int, topology_key: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {"schedulingPolicy": {"gang": {"minCount": min_count}}}
    if topology_key:
        spec["schedulingConstraints"] = {"topology": [{"key": topology_key}]}
    return await api.create(
        f"{V1A2}/namespaces/{api.ns}/podgroups",
        {
            "apiVersion": "scheduling.k8s.io/v1alpha2",
            "kind": "PodGroup",
            "metadata": {"name": name},
            "spec": spec,
        },
    )


async def member(api: Api, name: str, group: str, cpu: str = "1") -> dict[str, Any]:
    return await api.create(
        f"/api/v1/namespaces/{api.ns}/pods",
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": api.ns},
            "spec": {
                "schedulerName": SCHEDULER,
                "schedulingGroup": {"podGroupName": group},
                "containers": [
                    {
                        "name": "main",
                        "image": "busybox",
                        "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}},
                    }
                ],
            },
        },
    )


async def zone_node(api: Api, name: str, zone: str, cpu: str) -> None:
    cap = {"cpu": cpu, "memory": "16Gi", "pods": "110"}
    api.created_nodes.append(name)
    await api.create(
        "/api/v1/nodes",
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, ZONE: zone}},
            "status": {
                "capacity": cap,
                "allocatable": cap,
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        },
    )


async def scheduled_condition(api: Api, name: str) -> dict[str, Any] | None:
    pg = await api.get(f"{V1A2}/namespaces/{api.ns}/podgroups/{name}")
    return next(
        (c for c in pg.get("status", {}).get("conditions", []) if c["type"] == "PodGroupScheduled"), None
    )


async def test_a_native_gang_of_four_binds_whole_or_not_at_all(sim, api, start_scheduler) -> None:  # type: ignore[no-untyped-def]
    await api.node("n1", cpu="2")
    await api.node("n2", cpu="1")
    await native_group(api, "train", min_count=4)
    for i in range(4):
        await member(api, f"train-{i}", "train")
    await start_scheduler()

    async def unschedulable() -> dict[str, Any] | None:
        cond = await scheduled_condition(api, "train")
        return cond if cond and cond["status"] == "False" else None

    cond = await eventually(unschedulable)
    assert cond["reason"] == "Unschedulable" and cond["message"]
    assert not any((await api.node_of()).values()), "no pod of a gang that cannot fit whole is bound"
    events = [e for e in await api.events() if e["involvedObject"]["kind"] == "PodGroup"]
    assert any(
        e["reason"] == "FailedScheduling"
        and e["involvedObject"]["apiVersion"] == "scheduling.k8s.io/v1alpha2"
        for e in events
    )
    # room for the whole gang: it binds, all four, and the condition turns True
    await api.node("n3", cpu="2")
    await eventually(lambda: _all_bound(api, 4), timeout=15)

    async def scheduled() -> dict[str, Any] | None:
        cond = await scheduled_condition(api, "train")
        return cond if cond and cond["status"] == "True" else None

    assert (await eventually(scheduled))["reason"] == "Scheduled"


async def _all_bound(api: Api, n: int) -> bool:
    nodes = await api.node_of()
    return len(nodes) == n and all(nodes.values())


async def test_min_count_two_of_four_binds_at_least_two(sim, api, start_scheduler) -> None:  # type: ignore[no-untyped-def]
    await api.node("n1", cpu="3")
    await native_group(api, "half", min_count=2)
    for i in range(4):
        await member(api, f"half-{i}", "half")
    await start_scheduler()

    async def three_bound() -> bool:
        return sum(1 for n in (await api.node_of()).values() if n) == 3

    await eventually(three_bound, timeout=15)


async def test_a_topology_key_keeps_the_gang_in_one_zone_though_another_is_emptier(  # type: ignore[no-untyped-def]
    sim, api, start_scheduler
) -> None:
    await zone_node(api, "a1", "a", cpu="2")
    await zone_node(api, "a2", "a", cpu="2")
    # b1 is the emptiest node, but zone b cannot hold the whole gang: without the key the gang
    # would spread into it
    await zone_node(api, "b1", "b", cpu="3")
    await native_group(api, "zoned", min_count=4, topology_key=ZONE)
    for i in range(4):
        await member(api, f"zoned-{i}", "zoned")
    await start_scheduler()
    await eventually(lambda: _all_bound(api, 4), timeout=15)
    assert set((await api.node_of()).values()) == {"a1", "a2"}


async def test_a_pod_created_before_its_group_waits_then_binds(sim, api, start_scheduler) -> None:  # type: ignore[no-untyped-def]
    await api.node("n1", cpu="4")
    for i in range(2):
        await member(api, f"early-{i}", "later")  # the server accepts a group that does not exist yet
    await start_scheduler()

    async def waiting_reported() -> bool:
        return any(
            e["reason"] == "FailedScheduling" and "later" in e.get("message", "") for e in await api.events()
        )

    await eventually(waiting_reported, timeout=15)
    assert not any((await api.node_of()).values())
    await native_group(api, "later", min_count=2)
    await eventually(lambda: _all_bound(api, 2), timeout=15)


async def test_the_sim_validates_as_the_real_server(sim, api) -> None:  # type: ignore[no-untyped-def]
    await member(api, "p", "g")
    with pytest.raises(ApiError) as exc:  # spec.schedulingGroup is immutable
        await api.client.request(
            "PATCH",
            f"/api/v1/namespaces/{api.ns}/pods/p",
            body={"spec": {"schedulingGroup": {"podGroupName": "other"}}},
            content_type="application/merge-patch+json",
        )
    assert exc.value.code == 422
    with pytest.raises(ApiError) as exc:  # exactly one policy
        await api.create(
            f"{V1A2}/namespaces/{api.ns}/podgroups",
            {
                "metadata": {"name": "both"},
                "spec": {"schedulingPolicy": {"basic": {}, "gang": {"minCount": 2}}},
            },
        )
    assert exc.value.code == 422


async def test_the_sim_defaults_and_freezes_a_podgroups_spec_as_the_real_server(sim, api) -> None:  # type: ignore[no-untyped-def]
    needs_sim(sim)
    created = await api.create(
        f"{V1A2}/namespaces/{api.ns}/podgroups",
        {
            "metadata": {"name": "g"},
            "spec": {
                "schedulingPolicy": {"gang": {"minCount": 2}},
                "resourceClaims": [{"name": "fabric", "resourceClaimName": "shared"}],
            },
        },
    )
    assert created["spec"]["disruptionMode"] == "Pod", 'types.go: +default="Pod"'
    path = f"{V1A2}/namespaces/{api.ns}/podgroups/g"
    for change in (
        {"resourceClaims": [{"name": "fabric", "resourceClaimName": "other"}]},
        {"resourceClaims": None},
        {"disruptionMode": "PodGroup"},
        {"schedulingPolicy": {"gang": {"minCount": 3}}},
    ):
        with pytest.raises(ApiError) as exc:
            await api.client.request(
                "PATCH", path, body={"spec": change}, content_type="application/merge-patch+json"
            )
        assert exc.value.code == 422
        (field,) = change
        assert (
            f"spec.{field}: Invalid value" in exc.value.message and "field is immutable" in exc.value.message
        )
    # labels stay mutable, and an update that leaves disruptionMode out keeps the default
    await api.client.request(
        "PATCH", path, body={"metadata": {"labels": {"a": "b"}}}, content_type="application/merge-patch+json"
    )
    current = await api.get(path)
    del current["spec"]["disruptionMode"]
    await api.client.request("PUT", path, body=current)
    assert (await api.get(path))["spec"]["disruptionMode"] == "Pod"


async def test_a_workloads_templates_are_immutable(sim, api) -> None:  # type: ignore[no-untyped-def]
    needs_sim(sim)
    template = {"name": "workers", "schedulingPolicy": {"gang": {"minCount": 2}}}
    await api.create(
        f"{V1A2}/namespaces/{api.ns}/workloads",
        {"metadata": {"name": "w"}, "spec": {"podGroupTemplates": [template]}},
    )
    with pytest.raises(ApiError) as exc:
        await api.client.request(
            "PATCH",
            f"{V1A2}/namespaces/{api.ns}/workloads/w",
            body={"spec": {"podGroupTemplates": [{**template, "schedulingPolicy": {"basic": {}}}]}},
            content_type="application/merge-patch+json",
        )
    assert exc.value.code == 422 and "spec.podGroupTemplates" in exc.value.message


async def test_a_podgroup_in_use_is_deleted_only_once_its_pods_are_done(sim, api) -> None:  # type: ignore[no-untyped-def]
    # kube-controller-manager's podgroupprotection: the finalizer while a pod not yet finished names
    # the group; a deleted group stays (deletionTimestamp set) until then
    needs_sim(sim)
    path = f"{V1A2}/namespaces/{api.ns}/podgroups/g"
    await native_group(api, "g", min_count=1)
    await member(api, "p", "g")

    async def protected() -> bool:
        return "scheduling.k8s.io/podgroup-protection" in (
            (await api.get(path))["metadata"].get("finalizers") or ()
        )

    await eventually(protected, timeout=5)
    await api.delete(path)
    assert (await api.get(path))["metadata"].get("deletionTimestamp"), "kept while its pod may run"
    await api.delete(f"/api/v1/namespaces/{api.ns}/pods/p", {"gracePeriodSeconds": 0})

    async def gone() -> bool:
        try:
            await api.get(path)
        except ApiError as exc:
            return exc.code == 404
        return False

    await eventually(gone, timeout=5)
