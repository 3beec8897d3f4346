"""Lean, typed views of the Kubernetes objects the scheduler reads, decoded with msgspec.

Only the fields Caldera uses are declared; everything else on the wire is ignored. A malformed
object raises :class:`ObjectError` (which names the kind and, when it can, the object), never
anything else, so callers can log it and skip the object.
"""

from __future__ import annotations

from datetime import datetime
from functools import lru_cache
from typing import Any, TypeVar

import msgspec

Quantity = str | int | float
ResourceList = dict[str, Quantity]


class ObjectError(ValueError):
    """A Kubernetes object that cannot be decoded; the message names the kind and the object."""


class _Base(msgspec.Struct, rename="camel", omit_defaults=True, frozen=True, gc=False):
    """``gc=False``: decoded objects are frozen trees of strings, numbers, lists and dicts, never part
    of a reference cycle, so the cyclic collector need not track them (with a cache of 100,000 pods,
    walking them was a third of the cost of decoding a watch event)."""


class OwnerReference(_Base, frozen=True):
    kind: str = ""
    name: str = ""
    uid: str = ""
    api_version: str = ""
    controller: bool = False


class ObjectMeta(_Base, frozen=True):
    name: str = ""
    namespace: str = ""
    uid: str = ""
    resource_version: str = ""
    generation: int = 0
    creation_timestamp: str | None = None
    deletion_timestamp: str | None = None
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}
    owner_references: list[OwnerReference] = []
    finalizers: list[str] = []


# --- pods ------------------------------------------------------------------------------------------
class ResourceRequirements(_Base, frozen=True):
    requests: ResourceList = {}
    limits: ResourceList = {}


class ContainerPort(_Base, frozen=True):
    container_port: int = 0
    host_port: int = 0
    protocol: str = "TCP"
    host_ip: str = ""


class Container(_Base, frozen=True):
    name: str = ""
    resources: ResourceRequirements = ResourceRequirements()
    ports: list[ContainerPort] = []
    #: "Always" on an init container: a sidecar, running beside the containers (the usage plugin's
    #: estimate adds its requests and limits, as Volcano's ``aggregateAllContainerResource*`` do)
    restart_policy: str = ""


class NodeSelectorRequirement(_Base, frozen=True):
    key: str = ""
    operator: str = "In"
    values: list[str] = []


class NodeSelectorTerm(_Base, frozen=True):
    match_expressions: list[NodeSelectorRequirement] = []
    match_fields: list[NodeSelectorRequirement] = []


class NodeSelector(_Base, frozen=True):
    node_selector_terms: list[NodeSelectorTerm] = []


class PreferredSchedulingTerm(_Base, frozen=True):
    weight: int = 0
    preference: NodeSelectorTerm = NodeSelectorTerm()


class NodeAffinity(_Base, frozen=True):
    required_during_scheduling_ignored_during_execution: NodeSelector | None = None
    preferred_during_scheduling_ignored_during_execution: list[PreferredSchedulingTerm] = []


class LabelSelectorRequirement(_Base, frozen=True):
    key: str = ""
    operator: str = "In"
    values: list[str] = []


class LabelSelector(_Base, frozen=True):
    match_labels: dict[str, str] = {}
    match_expressions: list[LabelSelectorRequirement] = []


class PodAffinityTerm(_Base, frozen=True):
    label_selector: LabelSelector | None = None
    namespaces: list[str] = []
    topology_key: str = ""


class WeightedPodAffinityTerm(_Base, frozen=True):
    weight: int = 0
    pod_affinity_term: PodAffinityTerm = PodAffinityTerm()


class PodAffinity(_Base, frozen=True):
    required_during_scheduling_ignored_during_execution: list[PodAffinityTerm] = []
    preferred_during_scheduling_ignored_during_execution: list[WeightedPodAffinityTerm] = []


class Affinity(_Base, frozen=True):
    node_affinity: NodeAffinity | None = None
    pod_affinity: PodAffinity | None = None
    pod_anti_affinity: PodAffinity | None = None


class Toleration(_Base, frozen=True):
    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""
    toleration_seconds: int | None = None


