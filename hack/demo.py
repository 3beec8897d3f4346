"""`caldera-sim demo`: a simulated cluster, a stream of gang jobs, and caldera-scheduler binding them.

The simulated cluster runs in this process; caldera-scheduler runs as its own process (as it would
against a real cluster), pointed at the cluster's kubeconfig. A progress line every second shows
jobs pending/running/done and pods bound per second; a summary follows at the end.

With ``--dra`` every node's DRA driver publishes GPUs (a ResourceSlice of ``--gpus-per-node`` devices,
driver ``gpu.example.com``) and every pod of a gang claims one through the ResourceClaimTemplate
``one-gpu`` (the simulator's resourceclaim controller makes each pod's claim): the progress line counts
the devices allocated, and the summary how many bound pods had their claims allocated and reserved for
them, as kube-scheduler's PreBind leaves them (its pkg/scheduler/framework/plugins/dynamicresources).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import signal
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from caldera.framework.model import GROUP_NAME_ANNOTATION
from caldera.hack.sim import SimCluster
from caldera.hack.sim.controllers import RUN_SECONDS_ANNOTATION
from caldera.hack.sim.dra import RESOURCE_CLAIMS
from caldera.hack.sim.resources import NATIVE_GANG, PODS, resource
from caldera.hack.soak.checker import claim_problem, pod_claims
from caldera.hack.stats import percentile
from caldera.hack.workload.generators import DRA_CLASS, DRA_DRIVER, DRA_TEMPLATE
from caldera.hack.workload.manifests import (
    claim_template_manifest,
    device_class_manifest,
    resource_slice_manifest,
)

PODGROUPS = resource("podgroups", "scheduling.volcano.sh")
#: Kubernetes' own PodGroup (scheduling.k8s.io/v1alpha2), served with --native-gang
NATIVE_PODGROUPS = next(r for r in NATIVE_GANG if r.plural == "podgroups")
SCHEDULER = "caldera"


def register(subparsers: Any) -> None:
    p: argparse.ArgumentParser = subparsers.add_parser(
        "demo",
        help="simulated cluster + gang jobs + caldera-scheduler, with live progress",
        description=__doc__.splitlines()[0] if __doc__ else None,
    )
    p.add_argument("--nodes", type=int, default=40, help="simulated nodes (40)")
    p.add_argument("--node-cpu", default="16", help="cpu per node (16)")
    p.add_argument("--jobs", type=int, default=120, help="gang jobs to submit (120)")
    p.add_argument("--rate", type=float, default=8.0, help="jobs submitted per second (8)")
    p.add_argument("--min-size", type=int, default=2)
    p.add_argument("--max-size", type=int, default=16)
    p.add_argument("--run-seconds", type=float, default=6.0, help="mean run time of a pod (6s)")
    p.add_argument("--timeout", type=float, default=120.0, help="give up after this many seconds (120)")
    p.add_argument("--schedule-period", default="200ms")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--scheduler-log", default="", help="where caldera-scheduler's log goes (a temp file)")
    p.add_argument(
        "--native-gang",
        action="store_true",
        help="gangs as Kubernetes' own scheduling.k8s.io/v1alpha2 PodGroups (pods join through"
        " spec.schedulingGroup) instead of Volcano's; the simulator serves that API",
    )
    p.add_argument(
        "--dra",
        action="store_true",
        help="GPUs through Dynamic Resource Allocation: each node publishes a ResourceSlice of"
        " --gpus-per-node devices and every pod claims one through a ResourceClaimTemplate",
    )
    p.add_argument(
        "--gpus-per-node", type=int, default=8, help="devices per node's ResourceSlice with --dra (8)"
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        return asyncio.run(_demo(args))
    except KeyboardInterrupt:
        return 130


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Job:
    __slots__ = ("bound_at", "created", "done_at", "name", "pods", "size")

    def __init__(self, name: str, size: int, created: float) -> None:
        self.name = name
        self.size = size
        self.created = created
        self.bound_at: float | None = None
        self.done_at: float | None = None
        self.pods: list[str] = []


async def _demo(args: argparse.Namespace) -> int:
    rng = random.Random(args.seed)
    out = sys.stdout
    log_path = Path(args.scheduler_log or tempfile.mkstemp(prefix="caldera-scheduler-", suffix=".log")[1])
    async with SimCluster(
        nodes=args.nodes,
        node_cpu=args.node_cpu,
        node_memory="64Gi",
        kubelet_delay=0.2,
        native_gang=args.native_gang,
    ) as sim:
        port = _free_port()
        log_file = open(log_path, "wb")
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "caldera.scheduler.cli",
            "--kubeconfig",
            str(sim.kubeconfig_path),
            "--scheduler-name",
            SCHEDULER,
            "--schedule-period",
            args.schedule_period,
            "--listen-address",
            f"127.0.0.1:{port}",
            stdout=log_file,
            stderr=log_file,
            cwd=str(Path(__file__).resolve().parents[1]),
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        print(
            f"caldera-sim: {args.nodes} nodes x {args.node_cpu} cpu at {sim.url}; "
            f"caldera-scheduler pid {proc.pid} (metrics http://127.0.0.1:{port}/metrics, log {log_path})",
            file=out,
            flush=True,
        )
        try:
            return await _drive(args, rng, sim, proc, port, log_path)
        finally:
            if proc.returncode is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    await asyncio.wait_for(proc.wait(), 20)
                except TimeoutError:
                    proc.kill()
                    await proc.wait()
            log_file.close()


def publish_devices(sim: SimCluster, per_node: int) -> int:
    """The DRA objects: a DeviceClass, a ResourceSlice of `per_node` GPUs per node (a node-local driver) and
    the claim template each pod names; returns the number of devices published."""
    sim.create(device_class_manifest(DRA_CLASS, DRA_DRIVER))
    nodes = [n["metadata"]["name"] for n in sim.objects("nodes")]
    for node in nodes:
        sim.create(resource_slice_manifest(node, DRA_DRIVER, per_node))
    sim.create(claim_template_manifest(DRA_TEMPLATE, "default", DRA_CLASS))
    return len(nodes) * per_node


class DraTally:
    """With --dra: the devices published, and each pod's claims as it is first seen bound."""

    def __init__(self) -> None:
        self.total = 0
        self.in_place = 0
        self.missing: list[str] = []

    def check(self, pod: dict[str, Any], claims: dict[str, dict[str, Any]]) -> None:
        """A pod just seen bound: its claims are allocated and reserved for it (written before the binding,
        and the simulator's store shows both at once), unless it already finished (its reservation is then
        taken back by the resourceclaim controller)."""
        if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            return
        problems = [f"{entry} {p}" for entry, c in pod_claims(pod, claims) if (p := claim_problem(pod, c))]
        if problems:
            self.missing.append(f"{pod['metadata']['name']} ({'; '.join(problems)})")
        else:
            self.in_place += 1

    @staticmethod
    def allocated(claims: dict[str, dict[str, Any]]) -> int:
        return sum(
            len((((c.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or ())
            for c in claims.values()
        )


async def _wait_ready(port: int, proc: asyncio.subprocess.Process, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.returncode is not None:
            return False
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"GET /readyz HTTP/1.0\r\n\r\n")
            await writer.drain()
            status = await reader.readline()
            writer.close()
            if b" 200 " in status:
                return True
        except OSError:
            pass
        await asyncio.sleep(0.1)
    return False


async def _drive(
    args: argparse.Namespace,
    rng: random.Random,
    sim: SimCluster,
    proc: asyncio.subprocess.Process,
    port: int,
    log_path: Path,
) -> int:
    if not await _wait_ready(port, proc):
        print(f"caldera-scheduler did not become ready; see {log_path}:", file=sys.stderr)
        print(log_path.read_text()[-3000:], file=sys.stderr)
        return 1
    jobs: dict[str, Job] = {}
    pod_created: dict[str, float] = {}
    pod_bound: dict[str, float] = {}
    devices = DraTally()
    if args.dra:
        devices.total = publish_devices(sim, args.gpus_per_node)
    started = time.monotonic()

    async def submit() -> None:
        for i in range(args.jobs):
            name = f"job-{i:04d}"
            size = rng.randint(args.min_size, args.max_size)
            job = Job(name, size, time.monotonic())
            if args.native_gang:
                sim.store.create(
                    NATIVE_PODGROUPS,
                    "default",
                    {
                        "apiVersion": "scheduling.k8s.io/v1alpha2",
                        "kind": "PodGroup",
                        "metadata": {"name": name, "namespace": "default"},
                        "spec": {"schedulingPolicy": {"gang": {"minCount": size}}},
                    },
                )
            else:
                sim.store.create(
                    PODGROUPS,
                    "default",
                    {
                        "apiVersion": "scheduling.volcano.sh/v1beta1",
                        "kind": "PodGroup",
                        "metadata": {"name": name, "namespace": "default"},
                        "spec": {"minMember": size},
                    },
                )
            cpu = rng.choice(["500m", "1", "2"])
            seconds = max(1.0, rng.gauss(args.run_seconds, args.run_seconds / 3))
            for k in range(size):
                pod = f"{name}-{k}"
                sim.store.create(
                    PODS,
                    "default",
                    {
                        "apiVersion": "v1",
                        "kind": "Pod",
                        "metadata": {
                            "name": pod,
                            "namespace": "default",
                            "annotations": {
                                **({} if args.native_gang else {GROUP_NAME_ANNOTATION: name}),
                                RUN_SECONDS_ANNOTATION: f"{seconds:.1f}",
                            },
                        },
                        "spec": {
                            **({"schedulingGroup": {"podGroupName": name}} if args.native_gang else {}),
                            "schedulerName": SCHEDULER,
                            "containers": [
                                {
                                    "name": "main",
                                    "image": "busybox",
                                    "resources": {
                                        "requests": {"cpu": cpu, "memory": "1Gi"},
                                        **({"claims": [{"name": "gpu"}]} if args.dra else {}),
                                    },
                                }
                            ],
                            **(
                                {
                                    "resourceClaims": [
                                        {"name": "gpu", "resourceClaimTemplateName": DRA_TEMPLATE}
                                    ]
                                }
                                if args.dra
                                else {}
                            ),
                        },
                    },
                )
                job.pods.append(pod)
                pod_created[pod] = time.monotonic()
            jobs[name] = job
            await asyncio.sleep(rng.expovariate(args.rate))

    submitter = asyncio.create_task(submit())
    last_bound = 0
    last_t = started
    peak_rate = 0.0
    rc = 0
    try:
        while True:
            await asyncio.sleep(1.0)
            now = time.monotonic()
            phases: dict[str, str] = {}
            claims = (
                {f"default/{c['metadata']['name']}": c for c in sim.store.objects(RESOURCE_CLAIMS, "default")}
                if args.dra
                else {}
            )
            for pod in sim.store.objects(PODS, "default"):
                name = pod["metadata"]["name"]
                phases[name] = (pod.get("status") or {}).get("phase", "Pending")
                if pod["spec"].get("nodeName") and name not in pod_bound:
                    pod_bound[name] = now
                    if args.dra:
                        devices.check(pod, claims)
            pending = running = done = 0
            for job in jobs.values():
                if job.done_at is None and all(phases.get(p) in ("Succeeded", "Failed") for p in job.pods):
                    job.done_at = now
                if job.bound_at is None and all(p in pod_bound for p in job.pods):
                    job.bound_at = now
                if job.done_at is not None:
                    done += 1
                elif job.bound_at is not None:
                    running += 1
                else:
                    pending += 1
            bound = len(pod_bound)
            rate = (bound - last_bound) / max(1e-6, now - last_t)
            peak_rate = max(peak_rate, rate)
            last_bound, last_t = bound, now
            print(
                f"[{now - started:5.1f}s] jobs: {pending:4d} pending {running:4d} running {done:4d} done"
                f" of {len(jobs):4d} submitted | pods bound: {bound:5d} ({rate:6.1f}/s)"
                + (f" | devices allocated: {devices.allocated(claims)}/{devices.total}" if args.dra else ""),
                flush=True,
            )
            if proc.returncode is not None:
                print(f"caldera-scheduler exited with {proc.returncode}; see {log_path}", file=sys.stderr)
                rc = 1
                break
            if submitter.done() and done == len(jobs):
                break
            if now - started > args.timeout:
                print(f"timed out after {args.timeout:.0f}s", file=sys.stderr)
                rc = 1
                break
    finally:
        submitter.cancel()
    _summary(jobs, pod_created, pod_bound, time.monotonic() - started, peak_rate)
    if args.dra:
        print(
            f"  devices:            {devices.in_place} pods bound with their claims allocated and reserved,"
            f" {len(devices.missing)} without{': ' + ', '.join(devices.missing[:5]) if devices.missing else ''}"
        )
        rc = rc or (1 if devices.missing else 0)
    # A clean shutdown is part of the demo: SIGTERM, in-flight binds finish, exit 0.
    proc.send_signal(signal.SIGTERM)
    code = await asyncio.wait_for(proc.wait(), 30)
    print(f"caldera-scheduler stopped on SIGTERM with exit code {code}")
    return rc or (0 if code == 0 else 1)


def _summary(
    jobs: dict[str, Job], created: dict[str, float], bound: dict[str, float], elapsed: float, peak: float
) -> None:
    waits = sorted(bound[p] - created[p] for p in bound if p in created)
    job_waits = sorted(j.bound_at - j.created for j in jobs.values() if j.bound_at is not None)
    partial = sum(1 for j in jobs.values() if 0 < sum(p in bound for p in j.pods) < j.size)

    def pct(values: list[float], p: float) -> str:
        return f"{percentile(values, p):.2f}s" if values else "-"

    print("\nsummary")
    print(f"  elapsed:            {elapsed:.1f}s")
    print(
        f"  jobs:               {len(jobs)} submitted, {sum(j.done_at is not None for j in jobs.values())} completed"
    )
    print(
        f"  pods bound:         {len(bound)} ({len(bound) / max(elapsed, 1e-6):.1f}/s average, {peak:.1f}/s peak)"
    )
    print(f"  pod create->bound:  p50 {pct(waits, 50)}  p95 {pct(waits, 95)}  (1s sampling)")
    print(f"  job submit->bound:  p50 {pct(job_waits, 50)}  p95 {pct(job_waits, 95)}")
    print(f"  partly bound gangs: {partial}")
    if job_waits:
        print(f"  mean job wait:      {statistics.mean(job_waits):.2f}s")
