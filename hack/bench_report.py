"""`caldera-sim bench report`: run the benchmarks one after another and write what they measured,
with the command that prints each figure, the machine and the commit, to a Markdown document
(docs/performance.md by default).

    caldera-sim bench report                  # every benchmark at its documented size (several minutes)
    caldera-sim bench report --quick --out /tmp/perf.md --repeat 1   # small sizes: tries it in seconds
    caldera-sim bench report --only core --only micro

The figures come from the benchmarks' own return values (`bench_e2e.runs`, `bench.core_figures`,
`bench_core.measure`), never from their printed text; each benchmark is run from the exact command line
the document names, parsed by the same parser the command uses.
"""

from __future__ import annotations

import argparse
import os
import platform
import shlex
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from caldera.hack.stats import percentile

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = "docs/performance.md"


@dataclass(frozen=True)
class Plan:
    """One benchmark the report runs: the command (program and its arguments) and how to run it."""

    name: str
    program: str
    argv: tuple[str, ...]
    heading: str

    @property
    def command(self) -> str:
        return f"{self.program} {shlex.join(self.argv)}".strip()


#: pods created per second in the streaming-latency runs (e2e-latency): well below what the binder
#: takes at 5,000 nodes (the stream shape as fast as possible), so latency is not queueing
LATENCY_RATE = "500"
#: Kubernetes' published scalability envelope (sig-scalability thresholds): nodes, pods
ENVELOPE = ("5000", "150000")


def plans(quick: bool, repeat: int) -> list[Plan]:
    """The benchmarks in the order they run. Full size: `bench e2e` at 1,000 nodes / 5,000 pods and at
    5,000 nodes / 10,000 pods (both shapes), at the latter size with topology (`--topology`) and
    against the binding ceiling (`--ceiling`, backlog), `bench core` with the 100,000 pending pods issue 27's
    targets name, and the core's fixed costs (`bench_core`) at their defaults. ``quick``: the same
    commands at sizes that take seconds."""
    e2e = (("10", "50"), ("20", "100")) if quick else (("1000", "5000"), ("5000", "10000"))
    envelope = ("20", "200") if quick else ENVELOPE
    quick_core = "--nodes 50 --single 200 --gangs 20 --groups 5 --pending 400 --repeats 3 --cycles 10"
    core = (*quick_core.split(), "--arrivals", "2", "--lifetime", "3") if quick else ("--pending", "100000")
    micro = ("--nodes", "50", "--jobs", "200", "--gang", "5") if quick else ()
    topology = ("--nodes", "256", "--topology-repeat", "1") if quick else ()
    return [
        *(
            Plan(
                name,
                "caldera-sim",
                ("bench", "e2e", "--nodes", nodes, "--pods", pods, "--repeat", str(repeat)),
                "End to end",
            )
            for name, (nodes, pods) in zip(("e2e-small", "e2e-large"), e2e, strict=True)
        ),
        *(
            Plan(
                name,
                "caldera-sim",
                ("bench", "e2e", "--nodes", e2e[1][0], "--pods", e2e[1][1], *flags, "--repeat", str(repeat)),
                "End to end",
            )
            for name, flags in (
                ("e2e-topology", ("--topology",)),
                ("e2e-ceiling", ("--shape", "backlog", "--ceiling")),
                ("e2e-latency", ("--shape", "stream", "--rate", LATENCY_RATE)),
            )
        ),
        Plan(
            "e2e-envelope",
            "caldera-sim",
            ("bench", "e2e", "--nodes", envelope[0], "--pods", envelope[1], "--repeat", str(repeat)),
            "End to end",
        ),
        Plan("core", "caldera-sim", ("bench", "core", *core), "In process"),
        Plan("core-topology", "caldera-sim", ("bench", "core", "--topology", *topology), "In process"),
        Plan("micro", "python -m caldera.hack.bench_core", micro, "Fixed costs of the core"),
    ]


NAMES = (
    "e2e-small",
    "e2e-large",
    "e2e-topology",
    "e2e-ceiling",
    "e2e-latency",
    "e2e-envelope",
    "core",
    "core-topology",
    "micro",
)


@dataclass
class Outcome:
    """What one benchmark returned, and when and under what load it ran."""

    plan: Plan
    data: Any
    started: datetime
    seconds: float
    load_after: tuple[float, float, float]


