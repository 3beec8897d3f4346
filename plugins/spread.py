"""Pod topology spread (``spec.topologySpreadConstraints``), vectorised over node rows.

Semantics from kube-scheduler's PodTopologySpread plugin (pkg/scheduler/framework/plugins/
podtopologyspread):

- constraints (common.go ``filterTopologySpreadConstraints``): ``DoNotSchedule`` ones filter,
  ``ScheduleAnyway`` ones score; the selector is ``labelSelector`` plus, for each key of
  ``matchLabelKeys`` the pod carries, that label's value; ``minDomains`` defaults to 1,
  ``nodeAffinityPolicy`` to Honor and ``nodeTaintsPolicy`` to Ignore;
- counting (filtering.go ``calPreFilterState``, common.go ``countPodsMatchSelector``): on every
  node that carries all the pod's topology keys and passes the inclusion policies (Honor: the
  pod's required node affinity and node selector match the node; Honor taints: no untolerated
  NoSchedule/NoExecute taint), the pods of the pod's namespace, not terminating, that match the
  selector, summed per topology domain;
- filter (filtering.go ``Filter``): a node without the key fails ("missing required label"); else
  ``count(domain) + (1 if the pod matches its own selector) - global minimum > maxSkew`` fails,
  the global minimum being 0 while fewer than ``minDomains`` domains exist (``minMatchNum``);
- score (scoring.go ``PreScore``/``Score``/``NormalizeScore``): per constraint,
  ``count(domain) * log(domains among the candidate nodes + 2) + maxSkew - 1``, summed and
  rounded; then ``100 * (max + min - score) / max`` (100 everywhere when max is 0), nodes lacking
  a key score 0;
- a pod with no constraints gets the cluster defaults (plugin.go ``systemDefaultConstraints``:
  hostname maxSkew 3 and zone maxSkew 5, both ScheduleAnyway) when it belongs to a workload
  controller. kube-scheduler selects the workload's pods with the selectors of the Services,
  ReplicaSets, StatefulSets and ReplicationControllers that match the pod (helper.DefaultSelector);
  Caldera watches none of those, so for a pod controlled by a ReplicaSet, StatefulSet or
  ReplicationController the workload is "pods of the same controller" (what that controller's
  selector selects), and a pod only matched by a Service gets no default spreading.

Counts include pods placed earlier in the same session (allocate/deallocate events), so a gang
spreading over zones sees its own members. Per (selector, namespace, topology key, eligible nodes)
a counter keeps per-domain counts; a placement updates only the counters whose selector the pod
matches, found through an index on one required label.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import msgspec
import numpy as np

from caldera.framework.model import ALLOCATED_STATUSES, TaskInfo, TaskStatus
from caldera.framework.objects import LabelSelector, Pod, TopologySpreadConstraint
from caldera.plugins.helpers import NodeIndex, selector_matches, tolerates

if TYPE_CHECKING:
    from caldera.framework.session import Session

HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
R_SPREAD = "node(s) didn't match pod topology spread constraints"
R_SPREAD_LABEL = "node(s) didn't match pod topology spread constraints (missing required label)"
MAX_SCORE = 100.0
#: kinds whose pods get the cluster's default constraints (see the module doc)
WORKLOAD_KINDS = frozenset({"ReplicaSet", "StatefulSet", "ReplicationController"})
SYSTEM_DEFAULTS = (
    TopologySpreadConstraint(max_skew=3, topology_key=HOSTNAME, when_unsatisfiable="ScheduleAnyway"),
    TopologySpreadConstraint(max_skew=5, topology_key=ZONE, when_unsatisfiable="ScheduleAnyway"),
)
#: statuses of the pods a constraint counts: on a node and not on their way out
COUNTED = ALLOCATED_STATUSES | {TaskStatus.PIPELINED}


@dataclass(frozen=True)
class Constraint:
    max_skew: int
    topology_key: str
    selector: LabelSelector | None
    #: default constraints: the workload is the pods of this controller (uid)
    owner: str
    min_domains: int
    honor_affinity: bool
    honor_taints: bool


@dataclass
class Spec:
    """A pod template's constraints, resolved for the session."""

    hard: list[tuple[Constraint, Counter, bool]]  # constraint, its counter, the pod matches itself
    soft: list[tuple[Constraint, Counter]]
    #: soft constraints that are the system defaults: nodes missing a key are not ignored
    defaulted: bool


def controller_uid(pod: Pod) -> str:
    for ref in pod.metadata.owner_references:
        if ref.controller and ref.kind in WORKLOAD_KINDS:
            return ref.uid
    return ""


