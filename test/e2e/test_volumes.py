"""A gang whose pods claim WaitForFirstConsumer volumes lands where those volumes can be provisioned:
the claims get the selected node, are provisioned there, and only then are the pods bound."""

from __future__ import annotations

from .conftest import SCHEDULER, Api, eventually

ZONE = "topology.kubernetes.io/zone"


async def _zone_node(api: Api, name: str, zone: str) -> None:
    cap = {"cpu": "4", "memory": "16Gi", "pods": "110"}
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
                "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
            },
        },
    )


async def test_a_gang_with_wait_for_first_consumer_claims_lands_where_they_can_be_provisioned(
    api: Api, start_scheduler
) -> None:
    for name, zone in (("a1", "a"), ("a2", "a"), ("b1", "b"), ("b2", "b")):
        await _zone_node(api, name, zone)
    await api.create(
        "/apis/storage.k8s.io/v1/storageclasses",
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": "zone-b-only"},
            "provisioner": "csi.example.com",
            "volumeBindingMode": "WaitForFirstConsumer",
            "allowedTopologies": [{"matchLabelExpressions": [{"key": ZONE, "values": ["b"]}]}],
        },
    )
    await api.podgroup("train", 2)
    for i in range(2):
        await api.create(
            f"/api/v1/namespaces/{api.ns}/persistentvolumeclaims",
            {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "metadata": {"name": f"data-{i}"},
                "spec": {
                    "storageClassName": "zone-b-only",
                    "accessModes": ["ReadWriteOnce"],
                    "resources": {"requests": {"storage": "1Gi"}},
                },
            },
        )
        await api.create(
            f"/api/v1/namespaces/{api.ns}/pods",
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": f"train-{i}", "annotations": {"scheduling.k8s.io/group-name": "train"}},
                "spec": {
                    "schedulerName": SCHEDULER,
                    "containers": [
                        {
                            "name": "main",
                            "image": "busybox",
                            "resources": {"requests": {"cpu": "1", "memory": "64Mi"}},
                        }
                    ],
                    "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": f"data-{i}"}}],
                },
            },
        )
    await start_scheduler()

    async def bound() -> dict[str, str]:
        nodes = await api.node_of()
        return nodes if nodes.get("train-0") and nodes.get("train-1") else {}

    nodes = await eventually(bound, timeout=15)
    assert {nodes["train-0"], nodes["train-1"]} <= {"b1", "b2"}
    for i in range(2):
        pvc = await api.get(f"/api/v1/namespaces/{api.ns}/persistentvolumeclaims/data-{i}")
        assert pvc["metadata"]["annotations"]["volume.kubernetes.io/selected-node"] == nodes[f"train-{i}"]
        assert pvc["status"]["phase"] == "Bound"
        pv = await api.get(f"/api/v1/persistentvolumes/{pvc['spec']['volumeName']}")
        terms = pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"]
        assert terms[0]["matchExpressions"][0] == {"key": ZONE, "operator": "In", "values": ["b"]}


async def test_a_gang_whose_volumes_are_not_provisioned_in_time_is_undone(
    api: Api, start_scheduler, sim
) -> None:
    from .conftest import needs_sim

    cluster = needs_sim(sim)
    assert cluster.provisioner is not None
    await cluster.provisioner.stop()  # nothing will provision the claims
    await _zone_node(api, "b1", "b")
    await api.create(
        "/apis/storage.k8s.io/v1/storageclasses",
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": "slow"},
            "provisioner": "csi.example.com",
            "volumeBindingMode": "WaitForFirstConsumer",
        },
    )
    await api.podgroup("stuck", 1)
    await api.create(
        f"/api/v1/namespaces/{api.ns}/persistentvolumeclaims",
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "stuck-data"},
            "spec": {"storageClassName": "slow", "accessModes": ["ReadWriteOnce"]},
        },
    )
    await api.create(
        f"/api/v1/namespaces/{api.ns}/pods",
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "stuck-0", "annotations": {"scheduling.k8s.io/group-name": "stuck"}},
            "spec": {
                "schedulerName": SCHEDULER,
                "containers": [{"name": "main", "image": "busybox"}],
                "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "stuck-data"}}],
            },
        },
    )
    running = await start_scheduler(volume_bind_timeout=0.5)
    assert running.app.binder is not None

    async def failed_once() -> bool:
        return any("volumes not provisioned" in f.reason for f in running.app.binder.failures.values())

    await eventually(failed_once, timeout=10)
    assert (await api.node_of())["stuck-0"] == "", "never bound while its volume is missing"
