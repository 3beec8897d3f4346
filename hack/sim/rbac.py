"""Authentication and RBAC authorization, as kube-apiserver does them.

Tokens: the bootstrap token is an administrator (group `system:masters`, which a real server lets through
before any authorizer asks); ServiceAccount tokens are minted by the TokenRequest subresource and name
`system:serviceaccount:NS:NAME` in the groups `system:serviceaccounts`, `system:serviceaccounts:NS` and
`system:authenticated`. A token dies with its expiry or its ServiceAccount (a ServiceAccount re-created under
the same name has a new uid, and the old tokens stay dead, as bound tokens do on a real server).

Authorization follows the RBAC authorizer of kubernetes/kubernetes:
- `plugin/pkg/auth/authorizer/rbac/rbac.go` (`RBACAuthorizer.Authorize`, `RuleAllows`): a request is allowed
  when a rule of a role bound to the user allows it; ClusterRoleBindings grant everywhere, RoleBindings only in
  their namespace (a RoleBinding may reference a ClusterRole, whose rules then apply in that namespace only).
- `pkg/apis/rbac/v1/evaluation_helpers.go` (`VerbMatches`, `APIGroupMatches`, `ResourceMatches`,
  `ResourceNameMatches`, `NonResourceURLMatches`): "*" matches any verb, group or resource; a resource is
  matched as "resource/subresource" or by "*/subresource"; resourceNames restrict by the request's name (a
  request without a name, such as create or list, never matches a rule with resourceNames).
- `pkg/registry/rbac/validation/rule.go` (`appliesTo`): subjects of kind User, Group and ServiceAccount.
- The request's attributes come from `staging/src/k8s.io/apiserver/pkg/endpoints/request/requestinfo.go`
  (`RequestInfoFactory.NewRequestInfo`): GET is get, list or watch; POST create; PUT update; PATCH patch;
  DELETE delete or, without a name, deletecollection; a list or watch with the field selector
  `metadata.name=X` carries the name X.
- The 403 text is `forbiddenMessage` in `staging/src/k8s.io/apiserver/pkg/endpoints/handlers/responsewriters/
  errors.go` wrapped by `NewForbidden` (`k8s.io/apimachinery/pkg/api/errors`).
ClusterRole aggregation (aggregationRule) is not done: an aggregated ClusterRole has only its own rules.
Discovery (`/api`, `/apis`, `/version`) is open to every authenticated user, as the default `system:discovery`
ClusterRoleBinding makes it.
"""

from __future__ import annotations

import secrets
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple

from .errors import ApiError
from .resources import (
    CLUSTER_ROLE_BINDINGS,
    CLUSTER_ROLES,
    ROLE_BINDINGS,
    ROLES,
    SERVICE_ACCOUNTS,
)
from .store import Store

MASTERS = "system:masters"
AUTHENTICATED = "system:authenticated"
ADMIN_USER = "caldera-sim:admin"
RBAC_GROUP = "rbac.authorization.k8s.io"
# The rules of the default ClusterRoles system:discovery and system:public-info-viewer, which a real server
# binds to every authenticated user (plugin/pkg/auth/authorizer/rbac/bootstrappolicy/policy.go).
DISCOVERY_RULE = {
    "verbs": ["get"],
    "nonResourceURLs": [
        "/api",
        "/api/*",
        "/apis",
        "/apis/*",
        "/openapi",
        "/openapi/*",
        "/version",
        "/version/",
        "/healthz",
        "/livez",
        "/readyz",
    ],
}


@dataclass(frozen=True)
class User:
    name: str
    groups: tuple[str, ...]

    @property
    def admin(self) -> bool:
        return MASTERS in self.groups


class Attributes(NamedTuple):
    """What the authorizer is asked about one request (a resource request, or a non-resource path)."""

    verb: str
    api_group: str = ""
    resource: str = ""
    subresource: str = ""
    namespace: str = ""
    name: str = ""
    path: str = ""  # non-resource requests only

    @property
    def resource_request(self) -> bool:
        return bool(self.resource)


class Record(NamedTuple):
    """One kind of request the server authorized or refused (counted in `Authorizer.record`)."""

    user: str
    verb: str
    api_group: str
    resource: str
    subresource: str
    namespace: str
    allowed: bool


