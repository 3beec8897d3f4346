"""Kubernetes `Status` failures, raised by the store and turned into HTTP answers by the server."""

from __future__ import annotations

from typing import Any

import orjson

_REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    406: "NotAcceptable",
    409: "Conflict",
    410: "Expired",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
}


def status_dict(
    code: int, reason: str | None, message: str, details: dict[str, Any] | None = None
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success" if code < 400 else "Failure",
    }
    if message:
        body["message"] = message
    if reason or code >= 400:
        body["reason"] = reason or _REASONS.get(code, "Unknown")
    if details:
        body["details"] = details
    body["code"] = code
    return body


class ApiError(Exception):
    def __init__(self, code: int, reason: str | None, message: str, details: dict[str, Any] | None = None):
        super().__init__(message)
        self.code = code
        self.reason = reason or _REASONS.get(code, "Unknown")
        self.message = message
        self.details = details

    def status(self) -> dict[str, Any]:
        return status_dict(self.code, self.reason, self.message, self.details)

    def body(self) -> bytes:
        return orjson.dumps(self.status())


def not_found(plural: str, name: str, group: str = "") -> ApiError:
    qualified = f"{plural}.{group}" if group else plural
    return ApiError(
        404, "NotFound", f'{qualified} "{name}" not found', {"name": name, "group": group, "kind": plural}
    )


def already_exists(plural: str, name: str, group: str = "") -> ApiError:
    qualified = f"{plural}.{group}" if group else plural
    return ApiError(
        409,
        "AlreadyExists",
        f'{qualified} "{name}" already exists',
        {"name": name, "group": group, "kind": plural},
    )


def conflict(plural: str, name: str, why: str, group: str = "") -> ApiError:
    qualified = f"{plural}.{group}" if group else plural
    return ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {qualified} "{name}": {why}',
        {"name": name, "group": group, "kind": plural},
    )


def invalid(kind: str, name: str, causes: list[tuple[str, str, str]], group: str = "") -> ApiError:
    """causes: (field, reason, message) as in a real server's 422 answer.

    The message is `NewInvalid`'s (k8s.io/apimachinery pkg/api/errors): the kind qualified by its group
    (`GroupKind.String()`, e.g. `ResourceClaim.resource.k8s.io`), then the one error, or several as an
    aggregate `[a, b]` (`ErrorList.ToAggregate`)."""
    parts = [f"{f}: {m}" for f, _r, m in causes]
    text = parts[0] if len(parts) == 1 else "[" + ", ".join(parts) + "]"
    qualified = f"{kind}.{group}" if group else kind
    return ApiError(
        422,
        "Invalid",
        f'{qualified} "{name}" is invalid: {text}',
        {
            "name": name,
            "group": group,
            "kind": kind,
            "causes": [{"reason": r, "message": m, "field": f} for f, r, m in causes],
        },
    )


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)
