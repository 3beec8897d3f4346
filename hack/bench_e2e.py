"""`caldera-sim bench e2e`: scheduler CPU per bound pod and pods per second, end to end through caldera-sim.

Three processes: the simulated cluster, the real `caldera-scheduler`, and this driver. Two shapes:

* ``--shape backlog``: every PodGroup and pod is created first, then the scheduler starts, as a restart
  finds them. CPU is counted from the scheduler's process start (imports, list, decode included).
* ``--shape stream``: the scheduler runs (synced, nodes only) and the pods are created meanwhile.
  CPU is counted from the first create.

In both, CPU is the scheduler's own accounting (/proc/PID/stat, utime+stime) until it is idle: every
pod seen bound by the driver's watch and then a second in which the scheduler used at most 5% of a
core (status writes and events included). A pod's latency is from its create request being answered
(stream) or from the scheduler's start (backlog) to the watch showing it bound. Figures only: no pass/fail.

``--topology``: the nodes come in leaves of 8 under a three-tier HyperNode tree (16 leaves a spine, one
root: hack/bench_hypernodes.py's tree, created with the nodes), every PodGroup asks for
``networkTopology: {mode: hard, highestTierAllowed: 1}`` and the scheduler's conf adds
``network-topology-aware`` (hack/bench_hypernodes.py's TOPOLOGY_CONF, unless CALDERA_BENCH_CONF names
another); the run also checks, from the bindings the driver's watch saw, that every
gang sits in one leaf.

``--ceiling``: after each backlog run, the same workload on a fresh simulator is bound by a binder that
makes no decision (hack/bench_ceiling.py: lists the pending pods once, posts one Binding per pod, 64 in
flight, in its own process); its pods/s are the most a scheduler writing one binding per pod reaches
here, and Caldera's pods/s are printed as a fraction of them. The binder then runs once more with one
of the machine's cores held busy by a process that makes no request (a busy loop): the most a
scheduler that itself takes a core could reach on a machine where it shares the cores with the API
server, and Caldera's pods/s as a fraction of that too.

Every run also prints the scheduler's cycles (p50, p99 and the longest, exact: its /debug/scheduler
cycle list, polled while it runs) and the simulator's own RSS (at the end, and with the nodes only).

``--profile PATH`` attaches py-spy (``pip install py-spy``, or the ``profile`` extra) to the scheduler for
the measured window and writes its folded stacks to PATH (flamegraph.pl or speedscope read them), then
prints the functions with the most samples.

Tunables besides the flags (environment): CALDERA_BENCH_CONF (a conf file), CALDERA_BENCH_KUBELET_DELAY
(default 0.5 s), CALDERA_BENCH_CONCURRENCY (creates in flight, default 32), CALDERA_BENCH_BOTH=1 (also
single pods without PodGroups), CALDERA_BENCH_SCHEDULER_ARGS (extra scheduler flags).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import yaml
from prometheus_client.registry import Collector

from caldera.hack import bench_e2e_dra
from caldera.hack.soak.procs import (
    ROOT,
    SchedulerProcess,
    SimProcess,
    child_env,
    compile_checkout,
    cpu_seconds,
    rss_bytes,
)
from caldera.hack.stats import percentile
from caldera.hack.workload.client import Api, podgroups_path, pods_path
from caldera.hack.workload.manifests import pod_manifest, podgroup_manifest
from caldera.metrics import gc as gc_metrics
from caldera.metrics import scheduler as m

NAMESPACE = "bench-e2e"
SHAPES = ("backlog", "stream")
#: idle: the scheduler used at most this share of one core over IDLE_WINDOW seconds
IDLE_SHARE = 0.05
IDLE_WINDOW = 1.0


@dataclass
class E2EResult:
    pods: int
    nodes: int
    gang_size: int
    period: str
    shape: str = "stream"
    created_seconds: float = 0.0
    wall_seconds: float = (
        0.0  # stream: first create sent -> last pod seen bound; backlog: start -> last bound
    )
    bound: int = 0
    latencies: list[float] = field(default_factory=list)
    scheduler_cpu: float | None = None
    idle_after: float = 0.0  # seconds from the last bind until the scheduler was idle
    sim_cpu: float | None = None
    #: caldera-sim's CPU from the start of the run to the last pod bound
    sim_cpu_to_bound: float | None = None
    scheduler_rss: int | None = None
    rss_before_pods: int | None = None  # stream: synced with the nodes only
    first_cycle: float | None = None  # process start -> end of its first cycle, seconds
    retries: int = 0
    rate_limit: float = 0.0  # pods created per second (0: as fast as the API server takes them)
    profile: str = ""
    profile_top: list[str] = field(default_factory=list)
    #: the scheduler's own counters at the end (its /metrics): watch events by kind, writes by kind
    events_seen: dict[str, float] = field(default_factory=dict)
    writes: dict[str, float] = field(default_factory=dict)
    cycles: float | None = None
    gc_seconds: dict[str, float] = field(default_factory=dict)
    gc_collections: dict[str, float] = field(default_factory=dict)
    #: /debug/scheduler's lag at the end: the event loop's lateness, the binds seen back by the watch
    lag: dict[str, dict[str, float]] = field(default_factory=dict)
    #: "caldera" (caldera-scheduler) or "ceiling" (hack/bench_ceiling.py: no decisions)
    binder: str = "caldera"
    topology: bool = False
    #: every cycle's duration (seconds), from the scheduler's /debug/scheduler while it ran
    cycle_seconds: list[float] = field(default_factory=list)
    sim_rss: int | None = None
    sim_rss_before_pods: int | None = None  # the simulator with its nodes only
    #: --topology: gangs whose bound pods the watch saw on more than one leaf, of the gangs checked
    gangs_split: int | None = None
    gangs_checked: int = 0
    #: --ceiling (backlog): the decision-free binder's run on the same workload
    ceiling: E2EResult | None = None
    #: --ceiling (backlog): the binder's run again, with one core held busy by a process that makes no
    #: request (``busy_core``)
    busy_ceiling: E2EResult | None = None
    #: a binder's run with a busy loop in a process beside it, for as long as the binder ran
    busy_core: bool = False
    #: --dra: each pod claims one device through a ResourceClaimTemplate (hack/bench_e2e_dra.py)
    dra: bool = False
    #: backlog: seconds from the start to the first pod bound, and caldera-sim's CPU from then to the
    #: last pod bound (the serial part of a run no scheduler making the same requests can shorten)
    first_bound: float | None = None
    sim_cpu_after_first: float | None = None
    #: the scheduler's CPU from the start of the run to the last pod bound (its event loop and its
    #: cycles run in one interpreter: this much of its work cannot overlap)
    scheduler_cpu_to_bound: float | None = None

    @property
    def rate(self) -> float:
        return self.bound / self.wall_seconds if self.wall_seconds else 0.0

    @property
    def cpu_ms_per_pod(self) -> float | None:
        if self.scheduler_cpu is None or not self.bound:
            return None
        return self.scheduler_cpu / self.bound * 1000

    @property
    def ceiling_fraction(self) -> float | None:
        """This run's pods/s as a fraction of the decision-free binder's on the same workload."""
        if self.ceiling is None or not self.ceiling.rate:
            return None
        return self.rate / self.ceiling.rate

    @property
    def busy_ceiling_fraction(self) -> float | None:
        """This run's pods/s as a fraction of the binder's with one core held busy beside it."""
        if self.busy_ceiling is None or not self.busy_ceiling.rate:
            return None
        return self.rate / self.busy_ceiling.rate

    @property
    def ceiling_bound(self) -> float | None:
        """The most this run's fraction of the ceiling could have been, however fast its decisions:
        caldera-sim serves one request at a time, and what it did from the first pod bound to the
        last it could not have done before the scheduler's first binding."""
        first, after = self.first_bound, self.sim_cpu_after_first
        if self.ceiling is None or not self.ceiling.wall_seconds or first is None or after is None:
            return None
        return self.ceiling.wall_seconds / (first + after)

    @property
    def ceiling_own_bound(self) -> float | None:
        """The most this run's fraction of the ceiling could have been while the scheduler spends
        as much CPU up to its last bind: its cycles and its event loop share one interpreter, so that
        CPU took at least as long in wall time."""
        own = self.scheduler_cpu_to_bound
        if self.ceiling is None or not self.ceiling.wall_seconds or not own:
            return None
        return self.ceiling.wall_seconds / own

    def ceiling_line(self) -> str:
        fraction = self.ceiling_fraction
        if self.ceiling is None or fraction is None:
            return "  binding ceiling: the decision-free binder bound nothing"
        line = (
            f"  binding ceiling: {self.ceiling.rate:.0f} pods/s; Caldera {self.rate:.0f} pods/s ="
            f" {fraction:.2f} of it"
        )
        sim = self.sim_cpu_to_bound
        if sim and self.ceiling.wall_seconds:
            # caldera-sim serves from one event loop: a run cannot end before the simulator has done the
            # work it did for it, so the binder's wall time over the simulator's CPU up to Caldera's last
            # bind is about the most any scheduler asking the simulator for as much could reach
            line += (
                f"; caldera-sim spent {sim:.2f}s of CPU up to Caldera's last bind, the binder's whole run"
                f" took {self.ceiling.wall_seconds:.2f}s: about {self.ceiling.wall_seconds / sim:.2f} at most"
                " while the simulator does that much"
            )
        own = self.ceiling_own_bound
        if own is not None:
            line += (
                f"; Caldera itself spent {self.scheduler_cpu_to_bound:.2f}s of CPU up to its last bind, in"
                f" one interpreter (its cycles and its event loop share the GIL): about {own:.2f} at most"
                " while it does that much"
            )
        bound = self.ceiling_bound
        if bound is not None:
            theirs = self.ceiling.first_bound
            line += (
                f"; its first pod was bound {self.first_bound:.2f}s after it started"
                + (f" (the binder's {theirs:.2f}s after its own start)" if theirs is not None else "")
                + f" and caldera-sim spent"
                f" {self.sim_cpu_after_first:.2f}s of CPU from then to its last bind: however fast its"
                " decisions, a scheduler that starts binding that late and asks that much of the simulator"
                f" reaches {bound:.2f} at most"
            )
        busy = self.busy_ceiling_fraction
        if self.busy_ceiling is not None and busy is not None:
            line += (
                f"; with one of the machine's {os.cpu_count()} cores held busy by a process that makes no"
                f" request, the binder reached {self.busy_ceiling.rate:.0f} pods/s (the most a scheduler"
                f" that takes a core for itself could reach here): Caldera {busy:.2f} of that"
            )
        return line

    def report(self) -> str:
        cpu = self.cpu_ms_per_pod
        kind = "single pods" if self.gang_size <= 1 else f"gangs of {self.gang_size}"
        if self.topology:
            kind += ", networkTopology hard tier 1 over HyperNode leaves of 8"
        if self.dra:
            kind += ", each pod claiming one device"
        who = "" if self.binder == "caldera" else ", decision-free binder (the binding ceiling)"
        if self.busy_core:
            who += ", one core held busy beside it"
        actor = "scheduler" if self.binder == "caldera" else "binder"
        if self.shape == "backlog":
            how = f"all created first, then the {actor} started"
            span = f"{actor} start -> last bound"
        else:
            how = "created while scheduling" + (
                f" at {self.rate_limit:g}/s" if self.rate_limit else ", as fast as possible"
            )
            span = "first create -> last bound"
        lines = [
            f"e2e [{self.shape}{who}]: {self.pods} pods ({kind}) on {self.nodes} nodes, schedule period"
            f" {self.period}, {how}",
            f"  created in {self.created_seconds:.2f}s ({self.pods / max(self.created_seconds, 1e-9):.0f}/s)",
            f"  bound: {self.bound}/{self.pods} in {self.wall_seconds:.2f}s = {self.rate:.0f} pods/s ({span})",
            f"  latency to bound: p50={percentile(self.latencies, 50) * 1000:.0f}ms"
            f" p99={percentile(self.latencies, 99) * 1000:.0f}ms max={max(self.latencies or [0]) * 1000:.0f}ms",
        ]
        if cpu is not None and self.scheduler_cpu is not None:
            start = "process start" if self.shape == "backlog" else "first create"
            lines.append(
                f"  {actor} CPU: {self.scheduler_cpu:.2f}s = {cpu:.3f} ms per bound pod"
                f" (utime+stime, {start} -> idle {self.idle_after:.1f}s after the last bind)"
            )
        if self.cycle_seconds:
            c = self.cycle_seconds
            worst = sorted(range(len(c)), key=lambda i: -c[i])[:3]
            lines.append(
                f"  scheduler cycles: p50={percentile(c, 50) * 1000:.0f}ms p99={percentile(c, 99) * 1000:.0f}ms"
                f" longest={max(c) * 1000:.0f}ms over {len(c)} cycles (its /debug/scheduler); the longest:"
                f" {', '.join(f'#{i + 1} {c[i] * 1000:.0f}ms' for i in worst)}"
            )
        if self.first_cycle is not None:
            lines.append(f"  scheduler start-up: process start -> end of first cycle {self.first_cycle:.2f}s")
        if self.sim_cpu is not None:
            lines.append(
                f"  caldera-sim CPU: {self.sim_cpu:.2f}s = {self.sim_cpu / max(1, self.bound) * 1000:.3f} ms per pod"
            )
        if self.sim_rss is not None:
            line = f"  caldera-sim RSS at the end: {self.sim_rss / 2**20:.0f} MiB"
            if self.sim_rss_before_pods is not None and self.pods:
                per = (self.sim_rss - self.sim_rss_before_pods) / self.pods
                line += (
                    f" ({self.sim_rss_before_pods / 2**20:.0f} MiB with the {self.nodes} nodes only:"
                    f" {per / 2**10:.1f} KiB per pod)"
                )
            lines.append(line)
        if self.scheduler_rss is not None:
            line = f"  scheduler RSS at the end: {self.scheduler_rss / 2**20:.0f} MiB"
            if self.rss_before_pods is not None and self.pods:
                per = (self.scheduler_rss - self.rss_before_pods) / self.pods * 10_000
                line += (
                    f" ({self.rss_before_pods / 2**20:.0f} MiB with the {self.nodes} nodes only:"
                    f" {per / 2**20:.1f} MiB per 10,000 pods)"
                )
            lines.append(line)
        if self.events_seen:
            seen = ", ".join(f"{k} {v:.0f}" for k, v in sorted(self.events_seen.items()))
            lines.append(f"  watch events the scheduler decoded: {seen}")
        if self.writes:
            per = sum(self.writes.values()) / max(1, self.bound)
            made = ", ".join(f"{k} {v:.0f}" for k, v in sorted(self.writes.items()))
            lines.append(f"  API writes: {made} ({per:.2f} per bound pod)")
        if self.cycles is not None:
            lines.append(f"  scheduling cycles: {self.cycles:.0f}")
        if self.gc_seconds:
            by_gen = ", ".join(
                f"gen{g} {v:.2f}s" + (f" in {self.gc_collections[g]:.0f}" if g in self.gc_collections else "")
                for g, v in sorted(self.gc_seconds.items())
            )
            lines.append(
                f"  garbage collector (whole process life): {sum(self.gc_seconds.values()):.2f}s ({by_gen})"
            )
        lines.extend(lag_lines(self.lag))
        if self.gangs_split is not None:
            lines.append(
                f"  topology check: {self.gangs_checked - self.gangs_split} of {self.gangs_checked} gangs"
                f" inside one leaf ({self.gangs_split} spread over more than one)"
            )
        if self.ceiling is not None:
            lines.append(self.ceiling_line())
        if self.retries:
            lines.append(f"  driver retries (429/5xx/resets): {self.retries}")
        if self.profile:
            lines.append(f"  profile (py-spy folded stacks): {self.profile}; most samples:")
            lines.extend(f"    {line}" for line in self.profile_top)
        return "\n".join(lines)


