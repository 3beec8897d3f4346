"""Binding committed placements to nodes, through the pods' ``binding`` subresource.

The cycle hands placements over without waiting: they go on a queue that a bounded set of workers
drains, one POST per pod. Throttling, server errors and timeouts are retried with backoff (honouring
Retry-After); a permanent answer (409, 404, ...) puts the task back to Pending in the cache and is
recorded. A pod is never bound twice: a placement for a pod whose bind was already issued is dropped.

Volumes (kube-scheduler's VolumeBinding ``PreBind``, the volume binder's ``BindPodVolumes``): a
pod whose unbound claims are of a WaitForFirstConsumer class gets its node written on them
(``volume.kubernetes.io/selected-node``) for the provisioner, and is bound only once they are
bound to volumes. A gang waits whole: none of its pods of the cycle is bound before all their
claims are, and if that does not happen within ``volume_timeout`` the attempt is undone (the
annotations removed from claims still unbound, every pod of it pending again).

ResourceClaims (kube-scheduler's dynamicresources ``PreBind`` -> ``bindClaim``): before the binding,
each claim the session allocated or reserved for the pod gets its ``status`` written through the
``status`` subresource, allocation and reservation in one write (a reservation without an allocation
is refused). The write is a merge patch with the claim's ``resourceVersion`` as precondition; a 409
re-reads the claim and tries again, and a claim allocated meanwhile to other devices fails the
placement. A pod whose claims could not be written is not bound (its assumption is forgotten), and a
pod with claims but no allocations from its session is never bound. An allocation is preceded by the
``resource.kubernetes.io/delete-protection`` finalizer (a normal update of the claim), so that the
resourceclaim controller deallocates the claim once no pod reserves it. When the binding fails after
the claims were written, the reservation is taken back (``Unreserve``); the controller then
deallocates.

A claim of a ``scheduling.k8s.io/v1alpha2`` PodGroup (KEP-5729, ``ClaimAllocation.consumer``) is
reserved for the PodGroup, not the pod: the first pod of the group to be bound writes the allocation
and the PodGroup's reservation (under the finalizer, as above), and the others find it so and write
nothing. A failed binding takes the PodGroup's reservation back (and the allocation with it, when
nothing else reserves the claim) only when no other pod of the group is placed in the cache; while
one is, the claim stays the group's (KEP-5729 "Deallocate"). Otherwise the resourceclaim controller
removes the reservation once the PodGroup is gone.

Writes per pod are kube-scheduler's: the finalizer only when the claim lacks it (the status
subresource resets metadata, ``resourceclaimStatusStrategy.PrepareForUpdate`` in
``pkg/registry/resource/resourceclaim/strategy.go``, so it cannot ride on the status write), then one
status write per claim not yet reserved for the pod, then the binding; a claim shared by a gang gets
one status write per pod, as each pod's ``PreBind`` reserves it for itself. What Caldera adds: the
writes to one claim are made one after another (siblings of a gang bound at once would otherwise
race, each 409 costing a failed write and a read), and each starts from the claim as the last write
returned it when the watch has not shown that yet (kube-scheduler's ``AssumeClaimAfterAPICall`` keeps
the API's answer in its assume cache for the same reason; resourceVersions are compared as numbers,
as its ``assumecache`` does).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

import msgspec

from caldera.cache.client import ApiClient, ApiError, backoff_delay
from caldera.cache.http1 import RequestShape
from caldera.cache.store import ClusterCache
from caldera.cache.supervise import stop_workers, supervise
from caldera.framework.dra.objects import (
    AllocationResult,
    ResourceClaim,
    ResourceClaimConsumerReference,
)
from caldera.framework.dra.view import (
    BINDING_TIMEOUT,
    ClaimAllocation,
    binding_state,
    binding_timed_out,
    has_binding_conditions,
    reserved_for,
    same_devices,
    version_number,
)
from caldera.framework.model import TaskInfo
from caldera.framework.objects import ObjectError, Pod, decode
from caldera.framework.result import Eviction, Placement
from caldera.metrics import scheduler as m
from caldera.plugins.volumes import SELECTED_NODE, claims_to_provision
from caldera.scheduler.leader import always, not_leader

log = logging.getLogger("caldera.binder")

#: While binds are in flight, the queue-depth gauge is set at most this often (seconds).
GAUGE_INTERVAL = 0.1
#: the ResourceClaims API, and how often a claim write is tried again after a 409
CLAIMS = "/apis/resource.k8s.io/v1"
CLAIM_CONFLICT_RETRIES = 5
#: at most this many claims' last written copies are kept (``Binder._written``)
WRITTEN_CLAIMS_MAX = 4096
#: ``resourceapi.Finalizer``: put on a claim by the allocator; the resourceclaim controller deallocates
#: claims that carry it once nothing reserves them, and removes it
CLAIM_FINALIZER = "resource.kubernetes.io/delete-protection"
#: PreBind's poll period (5 s) while a pod waits for its devices' binding conditions (up to
#: ``BINDING_TIMEOUT``, framework/dra/view.py)
BINDING_POLL = 5.0


class _VersionedMeta(msgspec.Struct, rename="camel"):
    resource_version: str = ""


class _Versioned(msgspec.Struct):
    metadata: _VersionedMeta = msgspec.field(default_factory=_VersionedMeta)


#: reads an object's resourceVersion alone (the rest of the answer is skipped, not decoded)
_VERSION = msgspec.json.Decoder(_Versioned)


# The binder's ResourceClaim merge patches, encoded from structs straight to bytes (the claim's
# allocation and references as decoded, no dicts built per write): the same JSON the dicts gave.
class _PatchMeta(msgspec.Struct, rename="camel"):
    uid: str
    resource_version: str


class _StatusPart(msgspec.Struct, rename="camel", omit_defaults=True):
    reserved_for: list[ResourceClaimConsumerReference]
    #: only when the write allocates (absent, not null, otherwise: a merge patch's null deletes)
    allocation: AllocationResult | None = None


class _StatusPatch(msgspec.Struct):
    """``PATCH resourceclaims/NAME/status``: allocation and reservation, the claim's uid and
    resourceVersion as preconditions."""

    metadata: _PatchMeta
    status: _StatusPart


class _FinalizerMeta(msgspec.Struct, rename="camel"):
    uid: str
    resource_version: str
    finalizers: list[str]


class _FinalizerPatch(msgspec.Struct):
    """``PATCH resourceclaims/NAME``: the finalizers with ours added (uid and resourceVersion as
    preconditions)."""

    metadata: _FinalizerMeta


_claim_encoder = msgspec.json.Encoder()


def claim_path(namespace: str, name: str) -> str:
    """The API path of a ResourceClaim (its subresources below it)."""
    return f"{CLAIMS}/namespaces/{namespace}/resourceclaims/{name}"


def _rv(claim: ResourceClaim) -> int:
    """The claim's resourceVersion as a number (-1 when it is not one: then the watch's copy wins)."""
    return version_number(claim.metadata.resource_version)


def _now_rfc3339() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


#: How long a successful bind is remembered (so a stale watch event cannot get it placed again).
REMEMBER_BOUND = 600.0


class BindObserver(Protocol):
    def bind_failed(self, task: TaskInfo, node: str, reason: str) -> None: ...

    def bind_found_no_pod(self, task: TaskInfo, node: str, reason: str) -> None:
        """The binding answered 404: the pod was deleted meanwhile (not pending again)."""

    def gang_bound(self, job: str, placements: list[Placement]) -> None: ...

    def gang_partly_bound(self, job: str, bound: list[Placement], failed: dict[str, str]) -> None: ...

    def pod_bound(self, task: TaskInfo, node: str) -> None: ...


@dataclass
class _Gang:
    outstanding: int = 0
    bound: list[Placement] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    #: members whose binding found no such pod (404): deleted meanwhile, not pending again
    gone: list[str] = field(default_factory=list)


@dataclass
class BindFailure:
    pod: str
    node: str
    reason: str
    at: float


class _PodNode(msgspec.Struct, frozen=True):
    node_name: str = msgspec.field(default="", name="nodeName")


class _PodView(msgspec.Struct, frozen=True):
    spec: _PodNode = _PodNode()


class Binder:
    def __init__(
        self,
        client: ApiClient,
        cache: ClusterCache,
        *,
        workers: int = 64,
        observer: BindObserver | None = None,
        evictor: Any = None,
        max_attempts: int = 10,
        retry_deadline: float = 60.0,
        request_timeout: float = 10.0,
        volume_timeout: float = 600.0,
        binding_timeout: float = BINDING_TIMEOUT,
        binding_poll: float = BINDING_POLL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.cache = cache
        self.workers = max(1, workers)
        self.observer = observer
        self.evictor = evictor
        self.max_attempts = max_attempts
        self.retry_deadline = retry_deadline
        self.request_timeout = request_timeout
        self.volume_timeout = volume_timeout
        self.binding_timeout = binding_timeout
        self.binding_poll = binding_poll
        self.clock = clock
        #: binds waiting beside the workers: for their volumes to be provisioned, or for their
        #: devices' binding conditions
        self._waits: set[asyncio.Task[None]] = set()
        self._queue: asyncio.Queue[Placement] = asyncio.Queue()
        self._issued: dict[str, float] = {}  # uid → when its bind was issued (in flight or done)
        #: uid → where its bind is until it settles: (stage, since, queue number); stages "queued"
        #: (waiting for a worker), "volumes" and "devices" (waiting beside the workers), "writing"
        #: (a worker on it); for ``progress``
        self._stage: dict[str, tuple[str, float, int]] = {}
        #: queue numbers: of the last placement queued, and of the last a worker took (FIFO)
        self._put_seq = 0
        self._taken_seq = 0
        self._bound: dict[str, float] = {}
        self._gangs: dict[str, _Gang] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._aborting = False
        #: asked before every write (the leader lease still held: ``LeaderElector.holds``)
        self.may_write: Callable[[], bool] = always
        self.failures: dict[str, BindFailure] = {}
        self.bound_count = 0
        self.failed_count = 0
        self.issued_count = 0
        self.requests = 0
        self._gauge_at = 0.0
        #: per claim key: the lock its writes take turns on, and how many binds hold or wait for it
        self._claim_locks: dict[str, tuple[asyncio.Lock, list[int]]] = {}
        #: per claim key: the claim as our last write to it returned it, until the watch catches up
        #: claim key → our last write's answer, decoded when first needed (``_freshest``): most
        #: claims are written once per pod and never read back, while the watch decodes them anyway
        self._written: dict[str, ResourceClaim | bytes] = {}
        #: ``POST pods/NAME/binding``: the request's fixed parts, encoded once (made at the first bind)
        self._binding_shape: RequestShape | None = None
        #: ``PATCH resourceclaims/NAME`` (the finalizer) and ``.../status`` (allocation and reservation)
        #: as merge patches: their fixed parts, encoded once (made at the first write of each)
        self._claim_shapes: dict[str, RequestShape] = {}

    # -- objects that go ---------------------------------------------------------------------------
    def pod_gone(self, pod: Pod) -> None:
        """A deleted pod's finished bind is forgotten (nothing can bind it again); one in flight is
        left to its worker."""
        uid = pod.metadata.uid
        if self._bound.pop(uid, None) is not None:
            self._issued.pop(uid, None)

    def pods_relisted(self, live: list[Pod]) -> None:
        """After a re-list: the finished binds of pods not in it are forgotten."""
        present = {p.metadata.uid for p in live}
        for uid in [u for u in self._bound if u not in present]:
            del self._bound[uid]
            self._issued.pop(uid, None)

    def remembered(self) -> list[tuple[str, int]]:
        """The sizes of the maps kept per pod and gang (``caldera_remembered_objects``)."""
        return [
            ("issued", len(self._issued)),
            ("bound", len(self._bound)),
            ("gangs", len(self._gangs)),
            ("in_hand", len(self._stage)),
            ("failures", len(self.failures)),  # the last 1000, for /debug/state
        ]

    def waiting(self) -> bool:
        """Binds are queued for a worker (the status flusher lets them go first)."""
        return not self._queue.empty()

    def queued(self) -> int:
        """How many binds are queued for a worker. Read from a running decision's thread too
        (``BindPacing``): the length of the queue's deque, one read under the GIL."""
        return self._queue.qsize()

    # -- the Binder protocol (called on the loop, never blocks) ------------------------------------
    def bind(self, placements: list[Placement]) -> None:
        now = self.clock()
        accepted: list[Placement] = []
        for placement in placements:
            uid = placement.task.uid
            if uid in self._issued:
                if uid in self._bound:
                    self.cache.confirm_bound(uid)
                log.debug("bind of %s already issued; not issuing it again", placement.task.key)
                continue
            if self._aborting:
                self.cache.forget_assumption(uid)
                continue
            self._issued[uid] = now
            self.issued_count += 1
            key = placement.task.job or placement.task.uid
            gang = self._gangs.get(key)
            if gang is None:  # (not setdefault: that makes a _Gang for every placement)
                gang = self._gangs[key] = _Gang()
            gang.outstanding += 1
            accepted.append(placement)
        waiting: dict[str, list[Placement]] = {}
        for placement in accepted:
            if placement.task.pod.spec.volumes and claims_to_provision(
                placement.task, self.cache.pvcs_view(), self.cache.storage_classes_view()
            ):
                waiting[placement.task.job or placement.task.uid] = []
        for placement in accepted:
            group = waiting.get(placement.task.job or placement.task.uid)
            if group is not None:
                group.append(placement)
                self._stage[placement.task.uid] = ("volumes", now, 0)
            else:
                self._enqueue(placement, now)
        for group in waiting.values():
            wait = asyncio.get_running_loop().create_task(
                self._provision_then_bind(group), name="binder-volumes"
            )
            self._waits.add(wait)
            wait.add_done_callback(self._waits.discard)
        m.BIND_QUEUE.set(self._queue.qsize())
        if len(self._bound) > 10_000:
            self._prune(now)

    def _enqueue(self, placement: Placement, now: float) -> None:
        self._put_seq += 1
        self._stage[placement.task.uid] = ("queued", now, self._put_seq)
        self._queue.put_nowait(placement)

    def progress(self, uid: str) -> str | None:
        """Where the bind of pod ``uid`` is, in words (``/debug/pods``, ``caldera-scheduler explain
        pod``): queued behind how many, waiting for its volumes or devices, being written, or done
        and not yet seen by the pod watch. None when this binder has nothing in hand for it."""
        now = self.clock()
        stage = self._stage.get(uid)
        if stage is None:
            done = self._bound.get(uid)
            if done is None:
                return None
            return f"bound by this scheduler {now - done:.1f}s ago; the pod watch has not shown it yet"
        what, since, seq = stage
        waited = now - since
        if what == "queued":
            ahead = max(0, seq - self._taken_seq - 1)
            return (
                f"queued for binding {waited:.1f}s ago; {ahead} placement(s) ahead of it in the bind"
                f" queue, {self.workers} written at a time"
            )
        if what == "volumes":
            return f"waiting {waited:.1f}s for its volumes to be provisioned before its binding"
        if what == "devices":
            return f"waiting {waited:.1f}s for its devices' binding conditions before its binding"
        return (
            f"its binding is being written, for {waited:.1f}s (ResourceClaims, then the Binding;"
            f" transient errors retried for up to {self.retry_deadline:g}s)"
        )

    def evict(self, evictions: list[Eviction]) -> None:
        if self.evictor is not None:
            self.evictor.evict(evictions)
        else:
            log.warning("no evictor: dropping %d evictions", len(evictions))

    def _prune(self, now: float) -> None:
        """Forget the binds done more than REMEMBER_BOUND ago. ``_bound`` is in the order the binds
        were done (a uid is remembered once until forgotten, on a monotonic clock), so the old ones
        are its first entries: the walk stops at the first one still remembered, instead of going over
        every remembered bind in each cycle once there are more than 10,000 of them."""
        expired: list[str] = []
        for uid, at in self._bound.items():
            if now - at <= REMEMBER_BOUND:
                break
            expired.append(uid)
        for uid in expired:
            del self._bound[uid]
            self._issued.pop(uid, None)

    # -- volumes -----------------------------------------------------------------------------------
    async def _provision_then_bind(self, group: list[Placement]) -> None:
        """Select the node on the gang's WaitForFirstConsumer claims, wait until they are bound,
        then queue the binds; undo the attempt when that does not happen in time."""
        claims: dict[str, tuple[str, str, str]] = {}  # namespace/name → (namespace, name, node)
        for placement in group:
            for pvc in claims_to_provision(
                placement.task, self.cache.pvcs_view(), self.cache.storage_classes_view()
            ):
                meta = pvc.metadata
                claims[f"{meta.namespace}/{meta.name}"] = (meta.namespace, meta.name, placement.node)
        try:
            deadline = self.clock() + self.volume_timeout
            failure = ""
            for namespace, name, node in claims.values():
                current = self.cache.pvc(f"{namespace}/{name}")
                if current is not None and current.metadata.annotations.get(SELECTED_NODE) == node:
                    continue
                error = await self._with_retries(
                    group[0].task,
                    "PATCH",
                    f"/api/v1/namespaces/{namespace}/persistentvolumeclaims/{name}",
                    {"metadata": {"annotations": {SELECTED_NODE: node}}},
                    deadline,
                    "application/merge-patch+json",
                )
                if error is not None:
                    failure = f"could not select node {node} on claim {namespace}/{name}: {_reason(error)}"
                    break
            while not failure:
                pending = [k for k in claims if not self._claim_bound(k)]
                if not pending:
                    break
                if self.clock() >= deadline or self._aborting:
                    failure = f"volumes not provisioned within {self.volume_timeout:g}s: claim(s) {', '.join(pending[:5])} unbound"
                    break
                await asyncio.sleep(0.05)
        except asyncio.CancelledError:
            for placement in group:
                self._settle(placement, None)
            raise
        if not failure:
            now = self.clock()
            for placement in group:
                self._enqueue(placement, now)
            m.BIND_QUEUE.set(self._queue.qsize())
            return
        for key, (namespace, name, _node) in claims.items():
            if not self._claim_bound(key):
                # Undo the selection, so the claim can be provisioned where the next attempt lands.
                await self._with_retries(
                    group[0].task,
                    "PATCH",
                    f"/api/v1/namespaces/{namespace}/persistentvolumeclaims/{name}",
                    {"metadata": {"annotations": {SELECTED_NODE: None}}},
                    self.clock() + 5.0,
                    "application/merge-patch+json",
                )
        for placement in group:
            self._settle(placement, failure)

    def _claim_bound(self, key: str) -> bool:
        pvc = self.cache.pvc(key)
        return pvc is not None and bool(pvc.spec.volume_name) and pvc.status.phase == "Bound"

    # -- workers -----------------------------------------------------------------------------------
    def start(self) -> None:
        for i in range(self.workers):
            self._tasks.append(supervise(f"binder-{i}", self._worker))

    async def drain(self, timeout: float = 30.0) -> bool:
        """Finish every bind handed over so far (SIGTERM). True if all finished in time. A bind may
        move between the queue and the waits beside it (volumes provisioned, devices ready): both
        are waited for until neither holds one."""
        loop = asyncio.get_running_loop()
        give_up = loop.time() + timeout
        try:
            while True:
                async with asyncio.timeout_at(give_up):
                    await self._queue.join()
                if not self._waits:
                    return True
                _, left = await asyncio.wait(set(self._waits), timeout=max(0.0, give_up - loop.time()))
                if left:
                    raise TimeoutError
        except TimeoutError:
            log.warning("%d binds still unfinished at shutdown", self._queue.qsize() + len(self._waits))
            return False
        finally:
            await self.stop()

    async def abort(self) -> None:
        """Leadership lost: issue nothing more. Queued placements go back to Pending in the cache."""
        self._aborting = True
        while not self._queue.empty():
            placement = self._queue.get_nowait()
            self.cache.forget_assumption(placement.task.uid)
            self._issued.pop(placement.task.uid, None)
            self._stage.pop(placement.task.uid, None)
            self._queue.task_done()
        await self.stop()

    async def stop(self) -> None:
        await stop_workers(self._waits)
        await stop_workers(self._tasks)
        self._tasks.clear()

    async def _worker(self) -> None:
        queue = self._queue
        while True:
            try:
                placement = queue.get_nowait()  # no coroutine for the wait while binds are queued
            except asyncio.QueueEmpty:
                placement = await queue.get()
            uid = placement.task.uid
            stage = self._stage.get(uid)
            if stage is not None:
                self._taken_seq = stage[2]
            self._stage[uid] = ("writing", self.clock(), 0)
            try:
                await self._bind_one(placement)
            except asyncio.CancelledError:
                self._settle(placement, None)
                self._queue.task_done()
                raise
            except Exception as exc:  # never lose a worker
                log.exception("bind of %s crashed", placement.task.key)
                self._settle(placement, f"internal error: {exc}")
            self._queue.task_done()
            left = self._queue.qsize()
            now = time.monotonic()
            if not left or now - self._gauge_at >= GAUGE_INTERVAL:
                # The depth gauge at most every GAUGE_INTERVAL while busy (a lock per bind otherwise),
                # and always when the queue runs dry, so an idle binder reads 0.
                self._gauge_at = now
                m.BIND_QUEUE.set(left)

    async def _bind_one(self, placement: Placement) -> None:
        task = placement.task
        deadline = self.clock() + self.retry_deadline
        written: list[ClaimAllocation] = []
        if task.pod.spec.resource_claims:
            if placement.claims is None:
                # The last line of defence: never bind a pod without its devices.
                self._settle(
                    placement, "pod uses ResourceClaims but its placement carries no allocation for them"
                )
                return
            claim_failure = await self._write_claims(placement, deadline, written)
            if claim_failure is not None:
                await self._unreserve(placement, written)
                self._settle(placement, f"could not allocate its ResourceClaims: {claim_failure}")
                return
            waiting = [ca for ca in placement.claims if has_binding_conditions(ca.allocation)]
            if waiting:
                # Up to BINDING_TIMEOUT: waited for beside the workers, which go on binding others
                self._stage[task.uid] = ("devices", self.clock(), 0)
                wait = asyncio.get_running_loop().create_task(
                    self._bind_when_devices_ready(placement, written, waiting), name="binder-devices"
                )
                self._waits.add(wait)
                wait.add_done_callback(self._waits.discard)
                return
        await self._annotate_and_bind(placement, written, deadline)

    async def _bind_when_devices_ready(
        self, placement: Placement, written: list[ClaimAllocation], waiting: list[ClaimAllocation]
    ) -> None:
        """The rest of a bind whose claims' devices have binding conditions, once they report ready
        (``_await_binding_conditions``); a failure or the timeout takes the reservation back."""
        try:
            binding_failure = await self._await_binding_conditions(waiting)
        except asyncio.CancelledError:
            self._settle(placement, None)
            raise
        if binding_failure is not None:
            await self._unreserve(placement, written)
            self._settle(placement, binding_failure)
            return
        self._stage[placement.task.uid] = ("writing", self.clock(), 0)
        try:
            await self._annotate_and_bind(placement, written, self.clock() + self.retry_deadline)
        except asyncio.CancelledError:
            self._settle(placement, None)
            raise
        except Exception as exc:  # as a worker: never lose the placement
            log.exception("bind of %s crashed", placement.task.key)
            self._settle(placement, f"internal error: {exc}")

    async def _annotate_and_bind(
        self, placement: Placement, written: list[ClaimAllocation], deadline: float
    ) -> None:
        task = placement.task
        pod_path = f"/api/v1/namespaces/{task.namespace}/pods/{task.name}"
        if placement.annotations:
            # The decision's annotations (device assignments) go on the pod before the bind, as
            # device plugins read them when the pod starts. The uid makes the patch a precondition.
            patch = {"metadata": {"uid": task.uid, "annotations": placement.annotations}}
            failure = await self._with_retries(
                task, "PATCH", pod_path, patch, deadline, "application/merge-patch+json"
            )
            if failure is not None:
                await self._unreserve(placement, written)
                self._settle(placement, f"could not annotate the pod before binding: {failure}")
                return
        body = binding_body(task.namespace, task.name, task.uid, placement.node)
        shape = self._binding_shape
        if shape is None:
            shape = self._binding_shape = self.client.shape("POST", "/binding")
        failure = await self._with_retries(task, "POST", pod_path, body, deadline, shape=shape)
        if failure is None:
            self._settle(placement, None, ok=True)
        elif failure.code == 409 and failure.retried and await self._landed(task, placement.node):
            # An earlier attempt that seemed to fail did bind it.
            self._settle(placement, None, ok=True)
        else:
            await self._unreserve(placement, written)
            # A Binding answered 404 names no pod: it was deleted meanwhile. A pod created again under
            # the name has another uid, and the binding's uid is a precondition of its write
            # (``BindingREST.setPodNodeAndMetadata``, pkg/registry/core/pod/storage/storage.go): 409.
            self._settle(placement, _reason(failure), gone=failure.code == 404)

    # -- ResourceClaims ----------------------------------------------------------------------------
    async def _await_binding_conditions(self, claims: list[ClaimAllocation]) -> str | None:
        """kube-scheduler's PreBind wait (``PreBind``: ``wait.PollUntilContextTimeout`` every 5 s up to
        ``bindingTimeout``, 600 s by default, ``isPodReadyForBinding``): the claims' devices must
        report every binding condition True in ``status.devices``; a binding failure condition, or the
        timeout, fails the placement (the caller takes the reservation back and the pod is pending
        again; the resourceclaim controller deallocates the claim once no pod reserves it). The
        timeout counts both from the start of the wait and, as ``isPodReadyForBinding`` ->
        ``isClaimTimeout`` does, from the claim's ``allocationTimestamp`` (a claim allocated earlier
        has less time left; kube-scheduler's TestPlugin/prebind-fail-with-binding-timeout). The pod
        stays assumed meanwhile. None when all are ready, else why not."""
        give_up = self.clock() + self.binding_timeout
        while True:
            pending = ""
            for ca in claims:
                claim = await self._read_claim(ca.namespace, ca.name)
                if isinstance(claim, ApiError):
                    pending = f"ResourceClaim {ca.key}: {_reason(claim)}"
                    continue
                state = binding_state(claim)
                if isinstance(state, str):
                    return f"device binding failed: {state}"
                if not state and binding_timed_out(claim, time.time(), self.binding_timeout):
                    made = claim.status.allocation.allocation_timestamp if claim.status.allocation else ""
                    return (
                        f"device binding timeout: claim {claim.metadata.name} binding timeout (allocated "
                        f"at {made}, bindingTimeout {self.binding_timeout:g}s)"
                    )
                if not state:
                    pending = f"ResourceClaim {ca.key} waits for its devices' binding conditions"
            if not pending:
                return None
            if self.clock() >= give_up:
                return f"device binding timeout after {self.binding_timeout:g}s: {pending}"
            await asyncio.sleep(self.binding_poll)

    async def _read_claim(self, namespace: str, name: str) -> ResourceClaim | ApiError:
        try:
            raw = await self.client.request("GET", claim_path(namespace, name), timeout=self.request_timeout)
            return decode(ResourceClaim, raw)
        except ApiError as exc:
            return exc
        except ObjectError as exc:
            return ApiError(0, "Unreadable", str(exc))

    async def _write_claims(
        self, placement: Placement, deadline: float, written: list[ClaimAllocation]
    ) -> str | None:
        """Allocate and reserve each of the placement's claims for its pod (``bindClaim``); None when
        all are written, else why not. ``written`` gets each claim written."""
        locks = self._claim_locks
        for ca in placement.claims or ():
            # Writes to one claim one after another (see the module's docstring): a lock per claim
            # while binds hold or wait for it (an async context manager cost a generator per write)
            key = ca.key
            entry = locks.get(key)
            if entry is None:
                entry = locks[key] = (asyncio.Lock(), [0])
            lock, users = entry
            users[0] += 1
            try:
                async with lock:
                    failure = await self._write_claim(placement.task, ca, deadline, written)
            finally:
                users[0] -= 1
                if not users[0]:
                    del locks[key]
            if failure is not None:
                return failure
        return None

    def _freshest(self, key: str) -> ResourceClaim | None:
        """The claim as the watch shows it, or as our last write returned it when that is newer."""
        watched = self.cache.resource_claim(key)
        mine = self._written.get(key)
        if mine is None:
            return watched
        if isinstance(mine, bytes):
            try:
                mine = self._written[key] = decode(ResourceClaim, mine)
            except ObjectError:
                del self._written[key]  # an answer we cannot read: trust the watch again
                return watched
        if watched is None or (watched.metadata.uid == mine.metadata.uid and _rv(watched) < _rv(mine)):
            return mine
        del self._written[key]  # the watch has caught up (or the claim is another one now)
        return watched

    def _written_at(self, ca: ClaimAllocation, answer: bytes) -> None:
        """Tell the cache which version of the claim shows our write (its assumption of the claim
        gives way to the watch's copy from that version on)."""
        try:
            version = _VERSION.decode(answer).metadata.resource_version
        except msgspec.DecodeError:
            return
        self.cache.claim_written(ca.key, ca.uid, version)

    def _remember(self, key: str, claim: ResourceClaim | bytes) -> None:
        if len(self._written) >= WRITTEN_CLAIMS_MAX and key not in self._written:
            self._written.clear()  # a bound on memory: the watch's copies are as good, if older
        self._written[key] = claim

    def _claim_shape(self, suffix: str) -> RequestShape:
        """The merge patch ``PATCH resourceclaims/NAME`` + ``suffix``, its fixed parts encoded once."""
        shape = self._claim_shapes.get(suffix)
        if shape is None:
            shape = self._claim_shapes[suffix] = self.client.shape(
                "PATCH", suffix, "application/merge-patch+json"
            )
        return shape

    async def _write_claim(
        self, task: TaskInfo, ca: ClaimAllocation, deadline: float, written: list[ClaimAllocation]
    ) -> str | None:
        """``bindClaim`` for one claim of the pod: allocated (under the finalizer) and reserved for it."""
        claim: ResourceClaim | ApiError | None = self._freshest(ca.key)
        for _attempt in range(CLAIM_CONFLICT_RETRIES):
            if claim is None:
                claim = await self._read_claim(ca.namespace, ca.name)
                if not isinstance(claim, ApiError):
                    self._remember(ca.key, claim)
            if isinstance(claim, ApiError):
                return f"ResourceClaim {ca.key}: {_reason(claim)}"
            if claim.metadata.uid != ca.uid:
                return f"ResourceClaim {ca.key} was deleted and created again"
            if claim.metadata.deletion_timestamp:
                return f"ResourceClaim {ca.key} is being deleted"
            status = claim.status
            if status.allocation is not None and not same_devices(status.allocation, ca.allocation):
                return f"ResourceClaim {ca.key} was allocated meanwhile to other devices"
            consumer = ca.consumer
            if status.allocation is not None and reserved_for(
                claim, consumer.uid if consumer is not None else task.uid
            ):
                # already as it must be (for a group's claim: by another pod of the group)
                self.cache.claim_written(ca.key, ca.uid, claim.metadata.resource_version)
                break
            if status.allocation is None and CLAIM_FINALIZER not in claim.metadata.finalizers:
                # An allocation is made under the finalizer (a normal update, before the status):
                # the resourceclaim controller deallocates claims that carry it once no pod
                # reserves them any more.
                added = await self._claim_finalizer(task, ca, claim, deadline)
                if isinstance(added, ApiError):
                    if added.code != 409:
                        return f"ResourceClaim {ca.key}: {_reason(added)}"
                    claim = None
                    continue
                claim = added
                self._remember(ca.key, claim)
            reserved = [
                *status.reserved_for,
                consumer.reference()
                if consumer is not None
                else ResourceClaimConsumerReference(resource="pods", name=task.name, uid=task.uid),
            ]
            allocation = None
            if status.allocation is None:
                # allocation and reservation in one write: reservedFor alone is refused (422)
                allocation = ca.allocation
                if has_binding_conditions(allocation) and allocation.allocation_timestamp is None:
                    # bindClaim: the binding timeout counts from allocationTimestamp
                    allocation = msgspec.structs.replace(allocation, allocation_timestamp=_now_rfc3339())
            body = _claim_encoder.encode(
                _StatusPatch(
                    _PatchMeta(ca.uid, claim.metadata.resource_version),
                    _StatusPart(reserved, allocation),
                )
            )
            answer: list[bytes] = []
            failure = await self._with_retries(
                task,
                "PATCH",
                claim_path(ca.namespace, ca.name),
                body,
                deadline,
                shape=self._claim_shape("/status"),
                answer=answer,
            )
            _claim_writes("status", failure is None).inc()
            if failure is None:
                written.append(ca)
                if answer:
                    self._remember(ca.key, answer[-1])
                    self._written_at(ca, answer[-1])
                else:
                    self._written.pop(ca.key, None)
                break
            if failure.code != 409:
                return f"ResourceClaim {ca.key}: {_reason(failure)}"
            claim = None  # changed since we read it: read it again and decide again
        else:
            return f"ResourceClaim {ca.key}: still conflicting after {CLAIM_CONFLICT_RETRIES} tries"
        return None

    async def _claim_finalizer(
        self, task: TaskInfo, ca: ClaimAllocation, claim: ResourceClaim, deadline: float
    ) -> ResourceClaim | ApiError:
        """The claim with ``CLAIM_FINALIZER`` added (its resourceVersion a precondition)."""
        finalizers = [*claim.metadata.finalizers, CLAIM_FINALIZER]
        body = _claim_encoder.encode(
            _FinalizerPatch(_FinalizerMeta(ca.uid, claim.metadata.resource_version, finalizers))
        )
        path = claim_path(ca.namespace, ca.name)
        shape = self._claim_shape("")
        attempt = 0
        while True:
            try:
                self.requests += 1
                raw = await self.client.send(shape, path, body, timeout=self.request_timeout)
                _claim_writes("finalizer", True).inc()
                # The write changed the metadata alone (the status is another subresource): the
                # claim as read, with the finalizer and the answer's resourceVersion, without decoding
                # the whole answer.
                version = _VERSION.decode(raw).metadata.resource_version
                meta = msgspec.structs.replace(
                    claim.metadata, resource_version=version, finalizers=finalizers
                )
                return msgspec.structs.replace(claim, metadata=meta)
            except msgspec.DecodeError as exc:
                return ApiError(0, "Unreadable", str(exc))
            except ApiError as exc:
                _claim_writes("finalizer", False).inc()
                if exc.transient and attempt + 1 < self.max_attempts and self.clock() < deadline:
                    await asyncio.sleep(backoff_delay(attempt, 0.05, 5.0))
                    attempt += 1
                    continue
                return exc

    async def _unreserve(self, placement: Placement, written: list[ClaimAllocation]) -> None:
        """The binding failed after the claims were written: take the pod out of ``reservedFor``
        (kube-scheduler's ``Unreserve``). An allocation this placement made stays: the claim carries
        the finalizer, so the resourceclaim controller deallocates it once no pod reserves it.

        A claim of the pod's PodGroup (``ClaimAllocation.consumer``) is the group's: its reservation
        goes only when no other pod of the group is placed in the cache (KEP-5729 "Deallocate": in
        ``Unreserve`` "when no Pods in the group are scheduled, the scheduler removes the PodGroup
        from the claim's ``status.reservedFor``", and a claim then reserved for nobody else is
        deallocated). Every group claim of the placement counts, not only those this pod wrote:
        another pod of the group that failed first may have written it and kept it for this one."""
        task = placement.task
        deadline = self.clock() + 5.0
        for ca in written:
            # what our write returned holds this reservation: no later write may start from it
            self._written.pop(ca.key, None)
            if ca.consumer is None:
                await self._take_back(task, ca, task.uid, deadline)
        group = [ca for ca in placement.claims or () if ca.consumer is not None]
        # Decided after the awaits above, with nothing awaited before the caller settles this pod
        # when the group keeps its claims: two pods of a group failing together cannot both see the
        # other as placed.
        if group and not self.cache.group_placed(task.job or task.uid, but=task.uid):
            for ca in group:
                assert ca.consumer is not None
                await self._take_back(task, ca, ca.consumer.uid, deadline)

    async def _take_back(self, task: TaskInfo, ca: ClaimAllocation, consumer: str, deadline: float) -> None:
        """Remove the ``reservedFor`` entry of ``consumer`` (a pod's or a PodGroup's uid) from the
        claim, its resourceVersion a precondition (a 409 reads it again). The PodGroup's entry was its
        last: the allocation goes in the same write (KEP-5729 "Deallocate"; an allocation cannot be
        removed while ``reservedFor`` is not empty)."""
        for _attempt in range(CLAIM_CONFLICT_RETRIES):
            claim = await self._read_claim(ca.namespace, ca.name)
            if isinstance(claim, ApiError) or claim.metadata.uid != ca.uid:
                return
            left = [msgspec.to_builtins(r) for r in claim.status.reserved_for if r.uid != consumer]
            if len(left) == len(claim.status.reserved_for):
                return
            if ca.consumer is not None and self.cache.group_placed(task.job or task.uid, but=task.uid):
                return  # another pod of the group was placed while the claim was read: it is theirs
            status: dict[str, Any] = {"reservedFor": left or None}
            if not left and ca.consumer is not None:
                status["allocation"] = None
            failure = await self._with_retries(
                task,
                "PATCH",
                claim_path(ca.namespace, ca.name) + "/status",
                {
                    "metadata": {"uid": ca.uid, "resourceVersion": claim.metadata.resource_version},
                    "status": status,
                },
                deadline,
                "application/merge-patch+json",
            )
            _claim_writes("unreserve", failure is None).inc()
            if failure is None or failure.code != 409:
                if failure is not None:
                    log.warning(
                        "could not undo the reservation of ResourceClaim %s for %s: %s",
                        ca.key,
                        task.key if ca.consumer is None else f"PodGroup {ca.namespace}/{ca.consumer.name}",
                        _reason(failure),
                    )
                return

    async def _with_retries(
        self,
        task: TaskInfo,
        method: str,
        path: str,
        body: Any,
        deadline: float,
        content_type: str = "application/json",
        shape: RequestShape | None = None,
        answer: list[bytes] | None = None,
    ) -> ApiError | None:
        """One write, retried on transient errors with backoff (Retry-After honoured). Returns None on
        success, else the final error (``retried`` set when it was not the first attempt). With a
        ``shape`` (whose method and content type it has), the request is ``path`` + the shape's
        suffix and ``body`` is bytes: its fixed parts were encoded once (``ApiClient.send``). ``answer``
        gets the response body of a write that succeeded (one through a shape, or of a ``body`` to
        encode)."""
        attempt = 0
        while True:
            if not self.may_write():
                _withheld.inc()
                return not_leader()
            try:
                self.requests += 1
                if shape is not None:
                    raw = await self.client.send(shape, path, body, timeout=self.request_timeout)
                    if answer is not None:
                        answer.append(raw)
                elif isinstance(body, bytes):
                    await self.client.request(
                        method, path, data=body, content_type=content_type, timeout=self.request_timeout
                    )
                else:
                    raw = await self.client.request(
                        method, path, body=body, content_type=content_type, timeout=self.request_timeout
                    )
                    if answer is not None:
                        answer.append(raw)
                return None
            except ApiError as exc:
                if (
                    exc.transient
                    and not self._aborting
                    and attempt + 1 < self.max_attempts
                    and self.clock() < deadline
                ):
                    m.BIND_RETRIES.labels(str(exc.code)).inc()
                    delay = (
                        exc.retry_after if exc.retry_after is not None else backoff_delay(attempt, 0.05, 5.0)
                    )
                    log.debug(
                        "%s %s%s for %s: %s; retrying in %.2fs",
                        method,
                        path,
                        shape.suffix if shape is not None else "",
                        task.key,
                        exc,
                        delay,
                    )
                    await asyncio.sleep(min(delay, max(0.0, deadline - self.clock())))
                    attempt += 1
                    continue
                exc.retried = attempt > 0
                return exc

    async def _landed(self, task: TaskInfo, node: str) -> bool:
        try:
            raw = await self.client.request(
                "GET", f"/api/v1/namespaces/{task.namespace}/pods/{task.name}", timeout=self.request_timeout
            )
            return msgspec.json.decode(raw, type=_PodView).spec.node_name == node
        except (ApiError, msgspec.DecodeError, msgspec.ValidationError):
            return False

    def _settle(
        self, placement: Placement, failure: str | None, ok: bool = False, gone: bool = False
    ) -> None:
        task = placement.task
        uid = task.uid
        self._stage.pop(uid, None)
        gang_key = task.job or uid
        gang = self._gangs.get(gang_key)
        if ok:
            self.bound_count += 1
            self._bound[uid] = self.clock()
            self.cache.confirm_bound(uid)
            _binds("bound").inc()
            if gang is not None:
                gang.bound.append(placement)
            if self.observer is not None:
                self.observer.pod_bound(task, placement.node)
        else:
            reason = failure or "bind abandoned at shutdown"
            self.failed_count += 1
            self._issued.pop(uid, None)
            self.cache.forget_assumption(uid)
            _binds("failed").inc()
            self.failures[uid] = BindFailure(task.key, placement.node, reason, time.time())
            if len(self.failures) > 1000:
                self.failures.pop(next(iter(self.failures)))
            if gone:
                log.info(
                    "bind of %s to %s: the pod was deleted meanwhile (%s)", task.key, placement.node, reason
                )
            else:
                log.warning(
                    "bind of %s to %s failed: %s; the task is pending again", task.key, placement.node, reason
                )
            if gang is not None:
                if gone:
                    gang.gone.append(task.key)
                else:
                    gang.failed[task.key] = reason
            if self.observer is not None and failure is not None:
                if gone:
                    self.observer.bind_found_no_pod(task, placement.node, reason)
                else:
                    self.observer.bind_failed(task, placement.node, reason)
        if gang is None:
            return
        gang.outstanding -= 1
        if gang.outstanding > 0:
            return
        del self._gangs[gang_key]
        if not task.job:
            return
        if gang.gone:
            # Members deleted while the gang was bound (its job torn down or scaled in): nothing
            # failed that the scheduler could or should do again.
            log.info(
                "gang %s: %d pods bound, %d deleted before their binding",
                task.job,
                len(gang.bound),
                len(gang.gone),
            )
        if gang.failed and gang.bound:
            m.GANG_PARTIAL.inc()
            log.error(
                "gang %s partly bound: %d bound, %d failed (%s)",
                task.job,
                len(gang.bound),
                len(gang.failed),
                "; ".join(f"{k}: {v}" for k, v in list(gang.failed.items())[:5]),
            )
            if self.observer is not None:
                self.observer.gang_partly_bound(task.job, gang.bound, gang.failed)
        elif gang.bound and self.observer is not None:
            self.observer.gang_bound(task.job, gang.bound)


