"""nodegroup: queues bound to node groups, Volcano's ``nodegroup`` plugin.

A node's group is its ``volcano.sh/nodegroup-name`` label; a Queue says where its pods go in
``spec.affinity``: ``nodeGroupAffinity`` and ``nodeGroupAntiAffinity``, each with a required and a
preferred list of groups. Volcano's rules (pkg/scheduler/plugins/nodegroup/nodegroup.go):

- predicate (``OnSessionOpen``'s ``predicateFn``, ``queueGroupAffinity.predicate``): a node without
  the label fails (``node group label not found``) unless the plugin is not ``strict`` and the queue
  has no affinity at all; a labelled node fails for a queue without affinity (``node group affinity
  not specified``); otherwise the group passes when it is required or preferred, a required
  anti-affinity takes that back and a preferred anti-affinity lets it pass again (``node does not
  satisfy the node group affinity``);
- score (``nodeOrderFn``, ``queueGroupAffinity.score``): 100 for a required group, plus 50 for a
  preferred one (with ``enablePreferredOrder``: 50 * (n - i) / n for the i-th of n preferred groups),
  and -1 for a group of the preferred anti-affinity whatever else; 0 for an unlabelled node;
- hierarchy (``initQueueAttrs``, ``updateAffinityFromAncestor``; plugin option ``enableHierarchy``):
  a queue without ``spec.affinity`` takes its nearest ancestor's (parents by ``spec.parent``, up to
  ``root``);
- per-group resource limits (``parseNodeGroupResourceLimits``, ``checkNodeGroupResourceLimit``):
  the queue annotation ``volcano.sh/nodegroup-resource-limits`` (JSON: group → resource list) caps
  what the queue's allocated pods may request in each group, dimension by dimension (a dimension
  not named is unlimited); a node of a group the next pod would take over its cap fails (``node
  group resource limit exceeded``), and a queue whose annotation does not parse fails every node
  (``node group resource limit annotation invalid``). Allocations and evictions of the session
  count as they are made (``AddEventHandler``).

Arguments as Volcano's ``New`` reads them: ``strict`` (bool, default true) and
``enablePreferredOrder`` (bool, default false); ``enableHierarchy`` comes from the plugin option.

The affinity rules depend on the node's label and the task's queue only: a *static* bulk predicate
and a node-local bulk score, cached per pod template and queue (``add_template_qualifier``: pods
of one template in two queues are not interchangeable here). The resource limits depend on what
the queue holds across the group, so they are a dynamic predicate evaluated afresh, and only for
queues that have limits.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from caldera.framework.model import ALLOCATED_STATUSES, QueueInfo, TaskInfo
from caldera.framework.objects import NodeGroupAffinity
from caldera.framework.plugin import Plugin
from caldera.framework.resource import MIN_RESOURCE, Resource, ResourceError

if TYPE_CHECKING:
    from caldera.framework.session import Session

log = logging.getLogger("caldera.plugins.nodegroup")

#: schedulingv1beta1.NodeGroupNameKey (volcano.sh/apis .../scheduling/v1beta1/labels.go)
NODEGROUP_LABEL = "volcano.sh/nodegroup-name"
#: schedulingv1beta1.NodeGroupResourceLimitsAnnotationKey
RESOURCE_LIMITS_ANNOTATION = "volcano.sh/nodegroup-resource-limits"
ROOT_QUEUE = "root"
BASE_SCORE = 100.0

# Volcano's reasons (pkg/scheduler/plugins/nodegroup/errors.go)
AFFINITY_NOT_FOUND = "node group affinity not specified"
LABEL_NOT_FOUND = "node group label not found"
UNSATISFIED = "node does not satisfy the node group affinity"
LIMIT_INVALID = "node group resource limit annotation invalid"
LIMIT_EXCEEDED = "node group resource limit exceeded"
JOB_NOT_FOUND = "job not found in session"

#: (queue, annotation) pairs already reported as invalid: one log line and one Event per change
_reported: set[tuple[str, str]] = set()


@dataclass
class GroupAffinity:
    """Volcano's ``queueGroupAffinity`` (``newQueueGroupAffinity``)."""

    required: frozenset[str] = frozenset()
    preferred: frozenset[str] = frozenset()
    anti_required: frozenset[str] = frozenset()
    anti_preferred: frozenset[str] = frozenset()
    #: group → its index in the preferred list (the last, for a group listed twice)
    preferred_index: dict[str, int] = field(default_factory=dict)

    @classmethod
    def of(cls, affinity: NodeGroupAffinity | None, anti: NodeGroupAffinity | None) -> GroupAffinity:
        preferred = affinity.preferred_during_scheduling_ignored_during_execution if affinity else []
        return cls(
            required=frozenset(
                affinity.required_during_scheduling_ignored_during_execution if affinity else ()
            ),
            preferred=frozenset(preferred),
            anti_required=frozenset(anti.required_during_scheduling_ignored_during_execution if anti else ()),
            anti_preferred=frozenset(
                anti.preferred_during_scheduling_ignored_during_execution if anti else ()
            ),
            preferred_index={group: i for i, group in enumerate(preferred)},
        )

    @property
    def empty(self) -> bool:
        return not (self.required or self.preferred or self.anti_required or self.anti_preferred)

    def passes(self, group: str) -> bool:
        """``queueGroupAffinity.predicate``: anti-affinity's required list outranks affinity; its
        preferred list lets the group pass again."""
        ok = group in self.required or group in self.preferred
        if group in self.anti_required:
            ok = False
        if group in self.anti_preferred:
            ok = True
        return ok

    def score(self, group: str, preferred_order: bool) -> float:
        """``queueGroupAffinity.score``."""
        score = BASE_SCORE if group in self.required else 0.0
        if preferred_order:
            i = self.preferred_index.get(group)
            if i is not None:
                n = len(self.preferred_index)
                score += 0.5 * BASE_SCORE * (n - i) / n
        elif group in self.preferred:
            score += 0.5 * BASE_SCORE
        if group in self.anti_preferred:
            score = -1.0
        return score


