"""How the answers of a callback point's plugins combine, tier by tier: Volcano's tier semantics
(``pkg/scheduler/framework/session_plugins.go``). Order functions ask plugins tier by tier and the
first that decides wins; predicates must all pass; node scores add up; vote functions (enqueueable,
pipelined) stop at the first tier that permits; victim selection intersects within a tier and the
first tier that selects wins; victim tasks (shuffle) join within a tier and the first tier that selects
wins. Each callback kind can be switched off per plugin in the conf
(``CallbackPoint.levels`` leaves it out). The session (``framework/session.py``) answers with these.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from caldera.framework.callbacks import CallbackPoint, JobVoteFn, VictimTasksFn
from caldera.framework.model import JobInfo, TaskInfo

A = TypeVar("A")

#: what a vote or victim function answers besides its choice
PERMIT = 1
ABSTAIN = 0
REJECT = -1


def tiered_order(point: CallbackPoint[Callable[[Any, Any], int]], left: Any, right: Any) -> int:
    """Order functions: tier by tier, the first plugin that decides (non-zero) wins; 0 when none does."""
    for level in point.levels():
        for fn in level:
            result = fn(left, right)
            if result != 0:
                return -1 if result < 0 else 1
    return 0


def tiered_vote(point: CallbackPoint[JobVoteFn], job: JobInfo) -> bool:
    """Vote functions (enqueueable, pipelined): a REJECT anywhere says no; else the first tier with a
    PERMIT says yes; a job no plugin votes on passes."""
    for level in point.levels():
        found = False
        for fn in level:
            vote = fn(job)
            if vote < 0:
                return False
            if vote > 0:
                found = True
        if found:
            return True
    return True


def tiered_victims(
    point: CallbackPoint[Callable[[A, list[TaskInfo]], tuple[list[TaskInfo], int]]],
    actor: A,
    candidates: list[TaskInfo],
    refused: dict[str, str] | None = None,
) -> list[TaskInfo]:
    """Victim functions (preemptable, reclaimable, unified evictable; ``actor`` is the preemptor
    task, or the gang actions' :class:`EvictionContext`): within a tier the plugins' choices intersect (one
    that chooses nobody empties the tier); the first tier that selects someone wins.

    ``refused``, when given, is filled with candidate uid → the plugin that left it out: in the tier
    that decided (the first selecting one, else the first where a plugin did not abstain), the
    first plugin that did not choose it."""
    first_refusals: dict[str, str] | None = None
    for level in point.named_levels():
        init = False
        selected: list[TaskInfo] = []
        refusals: dict[str, str] = {}
        voted = False
        for name, fn in level:
            chosen, vote = fn(actor, candidates)
            if vote == ABSTAIN:
                continue
            voted = True
            if refused is not None:
                keep = {t.uid for t in chosen}
                for t in selected if init else candidates:
                    if t.uid not in keep:
                        refusals.setdefault(t.uid, name)
            if not chosen:
                selected = []
                break
            if not init:
                selected = list(chosen)
                init = True
            else:
                keep = {t.uid for t in chosen}
                selected = [t for t in selected if t.uid in keep]
        if selected:
            if refused is not None:
                refused.update(refusals)
            return selected
        if voted and first_refusals is None:
            first_refusals = refusals
    if refused is not None and first_refusals:
        refused.update(first_refusals)
    return []


def tiered_victim_tasks(
    point: CallbackPoint[VictimTasksFn], guards: CallbackPoint[VictimTasksFn], candidates: list[TaskInfo]
) -> list[TaskInfo]:
    """Volcano's ``Session.VictimTasks`` (pkg/scheduler/framework/session_plugins.go): within a tier
    the plugins' selections join (a task selected twice counts once); the first tier that selects
    someone wins. Volcano answers with a set; here the order is the selectors' (first selection
    first), which the guards read.

    Then every enabled guard (``add_victim_guard_fn``, any tier) filters the selection in that
    order. In Volcano the pdb plugin's filter is one more selector (``pdb.go`` OnSessionOpen,
    ``AddVictimTasksFns``): joined with rescheduling's choice in one tier it would add every running
    pod its budgets allow, and in an earlier tier it would decide alone. Caldera lets it narrow the
    selection instead, so shuffle evicts a subset of what Volcano's pdb-free selection would."""
    selected: list[TaskInfo] = []
    for level in point.levels():
        seen: set[str] = set()
        for fn in level:
            for task in fn(candidates):
                if task.uid not in seen:
                    seen.add(task.uid)
                    selected.append(task)
        if selected:
            break
    for guard in guards.flat():
        if not selected:
            break
        selected = guard(selected)
    return selected
