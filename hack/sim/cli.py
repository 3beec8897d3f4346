"""`caldera-sim serve`: run the simulated cluster until SIGTERM/SIGINT."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from typing import Any

from .cluster import SimCluster
from .faults import Faults
from .nodes import ClusterSpec, parse_labels


def _listen(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit():
        raise argparse.ArgumentTypeError(f"--listen wants HOST:PORT, not {text!r}")
    return host.strip("[]") or "127.0.0.1", int(port)


def register(subparsers: Any) -> None:
    p: argparse.ArgumentParser = subparsers.add_parser(
        "serve",
        help="run the simulated Kubernetes cluster",
        description="Serve a simulated Kubernetes API on loopback and write a kubeconfig for it "
        "(atomically, once it accepts requests).",
    )
    p.add_argument(
        "--listen",
        type=_listen,
        default=("127.0.0.1", 0),
        metavar="HOST:PORT",
        help="port 0 picks a free one",
    )
    p.add_argument("--kubeconfig-out", required=True, metavar="PATH")
    p.add_argument("--token", help="bearer token clients must send (default: random)")
    nodes = p.add_argument_group("nodes")
    nodes.add_argument("--nodes", type=int, default=0, help="number of identical nodes")
    nodes.add_argument("--node-cpu", default="32")
    nodes.add_argument("--node-memory", default="128Gi")
    nodes.add_argument("--node-pods", default="110")
    nodes.add_argument("--node-prefix", default="node")
    nodes.add_argument("--node-label", action="append", default=[], metavar="KEY=VALUE[,...]")
    nodes.add_argument(
        "--cluster", metavar="FILE", help="YAML with node templates (`nodes:`) and seed `objects:`"
    )
    behaviour = p.add_argument_group("behaviour")
    behaviour.add_argument("--kubelet-delay", type=float, default=1.0, help="seconds from binding to Running")
    behaviour.add_argument("--no-kubelet", action="store_true")
    behaviour.add_argument(
        "--no-kubelet-admission", action="store_true", help="let pods run even on nodes they do not fit"
    )
    behaviour.add_argument(
        "--no-controllers", action="store_true", help="no Deployment/ReplicaSet controllers"
    )
    behaviour.add_argument("--history-size", type=int, default=10_000, help="watch events kept per kind")
    behaviour.add_argument("--bookmark-interval", type=float, default=60.0)
    faults = p.add_argument_group("faults")
    faults.add_argument(
        "--fault-429", type=float, default=0.0, metavar="RATE", help="fraction of requests answered 429"
    )
    faults.add_argument(
        "--fault-500", type=float, default=0.0, metavar="RATE", help="fraction of requests answered 500"
    )
    faults.add_argument("--fault-latency", type=float, default=0.0, metavar="SECONDS")
    faults.add_argument("--fault-latency-jitter", type=float, default=0.0, metavar="SECONDS")
    faults.add_argument(
        "--fault-drop-watches", type=float, default=0.0, metavar="SECONDS", help="close all watches every N s"
    )
    faults.add_argument(
        "--fault-drop-abort", action="store_true", help="reset watch connections instead of ending them"
    )
    faults.add_argument(
        "--fault-compact", type=float, default=0.0, metavar="SECONDS", help="forget watch history every N s"
    )
    behaviour.add_argument(
        "--gc-full-interval",
        type=float,
        default=60.0,
        help="seconds between full garbage collections (0: Python's default)",
    )
    behaviour.add_argument(
        "--crds",
        metavar="DIR",
        help="folder of CRD manifests whose schemas prune and default custom resources (default: deploy/crds)",
    )
    behaviour.add_argument(
        "--native-gang-api",
        action="store_true",
        help="serve scheduling.k8s.io/v1alpha2 workloads and podgroups (a 1.36 server with "
        "--runtime-config=scheduling.k8s.io/v1alpha2=true --feature-gates=GenericWorkload=true); off by default",
    )
    p.add_argument("--seed", type=int)
    p.add_argument("--log-level", default="INFO")
    p.set_defaults(func=run)


def cluster_from_args(args: argparse.Namespace) -> SimCluster:
    labels: dict[str, str] = {}
    for text in args.node_label:
        labels.update(parse_labels(text))
    spec = ClusterSpec.uniform(
        args.nodes, args.node_cpu, args.node_memory, args.node_pods, labels, args.node_prefix
    )
    host, port = args.listen
    return SimCluster(
        spec,
        cluster_file=args.cluster,
        host=host,
        port=port,
        token=args.token,
        kubeconfig_path=args.kubeconfig_out,
        faults=Faults(
            error_429_rate=args.fault_429,
            error_500_rate=args.fault_500,
            latency=args.fault_latency,
            latency_jitter=args.fault_latency_jitter,
            drop_watches_every=args.fault_drop_watches,
            drop_watches_abort=args.fault_drop_abort,
            compact_every=args.fault_compact,
            seed=args.seed,
        ),
        kubelet=not args.no_kubelet,
        kubelet_delay=args.kubelet_delay,
        kubelet_admission=not args.no_kubelet_admission,
        controllers=not args.no_controllers,
        history_size=args.history_size,
        bookmark_interval=args.bookmark_interval,
        gc_full_interval=args.gc_full_interval or None,
        crd_dir=args.crds,
        seed=args.seed,
        native_gang=args.native_gang_api,
    )


async def serve(args: argparse.Namespace) -> None:
    sim = cluster_from_args(args)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with sim:
        print(f"caldera-sim: serving {sim.url} kubeconfig={sim.kubeconfig_path}", flush=True)
        await stop.wait()
    print("caldera-sim: stopped", flush=True)


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    runner: Any
    try:
        import uvloop

        runner = uvloop.run
    except ImportError:
        runner = asyncio.run
    try:
        runner(serve(args))
    except ValueError as exc:
        print(f"caldera-sim serve: {exc}", file=sys.stderr)
        return 2
    return 0