# -- the machine and the checkout ---------------------------------------------------------------------


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""


def cpu_model() -> str:
    for line in _read("/proc/cpuinfo").splitlines():
        if line.startswith("model name"):
            return line.partition(":")[2].strip()
    return platform.processor() or "unknown"


def cpus() -> int:
    """What `nproc` prints: the CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 0


def memory_bytes() -> int:
    for line in _read("/proc/meminfo").splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) * 1024
    return 0


def _git(*argv: str) -> str | None:
    try:
        done = subprocess.run(
            ["git", "-C", str(ROOT), *argv], capture_output=True, text=True, timeout=30, check=True
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout


@dataclass(frozen=True)
class Checkout:
    """HEAD of the checkout the benchmarks run from (None outside git) and the tracked files that
    differ from it."""

    head: str | None
    changed: tuple[str, ...]

    def full(self) -> str:
        if self.head is None:
            return "unknown (not a git checkout)"
        if not self.changed:
            return f"`{self.head}`"
        shown = ", ".join(f"`{p}`" for p in self.changed[:5]) + (" ..." if len(self.changed) > 5 else "")
        return f"`{self.head}`, **dirty**: {len(self.changed)} tracked file(s) changed ({shown})"

    def short(self) -> str:
        if self.head is None:
            return "unknown"
        return f"`{self.head[:7]}`" + (" (**dirty**)" if self.changed else "")


def commit(ignore: Path | None = None) -> Checkout:
    """What the benchmarks run from; ``ignore``: the document being written, no part of what was
    measured, so rewriting it does not mark the checkout dirty."""
    head = _git("rev-parse", "HEAD")
    if head is None:
        return Checkout(None, ())
    status = _git("status", "--porcelain", "--untracked-files=no") or ""
    changed = [line[3:] for line in status.splitlines() if line[3:]]
    if ignore is not None:
        changed = [p for p in changed if (ROOT / p).resolve() != ignore.resolve()]
    return Checkout(head.strip(), tuple(changed))


def _load(values: tuple[float, float, float]) -> str:
    return ", ".join(f"{v:.2f}" for v in values) + " (1, 5, 15 min)"


def _when(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC")


# -- running ------------------------------------------------------------------------------------------


def _bench_parser() -> argparse.ArgumentParser:
    """`caldera-sim`'s bench subcommands, exactly as the console script parses them."""
    from caldera.hack import bench

    parser = argparse.ArgumentParser(prog="caldera-sim")
    bench.register(parser.add_subparsers(dest="command", required=True))
    return parser


def _run_caldera_sim(plan: Plan) -> Any:
    from caldera.hack import bench, bench_e2e

    args = _bench_parser().parse_args(list(plan.argv))
    if args.bench == "e2e":
        return bench_e2e.runs(args)
    return bench.core_figures(args)


def _run_micro(plan: Plan) -> Any:
    from caldera.hack import bench_core

    return bench_core.measure(bench_core.parser().parse_args(list(plan.argv)))


def run_plan(plan: Plan) -> Outcome:
    runner: Callable[[Plan], Any] = _run_micro if plan.name == "micro" else _run_caldera_sim
    print(f"bench report: {plan.command}", flush=True)
    started, t0 = datetime.now(UTC), time.monotonic()
    data = runner(plan)
    return Outcome(plan, data, started, time.monotonic() - t0, os.getloadavg())


# -- the document -------------------------------------------------------------------------------------


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return out


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.0f} ms" if seconds >= 0.1 else f"{seconds * 1e3:.1f} ms"


def _ran(outcome: Outcome) -> str:
    return (
        f"Ran from {_when(outcome.started)} for {outcome.seconds:.0f} s; load average after it:"
        f" {_load(outcome.load_after)}."
    )


def _span(values: list[float], fmt: str) -> str:
    return format(values[0], fmt) if len(values) == 1 else f"{min(values):{fmt}} to {max(values):{fmt}}"


