"""List-then-watch against a scripted API server: paging, events, bookmarks, malformed objects,
410 and the re-list that notices deletes, and lines longer than any read buffer."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import msgspec
import pytest
from aiohttp import web

from caldera.cache.client import ApiClient, ClusterConfig
from caldera.cache.informer import KindHandler
from caldera.cache.store import ClusterCache
from caldera.cache.watch import Reflector
from caldera.framework.objects import Node
from caldera.hack.scenario import node_dict

enc = msgspec.json.encode


class FakeApi:
    """Serves /api/v1/nodes: lists from ``self.nodes`` (two per page), watches from scripted lines."""

    def __init__(self) -> None:
        self.nodes: list[dict[str, Any]] = []
        self.rv = "10"
        self.watches: list[list[bytes]] = []  # one script per watch request
        self.watch_params: list[dict[str, str]] = []
        self.lists = 0
        self.closing = asyncio.Event()

    async def handle(self, request: web.Request) -> web.StreamResponse:
        if request.query.get("watch"):
            self.watch_params.append(dict(request.query))
            resp = web.StreamResponse()
            await resp.prepare(request)
            # Each watch plays the next script; with none queued it idles until one is (or the test ends).
            while not self.watches and not self.closing.is_set():
                await asyncio.sleep(0.01)
            for line in self.watches.pop(0) if self.watches else []:
                await resp.write(line)
            return resp
        if not request.query.get("continue"):
            self.lists += 1
        start = int(request.query.get("continue") or 0)
        page = self.nodes[start : start + 2]
        more = start + 2 < len(self.nodes)
        meta = {"resourceVersion": self.rv, **({"continue": str(start + 2)} if more else {})}
        return web.Response(body=enc({"kind": "NodeList", "metadata": meta, "items": page}))


@pytest.fixture
async def fake() -> AsyncIterator[tuple[FakeApi, ApiClient]]:
    api = FakeApi()
    app = web.Application()
    app.router.add_get("/api/v1/nodes", api.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    client = ApiClient(ClusterConfig(host=f"http://127.0.0.1:{port}", token="t"))
    yield api, client
    api.closing.set()
    await client.close()
    await runner.cleanup()


def event(kind: str, obj: Any) -> bytes:
    return enc({"type": kind, "object": obj}) + b"\n"


def node_obj(name: str, rv: str, cpu: str = "8") -> dict[str, Any]:
    d = node_dict(name, cpu=cpu)
    d["metadata"]["resourceVersion"] = rv
    return d


async def until(check: Callable[[], bool], timeout: float = 5.0) -> None:
    for _ in range(int(timeout / 0.01)):
        if check():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition not met")


async def test_list_pages_then_watch_events_bookmarks_and_malformed_objects(fake) -> None:
    api, client = fake
    api.nodes = [node_obj(f"n{i}", "5") for i in range(5)]
    malformed = {"metadata": {"name": "bad", "resourceVersion": "12"}, "status": {"allocatable": "not-a-map"}}
    api.watches = [
        [
            event("ADDED", node_obj("n5", "11")),
            event("ADDED", malformed),
            event("MODIFIED", node_obj("n0", "13", cpu="4")),
            event("DELETED", node_obj("n1", "14")),
            event("BOOKMARK", {"kind": "Node", "metadata": {"resourceVersion": "20"}}),
        ]
    ]
    cache = ClusterCache()
    reflector = Reflector(
        client, "/api/v1/nodes", Node, KindHandler(cache.upsert_node, cache.delete_node), page_size=2
    )
    task = asyncio.create_task(reflector.run())
    try:
        await until(lambda: reflector.resource_version == "20")
        assert api.lists == 1 and reflector.synced.is_set()
        assert sorted(cache.nodes) == ["n0", "n2", "n3", "n4", "n5"]
        assert cache.nodes["n0"].allocatable.get("cpu") == 4000
        assert reflector.stats.skipped == 1 and reflector.stats.bookmarks == 1
        # The stream ended: the next watch resumes from the bookmark, without a re-list.
        await until(lambda: len(api.watch_params) == 2)
        assert api.watch_params[1]["resourceVersion"] == "20" and api.lists == 1
        assert api.watch_params[0]["allowWatchBookmarks"] == "true"
    finally:
        task.cancel()


async def test_a_list_page_with_a_malformed_item_keeps_the_others_and_skips_that_one(fake) -> None:
    api, client = fake
    malformed = {"metadata": {"name": "bad", "resourceVersion": "5"}, "status": {"allocatable": "not-a-map"}}
    api.nodes = [node_obj("n0", "5"), malformed, node_obj("n2", "5"), node_obj("n3", "5")]
    cache = ClusterCache()
    reflector = Reflector(
        client, "/api/v1/nodes", Node, KindHandler(cache.upsert_node, cache.delete_node), page_size=2
    )
    await reflector.list()
    assert sorted(cache.nodes) == ["n0", "n2", "n3"] and reflector.stats.skipped == 1
    assert reflector.synced.is_set() and reflector.resource_version == "10"


def test_a_list_page_decoded_in_one_pass_holds_the_objects_the_two_pass_decoding_gives() -> None:
    from caldera.cache.watch import _list_decoder, _typed_list_decoder
    from caldera.framework.objects import Pod, decode
    from caldera.hack.scenario import pod_dict

    running = pod_dict("p", cpu="250m", group="g", node_name="n1", phase="Running")
    running["metadata"]["managedFields"] = [{"manager": "kubelet", "fieldsV1": {"f:status": {}}}]
    pending = pod_dict("q", cpu="1", memory="1Gi", group="g")
    raw = enc(
        {
            "kind": "PodList",
            "metadata": {"resourceVersion": "7", "continue": "c"},
            "items": [running, pending],
        }
    )
    whole = _typed_list_decoder(Pod).decode(raw)
    two_pass = _list_decoder.decode(raw)
    assert whole.items == [decode(Pod, item) for item in two_pass.items]
    assert [p.metadata.name for p in whole.items] == ["p", "q"]
    assert (whole.metadata.resource_version, whole.metadata.continue_) == ("7", "c")


async def test_410_relists_and_notices_deletes_made_meanwhile(fake) -> None:
    api, client = fake
    api.nodes = [node_obj("keep", "5"), node_obj("gone", "5")]
    cache = ClusterCache()
    reflector = Reflector(client, "/api/v1/nodes", Node, KindHandler(cache.upsert_node, cache.delete_node))
    task = asyncio.create_task(reflector.run())
    try:
        await until(lambda: "gone" in cache.nodes)
        api.nodes = [node_obj("keep", "5"), node_obj("new", "30")]  # "gone" was deleted while we were away
        api.rv = "30"
        api.watches.append(
            [event("ERROR", {"kind": "Status", "code": 410, "reason": "Expired", "message": "too old"})]
        )
        await until(lambda: api.lists == 2)
        await until(lambda: "new" in cache.nodes)
        assert sorted(cache.nodes) == ["keep", "new"]
        assert reflector.stats.expired == 1 and reflector.resource_version == "30"
    finally:
        task.cancel()


async def test_lines_longer_than_any_buffer_arrive_whole(fake) -> None:
    api, client = fake
    big = node_obj("big", "11")
    big["metadata"]["annotations"] = {"blob": "x" * 300_000}
    line = event("ADDED", big)
    api.watches = [[line[:1000], line[1000:200_000], line[200_000:]]]
    cache = ClusterCache()
    reflector = Reflector(client, "/api/v1/nodes", Node, KindHandler(cache.upsert_node, cache.delete_node))
    task = asyncio.create_task(reflector.run())
    try:
        await until(lambda: "big" in cache.nodes)
        assert reflector.stats.skipped == 0
    finally:
        task.cancel()


def test_relist_of_unchanged_objects_costs_nothing() -> None:
    calls: list[str] = []
    handler: KindHandler[Any] = KindHandler(
        lambda o: calls.append(f"up {o.metadata.name}"), lambda o: calls.append(f"del {o.metadata.name}")
    )
    a = msgspec.convert(node_obj("a", "1"), Node)
    b = msgspec.convert(node_obj("b", "1"), Node)
    handler.replace([a, b])
    calls.clear()
    b2 = msgspec.convert(node_obj("b", "2"), Node)
    handler.replace([a, b2])
    assert calls == ["up b"]
    handler.replace([a])
    assert calls == ["up b", "del b"]


@pytest.mark.parametrize("code", [403, 404])
async def test_an_optional_kind_that_cannot_be_listed_counts_as_empty(code: int) -> None:
    """PDBs and storage kinds are optional: a cluster that does not serve them (404), or an older
    RBAC that does not let the scheduler read them (403), must not keep the scheduler from syncing."""

    async def refuse(request: web.Request) -> web.Response:
        status = {"kind": "Status", "code": code, "reason": "Forbidden" if code == 403 else "NotFound"}
        return web.Response(status=code, body=enc(status))

    app = web.Application()
    app.router.add_get("/apis/policy/v1/poddisruptionbudgets", refuse)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    client = ApiClient(ClusterConfig(host=f"http://127.0.0.1:{port}"))
    from caldera.framework.objects import PodDisruptionBudget

    cache = ClusterCache()
    reflector = Reflector(
        client,
        "/apis/policy/v1/poddisruptionbudgets",
        PodDisruptionBudget,
        KindHandler(cache.upsert_pdb, cache.delete_pdb),
        optional=True,
    )
    task = asyncio.create_task(reflector.run())
    try:
        await until(lambda: reflector.synced.is_set())
        assert cache.pdbs == {}
    finally:
        task.cancel()
        await client.close()
        await runner.cleanup()


@pytest.mark.parametrize("etype", ["ADDED", "MODIFIED", "DELETED", "BOOKMARK"])
def test_an_event_decoded_in_one_pass_holds_the_object_the_two_pass_decoding_gives(etype: str) -> None:
    from caldera.cache.watch import _event_decoder, _typed_event_decoder
    from caldera.framework.objects import Pod, decode
    from caldera.hack.scenario import pod_dict

    manifest = pod_dict("p", cpu="250m", group="g", node_name="n1", phase="Running")
    manifest["metadata"]["managedFields"] = [{"manager": "kubelet", "fieldsV1": {"f:status": {}}}]
    manifest["status"]["containerStatuses"] = [{"name": "main", "ready": True, "state": {"running": {}}}]
    line = event(etype, manifest)
    whole = _typed_event_decoder(Pod).decode(line)
    assert whole.type == etype
    assert whole.object == decode(Pod, _event_decoder.decode(line).object)
    assert whole.object.spec.node_name == "n1" and whole.object.status.phase == "Running"


async def test_events_are_counted_by_type_even_when_an_error_ends_their_chunk(fake) -> None:
    api, client = fake
    api.nodes = [node_obj("n0", "5")]
    malformed = {"metadata": {"name": "bad", "resourceVersion": "12"}, "status": {"allocatable": "not-a-map"}}
    one_chunk = b"".join(
        [
            event("ADDED", node_obj("n1", "11")),
            event("ADDED", node_obj("n2", "12")),
            event("ADDED", malformed),  # skipped: not counted, as it reaches no handler
            event("MODIFIED", node_obj("n0", "13", cpu="4")),
            event("ERROR", {"kind": "Status", "code": 410, "reason": "Expired", "message": "too old"}),
        ]
    )
    api.watches = [[one_chunk]]
    counted: dict[tuple[str, str], int] = {}

    def on_event(kind: str, etype: str, n: int) -> None:
        counted[(kind, etype)] = counted.get((kind, etype), 0) + n

    cache = ClusterCache()
    reflector = Reflector(
        client, "/api/v1/nodes", Node, KindHandler(cache.upsert_node, cache.delete_node), on_event=on_event
    )
    task = asyncio.create_task(reflector.run())
    try:
        await until(lambda: api.lists == 2)
        assert counted == {("Node", "ADDED"): 2, ("Node", "MODIFIED"): 1}
        assert reflector.stats.events == 4 and reflector.stats.skipped == 1 and reflector.stats.expired == 1
    finally:
        task.cancel()


async def test_a_server_without_dra_is_one_log_line_and_the_claims_watch_counts_as_synced(caplog) -> None:  # type: ignore[no-untyped-def]
    """An API server older than Kubernetes 1.34 (or with resource.k8s.io off) answers 404 for the DRA
    kinds: the scheduler syncs without them and says so once."""
    from caldera.cache.informer import PATHS
    from caldera.framework.dra.objects import ResourceClaim

    async def absent(request: web.Request) -> web.Response:
        return web.Response(status=404, body=enc({"kind": "Status", "code": 404, "reason": "NotFound"}))

    app = web.Application()
    app.router.add_get(PATHS["resourceclaims"], absent)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    client = ApiClient(ClusterConfig(host=f"http://127.0.0.1:{port}"))
    cache = ClusterCache()
    reflector = Reflector(
        client,
        PATHS["resourceclaims"],
        ResourceClaim,
        KindHandler(cache.upsert_resource_claim, cache.delete_resource_claim),
        name="resourceclaims",
        optional=True,
    )
    task = asyncio.create_task(reflector.run())
    try:
        with caplog.at_level("INFO", logger="caldera.watch"):
            await until(lambda: reflector.synced.is_set())
        assert cache.snapshot().dra is None
        lines = [r.getMessage() for r in caplog.records if "not served" in r.getMessage()]
        assert lines == [
            "resourceclaims: not served by this API server (/apis/resource.k8s.io/v1/resourceclaims); scheduling goes on without them"
        ]
    finally:
        task.cancel()
        await client.close()
        await runner.cleanup()


class Faulty:
    """The cache's node handlers, failing on the names in ``fail`` (each once, or always)."""

    def __init__(self, cache: ClusterCache, fail: set[str], always: bool = False) -> None:
        self.cache = cache
        self.fail = fail
        self.always = always
        self.raised = 0

    def _check(self, node: Node) -> None:
        if node.metadata.name in self.fail:
            if not self.always:
                self.fail.discard(node.metadata.name)
            self.raised += 1
            raise RuntimeError(f"injected fault on {node.metadata.name}")

    def upsert(self, node: Node) -> None:
        self._check(node)
        self.cache.upsert_node(node)

    def delete(self, node: Node) -> None:
        self._check(node)
        self.cache.delete_node(node)


