"""What the controllers know: lean views of pods, PodGroups and queues, indexed the way the
reconcilers ask, plus a keyed work queue.

Everything here is derived from listed and watched state only, so a controller that restarts
rebuilds exactly the same picture and converges; nothing is remembered that the API does not hold.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from typing import Generic, TypeVar

import msgspec

from caldera.framework.model import GROUP_NAME_ANNOTATION, QUEUE_NAME_ANNOTATION
from caldera.framework.objects import ObjectMeta, OwnerReference, PodSchedulingGroup

log = logging.getLogger("caldera.controllers")

MIN_MEMBER_ANNOTATION = "scheduling.volcano.sh/group-min-member"
#: PodGroups the PodGroup controller created (and so may delete) carry this label.
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY = "caldera-podgroup-controller"
#: Keeps a deleted queue until its PodGroups are gone (it drains).
QUEUE_FINALIZER = "scheduling.caldera.dev/queue-drain"
PODGROUP_PREFIX = "podgroup-"


class _Lean(msgspec.Struct, rename="camel", frozen=True):
    pass


#: Object metadata and owner references are the scheduler's own lean structs; the controllers'
#: pod, PodGroup and Queue views below are leaner still (no containers, affinity or resources).
Meta = ObjectMeta
OwnerRef = OwnerReference


class PodSpec(_Lean, frozen=True):
    scheduler_name: str = "default-scheduler"
    priority_class_name: str = ""
    node_name: str = ""
    #: ``spec.schedulingGroup``: the pod's group is a ``scheduling.k8s.io/v1alpha2`` PodGroup
    scheduling_group: PodSchedulingGroup | None = None


class PodStatus(_Lean, frozen=True):
    phase: str = "Pending"


class Pod(_Lean, frozen=True):
    metadata: Meta = Meta()
    spec: PodSpec = PodSpec()
    status: PodStatus = PodStatus()


class PodGroupSpec(_Lean, frozen=True):
    min_member: int = 1
    queue: str = ""
    priority_class_name: str = ""


class PodGroupStatus(_Lean, frozen=True):
    phase: str = ""
    running: int = 0
    succeeded: int = 0
    failed: int = 0


class PodGroup(_Lean, frozen=True):
    metadata: Meta = Meta()
    spec: PodGroupSpec = PodGroupSpec()
    status: PodGroupStatus = PodGroupStatus()


class QueueSpec(_Lean, frozen=True):
    weight: int = 1
    #: Volcano's desired state: "" or "Open", or "Closed".
    state: str = ""


class QueueStatus(_Lean, frozen=True):
    state: str = ""
    pending: int = 0
    running: int = 0
    inqueue: int = 0
    unknown: int = 0
    completed: int = 0


class Queue(_Lean, frozen=True):
    metadata: Meta = Meta()
    spec: QueueSpec = QueueSpec()
    status: QueueStatus = QueueStatus()


def controller_ref(pod: Pod) -> OwnerRef | None:
    for ref in pod.metadata.owner_references:
        if ref.controller and ref.uid:
            return ref
    return None


def generated_group_name(pod: Pod) -> str:
    """The PodGroup name the controller gives a pod: after its controlling owner (ReplicaSet,
    StatefulSet, Job, ...) so all its replicas share one group, else after the pod itself. Uids, as
    Volcano does, so an owner deleted and re-created under the same name gets a fresh group."""
    ref = controller_ref(pod)
    return PODGROUP_PREFIX + (ref.uid if ref is not None else pod.metadata.uid)


def is_managed(pg: PodGroup) -> bool:
    return pg.metadata.labels.get(MANAGED_BY_LABEL) == MANAGED_BY


PgKey = tuple[str, str]
K = TypeVar("K")


class ControllerState:
    """The indexes the reconcilers read; the reflectors' handlers keep them current and report which
    keys each change touches."""

    def __init__(
        self,
        scheduler_names: Iterable[str],
        default_queue: str,
        on_podgroup_key: Callable[[PgKey], None],
        on_queue_key: Callable[[str], None],
        reads_phase: bool = True,
    ) -> None:
        self.scheduler_names = frozenset(scheduler_names)
        self.default_queue = default_queue
        #: a pod's phase is read by a reconciler (the PodGroup controller writes status counts)
        self.reads_phase = reads_phase
        self._pg_key_changed = on_podgroup_key
        self._queue_key_changed = on_queue_key
        self.pods: dict[str, Pod] = {}
        #: (namespace, group name) → pod uids that refer to it (annotation) or would (ours, unannotated)
        self.pods_by_group: dict[PgKey, set[str]] = {}
        self._group_of: dict[str, PgKey] = {}
        self.podgroups: dict[PgKey, PodGroup] = {}
        self.podgroups_by_queue: dict[str, set[PgKey]] = {}
        self.queues: dict[str, Queue] = {}
        self.pods_handler = _Handler(self._set_pods, self._upsert_pod, self._delete_pod)
        self.podgroups_handler = _Handler(self._set_podgroups, self._upsert_podgroup, self._delete_podgroup)
        self.queues_handler = _Handler(self._set_queues, self._upsert_queue, self._delete_queue)

    # -- reading -------------------------------------------------------------------------------------
    def is_ours(self, pod: Pod) -> bool:
        return pod.spec.scheduler_name in self.scheduler_names

    def group_key(self, pod: Pod) -> PgKey | None:
        """The Volcano PodGroup a pod belongs to or would get; None for a pod of a
        ``scheduling.k8s.io/v1alpha2`` PodGroup (``spec.schedulingGroup``, immutable): its group is
        Kubernetes' own, no Volcano PodGroup is made or counted for it."""
        sg = pod.spec.scheduling_group
        if sg is not None and sg.pod_group_name:
            return None
        group = pod.metadata.annotations.get(GROUP_NAME_ANNOTATION)
        if group:
            return (pod.metadata.namespace, group)
        if self.is_ours(pod):
            return (pod.metadata.namespace, generated_group_name(pod))
        return None

    def pods_of(self, key: PgKey) -> list[Pod]:
        return [self.pods[uid] for uid in self.pods_by_group.get(key, ()) if uid in self.pods]

    def queue_of_podgroup(self, pg: PodGroup) -> str:
        return pg.spec.queue or self.default_queue

    def podgroups_in(self, queue: str) -> list[PodGroup]:
        return [self.podgroups[k] for k in self.podgroups_by_queue.get(queue, ()) if k in self.podgroups]

    def queue_admits(self, name: str) -> bool:
        """A queue takes new PodGroups only while it is open and not being deleted. The default queue
        counts as open before its object exists (the queue controller is creating it)."""
        queue = self.queues.get(name)
        if queue is None:
            return name == self.default_queue
        if queue.metadata.deletion_timestamp:
            return False
        return (queue.spec.state or "Open") == "Open"

    def all_podgroup_keys(self) -> set[PgKey]:
        return set(self.pods_by_group) | set(self.podgroups)

    def all_queue_keys(self) -> set[str]:
        return {*self.queues, self.default_queue}

    # -- pods ----------------------------------------------------------------------------------------
    def _index_pod(self, pod: Pod) -> None:
        uid = pod.metadata.uid
        old_key = self._group_of.pop(uid, None)
        if old_key is not None:
            members = self.pods_by_group.get(old_key)
            if members is not None:
                members.discard(uid)
                if not members:
                    del self.pods_by_group[old_key]
            self._pg_key_changed(old_key)
        key = self.group_key(pod)
        if key is not None:
            self._group_of[uid] = key
            self.pods_by_group.setdefault(key, set()).add(uid)
            if key != old_key:
                self._pg_key_changed(key)

    def _upsert_pod(self, pod: Pod) -> None:
        if not pod.metadata.uid:
            log.warning("skipping a pod without a uid: %s/%s", pod.metadata.namespace, pod.metadata.name)
            return
        old = self.pods.get(pod.metadata.uid)
        self.pods[pod.metadata.uid] = pod
        if old is not None and self._same_for_reconcilers(old, pod):
            # A status or binding update (most pod events): its group, and everything a reconciler
            # reads of it, is unchanged; looking at the group again would find nothing to do.
            return
        self._index_pod(pod)

    def _same_for_reconcilers(self, old: Pod, new: Pod) -> bool:
        """Every field of a pod that the group key or the PodGroup controller reads is equal (see
        ``group_key``, ``PodGroupController.reconcile`` and ``podgroup_for``)."""
        om, nm = old.metadata, new.metadata
        return (
            om.annotations == nm.annotations
            and om.labels == nm.labels
            and om.deletion_timestamp == nm.deletion_timestamp
            and om.creation_timestamp == nm.creation_timestamp
            and om.owner_references == nm.owner_references
            and om.name == nm.name
            and om.namespace == nm.namespace
            and old.spec.scheduler_name == new.spec.scheduler_name
            and old.spec.priority_class_name == new.spec.priority_class_name
            and (not self.reads_phase or old.status.phase == new.status.phase)
        )

    def _delete_pod(self, pod: Pod) -> None:
        uid = pod.metadata.uid
        if self.pods.pop(uid, None) is None:
            return
        key = self._group_of.pop(uid, None)
        if key is not None:
            members = self.pods_by_group.get(key)
            if members is not None:
                members.discard(uid)
                if not members:
                    del self.pods_by_group[key]
            self._pg_key_changed(key)

    def _set_pods(self, pods: list[Pod]) -> None:
        seen = {p.metadata.uid for p in pods if p.metadata.uid}
        for uid, old in list(self.pods.items()):
            if uid not in seen:
                self._delete_pod(old)
        for pod in pods:
            known = self.pods.get(pod.metadata.uid)
            if known is None or known.metadata.resource_version != pod.metadata.resource_version:
                self._upsert_pod(pod)

    # -- PodGroups -----------------------------------------------------------------------------------
    def _upsert_podgroup(self, pg: PodGroup) -> None:
        key = (pg.metadata.namespace, pg.metadata.name)
        old = self.podgroups.get(key)
        self.podgroups[key] = pg
        queue = self.queue_of_podgroup(pg)
        if old is not None:
            old_queue = self.queue_of_podgroup(old)
            if old_queue != queue:
                self.podgroups_by_queue.get(old_queue, set()).discard(key)
                self._queue_key_changed(old_queue)
        self.podgroups_by_queue.setdefault(queue, set()).add(key)
        self._pg_key_changed(key)
        self._queue_key_changed(queue)

    def _delete_podgroup(self, pg: PodGroup) -> None:
        key = (pg.metadata.namespace, pg.metadata.name)
        current = self.podgroups.get(key)
        if current is None:
            return
        if pg.metadata.uid and current.metadata.uid and pg.metadata.uid != current.metadata.uid:
            # An event about an older PodGroup of the same name: the newer one stays.
            log.info("ignoring the deletion of an older PodGroup %s/%s (uid %s)", *key, pg.metadata.uid)
            return
        del self.podgroups[key]
        queue = self.queue_of_podgroup(current)
        members = self.podgroups_by_queue.get(queue)
        if members is not None:
            members.discard(key)
            if not members:
                del self.podgroups_by_queue[queue]
        self._pg_key_changed(key)
        self._queue_key_changed(queue)

    def _set_podgroups(self, pgs: list[PodGroup]) -> None:
        seen = {(pg.metadata.namespace, pg.metadata.name): pg for pg in pgs}
        for key, old in list(self.podgroups.items()):
            fresh = seen.get(key)
            if fresh is None or fresh.metadata.uid != old.metadata.uid:
                self._delete_podgroup(old)
        for key, pg in seen.items():
            known = self.podgroups.get(key)
            if known is None or known.metadata.resource_version != pg.metadata.resource_version:
                self._upsert_podgroup(pg)

    # -- queues --------------------------------------------------------------------------------------
    def _upsert_queue(self, queue: Queue) -> None:
        name = queue.metadata.name
        old = self.queues.get(name)
        self.queues[name] = queue
        self._queue_key_changed(name)
        if old is None or self.queue_admits(name) != _admits(old):
            # Pods that were waiting for this queue to open (or that must now wait) are looked at again.
            for key in self._ungrouped_keys_in(name):
                self._pg_key_changed(key)

    def _delete_queue(self, queue: Queue) -> None:
        name = queue.metadata.name
        current = self.queues.get(name)
        if current is None:
            return
        if queue.metadata.uid and current.metadata.uid and queue.metadata.uid != current.metadata.uid:
            return
        del self.queues[name]
        self._queue_key_changed(name)

    def _set_queues(self, queues: list[Queue]) -> None:
        seen = {q.metadata.name: q for q in queues}
        for name, old in list(self.queues.items()):
            fresh = seen.get(name)
            if fresh is None or fresh.metadata.uid != old.metadata.uid:
                self._delete_queue(old)
        for name, q in seen.items():
            known = self.queues.get(name)
            if known is None or known.metadata.resource_version != q.metadata.resource_version:
                self._upsert_queue(q)

    def _ungrouped_keys_in(self, queue: str) -> set[PgKey]:
        keys: set[PgKey] = set()
        for uid, key in self._group_of.items():
            pod = self.pods.get(uid)
            if pod is None or GROUP_NAME_ANNOTATION in pod.metadata.annotations:
                continue
            if (pod.metadata.annotations.get(QUEUE_NAME_ANNOTATION) or self.default_queue) == queue:
                keys.add(key)
        return keys