E2E_PROSE = """Three processes on the same machine: `caldera-sim` (the simulated API server),
`caldera-scheduler` (period 100 ms, Volcano's default conf, controllers on) and the driver. Gangs of 10
pods, four request shapes in turn. **backlog**: every PodGroup and pod is created first, then the
scheduler starts, as a restart finds them; its CPU counts from its process start (imports and lists
included). **stream**: the scheduler runs and the pods are created meanwhile, as fast as the API server
takes them; its CPU counts from the first create. In both, CPU is the scheduler process's own
utime+stime (/proc/PID/stat) until it is idle (every pod bound, then a second at no more than 5% of a
core), so status writes and events are included. Latency is from a pod's create (stream) or the
scheduler's start (backlog) to the driver's watch seeing it bound; cycles are every cycle the scheduler
ran (its /debug/scheduler). **--topology**: the nodes in leaves of 8 under a three-tier HyperNode tree
(16 leaves a spine, one root), every PodGroup with `networkTopology: {mode: hard, highestTierAllowed:
1}`, `network-topology-aware` in the conf; the bindings are checked to put every gang in one leaf.
**--ceiling**: after each backlog run, a binder that makes no decision (lists the pending pods once,
posts one Binding per pod, 64 in flight, in its own process: `hack/bench_ceiling.py`) binds the same
workload on a fresh simulator: the most a scheduler writing one binding per pod reaches there; its
row is "backlog, binding ceiling", and Caldera's pods/s are given as a fraction of it. The binder then
runs again with one core held busy beside it by a process that makes no request ("backlog, binding
ceiling, one core busy"): the most a scheduler that takes a core for itself reaches on this machine,
where it shares the cores with the simulator; Caldera's fraction of that is given too.
**--rate N**: the stream shape with pods created at N per second (below what the binder takes), so
a pod's latency to bound is the scheduler's reaction (the schedule period, the cycle, the binding's
round trip), not a queue. **e2e-envelope**: Kubernetes' scalability envelope, 5,000 nodes and 150,000
pods, both shapes (each run of both takes 6 to 7 minutes on 2 CPUs; `--only` leaves it out)."""

CORE_PROSE = """The real cache, session, actions and plugins with Volcano's default conf (the topology row:
network-topology-aware over node groups), nodes of 32 cpu / 128Gi, six pod templates in turn (four
request shapes, two with a node selector), binding into a recording binder, in one process: no API
server. Each row is one line the command prints (its title, then what it measured). **--topology**:
gangs of 8, 32 and 128 pods (4 cpu / 8Gi) over a three-tier HyperNode tree (leaves of 8 nodes, 16
leaves a spine, one root), each PodGroup with `networkTopology` (hard mode at tier 1 or 2, or soft),
`network-topology-aware` in the conf, against the same gangs without topology under the default conf;
the runs alternate, and each pair's CPU per placed pod is given with its ratio (hard gangs are checked
to be inside one group of their tier)."""

MICRO_PROSE = """The snapshot, statement operations and bulk feasibility alone, on a cache of pending gangs
(1 cpu / 2Gi each): what every cycle pays before any policy runs."""


