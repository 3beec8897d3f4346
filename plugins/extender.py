"""extender: Volcano's HTTP extender protocol, Volcano's ``extender`` plugin
(pkg/scheduler/plugins/extender/extender.go; request and response shapes in argument.go).

An extender is an HTTP service that answers the session's questions. For each configured verb the
plugin POSTs a JSON request to ``extender.urlPrefix`` + ``/`` + the verb and reads the JSON answer
(``extenderPlugin.send``: any status but 200 is a failure; an answer over 10 MiB is refused, as
Volcano's ``maxBodySize``). The arguments are Volcano's (``parseExtenderConfig``):

- ``extender.urlPrefix``; ``extender.httpTimeout`` (a Go duration, default 1 s; one that does not
  parse leaves the default, as in Volcano, with one log line);
- the verbs, each optional: ``extender.onSessionOpenVerb``, ``onSessionCloseVerb``, ``predicateVerb``,
  ``prioritizeVerb``, ``preemptableVerb``, ``reclaimableVerb``, ``queueOverusedVerb``,
  ``jobEnqueueableVerb``, ``jobEnqueuedVerb``, ``jobReadyVerb``, ``allocateFuncVerb``,
  ``deallocateFuncVerb`` (all ``extender.``-prefixed);
- ``extender.ignorable``: whether a failing extender is skipped;
- ``extender.managedResources``: the resources the extender cares about; when set, a task none of
  whose containers (or init containers) requests or limits one of them is not sent
  (``IsInterested``, adapted by Volcano from kube-scheduler): predicate passes, prioritize adds
  nothing, preemptable/reclaimable abstain.

``extender.allocateFuncVerb`` and ``extender.deallocateFuncVerb`` are Volcano's event handlers
(``addEventHandler``): each allocation or pipeline of a task the extender is interested in is POSTed
to the first as ``{"task"}``, each deallocation (an allocation undone, a statement discarded, an
eviction) to the second, and the answer is ``{"errorMessage"}`` (``EventHandlerRequest`` /
``EventHandlerResponse``). An allocate answer with an ``errorMessage`` refuses the allocation (even
when ignorable, as in Volcano); so does a failed call unless ``extender.ignorable``. A refused
allocation is undone at once by the statement (``framework/statement.py``: Volcano's
``Statement.Allocate`` rolling back on ``Event.Err``), the extender is sent its deallocate, and the
task stays pending this cycle with the reason as its fit error ("... refused by extender: <the
extender's message>"). Like Volcano, an eviction in a statement sends deallocate, and an eviction
undone sends allocate (its answer unread there). A deallocate that fails is logged only.

Calls (``OnSessionOpen``): ``onSessionOpen`` first, with the session's jobs, nodes, queues and
namespaces; if it fails and the extender is not ignorable, no other callback is registered for the
session (as in Volcano). ``predicate`` per (task, node): ``{"task", "node"}`` → ``{"status": reason,
"code"}``, a non-empty reason fails the node with that reason (the code is not used). ``prioritize``
per task: ``{"task", "nodes"}`` → ``{"nodeScore": {node: score}, "errorMessage"}``, added to each
node's score. ``preemptable`` / ``reclaimable``: ``{"evictor", "evictees"}`` → ``{"status": vote,
"victims": [tasks]}``, victims matched to the candidates by ``UID``. ``jobEnqueueable``: ``{"job"}``
→ ``{"status": vote}``. ``jobEnqueued``: ``{"job"}``, the answer unread. ``queueOverused``:
``{"queue"}`` → ``{"overused"}``. ``jobReady``: ``{"job"}`` → ``{"status": bool}``.
``onSessionClose`` at close, with ``{}``.

Objects are sent as Volcano's Go JSON names them: a task ``{"UID", "Job", "Name", "Namespace",
"TaskRole", "Resreq", "InitResreq", "NodeName", "Status", "Priority", "Preemptable", "Pod"}``, a node
``{"Name", "Node", "Allocatable", "Capability", "Idle", "Used", "Releasing", "Pipelined"}``, a job
``{"UID", "Name", "Namespace", "Queue", "Priority", "MinAvailable", "PodGroup", "Tasks"}``, a queue
``{"UID", "Name", "Weight", "Queue"}``, a resource ``{"MilliCPU", "Memory", "ScalarResources"}``; the
Kubernetes objects (``Pod``, ``Node``, ``PodGroup``, ``Queue``) as the API server gives them. Task
``Status`` is Caldera's status name (``"Pending"``, ``"Running"``, ...), not Volcano's bit value.

Failures. Sessions run in a worker thread, so calls are synchronous (``urllib``, the standard
library; no proxy), each bounded by the timeout (connecting, and each read). A failed call is one
log line per verb and session. When ``extender.ignorable`` is true the extender is skipped: the
callback answers as if it were not configured (predicate passes, no score, victims and enqueue
abstain, the queue is not overused, the job is ready). Otherwise that callback fails for this cycle:
the node fails the predicate with the error, no score, victims and enqueue are rejected, the queue
counts as overused, the job is not ready. Deliberate difference: Volcano answers Permit (with no
victims) for an ignorable failure of preemptable, reclaimable and jobEnqueueable, and "not ready"
for an ignorable jobReady; "skipped" here is abstaining. Once a call fails for want of an answer
(refused, timed out), the rest of the session does not wait on the extender again: each later call
fails at once the same way. The scheduler itself never fails for an extender.

What a cycle decides with an extender is never taken over by the next cycle (allocate's memo of
vain tries): the extender may answer otherwise. Every task is its own template for the placement
caches, since the extender is asked about each task.
"""

