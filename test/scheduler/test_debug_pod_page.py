"""``/debug/pods/NAMESPACE/NAME`` for a pod the cache holds without a PodGroup: within the grace its
PodGroup controller has, the pod is pending and waiting for it (never "not known to the scheduler",
which is what the page said before); past it, the NoPodGroup problem."""

from __future__ import annotations

import time

import pytest

from caldera.cache.indexes import CacheProblems, UngroupedPod
from caldera.framework.model import TaskInfo
from caldera.hack.scenario import pod
from caldera.scheduler.debug import DebugApi, NotFound, Observatory
from caldera.scheduler.problems import NO_PODGROUP


def page_for(waited: float) -> dict[str, object]:
    task = TaskInfo.from_pod(pod("web-0"))
    obs = Observatory()
    obs.problems = CacheProblems(
        ungrouped_pods=(UngroupedPod(task, queue="", queue_exists=True, since=time.monotonic() - waited),)
    )
    return DebugApi(obs, controllers=True, grace=5.0).pod(task.namespace, "web-0")


def test_a_pod_waiting_for_its_podgroup_within_the_grace_is_pending_and_says_so() -> None:
    doc = page_for(waited=12.0)  # our controller's grace: 6 x 5 s
    assert doc["status"] == "Pending" and doc["problem"] == ""
    assert "has no PodGroup" in str(doc["reason"])
    assert str(doc["reason"]).endswith("(for 12s; a problem after 30s)")


def test_past_the_grace_it_is_the_no_podgroup_problem() -> None:
    doc = page_for(waited=31.0)
    assert doc["status"] == "Pending" and doc["problem"] == NO_PODGROUP


def test_a_pod_the_cache_does_not_hold_is_not_found() -> None:
    with pytest.raises(NotFound):
        DebugApi(Observatory()).pod("default", "nobody")
