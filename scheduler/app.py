"""The running scheduler: startup → main loop → shutdown, in uvicorn's manner.

Startup: conf (fail fast when unusable), API client, HTTP endpoints, watches. Main: once every
watched kind has synced (and, with ``--leader-elect``, once this replica leads), a cycle every
period. Shutdown on SIGTERM: no new cycle, in-flight binds finish, status writes flush, the lease is
released, exit 0. A replica that loses its lease stops scheduling at once and exits 1.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import REGISTRY

from caldera.cache.client import ApiClient, ClusterConfig, ClusterConfigError
from caldera.cache.informer import Informers
from caldera.cache.store import ClusterCache
from caldera.cache.supervise import stop_workers, supervise
from caldera.cache.usage import UsagePoller
from caldera.config.address import parse_listen_address
from caldera.config.conf import ConfError
from caldera.framework.plugin import Registry
from caldera.framework.result import SessionResult
from caldera.metrics import devices as device_metrics
from caldera.metrics import scheduler as m
from caldera.metrics.collectors import RememberedCollector, WatchCollector, WatchState
from caldera.scheduler.binder import Binder
from caldera.scheduler.confsource import ConfSource
from caldera.scheduler.controllers import Controllers
from caldera.scheduler.debug import DebugApi, Observatory
from caldera.scheduler.evictor import Evictor
from caldera.scheduler.http import HttpServer, ListenError
from caldera.scheduler.leader import ElectionConfig, LeaderElector
from caldera.scheduler.loop import SchedulerLoop
from caldera.scheduler.looplag import LoopLag
from caldera.scheduler.memory import CollectorPolicy
from caldera.scheduler.status import Gone, StatusUpdater

log = logging.getLogger("caldera.scheduler")


def process_age() -> float:
    """Seconds since this process started (from the kernel's accounting; since import elsewhere)."""
    try:
        fields = open("/proc/self/stat").read().rsplit(")", 1)[1].split()
        started = int(fields[19]) / os.sysconf("SC_CLK_TCK")
        uptime = float(open("/proc/uptime").read().split()[0])
        return uptime - started
    except (OSError, ValueError, IndexError):
        return time.monotonic() - _IMPORTED


_IMPORTED = time.monotonic()

#: labelled children of the watch-event counter, looked up once per (kind, type), not per event
_watch_event_counters: dict[tuple[str, str], Any] = {}


def _count_watch_event(kind: str, etype: str, n: int = 1) -> None:
    """``n`` events of one kind and type (a reflector counts a chunk of its stream at a time)."""
    counter = _watch_event_counters.get((kind, etype))
    if counter is None:
        counter = _watch_event_counters[(kind, etype)] = m.WATCH_EVENTS.labels(kind, etype)
    counter.inc(n)


EXIT_OK = 0
EXIT_LOST_LEASE = 1
EXIT_BAD_CONF = 2
#: the kubeconfig is unusable or the HTTP address cannot be listened on (one log line says which)
EXIT_CANNOT_START = 3
#: the cache's problem list is rebuilt at most this often (seconds)
PROBLEMS_MAX_AGE = 1.0
#: once the lease is lost, the longest the replica takes to stop before it exits anyway (seconds).
#: kube-scheduler exits at once (cmd/kube-scheduler/app/server.go, ``OnStoppedLeading``:
#: ``klog.FlushAndExit(klog.ExitFlushTimeout, 1)``); this replica first gives its queued binds back
#: and stops its workers, and a step of that which never ends (seen in a soak: the replica stayed up,
#: leading nothing, for minutes) must not keep it from exiting, for only an exit makes the Deployment
#: start it again.
LOST_LEASE_EXIT_AFTER = 15.0


def await_chain(task: asyncio.Task[Any]) -> str:
    """Where a task waits: each coroutine of its await chain, outermost first ("fn (file:line)")."""
    links: list[str] = []
    obj: Any = task.get_coro()
    while obj is not None and len(links) < 12:
        frame = (
            getattr(obj, "cr_frame", None) or getattr(obj, "ag_frame", None) or getattr(obj, "gi_frame", None)
        )
        if frame is None:
            break
        code = frame.f_code
        links.append(f"{code.co_name} ({os.path.basename(code.co_filename)}:{frame.f_lineno})")
        obj = (
            getattr(obj, "cr_await", None)
            or getattr(obj, "ag_await", None)
            or getattr(obj, "gi_yieldfrom", None)
        )
    return " > ".join(links) or repr(task.get_coro())


@dataclass
class Options:
    kubeconfig: str | None = None
    scheduler_names: list[str] = field(default_factory=lambda: ["caldera"])
    scheduler_conf: str | None = None
    schedule_period: float = 1.0
    #: ``SchedulerLoop.cycle_budget`` (``--cycle-budget``)
    cycle_budget: float | None = 1.0
    listen_address: str = "127.0.0.1:8080"
    leader_elect: bool = False
    lease_namespace: str = ""
    lease_name: str = "caldera"
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    default_queue: str = "default"
    bind_workers: int = 64
    volume_bind_timeout: float = 600.0
    per_pod_events: bool = False
    shutdown_timeout: float = 30.0
    watch_timeout: int = 300
    conf_poll_interval: float = 1.0
    identity: str = ""
    #: PodGroup and Queue controllers for plain workloads (``--enable-controllers``, on by default)
    enable_controllers: bool = True
    #: the read-only web view at /ui (``--ui/--no-ui``, on by default)
    ui: bool = True


class SchedulerApp:
    def __init__(
        self,
        options: Options,
        registry: Registry | None = None,
        cluster: ClusterConfig | None = None,
        collector: CollectorPolicy | None = None,
    ) -> None:
        self.options = options
        #: the garbage collector's policy (scheduler/memory.py): the binary's own; an app embedded in
        #: another program (tests) leaves that program's collector alone unless given one
        self.collector = collector
        if registry is None:
            from caldera.scheduler.registry import builtin_registry

            registry = builtin_registry()
        self.registry = registry
        self.cluster = cluster
        self.started = asyncio.Event()
        self.exit_code: int | None = None
        #: after losing the lease: how long stopping may take, and how the process then exits
        self.lost_lease_exit_after = LOST_LEASE_EXIT_AFTER
        self.hard_exit: Callable[[int], object] = os._exit
        self._exit_watchdog: asyncio.TimerHandle | None = None
        self.client: ApiClient | None = None
        self.cache = ClusterCache(options.scheduler_names, options.default_queue)
        self.conf = ConfSource(options.scheduler_conf, registry, poll_interval=options.conf_poll_interval)
        self.informers: Informers | None = None
        self.binder: Binder | None = None
        self.evictor: Evictor | None = None
        self.status: StatusUpdater | None = None
        self.loop: SchedulerLoop | None = None
        self.elector: LeaderElector | None = None
        self.http: HttpServer | None = None
        self.controllers: Controllers | None = None
        self.usage: UsagePoller | None = None
        self._leading = not options.leader_elect
        self.identity = ""
        #: metrics and the debug API's memory of the last cycle (scheduler/debug.py)
        self.observatory = Observatory()
        self.watch_collector = WatchCollector(self._watch_states)
        self.remembered_collector = RememberedCollector(self._remembered)
        self.loop_lag = LoopLag()

    # -- readiness ---------------------------------------------------------------------------------
    def synced(self) -> bool:
        return self.informers is not None and self.informers.synced()

    def can_schedule(self) -> bool:
        return (
            self._leading
            and (self.elector is None or self.elector.holds())
            and self.conf.loaded
            and self.informers is not None
            and self.informers.fresh()
        )

    def may_write(self) -> bool:
        """Whether this replica may write to the API: always without leader election, else while
        the lease is provably held (``LeaderElector.holds``)."""
        return self.elector is None or self.elector.holds()

    def readiness(self) -> tuple[bool, str]:
        if self.informers is None:
            return False, "starting"
        missing = self.informers.unsynced()
        if missing:
            return False, "waiting for caches to sync: " + ", ".join(missing)
        if not self.conf.loaded:
            return False, f"no usable scheduler conf yet: {self.conf.last_error or 'waiting for it'}"
        role = "" if not self.options.leader_elect else (" (leader)" if self._leading else " (standby)")
        return True, "ok: caches synced" + role

    def bind_progress(self, uid: str) -> str | None:
        """Where this replica's binder has the bind of pod ``uid`` (``Binder.progress``)."""
        return self.binder.progress(uid) if self.binder is not None else None

    def debug_state(self) -> dict[str, Any]:
        counts = self.cache.counts()
        return {
            "nodes": counts.nodes,
            "jobs": counts.jobs,
            "tasks": counts.tasks,
            "waiting_for_podgroup": counts.waiting_for_podgroup,
            "cycles": self.loop.stats.cycles if self.loop else 0,
            "bound": self.binder.bound_count if self.binder else 0,
            "binds_issued": self.binder.issued_count if self.binder else 0,
            "binds_failed": self.binder.failed_count if self.binder else 0,
            "bind_failures": {k: v.reason for k, v in list(self.binder.failures.items())[-20:]}
            if self.binder
            else {},
            "leader": self._leading,
            "conf_error": self.conf.last_error,
            "watches": {
                name: {
                    "lists": r.stats.lists,
                    "events": r.stats.events,
                    "expired": r.stats.expired,
                    "errors": r.stats.errors,
                }
                for name, r in (self.informers.reflectors.items() if self.informers else [])
            },
        }

    def scheduler_info(self) -> dict[str, Any]:
        """For /debug/scheduler: who this replica is, whether it leads, and its conf."""
        elector = self.elector
        holder = ""
        if elector is not None:
            lease = getattr(elector, "_lease", None)
            spec = getattr(lease, "spec", None)
            holder = getattr(spec, "holder_identity", "") or ""
        return {
            "identity": self.identity,
            "leader": self._leading,
            "leader_identity": holder or (self.identity if self._leading else ""),
            "conf": {
                "text": self.conf.text,
                "source": f"{self.conf.kind}:{self.conf.location}" if self.conf.location else self.conf.kind,
                "loaded_at": self.conf.loaded_at,
                "last_reload": self.conf.last_reload,
            },
            "lag": {"watch": self.cache.watch_lag.summary(), "loop": self.loop_lag.summary()},
        }

    def _watch_states(self) -> list[WatchState]:
        if self.informers is None:
            return []
        return [
            WatchState(
                name, r.synced.is_set(), r.stats.lists, r.stats.watches, r.stats.expired, r.stats.errors
            )
            for name, r in self.informers.reflectors.items()
        ]

    def _remembered(self) -> list[tuple[str, str, int]]:
        """Per owner and map, the entries kept per object (``caldera_remembered_objects``)."""
        counts = self.cache.counts()
        rows = [
            ("cache", "pods", counts.tasks),
            ("cache", "podgroups", counts.jobs),
            ("cache", "nodes", counts.nodes),
            ("cache", "binds_unseen", self.cache.watch_lag.awaiting),
        ]
        if self.binder is not None:
            rows += [("binder", name, n) for name, n in self.binder.remembered()]
        if self.evictor is not None:
            rows += [("evictor", name, n) for name, n in self.evictor.remembered()]
        if self.status is not None:
            rows += [("status", name, n) for name, n in self.status.remembered()]
        return rows

    # -- the cycle observer ------------------------------------------------------------------------
    def _on_cycle(self, result: SessionResult | None, duration: float, error: BaseException | None) -> None:
        if self.observatory.number == 0:
            since = process_age()
            counts = self.cache.counts()
            log.info(
                "first cycle done %.2fs after process start (cycle %.3fs, %d nodes, %d pods)",
                since,
                duration,
                counts.nodes,
                counts.tasks,
            )
        # Pods no session sees (no PodGroup, an unreadable spec) are reported with the cycle's result;
        # they wait seconds before they are reported, so a second's staleness costs nothing.
        problems = self.cache.problems(max_age=PROBLEMS_MAX_AGE)
        self.observatory.problems = problems
        self.observatory.on_cycle(result, duration, error)
        if self.collector is not None:
            self.collector.after_cycle()
        if error is not None or result is None:
            return
        if self.status is not None:
            self.status.observe(result)
            self.status.observe_problems(problems)

    # -- lifecycle ---------------------------------------------------------------------------------
    async def run(self, stop: asyncio.Event) -> int:
        opts = self.options
        if self.collector is not None:
            self.collector.start()
        try:
            parse_listen_address(opts.listen_address)
        except ValueError as exc:
            log.error("--listen-address %s", exc)
            self.exit_code = EXIT_CANNOT_START
            return EXIT_CANNOT_START
        try:
            if self.conf.kind != "configmap":
                self.conf.load_initial()
        except ConfError as exc:
            log.error("unusable scheduler conf: %s", exc)
            self.exit_code = EXIT_BAD_CONF
            return EXIT_BAD_CONF

        try:
            cluster = self.cluster or await ClusterConfig.load(opts.kubeconfig)
        except ClusterConfigError as exc:
            log.error("%s", exc)
            self.exit_code = EXIT_CANNOT_START
            return EXIT_CANNOT_START
        self.client = client = ApiClient(cluster, max_connections=max(100, opts.bind_workers * 2))
        name = opts.scheduler_names[0]
        identity = opts.identity or f"{os.environ.get('POD_NAME') or os.uname().nodename}_{os.getpid()}"
        self.status = StatusUpdater(
            client,
            self.cache,
            component=name,
            per_pod_events=opts.per_pod_events,
            instance=identity,
            controllers=opts.enable_controllers,
        )
        self.conf.client = client
        self.conf.event_sink = self.status.event
        # Nodes' load, polled only while the running conf has a metrics: section (cache/usage.py).
        self.usage = usage = UsagePoller(self.cache, client)
        self.conf.on_reload = lambda conf: usage.configure(conf.metrics)
        self.evictor = Evictor(
            client, on_abandoned=self.cache.forget_eviction, on_evicted=self.status.evicted
        )
        self.binder = Binder(
            client,
            self.cache,
            workers=opts.bind_workers,
            volume_timeout=opts.volume_bind_timeout,
            observer=self.observatory.bind_observer(self.status),
            evictor=self.evictor,
        )
        # Status writes and Events give way to a burst of binds (StatusUpdater.max_defer at most).
        self.status.binds_waiting = self.binder.waiting
        self.informers = Informers(
            client,
            self.cache,
            watch_timeout=opts.watch_timeout,
            on_event=_count_watch_event,
        )
        for kind, gone in self.status.subscribers().items():
            self.informers.subscribe(kind, gone)  # what it keeps per object goes with the object
        self.informers.subscribe("pods", Gone(self.binder.pod_gone, self.binder.pods_relisted))
        if self.conf.kind == "configmap":
            self.informers.add("conf", self.conf.reflector_for(client))
        self.loop = SchedulerLoop(
            self.cache,
            self.conf.get,
            self.registry,
            self.binder,
            period=opts.schedule_period,
            ready=self.can_schedule,
            on_cycle=self._on_cycle,
            between_steps=self.collector.between_steps if self.collector is not None else None,
            cycle_budget=opts.cycle_budget,
        )
        self.identity = identity
        self.http = HttpServer(
            opts.listen_address,
            self.readiness,
            self.debug_state,
            debug_api=DebugApi(
                self.observatory,
                self.scheduler_info,
                pod_lookup=self.cache.find_task,
                controllers=opts.enable_controllers,
                bind_progress=self.bind_progress,
            ),
            ui=opts.ui,
            # each scrape shows the vGPU device series of the cache as it is then
            before_scrape=functools.partial(device_metrics.shared().refresh, self.cache),
        )
        for collector in (self.watch_collector, self.remembered_collector):
            with contextlib.suppress(ValueError):  # already registered (a second app in one process)
                REGISTRY.register(collector)
        background: list[asyncio.Task[Any]] = []
        loop_stop = asyncio.Event()
        code = EXIT_OK
        try:
            try:
                await self.http.start()
            except ListenError as exc:
                log.error("%s", exc)
                code = EXIT_CANNOT_START
                return code
            self.informers.start()
            if self.conf.kind == "file":
                background.append(supervise("conf-file", functools.partial(self.conf.watch_file, loop_stop)))
            background.append(supervise("sync-gauge", functools.partial(self._watch_sync, loop_stop)))
            background.append(supervise("loop-lag", functools.partial(self.loop_lag.run, loop_stop)))
            # vGPU device series are set from the cache's truth (and at each scrape), reconciled periodically.
            background.append(
                supervise(
                    "device-metrics", functools.partial(device_metrics.shared().run, self.cache, loop_stop)
                )
            )
            if self.conf.loaded:
                usage.configure(self.conf.get().metrics)
            self.started.set()
            if opts.leader_elect:
                namespace = opts.lease_namespace or os.environ.get("POD_NAMESPACE") or "kube-system"
                self.elector = LeaderElector(
                    client,
                    ElectionConfig(
                        namespace=namespace,
                        name=opts.lease_name,
                        identity=identity,
                        lease_duration=opts.lease_duration,
                        renew_deadline=opts.renew_deadline,
                        retry_period=opts.retry_period,
                    ),
                )
                if not await self.elector.acquire(stop):
                    return EXIT_OK
                self._leading = True
                # No bind, eviction or status write goes out once the lease may be lost, even while
                # the renewal hangs (the controllers are given the same gate below).
                self.binder.may_write = self.elector.holds
                self.evictor.may_write = self.elector.holds
                self.status.may_write = self.elector.holds
                background.append(supervise("lease", functools.partial(self.elector.hold, loop_stop)))
            self.binder.start()
            self.evictor.start()
            self.status.start()
            if opts.enable_controllers:
                # Only the leader runs them, like the cycles: two replicas must not both manage PodGroups.
                self.controllers = Controllers(
                    client,
                    scheduler_names=opts.scheduler_names,
                    default_queue=opts.default_queue,
                    watch_timeout=opts.watch_timeout,
                    # The status updater already writes PodGroup phase and counts: one writer per field.
                    update_podgroup_status=False,
                    # The cache's watches feed them: each pod, PodGroup and Queue event decoded once.
                    source=self.informers,
                    may_write=self.may_write,
                )
                background.append(
                    supervise("controllers", functools.partial(self.controllers.run, loop_stop))
                )
            loop_task = asyncio.create_task(self.loop.run(loop_stop), name="cycles")
            log.info(
                "scheduling pods of %s every %.3gs", ", ".join(opts.scheduler_names), opts.schedule_period
            )
            waiters = [asyncio.create_task(stop.wait()), loop_task]
            if self.elector is not None:
                waiters.append(asyncio.create_task(self.elector.lost.wait()))
            await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
            lost = self.elector is not None and self.elector.lost.is_set()
            if lost:
                # Stop at once: no further cycle, no further bind.
                self._leading = False
                self._exit_watchdog = asyncio.get_running_loop().call_later(
                    self.lost_lease_exit_after, self._exit_overdue, EXIT_LOST_LEASE
                )
                loop_stop.set()
                await self.binder.abort()
                code = EXIT_LOST_LEASE
            loop_stop.set()
            for w in waiters:
                if w is not loop_task:
                    w.cancel()
            with contextlib.suppress(Exception):
                await loop_task
            if not lost:
                started = time.monotonic()
                drained = await self.binder.drain(opts.shutdown_timeout)
                log.info(
                    "shutdown: in-flight binds %s (%.2fs)",
                    "finished" if drained else "abandoned",
                    time.monotonic() - started,
                )
                await self.evictor.drain(5.0)
            await self.status.stop(flush=not lost)
            return code
        finally:
            loop_stop.set()
            # Each ends by itself once loop_stop is set; what is still running after 3 s is cancelled, and
            # what any of them raised on the way out is logged (stop_workers), never swallowed.
            if background:
                await asyncio.wait(background, timeout=3.0)
            await stop_workers(background)
            await usage.stop()
            if self.elector is not None and self.elector.is_leader:
                await self.elector.release()
            await self.binder.stop()
            await self.evictor.stop()
            await self.informers.stop()
            await self.http.stop()
            for collector in (self.watch_collector, self.remembered_collector):
                with contextlib.suppress(KeyError):
                    REGISTRY.unregister(collector)
            await client.close()
            self.exit_code = code
            if self._exit_watchdog is not None:
                self._exit_watchdog.cancel()
            log.info("caldera-scheduler stopped (exit %d)", code)

    def _exit_overdue(self, code: int) -> None:
        """The lease was lost ``lost_lease_exit_after`` seconds ago and the replica has not stopped:
        one line says what had not ended, then the process exits."""
        stuck = sorted(
            f"{task.get_name()}: {await_chain(task)}" for task in asyncio.all_tasks() if not task.done()
        )
        log.error(
            "still not stopped %.0fs after losing the leader lease; exiting now (exit %d). Not ended: %s",
            self.lost_lease_exit_after,
            code,
            "; ".join(stuck) or "nothing",
        )
        for handler in logging.getLogger().handlers:
            with contextlib.suppress(Exception):
                handler.flush()
        self.hard_exit(code)

    async def _watch_sync(self, stop: asyncio.Event) -> None:
        assert self.informers is not None
        if await self.informers.wait_synced(stop):
            m.CACHE_SYNCED.set(1)
            counts = self.cache.counts()
            log.info(
                "caches synced: %d nodes, %d pods, %d PodGroups", counts.nodes, counts.tasks, counts.jobs
            )
