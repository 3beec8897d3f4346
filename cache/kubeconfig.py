"""Reading a kubeconfig (or the in-cluster service account) without kubernetes-asyncio.

Importing kubernetes-asyncio costs about a second of CPU (its generated API modules), paid before
the first cycle. The common cases — a server with a CA (file or data) or no TLS check, and a bearer
token, token file (read again every minute, cache/auth.py), an ``exec`` plugin that prints a token
(run again before it expires), client certificate or basic auth, and ``tls-server-name`` — are read
here from the YAML; anything else (``auth-provider``, proxies, exec plugins that give certificates
or ask for cluster information or a terminal) returns None and the caller falls back to
kubernetes-asyncio, which handles them (with a token read once). Field names follow client-go's
``clientcmd/api/v1`` types (Config, Cluster, AuthInfo, Context).
"""

from __future__ import annotations

import base64
import logging
import os
import ssl
import tempfile
from pathlib import Path
from typing import Any

import yaml

from caldera.cache.auth import CredentialError, ExecPlugin, TokenSource

log = logging.getLogger("caldera.client")
SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")

#: user and cluster keys handled here; any other key sends the kubeconfig to kubernetes-asyncio
_USER_KEYS = frozenset(
    {
        "token",
        "tokenFile",
        "client-certificate",
        "client-certificate-data",
        "client-key",
        "client-key-data",
        "username",
        "password",
        "exec",
    }
)
#: ``exec`` keys handled here (client-go ExecConfig); others send the kubeconfig to kubernetes-asyncio
_EXEC_KEYS = frozenset(
    {"command", "args", "env", "apiVersion", "installHint", "interactiveMode", "provideClusterInfo"}
)
_CLUSTER_KEYS = frozenset(
    {
        "server",
        "certificate-authority",
        "certificate-authority-data",
        "insecure-skip-tls-verify",
        "tls-server-name",
    }
)


def _named(items: Any, name: str) -> dict[str, Any] | None:
    for item in items or []:
        if isinstance(item, dict) and item.get("name") == name:
            return item
    return None


def _resolve(base: Path, value: str) -> str:
    path = Path(value).expanduser()
    return str(path if path.is_absolute() else base / path)


def load_kubeconfig(path: str | Path, context: str | None = None) -> dict[str, Any] | None:
    """``{"host", "token", "ssl_context", "headers", "auth", "tls_server_name"}`` for ClusterConfig, or None when this kubeconfig
    needs kubernetes-asyncio (see the module docstring)."""
    path = Path(path).expanduser()
    doc = yaml.safe_load(path.read_text())
    if not isinstance(doc, dict):
        return None
    base = path.parent
    ctx_entry = _named(doc.get("contexts"), context or doc.get("current-context") or "")
    if ctx_entry is None:
        return None
    ctx = ctx_entry.get("context") or {}
    cluster_entry = _named(doc.get("clusters"), ctx.get("cluster", ""))
    user_entry = _named(doc.get("users"), ctx.get("user", "")) or {"user": {}}
    if cluster_entry is None:
        return None
    cluster = cluster_entry.get("cluster") or {}
    user = user_entry.get("user") or {}
    if set(cluster) - _CLUSTER_KEYS or set(user) - _USER_KEYS or not cluster.get("server"):
        return None
    host = str(cluster["server"]).rstrip("/")
    token = str(user.get("token") or "")
    auth: TokenSource | None = None
    if not token and user.get("tokenFile"):
        auth = TokenSource(path=Path(_resolve(base, user["tokenFile"])))
    elif not token and user.get("exec"):
        plugin = _exec_plugin(base, user["exec"])
        if plugin is None:
            return None
        try:
            auth = TokenSource(plugin=plugin)
        except CredentialError as exc:
            log.info("kubeconfig: %s", exc)
            return None  # kubernetes-asyncio runs it again and words the error
    if auth is not None:
        token = auth.token
    headers: dict[str, str] = {}
    if not token and user.get("username"):
        raw = f"{user['username']}:{user.get('password') or ''}".encode()
        headers["Authorization"] = "Basic " + base64.b64encode(raw).decode()
    ssl_context: ssl.SSLContext | bool | None = None
    if host.startswith("https"):
        if cluster.get("insecure-skip-tls-verify"):
            ssl_context = False
        else:
            ctx_ssl = ssl.create_default_context(
                cafile=_resolve(base, cluster["certificate-authority"])
                if cluster.get("certificate-authority")
                else None,
                cadata=base64.b64decode(cluster["certificate-authority-data"]).decode()
                if cluster.get("certificate-authority-data")
                else None,
            )
            _load_client_cert(ctx_ssl, base, user)
            ssl_context = ctx_ssl
    return {
        "host": host,
        "token": token,
        "ssl_context": ssl_context,
        "headers": headers,
        "auth": auth,
        "tls_server_name": str(cluster.get("tls-server-name") or ""),
    }


def _exec_plugin(base: Path, spec: Any) -> ExecPlugin | None:
    """The ``exec`` entry as an :class:`ExecPlugin`, or None when it needs what only
    kubernetes-asyncio does (a terminal, cluster information for the plugin)."""
    if not isinstance(spec, dict) or set(spec) - _EXEC_KEYS or not spec.get("command"):
        return None
    if spec.get("interactiveMode") == "Always" or spec.get("provideClusterInfo"):
        return None
    command = str(spec["command"])
    if os.sep in command and not os.path.isabs(command):
        command = _resolve(base, command)  # client-go: relative to the kubeconfig's folder
    env = tuple(
        (str(e.get("name")), str(e.get("value", ""))) for e in spec.get("env") or [] if isinstance(e, dict)
    )
    return ExecPlugin(
        command=command,
        api_version=str(spec.get("apiVersion") or ""),
        args=tuple(str(a) for a in spec.get("args") or []),
        env=env,
    )


def _load_client_cert(ctx: ssl.SSLContext, base: Path, user: dict[str, Any]) -> None:
    cert = user.get("client-certificate")
    key = user.get("client-key")
    if cert or user.get("client-certificate-data"):
        with tempfile.TemporaryDirectory(prefix="caldera-kubeconfig-") as tmp:
            if not cert:
                cert = os.path.join(tmp, "cert.pem")
                Path(cert).write_bytes(base64.b64decode(user["client-certificate-data"]))
            else:
                cert = _resolve(base, cert)
            if not key and user.get("client-key-data"):
                key = os.path.join(tmp, "key.pem")
                fd = os.open(key, os.O_WRONLY | os.O_CREAT, 0o600)
                with os.fdopen(fd, "wb") as f:
                    f.write(base64.b64decode(user["client-key-data"]))
            elif key:
                key = _resolve(base, key)
            ctx.load_cert_chain(cert, key or None)  # read now: the temporary files may go


def load_incluster() -> dict[str, Any]:
    """The pod's service account: the API server's service address, its token and CA (client-go's
    rest.InClusterConfig)."""
    host = os.environ["KUBERNETES_SERVICE_HOST"]
    port = os.environ.get("KUBERNETES_SERVICE_PORT", "443")
    if ":" in host:  # IPv6
        host = f"[{host}]"
    auth = TokenSource(path=SERVICE_ACCOUNT / "token")  # the kubelet rewrites it: read every minute
    ca = SERVICE_ACCOUNT / "ca.crt"
    ctx = ssl.create_default_context(cafile=str(ca)) if ca.exists() else ssl.create_default_context()
    return {
        "host": f"https://{host}:{port}",
        "token": auth.token,
        "ssl_context": ctx,
        "headers": {},
        "auth": auth,
        "tls_server_name": "",
    }
