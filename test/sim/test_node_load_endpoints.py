"""caldera-sim's custom metrics API and Elasticsearch endpoint (hack/sim/usage.py) over HTTP: what a
prometheus-adapter and an Elasticsearch would answer where the scheduler's sources read, and the errors
they would give. Simulator only: a real cluster has neither with these values."""

from __future__ import annotations

from typing import Any

import aiohttp

from .conftest import Cluster, needs_sim

CUSTOM = "/apis/custom.metrics.k8s.io"


async def es(cluster: Cluster, path: str, body: Any = None) -> tuple[int, Any, str | None]:
    sim = needs_sim(cluster)
    async with aiohttp.ClientSession() as session:
        async with session.post(f"{sim.url}/elasticsearch{path}", json=body) as resp:
            return resp.status, await resp.json(), resp.headers.get("X-Elastic-Product")


def search(node: str, field: str = "host.hostname") -> dict[str, Any]:
    must = [{"range": {"@timestamp": {"gte": "now-10m", "lt": "now"}}}, {"term": {field: node}}]
    aggs = {
        "cpu": {"avg": {"field": "host.cpu.usage"}},
        "mem": {"avg": {"field": "system.memory.actual.used.pct"}},
    }
    return {"size": 0, "query": {"bool": {"must": must}}, "aggs": aggs}


async def test_custom_metrics_are_discovered_and_served_for_all_nodes_or_one(cluster: Cluster) -> None:
    sim = needs_sim(cluster)
    await cluster.create("/api/v1/nodes", {"metadata": {"name": "n1"}}, cluster_scoped=True)
    await cluster.create("/api/v1/nodes", {"metadata": {"name": "n2"}}, cluster_scoped=True)
    sim.server.node_load.set("n1", 95, 40)
    groups = await cluster.http.ok("GET", "/apis")
    (entry,) = [g for g in groups["groups"] if g["name"] == "custom.metrics.k8s.io"]
    assert entry["preferredVersion"]["version"] == "v1beta2"
    listed = await cluster.http.ok("GET", f"{CUSTOM}/v1beta2")
    assert {r["name"] for r in listed["resources"]} == {
        "nodes/node_cpu_usage_avg",
        "nodes/node_memory_usage_avg",
    }

    cpu = await cluster.http.ok("GET", f"{CUSTOM}/v1beta2/nodes/*/node_cpu_usage_avg")
    assert [(i["describedObject"]["name"], i["value"], i["metric"]["name"]) for i in cpu["items"]] == [
        ("n1", "950m", "node_cpu_usage_avg")
    ]
    memory = await cluster.http.ok("GET", f"{CUSTOM}/v1beta1/nodes/n1/node_memory_usage_avg")
    assert [(i["value"], i["metricName"]) for i in memory["items"]] == [("400m", "node_memory_usage_avg")]
    # a node without a value, and a metric the adapter has no rule for, are not found
    for path in ("nodes/n2/node_cpu_usage_avg", "nodes/*/node_gpu_usage_avg"):
        code, status = await cluster.http("GET", f"{CUSTOM}/v1beta2/{path}")
        assert code == 404 and "could not find the metric" in status["message"], (path, status)
    code, _ = await cluster.http(
        "GET", f"{CUSTOM}/v1beta2/nodes/*/node_cpu_usage_avg", params={"labelSelector": "zone=a"}
    )
    assert code == 400


async def test_elasticsearch_averages_the_nodes_metricbeat_document_in_fractions(cluster: Cluster) -> None:
    sim = needs_sim(cluster)
    sim.server.node_load.set("n1", 35, 45)
    code, answer, product = await es(cluster, "/metricbeat-*/_search", search("n1"))
    assert (code, product) == (200, "Elasticsearch")
    assert answer["aggregations"] == {"cpu": {"value": 0.35}, "mem": {"value": 0.45}}
    assert answer["hits"]["total"]["value"] == 1
    # metricbeat documents carry host.name too; no document of another node or under another field
    assert (await es(cluster, "/metricbeat-*/_search", search("n1", "host.name")))[1]["aggregations"][
        "cpu"
    ] == {"value": 0.35}
    for body in (search("n2"), search("n1", "agent.hostname")):
        code, answer, _ = await es(cluster, "/metricbeat-*/_search", body)
        assert code == 200 and answer["aggregations"] == {"cpu": {"value": None}, "mem": {"value": None}}
    # an index pattern matching nothing finds nothing; a concrete index it does not hold is an error
    assert (await es(cluster, "/filebeat-*/_search", search("n1")))[1]["hits"]["total"]["value"] == 0
    code, answer, _ = await es(cluster, "/metrics/_search", search("n1"))
    assert code == 404 and answer["error"]["type"] == "index_not_found_exception"
    code, answer, _ = await es(cluster, "/metricbeat-*/_search", {"query": {"match_all": {}}})
    assert code == 400 and answer["error"]["type"] == "parsing_exception"
