"""The simulated cluster's state: objects as plain dicts, one resourceVersion counter, bounded watch history.

Stored objects are never mutated: every write builds a new top-level dict (sharing the unchanged parts),
serialises it once with orjson, and fans the same bytes out to every watcher. A binding is one dict update
plus one fan-out.
"""

from __future__ import annotations

import asyncio
import base64
import bisect
import random
import re
import time
import uuid
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import orjson

from . import dra, podgroups, quota
from .errors import ApiError, already_exists, bad_request, conflict, invalid, not_found
from .patch import (
    APPLY_PATCH,
    JSON_PATCH,
    MERGE_PATCH,
    STRATEGIC_PATCH,
    json_patch,
    merge_patch,
    strategic_merge_patch,
)
from .quantity import parse_quantity
from .resources import (
    CLUSTER_ROLE_BINDINGS,
    CLUSTER_ROLES,
    CORE_EVENTS,
    EVENTS_V1,
    NAMESPACES,
    NATIVE_GANG,
    PODS,
    PRIORITY_CLASSES,
    RESOURCES,
    ROLE_BINDINGS,
    ROLES,
    Resource,
    by_group_version,
)
from .schema import crd_files, load_crd_schemas, prune_and_default
from .selectors import Predicate, make_filter
from .views import event_to_core, event_to_view

Key = tuple[str, str]  # (namespace or "", name)
Snapshot = tuple[list[Key], list[bytes]]  # matching keys in order, and their serialised objects
Listener = Callable[["WatchEvent"], None]

ADDED = "ADDED"
MODIFIED = "MODIFIED"
DELETED = "DELETED"

_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_NAME_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_TERMINAL = ("Succeeded", "Failed")
# Pod spec fields a real API server lets an update change, each under its own rule (ValidatePodUpdate in
# pkg/apis/core/validation/validation.go); anything else is 422.
_POD_MUTABLE_SPEC = ("activeDeadlineSeconds", "tolerations", "schedulingGates")
_POD_UPDATABLE = (
    "pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,"
    "`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),"
    "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)"
)
# The regular expression a real server names when a quantity does not parse (k8s.io/apimachinery
# pkg/api/resource/quantity.go, ErrFormatWrong).
_QUANTITY_FORMAT = (
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
)
# DefaultTolerationSeconds admission (plugin/pkg/admission/defaulttolerationseconds): every pod tolerates a
# not-ready or unreachable node for 300 s unless it already tolerates those taints.
_DEFAULT_TOLERATIONS = (
    {
        "key": "node.kubernetes.io/not-ready",
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": 300,
    },
    {
        "key": "node.kubernetes.io/unreachable",
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": 300,
    },
)
_RBAC = "rbac.authorization.k8s.io"

_ts_cache: tuple[int, str] = (0, "")


def rfc3339(t: float | None = None) -> str:
    global _ts_cache
    sec = int(time.time() if t is None else t)
    if _ts_cache[0] != sec:
        _ts_cache = (sec, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(sec)))
    return _ts_cache[1]


def stored_json(obj: Any) -> bytes:
    """``orjson.dumps(obj)`` in a bytes object of its own length, for bytes the store keeps (an object's
    current JSON and its watch history). orjson hands back its whole output buffer: a 1.9 KB pod held
    8 KiB of memory (measured by RSS over 100,000 of them, orjson 3.13), which made the simulator's
    memory per pod 4 times its JSON's size. The copy costs a microsecond per write."""
    return bytes(memoryview(orjson.dumps(obj)))


class Entry:
    __slots__ = ("obj", "raw")

    def __init__(self, obj: dict[str, Any], raw: bytes):
        self.obj = obj
        self.raw = raw


class WatchEvent:
    __slots__ = ("_line", "obj", "prev", "raw", "rv", "type")

    def __init__(self, rv: int, type_: str, obj: dict[str, Any], prev: dict[str, Any] | None, raw: bytes):
        self.rv = rv
        self.type = type_
        self.obj = obj
        self.prev = prev
        self.raw = raw
        self._line: bytes | None = None

    @property
    def line(self) -> bytes:
        """The event as a watch stream's line, made once for all the watchers it is offered to
        (``forget_line`` after them: history keeps the object's bytes only, not a second copy)."""
        if self._line is None:
            self._line = event_line(self.type, self.raw)
        return self._line

    def forget_line(self) -> None:
        self._line = None


def event_line(type_: str, raw: bytes) -> bytes:
    return b'{"type":"' + type_.encode() + b'","object":' + raw + b"}\n"


class Watcher:
    """One watch stream's buffer: the store pushes ready-made JSON lines, the server drains them."""

    __slots__ = ("bookmarks", "closed", "lines", "max_lines", "predicate", "render", "resource", "wake")

    def __init__(
        self,
        resource: Resource,
        predicate: Predicate | None,
        bookmarks: bool,
        max_lines: int,
        render: Callable[[dict[str, Any]], bytes] | None = None,
    ):
        self.resource = resource
        # For a view of another kind's storage: how to serialise a stored object as this kind.
        self.render = render
        self.predicate = predicate
        self.bookmarks = bookmarks
        self.lines: list[bytes] = []
        self.wake = asyncio.Event()
        self.closed = False
        self.max_lines = max_lines

    def push(self, line: bytes) -> None:
        if self.closed:
            return
        self.lines.append(line)
        if len(self.lines) > self.max_lines:
            # A consumer this far behind is cut off, as a real server does; it resumes from its last version.
            self.lines.clear()
            self.close()
        elif not self.wake.is_set():
            self.wake.set()

    def offer(self, ev: WatchEvent) -> None:
        if self.render is not None:
            self._offer_rendered(ev)
            return
        p = self.predicate
        if p is None:
            self.push(ev.line)
            return
        now_matches = p(ev.obj)
        if ev.type == DELETED:
            if now_matches:
                self.push(ev.line)
            return
        matched_before = ev.prev is not None and p(ev.prev)
        if now_matches:
            self.push(ev.line if matched_before or ev.type == ADDED else event_line(ADDED, ev.raw))
        elif matched_before:
            self.push(event_line(DELETED, ev.raw))

    def _offer_rendered(self, ev: WatchEvent) -> None:
        assert self.render is not None
        p = self.predicate
        now_matches = p is None or p(ev.obj)
        matched_before = ev.prev is not None and (p is None or p(ev.prev))
        if ev.type == DELETED:
            type_ = DELETED if now_matches else None
        elif now_matches:
            type_ = ev.type if matched_before or ev.type == ADDED else ADDED
        else:
            type_ = DELETED if matched_before else None
        if type_ is not None:
            self.push(event_line(type_, self.render(ev.obj)))

    def close(self) -> None:
        self.closed = True
        self.wake.set()


class KindStore:
    __slots__ = ("history", "history_size", "horizon", "objects", "res", "watchers")

    def __init__(self, res: Resource, history_size: int):
        self.res = res
        self.objects: dict[Key, Entry] = {}
        self.history: deque[WatchEvent] = deque()
        self.history_size = history_size
        # Watches from a resourceVersion below this answer 410 Gone: their events are no longer kept.
        self.horizon = 0
        self.watchers: set[Watcher] = set()


def _encode_continue(rv: int, key: Key) -> str:
    return base64.urlsafe_b64encode(orjson.dumps({"rv": rv, "start": list(key)})).decode()


def _decode_continue(token: str) -> tuple[int, Key]:
    try:
        data = orjson.loads(base64.urlsafe_b64decode(token.encode()))
        return int(data["rv"]), (str(data["start"][0]), str(data["start"][1]))
    except Exception as exc:
        raise bad_request(f"continue key is not valid: {exc}") from exc


def qos_class(spec: dict[str, Any]) -> str:
    requests_seen = limits_seen = False
    guaranteed = True
    for c in (spec.get("containers") or []) + (spec.get("initContainers") or []):
        res = c.get("resources") or {}
        req, lim = res.get("requests") or {}, res.get("limits") or {}
        requests_seen = requests_seen or bool(req)
        limits_seen = limits_seen or bool(lim)
        for name in ("cpu", "memory"):
            if name not in lim or req.get(name, lim[name]) != lim[name]:
                guaranteed = False
    if not requests_seen and not limits_seen:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


