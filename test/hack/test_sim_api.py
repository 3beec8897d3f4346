"""The simulated API server answers kubernetes-asyncio the way a real kube-apiserver does."""

from __future__ import annotations

import json

import aiohttp
import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from caldera.hack.sim import SimCluster
from caldera.hack.sim.patch import merge_patch
from caldera.hack.sim.testing import pod_manifest


def status_of(exc: ApiException) -> dict:
    body = json.loads(exc.body)
    assert body["kind"] == "Status"
    assert body["code"] == exc.status
    return body


async def test_discovery_is_enough_for_clients(sim: SimCluster, api: client.ApiClient) -> None:
    version = await client.VersionApi(api).get_code()
    assert version.major == "1"
    groups = await client.ApisApi(api).get_api_versions()
    names = {g.name for g in groups.groups}
    assert {
        "apps",
        "scheduling.volcano.sh",
        "topology.volcano.sh",
        "coordination.k8s.io",
        "events.k8s.io",
    } <= names
    core_resources = await client.CoreV1Api(api).get_api_resources()
    by_name = {r.name: r for r in core_resources.resources}
    assert by_name["pods"].namespaced and not by_name["nodes"].namespaced
    assert {"pods/binding", "pods/status", "pods/eviction", "nodes/status"} <= set(by_name)
    volcano = await client.CustomObjectsApi(api).get_api_resources("scheduling.volcano.sh", "v1beta1")
    assert {r.name for r in volcano.resources} >= {"podgroups", "queues", "queues/status"}


async def test_requests_without_the_token_are_unauthorized(sim: SimCluster) -> None:
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{sim.url}/api/v1/pods") as resp:
            assert resp.status == 401
            assert (await resp.json())["reason"] == "Unauthorized"
        async with http.get(f"{sim.url}/api/v1/pods", headers={"Authorization": "Bearer wrong"}) as resp:
            assert resp.status == 401
        async with http.get(
            f"{sim.url}/api/v1/pods", headers={"Authorization": f"Bearer {sim.token}"}
        ) as resp:
            assert resp.status == 200


async def test_create_sets_identity_and_rejects_duplicates(core: client.CoreV1Api) -> None:
    first = await core.create_namespaced_pod("default", pod_manifest("a"))
    second = await core.create_namespaced_pod("default", pod_manifest("b"))
    assert first.metadata.uid and first.metadata.uid != second.metadata.uid
    assert first.metadata.creation_timestamp is not None
    assert int(second.metadata.resource_version) > int(first.metadata.resource_version)
    assert first.status.phase == "Pending"
    with pytest.raises(ApiException) as err:
        await core.create_namespaced_pod("default", pod_manifest("a"))
    assert err.value.status == 409
    assert status_of(err.value)["reason"] == "AlreadyExists"


async def test_resource_version_is_one_counter_across_kinds(core: client.CoreV1Api) -> None:
    pod = await core.create_namespaced_pod("default", pod_manifest("a"))
    cm = await core.create_namespaced_config_map("default", {"metadata": {"name": "c"}, "data": {"k": "v"}})
    node_list = await core.list_node()
    assert int(pod.metadata.resource_version) < int(cm.metadata.resource_version)
    assert int(node_list.metadata.resource_version) >= int(cm.metadata.resource_version)


async def test_generate_name_and_missing_namespace(core: client.CoreV1Api) -> None:
    pod = await core.create_namespaced_pod(
        "default", {**pod_manifest("x"), "metadata": {"generateName": "job-"}}
    )
    assert pod.metadata.name.startswith("job-") and len(pod.metadata.name) == len("job-") + 5
    with pytest.raises(ApiException) as err:
        await core.create_namespaced_pod("nowhere", pod_manifest("a"))
    assert err.value.status == 404
    assert status_of(err.value)["reason"] == "NotFound"


