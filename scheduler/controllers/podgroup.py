"""The PodGroup controller: gives every pod of ours that names no PodGroup one (after its controlling
owner, or the pod itself), removes the groups it made once no pod refers to them, and keeps their
status counts.

The one failure it must never cause: deleting a PodGroup that a live pod needs. A delete always
carries preconditions (the uid and resourceVersion of the object seen to be obsolete), so it can only
ever remove that very object; a 409 means someone changed it, and the decision is taken again from a
fresh read, never retried blindly. A newer PodGroup of the same name is never touched.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import msgspec

from caldera.cache.client import ApiClient, ApiError
from caldera.framework.model import GROUP_NAME_ANNOTATION, QUEUE_NAME_ANNOTATION
from caldera.scheduler.controllers.api import BoundedCalls
from caldera.scheduler.controllers.state import (
    MANAGED_BY,
    MANAGED_BY_LABEL,
    MIN_MEMBER_ANNOTATION,
    ControllerState,
    PgKey,
    Pod,
    PodGroup,
    controller_ref,
    generated_group_name,
    is_managed,
)
from caldera.scheduler.leader import always

log = logging.getLogger("caldera.controllers.podgroup")

API = "/apis/scheduling.volcano.sh/v1beta1"
MERGE_PATCH = "application/merge-patch+json"
_pg_decoder = msgspec.json.Decoder(PodGroup)


def podgroups_path(namespace: str, name: str = "") -> str:
    base = f"{API}/namespaces/{namespace}/podgroups"
    return f"{base}/{name}" if name else base


def min_member_of(pod: Pod) -> int:
    raw = pod.metadata.annotations.get(MIN_MEMBER_ANNOTATION)
    if raw is None:
        return 1
    try:
        value = int(raw.strip())
    except ValueError:
        value = 0
    if value < 1:
        log.warning(
            "pod %s/%s: %s=%r is not a positive integer; using 1",
            pod.metadata.namespace,
            pod.metadata.name,
            MIN_MEMBER_ANNOTATION,
            raw,
        )
        return 1
    return value


def podgroup_for(pod: Pod, name: str, default_queue: str) -> dict[str, object]:
    """The PodGroup the controller creates for ``pod`` (and the other replicas of its owner)."""
    ref = controller_ref(pod)
    if ref is not None:
        owner = {
            "apiVersion": ref.api_version,
            "kind": ref.kind,
            "name": ref.name,
            "uid": ref.uid,
            "controller": True,
        }
    else:
        owner = {
            "apiVersion": "v1",
            "kind": "Pod",
            "name": pod.metadata.name,
            "uid": pod.metadata.uid,
            "controller": True,
        }
    spec: dict[str, object] = {
        "minMember": min_member_of(pod),
        "queue": pod.metadata.annotations.get(QUEUE_NAME_ANNOTATION) or default_queue,
    }
    if pod.spec.priority_class_name:
        spec["priorityClassName"] = pod.spec.priority_class_name
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {
            "name": name,
            "namespace": pod.metadata.namespace,
            "labels": {MANAGED_BY_LABEL: MANAGED_BY},
            "ownerReferences": [owner],
        },
        "spec": spec,
        "status": {"phase": "Pending"},
    }


def _owner_uid(pod: Pod) -> str:
    ref = controller_ref(pod)
    return ref.uid if ref is not None else pod.metadata.uid


class PodGroupStats(msgspec.Struct):
    created: int = 0
    adopted: int = 0
    deleted: int = 0
    delete_conflicts: int = 0
    delete_errors: int = 0
    annotated: int = 0
    status_updates: int = 0
    refused_by_queue: int = 0


class PodGroupController:
    def __init__(
        self,
        client: ApiClient,
        state: ControllerState,
        *,
        request_concurrency: int = 8,
        timeout: float = 10.0,
        update_status: bool = True,
        may_write: Callable[[], bool] = always,
    ) -> None:
        self.client = client
        #: Off when the scheduler's own status updater writes the same fields (the binary): one writer.
        self.update_status = update_status
        self.state = state
        self.timeout = timeout
        self._call = BoundedCalls(client, request_concurrency, timeout, may_write)
        self.stats = PodGroupStats()

    async def reconcile(self, key: PgKey) -> float | None:
        """Bring one PodGroup in line with the pods that refer to it. Returns a delay after which to
        look again, or None. Raises ApiError for transient trouble (the caller backs off and retries,
        which re-derives everything from the state at that time)."""
        namespace, name = key
        pods = self.state.pods_of(key)
        pg = self.state.podgroups.get(key)
        if not pods:
            if pg is not None and is_managed(pg) and not pg.metadata.deletion_timestamp:
                await self._delete_obsolete(pg)
            return None
        if pg is not None and pg.metadata.deletion_timestamp:
            # The old one is on its way out (finalizers); the new one is made once it has gone.
            return 0.5
        if pg is None:
            template = self._template(name, pods)
            if template is None:
                return None  # someone else's group (a Volcano job's, say): not ours to create
            queue = template.metadata.annotations.get(QUEUE_NAME_ANNOTATION) or self.state.default_queue
            if not self.state.queue_admits(queue):
                self.stats.refused_by_queue += 1
                log.info(
                    "not creating PodGroup %s/%s: queue %r is not open (or does not exist)",
                    namespace,
                    name,
                    queue,
                )
                return None  # a change to the queue looks at these pods again
            pg = await self._create(template, name)
            if pg is None:
                return 0.5
        await self._annotate([p for p in pods if GROUP_NAME_ANNOTATION not in p.metadata.annotations], name)
        if self.update_status and is_managed(pg):
            await self._update_status(pg, pods)
        return None

    def _template(self, name: str, pods: list[Pod]) -> Pod | None:
        """A pod the group can be made from: an unannotated pod of ours, or one whose annotation names the
        group this controller would have made for it (its group vanished: make it again)."""
        candidates = [
            p
            for p in pods
            if self.state.is_ours(p)
            and not p.metadata.deletion_timestamp
            and generated_group_name(p) == name
            and p.metadata.annotations.get(GROUP_NAME_ANNOTATION, name) == name
        ]
        if not candidates:
            return None
        return min(candidates, key=lambda p: (p.metadata.creation_timestamp or "", p.metadata.name))

    async def _create(self, template: Pod, name: str) -> PodGroup | None:
        body = podgroup_for(template, name, self.state.default_queue)
        namespace = template.metadata.namespace
        try:
            raw = await self._call("POST", podgroups_path(namespace), body)
            self.stats.created += 1
            log.info("created PodGroup %s/%s", namespace, name)
            return _pg_decoder.decode(raw)
        except ApiError as exc:
            if exc.code != 409:
                raise
        # AlreadyExists: fine if it is the same group (ours, for the same owner) and alive.
        try:
            existing = _pg_decoder.decode(await self._call("GET", podgroups_path(namespace, name)))
        except ApiError as exc:
            if exc.code == 404:
                return None  # gone again meanwhile: look again shortly
            raise
        if existing.metadata.deletion_timestamp:
            return None
        owners = {ref.uid for ref in existing.metadata.owner_references}
        if _owner_uid(template) not in owners:
            log.warning(
                "PodGroup %s/%s exists but belongs to another owner; not using it for %s",
                namespace,
                name,
                template.metadata.name,
            )
            return None
        self.stats.adopted += 1
        return existing

    async def _annotate(self, pods: list[Pod], name: str) -> None:
        async def one(pod: Pod) -> None:
            # The uid in the patch is a precondition: a pod re-created under the same name is left alone.
            body = {"metadata": {"uid": pod.metadata.uid, "annotations": {GROUP_NAME_ANNOTATION: name}}}
            path = f"/api/v1/namespaces/{pod.metadata.namespace}/pods/{pod.metadata.name}"
            try:
                await self._call("PATCH", path, body, MERGE_PATCH)
                self.stats.annotated += 1
            except ApiError as exc:
                if exc.code in (404, 409):
                    return  # gone, or replaced: the watch brings whatever is there now
                raise

        if pods:
            await asyncio.gather(*(one(p) for p in pods))

    async def _delete_obsolete(self, pg: PodGroup) -> None:
        """Delete exactly the PodGroup object seen to be obsolete, and nothing newer."""
        namespace, name = pg.metadata.namespace, pg.metadata.name
        for _ in range(5):
            options = {
                "apiVersion": "v1",
                "kind": "DeleteOptions",
                "preconditions": {"uid": pg.metadata.uid, "resourceVersion": pg.metadata.resource_version},
            }
            try:
                await self._call("DELETE", podgroups_path(namespace, name), options)
                self.stats.deleted += 1
                log.info(
                    "deleted PodGroup %s/%s (uid %s): no pod refers to it", namespace, name, pg.metadata.uid
                )
                return
            except ApiError as exc:
                if exc.code == 404:
                    return
                if exc.code != 409:
                    self.stats.delete_errors += 1
                    raise
            # 409: it changed (or was replaced) since we looked. Read it again and decide again.
            self.stats.delete_conflicts += 1
            try:
                fresh = _pg_decoder.decode(await self._call("GET", podgroups_path(namespace, name)))
            except ApiError as exc:
                if exc.code == 404:
                    return
                raise
            if fresh.metadata.uid != pg.metadata.uid:
                log.info(
                    "PodGroup %s/%s was re-created meanwhile; leaving the new one alone", namespace, name
                )
                return
            if (
                fresh.metadata.deletion_timestamp
                or not is_managed(fresh)
                or self.state.pods_of((namespace, name))
            ):
                return
            pg = fresh
        log.warning("PodGroup %s/%s keeps changing; will look again", namespace, name)

    async def _update_status(self, pg: PodGroup, pods: list[Pod]) -> None:
        running = succeeded = failed = 0
        for pod in pods:
            phase = pod.status.phase
            if phase == "Running":
                running += 1
            elif phase == "Succeeded":
                succeeded += 1
            elif phase == "Failed":
                failed += 1
        status = pg.status
        phase = status.phase or "Pending"
        # Volcano's scheduler moves a group to Running once enough members run; do the same when it has not.
        if phase in ("Pending", "Inqueue") and running + succeeded >= max(1, pg.spec.min_member) and running:
            phase = "Running"
        if (status.running, status.succeeded, status.failed, status.phase) == (
            running,
            succeeded,
            failed,
            phase,
        ):
            return
        body = {
            "metadata": {"uid": pg.metadata.uid},
            "status": {"phase": phase, "running": running, "succeeded": succeeded, "failed": failed},
        }
        try:
            await self._call(
                "PATCH", podgroups_path(pg.metadata.namespace, pg.metadata.name), body, MERGE_PATCH
            )
            self.stats.status_updates += 1
        except ApiError as exc:
            if exc.code in (404, 409):
                return
            raise
