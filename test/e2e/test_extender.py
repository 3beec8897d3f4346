"""The extender plugin end to end, with Volcano's HTTP protocol against hack/extender.py's scripted
extender: its predicate keeps pods off the node it filters, its scores choose among equal nodes, it
hears an allocate for each placed pod and a deallocate for each pod of a gang that could not be
placed whole, and a pod whose allocation it refuses waits with the extender's message in
``caldera-scheduler explain``, until the extender changes its answer."""

from __future__ import annotations

from typing import Any

import pytest

from caldera.hack.extender import ALLOCATE, DEALLOCATE, SCRIPT_VERBS, Script, extender

from .conftest import Api, eventually
from .test_observability import run_cli

pytestmark = pytest.mark.e2e


def conf(url: str) -> str:
    verbs = "".join(f"      {arg}: {verb}\n" for arg, verb in SCRIPT_VERBS.items())
    return f"""
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
  - name: extender
    arguments:
      extender.urlPrefix: {url}
      extender.httpTimeout: 2s
{verbs}- plugins:
  - name: predicates
  - name: proportion
  - name: nodeorder
"""


async def test_the_extender_steers_placement_and_hears_every_allocation(
    api: Api, start_scheduler: Any, conf_file: Any
) -> None:
    script = Script(filtered={"n1": "n1 is being drained by the extender"}, scores={"n3": 100})
    with extender(script.answers()) as ext:
        _, path = conf_file
        path.write_text(conf(ext.url))
        for name in ("n1", "n2", "n3"):
            await api.node(name, cpu="4")
        running = await start_scheduler()
        server = f"http://127.0.0.1:{running.app.http.port}"

        async def node_of(pod: str) -> str:
            return (await api.node_of()).get(pod, "")

        # n1 is filtered; of the equal n2 and n3 the extender scores n3 highest
        await api.gang("first", 1, cpu="1")
        assert await eventually(lambda: node_of("first-0")) == "n3"
        assert (ALLOCATE, "first-0", "n3") in ext.task_events()
        assert not [e for e in ext.task_events() if e[1] == "first-0" and e[0] == DEALLOCATE]

        # a gang of three pods of 3 cpu: n2 and n3 take one each, the third fits nowhere (n1 is
        # filtered); the pods allocated are deallocated when the gang is given up
        await api.gang("big", 3, cpu="3")

        async def big_undone() -> set[str]:
            events = ext.task_events()
            allocated = {pod for verb, pod, _ in events if verb == ALLOCATE and pod.startswith("big-")}
            deallocated = {pod for verb, pod, _ in events if verb == DEALLOCATE and pod.startswith("big-")}
            return allocated if len(allocated) == 2 and allocated == deallocated else set()

        await eventually(big_undone)
        assert all(not node for pod, node in (await api.node_of()).items() if pod.startswith("big-"))

        # the extender refuses the allocation of held-0: it waits, saying why
        script.refused["held-0"] = "the licence server has no seat for held-0"
        await api.gang("held", 1, cpu="1")

        async def explained() -> str:
            code, text = await run_cli("explain", f"{api.ns}/held", "--server", server)
            return text if code == 0 and "no seat for held-0" in text else ""

        text = await eventually(explained, timeout=20)
        assert "refused by extender" in text
        assert await node_of("held-0") == ""
        assert (DEALLOCATE, "held-0", "n3") in ext.task_events()  # the refusal undone at once

        # nothing in the cluster changes; the extender's answer does, and the pod is placed
        script.refused.clear()
        assert await eventually(lambda: node_of("held-0")) == "n3"
