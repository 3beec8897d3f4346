"""The tdm plugin end to end: a spot node of the revocable zone ``night`` takes preemptable pods only
once the zone's window opens; the job that is not preemptable goes first, to the ordinary node.

The plugin's clock (``tdm.with_clock``, registered in this scheduler's registry) is moved from noon
to the evening while the scheduler runs; nothing in the cluster changes, so the pending pods are placed because the window
opened."""

from __future__ import annotations

from datetime import datetime
from types import SimpleNamespace
from typing import Any

import pytest

from caldera.plugins import tdm

from .conftest import SCHEDULER, Api, eventually

pytestmark = pytest.mark.e2e

CONF = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: tdm
    arguments:
      tdm.revocable-zone.night: "20:00-23:00"
- plugins:
  - name: predicates
  - name: proportion
  - name: nodeorder
"""
NOON = datetime(2026, 3, 2, 12, 0).astimezone()
EVENING = datetime(2026, 3, 2, 21, 0).astimezone()


async def node(api: Api, name: str, cpu: str, labels: dict[str, str]) -> None:
    cap = {"cpu": cpu, "memory": "16Gi", "pods": "110"}
    api.created_nodes.append(name)
    await api.create(
        "/api/v1/nodes",
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **labels}},
            "status": {
                "capacity": cap,
                "allocatable": cap,
                "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
            },
        },
    )


async def podgroup(api: Api, name: str, preemptable: bool) -> None:
    """A PodGroup of minMember 1; its ``volcano.sh/preemptable`` annotation is what tdm's job order reads."""
    await api.create(
        f"/apis/scheduling.volcano.sh/v1beta1/namespaces/{api.ns}/podgroups",
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {
                "name": name,
                "annotations": {"volcano.sh/preemptable": "true" if preemptable else "false"},
            },
            "spec": {"minMember": 1, "queue": "default"},
        },
    )


async def pod(api: Api, name: str, group: str, preemptable: bool) -> None:
    await api.create(
        f"/api/v1/namespaces/{api.ns}/pods",
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "annotations": {
                    "scheduling.k8s.io/group-name": group,
                    "volcano.sh/preemptable": "true" if preemptable else "false",
                },
            },
            "spec": {
                "schedulerName": SCHEDULER,
                "containers": [{"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}],
            },
        },
    )


async def test_the_spot_node_takes_preemptable_pods_only_while_its_window_is_open(
    api: Api, start_scheduler: Any, conf_file: Any
) -> None:
    clock = SimpleNamespace(now=lambda: NOON)
    registry, path = conf_file
    registry.register_plugin(tdm.with_clock(lambda: clock.now()))
    path.write_text(CONF)
    await node(api, "plain", "1", {})
    await node(api, "spot", "4", {"volcano.sh/revocable-zone": "night"})
    await podgroup(api, "spare", preemptable=True)
    await podgroup(api, "steady", preemptable=False)
    await pod(api, "spare-0", "spare", preemptable=True)
    await pod(api, "spare-1", "spare", preemptable=True)
    await pod(api, "steady-0", "steady", preemptable=False)
    await start_scheduler()  # with every job there: the order between them is tdm's

    async def placed(expected: dict[str, str]) -> bool:
        return await api.node_of() == expected

    # tdm's job order puts the job that is not preemptable first: it takes the ordinary node
    at_noon = {"spare-0": "", "spare-1": "", "steady-0": "plain"}
    await eventually(lambda: placed(at_noon))
    for _ in range(5):  # more cycles at noon: nothing goes to the closed spot node
        await eventually(lambda: placed(at_noon))

    clock.now = lambda: EVENING
    await eventually(lambda: placed({"spare-0": "spot", "spare-1": "spot", "steady-0": "plain"}))
