"""Helpers for tests and tools that drive a SimCluster with kubernetes-asyncio."""

from __future__ import annotations

from typing import Any

from kubernetes_asyncio import client, config

from .cluster import SimCluster


async def kube_client(cluster: SimCluster) -> client.ApiClient:
    """A kubernetes-asyncio ApiClient configured from the cluster's kubeconfig, as a real user would."""
    configuration = client.Configuration()
    await config.load_kube_config(
        config_file=str(cluster.kubeconfig_path), client_configuration=configuration
    )
    return client.ApiClient(configuration=configuration)


def pod_manifest(
    name: str,
    *,
    namespace: str | None = None,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    scheduler_name: str | None = None,
    node_name: str | None = None,
    requests: dict[str, str] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    if labels:
        meta["labels"] = labels
    if annotations:
        meta["annotations"] = annotations
    container: dict[str, Any] = {"name": "main", "image": "busybox"}
    if requests:
        container["resources"] = {"requests": requests}
    body_spec: dict[str, Any] = {"containers": [container], **spec}
    if scheduler_name:
        body_spec["schedulerName"] = scheduler_name
    if node_name:
        body_spec["nodeName"] = node_name
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": body_spec}
