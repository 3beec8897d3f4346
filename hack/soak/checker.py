"""Invariants checked continuously from the API's view (what a user of the cluster sees), never from the
scheduler's own state.

The checker keeps its own list+watch mirrors of pods, nodes and PodGroups (re-listing after a dropped watch
or a 410, like any client must), and every `interval` evaluates:

- capacity: no node's bound, unfinished pods request more than its allocatable, and the kubelet never
  refuses a pod for lack of room (`OutOf<resource>`);
- gang: no PodGroup with all its pods present and none finished stays bound below its min member for longer
  than one scheduling period plus the bind allowance (extended by the fault windows it overlaps); with
  `native_gang`, Kubernetes' own PodGroups (scheduling.k8s.io/v1alpha2) too, held to `gang.minCount`, their
  pods naming them in `spec.schedulingGroup`;
- bind-once: no pod's `spec.nodeName` ever changes once set;
- foreign: pods of other schedulers are never bound, annotated or deleted by us;
- podgroup: every unfinished pod of ours names a PodGroup that exists (within a grace period);
- fits-bound: a single pod that fits some node (resources, taints, cordons) is bound within a bound time;
- metrics (with the scraper): leader gauge agrees with the Lease, vGPU gauges with the pods, bind counters
  with the bindings seen;
- DRA (with `CheckerConfig.dra`, mirroring ResourceClaims and ResourceSlices too): no device is allocated to
  two claims unless it allows multiple allocations (`Device.AllowMultipleAllocations`; an `adminAccess`
  result holds no device, as the structured allocator skips them in `staging/src/k8s.io/
  dynamic-resource-allocation/structured/allocator.go`); no bound, unfinished pod of ours has a claim that is
  missing, unallocated, not reserved for it, or allocated without the configurations its spec gives the
  driver (kube-scheduler copies them into the allocation, `FromClaim`), for longer than `dra_grace`
  (kube-scheduler's PreBind writes allocation and reservation before the binding, so a bound pod's claims
  are in place); and every device of
  a bound pod's claims is published for that pod's node (`nodeName`, `allNodes`, a `nodeSelector` matching
  the node, per slice or per device with `perDeviceNodeSelection`).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from fractions import Fraction
from typing import Any

import aiohttp
import orjson

from caldera.framework.model import GROUP_NAME_ANNOTATION, NATIVE_JOB_PREFIX, QUEUE_NAME_ANNOTATION
from caldera.hack.sim.quantity import parse_quantity, pod_requests
from caldera.hack.workload.client import Api
from caldera.hack.workload.manifests import WORKLOAD_LABEL
from caldera.scheduler.debug import NOT_REACHED

TERMINAL = ("Succeeded", "Failed")


def holding_node(pod: dict[str, Any] | None) -> str:
    """The node whose resources ``pod`` holds: bound there and not finished ("" for none)."""
    if pod is None or (pod.get("status") or {}).get("phase") in TERMINAL:
        return ""
    return str((pod.get("spec") or {}).get("nodeName") or "")


def node_usage(pods: Iterable[dict[str, Any]]) -> dict[str, dict[str, Fraction]]:
    """Per node, the requests (and the count) of the pods holding it (``holding_node``)."""
    usage: dict[str, dict[str, Fraction]] = {}
    for pod in pods:
        node = holding_node(pod)
        if not node:
            continue
        u = usage.setdefault(node, {})
        for r, q in pod_requests(pod["spec"]).items():
            u[r] = u.get(r, Fraction(0)) + q
        u["pods"] = u.get("pods", Fraction(0)) + 1
    return usage


def key_of(obj: dict[str, Any]) -> str:
    meta = obj["metadata"]
    return f"{meta.get('namespace', '')}/{meta['name']}"


class Mirror:
    """A list+watch mirror of one collection, resilient to dropped watches, 410s, 429s and 500s."""

    def __init__(
        self,
        api: Api,
        path: str,
        on_change: Callable[[str, dict[str, Any] | None, dict[str, Any] | None], None] | None = None,
    ) -> None:
        self.api = api
        self.path = path
        self.objects: dict[str, dict[str, Any]] = {}
        self.on_change = on_change
        self.synced = asyncio.Event()
        self.relists = 0
        self.events = 0
        self.rv = ""

    def _set(self, key: str, obj: dict[str, Any] | None) -> None:
        old = self.objects.get(key)
        if obj is None:
            self.objects.pop(key, None)
        else:
            self.objects[key] = obj
        if self.on_change is not None:
            self.on_change(key, old, obj)

    async def relist(self) -> None:
        items, rv = await self.api.list(self.path)
        fresh = {key_of(o): o for o in items}
        for key in list(self.objects):
            if key not in fresh:
                self._set(key, None)
        for key, obj in fresh.items():
            old = self.objects.get(key)
            if old is None or old["metadata"].get("resourceVersion") != obj["metadata"].get(
                "resourceVersion"
            ):
                self._set(key, obj)
        self.rv = rv
        self.relists += 1
        self.synced.set()

    async def run(self, stop: asyncio.Event) -> None:
        need_list = True
        while not stop.is_set():
            try:
                if need_list:
                    await self.relist()
                    need_list = False
                url = f"{self.api.url}{self.path}"
                params = {"watch": "1", "allowWatchBookmarks": "true", "resourceVersion": self.rv}
                timeout = aiohttp.ClientTimeout(total=None, sock_read=30)
                async with self.api.session.get(url, params=params, timeout=timeout) as resp:
                    if resp.status != 200:
                        await resp.read()
                        need_list = resp.status == 410
                        await asyncio.sleep(0.2)
                        continue
                    async for line in resp.content:
                        if stop.is_set():
                            return
                        ev = orjson.loads(line)
                        kind, obj = ev.get("type"), ev.get("object") or {}
                        if kind == "ERROR":
                            need_list = True
                            break
                        rv = (obj.get("metadata") or {}).get("resourceVersion")
                        if rv:
                            self.rv = rv
                        if kind == "BOOKMARK":
                            continue
                        self.events += 1
                        self._set(key_of(obj), None if kind == "DELETED" else obj)
            except asyncio.CancelledError:
                raise
            except Exception:
                need_list = True
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(stop.wait(), 0.2)


@dataclass
class Violation:
    at: float  # seconds since the soak started
    invariant: str
    detail: str


@dataclass
class FaultWindow:
    kind: str
    start: float
    end: float


@dataclass
class CheckerConfig:
    period: float = 0.5  # the scheduler's schedule period
    bind_allowance: float = 2.0  # bind requests in flight after a cycle commits a gang
    podgroup_grace: float = 5.0
    fits_bound: float = 15.0  # seconds a fitting single pod may stay unbound
    fault_recovery: float = 12.0  # extra seconds after a restart/failover window
    schedulers: tuple[str, ...] = ("caldera",)
    fits_workloads: tuple[str, ...] = ("besteffort", "deploy", "probe")
    #: whether the cluster serves Kubernetes' own PodGroups (then mirrored and checked as gangs)
    native_gang: bool = False
    dra: bool = False  # mirror ResourceClaims and ResourceSlices, and check the DRA invariants
    dra_grace: float = 5.0  # seconds a bound pod's claim may look unallocated (the two watches' skew)


@dataclass
class Series:
    t: list[float] = field(default_factory=list)
    values: dict[str, list[float]] = field(default_factory=dict)

    def add(self, t: float, **values: float) -> None:
        self.t.append(t)
        for k, v in values.items():
            self.values.setdefault(k, []).append(v)


class Checker:
    def __init__(self, api: Api, config: CheckerConfig, t0: float) -> None:
        self.api = api
        self.config = config
        self.t0 = t0
        self.pods = Mirror(api, "/api/v1/pods", self._on_pod)
        self.nodes = Mirror(api, "/api/v1/nodes")
        self.groups = Mirror(api, "/apis/scheduling.volcano.sh/v1beta1/podgroups")
        self.native_groups = (
            Mirror(api, "/apis/scheduling.k8s.io/v1alpha2/podgroups") if config.native_gang else None
        )
        self._groups_now: dict[str, tuple[int, str]] | None = None
        self.queues = Mirror(api, "/apis/scheduling.volcano.sh/v1beta1/queues")
        self.claims = Mirror(api, "/apis/resource.k8s.io/v1/resourceclaims")
        self.slices = Mirror(api, "/apis/resource.k8s.io/v1/resourceslices")
        self.claim_problem_since: dict[tuple[str, str], float] = {}
        self.dra_checked: set[str] = set()  # uids of bound pods seen with every claim allocated and reserved
        self.violations: list[Violation] = []
        self._seen_violation: set[tuple[str, str]] = set()
        self.faults: list[FaultWindow] = []
        self.bound_node: dict[str, str] = {}  # pod uid -> node it was first seen bound to
        self.created_seen: dict[str, float] = {}  # pod uid -> monotonic time first seen
        self.bound_latency: list[tuple[float, float]] = []  # (t, first seen -> bound seen) per pod of ours
        self.bound_total = 0
        self.foreign: dict[str, dict[str, Any]] = {}  # key -> the foreign pod as created
        self.partial_since: dict[str, float] = {}
        self.missing_pg_since: dict[str, float] = {}
        self.fits_since: dict[str, float] = {}
        self.max_partial = 0.0
        self.max_fit_wait = 0.0
        self.checks = 0
        self.series = Series()
        self.bound_by_window = 0
        #: node -> when a pod last came to hold or stopped holding its resources there (monotonic)
        self.node_changed: dict[str, float] = {}
        #: the scheduler's own account of a pod found fitting but unbound (its leader's why-pending,
        #: "namespace/name" -> text), added to that violation; None: no scheduler to ask
        self.explain: Callable[[str], Awaitable[str]] | None = None
        #: the leader's queues as its last cycle left them (``/debug/queues``, by name), to check
        #: a "queue Q is at its share" explanation against; None: not asked
        self.queue_figures: Callable[[], Awaitable[dict[str, dict[str, Any]] | None]] | None = None
        #: pods found fitting but unbound whose queue the leader's figures show at its deserved share
        #: (not violations: reported, with the figures)
        self.held_by_share: list[str] = []
        #: pods found fitting but unbound whose job the leader's overloaded cycles had not reached
        #: (their time budget ran out first), within ``BUDGET_WAIT`` (reported, not violations)
        self.held_by_budget: list[str] = []
        #: "queue Q is at its share" findings looked at again because the leader's figures were not
        #: to be had then (a failover, a restart): neither borne out nor refuted
        self.share_unverified = 0
        #: when each pod set apart so began to wait (its wait is judged from then, not from its reset)
        self._held_since: dict[str, float] = {}
        #: "fits a node but unbound" findings a fresh read of the pod showed bound or gone: the
        #: mirror's watch had fallen behind (a busy machine delivers events late)
        self.fits_mirror_lagged = 0
        self._explained = 0  # violations looked at for an explanation so far

    # -- bookkeeping from the pod watch ----------------------------------------------------------------
    def now(self) -> float:
        return time.monotonic() - self.t0

    def violate(self, invariant: str, subject: str, detail: str) -> None:
        if (invariant, subject) in self._seen_violation:
            return
        self._seen_violation.add((invariant, subject))
        self.violations.append(Violation(round(self.now(), 2), invariant, f"{subject}: {detail}"))

    async def mirror_caught_up(self) -> bool:
        """Whether the pod mirror shows every binding a fresh list of the API shows. A watch that is behind (a
        busy machine delivers events late) makes `bound_total` lag the bindings made, by as many as it holds."""
        try:
            items, _rv = await self.pods.api.list(self.pods.path)
        except Exception:
            return False
        mirrored = self.pods.objects
        return all(
            (mirrored.get(key_of(o)) or {}).get("spec", {}).get("nodeName") == o["spec"].get("nodeName")
            for o in items
            if o["spec"].get("nodeName")
        )

    def ours(self, pod: dict[str, Any]) -> bool:
        return (pod.get("spec") or {}).get("schedulerName", "default-scheduler") in self.config.schedulers

    def _on_pod(self, key: str, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        was, now_on = holding_node(old), holding_node(new)
        if was != now_on:
            at = time.monotonic()
            for node in (was, now_on):
                if node:
                    self.node_changed[node] = at
        if new is None:
            if old is not None and key in self.foreign:
                self.violate("foreign", key, "a pod of another scheduler was deleted")
            return
        uid = new["metadata"].get("uid", key)
        now = time.monotonic()
        self.created_seen.setdefault(uid, now)
        node = new["spec"].get("nodeName") or ""
        if not node:
            return
        first = self.bound_node.get(uid)
        if first is None:
            self.bound_node[uid] = node
            if self.ours(new) and key not in self.foreign:
                self.bound_total += 1
                self.bound_by_window += 1
                self.bound_latency.append((now - self.t0, now - self.created_seen[uid]))
        elif first != node:
            self.violate("bind-once", key, f"bound to {first}, then to {node}")

    def add_fault(self, kind: str, start: float, end: float) -> FaultWindow:
        """Register a fault window. Register it when the fault starts (and move `end` later if need be): the
        invariants are checked meanwhile, and a fault known only once it is over is excused too late."""
        window = FaultWindow(kind, start, end)
        self.faults.append(window)
        return window

    def recovery(self, kind: str) -> float:
        """Seconds after a fault's window the scheduler is given to recover from it."""
        return self.config.fault_recovery if kind in ("restart", "failover") else 2.0

    def fault_under_way(self, after: float) -> str | None:
        """The kind of a fault that began after ``after`` (this checker's clock) and is under way now,
        or was within its recovery time; None when none is."""
        now = self.now()
        for f in self.faults:
            if after < f.start <= now <= f.end + self.recovery(f.kind):
                return f.kind
        return None

    def fault_extension(self, start: float, end: float) -> float:
        """Seconds of fault overlapping [start, end]: time the scheduler could not be expected to act."""
        extra = 0.0
        for f in self.faults:
            lo, hi = max(start, f.start), min(end, f.end + self.recovery(f.kind))
            if hi > lo:
                extra += hi - lo
        return extra

    # -- the invariants --------------------------------------------------------------------------------
    def node_usage(self) -> dict[str, dict[str, Fraction]]:
        return node_usage(self.pods.objects.values())

    def check_capacity(self, usage: dict[str, dict[str, Fraction]]) -> None:
        for name, used in usage.items():
            node = self.nodes.objects.get(f"/{name}")
            if node is None:
                continue
            alloc = (node.get("status") or {}).get("allocatable") or {}
            for r, q in used.items():
                if q <= 0:
                    continue
                have = parse_quantity(alloc[r]) if r in alloc else Fraction(0)
                if q > have:
                    self.violate(
                        "capacity", f"{name}/{r}", f"requests {float(q):g} > allocatable {float(have):g}"
                    )
        for key, pod in self.pods.objects.items():
            status = pod.get("status") or {}
            if status.get("phase") == "Failed" and str(status.get("reason", "")).startswith("OutOf"):
                self.violate(
                    "capacity",
                    key,
                    f"kubelet refused it: {status.get('reason')} on {pod['spec'].get('nodeName')}",
                )

    @staticmethod
    def group_key(pod: dict[str, Any]) -> str | None:
        """The key of the PodGroup the pod names: ``ns/name`` (Volcano's, by annotation) or ``ns/k8s:name``
        (Kubernetes' own, by ``spec.schedulingGroup``, which wins as in the scheduler); None: no group."""
        ns = pod["metadata"].get("namespace", "")
        native = (pod.get("spec") or {}).get("schedulingGroup") or {}
        if native.get("podGroupName"):
            return f"{ns}/{NATIVE_JOB_PREFIX}{native['podGroupName']}"
        group = (pod["metadata"].get("annotations") or {}).get(GROUP_NAME_ANNOTATION)
        return f"{ns}/{group}" if group else None

    def podgroups(self, fresh: bool = False) -> dict[str, tuple[int, str]]:
        """Every PodGroup by ``group_key``: (its min member, its queue); collected once per check
        (``fresh``: again now)."""
        if self._groups_now is None or fresh:
            self._groups_now = self._collect_podgroups()
        return self._groups_now

    def _collect_podgroups(self) -> dict[str, tuple[int, str]]:
        out = {
            key: (
                int((pg.get("spec") or {}).get("minMember") or 1),
                str((pg.get("spec") or {}).get("queue") or "default"),
            )
            for key, pg in self.groups.objects.items()
        }
        if self.native_groups is not None:
            for key, pg in self.native_groups.objects.items():
                ns, _, name = key.partition("/")
                gang = ((pg.get("spec") or {}).get("schedulingPolicy") or {}).get("gang") or {}
                meta = pg["metadata"]
                queue = (meta.get("labels") or {}).get(QUEUE_NAME_ANNOTATION) or (
                    meta.get("annotations") or {}
                ).get(QUEUE_NAME_ANNOTATION)
                out[f"{ns}/{NATIVE_JOB_PREFIX}{name}"] = (
                    int(gang.get("minCount") or 1),
                    str(queue or "default"),
                )
        return out

    def check_gangs(self, t: float) -> None:
        by_group: dict[str, list[dict[str, Any]]] = {}
        for pod in self.pods.objects.values():
            group = self.group_key(pod)
            if group and self.ours(pod):
                by_group.setdefault(group, []).append(pod)
        limit = self.config.period + self.config.bind_allowance
        partial_now: set[str] = set()
        for key, (m, _queue) in self.podgroups().items():
            pods = by_group.get(key, [])
            if m <= 1 or len(pods) < m:
                continue
            if any(
                (p.get("status") or {}).get("phase") in TERMINAL or p["metadata"].get("deletionTimestamp")
                for p in pods
            ):
                continue
            bound = sum(1 for p in pods if p["spec"].get("nodeName"))
            if 0 < bound < m:
                partial_now.add(key)
                since = self.partial_since.setdefault(key, t)
                age = t - since
                self.max_partial = max(self.max_partial, age)
                if age > limit + self.fault_extension(since, t):
                    self.violate(
                        "gang", key, f"{bound}/{m} bound for {age:.1f}s (limit {limit:.1f}s + faults)"
                    )
        for key in list(self.partial_since):
            if key not in partial_now:
                del self.partial_since[key]

    def check_foreign(self) -> None:
        for key, created in self.foreign.items():
            pod = self.pods.objects.get(key)
            if pod is None:
                continue  # deletion is reported by the watch handler
            if pod["spec"].get("nodeName") != created["spec"].get("nodeName"):
                self.violate("foreign", key, f"nodeName changed to {pod['spec'].get('nodeName')!r}")
            if GROUP_NAME_ANNOTATION in (pod["metadata"].get("annotations") or {}):
                self.violate("foreign", key, "annotated with a PodGroup")
            conds = [c.get("type") for c in (pod.get("status") or {}).get("conditions") or []]
            if not created["spec"].get("nodeName") and "PodScheduled" in conds:
                self.violate("foreign", key, "got a PodScheduled condition")

    def check_podgroups(self, t: float) -> None:
        missing_now: set[str] = set()
        groups = self.podgroups()
        for key, pod in self.pods.objects.items():
            if not self.ours(pod) or (pod.get("status") or {}).get("phase") in TERMINAL:
                continue
            if pod["metadata"].get("deletionTimestamp"):
                continue
            group = self.group_key(pod)
            if group and group in groups:
                continue
            missing_now.add(key)
            since = self.missing_pg_since.setdefault(key, t)
            if t - since > self.config.podgroup_grace + self.fault_extension(since, t):
                self.violate(
                    "podgroup", key, f"no PodGroup ({group or 'not annotated'}) for {t - since:.1f}s"
                )
        for key in list(self.missing_pg_since):
            if key not in missing_now:
                del self.missing_pg_since[key]

    def queue_of(self, pod: dict[str, Any]) -> str:
        meta = pod["metadata"]
        group = self.group_key(pod)
        found = self.podgroups().get(group) if group else None
        if found is not None:
            return found[1]
        return str((meta.get("annotations") or {}).get(QUEUE_NAME_ANNOTATION) or "default")

    def queue_room(self) -> dict[str, dict[str, Fraction]]:
        """What each queue may still take, by Volcano's proportion semantics: its real capability is the
        cluster minus every other queue's guarantee (guarantees scaled down to the cluster when they add up
        to more), capped by its capability, less what its pods hold. A pod of a full queue does not "fit"."""
        dims = ("cpu", "memory")
        total = {d: Fraction(0) for d in dims}
        for node in self.nodes.objects.values():
            alloc = (node.get("status") or {}).get("allocatable") or {}
            for d in dims:
                if d in alloc:
                    total[d] += parse_quantity(alloc[d])
        guarantees: dict[str, dict[str, Fraction]] = {}
        caps: dict[str, dict[str, Fraction]] = {}
        for q in self.queues.objects.values():
            spec = q.get("spec") or {}
            name = q["metadata"]["name"]
            g = ((spec.get("guarantee") or {}).get("resource")) or {}
            guarantees[name] = {d: parse_quantity(g[d]) for d in dims if d in g}
            cap = spec.get("capability") or {}
            caps[name] = {d: parse_quantity(cap[d]) for d in dims if d in cap}
        summed = {d: sum((g.get(d, Fraction(0)) for g in guarantees.values()), Fraction(0)) for d in dims}
        scale = {d: min(Fraction(1), total[d] / summed[d]) if summed[d] else Fraction(1) for d in dims}
        used: dict[str, dict[str, Fraction]] = {}
        for pod in self.pods.objects.values():
            if not self.ours(pod) or not pod["spec"].get("nodeName"):
                continue
            if (pod.get("status") or {}).get("phase") in TERMINAL:
                continue
            u = used.setdefault(self.queue_of(pod), {d: Fraction(0) for d in dims})
            req = pod_requests(pod["spec"])
            for d in dims:
                u[d] += req.get(d, Fraction(0))
        room: dict[str, dict[str, Fraction]] = {}
        for name in set(guarantees) | set(used) | {"default"}:
            g = guarantees.get(name, {})
            real = {d: total[d] - summed[d] * scale[d] + g.get(d, Fraction(0)) * scale[d] for d in dims}
            for d, c in caps.get(name, {}).items():
                real[d] = min(real[d], c)
            u = used.get(name, {})
            room[name] = {d: real[d] - u.get(d, Fraction(0)) for d in dims}
        return room

    def live_counts(self) -> dict[str, int]:
        """The objects the API holds now, as the scheduler's remembered maps count them: pods,
        PodGroups of either kind (a job of its cache is a Volcano PodGroup or, with ``native_gang``,
        a ``scheduling.k8s.io/v1alpha2`` one) and queues."""
        native = len(self.native_groups.objects) if self.native_groups is not None else 0
        return {
            "pods": len(self.pods.objects),
            "podgroups": len(self.groups.objects) + native,
            "queues": len(self.queues.objects),
        }

    def check_fits_bound(self, t: float, usage: dict[str, dict[str, Fraction]]) -> None:
        room = self.queue_room()
        free: list[dict[str, Fraction]] = []
        for name, node in self.nodes.objects.items():
            spec, status = node.get("spec") or {}, node.get("status") or {}
            if spec.get("unschedulable") or any(
                tt.get("effect") in ("NoSchedule", "NoExecute") for tt in spec.get("taints") or []
            ):
                continue
            ready = any(
                c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or []
            )
            if not ready:
                continue
            alloc = {r: parse_quantity(q) for r, q in (status.get("allocatable") or {}).items()}
            used = usage.get(name.lstrip("/"), {})
            free.append(
                {r: alloc[r] - used.get(r, Fraction(0)) for r in ("cpu", "memory", "pods") if r in alloc}
            )
        fitting_now: set[str] = set()
        for key, pod in self.pods.objects.items():
            labels = pod["metadata"].get("labels") or {}
            if labels.get(WORKLOAD_LABEL) not in self.config.fits_workloads and not (
                labels.get("app", "").startswith("deploy-")
            ):
                continue
            if not self.ours(pod) or pod["spec"].get("nodeName") or pod["metadata"].get("deletionTimestamp"):
                continue
            if (pod.get("status") or {}).get("phase") in TERMINAL:
                continue
            req = pod_requests(pod["spec"])
            req["pods"] = Fraction(1)
            # A margin of one more pod's worth: a node that fits exactly may be the one just taken.
            if not any(all(f.get(r, Fraction(0)) >= 2 * q for r, q in req.items() if q > 0) for f in free):
                continue
            qroom = room.get(self.queue_of(pod), {})
            if any(
                qroom.get(d, Fraction(0)) < 2 * req.get(d, Fraction(0))
                for d in ("cpu", "memory")
                if req.get(d)
            ):
                continue
            fitting_now.add(key)
            since = self.fits_since.setdefault(key, t)
            wait = t - since
            # (a pod set apart before has waited since it was first found fitting)
            total = t - self._held_since.get(key, since)
            self.max_fit_wait = max(self.max_fit_wait, total)
            if wait > self.config.fits_bound + self.fault_extension(since, t):
                self.violate("fits-bound", key, f"fits a node but unbound for {total:.1f}s")
        for key in list(self.fits_since):
            if key not in fitting_now:
                del self.fits_since[key]
                self._held_since.pop(key, None)

    # -- Dynamic Resource Allocation -------------------------------------------------------------------------
    def published_devices(self) -> dict[tuple[str, str, str], tuple[dict[str, Any], bool]]:
        """(driver, pool, device) -> (where the device is: the slice's or the device's node selection, and
        whether it allows multiple allocations), from the mirrored ResourceSlices."""
        out: dict[tuple[str, str, str], tuple[dict[str, Any], bool]] = {}
        for rs in self.slices.objects.values():
            spec = rs.get("spec") or {}
            driver, pool = spec.get("driver", ""), (spec.get("pool") or {}).get("name", "")
            per_device = bool(spec.get("perDeviceNodeSelection"))
            for d in spec.get("devices") or []:
                where = d if per_device else spec
                out[(driver, pool, d.get("name", ""))] = (where, bool(d.get("allowMultipleAllocations")))
        return out

    def check_dra(self, t: float) -> None:
        devices = self.published_devices()
        holders: dict[tuple[str, str, str], list[str]] = {}
        for key, claim in self.claims.objects.items():
            allocation = (claim.get("status") or {}).get("allocation") or {}
            for r in (allocation.get("devices") or {}).get("results") or []:
                if not r.get("adminAccess"):
                    holders.setdefault((r.get("driver"), r.get("pool"), r.get("device")), []).append(key)
        for dev, keys in holders.items():
            if len(keys) > 1 and not devices.get(dev, ({}, False))[1]:
                self.violate(
                    "dra-device", "/".join(dev), f"allocated to {len(keys)} claims: {', '.join(keys)}"
                )
        problems_now: set[tuple[str, str]] = set()
        for key, pod in self.pods.objects.items():
            spec, meta = pod["spec"], pod["metadata"]
            node = spec.get("nodeName")
            if (
                not node
                or not spec.get("resourceClaims")
                or not self.ours(pod)
                or meta.get("deletionTimestamp")
            ):
                continue
            if (pod.get("status") or {}).get("phase") in TERMINAL:
                continue
            fine = True
            for entry, claim in pod_claims(pod, self.claims.objects):
                problem = claim_problem(pod, claim)
                fine = fine and not problem
                if problem:
                    problems_now.add((key, entry))
                    since = self.claim_problem_since.setdefault((key, entry), t)
                    if t - since > self.config.dra_grace + self.fault_extension(since, t):
                        self.violate("dra-claim", key, f"bound to {node} but its claim {entry!r} {problem}")
                    continue
                assert claim is not None
                for r in (claim["status"]["allocation"].get("devices") or {}).get("results") or []:
                    dev = (r.get("driver"), r.get("pool"), r.get("device"))
                    where = devices.get(dev)
                    if where is None or not self.serves(where[0], node):
                        fine = False
                        self.violate(
                            "dra-node",
                            key,
                            f"bound to {node} with device {'/'.join(map(str, dev))}, which "
                            + ("no ResourceSlice publishes" if where is None else "is not on that node"),
                        )
            if fine:
                self.dra_checked.add(meta.get("uid", key))
        for k in list(self.claim_problem_since):
            if k not in problems_now:
                del self.claim_problem_since[k]

    def serves(self, where: dict[str, Any], node: str) -> bool:
        """Whether a device whose node selection is `where` (`nodeName`, `allNodes` or `nodeSelector`) is
        available on `node` (a NodeSelector: any term matches, a term's requirements all do)."""
        if where.get("allNodes"):
            return True
        if where.get("nodeName"):
            return bool(where["nodeName"] == node)
        terms = (where.get("nodeSelector") or {}).get("nodeSelectorTerms") or []
        obj = self.nodes.objects.get(f"/{node}") or {"metadata": {"name": node}}
        labels = obj["metadata"].get("labels") or {}
        fields = {"metadata.name": node}
        return any(
            all(_requirement(r, labels) for r in term.get("matchExpressions") or [])
            and all(_requirement(r, fields) for r in term.get("matchFields") or [])
            for term in terms
        )

    def check(self) -> None:
        t = self.now()
        self._groups_now = None  # the PodGroups as the mirrors hold them now
        usage = self.node_usage()
        self.check_capacity(usage)
        self.check_gangs(t)
        self.check_foreign()
        self.check_podgroups(t)
        self.check_fits_bound(t, usage)
        if self.config.dra:
            self.check_dra(t)
        self.checks += 1

    async def explain_new_violations(self, timeout: float = 3.0) -> None:
        """Each new "fits a node but unbound" violation gets the scheduler's own account of the pod at
        that moment (``explain``), so the report says why it waited, not only that it did.

        The node room this checker sees is not the queue's: proportion (and capacity) let a queue take
        no more than its deserved share while other queues want more, which only the scheduler's water
        filling knows. A pod the leader says its queue holds ("queue Q is at its share") is no violation
        when the leader's figures bear it out: Q's allocated plus the pod's request exceeds Q's deserved
        share in a resource the pod asks for. It goes to ``held_by_share`` instead, and its wait starts
        again: held past the bound once more, it is looked at again.

        An overloaded leader's cycle stops taking jobs when its time budget is spent, and the next one
        takes them in the same order (``--cycle-budget``): a pod whose job it has not reached waits for
        the jobs ahead of it, which is no violation for up to ``BUDGET_WAIT`` fits-bound times in all
        (``held_by_budget``); waiting longer so is one."""
        new = self.violations[self._explained :]
        self._explained = len(self.violations)
        if self.explain is None:
            return
        held: list[Violation] = []
        # the leader's queues, read once a round (None: not answered)
        figures: dict[str, dict[str, Any]] | None = None
        asked = False
        for violation in new:
            if violation.invariant != "fits-bound":
                continue
            pod = violation.detail.split(":", 1)[0]
            now = self.now()
            since = self._held_since.get(pod, self.fits_since.get(pod, now))
            fresh = await self._read_afresh(pod, timeout)
            if fresh is not None:
                # bound (when) or gone: in time, the mirror's watch had fallen behind; late, it stands
                waited = None if fresh == "gone" else fresh - (time.time() - (now - since))
                allowed = self.config.fits_bound + self.fault_extension(since, now) + 1.0  # (1 s stamps)
                if waited is None or waited <= allowed:
                    held.append(violation)
                    self.fits_mirror_lagged += 1
                    self._set_apart(pod, None)
                    continue
                violation.detail += (
                    f"; bound {waited:.1f}s after it was found fitting (its PodScheduled condition)"
                )
            try:
                why = await asyncio.wait_for(self.explain(pod), timeout)
            except Exception as exc:  # the leader may be restarting: say so, never stop the checks
                why = f"not answered ({type(exc).__name__})"
            violation.detail += f"; the leader says: {why}"
            said = _AT_SHARE.search(why)
            if said is not None and not asked:
                figures, asked = await self._leader_queues(timeout), True
            if said is not None and figures is None:
                # The leader's figures were not to be had (it was going away, or has run no cycle
                # yet): neither borne out nor refuted, the finding is looked at again later.
                self.share_unverified += 1
                held.append(violation)
                self._set_apart(pod, since)
                continue
            at_share, words = (
                self._share_verdict(pod, said.group(1), figures or {}) if said is not None else (False, "")
            )
            if at_share:
                self.held_by_share.append(f"{violation.detail}; {words}")
            elif NOT_REACHED in why and now - since <= BUDGET_WAIT * self.config.fits_bound:
                self.held_by_budget.append(f"{violation.detail}; waiting {now - since:.1f}s in all")
            else:
                if said is not None:
                    violation.detail += f"; not borne out by {words}"
                continue
            held.append(violation)
            self._set_apart(pod, since)
        if held:
            dropped = {id(v) for v in held}
            self.violations = [v for v in self.violations if id(v) not in dropped]
            self._explained -= len(held)

    def _set_apart(self, pod: str, since: float | None) -> None:
        """A fits-bound finding that is no violation: the pod may be found again. ``since``: when it
        began to wait, its wait starting again from now; None: its waiting is over (bound or gone)."""
        self._seen_violation.discard(("fits-bound", pod))
        if since is None:
            self.fits_since.pop(pod, None)
            self._held_since.pop(pod, None)
        else:
            self._held_since[pod] = since
            self.fits_since[pod] = self.now()

    async def _read_afresh(self, pod: str, timeout: float) -> float | str | None:
        """The pod ("namespace/name") read from the API now: "gone", or when it was bound (its
        ``PodScheduled`` condition's time, Unix seconds), or None while it is unbound or unanswered."""
        namespace, name = pod.split("/", 1)
        try:
            status, raw = await asyncio.wait_for(
                self.api.request("GET", f"/api/v1/namespaces/{namespace}/pods/{name}", attempts=2), timeout
            )
        except Exception:  # unanswered: the finding stands
            return None
        if status == 404:
            return "gone"
        if status != 200:
            return None
        obj = orjson.loads(raw)
        if not (obj.get("spec") or {}).get("nodeName"):
            return None
        for c in (obj.get("status") or {}).get("conditions") or ():
            if c.get("type") == "PodScheduled" and c.get("status") == "True" and c.get("lastTransitionTime"):
                return parse_rfc3339(c["lastTransitionTime"])
        return time.time()  # bound, when not said: as if just now

    async def _leader_queues(self, timeout: float) -> dict[str, dict[str, Any]] | None:
        """The leader's queues by name (``queue_figures``); {} when there is no one to ask, None when
        the leader did not answer with them."""
        if self.queue_figures is None:
            return {}
        try:
            return await asyncio.wait_for(self.queue_figures(), timeout)
        except Exception:
            return None

    def _share_verdict(self, pod: str, queue: str, figures: dict[str, dict[str, Any]]) -> tuple[bool, str]:
        """Whether the leader's figures show ``queue`` at its share for the pod (allocated + the pod's
        request above deserved in a resource the pod asks for), and what they say of it in words."""
        if queue not in figures:
            return False, f"the leader's figures, which have no queue {queue}"
        obj = self.pods.objects.get(pod)
        if obj is None:
            return False, "the leader's figures: the pod is gone from the checker's mirror"
        request = pod_requests(obj["spec"])
        exceeded = share_exceeded(request, figures[queue])
        return (True, exceeded) if exceeded else (False, share_within(request, figures[queue]))

    def pending_count(self) -> int:
        return sum(
            1
            for p in self.pods.objects.values()
            if self.ours(p)
            and not p["spec"].get("nodeName")
            and (p.get("status") or {}).get("phase") not in TERMINAL
        )

    async def run(self, stop: asyncio.Event, interval: float = 1.0) -> None:
        watched = [self.pods, self.nodes, self.groups, self.queues]
        if self.native_groups is not None:
            watched.append(self.native_groups)
        if self.config.dra:
            watched += [self.claims, self.slices]
        mirrors = [asyncio.create_task(m.run(stop)) for m in watched]
        try:
            await asyncio.gather(*(m.synced.wait() for m in watched))
            while not stop.is_set():
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(stop.wait(), interval)
                self.check()
                await self.explain_new_violations()
        finally:
            for m in mirrors:
                m.cancel()
            await asyncio.gather(*mirrors, return_exceptions=True)


