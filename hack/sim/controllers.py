"""The few controllers that make workloads behave: a kubelet per node, ReplicaSets and Deployments.

They work on the store directly (no HTTP, no stale caches) and react to its events, so they cost little
next to the API traffic they simulate.
"""

from __future__ import annotations

import asyncio
import hashlib
import heapq
import logging
import time
from fractions import Fraction
from typing import Any

import orjson

from .errors import ApiError
from .loop import BackgroundLoop
from .quantity import parse_quantity, pod_requests
from .resources import DEPLOYMENTS, NODES, PODS, REPLICASETS
from .selectors import match_labels_selector
from .store import DELETED, Store, WatchEvent, rfc3339

log = logging.getLogger("caldera.sim")

RUN_SECONDS_ANNOTATION = "sim.caldera.io/run-seconds"
EXIT_CODE_ANNOTATION = "sim.caldera.io/exit-code"
_HASH_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


class Kubelet(BackgroundLoop):
    """Every node's kubelet at once: starts bound pods, finishes timed ones, confirms graceful deletions."""

    task_name = "sim-kubelet"

    def __init__(
        self, store: Store, start_delay: float = 1.0, stop_delay: float | None = None, admission: bool = True
    ):
        super().__init__()
        self.store = store
        # Like a real kubelet, refuse a pod that does not fit what the node has left (phase Failed, OutOf<resource>).
        self.admission = admission
        self._used: dict[str, dict[str, Fraction]] = {}
        self._admitted: dict[str, tuple[str, dict[str, Fraction]]] = {}
        self.start_delay = start_delay
        # How long a pod takes to terminate after a graceful delete, capped by its grace period.
        self.stop_delay = start_delay if stop_delay is None else stop_delay
        self._heap: list[tuple[float, int, str, str, str, str]] = []
        self._seq = 0
        self._ip_counter = 0
        store.subscribe(PODS, self._on_pod)
        store.subscribe(NODES, self._on_node)

    def _on_node(self, ev: WatchEvent) -> None:
        if ev.type == DELETED:
            # The pod garbage collector's job: pods bound to a node that no longer exists are deleted.
            name = ev.obj["metadata"]["name"]
            self.store.defer(lambda: self._collect_orphans(name))

    def _collect_orphans(self, node_name: str) -> None:
        if self.store.get_obj(NODES, "", node_name) is not None:
            return  # re-created meanwhile
        for pod in self.store.objects(PODS):
            if pod["spec"].get("nodeName") == node_name:
                meta = pod["metadata"]
                try:
                    self.store.delete(PODS, meta["namespace"], meta["name"], {"gracePeriodSeconds": 0})
                except ApiError:
                    pass

    def _schedule(self, delay: float, action: str, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        due = time.monotonic() + max(0.0, delay)
        self._seq += 1
        heapq.heappush(self._heap, (due, self._seq, action, meta["namespace"], meta["name"], meta["uid"]))
        if self._heap[0][1] == self._seq:
            self._wake.set()

    def _on_pod(self, ev: WatchEvent) -> None:
        pod = ev.obj
        if self._admitted and pod["metadata"]["uid"] in self._admitted:
            if ev.type == DELETED or pod.get("status", {}).get("phase") in ("Succeeded", "Failed"):
                self._release(pod["metadata"]["uid"])
        if ev.type == DELETED:
            return
        node = pod["spec"].get("nodeName")
        if not node:
            return
        meta = pod["metadata"]
        prev = ev.prev
        if meta.get("deletionTimestamp"):
            if prev is None or not prev["metadata"].get("deletionTimestamp"):
                grace = meta.get("deletionGracePeriodSeconds") or 0
                self._schedule(min(float(grace), self.stop_delay), "kill", pod)
            return
        phase = pod.get("status", {}).get("phase")
        if phase == "Pending" and (prev is None or not prev["spec"].get("nodeName")):
            self._schedule(self.start_delay, "start", pod)

    async def _run(self) -> None:
        heap = self._heap
        while True:
            now = time.monotonic()
            while heap and heap[0][0] <= now:
                _due, _seq, action, ns, name, uid = heapq.heappop(heap)
                try:
                    self._act(action, ns, name, uid)
                except ApiError as exc:
                    log.debug("kubelet %s %s/%s: %s", action, ns, name, exc.message)
                except Exception:
                    log.exception("kubelet %s %s/%s failed", action, ns, name)
            self._wake.clear()
            timeout = heap[0][0] - time.monotonic() if heap else None
            try:
                async with asyncio.timeout(timeout):
                    await self._wake.wait()
            except TimeoutError:
                pass

    def _act(self, action: str, ns: str, name: str, uid: str) -> None:
        pod = self.store.get_obj(PODS, ns, name)
        if pod is None or pod["metadata"]["uid"] != uid:
            return
        if action == "kill":
            self.store.delete(PODS, ns, name, {"gracePeriodSeconds": 0})
            return
        if pod["metadata"].get("deletionTimestamp"):
            return
        status = pod.get("status") or {}
        if action == "start":
            node = self.store.get_obj(NODES, "", pod["spec"]["nodeName"])
            if node is None or status.get("phase") != "Pending" or not _node_ready(node):
                return  # no kubelet runs on a node that does not exist or is not Ready
            if self.admission:
                refusal = self._admit(pod, node)
                if refusal is not None:
                    self.store.put_status(PODS, ns, name, {**status, "phase": "Failed", **refusal})
                    return
            self.store.put_status(PODS, ns, name, self._running_status(pod, node))
            seconds = (pod["metadata"].get("annotations") or {}).get(RUN_SECONDS_ANNOTATION)
            if seconds is not None:
                try:
                    delay = float(seconds)
                except ValueError:
                    log.warning("pod %s/%s: bad %s %r", ns, name, RUN_SECONDS_ANNOTATION, seconds)
                    return
                self._schedule(delay, "finish", pod)
        elif action == "finish" and status.get("phase") == "Running":
            self.store.put_status(PODS, ns, name, self._finished_status(pod))

    def _admit(self, pod: dict[str, Any], node: dict[str, Any]) -> dict[str, str] | None:
        node_name = node["metadata"]["name"]
        try:
            wanted = pod_requests(pod["spec"])
        except ValueError as exc:
            return {"reason": "UnexpectedAdmissionError", "message": f"Pod was rejected: {exc}"}
        wanted["pods"] = Fraction(1)
        allocatable = (node.get("status") or {}).get("allocatable") or {}
        used = self._used.setdefault(node_name, {})
        for resource, amount in wanted.items():
            if amount <= 0:
                continue
            try:
                capacity = parse_quantity(allocatable.get(resource, 0))
            except ValueError:
                capacity = Fraction(0)
            in_use = used.get(resource, Fraction(0))
            if in_use + amount > capacity:
                return {
                    "reason": f"OutOf{resource}",
                    "message": f"Pod was rejected: Node didn't have enough resource: {resource}, "
                    f"requested: {_show(amount)}, used: {_show(in_use)}, capacity: {_show(capacity)}",
                }
        for resource, amount in wanted.items():
            used[resource] = used.get(resource, Fraction(0)) + amount
        self._admitted[pod["metadata"]["uid"]] = (node_name, wanted)
        return None

    def _release(self, uid: str) -> None:
        node_name, wanted = self._admitted.pop(uid)
        used = self._used.get(node_name, {})
        for resource, amount in wanted.items():
            used[resource] = used.get(resource, Fraction(0)) - amount

    def used(self, node_name: str) -> dict[str, Fraction]:
        """What the kubelet of a node has admitted and not yet released."""
        return {k: v for k, v in self._used.get(node_name, {}).items() if v}

    def _running_status(self, pod: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
        now = rfc3339()
        status = dict(pod.get("status") or {})
        host_ip = next(
            (
                a["address"]
                for a in (node.get("status") or {}).get("addresses") or ()
                if a.get("type") == "InternalIP"
            ),
            "10.0.0.1",
        )
        self._ip_counter += 1
        n = self._ip_counter
        pod_ip = f"10.{64 + (n >> 16) % 64}.{(n >> 8) & 255}.{n & 255}"
        conditions = [c for c in status.get("conditions") or () if c.get("type") == "PodScheduled"]
        for kind in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady"):
            conditions.append(
                {"type": kind, "status": "True", "lastProbeTime": None, "lastTransitionTime": now}
            )
        status.update(
            phase="Running",
            conditions=conditions,
            hostIP=host_ip,
            hostIPs=[{"ip": host_ip}],
            podIP=pod_ip,
            podIPs=[{"ip": pod_ip}],
            startTime=now,
            containerStatuses=[
                {
                    "name": c["name"],
                    "image": c.get("image", ""),
                    "imageID": "",
                    "containerID": f"containerd://{pod['metadata']['uid'].replace('-', '')}{i}",
                    "ready": True,
                    "started": True,
                    "restartCount": 0,
                    "state": {"running": {"startedAt": now}},
                }
                for i, c in enumerate(pod["spec"].get("containers") or ())
            ],
        )
        return status

    def _finished_status(self, pod: dict[str, Any]) -> dict[str, Any]:
        now = rfc3339()
        status = dict(pod.get("status") or {})
        try:
            code = int((pod["metadata"].get("annotations") or {}).get(EXIT_CODE_ANNOTATION, "0"))
        except ValueError:
            code = 1
        status["phase"] = "Succeeded" if code == 0 else "Failed"
        status["conditions"] = [
            {**c, "status": "False", "lastTransitionTime": now, "reason": "PodCompleted"}
            if c.get("type") in ("Ready", "ContainersReady", "PodReadyToStartContainers")
            else c
            for c in status.get("conditions") or ()
        ]
        status["containerStatuses"] = [
            {
                **cs,
                "ready": False,
                "started": False,
                "state": {
                    "terminated": {
                        "exitCode": code,
                        "reason": "Completed" if code == 0 else "Error",
                        "startedAt": cs.get("state", {}).get("running", {}).get("startedAt", now),
                        "finishedAt": now,
                        "containerID": cs.get("containerID", ""),
                    }
                },
            }
            for cs in status.get("containerStatuses") or ()
        ]
        return status


def _node_ready(node: dict[str, Any]) -> bool:
    conditions = (node.get("status") or {}).get("conditions")
    if not conditions:
        return True  # a bare Node object without reported conditions: treat its kubelet as up
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _show(q: Fraction) -> str:
    return str(q.numerator) if q.denominator == 1 else f"{float(q):g}"


def _pod_is_active(pod: dict[str, Any]) -> bool:
    return not pod["metadata"].get("deletionTimestamp") and pod.get("status", {}).get("phase") not in (
        "Succeeded",
        "Failed",
    )


def _pod_is_ready(pod: dict[str, Any]) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in pod.get("status", {}).get("conditions") or ()
    )


def _controller_ref(obj: dict[str, Any]) -> dict[str, Any] | None:
    for ref in obj["metadata"].get("ownerReferences") or ():
        if ref.get("controller"):
            return ref
    return None


def _owner_ref(obj: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": obj["apiVersion"],
        "kind": obj["kind"],
        "name": obj["metadata"]["name"],
        "uid": obj["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def template_hash(template: dict[str, Any]) -> str:
    digest = hashlib.sha256(orjson.dumps(template, option=orjson.OPT_SORT_KEYS)).digest()
    return "".join(_HASH_ALPHABET[b % len(_HASH_ALPHABET)] for b in digest[:10])


class WorkloadControllers(BackgroundLoop):
    """Deployment and ReplicaSet controllers, reconciling only what changed."""

    task_name = "sim-workload-controllers"

    def __init__(self, store: Store):
        super().__init__()
        self.store = store
        self._dirty_rs: set[tuple[str, str]] = set()
        self._dirty_deploy: set[tuple[str, str]] = set()
        store.subscribe(PODS, self._on_pod)
        store.subscribe(REPLICASETS, self._on_rs)
        store.subscribe(DEPLOYMENTS, self._on_deploy)

    def _mark(self, dirty: set[tuple[str, str]], ns: str, name: str) -> None:
        dirty.add((ns, name))
        if not self._wake.is_set():
            self._wake.set()

    def _on_pod(self, ev: WatchEvent) -> None:
        for pod in (ev.obj, ev.prev):
            if pod is None:
                continue
            ref = _controller_ref(pod)
            if ref is not None and ref.get("kind") == "ReplicaSet":
                self._mark(self._dirty_rs, pod["metadata"]["namespace"], ref["name"])

    def _on_rs(self, ev: WatchEvent) -> None:
        meta = ev.obj["metadata"]
        if ev.type != DELETED:
            self._mark(self._dirty_rs, meta["namespace"], meta["name"])
        ref = _controller_ref(ev.obj)
        if ref is not None and ref.get("kind") == "Deployment":
            self._mark(self._dirty_deploy, meta["namespace"], ref["name"])

    def _on_deploy(self, ev: WatchEvent) -> None:
        if ev.type != DELETED:
            meta = ev.obj["metadata"]
            self._mark(self._dirty_deploy, meta["namespace"], meta["name"])

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            # Let a burst of changes land before reconciling, like a controller's work queue.
            await asyncio.sleep(0.005)
            while self._dirty_deploy or self._dirty_rs:
                deploys, self._dirty_deploy = self._dirty_deploy, set()
                for ns, name in deploys:
                    self._guard(self._sync_deployment, ns, name)
                replicasets, self._dirty_rs = self._dirty_rs, set()
                for ns, name in replicasets:
                    self._guard(self._sync_replicaset, ns, name)

    def _owned(self, owner: dict[str, Any], res: Any) -> list[dict[str, Any]]:
        uid = owner["metadata"]["uid"]
        out = []
        for _res_id, (ns, name) in self.store.dependents(uid, res):
            obj = self.store.get_obj(res, ns, name)
            if obj is not None:
                ref = _controller_ref(obj)
                if ref is not None and ref.get("uid") == uid:
                    out.append(obj)
        return out

    def _sync_replicaset(self, ns: str, name: str) -> None:
        rs = self.store.get_obj(REPLICASETS, ns, name)
        if rs is None or rs["metadata"].get("deletionTimestamp"):
            return
        spec = rs.get("spec") or {}
        want = int(spec.get("replicas", 1))
        selects = match_labels_selector(spec.get("selector"))
        pods = [p for p in self._owned(rs, PODS) if selects(p["metadata"].get("labels"))]
        active = [p for p in pods if _pod_is_active(p)]
        if len(active) < want:
            template = spec.get("template") or {}
            tmeta = template.get("metadata") or {}
            for _ in range(want - len(active)):
                pod_meta: dict[str, Any] = {
                    "generateName": f"{name}-",
                    "namespace": ns,
                    "labels": dict(tmeta.get("labels") or {}),
                    "ownerReferences": [_owner_ref(rs)],
                }
                if tmeta.get("annotations"):
                    pod_meta["annotations"] = dict(tmeta["annotations"])
                body = {"metadata": pod_meta, "spec": orjson.loads(orjson.dumps(template.get("spec") or {}))}
                self.store.create(PODS, ns, body)
        elif len(active) > want:
            # Delete unscheduled pods first, then pending, then not ready, then the newest.
            def rank(p: dict[str, Any]) -> tuple[int, int, int, str]:
                return (
                    1 if p["spec"].get("nodeName") else 0,
                    1 if p.get("status", {}).get("phase") == "Running" else 0,
                    1 if _pod_is_ready(p) else 0,
                    "".join(chr(255 - ord(c)) for c in p["metadata"]["creationTimestamp"]),
                )

            for pod in sorted(active, key=rank)[: len(active) - want]:
                self.store.delete(
                    PODS, ns, pod["metadata"]["name"], {"preconditions": {"uid": pod["metadata"]["uid"]}}
                )
        active = [
            p for p in pods if _pod_is_active(p) and self.store.get_obj(PODS, ns, p["metadata"]["name"])
        ]
        ready = sum(1 for p in active if _pod_is_ready(p))
        status = {
            "replicas": len(active),
            "fullyLabeledReplicas": len(active),
            "readyReplicas": ready,
            "availableReplicas": ready,
            "observedGeneration": rs["metadata"].get("generation", 1),
        }
        status = {k: v for k, v in status.items() if v or k in ("replicas", "observedGeneration")}
        if rs.get("status") != status:
            self.store.put_status(REPLICASETS, ns, name, status)

    def _sync_deployment(self, ns: str, name: str) -> None:
        dep = self.store.get_obj(DEPLOYMENTS, ns, name)
        if dep is None or dep["metadata"].get("deletionTimestamp"):
            return
        spec = dep.get("spec") or {}
        want = int(spec.get("replicas", 1))
        template = spec.get("template") or {}
        hash_ = template_hash(template)
        owned = self._owned(dep, REPLICASETS)
        current = next(
            (rs for rs in owned if (rs["metadata"].get("labels") or {}).get("pod-template-hash") == hash_),
            None,
        )
        if current is None:
            labels = {**((template.get("metadata") or {}).get("labels") or {}), "pod-template-hash": hash_}
            selector = dict(spec.get("selector") or {})
            selector["matchLabels"] = {**(selector.get("matchLabels") or {}), "pod-template-hash": hash_}
            new_template = dict(template)
            new_template["metadata"] = {**(template.get("metadata") or {}), "labels": labels}
            current = self.store.create(
                REPLICASETS,
                ns,
                {
                    "metadata": {
                        "name": f"{name}-{hash_}",
                        "namespace": ns,
                        "labels": labels,
                        "annotations": {"deployment.kubernetes.io/desired-replicas": str(want)},
                        "ownerReferences": [_owner_ref(dep)],
                    },
                    "spec": {"replicas": want, "selector": selector, "template": new_template},
                },
            ).obj
        elif current["spec"].get("replicas") != want:
            current = self.store.patch(
                REPLICASETS,
                ns,
                current["metadata"]["name"],
                "application/merge-patch+json",
                {"spec": {"replicas": want}},
            ).obj
        for rs in owned:
            if (
                rs is not current
                and rs["metadata"]["uid"] != current["metadata"]["uid"]
                and rs["spec"].get("replicas")
            ):
                self.store.patch(
                    REPLICASETS,
                    ns,
                    rs["metadata"]["name"],
                    "application/merge-patch+json",
                    {"spec": {"replicas": 0}},
                )
        owned = self._owned(dep, REPLICASETS)
        replicas = sum((rs.get("status") or {}).get("replicas", 0) for rs in owned)
        ready = sum((rs.get("status") or {}).get("readyReplicas", 0) for rs in owned)
        updated = next(
            (
                (rs.get("status") or {}).get("replicas", 0)
                for rs in owned
                if rs["metadata"]["uid"] == current["metadata"]["uid"]
            ),
            0,
        )
        old = dep.get("status") or {}
        available = ready >= want
        condition = next((c for c in old.get("conditions") or () if c.get("type") == "Available"), None)
        if condition is None or (condition.get("status") == "True") != available:
            now = rfc3339()
            condition = {
                "type": "Available",
                "status": "True" if available else "False",
                "lastUpdateTime": now,
                "lastTransitionTime": now,
                "reason": "MinimumReplicasAvailable" if available else "MinimumReplicasUnavailable",
                "message": "Deployment has minimum availability."
                if available
                else "Deployment does not have minimum availability.",
            }
        status: dict[str, Any] = {
            "observedGeneration": dep["metadata"].get("generation", 1),
            "replicas": replicas,
            "updatedReplicas": updated,
            "readyReplicas": ready,
            "availableReplicas": ready,
            "unavailableReplicas": max(0, want - ready),
            "conditions": [condition],
        }
        status = {k: v for k, v in status.items() if v or k in ("observedGeneration", "conditions")}
        if old != status:
            self.store.put_status(DEPLOYMENTS, ns, name, status)