def parse_limits(queue: QueueInfo) -> dict[str, tuple[Resource, list[str]]]:
    """``parseNodeGroupResourceLimits``: group → (its limit, the dimensions the annotation names
    for it: only those are limited). Raises ValueError when the annotation does not parse."""
    obj = queue.queue
    raw = obj.metadata.annotations.get(RESOURCE_LIMITS_ANNOTATION, "") if obj is not None else ""
    if not raw:
        return {}
    try:
        doc = json.loads(raw)
    except ValueError as exc:
        raise ValueError(f"parse annotation {RESOURCE_LIMITS_ANNOTATION}: {exc}") from None
    if not isinstance(doc, dict) or not all(isinstance(v, dict) for v in doc.values()):
        raise ValueError(f"annotation {RESOURCE_LIMITS_ANNOTATION} must map groups to resource lists")
    out: dict[str, tuple[Resource, list[str]]] = {}
    for group, items in doc.items():
        try:
            out[str(group)] = (Resource.from_resource_list(items), [str(name) for name in items])
        except (ResourceError, TypeError) as exc:
            raise ValueError(f"annotation {RESOURCE_LIMITS_ANNOTATION}, group {group!r}: {exc}") from None
    return out


@dataclass
class QueueRule:
    """What the plugin knows of one queue for the session (Volcano's ``queueAttr``)."""

    affinity: GroupAffinity | None
    #: group → (its limit, the dimensions it names)
    limits: dict[str, tuple[Resource, list[str]]]
    limit_error: str = ""
    #: group → the queue's allocated requests there, for the dimensions its limit names
    allocated: dict[str, dict[str, float]] = field(default_factory=dict)


class NodeGroups:
    """The node rows' groups: a code per row (``len(names)`` for a node without the label), kept
    across sessions while the node specs stand still (``ssn.node_memo``)."""

    def __init__(self, labels: list[dict[str, str]]) -> None:
        values = [lab.get(NODEGROUP_LABEL) for lab in labels]
        self.names: list[str] = sorted({v for v in values if v is not None})
        index = {name: i for i, name in enumerate(self.names)}
        self.unlabelled = len(self.names)
        codes = np.array([index[v] if v is not None else self.unlabelled for v in values], dtype=np.intp)
        codes.flags.writeable = False
        self.codes = codes
        self.index = index


