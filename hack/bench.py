"""`caldera-sim bench`: benchmarks that print figures (no pass/fail).

    caldera-sim bench core      # the scheduling core in process, no API server
    caldera-sim bench e2e       # end to end through caldera-sim (pods created -> bound)
    caldera-sim bench http      # the binder's writes: cache/http1.py's pool against aiohttp
    caldera-sim bench report    # runs them and writes docs/performance.md (hack/bench_report.py)

The core benchmark drives the real cache, session, actions and plugins with the conf in force
(Volcano's default unless --conf), binding into a recording binder.
"""

from __future__ import annotations

import argparse
import gc
import resource
import statistics
import time
import tracemalloc
from dataclasses import dataclass, field
from typing import Any

import msgspec

from caldera.cache.store import ClusterCache
from caldera.config.conf import DEFAULT_CONF, parse_conf
from caldera.framework.objects import Pod, PodGroup
from caldera.framework.result import SessionResult
from caldera.framework.snapshot import Snapshot
from caldera.hack.scenario import gang, node
from caldera.hack.stats import percentile
from caldera.scheduler.loop import RecordingBinder, SchedulerLoop
from caldera.scheduler.registry import builtin_registry

TOPOLOGY_CONF = """
actions: "enqueue, allocate, backfill"
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
  - name: network-topology-aware
    arguments:
      topologyKeys: [bench/group]
      defaultMode: hard
"""


@dataclass
class Figure:
    """One figure of `bench core`, as data: the row it is (``title``), what was measured as printed
    after the title (``measured``), and the numbers themselves (``values``, seconds and bytes as
    measured, counts as counted) for whoever reads them programmatically (`bench report`)."""

    title: str
    measured: str
    values: dict[str, float] = field(default_factory=dict)

    def line(self) -> str:
        return f"{self.title}: {self.measured}"

    def show(self) -> Figure:
        print(self.line(), flush=True)
        return self


def cpu_time() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


#: Pod templates the benchmarks cycle through, as a real mix has them: request shapes, and some
#: with a node selector (every node carries a ``bench/zone`` label, four zones).
TEMPLATES: list[dict[str, Any]] = [
    {"cpu": "1", "memory": "2Gi"},
    {"cpu": "500m", "memory": "1Gi"},
    {"cpu": "2", "memory": "4Gi"},
    {"cpu": "250m", "memory": "512Mi", "node_selector": {"bench/zone": "z1"}},
    {"cpu": "1", "memory": "8Gi"},
    {"cpu": "100m", "memory": "128Mi", "node_selector": {"bench/zone": "z2"}},
]


ZONE = "topology.kubernetes.io/zone"
ZONES = 10


def make_cache(nodes: int, groups: int = 0, zones: int = 0) -> ClusterCache:
    cache = ClusterCache()
    for i in range(nodes):
        labels = {"bench/zone": f"z{i % 4}"}
        if groups:
            labels["bench/group"] = f"g{i * groups // nodes:03d}"
        if zones:
            labels[ZONE] = f"zone-{i % zones}"
            labels["kubernetes.io/hostname"] = f"node-{i:05d}"
        cache.upsert_node(node(f"node-{i:05d}", cpu="32", memory="128Gi", pods="110", labels=labels))
    return cache


def spread_constraints(app: str) -> dict[str, Any]:
    """What a spread workload carries: its pods evenly over zones (hard) and hosts (soft)."""
    selector = {"matchLabels": {"app": app}}
    return {
        "topologySpreadConstraints": [
            {
                "maxSkew": 1,
                "topologyKey": ZONE,
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": selector,
            },
            {
                "maxSkew": 1,
                "topologyKey": "kubernetes.io/hostname",
                "whenUnsatisfiable": "ScheduleAnyway",
                "labelSelector": selector,
            },
        ]
    }


