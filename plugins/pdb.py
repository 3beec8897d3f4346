"""pdb: preempt, reclaim and shuffle never pick a victim whose eviction would violate a PodDisruptionBudget.

Volcano's pdb plugin (pkg/scheduler/plugins/pdb/pdb.go, ``OnSessionOpen``'s ``pdbFilterFn``),
registered as a victim-tasks, preemptable and reclaimable function, with no arguments: from the
candidates, in order, a pod is kept as a victim unless, for a PDB of its namespace whose
(non-empty) selector matches it, taking one more disruption would bring the budget's
``status.disruptionsAllowed`` below zero; a pod already in the budget's ``disruptedPods`` costs
nothing (the API server has counted it). Unlike Volcano, the budget also pays for the evictions
decided earlier in the same session (statement evictions, undone when a statement is discarded),
so two preemptors in one cycle cannot spend one disruption twice.

For shuffle, Volcano registers the same filter as a victim-tasks function, whose choice
``Session.VictimTasks`` joins with the other plugins' (every running pod the budgets allow would be
evicted); here it guards the victims the other plugins chose instead (``add_victim_guard_fn``,
switched by ``enabledVictim``), so shuffle never evicts more than those plugins chose.

Candidates that violate no PDB remain choices; a violating one is never chosen by the tier the
plugin is in (when no candidate is left the plugin selects none). As in Volcano's session, a tier
that selects no victim hands the decision to the next tier, so pdb belongs in the tier that
decides victims (with gang), and no later tier should select victims on its own; whatever is
decided, the API server's eviction check still refuses a violating eviction (429).
Evictions themselves go through the Eviction API (scheduler/evictor.py), which the API server
refuses with 429 when a budget would be violated: a retry, not a failure.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from caldera.framework.model import TaskInfo, TaskStatus
from caldera.framework.objects import PodDisruptionBudget
from caldera.framework.plugin import Plugin
from caldera.plugins.helpers import selector_matches

if TYPE_CHECKING:
    from caldera.framework.session import Session

PERMIT = 1


class PdbPlugin(Plugin):
    name: ClassVar[str] = "pdb"

    def on_session_open(self, ssn: Session) -> None:
        from caldera.framework.session import EventHandler

        self.ssn = ssn
        #: PDBs by namespace, with a selector that can match something
        self.by_namespace: dict[str, list[PodDisruptionBudget]] = {}
        for pdb in ssn.snapshot.pdbs.values():
            sel = pdb.spec.selector
            if sel is None or not (sel.match_labels or sel.match_expressions):
                continue  # a nil or empty selector matches nothing (policy/v1)
            self.by_namespace.setdefault(pdb.metadata.namespace, []).append(pdb)
        #: disruptions spent by this session's evictions, per PDB (namespace/name)
        self.spent: dict[str, int] = {}
        # The shuffle action's victims pass the budgets too (a guard, not Volcano's selector: see
        # framework/tier_rules.py ``tiered_victim_tasks``).
        ssn.add_victim_guard_fn(self.name, self.filter)
        if not self.by_namespace:
            return
        # Evictions issued by earlier cycles that the API server has not carried out yet (the cache
        # assumes the pod releasing; no deletion timestamp): their budgets may not show them yet.
        for node in ssn.node_list:
            for t in node.tasks.values():
                if t.status == TaskStatus.RELEASING and t.pod.metadata.deletion_timestamp is None:
                    self._evicted(t, 1)
        ssn.add_event_handler(
            EventHandler(
                allocate=lambda e: self._evicted(e.task, -1), deallocate=lambda e: self._evicted(e.task, 1)
            )
        )
        ssn.add_preemptable_fn(self.name, lambda _actor, tasks: (self.filter(tasks), PERMIT))
        ssn.add_reclaimable_fn(self.name, lambda _actor, tasks: (self.filter(tasks), PERMIT))

    def _budgets(self, task: TaskInfo) -> list[PodDisruptionBudget]:
        labels = task.pod.metadata.labels
        if not labels:
            return []
        return [
            pdb
            for pdb in self.by_namespace.get(task.namespace, ())
            if selector_matches(pdb.spec.selector, labels) and task.name not in pdb.status.disrupted_pods
        ]

    def _evicted(self, task: TaskInfo, delta: int) -> None:
        """A statement evicted (deallocate with the task releasing) or un-evicted (allocate back to
        a running status) a pod: charge or refund its budgets."""
        if delta > 0 and task.status != TaskStatus.RELEASING:
            return
        if delta < 0 and task.status not in (TaskStatus.RUNNING, TaskStatus.BOUND):
            return
        for pdb in self._budgets(task):
            key = f"{pdb.metadata.namespace}/{pdb.metadata.name}"
            self.spent[key] = self.spent.get(key, 0) + delta

    def filter(self, tasks: list[TaskInfo]) -> list[TaskInfo]:
        """The candidates whose eviction, in this order, keeps every budget at zero or above."""
        allowed: dict[str, int] = {}
        out: list[TaskInfo] = []
        for task in tasks:
            budgets = self._budgets(task)
            violated = False
            for pdb in budgets:
                key = f"{pdb.metadata.namespace}/{pdb.metadata.name}"
                if key not in allowed:
                    allowed[key] = pdb.status.disruptions_allowed - self.spent.get(key, 0)
                allowed[key] -= 1
                if allowed[key] < 0:
                    violated = True
            if not violated:
                out.append(task)
        return out