class PodSchedulingGate(_Base, frozen=True):
    name: str = ""


class TopologySpreadConstraint(_Base, frozen=True):
    max_skew: int = 1
    topology_key: str = ""
    when_unsatisfiable: str = "DoNotSchedule"
    label_selector: LabelSelector | None = None
    min_domains: int | None = None
    node_affinity_policy: str | None = None
    node_taints_policy: str | None = None
    match_label_keys: list[str] = []


class PersistentVolumeClaimVolumeSource(_Base, frozen=True):
    claim_name: str = ""
    read_only: bool = False


class Volume(_Base, frozen=True):
    name: str = ""
    persistent_volume_claim: PersistentVolumeClaimVolumeSource | None = None


class PodResourceClaim(_Base, frozen=True):
    """``spec.resourceClaims[]``: at most one of the two sources is set (the API server checks it)."""

    name: str = ""
    resource_claim_name: str | None = None
    resource_claim_template_name: str | None = None


class PodResourceClaimStatus(_Base, frozen=True):
    """``status.resourceClaimStatuses[]``: the claim the resourceclaim controller made from a template."""

    name: str = ""
    resource_claim_name: str | None = None


class PodSchedulingGroup(_Base, frozen=True):
    """``spec.schedulingGroup`` (Kubernetes 1.36, GenericWorkload): the ``scheduling.k8s.io/v1alpha2``
    PodGroup of the pod's namespace it belongs to (immutable; the group may not exist yet)."""

    pod_group_name: str = ""


class PodSpec(_Base, frozen=True):
    node_name: str = ""
    scheduler_name: str = "default-scheduler"
    priority: int | None = None
    priority_class_name: str = ""
    #: admission copies it from the PriorityClass; "Never": the pod never preempts (issue 14)
    preemption_policy: str = ""
    node_selector: dict[str, str] = {}
    affinity: Affinity | None = None
    tolerations: list[Toleration] = []
    containers: list[Container] = []
    init_containers: list[Container] = []
    overhead: ResourceList = {}
    host_network: bool = False
    scheduling_gates: list[PodSchedulingGate] = []
    topology_spread_constraints: list[TopologySpreadConstraint] = []
    volumes: list[Volume] = []
    resource_claims: list[PodResourceClaim] = []
    scheduling_group: PodSchedulingGroup | None = None


class PodCondition(_Base, frozen=True):
    type: str = ""
    status: str = ""
    reason: str = ""
    message: str = ""
    #: RFC 3339 (the cdp plugin reads PodScheduled's: when the pod started for its cooldown)
    last_transition_time: str | None = None


class PodStatus(_Base, frozen=True):
    phase: str = "Pending"
    #: the API server's QoS class (the numa-aware plugin reads it, as k8s's qos.GetPodQOS)
    qos_class: str = ""
    conditions: list[PodCondition] = []
    nominated_node_name: str = ""
    resource_claim_statuses: list[PodResourceClaimStatus] = []
    #: RFC 3339, when the kubelet started the pod (the usage plugin: a pod started within the
    #: metrics interval is not in the measured load yet)
    start_time: str | None = None


class Pod(_Base, frozen=True):
    metadata: ObjectMeta = ObjectMeta()
    spec: PodSpec = PodSpec()
    status: PodStatus = PodStatus()


# --- nodes -----------------------------------------------------------------------------------------
class Taint(_Base, frozen=True):
    key: str = ""
    value: str = ""
    effect: str = ""


class NodeSpec(_Base, frozen=True):
    unschedulable: bool = False
    taints: list[Taint] = []


class NodeCondition(_Base, frozen=True):
    type: str = ""
    status: str = ""
    reason: str = ""


class NodeStatus(_Base, frozen=True):
    capacity: ResourceList = {}
    allocatable: ResourceList = {}
    conditions: list[NodeCondition] = []


class Node(_Base, frozen=True):
    metadata: ObjectMeta = ObjectMeta()
    spec: NodeSpec = NodeSpec()
    status: NodeStatus = NodeStatus()