#: times the fits-bound time a pod may wait in all while the leader's cycles do not reach its job
BUDGET_WAIT = 4


def parse_rfc3339(text: str) -> float:
    """Unix seconds of an RFC 3339 time as the API writes it ("2026-11-28T23:11:48Z")."""
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


#: the allocate action's words for a task its queue cannot take now (actions/allocate.py)
_AT_SHARE = re.compile(r"queue (\S+) is at its share")


def _share_figures(
    request: dict[str, Fraction], queue: dict[str, Any]
) -> list[tuple[str, float, float, float]]:
    """(resource, allocated, asked, deserved) in the queue's figures for each resource the pod asks for
    (a resource missing from deserved is deserved 0, as proportion's ``allocatable`` compares them)."""
    allocated = queue.get("allocated") or {}
    deserved = queue.get("deserved") or {}
    return [
        (name, float(allocated.get(name, 0.0)), float(asked), float(deserved.get(name, 0.0)))
        for name, asked in sorted(request.items())
        if name != "pods" and asked > 0
    ]


def share_exceeded(request: dict[str, Fraction], queue: dict[str, Any]) -> str:
    """Which resource the pod asks for that its queue's allocated plus the request takes beyond the
    queue's deserved share, in the leader's ``/debug/queues`` figures; "" when none does."""
    for name, have, asked, share in _share_figures(request, queue):
        if have + asked > share * (1 + 1e-9):
            return (
                f"the leader's queue {queue.get('name')}: {name} allocated {have:g} + {asked:g} asked"
                f" > deserved {share:g}"
            )
    return ""


