"""`caldera-sim bench http` compares like with like: both arms bind the pods the same way on the
simulator and see its refusals as the same errors; and the command prints both arms' figures."""

from __future__ import annotations

import pytest

from caldera.cache.client import ApiClient, ApiError, ClusterConfig
from caldera.hack import bench_http
from caldera.hack.cli import main
from caldera.hack.sim import SimCluster
from caldera.hack.workload.client import Api, pods_path


@pytest.mark.parametrize("arm", bench_http.ARMS)
async def test_each_arm_binds_the_pods_and_reads_a_refusal_as_the_clients_error(arm: str) -> None:
    async with SimCluster(nodes=1, kubelet=False, controllers=False) as sim, Api(sim.url, sim.token) as api:
        await api.create(
            "/api/v1/namespaces",
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": bench_http.NAMESPACE}},
        )
        binds = await bench_http.create_pods(api, "p", 6)
        client = ApiClient(ClusterConfig(host=sim.url, token=sim.token), max_connections=2)
        try:
            write = bench_http.WRITERS[arm](client)
            assert await bench_http.bind_all(write, binds, concurrency=2) == 0
            pods, _ = await api.list(pods_path(bench_http.NAMESPACE))
            assert {p["metadata"]["name"]: p["spec"].get("nodeName") for p in pods} == {
                f"p-{i:06d}": bench_http.NODE for i in range(6)
            }
            with pytest.raises(ApiError) as refused:  # bound already
                await write(*binds[0])
            assert refused.value.code == 409 and refused.value.reason == "Conflict"
            assert "already assigned" in refused.value.message
            assert await bench_http.bind_all(write, binds[1:3], concurrency=2) == 2
        finally:
            await client.close()


def test_the_command_prints_each_arm_per_repeat_and_a_summary(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "http", "--binds", "40", "--concurrency", "4", "--repeat", "2"]) == 0
    out = capsys.readouterr().out
    for repeat in (1, 2):
        for arm in bench_http.ARMS:
            assert f"repeat {repeat}  {arm:<8}     40 binds" in out
    assert "the pool saves" in out and "load average before" in out and "load average after" in out