def make_jobs(
    count: int,
    size: int,
    cpu: str = "",
    memory: str = "",
    prefix: str = "job",
    start: int = 0,
    spread: int = 0,
) -> list[tuple[PodGroup, list[Pod]]]:
    """Gangs of ``size``; each takes the next of TEMPLATES unless cpu/memory are given. ``spread``
    percent of them carry topology spread constraints (single pods in workloads of 20, a gang as one
    workload)."""
    out = []
    for j in range(start, start + count):
        name = f"{prefix}-{j:06d}"
        template: dict[str, Any] = dict(TEMPLATES[j % len(TEMPLATES)])
        if cpu:
            template = {"cpu": cpu, "memory": memory or "2Gi"}
        if spread and (j % 100) < spread:
            app = f"{prefix}-app-{j // 20:05d}" if size == 1 else name
            template.update(labels={"app": app}, spec_extra=spread_constraints(app))
        out.append(gang(name, size, **template))
    return out


def load_jobs(cache: ClusterCache, jobs: list[tuple[PodGroup, list[Pod]]]) -> int:
    n = 0
    for pg, pods in jobs:
        cache.upsert_podgroup(pg)
        for p in pods:
            cache.upsert_pod(p)
            n += 1
    return n


def drain(
    loop: SchedulerLoop, binder: RecordingBinder, want: int, max_cycles: int = 200
) -> tuple[float, float, list[float]]:
    """Run cycles until ``want`` pods are bound; (wall seconds, cpu seconds, per-cycle seconds)."""
    cycles: list[float] = []
    gc.collect()
    wall0, cpu0 = time.perf_counter(), cpu_time()
    for _ in range(max_cycles):
        t = time.perf_counter()
        loop.run_once()
        cycles.append(time.perf_counter() - t)
        if len(binder.placements) >= want:
            break
    return time.perf_counter() - wall0, cpu_time() - cpu0, cycles


def run_scenario(
    title: str, conf_text: str, nodes: int, jobs: int, size: int, groups: int = 0, spread: int = -1
) -> Figure:
    """``spread`` >= 0: nodes carry zone labels and that percentage of the jobs spread constraints
    (with the request shapes of the first template, so the two runs differ only by the constraints)."""
    registry = builtin_registry()
    conf = parse_conf(conf_text, registry)
    cache = make_cache(nodes, groups, zones=ZONES if spread >= 0 else 0)
    shape = {"cpu": "1", "memory": "2Gi"} if spread >= 0 else {}
    want = load_jobs(cache, make_jobs(jobs, size, spread=max(spread, 0), **shape))
    binder = RecordingBinder()
    loop = SchedulerLoop(cache, lambda: conf, registry, binder)
    wall, cpu, cycles = drain(loop, binder, want)
    bound = len(binder.placements)
    rate = bound / wall if wall else 0.0
    return Figure(
        title,
        f"{bound}/{want} pods bound in {wall:.2f}s over {len(cycles)} cycles:"
        f" {rate:.0f} pods/s, {cpu / max(bound, 1) * 1e3:.3f} ms CPU/pod",
        {"bound": bound, "want": want, "wall": wall, "cpu": cpu, "cycles": len(cycles), "rate": rate},
    ).show()


