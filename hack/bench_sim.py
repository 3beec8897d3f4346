"""`caldera-sim bench-sim`: how many pod bindings per second caldera-sim sustains while streaming them to watchers.

The simulator runs as its own process (`caldera-sim serve`), exactly as the demo and e2e tests use it; this
process is the client: it creates pods, opens watchers, then binds every pod with bounded concurrency over one
keep-alive aiohttp session, and measures how long each binding takes to reach every watcher.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import yaml

from caldera.hack.stats import percentile


@dataclass
class BenchResult:
    pods: int
    watchers: int
    create_seconds: float
    bind_seconds: float
    bind_errors: int
    latencies: list[float] = field(default_factory=list)  # seconds, one per (pod, watcher)
    request_latencies: list[float] = field(default_factory=list)
    events_seen: int = 0
    running: int = 0
    server_cpu_seconds: float | None = None

    @property
    def bindings_per_second(self) -> float:
        return self.pods / self.bind_seconds if self.bind_seconds else 0.0

    def report(self) -> str:
        ms = 1000.0
        lines = [
            f"pods created: {self.pods} in {self.create_seconds:.2f}s ({self.pods / self.create_seconds:.0f}/s)",
            f"bindings: {self.pods} in {self.bind_seconds:.2f}s = {self.bindings_per_second:.0f} bindings/s"
            f" ({self.bind_errors} errors)",
            f"binding request latency: p50={percentile(self.request_latencies, 50) * ms:.1f}ms"
            f" p99={percentile(self.request_latencies, 99) * ms:.1f}ms",
            f"watch event latency (binding sent -> event at watcher, {self.watchers} watchers,"
            f" {len(self.latencies)} deliveries): p50={percentile(self.latencies, 50) * ms:.1f}ms"
            f" p99={percentile(self.latencies, 99) * ms:.1f}ms max={max(self.latencies or [0]) * ms:.1f}ms",
            f"watch events received in total: {self.events_seen}; pods Running afterwards: {self.running}",
        ]
        if self.server_cpu_seconds is not None:
            lines.append(
                f"server CPU: {self.server_cpu_seconds:.2f}s"
                f" ({self.server_cpu_seconds / max(1, self.pods) * 1e6:.0f}us per pod, create+bind+kubelet)"
            )
        return "\n".join(lines)


def _cpu_seconds(pid: int) -> float | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def start_server(args: argparse.Namespace, workdir: str) -> tuple[subprocess.Popen[bytes], str, str]:
    kubeconfig = Path(workdir) / "kubeconfig"
    cmd = [
        sys.executable,
        "-m",
        "caldera.hack.cli",
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--kubeconfig-out",
        str(kubeconfig),
        "--nodes",
        str(args.nodes),
        # Room for every benchmark pod, so the kubelet admits them all rather than refusing the surplus.
        "--node-pods",
        str(max(110, -(-args.pods // args.nodes) + 10)),
        "--history-size",
        str(max(10_000, args.pods * 4)),
        "--log-level",
        "WARNING",
    ]
    cmd += ["--no-kubelet"] if args.no_kubelet else ["--kubelet-delay", str(args.kubelet_delay)]
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": f"{root}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while not kubeconfig.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError("caldera-sim serve did not start")
        time.sleep(0.02)
    config = yaml.safe_load(kubeconfig.read_text())
    return proc, config["clusters"][0]["cluster"]["server"], config["users"][0]["user"]["token"]


async def _watch(
    http: aiohttp.ClientSession,
    url: str,
    rv: str,
    expected: int,
    sent: dict[str, float],
    latencies: list[float],
    counts: list[int],
    ready: asyncio.Event,
) -> None:
    seen: set[str] = set()
    path = f"{url}/api/v1/namespaces/bench/pods?watch=1&allowWatchBookmarks=true&resourceVersion={rv}"
    async with http.get(path, timeout=aiohttp.ClientTimeout(total=None, sock_read=None)) as resp:
        resp.raise_for_status()
        ready.set()
        content = resp.content
        while len(seen) < expected:
            line = await content.readline()
            if not line:
                raise RuntimeError("watch ended early")
            now = time.perf_counter()
            counts[0] += 1
            event = orjson.loads(line)
            obj = event["object"]
            if event["type"] != "MODIFIED" or not obj["spec"].get("nodeName"):
                continue
            name = obj["metadata"]["name"]
            if name not in seen and name in sent:
                seen.add(name)
                latencies.append(now - sent[name])


async def run_bench(
    url: str, token: str, args: argparse.Namespace, server_pid: int | None = None
) -> BenchResult:
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    connector = aiohttp.TCPConnector(limit=args.concurrency + args.watchers + 4)
    async with aiohttp.ClientSession(headers=headers, connector=connector) as http:
        async with http.post(
            f"{url}/api/v1/namespaces", data=orjson.dumps({"metadata": {"name": "bench"}})
        ) as resp:
            if resp.status not in (201, 409):
                raise RuntimeError(f"creating namespace: {resp.status} {await resp.text()}")
        names = [f"bench-{i:06d}" for i in range(args.pods)]
        nodes = [f"node-{i:0{len(str(args.nodes - 1))}d}" for i in range(args.nodes)]
        template: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "", "namespace": "bench", "labels": {"app": "bench"}},
            "spec": {
                "schedulerName": "caldera",
                "containers": [
                    {
                        "name": "main",
                        "image": "busybox",
                        "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
                    }
                ],
            },
        }
        queue: asyncio.Queue[str] = asyncio.Queue()

        async def create_worker() -> None:
            while not queue.empty():
                name = queue.get_nowait()
                template["metadata"]["name"] = name
                async with http.post(f"{url}/api/v1/namespaces/bench/pods", data=orjson.dumps(template)) as r:
                    if r.status != 201:
                        raise RuntimeError(f"create {name}: {r.status} {await r.text()}")
                    await r.read()

        for n in names:
            queue.put_nowait(n)
        start = time.perf_counter()
        await asyncio.gather(*(create_worker() for _ in range(args.concurrency)))
        create_seconds = time.perf_counter() - start

        async with http.get(f"{url}/api/v1/namespaces/bench/pods?limit=1") as resp:
            rv = (await resp.json())["metadata"]["resourceVersion"]
        sent: dict[str, float] = {}
        latencies: list[float] = []
        counts = [0]
        readies = [asyncio.Event() for _ in range(args.watchers)]
        watchers = [
            asyncio.create_task(_watch(http, url, rv, args.pods, sent, latencies, counts, readies[i]))
            for i in range(args.watchers)
        ]
        await asyncio.gather(*(r.wait() for r in readies))

        cpu_before = _cpu_seconds(server_pid) if server_pid else None
        errors = 0
        request_latencies: list[float] = []
        for i, n in enumerate(names):
            queue.put_nowait(f"{n} {nodes[i % len(nodes)]}")

        async def bind_worker() -> None:
            nonlocal errors
            while not queue.empty():
                name, node = queue.get_nowait().split()
                body = orjson.dumps(
                    {
                        "apiVersion": "v1",
                        "kind": "Binding",
                        "metadata": {"name": name},
                        "target": {"kind": "Node", "name": node},
                    }
                )
                t0 = time.perf_counter()
                sent[name] = t0
                async with http.post(f"{url}/api/v1/namespaces/bench/pods/{name}/binding", data=body) as r:
                    await r.read()
                    if r.status != 201:
                        errors += 1
                request_latencies.append(time.perf_counter() - t0)

        start = time.perf_counter()
        await asyncio.gather(*(bind_worker() for _ in range(args.concurrency)))
        bind_seconds = time.perf_counter() - start
        try:
            await asyncio.wait_for(asyncio.gather(*watchers), timeout=60)
        finally:
            for w in watchers:
                w.cancel()
        if not args.no_kubelet:
            await asyncio.sleep(
                args.kubelet_delay + 0.2
            )  # let the kubelet's Running updates land in the CPU figure
        cpu_after = _cpu_seconds(server_pid) if server_pid else None
        async with http.get(
            f"{url}/api/v1/namespaces/bench/pods?fieldSelector=status.phase%3DRunning"
        ) as resp:
            running = len((await resp.json())["items"])
    return BenchResult(
        pods=args.pods,
        watchers=args.watchers,
        create_seconds=create_seconds,
        bind_seconds=bind_seconds,
        bind_errors=errors,
        latencies=latencies,
        request_latencies=request_latencies,
        events_seen=counts[0],
        running=running,
        server_cpu_seconds=(cpu_after - cpu_before)
        if cpu_before is not None and cpu_after is not None
        else None,
    )


def register(subparsers: Any) -> None:
    p: argparse.ArgumentParser = subparsers.add_parser(
        "bench-sim",
        help="benchmark caldera-sim: bindings per second and watch event latency",
        description=__doc__,
    )
    p.add_argument("--pods", type=int, default=20_000)
    p.add_argument("--nodes", type=int, default=100)
    p.add_argument("--watchers", type=int, default=2, help="concurrent watchers of the bound pods")
    p.add_argument("--concurrency", type=int, default=64, help="binding requests in flight")
    p.add_argument("--kubelet-delay", type=float, default=0.5)
    p.add_argument("--no-kubelet", action="store_true")
    p.add_argument("--url", help="benchmark an already running server instead of starting one")
    p.add_argument("--token", help="with --url: its bearer token")
    p.add_argument("--min-rate", type=float, default=0.0, help="exit 1 when bindings/s is below this")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        import uvloop

        runner: Any = uvloop.run
    except ImportError:
        runner = asyncio.run
    proc = None
    with tempfile.TemporaryDirectory(prefix="caldera-bench-") as workdir:
        try:
            if args.url:
                url, token = args.url, args.token or ""
            else:
                proc, url, token = start_server(args, workdir)
            print(
                f"caldera-sim bench: {args.pods} pods, {args.nodes} nodes, {args.watchers} watchers, "
                f"{args.concurrency} in flight, kubelet {'off' if args.no_kubelet else f'{args.kubelet_delay}s'}",
                flush=True,
            )
            result: BenchResult = runner(run_bench(url, token, args, proc.pid if proc else None))
        finally:
            if proc is not None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    proc.kill()
    print(result.report(), flush=True)
    if args.min_rate and result.bindings_per_second < args.min_rate:
        print(
            f"FAIL: {result.bindings_per_second:.0f} bindings/s is below {args.min_rate:.0f}", file=sys.stderr
        )
        return 1
    return 0 if result.bind_errors == 0 else 1
