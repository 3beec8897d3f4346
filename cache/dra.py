"""Dynamic Resource Allocation in the cache: DeviceClasses, ResourceSlices and ResourceClaims
(``resource.k8s.io/v1``) as the watches bring them, the claim allocations assumed for placements
handed to the binder, and the session's view of them (``framework.dra.view.DraView``).

The view is rebuilt only when one of the three kinds (or an assumption) changed since the last one,
and its :class:`Inventory` only when slices changed: a cluster without DRA objects, or whose objects
stand still, pays nothing per snapshot. Every object in a view is immutable (decoded structs,
replaced never changed), so views share them.

An assumed allocation (``assume_claims``, from ``cache.apply``) stands for the claim until the watch
shows our write of it, or the binder gives the placement up (``forget_claims``): the next snapshot
never hands the same devices out again in between. While the binder still has the placement, no watch
event takes the assumption's place: the events of an earlier attempt at the same claim (allocated,
then deallocated when that pod's binding failed) may arrive after the claim was assumed again, and
the deallocation would otherwise leave the devices free while the second attempt writes them. Once
the binder wrote the claim (``claim_written``: the resourceVersion its answer carried) the watch's
copy replaces the assumption from that version on, as kube-scheduler's assume cache does
(``AssumeClaimAfterAPICall`` in ``pkg/scheduler/framework/plugins/dynamicresources/``, with its
in-flight allocations kept from Reserve to PreBind: ``SignalClaimPendingAllocation``,
``RemoveClaimPendingAllocation``).
"""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

from caldera.cache.indexes import Indexes
from caldera.framework.dra.allocator import DeviceID, Inventory
from caldera.framework.dra.objects import (
    DeviceClass,
    ResourceClaim,
    ResourceClaimConsumerReference,
    ResourceClaimStatus,
    ResourceSlice,
)
from caldera.framework.dra.view import (
    ClaimAllocation,
    DraView,
    held_devices,
    shared_consumption,
    version_number,
)


def _key(meta: object) -> str:
    namespace = getattr(meta, "namespace", "")
    name = getattr(meta, "name", "")
    return f"{namespace}/{name}" if namespace else name


def _same_for_decisions(before: ResourceClaim, after: ResourceClaim) -> bool:
    """Whether two versions of a claim are the same to every decision made with it: the same claim
    (uid, owners, not being deleted or deleted alike), the same request (spec) and the same status
    (allocation, consumers, device conditions); its finalizers, labels and resourceVersion aside."""
    b, a = before.metadata, after.metadata
    return (
        b.uid == a.uid
        and b.deletion_timestamp == a.deletion_timestamp
        and b.owner_references == a.owner_references
        and before.spec == after.spec
        and before.status == after.status
    )


