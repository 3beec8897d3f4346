"""The soak's figure for ``volcano_queue_allocated_milli_cpu`` is Volcano's definition read from the
API: the queue's pods bound or running, not being deleted, in a PodGroup that exists. A pod being
deleted, finished, in phase Unknown, without its PodGroup, of another scheduler or not on a node
counts for nothing; those on a node are reported apart, to tell them from a wrong metric."""

from __future__ import annotations

from typing import Any

from caldera.hack.soak.checker import Checker, CheckerConfig
from caldera.hack.soak.metric_checks import MetricChecks


def pod(name: str, cpu: str, phase: str, node: str = "n1", group: str | None = None, **meta: Any) -> dict:
    annotations = {"scheduling.k8s.io/group-name": group or name}
    return {
        "metadata": {"namespace": "soak", "name": name, "annotations": annotations, **meta},
        "spec": {
            "schedulerName": "caldera",
            "nodeName": node,
            "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}],
        },
        "status": {"phase": phase},
    }


def test_the_figure_is_volcanos_allocated_and_the_rest_on_nodes_is_told_apart() -> None:
    checker = Checker(api=None, config=CheckerConfig(), t0=0.0)  # type: ignore[arg-type]
    pods = [
        pod("running", "1", "Running"),
        pod("bound", "500m", "Pending"),
        pod("releasing", "2", "Running", deletionTimestamp="2026-01-01T00:00:00Z"),
        pod("succeeded", "1", "Succeeded"),
        pod("failed", "1", "Failed"),
        pod("unknown", "250m", "Unknown"),
        pod("orphan", "4", "Running", group="no-such-group"),
        pod("pending", "8", "Pending", node=""),
    ]
    foreign = pod("foreign", "16", "Running")
    foreign["spec"]["schedulerName"] = "default-scheduler"
    checker.pods.objects = {f"soak/{p['metadata']['name']}": p for p in [*pods, foreign]}
    checker.groups.objects = {
        f"soak/{p['metadata']['name']}": {"spec": {"minMember": 1, "queue": "q"}}
        for p in [*pods, foreign]
        if p["metadata"]["name"] != "orphan"
    }
    none: Any = None
    checks = MetricChecks(opts=none, supervisor=none, checker=checker, summary=none, timeline=none)
    counted, left_out = checks.queue_allocated_truth()
    assert counted == {"q": 1500.0}  # running 1 + bound 0.5
    # releasing 2 + unknown 0.25 in q; the orphan's queue is its annotation's, else "default"
    assert left_out == {"q": 2250.0, "default": 4000.0}


async def test_the_leaders_queues_are_read_from_its_debug_page_with_their_pipelined_tasks() -> None:
    """The gauge counts the tasks the last cycle pipelined (placed on resources still being
    released), which the API cannot show: the leader's /debug/queues lists them per queue, and the
    note carries what the leader's last cycle holds."""
    import aiohttp
    from aiohttp import web
    from aiohttp.test_utils import TestServer

    from caldera.hack.soak.metric_checks import leader_queues

    doc = {
        "cycle": 67,
        "queues": [
            {
                "name": "default",
                "allocated": {"cpu": 3.5},
                "pipelined": {"cpu": 1.25},
                "jobs": {"pending": 0, "running": 2},
            },
            {"name": "idle", "allocated": {}, "pipelined": {}, "jobs": {}},
        ],
    }

    async def queues(_: web.Request) -> web.Response:
        return web.json_response(doc)

    app = web.Application()
    app.router.add_get("/debug/queues", queues)
    async with TestServer(app, host="127.0.0.1") as server, aiohttp.ClientSession() as http:
        seen = await leader_queues(http, str(server.make_url("")).rstrip("/"))
        nobody = await leader_queues(http, "http://127.0.0.1:1")
    assert seen["default"].pipelined_milli_cpu == 1250.0
    assert seen["idle"].pipelined_milli_cpu == 0.0
    assert seen["default"].text == (
        "cycle 67, allocated {'cpu': 3.5}, pipelined {'cpu': 1.25}, jobs {'pending': 0, 'running': 2}"
    )
    assert nobody == {}, "a leader that does not answer leaves the note without it, never fails the soak"
