"""nodeorder: kube-scheduler's scores (0-100 each), times their ``*.weight`` arguments, vectorised.

least requested, most requested, balanced allocation, preferred node affinity, taint toleration
(PreferNoSchedule), inter-pod affinity (the pod's preferred affinity/anti-affinity terms counted
per topology domain, and the placed pods' terms that match it, as interpodaffinity/scoring.go) and
pod topology spread (plugins/spread.py). Spec-only scores (node affinity, taints) are cached per
pod template for the session. Weights and defaults are Volcano's (nodeorder.go
``calculateWeight``): leastrequested 1, mostrequested 0, balancedresource 1, nodeaffinity 2,
podaffinity 2, tainttoleration 3, podtopologyspread 2.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar, TypeVar

import msgspec
import numpy as np

from caldera.framework.model import OCCUPYING_STATUSES, TaskInfo
from caldera.framework.nodetable import SMALL_ROWS
from caldera.framework.objects import PodAffinityTerm
from caldera.framework.plugin import Plugin, unsupported
from caldera.plugins.helpers import NodeIndex, node_index, pod_matches_term, tolerates
from caldera.plugins.spread import SpreadIndex, spread_index

_static_encoder = msgspec.json.Encoder()

if TYPE_CHECKING:
    from caldera.framework.nodetable import NodeTable
    from caldera.framework.session import Session

MAX_SCORE = 100.0
#: per-node fractions: arrays over rows, or one row's as a float (the formulas below take both)
Fraction = TypeVar("Fraction", np.ndarray, float)


def _inverse_allocatable(t: NodeTable) -> np.ndarray:
    """1 / allocatable cpu and memory per row (0 where a node has none): built once per session."""
    alloc = t.allocatable[: t.rows, :2]
    inverse = np.divide(1.0, alloc, out=np.zeros_like(alloc), where=alloc > 0)
    inverse.flags.writeable = False  # shared by the sessions while node specs stand still
    return inverse


def requested_fractions(ssn: Session, task: TaskInfo, rows: np.ndarray) -> np.ndarray:
    """(cpu, memory) fraction of allocatable each row would have requested with this pod on it, one
    row of two columns per node; above 1 where it would not fit, NaN-free (0 where the node has
    none of the resource)."""
    t = ssn.table
    inverse = ssn.node_memo(_inverse_allocatable, lambda: _inverse_allocatable(t))
    request = np.array((task.resreq.cpu, task.resreq.memory))
    if rows is t.all_rows:
        return (t.used[: t.rows, :2] + request) * inverse  # type: ignore[no-any-return]
    return (t.used[rows, :2] + request) * inverse[rows]  # type: ignore[no-any-return]


def least_requested(cpu: Fraction, mem: Fraction) -> Fraction:
    """kube-scheduler's LeastAllocated (noderesources/least_allocated.go), cpu and memory weighted
    equally, on fractions already capped at 1: the mean of (1 - requested/allocatable), 0-100."""
    return (2.0 - cpu - mem) * (MAX_SCORE / 2.0)


def most_requested(fractions: np.ndarray) -> np.ndarray:
    """kube-scheduler's MostAllocated (noderesources/most_allocated.go, ``mostRequestedScore``): the
    mean of requested/allocatable, a request above allocatable counted as allocatable (score 100)."""
    capped = np.minimum(fractions, 1.0)
    return (capped[:, 0] + capped[:, 1]) * (MAX_SCORE / 2.0)  # type: ignore[no-any-return]


def balanced_allocation(cpu: Fraction, mem: Fraction) -> Fraction:
    """BalancedAllocation (balanced_allocation.go) for two resources, on fractions capped at 1:
    1 - |cpu - memory| / 2 (the standard deviation of the two), 0-100."""
    return (1.0 - abs(cpu - mem) / 2.0) * MAX_SCORE  # type: ignore[no-any-return]


class NodeOrderPlugin(Plugin):
    name: ClassVar[str] = "nodeorder"
    arguments_schema: ClassVar[dict[str, type]] = {
        "leastrequested.weight": int,
        "mostrequested.weight": int,
        "balancedresource.weight": int,
        "nodeaffinity.weight": int,
        "podaffinity.weight": int,
        "tainttoleration.weight": int,
        "podtopologyspread.weight": int,
        # not implemented: refused unless 0 (issue 14, no argument accepted and ignored)
        "imagelocality.weight": unsupported(
            int, "image locality scoring is not implemented (0 turns it off)", 0
        ),
        "selectorspread.weight": unsupported(
            int, "selector spread scoring is not implemented (0 turns it off)", 0
        ),
    }

    def on_session_open(self, ssn: Session) -> None:
        a = self.arguments
        self.least = a.int("leastrequested.weight", 1)
        self.most = a.int("mostrequested.weight", 0)
        self.balanced = a.int("balancedresource.weight", 1)
        # Volcano's defaults (nodeorder.go calculateWeight)
        self.node_affinity = a.int("nodeaffinity.weight", 2)
        self.pod_affinity = a.int("podaffinity.weight", 2)
        self.taint = a.int("tainttoleration.weight", 3)
        self.spread_weight = a.int("podtopologyspread.weight", 2)
        self.ssn = ssn
        self.idx: NodeIndex = node_index(ssn)
        self.spread: SpreadIndex | None = spread_index(self.idx) if self.spread_weight else None
        self._static_cache: dict[bytes, np.ndarray] = {}
        self._any_terms: bool | None = None
        self._existing: dict[str, list[tuple[TaskInfo, int, PodAffinityTerm, float]]] | None = None
        ssn.add_bulk_node_order_fn(self.name, self.score, local=self._node_local)
        if self.spread is not None:
            spread = self.spread
            ssn.add_bulk_node_order_fn(
                self.name,
                self.spread_scores,
                local=lambda task: not spread.has_soft(task),
                part="podtopologyspread",
                applies=spread.has_soft,
            )

    def _node_local(self, task: TaskInfo) -> bool:
        """Scores depend on each node alone unless inter-pod affinity scoring (counted per domain,
        normalised across nodes) applies: the pod's own terms, or other pods' terms in the session."""
        aff = task.pod.spec.affinity
        if not self.pod_affinity:
            return True
        own = aff is not None and (aff.pod_affinity is not None or aff.pod_anti_affinity is not None)
        return not own and not self._terms_in_session()

    def spread_scores(self, task: TaskInfo, rows: np.ndarray) -> np.ndarray:
        """kube-scheduler's PodTopologySpread score (plugins/spread.py) times Volcano's
        ``podtopologyspread.weight``; counted per domain and normalised across ``rows``."""
        if self.spread is None or not self.spread.has_soft(task):
            return np.zeros(len(rows))
        return self.spread_weight * self.spread.scores(task, rows)

    def score(self, task: TaskInfo, rows: np.ndarray) -> np.ndarray:
        # Each part is added in a fixed order with the same arithmetic for every call, so a node's
        # score does not depend on whether it is computed over every row or patched alone.
        pod_affinity = self.pod_affinity and not self._node_local(task)
        if len(rows) <= SMALL_ROWS and not pod_affinity:
            return np.array([self._score_one(task, row) for row in rows.tolist()])
        total: np.ndarray | None = None
        if self.least or self.most or self.balanced:
            fractions = requested_fractions(self.ssn, task, rows)
            if self.least or self.balanced:
                capped = np.minimum(fractions, 1.0)
                cpu, mem = capped[:, 0], capped[:, 1]
                if self.least:
                    total = self.least * least_requested(cpu, mem)
                if self.balanced:
                    part = self.balanced * balanced_allocation(cpu, mem)
                    total = part if total is None else total + part
            if self.most:
                part = self.most * most_requested(fractions)
                total = part if total is None else total + part
        if self.node_affinity or self.taint:
            static = self._static_scores(task)[rows]
            total = static if total is None else total + static
        if pod_affinity:
            part = self.pod_affinity * self._pod_affinity(task, rows)
            total = part if total is None else total + part
        return total if total is not None else np.zeros(len(rows))

    def _score_one(self, task: TaskInfo, row: int) -> float:
        """:meth:`score` of one row in Python floats (a placement patching one or two rows: many
        times cheaper than array operations). The same operations in the same order on the same
        numbers give the same bits (test/plugins/test_nodeorder_rows.py compares them)."""
        total = 0.0
        if self.least or self.most or self.balanced:
            t = self.ssn.table
            inverse = self.ssn.node_memo(_inverse_allocatable, lambda: _inverse_allocatable(t))
            cpu = (t.used.item(row, 0) + task.resreq.cpu) * inverse.item(row, 0)
            mem = (t.used.item(row, 1) + task.resreq.memory) * inverse.item(row, 1)
            first = True
            if self.least or self.balanced:
                capped_cpu, capped_mem = min(cpu, 1.0), min(mem, 1.0)
                if self.least:
                    total, first = self.least * least_requested(capped_cpu, capped_mem), False
                if self.balanced:
                    part = self.balanced * balanced_allocation(capped_cpu, capped_mem)
                    total, first = (part if first else total + part), False
            if self.most:
                used = min(cpu, 1.0) + min(mem, 1.0)
                part = self.most * (used * (MAX_SCORE / 2.0))
                total, first = (part if first else total + part), False
            if self.node_affinity or self.taint:
                static = self._static_scores(task).item(row)
                total = static if first else total + static
            return total
        if self.node_affinity or self.taint:
            return float(self._static_scores(task).item(row))
        return total

    def _static_scores(self, task: TaskInfo) -> np.ndarray:
        """Preferred node affinity and PreferNoSchedule taints: the pod's template against the node
        specs, so kept across sessions while no node spec changed (keyed by the weights too)."""
        key = task.template
        got = self._static_cache.get(key) if key else None
        if got is None:
            if key:
                # remembered by what they read: templates that differ elsewhere (their claims) share them
                spec = task.pod.spec
                inputs = _static_encoder.encode(
                    (spec.affinity.node_affinity if spec.affinity else None, spec.tolerations)
                )
                got = self.ssn.node_memo(
                    (NodeOrderPlugin._static_scores, self.node_affinity, self.taint, inputs),
                    lambda: self._compute_static_scores(task),
                )
                self._static_cache[key] = got
            else:
                got = self._compute_static_scores(task)
        return got

    def _compute_static_scores(self, task: TaskInfo) -> np.ndarray:
        got = np.zeros(self.idx.rows)
        if self.node_affinity:
            got += self.node_affinity * self.node_affinity_scores(task)
        if self.taint:
            got += self.taint * self.taint_scores(task)
        got.flags.writeable = False
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

    # -- inter-pod affinity (kube-scheduler's interpodaffinity/scoring.go) ---------------------------
    def _terms_in_session(self) -> bool:
        """Whether any pod of the session (placed or pending) carries inter-pod affinity terms that
        could score another pod (preferred terms, or required affinity terms, which count with
        kube-scheduler's hardPodAffinityWeight 1). If none does, the score is 0 for every pod
        without terms of its own, and node-local."""
        got = self._any_terms
        if got is None:
            snapshot = self.ssn.snapshot
            if snapshot.affinity_pods == 0:
                # The cache counts the pods with such terms: none, so no scan of every pod.
                got = False
            else:
                got = False
                for job in self.ssn.jobs.values():
                    if any(_scoring_terms(t) for t in job.tasks.values()):
                        got = True
                        break
                if not got:
                    nodes = snapshot.nodes_with_affinity_pods(self.ssn.node_list)
                    got = any(_scoring_terms(t) for n in nodes for t in n.tasks.values())
            self._any_terms = got
        return got

    def _existing_terms(self) -> list[tuple[TaskInfo, int, PodAffinityTerm, float]]:
        """(pod, row, term, signed weight) of the placed pods' scoring terms, kept in step with the
        session's placements."""
        if self._existing is None:
            self._existing = {}
            for n in self.ssn.snapshot.nodes_with_affinity_pods(self.ssn.node_list):
                for t in n.tasks.values():
                    if t.status in OCCUPYING_STATUSES:
                        self._existing_add(t, n.row)
            from caldera.framework.session import EventHandler

            self.ssn.add_event_handler(
                EventHandler(
                    allocate=lambda e: self._existing_event(e.task, True),
                    deallocate=lambda e: self._existing_event(e.task, False),
                )
            )
        return [item for items in self._existing.values() for item in items]

    def _existing_add(self, task: TaskInfo, row: int) -> None:
        assert self._existing is not None
        terms = _scoring_terms(task)
        if terms:
            self._existing[task.uid] = [(task, row, term, w) for term, w in terms]

    def _existing_event(self, task: TaskInfo, placed: bool) -> None:
        if self._existing is None or not _scoring_terms(task):
            return
        node = self.ssn.nodes.get(task.node_name)
        if placed and node is not None:
            self._existing_add(task, node.row)
        else:
            self._existing.pop(task.uid, None)

    def _pod_affinity(self, task: TaskInfo, rows: np.ndarray) -> np.ndarray:
        """Per node: the weights of the incoming pod's preferred (anti-)affinity terms times the
        matching pods in the node's domain, plus the placed pods' terms that match the incoming
        pod (processExistingPod); normalised over ``rows`` between min(0, lowest) and
        max(0, highest) (NormalizeScore)."""
        aff = task.pod.spec.affinity
        out = np.zeros(len(rows))
        own = aff is not None and (aff.pod_affinity is not None or aff.pod_anti_affinity is not None)
        if not own and not self._terms_in_session():
            return out
        idx = self.idx
        raw = np.zeros(idx.rows)
        if aff is not None:
            weighted = []
            if aff.pod_affinity is not None:
                weighted += [
                    (w, 1.0) for w in aff.pod_affinity.preferred_during_scheduling_ignored_during_execution
                ]
            if aff.pod_anti_affinity is not None:
                weighted += [
                    (w, -1.0)
                    for w in aff.pod_anti_affinity.preferred_during_scheduling_ignored_during_execution
                ]
            for w, sign in weighted:
                term = w.pod_affinity_term
                if not w.weight:
                    continue
                counts = idx.term_counts(term, task.namespace)
                dom, n = idx.domains(term.topology_key)
                valid = dom >= 0
                if n:
                    per_domain = np.bincount(dom[valid], weights=counts[valid], minlength=n)
                    raw[valid] += sign * w.weight * per_domain[dom[valid]]
        if self._terms_in_session():
            for other, row, term, weight in self._existing_terms():
                if other.uid == task.uid or not pod_matches_term(task, term, other.namespace):
                    continue
                key = term.topology_key
                value = self.ssn.node_list[row].labels.get(key)
                if value is not None:
                    raw += weight * (idx.label(key) == value)
        sub = raw[rows]
        if not len(sub):
            return out
        hi = max(0.0, float(sub.max()))
        lo = min(0.0, float(sub.min()))
        if hi > lo:
            return np.floor((sub - lo) * MAX_SCORE / (hi - lo))
        return out


def _scoring_terms(task: TaskInfo) -> list[tuple[PodAffinityTerm, float]]:
    """A pod's terms that score other pods (interpodaffinity processExistingPod): required affinity
    (hardPodAffinityWeight 1), preferred affinity (+weight), preferred anti-affinity (-weight)."""
    aff = task.pod.spec.affinity
    if aff is None:
        return []
    out: list[tuple[PodAffinityTerm, float]] = []
    if aff.pod_affinity is not None:
        out += [(t, 1.0) for t in aff.pod_affinity.required_during_scheduling_ignored_during_execution]
        out += [
            (w.pod_affinity_term, float(w.weight))
            for w in aff.pod_affinity.preferred_during_scheduling_ignored_during_execution
            if w.weight
        ]
    if aff.pod_anti_affinity is not None:
        out += [
            (w.pod_affinity_term, -float(w.weight))
            for w in aff.pod_anti_affinity.preferred_during_scheduling_ignored_during_execution
            if w.weight
        ]
    return out
