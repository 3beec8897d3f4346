"""Credentials that rotate: a token file rewritten (the kubelet's projected ServiceAccount token), an
exec plugin whose token expires, and a kubeconfig's ``tls-server-name``. The API server here accepts
only the tokens it is told are valid, so an old token revoked answers 401 as a real one would."""

from __future__ import annotations

import asyncio
import json
import ssl
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
import yaml
from aiohttp import web
from prometheus_client import REGISTRY

from caldera.cache.auth import TokenSource
from caldera.cache.client import ApiClient, ApiError, ClusterConfig
from caldera.cache.informer import KindHandler
from caldera.cache.store import ClusterCache
from caldera.cache.watch import Reflector
from caldera.framework.objects import Node
from caldera.hack.scenario import node_dict


def auth_failures() -> float:
    """``caldera_api_auth_failures_total`` as /metrics exposes it."""
    return REGISTRY.get_sample_value("caldera_api_auth_failures_total") or 0.0


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Api:
    """Nodes (list and watch), bindings; every request needs one of ``valid`` tokens."""

    def __init__(self, valid: set[str]) -> None:
        self.valid = valid
        self.seen: list[str] = []
        self.bindings = 0

    def _allowed(self, request: web.Request) -> bool:
        token = request.headers.get("Authorization", "").removeprefix("Bearer ")
        self.seen.append(token)
        return token in self.valid

    async def nodes(self, request: web.Request) -> web.StreamResponse:
        if not self._allowed(request):
            return web.json_response({"kind": "Status", "code": 401, "reason": "Unauthorized"}, status=401)
        if request.query.get("watch"):
            resp = web.StreamResponse()
            await resp.prepare(request)
            obj = node_dict("n2", cpu="4")
            obj["metadata"]["resourceVersion"] = "11"
            await resp.write(msgspec.json.encode({"type": "ADDED", "object": obj}) + b"\n")
            return resp
        obj = node_dict("n1", cpu="4")
        obj["metadata"]["resourceVersion"] = "10"
        return web.json_response({"kind": "NodeList", "metadata": {"resourceVersion": "10"}, "items": [obj]})

    async def bind(self, request: web.Request) -> web.Response:
        if not self._allowed(request):
            return web.json_response({"kind": "Status", "code": 401, "reason": "Unauthorized"}, status=401)
        self.bindings += 1
        return web.json_response({"kind": "Status", "code": 201}, status=201)


async def _serve(api: Api, ssl_context: ssl.SSLContext | None = None) -> tuple[web.AppRunner, int]:
    app = web.Application()
    app.router.add_get("/api/v1/nodes", api.nodes)
    app.router.add_post("/api/v1/namespaces/default/pods/{name}/binding", api.bind)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=ssl_context)
    await site.start()
    return runner, site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]


@pytest.fixture
async def served() -> AsyncIterator[tuple[Api, str]]:
    api = Api({"first"})
    runner, port = await _serve(api)
    yield api, f"http://127.0.0.1:{port}"
    await runner.cleanup()


class Rotating:
    """A client that reads its token from ``path`` (``first`` to begin with), on this test's clock."""

    def __init__(self, api: Api, url: str, path: Path) -> None:
        self.api = api
        self.path = path
        self.clock = Clock()
        path.write_text("first\n")
        self.client = ApiClient(ClusterConfig(host=url, auth=TokenSource(path=path, clock=self.clock)))

    def rotate(self, token: str, revoke: bool = True) -> None:
        """The kubelet writes a new token; the old one is revoked (or still valid)."""
        self.path.write_text(token + "\n")
        self.api.valid = {token} if revoke else {*self.api.valid, token}


@pytest.fixture
async def rotating(served, tmp_path) -> AsyncIterator[Rotating]:
    api, url = served
    r = Rotating(api, url, tmp_path / "token")
    yield r
    await r.client.close()