def _admits(queue: Queue) -> bool:
    return not queue.metadata.deletion_timestamp and (queue.spec.state or "Open") == "Open"


T = TypeVar("T")
A = TypeVar("A")


class _Handler(Generic[T]):
    """A reflector's handler (replace / upsert / delete) for a controller's index. What one of them
    raises is logged and passed on: the watch counts it and re-lists the kind, and ``replace``
    rebuilds the index (cache/watch.py), so a failed update is not lost."""

    def __init__(
        self, replace: Callable[[list[T]], None], upsert: Callable[[T], None], delete: Callable[[T], None]
    ) -> None:
        self._replace = replace
        self._upsert = upsert
        self._delete = delete

    def replace(self, objects: list[T]) -> None:
        self._guard(self._replace, objects)

    def upsert(self, obj: T) -> None:
        self._guard(self._upsert, obj)

    def delete(self, obj: T) -> None:
        self._guard(self._delete, obj)

    @staticmethod
    def _guard(fn: Callable[[A], None], arg: A) -> None:
        try:
            fn(arg)
        except Exception:
            log.exception("controller index rejected an update; the kind is re-listed")
            raise


class WorkQueue(Generic[K]):
    """A keyed queue in the style of client-go's: a key is queued at most once, a key being worked on
    is never handed to a second worker (a change meanwhile queues it again once the first finishes),
    and a key can come back after a delay."""

    def __init__(self) -> None:
        self._queue: asyncio.Queue[K] = asyncio.Queue()
        self._queued: set[K] = set()
        self._processing: set[K] = set()
        self._again: set[K] = set()
        self._timers: dict[K, asyncio.TimerHandle] = {}
        self.closed = False

    def __len__(self) -> int:
        return len(self._queued)

    def add(self, key: K) -> None:
        if self.closed:
            return
        if key in self._processing:
            self._again.add(key)
            return
        if key in self._queued:
            return
        self._queued.add(key)
        self._queue.put_nowait(key)

    def add_after(self, key: K, delay: float) -> None:
        if self.closed:
            return
        if delay <= 0:
            self.add(key)
            return
        timer = self._timers.get(key)
        if timer is not None:
            # The sooner of two wake-ups wins.
            if timer.when() <= asyncio.get_running_loop().time() + delay:
                return
            timer.cancel()
        self._timers[key] = asyncio.get_running_loop().call_later(delay, self._fire, key)

    def _fire(self, key: K) -> None:
        self._timers.pop(key, None)
        self.add(key)

    async def get(self) -> K:
        key = await self._queue.get()
        self._queued.discard(key)
        self._processing.add(key)
        return key

    def done(self, key: K) -> None:
        self._processing.discard(key)
        if key in self._again:
            self._again.discard(key)
            self.add(key)

    @property
    def idle(self) -> bool:
        return not self._queued and not self._processing and not self._again

    def close(self) -> None:
        self.closed = True
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
