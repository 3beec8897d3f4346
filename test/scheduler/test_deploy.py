"""The deployment manifests: two replicas with leader election, the default conf, least-privilege RBAC."""

from __future__ import annotations

from pathlib import Path

import yaml

from caldera.config.conf import DEFAULT_CONF

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


def docs(name: str) -> list[dict]:
    return [d for d in yaml.safe_load_all((DEPLOY / name).read_text()) if d]


def test_deployment_runs_two_replicas_with_leader_election_and_probes() -> None:
    (dep,) = docs("deployment.yaml")
    assert dep["spec"]["replicas"] == 2
    container = dep["spec"]["template"]["spec"]["containers"][0]
    args = container["args"]
    assert "--leader-elect" in args
    assert any(a.startswith("--scheduler-conf=configmap:caldera-system/caldera-scheduler-conf") for a in args)
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert dep["spec"]["template"]["spec"]["serviceAccountName"] == "caldera-scheduler"


def test_configmap_holds_the_default_conf() -> None:
    (cm,) = docs("configmap.yaml")
    assert yaml.safe_load(cm["data"]["volcano-scheduler.conf"]) == yaml.safe_load(DEFAULT_CONF)


def test_rbac_grants_what_the_scheduler_calls_and_no_wildcards() -> None:
    rules = [r for d in docs("rbac.yaml") if d["kind"] in ("ClusterRole", "Role") for r in d["rules"]]
    for rule in rules:
        assert "*" not in rule["verbs"] and "*" not in rule["resources"] and "*" not in rule["apiGroups"]

    def allowed(group: str, resource: str, verb: str) -> bool:
        return any(
            group in r["apiGroups"] and resource in r["resources"] and verb in r["verbs"] for r in rules
        )

    for group, resource, verb in [
        ("", "pods", "watch"),
        ("", "nodes", "list"),
        ("", "pods/binding", "create"),
        ("", "pods/eviction", "create"),
        ("", "pods/status", "patch"),
        ("", "events", "create"),
        ("scheduling.volcano.sh", "podgroups", "patch"),
        ("scheduling.volcano.sh", "queues", "watch"),
        ("scheduling.k8s.io", "priorityclasses", "watch"),
        ("topology.volcano.sh", "hypernodes", "watch"),
        ("coordination.k8s.io", "leases", "update"),
        ("", "configmaps", "watch"),
    ]:
        assert allowed(group, resource, verb), (group, resource, verb)
    assert not allowed("", "secrets", "get")
    assert not allowed("", "nodes", "update")


def test_dockerfile_runs_the_console_script_as_non_root() -> None:
    text = (DEPLOY / "Dockerfile").read_text()
    assert 'ENTRYPOINT ["caldera-scheduler"]' in text and "USER 65532" in text