async def test_invalid_objects_get_422_with_causes(core: client.CoreV1Api, apps: client.AppsV1Api) -> None:
    with pytest.raises(ApiException) as err:
        await core.create_namespaced_pod(
            "default", {"metadata": {"name": "nope"}, "spec": {"containers": []}}
        )
    assert err.value.status == 422
    body = status_of(err.value)
    assert body["reason"] == "Invalid"
    assert body["details"]["causes"][0]["field"] == "spec.containers"
    with pytest.raises(ApiException) as err:
        await core.create_namespaced_pod("default", pod_manifest("Bad_Name"))
    assert err.value.status == 422
    deployment = {
        "metadata": {"name": "d"},
        "spec": {
            "selector": {"matchLabels": {"app": "x"}},
            "template": {"metadata": {"labels": {"app": "y"}}},
        },
    }
    with pytest.raises(ApiException) as err:
        await apps.create_namespaced_deployment("default", deployment)
    assert err.value.status == 422


async def test_get_missing_is_404_status(core: client.CoreV1Api) -> None:
    with pytest.raises(ApiException) as err:
        await core.read_namespaced_pod("ghost", "default")
    assert err.value.status == 404
    body = status_of(err.value)
    assert body["reason"] == "NotFound" and body["details"]["name"] == "ghost"
    assert body["message"] == 'pods "ghost" not found'


async def test_list_with_label_and_field_selectors(core: client.CoreV1Api, sim: SimCluster) -> None:
    await core.create_namespaced_pod("default", pod_manifest("a", labels={"app": "web", "tier": "front"}))
    await core.create_namespaced_pod(
        "default", pod_manifest("b", labels={"app": "web"}, scheduler_name="caldera")
    )
    await core.create_namespaced_pod(
        "kube-system", pod_manifest("c", labels={"app": "db"}, scheduler_name="caldera")
    )
    await core.create_namespaced_pod_binding(
        "a", "default", {"metadata": {"name": "a"}, "target": {"name": "node-0"}}, _preload_content=False
    )

    async def names(**kwargs: str) -> list[str]:
        pods = await core.list_pod_for_all_namespaces(**kwargs)
        return sorted(p.metadata.name for p in pods.items)

    assert await names(label_selector="app=web") == ["a", "b"]
    assert await names(label_selector="app in (web,db),tier!=front") == ["b", "c"]
    assert await names(label_selector="tier") == ["a"]
    assert await names(label_selector="!tier") == ["b", "c"]
    assert await names(field_selector="spec.schedulerName=caldera") == ["b", "c"]
    assert await names(field_selector="spec.nodeName=") == ["b", "c"]
    assert await names(field_selector="spec.nodeName=node-0") == ["a"]
    assert await names(field_selector="metadata.name=b") == ["b"]
    # "a" is bound, so the kubelet may have started it by now: its phase is Pending or Running, never Failed.
    assert await names(field_selector="status.phase!=Failed,spec.schedulerName!=caldera") == ["a"]
    assert await names(field_selector="status.phase=Failed") == []
    assert await names(label_selector="app=nothing") == []
    only_default = await core.list_namespaced_pod("default")
    assert sorted(p.metadata.name for p in only_default.items) == ["a", "b"]
    with pytest.raises(ApiException) as err:
        await core.list_pod_for_all_namespaces(field_selector="spec.unknown=x")
    assert err.value.status == 400


async def test_list_pagination_with_limit_and_continue(core: client.CoreV1Api) -> None:
    for i in range(7):
        await core.create_namespaced_config_map("default", {"metadata": {"name": f"cm-{i}"}})
    seen: list[str] = []
    token = None
    pages = 0
    while True:
        page = await core.list_namespaced_config_map("default", limit=3, _continue=token)
        pages += 1
        seen.extend(c.metadata.name for c in page.items)
        token = page.metadata._continue
        if not token:
            break
    assert pages == 3
    assert seen == sorted(f"cm-{i}" for i in range(7))