class RuleUse(NamedTuple):
    """A rule that allowed a request, with what the request asked (counted in `Authorizer.rules_used`)."""

    role_kind: str  # Role or ClusterRole
    role_namespace: str
    role_name: str
    rule_index: int
    verb: str
    api_group: str
    resource: str  # "resource" or "resource/subresource"
    name: str  # the request's name, when the rule has resourceNames; else ""


@dataclass
class _Token:
    namespace: str
    name: str
    uid: str
    expires: float
    user: User


def service_account_user(namespace: str, name: str) -> User:
    return User(
        f"system:serviceaccount:{namespace}:{name}",
        ("system:serviceaccounts", f"system:serviceaccounts:{namespace}", AUTHENTICATED),
    )


def _verb_matches(rule: dict[str, Any], verb: str) -> bool:
    verbs = rule.get("verbs") or ()
    return "*" in verbs or verb in verbs


def _group_matches(rule: dict[str, Any], group: str) -> bool:
    groups = rule.get("apiGroups") or ()
    return "*" in groups or group in groups


def _resource_matches(rule: dict[str, Any], combined: str, subresource: str) -> bool:
    for r in rule.get("resources") or ():
        if r == "*" or r == combined:
            return True
        if subresource and r == "*/" + subresource:
            return True
    return False


def _name_matches(rule: dict[str, Any], name: str) -> bool:
    names = rule.get("resourceNames") or ()
    return not names or name in names


def _url_matches(rule: dict[str, Any], path: str) -> bool:
    for url in rule.get("nonResourceURLs") or ():
        if url == "*" or url == path or (url.endswith("*") and path.startswith(url[:-1])):
            return True
    return False


def rule_allows(rule: dict[str, Any], attrs: Attributes) -> bool:
    """`RuleAllows` of the RBAC authorizer."""
    if not attrs.resource_request:
        return _verb_matches(rule, attrs.verb) and _url_matches(rule, attrs.path)
    combined = attrs.resource + ("/" + attrs.subresource if attrs.subresource else "")
    return (
        _verb_matches(rule, attrs.verb)
        and _group_matches(rule, attrs.api_group)
        and _resource_matches(rule, combined, attrs.subresource)
        and _name_matches(rule, attrs.name)
    )


def _subject_applies(subject: dict[str, Any], user: User, binding_namespace: str) -> bool:
    """`appliesTo` in pkg/registry/rbac/validation/rule.go."""
    kind = subject.get("kind")
    if kind == "User":
        return bool(subject.get("name") == user.name)
    if kind == "Group":
        return subject.get("name") in user.groups
    if kind == "ServiceAccount":
        # A ServiceAccount subject without a namespace means the binding's own namespace.
        ns = subject.get("namespace") or binding_namespace
        return bool(ns) and user.name == f"system:serviceaccount:{ns}:{subject.get('name')}"
    return False


def forbidden(user: User, attrs: Attributes, reason: str = "") -> ApiError:
    if not attrs.resource_request:
        text = f'User "{user.name}" cannot {attrs.verb} path "{attrs.path}"'
        return ApiError(403, "Forbidden", f"forbidden: {text}" + (f": {reason}" if reason else ""), {})
    resource = attrs.resource + ("/" + attrs.subresource if attrs.subresource else "")
    where = f'in the namespace "{attrs.namespace}"' if attrs.namespace else "at the cluster scope"
    text = f'User "{user.name}" cannot {attrs.verb} resource "{resource}" in API group "{attrs.api_group}" {where}'
    if reason:
        text += f": {reason}"
    qualified = f"{attrs.resource}.{attrs.api_group}" if attrs.api_group else attrs.resource
    message = (
        f'{qualified} "{attrs.name}" is forbidden: {text}'
        if attrs.name
        else f"{qualified} is forbidden: {text}"
    )
    details: dict[str, Any] = {"kind": attrs.resource}  # StatusDetails: empty fields are omitted
    if attrs.api_group:
        details["group"] = attrs.api_group
    if attrs.name:
        details["name"] = attrs.name
    return ApiError(403, "Forbidden", message, details)


