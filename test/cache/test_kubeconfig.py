"""The kubeconfig is read without kubernetes-asyncio where it can be, with the same result; what it
does not handle goes to kubernetes-asyncio."""

from pathlib import Path

import pytest
import yaml

from caldera.cache.client import ClusterConfig
from caldera.cache.kubeconfig import load_kubeconfig


def _write(tmp_path: Path, cluster: dict, user: dict, name: str = "kubeconfig") -> Path:
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "main",
        "contexts": [
            {"name": "other", "context": {"cluster": "nowhere", "user": "nobody"}},
            {"name": "main", "context": {"cluster": "c1", "user": "u1"}},
        ],
        "clusters": [
            {"name": "nowhere", "cluster": {"server": "http://10.0.0.1"}},
            {"name": "c1", "cluster": cluster},
        ],
        "users": [{"name": "nobody", "user": {}}, {"name": "u1", "user": user}],
    }
    path = tmp_path / name
    path.write_text(yaml.safe_dump(doc))
    return path


async def _by_kubernetes_asyncio(path: Path) -> ClusterConfig:
    from kubernetes_asyncio import config as kconfig
    from kubernetes_asyncio.client import Configuration

    cfg = Configuration()
    await kconfig.load_kube_config(config_file=str(path), client_configuration=cfg, persist_config=False)
    return ClusterConfig.from_configuration(cfg)


@pytest.mark.parametrize(
    ("cluster", "user"),
    [
        ({"server": "http://127.0.0.1:6443/"}, {"token": "abc"}),
        ({"server": "https://10.1.2.3:6443", "insecure-skip-tls-verify": True}, {"token": "t0k"}),
    ],
)
async def test_the_current_context_reads_as_kubernetes_asyncio_reads_it(tmp_path, cluster, user):
    path = _write(tmp_path, cluster, user)
    fast = await ClusterConfig.load(str(path))
    slow = await _by_kubernetes_asyncio(path)
    assert (fast.host, fast.token, fast.headers, fast.ssl_context) == (
        slow.host,
        slow.token,
        slow.headers,
        slow.ssl_context,
    )


async def test_basic_auth_is_an_authorization_header_not_a_token(tmp_path):
    path = _write(tmp_path, {"server": "http://127.0.0.1:8080"}, {"username": "admin", "password": "secret"})
    cfg = await ClusterConfig.load(str(path))
    # base64 of "admin:secret"
    assert (cfg.token, cfg.headers) == ("", {"Authorization": "Basic YWRtaW46c2VjcmV0"})


async def test_a_token_file_is_read_relative_to_the_kubeconfig(tmp_path):
    (tmp_path / "token").write_text("from-file\n")
    path = _write(tmp_path, {"server": "http://127.0.0.1:1"}, {"tokenFile": "token"})
    assert (await ClusterConfig.load(str(path))).token == "from-file"


def test_auth_providers_and_exec_plugins_it_cannot_run_are_left_to_kubernetes_asyncio(tmp_path):
    exec_user = {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": "no-such-get-token"}}
    assert load_kubeconfig(_write(tmp_path, {"server": "https://k"}, exec_user)) is None
    provider = {"auth-provider": {"name": "oidc", "config": {}}}
    assert load_kubeconfig(_write(tmp_path, {"server": "https://k"}, provider, "b")) is None
    terminal = {"exec": {**exec_user["exec"], "command": "true", "interactiveMode": "Always"}}
    assert load_kubeconfig(_write(tmp_path, {"server": "https://k"}, terminal, "c")) is None


def test_tls_server_name_is_read_as_the_name_to_verify(tmp_path):
    named = {"server": "https://k", "tls-server-name": "api.internal"}
    cfg = load_kubeconfig(_write(tmp_path, named, {"token": "x"}))
    assert cfg is not None and cfg["tls_server_name"] == "api.internal"