async def test_stale_update_conflicts(core: client.CoreV1Api) -> None:
    created = await core.create_namespaced_config_map(
        "default", {"metadata": {"name": "c"}, "data": {"v": "1"}}
    )
    created.data = {"v": "2"}
    updated = await core.replace_namespaced_config_map("c", "default", created)
    assert updated.data == {"v": "2"}
    assert updated.metadata.resource_version != created.metadata.resource_version
    created.data = {"v": "3"}  # still carries the old resourceVersion
    with pytest.raises(ApiException) as err:
        await core.replace_namespaced_config_map("c", "default", created)
    assert err.value.status == 409
    assert status_of(err.value)["reason"] == "Conflict"
    current = await core.read_namespaced_config_map("c", "default")
    assert current.data == {"v": "2"}


async def test_noop_update_keeps_resource_version(core: client.CoreV1Api) -> None:
    created = await core.create_namespaced_config_map(
        "default", {"metadata": {"name": "c"}, "data": {"v": "1"}}
    )
    again = await core.patch_namespaced_config_map("c", "default", {"data": {"v": "1"}})
    assert again.metadata.resource_version == created.metadata.resource_version


async def test_patch_kinds(core: client.CoreV1Api, sim: SimCluster) -> None:
    await core.create_namespaced_pod("default", pod_manifest("p", labels={"a": "1"}))
    # kubernetes-asyncio sends a dict as a strategic merge patch.
    patched = await core.patch_namespaced_pod("p", "default", {"metadata": {"labels": {"b": "2"}}})
    assert patched.metadata.labels == {"a": "1", "b": "2"}
    patched = await core.patch_namespaced_pod(
        "p", "default", [{"op": "add", "path": "/metadata/annotations", "value": {"x": "y"}}]
    )
    assert patched.metadata.annotations == {"x": "y"}
    patched = await core.patch_namespaced_pod(
        "p", "default", {"metadata": {"labels": {"a": None}}}, _content_type="application/merge-patch+json"
    )
    assert patched.metadata.labels == {"b": "2"}
    # Strategic merge merges conditions by type instead of replacing the list.
    await core.patch_namespaced_pod_status(
        "p", "default", {"status": {"conditions": [{"type": "A", "status": "True"}]}}
    )
    status = await core.patch_namespaced_pod_status(
        "p", "default", {"status": {"conditions": [{"type": "B", "status": "False"}]}}
    )
    assert {c.type for c in status.status.conditions} == {"A", "B"}
    stale = patched.metadata.resource_version
    with pytest.raises(ApiException) as err:
        await core.patch_namespaced_pod(
            "p",
            "default",
            {"metadata": {"resourceVersion": stale, "labels": {"c": "3"}}},
            _content_type="application/merge-patch+json",
        )
    assert err.value.status == 409


def test_a_merge_patch_shares_its_values_only_when_given_away() -> None:
    # An in-process caller keeps its patch: the result holds copies of its values.
    patch = {"spec": {"items": [{"a": 1}]}, "gone": None}
    kept = merge_patch({"spec": {"other": 1}, "gone": 1}, patch)
    patch["spec"]["items"][0]["a"] = 2
    assert kept == {"spec": {"other": 1, "items": [{"a": 1}]}}
    # A patch decoded for this request alone (the server's) is taken as it is, without copying.
    owned = {"spec": {"items": [{"a": 1}]}}
    taken = merge_patch({"spec": {"other": 1}}, owned, owned=True)
    assert taken == {"spec": {"other": 1, "items": [{"a": 1}]}}
    assert taken["spec"]["items"] is owned["spec"]["items"]


async def test_pod_spec_is_immutable_except_allowed_fields(core: client.CoreV1Api) -> None:
    await core.create_namespaced_pod("default", pod_manifest("p"))
    with pytest.raises(ApiException) as err:
        await core.patch_namespaced_pod("p", "default", {"spec": {"nodeName": "node-0"}})
    assert err.value.status == 422
    patched = await core.patch_namespaced_pod("p", "default", {"spec": {"activeDeadlineSeconds": 30}})
    assert patched.spec.active_deadline_seconds == 30


