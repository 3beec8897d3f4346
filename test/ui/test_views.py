"""The web view in headless Chromium against caldera-scheduler running on caldera-sim.

The scenario: forty nodes in five leaves under three spines of one InfiniBand cluster (one leaf with
GPUs) plus one node in no group; queues ``research`` (weight 3, a cpu guarantee), ``prod`` (weight 1)
and a closed ``archive``; gangs running in research and prod, and two that wait: one whose pods fit on
no node, one that needs more whole nodes than are free. Every view is loaded, its figures compared with the /debug API's answer at that moment,
and a screenshot kept in ``artifacts/ui/`` (and in ``docs/screenshots/`` with
``CALDERA_UPDATE_SCREENSHOTS=1``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from caldera.cache.client import ApiClient, ClusterConfig
from caldera.config.conf import parse_conf
from caldera.hack.sim import SimCluster
from caldera.hack.sim.nodes import ClusterSpec, NodeTemplate
from caldera.scheduler.app import Options, SchedulerApp
from caldera.scheduler.registry import builtin_registry

from .browser import Browser
from .conftest import DOC_SCREENSHOTS

SCHEDULER = "caldera-ui"
NONE = "\u2013"  # what the page shows for a missing figure
LEAF, SPINE, IB = "example.com/leaf", "example.com/spine", "volcano.sh/ib-cluster"

CONF_TOPOLOGY = f"""
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: network-topology-aware
    arguments:
      topologyKeys: [{LEAF}, {SPINE}, {IB}]
      # (Volcano's default HyperNode bin-packing of pods without a network topology would pack the
      # scene's small pods into the fullest leaf, the gpu one, and keep train-llm from running)
      hypernode.binpack.normal-pod.enable: false
"""
CONF_PLAIN = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: predicates
  - name: proportion
  - name: nodeorder
"""


def scheduler_conf() -> str:
    registry = builtin_registry()
    for text in (CONF_TOPOLOGY, CONF_PLAIN):
        try:
            parse_conf(text, registry)
            return text
        except Exception:
            continue
    raise AssertionError("no usable scheduler conf for the UI scenario")


def cluster_spec() -> ClusterSpec:
    def nodes(name: str, count: int, leaf: str, spine: str, gpus: int = 0) -> NodeTemplate:
        cap = {"cpu": "16", "memory": "64Gi", "pods": "110"}
        if gpus:
            cap["nvidia.com/gpu"] = str(gpus)
        return NodeTemplate(
            name=name, count=count, capacity=cap, labels={LEAF: leaf, SPINE: spine, IB: "ib-0"}
        )

    queue = lambda name, **spec: {  # noqa: E731
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": {"reclaimable": True, **spec},
    }
    return ClusterSpec(
        nodes=[
            nodes("a1", 8, "leaf-a1", "spine-a"),
            nodes("a2", 8, "leaf-a2", "spine-a"),
            nodes("b1", 8, "leaf-b1", "spine-b"),
            nodes("b2", 8, "leaf-b2", "spine-b"),
            nodes("c1", 8, "leaf-c1", "spine-c", gpus=8),
            NodeTemplate(name="edge", count=1, capacity={"cpu": "4", "memory": "16Gi", "pods": "110"}),
        ],
        objects=[
            queue("research", weight=3, guarantee={"resource": {"cpu": "4"}}),
            queue("prod", weight=1),
            queue("archive", weight=1, state="Closed"),
        ],
    )


class Api:
    def __init__(self, client: ApiClient) -> None:
        self.client = client

    async def create(self, path: str, body: dict[str, Any]) -> None:
        await self.client.request("POST", path, body=body)

    async def gang(self, name: str, queue: str, size: int, cpu: str, gpu: int = 0, priority: int = 0) -> None:
        ns = "default"
        await self.create(
            f"/apis/scheduling.volcano.sh/v1beta1/namespaces/{ns}/podgroups",
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "PodGroup",
                "metadata": {"name": name, "namespace": ns},
                "spec": {"minMember": size, "queue": queue},
            },
        )
        requests = {"cpu": cpu, "memory": "1Gi"}
        if gpu:
            requests["nvidia.com/gpu"] = str(gpu)
        for i in range(size):
            await self.create(
                f"/api/v1/namespaces/{ns}/pods",
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {
                        "name": f"{name}-{i}",
                        "namespace": ns,
                        "annotations": {"scheduling.k8s.io/group-name": name},
                    },
                    "spec": {
                        "schedulerName": SCHEDULER,
                        "priority": priority,
                        "containers": [
                            {
                                "name": "main",
                                "image": "busybox",
                                "resources": {"requests": requests, "limits": dict(requests)},
                            }
                        ],
                    },
                },
            )