def share_within(request: dict[str, Fraction], queue: dict[str, Any]) -> str:
    """The queue's figures for each resource the pod asks for, in words: what a "queue Q is at its
    share" that the figures do not bear out was up against."""
    parts = [
        f"{name} allocated {have:g} + {asked:g} asked, deserved {share:g}"
        for name, have, asked, share in _share_figures(request, queue)
    ]
    return f"the leader's queue {queue.get('name')}: " + ("; ".join(parts) or "the pod asks for nothing")


def pod_claims(
    pod: dict[str, Any], claims: dict[str, dict[str, Any]]
) -> list[tuple[str, dict[str, Any] | None]]:
    """Each `spec.resourceClaims` entry of a pod with its claim from `claims` (by namespace/name; None when it
    does not exist): named directly, or made from a template and named in `status.resourceClaimStatuses`
    (pkg/controller/resourceclaim/controller.go `handleClaim`)."""
    ns = pod["metadata"].get("namespace", "")
    made = {
        s.get("name"): s.get("resourceClaimName")
        for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []
    }
    out = []
    for entry in pod["spec"].get("resourceClaims") or []:
        name = entry.get("resourceClaimName") or made.get(entry.get("name"))
        out.append((entry.get("name", ""), claims.get(f"{ns}/{name}") if name else None))
    return out