async def test_status_subresource_separates_spec_and_status(core: client.CoreV1Api) -> None:
    await core.create_namespaced_pod("default", pod_manifest("p", labels={"a": "1"}))
    # Writing status through the main resource is ignored...
    pod = await core.patch_namespaced_pod(
        "p", "default", {"status": {"phase": "Running"}}, _content_type="application/merge-patch+json"
    )
    assert pod.status.phase == "Pending"
    # ...and the status subresource ignores everything else.
    pod = await core.patch_namespaced_pod_status(
        "p",
        "default",
        {"metadata": {"labels": {"a": "2"}}, "status": {"phase": "Running"}},
        _content_type="application/merge-patch+json",
    )
    assert pod.status.phase == "Running"
    assert pod.metadata.labels == {"a": "1"}


async def test_binding_sets_node_and_condition_and_twice_is_409(core: client.CoreV1Api) -> None:
    await core.create_namespaced_pod("default", pod_manifest("p"))
    binding = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": "p"},
        "target": {"kind": "Node", "name": "node-1"},
    }
    resp = await core.create_namespaced_pod_binding("p", "default", binding, _preload_content=False)
    assert resp.status == 201
    pod = await core.read_namespaced_pod("p", "default")
    assert pod.spec.node_name == "node-1"
    assert any(c.type == "PodScheduled" and c.status == "True" for c in pod.status.conditions)
    with pytest.raises(ApiException) as err:
        await core.create_namespaced_pod_binding("p", "default", {**binding, "target": {"name": "node-2"}})
    assert err.value.status == 409
    assert "already assigned" in status_of(err.value)["message"]
    assert (await core.read_namespaced_pod("p", "default")).spec.node_name == "node-1"
    with pytest.raises(ApiException) as err:
        await core.create_namespaced_pod_binding(
            "ghost", "default", {**binding, "metadata": {"name": "ghost"}}
        )
    assert err.value.status == 404


async def test_delete_preconditions(core: client.CoreV1Api) -> None:
    cm = await core.create_namespaced_config_map("default", {"metadata": {"name": "c"}})
    with pytest.raises(ApiException) as err:
        await core.delete_namespaced_config_map(
            "c",
            "default",
            body=client.V1DeleteOptions(preconditions=client.V1Preconditions(uid="not-the-uid")),
        )
    assert err.value.status == 409
    with pytest.raises(ApiException) as err:
        await core.delete_namespaced_config_map(
            "c",
            "default",
            body=client.V1DeleteOptions(preconditions=client.V1Preconditions(resource_version="1")),
        )
    assert err.value.status == 409
    await core.read_namespaced_config_map("c", "default")
    await core.delete_namespaced_config_map(
        "c",
        "default",
        body=client.V1DeleteOptions(
            preconditions=client.V1Preconditions(
                uid=cm.metadata.uid, resource_version=cm.metadata.resource_version
            )
        ),
    )
    with pytest.raises(ApiException) as err:
        await core.read_namespaced_config_map("c", "default")
    assert err.value.status == 404


async def test_bound_pod_deletes_gracefully_unless_grace_zero(
    core: client.CoreV1Api, sim: SimCluster
) -> None:
    sim.kubelet.stop_delay = 30  # type: ignore[union-attr]  # a slow kubelet keeps the pod terminating
    await core.create_namespaced_pod("default", pod_manifest("p", node_name="node-0"))
    await core.delete_namespaced_pod("p", "default")
    pod = await core.read_namespaced_pod("p", "default")
    assert pod.metadata.deletion_timestamp is not None
    assert pod.metadata.deletion_grace_period_seconds == 30
    await core.delete_namespaced_pod("p", "default", grace_period_seconds=0)
    with pytest.raises(ApiException) as err:
        await core.read_namespaced_pod("p", "default")
    assert err.value.status == 404
    # An unbound pod goes at once.
    await core.create_namespaced_pod("default", pod_manifest("q"))
    await core.delete_namespaced_pod("q", "default")
    with pytest.raises(ApiException):
        await core.read_namespaced_pod("q", "default")