_PROTECTED_NAMESPACES = ("default", "kube-system", "kube-public")
_LABEL_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")


def _label_key_problem(key: str) -> str | None:
    prefix, slash, name = key.rpartition("/")
    if slash and (not prefix or len(prefix) > 253 or not _SUBDOMAIN.match(prefix)):
        return "prefix part must be a lowercase RFC 1123 subdomain"
    if not name or len(name) > 63 or not _LABEL_NAME.match(name):
        return (
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
            "with an alphanumeric character (at most 63 characters)"
        )
    return None


def _validate_metadata(res: Resource, name: str, meta: dict[str, Any]) -> None:
    """The checks on labels and annotations a real server makes, with its 400 and 422 answers."""
    for field in ("labels", "annotations"):
        values = meta.get(field)
        if values is None:
            continue
        if not isinstance(values, dict) or not all(isinstance(v, str) for v in values.values()):
            raise bad_request(
                f"json: cannot unmarshal into Go struct field ObjectMeta.metadata.{field} of type string"
            )
        for key, value in values.items():
            problem = _label_key_problem(key)
            if problem is not None:
                raise invalid(
                    res.kind,
                    name,
                    [(f"metadata.{field}", "FieldValueInvalid", f'Invalid value: "{key}": {problem}')],
                    res.group,
                )
            if field == "labels" and value and (len(value) > 63 or not _LABEL_NAME.match(value)):
                raise invalid(
                    res.kind,
                    name,
                    [
                        (
                            "metadata.labels",
                            "FieldValueInvalid",
                            f'Invalid value: "{value}": a valid label must be an empty string or consist of '
                            "alphanumeric characters, '-', '_' or '.' (at most 63 characters)",
                        )
                    ],
                    res.group,
                )


def _check_native_podgroup(name: str, spec: dict[str, Any]) -> None:
    """A ``scheduling.k8s.io/v1alpha2`` PodGroup's spec as types.go declares it: the policy is
    exactly one of ``basic`` and ``gang`` with ``gang.minCount`` at least 1
    (``PodGroupSchedulingPolicy``, a union); ``disruptionMode`` is ``Pod`` or ``PodGroup``
    (``DisruptionMode``, an enum); ``resourceClaims`` (``PodGroupResourceClaim``, at most 4, keyed by
    name) each name a DNS label and exactly one of ``resourceClaimName`` and
    ``resourceClaimTemplateName``."""
    causes: list[tuple[str, str, str]] = []
    policy = spec.get("schedulingPolicy") or {}
    chosen = [k for k in ("basic", "gang") if policy.get(k) is not None]
    if len(chosen) != 1:
        causes.append(
            (
                "spec.schedulingPolicy",
                "FieldValueInvalid",
                "Invalid value: must specify exactly one of: `basic`, `gang`",
            )
        )
    elif chosen == ["gang"]:
        count = policy["gang"].get("minCount")
        if not isinstance(count, int) or count < 1:
            causes.append(
                (
                    "spec.schedulingPolicy.gang.minCount",
                    "FieldValueInvalid",
                    f"Invalid value: {count}: must be greater than or equal to 1",
                )
            )
    mode = spec.get("disruptionMode")
    if mode is not None and mode not in ("Pod", "PodGroup"):
        causes.append(
            (
                "spec.disruptionMode",
                "FieldValueNotSupported",
                f'Unsupported value: "{mode}": supported values: "Pod", "PodGroup"',
            )
        )
    claims = spec.get("resourceClaims")
    if claims is not None:
        if not isinstance(claims, list):
            claims = []
            causes.append(("spec.resourceClaims", "FieldValueTypeInvalid", "Invalid value: must be a list"))
        if len(claims) > 4:
            causes.append(
                (
                    "spec.resourceClaims",
                    "FieldValueTooMany",
                    f"Too many: {len(claims)}: must have at most 4 items",
                )
            )
        seen: set[str] = set()
        for i, claim in enumerate(claims):
            where = f"spec.resourceClaims[{i}]"
            claim = claim if isinstance(claim, dict) else {}
            entry = claim.get("name")
            if not entry:
                causes.append((f"{where}.name", "FieldValueRequired", "Required value"))
            elif not isinstance(entry, str) or not _LABEL.match(entry) or len(entry) > 63:
                causes.append(
                    (
                        f"{where}.name",
                        "FieldValueInvalid",
                        f'Invalid value: "{entry}": a lowercase RFC 1123 label must consist of lower case '
                        "alphanumeric characters or '-', and must start and end with an alphanumeric character",
                    )
                )
            elif entry in seen:
                causes.append((f"{where}", "FieldValueDuplicate", f'Duplicate value: {{"name":"{entry}"}}'))
            else:
                seen.add(entry)
            sources = [k for k in ("resourceClaimName", "resourceClaimTemplateName") if claim.get(k)]
            if len(sources) != 1:
                causes.append(
                    (
                        where,
                        "FieldValueInvalid",
                        "Invalid value: must specify exactly one of: `resourceClaimName`, "
                        "`resourceClaimTemplateName`",
                    )
                )
    if causes:
        raise invalid("PodGroup", name, causes)


def _default_requests(container: dict[str, Any]) -> dict[str, Any]:
    """API server defaulting: a resource with a limit and no request is requested at its limit."""
    resources = container.get("resources") or {}
    limits = resources.get("limits")
    if not limits:
        return container
    requests = dict(resources.get("requests") or {})
    missing = {k: v for k, v in limits.items() if k not in requests}
    if not missing:
        return container
    requests.update(missing)
    return {**container, "resources": {**resources, "requests": requests}}


def _check_quantities(name: str, spec: dict[str, Any]) -> None:
    """Requests and limits must parse (else 400, at decoding) and not be negative (else 422), as in
    ValidateResourceRequirements / ValidateNonnegativeQuantity (pkg/apis/core/validation/validation.go)."""
    places: list[tuple[str, Any]] = []
    for group in ("initContainers", "containers"):
        for i, c in enumerate(spec.get(group) or ()):
            resources = (c.get("resources") or {}) if isinstance(c, dict) else {}
            for kind in ("limits", "requests"):
                for res_name, q in (resources.get(kind) or {}).items():
                    places.append((f"spec.{group}[{i}].resources.{kind}[{res_name}]", q))
    for res_name, q in (spec.get("overhead") or {}).items():
        places.append((f"spec.overhead[{res_name}]", q))
    for where, q in places:
        try:
            value = parse_quantity(q)
        except ValueError:
            raise bad_request(f'Pod in version "v1" cannot be handled as a Pod: {_QUANTITY_FORMAT}') from None
        if value < 0:
            raise invalid(
                "Pod",
                name,
                [(where, "FieldValueInvalid", f'Invalid value: "{q}": must be greater than or equal to 0')],
            )


def _default_tolerations(spec: dict[str, Any]) -> None:
    tolerations = list(spec.get("tolerations") or ())
    for default in _DEFAULT_TOLERATIONS:
        if not any(
            t.get("key", "") in ("", default["key"]) and t.get("effect", "") in ("", "NoExecute")
            for t in tolerations
        ):
            tolerations.append(dict(default))
    spec["tolerations"] = tolerations


