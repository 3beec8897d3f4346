"""The Queue controller: the default queue, queue state and counts, closed queues, draining deletes."""

from __future__ import annotations

from typing import Any

from caldera.framework.model import GROUP_NAME_ANNOTATION
from caldera.hack.sim.resources import resource
from caldera.scheduler.controllers.state import QUEUE_FINALIZER

QUEUES = resource("queues", "scheduling.volcano.sh")
QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"


def status(h: Any, name: str) -> dict[str, Any]:
    return (h.queue(name) or {}).get("status") or {}


def group_of(h: Any, pod: str) -> str | None:
    return ((h.pod(pod) or {}).get("metadata", {}).get("annotations") or {}).get(GROUP_NAME_ANNOTATION)


async def test_the_default_queue_is_created_at_start_and_again_if_removed(harness: Any) -> None:
    assert harness.queue("default") is None
    harness.start()
    await harness.eventually(lambda: status(harness, "default").get("state") == "Open", what="default open")
    queue = harness.queue("default")
    assert queue["spec"]["weight"] == 1
    assert QUEUE_FINALIZER in queue["metadata"]["finalizers"]
    first_uid = queue["metadata"]["uid"]
    harness.sim.store.delete(QUEUES, "", "default", {})  # empty: it drains at once, then is made again
    await harness.eventually(
        lambda: (
            (harness.queue("default") or {"metadata": {"uid": first_uid}})["metadata"]["uid"] != first_uid
        ),
        what="re-created",
    )


async def test_a_custom_default_queue_name_is_honoured(harness: Any) -> None:
    harness.create_pod("p", annotations={})
    harness.start(default_queue="batch")
    await harness.eventually(lambda: status(harness, "batch").get("state") == "Open", what="batch open")
    await harness.eventually(lambda: group_of(harness, "p") is not None, what="grouped")
    assert harness.podgroup(group_of(harness, "p"))["spec"]["queue"] == "batch"


async def test_counts_of_pending_and_running_podgroups(harness: Any) -> None:
    harness.sim.store.create(QUEUES, "", {"metadata": {"name": "q1"}, "spec": {"weight": 3}})
    harness.create_pod("a", annotations={QUEUE_ANNOTATION: "q1"})
    harness.create_pod("b", annotations={QUEUE_ANNOTATION: "q1"})
    harness.start()
    await harness.eventually(
        lambda: (
            status(harness, "q1") == {**status(harness, "q1"), "state": "Open", "pending": 2, "running": 0}
        ),
        what="two pending",
    )
    harness.sim.store.bind(
        "default", "a", {"metadata": {"name": "a"}, "target": {"kind": "Node", "name": "node-0"}}
    )
    await harness.eventually(
        lambda: (status(harness, "q1").get("pending"), status(harness, "q1").get("running")) == (1, 1),
        what="one pending, one running",
    )
    assert status(harness, "default").get("pending", 0) == 0


async def test_a_closed_queue_admits_nothing_new_until_it_opens(harness: Any) -> None:
    harness.sim.store.create(
        QUEUES, "", {"metadata": {"name": "shut"}, "spec": {"weight": 1, "state": "Closed"}}
    )
    harness.create_pod("late", annotations={QUEUE_ANNOTATION: "shut"})
    harness.create_pod("elsewhere")
    controllers = harness.start()
    await harness.eventually(lambda: status(harness, "shut").get("state") == "Closed", what="closed")
    await harness.eventually(lambda: group_of(harness, "elsewhere") is not None, what="other pods go on")
    await harness.eventually(lambda: controllers.idle, what="idle")
    assert group_of(harness, "late") is None
    assert len(harness.podgroups()) == 1
    assert controllers.podgroups.stats.refused_by_queue >= 1
    harness.sim.store.patch(QUEUES, "", "shut", "application/merge-patch+json", {"spec": {"state": "Open"}})
    await harness.eventually(lambda: group_of(harness, "late") is not None, what="admitted once open")
    await harness.eventually(lambda: status(harness, "shut").get("state") == "Open", what="open")


async def test_closing_a_queue_with_groups_passes_through_closing(harness: Any) -> None:
    harness.sim.store.create(QUEUES, "", {"metadata": {"name": "q2"}, "spec": {"weight": 1}})
    harness.create_pod("worker", annotations={QUEUE_ANNOTATION: "q2"})
    harness.start()
    await harness.eventually(lambda: group_of(harness, "worker") is not None, what="grouped")
    harness.sim.store.patch(QUEUES, "", "q2", "application/merge-patch+json", {"spec": {"state": "Closed"}})
    await harness.eventually(lambda: status(harness, "q2").get("state") == "Closing", what="closing")
    harness.create_pod("newcomer", annotations={QUEUE_ANNOTATION: "q2"})
    harness.delete_pod("worker")
    await harness.eventually(lambda: status(harness, "q2").get("state") == "Closed", what="closed")
    assert group_of(harness, "newcomer") is None
    assert harness.podgroups() == []


async def test_a_deleted_queue_drains_before_it_goes(harness: Any) -> None:
    harness.sim.store.create(QUEUES, "", {"metadata": {"name": "old"}, "spec": {"weight": 1}})
    harness.create_pod("last", annotations={QUEUE_ANNOTATION: "old"})
    harness.start()
    await harness.eventually(
        lambda: QUEUE_FINALIZER in ((harness.queue("old") or {}).get("metadata", {}).get("finalizers") or []),
        what="finalizer added",
    )
    await harness.eventually(lambda: group_of(harness, "last") is not None, what="grouped")
    harness.sim.store.delete(QUEUES, "", "old", {})
    await harness.eventually(lambda: status(harness, "old").get("state") == "Closing", what="closing")
    assert harness.queue("old")["metadata"].get("deletionTimestamp")
    harness.create_pod("too-late", annotations={QUEUE_ANNOTATION: "old"})
    harness.delete_pod("last")
    await harness.eventually(lambda: harness.queue("old") is None, what="gone once drained")
    assert group_of(harness, "too-late") is None
