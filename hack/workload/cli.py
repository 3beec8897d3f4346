"""`caldera-sim workload`: print a plan, or run it against a cluster."""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

import orjson

from caldera.hack.workload.client import Api
from caldera.hack.workload.executor import ExecStats, Executor
from caldera.hack.workload.generators import make_generators, parse_mix
from caldera.hack.workload.plan import Action, ClusterShape, build_plan


def register(subparsers: Any) -> None:
    p: argparse.ArgumentParser = subparsers.add_parser(
        "workload",
        help="run synthetic workloads (reproducible by seed) against a cluster",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--kubeconfig", help="the cluster (e.g. one `caldera-sim serve` wrote)")
    p.add_argument(
        "--mix", default="default", help="`default`, `default*2`, or `gang=0.5,vgpu=1,churn=2@30+10,...`"
    )
    p.add_argument("--duration", type=float, default=60.0, help="seconds of arrivals")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--namespace", default="soak")
    p.add_argument(
        "--dra-nodes",
        default="",
        help="comma-separated nodes for which the `dra` generator publishes ResourceSlices of 8 GPUs each",
    )
    p.add_argument("--plan", action="store_true", help="print the plan (one line per action) and exit")
    p.add_argument(
        "--native-gang",
        type=float,
        default=0.0,
        metavar="FRACTION",
        help="this share (0..1) of the gangs are Kubernetes' own scheduling.k8s.io/v1alpha2 PodGroups, their "
        "pods joining through spec.schedulingGroup (the cluster must serve the API: caldera-sim serve "
        "--native-gang-api)",
    )
    p.set_defaults(func=run)


def describe(action: Action) -> str:
    if action.op == "submit":
        pods = action.pods()
        groups = [o for o in action.objects if o["kind"] == "PodGroup"]
        spec = groups[0]["spec"] if groups else {}
        mm = (
            spec.get("minMember")
            or (spec.get("schedulingPolicy") or {}).get("gang", {}).get("minCount")
            or "-"
        )
        if groups and "schedulingPolicy" in spec:
            mm = f"{mm} (native)"
        req = pods[0]["spec"]["containers"][0]["resources"] if pods else {}
        return f"{action.at:8.2f} submit {action.workload} pods={len(pods)} minMember={mm} {orjson.dumps(req).decode()}"
    if action.op in ("setup", "add-node"):
        names = ",".join(o["metadata"]["name"] for o in action.objects)
        return f"{action.at:8.2f} {action.op} {action.workload} {names}"
    return f"{action.at:8.2f} {action.op} {action.target} {action.value if action.op == 'scale' else ''}".rstrip()


def run(args: argparse.Namespace) -> int:
    shape = ClusterShape(dra_nodes=tuple(n for n in args.dra_nodes.split(",") if n))
    plan = build_plan(
        make_generators(parse_mix(args.mix), args.duration, args.namespace, native_fraction=args.native_gang),
        args.seed,
        shape,
    )
    if args.plan or not args.kubeconfig:
        for a in plan:
            print(describe(a))
        return 0

    async def go() -> ExecStats:
        async with Api.from_kubeconfig(args.kubeconfig) as api:
            ex = Executor(api, plan, args.namespace, on_error=lambda m: print("error:", m, flush=True))
            return await ex.run()

    stats = asyncio.run(go())
    print(
        f"workload: {stats.submitted_jobs} jobs, {stats.submitted_pods} pods submitted, {stats.scales} scalings, "
        f"{stats.node_ops} node operations, {stats.deleted_pods} finished pods deleted, {stats.errors} errors"
    )
    return 0 if stats.errors == 0 else 1
