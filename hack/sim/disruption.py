"""PodDisruptionBudgets in the simulated cluster: the disruption controller's status and the
eviction subresource's check, as a real control plane does them.

Status (kube-controller-manager's disruption controller, pkg/controller/disruption
``getExpectedPodCount``/``countHealthyPods``/``updatePdbStatus``): the pods of the PDB's namespace
that its (non-empty) selector matches are expected; ``minAvailable`` (a count, or a percentage of
the expected pods rounded up) is the desired healthy number, or expected minus ``maxUnavailable``;
healthy pods are running, ready and not being deleted, and not in ``disruptedPods``;
``disruptionsAllowed = max(0, healthy - desired)``. Here the expected count is the matching pods
themselves (a real controller asks the pods' workload controllers for their scale).

Eviction (kube-apiserver's pods/eviction REST, ``EvictionREST.Create``): a pod that is not running
(pending, finished) or already being deleted is deleted without a check; a pod covered by more than
one PDB cannot be evicted (500); otherwise if the PDB allows no disruption the answer is 429
TooManyRequests "Cannot evict pod as it would violate the pod's disruption budget.", else the
PDB's ``disruptionsAllowed`` is decremented and the pod recorded in ``disruptedPods`` before the
pod is deleted.
"""

from __future__ import annotations

import logging
import math
from typing import TYPE_CHECKING, Any

from .errors import ApiError
from .loop import NamespaceDebounced
from .resources import PODS, resource
from .selectors import match_labels_selector

if TYPE_CHECKING:
    from .store import Store, WatchEvent

log = logging.getLogger("caldera.sim.disruption")

PDBS = resource("poddisruptionbudgets", "policy")
#: how long an eviction's entry in ``disruptedPods`` is kept (the controller's DeletionTimeout)
DISRUPTED_TTL = 120.0


def _selects(pdb: dict[str, Any], pod: dict[str, Any]) -> bool:
    selector = (pdb.get("spec") or {}).get("selector")
    if not selector or not (selector.get("matchLabels") or selector.get("matchExpressions")):
        return False  # a nil or empty selector matches nothing (policy/v1)
    if (pod.get("metadata") or {}).get("namespace") != (pdb.get("metadata") or {}).get("namespace"):
        return False
    return match_labels_selector(selector)((pod.get("metadata") or {}).get("labels") or {})


def _healthy(pod: dict[str, Any]) -> bool:
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        return False
    status = pod.get("status") or {}
    if status.get("phase") != "Running":
        return False
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or ())


def _scaled(value: Any, expected: int) -> int:
    if isinstance(value, str) and value.endswith("%"):
        try:
            return math.ceil(float(value[:-1]) * expected / 100.0)
        except ValueError:
            return expected
    try:
        return int(value)
    except (TypeError, ValueError):
        return expected


def compute_status(pdb: dict[str, Any], pods: list[dict[str, Any]], now: float) -> dict[str, Any]:
    from .store import rfc3339

    spec = pdb.get("spec") or {}
    old = pdb.get("status") or {}
    matching = [p for p in pods if _selects(pdb, p)]
    names = {p["metadata"]["name"] for p in matching}
    disrupted = {
        name: when
        for name, when in (old.get("disruptedPods") or {}).items()
        if name in names and _age(when, now) < DISRUPTED_TTL
    }
    expected = len(matching)
    if spec.get("maxUnavailable") is not None:
        desired = max(0, expected - _scaled(spec["maxUnavailable"], expected))
    elif spec.get("minAvailable") is not None:
        desired = _scaled(spec["minAvailable"], expected)
    else:
        desired = expected
    healthy = sum(1 for p in matching if _healthy(p) and p["metadata"]["name"] not in disrupted)
    allowed = max(0, healthy - desired)
    generation = (pdb.get("metadata") or {}).get("generation", 1)
    conditions = [
        {
            "type": "DisruptionAllowed",
            "status": "True" if allowed > 0 else "False",
            "reason": "SufficientPods" if allowed > 0 else "InsufficientPods",
            "message": "",
            "observedGeneration": generation,
            "lastTransitionTime": rfc3339(),
        }
    ]
    return {
        "observedGeneration": generation,
        "disruptedPods": disrupted,
        "disruptionsAllowed": allowed,
        "currentHealthy": healthy,
        "desiredHealthy": desired,
        "expectedPods": expected,
        "conditions": conditions,
    }


