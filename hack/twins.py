"""The shared twin-check harness of cross-cycle reuse (``framework.carry``).

Every value a cycle keeps for the next must give the next cycle exactly what the full path gives.
``Twins`` runs the same cluster through two loops side by side: one as the binary runs it (what a
cycle keeps is offered to the next), one with nothing carried (``CarryBook(enabled=False)``), and
compares, every cycle, the placements and evictions, the failures recorded on every job, the
explanation documents, drf's and proportion's shares, and the PodGroup status writes and Events the
status updater queues for the result.

Every registered user of the mechanism (``framework.carry.USERS``) must be exercised by scenarios run
through ``Twins``: ``test/framework/test_carry_twins.py`` fails when one is not (``Twins.kept`` records
every key a twin kept), so a new user lands with its scenarios or not at all.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from unittest import mock

import msgspec

from caldera.cache.store import ClusterCache
from caldera.config.conf import DEFAULT_CONF, parse_conf
from caldera.framework.carry import CarryBook
from caldera.framework.objects import Pod, PodGroup
from caldera.framework.result import SessionResult
from caldera.hack.scenario import load
from caldera.scheduler import events as events_module
from caldera.scheduler import status as status_module
from caldera.scheduler.explain import BUILT_AT
from caldera.scheduler.loop import RecordingBinder, SchedulerLoop
from caldera.scheduler.registry import builtin_registry
from caldera.scheduler.status import StatusUpdater

#: every key kept by a twin that reuses, over every ``Twins`` of the process (see the module)
KEPT: set[object] = set()


class TwinLoop(SchedulerLoop):
    """The loop as the binary runs it, but for explain's reuse by age (a job whose one-line reason
    is unchanged keeps its document up to 5 s, even if the detail moved, by design): off, so that
    what is compared is exact reuse alone. ``meanwhile`` runs after the session decided and before
    its result is applied (as the watch does while a session runs in its thread)."""

    meanwhile: Callable[[ClusterCache], None] | None = None

    def __init__(self, *args: Any, reuse: bool, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.explain_reuse_seconds = 0.0
        self.carry = CarryBook(enabled=reuse)

    def decide(self, snapshot: Any = None, started: float | None = None) -> Any:
        out = super().decide(snapshot, started)
        if self.meanwhile is not None:
            self.meanwhile(self.cache)  # type: ignore[arg-type]
        return out


class Twins:
    """Two caches fed the same objects, each with its loop and status updater; ``cycle()`` runs both
    and checks that they decided, explained, shared and wrote the same."""

    def __init__(self, conf_text: str = DEFAULT_CONF, clock: Callable[[], float] | None = None) -> None:
        registry = builtin_registry()
        conf = parse_conf(conf_text, registry)
        self.caches = (ClusterCache(), ClusterCache())
        self.binders = (RecordingBinder(), RecordingBinder())
        self.fast = TwinLoop(self.caches[0], lambda: conf, registry, self.binders[0], reuse=True)
        self.full = TwinLoop(self.caches[1], lambda: conf, registry, self.binders[1], reuse=False)
        self.clock = clock or (lambda: 1000.0)
        self.updaters = tuple(
            StatusUpdater(None, cache, clock=self.clock)  # type: ignore[arg-type]
            for cache in self.caches
        )
        self.results: list[SessionResult] = []

    def each(self, method: str, *args: Any) -> None:
        for cache in self.caches:
            getattr(cache, method)(*args)

    def load(self, **objects: Any) -> None:
        for cache in self.caches:
            load(cache, **objects)

    def set_meanwhile(self, meanwhile: Callable[[ClusterCache], None] | None) -> None:
        self.fast.meanwhile = self.full.meanwhile = meanwhile

    def cycle(self, bind: bool = True) -> SessionResult:
        fast, full = self.fast.run_once(), self.full.run_once()
        assert fast is not None and full is not None
        KEPT.update(fast.kept)
        assert not self.full.carry.keys()  # nothing is ever offered to the full path
        assert placements(fast) == placements(full)
        assert evictions(fast) == evictions(full)
        assert failures(fast) == failures(full)
        assert documents(fast) == documents(full)
        assert shares(fast) == shares(full)
        writes = []
        # Both updaters observe at one wall-clock second: the conditions' lastTransitionTime is the
        # time of writing, and the two observations must not straddle a second's boundary.
        stamp = status_module.now_rfc3339()
        with (
            mock.patch.object(status_module, "now_rfc3339", lambda: stamp),
            mock.patch.object(events_module, "now_rfc3339", lambda: stamp),
        ):
            for updater, result in zip(self.updaters, (fast, full), strict=True):
                updater.observe(result)
                writes.append({key: write.body for key, write in updater._pending.items()})
        assert writes[0] == writes[1]
        if bind:
            # as the binder would: what was placed is bound
            for cache, result in zip(self.caches, (fast, full), strict=True):
                for p in result.placements:
                    cache.confirm_bound(p.task.uid)
        self.results.append(fast)
        return fast

    def write_back(self) -> int:
        """What the API server does with the status writes both updaters queued, as the watch brings
        it back: the PodGroup's status replaced, the pod's conditions set. Returns the writes."""
        written = 0
        for updater, cache in zip(self.updaters, self.caches, strict=True):
            for (kind, namespace, name), write in updater._pending.items():
                written += 1
                if kind == "podgroup":
                    current = cache.podgroup(f"{namespace}/{name}")
                    if current is not None:
                        doc = msgspec.to_builtins(current)
                        doc["status"] = write.body["status"]
                        cache.upsert_podgroup(msgspec.convert(doc, PodGroup))
                elif kind == "pod":
                    task = cache.find_task(namespace, name)
                    if task is not None:
                        doc = msgspec.to_builtins(task.pod)
                        doc["status"]["conditions"] = write.body["status"]["conditions"]
                        cache.upsert_pod(msgspec.convert(doc, Pod))
            updater._pending.clear()
        return written // 2


def placements(result: SessionResult) -> list[tuple[str, str]]:
    return sorted((p.task.name, p.node) for p in result.placements)


def evictions(result: SessionResult) -> list[tuple[str, str]]:
    return sorted((e.task.name, e.reason) for e in result.evictions)


def failures(result: SessionResult) -> dict[str, tuple[str, list[tuple[str, str]]]]:
    """Every job's recorded failure, per task in the order it was recorded (the one-line reason
    lists the first three in that order)."""
    return {
        uid: (job.job_fit_error, [(job.tasks[t].name, msg) for t, msg in job.fit_errors.items()])
        for uid, job in result.jobs.items()
    }


def documents(result: SessionResult) -> dict[str, dict[str, Any]]:
    return {
        uid: {k: v for k, v in doc.items() if k not in (BUILT_AT, "cycle")}
        for uid, doc in result.report.explanations.items()
    }


def shares(result: SessionResult) -> tuple[Any, ...]:
    """drf's job and namespace shares and proportion's queue figures, at the session's close."""
    report = result.report
    return report.job_shares, report.namespace_shares, report.queue_shares


def replayed(result: SessionResult) -> int:
    return int(result.report.allocate_stats.get("replayed", 0))