from __future__ import annotations

import logging
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

import msgspec

from caldera.config.duration import parse_duration
from caldera.framework.callbacks import EventHandler
from caldera.framework.model import JobInfo, NodeInfo, QueueInfo, TaskInfo
from caldera.framework.objects import Container
from caldera.framework.plugin import Plugin
from caldera.framework.resource import Resource
from caldera.framework.result import Event
from caldera.framework.tier_rules import ABSTAIN, PERMIT, REJECT

if TYPE_CHECKING:
    from caldera.framework.session import Session

log = logging.getLogger("caldera.plugins.extender")

PREFIX = "extender."
URL_PREFIX = "extender.urlPrefix"
HTTP_TIMEOUT = "extender.httpTimeout"
IGNORABLE = "extender.ignorable"
MANAGED_RESOURCES = "extender.managedResources"
VERBS = (
    "onSessionOpen",
    "onSessionClose",
    "predicate",
    "prioritize",
    "preemptable",
    "reclaimable",
    "queueOverused",
    "jobEnqueueable",
    "jobEnqueued",
    "jobReady",
    "allocateFunc",
    "deallocateFunc",
)
#: Volcano's maxBodySize: 10 MiB
MAX_BODY = 10 << 20
DEFAULT_TIMEOUT = 1.0

T = TypeVar("T")

#: httpTimeout values already reported as unreadable
_reported: set[str] = set()


# -- answers (argument.go) -----------------------------------------------------------------------------
class PredicateResponse(msgspec.Struct):
    status: str = ""
    code: int = 0


class PrioritizeResponse(msgspec.Struct, rename="camel"):
    node_score: dict[str, float] | None = None
    error_message: str = ""


class _Victim(msgspec.Struct):
    UID: str = ""


class VictimsResponse(msgspec.Struct):
    status: int = 0
    victims: list[_Victim] | None = None


class VoteResponse(msgspec.Struct):
    status: int = 0


class ReadyResponse(msgspec.Struct):
    status: bool = False


class OverusedResponse(msgspec.Struct):
    overused: bool = False


class EventHandlerResponse(msgspec.Struct, rename="camel"):
    error_message: str = ""


class ExtenderError(Exception):
    """A call that failed: no answer, a status other than 200, or an answer that does not decode."""


