"""The web view shows pods no cycle can schedule: a pod whose PodGroup does not exist and a pod whose
spec cannot be read are rows of the Jobs view with the same reason as /debug/jobs, and the unreadable
pod's link opens its own page with the reason and the suggestion."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from caldera.cache.client import ApiClient, ClusterConfig
from caldera.hack.sim import SimCluster

from .browser import Browser
from .conftest import running_scheduler

SCHEDULER = "caldera-ui"
CONF = 'actions: "enqueue, allocate, backfill"\ntiers:\n- plugins:\n  - name: gang\n  - name: predicates\n'


def pod(name: str, group: str, cpu: str = "1") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "default",
            "annotations": {"scheduling.k8s.io/group-name": group},
        },
        "spec": {
            "schedulerName": SCHEDULER,
            "containers": [{"name": "main", "image": "busybox", "resources": {"requests": {"cpu": cpu}}}],
        },
    }


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[str]:
    conf = tmp_path / "scheduler.conf"
    conf.write_text(CONF)
    async with SimCluster(nodes=1, kubelet_delay=0.05, seed=5) as sim:
        client = ApiClient(await ClusterConfig.load(str(sim.kubeconfig_path)))
        await client.request("POST", "/api/v1/namespaces/default/pods", body=pod("orphan-0", "ghost"))
        await client.request("POST", "/api/v1/namespaces/default/pods", body=pod("broken-0", "broken"))

        # An invalid quantity that a real API server would refuse, put in storage by the simulator's
        # fault injection (see test/e2e/test_silent_pending.py).
        def invalid(obj: dict[str, Any]) -> None:
            obj["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "lots"

        sim.rewrite_stored("pods", "broken-0", invalid)
        try:
            async with running_scheduler(sim, conf, SCHEDULER, cycles=2) as base:
                yield base
        finally:
            await client.close()


async def test_problem_rows_and_the_pod_page(browser: Browser, server: str) -> None:
    async with aiohttp.ClientSession() as http, http.get(f"{server}/debug/jobs") as resp:
        truth = {(j["kind"], j["name"]): j for j in (await resp.json())["jobs"]}
    assert truth[("job", "ghost")]["problem"] == "PodGroupNotFound"
    assert truth[("pod", "broken-0")]["problem"] == "InvalidPodSpec"

    await browser.get(f"{server}/ui/?refresh=1#jobs")
    await browser.loaded("jobs")
    rows = await browser.js(
        """
        return [...document.querySelectorAll('#jobs-table tbody tr')].map(tr => ({
          job: tr.dataset.job, kind: tr.dataset.kind, problem: tr.dataset.problem || '',
          reason: (tr.querySelector('[data-field=reason]') || {}).textContent || '',
          href: tr.querySelector('td.name a').getAttribute('href'),
        }));
        """
    )
    shown = {r["job"]: r for r in rows}
    ghost, broken = shown["default/ghost"], shown["default/broken-0"]
    assert ghost["problem"] == "PodGroupNotFound" and ghost["reason"] == truth[("job", "ghost")]["reason"]
    assert broken["kind"] == "pod" and broken["href"] == "#pod/default/broken-0"
    assert broken["reason"] == truth[("pod", "broken-0")]["reason"]

    await browser.click('tr[data-job="default/broken-0"] td.name a')
    await browser.loaded("job")
    async with aiohttp.ClientSession() as http, http.get(f"{server}/debug/pods/default/broken-0") as resp:
        doc = await resp.json()
    page = await browser.js(
        "return {reason: (document.getElementById('job-reason') || {}).textContent || '',"
        " suggestion: (document.getElementById('job-suggestion') || {}).textContent || '',"
        " job: (document.querySelector('[data-field=job]') || {}).textContent || ''}"
    )
    assert page["reason"] == doc["reason"] and "invalid quantity 'lots'" in page["reason"]
    assert doc["suggestion"] in page["suggestion"]
    assert page["job"] == "default/broken"
    assert await browser.console_errors() == []
