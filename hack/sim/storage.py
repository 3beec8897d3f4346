"""Storage in the simulated cluster: a minimal dynamic provisioner for PersistentVolumeClaims.

What a CSI external-provisioner plus the PV controller do, in the few lines a scheduler test needs:
an unbound claim of a StorageClass with a provisioner (not ``kubernetes.io/no-provisioner``) gets a
volume once it may: at once for an ``Immediate`` class, and for a ``WaitForFirstConsumer`` class
once the scheduler has written ``volume.kubernetes.io/selected-node`` on it. The volume is created
bound to the claim (``spec.claimRef``, phase Bound) with a node affinity on the selected node's
topology (the class's ``allowedTopologies`` keys, else the node's hostname), and the claim is bound
to it (``spec.volumeName``, phase Bound). A selected node outside the class's ``allowedTopologies``
is not provisioned for (the claim stays pending, as a real provisioner's attempt fails).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from .errors import ApiError
from .loop import BackgroundLoop
from .resources import NODES, resource

if TYPE_CHECKING:
    from .store import Store, WatchEvent

log = logging.getLogger("caldera.sim.storage")

PVCS = resource("persistentvolumeclaims")
PVS = resource("persistentvolumes")
STORAGE_CLASSES = resource("storageclasses", "storage.k8s.io")
SELECTED_NODE = "volume.kubernetes.io/selected-node"
NO_PROVISIONER = "kubernetes.io/no-provisioner"


class Provisioner(BackgroundLoop):
    task_name = "sim-provisioner"

    def __init__(self, store: Store, delay: float = 0.05):
        super().__init__()
        self.store = store
        self.delay = delay
        self._dirty: set[tuple[str, str]] = set()
        store.subscribe(PVCS, self._on_pvc)

    def _on_pvc(self, ev: WatchEvent) -> None:
        if ev.type == "DELETED" or (ev.obj.get("spec") or {}).get("volumeName"):
            return
        meta = ev.obj["metadata"]
        self._dirty.add((meta["namespace"], meta["name"]))
        self._wake.set()

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            await asyncio.sleep(self.delay)
            dirty, self._dirty = self._dirty, set()
            for ns, name in dirty:
                try:
                    self._provision(ns, name)
                except ApiError as exc:
                    log.debug("provisioning %s/%s: %s", ns, name, exc.message)
                except Exception:
                    log.exception("provisioning %s/%s failed", ns, name)

    def _provision(self, ns: str, name: str) -> None:
        pvc = self.store.get_obj(PVCS, ns, name)
        if (
            pvc is None
            or (pvc.get("spec") or {}).get("volumeName")
            or pvc["metadata"].get("deletionTimestamp")
        ):
            return
        class_name = (pvc.get("spec") or {}).get("storageClassName") or ""
        cls = self.store.get_obj(STORAGE_CLASSES, "", class_name) if class_name else None
        if cls is None or not cls.get("provisioner") or cls["provisioner"] == NO_PROVISIONER:
            return
        node_name = (pvc["metadata"].get("annotations") or {}).get(SELECTED_NODE)
        wait = cls.get("volumeBindingMode") == "WaitForFirstConsumer"
        if wait and not node_name:
            return
        requirements = self._topology(cls, node_name) if node_name else []
        if requirements is None:
            log.info(
                "claim %s/%s: node %s is outside class %s's allowed topologies",
                ns,
                name,
                node_name,
                class_name,
            )
            return
        pv_name = f"pvc-{pvc['metadata']['uid']}"
        spec: dict[str, Any] = {
            "storageClassName": class_name,
            "capacity": ((pvc.get("spec") or {}).get("resources") or {}).get("requests")
            or {"storage": "1Gi"},
            "accessModes": (pvc.get("spec") or {}).get("accessModes") or ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Delete",
            "claimRef": {
                "kind": "PersistentVolumeClaim",
                "namespace": ns,
                "name": name,
                "uid": pvc["metadata"]["uid"],
            },
            "csi": {"driver": cls["provisioner"], "volumeHandle": pv_name},
        }
        if requirements:
            spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [{"matchExpressions": requirements}]}}
        if self.store.get_obj(PVS, "", pv_name) is None:
            self.store.create(
                PVS,
                "",
                {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": pv_name}, "spec": spec},
            )
        self.store.put_status(PVS, "", pv_name, {"phase": "Bound"})
        self.store.patch(PVCS, ns, name, "application/merge-patch+json", {"spec": {"volumeName": pv_name}})
        self.store.put_status(
            PVCS,
            ns,
            name,
            {"phase": "Bound", "accessModes": spec["accessModes"], "capacity": spec["capacity"]},
        )

    def _topology(self, cls: dict[str, Any], node_name: str) -> list[dict[str, Any]] | None:
        """The volume's node affinity for the selected node; None when the class does not allow it."""
        node = self.store.get_obj(NODES, "", node_name)
        labels = ((node or {}).get("metadata") or {}).get("labels") or {}
        allowed = cls.get("allowedTopologies") or []
        if not allowed:
            host = labels.get("kubernetes.io/hostname", node_name)
            return [{"key": "kubernetes.io/hostname", "operator": "In", "values": [host]}]
        for term in allowed:
            reqs = term.get("matchLabelExpressions") or []
            if all(labels.get(r.get("key")) in (r.get("values") or []) for r in reqs):
                return [{"key": r["key"], "operator": "In", "values": [labels[r["key"]]]} for r in reqs]
        return None
