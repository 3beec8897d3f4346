"""What a session reads of Dynamic Resource Allocation, as one plain value, and what it hands back.

:class:`DraView` is built by the cache (``cache/dra.py``) and put on the snapshot: the device
classes, the ResourceClaims by ``namespace/name`` (with the allocations the cache assumes for claims
it handed to the binder), the devices held by allocated claims, and an :class:`Inventory` rebuilt only
when ResourceSlices change. Every object in it is immutable and shared between snapshots; sessions
never write into it.

:func:`pod_claims` resolves a pod's ``spec.resourceClaims`` as kube-scheduler's dynamicresources
plugin does (``PreFilter`` -> ``podResourceClaims``, ``resourceclaim.Name`` in
``k8s.io/dynamic-resource-allocation/resourceclaim``): ``resourceClaimName`` names the claim; for a
``resourceClaimTemplateName`` the claim made by the resourceclaim controller is named in the pod's
``status.resourceClaimStatuses`` (until then the pod waits). A claim that does not exist (yet) makes
the pod wait too, with a reason.

:func:`group_claim_keys` finds the claims a pod shares with its ``scheduling.k8s.io/v1alpha2``
PodGroup (KEP-5729, ``keps/sig-scheduling/5729-resourceclaim-support-for-workloads``): a pod entry
equal to one of the PodGroup's ``spec.resourceClaims`` (same name, same ``resourceClaimName`` or
``resourceClaimTemplateName``) uses the group's claim, which is reserved for the PodGroup instead of
the pod, and made from a template once for the group (owned by the PodGroup, named in the pod's
status as in the PodGroup's).

:class:`ClaimAllocation` is what a placement carries to the binder for each of its pod's claims.
"""

from __future__ import annotations

from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from decimal import Decimal

from caldera.framework.dra.allocator import DeviceID, Inventory
from caldera.framework.dra.objects import (
    AllocationResult,
    DeviceClass,
    ResourceClaim,
    ResourceClaimConsumerReference,
)
from caldera.framework.objects import NativePodGroup, Pod, parse_timestamp
from caldera.framework.quantity import QuantityError, parse_quantity

#: ``resourceapi.ResourceClaimReservedForMaxSize``: at most this many consumers of one claim
RESERVED_FOR_MAX_SIZE = 256
#: ``DynamicResourcesArgs.BindingTimeout``'s default (pkg/scheduler/apis/config/v1/defaults.go: 600 s)
BINDING_TIMEOUT = 600.0


@dataclass(frozen=True, slots=True, eq=False)
class DraView:
    inventory: Inventory
    classes: Mapping[str, DeviceClass]
    #: namespace/name -> claim (an assumed allocation and reservation included)
    claims: Mapping[str, ResourceClaim]
    #: devices held by allocated claims (admin-access results excluded: they own nothing); read-only
    #: (the cache hands out ``holders.keys()``: one copy per view)
    allocated: AbstractSet[DeviceID]
    #: moves whenever classes, slices or claims change in the source (0: built by hand)
    revision: int = 0
    #: holder claim of each allocated device, for explanations ("held by default/c0")
    holders: Mapping[DeviceID, str] = field(default_factory=dict)
    #: capacity the shares of each device allowing multiple allocations consume (``AggregatedCapacity``)
    consumed: Mapping[DeviceID, Mapping[str, Decimal]] = field(default_factory=dict)


def allocated_devices(claims: Mapping[str, ResourceClaim]) -> dict[DeviceID, str]:
    """Every device an allocated claim holds, with the claim's key."""
    out: dict[DeviceID, str] = {}
    for key, claim in claims.items():
        allocation = claim.status.allocation
        if allocation is None:
            continue
        for device in held_devices(allocation):
            out[device] = key
    return out


def version_number(version: str) -> int:
    """A resourceVersion as a number, as kube-scheduler's assume cache compares them (-1 when it is
    not one)."""
    try:
        return int(version or "")
    except ValueError:
        return -1


def held_devices(allocation: AllocationResult) -> list[DeviceID]:
    """The devices an allocation holds: a share (shareID) holds capacity, not the device, and an
    admin-access result owns nothing (``foreachAllocatedDevice``)."""
    out = [
        (r.driver, r.pool, r.device)
        for r in allocation.devices.results
        if not r.admin_access and r.share_id is None
    ]
    return out if len(out) < 2 else list(dict.fromkeys(out))


