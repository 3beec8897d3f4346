"""`caldera-sim bench e2e`: pods per second from creation to bound, end to end through caldera-sim.

Three processes: the simulated cluster, the real `caldera-scheduler`, and this driver. The driver creates
the PodGroups, then every pod as fast as the API server takes them (one keep-alive aiohttp session), and
watches the pods: a pod's latency is from the moment its create request was answered to the moment the
watch shows it bound. The scheduler's CPU time comes from its own accounting (/proc/PID/stat, utime+stime),
read when the first pod is created and when the last is seen bound. Figures only: no pass/fail.

Tunables besides the flags (environment): CALDERA_BENCH_PERIOD (schedule period, default 100ms),
CALDERA_BENCH_CONF (a conf file), CALDERA_BENCH_KUBELET_DELAY (default 0.5 s), CALDERA_BENCH_CONCURRENCY
(creates in flight, default 32), CALDERA_BENCH_RATE (pods created per second, to measure latency below
saturation; default 0 = as fast as possible), CALDERA_BENCH_BOTH=1 (also single pods without PodGroups).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import orjson

from caldera.hack.soak.procs import SchedulerProcess, SimProcess, cpu_seconds, rss_bytes
from caldera.hack.stats import percentile
from caldera.hack.workload.client import Api, podgroups_path, pods_path
from caldera.hack.workload.manifests import pod_manifest, podgroup_manifest

NAMESPACE = "bench-e2e"


@dataclass
class E2EResult:
    pods: int
    nodes: int
    gang_size: int
    period: str
    created_seconds: float = 0.0
    wall_seconds: float = 0.0  # first create sent -> last pod seen bound
    bound: int = 0
    latencies: list[float] = field(default_factory=list)
    scheduler_cpu: float | None = None
    sim_cpu: float | None = None
    scheduler_rss: int | None = None
    retries: int = 0
    rate_limit: float = 0.0  # pods created per second (0: as fast as the API server takes them)

    @property
    def rate(self) -> float:
        return self.bound / self.wall_seconds if self.wall_seconds else 0.0

    @property
    def cpu_ms_per_pod(self) -> float | None:
        if self.scheduler_cpu is None or not self.bound:
            return None
        return self.scheduler_cpu / self.bound * 1000

    def report(self) -> str:
        cpu = self.cpu_ms_per_pod
        lines = [
            f"e2e: {self.pods} pods ({'single pods' if self.gang_size <= 1 else f'gangs of {self.gang_size}'})"
            f" on {self.nodes} nodes, schedule period {self.period}"
            + (f", created at {self.rate_limit:g}/s" if self.rate_limit else ", created as fast as possible"),
            f"  created in {self.created_seconds:.2f}s ({self.pods / max(self.created_seconds, 1e-9):.0f}/s)",
            f"  bound: {self.bound}/{self.pods} in {self.wall_seconds:.2f}s = {self.rate:.0f} pods/s"
            " (first create -> last bound)",
            f"  creation-to-bound latency: p50={percentile(self.latencies, 50) * 1000:.0f}ms"
            f" p99={percentile(self.latencies, 99) * 1000:.0f}ms max={max(self.latencies or [0]) * 1000:.0f}ms",
        ]
        if cpu is not None and self.scheduler_cpu is not None:
            lines.append(
                f"  scheduler CPU: {self.scheduler_cpu:.2f}s = {cpu:.3f} ms per bound pod"
                f" (utime+stime of caldera-scheduler over the run)"
            )
        if self.sim_cpu is not None:
            lines.append(
                f"  caldera-sim CPU: {self.sim_cpu:.2f}s = {self.sim_cpu / max(1, self.bound) * 1000:.3f} ms per pod"
            )
        if self.scheduler_rss is not None:
            lines.append(f"  scheduler RSS at the end: {self.scheduler_rss / 2**20:.0f} MiB")
        if self.retries:
            lines.append(f"  driver retries (429/5xx/resets): {self.retries}")
        return "\n".join(lines)


async def _wait_ready(base: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    async with aiohttp.ClientSession() as http:
        while time.monotonic() < deadline:
            with contextlib.suppress(aiohttp.ClientError, OSError):
                async with http.get(base + "/readyz") as r:
                    if r.status == 200:
                        return
            await asyncio.sleep(0.1)
    raise RuntimeError("caldera-scheduler did not become ready")


async def drive(
    api: Api, result: E2EResult, sched: SchedulerProcess, sim: SimProcess, concurrency: int
) -> None:
    await api.create(
        "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
    )
    gang = result.gang_size
    groups = result.pods // gang if gang > 1 else 0
    names = [f"p-{i:06d}" for i in range(result.pods)]
    pods = []
    for i, name in enumerate(names):
        group = f"g-{i // gang:05d}" if gang > 1 else ""
        pods.append(
            orjson.dumps(
                pod_manifest(
                    name,
                    NAMESPACE,
                    workload="bench",
                    group=group,
                    requests={"cpu": "100m", "memory": "128Mi"},
                )
            )
        )
    _, rv = await api.list(pods_path(NAMESPACE), limit="1")
    created: dict[str, float] = {}
    bound_at: dict[str, float] = {}
    done = asyncio.Event()

    async def watch() -> None:
        nonlocal rv
        while not done.is_set():
            url = f"{api.url}{pods_path(NAMESPACE)}?watch=1&allowWatchBookmarks=true&resourceVersion={rv}"
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
                        rv = obj["metadata"].get("resourceVersion", rv)
                        if ev["type"] == "BOOKMARK":
                            continue
                        name = obj["metadata"]["name"]
                        if obj["spec"].get("nodeName") and name not in bound_at:
                            bound_at[name] = now
                            if len(bound_at) >= result.pods:
                                done.set()
                                return
            except (TimeoutError, aiohttp.ClientError):
                await asyncio.sleep(0.05)

    watcher = asyncio.create_task(watch())
    await asyncio.sleep(0.2)
    for g in range(groups):
        await api.create(
            podgroups_path(NAMESPACE), podgroup_manifest(f"g-{g:05d}", NAMESPACE, gang, workload="bench")
        )
    queue: asyncio.Queue[int] = asyncio.Queue()
    for i in range(result.pods):
        queue.put_nowait(i)
    path = api.url + pods_path(NAMESPACE)

    async def creator() -> None:
        while not queue.empty():
            i = queue.get_nowait()
            if rate:  # paced: pod i is due at t0 + i/rate
                delay = t0 + i / rate - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
            for _attempt in range(20):
                async with api.session.post(
                    path, data=pods[i], headers={"Content-Type": "application/json"}
                ) as r:
                    await r.read()
                    if r.status in (201, 409):
                        created.setdefault(names[i], time.monotonic())
                        break
                    api.retries += 1
                await asyncio.sleep(0.05)

    rate = result.rate_limit
    cpu0 = cpu_seconds(sched.pid)
    sim_cpu0 = cpu_seconds(sim.pid)
    t0 = time.monotonic()
    await asyncio.gather(*(creator() for _ in range(concurrency)))
    result.created_seconds = time.monotonic() - t0
    with contextlib.suppress(asyncio.TimeoutError):
        await asyncio.wait_for(done.wait(), timeout=max(60.0, result.pods / 100))
    t_end = max(bound_at.values()) if bound_at else time.monotonic()
    cpu1 = cpu_seconds(sched.pid)
    sim_cpu1 = cpu_seconds(sim.pid)
    watcher.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await watcher
    result.wall_seconds = t_end - t0
    result.bound = len(bound_at)
    result.latencies = [bound_at[n] - created[n] for n in bound_at if n in created]
    if cpu0 is not None and cpu1 is not None:
        result.scheduler_cpu = cpu1 - cpu0
    if sim_cpu0 is not None and sim_cpu1 is not None:
        result.sim_cpu = sim_cpu1 - sim_cpu0
    result.scheduler_rss = rss_bytes(sched.pid)
    result.retries = api.retries


def bench(
    nodes: int, pods: int, gang_size: int, period: str | None = None, conf: str | None = None
) -> E2EResult:
    period = period or os.environ.get("CALDERA_BENCH_PERIOD", "100ms")
    conf = conf or os.environ.get("CALDERA_BENCH_CONF") or None
    kubelet_delay = float(os.environ.get("CALDERA_BENCH_KUBELET_DELAY", "0.5"))
    concurrency = int(os.environ.get("CALDERA_BENCH_CONCURRENCY", "32"))
    result = E2EResult(
        pods=pods,
        nodes=nodes,
        gang_size=gang_size,
        period=period,
        rate_limit=float(os.environ.get("CALDERA_BENCH_RATE", "0")),
    )
    with tempfile.TemporaryDirectory(prefix="caldera-bench-e2e-") as workdir:
        sim = SimProcess.start(
            workdir,
            log_path=Path(workdir) / "sim.log",
            nodes=nodes,
            node_pods=max(110, -(-pods // max(1, nodes)) + 10),
            history_size=max(10_000, pods * 4),
            kubelet_delay=kubelet_delay,
        )
        sched = None
        try:
            sched = SchedulerProcess.start(
                "bench",
                sim.kubeconfig,
                period=period,
                conf=conf,
                log_path=Path(workdir) / "scheduler.log",
                extra=os.environ.get("CALDERA_BENCH_SCHEDULER_ARGS", "").split(),
            )
            asyncio.run(_wait_ready(sched.base))

            async def go() -> None:
                async with Api(sim.url, sim.token, concurrency=concurrency + 8) as api:
                    await drive(api, result, sched, sim, concurrency)  # type: ignore[arg-type]

            asyncio.run(go())
        except BaseException:
            if sched is not None:
                log = Path(workdir) / "scheduler.log"
                if log.exists():
                    print(log.read_text()[-3000:])
            raise
        finally:
            if sched is not None:
                sched.stop()
            sim.stop()
    return result


def run(args: argparse.Namespace) -> int:
    nodes = int(getattr(args, "nodes", 1000))
    pods = int(getattr(args, "pods", 5000))
    gang = int(getattr(args, "gang_size", 10))
    print(f"caldera-sim bench e2e: {pods} pods, gang size {gang}, {nodes} nodes", flush=True)
    sizes: list[int] = [gang] if gang > 1 else [1]
    if os.environ.get("CALDERA_BENCH_BOTH") == "1" and gang > 1:
        sizes.append(1)
    for size in sizes:
        print(bench(nodes, pods, size).report(), flush=True)
    return 0
