"""The one mechanism of cross-cycle reuse (framework/carry.py): values are kept by generation and
offered to the next session only once the cycle that kept them has finished and been applied."""

from __future__ import annotations

from typing import ClassVar

import pytest

from caldera.cache.store import ClusterCache
from caldera.config.conf import DEFAULT_CONF, parse_conf
from caldera.framework.carry import CarryBook, JobCarry, Kept, carry_user, job_generation
from caldera.framework.model import TaskStatus
from caldera.framework.plugin import Plugin
from caldera.framework.session import Session
from caldera.hack.scenario import gang, load, node, pod, podgroup, priority_class
from caldera.scheduler.loop import RecordingBinder, SchedulerLoop
from caldera.scheduler.registry import builtin_registry


class Remembered:
    """A test's own key (registered below, as a product user registers its own)."""


carry_user(Remembered, "test: what the Remembering plugin saw")


def test_a_kept_value_is_offered_only_once_committed():
    book = CarryBook()
    first = Kept(book.offer())
    first.keep(Remembered, "seen")
    assert Kept(book.offer()).carried(Remembered) is None  # not committed yet
    book.commit(first.kept)
    assert Kept(book.offer()).carried(Remembered) == "seen"
    book.drop()
    assert Kept(book.offer()).carried(Remembered) is None


def test_a_book_without_reuse_never_offers_anything():
    book = CarryBook(enabled=False)
    kept = Kept(book.offer())
    kept.keep(Remembered, "seen")
    book.commit(kept.kept)
    assert Kept(book.offer()).carried(Remembered) is None


def test_an_unregistered_key_is_refused():
    class Stray:
        pass

    with pytest.raises(KeyError, match="not a registered carry user"):
        Kept(None).keep(Stray, 1)


def _jobs(cache: ClusterCache) -> dict:
    return cache.snapshot().jobs


def test_a_job_keeps_its_generation_until_something_a_decision_reads_changes():
    pg, pods = gang("a", 2)
    cache = load(ClusterCache(), nodes=[node("n1")], podgroups=[pg], pods=pods)
    first = job_generation(_jobs(cache)["default/a"])
    assert first is not None
    assert job_generation(_jobs(cache)["default/a"]) == first  # the other slot's copy: same generation
    cache.upsert_pod(pod("a-2", group="a"))  # a task more
    second = job_generation(_jobs(cache)["default/a"])
    assert second is not None and second != first
    cache.upsert_priority_class(priority_class("urgent", 100))  # priorities may read otherwise
    third = job_generation(_jobs(cache)["default/a"])
    assert third is not None and third not in (first, second)


def test_a_podgroup_deleted_and_created_again_under_its_name_is_a_new_generation():
    """The Deployment 0 <-> 1 flip: a carried value of the old PodGroup must never serve the new one."""
    cache = load(ClusterCache(), nodes=[node("n1")], podgroups=[podgroup("flip", uid="old")])
    old = job_generation(_jobs(cache)["default/flip"])
    cache.delete_podgroup(podgroup("flip", uid="old"))
    cache.upsert_podgroup(podgroup("flip", uid="new"))
    new = job_generation(_jobs(cache)["default/flip"])
    assert old is not None and new is not None and new != old


def test_a_copy_its_session_changed_has_no_generation():
    pg, pods = gang("a", 2)
    cache = load(ClusterCache(), nodes=[node("n1")], podgroups=[pg], pods=pods)
    job = _jobs(cache)["default/a"]
    job.update_task_status(next(iter(job.tasks.values())), TaskStatus.ALLOCATED)
    assert job_generation(job) is None


def test_job_carry_gives_last_cycles_value_for_the_same_generation_only():
    pg_a, pods_a = gang("a", 1)
    pg_b, pods_b = gang("b", 1)
    cache = load(ClusterCache(), nodes=[node("n1")], podgroups=[pg_a, pg_b], pods=pods_a + pods_b)
    book = CarryBook()
    kept = Kept(book.offer())
    values: JobCarry[str] = JobCarry(kept, Remembered)
    for job in _jobs(cache).values():
        values.put(job, job_generation(job), f"value of {job.uid}")
    book.commit(kept.kept)
    cache.upsert_pod(pod("b-1", group="b"))  # b changes, a does not
    jobs = _jobs(cache)
    again: JobCarry[str] = JobCarry(Kept(book.offer()), Remembered)
    assert again.get(jobs["default/a"], job_generation(jobs["default/a"])) == (True, "value of default/a")
    assert again.get(jobs["default/b"], job_generation(jobs["default/b"])) == (False, None)


class Remembering(Plugin):
    """Keeps, at every session's open, the number of sessions it has seen so far (carried)."""

    name: ClassVar[str] = "remembering"
    seen: ClassVar[list[object]] = []

    def on_session_open(self, ssn: Session) -> None:
        carried = ssn.carry.carried(Remembered)
        Remembering.seen.append(carried)
        ssn.carry.keep(Remembered, (carried or 0) + 1)


class Failing:
    """An action that fails the cycle when told to."""

    fail = False

    def __init__(self, arguments: object) -> None:
        pass

    def execute(self, ssn: Session) -> None:
        if Failing.fail:
            raise RuntimeError("this cycle fails")


def test_what_a_failed_cycle_kept_is_never_offered():
    registry = builtin_registry()
    registry.plugins["remembering"] = Remembering
    registry.actions["failing"] = Failing  # type: ignore[assignment]
    conf_text = DEFAULT_CONF.replace('actions: "', 'actions: "failing, ').replace(
        "- name: priority", "- name: priority\n  - name: remembering", 1
    )
    conf = parse_conf(conf_text, registry)
    cache = load(ClusterCache(), nodes=[node("n1")])
    loop = SchedulerLoop(cache, lambda: conf, registry, RecordingBinder())
    Remembering.seen.clear()
    loop.run_once()
    loop.run_once()
    Failing.fail = True
    try:
        assert loop.run_once() is None
    finally:
        Failing.fail = False
    loop.run_once()
    # two applied cycles counted 1, 2; the failed one kept 3, which was dropped with what came before
    assert Remembering.seen == [None, 1, 2, None]
