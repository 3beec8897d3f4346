"""No pod pends in silence: a PodGroup that does not exist, a pod spec the scheduler cannot read and a
queue that does not exist each give a Warning Event (once, not every cycle), a reason in /debug/jobs,
an answer from `caldera-scheduler explain` and the same text in the web view's data."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import aiohttp
import pytest

from caldera.hack.sim import SimCluster
from caldera.hack.soak.supervisor import pod_explanation

from .conftest import SCHEDULER, Api, eventually, needs_sim

CLI = "from caldera.scheduler.cli import main; raise SystemExit(main())"


async def run_cli(*args: str) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", CLI, *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    out, _ = await asyncio.wait_for(proc.communicate(), 30)
    return proc.returncode or 0, out.decode()


async def get_json(url: str) -> tuple[int, Any]:
    async with aiohttp.ClientSession() as http, http.get(url) as resp:
        return resp.status, await resp.json()


async def warnings_about(api: Api, kind: str, name: str) -> list[dict[str, Any]]:
    return [
        e
        for e in await api.events()
        if e.get("type") == "Warning"
        and e.get("involvedObject", {}).get("kind") == kind
        and e.get("involvedObject", {}).get("name") == name
    ]


async def test_a_pod_whose_podgroup_does_not_exist(api: Api, start_scheduler) -> None:
    await api.node("n1", cpu="4")
    await api.pod("ghost-0", cpu="1", group="ghost")
    running = await start_scheduler()
    server = f"http://127.0.0.1:{running.app.http.port}"  # type: ignore[union-attr]

    # Reported once the pod has waited out the grace a PodGroup gets to arrive after its pods.
    events = await eventually(lambda: warnings_about(api, "Pod", "ghost-0"), timeout=20)
    (event,) = events
    assert event["reason"] == "FailedScheduling"
    assert f"PodGroup {api.ns}/ghost not found" in event["message"]
    reason = event["message"]

    _, listing = await get_json(f"{server}/debug/jobs")
    (row,) = [j for j in listing["jobs"] if j["name"] == "ghost"]
    assert row["reason"] == reason and row["problem"] == "PodGroupNotFound" and row["tasks"]["pending"] == 1
    status, doc = await get_json(f"{server}/debug/jobs/{api.ns}/ghost")
    assert status == 200 and doc["reason"] == reason
    assert "create PodGroup ghost" in doc["suggestion"]

    code, text = await run_cli("explain", "pod", f"{api.ns}/ghost-0", "--server", server)
    assert code == 0, text
    assert reason in text and "create PodGroup ghost" in text
    code, text = await run_cli("explain", f"{api.ns}/ghost", "--server", server)
    assert code == 0 and reason in text

    pod = await api.get(f"/api/v1/namespaces/{api.ns}/pods/ghost-0")
    (cond,) = [c for c in pod["status"].get("conditions", []) if c["type"] == "PodScheduled"]
    assert cond["status"] == "False" and cond["message"] == reason

    # Twenty more cycles: the Event is not repeated.
    mark = _mark(running.app)
    await eventually(lambda: _after(running.app, mark, 20), timeout=30)
    assert len(await warnings_about(api, "Pod", "ghost-0")) == 1

    # The PodGroup arrives: the pod is scheduled and the problem is gone.
    await api.podgroup("ghost", 1)
    await eventually(lambda: _bound(api, "ghost-0"), timeout=15)
    _, listing = await get_json(f"{server}/debug/jobs?state=all")
    assert not [j for j in listing["jobs"] if j.get("problem")]


async def test_pods_whose_spec_cannot_be_read(api: Api, start_scheduler, sim: SimCluster | None) -> None:
    cluster = needs_sim(sim)
    await api.node("n1", cpu="8")
    await api.podgroup("bad", 3)
    for i in range(3):
        await api.pod(f"bad-{i}", cpu="1", group="bad")

    # A real API server refuses both quantities (400 for "abc", 422 for a negative request: see
    # shared KUBE-FACTS), and caldera-sim may refuse them too. They can still reach a scheduler from
    # storage (an object written to etcd directly, or kept from an API server that validated less):
    # the simulator's storage-level fault injection puts them there, and the watch delivers them.
    def requests(cpu: str) -> Any:
        def mutate(obj: dict[str, Any]) -> None:
            obj["spec"]["containers"][0]["resources"]["requests"]["cpu"] = cpu

        return mutate

    cluster.rewrite_stored("pods", "bad-1", requests("abc"), namespace=api.ns)
    cluster.rewrite_stored("pods", "bad-2", requests("-2"), namespace=api.ns)
    running = await start_scheduler()
    server = f"http://127.0.0.1:{running.app.http.port}"  # type: ignore[union-attr]

    invalid = (await eventually(lambda: warnings_about(api, "Pod", "bad-1"), timeout=15))[0]
    negative = (await eventually(lambda: warnings_about(api, "Pod", "bad-2"), timeout=15))[0]
    assert "cannot be read" in invalid["message"] and "invalid quantity 'abc'" in invalid["message"]
    assert "container main" in negative["message"] and "negative quantity '-2'" in negative["message"]

    _, listing = await get_json(f"{server}/debug/jobs")
    rows = {(j["kind"], j["name"]): j for j in listing["jobs"]}
    assert rows[("pod", "bad-1")]["reason"] == invalid["message"]
    assert rows[("pod", "bad-2")]["problem"] == "InvalidPodSpec"
    # The gang of three cannot start without them, and its explanation says why first.
    assert rows[("job", "bad")]["reason"].startswith(f"pod {api.ns}/bad-1 cannot be scheduled")
    status, doc = await get_json(f"{server}/debug/jobs/{api.ns}/bad")
    assert status == 200 and {p["name"] for p in doc["unreadable_pods"]} == {"bad-1", "bad-2"}
    assert doc["suggestion"].startswith(f"re-create pod {api.ns}/bad-1")

    code, text = await run_cli("explain", "pod", f"{api.ns}/bad-2", "--server", server)
    assert code == 0, text
    assert negative["message"] in text and "re-create pod" in text

    # The refused request is not counted anywhere: the node's used cpu stays zero, nothing is bound.
    _, nodes = await get_json(f"{server}/debug/nodes")
    (n1,) = [n for g in nodes["groups"] for n in g["nodes"] if n["name"] == "n1"]
    assert n1["cpu"][0] == 0
    assert not any((await api.node_of()).values())

    mark = _mark(running.app)
    await eventually(lambda: _after(running.app, mark, 20), timeout=30)
    assert len(await warnings_about(api, "Pod", "bad-1")) == 1
    assert len(await warnings_about(api, "Pod", "bad-2")) == 1


async def test_a_job_whose_queue_does_not_exist(api: Api, start_scheduler) -> None:
    await api.node("n1", cpu="4")
    await api.podgroup("lost", 1, queue="nosuch")
    await api.pod("lost-0", cpu="1", group="lost")
    running = await start_scheduler()
    server = f"http://127.0.0.1:{running.app.http.port}"  # type: ignore[union-attr]

    (event,) = await eventually(lambda: warnings_about(api, "PodGroup", "lost"), timeout=15)
    assert event["reason"] == "FailedScheduling" and "queue nosuch not found" in event["message"]

    status, doc = await get_json(f"{server}/debug/jobs/{api.ns}/lost")
    assert status == 200 and doc["reason"] in event["message"]
    assert doc["queue_state"]["state"] == "Missing"
    assert doc["suggestion"] == "create queue nosuch or submit the job to an existing queue"
    _, listing = await get_json(f"{server}/debug/jobs")
    (row,) = [j for j in listing["jobs"] if j["name"] == "lost"]
    assert "queue nosuch not found" in row["reason"]

    code, text = await run_cli("explain", "pod", f"{api.ns}/lost-0", "--server", server)
    assert code == 0, text
    assert "queue nosuch not found" in text and "create queue nosuch" in text

    mark = _mark(running.app)
    await eventually(lambda: _after(running.app, mark, 20), timeout=30)
    assert len(await warnings_about(api, "PodGroup", "lost")) == 1


def _mark(app: Any) -> tuple[int, int]:
    return app.loop.stats.cycles + app.loop.stats.skipped, app.observatory.number


async def _after(app: Any, mark: tuple[int, int], periods: int) -> bool:
    """``periods`` more schedule periods and at least 3 more cycles: a period with nothing changed
    since a cycle that decided nothing is skipped (scheduler/loop.py), a cycle runs at least every
    second."""
    stats = app.loop.stats
    return bool(stats.cycles + stats.skipped >= mark[0] + periods and app.observatory.number >= mark[1] + 3)


async def _bound(api: Api, name: str) -> bool:
    return bool((await api.node_of()).get(name))


pytestmark = pytest.mark.e2e


async def test_a_plain_pod_whose_queue_does_not_exist(api: Api, start_scheduler) -> None:
    """A pod without a PodGroup names a missing queue: the PodGroup controller makes no group for it
    (it refuses a queue that is not open), so the pod is reported instead of waiting in silence."""
    await api.node("n1", cpu="4")
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "plain-0",
            "namespace": api.ns,
            "annotations": {"scheduling.volcano.sh/queue-name": "nosuch"},
        },
        "spec": {
            "schedulerName": SCHEDULER,
            "containers": [{"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}],
        },
    }
    await api.create(f"/api/v1/namespaces/{api.ns}/pods", body)
    running = await start_scheduler()
    server = f"http://127.0.0.1:{running.app.http.port}"  # type: ignore[union-attr]

    (event,) = await eventually(lambda: warnings_about(api, "Pod", "plain-0"), timeout=20)
    assert "names queue nosuch" in event["message"] and "does not exist" in event["message"]
    _, listing = await get_json(f"{server}/debug/jobs")
    (row,) = [j for j in listing["jobs"] if j["name"] == "plain-0"]
    assert row["kind"] == "pod" and row["problem"] == "NoPodGroup" and row["reason"] == event["message"]
    code, text = await run_cli("explain", "pod", f"{api.ns}/plain-0", "--server", server)
    assert code == 0 and event["message"] in text and "create queue nosuch" in text

    mark = _mark(running.app)
    await eventually(lambda: _after(running.app, mark, 20), timeout=30)
    assert len(await warnings_about(api, "Pod", "plain-0")) == 1


async def test_a_plain_pod_with_the_controllers_off_says_who_must_make_its_podgroup(
    api: Api, start_scheduler
) -> None:
    """Beside Volcano (controllers off), a plain pod waits for vc-controller-manager to make its
    PodGroup; if that controller is not told our scheduler name, the pod says so."""
    await api.node("n1", cpu="4")
    await api.pod("plain-1", cpu="1")
    running = await start_scheduler(enable_controllers=False)
    server = f"http://127.0.0.1:{running.app.http.port}"  # type: ignore[union-attr]

    (event,) = await eventually(lambda: warnings_about(api, "Pod", "plain-1"), timeout=20)
    assert "--no-enable-controllers" in event["message"]
    status, doc = await get_json(f"{server}/debug/pods/{api.ns}/plain-1")
    assert status == 200 and doc["reason"] == event["message"] and doc["problem"] == "NoPodGroup"
    assert f"vc-controller-manager --scheduler-name={SCHEDULER}" in doc["suggestion"]
    # the soak's one-line account of a pod found waiting (hack/soak/supervisor.py) keeps the why
    line = pod_explanation(doc)
    assert line.startswith(f"cycle {doc['cycle']}: Pending") and "NoPodGroup" in line
    assert event["message"] in line


async def test_a_node_page_lists_the_pods_the_last_cycle_counted_there(api: Api, start_scheduler) -> None:
    await api.node("n1", cpu="8")
    await api.gang("two", 2, cpu="1500m")
    running = await start_scheduler()
    server = f"http://127.0.0.1:{running.app.http.port}"  # type: ignore[union-attr]
    await eventually(lambda: _all_bound(api, "two-0", "two-1"), timeout=15)

    async def counted() -> Any:
        status, doc = await get_json(f"{server}/debug/nodes/n1")
        return doc if status == 200 and len(doc["node"]["pods"]) == 2 else None

    doc = await eventually(counted, timeout=15)
    assert doc["node"]["cpu"] == [3.0, 8.0]
    assert [(p["name"], p["cpu"]) for p in doc["node"]["pods"]] == [("two-0", 1.5), ("two-1", 1.5)]
    assert {p["namespace"] for p in doc["node"]["pods"]} == {api.ns}
    status, missing = await get_json(f"{server}/debug/nodes/nosuch")
    assert status == 404 and "nosuch" in missing["error"]


async def _all_bound(api: Api, *names: str) -> bool:
    nodes = await api.node_of()
    return all(nodes.get(n) for n in names)
