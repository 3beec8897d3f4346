"""deploy/base/rbac.yaml is least privilege: every grant it makes is needed by a request the scheduler makes,
and every request the scheduler makes is allowed.

The scenarios below, from the other e2e files, are run here again, each in a simulated cluster of its own,
and the simulator's authorizer records which rule allowed each request of the scheduler's ServiceAccount. A
grant no scenario needed is a permission to drop from the manifest (or a scenario to add here); the ordinary
list, watch, bind, status and event grants are needed by any of them. Every other e2e test also fails at once
on a request RBAC refused (the ``sim`` fixture)."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from caldera.hack.sim.rbac import RuleUse

from . import (
    test_deployment_flip,
    test_dra,
    test_events,
    test_lifecycle,
    test_native_gang,
    test_rare_calls,
    test_resourcequota,
    test_usage,
    test_volumes,
)
from .conftest import REAL_KUBECONFIG, deploy_manifests, e2e_cluster, refused_requests

#: each with the grants it is here for
SCENARIOS: list[tuple[Callable[..., Awaitable[None]], str]] = [
    (test_rare_calls.test_a_binding_whose_answer_was_lost_is_confirmed_by_reading_the_pod, "get pods"),
    (
        test_rare_calls.test_a_podgroup_create_that_meets_its_own_earlier_attempt_adopts_it,
        "create, get podgroups; patch pods (the group annotation)",
    ),
    (test_rare_calls.test_a_user_queue_gets_the_drain_finalizer_and_is_let_go_once_empty, "patch queues"),
    (
        test_rare_calls.test_preemption_evicts_and_deletes_when_the_eviction_api_is_refused,
        "create pods/eviction, delete pods",
    ),
    (test_deployment_flip.test_flipping_a_deployment_never_strands_a_pod, "delete podgroups"),
    (
        test_events.test_a_gang_that_does_not_fit_is_reported_once_and_a_new_reason_updates_the_same_event,
        "patch events, pods/status",
    ),
    (test_lifecycle.test_leader_failover_within_the_lease_duration, "create, get, update leases"),
    (test_lifecycle.test_conf_from_a_configmap_hot_reload, "list, watch the conf ConfigMap"),
    (
        test_volumes.test_a_gang_with_wait_for_first_consumer_claims_lands_where_they_can_be_provisioned,
        "patch persistentvolumeclaims",
    ),
    (
        test_dra.test_a_claim_write_that_meets_a_conflict_is_read_again_and_retried,
        "get, patch resourceclaims (the finalizer; a read after a conflict); patch resourceclaims/status",
    ),
    (
        test_native_gang.test_a_native_gang_of_four_binds_whole_or_not_at_all,
        "list, watch scheduling.k8s.io podgroups and workloads; patch podgroups/status",
    ),
    (
        test_resourcequota.test_a_namespace_quota_admits_the_first_job_and_holds_the_second_with_the_reason,
        "list, watch resourcequotas",
    ),
    (
        test_usage.test_metrics_server_load_filters_the_hot_node_and_picks_the_cool_one,
        "list metrics.k8s.io nodes",
    ),
    (
        test_usage.test_prometheus_adaptor_load_filters_the_hot_node_and_picks_the_cool_one,
        "get custom.metrics.k8s.io nodes/node_cpu_usage_avg, nodes/node_memory_usage_avg",
    ),
]


def _grants() -> list[RuleUse]:
    """Every (rule, verb, group, resource[, name]) that deploy/base/rbac.yaml grants to the scheduler."""
    grants = []
    for doc in deploy_manifests():
        if doc["kind"] not in ("Role", "ClusterRole"):
            continue
        ns = doc["metadata"].get("namespace", "") if doc["kind"] == "Role" else ""
        for i, rule in enumerate(doc.get("rules") or ()):
            for group in rule.get("apiGroups") or ():
                for resource in rule.get("resources") or ():
                    for verb in rule.get("verbs") or ():
                        for name in rule.get("resourceNames") or [""]:
                            grants.append(
                                RuleUse(
                                    doc["kind"], ns, doc["metadata"]["name"], i, verb, group, resource, name
                                )
                            )
    return grants


async def test_every_grant_is_needed_and_every_request_allowed(tmp_path: Path) -> None:
    if REAL_KUBECONFIG:
        pytest.skip("needs the simulator's record of requests")
    used: set[RuleUse] = set()
    for i, (scenario, _) in enumerate(SCENARIOS):
        directory = tmp_path / str(i)
        directory.mkdir()
        native = bool(getattr(inspect.getmodule(scenario), "NATIVE_GANG_API", False))
        async with e2e_cluster(directory, native) as fixtures:
            await scenario(**{name: fixtures[name] for name in inspect.signature(scenario).parameters})
            refused = refused_requests(fixtures["sim"])
            used.update(fixtures["sim"].server.authz.rules_used)
        assert not refused, f"{scenario.__name__}: requests deploy/base/rbac.yaml does not allow: {refused}"
    grants = _grants()
    assert grants, "deploy/base/rbac.yaml grants nothing"
    unused = [g for g in grants if g not in used]
    assert not unused, "rules of deploy/base/rbac.yaml that no request of the scheduler needed: " + "; ".join(
        f"{g.role_kind} {g.role_name} rule {g.rule_index}: {g.verb} {g.api_group or 'core'}/{g.resource}"
        + (f" {g.name}" if g.name else "")
        for g in unused
    )