def _cpu_by_node(cache: ClusterCache) -> dict[str, float]:
    return {name: info.allocatable.get("cpu") for name, info in sorted(cache.nodes.items())}


@pytest.mark.parametrize(
    ("failing", "script", "after"),
    [
        ("n5", [event("ADDED", node_obj("n5", "11"))], ["n0", "n1", "n2", "n5"]),
        ("n0", [event("MODIFIED", node_obj("n0", "11", cpu="4"))], ["n0*", "n1", "n2"]),
        ("n1", [event("DELETED", node_obj("n1", "11"))], ["n0", "n2"]),
    ],
)
async def test_an_event_that_fails_to_apply_is_counted_and_the_kind_reconciled(
    fake, failing, script, after
) -> None:
    from prometheus_client import REGISTRY

    api, client = fake
    api.nodes = [node_obj(f"n{i}", "5") for i in range(3)]
    cache = ClusterCache()
    faulty = Faulty(cache, set())
    reflector = Reflector(
        client, "/api/v1/nodes", Node, KindHandler(faulty.upsert, faulty.delete), name="nodes"
    )
    before = REGISTRY.get_sample_value("caldera_watch_apply_errors_total", {"kind": "nodes"}) or 0.0
    task = asyncio.create_task(reflector.run())
    try:
        await until(lambda: reflector.synced.is_set())
        # What the API holds after the event; the cache fails once on applying it.
        api.nodes = [node_obj(n.rstrip("*"), "11", cpu="4" if n.endswith("*") else "8") for n in after]
        api.rv = "11"
        faulty.fail.add(failing)
        api.watches.append(script)
        await until(lambda: faulty.raised == 1)
        await until(lambda: api.lists == 2 and reflector.synced.is_set())
        assert (
            REGISTRY.get_sample_value("caldera_watch_apply_errors_total", {"kind": "nodes"}) or 0.0
        ) == before + 1
        expected = {n.rstrip("*"): 4000.0 if n.endswith("*") else 8000.0 for n in after}
        assert _cpu_by_node(cache) == expected
    finally:
        task.cancel()