async def _every_way(client: ApiClient) -> None:
    """A read, a write, a write of a pre-encoded shape (the binder's) and a watch."""
    await client.request("GET", "/api/v1/nodes")
    await client.request("POST", "/api/v1/namespaces/default/pods/a/binding", body={"target": {}})
    shape = client.shape("POST", "/binding")
    await client.send(shape, "/api/v1/namespaces/default/pods/b", b"{}")
    async for _ in client.stream_chunks("/api/v1/nodes", {"watch": "1"}, timeout=5):
        break


async def test_a_rewritten_token_file_is_used_after_the_first_401_and_each_call_is_retried_once(rotating):
    client, api = rotating.client, rotating.api
    await _every_way(client)
    rotating.rotate("second")  # before the client's minute is up
    before = auth_failures()
    await client.request("GET", "/api/v1/nodes")
    assert auth_failures() == before + 1  # one 401, then the new token
    await _every_way(client)  # every transport now sends the new token
    assert auth_failures() == before + 1
    assert api.seen[-5:] == ["second"] * 5


async def test_the_requests_in_flight_when_a_token_is_revoked_say_so_in_one_line_per_rotation(
    rotating, caplog
):
    client, api = rotating.client, rotating.api
    shape = client.shape("POST", "/binding")

    async def eight_binds() -> None:
        await asyncio.gather(
            *(client.send(shape, f"/api/v1/namespaces/default/pods/p{i}", b"{}") for i in range(8))
        )

    caplog.set_level("DEBUG", logger="caldera.client")
    rotating.rotate("second")
    await eight_binds()
    rotating.rotate("third")
    await eight_binds()
    assert api.bindings == 16  # every one retried with the new token
    retried = [r for r in caplog.records if "retrying once with the token read again" in r.message]
    assert len(retried) == 16
    assert [r.levelname for r in retried].count("WARNING") == 2  # one per rotation


async def test_a_token_file_is_read_again_every_minute_without_waiting_for_a_401(rotating):
    client, api = rotating.client, rotating.api
    shape = client.shape("POST", "/binding")
    await client.send(shape, "/api/v1/namespaces/default/pods/a", b"{}")
    rotating.rotate("second", revoke=False)
    rotating.clock.now += 59
    await client.send(shape, "/api/v1/namespaces/default/pods/a", b"{}")
    assert api.seen[-1] == "first"
    rotating.clock.now += 2
    before = auth_failures()
    await _every_way(client)
    assert auth_failures() == before
    assert api.seen[-4:] == ["second"] * 4


async def test_a_watch_opened_with_a_revoked_token_reconnects_with_the_new_one(rotating):
    cache = ClusterCache()
    handler = KindHandler(cache.upsert_node, cache.delete_node)
    reflector = Reflector(rotating.client, "/api/v1/nodes", Node, handler, name="nodes")
    await reflector.list()
    rotating.rotate("second")
    await reflector.watch()
    assert sorted(cache.nodes) == ["n1", "n2"]
    assert reflector.stats.errors == 0


async def test_a_401_with_no_new_token_is_raised_and_counted(rotating):
    rotating.api.valid = set()
    before = auth_failures()
    with pytest.raises(ApiError) as err:
        await rotating.client.request("POST", "/api/v1/namespaces/default/pods/a/binding", body={})
    assert err.value.code == 401
    assert auth_failures() == before + 1
    assert rotating.api.seen == ["first"]  # not retried with the same token


PLUGIN = """
import json, pathlib, sys, datetime
count = pathlib.Path(sys.argv[1])
n = int(count.read_text()) + 1 if count.exists() else 1
count.write_text(str(n))
expiry = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=3600)
print(json.dumps({"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",
                  "status": {"token": f"exec-{n}", "expirationTimestamp": expiry.strftime("%Y-%m-%dT%H:%M:%SZ")}}))
"""


def _kubeconfig(tmp_path: Path, cluster: dict[str, Any], user: dict[str, Any]) -> Path:
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "main",
        "contexts": [{"name": "main", "context": {"cluster": "c", "user": "u"}}],
        "clusters": [{"name": "c", "cluster": cluster}],
        "users": [{"name": "u", "user": user}],
    }
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(doc))
    return path