def shared_consumption(claims: Mapping[str, ResourceClaim]) -> dict[DeviceID, dict[str, Decimal]]:
    """What the shares of allocated claims consume, per device (``foreachAllocatedDevice``'s
    ``consumedCapacityCallback`` in kube-scheduler's ``allocateddevices.go``)."""
    out: dict[DeviceID, dict[str, Decimal]] = {}
    for claim in claims.values():
        allocation = claim.status.allocation
        if allocation is None:
            continue
        for r in allocation.devices.results:
            if r.share_id is None or r.admin_access:
                continue
            into = out.setdefault((r.driver, r.pool, r.device), {})
            for name, value in r.consumed_capacity.items():
                try:
                    into[name] = into.get(name, Decimal(0)) + parse_quantity(value)
                except QuantityError:
                    continue
    return out


def pod_claims(pod: Pod) -> tuple[list[str], str]:
    """The ``namespace/name`` of each claim the pod uses, in ``spec.resourceClaims`` order, or ([],
    the reason it must wait) when a template's claim is not named in its status yet."""
    spec = pod.spec
    namespace = pod.metadata.namespace
    out: list[str] = []
    statuses = None
    for entry in spec.resource_claims:
        if entry.resource_claim_name:
            name: str | None = entry.resource_claim_name
        elif entry.resource_claim_template_name:
            if statuses is None:
                statuses = {s.name: s.resource_claim_name for s in pod.status.resource_claim_statuses}
            if entry.name not in statuses:
                return [], (
                    f"waiting for the ResourceClaim of pod claim {entry.name!r} (template "
                    f"{entry.resource_claim_template_name}) to be created"
                )
            name = statuses[entry.name]
            if name is None:
                # The controller decided no claim is needed for this entry (ResourceClaimStatus).
                continue
        else:
            return [], f"pod claim {entry.name!r} names neither a ResourceClaim nor a template"
        key = f"{namespace}/{name}"
        if key not in out:
            out.append(key)
    return out, ""


def template_claims(pod: Pod) -> frozenset[str]:
    """The ``namespace/name`` of the claims the pod's status names for its template entries."""
    templated = {e.name for e in pod.spec.resource_claims if e.resource_claim_template_name}
    if not templated:
        return frozenset()
    namespace = pod.metadata.namespace
    return frozenset(
        f"{namespace}/{s.resource_claim_name}"
        for s in pod.status.resource_claim_statuses
        if s.name in templated and s.resource_claim_name
    )


def is_for_pod(claim: ResourceClaim, pod_uid: str) -> bool:
    """``resourceclaim.IsForPod`` (k8s.io/dynamic-resource-allocation/resourceclaim): the claim's
    controller owner is the pod."""
    return any(ref.controller and ref.uid == pod_uid for ref in claim.metadata.owner_references)


def missing_claim_reason(pod: Pod, claims: Mapping[str, ResourceClaim]) -> str:
    """Why the pod cannot be scheduled yet for want of claims ("" when every claim exists)."""
    keys, reason = pod_claims(pod)
    if reason:
        return reason
    for key in keys:
        claim = claims.get(key)
        if claim is None:
            return f"waiting for ResourceClaim {key} to be created"
        if claim.metadata.deletion_timestamp:
            return f"ResourceClaim {key} is being deleted"
    return ""


def same_devices(a: AllocationResult, b: AllocationResult) -> bool:
    """Whether two allocations hand out the same devices (for the same requests)."""

    def devices(x: AllocationResult) -> set[tuple[str, str, str, str]]:
        return {(r.request, r.driver, r.pool, r.device) for r in x.devices.results}

    return devices(a) == devices(b)


def reserved_for(claim: ResourceClaim, consumer_uid: str) -> bool:
    """Whether the claim is reserved for the consumer (a pod, or a PodGroup) of this uid."""
    return any(ref.uid == consumer_uid for ref in claim.status.reserved_for)


