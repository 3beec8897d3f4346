"""`caldera-sim soak`: the scheduler under realistic and hostile load, with invariants checked throughout.

    caldera-sim soak --minutes 2 [--seed 1] [--mix default] [--faults all] [--report-dir soak-report]

Processes: the simulated cluster (`hack.soak.simproc`, faults switchable at run time), two
`caldera-scheduler` replicas with leader election, and this driver, which runs the workload generators
(`hack.workload`), injects faults (watch drops and resets, 429 and 500 storms, history compaction, a graceful
scheduler restart, a leader failover by SIGKILL, the token rotated, a watch handler fault, the Lease endpoint
stalled past the renew deadline, pods churned through), and checks the invariants of `hack.soak.checker` every
second from the API's view. It scrapes each replica's /metrics and reads its CPU and memory from /proc.
At the end: faults off, the backlog drains, probe pods are bound while the bind counters are compared with
the bindings seen, and memory growth is judged. It prints a summary, writes `report.html` and PNG charts
(throughput, pending, latency, memory) and `summary.json`, and exits 1 on any violation.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from caldera.hack.soak.driver import run_soak
from caldera.hack.soak.faults import FAULT_KINDS, parse_faults
from caldera.hack.soak.options import Options


def register(subparsers: Any) -> None:
    p: argparse.ArgumentParser = subparsers.add_parser(
        "soak",
        help="soak the scheduler with workloads and faults, checking invariants",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--minutes", type=float, default=2.0)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--mix", default="default", help="workload mix (see `caldera-sim workload --help`)")
    p.add_argument(
        "--faults",
        default="all",
        help=f"comma-separated, in order: {','.join(FAULT_KINDS)}; `all` (default) or `none`",
    )
    p.add_argument("--report-dir", default="soak-report")
    p.add_argument("--nodes", type=int, default=48, help="CPU nodes (plus 4 GPU and 4 vGPU nodes)")
    p.add_argument("--period", default="500ms", help="the scheduler's --schedule-period")
    p.add_argument("--replicas", type=int, default=2, help="scheduler replicas (leader election when > 1)")
    p.add_argument(
        "--native-gang",
        type=float,
        default=0.0,
        metavar="FRACTION",
        help="this share (0..1) of the gangs as Kubernetes' own scheduling.k8s.io/v1alpha2 PodGroups (the "
        "simulator serves the API)",
    )
    p.add_argument(
        "--dra",
        action="store_true",
        help="Dynamic Resource Allocation: 4 more nodes whose driver publishes 8 GPUs each (ResourceSlices),"
        " gangs claiming them (the `dra` generator joins the mix), and the DRA invariants checked",
    )
    p.add_argument(
        "--churn-pods",
        type=int,
        default=2000,
        help="pods created and deleted through the load by the churn fault (e.g. 100000)",
    )
    p.add_argument(
        "--lease-stall",
        type=float,
        default=1.0,
        help="seconds the leader is kept from renewing past its renew deadline by the lease-stall fault "
        "(the Lease endpoint is silent for the renew deadline plus this)",
    )
    p.add_argument("--workdir", help="keep the processes' logs here")
    p.add_argument("-v", "--verbose", action="store_true")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    opts = Options(
        minutes=args.minutes,
        seed=args.seed,
        mix=args.mix,
        faults=parse_faults(args.faults),
        report_dir=args.report_dir,
        nodes=args.nodes,
        period=args.period,
        replicas=args.replicas,
        dra=args.dra,
        verbose=args.verbose,
        native_gang=args.native_gang,
        churn_pods=args.churn_pods,
        lease_stall=args.lease_stall,
    )
    if args.workdir:
        Path(args.workdir).mkdir(parents=True, exist_ok=True)
    summary, text = run_soak(opts, args.workdir)
    print(text)
    print(f"report: {summary.report.get('html')}")
    return 1 if summary.violations else 0