async def test_finalizers_hold_deletion_until_removed(core: client.CoreV1Api) -> None:
    await core.create_namespaced_config_map(
        "default", {"metadata": {"name": "c", "finalizers": ["example.com/keep"]}}
    )
    await core.delete_namespaced_config_map("c", "default")
    held = await core.read_namespaced_config_map("c", "default")
    assert held.metadata.deletion_timestamp is not None
    await core.patch_namespaced_config_map(
        "c", "default", {"metadata": {"finalizers": None}}, _content_type="application/merge-patch+json"
    )
    with pytest.raises(ApiException) as err:
        await core.read_namespaced_config_map("c", "default")
    assert err.value.status == 404


async def test_eviction_deletes_the_pod(core: client.CoreV1Api) -> None:
    await core.create_namespaced_pod("default", pod_manifest("p"))
    eviction = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": "p", "namespace": "default"},
    }
    await core.create_namespaced_pod_eviction("p", "default", eviction)
    with pytest.raises(ApiException) as err:
        await core.read_namespaced_pod("p", "default")
    assert err.value.status == 404


async def test_namespace_deletion_removes_its_content(core: client.CoreV1Api, sim: SimCluster) -> None:
    await core.create_namespace({"metadata": {"name": "team"}})
    await core.create_namespaced_config_map("team", {"metadata": {"name": "c"}})
    await core.delete_namespace("team")
    for _ in range(50):
        try:
            await core.read_namespace("team")
        except ApiException as exc:
            assert exc.status == 404
            break
        await __import__("asyncio").sleep(0.01)
    else:
        raise AssertionError("namespace never went away")
    assert (
        await core.list_config_map_for_all_namespaces(field_selector="metadata.namespace=team")
    ).items == []


async def test_priority_class_admission(core: client.CoreV1Api, api: client.ApiClient) -> None:
    scheduling = client.SchedulingV1Api(api)
    await scheduling.create_priority_class({"metadata": {"name": "high"}, "value": 1000})
    pod = await core.create_namespaced_pod("default", pod_manifest("p", priorityClassName="high"))
    assert pod.spec.priority == 1000
    with pytest.raises(ApiException) as err:
        await core.create_namespaced_pod("default", pod_manifest("q", priorityClassName="missing"))
    assert err.value.status == 403
    system = await scheduling.read_priority_class("system-node-critical")
    assert system.value > 1_000_000_000


async def test_nodes_keep_their_status_and_patch_status(core: client.CoreV1Api, sim: SimCluster) -> None:
    node = await core.read_node("node-0")
    assert node.status.allocatable["cpu"] == "32"
    assert any(c.type == "Ready" and c.status == "True" for c in node.status.conditions)
    assert not node.spec.taints
    created = await core.create_node(
        {"metadata": {"name": "extra"}, "status": {"capacity": {"cpu": "4"}, "allocatable": {"cpu": "4"}}}
    )
    assert created.status.allocatable == {"cpu": "4"}
    patched = await core.patch_node_status(
        "extra", {"status": {"allocatable": {"cpu": "2"}}}, _content_type="application/merge-patch+json"
    )
    assert patched.status.allocatable == {"cpu": "2"}