async def test_a_kind_that_keeps_failing_is_relisted_with_back_off_and_cycles_wait_then_are_told(
    fake, monkeypatch, caplog
) -> None:
    from caldera.cache import watch

    delays: list[int] = []

    def quick(attempt: int, base: float = 0.1, cap: float = 10.0) -> float:
        delays.append(attempt)
        return 0.01

    monkeypatch.setattr(watch, "backoff_delay", quick)
    api, client = fake
    api.nodes = [node_obj("n0", "5")]
    cache = ClusterCache()
    faulty = Faulty(cache, set(), always=True)
    reflector = Reflector(
        client, "/api/v1/nodes", Node, KindHandler(faulty.upsert, faulty.delete), name="nodes"
    )
    task = asyncio.create_task(reflector.run())
    try:
        await until(lambda: reflector.synced.is_set())
        api.nodes = [node_obj("n0", "5"), node_obj("bad", "6")]
        faulty.fail.add("bad")
        api.watches.append([event("ADDED", node_obj("bad", "6"))])
        await until(lambda: faulty.raised == 1)
        assert not reflector.fresh()  # a cycle would wait for nodes
        await until(lambda: faulty.raised >= watch.RESYNC_WAITS + 1)
        await until(lambda: reflector.synced.is_set())
        # Growing back-off: the attempts passed to it count up (0, 1, 2, ...).
        assert delays[: watch.RESYNC_WAITS + 1] == list(range(watch.RESYNC_WAITS + 1))
        assert any("cycles go on with nodes" in r.getMessage() for r in caplog.records)
        faulty.fail.clear()  # whatever was wrong is fixed: the next re-list reconciles
        await until(lambda: "bad" in cache.nodes)
        assert sorted(cache.nodes) == ["bad", "n0"]
    finally:
        task.cancel()


