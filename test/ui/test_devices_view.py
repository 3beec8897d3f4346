"""DRA devices made visible: two nodes whose driver publishes 4 and 2 GPUs, a gang of 3 holding one each
and a gang of 4 that waits for want of devices. /debug/nodes counts each node's devices and those
allocated, the waiting job's explanation (and `caldera-scheduler explain`) sums up the cluster's devices
of the class its claims ask for and of their driver, and the web view shows both: per driver on the
node cards and in a node's tip, and a Devices table on the job's page."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from caldera.hack.sim import SimCluster
from caldera.hack.workload.generators import DRA_CLASS, DRA_DRIVER, DRA_TEMPLATE
from caldera.hack.workload.manifests import (
    claim_template_manifest,
    device_class_manifest,
    pod_manifest,
    podgroup_manifest,
    resource_slice_manifest,
)
from caldera.scheduler.explain_cli import render

from .browser import Browser
from .conftest import running_scheduler

SCHEDULER = "caldera-ui"
CONF = 'actions: "enqueue, allocate, backfill"\ntiers:\n- plugins:\n  - name: gang\n  - name: predicates\n'


def gang(sim: SimCluster, name: str, size: int) -> None:
    sim.create(podgroup_manifest(name, "default", size, workload="dra"))
    for k in range(size):
        sim.create(
            pod_manifest(
                f"{name}-{k}",
                "default",
                workload="dra",
                group=name,
                scheduler=SCHEDULER,
                requests={"cpu": "100m"},
                resource_claims=[{"name": "gpu", "resourceClaimTemplateName": DRA_TEMPLATE}],
            )
        )


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[str]:
    conf = tmp_path / "scheduler.conf"
    conf.write_text(CONF)
    async with SimCluster(nodes=2, kubelet_delay=0.05, seed=5) as sim:
        sim.create(device_class_manifest(DRA_CLASS, DRA_DRIVER))
        sim.create(resource_slice_manifest("node-0", DRA_DRIVER, 4))
        sim.create(resource_slice_manifest("node-1", DRA_DRIVER, 2))
        sim.create(claim_template_manifest(DRA_TEMPLATE, "default", DRA_CLASS))
        async with running_scheduler(sim, conf, SCHEDULER) as base:
            gang(sim, "train", 3)
            for _ in range(100):
                if all(p["spec"].get("nodeName") for p in sim.objects("pods", "default")):
                    break
                await asyncio.sleep(0.1)
            gang(sim, "big", 4)
            async with aiohttp.ClientSession() as http:
                for _ in range(100):
                    async with http.get(f"{base}/debug/jobs/default/big") as resp:
                        if resp.status == 200 and (await resp.json()).get("devices"):
                            break
                    await asyncio.sleep(0.1)
            yield base


async def get(url: str) -> Any:
    async with aiohttp.ClientSession() as http, http.get(url) as resp:
        assert resp.status == 200, await resp.text()
        return await resp.json()


async def test_devices_per_node_and_for_a_job_waiting_on_them(browser: Browser, server: str) -> None:
    nodes = {n["name"]: n for g in (await get(f"{server}/debug/nodes"))["groups"] for n in g["nodes"]}
    per_node = {name: n["devices"] for name, n in nodes.items()}
    assert [d["devices"] for d in per_node["node-0"]] == [4] and [
        d["devices"] for d in per_node["node-1"]
    ] == [2]
    assert {d["driver"] for ds in per_node.values() for d in ds} == {DRA_DRIVER}
    assert sum(d["allocated"] for ds in per_node.values() for d in ds) == 3, "the bound gang holds 3 devices"

    doc = await get(f"{server}/debug/jobs/default/big")
    assert doc["devices"]["classes"] == [{"class": DRA_CLASS, "devices": 6, "allocated": 3}]
    assert doc["devices"]["drivers"] == [{"driver": DRA_DRIVER, "devices": 6, "allocated": 3}]
    summary = f"6 devices of class {DRA_CLASS}, 3 allocated; driver {DRA_DRIVER}: 6 devices, 3 allocated"
    assert doc["devices"]["summary"] == summary
    assert f"Devices:    {summary}" in render(doc)
    pod = await get(f"{server}/debug/pods/default/big-0")
    assert pod["devices"] == doc["devices"]
    # the bound gang is not waiting on devices
    assert "devices" not in (await get(f"{server}/debug/pods/default/train-0"))

    await browser.get(f"{server}/ui/?refresh=1#nodes")
    await browser.loaded("nodes")
    shown = await browser.js(
        """
        const line = document.querySelector('#nodes-total [data-driver]');
        return {driver: line.dataset.driver, text: line.querySelector('.num').textContent};
        """
    )
    assert shown == {"driver": DRA_DRIVER, "text": "3 / 6 (50%)"}
    # a node's tip: hover its cell in the heat map (the first cell of the first group's canvas)
    tip = await browser.js(
        """
        const canvas = document.querySelector('#node-groups canvas.heat');
        const r = canvas.getBoundingClientRect();
        canvas.dispatchEvent(new MouseEvent('mousemove', {clientX: r.left + 3, clientY: r.top + 3, bubbles: true}));
        const tip = document.getElementById('node-tip');
        return [tip.querySelector('b').textContent,
                [...tip.querySelectorAll('[data-driver]')].map(d => d.textContent)];
        """
    )
    name, lines = tip
    want = nodes[name]["devices"][0]
    assert lines == [f"{DRA_DRIVER}: {want['allocated']} / {want['devices']} devices allocated"]

    await browser.get(f"{server}/ui/?refresh=1#job/default/big")
    await browser.loaded("job")
    rows = await browser.js(
        """
        return [...document.querySelectorAll('#job-devices tbody tr')].map(tr => [tr.dataset.kind, tr.dataset.name,
          ...['devices', 'allocated', 'free'].map(f => tr.querySelector(`[data-field=${f}]`).textContent)]);
        """
    )
    assert rows == [["class", DRA_CLASS, "6", "3", "3"], ["driver", DRA_DRIVER, "6", "3", "3"]]
    assert await browser.console_errors() == []
