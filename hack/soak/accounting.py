"""Node accounting against the API: what the leader's cache holds as requested on each node (the CPU and
memory of its last cycle's view, ``/debug/nodes``) must equal the sum of the requests of the unfinished
pods the API has bound there (the checker's mirror).

The soak runs this after every fault. The cluster keeps moving while it runs, so a node is compared
only once the API's side of it has stood still for ``STABLE`` seconds (its pods bound, finished or
gone; a pod's status changing otherwise does not move it), and as long before the leader's last
cycle began (a cycle's view is of its snapshot, taken as it began: a cycle of seconds shows a node
as it was seconds ago): the leader's view of it must have caught up by then. A node passes once it
is equal; one found different at ``MISSES`` looks while it stood still, and never equal within
``timeout``, is a violation. A node that never stood still is reported
as not compared, never passed silently. While a later fault is under way (the checks run beside the
faults that follow), nothing is compared: what the leader holds then is that fault's (binds it retries
through a storm of errors, say), and that fault's own check follows.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import orjson

from caldera.hack.soak.checker import Checker, holding_node, key_of, node_usage

#: seconds the API's side of a node must have stood still before it is compared
STABLE = 2.0
#: looks at which a standing node differs before it is a violation
MISSES = 3


@dataclass
class Accounting:
    compared: int = 0
    equal: int = 0
    not_compared: int = 0
    #: nodes the mirror showed different that a fresh list of the API showed equal to the leader
    mirror_lagged: int = 0
    #: nodes found different that the leader's last cycle no longer shows (deleted meanwhile), with
    #: nothing bound there in a fresh list of the API either
    left_view: int = 0
    cycle: int = 0
    differ: dict[str, str] = field(default_factory=dict)
    #: a fault that began after this one, under way while this check ran: nothing was compared then
    #: (its binds in flight, retried through a storm of errors, are the leader's and not yet the API's)
    interrupted_by: str = ""

    def describe(self) -> str:
        text = f"node accounting: {self.equal}/{self.compared} compared nodes equal to the API"
        if self.not_compared:
            text += f" ({self.not_compared} never stood still)"
        if self.interrupted_by:
            text += f" (not compared while the next fault, {self.interrupted_by}, was under way)"
        if self.mirror_lagged:
            text += f" ({self.mirror_lagged} equal only to a fresh list: the checker's mirror lagged)"
        if self.left_view:
            text += f" ({self.left_view} gone from the leader's view, nothing bound there in the API)"
        return text


async def leader_view(
    http: aiohttp.ClientSession, base: str
) -> tuple[int, float | None, dict[str, tuple[float, float]]]:
    """The leader's last cycle, when it began on this process's monotonic clock (None: not said),
    and per node the CPU (cores) and memory (bytes) it holds requested."""
    try:
        async with http.get(base + "/debug/nodes", timeout=aiohttp.ClientTimeout(total=5)) as r:
            if r.status != 200:
                return 0, None, {}
            doc = await r.json()
    except (TimeoutError, aiohttp.ClientError, OSError, ValueError):
        return 0, None, {}
    out: dict[str, tuple[float, float]] = {}
    for group in doc.get("groups") or []:
        for n in group.get("nodes") or []:
            out[n["name"]] = (float(n["cpu"][0]), float(n["memory"][0]))
    began = doc.get("cycle_started")
    since = time.monotonic() - (time.time() - float(began)) if began else None
    return int(doc.get("cycle") or 0), since, out


async def recheck(checker: Checker, http: aiohttp.ClientSession, base: str, node: str) -> tuple[bool, str]:
    """A node found different, looked at once more from both sides afresh: the leader's pods there
    (``/debug/nodes/NAME``) against a fresh list of the API's pods bound there and unfinished (the
    checker's mirror may be what lags). True when the two now agree (with "gone" when the leader's last
    cycle no longer shows the node: a 404, deleted meanwhile as the node churn does, holds nothing
    there); else which pods differ, or why either side could not be read."""
    try:
        async with http.get(f"{base}/debug/nodes/{node}", timeout=aiohttp.ClientTimeout(total=5)) as r:
            gone = r.status == 404
            doc: dict[str, Any]
            if gone:
                doc = {"node": {"cpu": [0.0], "memory": [0.0], "pods": []}}
            else:
                doc = await r.json() if r.status == 200 else {}
        items, _ = await checker.pods.api.list("/api/v1/pods", fieldSelector=f"spec.nodeName={node}")
    except Exception as exc:
        return False, f"; the fresh look at both sides failed ({exc!r})"
    held = doc.get("node") or {}
    leader = {
        f"{p['namespace']}/{p['name']}": f"{p['status']} uid {p.get('uid')} cpu {p['cpu']:g} memory {p['memory']:g}"
        for p in held.get("pods") or []
    }
    api = {key_of(p): p for p in items if holding_node(p)}
    if held:
        want = node_usage(api.values()).get(node, {})
        cpu, memory = held["cpu"][0], held["memory"][0]
        if abs(cpu - float(want.get("cpu", 0))) < 1e-3 and abs(memory - float(want.get("memory", 0))) < 1.0:
            return True, "gone" if gone else ""
    only_leader = []
    for k, v in sorted(leader.items()):
        if k not in api and len(only_leader) < 5:
            api_now = await _api_says(checker, k)
            only_leader.append(f"{k} ({v}; {api_now}; {await _cache_says(http, base, k)})")
    only_api = []
    for k, p in sorted(api.items()):
        if k not in leader and len(only_api) < 5:
            meta = p["metadata"]
            only_api.append(
                f"{k} (phase {(p.get('status') or {}).get('phase')}, deleting {bool(meta.get('deletionTimestamp'))}, "
                f"resourceVersion {meta.get('resourceVersion')}; {await _cache_says(http, base, k)})"
            )
    node_there = await _api_says(checker, node, kind="node")
    return (
        False,
        f"; the API's node: {node_there}; only the leader counts [{'; '.join(only_leader)}]; "
        f"only the API has [{'; '.join(only_api)}]",
    )


async def _watches(http: aiohttp.ClientSession, base: str) -> str:
    """The leader's pod watch as it counts it (``/debug/state``): lists, events, errors."""
    try:
        async with http.get(f"{base}/debug/state", timeout=aiohttp.ClientTimeout(total=5)) as r:
            doc = await r.json() if r.status == 200 else {}
    except Exception as exc:
        return f"; the leader's /debug/state unreadable ({exc!r})"
    pods = (doc.get("watches") or {}).get("pods")
    return f"; the leader's pod watch: {pods}" if pods else ""