@dataclass
class Scene:
    base: str  # the scheduler's HTTP address
    http: aiohttp.ClientSession
    api: Api

    async def debug(self, path: str) -> Any:
        async with self.http.get(f"{self.base}/debug/{path}") as resp:
            assert resp.status == 200, (path, resp.status, await resp.text())
            return await resp.json()


async def _until(check: Any, timeout: float = 15.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = await check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"scenario never settled; last {value!r}")
        await asyncio.sleep(0.1)


@pytest.fixture
async def scene(tmp_path: Path) -> AsyncIterator[Scene]:
    conf = tmp_path / "scheduler.conf"
    conf.write_text(scheduler_conf())
    async with SimCluster(cluster_spec(), kubelet_delay=0.05, seed=7) as sim:
        client = ApiClient(await ClusterConfig.load(str(sim.kubeconfig_path)), user_agent="caldera-ui-test")
        api = Api(client)
        opts = Options(
            kubeconfig=str(sim.kubeconfig_path),
            scheduler_names=[SCHEDULER],
            scheduler_conf=str(conf),
            schedule_period=0.2,
            listen_address="127.0.0.1:0",
            conf_poll_interval=0.2,
            shutdown_timeout=10.0,
        )
        app = SchedulerApp(opts)
        stop = asyncio.Event()
        task = asyncio.create_task(app.run(stop))
        try:
            await api.gang("train-llm", "research", 6, cpu="12", gpu=4, priority=100)
            await api.gang("etl-nightly", "research", 4, cpu="4")
            for i in range(3):
                await api.gang(f"sweep-{i}", "research", 2, cpu="8")
            await api.gang("serve-batch", "prod", 8, cpu="14")
            await api.gang("huge-mpi", "prod", 4, cpu="64", priority=50)  # fits on no node
            for i in range(4):
                await api.gang(f"eval-{i}", "prod", 1, cpu="1")
            await api.gang("notebook", "default", 1, cpu="2")
            await api.gang("wide-gang", "default", 30, cpu="16")  # more whole nodes than are free

            async def settled() -> bool:
                if task.done():
                    raise AssertionError(f"scheduler exited: {task.result()}")
                if app.http is None or not app.readiness()[0]:
                    return False
                base = f"http://127.0.0.1:{app.http.port}"
                async with aiohttp.ClientSession() as s:
                    async with s.get(f"{base}/debug/jobs?state=running") as r:
                        running = await r.json() if r.status == 200 else {"total": 0}
                    async with s.get(f"{base}/debug/jobs?state=pending") as r:
                        pending = await r.json() if r.status == 200 else {"jobs": []}
                names = {j["name"] for j in pending["jobs"]}
                return (
                    running["total"] >= 4
                    and "huge-mpi" in names
                    and all(j["reason"] for j in pending["jobs"] if j["name"] == "huge-mpi")
                )

            await _until(settled, timeout=20)
            assert app.http is not None
            async with aiohttp.ClientSession() as http:
                yield Scene(f"http://127.0.0.1:{app.http.port}", http, api)
        finally:
            stop.set()
            await asyncio.wait_for(task, 30)
            await client.close()


async def _cycles_at_least(scene: Scene, n: int) -> bool:
    return len((await scene.debug("scheduler"))["cycles"]) >= n


async def open_view(browser: Browser, scene: Scene, view: str) -> None:
    await browser.get(f"{scene.base}/ui/?refresh=1#{view}")
    await browser.loaded(view)


async def shot(browser: Browser, name: str) -> None:
    await browser.screenshot(name, keep_in=DOC_SCREENSHOTS)


def num(v: float) -> str:
    """The page's own number format (app.js ``num``)."""
    if abs(v) >= 100 or float(v).is_integer():
        return str(round(v))
    return f"{v:.1f}".rstrip("0").rstrip(".")


