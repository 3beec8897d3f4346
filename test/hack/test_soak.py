"""The soak: its invariant checker catches each kind of violation (against a simulated cluster where the
test itself misbehaves like a broken scheduler would), and real soaks of caldera-scheduler with faults end
with zero violations, a report and figures."""

from __future__ import annotations

import asyncio
import contextlib
import re
import socket
import struct
import time
import zlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest

from caldera.hack.sim import SimCluster
from caldera.hack.soak import FAULT_KINDS, Options, run_soak
from caldera.hack.soak.checker import Checker, CheckerConfig
from caldera.hack.soak.faults import THROUGHOUT
from caldera.hack.soak.leadership import judge_stall
from caldera.hack.workload.client import Api, podgroups_path, pods_path
from caldera.hack.workload.generators import DRA_CLASS as GPU
from caldera.hack.workload.manifests import (
    claim_manifest,
    device_class_manifest,
    gang_manifests,
    node_manifest,
    pod_manifest,
    podgroup_manifest,
    resource_slice_manifest,
    sharing,
)


async def bind(api: Api, name: str, node: str, ns: str = "soak") -> None:
    status, raw = await api.request(
        "POST",
        f"{pods_path(ns)}/{name}/binding",
        {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": name},
            "target": {"kind": "Node", "name": node},
        },
    )
    assert status == 201, raw


async def test_checker_reports_what_a_broken_scheduler_would_do() -> None:
    async with SimCluster(nodes=0, kubelet=False) as sim, Api(sim.url, sim.token) as api:
        await api.create(
            "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "soak"}}
        )
        await api.create(
            "/api/v1/nodes", node_manifest("small", {"cpu": "2", "memory": "8Gi", "pods": "10"}, {})
        )
        await api.create(
            "/api/v1/nodes", node_manifest("big", {"cpu": "64", "memory": "256Gi", "pods": "110"}, {})
        )
        config = CheckerConfig(period=0.1, bind_allowance=0.2, podgroup_grace=0.3, fits_bound=0.5)
        checker = Checker(api, config, time.monotonic())
        asked: list[str] = []

        async def leader_explains(pod: str) -> str:  # the scheduler's account, as /debug/pods gives it
            asked.append(pod)
            return "cycle 3: Pending; 0/2 nodes are available"

        checker.explain = leader_explains
        stop = asyncio.Event()
        task = asyncio.create_task(checker.run(stop, interval=0.1))

        async def pod(name: str, cpu: str = "1", **kw: object) -> None:
            await api.create(pods_path("soak"), pod_manifest(name, "soak", requests={"cpu": cpu}, **kw))  # type: ignore[arg-type]

        # overcommit: 3 x 1 cpu on a 2-cpu node
        for i in range(3):
            await pod(f"over-{i}", workload="gang", group="fine")
            await bind(api, f"over-{i}", "small")
        # a gang of 3 left at 1 bound; and a whole gang, which is fine
        for g, n_bound in (("partial", 1), ("fine", 3)):
            await api.create(podgroups_path("soak"), podgroup_manifest(g, "soak", 3, workload="gang"))
            for i in range(3):
                await pod(f"{g}-{i}", "100m", workload="gang", group=g)
                if i < n_bound:
                    await bind(api, f"{g}-{i}", "big")
        # a pod of another scheduler, bound by "us"
        await pod("foreign", scheduler="other", workload="foreign")
        checker.foreign["soak/foreign"] = pod_manifest(
            "foreign", "soak", workload="foreign", scheduler="other"
        )
        await bind(api, "foreign", "big")
        # a pod whose PodGroup does not exist; a single pod that fits but is never bound
        await pod("orphan", "100m", workload="gang", group="ghost")
        await api.create(
            podgroups_path("soak"), podgroup_manifest("single", "soak", 1, workload="besteffort")
        )
        await pod("lonely", "100m", workload="besteffort", group="single")
        await asyncio.sleep(1.5)
        bound_seen = checker.bound_total
        # bound twice cannot be done through the API (409): feed the checker the events it would see
        a = {
            "metadata": {"name": "twice", "namespace": "soak", "uid": "u1"},
            "spec": {"schedulerName": "caldera", "nodeName": "big"},
        }
        b = {
            "metadata": {"name": "twice", "namespace": "soak", "uid": "u1"},
            "spec": {"schedulerName": "caldera", "nodeName": "small"},
        }
        checker._on_pod("soak/twice", None, a)
        checker._on_pod("soak/twice", a, b)
        stop.set()
        await task

    found = {(v.invariant, v.detail.split(":")[0]) for v in checker.violations}
    assert ("capacity", "small/cpu") in found
    assert ("gang", "soak/partial") in found and ("gang", "soak/fine") not in found
    assert ("foreign", "soak/foreign") in found
    assert ("podgroup", "soak/orphan") in found
    assert ("fits-bound", "soak/lonely") in found
    (lonely,) = [v for v in checker.violations if v.invariant == "fits-bound"]
    assert lonely.detail.endswith("; the leader says: cycle 3: Pending; 0/2 nodes are available")
    assert asked == ["soak/lonely"], "only a fitting pod left unbound is explained"
    assert ("bind-once", "soak/twice") in found
    assert not any(v.detail.startswith("big/") for v in checker.violations if v.invariant == "capacity")
    assert bound_seen == 3 + 1 + 3  # ours; the foreign pod is not counted


