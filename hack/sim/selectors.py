"""Label and field selectors with the syntax and error answers of a real API server."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from .errors import bad_request
from .resources import Resource

Predicate = Callable[[dict[str, Any]], bool]

_KEY = r"[A-Za-z0-9_./-]+"
_VALUE = r"[A-Za-z0-9_.-]*"
_EXISTS = re.compile(rf"^\s*(!?)\s*({_KEY})\s*$")
_EQUALS = re.compile(rf"^\s*({_KEY})\s*(==|=|!=)\s*({_VALUE})\s*$")
_SET = re.compile(rf"^\s*({_KEY})\s+(in|notin)\s*\(([^)]*)\)\s*$")


def _split_outside_parens(text: str) -> list[str]:
    parts: list[str] = []
    depth = 0
    start = 0
    for i, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p for p in parts if p.strip()]


class LabelSelector:
    """A parsed `labelSelector`; `matches(labels)` answers for one object's labels."""

    __slots__ = ("requirements", "text")

    def __init__(self, text: str):
        self.text = text
        self.requirements: list[tuple[str, str, frozenset[str]]] = []
        for part in _split_outside_parens(text):
            if m := _SET.match(part):
                values = frozenset(v.strip() for v in m.group(3).split(",") if v.strip())
                self.requirements.append((m.group(1), m.group(2), values))
            elif m := _EQUALS.match(part):
                op = "!=" if m.group(2) == "!=" else "="
                self.requirements.append((m.group(1), op, frozenset({m.group(3)})))
            elif m := _EXISTS.match(part):
                self.requirements.append((m.group(2), "!" if m.group(1) else "exists", frozenset()))
            else:
                raise bad_request(f"unable to parse requirement: {part.strip()!r}: invalid label selector")

    def matches(self, labels: dict[str, str] | None) -> bool:
        labels = labels or {}
        for key, op, values in self.requirements:
            present = key in labels
            if op == "=" or op == "in":
                if not present or labels[key] not in values:
                    return False
            elif op == "!=" or op == "notin":
                if present and labels[key] in values:
                    return False
            elif op == "exists":
                if not present:
                    return False
            elif present:  # "!"
                return False
        return True


def match_labels_selector(selector: dict[str, Any] | None) -> Callable[[dict[str, str] | None], bool]:
    """A metav1.LabelSelector (matchLabels + matchExpressions) as a predicate over labels."""
    selector = selector or {}
    match_labels = dict(selector.get("matchLabels") or {})
    expressions = list(selector.get("matchExpressions") or [])

    def matches(labels: dict[str, str] | None) -> bool:
        labels = labels or {}
        for k, v in match_labels.items():
            if labels.get(k) != v:
                return False
        for e in expressions:
            key, op, values = e.get("key"), e.get("operator"), e.get("values") or []
            if op == "In" and labels.get(key) not in values:
                return False
            if op == "NotIn" and key in labels and labels[key] in values:
                return False
            if op == "Exists" and key not in labels:
                return False
            if op == "DoesNotExist" and key in labels:
                return False
        return True

    return matches


def field_value(obj: dict[str, Any], path: str) -> str:
    cur: Any = obj
    for part in path.split("."):
        if not isinstance(cur, dict):
            return ""
        cur = cur.get(part)
        if cur is None:
            return ""
    if isinstance(cur, bool):
        return "true" if cur else "false"
    if isinstance(cur, dict):
        # `source` on core events selects by its component.
        return str(cur.get("component", ""))
    return str(cur)


class FieldSelector:
    __slots__ = ("requirements", "text")

    def __init__(self, text: str, res: Resource):
        self.text = text
        self.requirements: list[tuple[str, bool, str]] = []
        for part in text.split(","):
            part = part.strip()
            if not part:
                continue
            if "!=" in part:
                key, _, value = part.partition("!=")
                equal = False
            elif "==" in part:
                key, _, value = part.partition("==")
                equal = True
            elif "=" in part:
                key, _, value = part.partition("=")
                equal = True
            else:
                raise bad_request(f"invalid selector: '{text}'; can't understand '{part}'")
            key = key.strip()
            if key not in ("metadata.name", "metadata.namespace") and key not in res.field_labels:
                raise bad_request(f"field label not supported: {key}")
            self.requirements.append((key, equal, value.strip()))

    def matches(self, obj: dict[str, Any]) -> bool:
        for key, equal, value in self.requirements:
            if (field_value(obj, key) == value) != equal:
                return False
        return True


def make_filter(
    res: Resource, namespace: str | None, label_selector: str | None, field_selector: str | None
) -> Predicate | None:
    """None when every object of the kind matches (the fast path for unfiltered lists and watches)."""
    labels = LabelSelector(label_selector) if label_selector else None
    fields = FieldSelector(field_selector, res) if field_selector else None
    if labels is not None and not labels.requirements:
        labels = None
    if fields is not None and not fields.requirements:
        fields = None
    if namespace is None and labels is None and fields is None:
        return None

    def predicate(obj: dict[str, Any]) -> bool:
        meta = obj["metadata"]
        if namespace is not None and meta.get("namespace") != namespace:
            return False
        if labels is not None and not labels.matches(meta.get("labels")):
            return False
        return fields is None or fields.matches(obj)

    return predicate
