"""Micro-benchmark of the scheduling core's fixed costs: snapshot, statement operations, and bulk
feasibility, at cluster scale. Prints figures; asserts nothing.

    python -m caldera.hack.bench_core --nodes 5000 --jobs 2500 --gang 8
"""

from __future__ import annotations

import argparse
import time
import tracemalloc

import msgspec
import numpy as np

from caldera.cache.store import ClusterCache
from caldera.framework.model import TaskStatus
from caldera.framework.session import Session
from caldera.hack.bench import Figure, handed_back
from caldera.hack.scenario import gang, node


def build(nodes: int, jobs: int, size: int) -> ClusterCache:
    cache = ClusterCache()
    for i in range(nodes):
        cache.upsert_node(node(f"node-{i:05d}", cpu="32", memory="128Gi", labels={"rack": f"r{i % 50}"}))
    for j in range(jobs):
        pg, pods = gang(f"job-{j:05d}", size, cpu="1", memory="2Gi")
        cache.upsert_podgroup(pg)
        for p in pods:
            cache.upsert_pod(p)
    return cache


def timeit(fn, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def parser() -> argparse.ArgumentParser:
    out = argparse.ArgumentParser(prog="python -m caldera.hack.bench_core", description=__doc__)
    out.add_argument("--nodes", type=int, default=5000)
    out.add_argument("--jobs", type=int, default=2500)
    out.add_argument("--gang", type=int, default=8)
    return out


def main(argv: list[str] | None = None) -> int:
    measure(parser().parse_args(argv))
    return 0


def measure(args: argparse.Namespace) -> list[Figure]:
    """Every figure, printed as it is taken and returned in order."""
    figures: list[Figure] = []
    t0 = time.perf_counter()
    tracemalloc.start()
    cache = build(args.nodes, args.jobs, args.gang)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    tasks = args.jobs * args.gang
    built = time.perf_counter() - t0
    figures.append(
        Figure(
            "cache built",
            f"{args.nodes} nodes, {args.jobs} jobs, {tasks} pending tasks in {built:.2f}s (traced memory"
            f" {peak / 2**20:.0f} MiB, {peak / max(tasks, 1) / 1024:.1f} KiB per task incl. nodes)",
            {"seconds": built, "traced_peak": peak},
        ).show()
    )

    handed_back(cache, cache.snapshot())
    fresh = timeit(lambda: (cache.reset_copies(), handed_back(cache, cache.snapshot())), 3)
    reused = timeit(lambda: handed_back(cache, cache.snapshot()), 5)
    figures.append(
        Figure("snapshot, everything copied", f"{fresh * 1e3:.1f} ms (best of 3)", {"seconds": fresh}).show()
    )
    figures.append(
        Figure("snapshot, nothing changed", f"{reused * 1e3:.1f} ms (best of 5)", {"seconds": reused}).show()
    )
    # the jobs and nodes as a snapshot shows them (the cache read through its public API)
    copies = list(handed_back(cache, cache.snapshot()).jobs.values())
    names = list(cache.node_infos())
    changed = []
    for i in range(10):
        for k in range(50):  # 50 pods bound: 50 jobs and 50 nodes changed
            job = copies[(i * 50 + k) % len(copies)]
            task = next(t for t in job.tasks.values() if t.status == TaskStatus.PENDING)
            spec = msgspec.structs.replace(task.pod.spec, node_name=names[(i * 50 + k) % len(names)])
            cache.upsert_pod(msgspec.structs.replace(task.pod, spec=spec))
        t = time.perf_counter()
        snap = cache.snapshot()
        changed.append(time.perf_counter() - t)
        handed_back(cache, snap)
    median = sorted(changed)[len(changed) // 2]
    figures.append(
        Figure(
            "snapshot, 50 jobs and nodes changed",
            f"{median * 1e3:.1f} ms (median of 10)",
            {"seconds": median},
        ).show()
    )

    snap = cache.snapshot()
    ssn = Session(snap, tiers=[])
    pending = [t for j in snap.jobs.values() for t in j.tasks_in(TaskStatus.PENDING)]
    names = [n.name for n in ssn.node_list]
    n_ops = min(20000, len(pending))
    stmt = ssn.statement()
    t = time.perf_counter()
    for i in range(n_ops):
        stmt.allocate(pending[i], names[i % len(names)])
    alloc = (time.perf_counter() - t) / n_ops
    t = time.perf_counter()
    stmt.discard()
    discard = (time.perf_counter() - t) / n_ops
    figures.append(
        Figure(
            "statement.allocate", f"{alloc * 1e6:.1f} us per task ({n_ops} tasks)", {"seconds": alloc}
        ).show()
    )
    figures.append(
        Figure(
            "statement.discard", f"{discard * 1e6:.1f} us per task ({n_ops} tasks)", {"seconds": discard}
        ).show()
    )

    table = ssn.table
    task = pending[0]
    cols, vals = table.request_vector(task.resreq)

    def fit() -> np.ndarray:
        return np.all(table.idle[:, cols] >= vals, axis=1)

    per = timeit(lambda: [fit() for _ in range(100)], 3) / 100
    figures.append(
        Figure(
            f"bulk resource fit over {table.rows} nodes", f"{per * 1e6:.1f} us per pod", {"seconds": per}
        ).show()
    )
    return figures


if __name__ == "__main__":
    raise SystemExit(main())