class _BindingMeta(msgspec.Struct):
    name: str
    namespace: str
    uid: str


class _Target(msgspec.Struct, tag_field="kind", tag="Node", rename="camel"):
    name: str
    api_version: str = "v1"


class _Binding(msgspec.Struct, tag_field="kind", tag="Binding", rename="camel"):
    """A v1 Binding, encoded straight to bytes (no dict per bind)."""

    metadata: _BindingMeta
    target: _Target
    api_version: str = "v1"


_binding_encoder = msgspec.json.Encoder()


def binding_body(namespace: str, name: str, uid: str, node: str) -> bytes:
    """The body of ``POST pods/NAME/binding``: a v1 Binding of the pod (its uid a precondition) to
    ``node``."""
    return _binding_encoder.encode(_Binding(_BindingMeta(name, namespace, uid), _Target(node)))


#: ``caldera_writes_withheld_total{writer="bind"}``: writes the lease gate kept back
_withheld = m.WRITES_WITHHELD.labels("bind")


@functools.cache
def _binds(result: str) -> Any:
    """The ``caldera_binds_total{result}`` child, looked up once per result and kept (prometheus_client's
    ``labels`` validates and hashes the label values on each call; ``inc`` on the child is all a bind pays)."""
    return m.BINDS.labels(result)


@functools.cache
def _claim_writes(write: str, ok: bool) -> Any:
    """The ``caldera_resourceclaim_writes_total{write,result}`` child, looked up once (see ``_binds``)."""
    return m.CLAIM_WRITES.labels(write, "ok" if ok else "error")


def _reason(exc: ApiError) -> str:
    if exc.code == 0:
        return f"no answer from the API server ({exc.reason}: {exc.message})"
    return f"{exc.code} {exc.reason or ''}: {exc.message}".strip()
