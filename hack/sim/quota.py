"""ResourceQuotas in the simulated cluster: the quota controller's ``status`` and the API server's
quota admission of pods, as a real control plane does them (for pods; other kinds are not counted).

Usage of a pod (Kubernetes pkg/quota/v1/evaluator/core/pods.go, ``PodUsageFunc`` and
``podComputeUsageHelper``): ``count/pods`` always; a pod that is not terminal (``QuotaV1Pod``: not
Succeeded or Failed) also counts ``pods`` 1, ``cpu`` and ``requests.cpu`` = its cpu request,
``memory`` and ``requests.memory`` likewise, ``limits.cpu`` / ``limits.memory`` from its limits, and
``requests.<name>`` for an extended resource; requests are the sum over containers, at least the
largest init container, plus the overhead (``resourcehelper.PodRequests``).

Status (kube-controller-manager's resourcequota controller, ``syncResourceQuota``): ``status.hard`` is
``spec.hard``; ``status.used`` is the usage of the namespace's pods masked to the names in ``hard``.
Here it is filled in when the quota is created and recomputed (debounced) whenever a pod of its
namespace or its spec changes.

Admission (k8s.io/apiserver/pkg/admission/plugin/resourcequota/controller.go, ``CheckRequest``): for
each quota of the pod's namespace, the pod's usage masked to the names in ``status.hard`` is added to
``status.used``; if that exceeds ``hard`` for any name the create is refused with 403
``pods "NAME" is forbidden: exceeded quota: QUOTA, requested: cpu=2, used: cpu=3, limited: cpu=4``
(each list masked to the names exceeded, ``prettyPrint``: sorted ``name=quantity``), else every quota
the pod touches has its ``status.used`` raised at once, as the admission plugin writes it. Not
modelled: the ``must specify requests.cpu`` refusal of a pod without a request a quota tracks,
quota scopes and scope selectors, and object counts of other kinds.
"""

from __future__ import annotations

import logging
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from .errors import ApiError, invalid
from .loop import NamespaceDebounced
from .quantity import parse_quantity, pod_requests
from .resources import PODS, resource

if TYPE_CHECKING:
    from .store import Store, WatchEvent

log = logging.getLogger("caldera.sim.quota")

RESOURCE_QUOTAS = resource("resourcequotas")
_COMPUTE = ("cpu", "memory")
_TERMINAL = ("Succeeded", "Failed")


def _sum(items: list[dict[str, Any]], key: str) -> dict[str, Fraction]:
    total: dict[str, Fraction] = {}
    for c in items:
        for name, q in ((c.get("resources") or {}).get(key) or {}).items():
            total[name] = total.get(name, Fraction(0)) + parse_quantity(q)
    return total


def pod_usage(pod: dict[str, Any]) -> dict[str, Fraction]:
    """``PodUsageFunc``: what the pod counts against a quota, by quota resource name."""
    usage: dict[str, Fraction] = {"count/pods": Fraction(1)}
    if ((pod.get("status") or {}).get("phase")) in _TERMINAL:
        return usage
    spec = pod.get("spec") or {}
    usage["pods"] = Fraction(1)
    for name, value in pod_requests(spec).items():
        if name in _COMPUTE:
            usage[name] = value
            usage[f"requests.{name}"] = value
        elif "/" in name or name.startswith("requests."):
            usage[f"requests.{name}"] = value
        elif name == "ephemeral-storage":
            usage["requests.ephemeral-storage"] = value
    for name, value in _sum(spec.get("containers") or [], "limits").items():
        if name in (*_COMPUTE, "ephemeral-storage"):
            usage[f"limits.{name}"] = value
    return usage