async def test_a_fitting_pod_held_by_its_queues_share_or_an_overloaded_cycle_is_looked_at_again() -> None:
    """The checker sees node room, not the queue's deserved share (proportion's water filling): a pod
    the leader says its queue holds is set apart when the leader's /debug/queues bears that out, and
    looked at again if it waits past the bound once more; a share the figures do not bear out stays
    a violation. A pod whose job the leader's cycles have not reached (their time budget ran out
    first) is set apart too, until it has waited BUDGET_WAIT fits-bound times in all."""
    from caldera.hack.soak.checker import BUDGET_WAIT
    from caldera.scheduler.debug import NOT_REACHED

    async with SimCluster(nodes=0, kubelet=False) as sim, Api(sim.url, sim.token) as api:
        await api.create(
            "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "soak"}}
        )
        await api.create(
            "/api/v1/nodes", node_manifest("big", {"cpu": "64", "memory": "256Gi", "pods": "110"}, {})
        )
        config = CheckerConfig(period=0.1, bind_allowance=0.2, podgroup_grace=0.3, fits_bound=0.3)
        checker = Checker(api, config, time.monotonic())
        asked: list[str] = []

        async def leader_explains(pod: str) -> str:
            asked.append(pod)
            name = pod.split("/")[1]
            if name == "late":
                return f"cycle 9: Pending; {NOT_REACHED}"
            return f"cycle 9: Pending; queue default is at its share for task {name}"

        async def queue_figures() -> dict[str, dict[str, object]]:
            # 8 cores deserved, 7.5 allocated: "held" (1 core) is held, "claimed" (100m) is not
            return {"default": {"name": "default", "allocated": {"cpu": 7.5}, "deserved": {"cpu": 8.0}}}

        checker.explain = leader_explains
        checker.queue_figures = queue_figures
        stop = asyncio.Event()
        task = asyncio.create_task(checker.run(stop, interval=0.1))
        for name, cpu in (("held", "1"), ("claimed", "100m"), ("late", "100m")):
            await api.create(
                podgroups_path("soak"), podgroup_manifest(name, "soak", 1, workload="besteffort")
            )
            await api.create(
                pods_path("soak"),
                pod_manifest(name, "soak", workload="besteffort", group=name, requests={"cpu": cpu}),
            )
        await asyncio.sleep(BUDGET_WAIT * 0.3 + 1.2)
        stop.set()
        await task

    flagged = sorted(v.detail.split(":")[0] for v in checker.violations if v.invariant == "fits-bound")
    assert flagged == ["soak/claimed", "soak/late"], "a share not borne out, or a wait past BUDGET_WAIT"
    assert checker.held_by_share and all(h.startswith("soak/held:") for h in checker.held_by_share)
    assert "cpu allocated 7.5 + 1 asked > deserved 8" in checker.held_by_share[0]
    assert asked.count("soak/held") >= 2, "held past the bound again, it is looked at again"
    assert asked.count("soak/claimed") == 1
    assert checker.held_by_budget and all(h.startswith("soak/late:") for h in checker.held_by_budget)
    (late,) = [v for v in checker.violations if v.detail.startswith("soak/late:")]
    assert NOT_REACHED in late.detail


