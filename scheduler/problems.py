"""Pods that no cycle can schedule for a reason outside scheduling itself: a PodGroup that does not
exist, a spec that cannot be read. One wording for the Event, the debug API, ``explain`` and the web
view, so an operator who finds the one finds the others."""

from __future__ import annotations

from caldera.cache.indexes import MissingPodGroup, UngroupedPod, UnreadablePod
from caldera.framework.model import GROUP_NAME_ANNOTATION, QUEUE_NAME_ANNOTATION, TaskStatus

#: the ``problem`` field of a debug document
PODGROUP_NOT_FOUND = "PodGroupNotFound"
INVALID_POD_SPEC = "InvalidPodSpec"
NO_PODGROUP = "NoPodGroup"

#: Pods may arrive before their PodGroup (watch order, a controller still making it): a missing or
#: not-yet-made PodGroup is reported once its pods have waited this long.
PODGROUP_GRACE = 5.0
#: A pod our own PodGroup controller should have grouped (its queue exists) is only late while that
#: controller is busy or the API server throttles it: reported after this many graces, so that a
#: loaded cluster is not given an Event and a status write per pod on top of its load.
SLOW_CONTROLLER_GRACES = 6


def pending_pods(missing: MissingPodGroup) -> int:
    return sum(1 for t in missing.pods if t.status == TaskStatus.PENDING)


def missing_podgroup_reason(missing: MissingPodGroup) -> str:
    n = pending_pods(missing)
    pods = "1 pod waits" if n == 1 else f"{n} pods wait"
    if missing.native:
        # kube-scheduler's GangScheduling plugin keeps such pods out of its queue the same way
        # (pkg/scheduler/framework/plugins/gangscheduling, PreEnqueue: the PodGroup must exist)
        where = f"scheduling.k8s.io/v1alpha2 PodGroup {missing.namespace}/{missing.name} not found"
        if not missing.api_served:
            where += " (the server does not serve scheduling.k8s.io/v1alpha2)"
        return (
            f"{where}: {pods} for it (spec.schedulingGroup.podGroupName: {missing.name}); "
            "nothing is scheduled without it"
        )
    return (
        f"PodGroup {missing.key} not found: {pods} for it (annotation {GROUP_NAME_ANNOTATION}: "
        f"{missing.name}); nothing is scheduled without it"
    )


def missing_podgroup_suggestion(missing: MissingPodGroup) -> str:
    if missing.native:
        served = (
            ""
            if missing.api_served
            else "enable the API (--runtime-config=scheduling.k8s.io/v1alpha2=true "
            "--feature-gates=GenericWorkload=true), then "
        )
        return (
            f"{served}create the scheduling.k8s.io/v1alpha2 PodGroup {missing.name} in namespace "
            f"{missing.namespace} (spec.schedulingGroup cannot be changed on an existing pod)"
        )
    return (
        f"create PodGroup {missing.name} in namespace {missing.namespace}, or correct the pods' "
        f"{GROUP_NAME_ANNOTATION} annotation to name an existing PodGroup"
    )


def unreadable_reason(pod: UnreadablePod) -> str:
    return f"pod {pod.key} cannot be scheduled: its spec cannot be read: {pod.reason}"


def unreadable_suggestion(pod: UnreadablePod) -> str:
    return (
        f"re-create pod {pod.key} with valid, non-negative resource quantities "
        "(e.g. cpu: 500m, memory: 1Gi): a pod's requests cannot be changed in place"
    )


def ungrouped_reason(pod: UngroupedPod, controllers: bool) -> str:
    head = f"pod {pod.key} has no PodGroup (no annotation {GROUP_NAME_ANNOTATION})"
    if not pod.queue_exists:
        return (
            f"{head}: it names queue {pod.queue} (annotation {QUEUE_NAME_ANNOTATION}), which does not "
            "exist, so none is made for it; nothing is scheduled without one"
        )
    if not controllers:
        return (
            f"{head} and this scheduler's PodGroup controller is off (--no-enable-controllers); "
            "nothing is scheduled without one"
        )
    return f"{head} yet: the PodGroup controller has not made one; nothing is scheduled without one"


def ungrouped_suggestion(pod: UngroupedPod, controllers: bool) -> str:
    if not pod.queue_exists:
        return f"create queue {pod.queue}, or make the pod's {QUEUE_NAME_ANNOTATION} annotation name an existing queue"
    if not controllers:
        name = pod.task.pod.spec.scheduler_name
        return (
            f"give Volcano's vc-controller-manager --scheduler-name={name} as well (it makes PodGroups only "
            "for the scheduler names it is given), or run caldera-scheduler with --enable-controllers"
        )
    return (
        "see caldera-scheduler's log for the PodGroup controller's errors (its RBAC must allow creating "
        "podgroups and patching pods)"
    )


def ungrouped_grace(pod: UngroupedPod, controllers: bool, grace: float = PODGROUP_GRACE) -> float:
    """How long a pod without a PodGroup may wait before it is reported: the grace when the cause is
    known (its queue does not exist, or no controller of ours runs), longer when our controller is
    merely late."""
    if not pod.queue_exists or not controllers:
        return grace
    return grace * SLOW_CONTROLLER_GRACES
