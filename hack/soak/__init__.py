"""`caldera-sim soak`: the scheduler under realistic and hostile load, with invariants checked throughout.

    caldera-sim soak --minutes 2 [--seed 1] [--mix default] [--faults all] [--report-dir soak-report]

Processes: the simulated cluster (`hack.soak.simproc`, faults switchable at run time), two
`caldera-scheduler` replicas with leader election, and this driver, which runs the workload generators
(`hack.workload`), injects faults (watch drops and resets, 429 and 500 storms, history compaction, a graceful
scheduler restart, a leader failover by SIGKILL), and checks the invariants of `hack.soak.checker` every
second from the API's view. It scrapes each replica's /metrics and reads its CPU and memory from /proc.
At the end: faults off, the backlog drains, probe pods are bound while the bind counters are compared with
the bindings seen, and memory growth is judged. It prints a summary, writes `report.html` and PNG charts
(throughput, pending, latency, memory) and `summary.json`, and exits 1 on any violation.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import statistics
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import yaml
from prometheus_client.parser import text_string_to_metric_families

from caldera.hack.report import Chart, write_report
from caldera.hack.sim.quantity import pod_requests
from caldera.hack.soak.checker import Checker, CheckerConfig, Violation
from caldera.hack.soak.procs import SchedulerProcess, SimProcess, cpu_seconds, rss_bytes
from caldera.hack.workload.client import Api, ApiError, pods_path
from caldera.hack.workload.executor import Executor
from caldera.hack.workload.generators import make_generators, parse_mix
from caldera.hack.workload.manifests import IB_LABEL, pod_manifest
from caldera.hack.workload.plan import ClusterShape, build_plan
from caldera.scheduler.cli import duration

TERMINAL_PHASES = ("Succeeded", "Failed")
VGPU_LAG = 10.0  # seconds the vGPU gauges may trail the API outside fault windows
FAULT_KINDS = ("drop-watches", "429-storm", "compact", "restart", "500-storm", "failover", "drop-abort")
FOREIGN_SCHEDULER = "other-scheduler"

SOAK_CONF = f"""
actions: "enqueue, allocate, preempt, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: overcommit
  - name: drf
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: deviceshare
    arguments:
      deviceshare.VGPUEnable: true
  - name: network-topology-aware
    arguments:
      topologyKeys: [{IB_LABEL}]