async def test_a_fitting_pod_the_api_shows_bound_when_read_afresh_is_the_mirror_lagging() -> None:
    """A finding of the checker's mirror is read again from the API before it stands: a pod deleted,
    or bound within the bound (its PodScheduled condition says when), was a watch that had fallen
    behind, not a scheduler that left it waiting; one bound later than that stands."""
    async with SimCluster(nodes=0, kubelet=False) as sim, Api(sim.url, sim.token) as api:
        await api.create(
            "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "soak"}}
        )
        await api.create(
            "/api/v1/nodes", node_manifest("big", {"cpu": "64", "memory": "256Gi", "pods": "110"}, {})
        )
        for name in ("bound", "waiting", "late"):
            await api.create(pods_path("soak"), pod_manifest(name, "soak", workload="besteffort"))
        await bind(api, "bound", "big")
        await bind(api, "late", "big")
        checker = Checker(api, CheckerConfig(fits_bound=15.0), time.monotonic())
        # "late" was found fitting 30 s before its binding: bound, but past the bound
        checker.fits_since["soak/late"] = checker.now() - 30.0
        asked: list[str] = []

        async def leader_explains(pod: str) -> str:
            asked.append(pod)
            return "cycle 3: Pending; 0/1 nodes are available"

        checker.explain = leader_explains
        # what a mirror behind the API would find: both unbound past the bound
        for name in ("bound", "waiting", "deleted", "late"):
            checker.violate("fits-bound", f"soak/{name}", "fits a node but unbound for 16.0s")
        await checker.explain_new_violations()

    assert [v.detail.split(":")[0] for v in checker.violations] == ["soak/waiting", "soak/late"]
    assert checker.fits_mirror_lagged == 2
    (late,) = [v for v in checker.violations if v.detail.startswith("soak/late:")]
    bound_after = re.search(r"; bound ([0-9.]+)s after it was found fitting", late.detail)
    assert bound_after is not None and 28.5 <= float(bound_after.group(1)) <= 31.5  # 30 s, 1 s stamps
    assert asked == ["soak/waiting", "soak/late"]


async def test_a_share_the_leaders_figures_cannot_be_had_for_is_looked_at_again_and_one_not_borne_out_says_why() -> (
    None
):
    """The leader says each pod's queue is at its share. While its /debug/queues cannot be had (it
    is going away, or has run no cycle yet) that is neither borne out nor refuted: the findings are
    set apart and looked at again. Once the figures come, a share they bear out holds the pod; one
    they do not is a violation that says what the figures were."""
    async with SimCluster(nodes=0, kubelet=False) as sim, Api(sim.url, sim.token) as api:
        await api.create(
            "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "soak"}}
        )
        checker = Checker(api, CheckerConfig(fits_bound=15.0), time.monotonic())
        for name, cpu in (("held", "1"), ("claimed", "100m")):
            manifest = pod_manifest(name, "soak", workload="besteffort", requests={"cpu": cpu})
            await api.create(pods_path("soak"), manifest)
            checker.pods.objects[f"soak/{name}"] = manifest  # as the checker's mirror holds it

        async def leader_explains(pod: str) -> str:
            return f"cycle 9: Pending; queue default is at its share for task {pod.split('/')[1]}"

        answers: list[dict[str, dict[str, object]] | None] = [
            None,  # a replica that has just taken the lease: no cycle run yet
            {"default": {"name": "default", "allocated": {"cpu": 7.5}, "deserved": {"cpu": 8.0}}},
        ]

        async def queue_figures() -> dict[str, dict[str, object]] | None:
            return answers.pop(0)

        checker.explain = leader_explains
        checker.queue_figures = queue_figures
        for name in ("held", "claimed"):
            checker.violate("fits-bound", f"soak/{name}", "fits a node but unbound for 16.0s")
        await checker.explain_new_violations()
        assert checker.violations == [] and checker.share_unverified == 2
        # found again once they have waited past the bound once more
        for name in ("held", "claimed"):
            checker.violate("fits-bound", f"soak/{name}", "fits a node but unbound for 16.0s")
        await checker.explain_new_violations()

    (claimed,) = checker.violations
    assert claimed.detail.startswith("soak/claimed:")
    assert claimed.detail.endswith(
        "; not borne out by the leader's queue default: cpu allocated 7.5 + 0.1 asked, deserved 8"
    )
    assert [h.split(":")[0] for h in checker.held_by_share] == ["soak/held"]


