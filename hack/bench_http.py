"""`caldera-sim bench http`: the binder's writes through cache/http1.py's keep-alive pool against the
same writes through aiohttp, on one workload, against the bundled simulator.

    caldera-sim bench http --binds 5000 --concurrency 16 --repeat 3

A simulated cluster runs in a child process (``caldera-sim serve``'s server, no kubelet or
controllers, so it does nothing but answer). For each repeat and each arm, ``--binds`` pods are
created first (not measured), then bound by ``--concurrency`` workers, each sending one binding after
the other as the binder's workers do: the binder's own request body (``scheduler.binder.binding_body``),
one ``POST pods/NAME/binding`` per pod, a 10 s timeout. The two arms share everything but the HTTP
client:

- ``pool``: ``ApiClient.send`` with the binder's request shape, the path the binder takes;
- ``aiohttp``: the same ApiClient's aiohttp ``ClientSession`` (a ``TCPConnector`` of as many
  keep-alive connections as the pool may open), the POST made as ApiClient makes its reads (an
  encoded URL, a timeout object and a header map made once), its answer read whole and a status of
  300 or more raised as the client's ``ApiError``.

Each phase starts with a warm-up of a few binds per worker (connections opened, not measured). The
figures per phase: binds per second (wall clock), the client's CPU per bind (this process's
``time.process_time``: user + system, nothing else runs in it meanwhile), the simulator's CPU per
bind, and the load average (the machine may be shared: a busy neighbour slows both arms). The arms
alternate their order from one repeat to the next, so a drift in the machine's load does not favour
one. Binds per second are bounded by the simulator's CPU (it answers in the same machine), so the
client's CPU per bind is the figure that tells the clients apart. Figures only: no pass/fail.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import aiohttp
import orjson

from caldera.cache.client import ApiClient, ApiError, ClusterConfig, error_from
from caldera.hack.soak.procs import SimProcess, cpu_seconds
from caldera.hack.workload.client import Api, pods_path
from caldera.hack.workload.manifests import pod_manifest
from caldera.scheduler.binder import binding_body

NAMESPACE = "bench-http"
NODE = "bench-node"
ARMS = ("pool", "aiohttp")
#: unmeasured binds per worker at the start of each phase (connections opened)
WARMUP_PER_WORKER = 4
TIMEOUT = 10.0


@dataclass
class Phase:
    arm: str
    repeat: int
    binds: int
    failed: int
    wall: float
    client_cpu: float
    sim_cpu: float | None
    load: tuple[float, float, float]

    @property
    def rate(self) -> float:
        return self.binds / self.wall if self.wall > 0 else 0.0

    @property
    def cpu_us(self) -> float:
        return self.client_cpu / self.binds * 1e6 if self.binds else 0.0

    def line(self) -> str:
        sim = (
            f"{self.sim_cpu / self.binds * 1e6:7.1f}"
            if self.sim_cpu is not None and self.binds
            else "      ?"
        )
        failed = f"  {self.failed} FAILED" if self.failed else ""
        return (
            f"  repeat {self.repeat}  {self.arm:<8}{self.binds:>7,} binds  {self.rate:>8,.0f} binds/s"
            f"  client CPU {self.cpu_us:7.1f} us/bind  sim CPU {sim} us/bind"
            f"  load {self.load[0]:.2f}{failed}"
        )


#: one write: (path, body) -> awaitable that raises ApiError on anything but 2xx
Write = Callable[[str, bytes], Awaitable[object]]


def pool_write(client: ApiClient) -> Write:
    """The binder's path: the binding request's fixed parts encoded once, sent through the pool."""
    shape = client.shape("POST", "/binding")

    def write(path: str, body: bytes) -> Awaitable[bytes]:
        return client.send(shape, path, body, timeout=TIMEOUT)

    return write


def aiohttp_write(client: ApiClient) -> Write:
    """The same POST through the client's aiohttp session, made as ApiClient makes its reads."""
    session = client.session
    headers = {"Content-Type": "application/json"}
    timeout = aiohttp.ClientTimeout(total=TIMEOUT)

    async def write(path: str, body: bytes) -> bytes:
        try:
            async with session.post(
                client.url(path + "/binding"),
                data=body,
                headers={**headers, **client.auth_headers()},
                timeout=timeout,
            ) as resp:
                raw = await resp.read()
                if resp.status >= 300:
                    raise error_from(resp.status, raw, resp.headers)
                return raw
        except (TimeoutError, aiohttp.ClientError) as exc:
            raise ApiError(0, type(exc).__name__, str(exc)) from None

    return write


WRITERS: dict[str, Callable[[ApiClient], Write]] = {"pool": pool_write, "aiohttp": aiohttp_write}


async def create_pods(api: Api, prefix: str, count: int) -> list[tuple[str, bytes]]:
    """``count`` pods named PREFIX-N; returns each one's binding (path, body) to NODE."""
    out: list[tuple[str, bytes]] = [("", b"")] * count
    path = pods_path(NAMESPACE)
    next_index = iter(range(count))

    async def creator() -> None:
        for i in next_index:
            name = f"{prefix}-{i:06d}"
            status, raw = await api.request("POST", path, pod_manifest(name, NAMESPACE, workload="bench"))
            if status not in (200, 201):
                raise RuntimeError(f"creating pod {name}: {status} {raw[:200]!r}")
            uid = orjson.loads(raw)["metadata"]["uid"]
            out[i] = (f"{path}/{name}", binding_body(NAMESPACE, name, uid, NODE))

    await asyncio.gather(*(creator() for _ in range(32)))
    return out