def _age(stamp: str, now: float) -> float:
    import datetime

    try:
        when = datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except (ValueError, AttributeError):
        return 0.0
    return now - when


def check_eviction(store: Store, pod: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """Raise 429 (or 500) when evicting ``pod`` would violate a budget; otherwise the PDB to charge
    (namespace/name and its new status), or None when no budget covers the pod."""
    import time

    from .store import rfc3339

    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        return None
    if (pod.get("status") or {}).get("phase") in ("Pending", "Succeeded", "Failed", None):
        return None
    ns = pod["metadata"]["namespace"]
    pdbs = [p for p in store.objects(PDBS, ns) if _selects(p, pod)]
    if not pdbs:
        return None
    if len(pdbs) > 1:
        raise ApiError(
            500,
            "InternalError",
            "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
        )
    pdb = pdbs[0]
    status = dict(pdb.get("status") or {})
    name = pod["metadata"]["name"]
    if name in (status.get("disruptedPods") or {}):
        return None  # already charged for this pod
    generation = (pdb.get("metadata") or {}).get("generation", 1)
    if status.get("observedGeneration", 0) < generation or int(status.get("disruptionsAllowed") or 0) <= 0:
        raise ApiError(
            429,
            "TooManyRequests",
            "Cannot evict pod as it would violate the pod's disruption budget.",
            {"causes": [{"reason": "DisruptionBudget", "message": _budget_message(pdb, status)}]},
        )
    status["disruptionsAllowed"] = int(status["disruptionsAllowed"]) - 1
    status["disruptedPods"] = {**(status.get("disruptedPods") or {}), name: rfc3339(time.time())}
    return f"{ns}/{pdb['metadata']['name']}", status


def _budget_message(pdb: dict[str, Any], status: dict[str, Any]) -> str:
    return (
        f"The disruption budget {pdb['metadata']['name']} needs {status.get('desiredHealthy', 0)} healthy pods "
        f"and has {status.get('currentHealthy', 0)} currently"
    )


class DisruptionController(NamespaceDebounced):
    """Keeps every PDB's status current as pods and budgets change (debounced per namespace)."""

    task_name = "sim-disruption-controller"

    def __init__(self, store: Store, interval: float = 0.05):
        super().__init__(interval)
        self.store = store
        store.subscribe(PODS, self._on_pod)
        store.subscribe(PDBS, self._on_pdb)

    def _on_pod(self, ev: WatchEvent) -> None:
        ns = (ev.obj.get("metadata") or {}).get("namespace", "")
        if ns and self.store.objects(PDBS, ns):
            self.mark(ns)

    def _on_pdb(self, ev: WatchEvent) -> None:
        if ev.type == "DELETED":
            return
        old_spec = (ev.prev or {}).get("spec")
        if (
            ev.prev is not None
            and old_spec == ev.obj.get("spec")
            and ev.prev.get("metadata", {}).get("labels") == ev.obj.get("metadata", {}).get("labels")
        ):
            return  # a status write (ours or an eviction's): nothing to recompute
        self.mark(ev.obj["metadata"].get("namespace", ""))

    def sync(self, ns: str) -> None:
        import time

        pods = self.store.objects(PODS, ns)
        for pdb in self.store.objects(PDBS, ns):
            try:
                status = compute_status(pdb, pods, time.time())
                current = pdb.get("status") or {}
                if {k: v for k, v in status.items() if k != "conditions"} != {
                    k: v for k, v in current.items() if k != "conditions"
                }:
                    self.store.put_status(PDBS, ns, pdb["metadata"]["name"], status)
            except ApiError as exc:
                log.debug("pdb %s/%s: %s", ns, pdb["metadata"]["name"], exc.message)
            except Exception:
                log.exception("pdb %s/%s status failed", ns, pdb["metadata"]["name"])
