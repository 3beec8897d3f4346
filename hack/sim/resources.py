"""The kinds the simulated API server serves, and the discovery documents that describe them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Resource:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    # Subresources served besides the object itself: "status", "binding", "eviction", "token".
    subresources: frozenset[str] = frozenset()
    # Field selectors a real server accepts for this kind besides metadata.name and metadata.namespace.
    field_labels: frozenset[str] = frozenset()
    # Custom resources: no strategic merge patch, generation follows the CRD rules.
    custom: bool = False
    # Kinds whose objects carry metadata.generation (those with a spec).
    generation: bool = True
    verbs: tuple[str, ...] = (
        "create",
        "delete",
        "deletecollection",
        "get",
        "list",
        "patch",
        "update",
        "watch",
    )
    categories: tuple[str, ...] = field(default=())

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def id(self) -> str:
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def singular(self) -> str:
        return self.kind.lower()

    @property
    def has_status(self) -> bool:
        return "status" in self.subresources


_POD_FIELDS = frozenset(
    {
        "spec.nodeName",
        "spec.schedulerName",
        "spec.restartPolicy",
        "spec.serviceAccountName",
        "spec.hostNetwork",
        "status.phase",
        "status.podIP",
        "status.nominatedNodeName",
    }
)
_EVENT_FIELDS = frozenset(
    {
        "involvedObject.kind",
        "involvedObject.namespace",
        "involvedObject.name",
        "involvedObject.uid",
        "involvedObject.apiVersion",
        "involvedObject.resourceVersion",
        "involvedObject.fieldPath",
        "reason",
        "reportingComponent",
        "source",
        "type",
    }
)
_EVENTS_V1_FIELDS = frozenset(
    {
        "regarding.kind",
        "regarding.namespace",
        "regarding.name",
        "regarding.uid",
        "regarding.apiVersion",
        "regarding.resourceVersion",
        "regarding.fieldPath",
        "reason",
        "reportingController",
        "type",
    }
)

RESOURCES: tuple[Resource, ...] = (
    Resource(
        "",
        "v1",
        "pods",
        "Pod",
        True,
        ("po",),
        frozenset({"status", "binding", "eviction"}),
        _POD_FIELDS,
        categories=("all",),
    ),
    Resource(
        "", "v1", "nodes", "Node", False, ("no",), frozenset({"status"}), frozenset({"spec.unschedulable"})
    ),
    Resource(
        "",
        "v1",
        "namespaces",
        "Namespace",
        False,
        ("ns",),
        frozenset({"status", "finalize"}),
        frozenset({"status.phase"}),
        generation=False,
    ),
    Resource("", "v1", "configmaps", "ConfigMap", True, ("cm",), generation=False),
    Resource("", "v1", "events", "Event", True, ("ev",), field_labels=_EVENT_FIELDS, generation=False),
    Resource(
        "events.k8s.io",
        "v1",
        "events",
        "Event",
        True,
        ("ev",),
        field_labels=_EVENTS_V1_FIELDS,
        generation=False,
    ),
    Resource("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", False, ("pc",), generation=False),
    Resource("coordination.k8s.io", "v1", "leases", "Lease", True, generation=False),
    Resource(
        "policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", True, ("pdb",), frozenset({"status"})
    ),
    Resource("", "v1", "resourcequotas", "ResourceQuota", True, ("quota",), frozenset({"status"})),
    Resource(
        "", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", True, ("pvc",), frozenset({"status"})
    ),
    Resource("", "v1", "persistentvolumes", "PersistentVolume", False, ("pv",), frozenset({"status"})),
    Resource("storage.k8s.io", "v1", "storageclasses", "StorageClass", False, ("sc",), generation=False),
    Resource("storage.k8s.io", "v1", "csinodes", "CSINode", False, generation=False),
    Resource(
        "apps",
        "v1",
        "deployments",
        "Deployment",
        True,
        ("deploy",),
        frozenset({"status", "scale"}),
        categories=("all",),
    ),
    Resource(
        "apps",
        "v1",
        "replicasets",
        "ReplicaSet",
        True,
        ("rs",),
        frozenset({"status", "scale"}),
        categories=("all",),
    ),
    Resource(
        "", "v1", "serviceaccounts", "ServiceAccount", True, ("sa",), frozenset({"token"}), generation=False
    ),
    Resource("rbac.authorization.k8s.io", "v1", "roles", "Role", True, generation=False),
    Resource("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", False, generation=False),
    Resource("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", True, generation=False),
    Resource(
        "rbac.authorization.k8s.io",
        "v1",
        "clusterrolebindings",
        "ClusterRoleBinding",
        False,
        generation=False,
    ),
    # Dynamic Resource Allocation (resource.k8s.io/v1, GA since Kubernetes 1.34); validation, defaults and the
    # resourceclaim controller's work are in dra.py.
    Resource("resource.k8s.io", "v1", "deviceclasses", "DeviceClass", False),
    Resource(
        "resource.k8s.io",
        "v1",
        "resourceslices",
        "ResourceSlice",
        False,
        field_labels=frozenset({"spec.nodeName", "spec.driver"}),
    ),
    Resource(
        "resource.k8s.io",
        "v1",
        "resourceclaims",
        "ResourceClaim",
        True,
        (),
        frozenset({"status"}),
        generation=False,
    ),
    Resource(
        "resource.k8s.io", "v1", "resourceclaimtemplates", "ResourceClaimTemplate", True, generation=False
    ),
    # Volcano's PodGroup CRD declares no status subresource: its status is written through the object itself.
    Resource(
        "scheduling.volcano.sh",
        "v1beta1",
        "podgroups",
        "PodGroup",
        True,
        ("pg", "podgroup-v1beta1"),
        custom=True,
    ),
    Resource(
        "scheduling.volcano.sh",
        "v1beta1",
        "queues",
        "Queue",
        False,
        ("q", "queue-v1beta1"),
        frozenset({"status"}),
        custom=True,
    ),
    Resource(
        "topology.volcano.sh",
        "v1alpha1",
        "hypernodes",
        "HyperNode",
        False,
        ("hn",),
        frozenset({"status"}),
        custom=True,
    ),
    # Volcano's resource-exporter writes one per node; the numa-aware plugin reads them
    Resource(
        "nodeinfo.volcano.sh", "v1alpha1", "numatopologies", "Numatopology", False, ("numatopo",), custom=True
    ),
)

#: Kubernetes' own gang API (kube-apiserver 1.36 behind ``--runtime-config=scheduling.k8s.io/v1alpha2=true
#: --feature-gates=GenericWorkload=true``): served only when the simulator is started with it on
NATIVE_GANG: tuple[Resource, ...] = (
    Resource("scheduling.k8s.io", "v1alpha2", "workloads", "Workload", True),
    Resource("scheduling.k8s.io", "v1alpha2", "podgroups", "PodGroup", True, (), frozenset({"status"})),
)


def by_group_version(resources: tuple[Resource, ...]) -> dict[tuple[str, str], dict[str, Resource]]:
    """(group, version) -> plural -> Resource."""
    out: dict[tuple[str, str], dict[str, Resource]] = {}
    for r in resources:
        out.setdefault((r.group, r.version), {})[r.plural] = r
    return out


BY_GROUP_VERSION = by_group_version(RESOURCES)

BY_ID: dict[str, Resource] = {r.id: r for r in (*RESOURCES, *NATIVE_GANG)}


def resource(plural: str, group: str = "") -> Resource:
    return BY_ID[f"{plural}.{group}" if group else plural]


PODS = resource("pods")
NODES = resource("nodes")
NAMESPACES = resource("namespaces")
DEPLOYMENTS = resource("deployments", "apps")
REPLICASETS = resource("replicasets", "apps")
PRIORITY_CLASSES = resource("priorityclasses", "scheduling.k8s.io")
SERVICE_ACCOUNTS = resource("serviceaccounts")
ROLES = resource("roles", "rbac.authorization.k8s.io")
CLUSTER_ROLES = resource("clusterroles", "rbac.authorization.k8s.io")
ROLE_BINDINGS = resource("rolebindings", "rbac.authorization.k8s.io")
CLUSTER_ROLE_BINDINGS = resource("clusterrolebindings", "rbac.authorization.k8s.io")
CORE_EVENTS = resource("events")
EVENTS_V1 = resource("events", "events.k8s.io")

SERVER_VERSION = {
    "major": "1",
    "minor": "36",
    "gitVersion": "v1.36.0-caldera-sim",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2026-01-01T00:00:00Z",
    "goVersion": "go1.25.0",
    "compiler": "gc",
    "platform": "linux/amd64",
}


def _resource_list_entries(r: Resource) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = [
        {
            "name": r.plural,
            "singularName": r.singular,
            "namespaced": r.namespaced,
            "kind": r.kind,
            "verbs": list(r.verbs),
            **({"shortNames": list(r.short_names)} if r.short_names else {}),
            **({"categories": list(r.categories)} if r.categories else {}),
        }
    ]
    for sub in sorted(r.subresources):
        if sub == "status":
            entries.append(
                {
                    "name": f"{r.plural}/status",
                    "singularName": "",
                    "namespaced": r.namespaced,
                    "kind": r.kind,
                    "verbs": ["get", "patch", "update"],
                }
            )
        elif sub == "binding":
            entries.append(
                {
                    "name": f"{r.plural}/binding",
                    "singularName": "",
                    "namespaced": True,
                    "kind": "Binding",
                    "verbs": ["create"],
                }
            )
        elif sub == "eviction":
            entries.append(
                {
                    "name": f"{r.plural}/eviction",
                    "singularName": "",
                    "namespaced": True,
                    "group": "policy",
                    "version": "v1",
                    "kind": "Eviction",
                    "verbs": ["create"],
                }
            )
        elif sub == "scale":
            entries.append(
                {
                    "name": f"{r.plural}/scale",
                    "singularName": "",
                    "namespaced": True,
                    "group": "autoscaling",
                    "version": "v1",
                    "kind": "Scale",
                    "verbs": ["get", "patch", "update"],
                }
            )
        elif sub == "token":
            entries.append(
                {
                    "name": f"{r.plural}/token",
                    "singularName": "",
                    "namespaced": True,
                    "group": "authentication.k8s.io",
                    "version": "v1",
                    "kind": "TokenRequest",
                    "verbs": ["create"],
                }
            )
        elif sub == "finalize":
            entries.append(
                {
                    "name": f"{r.plural}/finalize",
                    "singularName": "",
                    "namespaced": False,
                    "kind": r.kind,
                    "verbs": ["update"],
                }
            )
    return entries


def api_resource_list(
    group: str, version: str, table: dict[tuple[str, str], dict[str, Resource]] | None = None
) -> dict[str, Any] | None:
    kinds = (table or BY_GROUP_VERSION).get((group, version))
    if kinds is None:
        return None
    resources: list[dict[str, Any]] = []
    for r in kinds.values():
        resources.extend(_resource_list_entries(r))
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{group}/{version}" if group else version,
        "resources": resources,
    }


def api_versions() -> dict[str, Any]:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1:0"}],
    }


def _group_doc(group: str, table: dict[tuple[str, str], dict[str, Resource]] | None = None) -> dict[str, Any]:
    versions = [v for (g, v) in (table or BY_GROUP_VERSION) if g == group]
    gvs = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
    return {"name": group, "versions": gvs, "preferredVersion": gvs[0]}


def api_group_list(table: dict[tuple[str, str], dict[str, Resource]] | None = None) -> dict[str, Any]:
    groups = sorted({g for (g, _v) in (table or BY_GROUP_VERSION) if g})
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": [_group_doc(g, table) for g in groups]}


def api_group(
    group: str, table: dict[tuple[str, str], dict[str, Resource]] | None = None
) -> dict[str, Any] | None:
    if not group or not any(g == group for (g, _v) in (table or BY_GROUP_VERSION)):
        return None
    return {"kind": "APIGroup", "apiVersion": "v1", **_group_doc(group, table)}
