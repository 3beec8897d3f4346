"""deploy/base/rbac.yaml against what the scheduler did over the e2e suite (the simulator's record of requests).

Runs last (file order). Every request the scheduler made was allowed (each test also fails at once on a
refused one), and every rule of the manifest was used: each verb on each resource (and each named object of a
rule with resourceNames) that a rule grants, some request of the suite needed. A grant the code never uses is
a permission to drop from the manifest.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from caldera.hack.sim.rbac import RuleUse

from .conftest import REAL_KUBECONFIG, SCHEDULER_USER, SUITE, deploy_manifests

E2E = Path(__file__).resolve().parent


def _whole_suite_ran(session: pytest.Session) -> bool:
    """Every e2e module took part, none filtered by -k/-m (only then must every rule have been used)."""
    modules = {Path(str(item.fspath)).name for item in session.items}
    wanted = {p.name for p in E2E.glob("test_*.py")}
    opt = session.config.option
    return wanted <= modules and not getattr(opt, "keyword", "") and not getattr(opt, "lf", False)


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


def test_every_request_allowed_and_every_rule_used(request: pytest.FixtureRequest) -> None:
    if REAL_KUBECONFIG:
        pytest.skip("needs the simulator's record of requests")
    if not _whole_suite_ran(request.session) or not SUITE.requests:
        pytest.skip("compares the whole e2e suite's requests with the rules: run test/e2e in full")
    refused = {rec: n for rec, n in SUITE.requests.items() if not rec.allowed}
    assert not refused, f"requests deploy/base/rbac.yaml does not allow: {refused}"
    assert all(rec.user == SCHEDULER_USER for rec in SUITE.requests)
    grants = _grants()
    assert grants, "deploy/base/rbac.yaml grants nothing"
    unused = [g for g in grants if g not in SUITE.rules_used]
    used_lines = sorted({(r.verb, r.api_group, r.resource, r.name) for r in SUITE.rules_used})
    assert not unused, (
        "rules of deploy/base/rbac.yaml that no request of the scheduler needed over the e2e suite: "
        + "; ".join(
            f"{g.role_kind} {g.role_name} rule {g.rule_index}: {g.verb} {g.api_group or 'core'}/{g.resource}"
            + (f" {g.name}" if g.name else "")
            for g in unused
        )
        + f"\nused: {used_lines}"
    )