def test_share_exceeded_compares_the_resources_the_pod_asks_for() -> None:
    from fractions import Fraction

    from caldera.hack.soak.checker import share_exceeded

    queue = {
        "name": "q",
        "allocated": {"cpu": 3.0, "memory": 2.0**30},
        "deserved": {"cpu": 4.0, "memory": 2.0**31},
    }
    assert share_exceeded({"cpu": Fraction(1), "pods": Fraction(1)}, queue) == ""  # 3 + 1 <= 4
    assert "cpu allocated 3 + 1.5 asked > deserved 4" in share_exceeded({"cpu": Fraction(3, 2)}, queue)
    assert "memory" in share_exceeded({"cpu": Fraction(0), "memory": Fraction(2**31)}, queue)
    # a resource its deserved share does not name is deserved 0; one the pod does not ask for is not looked at
    assert "nvidia.com/gpu" in share_exceeded({"nvidia.com/gpu": Fraction(1)}, queue)
    assert share_exceeded({}, {"name": "q", "allocated": {"cpu": 9.0}, "deserved": {"cpu": 1.0}}) == ""


async def test_checker_holds_native_gangs_to_their_min_count() -> None:
    """With the native gang API, Kubernetes' own PodGroups are gangs too: one left below its minCount
    is reported, a whole one is not, and a pod naming a native group that does not exist is."""
    async with SimCluster(nodes=0, kubelet=False, native_gang=True) as sim, Api(sim.url, sim.token) as api:
        await api.create(
            "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "soak"}}
        )
        await api.create(
            "/api/v1/nodes", node_manifest("big", {"cpu": "64", "memory": "256Gi", "pods": "110"}, {})
        )
        config = CheckerConfig(period=0.1, bind_allowance=0.2, podgroup_grace=0.3, native_gang=True)
        checker = Checker(api, config, time.monotonic())
        stop = asyncio.Event()
        task = asyncio.create_task(checker.run(stop, interval=0.1))
        for job, n_bound in (("partial", 1), ("whole", 3)):
            objs = gang_manifests(job, "soak", 3, workload="gang", native=True, requests={"cpu": "100m"})
            await api.create(podgroups_path("soak", native=True), objs[0])
            for i, p in enumerate(objs[1:]):
                await api.create(pods_path("soak"), p)
                if i < n_bound:
                    await bind(api, p["metadata"]["name"], "big")
        await api.create(
            pods_path("soak"),
            pod_manifest("stray", "soak", workload="gang", native_group="ghost", requests={"cpu": "100m"}),
        )
        await asyncio.sleep(1.5)
        stop.set()
        await task
    found = {(v.invariant, v.detail.split(":")[0]) for v in checker.violations}
    details = [v.detail for v in checker.violations if v.invariant == "gang"]
    assert any(d.startswith("soak/k8s:partial") for d in details)
    assert not any(d.startswith("soak/k8s:whole") for d in details)
    assert ("podgroup", "soak/stray") in found

    # the churn's memory judgment counts the PodGroups of both kinds, as the scheduler's cache does
    assert checker.native_groups is not None and len(checker.native_groups.objects) == 2
    assert checker.live_counts()["podgroups"] == len(checker.groups.objects) + 2


def check_report(summary_report: dict[str, str]) -> None:
    for name in ("throughput", "pending", "latency", "memory", "cpu"):
        data = Path(summary_report[name]).read_bytes()
        assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 500
    html = Path(summary_report["html"]).read_text()
    assert html.count("<svg") == 5 and "Violations" in html
    assert Path(summary_report["json"]).exists()


def test_short_soak_with_faults_has_no_violations(tmp_path: Path) -> None:
    """Half a minute of the default mix with DRA gangs (`--dra`), three faults: no invariant violated."""
    opts = Options(
        minutes=0.5,
        seed=2,
        faults=("drop-abort", "429-storm", "failover"),
        report_dir=str(tmp_path / "report"),
        storm_seconds=4.0,
        dra=True,
    )
    summary, text = run_soak(opts, str(tmp_path))
    print(text)
    assert [f["kind"] for f in summary.faults] == list(opts.faults)
    assert summary.violations == [], text
    assert summary.bound > 100 and summary.checks > 20
    assert summary.dra_pods_checked > 5, "DRA gangs were bound, each pod with its claims in place"
    assert any(m.startswith("caldera_binds_total") for m in summary.metrics_checked)
    check_report(summary.report)


