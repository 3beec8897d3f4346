"""The `caldera-sim` command line: serve as a subprocess, cluster files, the benchmark, the CRD manifests."""

from __future__ import annotations

import asyncio
import os
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from kubernetes_asyncio import client, config

from caldera.hack.cli import build_parser
from caldera.hack.sim import SimCluster
from caldera.hack.sim.nodes import VGPU_REGISTER_ANNOTATION
from caldera.hack.sim.resources import BY_GROUP_VERSION

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def test_subcommands_are_registered() -> None:
    parser = build_parser()
    args = parser.parse_args(
        ["serve", "--kubeconfig-out", "/tmp/x", "--listen", "127.0.0.1:0", "--nodes", "3"]
    )
    assert args.command == "serve" and args.listen == ("127.0.0.1", 0) and args.nodes == 3
    assert parser.parse_args(["bench-sim", "--pods", "10"]).pods == 10


def test_serve_flags_build_the_cluster() -> None:
    from caldera.hack.sim.cli import cluster_from_args

    args = build_parser().parse_args(
        [
            "serve",
            "--kubeconfig-out",
            "/tmp/x",
            "--nodes",
            "2",
            "--node-label",
            "a=1,b=2",
            "--node-label",
            "c=3",
            "--fault-429",
            "0.1",
            "--fault-500",
            "0.2",
            "--fault-latency",
            "0.01",
            "--fault-drop-watches",
            "5",
            "--fault-drop-abort",
            "--fault-compact",
            "7",
            "--kubelet-delay",
            "0.3",
        ]
    )
    sim = cluster_from_args(args)
    assert (sim.faults.error_429_rate, sim.faults.error_500_rate, sim.faults.latency) == (0.1, 0.2, 0.01)
    assert (sim.faults.drop_watches_every, sim.faults.drop_watches_abort, sim.faults.compact_every) == (
        5,
        True,
        7,
    )
    assert sim.kubelet is not None and sim.kubelet.start_delay == 0.3
    (template,) = sim.spec.nodes
    assert template.count == 2 and template.labels == {"a": "1", "b": "2", "c": "3"}


async def test_serve_subprocess_writes_kubeconfig_once_serving(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "sub" / "kubeconfig"
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "caldera.hack.cli",
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--kubeconfig-out",
        str(kubeconfig),
        "--nodes",
        "2",
        "--node-cpu",
        "8",
        "--node-label",
        "zone=a,tier=gpu",
        cwd=ROOT,
        env=ENV,
        stdout=subprocess.PIPE,
    )
    try:
        async with asyncio.timeout(20):
            while not kubeconfig.exists():
                await asyncio.sleep(0.02)
        assert stat.S_IMODE(kubeconfig.stat().st_mode) == 0o600
        # The file appears only once the server answers: the first request must succeed.
        configuration = client.Configuration()
        await config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)
        async with client.ApiClient(configuration) as api:
            nodes = await client.CoreV1Api(api).list_node(label_selector="zone=a,tier=gpu")
        assert [n.metadata.name for n in nodes.items] == ["node-0", "node-1"]
        assert nodes.items[0].status.allocatable["cpu"] == "8"
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
        out, _ = await asyncio.wait_for(proc.communicate(), 10)
    assert proc.returncode == 0
    assert b"serving http://127.0.0.1:" in out


def test_serve_refuses_non_loopback(tmp_path: Path) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "caldera.hack.cli",
            "serve",
            "--listen",
            "0.0.0.0:0",
            "--kubeconfig-out",
            str(tmp_path / "k"),
        ],
        cwd=ROOT,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=20,
    )
    assert result.returncode == 2
    assert "loopback" in result.stderr
    assert not (tmp_path / "k").exists()


