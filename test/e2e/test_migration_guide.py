"""docs/migrating-from-volcano.md, followed against caldera-sim: its conf example is refused and then
accepted as it says, its manifests are created in the order it gives them, caldera-scheduler runs
with the command line it shows, and the workload it moves is scheduled by Caldera while the pods it
leaves with Volcano (and the one switched back) are never touched.

Its kubectl lines are not run: the kubectl seen on this machine (v1.32.4) sends no Authorization header
to caldera-sim's plain-HTTP address (its -v=9 request log shows none), so the simulator answers 401.
What they apply is checked instead: the overlay they name renders and validates
(test/scheduler/test_deploy.py), and the paths they name exist."""

from __future__ import annotations

import asyncio
import os
import re
import shlex
import signal
import socket
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from caldera.config.conf import ConfError, parse_conf
from caldera.hack.sim import SimCluster
from caldera.scheduler.registry import builtin_registry

from .conftest import Api, eventually, needs_sim

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "migrating-from-volcano.md"
BINARY = Path(sys.executable).with_name("caldera-scheduler")
ENTRY = "from caldera.scheduler.cli import main; raise SystemExit(main())"

pytestmark = pytest.mark.e2e


def blocks(language: str) -> list[str]:
    """The guide's fenced blocks of one language, in order, de-indented."""
    text = GUIDE.read_text()
    found = re.findall(r"^([ \t]*)```" + language + r"\n(.*?)^\1```", text, flags=re.M | re.S)
    out = []
    for indent, body in found:
        lines = [line[len(indent) :] if line.startswith(indent) else line for line in body.splitlines()]
        out.append("\n".join(lines) + "\n")
    return out


def manifests() -> list[dict[str, Any]]:
    return [d for b in blocks("yaml") for d in yaml.safe_load_all(b) if d and "apiVersion" in d]


def commands(program: str) -> list[list[str]]:
    return [
        shlex.split(line)
        for b in blocks("sh")
        for line in b.splitlines()
        if line.strip().startswith(program + " ")
    ]


def executable(args: list[str]) -> list[str]:
    """``caldera-scheduler ARGS`` as installed next to this Python, or through its entry point."""
    assert args[0] == "caldera-scheduler"
    if BINARY.exists():
        return [str(BINARY), *args[1:]]
    return [sys.executable, "-c", ENTRY, *args[1:]]


def test_the_conf_example_is_refused_for_the_option_caldera_lacks_and_accepted_without_it() -> None:
    (conf,) = [b for b in blocks("yaml") if b.startswith("actions:")]
    registry = builtin_registry()
    refusal = (
        "argument 'enableTopologyAwarePreemption' of action 'preempt' is not supported by Caldera:"
        " topology-aware preemption is not implemented"
    )
    with pytest.raises(ConfError, match=re.escape(refusal)):
        parse_conf(conf, registry)
    parsed = parse_conf(conf[: conf.index("configurations:")], registry)
    assert [p.name for p in parsed.tiers[1].plugins][-1] == "binpack"
    # the guide quotes the refusal as Caldera words it (its text folded over two lines)
    assert refusal in " ".join(GUIDE.read_text().split())


def test_the_kubectl_lines_name_what_the_repository_has() -> None:
    kubectl = commands("kubectl")
    assert kubectl, "the guide shows kubectl commands"
    for args in kubectl:
        if "-k" in args:
            assert (ROOT / args[args.index("-k") + 1] / "kustomization.yaml").is_file(), args
    text = GUIDE.read_text()
    for path in re.findall(r"`(deploy/[\w./-]+)`", text):
        assert (ROOT / path).exists(), path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def run(args: list[str]) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        *executable(args), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    out, _ = await asyncio.wait_for(proc.communicate(), 60)
    return proc.returncode or 0, out.decode()


async def test_part_of_the_workloads_moves_to_caldera_and_back(
    api: Api, sim: SimCluster | None, kubeconfig: str
) -> None:
    needs_sim(sim)  # the guide works in namespace default and creates a cluster-wide Queue
    await api.node("n1", cpu="4")
    await api.node("n2", cpu="4")
    objects = manifests()
    switched_back = [o for o in objects if o["metadata"]["name"] == "trial-again"]
    assert len(switched_back) == 1
    for obj in objects:
        if obj is not switched_back[0]:
            await create(api, obj)

    (serve,) = [c for c in commands("caldera-scheduler") if "explain" not in c]
    assert "--scheduler-name" in serve and "--no-enable-controllers" in serve
    port = free_port()
    # the guide's command, pointed at the simulator and a free port
    where = {"~/.kube/config": kubeconfig, os.path.expanduser("~/.kube/config"): kubeconfig}
    where["127.0.0.1:8080"] = f"127.0.0.1:{port}"
    args = [where.get(a, a) for a in serve]
    assert kubeconfig in args and f"127.0.0.1:{port}" in args
    scheduler = await asyncio.create_subprocess_exec(
        *executable(args), stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE
    )
    try:
        # the moved gang is Caldera's
        bound = await eventually(lambda: _bound(api, "trial-0", "trial-1"), timeout=30)
        assert set(bound) == {"trial-0", "trial-1"}

        explains = [c for c in commands("caldera-scheduler") if "explain" in c]
        assert len(explains) == 2
        for explain in explains:
            explain = [f"http://127.0.0.1:{port}" if a == "http://127.0.0.1:8080" else a for a in explain]
            code, text = await run(explain)
            assert code == 0, text
            assert "default/trial" in text

        # switching back: a pod of the same workload made for Volcano again
        await create(api, switched_back[0])
        # The guide's command keeps the default 1s period: two cycles pass after the pod is made.
        await asyncio.sleep(2.5)
        pods = {p["metadata"]["name"]: p for p in await api.pods()}
        for name in ("stays-with-volcano", "trial-again"):
            assert not pods[name]["spec"].get("nodeName"), name
            # not bound, not marked, no Event: Caldera left the pod alone
            assert not [
                c for c in pods[name].get("status", {}).get("conditions", []) if c["type"] == "PodScheduled"
            ]
        touched = [
            e
            for e in await api.events()
            if e["involvedObject"].get("name") in ("stays-with-volcano", "trial-again")
        ]
        assert touched == []
    finally:
        if scheduler.returncode is None:
            scheduler.send_signal(signal.SIGTERM)
        _, err = await asyncio.wait_for(scheduler.communicate(), 60)
    assert scheduler.returncode == 0, err.decode()[-2000:]


async def create(api: Api, obj: dict[str, Any]) -> None:
    kind = obj["kind"]
    namespace = obj["metadata"].get("namespace", "default")
    if kind == "Queue":
        path = "/apis/scheduling.volcano.sh/v1beta1/queues"
    elif kind == "PodGroup":
        path = f"/apis/scheduling.volcano.sh/v1beta1/namespaces/{namespace}/podgroups"
    elif kind == "Pod":
        path = f"/api/v1/namespaces/{namespace}/pods"
    else:
        raise AssertionError(f"the guide creates a {kind}: teach this test to create it")
    await api.create(path, obj)


async def _bound(api: Api, *names: str) -> dict[str, str]:
    nodes = await api.node_of()
    return {n: nodes[n] for n in names if nodes.get(n)} if all(nodes.get(n) for n in names) else {}
