"""predicates: which nodes can take a pod, vectorised over node rows.

Static parts (cached per pod template for the session): node unschedulable / not ready, node
selector and required node affinity, taints and tolerations. Dynamic parts: host ports, pod
count and resource fit (against the node's future idle: idle + releasing - pipelined), and
required inter-pod affinity and anti-affinity (including existing pods' anti-affinity).

Pod topology spread (``DoNotSchedule`` constraints, plugins/spread.py) is not node-local: a pod
placed in a domain changes the answer for every node of it, so the session evaluates it afresh
over the rows its per-template cache lets through.

Arguments (Volcano's names): ``predicate.NodeAffinityEnable``, ``predicate.NodePortsEnable``,
``predicate.TaintTolerationEnable``, ``predicate.PodAffinityEnable``,
``predicate.PodTopologySpreadEnable``, ``predicate.VolumeBindingEnable``,
``predicate.VolumeZoneEnable``, ``predicate.NodeVolumeLimitsEnable``,
``predicate.DynamicResourceAllocationEnable`` (all default true; Volcano's default for the last is
false). The volume rules are plugins/volumes.py's, the ResourceClaim rules plugins/dra.py's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

import numpy as np

from caldera.framework.model import OCCUPYING_STATUSES, TaskInfo
from caldera.framework.objects import PodAffinityTerm
from caldera.framework.plugin import ArgumentError, Plugin, structured, unsupported
from caldera.plugins.dra import DraPart
from caldera.plugins.helpers import NodeIndex, node_index, pod_matches_term, term_mask, tolerates
from caldera.plugins.spread import R_SPREAD, R_SPREAD_LABEL, SpreadIndex, spread_index
from caldera.plugins.volumes import R_LIMIT, R_ZONE, VolumeIndex

if TYPE_CHECKING:
    from caldera.framework.session import Session

UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"

R_UNSCHEDULABLE = "node(s) were unschedulable"
R_NOT_READY = "node(s) were not ready"
R_AFFINITY = "node(s) didn't match Pod's node affinity/selector"
R_TAINT = "node(s) had untolerated taint"
R_PORTS = "node(s) didn't have free ports for the requested pod ports"
R_PODS = "Too many pods"
R_POD_AFFINITY = "node(s) didn't match pod affinity rules"
R_POD_ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules"
R_EXISTING_ANTI = "node(s) didn't satisfy existing pods anti-affinity rules"


def resource_fail_masks(ssn: Session, task: TaskInfo, rows: np.ndarray) -> dict[str, np.ndarray]:
    """Per kube-scheduler reason ("Insufficient cpu", "Too many pods"), the rows that lack it
    (against future idle: idle + releasing - pipelined)."""
    return ssn.table.shortfalls(task.init_resreq, rows)


def resource_fit(ssn: Session, task: TaskInfo, rows: np.ndarray) -> np.ndarray:
    return ssn.table.fits(task.init_resreq, rows)


def _filter_timeout(key: str, value: int) -> int:
    if value < 0:
        raise ArgumentError(f"{key} must be 0 (no bound) or more seconds, not {value}")
    return value


class PredicatesPlugin(Plugin):
    name: ClassVar[str] = "predicates"
    # Volcano's names (pkg/scheduler/plugins/predicates/predicates.go).
    arguments_schema: ClassVar[dict[str, type]] = {
        "predicate.NodeAffinityEnable": bool,
        "predicate.NodePortsEnable": bool,
        "predicate.TaintTolerationEnable": bool,
        "predicate.PodAffinityEnable": bool,
        "predicate.PodTopologySpreadEnable": bool,
        "predicate.NodeVolumeLimitsEnable": bool,
        "predicate.VolumeZoneEnable": bool,
        "predicate.VolumeBindingEnable": bool,
        # true by default (Volcano's default is false): plugins/dra.py
        "predicate.DynamicResourceAllocationEnable": bool,
        "predicate.CacheEnable": unsupported(
            bool, "template-level predicate results are always cached per session", True
        ),
        # Volcano's arguments of the kube-scheduler plugins it runs (pkg/scheduler/plugins/predicates/
        # helper.go, setUpDynamicResourcesArgs and setUpVolumeBindingArgs): DynamicResources'
        # filterTimeout in whole seconds, per node (plugins/dra.py; 0: a search runs to its end)
        "dynamicresources.filterTimeoutSeconds": structured(int, _filter_timeout),
        "volumebinding.bindTimeoutSeconds": unsupported(
            int,
            "how long a gang waits for its volumes is the binary's --volume-bind-timeout (600s by default)",
        ),
        "volumebinding.weight": unsupported(
            int, "nodes are not scored by their volumes (VolumeBinding's Score, StorageCapacityScoring)"
        ),
        "volumebinding.shape": unsupported(
            list, "nodes are not scored by their volumes (VolumeBinding's Score, StorageCapacityScoring)"
        ),
    }

    def on_session_open(self, ssn: Session) -> None:
        args = self.arguments
        self.affinity_on = args.bool("predicate.NodeAffinityEnable", True)
        self.ports_on = args.bool("predicate.NodePortsEnable", True)
        self.taints_on = args.bool("predicate.TaintTolerationEnable", True)
        self.pod_affinity_on = args.bool("predicate.PodAffinityEnable", True)
        self.spread_on = args.bool("predicate.PodTopologySpreadEnable", True)
        self.volume_binding_on = args.bool("predicate.VolumeBindingEnable", True)
        self.volume_zone_on = args.bool("predicate.VolumeZoneEnable", True)
        self.volume_limits_on = args.bool("predicate.NodeVolumeLimitsEnable", True)
        self.ssn = ssn
        #: placed pods carrying required anti-affinity terms, found on first use this session
        self._anti_terms: list[tuple[TaskInfo, PodAffinityTerm]] | None = None
        self.idx: NodeIndex = node_index(ssn)
        self._ports: dict[int, set[tuple[int, str]]] | None = None
        ssn.add_bulk_predicate_fn(self.name, self._static, self._static_explain, static=True, part="static")
        ssn.add_bulk_predicate_fn(
            self.name, self._resources, self._resources_explain, resource=True, part="fit", local=True
        )
        if self.ports_on:
            ssn.add_bulk_predicate_fn(
                self.name,
                self._ports_fn,
                self._ports_explain,
                part="ports",
                local=True,
                applies=lambda task: bool(self._task_ports(task)),
            )
        if self.pod_affinity_on:
            ssn.add_bulk_predicate_fn(
                self.name,
                self._pod_affinity,
                self._pod_affinity_explain,
                part="podaffinity",
                local=self._affinity_free,
                # free of inter-pod terms (its own, or placed pods' anti-affinity): passes everywhere
                applies=lambda task: not self._affinity_free(task),
            )
        snap = ssn.snapshot
        if snap.dra is not None:
            # Only a cluster with DRA objects or pods using claims pays for it (plugins/dra.py).
            self.dra = DraPart(
                ssn,
                self.name,
                args.bool("predicate.DynamicResourceAllocationEnable", True),
                args.get("dynamicresources.filterTimeoutSeconds"),
            )
        if self.volume_binding_on or self.volume_zone_on or self.volume_limits_on:
            self.volumes = VolumeIndex(ssn, self.idx)
            if self.volume_binding_on:
                ssn.add_pre_predicate_fn(self.name, self._volume_pre_filter)
            if self.volume_binding_on or self.volume_zone_on:
                ssn.add_bulk_predicate_fn(
                    self.name, self._volumes, self._volumes_explain, static=True, part="volumes"
                )
            if self.volume_limits_on and snap.csinodes:
                ssn.add_bulk_predicate_fn(
                    self.name,
                    lambda task, rows: ~self.volumes.limit_fails(task, rows),
                    lambda task, rows: {R_LIMIT: self.volumes.limit_fails(task, rows)},
                    part="volumelimits",
                    local=True,
                )
        if self.spread_on:
            self.spread: SpreadIndex = spread_index(self.idx)
            ssn.add_bulk_predicate_fn(
                self.name,
                self._spread,
                self.spread.fails,
                part="podtopologyspread",
                local=lambda task: not self.spread.has_hard(task),
                applies=lambda task: self.spread.has_hard(task),
            )

    # -- static ------------------------------------------------------------------------------------
    def _static_fails(self, task: TaskInfo, rows: np.ndarray) -> dict[str, np.ndarray]:
        t = self.ssn.table
        spec = task.pod.spec
        unsched = t.unschedulable[rows].copy()
        if unsched.any() and any(
            tol.key == UNSCHEDULABLE_TAINT or (tol.operator == "Exists" and not tol.key)
            for tol in spec.tolerations
        ):
            unsched[:] = False
        out = {R_NOT_READY: ~t.ready[rows], R_UNSCHEDULABLE: unsched}
        if self.affinity_on:
            out[R_AFFINITY] = ~self._selector_mask(task)[rows]
        if self.taints_on:
            out[R_TAINT] = ~self._taint_mask(task)[rows]
        return out

    def _static(self, task: TaskInfo, rows: np.ndarray) -> np.ndarray:
        mask = np.ones(len(rows), dtype=bool)
        for fails in self._static_fails(task, rows).values():
            mask &= ~fails
        return mask

    def _static_explain(self, task: TaskInfo, rows: np.ndarray) -> dict[str, np.ndarray]:
        return self._static_fails(task, rows)

    def _selector_mask(self, task: TaskInfo) -> np.ndarray:
        idx = self.idx
        spec = task.pod.spec
        mask = np.ones(idx.rows, dtype=bool)
        for key, value in spec.node_selector.items():
            mask &= idx.label(key) == value
        na = spec.affinity.node_affinity if spec.affinity else None
        required = na.required_during_scheduling_ignored_during_execution if na else None
        if required is not None:
            any_term = np.zeros(idx.rows, dtype=bool)
            for term in required.node_selector_terms:
                any_term |= idx.term_match(term)
            mask &= any_term
        return mask

    def _taint_mask(self, task: TaskInfo) -> np.ndarray:
        mask = np.ones(self.idx.rows, dtype=bool)
        tolerations = task.pod.spec.tolerations
        for taint, taint_rows in self.idx.taint_groups():
            if taint.effect in ("NoSchedule", "NoExecute") and not tolerates(tolerations, taint):
                mask[taint_rows] = False
        return mask

    # -- resources ---------------------------------------------------------------------------------
    def _resources(self, task: TaskInfo, rows: np.ndarray) -> np.ndarray:
        return resource_fit(self.ssn, task, rows)

    def _resources_explain(self, task: TaskInfo, rows: np.ndarray) -> dict[str, np.ndarray]:
        return resource_fail_masks(self.ssn, task, rows)

    # -- host ports --------------------------------------------------------------------------------
    @staticmethod
    def _task_ports(task: TaskInfo) -> set[tuple[int, str]]:
        return {(p.host_port, p.protocol) for c in task.pod.spec.containers for p in c.ports if p.host_port}

    def _used_ports(self) -> dict[int, set[tuple[int, str]]]:
        if self._ports is None:
            used: dict[int, set[tuple[int, str]]] = {}
            for node in self.ssn.node_list:
                for t in node.tasks.values():
                    if t.status in OCCUPYING_STATUSES or t.status.name == "PIPELINED":
                        ports = self._task_ports(t)
                        if ports:
                            used.setdefault(node.row, set()).update(ports)
            self._ports = used
            from caldera.framework.session import EventHandler

            self.ssn.add_event_handler(EventHandler(allocate=self._port_alloc, deallocate=self._port_dealloc))
        return self._ports

    def _port_alloc(self, event: object) -> None:
        task: TaskInfo = event.task  # type: ignore[attr-defined]
        ports = self._task_ports(task)
        node = self.ssn.nodes.get(task.node_name)
        if ports and node is not None and self._ports is not None:
            self._ports.setdefault(node.row, set()).update(ports)

    def _port_dealloc(self, event: object) -> None:
        task: TaskInfo = event.task  # type: ignore[attr-defined]
        ports = self._task_ports(task)
        node = self.ssn.nodes.get(task.node_name)
        if ports and node is not None and self._ports is not None:
            self._ports.get(node.row, set()).difference_update(ports)

    def _ports_fails(self, task: TaskInfo, rows: np.ndarray) -> np.ndarray:
        wanted = self._task_ports(task)
        fails = np.zeros(len(rows), dtype=bool)
        if not wanted:
            return fails
        used = self._used_ports()
        if not used:
            return fails
        busy = np.fromiter((r for r, ports in used.items() if ports & wanted), dtype=np.intp)
        if len(busy):
            fails = np.isin(rows, busy)
        return fails

    def _ports_fn(self, task: TaskInfo, rows: np.ndarray) -> np.ndarray:
        return ~self._ports_fails(task, rows)

    def _ports_explain(self, task: TaskInfo, rows: np.ndarray) -> dict[str, np.ndarray]:
        return {R_PORTS: self._ports_fails(task, rows)}

    # -- volumes -------------------------------------------------------------------------------------
    def _volume_pre_filter(self, task: TaskInfo) -> str | None:
        if not task.pod.spec.volumes:
            return None
        return self.volumes.pre_filter(task)

    def _volume_fails(self, task: TaskInfo, rows: np.ndarray) -> dict[str, np.ndarray]:
        if not task.pod.spec.volumes:
            return {}
        out = {}
        for reason, fails in self.volumes.static_fails(task).items():
            if reason == R_ZONE and not self.volume_zone_on:
                continue
            if reason != R_ZONE and not self.volume_binding_on:
                continue
            out[reason] = fails[rows]
        return out

    def _volumes(self, task: TaskInfo, rows: np.ndarray) -> np.ndarray:
        mask = np.ones(len(rows), dtype=bool)
        for fails in self._volume_fails(task, rows).values():
            mask &= ~fails
        return mask

    def _volumes_explain(self, task: TaskInfo, rows: np.ndarray) -> dict[str, np.ndarray]:
        return self._volume_fails(task, rows)

    # -- topology spread ---------------------------------------------------------------------------
    def _spread(self, task: TaskInfo, rows: np.ndarray) -> np.ndarray:
        if not self.spread.has_hard(task):
            return np.ones(len(rows), dtype=bool)
        fails = self.spread.fails(task, rows)
        return ~(fails[R_SPREAD] | fails[R_SPREAD_LABEL])

    # -- inter-pod affinity ------------------------------------------------------------------------
    def _existing_anti_terms(self) -> list[tuple[TaskInfo, PodAffinityTerm]]:
        """Placed pods that carry required anti-affinity terms (usually few): (pod, term)."""
        got = self._anti_terms
        if got is None:
            got = self._anti_terms = []
            # The snapshot names the nodes that hold such pods, when it knows: only those are read
            # (reading every pod of every node each cycle cost O(cluster)).
            for node in self.ssn.snapshot.nodes_with_affinity_pods(self.ssn.node_list):
                for t in node.tasks.values():
                    aff = t.pod.spec.affinity
                    anti = aff.pod_anti_affinity if aff else None
                    if anti is not None and t.status in OCCUPYING_STATUSES:
                        for term in anti.required_during_scheduling_ignored_during_execution:
                            got.append((t, term))
        return got

    def _pod_affinity_fails(self, task: TaskInfo, rows: np.ndarray) -> dict[str, np.ndarray]:
        idx = self.idx
        out: dict[str, np.ndarray] = {}
        aff = task.pod.spec.affinity
        if aff is not None and aff.pod_affinity is not None:
            terms = aff.pod_affinity.required_during_scheduling_ignored_during_execution
            if terms:
                ok = np.ones(idx.rows, dtype=bool)
                for term in terms:
                    ok &= term_mask(idx, term, task.namespace)
                if not ok.any():
                    # The first pod of a group that matches its own affinity may go anywhere (kube-scheduler's rule).
                    nobody = all(idx.term_counts(t, task.namespace).sum() == 0 for t in terms)
                    if nobody and all(pod_matches_term(task, t, task.namespace) for t in terms):
                        ok[:] = True
                out[R_POD_AFFINITY] = ~ok[rows]
        if aff is not None and aff.pod_anti_affinity is not None:
            terms = aff.pod_anti_affinity.required_during_scheduling_ignored_during_execution
            if terms:
                bad = np.zeros(idx.rows, dtype=bool)
                for term in terms:
                    bad |= term_mask(idx, term, task.namespace)
                out[R_POD_ANTI_AFFINITY] = bad[rows]
        existing = self._existing_anti_terms()
        if existing:
            bad = np.zeros(idx.rows, dtype=bool)
            for other, term in existing:
                if pod_matches_term(task, term, other.namespace):
                    node = self.ssn.nodes.get(other.node_name)
                    key = term.topology_key
                    if node is not None and key in node.labels:
                        bad |= idx.label(key) == node.labels[key]
            if bad.any():
                out[R_EXISTING_ANTI] = bad[rows]
        return out

    def _affinity_free(self, task: TaskInfo) -> bool:
        """No pod (anti-)affinity is involved for this task: the rule passes every node, node by node."""
        aff = task.pod.spec.affinity
        return (aff is None or (aff.pod_affinity is None and aff.pod_anti_affinity is None)) and not (
            self._existing_anti_terms()
        )

    def _pod_affinity(self, task: TaskInfo, rows: np.ndarray) -> np.ndarray:
        aff = task.pod.spec.affinity
        if (
            aff is None or (aff.pod_affinity is None and aff.pod_anti_affinity is None)
        ) and not self._existing_anti_terms():
            return np.ones(len(rows), dtype=bool)
        mask = np.ones(len(rows), dtype=bool)
        for fails in self._pod_affinity_fails(task, rows).values():
            mask &= ~fails
        return mask

    def _pod_affinity_explain(self, task: TaskInfo, rows: np.ndarray) -> dict[str, np.ndarray]:
        return self._pod_affinity_fails(task, rows)
