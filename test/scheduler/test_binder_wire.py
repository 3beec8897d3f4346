"""What the binder puts on the wire: the binding request built from its pre-encoded parts is byte for
byte the request the client's general path writes for the same POST (token, path prefix, headers,
body), and it is a v1 Binding of the pod to its node. Also: the binder forgets binds older than
REMEMBER_BOUND, and only those."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import msgspec
import pytest

from caldera.cache.client import ApiClient, ApiError, ClusterConfig
from caldera.cache.store import ClusterCache
from caldera.framework.model import TaskStatus
from caldera.framework.result import Placement, SessionResult
from caldera.hack.scenario import gang, load, node
from caldera.scheduler import binder as binder_module
from caldera.scheduler.binder import Binder

CREATED = b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Success","code":201}'


class Recorder:
    """A raw HTTP/1.1 server on 127.0.0.1 that records each request's bytes and answers 201, or the
    scripted answers first."""

    def __init__(self) -> None:
        self.requests: list[bytes] = []
        self.script: list[bytes] = []

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":", 1)[1])
                self.requests.append(head + await reader.readexactly(length))
                if self.script:
                    writer.write(self.script.pop(0))
                else:
                    writer.write(
                        b"HTTP/1.1 201 Created\r\nContent-Length: %d\r\n\r\n%s" % (len(CREATED), CREATED)
                    )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        writer.close()


@pytest.fixture
async def recorder() -> AsyncIterator[tuple[Recorder, str]]:
    rec = Recorder()
    server = await asyncio.start_server(rec.handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    yield rec, f"http://127.0.0.1:{port}/k8s"
    server.close()


def assumed(cache: ClusterCache, name: str, size: int, namespace: str = "team-a") -> list[Placement]:
    pg, pods = gang(name, size, namespace=namespace)
    load(cache, nodes=[node("node-7", cpu="64")], podgroups=[pg], pods=pods)
    placements = [Placement(cache.task(p.metadata.uid), "node-7") for p in pods]
    cache.apply(SessionResult(placements=placements))
    return placements


async def test_the_binding_request_is_the_general_paths_bytes(recorder) -> None:
    rec, url = recorder
    client = ApiClient(ClusterConfig(host=url, token="sekret", headers={"X-Extra": "1"}))
    cache = ClusterCache()
    (placement,) = assumed(cache, "train", 1)
    binder = Binder(client, cache, workers=1)
    binder.start()
    binder.bind([placement])
    await asyncio.wait_for(binder._queue.join(), 10)
    await binder.stop()
    assert cache.task(placement.task.uid).status == TaskStatus.BOUND
    (sent,) = rec.requests

    # the general path: the same POST through ApiClient.request, the body encoded as a plain dict
    task = placement.task
    body = msgspec.json.encode(
        {
            "kind": "Binding",
            "metadata": {"name": task.name, "namespace": task.namespace, "uid": task.uid},
            "target": {"kind": "Node", "name": "node-7", "apiVersion": "v1"},
            "apiVersion": "v1",
        }
    )
    await client.request("POST", f"/api/v1/namespaces/team-a/pods/{task.name}/binding", data=body)
    await client.close()
    assert sent == rec.requests[1]

    head, _, payload = sent.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    assert lines[0] == b"POST /k8s/api/v1/namespaces/team-a/pods/train-0/binding HTTP/1.1"
    assert b"Authorization: Bearer sekret" in lines and b"X-Extra: 1" in lines
    assert b"Content-Type: application/json" in lines
    assert b"Content-Length: %d" % len(payload) in lines
    binding = msgspec.json.decode(payload)
    assert binding == {
        "kind": "Binding",
        "apiVersion": "v1",
        "metadata": {"name": "train-0", "namespace": "team-a", "uid": task.uid},
        "target": {"kind": "Node", "apiVersion": "v1", "name": "node-7"},
    }


async def test_the_pre_encoded_request_answers_and_errors_as_the_general_path(recorder) -> None:
    rec, url = recorder
    client = ApiClient(ClusterConfig(host=url))
    shape = client.shape("POST", "/binding")
    status = b'{"kind":"Status","code":409,"reason":"Conflict","message":"pod p is already assigned"}'
    conflict = b"HTTP/1.1 409 Conflict\r\nContent-Length: %d\r\n\r\n%s" % (len(status), status)
    throttled = b"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 3\r\nContent-Length: 0\r\n\r\n"
    rec.script = [conflict, conflict, throttled, throttled]
    errors = []
    for _ in range(2):
        for call in (
            client.send(shape, "/api/v1/namespaces/d/pods/p", b"{}"),
            client.request("POST", "/api/v1/namespaces/d/pods/p/binding", data=b"{}"),
        ):
            with pytest.raises(ApiError) as caught:
                await call
            errors.append(
                (caught.value.code, caught.value.reason, caught.value.message, caught.value.retry_after)
            )
    assert await client.send(shape, "/api/v1/namespaces/d/pods/p", b"{}") == CREATED
    await client.close()
    assert errors[0] == errors[1] == (409, "Conflict", "pod p is already assigned", None)
    assert errors[2] == errors[3] == (429, "", "", 3.0)
    assert len(set(rec.requests)) == 1, "every request was the same bytes"


async def test_binds_older_than_remember_bound_are_forgotten_and_only_those(
    recorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    rec, url = recorder
    now = [1000.0]
    client = ApiClient(ClusterConfig(host=url))
    cache = ClusterCache()
    old, young, late = assumed(cache, "old", 3), assumed(cache, "young", 3), assumed(cache, "late", 1)
    monkeypatch.setattr(binder_module, "REMEMBER_BOUND", 600.0)
    binder = Binder(client, cache, workers=2, clock=lambda: now[0])
    binder.start()
    binder.bind(old)
    await asyncio.wait_for(binder._queue.join(), 10)
    now[0] += 500
    binder.bind(young)
    await asyncio.wait_for(binder._queue.join(), 10)
    now[0] += 200  # the old ones were bound 700 s ago, the young ones 200 s ago
    binder._prune(now[0])
    remembered = {p.task.uid for p in young}
    assert set(binder._bound) == remembered and set(binder._issued) == remembered
    binder.bind(young)  # a stale decision for a pod still remembered: not bound again
    binder.bind(late)
    await asyncio.wait_for(binder._queue.join(), 10)
    await binder.stop()
    await client.close()
    assert len(rec.requests) == 7
    assert list(binder._bound) == [*(p.task.uid for p in young), late[0].task.uid], "in bind order"