def rss() -> int:
    """This process's resident set (bytes), from /proc (0 where there is none)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def steady_cycles(nodes: int, cycles: int, arrivals: int, size: int, lifetime: int) -> Figure:
    """``cycles`` cycles of a running cluster: each period ``arrivals`` new gangs of ``size`` (the
    templates in turn) arrive, what the last cycle placed is confirmed bound (as the watch would),
    and gangs placed ``lifetime`` cycles ago finish (their pods are deleted)."""
    from caldera.scheduler.memory import CollectorPolicy

    registry = builtin_registry()
    conf = parse_conf(DEFAULT_CONF, registry)
    cache = make_cache(nodes)
    binder = RecordingBinder()
    # The collector as the binary runs it (scheduler/memory.py): its thresholds, everything alive
    # frozen after each cycle (in the cycle's time), as the pending-pods figure below does too.
    saved_threshold = gc.get_threshold()
    policy = CollectorPolicy()
    policy.start()
    loop = SchedulerLoop(
        cache, lambda: conf, registry, binder, on_cycle=lambda result, seconds, error: policy.after_cycle()
    )
    placed_at: list[list[Pod]] = []
    by_uid: dict[str, Pod] = {}
    walls: list[float] = []
    cpus: list[float] = []
    snapshots: list[float] = []
    seen = 0
    gc.collect()
    for c in range(cycles):
        for pg, pods in make_jobs(arrivals, size, prefix=f"c{c:04d}", start=c * arrivals):
            cache.upsert_podgroup(pg)
            for p in pods:
                cache.upsert_pod(p)
                by_uid[p.metadata.uid] = p
        if len(placed_at) > lifetime:
            for p in placed_at.pop(0):
                cache.delete_pod(p)
        t, cpu = time.perf_counter(), cpu_time()
        loop.run_once()
        walls.append(time.perf_counter() - t)
        cpus.append(cpu_time() - cpu)
        snapshots.append(cache.stats.snapshots)
        fresh = binder.placements[seen:]
        seen = len(binder.placements)
        for placement in fresh:
            cache.confirm_bound(placement.task.uid)
        placed_at.append([by_uid[p.task.uid] for p in fresh])
    gc.unfreeze()
    gc.set_threshold(*saved_threshold)
    placed = len(binder.placements)
    p50, p90, p99 = (percentile(walls, p) for p in (50, 90, 99))
    return Figure(
        f"steady state, {nodes} nodes, {arrivals} gangs of {size} arriving per cycle ({len(TEMPLATES)}"
        f" templates), finishing after {lifetime} cycles",
        f"{cycles} cycles, {placed} pods placed;"
        f" cycle p50 {p50 * 1e3:.1f} ms, p90 {p90 * 1e3:.1f} ms,"
        f" p99 {p99 * 1e3:.1f} ms, max {max(walls) * 1e3:.1f} ms;"
        f" {sum(cpus) / max(placed, 1) * 1e3:.3f} ms CPU per placed pod"
        f" (copied per cycle: {cache.stats.copied_nodes / cycles:.0f} nodes,"
        f" {cache.stats.copied_jobs / cycles:.0f} jobs; reused {cache.stats.reused_nodes / cycles:.0f},"
        f" {cache.stats.reused_jobs / cycles:.0f})",
        {
            "cycles": cycles,
            "placed": placed,
            "p50": p50,
            "p90": p90,
            "p99": p99,
            "max": max(walls),
            "cpu_per_placed": sum(cpus) / max(placed, 1),
            "copied_nodes": cache.stats.copied_nodes / cycles,
            "copied_jobs": cache.stats.copied_jobs / cycles,
        },
    ).show()


def handed_back(cache: ClusterCache, snapshot: Snapshot) -> Snapshot:
    """What the loop does with each snapshot: its session's result applied (here one that changed
    nothing), so that the cache may use its copies again (a snapshot never handed back is copied
    afresh the next time its set of copies is used, as after a failed cycle)."""
    cache.apply(SessionResult(seq=snapshot.seq))
    return snapshot


def snapshot_cost(nodes: int, jobs: int, size: int, changed: int) -> Figure:
    """The snapshot alone: every object copied (a cold start), then with ``changed`` jobs and nodes
    changed since the slot was last used (a pod bound on each)."""
    cache = make_cache(nodes)
    load_jobs(cache, make_jobs(jobs, size))
    cold: list[float] = []
    for _ in range(3):
        cache.reset_copies()
        t = time.perf_counter()
        snap = cache.snapshot()
        cold.append(time.perf_counter() - t)
        handed_back(cache, snap)
    handed_back(cache, cache.snapshot())
    warm: list[float] = []
    # the jobs and nodes as a snapshot shows them (the cache read through its public API)
    copies = list(handed_back(cache, cache.snapshot()).jobs.values())
    names = list(cache.node_infos())
    for i in range(20):
        for k in range(changed):
            job = copies[(i * changed + k) % len(copies)]
            task = next(iter(job.tasks.values()))
            cache.upsert_pod(
                msgspec.structs.replace(
                    task.pod,
                    spec=msgspec.structs.replace(
                        task.pod.spec, node_name=names[(i * changed + k) % len(names)]
                    ),
                )
            )
        t = time.perf_counter()
        snap = cache.snapshot()
        warm.append(time.perf_counter() - t)
        handed_back(cache, snap)
    return Figure(
        f"snapshot, {nodes} nodes, {jobs * size} tasks",
        f"every object copied {min(cold) * 1e3:.1f} ms;"
        f" {changed} jobs and nodes changed since: p50 {percentile(warm, 50) * 1e3:.2f} ms,"
        f" max {max(warm) * 1e3:.2f} ms",
        {"copied": min(cold), "changed_p50": percentile(warm, 50), "changed_max": max(warm)},
    ).show()


def cycle_latency(
    nodes: int, pending: int, repeats: int, profile: str | None = None, arrivals: int = 0
) -> Figure:
    """A cluster whose every node is taken by pods of another scheduler, ``pending`` tasks waiting:
    the memory that takes and how long a cycle over them (nothing fits) lasts. The first two cycles
    copy everything (one set of copies each, see cache/store.py); the rest are the steady state.
    ``profile``: cProfile the steady cycles into that file (pstats format). ``arrivals``: gangs
    of 10 more pending pods created before each measured cycle (they cannot fit either)."""
    registry = builtin_registry()
    conf = parse_conf(DEFAULT_CONF, registry)
    from caldera.hack.scenario import pod
    from caldera.scheduler.memory import CollectorPolicy

    # The collector as the scheduler runs it (scheduler/memory.py, as scheduler/app.py drives it):
    # its thresholds from the start, what is alive frozen after each cycle (in the cycle's time).
    saved_threshold = gc.get_threshold()
    policy = CollectorPolicy()
    policy.start()
    gc.collect()
    tracemalloc.start()
    cache = make_cache(nodes)
    for i in range(nodes):
        cache.upsert_pod(
            pod(
                f"filler-{i}",
                cpu="32",
                memory="1Gi",
                scheduler="default-scheduler",
                node_name=f"node-{i:05d}",
                phase="Running",
            )
        )
    with_nodes, _ = tracemalloc.get_traced_memory()
    load_jobs(cache, make_jobs(pending // 10, 10))
    with_pods, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    binder = RecordingBinder()
    loop = SchedulerLoop(
        cache, lambda: conf, registry, binder, on_cycle=lambda result, seconds, error: policy.after_cycle()
    )
    collecting = [0.0, 0.0]

    def timed(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            collecting[1] = time.perf_counter()
        else:
            collecting[0] += time.perf_counter() - collecting[1]

    cycles: list[float] = []
    #: the process's CPU seconds per cycle: what a cycle costs, whatever else the machine runs
    cpu: list[float] = []
    phases: dict[str, list[float]] = {}
    profiler = None
    for i in range(2 + max(3, repeats)):
        if i == 2:
            gc.callbacks.append(timed)
        if i == 2 and profile:
            import cProfile

            profiler = cProfile.Profile()
            profiler.enable()
        if i >= 2 and arrivals:
            load_jobs(cache, make_jobs(arrivals, 10, prefix=f"late{i:04d}"))
        t, c = time.perf_counter(), time.process_time()
        result = loop.run_once()
        cycles.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
        if i >= 2 and result is not None:
            report = result.report
            for name, seconds in (
                ("open", report.open_session_seconds or 0.0),
                *report.action_seconds.items(),
                ("explain", loop.stats.explain_seconds),
            ):
                phases.setdefault(name, []).append(seconds)
    gc.callbacks.remove(timed)
    if profiler is not None:
        profiler.disable()
        profiler.dump_stats(profile)
    gc.unfreeze()
    gc.set_threshold(*saved_threshold)
    cold, steady = cycles[:2], cycles[2:]
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    split = ", ".join(f"{name} {statistics.median(v) * 1e3:.0f}" for name, v in phases.items())
    late = f" (and {arrivals * 10} more arriving before each measured cycle)" if arrivals else ""
    now = rss()
    return Figure(
        f"{pending} pending pods{late} on {nodes} full nodes",
        f"process RSS {now / 2**20:.0f} MiB"
        f" (peak {peak / 2**20:.0f} MiB);"
        f" traced memory {with_nodes / nodes * 1000 / 2**20:.1f} MiB per 1,000 nodes (each with one pod),"
        f" {(with_pods - with_nodes) / pending * 10_000 / 2**20:.1f} MiB per 10,000 pods in the cache;"
        f" first two cycles (everything copied) {cold[0]:.2f} s, {cold[1]:.2f} s; then over"
        f" {len(steady)} cycles p50 {statistics.median(steady) * 1e3:.0f} ms,"
        f" p99 {percentile(steady, 99) * 1e3:.0f} ms, max {max(steady) * 1e3:.0f} ms"
        f" (CPU per cycle p50 {statistics.median(cpu[2:]) * 1e3:.0f} ms,"
        f" p99 {percentile(cpu[2:], 99) * 1e3:.0f} ms)"
        f" (p50 per phase, ms: {split}; {collecting[0]:.2f} s in the garbage collector over those"
        f" cycles, set as the scheduler sets it)",
        {
            "rss": now,
            "peak_rss": peak,
            "cold_first": cold[0],
            "cold_second": cold[1],
            "cycles": len(steady),
            "p50": statistics.median(steady),
            "p99": percentile(steady, 99),
            "max": max(steady),
            "gc": collecting[0],
        },
    ).show()


def run_spread(args: argparse.Namespace) -> int:
    """The same workloads on the same zoned nodes, without and with topology spread constraints on
    ``--spread`` percent of the jobs; prints both and their ratio (CPU per bound pod)."""
    n = args.nodes
    print(f"caldera core benchmark, topology spread: {n} nodes of 32 cpu / 128Gi in {ZONES} zones")
    for title, jobs, size in (
        (f"{args.single} single pods", args.single, 1),
        (f"{args.gangs} gangs of {args.gang_size}", args.gangs, args.gang_size),
    ):
        base = run_scenario(f"{title}, no spread constraints", DEFAULT_CONF, n, jobs, size, spread=0)
        with_spread = run_scenario(
            f"{title}, {args.spread}% with spread constraints",
            DEFAULT_CONF,
            n,
            jobs,
            size,
            spread=args.spread,
        )
        per_pod = [r.values["cpu"] / max(r.values["bound"], 1) for r in (base, with_spread)]
        print(
            f"  {title}: CPU per bound pod with spread / without = {per_pod[1] / max(per_pod[0], 1e-12):.2f}x"
        )
    return 0


#: cycles the loop-stall figure runs (the first copies everything)
STALL_CYCLES = 6


def run_core(args: argparse.Namespace) -> int:
    if args.spread:
        return run_spread(args)
    core_figures(args)
    return 0


def core_figures(args: argparse.Namespace) -> dict[str, Figure]:
    """Every figure of `bench core` (as its flags choose, --spread aside), printed and returned by name."""
    n = args.nodes
    if args.topology:
        from caldera.hack.bench_hypernodes import run_topology

        figures: dict[str, Figure] = {}
        for plains, awares in run_topology(n, args.topology_repeat):
            ratios = [a.cpu_per_pod / max(p.cpu_per_pod, 1e-9) for p, a in zip(plains, awares, strict=True)]
            per_run = "; ".join(
                f"{a.cpu_per_pod * 1e3:.3f} / {p.cpu_per_pod * 1e3:.3f} ms = {r:.2f}x"
                for p, a, r in zip(plains, awares, ratios, strict=True)
            )
            title = f"{awares[0].title}: CPU per placed pod with / without topology, run by run"
            figures[f"topology {awares[0].title}"] = Figure(
                title, per_run, {f"ratio_{i}": r for i, r in enumerate(ratios)}
            )
        return figures
    if args.dra:
        from caldera.hack.bench_dra import run_dra

        run_dra(n, args.gangs, args.gang_size)
        return {}
    if args.only == "pending":
        return {
            "pending": cycle_latency(
                n, args.pending, args.repeats, profile=args.profile, arrivals=args.pending_arrivals
            ),
            "stall": stall_figure(n, args.pending, args.stall_in_thread),
        }
    if args.only == "stall":
        return {"stall": stall_figure(n, args.pending, args.stall_in_thread)}
    figures: dict[str, Figure] = {}
    print(
        f"caldera core benchmark: {n} nodes of 32 cpu / 128Gi, in process, recording binder,"
        f" {len(TEMPLATES)} pod templates in turn"
    )
    figures["single"] = run_scenario(
        f"{args.single} single pods (default conf)", DEFAULT_CONF, n, args.single, 1
    )
    figures["gangs"] = run_scenario(
        f"{args.gangs} gangs of {args.gang_size} (default conf)", DEFAULT_CONF, n, args.gangs, args.gang_size
    )
    if "network-topology-aware" in builtin_registry().plugins:
        figures["topology"] = run_scenario(
            f"{args.gangs} gangs of {args.gang_size} (topology, {args.groups} groups)",
            TOPOLOGY_CONF,
            n,
            args.gangs,
            args.gang_size,
            groups=args.groups,
        )
    else:
        print("topology allocate: plugin network-topology-aware not available in this build")
    figures["steady"] = steady_cycles(n, args.cycles, args.arrivals, args.gang_size, args.lifetime)
    figures["snapshot"] = snapshot_cost(n, args.pending // args.gang_size, args.gang_size, changed=50)
    figures["pending"] = cycle_latency(n, args.pending, args.repeats)
    figures["stall"] = stall_figure(n, args.pending, args.stall_in_thread)
    return figures


def stall_figure(nodes: int, pending: int, in_thread: bool) -> Figure:
    """The event loop's longest stall while cycles run over ``pending`` pods (hack/bench_stall.py),
    printed; with ``in_thread`` also the same with the snapshot made whole in the decision's thread."""
    from caldera.hack.bench_stall import run_stall

    stall = run_stall(nodes, pending, STALL_CYCLES)
    figure = Figure(
        f"event loop stall, {pending} pending pods on {nodes} full nodes",
        stall.line("snapshot made on the loop in steps"),
        {"longest": stall.longest, "p99": stall.p99, "p50": stall.p50},
    ).show()
    if in_thread:
        before = run_stall(nodes, pending, STALL_CYCLES, in_thread=True)
        Figure(
            f"event loop stall, {pending} pending pods on {nodes} full nodes (as before)",
            before.line("snapshot made whole in the decision's thread"),
        ).show()
    return figure


