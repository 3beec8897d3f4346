"""The watches that feed a :class:`ClusterCache`: one reflector per kind, and readiness.

Each kind's handler remembers the objects it has passed on (references only), so a re-list after a
410 or an outage is reconciled: unchanged objects (same resourceVersion) cost nothing, changed ones
are upserted, and ones that vanished meanwhile are deleted from the cache.

An event the cache (or a subscriber) fails to apply is not skipped: its key is remembered as dirty
and :class:`ApplyFailed` is raised once every consumer has had the event; the reflector counts it,
re-lists the kind, and the reconcile applies each dirty key afresh (the listed object is upserted
whatever its version; one the list does not have is deleted), so the cache ends holding what the
API holds.

Other consumers of the same kinds (the PodGroup and Queue controllers) subscribe to these watches
instead of running their own: every event is received and decoded once, and each subscriber gets the
same decoded object after the cache.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any, Generic, TypeVar

import msgspec

from caldera.cache.client import ApiClient, ApiError
from caldera.cache.store import ClusterCache
from caldera.cache.supervise import stop_workers, supervise
from caldera.cache.watch import Handler, Reflector
from caldera.framework.dra.objects import DeviceClass, ResourceClaim, ResourceSlice
from caldera.framework.numa import Numatopology
from caldera.framework.objects import (
    CSINode,
    HyperNode,
    NativePodGroup,
    Node,
    PersistentVolume,
    PersistentVolumeClaim,
    Pod,
    PodDisruptionBudget,
    PodGroup,
    PriorityClass,
    Queue,
    ResourceQuota,
    StorageClass,
    Workload,
)

log = logging.getLogger("caldera.informer")

T = TypeVar("T")


class ApplyFailed(Exception):
    """The cache or a subscriber raised on an event; the kind must be re-listed and reconciled."""


PATHS: dict[str, str] = {
    "pods": "/api/v1/pods",
    "nodes": "/api/v1/nodes",
    "podgroups": "/apis/scheduling.volcano.sh/v1beta1/podgroups",
    "queues": "/apis/scheduling.volcano.sh/v1beta1/queues",
    "priorityclasses": "/apis/scheduling.k8s.io/v1/priorityclasses",
    "hypernodes": "/apis/topology.volcano.sh/v1alpha1/hypernodes",
    "poddisruptionbudgets": "/apis/policy/v1/poddisruptionbudgets",
    "resourcequotas": "/api/v1/resourcequotas",
    "numatopologies": "/apis/nodeinfo.volcano.sh/v1alpha1/numatopologies",
    "persistentvolumeclaims": "/api/v1/persistentvolumeclaims",
    "persistentvolumes": "/api/v1/persistentvolumes",
    "storageclasses": "/apis/storage.k8s.io/v1/storageclasses",
    "csinodes": "/apis/storage.k8s.io/v1/csinodes",
    "deviceclasses": "/apis/resource.k8s.io/v1/deviceclasses",
    "resourceslices": "/apis/resource.k8s.io/v1/resourceslices",
    "resourceclaims": "/apis/resource.k8s.io/v1/resourceclaims",
}
#: Kubernetes' own gang API (KEP-4671): watched only while discovery says the server serves it
#: (kube-apiserver 1.36 with ``--runtime-config=scheduling.k8s.io/v1alpha2=true
#: --feature-gates=GenericWorkload=true``; off by default)
NATIVE_GANG_GROUP_VERSION = "scheduling.k8s.io/v1alpha2"
NATIVE_GANG_PATHS: dict[str, str] = {
    "native-podgroups": f"/apis/{NATIVE_GANG_GROUP_VERSION}/podgroups",
    "workloads": f"/apis/{NATIVE_GANG_GROUP_VERSION}/workloads",
}
#: how often discovery is asked again whether the server serves the native gang API
GANG_DISCOVERY_INTERVAL = 60.0
#: kinds a cluster may not serve (a CRD not installed): a 404 on list counts as "none of them"
OPTIONAL = frozenset(
    {
        "hypernodes",
        "poddisruptionbudgets",
        "resourcequotas",
        # Volcano's resource-exporter publishes them; a cluster without its CRD has none
        "numatopologies",
        "persistentvolumeclaims",
        "persistentvolumes",
        "storageclasses",
        "csinodes",
        # Dynamic Resource Allocation (GA in Kubernetes 1.34): an older server does not serve it
        "deviceclasses",
        "resourceslices",
        "resourceclaims",
    }
)


class ConfigMapMeta(msgspec.Struct, rename="camel", frozen=True):
    name: str = ""
    namespace: str = ""
    uid: str = ""
    resource_version: str = ""


class ConfigMap(msgspec.Struct, frozen=True):
    metadata: ConfigMapMeta = ConfigMapMeta()
    data: dict[str, str] | None = None


class _ApiResource(msgspec.Struct):
    name: str = ""


class _ApiResourceList(msgspec.Struct):
    resources: list[_ApiResource] = []


_resource_list_decoder = msgspec.json.Decoder(_ApiResourceList)


def _key(obj: Any) -> str:
    meta = obj.metadata
    return f"{meta.namespace}/{meta.name}" if meta.namespace else meta.name


def _pod_key(pod: Pod) -> str:
    return pod.metadata.uid or f"{pod.metadata.namespace}/{pod.metadata.name}"


class KindHandler(Generic[T]):
    """Passes one kind's events to the cache and reconciles re-lists."""

    def __init__(
        self,
        upsert: Callable[[T], None],
        delete: Callable[[T], None],
        key: Callable[[T], str] = _key,
        on_change: Callable[[], None] | None = None,
    ) -> None:
        self._upsert = upsert
        self._delete = delete
        self._keyfn = key
        self.known: dict[str, T] = {}
        #: keys whose last event failed to apply, with the object last passed on for them (None: none)
        self.dirty: dict[str, T | None] = {}
        self._failed: list[str] = []
        self.on_change = on_change
        #: further consumers of this kind's events (same objects, after the cache)
        self.subscribers: list[Handler[T]] = []

    def replace(self, objects: list[T]) -> None:
        seen: dict[str, T] = {}
        dirty, self.dirty = self.dirty, {}
        for obj in objects:
            k = self._keyfn(obj)
            seen[k] = obj
            old = self.known.get(k)
            # A dirty key is applied again whatever its version: its last event did not go through.
            # (An upsert, not a delete then an upsert: the cache's upsert replaces what it holds for
            # the key and keeps what only it knows, such as a bind in flight.)
            if (
                k not in dirty
                and old is not None
                and old.metadata.resource_version == obj.metadata.resource_version  # type: ignore[attr-defined]
            ):
                continue
            self._guard(self._upsert, obj, k)
        for k, old in self.known.items():
            if k not in seen:
                log.info("forgetting %s, deleted while we were not watching", k)
                self._guard(self._delete, old, k)
        for k, last in dirty.items():
            if k not in seen and k not in self.known and last is not None:
                self._guard(self._delete, last, k)  # a delete that failed
        self.known = seen
        for sub in self.subscribers:
            self._guard_all(sub.replace, objects)
        if self.on_change is not None:
            self.on_change()
        self._raise_failed()

    def upsert(self, obj: T) -> None:
        k = self._keyfn(obj)
        previous = self.known.get(k)
        self.known[k] = obj
        self._guard(self._upsert, obj, k, previous)
        for sub in self.subscribers:
            self._guard(sub.upsert, obj, k, previous)
        if self.on_change is not None:
            self.on_change()
        self._raise_failed()

    def delete(self, obj: T) -> None:
        k = self._keyfn(obj)
        current = self.known.get(k)
        if current is not None:
            cur_uid = getattr(current.metadata, "uid", "")  # type: ignore[attr-defined]
            new_uid = getattr(obj.metadata, "uid", "")  # type: ignore[attr-defined]
            if not (cur_uid and new_uid and cur_uid != new_uid):
                del self.known[k]
        self._guard(self._delete, obj, k, obj)
        for sub in self.subscribers:
            self._guard(sub.delete, obj, k, obj)
        if self.on_change is not None:
            self.on_change()
        self._raise_failed()

    def subscribe(self, handler: Handler[T]) -> None:
        """Send this kind's events to ``handler`` too, starting with what is known now."""
        self.subscribers.append(handler)
        self._guard_all(handler.replace, list(self.known.values()))

    def unsubscribe(self, handler: Handler[T]) -> None:
        if handler in self.subscribers:
            self.subscribers.remove(handler)

    def _guard(self, fn: Callable[[T], None], obj: T, key: str, last: T | None = None) -> None:
        """``fn(obj)``; if it raises, the key is dirty (``last``: what the cache may hold for it)."""
        try:
            fn(obj)
        except Exception:
            log.exception("applying %s failed; the kind is re-listed and reconciled", _key(obj))
            if key not in self.dirty or self.dirty[key] is None:
                self.dirty[key] = last
            self._failed.append(key)

    def _raise_failed(self) -> None:
        if self._failed:
            keys, self._failed = self._failed, []
            raise ApplyFailed(", ".join(dict.fromkeys(keys)))

    def _guard_all(self, fn: Callable[[list[T]], None], objects: list[T]) -> None:
        try:
            fn(objects)
        except Exception:
            log.exception("a subscriber rejected a list of %d objects; re-listing", len(objects))
            self._failed.append("(a subscriber's list)")