async def test_queues_view_shows_the_api_figures(browser: Browser, scene: Scene) -> None:
    await open_view(browser, scene, "queues")
    truth = {q["name"]: q for q in (await scene.debug("queues"))["queues"]}
    rows = await browser.js(
        """
        const out = {};
        for (const tr of document.querySelectorAll('#queues-table tbody tr[data-queue]')) {
          const f = (k) => { const el = tr.querySelector(`[data-field="${k}"]`); return el ? el.textContent : null; };
          out[tr.dataset.queue] = {
            weight: f('weight'), state: f('state'), pending: f('jobs.pending'), running: f('jobs.running'),
            cpu: f('allocated.cpu'), badges: [...tr.querySelectorAll('.badge')].map(b => b.textContent),
            bars: tr.querySelectorAll('.bar').length,
          };
        }
        return out;
        """
    )
    assert set(rows) == set(truth)
    assert {"research", "prod", "archive"} <= set(rows)
    for name, q in truth.items():
        row = rows[name]
        assert row["weight"] == num(q["weight"]), name
        assert row["state"] == (q["state"] or "Open"), name
        assert row["pending"] == str(q["jobs"]["pending"]), name
        assert row["bars"] >= 2, name  # cpu and memory at least
        assert ("overused" in row["badges"]) == bool(q["overused"]), name
    assert rows["research"]["weight"] == "3"
    assert truth["archive"]["state"] != "Open"
    assert truth["archive"]["state"].lower() in rows["archive"]["badges"]
    assert rows["research"]["cpu"] == num(truth["research"]["allocated"].get("cpu", 0))
    await shot(browser, "queues")


async def test_jobs_view_lists_pending_jobs_with_reasons_and_explains_one(
    browser: Browser, scene: Scene
) -> None:
    await open_view(browser, scene, "jobs")
    truth = await scene.debug("jobs?state=pending&limit=50")
    page = await browser.js(
        """
        return {
          total: document.getElementById('jobs-summary').dataset.total,
          rows: [...document.querySelectorAll('#jobs-table tbody tr')].map(tr => ({
            job: tr.dataset.job,
            queue: tr.querySelector('[data-field=queue]').textContent,
            min_member: tr.querySelector('[data-field=min_member]').textContent,
            reason: (tr.querySelector('[data-field=reason]') || {}).textContent || '',
            explain: !!tr.querySelector('a.explain'),
          })),
        };
        """
    )
    assert page["total"] == str(truth["total"])
    assert [r["job"] for r in page["rows"]] == [f"{j['namespace']}/{j['name']}" for j in truth["jobs"]]
    huge = next(r for r in page["rows"] if r["job"] == "default/huge-mpi")
    api_huge = next(j for j in truth["jobs"] if j["name"] == "huge-mpi")
    assert huge["queue"] == "prod" and huge["min_member"] == "4"
    assert huge["reason"] == api_huge["reason"] != ""
    assert huge["explain"]
    await shot(browser, "jobs")

    await browser.click('tr[data-job="default/huge-mpi"] a.explain')
    await browser.loaded("job")
    explanation = await scene.debug("jobs/default/huge-mpi")
    shown = await browser.js(
        "return {reason: (document.getElementById('job-reason') || {}).textContent || '',"
        " min: document.querySelector('[data-field=\"gang.min_member\"]').textContent,"
        " roles: document.querySelectorAll('#job-roles tbody tr').length}"
    )
    assert shown["reason"] == explanation["reason"]
    assert shown["min"] == str(explanation["gang"]["min_member"])
    assert shown["roles"] == len(explanation["roles"])
    await shot(browser, "job-explanation")

    await browser.get(f"{scene.base}/ui/?refresh=1&state=running#jobs")
    await browser.loaded("jobs")
    running = await scene.debug("jobs?state=running&limit=50")
    shown_running = await browser.js(
        "return [...document.querySelectorAll('#jobs-table tbody tr')].map(tr => tr.dataset.job)"
    )
    assert sorted(shown_running) == sorted(f"{j['namespace']}/{j['name']}" for j in running["jobs"])
    assert "default/train-llm" in shown_running


