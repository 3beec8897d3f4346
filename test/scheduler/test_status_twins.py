"""The status updater looks again only at the jobs that may have changed since its last cycle
(scheduler/status.py ``observe``) and writes, and records events, exactly as if it looked at every
job every cycle.

The scenario is a stream: gangs arrive (their PodGroups Pending, so enqueue lets them in), are
placed and bound, run and finish (pods deleted; the PodGroup deleted too or left with no pod), a
gang too big for any node fails every cycle until a big node joins, a PodGroup of another scheduler
sits beside them, PodGroup statuses and pod conditions come back from the API server (some while a
session runs, some between cycles), a reader takes a snapshot in between, one job's status fails to
compute once, and the clock jumps past the event repeat interval. Two updaters observe every result
of the same loop: one as the binary runs it, one that looks at every job every cycle. Every cycle
they must queue the same writes and record the same events, in the same order."""

from __future__ import annotations

import random
from typing import Any

import msgspec
import pytest

from caldera.cache.store import ClusterCache
from caldera.config.conf import DEFAULT_CONF, parse_conf
from caldera.framework.model import TaskStatus
from caldera.framework.objects import Pod, PodGroup
from caldera.framework.result import SessionResult
from caldera.hack.scenario import gang, load, node, pod, podgroup
from caldera.scheduler import events as events_module
from caldera.scheduler import status as status_module
from caldera.scheduler.loop import RecordingBinder, SchedulerLoop
from caldera.scheduler.registry import builtin_registry
from caldera.scheduler.status import EVENT_REPEAT, StatusUpdater


class EveryJob(StatusUpdater):
    """Looks at every job every cycle (its memo of each job's last computed state still applies)."""

    def observe(self, result: SessionResult | None) -> None:
        self._seq = 0
        super().observe(result)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def logged(updater: StatusUpdater, log: list[tuple[Any, ...]], looks: list[str]) -> StatusUpdater:
    """Every write the updater queues and every event it records, in order, into ``log``; every
    job it looks at into ``looks``."""
    queue, record, look = updater._queue, updater.events.record, updater._look

    def queued(write: Any) -> None:
        log.append(("write", write.kind, write.namespace, write.name, write.body))
        queue(write)

    def recorded(ref: dict[str, str], etype: str, reason: str, message: str) -> None:
        log.append(("event", dict(ref), etype, reason, message))
        record(ref, etype, reason, message)

    def looked(key: str, *args: Any) -> None:
        looks.append(key)
        look(key, *args)

    updater._queue = queued  # type: ignore[method-assign]
    updater.events.record = recorded  # type: ignore[method-assign]
    updater._look = looked  # type: ignore[method-assign]
    return updater


class Stream:
    def __init__(self) -> None:
        registry = builtin_registry()
        conf = parse_conf(DEFAULT_CONF, registry)
        self.cache = ClusterCache()
        self.binder = RecordingBinder()
        self.clock = Clock()
        self.logs: tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]] = ([], [])
        self.looks: tuple[list[str], list[str]] = ([], [])
        self.fast = logged(StatusUpdater(None, self.cache, clock=self.clock), self.logs[0], self.looks[0])  # type: ignore[arg-type]
        self.full = logged(EveryJob(None, self.cache, clock=self.clock), self.logs[1], self.looks[1])  # type: ignore[arg-type]
        self.loop = SchedulerLoop(self.cache, lambda: conf, registry, self.binder, on_cycle=self._observe)
        decide = self.loop.decide

        def decide_meanwhile(snapshot: Any = None, started: float | None = None) -> Any:
            out = decide(snapshot, started)
            if self.meanwhile:
                self.write_back()  # the API server's answers arrive while the session runs
            return out

        self.loop.decide = decide_meanwhile  # type: ignore[method-assign]
        self.meanwhile = False
        self.starting: list[tuple[str, str]] = []
        #: what the two logs held (and agreed on), every cycle's in turn
        self.compared: list[tuple[Any, ...]] = []
        self.written = 0

    def _observe(self, result: SessionResult | None, duration: float, error: BaseException | None) -> None:
        assert error is None and result is not None
        self.fast.observe(result)
        self.full.observe(result)
        fast, full = self.logs
        assert fast == full
        self.compared.extend(fast)
        fast.clear()
        full.clear()

    def write_back(self) -> None:
        """What the API server does with the queued writes, as the watch brings it back: the PodGroup's
        status replaced, the pod's PodScheduled condition set. Both updaters queued the same."""
        assert {k: w.body for k, w in self.fast._pending.items()} == {
            k: w.body for k, w in self.full._pending.items()
        }
        for (kind, namespace, name), write in self.fast._pending.items():
            self.written += 1
            if kind == "podgroup":
                current = self.cache.podgroup(f"{namespace}/{name}")
                if current is not None:
                    doc = msgspec.to_builtins(current)
                    doc["status"] = write.body["status"]
                    self.cache.upsert_podgroup(msgspec.convert(doc, PodGroup))
            elif kind == "pod":
                task = self.cache.find_task(namespace, name)
                if task is not None:
                    doc = msgspec.to_builtins(task.pod)
                    doc["status"]["conditions"] = write.body["status"]["conditions"]
                    self.cache.upsert_pod(msgspec.convert(doc, Pod))
        for updater in (self.fast, self.full):
            updater._pending.clear()
            for write in updater.events.due():
                updater.events.written(write, True)

    def cycle(self, meanwhile: bool) -> SessionResult:
        self.meanwhile = meanwhile
        # the kubelet: last cycle's pods run now
        for task_uid, node_name in self.starting:
            task = self.cache.task(task_uid)
            if task is not None:
                doc = msgspec.to_builtins(task.pod)
                doc["spec"]["nodeName"] = node_name
                doc["status"]["phase"] = "Running"
                self.cache.upsert_pod(msgspec.convert(doc, Pod))
        result = self.loop.run_once()
        assert result is not None
        for p in result.placements:
            self.cache.confirm_bound(p.task.uid)
        self.starting = [(p.task.uid, p.node) for p in result.placements]
        if not meanwhile:
            self.write_back()
        self.clock.now += 1.0
        return result