class Informers:
    """All the watches the scheduler needs, feeding one cache."""

    def __init__(
        self,
        client: ApiClient,
        cache: ClusterCache,
        *,
        watch_timeout: int = 300,
        on_event: Callable[[str, str, int], None] | None = None,
        on_change: Callable[[], None] | None = None,
    ) -> None:
        self.client = client
        self.cache = cache
        c = cache
        self.handlers: dict[str, KindHandler[Any]] = {
            "pods": KindHandler(c.upsert_pod, c.delete_pod, key=_pod_key, on_change=on_change),
            "nodes": KindHandler(c.upsert_node, c.delete_node, on_change=on_change),
            "podgroups": KindHandler(c.upsert_podgroup, c.delete_podgroup, on_change=on_change),
            "queues": KindHandler(c.upsert_queue, c.delete_queue, on_change=on_change),
            "priorityclasses": KindHandler(
                c.upsert_priority_class, c.delete_priority_class, on_change=on_change
            ),
            "hypernodes": KindHandler(c.upsert_hypernode, c.delete_hypernode, on_change=on_change),
            "poddisruptionbudgets": KindHandler(c.upsert_pdb, c.delete_pdb, on_change=on_change),
            "resourcequotas": KindHandler(
                c.upsert_resource_quota, c.delete_resource_quota, on_change=on_change
            ),
            "numatopologies": KindHandler(c.upsert_numatopology, c.delete_numatopology, on_change=on_change),
            "persistentvolumeclaims": KindHandler(c.upsert_pvc, c.delete_pvc, on_change=on_change),
            "persistentvolumes": KindHandler(c.upsert_pv, c.delete_pv, on_change=on_change),
            "storageclasses": KindHandler(
                c.upsert_storage_class, c.delete_storage_class, on_change=on_change
            ),
            "csinodes": KindHandler(c.upsert_csinode, c.delete_csinode, on_change=on_change),
            "deviceclasses": KindHandler(c.upsert_device_class, c.delete_device_class, on_change=on_change),
            "resourceslices": KindHandler(
                c.upsert_resource_slice, c.delete_resource_slice, on_change=on_change
            ),
            "resourceclaims": KindHandler(
                c.upsert_resource_claim, c.delete_resource_claim, on_change=on_change
            ),
        }
        kinds: dict[str, type] = {
            "pods": Pod,
            "nodes": Node,
            "podgroups": PodGroup,
            "queues": Queue,
            "priorityclasses": PriorityClass,
            "hypernodes": HyperNode,
            "poddisruptionbudgets": PodDisruptionBudget,
            "resourcequotas": ResourceQuota,
            "numatopologies": Numatopology,
            "persistentvolumeclaims": PersistentVolumeClaim,
            "persistentvolumes": PersistentVolume,
            "storageclasses": StorageClass,
            "csinodes": CSINode,
            "deviceclasses": DeviceClass,
            "resourceslices": ResourceSlice,
            "resourceclaims": ResourceClaim,
        }
        self.reflectors: dict[str, Reflector[Any]] = {
            name: Reflector(
                client,
                PATHS[name],
                kinds[name],
                self.handlers[name],
                name=name,
                watch_timeout=watch_timeout,
                on_event=on_event,
                optional=name in OPTIONAL,
            )
            for name in PATHS
        }
        self.handlers["native-podgroups"] = KindHandler(
            c.upsert_native_podgroup, c.delete_native_podgroup, on_change=on_change
        )
        self.handlers["workloads"] = KindHandler(c.upsert_workload, c.delete_workload, on_change=on_change)
        self._watch_timeout = watch_timeout
        self._on_event = on_event
        self._tasks: list[asyncio.Task[None]] = []
        #: the native gang API's watches while it is served (started and stopped by discovery)
        self._gang_tasks: list[asyncio.Task[None]] = []
        #: set once discovery has answered: the first session waits for it (and for the native
        #: watches' first lists when the API is served)
        self.gang_discovered = asyncio.Event()
        self._discovery: asyncio.Task[None] | None = None
        self.gang_discovery_interval = GANG_DISCOVERY_INTERVAL

    def add(self, name: str, reflector: Reflector[Any]) -> None:
        """Another watched kind (the conf ConfigMap) that must sync before the first session."""
        self.reflectors[name] = reflector

    def start(self) -> None:
        for name, reflector in self.reflectors.items():
            self._tasks.append(supervise(f"watch-{name}", reflector.run))
        self._discovery = supervise("gang-api-discovery", self._discover_gang_api)

    async def stop(self) -> None:
        workers = [*self._tasks, *self._gang_tasks]
        if self._discovery is not None:
            workers.append(self._discovery)
            self._discovery = None
        await stop_workers(workers)
        self._tasks.clear()
        self._gang_tasks.clear()

    # -- Kubernetes' own gang API: watched while the server serves it --------------------------------
    async def gang_api_served(self) -> bool | None:
        """Whether the server serves ``scheduling.k8s.io/v1alpha2`` podgroups (discovery: the group
        version's resource list); None when the server did not answer (ask again later)."""
        try:
            raw = await self.client.request("GET", f"/apis/{NATIVE_GANG_GROUP_VERSION}", timeout=10)
        except ApiError as exc:
            if exc.code in (403, 404):
                return False
            log.info("discovery of %s failed (%s); asking again later", NATIVE_GANG_GROUP_VERSION, exc)
            return None
        try:
            names = {r.name for r in _resource_list_decoder.decode(raw).resources}
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            log.warning("undecodable discovery document of %s: %s", NATIVE_GANG_GROUP_VERSION, exc)
            return None
        return "podgroups" in names

    async def _discover_gang_api(self) -> None:
        """Discovery at start and every ``gang_discovery_interval``: start the native watches when the
        API appears, stop them (and forget their objects) when it goes; one log line each time the
        set of gang APIs in use changes."""
        while True:
            served = await self.gang_api_served()
            if served is not None:
                await self.set_gang_api(served)
                self.gang_discovered.set()
            await asyncio.sleep(self.gang_discovery_interval if served is not None else 2.0)

    async def set_gang_api(self, served: bool) -> None:
        running = bool(self._gang_tasks)
        if served == running and self.gang_discovered.is_set():
            return
        if served and not running:
            for name, path in NATIVE_GANG_PATHS.items():
                reflector: Reflector[Any] = Reflector(
                    self.client,
                    path,
                    NativePodGroup if name == "native-podgroups" else Workload,
                    self.handlers[name],
                    name=name,
                    watch_timeout=self._watch_timeout,
                    on_event=self._on_event,
                    optional=True,
                )
                self.reflectors[name] = reflector
                self._gang_tasks.append(supervise(f"watch-{name}", reflector.run))
        elif not served and running:
            await stop_workers(self._gang_tasks)
            self._gang_tasks.clear()
            for name in NATIVE_GANG_PATHS:
                self.reflectors.pop(name, None)
                self.handlers[name].replace([])  # their objects are gone with the API
        self.cache.set_native_gang_api(served)
        native = f"Kubernetes {NATIVE_GANG_GROUP_VERSION} PodGroups and Workloads"
        log.info(
            "gang APIs in use: Volcano scheduling.volcano.sh/v1beta1 PodGroups%s",
            f", {native}" if served else f" ({NATIVE_GANG_GROUP_VERSION} not served)",
        )

    def synced(self, kinds: list[str] | None = None) -> bool:
        if kinds is None and self._discovery is not None and not self.gang_discovered.is_set():
            return False
        names = self.reflectors if kinds is None else kinds
        return all(self.reflectors[name].synced.is_set() for name in names)

    def subscribe(self, kind: str, handler: Handler[Any]) -> None:
        """Feed ``handler`` (replace / upsert / delete) from this kind's watch (see the module doc)."""
        self.handlers[kind].subscribe(handler)

    def unsubscribe(self, kind: str, handler: Handler[Any]) -> None:
        self.handlers[kind].unsubscribe(handler)

    def fresh(self) -> bool:
        """Every kind listed and currently connected (or only briefly cut off)."""
        return all(r.fresh() for r in self.reflectors.values())

    def unsynced(self) -> list[str]:
        missing = [name for name, r in self.reflectors.items() if not r.synced.is_set()]
        if self._discovery is not None and not self.gang_discovered.is_set():
            missing.append("gang-api-discovery")
        return missing

    async def wait_synced(self, stop: asyncio.Event | None = None) -> bool:
        while not self.synced():
            if stop is not None and stop.is_set():
                return False
            await asyncio.sleep(0.02)
        return True
