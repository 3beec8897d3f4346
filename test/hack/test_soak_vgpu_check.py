"""The soak's vGPU metric check judges pod by pod: a pod whose series the scheduler exports while the
API has it on no device (or the other way round) for longer than the allowed lag is a violation; a
steady trickle of pods, each a moment behind, is not."""

from __future__ import annotations

from typing import Any

from caldera.hack.soak.checker import Checker, CheckerConfig, FaultWindow
from caldera.hack.soak.metric_checks import VGPU_LAG, MetricChecks


def checks(faults: list[FaultWindow] | None = None) -> MetricChecks:
    checker = Checker(api=None, config=CheckerConfig(), t0=0.0)  # type: ignore[arg-type]
    checker.faults = faults or []
    none: Any = None
    return MetricChecks(opts=none, supervisor=none, checker=checker, summary=none, timeline=none)


def test_a_trickle_of_pods_each_a_little_behind_is_no_violation():
    m = checks()
    truth: set[str] = set()
    exported: set[str] = set()
    for second in range(120):  # a pod lands every second and is exported two seconds later
        truth.add(f"soak/vgpu-{second}")
        exported = {p for p in truth if int(p.rsplit("-", 1)[1]) <= second - 2}
        assert m.vgpu_stale(float(second), exported, truth) == []
    assert exported != truth  # never once equal: the count of series trailed the pods throughout


def test_a_finished_pods_series_left_behind_is_a_violation_once_per_lag():
    m = checks()
    stale_at = []
    for second in range(40):
        # vgpu-7 finished at 0 s; its series is still exported
        if m.vgpu_stale(float(second), {"soak/vgpu-7", "soak/vgpu-8"}, {"soak/vgpu-8"}):
            stale_at.append(second)
    assert stale_at == [int(VGPU_LAG) + 1, 2 * (int(VGPU_LAG) + 1), 3 * (int(VGPU_LAG) + 1)]


def test_a_bound_pod_never_exported_is_a_violation_and_a_fault_extends_the_lag():
    quiet, faulty = checks(), checks([FaultWindow("drop-abort", 2.0, 3.0)])
    first = {}
    for name, m in (("quiet", quiet), ("faulty", faulty)):
        for second in range(30):
            if m.vgpu_stale(float(second), set(), {"soak/vgpu-1"}):
                first[name] = second
                break
    # a fault window of 1 s plus 2 s of recovery overlaps the wait: 3 s more allowed
    assert first == {"quiet": int(VGPU_LAG) + 1, "faulty": int(VGPU_LAG) + 4}
