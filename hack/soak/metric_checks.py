"""The scheduler's own metrics judged against what the API shows: the leader gauge against the Lease, the vGPU
gauges against the pods on vGPU devices, the bind counters against the bindings seen, the queues' allocated
CPU against the bound pods' requests."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

import aiohttp

from caldera.hack.sim.quantity import pod_requests
from caldera.hack.soak.checker import Checker, bind_counter_window
from caldera.hack.soak.options import Options
from caldera.hack.soak.report import Summary
from caldera.hack.soak.scrape import Metrics, debug_queues, scrape, value
from caldera.hack.soak.supervisor import Supervisor
from caldera.hack.soak.timeline import Timeline
from caldera.hack.workload.client import Api

TERMINAL_PHASES = ("Succeeded", "Failed")
#: the phases of a pod on a node whose task is Bound or Running (Volcano's getTaskStatus)
ALLOCATED_PHASES = ("Pending", "Running")
VGPU_LAG = 10.0  # seconds the vGPU gauges may trail the API outside fault windows


class MetricChecks:
    def __init__(
        self, opts: Options, supervisor: Supervisor, checker: Checker, summary: Summary, timeline: Timeline
    ) -> None:
        self.opts = opts
        self.supervisor = supervisor
        self.checker = checker
        self.summary = summary
        self.timeline = timeline
        self.leader_mismatch = 0
        #: ns/name -> since when the leader's vGPU series and the API disagree on that pod
        self.vgpu_pod_since: dict[str, float] = {}
        self.cycle_prev: dict[int, tuple[float, float]] = {}

    async def check(self, api: Api, http: aiohttp.ClientSession) -> float | None:
        """Leader gauge against the Lease; vGPU gauges against the pods on vGPU nodes (when exported).
        Returns the leader's mean cycle duration (ms) since the previous check, when known."""
        scraped = {}
        #: per replica, the API's vGPU pods (as the mirror holds them) and the time, read just before
        #: the replica is asked: what it exports had at least until then to follow them. (Read after
        #: the Lease look-ups below instead, the API had moved on by however long they took, seconds
        #: when the API is busy, and each such second counted as the scheduler's lag.)
        truth_at: dict[int, tuple[float, set[str]]] = {}
        for p in self.supervisor.live():
            before = (self.timeline.now(), set(self.vgpu_pods()))
            m = await scrape(http, p.sched.base)
            if m is not None:
                scraped[p.sched.pid] = m
                truth_at[p.sched.pid] = before
        if not scraped:
            return None
        any_m = next(iter(scraped.values()))
        if self.opts.replicas > 1:
            if "caldera_leader" in any_m:
                leader = await self.supervisor.leader(api)
                leaders = {pid for pid, m in scraped.items() if (value(m, "caldera_leader") or 0) >= 1}
                truth = {leader.sched.pid} if leader is not None and leader.sched.pid in scraped else set()
                if leader is not None and leaders != truth:
                    self.leader_mismatch += 1
                    if self.leader_mismatch >= 4:  # two seconds of lease transition are allowed
                        self.checker.violate(
                            "metrics",
                            "caldera_leader",
                            f"gauge says {sorted(leaders)}, the Lease says {sorted(truth)}",
                        )
                else:
                    self.leader_mismatch = 0
                self.note_checked("caldera_leader (against the Lease holder)")
            else:
                self.note_skipped("caldera_leader")
        leader = await self.supervisor.leader(api)
        lm = scraped.get(leader.sched.pid) if leader is not None else None
        if lm is None or leader is None:
            return None
        cycle_ms = self.mean_cycle_ms(leader.sched.pid, lm)
        if "volcano_vgpu_device_shared_number" in lm:
            # Pod by pod: a pod whose series the leader exports while the API has it on no device (or
            # the other way round) for longer than VGPU_LAG seconds plus the fault time overlapping,
            # judged against the API as it was when the leader was asked.
            # The gauges are set from the scheduler's cache, which sees a bind or a finish when the
            # watch brings it: each pod may trail the API, never for long. (Counting the series
            # against the pods instead took a steady trickle of pods each a second or two behind for
            # one mismatch that never ended.) The final check is exact.
            exported_pods = self.vgpu_exported(lm)
            asked_at, truth = truth_at[leader.sched.pid]
            stale = self.vgpu_stale(asked_at, exported_pods, truth)
            if stale:
                self.checker.violate(
                    "metrics",
                    "volcano_vgpu_device_shared_number",
                    f"pods whose vGPU series disagree with the API for over {VGPU_LAG:g}s: {stale}; "
                    + self.vgpu_diff(lm)
                    + "; the leader's cache: "
                    + await self.cache_view(http, leader.sched.base, stale[:5]),
                )
            self.note_checked("volcano_vgpu_device_* per-pod series (against vGPU pods bound)")
        else:
            self.note_skipped("volcano_vgpu_device_* (not exported by caldera-scheduler)")
        return cycle_ms

    def mean_cycle_ms(self, pid: int, m: Metrics) -> float | None:
        """A replica's mean cycle duration since its previous scrape (caldera_cycle_duration_seconds)."""
        total = value(m, "caldera_cycle_duration_seconds_sum")
        count = value(m, "caldera_cycle_duration_seconds_count")
        if total is None or count is None:
            return None
        prev = self.cycle_prev.get(pid)
        self.cycle_prev[pid] = (total, count)
        if prev is not None and count > prev[1]:
            return (total - prev[0]) / (count - prev[1]) * 1000
        return None

    def vgpu_pods(self) -> dict[str, dict[str, Any]]:
        """Pods bound, unfinished, holding vGPU slices: namespace/name -> pod."""
        out = {}
        for key, pod in self.checker.pods.objects.items():
            if not pod["spec"].get("nodeName") or (pod.get("status") or {}).get("phase") in TERMINAL_PHASES:
                continue
            for c in pod["spec"].get("containers") or []:
                if "volcano.sh/vgpu-number" in ((c.get("resources") or {}).get("limits") or {}):
                    out[key] = pod
                    break
        return out

    def vgpu_pods_bound(self) -> int:
        return len(self.vgpu_pods())

    def vgpu_stale(self, t: float, exported: set[str], truth: set[str]) -> list[str]:
        """The pods on which the exported series (``exported``) and the API (``truth``) have disagreed
        for longer than VGPU_LAG plus the fault time overlapping, as of ``t``; each is reported once
        per lag, not on every probe."""
        wrong = exported ^ truth
        since = self.vgpu_pod_since
        for key in [k for k in since if k not in wrong]:
            del since[key]
        for key in wrong:
            since.setdefault(key, t)
        stale = sorted(
            k for k, first in since.items() if t - first > VGPU_LAG + self.checker.fault_extension(first, t)
        )
        for key in stale:
            since[key] = t
        return stale

    def vgpu_exported(self, m: Metrics) -> set[str]:
        """The pods (ns/name) a replica exports per-pod vGPU series for."""
        return {
            f"{lab.get('podNamespace')}/{lab.get('podName')}"
            for lab, _ in m.get("volcano_vgpu_device_memory_allocation_for_a_certain_pod", [])
        }

    def vgpu_diff(self, m: Metrics) -> str:
        """Which pods the per-pod vGPU series and the API disagree on, and what the API says of them."""
        exported = self.vgpu_exported(m)
        truth = self.vgpu_pods()
        extra = sorted(exported - set(truth))
        missing = sorted(set(truth) - exported)
        notes = []
        for key in extra[:3]:
            pod = self.checker.pods.objects.get(key)
            if pod is None:
                notes.append(f"{key}: gone from the API")
            else:
                notes.append(
                    f"{key}: node={pod['spec'].get('nodeName')!r} phase={(pod.get('status') or {}).get('phase')}"
                    f" deleting={bool(pod['metadata'].get('deletionTimestamp'))}"
                )
        return (
            f"exported, not on a device: {extra} ({'; '.join(notes)}); on a device, not exported: {missing}"
        )

    async def cache_view(self, http: aiohttp.ClientSession, base: str, keys: list[str]) -> str:
        """What a replica's cache holds of each pod (its /debug/pods answer): tells a scheduler whose
        watch is behind (the cache still has the pod running) from gauges behind their cache."""
        out = []
        for key in keys:
            namespace, _, name = key.partition("/")
            try:
                async with http.get(
                    f"{base}/debug/pods/{namespace}/{name}", timeout=aiohttp.ClientTimeout(total=3)
                ) as r:
                    doc = await r.json(content_type=None)
            except (TimeoutError, aiohttp.ClientError, OSError, ValueError) as exc:
                out.append(f"{key}: no answer ({type(exc).__name__})")
                continue
            if not isinstance(doc, dict):
                out.append(f"{key}: unreadable answer")
            elif "error" in doc:
                out.append(f"{key}: {doc['error']}")
            else:
                out.append(f"{key}: status={doc.get('status')} node={doc.get('node')!r}")
        return "; ".join(out)

    def note_checked(self, what: str) -> None:
        if what not in self.summary.metrics_checked:
            self.summary.metrics_checked.append(what)

    def note_skipped(self, what: str) -> None:
        if what not in self.summary.metrics_skipped:
            self.summary.metrics_skipped.append(what)

    def queue_allocated_truth(self) -> tuple[dict[str, float], dict[str, float]]:
        """Millicores per queue as Volcano counts a queue's allocated resources (proportion.go's
        OnSessionOpen: the tasks in ``AllocatedStatus``, Allocated, Binding, Bound or Running, of the
        session's jobs), from the API: the pods of ours on a node, in phase Pending or Running, not
        being deleted, whose PodGroup exists. A pod being deleted is Releasing, a finished one
        Succeeded or Failed, one in phase Unknown Unknown, and a pod without its PodGroup is in no
        job of the session: none of them counts. What the API cannot show, a bind in flight
        (Binding; none once the cluster settles) and the session's pipelined tasks (counted as
        allocated: ``Statement.Pipeline`` fires ``AllocateFunc``), is left out.

        Returned with it, per queue, the unfinished pods on a node that the figure leaves out: to
        tell such pods from a metric that is wrong when the two differ."""
        counted: dict[str, float] = {}
        left_out: dict[str, float] = {}
        groups = self.checker.podgroups(fresh=True)
        for pod in self.checker.pods.objects.values():
            phase = (pod.get("status") or {}).get("phase")
            if not self.checker.ours(pod) or not pod["spec"].get("nodeName") or phase in TERMINAL_PHASES:
                continue
            group = groups.get(self.checker.group_key(pod) or "")
            allocated = phase in ALLOCATED_PHASES and not pod["metadata"].get("deletionTimestamp")
            into, queue = (
                (counted, group[1]) if allocated and group else (left_out, self.checker.queue_of(pod))
            )
            into[queue] = into.get(queue, 0.0) + float(pod_requests(pod["spec"]).get("cpu", 0)) * 1000
        return counted, left_out

    def api_groups_of(self, queue: str) -> int:
        """The PodGroups of ``queue`` that the API holds now (the checker's mirror)."""
        return sum(1 for _, q in self.checker.podgroups(fresh=True).values() if q == queue)

    async def final_queue_check(self, api: Api, timeout: float = 5.0) -> None:
        """volcano_queue_allocated_milli_cpu is set each cycle from the session; on a settling cluster it
        must come to equal Volcano's definition of it read from the API (``queue_allocated_truth``)
        plus what the leader's last cycle pipelined (``Statement.Pipeline`` fires ``AllocateFunc``:
        placed on resources still being released, which the API cannot show; the leader's
        ``/debug/queues`` lists them per queue), compared until it does, or `timeout`."""
        deadline = time.monotonic() + timeout
        diff: dict[str, tuple[float, float, float]] = {}
        cycles: list[float] = []
        seen: dict[str, LeaderQueue] = {}
        async with aiohttp.ClientSession() as http:
            while True:
                leader = await self.supervisor.safe_leader(api)
                m = await scrape(http, leader.sched.base) if leader is not None else None
                if m is None or "volcano_queue_allocated_milli_cpu" not in m:
                    self.note_skipped("volcano_queue_allocated_milli_cpu")
                    return
                seen = await leader_queues(http, leader.sched.base) if leader is not None else {}
                exported = {lab.get("queue_name", ""): v for lab, v in m["volcano_queue_allocated_milli_cpu"]}
                cycles.append(value(m, "caldera_cycle_duration_seconds_count") or 0.0)
                truth, left_out = self.queue_allocated_truth()
                diff = {}
                for q in set(exported) | set(truth):
                    piped = seen[q].pipelined_milli_cpu if q in seen else 0.0
                    if abs(exported.get(q, 0.0) - piped - truth.get(q, 0.0)) >= 1.0:
                        diff[q] = (exported.get(q, 0.0), truth.get(q, 0.0), piped)
                if not diff:
                    piped_all = sum(lq.pipelined_milli_cpu for lq in seen.values())
                    self.summary.notes.append(
                        "volcano_queue_allocated_milli_cpu equals the requests of the queue's pods that"
                        " Volcano counts as allocated (bound or running, not being deleted, in a PodGroup)"
                        f" plus the leader's pipelined tasks ({piped_all:g}m)"
                    )
                    return
                if time.monotonic() > deadline:
                    break
                await asyncio.sleep(0.5)
        # Not a violation: the gauge is the last cycle's and the cluster may not have settled (a pod
        # finished after the cycle read it); the difference is reported with the leader's own account.
        self.summary.notes.append(
            "volcano_queue_allocated_milli_cpu differs from the requests of the queue's pods Volcano counts"
            " as allocated plus the leader's pipelined tasks: "
            + "; ".join(
                f"{q}: exported {e:g}m, counted {t:g}m, pipelined {p:g}m (on nodes but not counted: being"
                f" deleted, Unknown or without a PodGroup, {left_out.get(q, 0):g}m; the API's PodGroups of"
                f" the queue {self.api_groups_of(q)}; the leader's /debug/queues: "
                f"{seen[q].text if q in seen else 'not read'})"
                for q, (e, t, p) in sorted(diff.items())
            )
            + f"; {cycles[-1] - cycles[0]:g} cycles ran in the last {timeout:g}s"
        )

    async def final_vgpu_check(self, api: Api, timeout: float = 15.0) -> None:
        """Quiet cluster: the leader's vGPU gauges must come to equal the pods on vGPU devices."""
        deadline = time.monotonic() + timeout
        exported, truth = 0.0, 0
        async with aiohttp.ClientSession() as http:
            while True:
                leader = await self.supervisor.safe_leader(api)
                m = await scrape(http, leader.sched.base) if leader is not None else None
                if m is None or "volcano_vgpu_device_shared_number" not in m:
                    return
                exported = value(m, "volcano_vgpu_device_shared_number") or 0.0
                truth = self.vgpu_pods_bound()
                if exported == truth:
                    return
                if time.monotonic() > deadline:
                    break
                await asyncio.sleep(1.0)
        self.checker.violate(
            "metrics",
            "volcano_vgpu_device_shared_number",
            f"final sum {exported:g}, vGPU pods bound {truth}; {self.vgpu_diff(m) if m else ''}",
        )

    def compare_binds(
        self,
        before: dict[int, Metrics | None],
        after: dict[int, Metrics | None],
        seen: int,
    ) -> str:
        """caldera_binds_total{result=bound} summed over the replicas rose by the `seen` bindings (scraped
        `before` and `after` a quiet window; the keys are the replicas live then). Returns "" once judged (or
        when the counter is not exported), else why this window cannot be judged."""
        if not any(m is not None and "caldera_binds_total" in m for m in after.values()):
            self.note_skipped("caldera_binds_total")
            return ""
        delta, reason = bind_counter_window(set(before), before, set(after), after)
        if delta is None:
            return reason
        self.note_checked("caldera_binds_total{result=bound} (against bindings seen, probe window)")
        if int(delta) != seen:
            self.checker.violate(
                "metrics",
                "caldera_binds_total",
                f"counters rose by {delta:g}, the API shows {seen} bindings",
            )
        return ""


@dataclass(frozen=True)
class LeaderQueue:
    """One queue as the leader's last cycle holds it (``/debug/queues``)."""

    #: the requests of the tasks it pipelined, in millicores (counted in its allocated figure)
    pipelined_milli_cpu: float
    #: its cycle, allocated and pipelined figures and jobs by phase, for the report
    text: str


async def leader_queues(http: aiohttp.ClientSession, base: str) -> dict[str, LeaderQueue]:
    """Per queue, what the leader's last cycle holds (``/debug/queues``): its pipelined tasks, and its
    cycle, allocated figure and jobs by phase, to tell a stale gauge from jobs the leader still counts."""
    cycle, queues = await debug_queues(http, base)
    return {
        name: LeaderQueue(
            float((q.get("pipelined") or {}).get("cpu", 0.0)) * 1000,
            f"cycle {cycle}, allocated {q.get('allocated')}, pipelined {q.get('pipelined')},"
            f" jobs {q.get('jobs')}",
        )
        for name, q in queues.items()
    }