def test_a_soak_that_fails_early_leaves_no_replica_or_simulator_running(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The workload plan fails after the replicas started (before the run's own clean-up is reached):
    the error comes out, and the replicas and the simulator are stopped, not left running."""
    from caldera.hack.soak import driver

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("no workload today")

    monkeypatch.setattr(driver, "make_generators", broken)
    soak = driver.Soak(Options(minutes=0.5, seed=3, faults=(), report_dir=str(tmp_path / "r")), tmp_path)
    with pytest.raises(RuntimeError, match="no workload today"):
        asyncio.run(soak.main())
    assert soak.supervisor is not None and soak.supervisor.procs, "the replicas had been started"
    assert all(not p.sched.alive for p in soak.supervisor.procs)
    assert soak.sim is not None and soak.sim.proc.poll() is not None


def test_short_soak_of_native_gangs_has_no_violations(tmp_path: Path) -> None:
    """Every gang as Kubernetes' own PodGroup: the simulator serves the API, the scheduler binds them
    whole, and the checker holds them to their minCount."""
    opts = Options(
        minutes=0.3,
        seed=3,
        mix="gang=1,mpi=0.3",
        faults=(),
        report_dir=str(tmp_path / "report"),
        nodes=8,
        replicas=1,
        native_gang=1.0,
    )
    summary, text = run_soak(opts, str(tmp_path))
    print(text)
    assert summary.violations == [], text
    assert summary.bound > 20


@pytest.mark.slow
def test_ci_soak_two_minutes_every_fault(tmp_path: Path) -> None:
    opts = Options(minutes=2.0, seed=1, faults=FAULT_KINDS, report_dir=str(tmp_path / "report"))
    summary, text = run_soak(opts, str(tmp_path))
    print(text)
    assert [f["kind"] for f in summary.faults] == [k for k in FAULT_KINDS if k not in THROUGHOUT]
    assert {"rotate-token", "watch-fault", "lease-stall"} <= {f["kind"] for f in summary.faults}
    assert summary.violations == [], text
    assert summary.churn["pods"] == opts.churn_pods and summary.churn["deleted"] == opts.churn_pods
    # node accounting was compared after each fault, every node at the quiet end
    assert [a["after"] for a in summary.accounting] == [f["kind"] for f in summary.faults]
    assert summary.accounting_end["equal"] == summary.accounting_end["compared"] > 0
    assert summary.bound > 1000
    assert summary.memory, "at least one replica lived long enough for its memory to be judged"
    check_report(summary.report)


def test_png_charts_are_well_formed() -> None:
    from caldera.hack.report import Chart, render_png

    data = render_png(
        Chart("t", [0, 1, 2, 3], {"a": [0.0, 5.0, float("nan"), 2.0]}, markers=[(1.5, "f")]), 320, 120
    )
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, chunks = 8, {}
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        (crc,) = struct.unpack(">I", data[pos + 8 + length : pos + 12 + length])
        assert crc == zlib.crc32(kind + body) & 0xFFFFFFFF
        chunks[kind] = body
        pos += 12 + length
    width, height = struct.unpack(">II", chunks[b"IHDR"][:8])
    pixels = zlib.decompress(chunks[b"IDAT"])
    assert (width, height) == (320, 120) and len(pixels) == height * (1 + width * 3)
    assert len(set(pixels)) > 3  # something was drawn on the white


RESOURCE = "/apis/resource.k8s.io/v1"


async def test_checker_reports_devices_handed_out_wrongly() -> None:
    """The DRA invariants, against a cluster where the test allocates claims as a broken scheduler would:
    one device given to two claims, a pod bound with its claim never allocated, a pod bound to n1 with a
    device of n2, a pod whose claim gives the driver a configuration its allocation does not carry. A pod
    bound with its claim allocated on its node and reserved for it is fine (with its configuration carried,
    too), and so are two claims on a device that allows multiple allocations."""
    async with SimCluster(nodes=0, kubelet=False) as sim, Api(sim.url, sim.token) as api:
        await api.create(
            "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "soak"}}
        )
        for node in ("n1", "n2", "n3"):
            await api.create(
                "/api/v1/nodes", node_manifest(node, {"cpu": "8", "memory": "32Gi", "pods": "110"}, {})
            )
            await api.create(f"{RESOURCE}/resourceslices", resource_slice_manifest(node, GPU, 2))
        shared = resource_slice_manifest("n1", "shared.example.com", 1)
        shared["spec"]["devices"][0]["allowMultipleAllocations"] = True
        await api.create(f"{RESOURCE}/resourceslices", shared)
        await api.create(f"{RESOURCE}/deviceclasses", device_class_manifest(GPU, GPU))
        config = CheckerConfig(period=0.1, fits_bound=60.0, podgroup_grace=60.0, dra=True, dra_grace=0.3)
        checker = Checker(api, config, time.monotonic())
        stop = asyncio.Event()
        task = asyncio.create_task(checker.run(stop, interval=0.1))

        async def pod_with_claim(
            name: str,
            node: str,
            device: tuple[str, str, str] | None,
            configured: bool = False,
            passed_on: bool = False,
        ) -> None:
            """A claim `<name>-gpu` and a pod using it, bound to `node`; the claim allocated `device`
            (driver, pool, device) and reserved for the pod, or left unallocated (None). `configured`:
            the claim gives the driver a configuration, which the allocation carries if `passed_on`."""
            claims = f"{RESOURCE}/namespaces/soak/resourceclaims"
            parameters = sharing("MPS") if configured else None
            manifest = claim_manifest(
                f"{name}-gpu", "soak", GPU, workload="dra", driver=GPU, parameters=parameters
            )
            await api.create(claims, manifest)
            body = pod_manifest(
                name,
                "soak",
                workload="dra",
                requests={"cpu": "100m"},
                resource_claims=[{"name": "gpu", "resourceClaimName": f"{name}-gpu"}],
            )
            status, raw = await api.request("POST", pods_path("soak"), body)
            assert status == 201, raw
            uid = orjson.loads(raw)["metadata"]["uid"]
            if device is not None:
                driver, pool, dev = device
                status, raw = await api.request("GET", f"{claims}/{name}-gpu")
                claim = orjson.loads(raw)
                devices: dict[str, Any] = {
                    "results": [{"request": "gpu", "driver": driver, "pool": pool, "device": dev}]
                }
                if passed_on:
                    opaque = {"driver": GPU, "parameters": parameters}
                    devices["config"] = [{"source": "FromClaim", "requests": ["gpu"], "opaque": opaque}]
                claim["status"] = {
                    "allocation": {"devices": devices},
                    "reservedFor": [{"resource": "pods", "name": name, "uid": uid}],
                }
                status, raw = await api.request("PUT", f"{claims}/{name}-gpu/status", claim)
                assert status == 200, raw
            await bind(api, name, node)

        await pod_with_claim("fine", "n1", (GPU, "n1", "gpu-0"))
        await pod_with_claim("twice-a", "n1", (GPU, "n1", "gpu-1"))
        await pod_with_claim("twice-b", "n1", (GPU, "n1", "gpu-1"))
        await pod_with_claim("bare", "n1", None)
        await pod_with_claim("far", "n1", (GPU, "n2", "gpu-0"))
        await pod_with_claim("share-a", "n1", ("shared.example.com", "n1", "gpu-0"))
        await pod_with_claim("share-b", "n1", ("shared.example.com", "n1", "gpu-0"))
        await pod_with_claim("configured", "n3", (GPU, "n3", "gpu-0"), configured=True, passed_on=True)
        await pod_with_claim("unconfigured", "n3", (GPU, "n3", "gpu-1"), configured=True)
        await asyncio.sleep(1.5)
        stop.set()
        await task

    found = {(v.invariant, v.detail.split(":")[0]) for v in checker.violations}
    assert ("dra-device", f"{GPU}/n1/gpu-1") in found
    assert ("dra-claim", "soak/bare") in found
    assert ("dra-node", "soak/far") in found
    assert ("dra-claim", "soak/unconfigured") in found
    flagged = {v.detail.split(":")[0] for v in checker.violations}
    assert not {"soak/fine", "soak/share-a", "soak/share-b", "soak/configured", f"{GPU}/n1/gpu-0"} & flagged
    assert not any(
        "shared.example.com" in v.detail for v in checker.violations if v.invariant == "dra-device"
    )
    assert len(found) == 4, found


def test_the_stall_judge_finds_writes_made_past_the_renew_deadline() -> None:
    """The Lease renewed at 10.0 (deadline 3 s); stalled from 10.2 until written again at 16.0. A bind
    at 12.9 passed its gate in time; a status write at 13.8 and a bind at 15.0 did not."""
    records = [
        {"t": 9.5, "m": "PUT", "p": "/leases/caldera", "lease": True},
        {"t": 10.0, "m": "PUT", "p": "/leases/caldera", "lease": True},
        {"t": 10.2, "stall": 4.0},
        {"t": 12.9, "m": "POST", "p": "/pods/a/binding", "lease": False},
        {"t": 13.8, "m": "PATCH", "p": "/pods/b/status", "lease": False},
        {"t": 15.0, "m": "POST", "p": "/pods/c/binding", "lease": False},
        {"t": 16.0, "m": "PUT", "p": "/leases/caldera", "lease": True},
        {"t": 16.5, "m": "POST", "p": "/pods/d/binding", "lease": False},
    ]
    verdict = judge_stall(records, 10.2, renew_deadline=3.0, until=14.2)
    assert verdict.renewed == 10.0 and verdict.resumed == 16.0
    assert [r["p"] for r in verdict.offending] == ["/pods/b/status", "/pods/c/binding"]
    assert verdict.stopped_after == 5.0


@contextlib.asynccontextmanager
async def _fake_leader(routes: dict[str, Any]) -> AsyncIterator[str]:
    """A replica's debug API as ``routes`` (path -> aiohttp handler) answer it; yields its base URL."""
    from aiohttp import web

    app = web.Application()
    for path, handler in routes.items():
        app.router.add_get(path, handler)
    runner = web.AppRunner(app)
    await runner.setup()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


async def test_node_accounting_names_the_pod_a_wrong_leader_counts_and_forgives_a_lagging_mirror() -> None:
    """The leader's view of three nodes against the API: on "wrong" it counts a pod the API has finished
    (a violation naming that pod, what the API holds of it now and what the leader's cache does, which
    tells a stale cache from a stale cycle); on "lagging" it agrees with the API while the checker's mirror has
    not yet seen a pod bound there (a fresh list settles it: no violation); "churned" was deleted: the
    leader's node list still showed it with a pod, its last cycle no longer does (404), and the API has
    nothing bound there (no violation)."""
    from aiohttp import web

    from caldera.hack.soak.accounting import check_accounting

    async with SimCluster(nodes=0, kubelet=False) as sim, Api(sim.url, sim.token) as api:
        await api.create(
            "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "soak"}}
        )
        for name in ("wrong", "lagging"):
            await api.create("/api/v1/nodes", node_manifest(name, {"cpu": "8", "memory": "32Gi"}, {}))
        await api.create(
            pods_path("soak"),
            pod_manifest("done", "soak", workload="gang", requests={"cpu": "1", "memory": "1Gi"}),
        )
        await bind(api, "done", "wrong")
        await api.patch(f"{pods_path('soak')}/done/status", {"status": {"phase": "Succeeded"}})
        checker = Checker(api, CheckerConfig(period=0.1), time.monotonic())
        await checker.pods.relist()
        # bound only after the mirror's list, which is never watched here: the mirror lags
        await api.create(
            pods_path("soak"),
            pod_manifest("late", "soak", workload="gang", requests={"cpu": "2", "memory": "2Gi"}),
        )
        await bind(api, "late", "lagging")

        pods = {
            "wrong": [
                {"namespace": "soak", "name": "done", "status": "Running", "cpu": 1.0, "memory": 2.0**30}
            ],
            "lagging": [
                {"namespace": "soak", "name": "late", "status": "Bound", "cpu": 2.0, "memory": 2.0**31}
            ],
            "churned": [
                {"namespace": "soak", "name": "evicted", "status": "Running", "cpu": 3.0, "memory": 2.0**30}
            ],
        }

        def node_doc(name: str) -> dict[str, object]:
            cpu = sum(p["cpu"] for p in pods[name])  # type: ignore[misc]
            memory = sum(p["memory"] for p in pods[name])  # type: ignore[misc]
            return {"name": name, "cpu": [cpu, 8.0], "memory": [memory, 32 * 2.0**30], "pods": pods[name]}

        async def nodes(_: web.Request) -> web.Response:
            return web.json_response({"cycle": 7, "groups": [{"nodes": [node_doc(n) for n in pods]}]})

        async def one(request: web.Request) -> web.Response:
            name = request.match_info["name"]
            if name == "churned":
                return web.json_response(
                    {"error": "node churned is not in the last cycle's view"}, status=404
                )
            return web.json_response({"cycle": 7, "node": node_doc(name)})

        async def cached_pod(request: web.Request) -> web.Response:
            # the leader's cache still holds "done" running: its watch missed the pod's end
            assert request.match_info["name"] == "done"
            return web.json_response({"status": "Running", "node": "wrong", "resourceVersion": "4"})

        routes = {
            "/debug/nodes": nodes,
            "/debug/nodes/{name}": one,
            "/debug/pods/{namespace}/{name}": cached_pod,
        }
        async with _fake_leader(routes) as base, aiohttp.ClientSession() as http:
            result = await check_accounting(checker, http, base, "test", timeout=2.0)

    (violation,) = checker.violations
    assert violation.invariant == "accounting" and violation.detail.startswith("after test: wrong:")
    assert "only the leader counts [soak/done (Running uid None cpu 1" in violation.detail
    assert "on wrong, phase Succeeded, deleting False" in violation.detail
    assert "the leader's cache: Running on wrong at resourceVersion 4" in violation.detail
    assert "the API's node: exists" in violation.detail
    assert result.mirror_lagged == 1 and "lagging" not in result.differ
    assert result.left_view == 1 and "churned" not in result.differ


async def test_node_accounting_waits_for_a_cycle_that_began_after_the_node_stood_still() -> None:
    """A cycle's view is of its snapshot, taken as the cycle began: a node that changed shortly
    before the leader's last cycle began is not compared yet (not a violation), and is once a cycle
    began long enough after its last change."""
    from aiohttp import web

    from caldera.hack.soak.accounting import STABLE, check_accounting

    async with SimCluster(nodes=0, kubelet=False) as sim, Api(sim.url, sim.token) as api:
        await api.create(
            "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "soak"}}
        )
        await api.create("/api/v1/nodes", node_manifest("n", {"cpu": "8", "memory": "32Gi"}, {}))
        checker = Checker(api, CheckerConfig(period=0.1), time.monotonic())
        await checker.pods.relist()
        began = {"at": 0.0}  # when the leader's last cycle began (wall clock)

        async def nodes(_: web.Request) -> web.Response:
            # the leader still counts a pod the API no longer has on "n"
            node = {"name": "n", "cpu": [1.0, 8.0], "memory": [2.0**30, 32 * 2.0**30], "pods": []}
            doc = {"cycle": 3, "cycle_started": began["at"], "groups": [{"nodes": [node]}]}
            return web.json_response(doc)

        async def one(_: web.Request) -> web.Response:
            return web.json_response({"cycle": 3, "node": {"cpu": [1.0], "memory": [2.0**30], "pods": []}})

        routes = {"/debug/nodes": nodes, "/debug/nodes/{name}": one}
        async with _fake_leader(routes) as base, aiohttp.ClientSession() as http:
            # the node's last change 2.5 s ago, the cycle shown began 1.5 s after it: too soon
            checker.node_changed["n"] = time.monotonic() - (STABLE + 0.5)
            began["at"] = time.time() - 1.0
            early = await check_accounting(checker, http, base, "early", timeout=2.0)
            assert checker.violations == [] and early.not_compared == 1
            # a cycle that began just now, long enough after the change, is held to it
            checker.node_changed["n"] = time.monotonic() - (STABLE + 0.5)
            began["at"] = time.time()
            await check_accounting(checker, http, base, "late", timeout=2.0)
    (violation,) = checker.violations
    assert violation.invariant == "accounting" and violation.detail.startswith("after late: n:")


async def test_node_accounting_compares_nothing_while_a_later_fault_is_under_way() -> None:
    """The checks run beside the faults that follow. A leader holding a pod the API has not bound
    (a bind it retries through the next fault's storm of 429s) is that fault's state: once a later
    fault begins, this check compares nothing more and raises nothing, and says why."""
    from aiohttp import web

    from caldera.hack.soak.accounting import check_accounting

    async with SimCluster(nodes=0, kubelet=False) as sim, Api(sim.url, sim.token) as api:
        await api.create("/api/v1/nodes", node_manifest("n", {"cpu": "8", "memory": "32Gi"}, {}))
        checker = Checker(api, CheckerConfig(period=0.1), time.monotonic())
        await checker.pods.relist()
        checker.node_changed["n"] = time.monotonic() - 60.0  # the API's side stood still long since

        async def nodes(_: web.Request) -> web.Response:
            node = {"name": "n", "cpu": [4.0, 8.0], "memory": [2.0**30, 32 * 2.0**30], "pods": []}
            return web.json_response({"cycle": 3, "groups": [{"nodes": [node]}]})

        async with _fake_leader({"/debug/nodes": nodes}) as base, aiohttp.ClientSession() as http:
            check = asyncio.create_task(check_accounting(checker, http, base, "drop-watches", timeout=2.0))
            await asyncio.sleep(0.3)  # a first look found the node different
            checker.add_fault("429-storm", checker.now(), checker.now() + 30.0)
            result = await check

    assert checker.violations == []
    assert result.interrupted_by == "429-storm" and result.differ == {}
    assert "not compared while the next fault, 429-storm, was under way" in result.describe()