def test_the_reconcile_of_a_failed_pod_event_keeps_a_bind_in_flight() -> None:
    """A subscriber failed on a pod update whose bind is in flight: the reconcile applies the pod
    again, and the cache still holds it as binding (it must not be placed and bound twice)."""
    from caldera.cache.informer import ApplyFailed, _pod_key
    from caldera.framework.model import TaskStatus
    from caldera.framework.objects import Pod
    from caldera.framework.result import Placement, SessionResult
    from caldera.hack.scenario import gang, load, node

    cache = ClusterCache()
    pg, pods = gang("g", 1)
    load(cache, nodes=[node("n1", cpu="8")], podgroups=[pg])
    handler: KindHandler[Pod] = KindHandler(cache.upsert_pod, cache.delete_pod, key=_pod_key)
    handler.replace(pods)
    uid = pods[0].metadata.uid
    cache.apply(SessionResult(placements=[Placement(cache.tasks[uid], "n1")]))
    assert cache.tasks[uid].status == TaskStatus.BINDING

    class Failing:
        def replace(self, objects: list[Pod]) -> None:
            pass

        def upsert(self, obj: Pod) -> None:
            raise RuntimeError("injected subscriber fault")

        def delete(self, obj: Pod) -> None:
            pass

    handler.subscribe(Failing())
    updated = msgspec.structs.replace(
        pods[0], metadata=msgspec.structs.replace(pods[0].metadata, resource_version="7")
    )
    with pytest.raises(ApplyFailed):
        handler.upsert(updated)
    handler.replace([updated])  # the re-list: the API has not seen the bind yet
    assert cache.tasks[uid].status == TaskStatus.BINDING and cache.tasks[uid].node_name == "n1"