async def test_cluster_file_templates_and_seed_objects(tmp_path: Path) -> None:
    cluster_file = tmp_path / "cluster.yaml"
    cluster_file.write_text(
        yaml.safe_dump(
            {
                "nodes": [
                    {"name": "cpu", "count": 3, "capacity": {"cpu": "16", "memory": "64Gi", "pods": 110}},
                    {
                        "name": "gpu",
                        "count": 2,
                        "capacity": {"cpu": "64", "memory": "512Gi", "pods": 110, "nvidia.com/gpu": 8},
                        "labels": {"accelerator": "a100"},
                        "taints": [{"key": "gpu", "value": "true", "effect": "NoSchedule"}],
                    },
                    {"name": "vgpu", "count": 1, "vgpu": {"cards": 2, "split": 10, "memory": 32768}},
                    {"name": "sick", "count": 1, "ready": False, "unschedulable": True},
                ],
                "objects": [
                    {
                        "apiVersion": "scheduling.volcano.sh/v1beta1",
                        "kind": "Queue",
                        "metadata": {"name": "default"},
                        "spec": {"weight": 1},
                    },
                    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}},
                ],
            }
        )
    )
    async with SimCluster(cluster_file=cluster_file, kubelet=False) as sim:
        from caldera.hack.sim.resources import NODES, resource

        nodes = {n["metadata"]["name"]: n for n in sim.store.objects(NODES)}
        assert sorted(nodes) == ["cpu-0", "cpu-1", "cpu-2", "gpu-0", "gpu-1", "sick-0", "vgpu-0"]
        gpu = nodes["gpu-0"]
        assert gpu["status"]["allocatable"]["nvidia.com/gpu"] == "8"
        assert gpu["spec"]["taints"] == [{"key": "gpu", "value": "true", "effect": "NoSchedule"}]
        assert gpu["metadata"]["labels"]["accelerator"] == "a100"
        assert "taints" not in nodes["cpu-0"]["spec"]
        vgpu = nodes["vgpu-0"]
        assert vgpu["status"]["allocatable"]["volcano.sh/vgpu-number"] == "20"
        assert vgpu["status"]["allocatable"]["volcano.sh/vgpu-memory"] == "65536"
        assert len(vgpu["metadata"]["annotations"][VGPU_REGISTER_ANNOTATION].split(":")) == 2
        sick = nodes["sick-0"]
        assert sick["spec"]["unschedulable"] is True
        assert next(c for c in sick["status"]["conditions"] if c["type"] == "Ready")["status"] == "False"
        assert sim.store.get_obj(resource("queues", "scheduling.volcano.sh"), "", "default") is not None
        assert sim.store.get_obj(resource("namespaces"), "", "team-a") is not None


def test_crd_manifests_match_what_the_simulator_serves() -> None:
    # the CRDs, not the kustomization.yaml that lists them for the standalone overlay
    manifests = sorted(p for p in (ROOT / "deploy" / "crds").glob("*.yaml") if p.name != "kustomization.yaml")
    assert [p.name for p in manifests] == [
        "nodeinfo.volcano.sh_numatopologies.yaml",
        "scheduling.volcano.sh_podgroups.yaml",
        "scheduling.volcano.sh_queues.yaml",
        "topology.volcano.sh_hypernodes.yaml",
    ]
    for path in manifests:
        crd = yaml.safe_load(path.read_text())
        assert crd["kind"] == "CustomResourceDefinition"
        spec = crd["spec"]
        assert crd["metadata"]["name"] == f"{spec['names']['plural']}.{spec['group']}"
        (version,) = spec["versions"]
        served = BY_GROUP_VERSION[(spec["group"], version["name"])][spec["names"]["plural"]]
        assert served.kind == spec["names"]["kind"]
        assert served.namespaced == (spec["scope"] == "Namespaced")
        assert list(served.short_names) == spec["names"]["shortNames"]
        assert served.has_status == ("status" in (version.get("subresources") or {}))
        assert served.custom
        schema = version["schema"]["openAPIV3Schema"]["properties"]
        assert {"spec", "metadata"} <= set(schema)  # (a Numatopology has no status)


def test_bench_sim_runs_and_reports(tmp_path: Path) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "caldera.hack.cli",
            "bench-sim",
            "--pods",
            "300",
            "--nodes",
            "4",
            "--watchers",
            "2",
            "--concurrency",
            "16",
            "--kubelet-delay",
            "0.05",
        ],
        cwd=ROOT,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "bindings/s (0 errors)" in result.stdout
    assert "watch event latency" in result.stdout and "600 deliveries" in result.stdout
    assert "pods Running afterwards: 300" in result.stdout


async def test_example_cluster_file_loads() -> None:
    async with SimCluster(
        cluster_file=ROOT / "hack" / "sim" / "clusters" / "mixed.yaml", kubelet=False
    ) as sim:
        assert len(sim.objects("nodes")) == 22
        assert sim.get("queues", "default", "", "scheduling.volcano.sh") is not None
        created = sim.create(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "p"},
                "spec": {"containers": [{"name": "c", "image": "x"}], "priorityClassName": "high"},
            }
        )
        assert created["spec"]["priority"] == 1000
        assert sim.get("pods", "p")["metadata"]["uid"] == created["metadata"]["uid"]


async def test_timed_full_collections_are_restored_on_stop() -> None:
    import gc

    before = gc.get_threshold()
    async with SimCluster(kubelet=False, gc_full_interval=0.05):
        assert gc.get_threshold()[2] > 1_000_000
        await asyncio.sleep(0.1)
    assert gc.get_threshold() == before


async def test_a_port_in_use_fails_cleanly() -> None:
    async with SimCluster(kubelet=False) as first:
        with pytest.raises(OSError):
            async with SimCluster(kubelet=False, port=first.port):
                pass