async def test_nodes_view_groups_nodes_by_topology(browser: Browser, scene: Scene) -> None:
    await open_view(browser, scene, "nodes")
    truth = await scene.debug("nodes")
    shown = await browser.js(
        """
        const out = {};
        for (const g of document.querySelectorAll('#node-groups [data-group]')) out[g.dataset.group] = {
          count: g.querySelector('[data-field=count]').textContent,
          canvas: !!g.querySelector('canvas.heat'),
        };
        return {groups: out, total: document.getElementById('nodes-summary').dataset.nodes,
                tiers: [...document.querySelectorAll('#nodes-tier option')].map(o => o.value)};
        """
    )
    expected = {g["name"]: str(len(g["nodes"])) for g in truth["groups"]}
    assert {k: v["count"] for k, v in shown["groups"].items()} == expected
    assert all(v["canvas"] for v in shown["groups"].values())
    assert shown["total"] == "41"
    assert shown["tiers"] == truth["tiers"]
    if truth["tiers"]:  # the topology plugin is there: leaves first, then wider tiers on request
        assert {"leaf-a1", "leaf-a2", "leaf-b1", "leaf-b2", "leaf-c1"} <= set(shown["groups"])
        assert shown["groups"]["leaf-c1"]["count"] == "8"
    await shot(browser, "nodes")

    # Group by the spine tier (or by the label, without the topology plugin).
    await browser.select("#nodes-tier", SPINE) if SPINE in shown["tiers"] else None
    if SPINE not in shown["tiers"]:
        await browser.get(f"{scene.base}/ui/?refresh=1&group_by={SPINE}#nodes")
    await browser.wait(
        "return !!document.querySelector('#node-groups [data-group=\"spine-a\"]')", what="spine groups"
    )
    spines = await scene.debug(f"nodes?group_by={SPINE}")
    counts = await browser.js(
        "return Object.fromEntries([...document.querySelectorAll('#node-groups [data-group]')]"
        ".map(g => [g.dataset.group, g.querySelector('[data-field=count]').textContent]))"
    )
    assert counts == {g["name"]: str(len(g["nodes"])) for g in spines["groups"]}
    assert counts["spine-a"] == "16"


async def test_scheduler_view_shows_leader_conf_and_cycle_chart(browser: Browser, scene: Scene) -> None:
    # Some work arriving over a couple of seconds, so there are cycles to chart.
    await open_view(browser, scene, "scheduler")
    for i in range(8):
        await scene.api.gang(f"burst-{i}", "prod", 2, cpu="1")
        await asyncio.sleep(0.25)
    await _until(lambda: _cycles_at_least(scene, 6))
    await browser.loaded(
        "scheduler",
        after=int(await browser.js("return document.getElementById('view-scheduler').dataset.loaded")),
    )
    truth = await scene.debug("scheduler")
    shown = await browser.js(
        """
        const f = (k) => { const el = document.querySelector(`#scheduler-body [data-field="${k}"]`); return el ? el.textContent : null; };
        const c = document.getElementById('cycles-chart');
        const px = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
        let inked = 0; for (let i = 3; i < px.length; i += 4) if (px[i]) inked++;
        return {identity: f('identity'), leader: f('leader_identity'), role: f('role'), source: f('conf.source'),
                reload: f('conf.last_reload'), conf: document.getElementById('conf-text').textContent,
                inked, width: c.width};
        """
    )
    assert shown["identity"] == (truth["identity"] or NONE)
    assert shown["leader"] == (truth["leader_identity"] or NONE)
    assert shown["role"] == ("leader" if truth["leader"] else "standby")
    assert shown["source"] == (truth["conf"]["source"] or "built in")
    assert shown["conf"] == truth["conf"]["text"]
    if truth["conf"].get("last_reload"):
        assert shown["reload"] == truth["conf"]["last_reload"]["result"]
    assert len(truth["cycles"]) > 0
    assert shown["inked"] > 1000, "the cycle chart drew nothing"
    await shot(browser, "scheduler")


async def test_live_refresh_without_reloading_the_page(browser: Browser, scene: Scene) -> None:
    await open_view(browser, scene, "scheduler")
    await browser.js("window.__marker = 'same page'")
    first = int(await browser.js("return document.getElementById('status').dataset.cycle"))
    n = await browser.loaded("scheduler")
    await browser.loaded("scheduler", after=n + 1, timeout=10)
    later = int(await browser.js("return document.getElementById('status').dataset.cycle"))
    assert later > first
    assert await browser.js("return window.__marker") == "same page"