"""


def cluster_file(nodes: int, ib_groups: int) -> dict[str, Any]:
    per = max(1, nodes // ib_groups)
    templates: list[dict[str, Any]] = [
        {
            "name": f"cpu-ib{g}",
            "count": per,
            "capacity": {"cpu": "32", "memory": "128Gi", "pods": "110"},
            "labels": {IB_LABEL: f"ib-{g}"},
        }
        for g in range(ib_groups)
    ]
    templates.append(
        {
            "name": "gpu",
            "count": 4,
            "capacity": {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": "8"},
            "taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}],
        }
    )
    templates.append(
        {
            "name": "vgpu",
            "count": 4,
            "capacity": {"cpu": "32", "memory": "128Gi", "pods": "110"},
            "vgpu": {"cards": 4, "split": 10, "memory": 32768, "cores": 100},
        }
    )
    queue = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": "default"},
        # A share of the cluster guaranteed to the default queue, so that the `queues` generator's
        # oversubscribed guarantees (scaled down to the cluster) do not reserve all of it away from here.
        "spec": {
            "weight": 1,
            "reclaimable": True,
            "guarantee": {"resource": {"cpu": str(nodes * 32 // 4), "memory": f"{nodes * 32}Gi"}},
        },
    }
    return {"nodes": templates, "objects": [queue]}


@dataclass
class Options:
    minutes: float = 2.0
    seed: int = 1
    mix: str = "default"
    faults: tuple[str, ...] = FAULT_KINDS
    report_dir: str = "soak-report"
    nodes: int = 48
    ib_groups: int = 4
    period: str = "500ms"
    replicas: int = 2
    load_fraction: float = 0.8
    storm_seconds: float = 8.0
    probe_pods: int = 20
    finished_ttl: float = 15.0  # seconds finished pods stay before the janitor deletes them
    verbose: bool = False


@dataclass
class Proc:
    sched: SchedulerProcess
    samples: list[tuple[float, int]] = field(default_factory=list)  # (t, rss)
    cpu_start: float = 0.0
    cpu_last: float = 0.0
    expected_exit: bool = False
    metrics: dict[str, float] = field(default_factory=dict)


@dataclass
class Summary:
    seconds: float = 0.0
    faults: list[dict[str, Any]] = field(default_factory=list)
    violations: list[Violation] = field(default_factory=list)
    submitted_pods: int = 0
    bound: int = 0
    latency_p50_ms: float = float("nan")
    latency_p99_ms: float = float("nan")
    max_partial_gang_s: float = 0.0
    max_fit_wait_s: float = 0.0
    scheduler_cpu_s: float = 0.0
    cpu_ms_per_bound_pod: float = float("nan")
    memory: list[dict[str, Any]] = field(default_factory=list)
    replicas: list[dict[str, Any]] = field(default_factory=list)
    metrics_checked: list[str] = field(default_factory=list)
    metrics_skipped: list[str] = field(default_factory=list)
    events: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # comparisons reported, not judged
    checks: int = 0
    relists: int = 0
    driver_retries: int = 0
    report: dict[str, str] = field(default_factory=dict)


def pct(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


def parse_metrics(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for fam in text_string_to_metric_families(text):
        out.setdefault(fam.name, [])  # a family without series yet is still exported
        for s in fam.samples:
            out.setdefault(s.name, []).append((dict(s.labels), float(s.value)))
    return out


class Soak:
    def __init__(self, opts: Options, workdir: Path) -> None:
        self.opts = opts
        self.workdir = workdir
        self.duration = opts.minutes * 60
        self.summary = Summary()
        self.procs: list[Proc] = []
        self.sim: SimProcess | None = None
        self.t0 = time.monotonic()
        self.checker: Checker | None = None
        self.conf_path = workdir / "scheduler.conf"
        self.leader_mismatch = 0
        self.vgpu_mismatch_since: float | None = None
        self.cycle_prev: dict[int, tuple[float, float]] = {}
        self.samples: dict[str, list[float]] = {}
        self.sample_t: list[float] = []
        self.fault_marks: list[tuple[float, str]] = []
        self.replica_seq = 0

    def now(self) -> float:
        return time.monotonic() - self.t0

    def log(self, msg: str) -> None:
        line = f"[{self.now():7.1f}s] {msg}"
        self.summary.events.append(line)
        if self.opts.verbose:
            print(line, flush=True)

    # -- processes ---------------------------------------------------------------------------------
    def start_replica(self) -> Proc:
        assert self.sim is not None
        self.replica_seq += 1
        sched = SchedulerProcess.start(
            f"replica-{self.replica_seq}",
            self.sim.kubeconfig,
            period=self.opts.period,
            conf=str(self.conf_path),
            leader_elect=self.opts.replicas > 1,
            log_path=self.workdir / f"scheduler-{self.replica_seq}.log",
        )
        proc = Proc(sched, cpu_start=cpu_seconds(sched.pid) or 0.0)
        self.procs.append(proc)
        self.log(f"started {sched.name} (pid {sched.pid})")
        return proc

    def live(self) -> list[Proc]:
        return [p for p in self.procs if p.sched.alive]

    async def leader(self, api: Api) -> Proc | None:
        status, raw = await api.request(
            "GET", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/caldera"
        )
        if status != 200:
            live = self.live()
            return live[0] if live and self.opts.replicas == 1 else None
        holder = (json.loads(raw).get("spec") or {}).get("holderIdentity") or ""
        for p in self.live():
            if holder.endswith(f"_{p.sched.pid}"):
                return p
        return None

    async def supervise(self, stop: asyncio.Event) -> None:
        """Like a Deployment: keep `replicas` running; an unexpected exit other than a lost lease is a violation."""
        assert self.checker is not None
        while not stop.is_set():
            for p in self.procs:
                code = p.sched.proc.poll()
                if code is not None and not p.expected_exit:
                    p.expected_exit = True
                    if code == 1:
                        self.log(f"{p.sched.name} exited 1 (lost its lease): replaced")
                    else:
                        self.checker.violate("scheduler-exit", p.sched.name, f"exited with code {code}")
            while len(self.live()) < self.opts.replicas and not stop.is_set():
                self.start_replica()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stop.wait(), 0.5)

    # -- faults ------------------------------------------------------------------------------------
    def fault_schedule(self) -> list[tuple[float, str]]:
        kinds = [k for k in self.opts.faults if k]
        if not kinds:
            return []
        lo, hi = 0.12 * self.duration, self.opts.load_fraction * self.duration - self.opts.storm_seconds
        step = (hi - lo) / max(1, len(kinds))
        return [(lo + i * step, k) for i, k in enumerate(kinds)]

    async def inject(self, api: Api, stop: asyncio.Event) -> None:
        assert self.sim is not None and self.checker is not None
        storm = self.opts.storm_seconds
        for at, kind in self.fault_schedule():
            delay = at - self.now()
            if delay > 0:
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(stop.wait(), delay)
            if stop.is_set():
                return
            start = self.now()
            end = start + 1.0
            detail = ""
            if kind == "drop-watches":
                self.sim.command("drop_watches", abort=False)
            elif kind == "drop-abort":
                self.sim.command("drop_watches", abort=True)
            elif kind == "compact":
                self.sim.command("compact")
                self.sim.command(
                    "drop_watches", abort=False
                )  # so clients must resume from a forgotten version
            elif kind in ("429-storm", "500-storm"):
                rate = 0.3
                self.checker.add_fault(kind, start, start + storm)
                self.sim.command(
                    "faults", **{"error_429_rate" if kind == "429-storm" else "error_500_rate": rate}
                )
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(stop.wait(), storm)
                self.sim.command("clear")
                end = self.now()
                detail = f"{int(rate * 100)}% of requests for {storm:g}s"
            elif kind in ("restart", "failover"):
                target = await self.leader(api)
                if target is None:
                    live = self.live()
                    target = live[0] if live else None
                if target is not None:
                    target.expected_exit = True
                    if kind == "restart":
                        await asyncio.to_thread(target.sched.stop)
                    else:
                        target.sched.kill()
                    detail = f"{target.sched.name} (pid {target.sched.pid}) {'SIGTERM' if kind == 'restart' else 'SIGKILL'}"
                    end = start + 5.0  # lease duration: the standby may wait for expiry
            if kind not in ("429-storm", "500-storm"):
                self.checker.add_fault(kind, start, end)
            self.summary.faults.append(
                {"kind": kind, "start": round(start, 1), "end": round(end, 1), "detail": detail}
            )
            self.fault_marks.append((start, kind))
            self.log(f"fault {kind} {detail}".rstrip())

    # -- metrics and resources ---------------------------------------------------------------------
    async def scrape(
        self, http: aiohttp.ClientSession, p: Proc
    ) -> dict[str, list[tuple[dict[str, str], float]]] | None:
        try:
            async with http.get(p.sched.base + "/metrics", timeout=aiohttp.ClientTimeout(total=3)) as r:
                if r.status != 200:
                    return None
                return parse_metrics(await r.text())
        except (TimeoutError, aiohttp.ClientError, OSError):
            return None

    @staticmethod
    def value(m: dict[str, list[tuple[dict[str, str], float]]], name: str, **labels: str) -> float | None:
        rows = m.get(name)
        if rows is None:
            return None
        return sum(v for lab, v in rows if all(lab.get(k) == w for k, w in labels.items()))

    async def check_metrics(self, api: Api, http: aiohttp.ClientSession) -> None:
        """Leader gauge against the Lease; vGPU gauges against the pods on vGPU nodes (when exported)."""
        assert self.checker is not None
        scraped = {}
        for p in self.live():
            m = await self.scrape(http, p)
            if m is not None:
                scraped[p.sched.pid] = m
        if not scraped:
            return
        any_m = next(iter(scraped.values()))
        if self.opts.replicas > 1:
            if "caldera_leader" in any_m:
                leader = await self.leader(api)
                leaders = {pid for pid, m in scraped.items() if (self.value(m, "caldera_leader") or 0) >= 1}
                truth = {leader.sched.pid} if leader is not None and leader.sched.pid in scraped else set()
                if leader is not None and leaders != truth:
                    self.leader_mismatch += 1
                    if self.leader_mismatch >= 4:  # two seconds of lease transition are allowed
                        self.checker.violate(
                            "metrics",
                            "caldera_leader",
                            f"gauge says {sorted(leaders)}, the Lease says {sorted(truth)}",
                        )
                else:
                    self.leader_mismatch = 0
                self._note_checked("caldera_leader (against the Lease holder)")
            else:
                self._note_skipped("caldera_leader")
        leader = await self.leader(api)
        lm = scraped.get(leader.sched.pid) if leader is not None else None
        if lm is None or leader is None:
            return
        self.record_cycles(leader.sched.pid, lm)
        if "volcano_vgpu_device_shared_number" in lm:
            exported = self.value(lm, "volcano_vgpu_device_shared_number") or 0.0
            truth_n = self.vgpu_pods_bound()
            if abs(exported - truth_n) > 0:
                # The gauges are set from the scheduler's cache, which counts a pod from the moment it is
                # assumed: a bind in flight (retried through a 429 storm) is a lag, not a lie. Allowed:
                # VGPU_LAG seconds plus the fault time overlapping the mismatch; the final check is exact.
                t = self.now()
                since = self.vgpu_mismatch_since if self.vgpu_mismatch_since is not None else t
                self.vgpu_mismatch_since = since
                if t - since > VGPU_LAG + self.checker.fault_extension(since, t):
                    self.checker.violate(
                        "metrics",
                        "volcano_vgpu_device_shared_number",
                        f"sum {exported:g}, pods on vGPU devices {truth_n}; {self.vgpu_diff(lm)}",
                    )
            else:
                self.vgpu_mismatch_since = None
            self._note_checked("volcano_vgpu_device_shared_number (against vGPU pods bound)")
        else:
            self._note_skipped("volcano_vgpu_device_* (not exported by caldera-scheduler)")

    def record_cycles(self, pid: int, m: dict[str, list[tuple[dict[str, str], float]]]) -> None:
        """The leader's mean cycle duration since the previous scrape (caldera_cycle_duration_seconds)."""
        total = self.value(m, "caldera_cycle_duration_seconds_sum")
        count = self.value(m, "caldera_cycle_duration_seconds_count")
        if total is None or count is None:
            return
        prev = self.cycle_prev.get(pid)
        self.cycle_prev[pid] = (total, count)
        series = self.samples.get("cycle_ms")
        if prev is not None and series and count > prev[1]:
            series[-1] = (total - prev[0]) / (count - prev[1]) * 1000

    def vgpu_pods(self) -> dict[str, dict[str, Any]]:
        """Pods bound, unfinished, holding vGPU slices: namespace/name -> pod."""
        assert self.checker is not None
        out = {}
        for key, pod in self.checker.pods.objects.items():
            if not pod["spec"].get("nodeName") or (pod.get("status") or {}).get("phase") in TERMINAL_PHASES:
                continue
            for c in pod["spec"].get("containers") or []:
                if "volcano.sh/vgpu-number" in ((c.get("resources") or {}).get("limits") or {}):
                    out[key] = pod
                    break
        return out

    def vgpu_pods_bound(self) -> int:
        return len(self.vgpu_pods())

    def vgpu_diff(self, m: dict[str, list[tuple[dict[str, str], float]]]) -> str:
        """Which pods the per-pod vGPU series and the API disagree on, and what the API says of them."""
        assert self.checker is not None
        exported = {
            f"{lab.get('podNamespace')}/{lab.get('podName')}"
            for lab, _ in m.get("volcano_vgpu_device_memory_allocation_for_a_certain_pod", [])
        }
        truth = self.vgpu_pods()
        extra = sorted(exported - set(truth))
        missing = sorted(set(truth) - exported)
        notes = []
        for key in extra[:3]:
            pod = self.checker.pods.objects.get(key)
            if pod is None:
                notes.append(f"{key}: gone from the API")
            else:
                notes.append(
                    f"{key}: node={pod['spec'].get('nodeName')!r} phase={(pod.get('status') or {}).get('phase')}"
                    f" deleting={bool(pod['metadata'].get('deletionTimestamp'))}"
                )
        return (
            f"exported, not on a device: {extra} ({'; '.join(notes)}); on a device, not exported: {missing}"
        )

    def _note_checked(self, what: str) -> None:
        if what not in self.summary.metrics_checked:
            self.summary.metrics_checked.append(what)

    def _note_skipped(self, what: str) -> None:
        if what not in self.summary.metrics_skipped:
            self.summary.metrics_skipped.append(what)

    async def sample(self, api: Api, stop: asyncio.Event) -> None:
        assert self.checker is not None
        interval = 2.0
        last_t = self.now()
        last_latency = 0
        async with aiohttp.ClientSession() as http:
            while not stop.is_set():
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(stop.wait(), interval)
                t = self.now()
                c = self.checker
                dt = max(1e-6, t - last_t)
                window = [lat for _, lat in c.bound_latency[last_latency:]]
                last_latency = len(c.bound_latency)
                rss_total = 0.0
                cpu_total = 0.0
                for p in self.procs:
                    if p.sched.alive:
                        rss = rss_bytes(p.sched.pid)
                        cpu = cpu_seconds(p.sched.pid)
                        if rss:
                            p.samples.append((t, rss))
                            rss_total += rss
                        if cpu is not None:
                            p.cpu_last = cpu
                    cpu_total += p.cpu_last - p.cpu_start
                leader = await self._safe_leader(api)
                lrss = leader.samples[-1][1] if leader is not None and leader.samples else float("nan")
                self.sample_t.append(t)
                for k, v in {
                    "throughput": c.bound_by_window / dt,
                    "pending": float(c.pending_count()),
                    "latency_p50": pct(window, 50) * 1000,
                    "latency_p99": pct(window, 99) * 1000,
                    "rss_leader": lrss / 2**20,
                    "rss_total": rss_total / 2**20,
                    "cpu_total": cpu_total,
                    "cycle_ms": float("nan"),  # filled in by the metrics check below
                }.items():
                    self.samples.setdefault(k, []).append(v)
                c.bound_by_window = 0
                last_t = t
                try:
                    await self.check_metrics(api, http)
                except (TimeoutError, aiohttp.ClientError, OSError, ApiError) as exc:
                    self.log(f"metrics check skipped this round: {exc!r}")

    async def _safe_leader(self, api: Api) -> Proc | None:
        try:
            return await self.leader(api)
        except Exception:
            return None

    def judge_memory(self) -> None:
        assert self.checker is not None
        for p in self.procs:
            s = p.samples
            if len(s) < 15:
                continue
            life = s[-1][0] - s[0][0]
            if life < 50:
                continue
            start = s[0][0]
            warm = [r for t, r in s if 0.25 * life <= t - start <= 0.45 * life]
            late = [r for t, r in s if t - start >= 0.8 * life]
            if not warm or not late:
                continue
            w, lt = statistics.median(warm), statistics.median(late)
            growth = (lt - w) / 2**20
            slope = growth / max(1e-6, (0.9 - 0.35) * life / 60)
            entry = {
                "replica": p.sched.name,
                "life_s": round(life, 1),
                "warm_mib": round(w / 2**20, 1),
                "late_mib": round(lt / 2**20, 1),
                "growth_mib_per_min": round(slope, 2),
            }
            self.summary.memory.append(entry)
            if lt > 1.5 * w + 64 * 2**20:
                self.checker.violate(
                    "memory", p.sched.name, f"RSS grew from {w / 2**20:.0f} MiB to {lt / 2**20:.0f} MiB"
                )

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
        """Bind counters against the bindings the API shows, over a quiet window with probe pods."""
        assert self.checker is not None
        c = self.checker
        await self.settle(2.0, 30.0)
        async with aiohttp.ClientSession() as http:
            before = {p.sched.pid: await self.scrape(http, p) for p in self.live()}
            bound_before = c.bound_total
            names = [f"probe-{i:03d}" for i in range(self.opts.probe_pods)]
            for n in names:
                await api.create(
                    pods_path("soak"),
                    pod_manifest(n, "soak", workload="probe", requests={"cpu": "100m", "memory": "64Mi"}),
                )
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                if all(c.pods.objects.get(f"soak/{n}", {}).get("spec", {}).get("nodeName") for n in names):
                    break
                await asyncio.sleep(0.2)
            await self.settle(2.0, 20.0)
            after = {p.sched.pid: await self.scrape(http, p) for p in self.live()}
        unbound = [
            n for n in names if not c.pods.objects.get(f"soak/{n}", {}).get("spec", {}).get("nodeName")
        ]
        if unbound:
            c.violate("fits-bound", "probe", f"{len(unbound)} probe pods unbound after 30s")
        seen = c.bound_total - bound_before
        delta = 0.0
        have = False
        for pid, m in after.items():
            b = before.get(pid)
            if m is None or "caldera_binds_total" not in m:
                continue
            have = True
            v1 = self.value(m, "caldera_binds_total", result="bound") or 0.0
            v0 = (self.value(b, "caldera_binds_total", result="bound") or 0.0) if b else 0.0
            delta += v1 - v0
        if have:
            self._note_checked("caldera_binds_total{result=bound} (against bindings seen, probe window)")
            if int(delta) != seen:
                c.violate(
                    "metrics",
                    "caldera_binds_total",
                    f"counters rose by {delta:g}, the API shows {seen} bindings",
                )
        else:
            self._note_skipped("caldera_binds_total")
        await self.final_vgpu_check(api)
        await self.final_queue_check(api)

    def queue_allocated_truth(self, finished: bool = False) -> dict[str, float]:
        """Millicores requested by the bound, unfinished pods of ours, per queue (from the API); with
        `finished`, counting finished pods too (to tell a metric that forgets to drop them)."""
        assert self.checker is not None
        out: dict[str, float] = {}
        for pod in self.checker.pods.objects.values():
            if not self.checker.ours(pod) or not pod["spec"].get("nodeName"):
                continue
            if (pod.get("status") or {}).get("phase") in TERMINAL_PHASES and not finished:
                continue
            cpu = pod_requests(pod["spec"]).get("cpu", 0)
            queue = self.checker.queue_of(pod)
            out[queue] = out.get(queue, 0.0) + float(cpu) * 1000
        return out

    async def final_queue_check(self, api: Api, timeout: float = 5.0) -> None:
        """volcano_queue_allocated_milli_cpu is set each cycle from the session; on a settling cluster it
        must come to equal what the API shows bound per queue (compared until it does, or `timeout`)."""
        assert self.checker is not None
        deadline = time.monotonic() + timeout
        diff: dict[str, tuple[float, float]] = {}
        cycles: list[float] = []
        async with aiohttp.ClientSession() as http:
            while True:
                leader = await self._safe_leader(api)
                m = await self.scrape(http, leader) if leader is not None else None
                if m is None or "volcano_queue_allocated_milli_cpu" not in m:
                    self._note_skipped("volcano_queue_allocated_milli_cpu")
                    return
                exported = {lab.get("queue_name", ""): v for lab, v in m["volcano_queue_allocated_milli_cpu"]}
                cycles.append(self.value(m, "caldera_cycle_duration_seconds_count") or 0.0)
                truth = self.queue_allocated_truth()
                diff = {
                    q: (exported.get(q, 0.0), truth.get(q, 0.0))
                    for q in set(exported) | set(truth)
                    if abs(exported.get(q, 0.0) - truth.get(q, 0.0)) >= 1.0
                }
                if not diff:
                    self.summary.notes.append(
                        "volcano_queue_allocated_milli_cpu equals the bound pods' requests"
                    )
                    return
                if time.monotonic() > deadline:
                    break
                await asyncio.sleep(0.5)
        # Not a violation: the session's allocated share also counts pipelined tasks (placed on a node
        # that preemption is freeing), which the API cannot show; the difference is reported instead.
        self.summary.notes.append(
            "volcano_queue_allocated_milli_cpu differs from the bound pods' requests: "
            + "; ".join(
                f"{q}: exported {e:g}m, bound {t:g}m (with finished pods {self.queue_allocated_truth(True).get(q, 0):g}m)"
                for q, (e, t) in sorted(diff.items())
            )
            + f"; {cycles[-1] - cycles[0]:g} cycles ran in the last {timeout:g}s"
        )

    async def final_vgpu_check(self, api: Api, timeout: float = 15.0) -> None:
        """Quiet cluster: the leader's vGPU gauges must come to equal the pods on vGPU devices."""
        assert self.checker is not None
        deadline = time.monotonic() + timeout
        exported, truth = 0.0, 0
        async with aiohttp.ClientSession() as http:
            while True:
                leader = await self._safe_leader(api)
                m = await self.scrape(http, leader) if leader is not None else None
                if m is None or "volcano_vgpu_device_shared_number" not in m:
                    return
                exported = self.value(m, "volcano_vgpu_device_shared_number") or 0.0
                truth = self.vgpu_pods_bound()
                if exported == truth:
                    return
                if time.monotonic() > deadline:
                    break
                await asyncio.sleep(1.0)
        self.checker.violate(
            "metrics",
            "volcano_vgpu_device_shared_number",
            f"final sum {exported:g}, vGPU pods bound {truth}; {self.vgpu_diff(m) if m else ''}",
        )

    # -- the run -------------------------------------------------------------------------------------
    async def main(self) -> Summary:
        opts = self.opts
        cluster_path = self.workdir / "cluster.yaml"
        cluster_path.write_text(yaml.safe_dump(cluster_file(opts.nodes, opts.ib_groups)))
        self.conf_path.write_text(SOAK_CONF)
        self.sim = SimProcess.start(
            self.workdir,
            log_path=self.workdir / "sim.log",
            cluster_file=str(cluster_path),
            kubelet_delay=0.3,
            history_size=20_000,
            bookmark_interval=5.0,
            seed=opts.seed,
        )
        stop = asyncio.Event()
        self.t0 = time.monotonic()
        async with Api(self.sim.url, self.sim.token) as api, Api(self.sim.url, self.sim.token) as checker_api:
            self.checker = checker = Checker(
                checker_api, CheckerConfig(period=duration(opts.period)), self.t0
            )
            await api.create(
                "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "soak"}}
            )
            await self.foreign_pods(api)
            for _ in range(opts.replicas):
                self.start_replica()
            tasks = [
                asyncio.create_task(checker.run(stop), name="checker"),
                asyncio.create_task(self.supervise(stop), name="supervisor"),
                asyncio.create_task(self.sample(api, stop), name="sampler"),
            ]
            load_seconds = opts.load_fraction * self.duration
            shape = ClusterShape(ib_groups=opts.ib_groups, nodes=opts.nodes)
            plan = build_plan(make_generators(parse_mix(opts.mix), load_seconds - 1.0), opts.seed, shape)
            executor = Executor(
                api,
                plan,
                "soak",
                finished_ttl=opts.finished_ttl,
                on_error=lambda m: self.log(f"workload error: {m}"),
            )
            faults = asyncio.create_task(self.inject(api, stop))
            load = asyncio.create_task(executor.run(t0=self.t0 + 1.0, janitor_stop=stop))
            try:
                await load
                await faults
                self.sim.command("clear")
                self.log("load finished; draining")
                remaining = self.duration - self.now()
                await self.settle(3.0, max(5.0, remaining - 15.0))
                await self.probe(api)
                # The rest of the time quiet, still checked: nothing may go wrong once the load is gone.
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(stop.wait(), max(0.0, self.duration - self.now()))
                checker.check()
                self.judge_memory()
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
                for p in self.procs:
                    p.expected_exit = True
                    p.sched.stop()
                self.sim.stop()
            s = self.summary
            s.seconds = round(self.now(), 1)
            s.violations = checker.violations
            s.submitted_pods = executor.stats.submitted_pods
            s.bound = checker.bound_total
            lat = [x for _, x in checker.bound_latency]
            s.latency_p50_ms = round(pct(lat, 50) * 1000, 1)
            s.latency_p99_ms = round(pct(lat, 99) * 1000, 1)
            s.max_partial_gang_s = round(checker.max_partial, 2)
            s.max_fit_wait_s = round(checker.max_fit_wait, 2)
            s.scheduler_cpu_s = round(sum(p.cpu_last - p.cpu_start for p in self.procs), 2)
            s.replicas = [
                {
                    "replica": p.sched.name,
                    "pid": p.sched.pid,
                    "cpu_s": round(p.cpu_last - p.cpu_start, 2),
                    "exit": p.sched.proc.returncode,
                }
                for p in self.procs
            ]
            s.cpu_ms_per_bound_pod = round(s.scheduler_cpu_s / max(1, s.bound) * 1000, 3)
            s.checks = checker.checks
            s.relists = checker.pods.relists + checker.nodes.relists + checker.groups.relists
            s.driver_retries = api.retries + checker_api.retries
        return self.summary

    async def foreign_pods(self, api: Api) -> None:
        """Pods of another scheduler: unbound ones must stay unbound, bound ones where they are."""
        assert self.checker is not None
        for i in range(3):
            body = pod_manifest(
                f"foreign-{i}",
                "soak",
                workload="foreign",
                requests={"cpu": "100m"},
                scheduler=FOREIGN_SCHEDULER,
            )
            await api.create(pods_path("soak"), body)
            self.checker.foreign[f"soak/foreign-{i}"] = body
        body = pod_manifest(
            "foreign-bound", "soak", workload="foreign", requests={"cpu": "1"}, scheduler=FOREIGN_SCHEDULER
        )
        body["spec"]["nodeName"] = "cpu-ib0-0"
        await api.create(pods_path("soak"), body)
        self.checker.foreign["soak/foreign-bound"] = body

    def write(self) -> dict[str, str]:
        d = Path(self.opts.report_dir)
        marks = self.fault_marks
        t = self.sample_t
        v = self.samples
        charts = {
            "throughput": Chart(
                "Pods bound per second", t, {"bound/s": v.get("throughput", [])}, markers=marks
            ),
            "pending": Chart(
                "Pending pods (ours, unbound)", t, {"pending": v.get("pending", [])}, markers=marks
            ),
            "latency": Chart(
                "Creation-to-bound latency (ms)",
                t,
                {"p50": v.get("latency_p50", []), "p99": v.get("latency_p99", [])},
                markers=marks,
            ),
            "memory": Chart(
                "Scheduler RSS (MiB)",
                t,
                {"leader": v.get("rss_leader", []), "all replicas": v.get("rss_total", [])},
                markers=marks,
            ),
            "cpu": Chart(
                "Scheduler CPU (cores, all replicas) and the leader's mean cycle (s)",
                t,
                {"cores": self.cpu_cores(), "cycle s": [x / 1000 for x in v.get("cycle_ms", [])]},
                markers=marks,
            ),
        }
        s = self.summary
        rows = (
            "".join(
                f"<tr><td>{x.at}</td><td>{x.invariant}</td><td>{x.detail}</td></tr>" for x in s.violations
            )
            or "<tr><td colspan=3>none</td></tr>"
        )
        summary_html = (
            f"<pre>{self.text()}</pre><h2>Violations</h2><table border=1 cellpadding=3>"
            f"<tr><th>t (s)</th><th>invariant</th><th>detail</th></tr>{rows}</table>"
        )
        paths = write_report(
            d, f"caldera soak, {self.opts.minutes:g} min, seed {self.opts.seed}", charts, summary_html
        )
        s.report = {k: str(p) for k, p in paths.items()}
        (d / "summary.json").write_text(json.dumps(asdict(s), indent=2, default=str))
        s.report["json"] = str(d / "summary.json")
        return s.report

    def cpu_cores(self) -> list[float]:
        """CPU seconds per second between samples, from the cumulative CPU of all replicas."""
        t, total = self.sample_t, self.samples.get("cpu_total", [])
        out = [float("nan")] * min(1, len(total))
        for i in range(1, len(total)):
            dt = t[i] - t[i - 1]
            out.append(max(0.0, total[i] - total[i - 1]) / dt if dt > 0 else float("nan"))
        return out

    def text(self) -> str:
        s = self.summary
        by_kind: dict[str, int] = {}
        for x in s.violations:
            by_kind[x.invariant] = by_kind.get(x.invariant, 0) + 1
        lines = [
            f"soak: {s.seconds:.0f}s, seed {self.opts.seed}, mix {self.opts.mix}, {len(s.faults)} faults:"
            f" {', '.join(f['kind'] + '@' + str(f['start']) for f in s.faults) or 'none'}",
            f"  pods submitted {s.submitted_pods}, bound {s.bound}; creation-to-bound p50 {s.latency_p50_ms}ms"
            f" p99 {s.latency_p99_ms}ms",
            f"  scheduler CPU {s.scheduler_cpu_s}s over all replicas = {s.cpu_ms_per_bound_pod} ms per bound pod ("
            + ", ".join(f"{r['replica']} {r['cpu_s']}s" for r in s.replicas)
            + ")",
            f"  longest partial gang {s.max_partial_gang_s}s, longest wait of a fitting pod {s.max_fit_wait_s}s;"
            f" {s.checks} invariant checks, {s.relists} re-lists, {s.driver_retries} driver retries",
            "  memory: "
            + (
                "; ".join(
                    f"{m['replica']} {m['warm_mib']}->{m['late_mib']} MiB over {m['life_s']}s"
                    for m in s.memory
                )
                or "too short to judge"
            ),
            f"  metrics checked: {', '.join(s.metrics_checked) or 'none'}",
            f"  metrics skipped: {', '.join(s.metrics_skipped) or 'none'}",
            *(f"  note: {n}" for n in s.notes),
            f"  violations: {len(s.violations)}" + (f" ({by_kind})" if by_kind else ""),
        ]
        lines += [f"    {x.at}s {x.invariant}: {x.detail}" for x in s.violations[:30]]
        return "\n".join(lines)


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