class Authorizer:
    """Who a bearer token is, and whether RBAC lets them make a request; records every decision."""

    def __init__(self, store: Store, admin_token: str, clock: Any = time.time):
        self.store = store
        self.clock = clock
        self.admin = User(ADMIN_USER, (MASTERS, AUTHENTICATED))
        self._admin_header = f"Bearer {admin_token}"
        #: further tokens that authenticate as the admin until revoked (a soak rotates the scheduler's)
        self._admin_tokens: set[str] = set()
        self._tokens: dict[str, _Token] = {}
        # Every decision, by kind of request: (user, verb, group, resource, subresource, namespace, allowed).
        self.record: Counter[Record] = Counter()
        # Which rule allowed what (requests let through by system:masters use no rule and are not here).
        self.rules_used: Counter[RuleUse] = Counter()

    # ---- authentication -------------------------------------------------------------------------------

    def authenticate(self, header: str | None) -> User | None:
        if header == self._admin_header:
            return self.admin
        if header is not None and header.startswith("Bearer ") and header[7:] in self._admin_tokens:
            return self.admin
        if not header or not header.startswith("Bearer "):
            return None
        token = self._tokens.get(header[7:])
        if token is None:
            return None
        if token.expires <= self.clock():
            del self._tokens[header[7:]]
            return None
        sa = self.store.get_obj(SERVICE_ACCOUNTS, token.namespace, token.name)
        if sa is None or sa["metadata"].get("uid") != token.uid:
            return None  # the ServiceAccount is gone: its bound tokens are no longer valid
        return token.user

    def grant_admin(self, token: str) -> None:
        """``token`` authenticates as the admin from now on (until :meth:`revoke`)."""
        self._admin_tokens.add(token)

    def revoke(self, token: str) -> None:
        """``token`` no longer authenticates: its requests are answered 401."""
        self._admin_tokens.discard(token)
        self._tokens.pop(token, None)

    def mint(self, namespace: str, name: str, request: Any) -> dict[str, Any]:
        """POST serviceaccounts/NAME/token: a TokenRequest answered with a bearer token for the account."""
        sa = self.store.get(SERVICE_ACCOUNTS, namespace, name).obj  # 404 when there is no such account
        spec = dict((request or {}).get("spec") or {}) if isinstance(request, dict) else {}
        seconds = spec.get("expirationSeconds")
        if seconds is None:
            seconds = 3600
        if not isinstance(seconds, int) or isinstance(seconds, bool):
            raise ApiError(400, "BadRequest", "spec.expirationSeconds must be an integer")
        if seconds < 600:
            # ValidateTokenRequest in pkg/apis/authentication/validation: at least ten minutes.
            raise _invalid_token_request(
                name,
                "spec.expirationSeconds",
                f"Invalid value: {seconds}: may not specify a duration less than 10 minutes",
            )
        if seconds > 2**32:
            raise _invalid_token_request(
                name,
                "spec.expirationSeconds",
                f"Invalid value: {seconds}: may not specify a duration larger than 2^32 seconds",
            )
        spec["expirationSeconds"] = seconds
        spec.setdefault("audiences", ["https://kubernetes.default.svc.cluster.local"])
        token = "sim-sa-" + secrets.token_urlsafe(24)
        expires = self.clock() + seconds
        self._tokens[token] = _Token(
            namespace, name, sa["metadata"]["uid"], expires, service_account_user(namespace, name)
        )
        return {
            "kind": "TokenRequest",
            "apiVersion": "authentication.k8s.io/v1",
            "metadata": {"name": name, "namespace": namespace, "creationTimestamp": None},
            "spec": spec,
            "status": {
                "token": token,
                "expirationTimestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(expires)),
            },
        }

    # ---- authorization --------------------------------------------------------------------------------

    def authorize(self, user: User, attrs: Attributes) -> None:
        """Raise the real server's 403 unless RBAC allows the request; record the decision either way."""
        allowed, reason = (True, "") if user.admin else self._allows(user, attrs)
        combined = attrs.resource if attrs.resource_request else attrs.path
        self.record[
            Record(
                user.name, attrs.verb, attrs.api_group, combined, attrs.subresource, attrs.namespace, allowed
            )
        ] += 1
        if not allowed:
            raise forbidden(user, attrs, reason)

    def _allows(self, user: User, attrs: Attributes) -> tuple[bool, str]:
        if not attrs.resource_request and AUTHENTICATED in user.groups and rule_allows(DISCOVERY_RULE, attrs):
            return True, ""
        errors: list[str] = []
        for role_kind, role_ns, role_name, rules in self._roles_for(user, attrs.namespace, errors):
            for i, rule in enumerate(rules):
                if isinstance(rule, dict) and rule_allows(rule, attrs):
                    resource = attrs.resource + ("/" + attrs.subresource if attrs.subresource else "")
                    self.rules_used[
                        RuleUse(
                            role_kind,
                            role_ns,
                            role_name,
                            i,
                            attrs.verb,
                            attrs.api_group,
                            resource if attrs.resource_request else attrs.path,
                            attrs.name if rule.get("resourceNames") else "",
                        )
                    ] += 1
                    return True, ""
        return False, ("RBAC: " + ", ".join(errors)) if errors else ""

    def _roles_for(
        self, user: User, namespace: str, errors: list[str]
    ) -> Iterator[tuple[str, str, str, list[Any]]]:
        """The rules of every role bound to the user that applies here (VisitRulesFor's order)."""
        store = self.store
        for crb in store.objects(CLUSTER_ROLE_BINDINGS):
            if not any(_subject_applies(s, user, "") for s in crb.get("subjects") or ()):
                continue
            ref = crb.get("roleRef") or {}
            role = (
                store.get_obj(CLUSTER_ROLES, "", ref.get("name", ""))
                if ref.get("kind") == "ClusterRole"
                else None
            )
            if role is None:
                errors.append(f'clusterrole.rbac.authorization.k8s.io "{ref.get("name", "")}" not found')
                continue
            yield "ClusterRole", "", ref["name"], list(role.get("rules") or ())
        if not namespace:
            return
        for rb in store.objects(ROLE_BINDINGS, namespace):
            if not any(_subject_applies(s, user, namespace) for s in rb.get("subjects") or ()):
                continue
            ref = rb.get("roleRef") or {}
            kind, name = ref.get("kind"), ref.get("name", "")
            if kind == "ClusterRole":
                role = store.get_obj(CLUSTER_ROLES, "", name)
                if role is None:
                    errors.append(f'clusterrole.rbac.authorization.k8s.io "{name}" not found')
                    continue
                yield "ClusterRole", "", name, list(role.get("rules") or ())
            elif kind == "Role":
                role = store.get_obj(ROLES, namespace, name)
                if role is None:
                    errors.append(f'role.rbac.authorization.k8s.io "{name}" not found')
                    continue
                yield "Role", namespace, name, list(role.get("rules") or ())


