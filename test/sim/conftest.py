"""The API conformance suite: each behaviour of a real kube-apiserver that caldera-sim claims, as a test.

By default the tests run against a fresh caldera-sim (with the CRDs of deploy/crds). With
``CALDERA_E2E_KUBECONFIG=/path/to/kubeconfig`` they run against that cluster instead, so that a user with a
real cluster can see the simulator and the server agree. Each test works in a namespace of its own (deleted
after); what needs an administrator (RBAC objects, cluster-scoped kinds) is skipped when the kubeconfig's user
may not do it, and what needs the CRDs is skipped when they are not installed.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import orjson
import pytest

from caldera.cache.client import ClusterConfig
from caldera.hack.sim import SimCluster

REAL_KUBECONFIG = os.environ.get("CALDERA_E2E_KUBECONFIG")


class Http:
    """Plain requests that answer (status code, decoded body) and never raise on a Kubernetes error."""

    def __init__(self, config: ClusterConfig, session: aiohttp.ClientSession) -> None:
        self.config = config
        self.session = session

    async def __call__(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        token: str | None = None,
        content_type: str = "application/json",
        params: dict[str, str] | None = None,
    ) -> tuple[int, Any]:
        headers = dict(self.config.headers)
        bearer = token if token is not None else self.config.token
        if bearer:
            headers["Authorization"] = f"Bearer {bearer}"
        if body is not None:
            headers["Content-Type"] = content_type
        async with self.session.request(
            method,
            self.config.host + path,
            data=orjson.dumps(body) if body is not None else None,
            headers=headers,
            params=params,
            ssl=self.config.ssl_context if self.config.ssl_context is not None else True,
        ) as resp:
            raw = await resp.read()
            try:
                return resp.status, orjson.loads(raw) if raw else None
            except orjson.JSONDecodeError:
                return resp.status, raw.decode(errors="replace")

    async def ok(self, method: str, path: str, body: Any = None, **kw: Any) -> Any:
        code, doc = await self(method, path, body, **kw)
        assert 200 <= code < 300, f"{method} {path}: {code} {doc}"
        return doc


class Cluster:
    def __init__(self, http: Http, sim: SimCluster | None, namespace: str) -> None:
        self.http = http
        self.sim = sim
        self.ns = namespace
        self.suffix = namespace.rsplit("-", 1)[-1]
        self.cleanup: list[str] = []  # paths of cluster-scoped objects to delete after the test

    def name(self, base: str) -> str:
        """A name unique to this run (cluster-scoped objects on a shared real cluster)."""
        return f"{base}-{self.suffix}"

    async def create(self, path: str, body: dict[str, Any], *, cluster_scoped: bool = False) -> Any:
        code, doc = await self.http("POST", path, body)
        if code == 403:
            pytest.skip(
                f"the kubeconfig's user may not create {path}: {doc.get('message') if isinstance(doc, dict) else doc}"
            )
        if code == 404 and "/apis/" in path:
            pytest.skip(f"{path} is not served here (CRD not installed?)")
        assert code == 201, f"POST {path}: {code} {doc}"
        if cluster_scoped:
            self.cleanup.append(f"{path}/{doc['metadata']['name']}")
        return doc


@pytest.fixture
async def cluster() -> AsyncIterator[Cluster]:
    namespace = f"caldera-conformance-{uuid.uuid4().hex[:6]}"
    sim: SimCluster | None = None
    if REAL_KUBECONFIG:
        config = await ClusterConfig.load(REAL_KUBECONFIG)
    else:
        sim = SimCluster(nodes=0, kubelet=False, controllers=False)
        await sim.start()
        config = await ClusterConfig.load(str(sim.kubeconfig_path))
    session = aiohttp.ClientSession()
    http = Http(config, session)
    try:
        await http.ok("POST", "/api/v1/namespaces", {"metadata": {"name": namespace}})
        # Pods need the namespace's default ServiceAccount (the ServiceAccount admission plugin).
        await http(
            "POST", f"/api/v1/namespaces/{namespace}/serviceaccounts", {"metadata": {"name": "default"}}
        )
        c = Cluster(http, sim, namespace)
        yield c
        for path in reversed(c.cleanup):
            await http("DELETE", path)
        await http("DELETE", f"/api/v1/namespaces/{namespace}")
    finally:
        await session.close()
        if sim is not None:
            await sim.stop()


def needs_sim(cluster: Cluster) -> SimCluster:
    if cluster.sim is None:
        pytest.skip("reads the simulator's own record: caldera-sim only")
    return cluster.sim