async def _cache_says(http: aiohttp.ClientSession, base: str, key: str) -> str:
    """What the leader's cache holds now of a pod (``/debug/pods``), beside its last cycle's view."""
    try:
        async with http.get(f"{base}/debug/pods/{key}", timeout=aiohttp.ClientTimeout(total=5)) as r:
            if r.status == 404:
                return "not in the leader's cache"
            doc = await r.json() if r.status == 200 else {}
    except Exception as exc:
        return f"the leader's cache unreadable ({exc!r})"
    return (
        f"the leader's cache: {doc.get('status')} on {doc.get('node') or '(none)'} "
        f"at resourceVersion {doc.get('resourceVersion')}"
    )


async def _api_says(checker: Checker, key: str, kind: str = "pod") -> str:
    """What the API holds now for a pod ("namespace/name") or a node: where it is and its phase, or
    that it is gone (the diagnosis of a node found different)."""
    if kind == "node":
        path = f"/api/v1/nodes/{key}"
    else:
        namespace, name = key.split("/", 1)
        path = f"/api/v1/namespaces/{namespace}/pods/{name}"
    try:
        status, raw = await checker.pods.api.request("GET", path, attempts=3)
    except Exception as exc:
        return f"unreadable ({exc})"
    if status == 404:
        return "the API has none"
    if status != 200:
        return f"the API answered {status}"
    obj = orjson.loads(raw)
    meta = obj.get("metadata") or {}
    if kind == "node":
        return f"exists (uid {meta.get('uid')}, created {meta.get('creationTimestamp')})"
    return (
        f"the API has uid {meta.get('uid')} at resourceVersion {meta.get('resourceVersion')} "
        f"on {(obj.get('spec') or {}).get('nodeName') or '(none)'}, "
        f"phase {(obj.get('status') or {}).get('phase')}, deleting {bool(meta.get('deletionTimestamp'))}"
    )


