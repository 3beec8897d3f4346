"""Object builders: the manifests a user would submit (pods, PodGroups, queues, nodes, Deployments, and the
`resource.k8s.io/v1` objects of Dynamic Resource Allocation), labelled so the soak's checker and the
executor's janitor can tell the workloads' objects apart."""

from __future__ import annotations

from typing import Any

from caldera.framework.model import GROUP_NAME_ANNOTATION, QUEUE_NAME_ANNOTATION

RUN_SECONDS = "sim.caldera.io/run-seconds"
WORKLOAD_LABEL = "caldera.io/workload"
JOB_LABEL = "caldera.io/job"
IB_LABEL = "sim.caldera.io/ib-group"
SCHEDULER = "caldera"


def pod_manifest(
    name: str,
    ns: str,
    *,
    workload: str,
    job: str = "",
    group: str = "",
    requests: dict[str, str] | None = None,
    limits: dict[str, str] | None = None,
    run_seconds: float | None = None,
    scheduler: str = SCHEDULER,
    node_selector: dict[str, str] | None = None,
    tolerations: list[dict[str, Any]] | None = None,
    priority_class: str = "",
    queue: str = "",
    resource_claims: list[dict[str, str]] | None = None,
) -> dict[str, Any]:
    """A pod; `resource_claims` are its `spec.resourceClaims` entries (`name` with `resourceClaimName` or
    `resourceClaimTemplateName`), each one used by its container (`resources.claims`)."""
    annotations: dict[str, str] = {}
    if group:
        annotations[GROUP_NAME_ANNOTATION] = group
    if queue:
        annotations[QUEUE_NAME_ANNOTATION] = queue
    if run_seconds is not None:
        annotations[RUN_SECONDS] = f"{run_seconds:g}"
    resources: dict[str, Any] = {}
    if requests:
        resources["requests"] = requests
    if limits:
        resources["limits"] = limits
    if resource_claims:
        resources["claims"] = [{"name": c["name"]} for c in resource_claims]
    spec: dict[str, Any] = {
        "schedulerName": scheduler,
        "containers": [{"name": "main", "image": "busybox", "resources": resources}],
        "terminationGracePeriodSeconds": 0,
    }
    if node_selector:
        spec["nodeSelector"] = node_selector
    if tolerations:
        spec["tolerations"] = tolerations
    if priority_class:
        spec["priorityClassName"] = priority_class
    if resource_claims:
        spec["resourceClaims"] = [dict(c) for c in resource_claims]
    labels = {WORKLOAD_LABEL: workload}
    if job:
        labels[JOB_LABEL] = job
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "labels": labels, "annotations": annotations},
        "spec": spec,
    }


def podgroup_manifest(
    name: str,
    ns: str,
    min_member: int,
    *,
    workload: str,
    queue: str = "default",
    priority_class: str = "",
    network_topology: dict[str, Any] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"minMember": min_member, "queue": queue}
    if priority_class:
        spec["priorityClassName"] = priority_class
    if network_topology:
        spec["networkTopology"] = network_topology
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": ns, "labels": {WORKLOAD_LABEL: workload, JOB_LABEL: name}},
        "spec": spec,
    }


def gang_manifests(
    job: str, ns: str, size: int, *, workload: str, group: dict[str, Any] | None = None, **pod: Any
) -> list[dict[str, Any]]:
    """A job as a gang: its PodGroup of min member `size` (`group`: podgroup_manifest's queue, priority_class,
    network_topology), then its `size` pods `<job>-0`, `<job>-1`... in that group (`pod`: pod_manifest's
    requests, limits, queue, priority_class, tolerations, run_seconds, resource_claims)."""
    return [podgroup_manifest(job, ns, size, workload=workload, **(group or {}))] + [
        pod_manifest(f"{job}-{k}", ns, workload=workload, job=job, group=job, **pod) for k in range(size)
    ]


def queue_manifest(name: str, weight: int = 1, guarantee: dict[str, str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"weight": weight, "reclaimable": True}
    if guarantee:
        spec["guarantee"] = {"resource": guarantee}
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": name, "labels": {WORKLOAD_LABEL: "queues"}},
        "spec": spec,
    }


def node_manifest(name: str, capacity: dict[str, str], labels: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **labels}},
        "status": {
            "capacity": capacity,
            "allocatable": capacity,
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
        },
    }


def deployment_manifest(name: str, ns: str, replicas: int, requests: dict[str, str]) -> dict[str, Any]:
    labels = {"app": name, WORKLOAD_LABEL: "deploy"}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": ns, "labels": {WORKLOAD_LABEL: "deploy"}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "schedulerName": SCHEDULER,
                    "terminationGracePeriodSeconds": 0,
                    "containers": [{"name": "main", "image": "busybox", "resources": {"requests": requests}}],
                },
            },
        },
    }


# -- Dynamic Resource Allocation (resource.k8s.io/v1, staging/src/k8s.io/api/resource/v1/types.go) ---------

RESOURCE_API = "resource.k8s.io/v1"


def device_class_manifest(name: str, driver: str) -> dict[str, Any]:
    """A DeviceClass selecting every device of `driver` by CEL (`DeviceClassSpec.Selectors`)."""
    return {
        "apiVersion": RESOURCE_API,
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{driver}"'}}]},
    }


def resource_slice_manifest(node: str, driver: str, devices: int, model: str = "a100") -> dict[str, Any]:
    """What a node-local DRA driver publishes: one ResourceSlice for `node` (`spec.nodeName`), a pool of
    its own named after the node, `devices` devices `gpu-0`, `gpu-1`... with a model and an index."""
    return {
        "apiVersion": RESOURCE_API,
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-{driver}", "labels": {WORKLOAD_LABEL: "dra"}},
        "spec": {
            "driver": driver,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": [
                {"name": f"gpu-{i}", "attributes": {"model": {"string": model}, "index": {"int": i}}}
                for i in range(devices)
            ],
        },
    }


def _claim_spec(device_class: str, count: int) -> dict[str, Any]:
    exactly = {"deviceClassName": device_class, "allocationMode": "ExactCount", "count": count}
    return {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}


def claim_template_manifest(name: str, ns: str, device_class: str, count: int = 1) -> dict[str, Any]:
    """A ResourceClaimTemplate: each pod naming it gets a claim of its own for `count` devices of the
    class (made by the resourceclaim controller)."""
    return {
        "apiVersion": RESOURCE_API,
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": ns, "labels": {WORKLOAD_LABEL: "dra"}},
        "spec": {"spec": _claim_spec(device_class, count)},
    }


def claim_manifest(name: str, ns: str, device_class: str, count: int = 1, *, workload: str) -> dict[str, Any]:
    """A ResourceClaim that pods share by naming it (`resourceClaimName`)."""
    return {
        "apiVersion": RESOURCE_API,
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": ns, "labels": {WORKLOAD_LABEL: workload}},
        "spec": _claim_spec(device_class, count),
    }
