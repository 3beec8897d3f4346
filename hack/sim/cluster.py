"""SimCluster: the simulated cluster as an async context manager, for tests and tools."""

from __future__ import annotations

import asyncio
import copy
import gc
import ipaddress
import logging
import secrets
import shutil
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any

from aiohttp import web

from .controllers import Kubelet, WorkloadControllers
from .disruption import DisruptionController
from .dra import ResourceClaimController
from .faults import Faults
from .kubeconfig import write_kubeconfig
from .nodes import ClusterSpec, NodeTemplate, build_nodes, resource_for
from .podgroups import PodGroupProtection
from .quota import QuotaController
from .resources import NAMESPACES, NODES, PRIORITY_CLASSES, resource
from .server import ApiServer
from .storage import Provisioner
from .store import MODIFIED, Store, rfc3339

log = logging.getLogger("caldera.sim")

DEFAULT_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
SYSTEM_PRIORITY_CLASSES = (
    ("system-cluster-critical", 2_000_000_000),
    ("system-node-critical", 2_000_001_000),
)


def check_loopback(host: str) -> None:
    if host == "localhost":
        return
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        raise ValueError(f"caldera-sim listens on loopback only, not {host!r}")


class SimCluster:
    """A simulated Kubernetes cluster served over HTTP on loopback.

    `async with SimCluster(nodes=4, kubelet_delay=0.05) as sim:` then point any client at `sim.kubeconfig_path`
    (or `sim.url` + `sim.token`). `sim.store` is the live state; `sim.faults` can be changed at any time;
    `sim.compact()` and `sim.drop_watches()` inject those faults on demand.
    """

    def __init__(
        self,
        nodes: int | ClusterSpec | Iterable[NodeTemplate] | None = 0,
        *,
        node_cpu: str = "32",
        node_memory: str = "128Gi",
        node_pods: int | str = 110,
        node_labels: dict[str, str] | None = None,
        cluster_file: str | Path | None = None,
        objects: Iterable[dict[str, Any]] = (),
        host: str = "127.0.0.1",
        port: int = 0,
        token: str | None = None,
        kubeconfig_path: str | Path | None = None,
        faults: Faults | None = None,
        kubelet: bool = True,
        kubelet_delay: float = 1.0,
        kubelet_stop_delay: float | None = None,
        kubelet_admission: bool = True,
        controllers: bool = True,
        history_size: int = 10_000,
        bookmark_interval: float = 60.0,
        watch_timeout: tuple[float, float] = (1800.0, 3600.0),
        event_ttl: float = 3600.0,
        gc_full_interval: float | None = None,
        crd_dir: str | Path | None = None,
        seed: int | None = None,
        native_gang: bool = False,
    ):
        check_loopback(host)
        if isinstance(nodes, ClusterSpec):
            spec = nodes
        elif isinstance(nodes, int) or nodes is None:
            spec = ClusterSpec.uniform(nodes or 0, node_cpu, node_memory, node_pods, node_labels)
        else:
            spec = ClusterSpec(nodes=list(nodes))
        if cluster_file is not None:
            from_file = ClusterSpec.from_file(cluster_file)
            spec = ClusterSpec(nodes=spec.nodes + from_file.nodes, objects=spec.objects + from_file.objects)
        self.spec = ClusterSpec(nodes=spec.nodes, objects=spec.objects + list(objects))
        self.host = host
        self.port = port
        self.token = token or secrets.token_hex(16)
        self.faults = faults or Faults()
        self.store = Store(
            history_size=history_size,
            seed=seed,
            crd_dir=str(crd_dir) if crd_dir else None,
            native_gang=native_gang,
        )
        self.server = ApiServer(self.store, self.token, self.faults, bookmark_interval, watch_timeout)
        self.kubelet = (
            Kubelet(self.store, kubelet_delay, kubelet_stop_delay, kubelet_admission) if kubelet else None
        )
        self.controllers = WorkloadControllers(self.store) if controllers else None
        self.disruption = DisruptionController(self.store) if controllers else None
        self.quota = QuotaController(self.store) if controllers else None
        self.provisioner = Provisioner(self.store) if controllers else None
        self.resource_claims = ResourceClaimController(self.store) if controllers else None
        self.podgroup_protection = PodGroupProtection(self.store) if controllers and native_gang else None
        self._kubeconfig_arg = Path(kubeconfig_path) if kubeconfig_path else None
        self._tmpdir: str | None = None
        self.kubeconfig_path: Path | None = None
        self._runner: web.AppRunner | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._node_index = 0
        self.event_ttl = event_ttl
        self.gc_full_interval = gc_full_interval
        self._gc_threshold: tuple[int, int, int] | None = None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    async def __aenter__(self) -> SimCluster:
        try:
            await self.start()
        except BaseException:
            await self.stop()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self.store.defer = loop.call_soon
        self._seed()
        self._runner = web.AppRunner(
            self.server.make_app(), access_log=None, handle_signals=False, handler_cancellation=True
        )
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, backlog=2048, reuse_address=True)
        await site.start()
        server = site._server
        if server is not None and getattr(server, "sockets", None):
            self.port = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]
        if self.kubelet is not None:
            self.kubelet.start()
        if self.controllers is not None:
            self.controllers.start()
        if self.disruption is not None:
            self.disruption.start()
        if self.quota is not None:
            self.quota.start()
        if self.provisioner is not None:
            self.provisioner.start()
        if self.resource_claims is not None:
            self.resource_claims.start()
        if self.podgroup_protection is not None:
            self.podgroup_protection.start()
        self._tasks.append(loop.create_task(self._bookmarks(), name="sim-bookmarks"))
        self._tasks.append(loop.create_task(self._periodic_faults(), name="sim-faults"))
        self._tasks.append(loop.create_task(self._expire_events(), name="sim-event-ttl"))
        if self.gc_full_interval:
            # Python's full collections walk every stored object: with a big cluster, a pause of 100 ms or more
            # every few seconds while objects pile up. Young generations stay automatic; full ones are timed.
            # This changes the process's collector, so it is for processes that mostly serve the simulator.
            self._gc_threshold = gc.get_threshold()
            gc.set_threshold(10_000, 10, 1_000_000_000)
            self._tasks.append(loop.create_task(self._full_collections(self.gc_full_interval), name="sim-gc"))
        if self._kubeconfig_arg is None:
            self._tmpdir = tempfile.mkdtemp(prefix="caldera-sim-")
            target = Path(self._tmpdir) / "kubeconfig"
        else:
            target = self._kubeconfig_arg
        # Written last, so a client that sees the file finds a server that answers.
        self.kubeconfig_path = write_kubeconfig(target, self.url, self.token)
        log.info("caldera-sim serving %s (%d nodes)", self.url, len(self.store.objects(NODES)))

    async def stop(self) -> None:
        self.server.drop_watches()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            try:
                await task
            except asyncio.CancelledError:
                pass
        self._tasks.clear()
        if self._gc_threshold is not None:
            gc.set_threshold(*self._gc_threshold)
            self._gc_threshold = None
        if self.kubelet is not None:
            await self.kubelet.stop()
        if self.controllers is not None:
            await self.controllers.stop()
        if self.disruption is not None:
            await self.disruption.stop()
        if self.quota is not None:
            await self.quota.stop()
        if self.provisioner is not None:
            await self.provisioner.stop()
        if self.resource_claims is not None:
            await self.resource_claims.stop()
        if self.podgroup_protection is not None:
            await self.podgroup_protection.stop()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self._tmpdir is not None:
            shutil.rmtree(self._tmpdir, ignore_errors=True)
            self._tmpdir = None

    def _seed(self) -> None:
        for ns in DEFAULT_NAMESPACES:
            self.store.ensure(NAMESPACES, {"metadata": {"name": ns}})
        for name, value in SYSTEM_PRIORITY_CLASSES:
            self.store.ensure(
                PRIORITY_CLASSES,
                {"metadata": {"name": name}, "value": value, "description": "Used for system critical pods."},
            )
        self.add_nodes(self.spec.nodes)
        for obj in self.spec.objects:
            res = resource_for(obj)
            self.store.ensure(res, obj)

    # ---- run-time control -----------------------------------------------------------------------------

    def add_nodes(self, templates: Iterable[NodeTemplate]) -> list[str]:
        names = []
        for node in build_nodes(list(templates), self._node_index):
            self.store.create(NODES, "", node)
            names.append(node["metadata"]["name"])
            self._node_index += 1
        return names

    def create(self, manifest: dict[str, Any]) -> dict[str, Any]:
        """Create an object from a manifest (apiVersion/kind pick the resource), without going through HTTP."""
        res = resource_for(manifest)
        namespace = (manifest.get("metadata") or {}).get("namespace", "default") if res.namespaced else ""
        return self.store.create(res, namespace, manifest).obj

    def get(
        self, plural: str, name: str, namespace: str = "default", group: str = ""
    ) -> dict[str, Any] | None:
        """The stored object (a dict; do not mutate it), or None."""
        return self.store.get_obj(resource(plural, group), namespace, name)

    def objects(self, plural: str, namespace: str | None = None, group: str = "") -> list[dict[str, Any]]:
        return self.store.objects(resource(plural, group), namespace)

    def rewrite_stored(
        self,
        plural: str,
        name: str,
        mutate: Callable[[dict[str, Any]], None],
        namespace: str = "default",
        group: str = "",
    ) -> dict[str, Any]:
        """Fault injection: change an object in storage without validation or admission, as an object
        written to etcd directly (or kept from an API server with looser validation) would be; watchers
        see a MODIFIED event. A real API server would refuse the same change through the API."""
        res = resource(plural, group)
        ks = self.store.kind(res)
        key = (namespace if res.namespaced else "", name)
        entry = ks.objects[key]
        obj = copy.deepcopy(entry.obj)
        mutate(obj)
        self.store._commit(ks, MODIFIED, key, obj, entry.obj)
        return obj

    def add_request_hook(self, hook: Callable[[web.Request], Awaitable[None]]) -> None:
        """Await `hook(request)` before every resource request (e.g. to fail chosen calls: raise ApiError)."""
        self.server.request_hooks.append(hook)

    def compact(self) -> None:
        """Forget the watch history: clients resuming from an older resourceVersion get 410 and must re-list."""
        self.store.compact()

    def drop_watches(self, abort: bool = False) -> int:
        """End every open watch stream (cleanly, or by resetting the connection); returns how many."""
        return self.server.drop_watches(abort)

    def set_faults(self, **changes: Any) -> None:
        for key, value in changes.items():
            if not hasattr(self.faults, key) or key.startswith("_"):
                raise AttributeError(f"unknown fault {key!r}")
            setattr(self.faults, key, value)

    async def _bookmarks(self) -> None:
        last = time.monotonic()
        while True:
            # Re-read the interval every tick so it can be changed while the cluster runs.
            await asyncio.sleep(min(self.server.bookmark_interval, 0.25))
            if time.monotonic() - last >= self.server.bookmark_interval:
                last = time.monotonic()
                self.server.send_bookmarks()

    def expire_events(self, now: float | None = None) -> int:
        """Delete events older than the TTL, as a real API server's storage does; returns how many."""
        cutoff = rfc3339((time.time() if now is None else now) - self.event_ttl)
        expired = 0
        for res in (resource("events"),):  # events.k8s.io/v1 Events are the same objects
            for obj in self.store.objects(res):
                meta = obj["metadata"]
                if meta.get("creationTimestamp", "") < cutoff:
                    self.store.delete(res, meta["namespace"], meta["name"])
                    expired += 1
        return expired

    @staticmethod
    async def _full_collections(interval: float) -> None:
        while True:
            await asyncio.sleep(interval)
            gc.collect()

    async def _expire_events(self) -> None:
        while True:
            await asyncio.sleep(min(60.0, max(1.0, self.event_ttl / 2)))
            self.expire_events()

    async def _periodic_faults(self) -> None:
        last_drop = last_compact = time.monotonic()
        while True:
            await asyncio.sleep(0.02)
            now = time.monotonic()
            f = self.faults
            if f.drop_watches_every > 0 and now - last_drop >= f.drop_watches_every:
                last_drop = now
                self.drop_watches(f.drop_watches_abort)
            elif f.drop_watches_every <= 0:
                last_drop = now
            if f.compact_every > 0 and now - last_compact >= f.compact_every:
                last_compact = now
                self.compact()
            elif f.compact_every <= 0:
                last_compact = now
