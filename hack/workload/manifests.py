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
#: Kubernetes' own gang API (served by `caldera-sim serve --native-gang-api`)
NATIVE_API_VERSION = "scheduling.k8s.io/v1alpha2"
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
    native_group: str = "",
    resource_claims: list[dict[str, str]] | None = None,
) -> dict[str, Any]:
    """A pod; in the Volcano PodGroup ``group`` (annotation), or in the ``scheduling.k8s.io/v1alpha2``
    PodGroup ``native_group`` (``spec.schedulingGroup``); ``resource_claims`` are its
    ``spec.resourceClaims`` entries (``name`` with ``resourceClaimName`` or
    ``resourceClaimTemplateName``), each one used by its container (``resources.claims``)."""
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
    if native_group:
        spec["schedulingGroup"] = {"podGroupName": native_group}
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


def native_podgroup_manifest(
    name: str,
    ns: str,
    min_count: int,
    *,
    workload: str,
    queue: str = "default",
    priority_class: str = "",
    topology_key: str = "",
) -> dict[str, Any]:
    """Kubernetes' own PodGroup (``scheduling.k8s.io/v1alpha2``, KEP-4671/5832): a gang of ``minCount``, its
    queue in the ``scheduling.volcano.sh/queue-name`` label, and (``topology_key``) all its pods inside one
    domain of that node label (``schedulingConstraints.topology``)."""
    spec: dict[str, Any] = {"schedulingPolicy": {"gang": {"minCount": min_count}}}
    if priority_class:
        spec["priorityClassName"] = priority_class
    if topology_key:
        spec["schedulingConstraints"] = {"topology": [{"key": topology_key}]}
    labels = {WORKLOAD_LABEL: workload, JOB_LABEL: name}
    if queue:
        labels[QUEUE_NAME_ANNOTATION] = queue
    return {
        "apiVersion": NATIVE_API_VERSION,
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": ns, "labels": labels},
        "spec": spec,
    }


def gang_manifests(
    job: str,
    ns: str,
    size: int,
    *,
    workload: str,
    group: dict[str, Any] | None = None,
    native: bool = False,
    **pod: Any,
) -> list[dict[str, Any]]:
    """A job as a gang: its PodGroup of min member `size` (`group`: podgroup_manifest's queue, priority_class,
    network_topology), then its `size` pods `<job>-0`, `<job>-1`... in that group (`pod`: pod_manifest's
    requests, limits, queue, priority_class, tolerations, run_seconds, resource_claims). With `native`, the group is
    Kubernetes' own PodGroup (`native_podgroup_manifest`; a network topology becomes a topology key of
    `topology_key`) and its pods join it through `spec.schedulingGroup`."""
    if native:
        options = dict(group or {})
        topology = options.pop("network_topology", None)
        key = options.pop("topology_key", IB_LABEL) if topology else options.pop("topology_key", "")
        pods = {k: v for k, v in pod.items() if k != "queue"}
        return [native_podgroup_manifest(job, ns, size, workload=workload, topology_key=key, **options)] + [
            pod_manifest(f"{job}-{k}", ns, workload=workload, job=job, native_group=job, **pods)
            for k in range(size)
        ]
    return [podgroup_manifest(job, ns, size, workload=workload, **(group or {}))] + [
        pod_manifest(f"{job}-{k}", ns, workload=workload, job=job, group=job, **pod) for k in range(size)
    ]


def group_of(obj: dict[str, Any]) -> tuple[str, bool] | None:
    """The PodGroup a pod belongs to: (name, whether it is Kubernetes' own), or None."""
    native = (obj.get("spec") or {}).get("schedulingGroup") or {}
    if native.get("podGroupName"):
        return str(native["podGroupName"]), True
    name = (obj["metadata"].get("annotations") or {}).get(GROUP_NAME_ANNOTATION)
    return (str(name), False) if name else None


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


def device_class_manifest(name: str, driver: str, parameters: dict[str, Any] | None = None) -> dict[str, Any]:
    """A DeviceClass selecting every device of `driver` by CEL (`DeviceClassSpec.Selectors`); with
    `parameters`, a configuration of the driver's that every allocation from the class carries."""
    spec: dict[str, Any] = {"selectors": [{"cel": {"expression": f'device.driver == "{driver}"'}}]}
    if parameters is not None:
        spec["config"] = [{"opaque": {"driver": driver, "parameters": parameters}}]
    return {"apiVersion": RESOURCE_API, "kind": "DeviceClass", "metadata": {"name": name}, "spec": spec}


def sharing(strategy: str) -> dict[str, Any]:
    """The parameters of a GPU driver's sharing configuration (as NVIDIA's DRA driver names them)."""
    return {"apiVersion": "gpu.example.com/v1", "kind": "GpuConfig", "sharing": {"strategy": strategy}}


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


def claim_manifest(
    name: str,
    ns: str,
    device_class: str,
    count: int = 1,
    *,
    workload: str,
    driver: str = "",
    parameters: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A ResourceClaim that pods share by naming it (`resourceClaimName`); with `parameters`, a
    configuration of `driver`'s for its request."""
    spec = _claim_spec(device_class, count)
    if parameters is not None:
        opaque = {"driver": driver, "parameters": parameters}
        spec["devices"]["config"] = [{"requests": ["gpu"], "opaque": opaque}]
    return {
        "apiVersion": RESOURCE_API,
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": ns, "labels": {WORKLOAD_LABEL: workload}},
        "spec": spec,
    }