async def test_volcano_objects(custom: client.CustomObjectsApi) -> None:
    queue = await custom.create_cluster_custom_object(
        "scheduling.volcano.sh",
        "v1beta1",
        "queues",
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "Queue",
            "metadata": {"name": "research"},
            "spec": {"weight": 2},
            "status": {"state": "Open"},
        },
    )
    assert "status" not in queue  # the status subresource owns status: ignored on create
    queue = await custom.patch_cluster_custom_object_status(
        "scheduling.volcano.sh",
        "v1beta1",
        "queues",
        "research",
        {"status": {"state": "Open"}},
        _content_type="application/merge-patch+json",
    )
    assert queue["status"]["state"] == "Open"
    pg = await custom.create_namespaced_custom_object(
        "scheduling.volcano.sh",
        "v1beta1",
        "default",
        "podgroups",
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": "job"},
            "spec": {"minMember": 2},
        },
    )
    assert pg["spec"]["queue"] == "default"  # the CRD's default
    # PodGroup has no status subresource (as in Volcano): status is written with the object.
    pg = await custom.patch_namespaced_custom_object(
        "scheduling.volcano.sh",
        "v1beta1",
        "default",
        "podgroups",
        "job",
        {"status": {"phase": "Inqueue"}},
        _content_type="application/merge-patch+json",
    )
    assert pg["status"]["phase"] == "Inqueue"
    with pytest.raises(ApiException) as err:  # kubernetes-asyncio's default for a dict is JSON patch
        await custom.patch_namespaced_custom_object(
            "scheduling.volcano.sh", "v1beta1", "default", "podgroups", "job", {"spec": {"minMember": 3}}
        )
    assert err.value.status == 400
    hn = await custom.create_cluster_custom_object(
        "topology.volcano.sh",
        "v1alpha1",
        "hypernodes",
        {
            "apiVersion": "topology.volcano.sh/v1alpha1",
            "kind": "HyperNode",
            "metadata": {"name": "rack-1"},
            "spec": {
                "tier": 1,
                "members": [{"type": "Node", "selector": {"exactMatch": {"name": "node-0"}}}],
            },
        },
    )
    assert hn["spec"]["tier"] == 1
    listed = await custom.list_cluster_custom_object("topology.volcano.sh", "v1alpha1", "hypernodes")
    assert [i["metadata"]["name"] for i in listed["items"]] == ["rack-1"]


async def test_leases_and_events(api: client.ApiClient) -> None:
    coordination = client.CoordinationV1Api(api)
    lease = await coordination.create_namespaced_lease(
        "kube-system",
        {"metadata": {"name": "caldera"}, "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15}},
    )
    lease.spec.holder_identity = "b"
    updated = await coordination.replace_namespaced_lease("caldera", "kube-system", lease)
    assert updated.spec.holder_identity == "b"
    events = client.EventsV1Api(api)
    await events.create_namespaced_event(
        "default",
        {
            "metadata": {"name": "e1"},
            "eventTime": "2026-01-01T00:00:00.000000Z",
            "reason": "Scheduled",
            "action": "Binding",
            "reportingController": "caldera",
            "reportingInstance": "caldera-1",
            "type": "Normal",
            "regarding": {"kind": "PodGroup", "name": "job", "namespace": "default"},
        },
    )
    listed = await events.list_namespaced_event("default", field_selector="regarding.name=job")
    assert [e.reason for e in listed.items] == ["Scheduled"]
    core_events = await client.CoreV1Api(api).create_namespaced_event(
        "default",
        {
            "metadata": {"name": "e2"},
            "involvedObject": {"kind": "Pod", "name": "p"},
            "reason": "Started",
            "type": "Normal",
        },
    )
    assert core_events.reason == "Started"


async def test_kubernetes_asyncio_leader_election_over_a_lease(sim: SimCluster) -> None:
    import asyncio

    from kubernetes_asyncio.leaderelection import electionconfig, leaderelection
    from kubernetes_asyncio.leaderelection.resourcelock.leaselock import LeaseLock

    from caldera.hack.sim.testing import kube_client

    leading: dict[str, asyncio.Event] = {"a": asyncio.Event(), "b": asyncio.Event()}

    async def elect(identity: str, api: client.ApiClient) -> None:
        async def started() -> None:
            leading[identity].set()
            await asyncio.Event().wait()

        async def stopped() -> None:
            return None

        config = electionconfig.Config(
            LeaseLock("caldera", "kube-system", identity, api), 3, 2, 1, started, stopped
        )
        await leaderelection.LeaderElection(config).run()

    async with await kube_client(sim) as api_a, await kube_client(sim) as api_b:
        a = asyncio.create_task(elect("a", api_a))
        await asyncio.wait_for(leading["a"].wait(), 3)
        b = asyncio.create_task(elect("b", api_b))
        await asyncio.sleep(1.3)  # b has tried at least once more by now
        assert not leading["b"].is_set()
        lease = await client.CoordinationV1Api(api_a).read_namespaced_lease("caldera", "kube-system")
        assert lease.spec.holder_identity == "a"
        assert int(lease.metadata.resource_version) > 0
        b.cancel()
        a.cancel()
        for task in (a, b):
            try:
                await task
            except asyncio.CancelledError:
                pass


async def test_scale_subresource_drives_replicas(apps: client.AppsV1Api) -> None:
    await apps.create_namespaced_deployment(
        "default",
        {
            "metadata": {"name": "web"},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "c", "image": "x"}]},
                },
            },
        },
    )
    scale = await apps.read_namespaced_deployment_scale("web", "default")
    assert scale.spec.replicas == 1 and scale.status.selector == "app=web"
    scale = await apps.patch_namespaced_deployment_scale("web", "default", {"spec": {"replicas": 0}})
    assert scale.spec.replicas == 0
    deployment = await apps.read_namespaced_deployment("web", "default")
    assert deployment.spec.replicas == 0 and deployment.metadata.generation == 2


