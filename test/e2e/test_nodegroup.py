"""The nodegroup plugin end to end: queues bound to node groups through the nodes'
``volcano.sh/nodegroup-name`` label and the Queue's ``spec.affinity``.

Volcano's rules (pkg/scheduler/plugins/nodegroup/nodegroup.go, ``queueGroupAffinity.predicate``):
a queue's pods pass a node whose group its ``nodeGroupAffinity`` lists; a group its
``nodeGroupAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution`` lists fails even so
(anti-affinity outranks affinity); with ``strict`` (the default) a node without the label fails
every queue that has an affinity."""

from __future__ import annotations

from typing import Any

import pytest

from .conftest import Api, eventually

pytestmark = pytest.mark.e2e

CONF = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: nodegroup
"""
GROUP = "volcano.sh/nodegroup-name"


async def test_a_queue_bound_to_its_group_stays_there_and_anti_affinity_keeps_another_off(
    api: Api, start_scheduler: Any, conf_file: Any
) -> None:
    _, path = conf_file
    path.write_text(CONF)
    # a-1 of team-a and b-1 of team-b each run a 2-cpu pod of someone else's: a-1 (8 cpu) is a
    # quarter used, b-1 (4 cpu) half; "spare" has no group and is empty
    await api.node("a-1", cpu="8", labels={GROUP: "team-a"})
    await api.node("b-1", cpu="4", labels={GROUP: "team-b"})
    await api.node("spare", cpu="8")
    await api.pod("other-a", cpu="2", scheduler="default-scheduler", node="a-1")
    await api.pod("other-b", cpu="2", scheduler="default-scheduler", node="b-1")
    # team-a's queue: its group only
    await api.queue(
        "team-a",
        affinity={"nodeGroupAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": ["team-a"]}},
    )
    # the shared queue may use both groups, but team-a's owners have claimed theirs: a required
    # anti-affinity, which outranks the affinity. Without it a-1, the emptier, would be its choice.
    await api.queue(
        "shared",
        affinity={
            "nodeGroupAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": ["team-a", "team-b"]},
            "nodeGroupAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": ["team-a"]},
        },
    )
    await start_scheduler()

    await api.podgroup("shared-job", 1, queue="shared")
    await api.pod("shared-0", cpu="1", group="shared-job")

    assert await eventually(lambda: api.placed("shared-0")) == {"shared-0": "b-1"}

    # team-a's two pods go to a-1 (a quarter used), though "spare" is empty
    await api.podgroup("team-a-job", 2, queue="team-a")
    for i in range(2):
        await api.pod(f"team-a-{i}", cpu="1", group="team-a-job")
    assert await eventually(lambda: api.placed("team-a-0", "team-a-1")) == {
        "team-a-0": "a-1",
        "team-a-1": "a-1",
    }
