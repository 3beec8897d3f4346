"""The soak's run from start to end: the simulator and the replicas started, the workload executed while
faults are injected, the checker and the sampler running throughout; then the drain, the probe and the
final checks, and the summary filled in."""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
import time
from pathlib import Path

import aiohttp
import yaml

from caldera.config.duration import parse_duration
from caldera.hack.soak.checker import Checker, CheckerConfig
from caldera.hack.soak.cluster import SOAK_CONF, cluster_file, create_foreign_pods
from caldera.hack.soak.faults import FaultInjector
from caldera.hack.soak.metric_checks import MetricChecks
from caldera.hack.soak.options import Options
from caldera.hack.soak.procs import SimProcess
from caldera.hack.soak.report import Summary, text, write
from caldera.hack.soak.sampler import Sampler
from caldera.hack.soak.scrape import scrape
from caldera.hack.soak.supervisor import Supervisor
from caldera.hack.soak.timeline import Timeline
from caldera.hack.stats import percentile
from caldera.hack.workload.client import Api, pods_path
from caldera.hack.workload.executor import Executor
from caldera.hack.workload.generators import make_generators, parse_mix
from caldera.hack.workload.manifests import pod_manifest
from caldera.hack.workload.plan import ClusterShape, build_plan


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

    async def main(self) -> Summary:
        opts = self.opts
        cluster_path = self.workdir / "cluster.yaml"
        cluster_path.write_text(yaml.safe_dump(cluster_file(opts.nodes, opts.ib_groups)))
        self.conf_path.write_text(SOAK_CONF)
        sim = SimProcess.start(
            self.workdir,
            log_path=self.workdir / "sim.log",
            cluster_file=str(cluster_path),
            kubelet_delay=0.3,
            history_size=20_000,
            bookmark_interval=5.0,
            seed=opts.seed,
        )
        stop = asyncio.Event()
        self.timeline.t0 = t0 = time.monotonic()
        supervisor = self.supervisor = Supervisor(
            opts, self.workdir, self.conf_path, sim.kubeconfig, self.timeline
        )
        async with Api(sim.url, sim.token) as api, Api(sim.url, sim.token) as checker_api:
            self.checker = checker = Checker(
                checker_api, CheckerConfig(period=parse_duration(opts.period)), t0
            )
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
            self.summary.faults = injector.faults
            await api.create(
                "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "soak"}}
            )
            await create_foreign_pods(api, checker)
            for _ in range(opts.replicas):
                supervisor.start_replica()
            tasks = [
                asyncio.create_task(checker.run(stop), name="checker"),
                asyncio.create_task(supervisor.supervise(stop, checker), name="supervisor"),
                asyncio.create_task(sampler.run(api, stop), name="sampler"),
            ]
            load_seconds = opts.load_fraction * self.duration
            shape = ClusterShape(ib_groups=opts.ib_groups, nodes=opts.nodes)
            plan = build_plan(make_generators(parse_mix(opts.mix), load_seconds - 1.0), opts.seed, shape)
            executor = Executor(
                api,
                plan,
                "soak",
                finished_ttl=opts.finished_ttl,
                on_error=lambda m: self.timeline.log(f"workload error: {m}"),
            )
            faults = asyncio.create_task(injector.run(api, stop))
            load = asyncio.create_task(executor.run(t0=t0 + 1.0, janitor_stop=stop))
            try:
                await load
                await faults
                sim.command("clear")
                self.timeline.log("load finished; draining")
                remaining = self.duration - self.timeline.now()
                await self.settle(3.0, max(5.0, remaining - 15.0))
                await self.probe(api)
                # The rest of the time quiet, still checked: nothing may go wrong once the load is gone.
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(stop.wait(), max(0.0, self.duration - self.timeline.now()))
                checker.check()
                sampler.judge_memory(self.summary)
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
            s.relists = checker.pods.relists + checker.nodes.relists + checker.groups.relists
            s.driver_retries = api.retries + checker_api.retries
        return self.summary

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

    async def probe(self, api: Api) -> None:
        """Bind counters against the bindings the API shows, over a quiet window with probe pods; then the
        final (exact) metric checks.

        A window in which a replica exited (a lost lease on a busy machine: it is replaced, and its counter
        starts again from 0) or could not be scraped cannot be judged; another window is tried then."""
        assert self.checker is not None and self.supervisor is not None and self.metric_checks is not None
        c = self.checker
        live = self.supervisor.live
        await self.settle(2.0, 30.0)
        reason = ""
        for window in range(3):
            async with aiohttp.ClientSession() as http:
                before = {p.sched.pid: await scrape(http, p.sched.base) for p in live()}
                bound_before = c.bound_total
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
                after = {p.sched.pid: await scrape(http, p.sched.base) for p in live()}
            unbound = [
                n for n in names if not c.pods.objects.get(f"soak/{n}", {}).get("spec", {}).get("nodeName")
            ]
            if unbound:
                c.violate("fits-bound", "probe", f"{len(unbound)} probe pods unbound after 30s")
            reason = self.metric_checks.compare_binds(before, after, c.bound_total - bound_before)
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