def _resolve(pod: Pod, c: TopologySpreadConstraint, owner: str = "") -> Constraint:
    selector = c.label_selector
    if c.match_label_keys:
        labels = pod.metadata.labels
        extra = {k: labels[k] for k in c.match_label_keys if k in labels}
        if extra:
            base = selector or LabelSelector()
            selector = LabelSelector(
                match_labels={**base.match_labels, **extra}, match_expressions=base.match_expressions
            )
    return Constraint(
        max_skew=max(1, c.max_skew),
        topology_key=c.topology_key,
        selector=selector,
        owner=owner,
        min_domains=max(1, c.min_domains or 1),
        honor_affinity=(c.node_affinity_policy or "Honor") == "Honor",
        honor_taints=(c.node_taints_policy or "Ignore") == "Honor",
    )


def constraints_of(pod: Pod) -> tuple[list[Constraint], list[Constraint], bool]:
    """(DoNotSchedule constraints, ScheduleAnyway constraints, soft ones are the system defaults)."""
    spec = pod.spec.topology_spread_constraints
    if spec:
        hard = [_resolve(pod, c) for c in spec if c.when_unsatisfiable == "DoNotSchedule"]
        soft = [_resolve(pod, c) for c in spec if c.when_unsatisfiable == "ScheduleAnyway"]
        return hard, soft, False
    owner = controller_uid(pod)
    if not owner:
        return [], [], False
    return [], [_resolve(pod, c, owner) for c in SYSTEM_DEFAULTS], True


class Counter:
    """Matching pods per topology domain, over the nodes eligible for one pod template."""

    __slots__ = (
        "c",
        "complete",
        "counts",
        "dom",
        "eligible",
        "namespace",
        "ndomains",
        "present",
        "present_count",
    )

    def __init__(self, c: Constraint, namespace: str, dom: np.ndarray, ndomains: int, eligible: np.ndarray):
        self.c = c
        self.namespace = namespace
        self.dom = dom
        #: every node carries the topology key (the usual case): no masking needed
        self.complete = bool((dom >= 0).all())
        self.ndomains = ndomains
        self.eligible = eligible & (dom >= 0)
        self.counts = np.zeros(max(ndomains, 1))
        present = np.zeros(max(ndomains, 1), dtype=bool)
        present[dom[self.eligible]] = True
        self.present = present
        self.present_count = int(present.sum())

    def matches(self, task: TaskInfo) -> bool:
        if task.namespace != self.namespace or task.pod.metadata.deletion_timestamp is not None:
            return False
        if self.c.owner:
            return controller_uid(task.pod) == self.c.owner
        return selector_matches(self.c.selector, task.pod.metadata.labels)

    def add(self, row: int, delta: float) -> None:
        if self.eligible[row]:
            self.counts[self.dom[row]] += delta

    def global_min(self) -> float:
        """kube-scheduler's ``minMatchNum``: 0 while fewer than minDomains domains exist."""
        if self.present_count < self.c.min_domains or self.present_count == 0:
            return 0.0
        return float(self.counts[self.present].min())


