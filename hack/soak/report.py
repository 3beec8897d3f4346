"""What a soak found: the summary (figures, faults, violations, what was checked) as text, as `summary.json`
and as an HTML report with PNG charts of the sampled series."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from caldera.hack.report import Chart, write_report
from caldera.hack.soak.checker import Violation
from caldera.hack.soak.options import Options


@dataclass
class Summary:
    seconds: float = 0.0
    faults: list[dict[str, Any]] = field(default_factory=list)
    violations: list[Violation] = field(default_factory=list)
    submitted_pods: int = 0
    bound: int = 0
    latency_p50_ms: float = float("nan")
    latency_p99_ms: float = float("nan")
    max_partial_gang_s: float = 0.0
    max_fit_wait_s: float = 0.0
    scheduler_cpu_s: float = 0.0
    cpu_ms_per_bound_pod: float = float("nan")
    memory: list[dict[str, Any]] = field(default_factory=list)
    replicas: list[dict[str, Any]] = field(default_factory=list)
    metrics_checked: list[str] = field(default_factory=list)
    metrics_skipped: list[str] = field(default_factory=list)
    events: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # comparisons reported, not judged
    checks: int = 0
    relists: int = 0
    driver_retries: int = 0
    dra_pods_checked: int = 0  # bound pods seen with every ResourceClaim allocated and reserved (--dra)
    report: dict[str, str] = field(default_factory=dict)
    #: node accounting compared with the API after each fault, and at the end
    accounting: list[dict[str, Any]] = field(default_factory=list)
    accounting_end: dict[str, Any] = field(default_factory=dict)
    #: the churn's figures (pods, seconds, per replica RSS and remembered maps)
    churn: dict[str, Any] = field(default_factory=dict)


def text(opts: Options, s: Summary) -> str:
    """The summary as printed at the end of a soak."""
    by_kind: dict[str, int] = {}
    for x in s.violations:
        by_kind[x.invariant] = by_kind.get(x.invariant, 0) + 1
    lines = [
        f"soak: {s.seconds:.0f}s, seed {opts.seed}, mix {opts.mix}, {len(s.faults)} faults:"
        f" {', '.join(f['kind'] + '@' + str(f['start']) for f in s.faults) or 'none'}",
        f"  pods submitted {s.submitted_pods}, bound {s.bound}; creation-to-bound p50 {s.latency_p50_ms}ms"
        f" p99 {s.latency_p99_ms}ms",
        f"  scheduler CPU {s.scheduler_cpu_s}s over all replicas = {s.cpu_ms_per_bound_pod} ms per bound pod ("
        + ", ".join(f"{r['replica']} {r['cpu_s']}s" for r in s.replicas)
        + ")",
        f"  longest partial gang {s.max_partial_gang_s}s, longest wait of a fitting pod {s.max_fit_wait_s}s;"
        f" {s.checks} invariant checks, {s.relists} re-lists, {s.driver_retries} driver retries"
        + (
            f"; {s.dra_pods_checked} pods with ResourceClaims seen bound with them in place"
            if opts.dra
            else ""
        ),
        "  memory: "
        + (
            "; ".join(
                f"{m['replica']} {m['warm_mib']}->{m['late_mib']} MiB over {m['life_s']}s"
                + (f" (API pods {m['pods_warm']}->{m['pods_most']} at most)" if "pods_most" in m else "")
                for m in s.memory
            )
            or "too short to judge"
        ),
        "  node accounting after faults: "
        + (", ".join(f"{a['after']} {a['equal']}/{a['compared']}" for a in s.accounting) or "not compared")
        + (
            f"; at the end {s.accounting_end['equal']}/{s.accounting_end['compared']}"
            f" ({s.accounting_end['not_compared']} not compared)"
            if s.accounting_end
            else ""
        ),
        *(
            [
                f"  churn: {s.churn['pods']} pods created, {s.churn['deleted']} deleted in {s.churn['seconds']}s; "
                + "; ".join(
                    f"{name} "
                    + (r["note"] if "note" in r else f"RSS {r['rss_halfway_mib']}->{r['rss_end_mib']} MiB")
                    + (f", remembered {r['remembered']}" if r["remembered"] else "")
                    for name, r in s.churn["replicas"].items()
                )
            ]
            if s.churn
            else []
        ),
        f"  metrics checked: {', '.join(s.metrics_checked) or 'none'}",
        f"  metrics skipped: {', '.join(s.metrics_skipped) or 'none'}",
        *(f"  note: {n}" for n in s.notes),
        f"  violations: {len(s.violations)}" + (f" ({by_kind})" if by_kind else ""),
    ]
    lines += [f"    {x.at}s {x.invariant}: {x.detail}" for x in s.violations[:30]]
    return "\n".join(lines)


def write(
    opts: Options,
    s: Summary,
    t: list[float],
    v: dict[str, list[float]],
    cpu_cores: list[float],
    marks: list[tuple[float, str]],
) -> dict[str, str]:
    """`report.html`, one PNG per chart and `summary.json` in the report folder; their paths (also kept in
    `s.report`). `t` and `v` are the sampled series, `marks` the faults (start, kind) marked on every chart."""
    d = Path(opts.report_dir)
    charts = {
        "throughput": Chart("Pods bound per second", t, {"bound/s": v.get("throughput", [])}, markers=marks),
        "pending": Chart("Pending pods (ours, unbound)", t, {"pending": v.get("pending", [])}, markers=marks),
        "latency": Chart(
            "Creation-to-bound latency (ms)",
            t,
            {"p50": v.get("latency_p50", []), "p99": v.get("latency_p99", [])},
            markers=marks,
        ),
        "memory": Chart(
            "Scheduler RSS (MiB)",
            t,
            {"leader": v.get("rss_leader", []), "all replicas": v.get("rss_total", [])},
            markers=marks,
        ),
        "cpu": Chart(
            "Scheduler CPU (cores, all replicas) and the leader's mean cycle (s)",
            t,
            {"cores": cpu_cores, "cycle s": [x / 1000 for x in v.get("cycle_ms", [])]},
            markers=marks,
        ),
    }
    rows = (
        "".join(f"<tr><td>{x.at}</td><td>{x.invariant}</td><td>{x.detail}</td></tr>" for x in s.violations)
        or "<tr><td colspan=3>none</td></tr>"
    )
    summary_html = (
        f"<pre>{text(opts, s)}</pre><h2>Violations</h2><table border=1 cellpadding=3>"
        f"<tr><th>t (s)</th><th>invariant</th><th>detail</th></tr>{rows}</table>"
    )
    paths = write_report(d, f"caldera soak, {opts.minutes:g} min, seed {opts.seed}", charts, summary_html)
    s.report = {k: str(p) for k, p in paths.items()}
    (d / "summary.json").write_text(json.dumps(asdict(s), indent=2, default=str))
    s.report["json"] = str(d / "summary.json")
    return s.report
