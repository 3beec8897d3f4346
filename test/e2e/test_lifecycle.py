"""The binary's life: leader failover, losing the lease, conf hot reload, SIGTERM while binding."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp
import msgspec

from caldera.config.conf import parse_conf
from caldera.framework.plugin import Action
from caldera.framework.session import Session
from caldera.hack.sim import SimCluster
from caldera.hack.sim.resources import PODS

from .conftest import DEPLOY_NS, SCHEDULER, Api, e2e_registry, eventually, needs_sim
from .test_faults import _create_pod

# The lease and the conf ConfigMap where deploy/ puts them (its Role grants them there, by name).
LEASES = f"/apis/coordination.k8s.io/v1/namespaces/{DEPLOY_NS}/leases"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def spawn(
    kubeconfig: str, conf: Path, *extra: str, port: int | None = None, log: Path | None = None
) -> asyncio.subprocess.Process:
    """The scheduler binary as a child, its output in ``log`` (beside ``conf`` unless given): a file, not
    a pipe, so a child that logs more than a pipe holds while nobody reads never blocks in a write."""
    if log is None:
        log = conf.parent / f"scheduler-{time.monotonic_ns()}.log"
    args = [
        "-c",
        "from caldera.scheduler.cli import main; import sys; sys.exit(main())",
        "--kubeconfig",
        kubeconfig,
        "--scheduler-name",
        SCHEDULER,
        "--scheduler-conf",
        str(conf),
        "--schedule-period",
        "100ms",
        "--listen-address",
        f"127.0.0.1:{port or free_port()}",
        *extra,
    ]
    with log.open("wb") as out:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            *args,
            cwd=str(Path(__file__).resolve().parents[2]),
            stdout=out,
            stderr=asyncio.subprocess.STDOUT,
        )
    proc.log = log  # type: ignore[attr-defined]
    return proc


def output(proc: asyncio.subprocess.Process, tail: int = 3000) -> str:
    """The last ``tail`` characters the child wrote."""
    return proc.log.read_text(errors="replace")[-tail:]  # type: ignore[attr-defined]


LEADER_FLAGS = (
    "--leader-elect",
    "--leader-elect-resource-namespace",
    DEPLOY_NS,
    "--leader-elect-lease-duration",
    "2s",
    "--leader-elect-renew-deadline",
    "1500ms",
    "--leader-elect-retry-period",
    "200ms",
)


async def _holder(api: Api) -> str:
    try:
        lease = await api.get(f"{LEASES}/caldera")
    except Exception:
        return ""
    return lease["spec"].get("holderIdentity") or ""


async def test_leader_failover_within_the_lease_duration(
    sim: SimCluster | None, api: Api, kubeconfig: str, conf_file
) -> None:
    needs_sim(sim)
    _, conf = conf_file
    await api.node("n1", cpu="64")
    procs = [await spawn(kubeconfig, conf, *LEADER_FLAGS) for _ in range(2)]
    try:
        holder = await eventually(lambda: _holder(api), timeout=15)
        leader = next(p for p in procs if holder.endswith(f"_{p.pid}"))
        standby = next(p for p in procs if p is not leader)
        await api.gang("before", 2)
        await eventually(lambda: _bound(api, "before-0", "before-1"), timeout=15)

        leader.kill()
        killed_at = time.monotonic()
        await leader.wait()
        await api.gang("after", 2)
        try:
            await eventually(lambda: _bound(api, "after-0", "after-1"), timeout=15)
        except AssertionError as e:
            raise AssertionError(f"the standby did not bind; its output:\n{output(standby)}") from e
        took = time.monotonic() - killed_at
        assert took < 2.0 + 2.5, f"the standby took over after {took:.1f}s"
        assert (await _holder(api)).endswith(f"_{standby.pid}")

        standby.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(standby.wait(), 20) == 0
        assert await _holder(api) == "", "a clean shutdown releases the lease"
    finally:
        for p in procs:
            if p.returncode is None:
                p.kill()
                await p.wait()


async def _leader(api: Api, start_scheduler) -> Any:
    """One replica, "replica-a", leading with a short lease."""
    await api.node("n1", cpu="64")
    return await start_scheduler(
        leader_elect=True,
        lease_namespace=DEPLOY_NS,
        lease_duration=2.0,
        renew_deadline=1.5,
        retry_period=0.2,
        identity="replica-a",
    )


async def _take_the_lease(api: Api) -> None:
    """Someone else takes the lease (as after a long pause of the leader's)."""
    lease = await api.get(f"{LEASES}/caldera")
    lease["spec"]["holderIdentity"] = "intruder"
    lease["spec"]["leaseDurationSeconds"] = 3600
    await api.client.request("PUT", f"{LEASES}/caldera", body=lease)


async def test_a_replica_that_loses_the_lease_stops_at_once(api: Api, start_scheduler) -> None:
    running = await _leader(api, start_scheduler)
    await eventually(lambda: _is(api, "replica-a"))
    await api.gang("one", 1)
    await eventually(lambda: _bound(api, "one-0"))
    await _take_the_lease(api)
    code = await asyncio.wait_for(running.task, 5)
    assert code == 1
    await api.gang("two", 1)
    await asyncio.sleep(0.5)
    assert (await api.node_of())["two-0"] == ""


async def test_a_replica_whose_stopping_hangs_after_losing_the_lease_exits_anyway(
    api: Api, start_scheduler, caplog
) -> None:
    """A step of stopping that never ends (here the evictor's) must not keep a replica that lost the
    lease running: after the grace it says what had not ended and exits 1, so that it is started
    again (seen in a soak: a replica stayed up for minutes after losing the lease, leading nothing)."""
    running = await _leader(api, start_scheduler)
    app = running.app
    exits: list[int] = []
    app.lost_lease_exit_after = 0.5
    app.hard_exit = exits.append  # instead of os._exit, which would end the test run
    release = asyncio.Event()

    async def evictor_stop_that_hangs() -> None:
        await release.wait()

    app.evictor.stop = evictor_stop_that_hangs  # type: ignore[method-assign]
    await eventually(lambda: _is(api, "replica-a"))
    await _take_the_lease(api)

    async def exited() -> bool:
        return exits == [1]

    await eventually(exited, timeout=10)
    assert not running.task.done()  # it was still stopping: the exit did not wait for it
    line = next(r.getMessage() for r in caplog.records if "still not stopped" in r.getMessage())
    assert "evictor_stop_that_hangs (test_lifecycle.py:" in line
    release.set()  # let the in-process app finish (a real process has exited by now)
    assert await asyncio.wait_for(running.task, 10) == 1


async def _is(api: Api, who: str) -> bool:
    return await _holder(api) == who


async def _bound(api: Api, *names: str) -> bool:
    nodes = await api.node_of()
    return all(nodes.get(n) for n in names)


class Noop(Action):
    name = "noop"

    def execute(self, ssn: Session) -> None:
        return None


async def test_conf_file_hot_reload_good_and_bad(api: Api, start_scheduler, conf_file) -> None:
    registry, path = conf_file
    registry = registry.copy()
    registry.register_action(Noop)
    good = path.read_text()
    path.write_text('actions: "noop"\ntiers: []\n')
    await api.node("n1", cpu="64")
    running = await start_scheduler(registry=registry)
    app = running.app
    await api.gang("job", 2)
    await asyncio.sleep(0.5)
    assert not any((await api.node_of()).values()), "a noop conf binds nothing"

    path.write_text('actions: "allocate"\ntiers:\n- plugins:\n  - name: no-such-plugin\n')
    await eventually(lambda: _event(api, "ConfRejected"))
    rejected = await _event(api, "ConfRejected")
    assert "no-such-plugin" in rejected["message"]
    assert app.conf.conf.actions == ["noop"], "the last good conf keeps running"
    assert app.readiness()[0]

    path.write_text(good)
    await eventually(lambda: _bound(api, "job-0", "job-1"), timeout=10)
    assert app.conf.conf.actions == parse_conf(good, registry).actions
    assert await eventually(lambda: _event(api, "ConfReloaded"))


async def test_conf_from_a_configmap_hot_reload(api: Api, start_scheduler, conf_file) -> None:
    _, path = conf_file
    good = path.read_text()
    cm_path = f"/api/v1/namespaces/{DEPLOY_NS}/configmaps"
    await api.create(cm_path, {"metadata": {"name": "caldera-scheduler-conf"}, "data": {"conf": good}})
    await api.node("n1", cpu="64")
    running = await start_scheduler(scheduler_conf=f"configmap:{DEPLOY_NS}/caldera-scheduler-conf:conf")
    await api.gang("a", 1)
    await eventually(lambda: _bound(api, "a-0"))
    cm = await api.get(f"{cm_path}/caldera-scheduler-conf")
    cm["data"]["conf"] = "actions: nonsense-action\n"
    await api.client.request("PUT", f"{cm_path}/caldera-scheduler-conf", body=cm)
    event = await eventually(lambda: _event(api, "ConfRejected", DEPLOY_NS))
    assert event["involvedObject"]["kind"] == "ConfigMap" and "nonsense-action" in event["message"]
    await api.gang("b", 1)
    await eventually(lambda: _bound(api, "b-0"))
    assert running.app.conf.rejected == 1


async def _event(api: Api, reason: str, namespace: str | None = None) -> dict:
    events = (
        await api.events() if namespace is None else await api.items(f"/api/v1/namespaces/{namespace}/events")
    )
    for e in events:
        if e["reason"] == reason:
            return e
    return {}


async def test_sigterm_during_binding_finishes_in_flight_binds_and_exits_0(
    sim: SimCluster | None, api: Api, kubeconfig: str, conf_file
) -> None:
    sim = needs_sim(sim)
    _, conf = conf_file
    await api.node("n1", cpu="64")
    port = free_port()
    proc = await spawn(kubeconfig, conf, port=port)
    try:
        async with aiohttp.ClientSession() as http:

            async def ready() -> bool:
                async with http.get(f"http://127.0.0.1:{port}/readyz") as resp:
                    return resp.status == 200

            await eventually(lambda: _quiet(ready), timeout=15)
            sim.set_faults(latency=0.8)  # every request now takes a while: binds stay in flight
            for i in range(12):
                _create_pod(sim, f"t{i}", cpu="100m")

            async def binding() -> bool:
                async with http.get(f"http://127.0.0.1:{port}/debug/state") as resp:
                    state = msgspec.json.decode(await resp.read())
                    return state["binds_issued"] > state["bound"]

            await eventually(lambda: _quiet(binding), timeout=15, interval=0.02)
            proc.send_signal(signal.SIGTERM)
            code = await asyncio.wait_for(proc.wait(), 30)
        assert code == 0, output(proc)
        assert "in-flight binds finished" in output(proc, tail=1 << 20)
        sim.set_faults(latency=0.0)
        pods = sim.store.objects(PODS, "default")
        bound = [p for p in pods if p["spec"].get("nodeName")]
        assert bound, "binds in flight at SIGTERM were finished"
        await asyncio.sleep(0.5)
        assert len([p for p in sim.store.objects(PODS, "default") if p["spec"].get("nodeName")]) == len(bound)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def _quiet(check) -> bool:
    try:
        return bool(await check())
    except (aiohttp.ClientError, OSError):
        return False


def test_version_and_a_bad_conf_fail_fast(tmp_path: Path) -> None:
    import subprocess

    root = str(Path(__file__).resolve().parents[2])
    cmd = [sys.executable, "-c", "from caldera.scheduler.cli import main; import sys; sys.exit(main())"]
    out = subprocess.run([*cmd, "--version"], capture_output=True, text=True, cwd=root, timeout=30)
    assert out.returncode == 0 and out.stdout.startswith("caldera-scheduler ")
    bad = tmp_path / "bad.conf"
    bad.write_text('actions: "allocate"\ntiers:\n- plugins:\n  - name: warp-drive\n')
    env = {**os.environ, "KUBECONFIG": str(tmp_path / "none")}
    out = subprocess.run(
        [*cmd, "--scheduler-conf", str(bad)], capture_output=True, text=True, cwd=root, env=env, timeout=30
    )
    assert out.returncode == 2
    assert "warp-drive" in out.stderr


_ = e2e_registry