def format_quantity(value: Fraction) -> str:
    """A quantity in a canonical form: a whole number plainly (with a binary suffix when it is a
    whole number of Ki/Mi/Gi/Ti above 1024), else in milli-units."""
    if value.denominator == 1:
        whole = value.numerator
        for suffix, size in (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
            if whole >= size and whole % size == 0:
                return f"{whole // size}{suffix}"
        return str(whole)
    return f"{-(-value * 1000 // 1)}m"


def _pretty(items: dict[str, Fraction]) -> str:
    """``prettyPrint``: sorted ``name=quantity`` pairs joined by commas."""
    return ",".join(f"{name}={format_quantity(items[name])}" for name in sorted(items))


def _parsed(items: dict[str, Any] | None) -> dict[str, Fraction]:
    out: dict[str, Fraction] = {}
    for name, value in (items or {}).items():
        try:
            out[name] = parse_quantity(value)
        except ValueError:
            continue
    return out


def _as_list(items: dict[str, Fraction]) -> dict[str, str]:
    return {name: format_quantity(value) for name, value in sorted(items.items())}


def used_in(store: Store, namespace: str, hard: dict[str, Any]) -> dict[str, str]:
    """``status.used``: the usage of the namespace's pods, masked to the names in ``hard``."""
    total = {name: Fraction(0) for name in hard}
    for pod in store.objects(PODS, namespace):
        for name, value in pod_usage(pod).items():
            if name in total:
                total[name] += value
    return _as_list(total)


def admit_quota(store: Store, obj: dict[str, Any]) -> None:
    """A ResourceQuota created: its quantities must parse (else 422), and its status is synced at once
    (the strategy drops a status sent on create; the controller fills it)."""
    name = obj["metadata"]["name"]
    hard = dict((obj.get("spec") or {}).get("hard") or {})
    for key, value in hard.items():
        try:
            parse_quantity(value)
        except ValueError:
            raise invalid(
                "ResourceQuota",
                name,
                [(f"spec.hard[{key}]", "FieldValueInvalid", f"Invalid value: {value!r}: must be a quantity")],
            ) from None
    obj["status"] = {"hard": hard, "used": used_in(store, obj["metadata"]["namespace"], hard)}


def admit_pod(store: Store, pod: dict[str, Any]) -> None:
    """``CheckRequest`` for a pod being created: 403 when a quota of its namespace would be exceeded,
    else every quota it touches counts it in ``status.used``."""
    meta = pod["metadata"]
    namespace = meta["namespace"]
    quotas = store.objects(RESOURCE_QUOTAS, namespace)
    if not quotas:
        return
    usage = pod_usage(pod)
    updates: list[tuple[str, dict[str, Any]]] = []
    for quota in sorted(quotas, key=lambda q: q["metadata"]["name"]):
        status = quota.get("status") or {}
        hard = _parsed(status.get("hard"))
        used = _parsed(status.get("used"))
        requested = {k: v for k, v in usage.items() if k in hard}
        if not requested:
            continue
        new_usage = {k: used.get(k, Fraction(0)) + v for k, v in requested.items()}
        exceeded = sorted(k for k, limit in hard.items() if k in new_usage and new_usage[k] > limit)
        if exceeded:
            raise ApiError(
                403,
                "Forbidden",
                f'pods "{meta["name"]}" is forbidden: exceeded quota: {quota["metadata"]["name"]}, '
                f"requested: {_pretty({k: requested[k] for k in exceeded})}, "
                f"used: {_pretty({k: used[k] for k in exceeded if k in used})}, "
                f"limited: {_pretty({k: hard[k] for k in exceeded})}",
                {"name": meta["name"], "kind": "pods"},
            )
        updates.append((quota["metadata"]["name"], {**status, "used": _as_list({**used, **new_usage})}))
    for name, status in updates:
        store.put_status(RESOURCE_QUOTAS, namespace, name, status)


class QuotaController(NamespaceDebounced):
    """Keeps every quota's ``status`` current as pods and quotas change (debounced per namespace)."""

    task_name = "sim-quota-controller"

    def __init__(self, store: Store, interval: float = 0.05):
        super().__init__(interval)
        self.store = store
        store.subscribe(PODS, self._on_pod)
        store.subscribe(RESOURCE_QUOTAS, self._on_quota)

    def _on_pod(self, ev: WatchEvent) -> None:
        ns = (ev.obj.get("metadata") or {}).get("namespace", "")
        if ns and self.store.objects(RESOURCE_QUOTAS, ns):
            self.mark(ns)

    def _on_quota(self, ev: WatchEvent) -> None:
        if ev.type == "DELETED" or (ev.prev is not None and ev.prev.get("spec") == ev.obj.get("spec")):
            return  # gone, or a status write (ours or admission's): nothing to recompute
        self.mark(ev.obj["metadata"].get("namespace", ""))

    def sync(self, namespace: str) -> None:
        """``syncResourceQuota`` for every quota of the namespace."""
        for quota in self.store.objects(RESOURCE_QUOTAS, namespace):
            name = quota["metadata"]["name"]
            try:
                hard = dict((quota.get("spec") or {}).get("hard") or {})
                status = {"hard": hard, "used": used_in(self.store, namespace, hard)}
                if status != (quota.get("status") or {}):
                    self.store.put_status(RESOURCE_QUOTAS, namespace, name, status)
            except ApiError as exc:
                log.debug("quota %s/%s: %s", namespace, name, exc.message)
            except Exception:
                log.exception("quota %s/%s status failed", namespace, name)