async def test_old_events_expire(sim: SimCluster, core: client.CoreV1Api) -> None:
    import time

    await core.create_namespaced_event(
        "default", {"metadata": {"name": "e"}, "involvedObject": {"kind": "Pod", "name": "p"}, "reason": "X"}
    )
    assert sim.expire_events() == 0
    assert sim.expire_events(now=time.time() + sim.event_ttl + 5) == 1
    assert (await core.list_namespaced_event("default")).items == []


async def test_legacy_watch_path_and_single_object_watch(sim: SimCluster, core: client.CoreV1Api) -> None:
    import aiohttp
    import orjson

    await core.create_namespaced_pod("default", pod_manifest("a"))
    await core.create_namespaced_pod("default", pod_manifest("b"))
    async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {sim.token}"}) as http:
        async with http.get(f"{sim.url}/api/v1/watch/namespaces/default/pods/b?timeoutSeconds=1") as resp:
            lines = [orjson.loads(line) for line in (await resp.read()).splitlines()]
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in lines] == [("ADDED", "b")]


async def test_labels_are_validated_and_system_namespaces_protected(core: client.CoreV1Api) -> None:
    with pytest.raises(ApiException) as err:
        await core.create_namespaced_pod("default", pod_manifest("p", labels={"app": "not valid!"}))
    assert err.value.status == 422
    with pytest.raises(ApiException) as err:
        await core.create_namespaced_config_map(
            "default", {"metadata": {"name": "c", "labels": {"-bad": "x"}}}
        )
    assert err.value.status == 422
    ok = await core.create_namespaced_config_map(
        "default", {"metadata": {"name": "c", "labels": {"example.com/role": "a.b_c-1", "empty": ""}}}
    )
    assert ok.metadata.labels["empty"] == ""
    with pytest.raises(ApiException) as err:
        await core.patch_namespaced_config_map("c", "default", {"metadata": {"labels": {"x": "y" * 64}}})
    assert err.value.status == 422
    with pytest.raises(ApiException) as err:
        await core.delete_namespace("kube-system")
    assert err.value.status == 403