async def _with_plugin(tmp_path: Path, url: str) -> ClusterConfig:
    """The config of a kubeconfig whose user is the exec plugin above (first token: exec-1)."""
    (tmp_path / "plugin.py").write_text(PLUGIN)
    exec_spec = {
        "apiVersion": "client.authentication.k8s.io/v1",
        "command": sys.executable,
        "args": [str(tmp_path / "plugin.py"), str(tmp_path / "count")],
    }
    return await ClusterConfig.load(str(_kubeconfig(tmp_path, {"server": url}, {"exec": exec_spec})))


async def test_an_exec_plugin_token_is_renewed_before_it_expires(served, tmp_path):
    api, url = served
    cfg = await _with_plugin(tmp_path, url)
    assert cfg.auth is not None and cfg.token == "exec-1"
    clock = Clock()
    cfg.auth.clock = clock
    cfg.auth._take("exec-1", cfg.auth.wall() + 3600)  # due by this test's clock
    api.valid = {"exec-1", "exec-2"}
    client = ApiClient(cfg)
    try:
        await client.request("GET", "/api/v1/nodes")
        clock.now += 3600 * 0.8 + 1  # four fifths of its life: still valid, renewed now
        await client.request("GET", "/api/v1/nodes")
        for _ in range(200):
            if cfg.auth.token == "exec-2":
                break
            await asyncio.sleep(0.02)
        api.valid = {"exec-2"}  # the old one expires
        before = auth_failures()
        await client.request("GET", "/api/v1/nodes")
        assert api.seen[-1] == "exec-2"
        assert auth_failures() == before
    finally:
        await client.close()


async def test_an_exec_plugin_is_run_again_after_a_401(served, tmp_path):
    api, url = served
    cfg = await _with_plugin(tmp_path, url)
    client = ApiClient(cfg)
    try:
        api.valid = {"exec-2"}  # exec-1 revoked
        await client.request("POST", "/api/v1/namespaces/default/pods/a/binding", body={})
        assert api.seen == ["exec-1", "exec-2"]
    finally:
        await client.close()


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A self-signed certificate for the name ``api.internal`` only (not 127.0.0.1)."""
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
            "-keyout", str(key), "-out", str(cert), "-subj", "/CN=api.internal",
            "-addext", "subjectAltName=DNS:api.internal",
        ],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return cert, key


@pytest.mark.parametrize("named", [True, False])
async def test_tls_server_name_is_the_name_the_certificate_is_checked_against(tmp_path, certificate, named):
    cert, key = certificate
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.load_cert_chain(cert, key)
    api = Api({"t"})
    runner, port = await _serve(api, server_ctx)
    cluster = {"server": f"https://127.0.0.1:{port}", "certificate-authority": str(cert)}
    if named:
        cluster["tls-server-name"] = "api.internal"
    client = ApiClient(await ClusterConfig.load(str(_kubeconfig(tmp_path, cluster, {"token": "t"}))))
    try:
        if named:
            await _every_way(client)
            assert api.bindings == 2
        else:  # the certificate does not name 127.0.0.1: both transports refuse it
            for call in (
                client.request("GET", "/api/v1/nodes"),
                client.request("POST", "/api/v1/namespaces/default/pods/a/binding", body={}),
            ):
                with pytest.raises(ApiError) as err:
                    await call
                assert err.value.code == 0 and "certificate" in str(err.value).lower()
            assert api.seen == []
    finally:
        await client.close()
        await runner.cleanup()


def test_an_exec_credential_without_a_token_is_a_clear_error():
    from caldera.cache.auth import CredentialError, ExecPlugin

    plugin = ExecPlugin("get-token", "client.authentication.k8s.io/v1")
    with pytest.raises(CredentialError, match=r"no status\.token"):
        plugin.parse(json.dumps({"apiVersion": plugin.api_version, "kind": "ExecCredential"}).encode())
    with pytest.raises(CredentialError, match="not JSON"):
        plugin.parse(b"\xff")