def api_view(checker: Checker) -> dict[str, tuple[float, float]]:
    return {
        node: (float(u.get("cpu", 0)), float(u.get("memory", 0))) for node, u in checker.node_usage().items()
    }


async def check_accounting(
    checker: Checker, http: aiohttp.ClientSession, base: str, after: str, timeout: float = 15.0
) -> Accounting:
    """Compare the replica at ``base`` (the leader) with the API, node by node; a node that stays
    different is a violation named after the fault (``after``)."""
    result = Accounting()
    matched: set[str] = set()
    misses: dict[str, int] = {}
    seen: set[str] = set()
    deadline = time.monotonic() + timeout
    first_cycle = 0
    begun = checker.now()
    while time.monotonic() < deadline:
        later = checker.fault_under_way(begun)
        if later is not None:
            # Another fault began meanwhile: what the leader holds then (binds retried through a storm
            # of errors, a replica going away) is that fault's, not this one's; its own check follows it.
            result.interrupted_by = later
            await asyncio.sleep(0.5)
            continue
        cycle, began, view = await leader_view(http, base)
        first_cycle = first_cycle or cycle
        now = time.monotonic()
        truth = api_view(checker)
        result.cycle = max(result.cycle, cycle)
        seen.update(view)
        for node, (cpu, memory) in view.items():
            changed = checker.node_changed.get(node, float("-inf"))
            if node in matched or now - changed < STABLE:
                continue
            if began is not None and changed > began - STABLE:
                # the cycle shown began before the node stood still: its view cannot show it yet
                continue
            want_cpu, want_memory = truth.get(node, (0.0, 0.0))
            if abs(cpu - want_cpu) < 1e-3 and abs(memory - want_memory) < 1.0:
                matched.add(node)
                misses.pop(node, None)
                result.differ.pop(node, None)
            else:
                misses[node] = misses.get(node, 0) + 1
                result.differ[node] = (
                    f"the leader holds cpu {cpu:g}, memory {memory:g}; the API's bound pods request "
                    f"cpu {want_cpu:g}, memory {want_memory:g}"
                )
        if seen and matched >= seen:
            break
        await asyncio.sleep(0.5)
    later = checker.fault_under_way(begun)
    if later is not None:
        # A node found different would be looked at again during the next fault: that fault's own
        # check judges it (the cache's accounting, wrong, stays wrong until then).
        result.interrupted_by = later
        misses.clear()
        result.differ.clear()
    result.equal = len(matched)
    result.compared = len(matched | set(misses))
    result.not_compared = len(seen - matched - set(misses))
    for node, detail in list(result.differ.items()):
        if misses.get(node, 0) >= MISSES:
            agree, differ = await recheck(checker, http, base, node)
            if agree:
                # the leader equals a fresh list of the API: the checker's mirror was what lagged, or
                # the node is gone from the leader's view with nothing bound there any more
                del result.differ[node]
                result.equal += 1
                if differ:
                    result.left_view += 1
                else:
                    result.mirror_lagged += 1
                continue
            cycles = f"; the leader's cycles went from #{first_cycle} to #{result.cycle} meanwhile"
            cycles += await _watches(http, base)
            checker.violate("accounting", f"after {after}: {node}", detail + cycles + differ)
    if not seen and not result.interrupted_by:
        result.differ["-"] = "the leader showed no nodes (no cycle yet)"
    return result