# -- the client ------------------------------------------------------------------------------------------
#: no proxy: an extender is reached directly
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class ExtenderClient:
    """POSTs JSON to ``urlPrefix/verb`` with a timeout, synchronously (``extenderPlugin.send``)."""

    def __init__(self, url_prefix: str, timeout: float) -> None:
        self.url_prefix = url_prefix.rstrip("/")
        self.timeout = timeout

    def send(self, verb: str, payload: Any, answer: type[T] | None) -> T | None:
        url = f"{self.url_prefix}/{verb}"
        request = urllib.request.Request(
            url,
            data=msgspec.json.encode(payload),
            method="POST",
            headers={"Content-Type": "application/json"},
        )
        try:
            with _OPENER.open(request, timeout=self.timeout) as response:
                if response.status != 200:
                    raise ExtenderError(f"failed {verb} with extender at URL {url}, code {response.status}")
                if answer is None:
                    return None
                raw = response.read(MAX_BODY + 1)
        except urllib.error.HTTPError as exc:
            raise ExtenderError(f"failed {verb} with extender at URL {url}, code {exc.code}") from None
        except (OSError, ValueError) as exc:  # URLError, timeouts, resets; a malformed URL
            reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
            raise Unreachable(f"{verb} with extender at URL {url}: {reason or type(exc).__name__}") from None
        if len(raw) > MAX_BODY:
            raise ExtenderError(f"{verb} with extender at URL {url}: answer over {MAX_BODY} bytes")
        try:
            return msgspec.json.decode(raw, type=answer)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise ExtenderError(f"{verb} with extender at URL {url}: unreadable answer: {exc}") from None


class Unreachable(ExtenderError):
    """No answer at all (refused, timed out, reset)."""


# -- what is sent (Volcano's Go JSON field names) -------------------------------------------------------------
def resource_json(res: Resource | None) -> dict[str, Any]:
    res = res or Resource()
    return {"MilliCPU": res.cpu, "Memory": res.memory, "ScalarResources": dict(res.scalars) or None}


def _obj(value: Any) -> Any:
    return msgspec.to_builtins(value) if value is not None else None


def task_json(task: TaskInfo) -> dict[str, Any]:
    return {
        "UID": task.uid,
        "Job": task.job,
        "Name": task.name,
        "Namespace": task.namespace,
        "TaskRole": task.role,
        "Resreq": resource_json(task.resreq),
        "InitResreq": resource_json(task.init_resreq),
        "NodeName": task.node_name,
        "Status": task.status.name.capitalize(),
        "Priority": task.priority,
        "Preemptable": task.preemptable,
        "Pod": _obj(task.pod),
    }


def node_json(node: NodeInfo) -> dict[str, Any]:
    return {
        "Name": node.name,
        "Node": _obj(node.node),
        "Allocatable": resource_json(node.allocatable),
        "Capability": resource_json(node.allocatable),
        "Idle": resource_json(node.idle),
        "Used": resource_json(node.used),
        "Releasing": resource_json(node.releasing),
        "Pipelined": resource_json(node.pipelined),
    }


def job_json(job: JobInfo) -> dict[str, Any]:
    return {
        "UID": job.uid,
        "Name": job.name,
        "Namespace": job.namespace,
        "Queue": job.queue,
        "Priority": job.priority,
        "MinAvailable": job.min_available,
        "PodGroup": _obj(job.podgroup),
        "Tasks": {uid: task_json(t) for uid, t in job.tasks.items()},
    }


def queue_json(queue: QueueInfo) -> dict[str, Any]:
    return {"UID": queue.name, "Name": queue.name, "Weight": queue.weight, "Queue": _obj(queue.queue)}


def has_resources_in_list(managed: frozenset[str], resources: Mapping[str, Any] | None) -> bool:
    """``hasResourcesInList``: a resource of the list is managed."""
    return any(name in managed for name in resources or ())


def has_managed_resources(managed: frozenset[str], containers: Iterable[Container]) -> bool:
    """``hasManagedResources``: a container requests or limits a managed resource."""
    return any(
        has_resources_in_list(managed, c.resources.requests)
        or has_resources_in_list(managed, c.resources.limits)
        for c in containers
    )


def interested(managed: frozenset[str], task: TaskInfo) -> bool:
    """``IsInterested``: no managed resources, or a container or init container of the task's pod
    requests or limits one of them."""
    if not managed:
        return True
    pod = task.pod
    if pod is None:
        return False
    return has_managed_resources(managed, pod.spec.containers) or has_managed_resources(
        managed, pod.spec.init_containers
    )


def _vote(status: int) -> int:
    return PERMIT if status > 0 else REJECT if status < 0 else ABSTAIN