# --- Volcano: PodGroup, Queue, HyperNode -------------------------------------------------------------
class NetworkTopologySpec(_Base, frozen=True):
    mode: str = "hard"
    highest_tier_allowed: int | None = None
    #: a HyperNode ``spec.tierName``: the tier it names stands for ``highestTierAllowed`` when that
    #: is unset (framework/topology.py ``tier_allowed``)
    highest_tier_name: str = ""


class SubGroupPolicySpec(_Base, frozen=True):
    """One entry of a PodGroup's ``spec.subGroupPolicy`` (Volcano 1.14's multi-level gang;
    volcano.sh/apis pkg/apis/scheduling/v1beta1/types.go ``SubGroupPolicySpec``). Unset sizes are
    None here: the CRD's defaults (subGroupSize 1, minSubGroups 0) are applied where Volcano's
    scheduler applies them (framework/subjobs.py)."""

    name: str = ""
    network_topology: NetworkTopologySpec | None = None
    sub_group_size: int | None = None
    min_sub_groups: int | None = None
    label_selector: LabelSelector | None = None
    match_label_keys: list[str] = []


class PodGroupSpec(_Base, frozen=True):
    min_member: int = 1
    min_task_member: dict[str, int] = {}
    queue: str = ""
    priority_class_name: str = ""
    min_resources: ResourceList | None = None
    network_topology: NetworkTopologySpec | None = None
    sub_group_policy: list[SubGroupPolicySpec] = []


class PodGroupCondition(_Base, frozen=True):
    type: str = ""
    status: str = ""
    reason: str = ""
    message: str = ""
    transition_id: str = ""
    last_transition_time: str | None = None


class PodGroupStatus(_Base, frozen=True):
    phase: str = ""
    conditions: list[PodGroupCondition] = []
    running: int = 0
    succeeded: int = 0
    failed: int = 0


class PodGroup(_Base, frozen=True):
    metadata: ObjectMeta = ObjectMeta()
    spec: PodGroupSpec = PodGroupSpec()
    status: PodGroupStatus = PodGroupStatus()


class Guarantee(_Base, frozen=True):
    resource: ResourceList = {}


class NodeGroupAffinity(_Base, frozen=True):
    """Node groups (the ``volcano.sh/nodegroup-name`` node label's values) a queue's pods must or
    should run in (Volcano's scheduling/v1beta1 ``NodeGroupAffinity``); ``NodeGroupAntiAffinity``
    has the same two lists for the groups they must or should avoid."""

    required_during_scheduling_ignored_during_execution: list[str] = []
    preferred_during_scheduling_ignored_during_execution: list[str] = []


class QueueAffinity(_Base, frozen=True):
    """A Queue's ``spec.affinity`` (Volcano's v1beta1 ``Affinity``), read by the nodegroup plugin."""

    node_group_affinity: NodeGroupAffinity | None = None
    node_group_anti_affinity: NodeGroupAffinity | None = None


class QueueSpec(_Base, frozen=True):
    weight: int = 1
    capability: ResourceList = {}
    deserved: ResourceList = {}
    guarantee: Guarantee = Guarantee()
    reclaimable: bool | None = None
    parent: str = ""
    priority: int = 0
    #: the desired state the queue controller acts on ("" or "Open", or "Closed")
    state: str = ""
    #: None when the queue sets none (then, with enableHierarchy, it inherits its nearest ancestor's)
    affinity: QueueAffinity | None = None


class QueueStatus(_Base, frozen=True):
    state: str = ""
    pending: int = 0
    running: int = 0
    inqueue: int = 0
    unknown: int = 0
    completed: int = 0


class Queue(_Base, frozen=True):
    metadata: ObjectMeta = ObjectMeta()
    spec: QueueSpec = QueueSpec()
    status: QueueStatus = QueueStatus()


class PriorityClass(_Base, frozen=True):
    metadata: ObjectMeta = ObjectMeta()
    value: int = 0
    global_default: bool = False
    preemption_policy: str = "PreemptLowerPriority"


class ExactMatch(_Base, frozen=True):
    name: str = ""


class RegexMatch(_Base, frozen=True):
    pattern: str = ""


class LabelMatch(_Base, frozen=True):
    match_labels: dict[str, str] = {}