def register(subparsers: Any) -> None:
    p: argparse.ArgumentParser = subparsers.add_parser(
        "soak",
        help="soak the scheduler with workloads and faults, checking invariants",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--minutes", type=float, default=2.0)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--mix", default="default", help="workload mix (see `caldera-sim workload --help`)")
    p.add_argument(
        "--faults",
        default="all",
        help=f"comma-separated, in order: {','.join(FAULT_KINDS)}; `all` (default) or `none`",
    )
    p.add_argument("--report-dir", default="soak-report")
    p.add_argument("--nodes", type=int, default=48, help="CPU nodes (plus 4 GPU and 4 vGPU nodes)")
    p.add_argument("--period", default="500ms", help="the scheduler's --schedule-period")
    p.add_argument("--replicas", type=int, default=2, help="scheduler replicas (leader election when > 1)")
    p.add_argument("--workdir", help="keep the processes' logs here")
    p.add_argument("-v", "--verbose", action="store_true")
    p.set_defaults(func=run)


def parse_faults(text: str) -> tuple[str, ...]:
    if text == "all":
        return FAULT_KINDS
    if text in ("", "none"):
        return ()
    kinds = tuple(k.strip() for k in text.split(",") if k.strip())
    unknown = [k for k in kinds if k not in FAULT_KINDS]
    if unknown:
        raise SystemExit(f"unknown fault(s) {unknown}; known: {', '.join(FAULT_KINDS)}")
    return kinds


def run(args: argparse.Namespace) -> int:
    opts = Options(
        minutes=args.minutes,
        seed=args.seed,
        mix=args.mix,
        faults=parse_faults(args.faults),
        report_dir=args.report_dir,
        nodes=args.nodes,
        period=args.period,
        replicas=args.replicas,
        verbose=args.verbose,
    )
    if args.workdir:
        Path(args.workdir).mkdir(parents=True, exist_ok=True)
    summary, text = run_soak(opts, args.workdir)
    print(text)
    print(f"report: {summary.report.get('html')}")
    return 1 if summary.violations else 0
