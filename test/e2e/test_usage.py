"""The usage plugin end to end, with each metrics source caldera-sim serves (Prometheus, metrics.k8s.io,
custom.metrics.k8s.io, Elasticsearch): a node reported over its
cpu threshold is filtered, of the others the least loaded is chosen, and when the reported load
changes the next placement follows it.

The load is set through caldera-sim's ``/sim/node-usage``: these tests run against the simulator only."""

from __future__ import annotations

import time
from typing import Any

import pytest

from caldera.hack.sim import SimCluster

from .conftest import Api, eventually, needs_sim

pytestmark = pytest.mark.e2e


def conf(metrics: str) -> str:
    return f"""
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: predicates
  - name: proportion
  - name: usage
    arguments:
      thresholds: {{cpu: 80, mem: 80}}
metrics:
{metrics}
"""


async def set_load(api: Api, load: dict[str, Any]) -> None:
    await api.client.request("POST", "/sim/node-usage", body=load)


async def scenario(
    api: Api,
    sim: SimCluster,
    start_scheduler: Any,
    conf_file: Any,
    source: str,
    served_at: str | None = None,
    settings: dict[str, str] | None = None,
    all_hot: bool = True,
) -> None:
    """The conf's ``metrics:`` is ``type: source`` polled every 200ms, ``address`` the sim's URL and
    ``served_at`` when given, and the other ``settings``. ``all_hot``: last, every node is reported hot
    and a pod waits, saying why (for a source whose values the scheduler takes as they are:
    metrics-server's are averaged over the 10 minutes of samples the scheduler saw, so a node's average
    follows a change only slowly)."""
    needs_sim(sim)
    metrics = {"type": source, "interval": "200ms", **(settings or {})}
    if served_at is not None:
        metrics["address"] = sim.url + served_at
    _, path = conf_file
    path.write_text(conf("\n".join(f"  {key}: {value}" for key, value in metrics.items())))
    for name in ("hot", "warm", "cool"):
        await api.node(name, cpu="8", memory="32Gi")
    await set_load(
        api,
        {
            "hot": {"cpu": 95, "memory": 30},
            "warm": {"cpu": 50, "memory": 30},
            "cool": {"cpu": 10, "memory": 30},
        },
    )
    running = await start_scheduler()

    def polled(expect: dict[str, Any]) -> Any:
        """The scheduler's cache holds fresh cpu usage of each node named that passes its test."""

        async def check() -> bool:
            view = running.app.cache.usage_view(time.time())
            return view is not None and all(
                (u := view.fresh(n)) is not None and test(u.cpu) for n, test in expect.items()
            )

        return check

    await eventually(polled({"hot": lambda v: v == 95, "warm": lambda v: v == 50, "cool": lambda v: v == 10}))
    await api.gang("first", 1, cpu="1")
    placed = await eventually(lambda: _node_of(api, "first-0"))
    assert placed == "cool"

    # The cool node is reported hot now, the warm one cool: the next pod follows the new load.
    await set_load(api, {"cool": {"cpu": 100, "memory": 30}, "warm": {"cpu": 0, "memory": 30}})
    await eventually(polled({"cool": lambda v: v > 80}), timeout=20)
    await api.gang("second", 1, cpu="1")
    assert await eventually(lambda: _node_of(api, "second-0")) == "warm"

    if not all_hot:
        return
    # A pod no node takes for load says so.
    await set_load(api, {"warm": {"cpu": 85, "memory": 30}})
    await eventually(polled({"warm": lambda v: v == 85}))
    await api.gang("third", 1, cpu="1")

    async def explained() -> bool:
        pg = await api.read_podgroup("third")
        text = str(pg.get("status", {}).get("conditions", []))
        return "the CPU load of the node exceeds the upper limit." in text

    await eventually(explained)
    assert (await api.node_of()).get("third-0", "") == ""


async def _node_of(api: Api, pod: str) -> str:
    return (await api.node_of()).get(pod, "")


async def test_prometheus_load_filters_the_hot_node_and_picks_the_cool_one(
    api: Api, sim: SimCluster, start_scheduler: Any, conf_file: Any
) -> None:
    await scenario(api, sim, start_scheduler, conf_file, "prometheus", served_at="/prometheus")


async def test_metrics_server_load_filters_the_hot_node_and_picks_the_cool_one(
    api: Api, sim: SimCluster, start_scheduler: Any, conf_file: Any
) -> None:
    await scenario(api, sim, start_scheduler, conf_file, "metrics_server", all_hot=False)


async def test_prometheus_adaptor_load_filters_the_hot_node_and_picks_the_cool_one(
    api: Api, sim: SimCluster, start_scheduler: Any, conf_file: Any
) -> None:
    """Volcano's custom.metrics.k8s.io node metrics, through the API server as a prometheus-adapter
    serves them."""
    await scenario(api, sim, start_scheduler, conf_file, "prometheus_adaptor")


async def test_elasticsearch_load_filters_the_hot_node_and_picks_the_cool_one(
    api: Api, sim: SimCluster, start_scheduler: Any, conf_file: Any
) -> None:
    """Volcano's search of metricbeat documents, against the sim's Elasticsearch."""
    await scenario(
        api,
        sim,
        start_scheduler,
        conf_file,
        "elasticsearch",
        served_at="/elasticsearch",
        settings={"elasticsearch.index": "metricbeat-*"},
    )