def _invalid_token_request(name: str, field: str, message: str) -> ApiError:
    return ApiError(
        422,
        "Invalid",
        f'TokenRequest.authentication.k8s.io "{name}" is invalid: {field}: {message}',
        {
            "name": name,
            "group": "authentication.k8s.io",
            "kind": "TokenRequest",
            "causes": [{"reason": "FieldValueInvalid", "message": message, "field": field}],
        },
    )


def attributes(
    method: str,
    api_group: str,
    resource: str,
    subresource: str | None,
    namespace: str | None,
    name: str | None,
    watch: bool,
    field_selector: str | None,
) -> Attributes:
    """The verb and name a real server authorizes a resource request under (NewRequestInfo)."""
    if method == "GET" or method == "HEAD":
        verb = "watch" if watch else ("get" if name else "list")
    elif method == "POST":
        verb = "create"
    elif method == "PUT":
        verb = "update"
    elif method == "PATCH":
        verb = "patch"
    elif method == "DELETE":
        verb = "delete" if name else "deletecollection"
    else:
        verb = method.lower()
    if not name and verb in ("list", "watch") and field_selector:
        for term in field_selector.split(","):
            for op in ("==", "="):
                key, sep, value = term.partition(op)
                if sep and key.strip() == "metadata.name" and "!" not in key:
                    name = value.strip()
                    break
            if name:
                break
    return Attributes(verb, api_group, resource, subresource or "", namespace or "", name or "")


__all__ = [
    "ADMIN_USER",
    "Attributes",
    "Authorizer",
    "Record",
    "RuleUse",
    "User",
    "attributes",
    "forbidden",
    "rule_allows",
    "service_account_user",
]