def claim_problem(pod: dict[str, Any], claim: dict[str, Any] | None) -> str:
    """What keeps a bound pod's claim from being in place ("" when allocated and reserved for the pod)."""
    if claim is None:
        return "does not exist"
    status = claim.get("status") or {}
    if not status.get("allocation"):
        return "is not allocated"
    uid = pod["metadata"].get("uid")
    if not any(r.get("uid") == uid for r in status.get("reservedFor") or []):
        return "is not reserved for it"
    given = ((status["allocation"].get("devices") or {}).get("config")) or []
    for config in ((claim.get("spec") or {}).get("devices") or {}).get("config") or []:
        # the claim's configurations reach the driver through its allocation (kube-scheduler copies
        # them there, FromClaim)
        if not any(c.get("source") == "FromClaim" and c.get("opaque") == config.get("opaque") for c in given):
            return "is allocated without the configuration its spec gives the driver"
    return ""


def _requirement(req: dict[str, Any], values: dict[str, str]) -> bool:
    """A NodeSelectorRequirement (`In`, `NotIn`, `Exists`, `DoesNotExist`, `Gt`, `Lt`) against labels or
    fields (k8s.io/component-helpers/scheduling/corev1/nodeaffinity)."""
    key, op, wanted = req.get("key", ""), req.get("operator"), req.get("values") or []
    if op == "Exists":
        return key in values
    if op == "DoesNotExist":
        return key not in values
    if op == "NotIn":
        return values.get(key) not in wanted
    if op == "In":
        return values.get(key) in wanted
    if op in ("Gt", "Lt") and key in values and wanted:
        try:
            have, limit = int(values[key]), int(wanted[0])
        except ValueError:
            return False
        return have > limit if op == "Gt" else have < limit
    return False


