"""Node templates: from command-line flags or a cluster file, expanded into Node objects."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .resources import RESOURCES, Resource

VGPU_REGISTER_ANNOTATION = "volcano.sh/node-vgpu-register"
VGPU_HANDSHAKE_ANNOTATION = "volcano.sh/node-vgpu-handshake"


@dataclass
class VGPU:
    """Volcano vGPU devices on a node: `cards` physical GPUs, each split `split` ways."""

    cards: int = 1
    split: int = 10
    memory: int = 32768  # MiB per card
    cores: int = 100  # per card
    model: str = "NVIDIA-Tesla-V100"


@dataclass
class NodeTemplate:
    name: str = "node"  # name prefix: nodes are <name>-0, <name>-1, ...
    count: int = 1
    capacity: dict[str, str] = field(default_factory=lambda: {"cpu": "32", "memory": "128Gi", "pods": "110"})
    allocatable: dict[str, str] | None = None
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    taints: list[dict[str, Any]] = field(default_factory=list)
    unschedulable: bool = False
    ready: bool = True
    vgpu: VGPU | None = None

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> NodeTemplate:
        known = {
            "name",
            "count",
            "capacity",
            "allocatable",
            "labels",
            "annotations",
            "taints",
            "unschedulable",
            "ready",
            "vgpu",
        }
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"node template: unknown field(s) {sorted(unknown)}")
        vgpu = data.get("vgpu")
        return cls(
            name=str(data.get("name", "node")),
            count=int(data.get("count", 1)),
            capacity={
                k: str(v)
                for k, v in (data.get("capacity") or {"cpu": "32", "memory": "128Gi", "pods": "110"}).items()
            },
            allocatable={k: str(v) for k, v in data["allocatable"].items()}
            if data.get("allocatable")
            else None,
            labels={k: str(v) for k, v in (data.get("labels") or {}).items()},
            annotations={k: str(v) for k, v in (data.get("annotations") or {}).items()},
            taints=list(data.get("taints") or []),
            unschedulable=bool(data.get("unschedulable", False)),
            ready=bool(data.get("ready", True)),
            vgpu=VGPU(**vgpu) if isinstance(vgpu, dict) else None,
        )


def parse_labels(text: str) -> dict[str, str]:
    labels: dict[str, str] = {}
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        key, sep, value = part.partition("=")
        if not sep or not key:
            raise ValueError(f"label {part!r} is not KEY=VALUE")
        labels[key.strip()] = value.strip()
    return labels


@dataclass
class ClusterSpec:
    nodes: list[NodeTemplate] = field(default_factory=list)
    # Extra objects created at start (queues, priority classes, hypernodes, namespaces, ...).
    objects: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def from_file(cls, path: str | Path) -> ClusterSpec:
        data = yaml.safe_load(Path(path).read_text()) or {}
        if not isinstance(data, dict):
            raise ValueError(f"{path}: a cluster file is a mapping with `nodes` and `objects`")
        return cls(
            nodes=[NodeTemplate.from_dict(n) for n in data.get("nodes") or []],
            objects=list(data.get("objects") or []),
        )

    @classmethod
    def uniform(
        cls,
        count: int,
        cpu: str = "32",
        memory: str = "128Gi",
        pods: int | str = 110,
        labels: dict[str, str] | None = None,
        prefix: str = "node",
    ) -> ClusterSpec:
        template = NodeTemplate(
            name=prefix,
            count=count,
            capacity={"cpu": str(cpu), "memory": str(memory), "pods": str(pods)},
            labels=dict(labels or {}),
        )
        return cls(nodes=[template] if count else [])


def resource_for(obj: dict[str, Any]) -> Resource:
    api_version = obj.get("apiVersion", "")
    group, _, version = api_version.rpartition("/")
    for r in RESOURCES:
        if r.group == group and r.version == version and r.kind == obj.get("kind"):
            return r
    raise ValueError(f"caldera-sim does not serve {api_version} {obj.get('kind')}")


def build_nodes(templates: list[NodeTemplate], start_index: int = 0) -> list[dict[str, Any]]:
    nodes: list[dict[str, Any]] = []
    index = start_index
    for t in templates:
        width = max(1, len(str(t.count - 1)))
        for i in range(t.count):
            name = f"{t.name}-{i:0{width}d}"
            nodes.append(_node(t, name, index))
            index += 1
    return nodes


def _node(t: NodeTemplate, name: str, index: int) -> dict[str, Any]:
    capacity = dict(t.capacity)
    allocatable = dict(t.allocatable) if t.allocatable is not None else dict(capacity)
    annotations = dict(t.annotations)
    if t.vgpu is not None:
        v = t.vgpu
        extra = {
            "volcano.sh/vgpu-number": str(v.cards * v.split),
            "volcano.sh/vgpu-memory": str(v.cards * v.memory),
            "volcano.sh/vgpu-cores": str(v.cards * v.cores),
        }
        capacity.update(extra)
        allocatable.update(extra)
        devices = [
            f"GPU-{uuid.uuid5(uuid.NAMESPACE_DNS, f'{name}.{card}')},{v.split},{v.memory},{v.model},true,hami-core"
            for card in range(v.cards)
        ]
        annotations[VGPU_REGISTER_ANNOTATION] = ":".join(devices)
        annotations[VGPU_HANDSHAKE_ANNOTATION] = "Reported_2026-01-01 00:00:00"
    labels = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/os": "linux",
        "beta.kubernetes.io/arch": "amd64",
        **t.labels,
    }
    ip = f"10.{(index >> 16) & 255}.{(index >> 8) & 255}.{(index & 255)}"
    ready = "True" if t.ready else "False"
    spec: dict[str, Any] = {"podCIDR": f"10.{128 + ((index >> 8) & 127)}.{index & 255}.0/24"}
    if t.taints:
        spec["taints"] = [dict(taint) for taint in t.taints]
    if t.unschedulable:
        spec["unschedulable"] = True
    now = "2026-01-01T00:00:00Z"
    conditions = [
        {
            "type": kind,
            "status": "False",
            "reason": f"KubeletHas{ok}",
            "lastHeartbeatTime": now,
            "lastTransitionTime": now,
        }
        for kind, ok in (
            ("MemoryPressure", "SufficientMemory"),
            ("DiskPressure", "NoDiskPressure"),
            ("PIDPressure", "SufficientPID"),
        )
    ]
    conditions.append(
        {
            "type": "Ready",
            "status": ready,
            "reason": "KubeletReady" if t.ready else "KubeletNotReady",
            "message": "kubelet is posting ready status" if t.ready else "simulated not ready",
            "lastHeartbeatTime": now,
            "lastTransitionTime": now,
        }
    )
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels, **({"annotations": annotations} if annotations else {})},
        "spec": spec,
        "status": {
            "capacity": capacity,
            "allocatable": allocatable,
            "conditions": conditions,
            "addresses": [{"type": "InternalIP", "address": ip}, {"type": "Hostname", "address": name}],
            "nodeInfo": {
                "kubeletVersion": "v1.36.0-caldera-sim",
                "kubeProxyVersion": "v1.36.0-caldera-sim",
                "containerRuntimeVersion": "containerd://2.0.0",
                "operatingSystem": "linux",
                "architecture": "amd64",
                "osImage": "caldera-sim",
                "kernelVersion": "6.0.0",
                "machineID": "",
                "systemUUID": "",
                "bootID": "",
            },
            "phase": "Running",
        },
    }