class MemberSelector(_Base, frozen=True):
    exact_match: ExactMatch | None = None
    regex_match: RegexMatch | None = None
    label_match: LabelMatch | None = None


class HyperNodeMember(_Base, frozen=True):
    type: str = "Node"
    selector: MemberSelector = MemberSelector()


class HyperNodeSpec(_Base, frozen=True):
    tier: int = 1
    #: the tier's name, which a PodGroup's ``networkTopology.highestTierName`` refers to
    tier_name: str = ""
    members: list[HyperNodeMember] = []


class HyperNode(_Base, frozen=True):
    metadata: ObjectMeta = ObjectMeta()
    spec: HyperNodeSpec = HyperNodeSpec()


# --- policy/v1 PodDisruptionBudget -----------------------------------------------------------------
class PodDisruptionBudgetSpec(_Base, frozen=True):
    selector: LabelSelector | None = None
    min_available: int | str | None = None
    max_unavailable: int | str | None = None


class PodDisruptionBudgetStatus(_Base, frozen=True):
    disruptions_allowed: int = 0
    current_healthy: int = 0
    desired_healthy: int = 0
    expected_pods: int = 0
    disrupted_pods: dict[str, str] = {}
    observed_generation: int = 0


class PodDisruptionBudget(_Base, frozen=True):
    metadata: ObjectMeta = ObjectMeta()
    spec: PodDisruptionBudgetSpec = PodDisruptionBudgetSpec()
    status: PodDisruptionBudgetStatus = PodDisruptionBudgetStatus()


# --- v1 ResourceQuota --------------------------------------------------------------------------------
class ResourceQuotaSpec(_Base, frozen=True):
    hard: ResourceList = {}


class ResourceQuotaStatus(_Base, frozen=True):
    """What the quota controller reports: ``hard`` as it enforces it, ``used`` as it counted."""

    hard: ResourceList = {}
    used: ResourceList = {}


class ResourceQuota(_Base, frozen=True):
    metadata: ObjectMeta = ObjectMeta()
    spec: ResourceQuotaSpec = ResourceQuotaSpec()
    status: ResourceQuotaStatus = ResourceQuotaStatus()


# --- storage: PersistentVolumeClaim, PersistentVolume, StorageClass, CSINode --------------------------
class PersistentVolumeClaimSpec(_Base, frozen=True):
    storage_class_name: str | None = None
    volume_name: str = ""


class PersistentVolumeClaimStatus(_Base, frozen=True):
    phase: str = "Pending"


class PersistentVolumeClaim(_Base, frozen=True):
    metadata: ObjectMeta = ObjectMeta()
    spec: PersistentVolumeClaimSpec = PersistentVolumeClaimSpec()
    status: PersistentVolumeClaimStatus = PersistentVolumeClaimStatus()


class VolumeNodeAffinity(_Base, frozen=True):
    required: NodeSelector | None = None


class CSIPersistentVolumeSource(_Base, frozen=True):
    driver: str = ""
    volume_handle: str = ""


class ObjectReference(_Base, frozen=True):
    kind: str = ""
    namespace: str = ""
    name: str = ""
    uid: str = ""


class PersistentVolumeSpec(_Base, frozen=True):
    storage_class_name: str = ""
    node_affinity: VolumeNodeAffinity | None = None
    csi: CSIPersistentVolumeSource | None = None
    claim_ref: ObjectReference | None = None


class PersistentVolumeStatus(_Base, frozen=True):
    phase: str = "Pending"


class PersistentVolume(_Base, frozen=True):
    metadata: ObjectMeta = ObjectMeta()
    spec: PersistentVolumeSpec = PersistentVolumeSpec()
    status: PersistentVolumeStatus = PersistentVolumeStatus()


class TopologySelectorLabelRequirement(_Base, frozen=True):
    key: str = ""
    values: list[str] = []


class TopologySelectorTerm(_Base, frozen=True):
    match_label_expressions: list[TopologySelectorLabelRequirement] = []


class StorageClass(_Base, frozen=True):
    metadata: ObjectMeta = ObjectMeta()
    provisioner: str = ""
    volume_binding_mode: str = "Immediate"
    allowed_topologies: list[TopologySelectorTerm] = []