def _e2e_rows(results: list[Any]) -> tuple[list[str], list[list[str]]]:
    """The e2e table's header and rows: a binding ceiling's run under the run it is compared with;
    the topology check and the fraction of the ceiling only where some run has them."""
    topology = any(r.gangs_split is not None for r in results)
    ceiling = any(r.ceiling is not None for r in results)
    header = list(E2E_HEADER)
    if topology:
        header.append("gangs inside one leaf")
    if ceiling:
        header.append("pods/s as a fraction of the binding ceiling")
        header.append("the most that fraction could be: first pod bound, then caldera-sim's CPU to the last")
        header.append("the most it could be: the scheduler's own CPU to its last bind, in one interpreter")
        header.append("pods/s as a fraction of the binding ceiling with one core busy")
    rows = []
    runs: dict[str, int] = {}
    for r in [x for res in results for x in (res, res.ceiling, res.busy_ceiling) if x is not None]:
        shape = r.shape if r.binder == "caldera" else f"{r.shape}, binding ceiling"
        if r.busy_core:
            shape += ", one core busy"
        runs[shape] = runs.get(shape, 0) + 1
        cpu = r.cpu_ms_per_pod
        writes = sum(r.writes.values()) / max(1, r.bound) if r.writes else None
        rss = f"{r.scheduler_rss / 2**20:.0f} MiB" if r.scheduler_rss is not None else "—"
        if r.scheduler_rss is not None and r.rss_before_pods is not None:
            rss += f" ({r.rss_before_pods / 2**20:.0f} MiB with the nodes only)"
        cycles = r.cycle_seconds
        sim_rss = "—"
        if r.sim_rss is not None and r.sim_rss_before_pods is not None and r.pods:
            sim_rss = f"{(r.sim_rss - r.sim_rss_before_pods) / r.pods / 2**10:.1f} KiB"
        row = [
            shape,
            str(runs[shape]),
            f"**{cpu:.3f} ms**" if cpu is not None else "—",
            f"{r.bound}/{r.pods}",
            f"{r.rate:.0f}",
            (f"{_ms(_pct(r.latencies, 50))} / {_ms(_pct(r.latencies, 99))}" if r.latencies else "—"),
            f"{r.sim_cpu / max(1, r.bound) * 1e3:.3f} ms" if r.sim_cpu is not None else "—",
            sim_rss,
            f"{r.first_cycle:.2f} s" if r.first_cycle is not None else "—",
            (f"{_ms(_pct(cycles, 99))} / {_ms(max(cycles))}" if cycles else "—"),
            rss,
            f"{writes:.2f}" if writes is not None else "—",
            f"{r.cycles:.0f}" if r.cycles is not None else "—",
            f"{sum(r.gc_seconds.values()):.2f} s" if r.gc_seconds else "—",
        ]
        if topology:
            row.append(
                f"{r.gangs_checked - r.gangs_split}/{r.gangs_checked}" if r.gangs_split is not None else "—"
            )
        if ceiling:
            row.append(f"{r.ceiling_fraction:.2f}" if r.ceiling_fraction is not None else "—")
            bound = r.ceiling_bound
            row.append(
                f"{bound:.2f} ({r.first_bound:.2f} s, {r.sim_cpu_after_first:.2f} s)"
                if bound is not None
                else "—"
            )
            own = r.ceiling_own_bound
            row.append(f"{own:.2f} ({r.scheduler_cpu_to_bound:.2f} s)" if own is not None else "—")
            busy = r.busy_ceiling_fraction
            row.append(f"{busy:.2f}" if busy is not None else "—")
        rows.append(row)
    return header, rows


def _pct(values: list[float], p: float) -> float:
    from caldera.hack.stats import percentile

    return percentile(values, p)


E2E_HEADER = [
    "shape",
    "run",
    "scheduler CPU per bound pod",
    "bound",
    "pods/s (to last bound)",
    "latency to bound p50 / p99",
    "simulator CPU per pod",
    "simulator RSS per pod",
    "process start → first cycle",
    "cycle p99 / longest",
    "scheduler RSS at the end",
    "API writes per bound pod",
    "cycles",
    "garbage collector (process life)",
]


