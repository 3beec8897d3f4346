"""vGPU end to end: the device decision is written on the pod before the bind, and the device metrics
the scheduler exports follow the pod's life."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import aiohttp

from caldera.hack.sim import VGPU, NodeTemplate, SimCluster

from .conftest import SCHEDULER, Api, eventually, needs_sim

CONF = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: predicates
  - name: deviceshare
    arguments:
      deviceshare.VGPUEnable: true
      deviceshare.SchedulePolicy: binpack
  - name: proportion
  - name: nodeorder
"""


def vgpu_pod(name: str, memory_mib: int, cores: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "default",
            "annotations": {"scheduling.k8s.io/group-name": name},
        },
        "spec": {
            "schedulerName": SCHEDULER,
            "containers": [
                {
                    "name": "cuda",
                    "image": "cuda",
                    "resources": {
                        "requests": {"cpu": "1", "memory": "1Gi"},
                        "limits": {
                            "volcano.sh/vgpu-number": "1",
                            "volcano.sh/vgpu-memory": str(memory_mib),
                            "volcano.sh/vgpu-cores": str(cores),
                        },
                    },
                }
            ],
        },
    }


async def scrape(port: int) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    async with aiohttp.ClientSession() as http, http.get(f"http://127.0.0.1:{port}/metrics") as resp:
        text = await resp.text()
    series: dict[tuple[str, frozenset[tuple[str, str]]], float] = {}
    for line in text.splitlines():
        m = re.match(r"^(volcano_vgpu_\w+)\{(.*)\} (\S+)$", line)
        if m:
            labels = frozenset(re.findall(r'(\w+)="([^"]*)"', m.group(2)))
            series[(m.group(1), labels)] = float(m.group(3))
    return series


async def test_vgpu_decision_reaches_the_pod_and_metrics_follow_it(
    sim: SimCluster | None, api: Api, start_scheduler, tmp_path: Path
) -> None:
    cluster = needs_sim(sim)
    cluster.add_nodes(
        [NodeTemplate(name="gpu", count=1, vgpu=VGPU(cards=1, split=4, memory=16384, cores=100))]
    )
    conf = tmp_path / "vgpu.conf"
    conf.write_text(CONF)
    for name in ("a", "b"):
        await api.create(
            "/apis/scheduling.volcano.sh/v1beta1/namespaces/default/podgroups",
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "PodGroup",
                "metadata": {"name": name},
                "spec": {"minMember": 1},
            },
        )
    await api.create("/api/v1/namespaces/default/pods", vgpu_pod("a", 6000, 30))
    await api.create("/api/v1/namespaces/default/pods", vgpu_pod("b", 6000, 30))
    running = await start_scheduler(scheduler_conf=str(conf))

    async def both_bound() -> list[dict[str, Any]]:
        pods = [await api.get(f"/api/v1/namespaces/default/pods/{n}") for n in ("a", "b")]
        return pods if all(p["spec"].get("nodeName") for p in pods) else []

    pods = await eventually(both_bound)
    device = None
    for p in pods:
        ann = p["metadata"]["annotations"]
        assert ann["volcano.sh/vgpu-node"] == p["spec"]["nodeName"]
        assert ann["volcano.sh/bind-phase"] == "allocating"
        uuid, _type, mem, cores = ann["volcano.sh/devices-to-allocate"].split(";")[0].rstrip(":").split(",")
        assert (int(mem), int(cores)) == (6000, 30)
        device = device or uuid
        assert uuid == device  # binpack: both on the one card
    port = running.app.http.port  # type: ignore[union-attr]

    def value(series, name):
        found = [v for (n, labels), v in series.items() if n == name and ("devID", device) in labels]
        return found[0] if found else None

    async def shows_both() -> dict:
        s = await scrape(port)
        return s if value(s, "volcano_vgpu_device_shared_number") == 2 else {}

    series = await eventually(shows_both)
    assert value(series, "volcano_vgpu_device_allocated_memory") == 12000
    assert value(series, "volcano_vgpu_device_allocated_cores") == 60
    assert value(series, "volcano_vgpu_device_memory_limit") == 16384

    await api.delete("/api/v1/namespaces/default/pods/a", {"gracePeriodSeconds": 0})

    async def shows_one() -> dict:
        s = await scrape(port)
        return s if value(s, "volcano_vgpu_device_shared_number") == 1 else {}

    series = await eventually(shows_one)
    assert value(series, "volcano_vgpu_device_allocated_memory") == 6000
    pod_series = {dict(labels).get("podName") for (n, labels) in series if n.endswith("for_a_certain_pod")}
    assert pod_series == {"b"}  # the deleted pod's series are gone