class VolumeNodeResources(_Base, frozen=True):
    count: int | None = None


class CSINodeDriver(_Base, frozen=True):
    name: str = ""
    node_id: str = ""
    allocatable: VolumeNodeResources | None = None


class CSINodeSpec(_Base, frozen=True):
    drivers: list[CSINodeDriver] = []


class CSINode(_Base, frozen=True):
    metadata: ObjectMeta = ObjectMeta()
    spec: CSINodeSpec = CSINodeSpec()


# --- Kubernetes' own gang API: scheduling.k8s.io/v1alpha2 PodGroup and Workload ---------------------
class GangSchedulingPolicy(_Base, frozen=True):
    min_count: int = 0


class BasicSchedulingPolicy(_Base, frozen=True):
    pass


class PodGroupSchedulingPolicy(_Base, frozen=True):
    """Exactly one of ``basic`` (independent pods) and ``gang`` (all-or-nothing from ``minCount``)."""

    basic: BasicSchedulingPolicy | None = None
    gang: GangSchedulingPolicy | None = None


class TopologyConstraint(_Base, frozen=True):
    """One ``schedulingConstraints.topology[]`` entry: a node label key; the whole group goes inside
    one domain (one value) of it. ``topologyKey`` is the spelling of kubernetes/kubernetes'
    staging/src/k8s.io/api/scheduling/v1alpha2/types.go ``TopologyConstraint``; ``key`` the one a
    1.36 server served (../shared/KUBE-FACTS.md). Either is read."""

    key: str = ""
    topology_key: str = ""

    @property
    def label_key(self) -> str:
        return self.key or self.topology_key


class PodGroupSchedulingConstraints(_Base, frozen=True):
    topology: list[TopologyConstraint] = []
    #: types.go's spelling of the same list
    topology_constraints: list[TopologyConstraint] = []

    def keys(self) -> tuple[str, ...]:
        out: list[str] = []
        for c in (*self.topology, *self.topology_constraints):
            if c.label_key and c.label_key not in out:
                out.append(c.label_key)
        return tuple(out)


class WorkloadPodGroupTemplateReference(_Base, frozen=True):
    workload_name: str = ""
    pod_group_template_name: str = ""


class PodGroupTemplateReference(_Base, frozen=True):
    """``spec.podGroupTemplateRef``: ``{workload: {workloadName, podGroupTemplateName}}`` (newer
    types.go), or the two names flat (older)."""

    workload: WorkloadPodGroupTemplateReference | None = None
    workload_name: str = ""
    pod_group_template_name: str = ""

    def names(self) -> tuple[str, str]:
        if self.workload is not None:
            return self.workload.workload_name, self.workload.pod_group_template_name
        return self.workload_name, self.pod_group_template_name


#: ``spec.disruptionMode`` values (types.go ``DisruptionMode``, KEP-5710): pods are disrupted one by
#: one (the default when unset), or the whole group together
DISRUPTION_MODE_POD = "Pod"
DISRUPTION_MODE_POD_GROUP = "PodGroup"


class NativePodGroupSpec(_Base, frozen=True):
    pod_group_template_ref: PodGroupTemplateReference | None = None
    scheduling_policy: PodGroupSchedulingPolicy | None = None
    scheduling_constraints: PodGroupSchedulingConstraints | None = None
    priority_class_name: str = ""
    priority: int | None = None
    #: ``Pod`` (default) or ``PodGroup`` (KEP-5710 workload-aware preemption)
    disruption_mode: str = ""
    #: ``PodGroupResourceClaim`` (KEP-5729): the same shape as a pod's ``spec.resourceClaims[]``; a
    #: pod entry equal to one of these uses the group's claim, reserved for the group
    resource_claims: list[PodResourceClaim] = []


class Condition(_Base, frozen=True):
    """metav1.Condition."""

    type: str = ""
    status: str = ""
    reason: str = ""
    message: str = ""
    observed_generation: int = 0
    last_transition_time: str | None = None


