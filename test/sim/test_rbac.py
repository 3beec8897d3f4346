"""Authentication and RBAC authorization, as kube-apiserver's RBAC authorizer decides and words them."""

from __future__ import annotations

from typing import Any

from caldera.hack.sim.rbac import Record

from .conftest import Cluster, needs_sim

RBAC = "/apis/rbac.authorization.k8s.io/v1"


def pod(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "main", "image": "busybox"}], **spec},
    }


async def account(c: Cluster, name: str) -> tuple[str, str]:
    """A ServiceAccount in the test namespace and a token for it (TokenRequest); (token, user name)."""
    await c.create(f"/api/v1/namespaces/{c.ns}/serviceaccounts", {"metadata": {"name": name}})
    answer = await c.http.ok(
        "POST",
        f"/api/v1/namespaces/{c.ns}/serviceaccounts/{name}/token",
        {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"expirationSeconds": 3600},
        },
    )
    assert answer["kind"] == "TokenRequest" and answer["status"]["expirationTimestamp"]
    return answer["status"]["token"], f"system:serviceaccount:{c.ns}:{name}"


async def grant(c: Cluster, sa: str, rules: list[dict[str, Any]], *, cluster_wide: bool = False) -> None:
    """A Role (or ClusterRole) with `rules`, bound to the ServiceAccount (RoleBinding or ClusterRoleBinding)."""
    subject = {"kind": "ServiceAccount", "name": sa, "namespace": c.ns}
    if cluster_wide:
        name = c.name(sa)
        await c.create(
            f"{RBAC}/clusterroles", {"metadata": {"name": name}, "rules": rules}, cluster_scoped=True
        )
        await c.create(
            f"{RBAC}/clusterrolebindings",
            {
                "metadata": {"name": name},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
                "subjects": [subject],
            },
            cluster_scoped=True,
        )
        return
    await c.create(f"{RBAC}/namespaces/{c.ns}/roles", {"metadata": {"name": sa}, "rules": rules})
    await c.create(
        f"{RBAC}/namespaces/{c.ns}/rolebindings",
        {
            "metadata": {"name": sa},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": sa},
            "subjects": [subject],
        },
    )


async def test_a_request_without_a_valid_token_is_401(cluster: Cluster) -> None:
    code, doc = await cluster.http("GET", f"/api/v1/namespaces/{cluster.ns}/pods", token="not-a-token")
    assert code == 401 and doc["reason"] == "Unauthorized"


async def test_forbidden_answers_name_the_user_verb_resource_group_and_scope(cluster: Cluster) -> None:
    c = cluster
    token, user = await account(c, "nobody")
    await c.http.ok("POST", f"/api/v1/namespaces/{c.ns}/pods", pod("v-0"))
    code, doc = await c.http(
        "PATCH",
        f"/api/v1/namespaces/{c.ns}/pods/v-0",
        {"metadata": {"labels": {"a": "b"}}},
        token=token,
        content_type="application/merge-patch+json",
    )
    assert code == 403 and doc["reason"] == "Forbidden"
    assert doc["message"] == (
        f'pods "v-0" is forbidden: User "{user}" cannot patch resource "pods" in API group "" '
        f'in the namespace "{c.ns}"'
    )
    assert doc["details"] == {"name": "v-0", "kind": "pods"}
    code, doc = await c.http("GET", "/api/v1/pods", token=token)
    assert code == 403
    assert doc["message"] == (
        f'pods is forbidden: User "{user}" cannot list resource "pods" in API group "" at the cluster scope'
    )
    code, doc = await c.http("GET", "/apis/scheduling.k8s.io/v1/priorityclasses/x", token=token)
    assert code == 403
    assert doc["message"] == (
        f'priorityclasses.scheduling.k8s.io "x" is forbidden: User "{user}" cannot get resource '
        '"priorityclasses" in API group "scheduling.k8s.io" at the cluster scope'
    )


async def test_a_role_binding_grants_in_its_namespace_only(cluster: Cluster) -> None:
    c = cluster
    token, _ = await account(c, "reader")
    await grant(c, "reader", [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}])
    await c.http.ok("POST", f"/api/v1/namespaces/{c.ns}/pods", pod("p"))
    assert (await c.http("GET", f"/api/v1/namespaces/{c.ns}/pods/p", token=token))[0] == 200
    assert (await c.http("GET", f"/api/v1/namespaces/{c.ns}/pods", token=token))[0] == 200
    code, doc = await c.http("GET", "/api/v1/namespaces/default/pods", token=token)
    assert code == 403 and doc["message"].endswith('in the namespace "default"')
    # The verbs are exactly those granted: no watch, no delete.
    assert (
        await c.http(
            "GET",
            f"/api/v1/namespaces/{c.ns}/pods",
            token=token,
            params={"watch": "1", "timeoutSeconds": "1"},
        )
    )[0] == 403
    code, doc = await c.http("DELETE", f"/api/v1/namespaces/{c.ns}/pods/p", token=token)
    assert code == 403 and "cannot delete resource" in doc["message"]