def group_claim_keys(pod: Pod, group: NativePodGroup | None) -> frozenset[str]:
    """The ``namespace/name`` of the pod's claims that are its PodGroup's (KEP-5729 "Pod": the pod's
    ``spec.resourceClaims`` entry equals one of the group's ``spec.resourceClaims`` in name,
    ``resourceClaimName`` and ``resourceClaimTemplateName``); a template entry's claim is the one the
    pod's status names, else the one the PodGroup's ``status.resourceClaimStatuses`` names."""
    if group is None or not group.spec.resource_claims or not pod.spec.resource_claims:
        return frozenset()
    namespace = pod.metadata.namespace
    if group.metadata.namespace != namespace:
        return frozenset()
    shared = set(group.spec.resource_claims)
    named = {s.name: s.resource_claim_name for s in group.status.resource_claim_statuses}
    named.update({s.name: s.resource_claim_name for s in pod.status.resource_claim_statuses})
    out: set[str] = set()
    for entry in pod.spec.resource_claims:
        if entry not in shared:
            continue
        name = entry.resource_claim_name or named.get(entry.name)
        if name:
            out.add(f"{namespace}/{name}")
    return frozenset(out)


@dataclass(frozen=True, slots=True)
class Consumer:
    """A ``reservedFor`` entry other than the pod itself: the PodGroup a group's claim is reserved
    for (KEP-5729: ``apiGroup: scheduling.k8s.io``, ``resource: podgroups``)."""

    api_group: str
    resource: str
    name: str
    uid: str

    def reference(self) -> ResourceClaimConsumerReference:
        """Its ``reservedFor`` entry."""
        return ResourceClaimConsumerReference(
            api_group=self.api_group, resource=self.resource, name=self.name, uid=self.uid
        )


@dataclass(frozen=True, slots=True)
class ClaimAllocation:
    """One claim of a placed pod: the allocation it must hold when the pod is bound (allocated in
    this session when ``new``, else the one it had) and whom to reserve it for: the pod, or
    ``consumer`` (the pod's PodGroup, for a claim of the group)."""

    namespace: str
    name: str
    uid: str
    allocation: AllocationResult
    new: bool
    consumer: Consumer | None = None

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


def has_binding_conditions(allocation: AllocationResult) -> bool:
    """``hasBindingConditions`` (dynamicresources.go): some device of the allocation must see its
    binding conditions true before the pod is bound."""
    return any(r.binding_conditions for r in allocation.devices.results)


def binding_state(claim: ResourceClaim) -> bool | str:
    """``isClaimReadyForBinding`` (pkg/scheduler/framework/plugins/dynamicresources/dynamicresources.go):
    True when every binding condition of every allocated device is True in the claim's
    ``status.devices`` entry for it (matched by driver, pool and device, ``getAllocatedDeviceStatus``),
    False while one is not yet; the reason when a binding failure condition is True."""
    allocation = claim.status.allocation
    if allocation is None:
        return False
    for r in allocation.devices.results:
        if not r.binding_conditions:
            continue
        status = next(
            (d for d in claim.status.devices if (d.driver, d.pool, d.device) == (r.driver, r.pool, r.device)),
            None,
        )
        if status is None:
            return False
        conditions = {c.type: c for c in status.conditions}
        for name in r.binding_failure_conditions:
            failed = conditions.get(name)
            if failed is not None and failed.status == "True":
                return (
                    f"claim {claim.metadata.name} binding failed: reason={failed.reason}, "
                    f"message={failed.message!r}"
                )
        if any(
            conditions.get(name) is None or conditions[name].status != "True" for name in r.binding_conditions
        ):
            return False
    return True


def binding_timed_out(claim: ResourceClaim, now: float, timeout: float = BINDING_TIMEOUT) -> bool:
    """``isClaimTimeout`` (dynamicresources.go): the claim's allocation has a device with binding
    conditions and was made (``allocationTimestamp``) more than ``timeout`` seconds before ``now``
    (seconds since the epoch). An allocation without a timestamp never times out."""
    allocation = claim.status.allocation
    if allocation is None or not has_binding_conditions(allocation):
        return False
    made = parse_timestamp(allocation.allocation_timestamp)
    return made > 0 and made + timeout < now


def binding_blocked(claim: ResourceClaim, now: float, timeout: float = BINDING_TIMEOUT) -> str:
    """Why an allocated claim cannot be used until it is allocated anew ("" when it can): kube-scheduler's
    ``Filter`` counts such a claim as unavailable on every node (``isClaimReadyForBinding`` reports a
    binding failure condition, or the claim is not ready and ``isClaimTimeout``); its ``PostFilter``
    then deallocates it, which Caldera leaves to the claim's owner (README)."""
    if claim.status.allocation is None or not has_binding_conditions(claim.status.allocation):
        return ""
    state = binding_state(claim)
    if isinstance(state, str):
        return state
    if not state and binding_timed_out(claim, now, timeout):
        return f"claim {claim.metadata.name} binding timeout"
    return ""
