"""The deployment manifests as an administrator applies them: a kustomize base and two overlays
(``standalone`` with the CRDs, ``beside-volcano`` without), rendered and validated against the
Kubernetes 1.36 API schemas; least-privilege RBAC; a production image with the scheduler only.

No kustomize renderer installs from PyPI, Debian or npm here (Debian has no kustomize package; PyPI's
``kustomize`` generates manifests, it does not render kustomizations), so ``render`` below implements
the subset deploy/ uses, as ``kubectl kustomize`` does it: ``resources`` (files, and directories
holding a kustomization.yaml, in order) and ``patches`` holding RFC 6902 JSON patches with a
``target``. Any other kustomization field fails the test, so a new one cannot be used unrendered.
The schemas come from PyPI's kubernetes-validate (the test extra in pyproject.toml)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from caldera.config.conf import DEFAULT_CONF

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
KUBERNETES = "1.36"
OVERLAYS = ("standalone", "beside-volcano")
CRD_NAMES = {
    "podgroups.scheduling.volcano.sh",
    "queues.scheduling.volcano.sh",
    "hypernodes.topology.volcano.sh",
    "numatopologies.nodeinfo.volcano.sh",
}


# ------------------------------------------------------------------------------------------------
# the kustomize subset
# ------------------------------------------------------------------------------------------------
KNOWN_FIELDS = {"apiVersion", "kind", "resources", "patches"}


def render(directory: Path) -> list[dict[str, Any]]:
    kustomization = yaml.safe_load((directory / "kustomization.yaml").read_text())
    unknown = set(kustomization) - KNOWN_FIELDS
    assert not unknown, f"{directory}: kustomization fields this test cannot render: {unknown}"
    assert kustomization.get("kind", "Kustomization") == "Kustomization"
    objects: list[dict[str, Any]] = []
    for entry in kustomization.get("resources", []):
        path = (directory / entry).resolve()
        if path.is_dir():
            objects += render(path)
        else:
            # kustomize's load restrictor: a file resource must be inside the kustomization's root
            assert path.is_relative_to(directory.resolve()), f"{entry} is outside {directory}"
            objects += [d for d in yaml.safe_load_all(path.read_text()) if d]
    for patch in kustomization.get("patches", []):
        ops = yaml.safe_load((directory / patch["path"]).read_text())
        targets = [o for o in objects if _matches(o, patch["target"])]
        assert targets, f"patch {patch['path']} matches nothing"
        for obj in targets:
            for op in ops:
                _apply(obj, op)
    ids = [
        (o["apiVersion"].split("/")[0] if "/" in o["apiVersion"] else "", o["kind"], _ns(o), _name(o))
        for o in objects
    ]
    assert len(ids) == len(set(ids)), "an object is defined twice"
    return objects


def _name(obj: dict[str, Any]) -> str:
    return str(obj["metadata"]["name"])


def _ns(obj: dict[str, Any]) -> str:
    return str(obj["metadata"].get("namespace", ""))


def _matches(obj: dict[str, Any], target: dict[str, str]) -> bool:
    group, _, version = obj["apiVersion"].rpartition("/")
    return (
        target.get("kind", obj["kind"]) == obj["kind"]
        and target.get("name", _name(obj)) == _name(obj)
        and target.get("group", group) == group
        and target.get("version", version) == version
    )


def _apply(obj: dict[str, Any], op: dict[str, Any]) -> None:
    """One RFC 6902 operation: add, replace, remove (the ones kustomize users write)."""
    parts = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].lstrip("/").split("/")]
    parent: Any = obj
    for part in parts[:-1]:
        parent = parent[int(part)] if isinstance(parent, list) else parent[part]
    last = parts[-1]
    if op["op"] == "add":
        if isinstance(parent, list):
            parent.insert(len(parent) if last == "-" else int(last), op["value"])
        else:
            parent[last] = op["value"]
    elif op["op"] == "replace":
        if isinstance(parent, list):
            parent[int(last)] = op["value"]
        else:
            assert last in parent, op
            parent[last] = op["value"]
    elif op["op"] == "remove":
        del parent[int(last) if isinstance(parent, list) else last]
    else:
        raise AssertionError(f"unsupported patch op {op['op']}")


def test_the_renderer_applies_json_patches_as_kustomize_does() -> None:
    obj = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}, "spec": {"a": [1, 2]}}
    _apply(obj, {"op": "add", "path": "/spec/a/-", "value": 3})
    _apply(obj, {"op": "add", "path": "/spec/a/0", "value": 0})
    _apply(obj, {"op": "replace", "path": "/spec/a/1", "value": 9})
    _apply(obj, {"op": "add", "path": "/spec/b~1c", "value": "x"})
    _apply(obj, {"op": "remove", "path": "/spec/a/2"})
    assert obj["spec"] == {"a": [0, 9, 3], "b/c": "x"}
    assert _matches(obj, {"group": "apps", "kind": "Deployment", "name": "d"})
    assert not _matches(obj, {"group": "", "kind": "Deployment"})


def _kustomize() -> list[str] | None:
    """A real kustomize, where this machine happens to have one (some images ship kubectl with its
    built-in kustomize); the project does not install it."""
    if shutil.which("kustomize"):
        return ["kustomize", "build"]
    if shutil.which("kubectl"):
        return ["kubectl", "kustomize"]
    return None


@pytest.mark.parametrize("name", OVERLAYS)
def test_the_renderer_agrees_with_kustomize_where_one_is_installed(name: str) -> None:
    command = _kustomize()
    if command is None:
        pytest.skip("no kustomize or kubectl on this machine: the subset renderer alone is used")
    out = subprocess.run(
        [*command, str(DEPLOY / "overlays" / name)], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr

    def key(o: dict[str, Any]) -> tuple[str, str, str, str]:
        return (o["apiVersion"], o["kind"], _ns(o), _name(o))

    theirs = sorted((d for d in yaml.safe_load_all(out.stdout) if d), key=key)
    ours = sorted(render(DEPLOY / "overlays" / name), key=key)
    assert theirs == ours


# ------------------------------------------------------------------------------------------------
# the overlays
# ------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module", params=OVERLAYS)
def overlay(request: pytest.FixtureRequest) -> tuple[str, list[dict[str, Any]]]:
    return request.param, render(DEPLOY / "overlays" / request.param)


def one(objects: list[dict[str, Any]], kind: str, name: str = "") -> dict[str, Any]:
    (found,) = [o for o in objects if o["kind"] == kind and (not name or _name(o) == name)]
    return found


def test_every_rendered_object_validates_against_the_kubernetes_schemas(overlay) -> None:
    name, objects = overlay
    kinds = sorted(o["kind"] for o in objects)
    for obj in objects:
        kubernetes_validate.validate(obj, KUBERNETES, strict=True)
    expected = [
        "ClusterRole",
        "ClusterRoleBinding",
        "ConfigMap",
        "Deployment",
        "Namespace",
        "PodDisruptionBudget",
        "Role",
        "RoleBinding",
        "Service",
        "ServiceAccount",
    ]
    crds = {_name(o) for o in objects if o["kind"] == "CustomResourceDefinition"}
    if name == "standalone":
        assert crds == CRD_NAMES
    else:
        assert crds == set()  # Volcano's own CRDs stay as they are
    assert sorted(k for k in kinds if k != "CustomResourceDefinition") == expected


def test_a_broken_manifest_is_caught_by_the_validation() -> None:
    dep = one(render(DEPLOY / "overlays" / "standalone"), "Deployment")
    dep["spec"]["replicas"] = "two"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(dep, KUBERNETES, strict=True)


def test_the_deployment_runs_two_hardened_replicas_with_probes_and_resources(overlay) -> None:
    _, objects = overlay
    dep = one(objects, "Deployment", "caldera-scheduler")
    assert dep["spec"]["replicas"] == 2
    pod = dep["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    args = container["args"]
    assert "--leader-elect" in args and "--listen-address=0.0.0.0:8080" in args
    assert any(a.startswith("--scheduler-conf=configmap:caldera-system/caldera-scheduler-conf") for a in args)
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    resources = container["resources"]
    assert set(resources["requests"]) == {"cpu", "memory"} and set(resources["limits"]) == {"cpu", "memory"}
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] != 0
    sc = container["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True and sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"]["drop"] == ["ALL"]
    assert pod["serviceAccountName"] == "caldera-scheduler"
    one(objects, "ServiceAccount", "caldera-scheduler")


def test_the_overlays_differ_in_crds_and_controllers_only() -> None:
    standalone = render(DEPLOY / "overlays" / "standalone")
    beside = render(DEPLOY / "overlays" / "beside-volcano")
    args_alone = one(standalone, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
    args_beside = one(beside, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
    # Beside Volcano, Volcano's controllers own PodGroups and Queue state: ours are off.
    assert args_beside == [*args_alone, "--no-enable-controllers"]
    assert not any("enable-controllers" in a for a in args_alone)
    # Both take only pods that name Caldera; Volcano's pods stay Volcano's.
    assert [a for a in args_beside if a.startswith("--scheduler-name")] == ["--scheduler-name=caldera"]
    rest = [o for o in standalone if o["kind"] not in ("CustomResourceDefinition", "Deployment")]
    assert rest == [o for o in beside if o["kind"] != "Deployment"]


def test_the_metrics_service_and_the_disruption_budget_select_the_scheduler_pods(overlay) -> None:
    _, objects = overlay
    dep = one(objects, "Deployment")
    labels = dep["spec"]["template"]["metadata"]["labels"]
    (container,) = dep["spec"]["template"]["spec"]["containers"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    service = one(objects, "Service", "caldera-scheduler-metrics")
    assert service["spec"]["selector"].items() <= labels.items()
    (port,) = service["spec"]["ports"]
    assert port["targetPort"] in ports and ports[port["targetPort"]] == 8080
    pdb = one(objects, "PodDisruptionBudget")
    assert pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()
    # two replicas, at most one away at a time
    assert pdb["spec"]["minAvailable"] == dep["spec"]["replicas"] - 1


def test_the_optional_servicemonitor_scrapes_the_metrics_service() -> None:
    # Not in kubernetes-validate's schemas (a Prometheus Operator CRD): checked against the Service.
    (monitor,) = [
        d for d in yaml.safe_load_all((DEPLOY / "optional" / "servicemonitor.yaml").read_text()) if d
    ]
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1" and monitor["kind"] == "ServiceMonitor"
    service = one(render(DEPLOY / "base"), "Service", "caldera-scheduler-metrics")
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert monitor["spec"]["namespaceSelector"]["matchNames"] == [service["metadata"]["namespace"]]
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["port"] in {p["name"] for p in service["spec"]["ports"]}
    assert endpoint["path"] == "/metrics"
    # optional: in no overlay
    for name in OVERLAYS:
        assert not [o for o in render(DEPLOY / "overlays" / name) if o["kind"] == "ServiceMonitor"]


def test_configmap_holds_the_default_conf() -> None:
    cm = one(render(DEPLOY / "base"), "ConfigMap", "caldera-scheduler-conf")
    assert yaml.safe_load(cm["data"]["volcano-scheduler.conf"]) == yaml.safe_load(DEFAULT_CONF)


def test_rbac_grants_what_the_scheduler_calls_and_no_wildcards() -> None:
    objects = render(DEPLOY / "base")
    rules = [r for d in objects if d["kind"] in ("ClusterRole", "Role") for r in d["rules"]]
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
        ("resource.k8s.io", "deviceclasses", "watch"),
        ("resource.k8s.io", "resourceslices", "watch"),
        ("resource.k8s.io", "resourceclaims", "watch"),
        ("resource.k8s.io", "resourceclaims", "get"),
        ("resource.k8s.io", "resourceclaims", "patch"),
        ("resource.k8s.io", "resourceclaims/status", "patch"),
    ]:
        assert allowed(group, resource, verb), (group, resource, verb)
    assert not allowed("", "secrets", "get")
    assert not allowed("", "nodes", "update")


# ------------------------------------------------------------------------------------------------
# the production image
# ------------------------------------------------------------------------------------------------
def dockerfile_copies() -> list[str]:
    lines = (DEPLOY / "Dockerfile").read_text().splitlines()
    return [line.split()[1] for line in lines if line.startswith("COPY ") and "--from=" not in line]


def test_the_dockerfile_runs_the_scheduler_as_non_root_and_copies_no_hack() -> None:
    text = (DEPLOY / "Dockerfile").read_text()
    assert 'ENTRYPOINT ["caldera-scheduler"]' in text and "USER 65532" in text
    copied = dockerfile_copies()
    assert "hack" not in copied and not [c for c in copied if c.startswith("hack")]
    assert "deploy/product_pyproject.py" in copied
    # the documented build command
    assert "docker build -f deploy/Dockerfile -t caldera-scheduler:0.1.0 ." in text


def test_the_image_build_step_makes_a_wheel_with_the_scheduler_only(tmp_path: Path) -> None:
    """What the Dockerfile's build stage does, without a container engine (none on this machine): copy
    what it copies, rewrite pyproject.toml, build the wheel."""
    src = tmp_path / "src"
    src.mkdir()
    for item in dockerfile_copies():
        origin = ROOT / item
        if origin.is_dir():
            shutil.copytree(origin, src / item, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            (src / item).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(origin, src / item)
    assert not (src / "hack").exists()
    subprocess.run(
        [sys.executable, str(src / "deploy" / "product_pyproject.py"), str(src / "pyproject.toml")],
        check=True,
    )
    product = tomllib.loads((src / "pyproject.toml").read_text())
    assert "caldera-sim" not in product["project"]["scripts"]
    wheels = tmp_path / "wheels"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
         "--disable-pip-version-check", "--wheel-dir", str(wheels), str(src)],
        check=True,
        capture_output=True,
        cwd=tmp_path,
    )  # fmt: skip
    (wheel,) = wheels.glob("caldera-*.whl")
    archive = zipfile.ZipFile(wheel)
    names = archive.namelist()
    assert "caldera/scheduler/cli.py" in names and "caldera/scheduler/ui/static/index.html" in names
    assert not [n for n in names if n.startswith("caldera/hack/")]
    entry_points = archive.read(next(n for n in names if n.endswith("entry_points.txt"))).decode()
    assert (
        "caldera-scheduler = caldera.scheduler.cli:main" in entry_points and "caldera-sim" not in entry_points
    )


def test_the_pyproject_rewrite_fails_loudly_when_it_misses_a_hack_entry(tmp_path: Path) -> None:
    changed = (
        (ROOT / "pyproject.toml")
        .read_text()
        .replace('"caldera.hack.soak",', '"caldera.hack.soak", "caldera.hack.extra",')
    )
    path = tmp_path / "pyproject.toml"
    path.write_text(changed)
    proc = subprocess.run(
        [sys.executable, str(DEPLOY / "product_pyproject.py"), str(path)], capture_output=True, text=True
    )
    assert proc.returncode != 0 and "still names" in proc.stderr
