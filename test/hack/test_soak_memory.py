"""The soak's memory judgment: a replica's RSS late in life against its RSS once warm, with room for
the pods the API came to hold meanwhile (a backlog's memory stays with the process after it drains),
and none for growth while the pods stay the same."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from caldera.hack.soak.checker import Checker, CheckerConfig
from caldera.hack.soak.churn import RSS_WARMUP, ChurnStats, halfway_record, judge_churn
from caldera.hack.soak.report import Summary
from caldera.hack.soak.sampler import RSS_PER_POD, judge_rss

MIB = 2**20


def replica(name: str, rss_mib: list[float], pods: list[int]) -> Any:
    """A replica sampled every 2 s (a stand-in for the supervisor's Proc)."""
    samples = [(2.0 * i, int(r * MIB), n) for i, (r, n) in enumerate(zip(rss_mib, pods, strict=True))]
    return SimpleNamespace(sched=SimpleNamespace(name=name), samples=samples)


def judged(*procs: Any) -> tuple[list[str], Summary]:
    checker = Checker(api=None, config=CheckerConfig(), t0=0.0)  # type: ignore[arg-type]
    summary = Summary()
    judge_rss(list(procs), summary, checker)
    return [v.detail for v in checker.violations if v.invariant == "memory"], summary


def test_growth_that_follows_the_pods_is_no_leak_and_growth_without_them_is() -> None:
    n = 100  # 200 s of samples: warm at 50-90 s, late from 160 s
    # 2,000 pods until 100 s, then a backlog to 12,000 by 140 s that drains; RSS keeps its peak
    pods = [2000 + 500 * min(max(i - 50, 0), 20) - 400 * max(i - 70, 0) for i in range(n)]
    per_pod = RSS_PER_POD * 0.8 / MIB
    backlog = [100 + per_pod * (max(pods[: i + 1]) - 2000) for i in range(n)]
    leak = [100 + 4.0 * i for i in range(n)]  # 4 MiB a sample with 2,000 pods throughout
    found, summary = judged(
        replica("backlog", backlog, pods),
        replica("leak", leak, [2000] * n),
    )
    assert found == [
        "leak: RSS grew from 238 MiB to 458 MiB while the API's pods went from 2000 to at most 2000"
        " (allowed 0 MiB for them)"
    ]
    by_name = {m["replica"]: m for m in summary.memory}
    assert (by_name["backlog"]["pods_warm"], by_name["backlog"]["pods_most"]) == (2000, 12000)
    # without the room for those pods, the backlog's RSS would have been judged a leak
    assert by_name["backlog"]["late_mib"] > 1.5 * by_name["backlog"]["warm_mib"] + 64


def test_a_replica_started_just_before_the_churns_half_way_is_not_judged_on_its_rss() -> None:
    """The churn's RSS judgement takes half-way as the reference: a replica replaced 0.4 s before it
    was still listing (53 MiB there, 137 MiB at the end, with as many pods): no reference at all. One
    warm by then is judged."""
    checker = Checker(api=None, config=CheckerConfig(), t0=0.0)  # type: ignore[arg-type]
    stats = ChurnStats()
    stats.replicas["replica-4"] = halfway_record(7, 53 * MIB, False, age=0.4)
    stats.replicas["replica-2"] = halfway_record(8, 53 * MIB, False, age=RSS_WARMUP + 1)
    for r in stats.replicas.values():
        r["rss_end"] = 137 * MIB
    judge_churn(checker, stats, {"pods": 100, "podgroups": 2, "queues": 1})
    assert [v.detail.split(":")[0] for v in checker.violations] == ["replica-2 rss"]
    assert stats.replicas["replica-4"]["note"].startswith("RSS not judged: started 0.4s before half-way")
