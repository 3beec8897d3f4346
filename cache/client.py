"""One shared HTTP connection to the API server.

kubernetes-asyncio only loads the kubeconfig (or the in-cluster service account) and works out the
host, token and TLS material; every request then goes through one keep-alive aiohttp session, and
bodies are handed back as raw bytes for msgspec to decode.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import ssl
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

import aiohttp
import msgspec
from yarl import URL

from caldera.cache.auth import AUTH_FAILURES, TokenSource
from caldera.cache.http1 import Http1Pool, RequestShape

log = logging.getLogger("caldera.client")

#: Status codes worth retrying: throttling, server trouble, and timeouts reported by the server.
TRANSIENT_CODES = frozenset({408, 429, 500, 502, 503, 504})


#: What a write that got no answer raises (connection trouble, timeouts, framing the writer cannot
#: read, a path that is not latin-1); the client reports it as an ApiError of code 0.
_NO_ANSWER = (TimeoutError, OSError, ValueError, asyncio.LimitOverrunError)


class ApiError(Exception):
    """A non-2xx answer; ``code`` 0 means the request never got an answer (connection, timeout)."""

    def __init__(self, code: int, reason: str = "", message: str = "", retry_after: float | None = None):
        super().__init__(f"{code} {reason}: {message}".strip())
        self.code = code
        self.reason = reason
        self.message = message
        self.retry_after = retry_after
        #: set by callers that retry: the error came after at least one earlier attempt
        self.retried = False

    @property
    def transient(self) -> bool:
        return self.code == 0 or self.code in TRANSIENT_CODES


class _Status(msgspec.Struct):
    code: int = 0
    reason: str = ""
    message: str = ""


_status_decoder = msgspec.json.Decoder(_Status)


def error_from(code: int, body: bytes, headers: Mapping[str, str] | None = None) -> ApiError:
    reason = message = ""
    try:
        status = _status_decoder.decode(body)
        reason, message = status.reason, status.message
    except (msgspec.DecodeError, msgspec.ValidationError):
        message = body[:200].decode("utf-8", "replace")
    retry_after: float | None = None
    if headers is not None and headers.get("Retry-After"):
        try:
            retry_after = float(headers["Retry-After"])
        except ValueError:
            retry_after = None
    return ApiError(code, reason, message, retry_after)


class ClusterConfigError(Exception):
    """No usable way to reach the API server; the message says what is wrong and what to do."""


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


@dataclass
class ClusterConfig:
    """Where the API server is and how to talk to it."""

    host: str
    token: str = ""
    ssl_context: ssl.SSLContext | bool | None = None
    headers: dict[str, str] = field(default_factory=dict)
    #: where the token comes from when it rotates (a token file, an exec plugin); None: ``token`` as is
    auth: TokenSource | None = None
    #: the name the server's certificate is checked against (and sent as SNI), when not the host's
    tls_server_name: str = ""

    @classmethod
    async def load(cls, kubeconfig: str | None = None) -> ClusterConfig:
        """``--kubeconfig PATH``, else in-cluster, else ``$KUBECONFIG`` (or ~/.kube/config).
        :class:`ClusterConfigError` says in one line what is wrong and what to do.

        Read without kubernetes-asyncio where it can be (cache/kubeconfig.py): its import costs about
        a second before the first cycle. Whatever the fast reading does not handle, or fails on, goes
        the kubernetes-asyncio way below, which also words the errors."""
        fast = _fast_config(kubeconfig)
        if fast is not None:
            return cls(**fast)
        from kubernetes_asyncio import config as kconfig
        from kubernetes_asyncio.client import Configuration

        cfg = Configuration()
        if kubeconfig:
            source = f"--kubeconfig {kubeconfig}"
            path = kubeconfig
        elif os.environ.get("KUBERNETES_SERVICE_HOST"):
            try:
                kconfig.load_incluster_config(client_configuration=cfg)
            except kconfig.ConfigException as exc:
                raise ClusterConfigError(
                    f"cannot use the in-cluster service account: {_one_line(exc)}; check that the pod "
                    "mounts its service account token (automountServiceAccountToken), or pass --kubeconfig PATH"
                ) from None
            return cls.from_configuration(cfg)
        else:
            named = os.environ.get("KUBECONFIG", "").split(os.pathsep)[0]
            source = f"$KUBECONFIG ({named})" if named else "~/.kube/config"
            path = named or os.path.expanduser("~/.kube/config")
            if not os.path.exists(path):
                raise ClusterConfigError(
                    f"no cluster to talk to: not running in a pod and {source} does not exist; "
                    "pass --kubeconfig PATH (or set $KUBECONFIG)"
                )
        # kubernetes-asyncio reads a missing file as an empty config ("Expected key current-context"):
        # say what is really wrong.
        if not os.path.isfile(path):
            raise ClusterConfigError(
                f"cannot read the kubeconfig: {source}: no such file; pass the path of a kubeconfig file, "
                "or leave --kubeconfig out to use the in-cluster service account or $KUBECONFIG"
            )
        try:
            await kconfig.load_kube_config(config_file=path, client_configuration=cfg, persist_config=False)
            return cls.from_configuration(cfg)
        except Exception as exc:
            # Anything: a kubeconfig that is not YAML, lacks a current context, names missing certificate files...
            raise ClusterConfigError(
                f"cannot use the kubeconfig {path}: {_one_line(exc)}; check it with "
                f"`kubectl --kubeconfig {path} config view`"
            ) from None

    @classmethod
    def from_configuration(cls, cfg: Any) -> ClusterConfig:
        token = ""
        auth = (cfg.api_key or {}).get("authorization") or (cfg.api_key or {}).get("BearerToken") or ""
        if auth:
            token = auth.split(" ", 1)[1] if auth.lower().startswith("bearer ") else auth
        headers: dict[str, str] = {}
        if not token and cfg.username:
            headers["Authorization"] = aiohttp.BasicAuth(cfg.username, cfg.password or "").encode()
        ctx: ssl.SSLContext | bool | None = None
        if cfg.host.startswith("https"):
            if not cfg.verify_ssl:
                ctx = False
            else:
                ctx = (
                    ssl.create_default_context(cafile=cfg.ssl_ca_cert)
                    if cfg.ssl_ca_cert
                    else ssl.create_default_context()
                )
                if cfg.cert_file:
                    ctx.load_cert_chain(cfg.cert_file, cfg.key_file)
        return cls(
            host=cfg.host.rstrip("/"),
            token=token,
            ssl_context=ctx,
            headers=headers,
            tls_server_name=getattr(cfg, "tls_server_name", None) or "",
        )


def _fast_config(kubeconfig: str | None) -> dict[str, Any] | None:
    from caldera.cache.kubeconfig import SERVICE_ACCOUNT, load_incluster, load_kubeconfig

    try:
        if kubeconfig:
            return load_kubeconfig(kubeconfig) if os.path.isfile(kubeconfig) else None
        if os.environ.get("KUBERNETES_SERVICE_HOST"):
            return load_incluster() if (SERVICE_ACCOUNT / "token").is_file() else None
        path = os.environ.get("KUBECONFIG", "").split(os.pathsep)[0] or os.path.expanduser("~/.kube/config")
        return load_kubeconfig(path) if os.path.isfile(path) else None
    except Exception as exc:  # the kubernetes-asyncio path reads it again and words the error
        log.info("kubeconfig: the fast reading gave up (%s); reading it with kubernetes-asyncio", exc)
        return None


def backoff_delay(attempt: int, base: float = 0.1, cap: float = 10.0) -> float:
    """Exponential backoff with full jitter: a herd of clients does not retry in step."""
    return random.uniform(base / 2, min(cap, base * (2 ** min(attempt, 20))))


class ApiClient:
    """Thin async client: JSON in, raw bytes out. Reuse one per process."""

    def __init__(
        self, config: ClusterConfig, max_connections: int = 100, user_agent: str = "caldera-scheduler"
    ):
        self.config = config
        self.base = config.host
        self._headers = {"Accept": "application/json", "User-Agent": user_agent, **config.headers}
        self._max_connections = max_connections
        self._session: aiohttp.ClientSession | None = None
        self.requests = 0
        # Per-request overhead (profiled with caldera-sim bench e2e --profile): reads go through
        # aiohttp with no URL parsing or quoting (paths are built from names the API server already
        # validated), one timeout object per distinct timeout and header dicts made once; writes
        # (bindings, status patches, events) go through a lean HTTP/1.1 keep-alive pool.
        self._timeouts: dict[float, aiohttp.ClientTimeout] = {}
        self._content_headers: dict[str, dict[str, str]] = {}
        self._writes: Http1Pool | None = None
        #: the bearer token, consulted per request (cache/auth.py): it may rotate
        self.auth = config.auth if config.auth is not None else TokenSource(config.token)
        self._token = ""
        self._auth_header: dict[str, str] = {}
        self._unauthorized = 0
        self._unauthorized_logged = -float("inf")
        #: the token whose 401s were last retried with a new one (their first is logged, not the rest)
        self._retried_after: str | None = None
        self._use_token(self.auth.current())

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            connector = (
                aiohttp.TCPConnector(
                    limit=self._max_connections,
                    ssl=self.config.ssl_context if self.config.ssl_context is not None else True,
                )
                if self.base.startswith("https")
                else aiohttp.TCPConnector(limit=self._max_connections)
            )
            self._session = aiohttp.ClientSession(
                connector=connector,
                # Authorization goes per request (``_auth_header``): the token may rotate.
                headers={k: v for k, v in self._headers.items() if k != "Authorization"},
                json_serialize=lambda o: msgspec.json.encode(o).decode(),
            )
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
        if self._writes is not None:
            self._writes.close()
            self._writes = None

    @property
    def writes(self) -> Http1Pool:
        if self._writes is None:
            self._writes = Http1Pool(
                self.base,
                self._headers,
                self.config.ssl_context,
                max_connections=self._max_connections,
                server_hostname=self.config.tls_server_name or None,
            )
        return self._writes

    # -- credentials ---------------------------------------------------------------------------------
    def _use_token(self, token: str) -> None:
        """Send ``token`` from now on (the headers of both transports are rebuilt)."""
        self._token = token
        if token:
            self._headers["Authorization"] = f"Bearer {token}"
        elif "Authorization" in self.config.headers:  # basic auth
            self._headers["Authorization"] = self.config.headers["Authorization"]
        else:
            self._headers.pop("Authorization", None)
        auth = self._headers.get("Authorization")
        self._auth_header = {"Authorization": auth} if auth else {}
        self._content_headers.clear()
        if self._writes is not None:
            self._writes.set_headers(self._headers)

    def auth_headers(self) -> dict[str, str]:
        """The Authorization header a request sent now carries (the current token; none without
        credentials), for a caller that makes its own requests on ``session``."""
        self._authorize()
        return self._auth_header

    def _authorize(self) -> str:
        """The token for this request (a rotated one is taken up here); returns it."""
        token = self.auth.current()
        if token != self._token:
            self._use_token(token)
        return token

    async def _renewed(self, rejected: str, what: str) -> bool:
        """After a 401 to a request sent with ``rejected``: counted, logged, and True when a new
        token is in hand (the request is retried once with it)."""
        AUTH_FAILURES.inc()
        renewed = await self.auth.renew(rejected)
        if renewed:
            self._authorize()
            # Every request in flight when the token was revoked comes back 401: one line for the
            # rotation (the first request's), the others at debug level.
            first = rejected != self._retried_after
            self._retried_after = rejected
            log.log(
                logging.WARNING if first else logging.DEBUG,
                "%s: 401 Unauthorized; retrying once with the token read again",
                what,
            )
            return True
        # Revoked credentials fail every request: one line per 10 s, with how many it stands for.
        self._unauthorized += 1
        now = time.monotonic()
        if now - self._unauthorized_logged >= 10.0:
            log.error(
                "%s: 401 Unauthorized and no new token to try (%d such requests since the last line): "
                "check the scheduler's credentials (service account token, kubeconfig user)",
                what,
                self._unauthorized,
            )
            self._unauthorized = 0
            self._unauthorized_logged = now
        return False

    def url(self, path: str) -> URL:
        """The URL of an API path, built without parsing or quoting: Kubernetes names and
        namespaces are DNS labels, and queries go in ``params``."""
        return URL(self.base + path, encoded=True)

    def _timeout(self, seconds: float) -> aiohttp.ClientTimeout:
        timeout = self._timeouts.get(seconds)
        if timeout is None:
            timeout = self._timeouts[seconds] = aiohttp.ClientTimeout(total=seconds)
        return timeout

    async def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        data: bytes | None = None,
        params: Mapping[str, str] | None = None,
        content_type: str = "application/json",
        timeout: float = 30.0,
    ) -> bytes:
        """One request; raises :class:`ApiError` (code 0 for no answer) on anything but 2xx.
        ``data`` is a body already encoded (the binder's bindings); else ``body`` is encoded here.
        A 401 is retried once when the credentials give a new token."""
        token = self._authorize()
        try:
            return await self._request(method, path, body, data, params, content_type, timeout)
        except ApiError as exc:
            if exc.code != 401 or not await self._renewed(token, f"{method} {path}"):
                raise
        return await self._request(method, path, body, data, params, content_type, timeout)

    async def _request(
        self,
        method: str,
        path: str,
        body: Any,
        data: bytes | None,
        params: Mapping[str, str] | None,
        content_type: str,
        timeout: float,
    ) -> bytes:
        self.requests += 1
        if data is None and body is not None:
            data = msgspec.json.encode(body)
        if method != "GET":
            if params:
                path = f"{path}?{urlencode(params)}"
            try:
                status, answer_headers, raw = await self.writes.request(
                    method, path, data, content_type, timeout
                )
            except _NO_ANSWER as exc:
                raise ApiError(0, type(exc).__name__, str(exc)) from None
            if status >= 300:
                raise error_from(status, raw, {"Retry-After": answer_headers.get("retry-after", "")})
            return raw
        headers = self._auth_header or None
        if data is not None:
            headers = self._content_headers.get(content_type)
            if headers is None:
                headers = self._content_headers[content_type] = {
                    **self._auth_header,
                    "Content-Type": content_type,
                }
        try:
            async with self.session.request(
                method,
                self.url(path),
                data=data,
                params=params,
                headers=headers,
                timeout=self._timeout(timeout),
                server_hostname=self.config.tls_server_name or None,
            ) as resp:
                raw = await resp.read()
                if resp.status >= 300:
                    raise error_from(resp.status, raw, resp.headers)
                return raw
        except (TimeoutError, aiohttp.ClientError) as exc:
            raise ApiError(0, type(exc).__name__, str(exc)) from None

    def shape(self, method: str, suffix: str, content_type: str = "application/json") -> RequestShape:
        """The fixed parts of many writes ``method PATH+suffix`` with a body, encoded once for
        ``send`` (the binder's bindings: ``POST pods/NAME/binding``)."""
        return self.writes.shape(method, suffix, content_type)

    async def send(self, shape: RequestShape, path: str, data: bytes, timeout: float = 30.0) -> bytes:
        """``request(shape.method, path + shape.suffix, data=data, content_type=...)`` with the
        request's fixed parts encoded once: the same bytes on the wire, the same answers and errors."""
        token = self._authorize()
        try:
            return await self._send(shape, path, data, timeout)
        except ApiError as exc:
            if exc.code != 401 or not await self._renewed(token, f"{shape.method} {path}{shape.suffix}"):
                raise
        return await self._send(shape, path, data, timeout)  # the shape now carries the new token

    async def _send(self, shape: RequestShape, path: str, data: bytes, timeout: float) -> bytes:
        self.requests += 1
        try:
            status, answer_headers, raw = await self.writes.send(
                shape.method, path + shape.suffix, shape.fill(path, data), timeout
            )
        except _NO_ANSWER as exc:
            raise ApiError(0, type(exc).__name__, str(exc)) from None
        if status >= 300:
            raise error_from(status, raw, {"Retry-After": answer_headers.get("retry-after", "")})
        return raw

    async def stream_lines(
        self,
        path: str,
        params: Mapping[str, str],
        timeout: float | None = None,
        on_open: Callable[[], None] | None = None,
    ) -> AsyncIterator[bytes]:
        """A watch: yields one raw JSON line per event. Lines may be any length (no readline limit)."""
        async for lines in self.stream_chunks(path, params, timeout, on_open):
            for line in lines:
                yield line

    async def stream_chunks(
        self,
        path: str,
        params: Mapping[str, str],
        timeout: float | None = None,
        on_open: Callable[[], None] | None = None,
    ) -> AsyncIterator[list[bytes]]:
        """A watch: yields the complete raw JSON lines (one per event) each read from the stream
        brought, as a non-empty list: a busy watch hands over many events per resumption of this
        generator instead of one. Lines may be any length (no readline limit). A 401 (at the
        opening) is retried once when the credentials give a new token."""
        token = self._authorize()
        try:
            async for lines in self._stream_chunks(path, params, timeout, on_open):
                yield lines
            return
        except ApiError as exc:
            if exc.code != 401 or not await self._renewed(token, f"watch {path}"):
                raise
        async for lines in self._stream_chunks(path, params, timeout, on_open):
            yield lines

    async def _stream_chunks(
        self,
        path: str,
        params: Mapping[str, str],
        timeout: float | None,
        on_open: Callable[[], None] | None,
    ) -> AsyncIterator[list[bytes]]:
        self.requests += 1
        try:
            async with self.session.get(
                self.base + path,
                params=params,
                headers=self._auth_header or None,
                timeout=aiohttp.ClientTimeout(total=timeout, sock_connect=10),
                server_hostname=self.config.tls_server_name or None,
            ) as resp:
                if resp.status >= 300:
                    raise error_from(resp.status, await resp.read(), resp.headers)
                if on_open is not None:
                    on_open()
                buffer = b""
                async for chunk in resp.content.iter_any():
                    buffer += chunk
                    if b"\n" not in chunk:
                        continue
                    *lines, buffer = buffer.split(b"\n")
                    complete = [line for line in lines if line.strip()]
                    if complete:
                        yield complete
                if buffer.strip():
                    yield [buffer]
        except (TimeoutError, aiohttp.ClientError) as exc:
            raise ApiError(0, type(exc).__name__, str(exc)) from None
