"""The binding ceiling of `caldera-sim bench e2e --ceiling`: a binder that makes no decision.

It lists the nodes and the namespace's pods once, then posts one Binding per pod that has no node,
to the nodes in turn, ``--in-flight`` requests at a time (64 by default), and exits. No cache, no
watch, no snapshot, no policy: what any scheduler that writes one binding per pod could reach on this
API server at most. It runs in its own process under uvloop and writes its bindings through the
scheduler's own HTTP/1.1 pool (cache/http1.py), as caldera-scheduler does; its last line on stdout
is one JSON object: ``{"pending": n, "bound": n, "failed": n, "retries": n, "cpu": seconds}``.

    python -m caldera.hack.bench_ceiling --kubeconfig PATH --namespace NS [--in-flight 64]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Iterator
from typing import Any

import orjson

from caldera.cache.http1 import Http1Pool
from caldera.hack.workload.client import Api, pods_path

#: transient answers a binding is posted again after (the scheduler's binder retries these too)
RETRY = frozenset({429, 500, 502, 503, 504})
ATTEMPTS = 10


async def _get(pool: Http1Pool, path: str) -> list[dict[str, Any]]:
    status, _, body = await pool.request("GET", path, None, "", timeout=600.0)
    if status != 200:
        raise SystemExit(f"bench_ceiling: GET {path}: {status} {body[:200]!r}")
    items: list[dict[str, Any]] = orjson.loads(body)["items"]
    return items


async def bind_all(url: str, token: str, namespace: str, in_flight: int) -> dict[str, float]:
    pool = Http1Pool(url, {"Authorization": f"Bearer {token}"}, max_connections=in_flight)
    try:
        nodes = [n["metadata"]["name"] for n in await _get(pool, "/api/v1/nodes")]
        pending = [
            p["metadata"]["name"]
            for p in await _get(pool, pods_path(namespace))
            if not p["spec"].get("nodeName")
        ]
        if not nodes:
            raise SystemExit("bench_ceiling: the cluster has no nodes")
        shape = pool.shape("POST", "/binding", "application/json")
        base = pods_path(namespace)
        counts = {"pending": float(len(pending)), "bound": 0.0, "failed": 0.0, "retries": 0.0}
        work: Iterator[tuple[int, str]] = iter(enumerate(pending))

        async def worker() -> None:
            for i, name in work:
                body = orjson.dumps(
                    {
                        "apiVersion": "v1",
                        "kind": "Binding",
                        "metadata": {"name": name, "namespace": namespace},
                        "target": {"apiVersion": "v1", "kind": "Node", "name": nodes[i % len(nodes)]},
                    }
                )
                path = f"{base}/{name}"
                for attempt in range(ATTEMPTS):
                    try:
                        status, _, _ = await pool.send(
                            "POST", path + "/binding", shape.fill(path, body), timeout=30.0
                        )
                    except (ConnectionError, TimeoutError):
                        status = 0
                    if status in (200, 201):
                        counts["bound"] += 1
                        break
                    if (status and status not in RETRY) or attempt == ATTEMPTS - 1:
                        counts["failed"] += 1
                        break
                    counts["retries"] += 1
                    await asyncio.sleep(0.05)

        await asyncio.gather(*(worker() for _ in range(in_flight)))
        return counts
    finally:
        pool.close()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m caldera.hack.bench_ceiling", description=__doc__.split("\n")[0]
    )
    p.add_argument("--kubeconfig", required=True)
    p.add_argument("--namespace", required=True)
    p.add_argument("--in-flight", type=int, default=64, help="bindings in flight (default 64)")
    args = p.parse_args(argv)
    if args.in_flight < 1:
        p.error("--in-flight must be at least 1")
    api = Api.from_kubeconfig(args.kubeconfig)
    try:
        import uvloop

        runner: Any = uvloop.run
    except ImportError:  # pragma: no cover - uvloop is a dependency
        runner = asyncio.run
    counts = runner(bind_all(api.url, api.token, args.namespace, args.in_flight))
    counts["cpu"] = time.process_time()
    print(orjson.dumps(counts).decode(), flush=True)
    return 0 if not counts["failed"] else 1


if __name__ == "__main__":
    sys.exit(main())
