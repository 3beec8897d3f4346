"""The soak's vGPU metric check judges pod by pod: a pod whose series the scheduler exports while the
API has it on no device (or the other way round) for longer than the allowed lag is a violation; a
steady trickle of pods, each a moment behind, is not."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import aiohttp
import pytest

from caldera.hack.soak import metric_checks
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


# -- the whole check, against a scheduler that trails the API by a known lag -----------------------------
RUN = 30  # seconds each pod runs


class World:
    """The API over time: vgpu-i is bound at second i and finishes at second i + RUN; the mirror shows the
    API of the clock's time. The scheduler exports the pods on a device ``lag`` seconds ago; its Lease
    is read through an API that takes ``lookup`` seconds to answer (an API server under load)."""

    def __init__(self, checker: Checker, lag: float, lookup: float) -> None:
        self.checker = checker
        self.lag = lag
        self.lookup = lookup
        self.t = 0.0
        self.advance(0.0)

    @staticmethod
    def on_device(t: float) -> set[str]:
        return {f"soak/vgpu-{i}" for i in range(200) if i <= t < i + RUN}

    def advance(self, seconds: float) -> None:
        self.t += seconds
        objects = {}
        for i in range(200):
            if i > self.t:
                continue
            objects[f"soak/vgpu-{i}"] = {
                "metadata": {"namespace": "soak", "name": f"vgpu-{i}"},
                "spec": {
                    "nodeName": "vgpu-0",
                    "containers": [{"resources": {"limits": {"volcano.sh/vgpu-number": "1"}}}],
                },
                "status": {"phase": "Running" if self.t < i + RUN else "Succeeded"},
            }
        self.checker.pods.objects = objects

    def now(self) -> float:
        return self.t

    async def scrape(self, http: Any, base: str) -> dict[str, Any]:
        exported = self.on_device(self.t - self.lag)
        series = [({"podNamespace": "soak", "podName": k.split("/")[1]}, 1024.0) for k in sorted(exported)]
        return {
            "volcano_vgpu_device_shared_number": [({}, float(len(exported)))],
            "volcano_vgpu_device_memory_allocation_for_a_certain_pod": series,
        }

    def live(self) -> list[Any]:
        return [SimpleNamespace(sched=SimpleNamespace(pid=1, base="http://replica-1"))]

    async def leader(self, api: Any) -> Any:
        self.advance(self.lookup)  # the pods go on binding and finishing while the Lease is read
        return self.live()[0]


class NoHttp:
    def get(self, *args: Any, **kwargs: Any) -> Any:
        raise aiohttp.ClientConnectionError("no replica here")


async def run_checks(lag: float, lookup: float, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    checker = Checker(api=None, config=CheckerConfig(), t0=0.0)  # type: ignore[arg-type]
    world = World(checker, lag=lag, lookup=lookup)
    monkeypatch.setattr(metric_checks, "scrape", world.scrape)
    summary = SimpleNamespace(metrics_checked=[], metrics_skipped=[])
    m = MetricChecks(
        opts=SimpleNamespace(replicas=1),  # type: ignore[arg-type]
        supervisor=world,  # type: ignore[arg-type]
        checker=checker,
        summary=summary,  # type: ignore[arg-type]
        timeline=world,  # type: ignore[arg-type]
    )
    while world.t < 150:
        world.advance(2.0)  # the sampler's interval
        await m.check(api=None, http=NoHttp())  # type: ignore[arg-type]
    return [v.detail for v in checker.violations]


async def test_an_api_slow_to_name_the_leader_is_not_counted_as_the_schedulers_lag(monkeypatch):
    # The scheduler trails the API by 3 s; reading the Lease takes 9 s. Judged against the API as it
    # was after the Lease came back, a pod that finished just after the scrape looked 12 s stale.
    assert await run_checks(lag=3.0, lookup=9.0, monkeypatch=monkeypatch) == []


async def test_a_scheduler_that_trails_the_api_past_the_bound_is_still_caught(monkeypatch):
    for lookup in (0.0, 9.0):
        found = await run_checks(lag=VGPU_LAG + 5, lookup=lookup, monkeypatch=monkeypatch)
        assert found, lookup
        assert "disagree with the API for over" in found[0]
        assert "the leader's cache: soak/vgpu-" in found[0] and "no answer" in found[0]