async def bind_all(write: Write, binds: list[tuple[str, bytes]], concurrency: int) -> int:
    """Send every binding with ``concurrency`` workers; returns how many failed."""
    failed = 0
    todo = iter(binds)

    async def worker() -> None:
        nonlocal failed
        for path, body in todo:
            try:
                await write(path, body)
            except ApiError:
                failed += 1

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return failed


async def phase(
    api: Api, config: ClusterConfig, sim_pid: int, arm: str, repeat: int, binds: int, concurrency: int
) -> Phase:
    warm = await create_pods(api, f"{arm}-{repeat}-warm", WARMUP_PER_WORKER * concurrency)
    pods = await create_pods(api, f"{arm}-{repeat}", binds)
    client = ApiClient(config, max_connections=concurrency)
    try:
        write = WRITERS[arm](client)
        await bind_all(write, warm, concurrency)
        gc.collect()
        sim0 = cpu_seconds(sim_pid)
        cpu0 = time.process_time()
        t0 = time.perf_counter()
        failed = await bind_all(write, pods, concurrency)
        wall = time.perf_counter() - t0
        cpu = time.process_time() - cpu0
        sim1 = cpu_seconds(sim_pid)
    finally:
        await client.close()
    sim_cpu = sim1 - sim0 if sim0 is not None and sim1 is not None else None
    return Phase(arm, repeat, binds - failed, failed, wall, cpu, sim_cpu, os.getloadavg())


def spread(values: list[float]) -> float:
    return max(values) - min(values) if values else 0.0


def summary(phases: list[Phase]) -> list[str]:
    by_arm = {arm: [p for p in phases if p.arm == arm] for arm in ARMS}
    lines = ["summary (median over repeats [min - max]):"]
    for arm, runs in by_arm.items():
        rates = [p.rate for p in runs]
        cpus = [p.cpu_us for p in runs]
        lines.append(
            f"  {arm:<8} {statistics.median(rates):>8,.0f} binds/s [{min(rates):,.0f} - {max(rates):,.0f}]"
            f"   client CPU {statistics.median(cpus):6.1f} us/bind [{min(cpus):.1f} - {max(cpus):.1f}]"
        )
    pool = [p.cpu_us for p in by_arm["pool"]]
    other = [p.cpu_us for p in by_arm["aiohttp"]]
    gain = statistics.median(other) - statistics.median(pool)
    noise = max(spread(pool), spread(other))
    lines.append(
        f"  the pool saves {gain:.1f} us of client CPU per bind ({gain / statistics.median(other):.0%} of"
        f" aiohttp's); run-to-run spread (max - min within an arm): pool {spread(pool):.1f} us,"
        f" aiohttp {spread(other):.1f} us; gain / widest spread: "
        + (f"{gain / noise:.1f}" if noise > 0 else "n/a (one repeat)")
    )
    return lines


def bench(binds: int, concurrency: int, repeat: int) -> list[Phase]:
    phases: list[Phase] = []
    with tempfile.TemporaryDirectory(prefix="caldera-bench-http-") as workdir:
        total = 2 * repeat * (binds + WARMUP_PER_WORKER * concurrency)
        sim = SimProcess.start(
            workdir, nodes=1, kubelet=False, controllers=False, history_size=max(10_000, 2 * total)
        )
        try:

            async def go() -> None:
                config = await ClusterConfig.load(str(sim.kubeconfig))
                async with Api(sim.url, sim.token, concurrency=32) as api:
                    await api.create(
                        "/api/v1/namespaces",
                        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
                    )
                    for r in range(1, repeat + 1):
                        order = ARMS if r % 2 else ARMS[::-1]
                        for arm in order:
                            done = await phase(api, config, sim.pid, arm, r, binds, concurrency)
                            print(done.line(), flush=True)
                            phases.append(done)

            _runner()(go())
        finally:
            sim.stop()
    return phases


def _runner() -> Callable[[Awaitable[None]], None]:
    """uvloop, as caldera-scheduler runs (scheduler/cli.py), where it is installed."""
    try:
        import uvloop

        return uvloop.run  # type: ignore[no-any-return]
    except ImportError:  # pragma: no cover - non-Linux
        return asyncio.run  # type: ignore[return-value]


def run(args: argparse.Namespace) -> int:
    load = os.getloadavg()
    print(
        f"caldera-sim bench http: {args.binds:,} binds per arm and repeat, {args.concurrency} in flight,"
        f" {args.repeat} repeat(s), against caldera-sim in a child process;"
        f" load average before: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} ({os.cpu_count()} CPUs)",
        flush=True,
    )
    phases = bench(args.binds, args.concurrency, args.repeat)
    for line in summary(phases):
        print(line)
    load = os.getloadavg()
    print(f"load average after: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    return 1 if any(p.failed for p in phases) else 0