def pending_gang(name: str, size: int, cpu: str) -> tuple[PodGroup, list[Pod]]:
    """A gang whose PodGroup is Pending, as a new one is: the enqueue action lets it in."""
    _, pods = gang(name, size, cpu=cpu, namespace="team-a")
    return podgroup(name, min_member=size, namespace="team-a", phase="Pending"), pods


@pytest.fixture
def fixed_stamps(monkeypatch: pytest.MonkeyPatch) -> None:
    """One timestamp for every write and event (the two updaters run a moment apart)."""
    monkeypatch.setattr(status_module, "now_rfc3339", lambda: "2026-01-01T00:00:00Z")
    monkeypatch.setattr(events_module, "now_rfc3339", lambda: "2026-01-01T00:00:00Z")


def test_a_stream_is_written_as_by_looking_at_every_job(
    fixed_stamps: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    stream = Stream()
    load(stream.cache, nodes=[node(f"n{i}", cpu="8", memory="32Gi") for i in range(3)])
    # Another scheduler's PodGroup and pod: a job with no pod of ours, never written.
    load(
        stream.cache,
        podgroups=[podgroup("theirs", namespace="team-b")],
        pods=[pod("theirs-0", namespace="team-b", group="theirs", scheduler="volcano")],
    )
    big_pg, big_pods = pending_gang("too-big", 2, cpu="12")
    load(stream.cache, podgroups=[big_pg], pods=big_pods)
    observe_job = StatusUpdater._observe_job
    failing = {"key": ""}

    def sometimes_failing(self: StatusUpdater, key: str, job: Any) -> None:
        if key == failing["key"]:
            raise RuntimeError("a status that cannot be computed")
        observe_job(self, key, job)

    monkeypatch.setattr(StatusUpdater, "_observe_job", sometimes_failing)
    running: list[tuple[PodGroup, list[Pod]]] = []
    unschedulable_seen = False
    for c in range(18):
        pg, pods = pending_gang(f"g{c}", 2, cpu="1")
        load(stream.cache, podgroups=[pg], pods=pods)
        if len(running) > 3:
            done_pg, done_pods = running.pop(0)
            for p in done_pods:
                stream.cache.delete_pod(p)
            if c % 2:
                stream.cache.delete_podgroup(done_pg)
        if c == 12:
            load(stream.cache, nodes=[node("big", cpu="32", memory="128Gi")])  # too-big fits now
        if c % 5 == 2:
            stream.cache.snapshot()  # a reader's snapshot: the next one does not follow the last
        if c == 9:
            stream.clock.now += EVENT_REPEAT + 1  # unchanged events may be sent again by now
        failing["key"] = "team-a/g6" if c == 6 else ""  # a new job: looked at
        result = stream.cycle(meanwhile=bool(c % 2))
        running.append((pg, pods))
        big = result.jobs.get("team-a/too-big")
        unschedulable_seen = unschedulable_seen or bool(big is not None and big.job_fit_error)
    assert unschedulable_seen
    # Writes and events were compared, not two empty logs: every gang's status as it was placed
    # and as its pods ran (the last one's pods have not started yet), the big gang's as it failed
    # and once it was placed, its pods' conditions and its event.
    statuses = [(e[3], e[4]["status"]) for e in stream.compared if e[:2] == ("write", "podgroup")]
    assert {name for name, st in statuses if st["phase"] == "Running" and st["running"] == 2} == {
        *(f"g{c}" for c in range(17)),
        "too-big",
    }
    big_conditions = [c["type"] for name, st in statuses if name == "too-big" for c in st["conditions"]]
    assert big_conditions[0] == "Unschedulable" and "Scheduled" in big_conditions
    assert sorted(e[3] for e in stream.compared if e[:2] == ("write", "pod")) == ["too-big-0", "too-big-1"]
    assert [(e[1]["name"], e[3]) for e in stream.compared if e[0] == "event"] == [
        ("too-big", "FailedScheduling")
    ]
    # ... and the updater as the binary runs it looked at fewer jobs than one looking at all
    assert len(stream.looks[0]) < len(stream.looks[1]) * 0.7


def test_a_dropped_write_makes_the_next_cycle_look_at_every_job() -> None:
    """A PodGroup status write the API server rejects for good is forgotten; the next cycle looks at
    every job (so that the wish is made again), not only the changed ones."""
    cache = ClusterCache()
    load(cache, nodes=[node("n0", cpu="8", memory="32Gi")])
    for name in ("a", "b"):  # running gangs of one pod
        load(
            cache,
            podgroups=[podgroup(name, phase="Running")],
            pods=[pod(f"{name}-0", group=name, cpu="1", node_name="n0", phase="Running")],
        )
    registry = builtin_registry()
    conf = parse_conf(DEFAULT_CONF, registry)
    results: list[SessionResult] = []
    loop = SchedulerLoop(
        cache, lambda: conf, registry, RecordingBinder(), on_cycle=lambda r, d, e: results.append(r)
    )  # type: ignore[arg-type]
    looks: list[str] = []
    updater = logged(StatusUpdater(None, cache), [], looks)  # type: ignore[arg-type]
    for _ in range(2):
        loop.run_once()
        updater.observe(results[-1])
    looks.clear()
    loop.run_once()
    updater.observe(results[-1])
    assert looks == []  # nothing changed: nothing looked at
    updater._observed.clear()  # what _send does with a write dropped for good
    updater._seq = 0
    loop.run_once()
    updater.observe(results[-1])
    assert sorted(looks) == ["default/a", "default/b"]


MESSAGES = ("0/3 nodes are available: 3 Insufficient cpu.", "queue default is overused")


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_sessions_marks_and_the_caches_changes_in_any_order(
    fixed_stamps: None, monkeypatch: pytest.MonkeyPatch, seed: int
) -> None:
    """Results made by hand from the cache's snapshots, with what sessions leave on job copies set at
    random (a failure for the gang or a pod, a phase such as the one enqueue sets, which the cache
    then assumes, a task's status changed and changed back, or changed), and at random between cycles: pods start, finish, arrive or go, PodGroup statuses
    come back from the API (before the snapshot or while the session runs) or are changed by someone
    else, a reader takes a snapshot, the clock jumps past the event repeat interval. Both updaters
    queue the same writes and record the same events every cycle."""
    rng = random.Random(seed)
    observe_job = StatusUpdater._observe_job
    failing: set[str] = set()

    def sometimes_failing(self: StatusUpdater, key: str, job: Any) -> None:
        if key in failing:
            raise RuntimeError("a status that cannot be computed")
        observe_job(self, key, job)

    monkeypatch.setattr(StatusUpdater, "_observe_job", sometimes_failing)
    cache = ClusterCache()
    clock = Clock()
    logs: tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]] = ([], [])
    looks: tuple[list[str], list[str]] = ([], [])
    fast = logged(StatusUpdater(None, cache, clock=clock), logs[0], looks[0])  # type: ignore[arg-type]
    full = logged(EveryJob(None, cache, clock=clock), logs[1], looks[1])  # type: ignore[arg-type]
    load(cache, nodes=[node(f"n{i}", cpu="8", memory="32Gi") for i in range(3)])
    names = [f"j{i}" for i in range(8)]
    for name in names:
        load(
            cache,
            podgroups=[podgroup(name, min_member=2, phase=rng.choice(["Pending", "Inqueue", "Running"]))],
            pods=[pod(f"{name}-{k}", group=name, cpu="1") for k in range(2)],
        )
    compared = 0

    def write_back() -> None:
        for (kind, namespace, name), write in fast._pending.items():
            if kind == "podgroup" and cache.podgroup(f"{namespace}/{name}") is not None:
                doc = msgspec.to_builtins(cache.podgroup(f"{namespace}/{name}"))
                doc["status"] = write.body["status"]
                cache.upsert_podgroup(msgspec.convert(doc, PodGroup))
            elif kind == "pod":
                for task in list(cache.tasks.values()):
                    if (task.namespace, task.name) == (namespace, name):
                        doc = msgspec.to_builtins(task.pod)
                        doc["status"]["conditions"] = write.body["status"]["conditions"]
                        cache.upsert_pod(msgspec.convert(doc, Pod))
        for updater in (fast, full):
            updater._pending.clear()
            for write in updater.events.due():
                updater.events.written(write, True)

    def someone_changes_a_podgroup() -> None:
        key = f"default/{rng.choice(names)}"
        if cache.podgroup(key) is not None:
            doc = msgspec.to_builtins(cache.podgroup(key))
            doc["status"] = {
                "phase": rng.choice(["Pending", "Inqueue", "Running"]),
                "running": rng.randint(0, 2),
            }
            cache.upsert_podgroup(msgspec.convert(doc, PodGroup))

    def a_pod_changes() -> None:
        name = rng.choice(names)
        tasks = [t for t in cache.tasks.values() if t.job == f"default/{name}"]
        action = rng.choice(["run", "finish", "arrive", "go"])
        if action == "arrive" or not tasks:
            load(cache, pods=[pod(f"{name}-x{rng.randint(0, 10**6)}", group=name, cpu="1")])
            return
        task = rng.choice(tasks)
        if action == "go":
            cache.delete_pod(task.pod)
            return
        doc = msgspec.to_builtins(task.pod)
        doc["spec"]["nodeName"] = rng.choice(["n0", "n1", "n2"])
        doc["status"]["phase"] = "Running" if action == "run" else "Succeeded"
        cache.upsert_pod(msgspec.convert(doc, Pod))

    for _ in range(60):
        for _ in range(rng.choice([0, 0, 1, 2])):
            rng.choice([a_pod_changes, someone_changes_a_podgroup])()
        if rng.random() < 0.15:
            cache.snapshot()  # a reader's
        snap = cache.snapshot()
        for job in snap.jobs.values():  # what a session leaves on the copies
            roll = rng.random() * 2  # about one job in four marked
            if roll < 0.15:
                job.job_fit_error = rng.choice(MESSAGES)
            elif roll < 0.25 and job.tasks:
                job.fit_errors[next(iter(job.tasks))] = rng.choice(MESSAGES)
            elif roll < 0.3:
                job.phase = rng.choice(["Inqueue", "Pending"])  # enqueue's, or any other
            elif roll < 0.4 and job.tasks:
                task = next(iter(job.tasks.values()))
                before = task.status
                job.update_task_status(task, TaskStatus.ALLOCATED)
                job.update_task_status(task, before)  # a statement discarded
            elif roll < 0.5 and job.count(TaskStatus.PENDING):
                for task in list(job.tasks_in(TaskStatus.PENDING)):
                    job.update_task_status(task, TaskStatus.ALLOCATED)  # a statement committed
        # now and then a job's status cannot be computed (looked at again next cycle)
        failing.clear()
        if rng.random() < 0.2:
            failing.add(f"default/{rng.choice(names)}")
        if rng.random() < 0.3:
            write_back()  # while the session runs
        if rng.random() < 0.2:
            someone_changes_a_podgroup()
        result = SessionResult(jobs=snap.jobs, seq=snap.seq, changed_jobs=snap.changed_jobs)
        cache.apply(result)  # as the loop does before observers run: an enqueued job is assumed Inqueue
        fast.observe(result)
        full.observe(result)
        assert logs[0] == logs[1]
        compared += len(logs[0])
        logs[0].clear()
        logs[1].clear()
        if rng.random() < 0.6:
            write_back()
        clock.now += EVENT_REPEAT + 1 if rng.random() < 0.2 else 1.0
    assert compared > 60
    assert len(looks[0]) < len(looks[1])
