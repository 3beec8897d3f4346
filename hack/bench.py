"""`caldera-sim bench`: benchmarks that print figures (no pass/fail).

    caldera-sim bench core      # the scheduling core in process, no API server
    caldera-sim bench e2e       # end to end through caldera-sim (pods created -> bound)

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
from typing import Any

from caldera.cache.store import ClusterCache
from caldera.config.conf import DEFAULT_CONF, parse_conf
from caldera.framework.objects import Pod, PodGroup
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


def cpu_time() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


ZONE = "topology.kubernetes.io/zone"
ZONES = 10


def make_cache(nodes: int, groups: int = 0, zones: int = 0) -> ClusterCache:
    cache = ClusterCache()
    for i in range(nodes):
        labels = {"bench/group": f"g{i * groups // nodes:03d}"} if groups else {}
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
    count: int, size: int, cpu: str = "1", memory: str = "2Gi", prefix: str = "job", spread: int = 0
) -> list[tuple[PodGroup, list[Pod]]]:
    """``count`` gangs of ``size``; ``spread`` percent of them carry topology spread constraints
    (single pods in workloads of 20, a gang as one workload)."""
    out = []
    for j in range(count):
        name = f"{prefix}-{j:06d}"
        if spread and (j % 100) < spread:
            app = f"{prefix}-app-{j // 20:05d}" if size == 1 else name
            out.append(
                gang(
                    name,
                    size,
                    cpu=cpu,
                    memory=memory,
                    labels={"app": app},
                    spec_extra=spread_constraints(app),
                )
            )
        else:
            out.append(gang(name, size, cpu=cpu, memory=memory))
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
) -> dict[str, Any]:
    """``spread`` >= 0: nodes carry zone labels and that percentage of the jobs spread constraints."""
    registry = builtin_registry()
    conf = parse_conf(conf_text, registry)
    cache = make_cache(nodes, groups, zones=ZONES if spread >= 0 else 0)
    want = load_jobs(cache, make_jobs(jobs, size, spread=max(spread, 0)))
    binder = RecordingBinder()
    loop = SchedulerLoop(cache, lambda: conf, registry, binder)
    wall, cpu, cycles = drain(loop, binder, want)
    bound = len(binder.placements)
    rate = bound / wall if wall else 0.0
    print(
        f"{title:<44} {bound:>6}/{want} pods bound in {wall:6.2f}s over {len(cycles)} cycles: "
        f"{rate:8.0f} pods/s, {cpu / max(bound, 1) * 1e3:.3f} ms CPU/pod"
    )
    return {"bound": bound, "wall": wall, "cpu": cpu, "cycles": cycles, "rate": rate}


def cycle_latency(nodes: int, pending: int, repeats: int) -> None:
    """Cycle latency while ``pending`` tasks wait: the placing cycle, then steady cycles with a full cluster."""
    registry = builtin_registry()
    conf = parse_conf(DEFAULT_CONF, registry)
    placing: list[float] = []
    for _ in range(repeats):
        cache = make_cache(nodes)
        load_jobs(cache, make_jobs(pending // 8, 8))
        binder = RecordingBinder()
        loop = SchedulerLoop(cache, lambda: conf, registry, binder)
        gc.collect()
        t = time.perf_counter()
        loop.run_once()
        placing.append(time.perf_counter() - t)
    # Full cluster: every node taken by pods of another scheduler, so the pending tasks stay pending.
    cache = make_cache(nodes)
    from caldera.hack.scenario import pod

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
    load_jobs(cache, make_jobs(pending // 8, 8))
    binder = RecordingBinder()
    loop = SchedulerLoop(cache, lambda: conf, registry, binder)
    steady = []
    for _ in range(max(5, repeats * 2)):
        t = time.perf_counter()
        loop.run_once()
        steady.append(time.perf_counter() - t)
    print(
        f"cycle latency, {pending} pending tasks on {nodes} nodes: placing cycle p50 {statistics.median(placing) * 1e3:.0f} ms "
        f"p99 {percentile(placing, 99) * 1e3:.0f} ms; cluster full (nothing fits) p50 {statistics.median(steady) * 1e3:.0f} ms "
        f"p99 {percentile(steady, 99) * 1e3:.0f} ms"
    )


def memory_per_pods(pods: int) -> None:
    gc.collect()
    tracemalloc.start()
    cache = make_cache(0)
    load_jobs(cache, make_jobs(pods // 10, 10))
    cache.snapshot()
    current, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(
        f"memory: {current / 2**20:.1f} MiB for {pods} pods in the cache plus one snapshot ({current / pods / 1024:.2f} KiB/pod)"
    )


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
        per_pod = [r["cpu"] / max(r["bound"], 1) for r in (base, with_spread)]
        print(
            f"  {title}: CPU per bound pod with spread / without = {per_pod[1] / max(per_pod[0], 1e-12):.2f}x"
        )
    return 0


def run_core(args: argparse.Namespace) -> int:
    if args.spread:
        return run_spread(args)
    n = args.nodes
    print(f"caldera core benchmark: {n} nodes of 32 cpu / 128Gi, in process, recording binder")
    run_scenario(f"{args.single} single pods (default conf)", DEFAULT_CONF, n, args.single, 1)
    run_scenario(
        f"{args.gangs} gangs of {args.gang_size} (default conf)", DEFAULT_CONF, n, args.gangs, args.gang_size
    )
    if "network-topology-aware" in builtin_registry().plugins:
        run_scenario(
            f"{args.gangs} gangs of {args.gang_size} (topology, {args.groups} groups)",
            TOPOLOGY_CONF,
            n,
            args.gangs,
            args.gang_size,
            groups=args.groups,
        )
    else:
        print("topology allocate: plugin network-topology-aware not available in this build")
    cycle_latency(n, args.pending, args.repeats)
    memory_per_pods(10_000)
    return 0


def run_e2e(args: argparse.Namespace) -> int:
    import os

    from caldera.hack.bench_e2e import run as run_e2e_bench

    if args.period:
        os.environ["CALDERA_BENCH_PERIOD"] = args.period
    if args.rate:
        os.environ["CALDERA_BENCH_RATE"] = str(args.rate)

    return run_e2e_bench(args)


def register(subparsers: Any) -> None:
    p: argparse.ArgumentParser = subparsers.add_parser("bench", help="benchmarks that print figures")
    sub = p.add_subparsers(dest="bench", required=True, metavar="BENCH")
    core = sub.add_parser("core", help="the scheduling core in process (no API server)")
    core.add_argument("--nodes", type=int, default=5000)
    core.add_argument("--single", type=int, default=10_000)
    core.add_argument("--gangs", type=int, default=1000)
    core.add_argument("--gang-size", type=int, default=8)
    core.add_argument("--groups", type=int, default=100)
    core.add_argument("--pending", type=int, default=20_000)
    core.add_argument("--repeats", type=int, default=3)
    core.add_argument(
        "--spread",
        type=int,
        default=0,
        metavar="PCT",
        help="compare the figures without and with topology spread constraints on PCT%% of the jobs",
    )
    core.set_defaults(func=run_core)
    e2e = sub.add_parser("e2e", help="end to end through caldera-sim: creation to bound")
    e2e.add_argument("--nodes", type=int, default=1000)
    e2e.add_argument("--pods", type=int, default=5000)
    e2e.add_argument("--gang-size", type=int, default=10)
    e2e.add_argument("--period", default=None, help="the scheduler's --schedule-period (default 100ms)")
    e2e.add_argument(
        "--rate", type=float, default=None, help="pods created per second (default: as fast as possible)"
    )
    e2e.set_defaults(func=run_e2e)