async def test_resource_names_restrict_by_name_and_a_field_selector_names_the_object(
    cluster: Cluster,
) -> None:
    c = cluster
    token, _ = await account(c, "named")
    await grant(
        c,
        "named",
        [
            {
                "apiGroups": [""],
                "resources": ["configmaps"],
                "resourceNames": ["conf"],
                "verbs": ["get", "list", "watch"],
            }
        ],
    )
    for name in ("conf", "other"):
        await c.http.ok("POST", f"/api/v1/namespaces/{c.ns}/configmaps", {"metadata": {"name": name}})
    base = f"/api/v1/namespaces/{c.ns}/configmaps"
    assert (await c.http("GET", f"{base}/conf", token=token))[0] == 200
    assert (await c.http("GET", f"{base}/other", token=token))[0] == 403
    # A list is a request without a name, unless its field selector names exactly one object.
    assert (await c.http("GET", base, token=token))[0] == 403
    code, doc = await c.http("GET", base, token=token, params={"fieldSelector": "metadata.name=conf"})
    assert code == 200 and [i["metadata"]["name"] for i in doc["items"]] == ["conf"]
    assert (await c.http("GET", base, token=token, params={"fieldSelector": "metadata.name=other"}))[0] == 403


async def test_subresources_are_granted_by_name_and_by_star_slash(cluster: Cluster) -> None:
    c = cluster
    token, user = await account(c, "status-writer")
    await grant(
        c,
        "status-writer",
        [
            {"apiGroups": [""], "resources": ["pods/status"], "verbs": ["patch"]},
            {"apiGroups": [""], "resources": ["*/binding"], "verbs": ["create"]},
        ],
    )
    await c.http.ok("POST", f"/api/v1/namespaces/{c.ns}/pods", pod("p"))
    patch = {"status": {"conditions": [{"type": "Example", "status": "True"}]}}
    code, _ = await c.http(
        "PATCH",
        f"/api/v1/namespaces/{c.ns}/pods/p/status",
        patch,
        token=token,
        content_type="application/merge-patch+json",
    )
    assert code == 200
    code, doc = await c.http(
        "PATCH",
        f"/api/v1/namespaces/{c.ns}/pods/p",
        {"metadata": {"labels": {"a": "b"}}},
        token=token,
        content_type="application/merge-patch+json",
    )
    assert code == 403, "pods/status does not grant pods"
    binding = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": "p"},
        "target": {"kind": "Node", "name": "n1"},
    }
    assert (await c.http("POST", f"/api/v1/namespaces/{c.ns}/pods/p/binding", binding, token=token))[0] == 201
    code, doc = await c.http(
        "POST",
        f"/api/v1/namespaces/{c.ns}/pods/p/eviction",
        {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "p"}},
        token=token,
    )
    assert code == 403 and doc["message"] == (
        f'pods "p" is forbidden: User "{user}" cannot create resource "pods/eviction" in API group "" '
        f'in the namespace "{c.ns}"'
    )


async def test_star_verbs_and_cluster_role_bindings_grant_everywhere(cluster: Cluster) -> None:
    c = cluster
    token, _ = await account(c, "admin-of-cms")
    await grant(
        c,
        "admin-of-cms",
        [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["*"]}],
        cluster_wide=True,
    )
    base = f"/api/v1/namespaces/{c.ns}/configmaps"
    assert (await c.http("POST", base, {"metadata": {"name": "x"}}, token=token))[0] == 201
    assert (await c.http("GET", "/api/v1/configmaps", token=token, params={"limit": "1"}))[0] == 200
    assert (await c.http("DELETE", f"{base}/x", token=token))[0] == 200
    assert (await c.http("GET", f"/api/v1/namespaces/{c.ns}/secrets", token=token))[0] == 403


async def test_a_token_dies_with_its_service_account(cluster: Cluster) -> None:
    c = cluster
    token, _ = await account(c, "short-lived")
    await grant(c, "short-lived", [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list"]}])
    assert (await c.http("GET", f"/api/v1/namespaces/{c.ns}/configmaps", token=token))[0] == 200
    await c.http.ok("DELETE", f"/api/v1/namespaces/{c.ns}/serviceaccounts/short-lived")
    assert (await c.http("GET", f"/api/v1/namespaces/{c.ns}/configmaps", token=token))[0] == 401


async def test_a_binding_may_not_change_its_role(cluster: Cluster) -> None:
    c = cluster
    await account(c, "fixed")
    await grant(c, "fixed", [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list"]}])
    path = f"{RBAC}/namespaces/{c.ns}/rolebindings/fixed"
    code, doc = await c.http(
        "PATCH",
        path,
        {"roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"}},
        content_type="application/merge-patch+json",
    )
    assert code == 422 and "cannot change roleRef" in doc["message"]


async def test_the_simulator_records_each_request_it_authorized_or_refused(cluster: Cluster) -> None:
    c = cluster
    sim = needs_sim(c)
    token, user = await account(c, "recorded")
    await grant(c, "recorded", [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}])
    await c.http("GET", f"/api/v1/namespaces/{c.ns}/pods", token=token)
    await c.http("GET", f"/api/v1/namespaces/{c.ns}/pods", token=token)
    await c.http("DELETE", f"/api/v1/namespaces/{c.ns}/pods/x", token=token)
    record = sim.server.authz.record
    assert record[Record(user, "list", "", "pods", "", c.ns, True)] == 2
    assert record[Record(user, "delete", "", "pods", "", c.ns, False)] == 1
    (use,) = [u for u in sim.server.authz.rules_used if u.role_name == "recorded"]
    assert (use.role_kind, use.rule_index, use.verb, use.resource) == ("Role", 0, "list", "pods")


async def test_discovery_is_open_to_every_authenticated_user(cluster: Cluster) -> None:
    c = cluster
    token, _ = await account(c, "discoverer")
    for path in ("/api", "/apis", "/api/v1", "/apis/scheduling.k8s.io/v1"):
        code, doc = await c.http("GET", path, token=token)
        assert code == 200, (path, doc)
    assert (await c.http("GET", "/api", token="not-a-token"))[0] == 401