async def _wait_ready(base: str, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    async with aiohttp.ClientSession() as http:
        while time.monotonic() < deadline:
            with contextlib.suppress(aiohttp.ClientError, OSError):
                async with http.get(base + "/readyz") as r:
                    if r.status == 200:
                        return
    raise RuntimeError("caldera-scheduler did not become ready")


_SAMPLE = re.compile(r"^([a-z_]+?)(?:_total)?\{([^}]*)\} ([0-9.e+]+)$", re.M)


def _family(metric: Collector) -> str:
    """The name a metric's samples are exported under, less the ``_total`` of a counter."""
    return next(iter(metric.describe())).name


#: the scheduler's metrics the reader looks for, named by the objects that define them (metrics/)
_WATCH_EVENTS = _family(m.WATCH_EVENTS)
_BINDS = _family(m.BINDS)
_STATUS_WRITES = _family(m.STATUS_WRITES)
_GC_SECONDS = _family(gc_metrics.GC_SECONDS)
_CYCLES = re.compile(rf"^{_family(m.CYCLE_DURATION)}_count(?:\{{[^}}]*\}})? ([0-9.e+]+)$", re.M)
#: prometheus_client's own collector (``prometheus_client.GC_COLLECTOR``, gc_collector.py)
_GC_COLLECTIONS = "python_gc_collections"


async def _scrape(base: str, result: E2EResult) -> None:
    async with aiohttp.ClientSession() as http:
        async with http.get(base + "/metrics") as r:
            read_counters(await r.text(), result)
        async with http.get(base + "/debug/scheduler") as r:
            result.lag = (await r.json()).get("lag") or {}


def lag_lines(lag: dict[str, dict[str, float]]) -> list[str]:
    """/debug/scheduler's lag as report lines (none when the scheduler measured nothing)."""

    def figures(doc: dict[str, float]) -> str:
        return f"p50 {doc['p50_ms']:g} ms, p99 {doc['p99_ms']:g} ms, longest {doc['max_ms']:g} ms"

    lines = []
    loop = lag.get("loop") or {}
    if loop.get("recent"):
        lines.append(
            f"  event loop lateness (a timer every 0.25 s, {loop['recent']:g} of them): {figures(loop)}"
        )
    watch = lag.get("watch") or {}
    if watch.get("recent"):
        lines.append(
            f"  binds seen back by the pod watch after the API's answer (the last {watch['recent']:g}"
            f" of {watch['observed']:g}): {figures(watch)}"
        )
    return lines


def read_counters(text: str, result: E2EResult) -> None:
    """The scheduler's own counters from its /metrics text: watch events by kind, API writes by kind,
    cycles run, time in the garbage collector."""
    for name, labels, value in _SAMPLE.findall(text):
        tags = dict(re.findall(r'(\w+)="([^"]*)"', labels))
        if bench_e2e_dra.claim_writes(name, tags, float(value), result.writes):
            continue
        if name == _WATCH_EVENTS:
            kind = tags.get("kind", "?")
            result.events_seen[kind] = result.events_seen.get(kind, 0.0) + float(value)
        elif name == _BINDS:
            result.writes["bindings"] = result.writes.get("bindings", 0.0) + float(value)
        elif name == _GC_COLLECTIONS:
            result.gc_collections[tags.get("generation", "?")] = float(value)
        elif name == _GC_SECONDS:
            result.gc_seconds[tags.get("generation", "?")] = float(value)
        elif name == _STATUS_WRITES:
            kind = tags.get("kind", "?")
            key = "events" if kind == "event" else f"{kind} status"
            result.writes[key] = result.writes.get(key, 0.0) + float(value)
    match = _CYCLES.search(text)
    if match:
        result.cycles = float(match.group(1))


def _first_cycle(log: Path) -> float | None:
    """Process start to the end of the first cycle, as the scheduler logged it."""
    if not log.exists():
        return None
    match = re.search(r"first cycle done ([0-9.]+)s after process start", log.read_text(errors="replace"))
    return float(match.group(1)) if match else None


async def _wait_idle(pid: int, timeout: float = 60.0) -> tuple[float | None, float]:
    """Poll the scheduler's CPU until it used at most IDLE_SHARE of a core over IDLE_WINDOW seconds;
    returns (CPU seconds at the start of that quiet window, its monotonic start time)."""
    t0 = time.monotonic()
    samples: list[tuple[float, float]] = []
    while time.monotonic() - t0 < timeout:
        now, cpu = time.monotonic(), cpu_seconds(pid)
        if cpu is None:
            return None, now
        samples.append((now, cpu))
        for when, used in samples:
            if now - when >= IDLE_WINDOW:
                if cpu - used <= IDLE_SHARE * (now - when):
                    return used, when
        samples = [(w, c) for w, c in samples if now - w < IDLE_WINDOW * 1.5]
        await asyncio.sleep(0.1)
    return cpu_seconds(pid), time.monotonic()


class Profiler:
    """py-spy attached to a running process, sampling whichever thread holds the GIL (without pausing it)."""

    def __init__(self, pid: int, path: Path) -> None:
        exe = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
        if not Path(exe).exists():
            raise SystemExit("--profile needs py-spy: pip install py-spy (or the 'profile' extra)")
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(
            [
                exe,
                "record",
                "--pid",
                str(pid),
                "--rate",
                "200",
                "--nonblocking",
                # only the thread holding the GIL: a thread waiting for it is not spending CPU, and
                # counting it would split one core's time between the loop and the decide thread
                "--gil",
                "--format",
                "raw",
                "-o",
                str(path),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )

    def stop(self) -> list[str]:
        self.proc.send_signal(signal.SIGINT)
        try:
            _, err = self.proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return ["py-spy did not stop"]
        if not self.path.exists():
            return [f"py-spy wrote nothing: {err.decode(errors='replace')[-300:]}"]
        return top_functions(self.path)


def top_functions(path: Path, n: int = 25) -> list[str]:
    """The functions with the most samples in a folded-stacks file: own (leaf) and total."""
    own: Counter[str] = Counter()
    total: Counter[str] = Counter()
    samples = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        k = int(count)
        samples += k
        frames = [_frame(f) for f in stack.split(";")]
        if frames:
            own[frames[-1]] += k
        for frame in set(frames):
            total[frame] += k
    if not samples:
        return ["no samples"]
    out = [f"{samples} samples; own time:"]
    out += [f"  {c / samples:6.1%}  {f}" for f, c in own.most_common(n)]
    out.append("total time (incl. callees):")
    out += [f"  {c / samples:6.1%}  {f}" for f, c in total.most_common(n)]
    return out


def _frame(text: str) -> str:
    """``func (path/to/file.py:123)`` -> ``func (file.py)``: one entry per function, not per line."""
    name, _, where = text.partition(" (")
    where = where.rstrip(")").rsplit(":", 1)[0].rsplit("/", 1)[-1]
    return f"{name} ({where})" if where else name


def _manifests(result: E2EResult) -> tuple[list[str], list[bytes], list[dict[str, object]]]:
    gang = result.gang_size
    groups = result.pods // gang if gang > 1 else 0
    names = [f"p-{i:06d}" for i in range(result.pods)]
    # Varied templates, as real workloads have: a few request shapes.
    shapes = [("100m", "128Mi"), ("200m", "256Mi"), ("250m", "64Mi"), ("50m", "512Mi")]
    pods = []
    for i, name in enumerate(names):
        group_index = i // gang if gang > 1 else i
        cpu, memory = shapes[group_index % len(shapes)]
        manifest = pod_manifest(
            name,
            NAMESPACE,
            workload="bench",
            group=f"g-{group_index:05d}" if gang > 1 else "",
            requests={"cpu": cpu, "memory": memory},
        )
        pods.append(orjson.dumps(bench_e2e_dra.claiming(manifest) if result.dra else manifest))
    topology = {"mode": "hard", "highestTierAllowed": 1} if result.topology else None
    pgs = [
        podgroup_manifest(f"g-{g:05d}", NAMESPACE, gang, workload="bench", network_topology=topology)
        for g in range(groups)
    ]
    return names, pods, pgs


class Driver:
    """Creates the objects and watches the pods until every one is bound."""

    def __init__(self, api: Api, result: E2EResult, concurrency: int) -> None:
        self.api = api
        self.result = result
        self.concurrency = concurrency
        self.names, self.pods, self.podgroups = _manifests(result)
        self.created: dict[str, float] = {}
        self.bound_at: dict[str, float] = {}
        self.node_of: dict[str, str] = {}
        self.done = asyncio.Event()
        self.rv = ""
        self.watcher: asyncio.Task[None] | None = None
        #: called when the watch first shows a pod bound (the simulator's CPU is read then)
        self.on_first_bound: Callable[[], None] | None = None

    async def prepare(self) -> None:
        await self.api.create(
            "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
        )
        if self.result.dra:
            await bench_e2e_dra.create_objects(self.api, NAMESPACE)
        _, self.rv = await self.api.list(pods_path(NAMESPACE), limit="1")

    def start_watch(self) -> None:
        self.watcher = asyncio.create_task(self._watch())

    async def _watch(self) -> None:
        api = self.api
        while not self.done.is_set():
            url = (
                f"{api.url}{pods_path(NAMESPACE)}?watch=1&allowWatchBookmarks=true&resourceVersion={self.rv}"
            )
            try:
                async with api.session.get(
                    url, timeout=aiohttp.ClientTimeout(total=None, sock_read=None)
                ) as resp:
                    async for line in resp.content:
                        now = time.monotonic()
                        ev = orjson.loads(line)
                        obj = ev["object"]
                        if ev["type"] == "ERROR":
                            raise RuntimeError(f"watch error {obj}")
                        self.rv = obj["metadata"].get("resourceVersion", self.rv)
                        if ev["type"] == "BOOKMARK":
                            continue
                        name = obj["metadata"]["name"]
                        node = obj["spec"].get("nodeName")
                        if node and name not in self.bound_at:
                            self.bound_at[name] = now
                            self.node_of[name] = node
                            if len(self.bound_at) == 1 and self.on_first_bound is not None:
                                self.on_first_bound()
                            if len(self.bound_at) >= self.result.pods:
                                self.done.set()
                                return
            except (TimeoutError, aiohttp.ClientError):
                await asyncio.sleep(0.05)

    async def create_all(self) -> float:
        """Every PodGroup, then every pod; returns the monotonic time the first create was sent."""
        api = self.api
        t0 = time.monotonic()
        for pg in self.podgroups:
            await api.create(podgroups_path(NAMESPACE), pg)
        queue: asyncio.Queue[int] = asyncio.Queue()
        for i in range(len(self.pods)):
            queue.put_nowait(i)
        path = api.url + pods_path(NAMESPACE)
        rate = self.result.rate_limit

        async def creator() -> None:
            while not queue.empty():
                i = queue.get_nowait()
                if rate:  # paced: pod i is due at t0 + i/rate
                    delay = t0 + i / rate - time.monotonic()
                    if delay > 0:
                        await asyncio.sleep(delay)
                for _attempt in range(20):
                    async with api.session.post(
                        path, data=self.pods[i], headers={"Content-Type": "application/json"}
                    ) as r:
                        await r.read()
                        if r.status in (201, 409):
                            self.created.setdefault(self.names[i], time.monotonic())
                            break
                        api.retries += 1
                    await asyncio.sleep(0.05)

        await asyncio.gather(*(creator() for _ in range(self.concurrency)))
        self.result.created_seconds = time.monotonic() - t0
        return t0

    async def wait_bound(self) -> float:
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self.done.wait(), timeout=max(120.0, self.result.pods / 50))
        return max(self.bound_at.values()) if self.bound_at else time.monotonic()

    async def stop(self) -> None:
        if self.watcher is not None:
            self.watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self.watcher


class CycleWatch:
    """Every cycle's duration, from the scheduler's /debug/scheduler (its last 600 cycles, each with its
    start time): polled every ``interval`` seconds while the run lasts, so none is missed (a cycle takes
    at least the schedule period), and once more at the end."""

    def __init__(self, base: str, interval: float = 10.0) -> None:
        self.base = base
        self.interval = interval
        self.cycles: dict[float, float] = {}
        self.task: asyncio.Task[None] | None = None

    async def poll(self, http: aiohttp.ClientSession) -> None:
        with contextlib.suppress(aiohttp.ClientError, OSError, ValueError, TimeoutError):
            async with http.get(self.base + "/debug/scheduler") as r:
                if r.status == 200:
                    for c in orjson.loads(await r.read()).get("cycles", []):
                        self.cycles[c["at"]] = c["duration_ms"] / 1000

    async def _run(self) -> None:
        async with aiohttp.ClientSession() as http:
            while True:
                await self.poll(http)
                await asyncio.sleep(self.interval)

    def start(self) -> None:
        self.task = asyncio.create_task(self._run())

    async def stop(self) -> list[float]:
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.task
        async with aiohttp.ClientSession() as http:
            await self.poll(http)
        return [self.cycles[at] for at in sorted(self.cycles)]


def topology_cluster(nodes: int, node_pods: int, leaf: int = 8, spine: int = 16) -> dict[str, Any]:
    """A caldera-sim cluster file: ``nodes`` nodes (32 cpu / 128Gi) in leaves of ``leaf``, each leaf's
    nodes named ``leaf-NNNN-K`` and labelled with it, and hack/bench_hypernodes.py's HyperNode tree
    over them."""
    from caldera.hack.bench_hypernodes import LEAF_LABEL, hypernode_manifests, leaf_name

    leaves = (nodes + leaf - 1) // leaf
    templates = [
        {
            "name": leaf_name(j),
            "count": min(leaf, nodes - j * leaf),
            "capacity": {"cpu": "32", "memory": "128Gi", "pods": str(node_pods)},
            "labels": {LEAF_LABEL: leaf_name(j)},
        }
        for j in range(leaves)
    ]
    return {"nodes": templates, "objects": hypernode_manifests(leaves, spine)}


def split_gangs(node_of: dict[str, str], gang_size: int) -> tuple[int, int]:
    """(gangs checked, gangs whose pods are on more than one leaf): pod ``p-I`` is in gang I // size,
    node ``leaf-NNNN-K`` in leaf ``leaf-NNNN``."""
    leaves: dict[int, set[str]] = {}
    for pod, node in node_of.items():
        leaves.setdefault(int(pod.rsplit("-", 1)[1]) // gang_size, set()).add(node.rsplit("-", 1)[0])
    return len(leaves), sum(1 for found in leaves.values() if len(found) > 1)


def bench(
    nodes: int,
    pods: int,
    gang_size: int,
    period: str | None = None,
    conf: str | None = None,
    shape: str = "stream",
    profile: str | None = None,
    rate: float = 0.0,
    topology: bool = False,
    binder: str = "caldera",
    dra: bool = False,
    busy_core: bool = False,
) -> E2EResult:
    """One run. ``busy_core`` (the decision-free binder only): a process that makes no request keeps
    one core busy from the binder's start to its end."""
    if shape not in SHAPES:
        raise ValueError(f"shape must be one of {', '.join(SHAPES)}, not {shape!r}")
    if binder not in ("caldera", "ceiling"):
        raise ValueError(f"binder must be caldera or ceiling, not {binder!r}")
    if busy_core and binder != "ceiling":
        raise ValueError("busy_core is for the decision-free binder's run")
    if binder == "ceiling" and shape != "backlog":
        raise ValueError("the decision-free binder lists the pending pods once: backlog shape only")
    period = period or "100ms"
    conf = conf or os.environ.get("CALDERA_BENCH_CONF") or None
    kubelet_delay = float(os.environ.get("CALDERA_BENCH_KUBELET_DELAY", "0.5"))
    concurrency = int(os.environ.get("CALDERA_BENCH_CONCURRENCY", "32"))
    result = E2EResult(
        pods=pods,
        nodes=nodes,
        gang_size=gang_size,
        period=period,
        shape=shape,
        rate_limit=rate,
        topology=topology,
        binder=binder,
        dra=dra,
        busy_core=busy_core,
    )
    if topology and gang_size <= 1:
        raise ValueError("--topology places gangs: the gang size must be at least 2")
    node_pods = max(110, -(-pods // max(1, nodes)) + 10)
    compile_checkout()  # the scheduler's start-up as installed, not with its edited modules compiled
    with tempfile.TemporaryDirectory(prefix="caldera-bench-e2e-") as workdir:
        cluster: dict[str, Any] = {"nodes": nodes, "node_pods": node_pods}
        if topology:
            cluster_file = Path(workdir) / "cluster.yaml"
            cluster_file.write_text(yaml.safe_dump(topology_cluster(nodes, node_pods)))
            cluster = {"nodes": 0, "cluster_file": str(cluster_file)}
            if conf is None:
                from caldera.hack.bench_hypernodes import TOPOLOGY_CONF

                conf_file = Path(workdir) / "scheduler-conf.yaml"
                conf_file.write_text(TOPOLOGY_CONF)
                conf = str(conf_file)
        sim = SimProcess.start(
            workdir,
            log_path=Path(workdir) / "sim.log",
            history_size=max(10_000, pods * 4),
            kubelet_delay=kubelet_delay,
            **cluster,
        )
        sched: SchedulerProcess | None = None
        ceiling: subprocess.Popen[bytes] | None = None
        burner: subprocess.Popen[bytes] | None = None
        profiler: Profiler | None = None

        def start_scheduler() -> SchedulerProcess:
            nonlocal profiler
            proc = SchedulerProcess.start(
                "bench",
                sim.kubeconfig,
                period=period,
                conf=conf,
                log_path=Path(workdir) / "scheduler.log",
                # info: the scheduler's own "first cycle done ... after process start" line
                extra=["--log-level", "info", *os.environ.get("CALDERA_BENCH_SCHEDULER_ARGS", "").split()],
            )
            if profile:
                profiler = Profiler(proc.pid, Path(profile))
            return proc

        def start_ceiling() -> subprocess.Popen[bytes]:
            argv = ["--kubeconfig", str(sim.kubeconfig), "--namespace", NAMESPACE, "--in-flight", "64"]
            with open(Path(workdir) / "scheduler.log", "ab") as log:  # the child has its own copy
                return subprocess.Popen(
                    [sys.executable, "-m", "caldera.hack.bench_ceiling", *argv],
                    env=child_env(),
                    cwd=str(ROOT),
                    stdout=subprocess.PIPE,
                    stderr=log,
                )

        try:
            first: dict[str, float | None] = {}

            async def go() -> None:
                nonlocal sched, ceiling, burner
                async with Api(sim.url, sim.token, concurrency=concurrency + 8) as api:
                    driver = Driver(api, result, concurrency)
                    await driver.prepare()
                    result.sim_rss_before_pods = rss_bytes(sim.pid)
                    driver.start_watch()
                    sim_cpu0 = cpu_seconds(sim.pid)
                    cycles: CycleWatch | None = None
                    if shape == "backlog":
                        await driver.create_all()
                        sim_cpu0 = cpu_seconds(sim.pid)
                        if binder == "ceiling":
                            if busy_core:
                                burner = subprocess.Popen([sys.executable, "-c", BUSY_LOOP])
                            ceiling = start_ceiling()
                        else:
                            sched = start_scheduler()
                            cycles = CycleWatch(sched.base)
                            cycles.start()
                        t0 = time.monotonic()
                        cpu0: float | None = 0.0  # from the process start
                        created = dict.fromkeys(driver.names, t0)

                        def first_bound() -> None:
                            first["at"] = time.monotonic() - t0
                            first["sim_cpu"] = cpu_seconds(sim.pid)

                        driver.on_first_bound = first_bound
                    else:
                        sched = start_scheduler()
                        await _wait_ready(sched.base)
                        await asyncio.sleep(0.5)  # a few idle cycles: the steady state before pods
                        result.rss_before_pods = rss_bytes(sched.pid)
                        cycles = CycleWatch(sched.base)
                        cycles.start()
                        cpu0 = cpu_seconds(sched.pid)
                        t0 = await driver.create_all()
                        created = driver.created
                    t_end = await driver.wait_bound()
                    sim_cpu_bound = cpu_seconds(sim.pid)
                    sched_cpu_bound = cpu_seconds(sched.pid) if sched is not None else None
                    first_cpu = first.get("sim_cpu")
                    if shape == "backlog" and first_cpu is not None and sim_cpu_bound is not None:
                        result.first_bound = first.get("at")
                        result.sim_cpu_after_first = sim_cpu_bound - first_cpu
                    if ceiling is not None:
                        out, _ = await asyncio.to_thread(ceiling.communicate)
                        _stop(burner)
                        counts = orjson.loads(out.splitlines()[-1]) if out.strip() else {}
                        cpu_idle: float | None = counts.get("cpu")
                        quiet_since = time.monotonic()
                    else:
                        assert sched is not None
                        cpu_idle, quiet_since = await _wait_idle(sched.pid)
                    sim_cpu1 = cpu_seconds(sim.pid)
                    result.sim_rss = rss_bytes(sim.pid)
                    result.idle_after = max(0.0, quiet_since - t_end)
                    await driver.stop()
                    result.wall_seconds = t_end - t0
                    result.bound = len(driver.bound_at)
                    result.latencies = [
                        driver.bound_at[n] - created[n] for n in driver.bound_at if n in created
                    ]
                    if topology and binder == "caldera":  # the ceiling's bindings ignore topology
                        result.gangs_checked, result.gangs_split = split_gangs(driver.node_of, gang_size)
                    if cpu0 is not None and cpu_idle is not None:
                        result.scheduler_cpu = cpu_idle - cpu0
                    if cpu0 is not None and sched_cpu_bound is not None:
                        result.scheduler_cpu_to_bound = sched_cpu_bound - cpu0
                    if sim_cpu0 is not None and sim_cpu1 is not None:
                        result.sim_cpu = sim_cpu1 - sim_cpu0
                    if sim_cpu0 is not None and sim_cpu_bound is not None:
                        result.sim_cpu_to_bound = sim_cpu_bound - sim_cpu0
                    result.retries = api.retries
                    if sched is not None:
                        result.scheduler_rss = rss_bytes(sched.pid)
                        result.first_cycle = _first_cycle(Path(workdir) / "scheduler.log")
                        with contextlib.suppress(aiohttp.ClientError, OSError):
                            await _scrape(sched.base, result)
                    if cycles is not None:
                        result.cycle_seconds = await cycles.stop()

            asyncio.run(go())
            if profiler is not None:
                result.profile = str(profiler.path)
                result.profile_top = profiler.stop()
                profiler = None
        except BaseException:
            log = Path(workdir) / "scheduler.log"
            if (sched is not None or ceiling is not None) and log.exists():
                print(log.read_text()[-3000:])
            raise
        finally:
            if profiler is not None:
                profiler.stop()
            if sched is not None:
                sched.stop()
            _stop(ceiling)
            _stop(burner)
            sim.stop()
    return result


#: what keeps a core busy beside the binder's ``busy_core`` run: no request, no I/O
BUSY_LOOP = "while True:\n    pass"


def _stop(proc: subprocess.Popen[bytes] | None) -> None:
    if proc is not None and proc.poll() is None:
        proc.kill()
        proc.wait()


def run(args: argparse.Namespace) -> int:
    runs(args)
    return 0


def runs(args: argparse.Namespace) -> list[E2EResult]:
    """Every run `bench e2e` makes with these flags, printed as it ends and returned in order."""
    nodes = int(getattr(args, "nodes", 1000))
    pods = int(getattr(args, "pods", 5000))
    gang = int(getattr(args, "gang_size", 10))
    shape = getattr(args, "shape", "both") or "both"
    shapes = list(SHAPES) if shape == "both" else [shape]
    repeat = max(1, int(getattr(args, "repeat", 1) or 1))
    profile = getattr(args, "profile", None)
    period = getattr(args, "period", None) or os.environ.get("CALDERA_BENCH_PERIOD") or "100ms"
    rate = float(getattr(args, "rate", None) or os.environ.get("CALDERA_BENCH_RATE") or 0)
    topology = bool(getattr(args, "topology", False))
    ceiling = bool(getattr(args, "ceiling", False))
    dra = bool(getattr(args, "dra", False))
    if topology and gang <= 1:
        raise SystemExit("bench e2e: --topology places gangs: --gang-size must be at least 2")
    if ceiling and "backlog" not in shapes:
        raise SystemExit("bench e2e: --ceiling compares the backlog shape (the binder lists the pods once)")
    if ceiling and dra:
        raise SystemExit("bench e2e: --ceiling with --dra: the decision-free binder allocates no claims")
    print(
        f"caldera-sim bench e2e: {pods} pods, gang size {gang}, {nodes} nodes, shapes {', '.join(shapes)},"
        f" {repeat} run(s) each"
        + (", HyperNode tree and networkTopology" if topology else "")
        + (", each backlog run against the binding ceiling" if ceiling else ""),
        flush=True,
    )
    sizes: list[int] = [gang] if gang > 1 else [1]
    if os.environ.get("CALDERA_BENCH_BOTH") == "1" and gang > 1 and not topology:
        sizes.append(1)
    summary: dict[str, list[float]] = {}
    results: list[E2EResult] = []
    for size in sizes:
        for sh in shapes:
            for i in range(repeat):
                path = None
                if profile:
                    base = Path(profile)
                    path = str(base.with_name(f"{base.stem}-{sh}-{i + 1}{base.suffix or '.txt'}"))
                res = bench(
                    nodes,
                    pods,
                    size,
                    period=period,
                    shape=sh,
                    profile=path,
                    rate=rate,
                    topology=topology,
                    dra=dra,
                )
                if ceiling and sh == "backlog":
                    print(res.report(), flush=True)
                    res.ceiling = bench(
                        nodes, pods, size, period=period, shape=sh, topology=topology, binder="ceiling"
                    )
                    print(res.ceiling.report(), flush=True)
                    res.busy_ceiling = bench(
                        nodes,
                        pods,
                        size,
                        period=period,
                        shape=sh,
                        topology=topology,
                        binder="ceiling",
                        busy_core=True,
                    )
                    print(res.busy_ceiling.report(), flush=True)
                    print(f"caldera against the binding ceiling (backlog):\n{res.ceiling_line()}", flush=True)
                else:
                    print(res.report(), flush=True)
                results.append(res)
                if dra:  # the same run without claims, for comparison
                    plain = bench(nodes, pods, size, period=period, shape=sh, rate=rate, topology=topology)
                    print(plain.report(), flush=True)
                    print(bench_e2e_dra.comparison(res, plain), flush=True)
                if res.cpu_ms_per_pod is not None:
                    summary.setdefault(
                        f"{sh}, {'gangs of ' + str(size) if size > 1 else 'single pods'}", []
                    ).append(res.cpu_ms_per_pod)
    if repeat > 1 or len(summary) > 1:
        print("summary: scheduler CPU per bound pod (ms), per run")
        for key, values in summary.items():
            print(f"  {key}: " + ", ".join(f"{v:.3f}" for v in values) + f" (max {max(values):.3f})")
    return results