def summary_rows(outcomes: list[Outcome]) -> list[list[str]]:
    """The few figures the README quotes: scheduler CPU per bound pod end to end, per size and shape;
    the steady-state cycle and the full-cluster cycle in process."""
    rows: list[list[str]] = []
    for o in outcomes:
        command = f"`{o.plan.command}`"
        if o.plan.name.startswith("e2e"):
            by_shape: dict[str, list[Any]] = {}
            for r in o.data:
                by_shape.setdefault(r.shape, []).append(r)
            for shape, results in by_shape.items():
                first = results[0]
                cpu = [r.cpu_ms_per_pod for r in results if r.cpu_ms_per_pod is not None]
                fractions = [r.ceiling_fraction for r in results if r.ceiling_fraction is not None]
                bounds = [r.ceiling_bound for r in results if r.ceiling_bound is not None]
                busy = [r.busy_ceiling_fraction for r in results if r.busy_ceiling_fraction is not None]
                what = f"{first.nodes:,} nodes / {first.pods:,} pods" + (
                    " with topology" if first.topology else ""
                )
                if o.plan.name == "e2e-envelope":
                    rows.append(
                        [
                            f"end to end, the envelope ({what}), {shape}: scheduler CPU per bound pod;"
                            " longest cycle; scheduler RSS at the end",
                            command,
                            ", ".join(f"{v:.3f}" for v in cpu)
                            + " ms; "
                            + ", ".join(f"{max(r.cycle_seconds or [0]) * 1e3:.0f}" for r in results)
                            + " ms; "
                            + ", ".join(f"{(r.scheduler_rss or 0) / 2**20:.0f}" for r in results)
                            + " MiB",
                        ]
                    )
                    continue
                if first.rate_limit:
                    rows.append(
                        [
                            f"end to end, {what}, {shape} at {first.rate_limit:g} pods/s: latency from a"
                            " pod's create to bound, p50 / p99; scheduler CPU per bound pod",
                            command,
                            "; ".join(
                                f"{percentile(r.latencies, 50) * 1e3:.0f} / {percentile(r.latencies, 99) * 1e3:.0f} ms"
                                for r in results
                            )
                            + "; "
                            + ", ".join(f"{v:.3f}" for v in cpu)
                            + " ms",
                        ]
                    )
                    continue
                rows.append(
                    [
                        f"end to end, {what}, {shape}: scheduler CPU per bound pod; pods/s"
                        + ("; fraction of the binding ceiling" if fractions else "")
                        + ("; the most it could be (bench e2e's bound line)" if bounds else "")
                        + ("; fraction of the binding ceiling with one core busy" if busy else ""),
                        command,
                        (", ".join(f"{v:.3f}" for v in cpu) + " ms" if cpu else "—")
                        + f"; {_span([r.rate for r in results], '.0f')} pods/s"
                        + (f"; {_span(fractions, '.2f')}" if fractions else "")
                        + (f"; {_span(bounds, '.2f')}" if bounds else "")
                        + (f"; {_span(busy, '.2f')}" if busy else ""),
                    ]
                )
        elif o.plan.name == "core":
            steady, pending = o.data.get("steady"), o.data.get("pending")
            if steady is not None:
                v = steady.values
                rows.append(
                    [
                        "in process, steady state: cycle; CPU per placed pod",
                        command,
                        f"p50 {_ms(v['p50'])}, p99 {_ms(v['p99'])}; {v['cpu_per_placed'] * 1e3:.3f} ms",
                    ]
                )
            if pending is not None:
                v = pending.values
                rows.append(
                    [
                        f"in process, {pending.title}: cycle; process RSS",
                        command,
                        f"p50 {_ms(v['p50'])}, p99 {_ms(v['p99'])}; {v['rss'] / 2**20:.0f} MiB",
                    ]
                )
            stall = o.data.get("stall")
            if stall is not None:
                v = stall.values
                rows.append(
                    [
                        f"in process, {stall.title}: the event loop's longest stall while cycles run",
                        command,
                        f"{v['longest'] * 1e3:.1f} ms (p99 {v['p99'] * 1e3:.1f} ms)",
                    ]
                )
        elif o.plan.name == "core-topology":
            for figure in o.data.values():
                shape = figure.title.split(":")[0]
                ratios = [v for k, v in figure.values.items() if k.startswith("ratio_")]
                rows.append(
                    [
                        f"in process, {shape}: CPU per placed pod with topology over without, run by run",
                        command,
                        ", ".join(f"{r:.2f}x" for r in ratios),
                    ]
                )
    return rows


