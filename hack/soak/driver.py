"""The soak's run from start to end: the simulator and the replicas started, the workload executed while
faults are injected, the checker and the sampler running throughout; then the drain, the probe and the
final checks, and the summary filled in."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import tempfile
import time
from pathlib import Path

import aiohttp
import yaml

from caldera.config.duration import parse_duration
from caldera.hack.soak.accounting import check_accounting
from caldera.hack.soak.checker import BUDGET_WAIT, Checker, CheckerConfig, FaultWindow, binds_bound
from caldera.hack.soak.churn import Churn, halfway_record, judge_churn
from caldera.hack.soak.cluster import SOAK_CONF, cluster_file, create_foreign_pods, dra_node_names
from caldera.hack.soak.faults import FaultInjector
from caldera.hack.soak.hardening import Credentials
from caldera.hack.soak.metric_checks import MetricChecks
from caldera.hack.soak.options import Options
from caldera.hack.soak.procs import SimProcess, rss_bytes
from caldera.hack.soak.report import Summary, text, write
from caldera.hack.soak.sampler import Sampler
from caldera.hack.soak.scrape import Metrics, histogram_figures, scrape
from caldera.hack.soak.supervisor import Supervisor
from caldera.hack.soak.timeline import Timeline
from caldera.hack.stats import percentile
from caldera.hack.workload.client import Api, pods_path
from caldera.hack.workload.executor import Executor
from caldera.hack.workload.generators import make_generators, parse_mix
from caldera.hack.workload.manifests import pod_manifest
from caldera.hack.workload.plan import ClusterShape, build_plan

#: DRA gangs per second when `--dra` adds the `dra` generator to a mix without it
DRA_RATE = 0.5


class Soak:
    def __init__(self, opts: Options, workdir: Path) -> None:
        self.opts = opts
        self.workdir = workdir
        self.duration = opts.minutes * 60
        self.summary = Summary()
        self.timeline = Timeline(self.summary.events, opts.verbose)
        self.conf_path = workdir / "scheduler.conf"
        # Set up by main(), which needs the simulator and the checker first.
        self.supervisor: Supervisor | None = None
        self.checker: Checker | None = None
        self.metric_checks: MetricChecks | None = None
        self.sampler: Sampler | None = None
        self.faults: FaultInjector | None = None
        self.sim: SimProcess | None = None

    async def main(self) -> Summary:
        """The soak. However it ends, no replica and no simulator it started outlives it: the run's own
        clean-up stops them, and a failure before that clean-up is reached stops them here."""
        try:
            return await self._main()
        except BaseException:
            if self.supervisor is not None:
                self.supervisor.stop_all()
            if self.sim is not None:
                self.sim.stop()
            raise

    async def _main(self) -> Summary:
        opts = self.opts
        cluster_path = self.workdir / "cluster.yaml"
        dra_nodes = opts.dra_nodes if opts.dra else 0
        cluster_path.write_text(yaml.safe_dump(cluster_file(opts.nodes, opts.ib_groups, dra_nodes)))
        self.conf_path.write_text(SOAK_CONF)
        sim = self.sim = SimProcess.start(
            self.workdir,
            log_path=self.workdir / "sim.log",
            cluster_file=str(cluster_path),
            kubelet_delay=0.3,
            history_size=20_000,
            bookmark_interval=5.0,
            seed=opts.seed,
            native_gang=opts.native_gang > 0,
            write_log=str(self.workdir / "writes.jsonl"),
        )
        stop = asyncio.Event()
        self.timeline.t0 = t0 = time.monotonic()
        # The replicas read their own token from a file, which the rotate-token fault rewrites.
        credentials = Credentials(sim, self.workdir)
        await credentials.start()
        fault_dir = self.workdir / "faults" if "watch-fault" in opts.faults else None
        if fault_dir is not None:
            fault_dir.mkdir(exist_ok=True)
        supervisor = self.supervisor = Supervisor(
            opts, self.workdir, self.conf_path, credentials.kubeconfig, self.timeline, fault_dir
        )
        async with Api(sim.url, sim.token) as api, Api(sim.url, sim.token) as checker_api:
            self.checker = checker = Checker(
                checker_api,
                CheckerConfig(
                    period=parse_duration(opts.period), native_gang=opts.native_gang > 0, dra=opts.dra
                ),
                t0,
            )
            checker.explain = functools.partial(supervisor.leader_explains, checker_api)
            checker.queue_figures = functools.partial(supervisor.leader_queue_figures, checker_api)
            metric_checks = self.metric_checks = MetricChecks(
                opts, supervisor, checker, self.summary, self.timeline
            )
            sampler = self.sampler = Sampler(supervisor, checker, metric_checks, self.timeline)
            injector = self.faults = FaultInjector(
                opts.faults,
                self.duration,
                opts.load_fraction,
                opts.storm_seconds,
                sim,
                supervisor,
                checker,
                self.timeline,
            )
            injector.credentials = credentials
            injector.fault_dir = fault_dir
            injector.write_log = self.workdir / "writes.jsonl"
            injector.lease_stall = opts.lease_stall
            self.summary.faults = injector.faults
            await api.create(
                "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "soak"}}
            )
            await create_foreign_pods(api, checker)
            for _ in range(opts.replicas):
                supervisor.start_replica()
            # Until a leader is ready nothing can be scheduled; starting the replicas takes seconds on a busy
            # machine, and the checker excuses that time as it does a fault's.
            startup = checker.add_fault("startup", 0.0, float("inf"))
            tasks = [
                asyncio.create_task(checker.run(stop), name="checker"),
                asyncio.create_task(supervisor.supervise(stop, checker), name="supervisor"),
                asyncio.create_task(sampler.run(api, stop), name="sampler"),
                asyncio.create_task(self.end_startup(api, startup, stop), name="startup"),
            ]
            load_seconds = opts.load_fraction * self.duration
            shape = ClusterShape(
                ib_groups=opts.ib_groups, nodes=opts.nodes, dra_nodes=dra_node_names(dra_nodes)
            )
            mix = parse_mix(opts.mix)
            if opts.dra:
                mix.setdefault("dra", DRA_RATE)
            generators = make_generators(mix, load_seconds - 1.0, native_fraction=opts.native_gang)
            plan = build_plan(generators, opts.seed, shape)
            executor = Executor(
                api,
                plan,
                "soak",
                finished_ttl=opts.finished_ttl,
                on_error=lambda m: self.timeline.log(f"workload error: {m}"),
            )
            faults = asyncio.create_task(injector.run(api, stop))
            load = asyncio.create_task(executor.run(t0=t0 + 1.0, janitor_stop=stop))
            churn = (
                Churn(api, opts.churn_pods, load_seconds - 2.0, seed=opts.seed)
                if "churn" in opts.faults
                else None
            )
            churning = asyncio.create_task(self.churn(api, churn, stop)) if churn is not None else None
            try:
                await load
                await faults
                if churning is not None:
                    await churning
                sim.command("clear")
                self.timeline.log("load finished; draining")
                remaining = self.duration - self.timeline.now()
                await self.settle(3.0, max(5.0, remaining - 15.0))
                await self.probe(api)
                # The rest of the time quiet, still checked: nothing may go wrong once the load is gone.
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(stop.wait(), max(0.0, self.duration - self.timeline.now()))
                await injector.check_no_auth_storm()
                checker.check()
                sampler.judge_memory(self.summary)
                await self.final_accounting(api)
                await self.note_lag()
                if churn is not None:
                    await self.judge_churn(api, churn)
            finally:
                stop.set()
                with contextlib.suppress(Exception):
                    await executor.wait_janitor()
                for task, outcome in zip(
                    tasks, await asyncio.gather(*tasks, return_exceptions=True), strict=True
                ):
                    if isinstance(outcome, BaseException) and not isinstance(outcome, asyncio.CancelledError):
                        # A checker that died checks nothing: that is a failed soak, never a clean one.
                        checker.violate("soak-internal", task.get_name(), repr(outcome))
                supervisor.stop_all()
                sim.stop()
            s = self.summary
            s.seconds = round(self.timeline.now(), 1)
            s.violations = checker.violations
            if checker.fits_mirror_lagged:
                s.notes.append(
                    f"{checker.fits_mirror_lagged} pods the checker's mirror showed fitting but unbound past the"
                    " fits-bound time were bound (or gone) when read afresh: its watch had fallen behind"
                )
            if checker.held_by_budget:
                s.notes.append(
                    f"{len(checker.held_by_budget)} times a pod that fits a node waited past the fits-bound time"
                    " because the leader's cycles ran out of their time budget before its job's turn"
                    f" (within {BUDGET_WAIT} times that time in all: not violations); the first:"
                    f" {checker.held_by_budget[0]}"
                )
            if checker.share_unverified:
                s.notes.append(
                    f"{checker.share_unverified} times the leader said a pod that fits a node waited for its"
                    " queue's share while its /debug/queues could not be had (a failover, a restart): the"
                    " pod was looked at again later"
                )
            if checker.held_by_share:
                s.notes.append(
                    f"{len(checker.held_by_share)} times a pod that fits a node waited past the fits-bound time"
                    " held by its queue's deserved share, as the leader's /debug/queues showed (not"
                    f" violations); the first: {checker.held_by_share[0]}"
                )
            s.submitted_pods = executor.stats.submitted_pods
            s.bound = checker.bound_total
            lat = [x for _, x in checker.bound_latency]
            s.latency_p50_ms = round(percentile(lat, 50) * 1000, 1)
            s.latency_p99_ms = round(percentile(lat, 99) * 1000, 1)
            s.max_partial_gang_s = round(checker.max_partial, 2)
            s.max_fit_wait_s = round(checker.max_fit_wait, 2)
            procs = supervisor.procs
            s.scheduler_cpu_s = round(sum(p.cpu_last - p.cpu_start for p in procs), 2)
            s.replicas = [
                {
                    "replica": p.sched.name,
                    "pid": p.sched.pid,
                    "cpu_s": round(p.cpu_last - p.cpu_start, 2),
                    "exit": p.sched.proc.returncode,
                }
                for p in procs
            ]
            s.cpu_ms_per_bound_pod = round(s.scheduler_cpu_s / max(1, s.bound) * 1000, 3)
            s.checks = checker.checks
            s.dra_pods_checked = len(checker.dra_checked)
            s.relists = checker.pods.relists + checker.nodes.relists + checker.groups.relists
            s.driver_retries = api.retries + checker_api.retries
            s.accounting = injector.accounting
        return self.summary

    # -- churn ---------------------------------------------------------------------------------------
    async def churn(self, api: Api, churn: Churn, stop: asyncio.Event) -> None:
        """Run the churn; half-way, note each replica's RSS (the reference its end is judged against)
        and whether it leads (a standby that became the leader since is not comparable)."""
        assert self.supervisor is not None
        run = asyncio.create_task(churn.run(stop))
        await churn.halfway.wait()
        leader = await self.supervisor.safe_leader(api)
        for p in self.supervisor.live():
            rss = rss_bytes(p.sched.pid)
            if rss:
                churn.stats.replicas[p.sched.name] = halfway_record(
                    p.sched.pid, rss, leader is p, time.monotonic() - p.sched.started
                )
        self.timeline.log(
            f"churn half-way: {churn.stats.created} pods created, {churn.stats.deleted} deleted"
        )
        await run
        self.timeline.log(
            f"churn done: {churn.stats.created} created, {churn.stats.deleted} deleted, "
            f"{churn.stats.errors} errors in {churn.stats.seconds}s"
        )

    async def judge_churn(self, api: Api, churn: Churn) -> None:
        """At the quiet end: each replica that lived through the churn, its RSS and remembered maps."""
        assert self.supervisor is not None and self.checker is not None
        c = self.checker
        alive = {p.sched.name: p for p in self.supervisor.live()}
        leader = await self.supervisor.safe_leader(api)
        for name, p in alive.items():  # started since half-way: its maps are judged, not its RSS
            churn.stats.replicas.setdefault(
                name, {"pid": p.sched.pid, "note": "RSS not judged: started after half-way"}
            )

        # The janitor still deletes finished jobs' pods in batches while the replicas are scraped: a map is
        # judged against the most objects the API held from just before the first scrape to after the last.
        before = c.live_counts()
        async with aiohttp.ClientSession() as http:
            for name, r in churn.stats.replicas.items():
                p = alive.get(name)
                if p is None or p.sched.pid != r["pid"]:
                    r["note"] = "exited before the end"
                    continue
                r["rss_end"] = rss_bytes(p.sched.pid)
                if "led_halfway" in r and r["led_halfway"] != (leader is p):
                    r["note"] = (
                        "RSS not judged: it " + ("lost" if r["led_halfway"] else "took") + " the lease since"
                    )
                m = await scrape(http, p.sched.base)
                if m is not None:
                    r["remembered"] = {
                        (lab["owner"], lab["map"]): v for lab, v in m.get("caldera_remembered_objects", [])
                    }
        live = {key: max(n, before[key]) for key, n in c.live_counts().items()}
        judge_churn(c, churn.stats, live)
        self.summary.churn = {
            "pods": churn.stats.created,
            "deleted": churn.stats.deleted,
            "errors": churn.stats.errors,
            "seconds": churn.stats.seconds,
            "live_at_end": live,
            "replicas": {
                name: {
                    "rss_halfway_mib": round((r.get("rss_halfway") or 0) / 2**20, 1),
                    "rss_end_mib": round((r.get("rss_end") or 0) / 2**20, 1),
                    "remembered": {"/".join(k): v for k, v in (r.get("remembered") or {}).items() if v},
                    **({"note": r["note"]} if "note" in r else {}),
                }
                for name, r in churn.stats.replicas.items()
            },
        }

    async def final_accounting(self, api: Api) -> None:
        """Node accounting once more at the quiet end: every node must be equal to the API's."""
        assert self.supervisor is not None and self.checker is not None
        leader = await self.supervisor.safe_leader(api)
        if leader is None:
            self.timeline.log("final node accounting: no leader")
            return
        async with aiohttp.ClientSession() as http:
            result = await check_accounting(self.checker, http, leader.sched.base, "the end")
        self.timeline.log(f"at the end: {result.describe()}")
        self.summary.accounting_end = {
            "compared": result.compared,
            "equal": result.equal,
            "not_compared": result.not_compared,
        }

    async def note_lag(self) -> None:
        """Each live replica's lag since it started, as a note: how late its pod watch brought its own
        binds back (``caldera_watch_bind_delay_seconds``) and how late its event loop ran
        (``caldera_event_loop_lag_seconds``). A large watch delay with a small loop lag points at the
        API server's side (here the simulator, on the same two cores)."""
        assert self.supervisor is not None
        parts = []
        async with aiohttp.ClientSession() as http:
            for p in self.supervisor.live():
                m = await scrape(http, p.sched.base)
                if m is None:
                    continue
                watch = histogram_figures(m, "caldera_watch_bind_delay_seconds")
                loop = histogram_figures(m, "caldera_event_loop_lag_seconds")
                part = f"{p.sched.name} "
                part += (
                    f"binds seen back by its watch p50 <= {watch['p50_le']:g}s, p99 <= {watch['p99_le']:g}s,"
                    f" longest <= {watch['max_le']:g}s ({watch['over_1s']:g} of {watch['count']:g} over 1 s)"
                    if watch
                    else "bound nothing"
                )
                if loop:
                    part += f"; event loop late p99 <= {loop['p99_le']:g}s, longest <= {loop['max_le']:g}s"
                parts.append(part)
        if parts:
            self.summary.notes.append("lag (each live replica since its start): " + "; ".join(parts))

    # -- the end: drain and probe --------------------------------------------------------------------
    async def settle(self, seconds: float, timeout: float) -> None:
        """Wait until the bound count has not changed for `seconds` (or `timeout`)."""
        assert self.checker is not None
        deadline = time.monotonic() + timeout
        last, since = self.checker.bound_total, time.monotonic()
        while time.monotonic() < deadline:
            await asyncio.sleep(0.2)
            if self.checker.bound_total != last:
                last, since = self.checker.bound_total, time.monotonic()
            elif time.monotonic() - since >= seconds:
                return

    async def end_startup(self, api: Api, window: FaultWindow, stop: asyncio.Event) -> None:
        """Close the startup window once the Lease names a live replica that answers /readyz."""
        assert self.supervisor is not None
        async with aiohttp.ClientSession() as http:
            while not stop.is_set():
                leader = await self.supervisor.safe_leader(api)
                if leader is not None:
                    try:
                        async with http.get(
                            leader.sched.base + "/readyz", timeout=aiohttp.ClientTimeout(total=2)
                        ) as r:
                            if r.status == 200:
                                window.end = self.timeline.now()
                                self.timeline.log(f"{leader.sched.name} leads and is ready")
                                return
                    except (TimeoutError, aiohttp.ClientError, OSError):
                        pass
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(stop.wait(), 0.2)
        window.end = self.timeline.now()

    async def quiet_point(
        self, http: aiohttp.ClientSession, timeout: float = 10.0
    ) -> tuple[dict[int, Metrics | None], int] | None:
        """A moment when the bind counters and the bindings seen stand still together: every replica scraped,
        the pod mirror caught up with a fresh list, and nothing changed over a second. Returns the scrapes (by
        pid) and `bound_total` then, or None if the cluster never stood still within `timeout`."""
        assert self.checker is not None and self.supervisor is not None
        c = self.checker
        deadline = time.monotonic() + timeout
        prev: object = None
        while time.monotonic() < deadline:
            scraped = {p.sched.pid: await scrape(http, p.sched.base) for p in self.supervisor.live()}
            caught_up = await c.mirror_caught_up()
            readable = all(m is not None for m in scraped.values())
            state = (
                sorted(scraped),
                [binds_bound(m) if m is not None else None for _, m in sorted(scraped.items())],
                c.bound_total,
            )
            if caught_up and readable and state == prev:
                return scraped, c.bound_total
            prev = state if caught_up and readable else None
            await asyncio.sleep(1.0)
        return None

    async def probe(self, api: Api) -> None:
        """Bind counters against the bindings the API shows, over a quiet window with probe pods; then the
        final (exact) metric checks.

        The window runs between two quiet points (counters and the watch's view agreeing and standing still),
        since a binding counted on one side only at either end would show as a mismatch; and a window in which
        a replica exited (a lost lease on a busy machine: it is replaced, and its counter starts again from 0)
        or could not be scraped cannot be judged. Another window is tried then."""
        assert self.checker is not None and self.supervisor is not None and self.metric_checks is not None
        c = self.checker
        await self.settle(2.0, 30.0)
        reason = ""
        for window in range(3):
            async with aiohttp.ClientSession() as http:
                start = await self.quiet_point(http)
                names = [f"probe-{window}-{i:03d}" for i in range(self.opts.probe_pods)]
                for n in names:
                    await api.create(
                        pods_path("soak"),
                        pod_manifest(n, "soak", workload="probe", requests={"cpu": "100m", "memory": "64Mi"}),
                    )
                deadline = time.monotonic() + 30
                while time.monotonic() < deadline:
                    if all(
                        c.pods.objects.get(f"soak/{n}", {}).get("spec", {}).get("nodeName") for n in names
                    ):
                        break
                    await asyncio.sleep(0.2)
                await self.settle(2.0, 20.0)
                end = await self.quiet_point(http)
            unbound = [
                n for n in names if not c.pods.objects.get(f"soak/{n}", {}).get("spec", {}).get("nodeName")
            ]
            if unbound:
                c.violate("fits-bound", "probe", f"{len(unbound)} probe pods unbound after 30s")
            if start is None or end is None:
                reason = "the cluster never stood still (bindings still in flight)"
            else:
                (before, bound_before), (after, bound_after) = start, end
                reason = self.metric_checks.compare_binds(before, after, bound_after - bound_before)
            if not reason:
                break
            self.timeline.log(
                f"probe window {window}: bind counters not comparable ({reason}); trying another"
            )
        else:
            self.timeline.log(f"bind counters not compared: no probe window could be judged ({reason})")
            self.metric_checks.note_skipped("caldera_binds_total (no probe window could be judged)")
        await self.metric_checks.final_vgpu_check(api)
        await self.metric_checks.final_queue_check(api)

    def write(self) -> dict[str, str]:
        s = self.sampler
        return write(
            self.opts,
            self.summary,
            s.sample_t if s else [],
            s.samples if s else {},
            s.cpu_cores() if s else [],
            self.faults.marks if self.faults else [],
        )

    def text(self) -> str:
        return text(self.opts, self.summary)


def run_soak(opts: Options, workdir: str | None = None) -> tuple[Summary, str]:
    with contextlib.ExitStack() as stack:
        wd = workdir or stack.enter_context(tempfile.TemporaryDirectory(prefix="caldera-soak-"))
        Path(wd).mkdir(parents=True, exist_ok=True)
        soak = Soak(opts, Path(wd))
        try:
            import uvloop

            uvloop.run(soak.main())
        except ImportError:
            asyncio.run(soak.main())
        soak.write()
        return soak.summary, soak.text()