class DraCache(Indexes):
    """The DRA kinds' watch handlers, the assumed allocations and the view (module docstring)."""

    def _dra_changed(
        self, slices: bool = False, claims: Iterable[str] = (), waits: dict[str, int] | None = None
    ) -> None:
        """Something DRA changed; ``claims``: the keys of claims (watched or assumed) that did;
        ``waits``: their :meth:`_claim_presence` before the change."""
        self._claims_changed.update(claims)
        self.revision += 1
        self._dra_revision += 1
        if slices:
            self._dra_slices_revision += 1
        if waits and self._claim_pods:
            presence = self._claim_presence
            if any(presence(key) != was for key, was in waits.items()):
                # a pod waiting for a claim may wait no more (or start to): problems() looks again
                self._problems_revision += 1

    def _claim_presence(self, key: str) -> int:
        """All that ``problems()`` reads of a claim (``missing_claim_reason`` over the watched claims
        with the assumed ones laid over them): 0 missing, 1 there, 2 being deleted. A change that
        moves none of these (an allocation, a reservation, a finalizer, a status) leaves every pod's
        wait as it was, and the problems are not looked at again for it."""
        claim = self._assumed_claims.get(key) or self.resource_claims.get(key)
        if claim is None:
            return 0
        return 2 if claim.metadata.deletion_timestamp else 1

    # -- watch handlers ------------------------------------------------------------------------------
    def upsert_device_class(self, obj: DeviceClass) -> None:
        with self._lock:
            self.device_classes[obj.metadata.name] = obj
            self._dra_changed()

    def delete_device_class(self, obj: DeviceClass) -> None:
        with self._lock:
            self.device_classes.pop(obj.metadata.name, None)
            self._dra_changed()

    def upsert_resource_slice(self, obj: ResourceSlice) -> None:
        with self._lock:
            self.resource_slices[obj.metadata.name] = obj
            self._dra_changed(slices=True)

    def delete_resource_slice(self, obj: ResourceSlice) -> None:
        with self._lock:
            self.resource_slices.pop(obj.metadata.name, None)
            self._dra_changed(slices=True)

    def upsert_resource_claim(self, obj: ResourceClaim) -> None:
        with self._lock:
            key = _key(obj.metadata)
            waits = {key: self._claim_presence(key)}
            assumed = self._assumed_claims.get(key)
            before = assumed if assumed is not None else self.resource_claims.get(key)
            self.resource_claims[key] = obj
            if assumed is not None and self._caught_up(key, assumed, obj):
                # Our write come back (or a later version), or a new claim under the name: the API's
                # word replaces the assumption.
                del self._assumed_claims[key]
                self._claims_written_at.pop(key, None)
            self._dra_changed(claims=(key,), waits=waits)
            after = self._assumed_claims.get(key, obj)
            if before is not None and _same_for_decisions(before, after):
                # The binder's own writes coming back (the finalizer; the allocation and reservation
                # the cache already assumed): nothing a cycle decides by moved, so the loop may go on
                # skipping periods (``decision_revision``)
                self._settled_changes += 1

    def delete_resource_claim(self, obj: ResourceClaim) -> None:
        with self._lock:
            key = _key(obj.metadata)
            current = self.resource_claims.get(key)
            if current is not None and obj.metadata.uid and current.metadata.uid != obj.metadata.uid:
                return
            waits = {key: self._claim_presence(key)}
            self.resource_claims.pop(key, None)
            self._assumed_claims.pop(key, None)
            self._claims_written_at.pop(key, None)
            self._dra_changed(claims=(key,), waits=waits)

    def _caught_up(self, key: str, assumed: ResourceClaim, watched: ResourceClaim) -> bool:
        """Whether the watch's copy of a claim takes the place of its assumption: a new claim under
        the name; else never while a placement that assumed it is with the binder; after that, from
        the version our write returned on (without one, when the copy shows the claim allocated)."""
        if watched.metadata.uid != assumed.metadata.uid:
            return True
        if self._claims_in_flight.get(key):
            return False
        written = self._claims_written_at.get(key)
        if written is None:
            return watched.status.allocation is not None
        return version_number(watched.metadata.resource_version) >= written

    # -- assumptions ---------------------------------------------------------------------------------
    def assume_claims(self, pod_name: str, pod_uid: str, claims: list[ClaimAllocation]) -> None:
        """The placement's claims as the binder will write them: allocated, reserved for the pod (or
        for its PodGroup, for a claim of the group: ``ClaimAllocation.consumer``)."""
        with self._lock:
            for ca in claims:
                current = self._assumed_claims.get(ca.key) or self.resource_claims.get(ca.key)
                if current is None or current.metadata.uid != ca.uid:
                    continue
                status = current.status
                reserved = list(status.reserved_for)
                consumer = ca.consumer
                uid = consumer.uid if consumer is not None else pod_uid
                if not any(r.uid == uid for r in reserved):
                    reserved.append(
                        consumer.reference()
                        if consumer is not None
                        else ResourceClaimConsumerReference(resource="pods", name=pod_name, uid=pod_uid)
                    )
                allocation = status.allocation if status.allocation is not None else ca.allocation
                self._assumed_claims[ca.key] = msgspec.structs.replace(
                    current, status=ResourceClaimStatus(allocation=allocation, reserved_for=reserved)
                )
                self._claims_assumed_by.setdefault(pod_uid, []).append((ca.key, uid))
                self._claims_in_flight[ca.key] = self._claims_in_flight.get(ca.key, 0) + 1
                self._claims_written_at.pop(ca.key, None)  # this attempt's write is still to come
            if claims:
                self._dra_changed(claims=[ca.key for ca in claims])

    def forget_claims(self, pod_uid: str) -> None:
        """The pod's placement was given up: its reservation goes from the assumed claims (a group's
        reservation once no other pod assumed with it is left), and an allocation assumed only for it
        goes too."""
        with self._lock:
            entries = self._claims_assumed_by.pop(pod_uid, None)
            if not entries:
                return
            # (an assumed copy carries the watched claim's metadata as it was: dropping it may show
            # a deletion that came meanwhile)
            waits = {key: self._claim_presence(key) for key, _ in entries}
            for key, _ in entries:
                self._left_binder(key)
            for key, uid in entries:
                assumed = self._assumed_claims.get(key)
                if assumed is None:
                    continue
                if uid != pod_uid and any(
                    (key, uid) in others for others in self._claims_assumed_by.values()
                ):
                    continue  # another pod of the group still stands on the group's reservation
                reserved = [r for r in assumed.status.reserved_for if r.uid != uid]
                watched = self.resource_claims.get(key)
                written = self._claims_written_at.get(key)
                if written is not None and (
                    watched is None or version_number(watched.metadata.resource_version) < written
                ):
                    # Written, then the binding failed: the API holds the allocation (the binder took
                    # the reservation back; the resourceclaim controller deallocates), the watch has
                    # not shown it yet. The devices stay held until it has.
                    self._assumed_claims[key] = msgspec.structs.replace(
                        assumed, status=msgspec.structs.replace(assumed.status, reserved_for=reserved)
                    )
                    continue
                if not reserved or (watched is not None and watched.status.allocation is not None):
                    del self._assumed_claims[key]
                else:
                    self._assumed_claims[key] = msgspec.structs.replace(
                        assumed, status=msgspec.structs.replace(assumed.status, reserved_for=reserved)
                    )
            self._dra_changed(claims=[key for key, _ in entries], waits=waits)

    def claim_confirmed(self, pod_uid: str) -> None:
        """The pod was bound: its claims' assumptions stay until the watch shows our writes of them
        (the claims' watched copies are looked at again: one may have shown them already)."""
        with self._lock:
            for key, _ in self._claims_assumed_by.pop(pod_uid, None) or ():
                self._left_binder(key)
                assumed = self._assumed_claims.get(key)
                watched = self.resource_claims.get(key)
                if assumed is not None and watched is not None and self._caught_up(key, assumed, watched):
                    del self._assumed_claims[key]
                    self._claims_written_at.pop(key, None)
                    self._dra_changed(claims=(key,))
                    if _same_for_decisions(assumed, watched):
                        self._settled_changes += 1  # our write, shown already: nothing moved

    def claim_written(self, key: str, uid: str, version: str) -> None:
        """The binder wrote the claim (allocation and reservation) for a placement that assumed it, or
        found it so already: its watched copies from ``version`` on show that write."""
        number = version_number(version)
        if number < 0:
            return  # not a number: the copy showing the claim allocated is taken for it
        with self._lock:
            assumed = self._assumed_claims.get(key)
            if assumed is not None and assumed.metadata.uid == uid:
                self._claims_written_at[key] = max(number, self._claims_written_at.get(key, number))

    def _left_binder(self, key: str) -> None:
        left = self._claims_in_flight.get(key, 0) - 1
        if left > 0:
            self._claims_in_flight[key] = left
        else:
            self._claims_in_flight.pop(key, None)

    def _holders_now(self, claims: dict[str, ResourceClaim]) -> dict[DeviceID, str]:
        """``allocated_devices(claims)``, kept up to date from the claims changed since the last view
        (a device two claims hold stays held while either does); a copy, the view's to keep."""
        held_by = self._claim_holds
        keys_of = self._device_keys
        holders = self._holders
        for key in self._claims_changed:
            for device in held_by.pop(key, ()):
                keys = keys_of[device]
                del keys[key]
                if keys:
                    holders[device] = next(reversed(keys))
                else:
                    del keys_of[device]
                    del holders[device]
            claim = claims.get(key)
            allocation = claim.status.allocation if claim is not None else None
            if allocation is None:
                continue
            devices = held_devices(allocation)
            if devices:
                held_by[key] = devices
                for device in devices:
                    keys_of.setdefault(device, {})[key] = None
                    holders[device] = key
        self._claims_changed.clear()
        return dict(holders)

    # -- the view ------------------------------------------------------------------------------------
    def dra_view(self) -> DraView | None:
        """The session's view (None when the cluster has no DRA object and no pod of ours uses claims)."""
        with self._lock:
            made = self._dra_made
            if made is not None and made.revision == self._dra_revision:
                return made
            if not (self.device_classes or self.resource_slices or self.resource_claims or self._claim_pods):
                self._dra_made = None
                return None
            inventory = self._dra_inventory
            if inventory is None or self._dra_inventory_revision != self._dra_slices_revision:
                inventory = self._dra_inventory = Inventory(self.resource_slices.values())
                self._dra_inventory_revision = self._dra_slices_revision
            claims = dict(self.resource_claims)
            claims.update(self._assumed_claims)
            holders = self._holders_now(claims)
            made = self._dra_made = DraView(
                inventory=inventory,
                classes=dict(self.device_classes),
                claims=claims,
                allocated=holders.keys(),
                revision=self._dra_revision,
                holders=holders,
                consumed=shared_consumption(claims) if inventory.advanced else {},
            )
            return made
