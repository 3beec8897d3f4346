"""Kubernetes' own PodGroups and Workloads (``scheduling.k8s.io/v1alpha2``) in the simulated cluster,
beyond the create-time checks in ``store._check_native_podgroup``: the defaulting and update
validation of a 1.36 API server, and kube-controller-manager's PodGroup protection controller.

- Defaulting (``PodGroupSpec.disruptionMode``, ``+default="Pod"`` in
  staging/src/k8s.io/api/scheduling/v1alpha2/types.go): a PodGroup written without
  ``disruptionMode`` is stored with ``Pod``, on create and on update alike.
- Update validation (the same types.go, declarative ``+k8s:immutable`` tags): every field of a
  PodGroup's spec is immutable (``podGroupTemplateRef``, ``schedulingPolicy``,
  ``schedulingConstraints``, ``resourceClaims``, ``disruptionMode``, ``priorityClassName``,
  ``priority``), and so are a Workload's ``controllerRef`` and ``podGroupTemplates``. A change is a 422
  ``<field>: Invalid value: "null": field is immutable`` (``validate.Immutable``: ``field.Invalid`` with
  no value, origin ``immutable``), one cause per changed field.
- Deletion protection (pkg/controller/podgroupprotection/podgroup_protection_controller.go, KEP-5832
  "Deletion Protection"): the controller adds the ``scheduling.k8s.io/podgroup-protection`` finalizer to a
  PodGroup that a pod not yet finished (phase neither Succeeded nor Failed) names in
  ``spec.schedulingGroup.podGroupName``, and removes it from a PodGroup being deleted once no such pod is
  left; the PodGroup then goes. Runs with the simulated controllers and only while the API is served.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from .errors import ApiError, invalid
from .loop import NamespaceDebounced
from .resources import BY_ID, PODS

if TYPE_CHECKING:
    from .store import Store, WatchEvent

log = logging.getLogger("caldera.sim.podgroups")

PODGROUPS = BY_ID["podgroups.scheduling.k8s.io"]
WORKLOADS = BY_ID["workloads.scheduling.k8s.io"]
#: ``PodGroupProtectionFinalizer`` (podgroupprotection)
PROTECTION_FINALIZER = "scheduling.k8s.io/podgroup-protection"
#: a PodGroup's spec fields, each ``+k8s:immutable`` in v1alpha2's types.go
PODGROUP_IMMUTABLE = (
    "podGroupTemplateRef",
    "schedulingPolicy",
    "schedulingConstraints",
    "resourceClaims",
    "disruptionMode",
    "priorityClassName",
    "priority",
)
WORKLOAD_IMMUTABLE = ("controllerRef", "podGroupTemplates")
DEFAULT_DISRUPTION_MODE = "Pod"


def default_podgroup(obj: dict[str, Any]) -> None:
    """The server's defaulting of a PodGroup: ``spec.disruptionMode`` is ``Pod`` when unset."""
    spec = obj.get("spec")
    if isinstance(spec, dict) and spec.get("disruptionMode") is None:
        spec["disruptionMode"] = DEFAULT_DISRUPTION_MODE


def check_update(kind: str, name: str, old: dict[str, Any], new: dict[str, Any]) -> None:
    """A PodGroup or Workload update that changes an immutable spec field: 422, one cause per field."""
    fields = PODGROUP_IMMUTABLE if kind == "PodGroup" else WORKLOAD_IMMUTABLE
    before, after = old.get("spec") or {}, new.get("spec") or {}
    causes = [
        (f"spec.{f}", "FieldValueInvalid", 'Invalid value: "null": field is immutable')
        for f in fields
        if before.get(f) != after.get(f)
    ]
    if causes:
        raise invalid(kind, name, causes, "scheduling.k8s.io")


def _group_of(pod: dict[str, Any]) -> str:
    return str(((pod.get("spec") or {}).get("schedulingGroup") or {}).get("podGroupName") or "")


def _finished(pod: dict[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


class PodGroupProtection(NamespaceDebounced):
    """kube-controller-manager's PodGroup protection controller (see the module docstring), per
    namespace: PodGroups in use keep the finalizer, a deleted one goes once its pods are done."""

    task_name = "sim-podgroup-protection"

    def __init__(self, store: Store, interval: float = 0.05):
        super().__init__(interval)
        self.store = store
        if store.native_gang:
            store.subscribe(PODS, self._on_pod)
            store.subscribe(PODGROUPS, self._on_podgroup)

    def _on_pod(self, ev: WatchEvent) -> None:
        # as the controller's filter: only a pod added, finished, deleted (or not yet bound) can
        # change whether its group is in use
        pod = ev.obj
        if not _group_of(pod) and not (ev.prev is not None and _group_of(ev.prev)):
            return
        if ev.type == "DELETED" or _finished(pod) or not (pod.get("spec") or {}).get("nodeName"):
            self.mark(pod["metadata"].get("namespace", ""))

    def _on_podgroup(self, ev: WatchEvent) -> None:
        if ev.type == "DELETED":
            return
        meta = ev.obj["metadata"]
        protected = PROTECTION_FINALIZER in (meta.get("finalizers") or ())
        if protected == bool(meta.get("deletionTimestamp")):  # the finalizer to add, or to remove
            self.mark(meta.get("namespace", ""))

    def sync(self, ns: str) -> None:
        in_use = {_group_of(p) for p in self.store.objects(PODS, ns) if not _finished(p)}
        for group in self.store.objects(PODGROUPS, ns):
            meta = group["metadata"]
            finalizers = list(meta.get("finalizers") or ())
            protected = PROTECTION_FINALIZER in finalizers
            used = meta["name"] in in_use
            if meta.get("deletionTimestamp"):
                if not protected or used:
                    continue
                finalizers.remove(PROTECTION_FINALIZER)
            elif protected or not used:
                continue
            else:
                finalizers.append(PROTECTION_FINALIZER)
            body = {
                "metadata": {"resourceVersion": meta["resourceVersion"], "finalizers": finalizers or None}
            }
            try:
                self.store.patch(PODGROUPS, ns, meta["name"], "application/merge-patch+json", body)
            except ApiError as exc:  # changed meanwhile: its watch event marks the namespace again
                log.debug("podgroup %s/%s: %s", ns, meta["name"], exc.message)