async def test_paginated_list_is_a_consistent_snapshot(core: client.CoreV1Api) -> None:
    for i in range(6):
        await core.create_namespaced_config_map(
            "default", {"metadata": {"name": f"cm-{i}"}, "data": {"v": "old"}}
        )
    first = await core.list_namespaced_config_map("default", limit=3)
    assert first.metadata.remaining_item_count == 3
    # Changes after the first page do not leak into the next ones.
    await core.delete_namespaced_config_map("cm-4", "default")
    await core.create_namespaced_config_map("default", {"metadata": {"name": "cm-9"}})
    await core.patch_namespaced_config_map("cm-5", "default", {"data": {"v": "new"}})
    second = await core.list_namespaced_config_map("default", limit=3, _continue=first.metadata._continue)
    assert [c.metadata.name for c in second.items] == ["cm-3", "cm-4", "cm-5"]
    assert second.items[2].data == {"v": "old"}
    assert second.metadata.resource_version == first.metadata.resource_version
    assert not second.metadata._continue


async def test_dynamic_client_discovers_and_uses_resources(api: client.ApiClient) -> None:
    from kubernetes_asyncio.dynamic import DynamicClient

    dynamic = await DynamicClient(api)
    queues = await dynamic.resources.get(api_version="scheduling.volcano.sh/v1beta1", kind="Queue")
    await dynamic.create(
        queues,
        body={
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "Queue",
            "metadata": {"name": "q"},
            "spec": {"weight": 1},
        },
    )
    assert [q.metadata.name for q in (await dynamic.get(queues)).items] == ["q"]
    nodes = await dynamic.resources.get(api_version="v1", kind="Node")
    assert len((await dynamic.get(nodes)).items) == 3


async def test_events_are_one_store_seen_through_both_apis(sim: SimCluster, api: client.ApiClient) -> None:
    import aiohttp
    import orjson

    events_v1 = client.EventsV1Api(api)
    core = client.CoreV1Api(api)
    rv = (await events_v1.list_namespaced_event("default")).metadata.resource_version
    await events_v1.create_namespaced_event(
        "default",
        {
            "metadata": {"name": "scheduled"},
            "eventTime": "2026-01-01T00:00:00.000000Z",
            "reason": "Scheduled",
            "note": "placed 4 pods",
            "action": "Binding",
            "reportingController": "caldera",
            "reportingInstance": "caldera-0",
            "type": "Normal",
            "regarding": {"kind": "PodGroup", "name": "job", "namespace": "default"},
        },
    )
    as_core = await core.read_namespaced_event("scheduled", "default")
    assert as_core.message == "placed 4 pods" and as_core.involved_object.name == "job"
    assert as_core.reporting_component == "caldera"
    await core.create_namespaced_event(
        "default",
        {
            "metadata": {"name": "started"},
            "involvedObject": {"kind": "Pod", "name": "p"},
            "reason": "Started",
            "message": "hi",
            "eventTime": "2026-01-01T00:00:01.000000Z",
        },
    )
    as_v1 = await events_v1.read_namespaced_event("started", "default")
    assert as_v1.note == "hi" and as_v1.regarding.name == "p"
    listed = await events_v1.list_namespaced_event("default", field_selector="regarding.kind=Pod")
    assert [e.metadata.name for e in listed.items] == ["started"]
    async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {sim.token}"}) as http:
        path = (
            f"/apis/events.k8s.io/v1/namespaces/default/events?watch=1&timeoutSeconds=1&resourceVersion={rv}"
        )
        async with http.get(f"{sim.url}{path}") as resp:
            lines = [orjson.loads(line) for line in (await resp.read()).splitlines()]
    assert [e["object"]["metadata"]["name"] for e in lines] == ["scheduled", "started"]
    assert lines[1]["object"]["apiVersion"] == "events.k8s.io/v1" and lines[1]["object"]["note"] == "hi"
    await events_v1.delete_namespaced_event("started", "default")
    assert [e.metadata.name for e in (await core.list_namespaced_event("default")).items] == ["scheduled"]
