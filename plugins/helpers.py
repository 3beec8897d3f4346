"""Shared, vectorised views of node specs for the built-in plugins: label columns, taint groups,
selector and toleration matching, and per-row pod counts for inter-pod affinity terms.

Everything here is built once per session (kept in ``ssn.memo``) so
per-pod work stays a handful of numpy operations over the node rows.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import numpy as np

from caldera.framework.model import OCCUPYING_STATUSES, NodeInfo, TaskInfo
from caldera.framework.objects import LabelSelector, NodeSelectorTerm, PodAffinityTerm, Taint, Toleration
from caldera.framework.resource import Resource
from caldera.framework.subgroups import selector_matches as label_selector_matches

if TYPE_CHECKING:
    from caldera.framework.session import Session

__all__ = [
    "EXACT_BELOW",
    "NodeIndex",
    "exact_range",
    "node_index",
    "safe_sub",
    "selector_matches",
    "share",
    "term_mask",
    "tolerates",
    "whole",
]


#: Every quantity is a whole number of millicores, bytes or thousandths (framework/resource.py), so
#: sums below this are exact in floats whatever the order they are made in: a sum kept from last
#: cycle, less the parts that left (``Resource.sub``) and plus the parts that came, is the sum made
#: afresh (drf's and proportion's carried sums).
EXACT_BELOW = 2.0**52


def whole(res: Resource) -> bool:
    """Whether every figure of ``res`` is a whole number, as every parsed quantity is."""
    if not (res.cpu.is_integer() and res.memory.is_integer() and res.pods.is_integer()):
        return False
    return all(v.is_integer() for v in res.scalars.values()) if res.scalars else True


def exact_range(res: Resource) -> bool:
    """Whether every figure of ``res`` is below ``EXACT_BELOW``."""
    if res.cpu >= EXACT_BELOW or res.memory >= EXACT_BELOW or res.pods >= EXACT_BELOW:
        return False
    return all(v < EXACT_BELOW for v in res.scalars.values()) if res.scalars else True


def safe_sub(left: Resource, right: Resource) -> Resource:
    """``left - right`` as a new vector, each dimension floored at zero, silently: a plugin's share
    arithmetic must never raise and must not count as an accounting underflow either."""
    return left.exceeded_part(right)


def share(allocated: Resource, total: Resource) -> float:
    """The dominant share of ``allocated`` in ``total`` (0 where the total has nothing)."""
    if not allocated.scalars:
        # cpu and memory only (the usual case): the loop below, unrolled
        best = 0.0
        cap, value = total.cpu, allocated.cpu
        if cap > 0:
            best = max(best, value / cap)
        elif value > 0:
            best = 1.0
        cap, value = total.memory, allocated.memory
        if cap > 0:
            best = max(best, value / cap)
        elif value > 0:
            best = max(best, 1.0)
        return best
    best = 0.0
    for name, value in allocated.items():
        cap = total.get(name)
        if cap > 0:
            best = max(best, value / cap)
        elif value > 0 and name in ("cpu", "memory"):
            best = max(best, 1.0)
    return best


class NodeSpecColumns:
    """What the node index derives from the nodes' specs alone (label values by key, topology
    domains, taint groups, names): kept across sessions while no node spec changed
    (:meth:`Session.node_memo`). Arrays are read-only: every session shares them."""

    def __init__(self, nodes: list[NodeInfo]) -> None:
        self.rows = len(nodes)
        self.labels: dict[str, np.ndarray] = {}
        self.domains: dict[str, tuple[np.ndarray, int]] = {}
        self.taints: list[tuple[Taint, np.ndarray]] | None = None
        # Only what the specs say is kept (node copies change every cycle; their specs do not).
        self.node_labels = [n.labels for n in nodes]
        self.node_taints = [n.taints for n in nodes]
        self.names = _frozen(np.asarray([n.name for n in nodes], dtype=object))


def _frozen(array: np.ndarray) -> np.ndarray:
    array.flags.writeable = False
    return array


class NodeIndex:
    """Per-session columns over node rows: label values by key, taint groups, topology domains."""

    def __init__(self, ssn: Session) -> None:
        self.ssn = ssn
        self.nodes = ssn.node_list
        self.rows = len(self.nodes)
        nodes = self.nodes
        self._spec = ssn.node_memo(NodeSpecColumns, lambda: NodeSpecColumns(nodes))
        self._term_counts: dict[bytes, tuple[PodAffinityTerm, str, np.ndarray]] = {}
        self._names = self._spec.names

    # -- labels ------------------------------------------------------------------------------------
    def label(self, key: str) -> np.ndarray:
        spec = self._spec
        col = spec.labels.get(key)
        if col is None:
            col = np.empty(self.rows, dtype=object)
            for i, labels in enumerate(spec.node_labels):
                col[i] = labels.get(key)
            spec.labels[key] = col = _frozen(col)
        return col

    def requirement_mask(self, key: str, operator: str, values: list[str], field: bool = False) -> np.ndarray:
        col = self._names if field and key == "metadata.name" else self.label(key)
        present = np.not_equal(col, None)  # type: ignore[call-overload]
        if operator == "In":
            return np.isin(col, values) & present
        if operator == "NotIn":
            return ~np.isin(col, values) | ~present
        if operator == "Exists":
            return present
        if operator == "DoesNotExist":
            return ~present
        if operator in ("Gt", "Lt") and values:
            try:
                bound = int(values[0])
            except ValueError:
                return np.zeros(self.rows, dtype=bool)
            out = np.zeros(self.rows, dtype=bool)
            for i, v in enumerate(col):
                try:
                    num = int(v) if v is not None else None
                except ValueError:
                    num = None
                if num is not None:
                    out[i] = num > bound if operator == "Gt" else num < bound
            return out
        return np.zeros(self.rows, dtype=bool)

    def term_match(self, term: NodeSelectorTerm) -> np.ndarray:
        """Rows whose node matches every requirement of one node selector term (an empty term matches none)."""
        if not term.match_expressions and not term.match_fields:
            return np.zeros(self.rows, dtype=bool)
        mask = np.ones(self.rows, dtype=bool)
        for req in term.match_expressions:
            mask &= self.requirement_mask(req.key, req.operator, req.values)
        for req in term.match_fields:
            mask &= self.requirement_mask(req.key, req.operator, req.values, field=True)
        return mask

    # -- taints ------------------------------------------------------------------------------------
    def taint_groups(self) -> list[tuple[Taint, np.ndarray]]:
        """Each distinct taint and the rows that carry it."""
        spec = self._spec
        if spec.taints is None:
            groups: dict[tuple[str, str, str], list[int]] = {}
            first: dict[tuple[str, str, str], Taint] = {}
            for i, taints in enumerate(spec.node_taints):
                for t in taints:
                    k = (t.key, t.value, t.effect)
                    groups.setdefault(k, []).append(i)
                    first.setdefault(k, t)
            spec.taints = [(first[k], _frozen(np.asarray(v, dtype=np.intp))) for k, v in groups.items()]
        return spec.taints

    # -- topology ----------------------------------------------------------------------------------
    def domains(self, key: str) -> tuple[np.ndarray, int]:
        """(domain id per row, -1 where the node lacks the key; number of domains)."""
        got = self._spec.domains.get(key)
        if got is None:
            ids: dict[str, int] = {}
            out = np.full(self.rows, -1, dtype=np.intp)
            for i, v in enumerate(self.label(key)):
                if v is not None:
                    out[i] = ids.setdefault(v, len(ids))
            got = (_frozen(out), len(ids))
            self._spec.domains[key] = got
        return got

    # -- pods matching an affinity term ------------------------------------------------------------
    def term_counts(self, term: PodAffinityTerm, namespace: str) -> np.ndarray:
        """How many pods on each row match ``term`` (as seen from a pod in ``namespace``); kept up to
        date by the allocate/deallocate event handler while the session runs."""
        key = _term_key(term, namespace)
        got = self._term_counts.get(key)
        if got is None:
            counts = np.zeros(self.rows)
            for i, n in enumerate(self.nodes):
                for t in n.tasks.values():
                    if t.status in OCCUPYING_STATUSES and pod_matches_term(t, term, namespace):
                        counts[i] += 1
            got = (term, namespace, counts)
            self._term_counts[key] = got
        return got[2]

    def on_placed(self, task: TaskInfo, delta: int) -> None:
        if not self._term_counts or not task.node_name:
            return
        node = self.ssn.nodes.get(task.node_name)
        if node is None:
            return
        for term, namespace, counts in self._term_counts.values():
            if pod_matches_term(task, term, namespace):
                counts[node.row] += delta


def node_index(ssn: Session) -> NodeIndex:
    built: list[NodeIndex] = []

    def build() -> NodeIndex:
        built.append(NodeIndex(ssn))
        return built[0]

    idx = ssn.memo(NodeIndex, build)
    if built:
        from caldera.framework.session import EventHandler

        ssn.add_event_handler(
            EventHandler(
                allocate=lambda e: idx.on_placed(e.task, 1), deallocate=lambda e: idx.on_placed(e.task, -1)
            )
        )
    return idx  # type: ignore[no-any-return]


def _term_key(term: PodAffinityTerm, namespace: str) -> bytes:
    import msgspec

    return msgspec.json.encode((term, namespace))


def selector_matches(selector: LabelSelector | None, labels: dict[str, str]) -> bool:
    """Kubernetes LabelSelector semantics; a missing selector matches nothing, an empty one everything."""
    return selector is not None and label_selector_matches(selector, labels)


def pod_matches_term(task: TaskInfo, term: PodAffinityTerm, namespace: str) -> bool:
    namespaces = term.namespaces or [namespace]
    if task.namespace not in namespaces:
        return False
    return selector_matches(term.label_selector, task.pod.metadata.labels)


def term_mask(idx: NodeIndex, term: PodAffinityTerm, namespace: str) -> np.ndarray:
    """Rows in a topology domain that holds at least one pod matching the term."""
    counts = idx.term_counts(term, namespace)
    dom, n = idx.domains(term.topology_key)
    valid = dom >= 0
    if n == 0:
        return np.zeros(idx.rows, dtype=bool)
    per_domain = np.bincount(dom[valid], weights=counts[valid], minlength=n)
    out = np.zeros(idx.rows, dtype=bool)
    out[valid] = per_domain[dom[valid]] > 0
    return out


def tolerates(tolerations: Iterable[Toleration], taint: Taint) -> bool:
    for tol in tolerations:
        if tol.effect and tol.effect != taint.effect:
            continue
        if tol.operator == "Exists":
            if not tol.key or tol.key == taint.key:
                return True
        elif tol.key == taint.key and tol.value == taint.value:
            return True
    return False


def request_columns(ssn: Session, res: Resource) -> tuple[np.ndarray, np.ndarray]:
    return ssn.table.request_vector(res)


def as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}