def render(
    outcomes: list[Outcome],
    *,
    report_command: str,
    started: datetime,
    finished: datetime,
    load_start: tuple[float, float, float],
    load_end: tuple[float, float, float],
    checkout: Checkout,
) -> str:
    took = (finished - started).total_seconds()
    env = sorted(k for k in os.environ if k.startswith("CALDERA_BENCH_"))
    lines = [
        "# Performance",
        "",
        f"Written by `{report_command}`.",
        "",
        "Every figure here was measured by the command named above its table, run by that report one",
        "after another on the machine below. Runs of the same command differ (the machine is shared:",
        "see the load averages), so re-run them before quoting a figure.",
        "",
        "## Machine and run",
        "",
        *_table(
            ["", ""],
            [
                ["CPU (/proc/cpuinfo)", cpu_model()],
                ["CPUs available (nproc)", str(cpus())],
                ["memory", f"{memory_bytes() / 2**30:.1f} GiB"],
                ["Python", f"{platform.python_implementation()} {platform.python_version()}"],
                ["system", platform.platform()],
                ["commit", checkout.full()],
                ["started", _when(started)],
                ["finished", f"{_when(finished)} ({took // 60:.0f} min {took % 60:.0f} s)"],
                ["load average at start", _load(load_start)],
                ["load average at end", _load(load_end)],
                [
                    "CALDERA_BENCH_* variables",
                    ", ".join(f"`{k}={os.environ[k]}`" for k in env) if env else "none set",
                ],
            ],
        ),
        "",
    ]
    summary = summary_rows(outcomes)
    if summary:
        lines += [
            "## Summary",
            "",
            *_table(["figure", "command", "measured"], summary),
            "",
            # one line, so that a copy of the summary (the README's) carries when and under what load
            f"Measured {_when(started)} to {finished.strftime('%H:%M:%S')} UTC on {cpus()} CPUs"
            f" ({cpu_model()}), commit {checkout.short()}; load average {_load(load_start)} at the"
            f" start, {_load(load_end)} at the end.",
            "",
        ]
    sections: dict[str, list[Outcome]] = {}
    for o in outcomes:
        sections.setdefault(o.plan.heading, []).append(o)
    for heading, group in sections.items():
        first = group[0].plan
        tool = "`caldera-sim bench e2e`" if first.name.startswith("e2e") else f"`{first.program}`"
        if first.name.startswith("core"):
            tool = "`caldera-sim bench core`"
        lines += [f"## {heading}: {tool}", ""]
        prose = {"End to end": E2E_PROSE, "In process": CORE_PROSE}.get(heading, MICRO_PROSE)
        lines += [prose, ""]
        for o in group:
            lines += [f"### `{o.plan.command}`", "", _ran(o), ""]
            if o.plan.name.startswith("e2e"):
                lines += _table(*_e2e_rows(o.data))
            else:
                figures = o.data.values() if isinstance(o.data, dict) else o.data
                lines += _table(["figure", "measured"], [[f.title, f.measured] for f in figures])
            lines.append("")
    return "\n".join(lines)


def report_command(args: argparse.Namespace) -> str:
    argv = ["bench", "report"]
    if args.quick:
        argv.append("--quick")
    if args.repeat is not None:
        argv += ["--repeat", str(args.repeat)]
    for name in args.only or ():
        argv += ["--only", name]
    if args.out != DEFAULT_OUT:
        argv += ["--out", args.out]
    return "caldera-sim " + shlex.join(argv)


def run(args: argparse.Namespace) -> int:
    repeat = args.repeat if args.repeat is not None else (1 if args.quick else 3)
    if repeat < 1:
        raise SystemExit("bench report: --repeat must be at least 1")
    chosen = [p for p in plans(args.quick, repeat) if not args.only or p.name in args.only]
    out = Path(args.out)
    checkout = commit(ignore=out)
    load_start = os.getloadavg()
    started = datetime.now(UTC)
    outcomes = [run_plan(plan) for plan in chosen]
    text = render(
        outcomes,
        report_command=report_command(args),
        started=started,
        finished=datetime.now(UTC),
        load_start=load_start,
        load_end=os.getloadavg(),
        checkout=checkout,
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    print(f"bench report: wrote {out}", flush=True)
    return 0


def add_parser(sub: Any) -> None:
    """Adds `report` to `caldera-sim bench`'s subcommands."""
    p: argparse.ArgumentParser = sub.add_parser(
        "report", help="run the benchmarks and write their figures, commands and machine to a document"
    )
    p.add_argument("--out", default=DEFAULT_OUT, metavar="PATH", help=f"default {DEFAULT_OUT}")
    p.add_argument(
        "--repeat",
        type=int,
        default=None,
        metavar="N",
        help="bench e2e runs of each shape (default 3; 1 with --quick)",
    )
    p.add_argument("--quick", action="store_true", help="small sizes: seconds, for tests and trying it")
    p.add_argument(
        "--only",
        action="append",
        choices=NAMES,
        default=None,
        metavar="NAME",
        help=f"run only this benchmark (repeatable; default all): {', '.join(NAMES)}"
        " (e2e-small: 1,000 nodes / 5,000 pods, e2e-large: 5,000 nodes / 10,000 pods, e2e-topology and"
        " e2e-ceiling: e2e-large with --topology, and its backlog with --ceiling; e2e-latency: e2e-large's"
        f" stream at --rate {LATENCY_RATE}; e2e-envelope: {int(ENVELOPE[0]):,} nodes / {int(ENVELOPE[1]):,} pods)",
    )
    p.set_defaults(func=run)
