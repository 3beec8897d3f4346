"""nodeorder: kube-scheduler's scores (0-100 each), times their ``*.weight`` arguments, vectorised.

least requested, most requested, balanced allocation, preferred node affinity, taint toleration
(PreferNoSchedule) and preferred inter-pod affinity/anti-affinity. Spec-only scores (node
affinity, taints) are cached per pod template for the session.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

import numpy as np

from caldera.framework.model import TaskInfo
from caldera.framework.plugin import Plugin
from caldera.plugins.helpers import NodeIndex, node_index, term_mask, tolerates

if TYPE_CHECKING:
    from caldera.framework.nodetable import NodeTable
    from caldera.framework.session import Session

MAX_SCORE = 100.0


def _inverse_allocatable(t: NodeTable) -> np.ndarray:
    """1 / allocatable cpu and memory per row (0 where a node has none): built once per session."""
    alloc = t.allocatable[: t.rows, :2]
    return np.divide(1.0, alloc, out=np.zeros_like(alloc), where=alloc > 0)


def requested_fractions(ssn: Session, task: TaskInfo, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(cpu, memory) fraction of allocatable each row would have requested with this pod on it;
    above 1 where it would not fit, NaN-free (0 where the node has none of the resource)."""
    t = ssn.table
    inverse = ssn.memo(requested_fractions, lambda: _inverse_allocatable(t))
    if rows is t.all_rows:
        cpu = (t.used[: t.rows, 0] + task.resreq.cpu) * inverse[:, 0]
        mem = (t.used[: t.rows, 1] + task.resreq.memory) * inverse[:, 1]
    else:
        cpu = (t.used[rows, 0] + task.resreq.cpu) * inverse[rows, 0]
        mem = (t.used[rows, 1] + task.resreq.memory) * inverse[rows, 1]
    return cpu, mem


def least_requested(cpu: np.ndarray, mem: np.ndarray) -> np.ndarray:
    return (2.0 - np.minimum(cpu, 1.0) - np.minimum(mem, 1.0)) * (MAX_SCORE / 2.0)


def most_requested(cpu: np.ndarray, mem: np.ndarray) -> np.ndarray:
    return (np.where(cpu > 1.0, 0.0, cpu) + np.where(mem > 1.0, 0.0, mem)) * (MAX_SCORE / 2.0)


def balanced_allocation(cpu: np.ndarray, mem: np.ndarray) -> np.ndarray:
    cpu = np.minimum(cpu, 1.0)
    mem = np.minimum(mem, 1.0)
    return (1.0 - np.abs(cpu - mem) / 2.0) * MAX_SCORE


class NodeOrderPlugin(Plugin):
    name: ClassVar[str] = "nodeorder"
    arguments_schema: ClassVar[dict[str, type]] = {
        "leastrequested.weight": int,
        "mostrequested.weight": int,
        "balancedresource.weight": int,
        "nodeaffinity.weight": int,
        "podaffinity.weight": int,
        "tainttoleration.weight": int,
        "imagelocality.weight": int,
        "podtopologyspread.weight": int,
        "selectorspread.weight": int,
    }

    def on_session_open(self, ssn: Session) -> None:
        a = self.arguments
        self.least = a.int("leastrequested.weight", 1)
        self.most = a.int("mostrequested.weight", 0)
        self.balanced = a.int("balancedresource.weight", 1)
        self.node_affinity = a.int("nodeaffinity.weight", 1)
        self.pod_affinity = a.int("podaffinity.weight", 1)
        self.taint = a.int("tainttoleration.weight", 1)
        self.ssn = ssn
        self.idx: NodeIndex = node_index(ssn)
        self._static_cache: dict[bytes, np.ndarray] = {}
        ssn.add_bulk_node_order_fn(self.name, self.score, local=self._node_local)

    def _node_local(self, task: TaskInfo) -> bool:
        """Scores depend on each node alone unless preferred pod affinity (normalised across nodes) applies."""
        aff = task.pod.spec.affinity
        return (
            not self.pod_affinity
            or aff is None
            or (aff.pod_affinity is None and aff.pod_anti_affinity is None)
        )

    def score(self, task: TaskInfo, rows: np.ndarray) -> np.ndarray:
        ssn = self.ssn
        total = np.zeros(len(rows))
        if self.least or self.most or self.balanced:
            cpu, mem = requested_fractions(ssn, task, rows)
            if self.least:
                total += self.least * least_requested(cpu, mem)
            if self.most:
                total += self.most * most_requested(cpu, mem)
            if self.balanced:
                total += self.balanced * balanced_allocation(cpu, mem)
        if self.node_affinity or self.taint:
            total += self._static_scores(task)[rows]
        if self.pod_affinity:
            total += self.pod_affinity * self._pod_affinity(task, rows)
        return total

    def _static_scores(self, task: TaskInfo) -> np.ndarray:
        key = task.template
        got = self._static_cache.get(key) if key else None
        if got is None:
            got = np.zeros(self.idx.rows)
            if self.node_affinity:
                got += self.node_affinity * self.node_affinity_scores(task)
            if self.taint:
                got += self.taint * self.taint_scores(task)
            if key:
                self._static_cache[key] = got
        return got

    def node_affinity_scores(self, task: TaskInfo) -> np.ndarray:
        idx = self.idx
        raw = np.zeros(idx.rows)
        aff = task.pod.spec.affinity
        na = aff.node_affinity if aff else None
        if na is None:
            return raw
        for pref in na.preferred_during_scheduling_ignored_during_execution:
            if pref.weight:
                raw += pref.weight * idx.term_match(pref.preference)
        top = raw.max() if len(raw) else 0.0
        return raw * MAX_SCORE / top if top > 0 else raw

    def taint_scores(self, task: TaskInfo) -> np.ndarray:
        idx = self.idx
        count = np.zeros(idx.rows)
        tolerations = [t for t in task.pod.spec.tolerations if t.effect in ("", "PreferNoSchedule")]
        for taint, taint_rows in idx.taint_groups():
            if taint.effect == "PreferNoSchedule" and not tolerates(tolerations, taint):
                count[taint_rows] += 1
        top = count.max() if len(count) else 0.0
        if top <= 0:
            return np.full(idx.rows, MAX_SCORE)
        return MAX_SCORE - count * MAX_SCORE / top

    def _pod_affinity(self, task: TaskInfo, rows: np.ndarray) -> np.ndarray:
        aff = task.pod.spec.affinity
        out = np.zeros(len(rows))
        if aff is None or (aff.pod_affinity is None and aff.pod_anti_affinity is None):
            return out
        raw = np.zeros(self.idx.rows)
        if aff.pod_affinity is not None:
            for w in aff.pod_affinity.preferred_during_scheduling_ignored_during_execution:
                raw += w.weight * term_mask(self.idx, w.pod_affinity_term, task.namespace)
        if aff.pod_anti_affinity is not None:
            for w in aff.pod_anti_affinity.preferred_during_scheduling_ignored_during_execution:
                raw -= w.weight * term_mask(self.idx, w.pod_affinity_term, task.namespace)
        sub = raw[rows]
        lo, hi = (sub.min(), sub.max()) if len(sub) else (0.0, 0.0)
        if hi > lo:
            return (sub - lo) * MAX_SCORE / (hi - lo)
        return out
