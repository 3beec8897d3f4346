"""Volume predicates, vectorised over node rows, as kube-scheduler's volume plugins decide them.

- VolumeBinding (pkg/scheduler/framework/plugins/volumebinding, ``PreFilter``/``Filter``, and the
  volume binder's ``FindPodVolumes``): a claim that does not exist or is being deleted, or an
  unbound claim of an ``Immediate`` class, keeps the pod out altogether ("pod has unbound
  immediate PersistentVolumeClaims"); a bound claim's volume must admit the node through its
  ``nodeAffinity`` ("node(s) had volume node affinity conflict"); an unbound claim of a
  ``WaitForFirstConsumer`` class needs a node where it can be provisioned (the class's
  ``allowedTopologies``) or, without a provisioner (``kubernetes.io/no-provisioner``), an
  available volume of its class whose node affinity admits the node ("node(s) didn't find
  available persistent volumes to bind").
- VolumeZone (plugins/volumezone ``Filter``): a bound volume's zone and region labels (values
  joined with ``__`` list several) must hold on the node ("node(s) had no available volume zone").
- NodeVolumeLimits (plugins/nodevolumelimits/csi.go ``Filter``): for a CSI driver whose CSINode
  entry on a node states ``allocatable.count``, the distinct volumes of that driver used by the
  node's pods plus the pod's new ones (a claim still to be provisioned counts for its class's
  driver) must not exceed it ("node(s) exceed max volume count").
  Counts follow the session's placements.

Which claims the binder must annotate with ``volume.kubernetes.io/selected-node`` (unbound
``WaitForFirstConsumer`` claims) is :func:`claims_to_provision`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np

from caldera.framework.model import OCCUPYING_STATUSES, TaskInfo
from caldera.framework.objects import (
    NodeSelectorRequirement,
    NodeSelectorTerm,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
)
from caldera.plugins.helpers import NodeIndex

if TYPE_CHECKING:
    from caldera.framework.session import Session

R_UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"
R_NODE_CONFLICT = "node(s) had volume node affinity conflict"
R_BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"
R_ZONE = "node(s) had no available volume zone"
R_LIMIT = "node(s) exceed max volume count"
SELECTED_NODE = "volume.kubernetes.io/selected-node"
NO_PROVISIONER = "kubernetes.io/no-provisioner"
WAIT = "WaitForFirstConsumer"
#: volumezone's labels (GA and beta names)
ZONE_LABELS = (
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region",
)


def claim_names(task: TaskInfo) -> list[str]:
    return [v.persistent_volume_claim.claim_name for v in task.pod.spec.volumes if v.persistent_volume_claim]


def claims_to_provision(
    task: TaskInfo, pvcs: Mapping[str, PersistentVolumeClaim], classes: Mapping[str, StorageClass]
) -> list[PersistentVolumeClaim]:
    """The pod's unbound claims of a WaitForFirstConsumer class: the node chosen for the pod is
    written on them (``volume.kubernetes.io/selected-node``) for the provisioner, before the bind."""
    out = []
    for name in claim_names(task):
        pvc = pvcs.get(f"{task.namespace}/{name}")
        if pvc is None or pvc.spec.volume_name:
            continue
        cls = classes.get(pvc.spec.storage_class_name or "")
        if cls is not None and cls.volume_binding_mode == WAIT:
            out.append(pvc)
    return out


class VolumeIndex:
    """Per session: what each pod template's claims allow, and CSI volumes counted per node."""

    def __init__(self, ssn: Session, idx: NodeIndex) -> None:
        snap = ssn.snapshot
        self.ssn = ssn
        self.idx = idx
        self.pvcs = snap.pvcs
        self.pvs = snap.pvs
        self.classes = snap.storage_classes
        self.csinodes = snap.csinodes
        self._static: dict[bytes, dict[str, np.ndarray]] = {}
        #: per CSI driver: the volume limit per row (-1: no limit known)
        self._limits: dict[str, np.ndarray] | None = None
        #: per CSI driver and row: the distinct volume handles in use
        self._used: dict[str, list[set[str]]] | None = None

    # -- pre-filter --------------------------------------------------------------------------------
    def pre_filter(self, task: TaskInfo) -> str | None:
        for name in claim_names(task):
            pvc = self.pvcs.get(f"{task.namespace}/{name}")
            if pvc is None:
                return f'persistentvolumeclaim "{name}" not found'
            if pvc.metadata.deletion_timestamp is not None:
                return f'persistentvolumeclaim "{name}" is being deleted'
            if pvc.spec.volume_name:
                if pvc.spec.volume_name not in self.pvs:
                    return f'pvc {name}: persistentvolume "{pvc.spec.volume_name}" not found'
                continue
            cls = self.classes.get(pvc.spec.storage_class_name or "")
            if cls is None or cls.volume_binding_mode != WAIT:
                return R_UNBOUND_IMMEDIATE
        return None

    # -- static filters (per template) ----------------------------------------------------------------
    def static_fails(self, task: TaskInfo) -> dict[str, np.ndarray]:
        """Per reason, the rows the pod's claims rule out (claims and volumes do not change within
        a session, so this is per pod template)."""
        key = task.template or task.uid.encode()
        got = self._static.get(key)
        if got is not None:
            return got
        rows = self.idx.rows
        conflict = np.zeros(rows, dtype=bool)
        bind = np.zeros(rows, dtype=bool)
        zone = np.zeros(rows, dtype=bool)
        for name in claim_names(task):
            pvc = self.pvcs.get(f"{task.namespace}/{name}")
            if pvc is None:
                continue  # the pre-filter keeps the pod out
            if pvc.spec.volume_name:
                pv = self.pvs.get(pvc.spec.volume_name)
                if pv is None:
                    continue
                conflict |= ~self._pv_admits(pv)
                zone |= ~self._zone_admits(pv)
                continue
            cls = self.classes.get(pvc.spec.storage_class_name or "")
            if cls is None or cls.volume_binding_mode != WAIT:
                continue
            bind |= ~self._can_bind(pvc, cls)
        got = {R_NODE_CONFLICT: conflict, R_BIND_CONFLICT: bind & ~conflict, R_ZONE: zone & ~conflict & ~bind}
        self._static[key] = got
        return got

    def _selector_mask(self, terms: list[NodeSelectorTerm]) -> np.ndarray:
        mask = np.zeros(self.idx.rows, dtype=bool)
        for term in terms:
            mask |= self.idx.term_match(term)
        return mask

    def _pv_admits(self, pv: PersistentVolume) -> np.ndarray:
        na = pv.spec.node_affinity
        if na is None or na.required is None:
            return np.ones(self.idx.rows, dtype=bool)
        return self._selector_mask(na.required.node_selector_terms)

    def _zone_admits(self, pv: PersistentVolume) -> np.ndarray:
        mask = np.ones(self.idx.rows, dtype=bool)
        for key in ZONE_LABELS:
            value = pv.metadata.labels.get(key)
            if value is None:
                continue
            mask &= np.isin(self.idx.label(key), value.split("__"))
        return mask

    def _can_bind(self, pvc: PersistentVolumeClaim, cls: StorageClass) -> np.ndarray:
        """Rows where an unbound WaitForFirstConsumer claim can get a volume."""
        if cls.provisioner and cls.provisioner != NO_PROVISIONER:
            if not cls.allowed_topologies:
                return np.ones(self.idx.rows, dtype=bool)
            terms = [
                NodeSelectorTerm(
                    match_expressions=[
                        NodeSelectorRequirement(key=r.key, operator="In", values=list(r.values))
                        for r in t.match_label_expressions
                    ]
                )
                for t in cls.allowed_topologies
            ]
            return self._selector_mask(terms)
        # Static provisioning: an available volume of the class, not claimed by another claim.
        mask = np.zeros(self.idx.rows, dtype=bool)
        for pv in self.pvs.values():
            if pv.spec.storage_class_name != (pvc.spec.storage_class_name or ""):
                continue
            ref = pv.spec.claim_ref
            if ref is not None and (ref.name != pvc.metadata.name or ref.namespace != pvc.metadata.namespace):
                continue
            if pv.status.phase not in ("Available", "Pending", ""):
                continue
            mask |= self._pv_admits(pv)
        return mask

    # -- CSI volume limits (dynamic, node-local) -----------------------------------------------------
    def _csi_volumes(self, task: TaskInfo) -> dict[str, set[str]]:
        """Driver → volume handles of the pod's CSI claims: a bound claim's volume (by PV name), an
        unbound one's volume to be provisioned by its class's driver (by claim; csi.go
        ``getCSIDriverInfoFromSC``)."""
        out: dict[str, set[str]] = {}
        for name in claim_names(task):
            pvc = self.pvcs.get(f"{task.namespace}/{name}")
            if pvc is None:
                continue
            if not pvc.spec.volume_name:
                cls = self.classes.get(pvc.spec.storage_class_name or "")
                if cls is not None and cls.provisioner and cls.provisioner != NO_PROVISIONER:
                    out.setdefault(cls.provisioner, set()).add(f"claim:{task.namespace}/{name}")
                continue
            pv = self.pvs.get(pvc.spec.volume_name)
            if pv is not None and pv.spec.csi is not None:
                out.setdefault(pv.spec.csi.driver, set()).add(pv.metadata.name)
        return out

    def _limit_tables(self) -> tuple[dict[str, np.ndarray], dict[str, list[set[str]]]]:
        if self._limits is None or self._used is None:
            limits: dict[str, np.ndarray] = {}
            for i, node in enumerate(self.ssn.node_list):
                csinode = self.csinodes.get(node.name)
                if csinode is None:
                    continue
                for driver in csinode.spec.drivers:
                    if driver.allocatable is not None and driver.allocatable.count is not None:
                        col = limits.setdefault(driver.name, np.full(self.idx.rows, -1, dtype=np.int64))
                        col[i] = driver.allocatable.count
            used: dict[str, list[set[str]]] = {d: [set() for _ in range(self.idx.rows)] for d in limits}
            if limits:
                for i, node in enumerate(self.ssn.node_list):
                    for t in node.tasks.values():
                        if t.status in OCCUPYING_STATUSES or t.status.name == "PIPELINED":
                            for name, handles in self._csi_volumes(t).items():
                                if name in used:
                                    used[name][i] |= handles
                from caldera.framework.session import EventHandler

                self.ssn.add_event_handler(
                    EventHandler(
                        allocate=lambda e: self._placed(e.task), deallocate=lambda e: self._removed(e.task)
                    )
                )
            self._limits, self._used = limits, used
        return self._limits, self._used

    def _placed(self, task: TaskInfo) -> None:
        node = self.ssn.nodes.get(task.node_name)
        if node is None or self._used is None:
            return
        for driver, handles in self._csi_volumes(task).items():
            if driver in self._used:
                self._used[driver][node.row] |= handles

    def _removed(self, task: TaskInfo) -> None:
        node = self.ssn.nodes.get(task.node_name)
        if node is None or self._used is None:
            return
        # Recount the row from the pods still on it (a volume may be shared by several pods).
        for driver in self._used:
            handles: set[str] = set()
            for t in node.tasks.values():
                if t.uid != task.uid and (t.status in OCCUPYING_STATUSES or t.status.name == "PIPELINED"):
                    handles |= self._csi_volumes(t).get(driver, set())
            self._used[driver][node.row] = handles

    def uses_csi_limits(self, task: TaskInfo) -> bool:
        if not self.csinodes or not task.pod.spec.volumes:
            return False
        limits, _ = self._limit_tables()
        return any(d in limits for d in self._csi_volumes(task))

    def limit_fails(self, task: TaskInfo, rows: np.ndarray) -> np.ndarray:
        fails = np.zeros(len(rows), dtype=bool)
        if not self.uses_csi_limits(task):
            return fails
        limits, used = self._limit_tables()
        for driver, handles in self._csi_volumes(task).items():
            if driver not in limits:
                continue
            limit = limits[driver][rows]
            per_row = used[driver]
            new = np.fromiter((len(handles - per_row[int(r)]) for r in rows), dtype=np.int64, count=len(rows))
            have = np.fromiter((len(per_row[int(r)]) for r in rows), dtype=np.int64, count=len(rows))
            fails |= (limit >= 0) & (have + new > limit)
        return fails