class NodeGroupPlugin(Plugin):
    name: ClassVar[str] = "nodegroup"
    arguments_schema: ClassVar[dict[str, type]] = {
        "strict": bool,
        "enablePreferredOrder": bool,
        # set by the plugin option ``enableHierarchy: true`` (config/conf.py), as Volcano reads it
        "enableHierarchy": bool,
    }

    def on_session_open(self, ssn: Session) -> None:
        from caldera.framework.session import EventHandler

        a = self.arguments
        self.strict = a.bool("strict", True)
        self.preferred_order = a.bool("enablePreferredOrder", False)
        self.hierarchy = a.bool("enableHierarchy", False)
        self.ssn = ssn
        nodes = ssn.node_list
        self.groups: NodeGroups = ssn.node_memo(NodeGroups, lambda: NodeGroups([n.labels for n in nodes]))
        self.rules: dict[str, QueueRule] = {name: self._rule(q) for name, q in ssn.queues.items()}
        if self.hierarchy:
            for name, rule in self.rules.items():
                if rule.affinity is None:
                    rule.affinity = self._inherited(name)
        #: per queue: (pass, reason, score) per group code, the last code for unlabelled nodes
        self._columns: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        limited = {name for name, rule in self.rules.items() if rule.limits}
        if limited:
            for job in ssn.jobs.values():
                if job.queue in limited:
                    for task in job.tasks_in(*ALLOCATED_STATUSES):
                        self._count(task, 1.0)
            ssn.add_event_handler(
                EventHandler(
                    allocate=lambda e: self._count(e.task, 1.0),
                    deallocate=lambda e: self._count(e.task, -1.0),
                )
            )
        ssn.add_template_qualifier(self.name, self._queue_key)
        ssn.add_bulk_predicate_fn(self.name, self.passes, self.explain, static=True)
        ssn.add_bulk_predicate_fn(
            self.name,
            self.within_limits,
            self.explain_limits,
            part="limits",
            applies=self._limited,
        )
        ssn.add_bulk_node_order_fn(self.name, self.score, local=True)

    # -- queues ------------------------------------------------------------------------------------
    def _rule(self, queue: QueueInfo) -> QueueRule:
        spec_affinity = queue.queue.spec.affinity if queue.queue is not None else None
        affinity = (
            None
            if spec_affinity is None
            else GroupAffinity.of(spec_affinity.node_group_affinity, spec_affinity.node_group_anti_affinity)
        )
        try:
            limits = parse_limits(queue)
            error = ""
        except ValueError as exc:
            limits, error = {}, str(exc)
            self._report(queue, error)
        return QueueRule(affinity, limits, error)

    def _report(self, queue: QueueInfo, error: str) -> None:
        """An invalid limits annotation: one log line and one Event on the Queue while it stands."""
        raw = queue.queue.metadata.annotations.get(RESOURCE_LIMITS_ANNOTATION, "") if queue.queue else ""
        key = (queue.name, raw)
        if key in _reported:
            return
        _reported.add(key)
        log.error("queue %s has an invalid %s annotation: %s", queue.name, RESOURCE_LIMITS_ANNOTATION, error)
        self.ssn.report.events.append(
            ("Queue", queue.name, "InvalidNodeGroupResourceLimits", f"{error}; its pods are not placed")
        )

    def _inherited(self, name: str) -> GroupAffinity | None:
        """``buildAncestors`` + ``updateAffinityFromAncestor``: the nearest ancestor's own affinity
        (the chain stops at ``root``, a missing parent or a cycle)."""
        seen = {name}
        current = name
        while current != ROOT_QUEUE:
            queue = self.ssn.queues.get(current)
            if queue is None:
                return None
            parent = queue.parent or ROOT_QUEUE
            if parent in seen or parent not in self.ssn.queues:
                return None
            seen.add(parent)
            own = self.rules[parent].affinity
            # a queue is only given an ancestor's affinity after its own was None: a parent whose
            # affinity is set here is its own or inherited, either way the nearest one up the chain
            if own is not None:
                return own
            current = parent
        return None

    def _queue_of(self, task: TaskInfo) -> str | None:
        job = self.ssn.jobs.get(task.job)
        return job.queue if job is not None else None

    def _queue_key(self, task: TaskInfo) -> bytes:
        queue = self._queue_of(task)
        return b"" if queue is None else queue.encode()

    def _columns_of(self, queue: str | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per group code: whether it passes the queue's affinity, the reason when not, its score."""
        key = "\0" if queue is None else queue
        got = self._columns.get(key)
        if got is None:
            n = self.groups.unlabelled + 1
            passes = np.zeros(n, dtype=bool)
            reasons = np.full(n, "", dtype=object)
            scores = np.zeros(n)
            rule = self.rules.get(queue) if queue is not None else None
            if queue is None:
                reasons[:] = JOB_NOT_FOUND
            elif rule is not None and rule.limit_error:
                reasons[:] = LIMIT_INVALID
            else:
                affinity = rule.affinity if rule is not None else None
                unset = affinity is None or affinity.empty
                passes[-1] = not self.strict and unset
                reasons[-1] = "" if passes[-1] else LABEL_NOT_FOUND
                for code, group in enumerate(self.groups.names):
                    if unset:
                        reasons[code] = AFFINITY_NOT_FOUND
                    elif affinity is not None and affinity.passes(group):
                        passes[code] = True
                    else:
                        reasons[code] = UNSATISFIED
            if rule is not None and rule.affinity is not None:
                for code, group in enumerate(self.groups.names):
                    scores[code] = rule.affinity.score(group, self.preferred_order)
            got = self._columns[key] = (passes, reasons, scores)
        return got

    # -- predicate and score -------------------------------------------------------------------------
    def passes(self, task: TaskInfo, rows: np.ndarray) -> np.ndarray:
        return self._columns_of(self._queue_of(task))[0][self.groups.codes[rows]]  # type: ignore[no-any-return]

    def explain(self, task: TaskInfo, rows: np.ndarray) -> dict[str, np.ndarray]:
        reasons = self._columns_of(self._queue_of(task))[1][self.groups.codes[rows]]
        return {str(r): reasons == r for r in set(reasons.tolist()) if r}

    def score(self, task: TaskInfo, rows: np.ndarray) -> np.ndarray:
        return self._columns_of(self._queue_of(task))[2][self.groups.codes[rows]]  # type: ignore[no-any-return]

    # -- resource limits -----------------------------------------------------------------------------
    def _limited(self, task: TaskInfo) -> bool:
        queue = self._queue_of(task)
        rule = self.rules.get(queue) if queue is not None else None
        return rule is not None and bool(rule.limits)

    def _count(self, task: TaskInfo, sign: float) -> None:
        """``addNodeGroupAllocated`` / ``subNodeGroupAllocated``: a task of a limited queue placed on
        (or taken off) a node of a group."""
        queue = self._queue_of(task)
        rule = self.rules.get(queue) if queue is not None else None
        if rule is None or not rule.limits or not task.node_name:
            return
        node = self.ssn.nodes.get(task.node_name)
        group = node.labels.get(NODEGROUP_LABEL) if node is not None else None
        if group is None or group not in rule.limits:
            return
        used = rule.allocated.setdefault(group, {})
        for name in rule.limits[group][1]:
            used[name] = used.get(name, 0.0) + sign * task.resreq.get(name)

    def _exceeded(self, task: TaskInfo) -> np.ndarray:
        """Per group code: whether the task would take its queue over the group's limit
        (``limitedResourceExceededNames``: above the limit by at least api.GetMinResource(), 0.1)."""
        out = np.zeros(self.groups.unlabelled + 1, dtype=bool)
        queue = self._queue_of(task)
        rule = self.rules.get(queue) if queue is not None else None
        if rule is None:
            return out
        for group, (limit, names) in rule.limits.items():
            code = self.groups.index.get(group)
            if code is None:
                continue
            used = rule.allocated.get(group, {})
            for name in names:
                future = used.get(name, 0.0) + task.resreq.get(name)
                cap = limit.get(name)
                if future > cap and future - cap >= MIN_RESOURCE:
                    out[code] = True
                    break
        return out

    def within_limits(self, task: TaskInfo, rows: np.ndarray) -> np.ndarray:
        return ~self._exceeded(task)[self.groups.codes[rows]]  # type: ignore[no-any-return]

    def explain_limits(self, task: TaskInfo, rows: np.ndarray) -> dict[str, np.ndarray]:
        return {LIMIT_EXCEEDED: self._exceeded(task)[self.groups.codes[rows]]}