def _check_rbac(res: Resource, name: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
    """The checks of pkg/apis/rbac/validation (ValidatePolicyRule, ValidateRoleBinding...) the simulator makes."""
    if res is ROLES or res is CLUSTER_ROLES:
        rules = obj.get("rules") or []
        if not isinstance(rules, list):
            raise bad_request(
                f"json: cannot unmarshal into Go struct field {res.kind}.rules of type []v1.PolicyRule"
            )
        for i, rule in enumerate(rules):
            field = f"rules[{i}]"
            if not isinstance(rule, dict):
                raise bad_request(
                    f"json: cannot unmarshal into Go struct field {res.kind}.{field} of type v1.PolicyRule"
                )
            problem: tuple[str, str, str] | None = None
            if not rule.get("verbs"):
                problem = (
                    f"{field}.verbs",
                    "FieldValueRequired",
                    "Required value: verbs must contain at least one value",
                )
            elif rule.get("nonResourceURLs"):
                if res is ROLES:
                    problem = (
                        f"{field}.nonResourceURLs",
                        "FieldValueInvalid",
                        f"Invalid value: {orjson.dumps(rule['nonResourceURLs']).decode()}: "
                        "namespaced rules cannot apply to non-resource URLs",
                    )
                elif rule.get("apiGroups") or rule.get("resources") or rule.get("resourceNames"):
                    problem = (
                        f"{field}.nonResourceURLs",
                        "FieldValueInvalid",
                        f"Invalid value: {orjson.dumps(rule['nonResourceURLs']).decode()}: "
                        "rules cannot apply to both regular resources and non-resource URLs",
                    )
            elif not rule.get("apiGroups"):
                problem = (
                    f"{field}.apiGroups",
                    "FieldValueRequired",
                    "Required value: resource rules must supply at least one api group",
                )
            elif not rule.get("resources"):
                problem = (
                    f"{field}.resources",
                    "FieldValueRequired",
                    "Required value: resource rules must supply at least one resource",
                )
            if problem is not None:
                raise invalid(res.kind, name, [problem], _RBAC)
        return
    ref = obj.get("roleRef") or {}
    kinds = ("ClusterRole",) if res is CLUSTER_ROLE_BINDINGS else ("Role", "ClusterRole")
    if ref.get("kind") not in kinds:
        supported = ", ".join(f'"{k}"' for k in kinds)
        raise invalid(
            res.kind,
            name,
            [
                (
                    "roleRef.kind",
                    "FieldValueNotSupported",
                    f'Unsupported value: "{ref.get("kind", "")}": supported values: {supported}',
                )
            ],
            _RBAC,
        )
    if not ref.get("name"):
        raise invalid(res.kind, name, [("roleRef.name", "FieldValueRequired", "Required value")], _RBAC)
    if ref.get("apiGroup") != _RBAC:
        raise invalid(
            res.kind,
            name,
            [
                (
                    "roleRef.apiGroup",
                    "FieldValueNotSupported",
                    f'Unsupported value: "{ref.get("apiGroup", "")}": supported values: "{_RBAC}"',
                )
            ],
            _RBAC,
        )
    for i, subject in enumerate(obj.get("subjects") or ()):
        kind = (subject or {}).get("kind")
        if kind not in ("ServiceAccount", "User", "Group"):
            raise invalid(
                res.kind,
                name,
                [
                    (
                        f"subjects[{i}].kind",
                        "FieldValueNotSupported",
                        f'Unsupported value: "{kind}": supported values: "Group", "ServiceAccount", "User"',
                    )
                ],
                _RBAC,
            )
        if kind == "ServiceAccount" and res is CLUSTER_ROLE_BINDINGS and not subject.get("namespace"):
            raise invalid(
                res.kind, name, [(f"subjects[{i}].namespace", "FieldValueRequired", "Required value")], _RBAC
            )
    if old is not None and (old.get("roleRef") or {}) != ref:
        raise invalid(
            res.kind,
            name,
            [
                (
                    "roleRef",
                    "FieldValueInvalid",
                    f"Invalid value: {orjson.dumps(ref).decode()}: cannot change roleRef",
                )
            ],
            _RBAC,
        )


_RBAC_KINDS = frozenset({ROLES.id, CLUSTER_ROLES.id, ROLE_BINDINGS.id, CLUSTER_ROLE_BINDINGS.id})


class Store:
    def __init__(
        self,
        history_size: int = 10_000,
        seed: int | None = None,
        watch_buffer_lines: int = 200_000,
        crd_dir: str | None = None,
        native_gang: bool = False,
    ):
        self.rv = 0
        #: Kubernetes' own gang API (scheduling.k8s.io/v1alpha2) served, as with GenericWorkload on
        self.native_gang = native_gang
        served = (*RESOURCES, *NATIVE_GANG) if native_gang else RESOURCES
        self.served = by_group_version(served)
        # Structural schemas of the custom resources (plural.group -> openAPIV3Schema), from deploy/crds.
        self.schemas: dict[str, dict[str, Any]] = _schemas(crd_dir)
        self.kinds: dict[str, KindStore] = {r.id: KindStore(r, history_size) for r in served}
        # view id -> (stored resource, to storage form, to view form)
        self.views: dict[
            str, tuple[Resource, Callable[[Any], Any], Callable[[dict[str, Any]], dict[str, Any]]]
        ] = {EVENTS_V1.id: (CORE_EVENTS, event_to_core, event_to_view)}
        for view_id, (stored, _to, _from) in self.views.items():
            self.kinds[view_id] = self.kinds[stored.id]
        self.listeners: dict[str, list[Listener]] = {}
        self.owners: dict[str, set[tuple[str, Key]]] = {}
        self.uids: dict[str, tuple[str, Key]] = {}
        self.rng = random.Random(seed)
        self.watch_buffer_lines = watch_buffer_lines
        # How deferred work (garbage collection, namespace finalisation) is run; the cluster sets loop.call_soon.
        self.defer: Callable[[Callable[[], None]], Any] = lambda fn: fn()
        self.bindings = 0
        self._snapshots: OrderedDict[tuple[Any, ...], tuple[list[Key], list[bytes]]] = OrderedDict()

    # ---- plumbing -------------------------------------------------------------------------------------

    def kind(self, res: Resource) -> KindStore:
        return self.kinds[res.id]

    def _filter(
        self, res: Resource, namespace: str | None, label_selector: str | None, field_selector: str | None
    ) -> Predicate | None:
        predicate = make_filter(res, namespace if res.namespaced else None, label_selector, field_selector)
        view = self.views.get(res.id)
        if view is None or predicate is None:
            return predicate
        to_view = view[2]
        inner = predicate
        return lambda obj: inner(to_view(obj))

    def _render(self, res: Resource) -> Callable[[dict[str, Any]], bytes] | None:
        view = self.views.get(res.id)
        if view is None:
            return None
        to_view = view[2]
        return lambda obj: orjson.dumps(to_view(obj))

    def _as_view(self, res: Resource, entry: Entry) -> Entry:
        view = self.views.get(res.id)
        if view is None:
            return entry
        obj = view[2](entry.obj)
        return Entry(obj, orjson.dumps(obj))

    def subscribe(self, res: Resource, listener: Listener) -> None:
        self.listeners.setdefault(res.id, []).append(listener)

    def _uid(self) -> str:
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

    def _commit(
        self, ks: KindStore, type_: str, key: Key, obj: dict[str, Any], prev: dict[str, Any] | None
    ) -> WatchEvent:
        self.rv += 1
        rv = self.rv
        obj["metadata"]["resourceVersion"] = str(rv)
        raw = stored_json(obj)
        if type_ == DELETED:
            ks.objects.pop(key, None)
        else:
            ks.objects[key] = Entry(obj, raw)
        ev = WatchEvent(rv, type_, obj, prev, raw)
        history = ks.history
        history.append(ev)
        if len(history) > ks.history_size:
            ks.horizon = history.popleft().rv
        for w in ks.watchers:
            w.offer(ev)
        ev.forget_line()
        self._index(ks, type_, key, obj, prev)
        for listener in self.listeners.get(ks.res.id, ()):
            listener(ev)
        return ev

    def _index(
        self, ks: KindStore, type_: str, key: Key, obj: dict[str, Any], prev: dict[str, Any] | None
    ) -> None:
        meta = obj["metadata"]
        if type_ == ADDED:
            self.uids[meta["uid"]] = (ks.res.id, key)
        elif type_ == DELETED:
            self.uids.pop(meta.get("uid", ""), None)
        old_refs = prev["metadata"].get("ownerReferences") if prev is not None else None
        new_refs = meta.get("ownerReferences") if type_ != DELETED else None
        if old_refs is new_refs:
            return
        ref = (ks.res.id, key)
        for o in old_refs or ():
            deps = self.owners.get(o.get("uid", ""))
            if deps is not None:
                deps.discard(ref)
                if not deps:
                    del self.owners[o["uid"]]
        for o in new_refs or ():
            self.owners.setdefault(o.get("uid", ""), set()).add(ref)

    def _entry(self, res: Resource, namespace: str, name: str) -> tuple[KindStore, Key, Entry]:
        ks = self.kinds[res.id]
        key = (namespace if res.namespaced else "", name)
        entry = ks.objects.get(key)
        if entry is None:
            raise not_found(res.plural, name, res.group)
        return ks, key, entry

    def compact(self) -> None:
        """Forget all watch history: every watch from an earlier resourceVersion now answers 410."""
        for ks in self.kinds.values():
            ks.history.clear()
            ks.horizon = self.rv

    def drop_watches(self) -> int:
        count = 0
        for ks in self.kinds.values():
            for w in list(ks.watchers):
                w.close()
                count += 1
            ks.watchers.clear()
        return count

    def set_history_size(self, size: int) -> None:
        for ks in self.kinds.values():
            ks.history_size = size
            while len(ks.history) > size:
                ks.horizon = ks.history.popleft().rv

    # ---- reads ----------------------------------------------------------------------------------------

    def get(self, res: Resource, namespace: str, name: str) -> Entry:
        return self._as_view(res, self._entry(res, namespace, name)[2])

    def get_obj(self, res: Resource, namespace: str, name: str) -> dict[str, Any] | None:
        entry = self.kinds[res.id].objects.get((namespace if res.namespaced else "", name))
        if entry is None:
            return None
        return self._as_view(res, entry).obj if res.id in self.views else entry.obj

    def objects(self, res: Resource, namespace: str | None = None) -> list[dict[str, Any]]:
        items = self.kinds[res.id].objects.items()
        found = [e.obj for (ns, _n), e in items if namespace is None or ns == namespace]
        view = self.views.get(res.id)
        return [view[2](o) for o in found] if view is not None else found

    def list(
        self,
        res: Resource,
        namespace: str | None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int = 0,
        continue_token: str | None = None,
    ) -> tuple[list[bytes], int, str | None, int | None]:
        """Items (serialised), the list's resourceVersion, the continue token, remainingItemCount.

        Pages after the first come from a snapshot taken by the first, so a paginated list is consistent
        at its resourceVersion, as etcd makes it; a token older than the kept history answers 410.
        """
        ks = self.kinds[res.id]
        scope = namespace if res.namespaced else None
        predicate = self._filter(res, scope, label_selector, field_selector)
        render = self._render(res)
        snapshot_id = (res.id, scope, label_selector, field_selector)
        start_index = 0
        snapshot: tuple[list[Key], list[bytes]] | None = None
        if continue_token:
            list_rv, start = _decode_continue(continue_token)
            if list_rv < ks.horizon:
                raise ApiError(
                    410,
                    "Expired",
                    "The provided continue parameter is too old to display a consistent list result. "
                    "You can start a new list without the continue parameter.",
                )
            snapshot = self._snapshots.get((*snapshot_id, list_rv))
            if snapshot is None:  # forgotten: continue from the current state
                snapshot = self._matching(ks, predicate, render)
            start_index = bisect.bisect_right(snapshot[0], start)
        else:
            list_rv = self.rv
            snapshot = self._matching(ks, predicate, render)
        keys, raws = snapshot
        end = min(len(raws), start_index + limit) if limit else len(raws)
        items = raws[start_index:end]
        more = end < len(raws)
        token = _encode_continue(list_rv, keys[end - 1]) if more and end > start_index else None
        snapshots = self._snapshots
        if more:
            snapshots[(*snapshot_id, list_rv)] = snapshot
            snapshots.move_to_end((*snapshot_id, list_rv))
            while len(snapshots) > 128:
                snapshots.popitem(last=False)
        else:
            snapshots.pop((*snapshot_id, list_rv), None)
        remaining = len(raws) - end if more and not label_selector and not field_selector else None
        return items, list_rv, token, remaining

    @staticmethod
    def _matching(
        ks: KindStore, predicate: Predicate | None, render: Callable[[dict[str, Any]], bytes] | None = None
    ) -> Snapshot:
        objects = ks.objects
        keys = sorted(objects)
        if predicate is not None:
            keys = [k for k in keys if predicate(objects[k].obj)]
        if render is not None:
            return keys, [render(objects[k].obj) for k in keys]
        return keys, [objects[k].raw for k in keys]

    def watch(
        self,
        res: Resource,
        namespace: str | None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        resource_version: str | None = None,
        allow_bookmarks: bool = False,
        send_initial_events: bool = False,
    ) -> Watcher:
        """Register a watcher with its replay already buffered; no await happens between the two."""
        ks = self.kinds[res.id]
        predicate = self._filter(res, namespace, label_selector, field_selector)
        render = self._render(res)
        w = Watcher(res, predicate, allow_bookmarks, self.watch_buffer_lines, render)
        if resource_version not in (None, "", "0") and not send_initial_events:
            try:
                since = int(resource_version)  # type: ignore[arg-type]
            except ValueError as exc:
                raise bad_request(f"invalid resource version: {resource_version}") from exc
            if since > self.rv:
                # A version this server never issued (e.g. from before a restart): the client must re-list.
                w.push(
                    event_line(
                        "ERROR",
                        ApiError(
                            504,
                            "Timeout",
                            f"Too large resource version: {since}, current: {self.rv}",
                            {
                                "causes": [
                                    {
                                        "reason": "ResourceVersionTooLarge",
                                        "message": "Too large resource version",
                                    }
                                ],
                                "retryAfterSeconds": 1,
                            },
                        ).body(),
                    )
                )
                w.close()
                return w
            if since < ks.horizon:
                w.push(
                    event_line(
                        "ERROR",
                        ApiError(410, "Expired", f"too old resource version: {since} ({ks.horizon})").body(),
                    )
                )
                w.close()
                return w
            replay: list[WatchEvent] = []
            for ev in reversed(ks.history):
                if ev.rv <= since:
                    break
                replay.append(ev)
            for ev in reversed(replay):
                w.offer(ev)
                ev.forget_line()
        else:
            objects = ks.objects
            for k in sorted(objects):
                entry = objects[k]
                if predicate is None or predicate(entry.obj):
                    w.push(event_line(ADDED, entry.raw if render is None else render(entry.obj)))
            if send_initial_events and allow_bookmarks:
                w.push(self.bookmark_line(res, initial_events_end=True))
        ks.watchers.add(w)
        return w

    def unwatch(self, w: Watcher) -> None:
        self.kinds[w.resource.id].watchers.discard(w)

    def bookmark_line(self, res: Resource, initial_events_end: bool = False) -> bytes:
        meta: dict[str, Any] = {"resourceVersion": str(self.rv)}
        if initial_events_end:
            meta["annotations"] = {"k8s.io/initial-events-end": "true"}
        return event_line(
            "BOOKMARK", orjson.dumps({"kind": res.kind, "apiVersion": res.api_version, "metadata": meta})
        )

    # ---- writes ---------------------------------------------------------------------------------------

    def create(self, res: Resource, namespace: str, body: Any) -> Entry:
        view = self.views.get(res.id)
        if view is not None:
            return self._as_view(res, self.create(view[0], namespace, view[1](body)))
        if not isinstance(body, dict):
            raise bad_request("the body of the request is not a JSON object")
        ks = self.kinds[res.id]
        meta = dict(body.get("metadata") or {})
        if res.namespaced:
            if meta.get("namespace") and meta["namespace"] != namespace:
                raise bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request"
                )
            meta["namespace"] = namespace
            self._check_namespace_open(res, namespace, meta.get("name") or meta.get("generateName", ""))
        else:
            meta.pop("namespace", None)
        name: str = meta.get("name") or ""
        if not name:
            prefix = meta.get("generateName")
            if not prefix:
                raise invalid(
                    res.kind,
                    "",
                    [
                        (
                            "metadata.name",
                            "FieldValueRequired",
                            "Required value: name or generateName is required",
                        )
                    ],
                    res.group,
                )
            for _ in range(8):
                name = prefix + "".join(self.rng.choice(_NAME_SUFFIX_ALPHABET) for _ in range(5))
                if (namespace if res.namespaced else "", name) not in ks.objects:
                    break
            meta["name"] = name
        self._validate_name(res, name)
        _validate_metadata(res, name, meta)
        key = (namespace if res.namespaced else "", name)
        if key in ks.objects:
            raise already_exists(res.plural, name, res.group)
        for transient in (
            "resourceVersion",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "managedFields",
        ):
            meta.pop(transient, None)
        meta["uid"] = self._uid()
        meta["creationTimestamp"] = rfc3339()
        if res.generation:
            meta["generation"] = 1
        obj = dict(body)
        obj["apiVersion"] = res.api_version
        obj["kind"] = res.kind
        obj["metadata"] = meta
        self._admit_create(res, obj)
        schema = self.schemas.get(res.id) if res.custom else None
        if schema is not None:
            obj = prune_and_default(obj, schema)
        return self._commit_created(ks, key, obj)

    def _commit_created(self, ks: KindStore, key: Key, obj: dict[str, Any]) -> Entry:
        self._commit(ks, ADDED, key, obj, None)
        return ks.objects[key]

    def _check_namespace_open(self, res: Resource, namespace: str, name: str) -> None:
        ns = self.kinds[NAMESPACES.id].objects.get(("", namespace))
        if ns is None:
            raise not_found("namespaces", namespace)
        if ns.obj["metadata"].get("deletionTimestamp"):
            raise ApiError(
                403,
                "Forbidden",
                f'{res.plural} "{name}" is forbidden: unable to create new content in namespace {namespace} '
                "because it is being terminated",
                {"name": name, "kind": res.plural},
            )

    def _validate_name(self, res: Resource, name: str) -> None:
        pattern, limit, what = (
            (_LABEL, 63, "RFC 1123 label") if res is NAMESPACES else (_SUBDOMAIN, 253, "RFC 1123 subdomain")
        )
        if len(name) > limit or not pattern.match(name):
            raise invalid(
                res.kind,
                name,
                [
                    (
                        "metadata.name",
                        "FieldValueInvalid",
                        f'Invalid value: "{name}": a lowercase {what} must consist of lower case alphanumeric '
                        "characters, '-' or '.', and must start and end with an alphanumeric character",
                    )
                ],
                res.group,
            )

    def _admit_create(self, res: Resource, obj: dict[str, Any]) -> None:
        """Defaulting, validation and admission a bare API server applies on create."""
        meta = obj["metadata"]
        name = meta["name"]
        if res.has_status and res.custom:
            obj.pop("status", None)
        if res.id == "podgroups.scheduling.k8s.io":
            podgroups.default_podgroup(obj)
            _check_native_podgroup(name, obj.get("spec") or {})
        if res is PODS:
            if not self.native_gang and isinstance(obj.get("spec"), dict):
                # GenericWorkload off: the server drops the field of a disabled gate
                obj["spec"].pop("schedulingGroup", None)
            spec = dict(obj.get("spec") or {})
            _check_quantities(name, spec)
            containers = spec.get("containers")
            if not containers:
                raise invalid("Pod", name, [("spec.containers", "FieldValueRequired", "Required value")])
            for i, c in enumerate(containers):
                if not c.get("name"):
                    raise invalid(
                        "Pod", name, [(f"spec.containers[{i}].name", "FieldValueRequired", "Required value")]
                    )
                if not c.get("image"):
                    raise invalid(
                        "Pod", name, [(f"spec.containers[{i}].image", "FieldValueRequired", "Required value")]
                    )
            dra.check_pod_claims(name, spec)
            for group in ("containers", "initContainers"):
                if spec.get(group):
                    spec[group] = [_default_requests(c) for c in spec[group]]
            spec.setdefault("schedulerName", "default-scheduler")
            spec.setdefault("restartPolicy", "Always")
            spec.setdefault("terminationGracePeriodSeconds", 30)
            spec.setdefault("dnsPolicy", "ClusterFirst")
            spec.setdefault("securityContext", {})
            spec.setdefault("enableServiceLinks", True)
            self._admit_priority(name, spec)
            _default_tolerations(spec)
            obj["spec"] = spec
            obj["status"] = {"phase": "Pending", "qosClass": qos_class(spec)}
            quota.admit_pod(self, obj)
            if spec.get("schedulingGates"):
                # The pod strategy's PrepareForCreate (pkg/registry/core/pod/strategy.go) marks a gated pod.
                obj["status"]["conditions"] = [
                    {
                        "type": "PodScheduled",
                        "status": "False",
                        "lastProbeTime": None,
                        "lastTransitionTime": rfc3339(),
                        "reason": "SchedulingGated",
                        "message": "Scheduling is blocked due to non-empty scheduling gates",
                    }
                ]
        elif res is quota.RESOURCE_QUOTAS:
            quota.admit_quota(self, obj)
        elif res is NAMESPACES:
            labels = dict(meta.get("labels") or {})
            labels["kubernetes.io/metadata.name"] = name
            meta["labels"] = labels
            obj["spec"] = {"finalizers": ["kubernetes"]}
            obj["status"] = {"phase": "Active"}
        elif res.group == "apps":
            spec = dict(obj.get("spec") or {})
            selector = spec.get("selector")
            if not selector:
                raise invalid(
                    res.kind, name, [("spec.selector", "FieldValueRequired", "Required value")], "apps"
                )
            from .selectors import match_labels_selector

            template_labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels")
            if not match_labels_selector(selector)(template_labels):
                raise invalid(
                    res.kind,
                    name,
                    [
                        (
                            "spec.template.metadata.labels",
                            "FieldValueInvalid",
                            f"Invalid value: {orjson.dumps(template_labels).decode()}: "
                            "`selector` does not match template `labels`",
                        )
                    ],
                    "apps",
                )
            spec.setdefault("replicas", 1)
            if res.kind == "Deployment":
                spec.setdefault(
                    "strategy",
                    {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}},
                )
                spec.setdefault("revisionHistoryLimit", 10)
                spec.setdefault("progressDeadlineSeconds", 600)
            obj["spec"] = spec
            # ReplicaSetStatus.replicas is not omitempty in the real API types.
            obj["status"] = {"replicas": 0} if res.kind == "ReplicaSet" else {}
        elif res.kind == "PodGroup" and res.id not in self.schemas:
            spec = dict(obj.get("spec") or {})
            spec.setdefault("queue", "default")  # the CRD schema's default, when no CRD was loaded
            obj["spec"] = spec
        elif res.id in _RBAC_KINDS:
            _check_rbac(res, name, obj, None)
        elif res.group == dra.GROUP:
            dra.admit(res, obj)
        elif res is PRIORITY_CLASSES:
            if not isinstance(obj.get("value"), int):
                raise invalid(
                    "PriorityClass", name, [("value", "FieldValueRequired", "Required value")], res.group
                )
            obj.setdefault("preemptionPolicy", "PreemptLowerPriority")

    def _admit_priority(self, name: str, spec: dict[str, Any]) -> None:
        classes = self.kinds[PRIORITY_CLASSES.id].objects
        class_name = spec.get("priorityClassName")
        if class_name:
            entry = classes.get(("", class_name))
            if entry is None:
                raise ApiError(
                    403,
                    "Forbidden",
                    f'pods "{name}" is forbidden: no PriorityClass with name {class_name} was found',
                    {"name": name, "kind": "pods"},
                )
            spec["priority"] = entry.obj.get("value", 0)
            spec.setdefault("preemptionPolicy", entry.obj.get("preemptionPolicy", "PreemptLowerPriority"))
            return
        for entry in classes.values():
            if entry.obj.get("globalDefault"):
                spec["priorityClassName"] = entry.obj["metadata"]["name"]
                spec["priority"] = entry.obj.get("value", 0)
                spec.setdefault("preemptionPolicy", entry.obj.get("preemptionPolicy", "PreemptLowerPriority"))
                return
        spec["priority"] = 0
        spec.setdefault("preemptionPolicy", "PreemptLowerPriority")

    def replace(
        self, res: Resource, namespace: str, name: str, body: Any, subresource: str | None = None
    ) -> Entry:
        view = self.views.get(res.id)
        if view is not None:
            return self._as_view(res, self.replace(view[0], namespace, name, view[1](body), subresource))
        ks, key, entry = self._entry(res, namespace, name)
        return self._update(ks, key, entry, body, subresource)

    def patch(
        self,
        res: Resource,
        namespace: str,
        name: str,
        content_type: str,
        body: bytes | Any,
        subresource: str | None = None,
    ) -> Entry:
        ks, key, entry = self._entry(res, namespace, name)
        ct = content_type.split(";", 1)[0].strip().lower()
        if ct == APPLY_PATCH:
            raise ApiError(415, "UnsupportedMediaType", "server-side apply is not supported by caldera-sim")
        if ct not in (MERGE_PATCH, JSON_PATCH, STRATEGIC_PATCH):
            raise ApiError(
                415, "UnsupportedMediaType", f"the body of the request was in an unknown format - {ct}"
            )
        if ct == STRATEGIC_PATCH and res.custom:
            raise ApiError(
                415,
                "UnsupportedMediaType",
                "the body of the request was in an unknown format - accepted media types include: "
                "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml",
            )
        owned = isinstance(body, (bytes, bytearray, memoryview))
        if owned:
            try:
                patch = orjson.loads(body)
            except orjson.JSONDecodeError as exc:
                raise bad_request(f"error decoding patch: {exc}") from exc
        else:
            patch = body
        view = self.views.get(res.id)
        doc = orjson.loads(entry.raw) if view is None else view[2](orjson.loads(entry.raw))
        if ct == MERGE_PATCH:
            if not isinstance(patch, dict):
                raise bad_request(
                    "json: cannot unmarshal array into Go value of type map[string]interface {}"
                )
            new = merge_patch(doc, patch, owned)
        elif ct == JSON_PATCH:
            new = json_patch(doc, patch)
        else:
            if not isinstance(patch, dict):
                raise bad_request(
                    "json: cannot unmarshal array into Go value of type map[string]interface {}"
                )
            new = strategic_merge_patch(doc, patch)
        if view is not None:
            return self._as_view(res, self._update(ks, key, entry, view[1](new), subresource))
        return self._update(ks, key, entry, new, subresource)

    def _update(self, ks: KindStore, key: Key, entry: Entry, body: Any, subresource: str | None) -> Entry:
        res = ks.res
        old = entry.obj
        old_meta = old["metadata"]
        name = key[1]
        if not isinstance(body, dict):
            raise bad_request("the body of the request is not a JSON object")
        new_meta_in = body.get("metadata") or {}
        if new_meta_in.get("name", name) != name:
            raise bad_request(
                f"the name of the object ({new_meta_in.get('name')}) does not match the name on the URL ({name})"
            )
        if res.namespaced and new_meta_in.get("namespace", key[0]) != key[0]:
            raise bad_request(
                "the namespace of the provided object does not match the namespace sent on the request"
            )
        rv = new_meta_in.get("resourceVersion")
        if rv and rv != old_meta["resourceVersion"]:
            raise conflict(
                res.plural,
                name,
                "the object has been modified; please apply your changes to the latest version and try again",
                res.group,
            )
        uid = new_meta_in.get("uid")
        if uid and uid != old_meta["uid"]:
            raise conflict(
                res.plural,
                name,
                f"Precondition failed: UID in precondition: {uid}, UID in object meta: {old_meta['uid']}",
                res.group,
            )
        if subresource == "status":
            result = dict(old)
            if "status" in body:
                result["status"] = body["status"]
            else:
                result.pop("status", None)
            meta = dict(old_meta)
        else:
            result = dict(body)
            result["apiVersion"] = res.api_version
            result["kind"] = res.kind
            meta = dict(new_meta_in)
            for fixed in (
                "uid",
                "creationTimestamp",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
                "generation",
            ):
                if fixed in old_meta:
                    meta[fixed] = old_meta[fixed]
                else:
                    meta.pop(fixed, None)
            meta["name"] = name
            if res.namespaced:
                meta["namespace"] = key[0]
            if res.has_status or res is PODS:
                if "status" in old:
                    result["status"] = old["status"]
                else:
                    result.pop("status", None)
            if res is NAMESPACES:
                result["spec"] = old.get("spec", {})
            if res is PODS:
                _check_quantities(name, result.get("spec") or {})
                self._check_pod_update(name, old.get("spec") or {}, result.get("spec") or {})
            elif res.id in _RBAC_KINDS:
                _check_rbac(res, name, result, old)
            elif res is podgroups.PODGROUPS:
                podgroups.default_podgroup(result)
                podgroups.check_update("PodGroup", name, old, result)
            elif res is podgroups.WORKLOADS:
                podgroups.check_update("Workload", name, old, result)
        result["metadata"] = meta
        if res.group == dra.GROUP:
            if subresource == "status":
                dra.check_claim_status(name, old, result)
            else:
                dra.admit(res, result, old)
        schema = self.schemas.get(res.id) if res.custom else None
        if schema is not None:
            result = prune_and_default(result, schema)
        if subresource != "status" and (
            meta.get("labels") != old_meta.get("labels")
            or meta.get("annotations") != old_meta.get("annotations")
        ):
            _validate_metadata(res, name, meta)  # (what is stored passed it already)
        if "generation" in meta:
            if res.custom and not res.has_status:
                changed = any(result.get(k) != old.get(k) for k in set(result) | set(old) if k != "metadata")
            else:
                changed = result.get("spec") != old.get("spec")
            if changed:
                meta["generation"] = old_meta["generation"] + 1
        meta["resourceVersion"] = old_meta["resourceVersion"]
        if result == old:
            return entry  # a no-op update changes nothing, not even the resourceVersion
        if meta.get("deletionTimestamp") and not meta.get("finalizers") and self._may_vanish(res, result):
            self._commit(ks, DELETED, key, result, old)
            self._after_delete(res, result, None)
            return Entry(result, orjson.dumps(result))
        self._commit(ks, MODIFIED, key, result, old)
        return ks.objects[key]

    @staticmethod
    def _may_vanish(res: Resource, obj: dict[str, Any]) -> bool:
        if res is PODS:
            return obj["metadata"].get("deletionGracePeriodSeconds", 0) == 0
        if res is NAMESPACES:
            return not (obj.get("spec") or {}).get("finalizers")
        return True

    @staticmethod
    def _check_pod_update(name: str, old: dict[str, Any], new: dict[str, Any]) -> None:
        """ValidatePodUpdate (pkg/apis/core/validation/validation.go): only images, a lowered or first
        activeDeadlineSeconds, added tolerations (existing ones may change only their tolerationSeconds) and
        removed scheduling gates may change."""

        def fail(field: str, reason: str, message: str) -> ApiError:
            return invalid("Pod", name, [(field, reason, message)])

        old_gates = {g.get("name") for g in old.get("schedulingGates") or ()}
        for i, gate in enumerate(new.get("schedulingGates") or ()):
            if gate.get("name") not in old_gates:
                raise fail(
                    f"spec.schedulingGates[{i}].name",
                    "FieldValueForbidden",
                    f"Forbidden: only deletion is allowed, but found new scheduling gate '{gate.get('name')}'",
                )
        new_tolerations = new.get("tolerations") or []
        for t in old.get("tolerations") or ():
            if not any(
                {**t, "tolerationSeconds": n.get("tolerationSeconds")}
                == {**n, "tolerationSeconds": n.get("tolerationSeconds")}
                for n in new_tolerations
            ):
                raise fail(
                    "spec.tolerations",
                    "FieldValueForbidden",
                    "Forbidden: existing toleration can not be modified except its tolerationSeconds",
                )
        new_ads, old_ads = new.get("activeDeadlineSeconds"), old.get("activeDeadlineSeconds")
        if new_ads is not None:
            if not isinstance(new_ads, int) or new_ads < 0 or new_ads > 2**31 - 1:
                raise fail(
                    "spec.activeDeadlineSeconds",
                    "FieldValueInvalid",
                    f"Invalid value: {new_ads}: must be between 0 and 2147483647, inclusive",
                )
            if old_ads is not None and old_ads < new_ads:
                raise fail(
                    "spec.activeDeadlineSeconds",
                    "FieldValueInvalid",
                    f"Invalid value: {new_ads}: must be less than or equal to previous value",
                )
        elif old_ads is not None:
            raise fail(
                "spec.activeDeadlineSeconds",
                "FieldValueInvalid",
                'Invalid value: "null": must not update from a positive integer to nil value',
            )

        def normal(spec: dict[str, Any]) -> dict[str, Any]:
            out = {k: v for k, v in spec.items() if k not in _POD_MUTABLE_SPEC}
            out["containers"] = [
                {k: v for k, v in c.items() if k != "image"} for c in spec.get("containers") or []
            ]
            out["initContainers"] = [
                {k: v for k, v in c.items() if k != "image"} for c in spec.get("initContainers") or []
            ]
            return out

        before, after = normal(old), normal(new)
        if before != after:
            changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
            raise fail(
                "spec",
                "FieldValueForbidden",
                f"Forbidden: {_POD_UPDATABLE}\n  changed: " + ", ".join(f"spec.{k}" for k in changed),
            )

    def delete(
        self, res: Resource, namespace: str, name: str, options: dict[str, Any] | None = None
    ) -> Entry:
        view = self.views.get(res.id)
        if view is not None:
            return self._as_view(res, self.delete(view[0], namespace, name, options))
        options = options or {}
        ks, key, entry = self._entry(res, namespace, name)
        obj = entry.obj
        meta = obj["metadata"]
        pre = options.get("preconditions") or {}
        if pre.get("uid") and pre["uid"] != meta["uid"]:
            raise conflict(
                res.plural,
                name,
                f"Precondition failed: UID in precondition: {pre['uid']}, UID in object meta: {meta['uid']}",
                res.group,
            )
        if pre.get("resourceVersion") and pre["resourceVersion"] != meta["resourceVersion"]:
            raise conflict(
                res.plural,
                name,
                f"Precondition failed: ResourceVersion in precondition: {pre['resourceVersion']}, "
                f"ResourceVersion in object meta: {meta['resourceVersion']}",
                res.group,
            )
        grace = options.get("gracePeriodSeconds")
        propagation = options.get("propagationPolicy") or (
            "Orphan" if options.get("orphanDependents") else None
        )
        graceful = False
        if res is PODS:
            spec = obj.get("spec") or {}
            if grace is None:
                grace = spec.get("terminationGracePeriodSeconds", 30)
            if not spec.get("nodeName") or (obj.get("status") or {}).get("phase") in _TERMINAL:
                grace = 0
            graceful = bool(grace and grace > 0)
        finalizers = meta.get("finalizers")
        if res is NAMESPACES:
            if name in _PROTECTED_NAMESPACES:
                raise ApiError(
                    403,
                    "Forbidden",
                    f'namespaces "{name}" is forbidden: this namespace may not be deleted',
                    {"name": name, "kind": "namespaces"},
                )
            if not meta.get("deletionTimestamp"):
                new = dict(obj)
                new["metadata"] = {**meta, "deletionTimestamp": rfc3339(), "deletionGracePeriodSeconds": 0}
                new["status"] = {**(obj.get("status") or {}), "phase": "Terminating"}
                self._commit(ks, MODIFIED, key, new, obj)
                self.defer(lambda: self._finalize_namespace(name))
            return ks.objects[key]
        if meta.get("deletionTimestamp"):
            already_short = meta.get("deletionGracePeriodSeconds", 0) == 0
            if res is PODS and grace == 0 and not already_short:
                new = dict(obj)
                new["metadata"] = {**meta, "deletionGracePeriodSeconds": 0}
                if not finalizers:
                    self._commit(ks, DELETED, key, new, obj)
                    self._after_delete(res, new, propagation)
                    return Entry(new, orjson.dumps(new))
                self._commit(ks, MODIFIED, key, new, obj)
                return ks.objects[key]
            return entry
        if graceful or finalizers:
            new = dict(obj)
            new_meta = {
                **meta,
                "deletionTimestamp": rfc3339(time.time() + (grace or 0)),
                "deletionGracePeriodSeconds": int(grace or 0),
            }
            if "generation" in meta:
                new_meta["generation"] = meta["generation"] + 1
            new["metadata"] = new_meta
            self._commit(ks, MODIFIED, key, new, obj)
            return ks.objects[key]
        new = dict(obj)
        new["metadata"] = dict(meta)
        self._commit(ks, DELETED, key, new, obj)
        self._after_delete(res, new, propagation)
        return Entry(new, orjson.dumps(new))

    def _after_delete(self, res: Resource, obj: dict[str, Any], propagation: str | None) -> None:
        uid = obj["metadata"].get("uid", "")
        if uid in self.owners:
            self.defer(lambda: self._collect_dependents(uid, propagation))

    def _collect_dependents(self, owner_uid: str, propagation: str | None) -> None:
        for res_id, key in list(self.owners.get(owner_uid, ())):
            ks = self.kinds[res_id]
            entry = ks.objects.get(key)
            if entry is None:
                continue
            refs = entry.obj["metadata"].get("ownerReferences") or []
            if propagation == "Orphan":
                new = dict(entry.obj)
                kept = [r for r in refs if r.get("uid") != owner_uid]
                new_meta = dict(entry.obj["metadata"])
                if kept:
                    new_meta["ownerReferences"] = kept
                else:
                    new_meta.pop("ownerReferences", None)
                new["metadata"] = new_meta
                self._commit(ks, MODIFIED, key, new, entry.obj)
            elif not any(r.get("uid") in self.uids for r in refs if r.get("uid") != owner_uid):
                try:
                    self.delete(ks.res, key[0], key[1], {"propagationPolicy": "Background"})
                except ApiError:
                    pass

    def _finalize_namespace(self, name: str) -> None:
        for ks in self.kinds.values():
            if not ks.res.namespaced:
                continue
            for key in [k for k in ks.objects if k[0] == name]:
                entry = ks.objects.get(key)
                if entry is None:
                    continue
                obj = entry.obj
                if obj["metadata"].get("finalizers"):
                    new = dict(obj)
                    new["metadata"] = {k: v for k, v in obj["metadata"].items() if k != "finalizers"}
                    self._commit(ks, MODIFIED, key, new, obj)
                    obj = new
                new = dict(obj)
                new["metadata"] = dict(obj["metadata"])
                self._commit(ks, DELETED, key, new, obj)
        ks = self.kinds[NAMESPACES.id]
        entry = ks.objects.get(("", name))
        if entry is not None:
            new = dict(entry.obj)
            new["metadata"] = dict(entry.obj["metadata"])
            new["spec"] = {"finalizers": []}
            self._commit(ks, DELETED, ("", name), new, entry.obj)

    def finalize_namespace(self, name: str, finalizers: Sequence[str]) -> Entry:
        """PUT namespaces/NAME/finalize: set spec.finalizers; an emptied, terminating namespace goes away."""
        ks, key, entry = self._entry(NAMESPACES, "", name)
        new = dict(entry.obj)
        new["spec"] = {"finalizers": list(finalizers)}
        new["metadata"] = dict(entry.obj["metadata"])
        if not finalizers and new["metadata"].get("deletionTimestamp"):
            self._commit(ks, DELETED, key, new, entry.obj)
            return Entry(new, orjson.dumps(new))
        self._commit(ks, MODIFIED, key, new, entry.obj)
        return ks.objects[key]

    # ---- scale subresource (autoscaling/v1 Scale) ----------------------------------------------------

    def scale(self, res: Resource, namespace: str, name: str) -> dict[str, Any]:
        obj = self.get(res, namespace, name).obj
        meta = obj["metadata"]
        selector = (obj.get("spec") or {}).get("selector") or {}
        return {
            "kind": "Scale",
            "apiVersion": "autoscaling/v1",
            "metadata": {
                k: meta[k]
                for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
                if k in meta
            },
            "spec": {"replicas": (obj.get("spec") or {}).get("replicas", 0)},
            "status": {
                "replicas": (obj.get("status") or {}).get("replicas", 0),
                "selector": ",".join(f"{k}={v}" for k, v in (selector.get("matchLabels") or {}).items()),
            },
        }

    def set_scale(
        self, res: Resource, namespace: str, name: str, scale: Any, content_type: str | None
    ) -> dict[str, Any]:
        """PUT (content_type None) or PATCH of the scale subresource: only spec.replicas changes."""
        current = self.scale(res, namespace, name)
        if content_type is None:
            new = scale
        else:
            ct = content_type.split(";", 1)[0].strip().lower()
            patch = orjson.loads(scale) if isinstance(scale, (bytes, bytearray)) else scale
            if ct == JSON_PATCH:
                new = json_patch(orjson.loads(orjson.dumps(current)), patch)
            elif ct in (MERGE_PATCH, STRATEGIC_PATCH):
                new = merge_patch(current, patch)
            else:
                raise ApiError(
                    415, "UnsupportedMediaType", f"the body of the request was in an unknown format - {ct}"
                )
        if not isinstance(new, dict):
            raise bad_request("the body of the request is not a JSON object")
        replicas = (new.get("spec") or {}).get("replicas")
        if not isinstance(replicas, int) or replicas < 0:
            raise invalid(
                "Scale",
                name,
                [("spec.replicas", "FieldValueInvalid", "must be greater than or equal to 0")],
                "autoscaling",
            )
        rv = (new.get("metadata") or {}).get("resourceVersion")
        body: dict[str, Any] = {"spec": {"replicas": replicas}}
        if rv:
            body["metadata"] = {"resourceVersion": rv}
        self.patch(res, namespace, name, MERGE_PATCH, body)
        return self.scale(res, namespace, name)

    # ---- pod subresources -----------------------------------------------------------------------------

    def bind(self, namespace: str, name: str, binding: Any) -> None:
        if not isinstance(binding, dict):
            raise bad_request("the body of the request is not a JSON object")
        ks = self.kinds[PODS.id]
        key = (namespace, name)
        entry = ks.objects.get(key)
        if entry is None:
            raise not_found("pods", name)
        node = (binding.get("target") or {}).get("name")
        if not node:
            raise invalid("Binding", name, [("target.name", "FieldValueRequired", "Required value")])
        pod = entry.obj
        meta = pod["metadata"]
        uid = (binding.get("metadata") or {}).get("uid")
        if uid and uid != meta["uid"]:
            raise conflict("pods/binding", name, f"Precondition failed: UID in precondition: {uid}")
        if meta.get("deletionTimestamp"):
            raise conflict("pods/binding", name, f"pod {name} is being deleted, cannot be assigned to a host")
        spec = pod["spec"]
        if spec.get("nodeName"):
            raise conflict(
                "pods/binding", name, f'pod {name} is already assigned to node "{spec["nodeName"]}"'
            )
        if spec.get("schedulingGates"):
            # setPodNodeAndMetadata in pkg/registry/core/pod/storage/storage.go
            raise conflict("pods/binding", name, f"pod {name} has non-empty .spec.schedulingGates")
        status = pod.get("status") or {}
        conditions = [c for c in status.get("conditions") or () if c.get("type") != "PodScheduled"]
        conditions.append(
            {"type": "PodScheduled", "status": "True", "lastProbeTime": None, "lastTransitionTime": rfc3339()}
        )
        new = dict(pod)
        new_meta = dict(meta)
        extra = (binding.get("metadata") or {}).get("annotations")
        if extra:
            new_meta["annotations"] = {**(meta.get("annotations") or {}), **extra}
        new["metadata"] = new_meta
        new["spec"] = {**spec, "nodeName": node}
        new["status"] = {**status, "conditions": conditions}
        self._commit(ks, MODIFIED, key, new, pod)
        self.bindings += 1

    def evict(self, namespace: str, name: str, eviction: Any) -> None:
        """The eviction subresource: PodDisruptionBudgets are checked (429 when one would be
        violated, hack/sim/disruption.py) and charged before the pod is deleted."""
        from .disruption import PDBS, check_eviction

        options = (eviction.get("deleteOptions") if isinstance(eviction, dict) else None) or {}
        entry = self.kinds[PODS.id].objects.get((namespace, name))
        if entry is None:
            raise not_found("pods", name)
        uid = (options.get("preconditions") or {}).get("uid")
        if uid and uid != entry.obj["metadata"].get("uid"):
            raise conflict("pods", name, f"Precondition failed: UID in precondition: {uid}")
        charge = check_eviction(self, entry.obj)
        if charge is not None:
            pdb_key, status = charge
            pdb_ns, pdb_name = pdb_key.split("/", 1)
            self.put_status(PDBS, pdb_ns, pdb_name, status)
        self._disruption_target(namespace, name, entry.obj)
        self.delete(PODS, namespace, name, options)

    def _disruption_target(self, namespace: str, name: str, pod: dict[str, Any]) -> None:
        """kube-apiserver's ``addConditionAndDeletePod`` (pkg/registry/core/pod/storage/eviction.go):
        before an evicted pod is deleted its ``DisruptionTarget`` condition becomes True
        (``EvictionByEvictionAPI``), replacing one already there (``UpdatePodCondition``: the
        transition time kept when the status was already True)."""
        status = pod.get("status") or {}
        conditions = [c for c in status.get("conditions") or [] if isinstance(c, dict)]
        mark = {
            "type": "DisruptionTarget",
            "status": "True",
            "reason": "EvictionByEvictionAPI",
            "message": "Eviction API: evicting",
            "lastTransitionTime": rfc3339(),
        }
        for i, c in enumerate(conditions):
            if c.get("type") == "DisruptionTarget":
                if c.get("status") == "True" and c.get("lastTransitionTime"):
                    mark["lastTransitionTime"] = c["lastTransitionTime"]
                conditions[i] = mark
                break
        else:
            conditions.append(mark)
        self.put_status(PODS, namespace, name, {**status, "conditions": conditions})

    # ---- conveniences for controllers, seeds and tests ------------------------------------------------

    def put_status(self, res: Resource, namespace: str, name: str, status: dict[str, Any]) -> Entry:
        ks, key, entry = self._entry(res, namespace, name)
        return self._update(ks, key, entry, {"metadata": {}, "status": status}, "status")

    def ensure(self, res: Resource, obj: dict[str, Any]) -> Entry:
        """Create the object unless one of that name exists (namespaced objects default to `default`)."""
        meta = obj.get("metadata") or {}
        namespace = (meta.get("namespace") or "default") if res.namespaced else ""
        existing = self.kinds[res.id].objects.get((namespace, meta.get("name", "")))
        if existing is not None:
            return self._as_view(res, existing)
        return self.create(res, namespace, obj)

    def dependents(self, owner_uid: str, res: Resource | None = None) -> Iterable[tuple[str, Key]]:
        deps = self.owners.get(owner_uid, ())
        return [d for d in deps if res is None or d[0] == res.id]


_SCHEMA_CACHE: dict[str, dict[str, dict[str, Any]]] = {}


def _schemas(crd_dir: str | None) -> dict[str, dict[str, Any]]:
    """The CRD schemas of a folder (deploy/crds by default), read once per process."""
    key = crd_dir or ""
    cached = _SCHEMA_CACHE.get(key)
    if cached is None:
        from pathlib import Path

        cached = load_crd_schemas(crd_files(Path(crd_dir) if crd_dir else None))
        _SCHEMA_CACHE[key] = cached
    return cached
