"""Fixtures: a fresh simulated cluster per test, and kubernetes-asyncio clients loaded from its kubeconfig."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from kubernetes_asyncio import client

from caldera.hack.sim import SimCluster
from caldera.hack.sim.testing import kube_client


@pytest.fixture
async def sim() -> AsyncIterator[SimCluster]:
    async with SimCluster(nodes=3, kubelet_delay=0.05, seed=1) as cluster:
        yield cluster


@pytest.fixture
async def api(sim: SimCluster) -> AsyncIterator[client.ApiClient]:
    async with await kube_client(sim) as api_client:
        yield api_client


@pytest.fixture
def core(api: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(api)


@pytest.fixture
def custom(api: client.ApiClient) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(api)


@pytest.fixture
def apps(api: client.ApiClient) -> client.AppsV1Api:
    return client.AppsV1Api(api)
