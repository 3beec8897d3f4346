"""A stand-in for the scheduler's /debug API (docs/debug-api.md), serving contract-shaped JSON at a
chosen scale, with the real /ui mounted beside it: for the web view's scale test (5,000 nodes and
10,000 jobs) without building that cluster."""

from __future__ import annotations

import time
from typing import Any

import msgspec
from aiohttp import web

from caldera.scheduler import ui as scheduler_ui

GI = 1024**3


def nodes_payload(count: int, per_leaf: int = 16, leaves_per_spine: int = 8) -> dict[str, Any]:
    groups: dict[str, list[dict[str, Any]]] = {}
    for i in range(count):
        leaf = f"leaf-{i // per_leaf:03d}"
        gpu = [(i * 7) % 9 if i % 3 else 8, 8]
        used = ((i * 37) % 100) / 100
        groups.setdefault(leaf, []).append(
            {
                "name": f"node-{i:05d}",
                "ready": i % 97 != 0,
                "unschedulable": i % 211 == 0,
                "cpu": [round(64 * used, 1), 64.0],
                "memory": [int(512 * GI * used * 0.8), 512 * GI],
                "gpu": [min(gpu[0], 8), 8],
            }
        )
    return {
        "cycle": 7,
        "tiers": ["example.com/leaf", "example.com/spine"],
        "groups": [{"name": k, "tier": 1, "nodes": v} for k, v in sorted(groups.items())],
    }


def jobs_all(count: int) -> list[dict[str, Any]]:
    now = time.time()
    out = []
    for i in range(count):
        pending = i % 2 == 0
        out.append(
            {
                "namespace": "team-a" if i % 3 else "team-b",
                "name": f"job-{i:05d}",
                "queue": ["research", "prod", "default"][i % 3],
                "priority": (i % 5) * 100,
                "min_member": 1 + i % 8,
                "phase": "Pending" if pending else "Running",
                "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now - i)),
                "age_seconds": float(i),
                "tasks": {
                    "pending": 1 + i % 8 if pending else 0,
                    "bound": 0,
                    "running": 0 if pending else 1 + i % 8,
                    "succeeded": 0,
                    "failed": 0,
                },
                "reason": f"0/5000 nodes are available: {i % 50} Insufficient cpu." if pending else "",
            }
        )
    return out


def make_app(nodes: int = 5000, jobs: int = 10_000) -> web.Application:
    node_body = msgspec.json.encode(nodes_payload(nodes))
    all_jobs = jobs_all(jobs)
    queues = {
        "cycle": 7,
        "queues": [
            {
                "name": name,
                "parent": "root",
                "state": "Open",
                "weight": w,
                "guarantee": {"cpu": 100.0},
                "capability": None,
                "deserved": {"cpu": 1000.0 * w, "memory": 4096.0 * GI * w},
                "allocated": {"cpu": 1100.0 * w, "memory": 2048.0 * GI * w},
                # the part of allocated the last cycle pipelined: research only
                "pipelined": {"cpu": 100.0} if name == "research" else {},
                "request": {"cpu": 1500.0 * w, "memory": 3000.0 * GI * w},
                "share": 1.1,
                "overused": True,
                "guarantee_scaled": None,
                "jobs": {"pending": jobs // 6, "inqueue": 0, "running": jobs // 6},
            }
            for name, w in (("research", 1), ("prod", 2), ("default", 1))
        ],
    }

    async def get_nodes(request: web.Request) -> web.Response:
        return web.Response(body=node_body, content_type="application/json")

    async def get_queues(request: web.Request) -> web.Response:
        return web.json_response(queues)

    async def get_jobs(request: web.Request) -> web.Response:
        q = request.query
        state = q.get("state", "pending")
        sel = [j for j in all_jobs if state == "all" or j["phase"].lower() == state]
        if q.get("queue"):
            sel = [j for j in sel if j["queue"] == q["queue"]]
        offset, limit = int(q.get("offset", 0)), min(1000, int(q.get("limit", 100)))
        return web.json_response({"cycle": 7, "total": len(sel), "jobs": sel[offset : offset + limit]})

    async def get_scheduler(request: web.Request) -> web.Response:
        now = time.time()
        cycles = [
            {
                "at": now - (600 - i) * 0.5,
                "duration_ms": 20 + (i * 13) % 30,
                "bound": (i * 7) % 40,
                "pending_tasks": 5000,
            }
            for i in range(600)
        ]
        return web.json_response(
            {
                "cycle": 7,
                "identity": "fake-0",
                "leader": True,
                "leader_identity": "fake-0",
                "conf": {
                    "text": 'actions: "allocate"\n',
                    "source": "built in",
                    "loaded_at": now - 60,
                    "last_reload": {"result": "ok", "message": "", "at": now - 60},
                },
                "cycles": cycles,
            }
        )

    app = web.Application()
    app.router.add_get("/debug/nodes", get_nodes)
    app.router.add_get("/debug/queues", get_queues)
    app.router.add_get("/debug/jobs", get_jobs)
    app.router.add_get("/debug/scheduler", get_scheduler)
    scheduler_ui.mount(app)
    return app


async def serve(app: web.Application) -> tuple[web.AppRunner, str]:
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    return runner, f"http://127.0.0.1:{port}"