def run_e2e(args: argparse.Namespace) -> int:
    from caldera.hack.bench_e2e import run as run_e2e_bench

    return run_e2e_bench(args)


def run_http(args: argparse.Namespace) -> int:
    from caldera.hack.bench_http import run as run_http_bench

    return run_http_bench(args)


def register(subparsers: Any) -> None:
    p: argparse.ArgumentParser = subparsers.add_parser("bench", help="benchmarks that print figures")
    sub = p.add_subparsers(dest="bench", required=True, metavar="BENCH")
    core = sub.add_parser("core", help="the scheduling core in process (no API server)")
    core.add_argument("--nodes", type=int, default=5000)
    core.add_argument("--single", type=int, default=10_000)
    core.add_argument("--gangs", type=int, default=1000)
    core.add_argument("--gang-size", type=int, default=8)
    core.add_argument("--groups", type=int, default=100)
    core.add_argument(
        "--pending",
        type=int,
        default=20_000,
        help="pending pods for the memory and full-cluster cycle figures",
    )
    core.add_argument(
        "--repeats",
        type=int,
        default=100,
        help="measured cycles over the pending pods (p50/p99; default 100)",
    )
    core.add_argument("--cycles", type=int, default=120, help="steady-state cycles (percentiles over them)")
    core.add_argument("--arrivals", type=int, default=20, help="steady state: gangs arriving per cycle")
    core.add_argument("--lifetime", type=int, default=30, help="steady state: cycles a placed gang runs")
    core.add_argument(
        "--spread",
        type=int,
        default=0,
        metavar="PCT",
        help="compare the figures without and with topology spread constraints on PCT%% of the jobs",
    )
    core.add_argument(
        "--only",
        choices=("pending", "stall"),
        default=None,
        help="run one figure only: pending = the memory and cycle over --pending pods on full nodes (and the loop stall); stall = the event loop's longest stall while cycles run over them",
    )
    core.add_argument(
        "--topology",
        action="store_true",
        help="topology-aware gangs of 8, 32 and 128 over a three-tier HyperNode tree, against the same"
        " gangs without topology (hack/bench_hypernodes.py)",
    )
    core.add_argument(
        "--dra",
        action="store_true",
        help="gangs whose pods each claim one device (nodes of 8 devices), against the same gangs without"
        " claims (hack/bench_dra.py)",
    )
    core.add_argument(
        "--topology-repeat", type=int, default=3, help="with --topology: runs of each shape (default 3)"
    )
    core.add_argument(
        "--stall-in-thread",
        action="store_true",
        help="also measure the loop's stall with the snapshot made whole in the decision's thread (as before)",
    )
    core.add_argument(
        "--pending-arrivals",
        type=int,
        default=0,
        metavar="GANGS",
        help="with --only pending: gangs of 10 pending pods created before each measured cycle",
    )
    core.add_argument(
        "--profile",
        default=None,
        metavar="PATH",
        help="with --only pending: cProfile the measured cycles (not the first two) into PATH (pstats)",
    )
    core.set_defaults(func=run_core)
    e2e = sub.add_parser("e2e", help="end to end through caldera-sim: creation to bound")
    e2e.add_argument("--nodes", type=int, default=1000)
    e2e.add_argument("--pods", type=int, default=5000)
    e2e.add_argument("--gang-size", type=int, default=10)
    e2e.add_argument("--period", default=None, help="the scheduler's --schedule-period (default 100ms)")
    e2e.add_argument(
        "--rate",
        type=float,
        default=None,
        help="stream: pods created per second (default: as fast as possible)",
    )
    e2e.add_argument(
        "--shape",
        choices=("backlog", "stream", "both"),
        default="both",
        help="backlog: everything created first, then the scheduler starts; stream: created while it"
        " schedules (default: both)",
    )
    e2e.add_argument("--repeat", type=int, default=1, help="runs of each shape (default 1)")
    e2e.add_argument(
        "--topology",
        action="store_true",
        help="HyperNode tree created with the nodes (leaves of 8, 16 leaves a spine, one root), PodGroups"
        " with networkTopology hard tier 1, network-topology-aware in the conf; checks every gang sits in"
        " one leaf",
    )
    e2e.add_argument(
        "--ceiling",
        action="store_true",
        help="after each backlog run, bind the same workload with a decision-free binder (64 in flight, its"
        " own process) and print Caldera's pods/s as a fraction of its; then again with one core held busy"
        " beside the binder by a process that makes no request",
    )
    e2e.add_argument(
        "--profile",
        default=None,
        metavar="PATH",
        help="attach py-spy to the scheduler and write folded stacks to PATH-SHAPE-N.txt (needs py-spy)",
    )
    e2e.add_argument(
        "--dra",
        action="store_true",
        help="every node publishes 8 GPUs (a ResourceSlice), each pod claims one through a"
        " ResourceClaimTemplate; then the same run without claims (hack/bench_e2e_dra.py)",
    )
    e2e.set_defaults(func=run_e2e)
    http = sub.add_parser("http", help="the binder's writes: cache/http1.py's pool against aiohttp")
    http.add_argument("--binds", type=int, default=5000, help="measured binds per arm and repeat")
    http.add_argument("--concurrency", type=int, default=16, help="binds in flight (the binder's workers)")
    http.add_argument("--repeat", type=int, default=3, help="runs of each arm, their order alternating")
    http.set_defaults(func=run_http)
    from caldera.hack.bench_report import add_parser as add_report

    add_report(sub)