class SpreadIndex:
    """Per session: counters shared by every template with the same selector, namespace, key and
    eligible nodes, kept in step with the session's placements."""

    def __init__(self, ssn: Session, idx: NodeIndex) -> None:
        self.ssn = ssn
        self.idx = idx
        self._specs: dict[bytes, Spec | None] = {}
        self._counters: dict[bytes, Counter] = {}
        #: (namespace, label key, value) or (namespace, "", owner uid) → counters to update
        self._by_label: dict[tuple[str, str, str], list[Counter]] = {}
        #: counters whose selector has no matchLabels (checked for every pod of the namespace)
        self._scan: dict[str, list[Counter]] = {}
        self._pods: dict[tuple[str, str, str], dict[str, tuple[TaskInfo, int]]] | None = None
        self._eligible: dict[bytes, np.ndarray] = {}
        from caldera.framework.session import EventHandler

        ssn.add_event_handler(
            EventHandler(
                allocate=lambda e: self._placed(e.task, 1), deallocate=lambda e: self._placed(e.task, -1)
            )
        )

    # -- the pods that count -------------------------------------------------------------------------
    def _counted_pods(self) -> dict[tuple[str, str, str], dict[str, tuple[TaskInfo, int]]]:
        """(namespace, label key, value), (namespace, "", controller uid) and (namespace, "", "")
        → uid → (task, row) of every pod counted now (built on first use, then kept in step)."""
        if self._pods is None:
            self._pods = {}
            for node in self.ssn.node_list:
                for t in node.tasks.values():
                    if t.status in COUNTED and t.pod.metadata.deletion_timestamp is None:
                        self._index(t, node.row, 1)
        return self._pods

    def _index(self, task: TaskInfo, row: int, delta: int) -> None:
        assert self._pods is not None
        ns = task.namespace
        keys = [(ns, "", ""), *((ns, k, v) for k, v in task.pod.metadata.labels.items())]
        owner = controller_uid(task.pod)
        if owner:
            keys.append((ns, "", owner))
        for key in keys:
            if delta > 0:
                self._pods.setdefault(key, {})[task.uid] = (task, row)
            else:
                bucket = self._pods.get(key)
                if bucket is not None:
                    bucket.pop(task.uid, None)

    def _placed(self, task: TaskInfo, delta: int) -> None:
        node = self.ssn.nodes.get(task.node_name)
        if node is None or task.pod.metadata.deletion_timestamp is not None:
            return
        if self._pods is not None:
            self._index(task, node.row, delta)
        if not self._counters:
            return
        ns = task.namespace
        candidates: list[Counter] = list(self._scan.get(ns, ()))
        for k, v in task.pod.metadata.labels.items():
            candidates.extend(self._by_label.get((ns, k, v), ()))
        owner = controller_uid(task.pod)
        if owner:
            candidates.extend(self._by_label.get((ns, "", owner), ()))
        seen: set[int] = set()
        for counter in candidates:
            if id(counter) in seen:
                continue
            seen.add(id(counter))
            if counter.matches(task):
                counter.add(node.row, delta)

    # -- eligible nodes --------------------------------------------------------------------------------
    def _eligible_rows(self, task: TaskInfo, c: Constraint, keys: tuple[str, ...]) -> np.ndarray:
        spec = task.pod.spec
        aff = spec.affinity.node_affinity if spec.affinity else None
        required = aff.required_during_scheduling_ignored_during_execution if aff else None
        key = msgspec.json.encode(
            (
                keys,
                (spec.node_selector, required) if c.honor_affinity else None,
                spec.tolerations if c.honor_taints else None,
            )
        )
        got = self._eligible.get(key)
        if got is not None:
            return got
        idx = self.idx
        mask = np.ones(idx.rows, dtype=bool)
        for k in keys:
            mask &= idx.domains(k)[0] >= 0
        if c.honor_affinity:
            for k, v in spec.node_selector.items():
                mask &= idx.label(k) == v
            if required is not None:
                any_term = np.zeros(idx.rows, dtype=bool)
                for term in required.node_selector_terms:
                    any_term |= idx.term_match(term)
                mask &= any_term
        if c.honor_taints:
            for taint, rows in idx.taint_groups():
                if taint.effect in ("NoSchedule", "NoExecute") and not tolerates(spec.tolerations, taint):
                    mask[rows] = False
        self._eligible[key] = mask
        return mask

    def _counter(self, task: TaskInfo, c: Constraint, keys: tuple[str, ...]) -> Counter:
        eligible = self._eligible_rows(task, c, keys)
        key = msgspec.json.encode((c.selector, c.owner, c.topology_key, task.namespace)) + eligible.tobytes()
        counter = self._counters.get(key)
        if counter is not None:
            return counter
        dom, n = self.idx.domains(c.topology_key)
        counter = Counter(c, task.namespace, dom, n, eligible)
        ns = task.namespace
        index: tuple[str, str, str] | None = None
        if c.owner:
            index = (ns, "", c.owner)
        elif c.selector is not None and c.selector.match_labels:
            k, v = next(iter(sorted(c.selector.match_labels.items())))
            index = (ns, k, v)
        if index is not None:
            self._by_label.setdefault(index, []).append(counter)
        elif c.selector is not None:
            self._scan.setdefault(ns, []).append(counter)
            index = (ns, "", "")
        # (a missing selector matches no pod: nothing to count or keep up to date)
        if index is not None:
            for t, row in self._counted_pods().get(index, {}).values():
                if counter.matches(t):
                    counter.add(row, 1)
        self._counters[key] = counter
        return counter

    # -- per template ------------------------------------------------------------------------------
    def spec(self, task: TaskInfo) -> Spec | None:
        key = task.template or task.uid.encode()
        if key in self._specs:
            return self._specs[key]
        hard, soft, defaulted = constraints_of(task.pod)
        out: Spec | None = None
        if hard or soft:
            hard_keys = tuple(sorted({c.topology_key for c in hard}))
            soft_keys = tuple(sorted({c.topology_key for c in soft})) if not defaulted else ()
            labels = task.pod.metadata.labels
            out = Spec(
                hard=[
                    (c, self._counter(task, c, hard_keys), selector_matches(c.selector, labels)) for c in hard
                ],
                soft=[(c, self._counter(task, c, soft_keys or (c.topology_key,))) for c in soft],
                defaulted=defaulted,
            )
        self._specs[key] = out
        return out

    # -- filter --------------------------------------------------------------------------------------
    def fails(self, task: TaskInfo, rows: np.ndarray) -> dict[str, np.ndarray]:
        """Per reason, the rows that fail the pod's DoNotSchedule constraints."""
        spec = self.spec(task)
        every = rows is self.ssn.all_rows
        missing: np.ndarray | None = None
        skewed: np.ndarray | None = None
        if spec is not None:
            for c, counter, self_match in spec.hard:
                d = counter.dom if every else counter.dom[rows]
                limit = c.max_skew - self_match + counter.global_min()
                if counter.complete:
                    bad = counter.counts[d] > limit
                else:
                    lacks = d < 0
                    missing = lacks if missing is None else missing | lacks
                    bad = ~lacks & (counter.counts[np.where(lacks, 0, d)] > limit)
                skewed = bad if skewed is None else skewed | bad
        if missing is None:
            missing = np.zeros(len(rows), dtype=bool)
        if skewed is None:
            skewed = np.zeros(len(rows), dtype=bool)
        return {R_SPREAD_LABEL: missing, R_SPREAD: skewed & ~missing if missing.any() else skewed}

    def has_hard(self, task: TaskInfo) -> bool:
        spec = self.spec(task)
        return spec is not None and bool(spec.hard)

    def has_soft(self, task: TaskInfo) -> bool:
        spec = self.spec(task)
        return spec is not None and bool(spec.soft)

    # -- score ---------------------------------------------------------------------------------------
    def scores(self, task: TaskInfo, rows: np.ndarray) -> np.ndarray:
        """0-100 per row for the pod's ScheduleAnyway constraints, normalised over ``rows`` (the
        candidate nodes), fewer matching pods in a node's domains scoring higher."""
        spec = self.spec(task)
        out = np.zeros(len(rows))
        if spec is None or not spec.soft or not len(rows):
            return out
        doms = [counter.dom[rows] for _c, counter in spec.soft]
        if all(counter.complete for _c, counter in spec.soft):
            # every node has every key (the usual case): no node is ignored, no masking
            raw = np.zeros(len(rows))
            for (c, counter), d in zip(spec.soft, doms, strict=True):
                if c.topology_key == HOSTNAME:
                    size = len(rows)
                else:
                    size = int(np.count_nonzero(np.bincount(d, minlength=counter.ndomains)))
                raw += counter.counts[d] * math.log(size + 2) + (c.max_skew - 1)
            raw = np.round(raw)
            hi = raw.max()
            if hi <= 0:
                out[:] = MAX_SCORE
            else:
                out = np.floor(MAX_SCORE * (hi + raw.min() - raw) / hi)
            return out
        ignored = np.zeros(len(rows), dtype=bool)
        if not spec.defaulted:
            for d in doms:
                ignored |= d < 0
        raw = np.zeros(len(rows))
        for (c, counter), d in zip(spec.soft, doms, strict=True):
            has = (d >= 0) & ~ignored
            if c.topology_key == HOSTNAME:
                size = int(np.count_nonzero(~ignored))
            else:
                size = int(np.count_nonzero(np.bincount(d[has], minlength=1))) if has.any() else 0
            weight = math.log(size + 2)
            raw += np.where(has, counter.counts[np.where(has, d, 0)] * weight + (c.max_skew - 1), 0.0)
        raw = np.round(raw)
        valid = ~ignored
        if not valid.any():
            return out
        hi = raw[valid].max()
        lo = raw[valid].min()
        if hi <= 0:
            out[valid] = MAX_SCORE
        else:
            out[valid] = np.floor(MAX_SCORE * (hi + lo - raw[valid]) / hi)
        return out


def spread_index(idx: NodeIndex) -> SpreadIndex:
    """The session's spread counters, shared by predicates (filter) and nodeorder (score)."""
    return idx.ssn.memo(SpreadIndex, lambda: SpreadIndex(idx.ssn, idx))
