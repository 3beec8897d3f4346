"""Pods that no cycle can schedule for a reason outside scheduling itself: a PodGroup that does not
exist, a spec that cannot be read. One wording for the Event, the debug API, ``explain`` and the web
view, so an operator who finds the one finds the others."""

from __future__ import annotations

from caldera.cache.store import MissingPodGroup, UnreadablePod
from caldera.framework.model import GROUP_NAME_ANNOTATION, TaskStatus

#: the ``problem`` field of a debug document, and what the Events say in their message
PODGROUP_NOT_FOUND = "PodGroupNotFound"
INVALID_POD_SPEC = "InvalidPodSpec"


def pending_pods(missing: MissingPodGroup) -> int:
    return sum(1 for t in missing.pods if t.status == TaskStatus.PENDING)


def missing_podgroup_reason(missing: MissingPodGroup) -> str:
    n = pending_pods(missing)
    pods = "1 pod waits" if n == 1 else f"{n} pods wait"
    return (
        f"PodGroup {missing.key} not found: {pods} for it (annotation {GROUP_NAME_ANNOTATION}: "
        f"{missing.name}); nothing is scheduled without it"
    )


def missing_podgroup_suggestion(missing: MissingPodGroup) -> str:
    return (
        f"create PodGroup {missing.name} in namespace {missing.namespace}, or correct the pods' "
        f"{GROUP_NAME_ANNOTATION} annotation to name an existing PodGroup"
    )


def unreadable_reason(pod: UnreadablePod) -> str:
    return f"pod {pod.key} cannot be scheduled: its spec cannot be read: {pod.reason}"


def unreadable_suggestion(pod: UnreadablePod) -> str:
    return (
        f"re-create pod {pod.key} with valid, non-negative resource quantities "
        "(e.g. cpu: 500m, memory: 1Gi); requests cannot be changed on a running pod"
    )