Metrics = dict[str, list[tuple[dict[str, str], float]]]


def binds_bound(m: Metrics) -> float:
    """caldera_binds_total{result=bound} of one replica's scrape."""
    return sum(v for lab, v in m.get("caldera_binds_total", ()) if lab.get("result") == "bound")


def bind_counter_window(
    live_before: set[int],
    before: dict[int, Metrics | None],
    live_after: set[int],
    after: dict[int, Metrics | None],
) -> tuple[float | None, str]:
    """How much `caldera_binds_total{result=bound}` rose over a window, summed over the replicas, or None
    with the reason the window cannot tell.

    Both ends must be quiet points (see `Soak.quiet_point`): bindings answered but not yet seen by the watch,
    or seen but whose answer is still on its way to the binder, would count on one side only.
    The counter lives in a process: a replica that exits (a lost lease under load, a restart) takes its count
    with it, and one that starts in the window starts from 0. So the sum is exact only when every replica live
    at the start is still live and readable at the end; replicas that started during the window count from 0.
    A replica live at the start whose counters could not be read would count its whole life."""
    for pid in sorted(live_before):
        if before.get(pid) is None:
            return None, f"the counters of replica pid {pid} could not be read at the start of the window"
        if pid not in live_after:
            return None, f"replica pid {pid} exited during the window (its counter went with it)"
    delta = 0.0
    for pid in sorted(live_after):
        m = after.get(pid)
        if m is None:
            return None, f"the counters of replica pid {pid} could not be read at the end of the window"
        if "caldera_binds_total" not in m:
            continue
        start = before.get(pid) if pid in live_before else None
        delta += binds_bound(m) - (binds_bound(start) if start is not None else 0.0)
    return delta, ""