class NativePodGroupStatus(_Base, frozen=True):
    conditions: list[Condition] = []
    #: ``PodGroupResourceClaimStatus`` (KEP-5729): the claim the resourceclaim controller made from
    #: a template for each template entry of ``spec.resourceClaims``
    resource_claim_statuses: list[PodResourceClaimStatus] = []


class NativePodGroup(_Base, frozen=True):
    """A ``scheduling.k8s.io/v1alpha2`` PodGroup (Kubernetes' own, KEP-4671 / KEP-5832)."""

    metadata: ObjectMeta = ObjectMeta()
    spec: NativePodGroupSpec = NativePodGroupSpec()
    status: NativePodGroupStatus = NativePodGroupStatus()


class PodGroupTemplate(_Base, frozen=True):
    name: str = ""
    scheduling_policy: PodGroupSchedulingPolicy | None = None
    scheduling_constraints: PodGroupSchedulingConstraints | None = None
    disruption_mode: str = ""
    #: ``PodGroupTemplate.resourceClaims`` (KEP-5729): what a PodGroup made from the template carries
    #: in its own ``spec.resourceClaims`` (a copy, KEP-5832); never used in their place
    resource_claims: list[PodResourceClaim] = []


class WorkloadSpec(_Base, frozen=True):
    pod_group_templates: list[PodGroupTemplate] = []


class Workload(_Base, frozen=True):
    """A ``scheduling.k8s.io/v1alpha2`` Workload: the templates its PodGroups are made from."""

    metadata: ObjectMeta = ObjectMeta()
    spec: WorkloadSpec = WorkloadSpec()


# --- decoding --------------------------------------------------------------------------------------
T = TypeVar("T", bound=_Base)

KINDS: dict[str, type[_Base]] = {
    "Pod": Pod,
    "Node": Node,
    "PodGroup": PodGroup,
    "Queue": Queue,
    "PriorityClass": PriorityClass,
    "HyperNode": HyperNode,
    "PodDisruptionBudget": PodDisruptionBudget,
    "ResourceQuota": ResourceQuota,
    "PersistentVolumeClaim": PersistentVolumeClaim,
    "PersistentVolume": PersistentVolume,
    "StorageClass": StorageClass,
    "CSINode": CSINode,
    "NativePodGroup": NativePodGroup,
    "Workload": Workload,
}

_decoders: dict[type, msgspec.json.Decoder[Any]] = {}


def decode(kind: type[T], raw: bytes | str) -> T:
    """Decode one object from JSON; :class:`ObjectError` on anything malformed."""
    decoder = _decoders.get(kind)
    if decoder is None:
        decoder = _decoders[kind] = msgspec.json.Decoder(kind)
    try:
        return decoder.decode(raw)  # type: ignore[no-any-return]
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise ObjectError(f"malformed {kind.__name__} {_name_hint(raw)}: {exc}") from None


def convert(kind: type[T], obj: Any) -> T:
    """Convert an already-parsed JSON object (dict) into ``kind``; :class:`ObjectError` on failure."""
    try:
        return msgspec.convert(obj, kind)
    except (msgspec.ValidationError, TypeError) as exc:
        name = ""
        if isinstance(obj, dict) and isinstance(obj.get("metadata"), dict):
            meta = obj["metadata"]
            name = f"{meta.get('namespace', '')}/{meta.get('name', '')}".lstrip("/")
        raise ObjectError(f"malformed {kind.__name__} {name or '(unnamed)'}: {exc}") from None


def _name_hint(raw: bytes | str) -> str:
    try:
        obj = msgspec.json.decode(raw)
        meta = obj.get("metadata", {}) if isinstance(obj, dict) else {}
        return f"{meta.get('namespace', '')}/{meta.get('name', '')}".lstrip("/") or "(unnamed)"
    except Exception:
        return "(undecodable)"


def encode(obj: _Base) -> bytes:
    return msgspec.json.encode(obj)


@lru_cache(maxsize=65536)
def parse_timestamp(value: str | None) -> float:
    """RFC 3339 to seconds since the epoch; 0.0 for a missing or unreadable timestamp."""
    if not value:
        return 0.0
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0


def pod_key(pod: Pod) -> str:
    return f"{pod.metadata.namespace}/{pod.metadata.name}"