class ExtenderPlugin(Plugin):
    name: ClassVar[str] = "extender"
    arguments_schema: ClassVar[dict[str, type]] = {
        URL_PREFIX: str,
        HTTP_TIMEOUT: str,
        IGNORABLE: bool,
        MANAGED_RESOURCES: list,
        **{f"{PREFIX}{verb}Verb": str for verb in VERBS},
    }

    def __init__(self, arguments: Any) -> None:
        super().__init__(arguments)
        args = self.arguments
        self.verbs = {verb: args.str(f"{PREFIX}{verb}Verb", "") or "" for verb in VERBS}
        self.ignorable = bool(args.bool(IGNORABLE, False))
        self.managed = frozenset(str(r) for r in args.list(MANAGED_RESOURCES, []) or [])
        timeout = DEFAULT_TIMEOUT
        text = args.str(HTTP_TIMEOUT, "") or ""
        if text:
            try:
                timeout = parse_duration(text)
            except ValueError as exc:
                if text not in _reported:  # the plugin is built each session: one line per value
                    _reported.add(text)
                    log.warning(
                        "%s %r does not parse (%s): %ss used", HTTP_TIMEOUT, text, exc, DEFAULT_TIMEOUT
                    )
        self.client = ExtenderClient(args.str(URL_PREFIX, "") or "", timeout)
        #: verbs that failed this session (one log line each), and why the extender is unreachable
        self._failed: set[str] = set()
        self._unreachable: Unreachable | None = None

    # -- calls ----------------------------------------------------------------------------------------
    def call(self, verb: str, payload: Any, answer: type[T] | None) -> T | None:
        """One call of ``verb``; ExtenderError when it failed (logged once per verb and session)."""
        try:
            if self._unreachable is not None:
                raise self._unreachable
            return self.client.send(self.verbs[verb], payload, answer)
        except ExtenderError as exc:
            if isinstance(exc, Unreachable):
                self._unreachable = exc
            if verb not in self._failed:
                self._failed.add(verb)
                log.warning(
                    "extender %s failed%s: %s",
                    verb,
                    " (ignored: extender.ignorable)" if self.ignorable else "",
                    exc,
                )
            raise

    def on_session_open(self, ssn: Session) -> None:
        self.ssn = ssn
        verbs = self.verbs
        ssn.outside_answers.add(self.name)
        if verbs["onSessionOpen"]:
            snap = ssn.snapshot
            namespaces: dict[str, dict[str, Any]] = {}
            for quota in snap.resource_quotas.values():
                ns = namespaces.setdefault(
                    quota.metadata.namespace, {"Name": quota.metadata.namespace, "QuotaStatus": {}}
                )
                ns["QuotaStatus"][quota.metadata.name] = _obj(quota.status)
            payload = {
                "Jobs": {uid: job_json(j) for uid, j in ssn.jobs.items()},
                "Nodes": {name: node_json(n) for name, n in ssn.nodes.items()},
                "Queues": {name: queue_json(q) for name, q in ssn.queues.items()},
                "NamespaceInfo": namespaces,
                "RevocableNodes": {},
                "NodeList": [n.name for n in ssn.node_list],
            }
            try:
                self.call("onSessionOpen", payload, None)
            except ExtenderError:
                if not self.ignorable:
                    return
        if verbs["predicate"] or verbs["prioritize"]:
            # the extender is asked about each task: no two tasks share what placement caches
            ssn.add_template_qualifier(self.name, lambda task: task.uid.encode())
        if verbs["predicate"]:
            ssn.add_predicate_fn(self.name, self.predicate)
        if verbs["prioritize"]:
            ssn.add_batch_node_order_fn(self.name, self.prioritize)
        if verbs["preemptable"]:
            ssn.add_preemptable_fn(self.name, lambda t, c: self.victims("preemptable", t, c))
        if verbs["reclaimable"]:
            ssn.add_reclaimable_fn(self.name, lambda t, c: self.victims("reclaimable", t, c))
        if verbs["jobEnqueueable"]:
            ssn.add_job_enqueueable_fn(self.name, self.enqueueable)
        if verbs["jobEnqueued"]:
            ssn.add_job_enqueued_fn(self.name, self.enqueued)
        if verbs["queueOverused"]:
            ssn.add_overused_fn(self.name, self.overused)
        if verbs["jobReady"]:
            ssn.add_job_ready_fn(self.name, self.ready)
        if verbs["allocateFunc"] or verbs["deallocateFunc"]:
            ssn.add_event_handler(
                EventHandler(
                    allocate=self.allocated if verbs["allocateFunc"] else None,
                    deallocate=self.deallocated if verbs["deallocateFunc"] else None,
                    can_fail=bool(verbs["allocateFunc"]),
                    plugin=self.name,
                )
            )

    def on_session_close(self, ssn: Session) -> None:
        if self.verbs["onSessionClose"]:
            try:
                self.call("onSessionClose", {}, None)
            except ExtenderError:
                pass

    # -- callbacks ------------------------------------------------------------------------------------
    def predicate(self, task: TaskInfo, node: NodeInfo) -> str | None:
        if not interested(self.managed, task):
            return None
        try:
            got = self.call(
                "predicate", {"task": task_json(task), "node": node_json(node)}, PredicateResponse
            )
        except ExtenderError as exc:
            return None if self.ignorable else str(exc)
        assert got is not None
        return got.status or None

    def prioritize(self, task: TaskInfo, nodes: list[NodeInfo]) -> dict[str, float]:
        if not interested(self.managed, task):
            return {}
        payload = {"task": task_json(task), "nodes": [node_json(n) for n in nodes]}
        try:
            got = self.call("prioritize", payload, PrioritizeResponse)
        except ExtenderError:
            return {}
        assert got is not None
        if got.error_message or got.node_score is None:
            if "prioritize-answer" not in self._failed:
                self._failed.add("prioritize-answer")
                log.warning(
                    "extender prioritize answered no scores: %s", got.error_message or "nodeScore null"
                )
            return {}
        return got.node_score

    def victims(self, verb: str, actor: TaskInfo, candidates: list[TaskInfo]) -> tuple[list[TaskInfo], int]:
        if not interested(self.managed, actor):
            return [], ABSTAIN
        payload = {"evictor": task_json(actor), "evictees": [task_json(t) for t in candidates]}
        try:
            got = self.call(verb, payload, VictimsResponse)
        except ExtenderError:
            return [], ABSTAIN if self.ignorable else REJECT
        assert got is not None
        chosen = {v.UID for v in got.victims or ()}
        return [t for t in candidates if t.uid in chosen], _vote(got.status)

    def enqueueable(self, job: JobInfo) -> int:
        try:
            got = self.call("jobEnqueueable", {"job": job_json(job)}, VoteResponse)
        except ExtenderError:
            return ABSTAIN if self.ignorable else REJECT
        assert got is not None
        return _vote(got.status)

    def enqueued(self, job: JobInfo) -> None:
        try:
            self.call("jobEnqueued", {"job": job_json(job)}, None)
        except ExtenderError:
            pass

    def overused(self, queue: QueueInfo) -> bool:
        try:
            got = self.call("queueOverused", {"queue": queue_json(queue)}, OverusedResponse)
        except ExtenderError:
            return not self.ignorable
        assert got is not None
        return got.overused

    def allocated(self, event: Event) -> None:
        """Volcano's ``addEventHandler`` AllocateFunc: the extender's ``errorMessage``, or a failed
        call when not ignorable, refuses the allocation (``Event.err``)."""
        self._event("allocateFunc", event)

    def deallocated(self, event: Event) -> None:
        """Volcano's ``addEventHandler`` DeallocateFunc (what it answers changes nothing)."""
        self._event("deallocateFunc", event)

    def _event(self, verb: str, event: Event) -> None:
        task = event.task
        if not interested(self.managed, task):
            return
        try:
            got = self.call(verb, {"task": task_json(task)}, EventHandlerResponse)
        except ExtenderError as exc:
            if not self.ignorable:
                event.err = str(exc)
            return
        assert got is not None
        if got.error_message:
            event.err = got.error_message

    def ready(self, job: JobInfo) -> bool:
        try:
            got = self.call("jobReady", {"job": job_json(job)}, ReadyResponse)
        except ExtenderError:
            return self.ignorable
        assert got is not None
        return got.status


__all__ = ["ExtenderClient", "ExtenderError", "ExtenderPlugin", "interested"]
