"""The HTTP face of the simulated cluster: Kubernetes REST paths, watch streams, auth and faults."""

from __future__ import annotations

import asyncio
import logging
import random
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from aiohttp import web

from . import resources as R
from .errors import ApiError, bad_request, status_dict
from .faults import Faults
from .rbac import Attributes, Authorizer, User, attributes
from .resources import Resource
from .store import Store, Watcher
from .usage import (
    CUSTOM_METRICS,
    ELASTICSEARCH_PREFIX,
    ES_INFO,
    PROMETHEUS_PATH,
    NodeLoad,
    custom_metrics_discovery,
)

log = logging.getLogger("caldera.sim")

_JSON = "application/json"
_TRUE = ("true", "1", "True", "TRUE")
_CREATED_STATUS = orjson.dumps(status_dict(201, None, ""))
_NOT_FOUND_PATH = ApiError(404, "NotFound", "the server could not find the requested resource")
METRICS_NODES = "/apis/metrics.k8s.io/v1beta1/nodes"
_PUBLIC = {
    "/healthz": b"ok",
    "/livez": b"ok",
    "/readyz": b"ok",
}


def _json(body: bytes, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(body=body, status=status, content_type=_JSON, headers=headers)


def _error(err: ApiError, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(body=err.body(), status=err.code, content_type=_JSON, headers=headers)


def _int(q: Any, name: str) -> int | None:
    value = q.get(name)
    if value in (None, ""):
        return None
    try:
        return int(value)
    except ValueError as exc:
        raise bad_request(f"invalid {name}: {value!r}") from exc


async def _body(request: web.Request) -> Any:
    raw = await request.read()
    if not raw:
        return None
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise bad_request(f"the body of the request is not valid JSON: {exc}") from exc


class ApiServer:
    def __init__(
        self,
        store: Store,
        token: str,
        faults: Faults,
        bookmark_interval: float = 60.0,
        watch_timeout: tuple[float, float] = (1800.0, 3600.0),
    ):
        self.store = store
        self.token = token
        # Who each bearer token is, and what RBAC lets them do; `authz.record` has every decision.
        self.authz = Authorizer(store, token)
        self.faults = faults
        self.bookmark_interval = bookmark_interval
        self.watch_timeout = watch_timeout
        self.requests: Counter[str] = Counter()
        self.watches: dict[Watcher, web.Request] = {}
        # Awaited before every resource request; raising ApiError answers the request with that error.
        self.request_hooks: list[Callable[[web.Request], Awaitable[None]]] = []
        # what this server serves: the store's kinds (the native gang API only when turned on)
        self.served = store.served
        self._discovery: dict[str, bytes] = {
            "/api": orjson.dumps(R.api_versions()),
            "/apis": orjson.dumps(R.api_group_list(self.served)),
            "/version": orjson.dumps(R.SERVER_VERSION),
        }
        for group, version in self.served:
            path = f"/apis/{group}/{version}" if group else f"/api/{version}"
            self._discovery[path] = orjson.dumps(R.api_resource_list(group, version, self.served))
            if group:
                self._discovery[f"/apis/{group}"] = orjson.dumps(R.api_group(group, self.served))
        # the custom metrics API, as the aggregator serves a prometheus-adapter's (hack/sim/usage.py)
        custom = custom_metrics_discovery()
        groups = R.api_group_list(self.served)
        groups["groups"].append(custom["group"])
        self._discovery["/apis"] = orjson.dumps(groups)
        self._discovery.update((path, orjson.dumps(doc)) for path, doc in custom["docs"].items())
        self._rng = random.Random()
        #: nodes' load as the metrics endpoints report it (hack/sim/usage.py)
        self.node_load = NodeLoad()

    def make_app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self.handle)
        return app

    def drop_watches(self, abort: bool = False) -> int:
        count = 0
        for w, request in list(self.watches.items()):
            w.close()
            count += 1
            if abort and request.transport is not None:
                request.transport.abort()
        return count

    def send_bookmarks(self) -> None:
        for w in list(self.watches):
            if w.bookmarks and not w.closed:
                w.push(self.store.bookmark_line(w.resource))

    # ---- dispatch -------------------------------------------------------------------------------------

    async def handle(self, request: web.Request) -> web.StreamResponse:
        path = request.path
        if path == PROMETHEUS_PATH:  # a Prometheus without authentication, as most are
            return await self._prometheus(request)
        if path == ELASTICSEARCH_PREFIX or path.startswith(ELASTICSEARCH_PREFIX + "/"):
            return await self._elasticsearch(request, path[len(ELASTICSEARCH_PREFIX) :])
        public = _PUBLIC.get(path)
        if public is not None:
            return web.Response(body=public, content_type="text/plain")
        if path == "/version":
            return _json(self._discovery[path])
        user = self.authz.authenticate(request.headers.get("Authorization"))
        if user is None:
            return _error(ApiError(401, "Unauthorized", "Unauthorized"))
        doc = self._discovery.get(path.rstrip("/"))
        if doc is not None:
            if request.method != "GET":
                return _error(ApiError(405, "MethodNotAllowed", "the server does not allow this method"))
            try:  # open to every authenticated user (system:discovery), and recorded
                self.authz.authorize(user, Attributes("get", path=path))
            except ApiError as err:
                return _error(err)
            return _json(doc)
        if path.startswith("/sim/"):
            try:
                self.authz.authorize(user, Attributes(request.method.lower(), path=path))
            except ApiError as err:
                return _error(err)
            return await self._control(request, path)
        if path.startswith(METRICS_NODES):
            return self._node_metrics(request, path, user)
        if path.startswith(CUSTOM_METRICS + "/"):
            return self._custom_metrics(request, path, user)
        try:
            return await self._resource_request(request, path, user)
        except _Throttled as err:
            return _error(err, {"Retry-After": str(err.retry_after)})
        except ApiError as err:
            return _error(err)
        except Exception as exc:  # a bug in the simulator must still answer like an API server
            log.exception("%s %s failed", request.method, path)
            return _error(ApiError(500, "InternalError", f"Internal error occurred: {exc!r}"))

    async def _resource_request(self, request: web.Request, path: str, user: User) -> web.StreamResponse:
        parts = path.strip("/").split("/")
        if parts[0] == "api" and len(parts) >= 3:
            group, version, rest = "", parts[1], parts[2:]
        elif parts[0] == "apis" and len(parts) >= 4:
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            raise _NOT_FOUND_PATH
        kinds = self.served.get((group, version))
        if kinds is None:
            raise _NOT_FOUND_PATH
        watch_path = False
        if rest[0] == "watch":
            watch_path = True
            rest = rest[1:]
            if not rest:
                raise _NOT_FOUND_PATH
        namespace: str | None = None
        if rest[0] == "namespaces" and len(rest) >= 3 and (group or rest[2] not in R.NAMESPACES.subresources):
            namespace = rest[1]
            rest = rest[2:]
        if not group and namespace is not None and rest[0] == "bindings" and len(rest) == 1:
            self.authz.authorize(user, Attributes("create", "", "bindings", "", namespace))
            await self._fault(request)
            self.requests[request.method] += 1
            body = await _body(request)
            name = ((body or {}).get("metadata") or {}).get("name", "")
            self.store.bind(namespace, name, body)
            return web.Response(body=_CREATED_STATUS, status=201, content_type=_JSON)
        res = kinds.get(rest[0])
        if res is None or len(rest) > 3:
            # A real server authorizes before it routes: a kind it does not serve is 403 to whom RBAC refuses it.
            self.authz.authorize(
                user,
                attributes(
                    request.method,
                    group,
                    rest[0],
                    rest[2] if len(rest) > 2 else None,
                    namespace,
                    rest[1] if len(rest) > 1 else None,
                    watch_path,
                    request.query.get("fieldSelector"),
                ),
            )
            raise _NOT_FOUND_PATH
        if res.namespaced is False and namespace is not None:
            raise _NOT_FOUND_PATH
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else None
        if sub is not None and sub not in res.subresources:
            raise _NOT_FOUND_PATH
        if res.namespaced and name is not None and namespace is None:
            raise _NOT_FOUND_PATH
        method = request.method
        self.authz.authorize(
            user,
            attributes(
                method,
                group,
                res.plural,
                sub,
                namespace,
                name,
                watch_path or (method == "GET" and name is None and request.query.get("watch") in _TRUE),
                request.query.get("fieldSelector"),
            ),
        )
        await self._fault(request)
        self.requests[method] += 1
        if method != "GET" and request.query.get("dryRun"):
            raise bad_request("dryRun is not supported by caldera-sim")
        ns = namespace or ""
        q = request.query
        if method == "GET":
            if name is None:
                if watch_path or q.get("watch") in _TRUE:
                    return await self._watch(request, res, namespace, q)
                return self._list(res, namespace, q)
            if watch_path:
                return await self._watch(request, res, namespace, q, name=name)
            if sub == "scale":
                return _json(orjson.dumps(self.store.scale(res, ns, name)))
            return _json(self.store.get(res, ns, name).raw)
        if method == "POST":
            if name is None:
                if res.namespaced and namespace is None:
                    raise ApiError(
                        405,
                        "MethodNotAllowed",
                        "the server does not allow this method on the requested resource",
                    )
                return _json(self.store.create(res, ns, await _body(request)).raw, 201)
            if sub == "binding":
                self.store.bind(ns, name, await _body(request))
                return web.Response(body=_CREATED_STATUS, status=201, content_type=_JSON)
            if sub == "token":
                return _json(orjson.dumps(self.authz.mint(ns, name, await _body(request))), 201)
            if sub == "eviction":
                self.store.evict(ns, name, await _body(request) or {})
                return web.Response(body=_CREATED_STATUS, status=201, content_type=_JSON)
            raise ApiError(
                405, "MethodNotAllowed", "the server does not allow this method on the requested resource"
            )
        if name is None:
            if method == "DELETE":
                return await self._delete_collection(request, res, namespace, q)
            raise ApiError(
                405, "MethodNotAllowed", "the server does not allow this method on the requested resource"
            )
        if sub == "scale" and method in ("PUT", "PATCH"):
            content_type = request.headers.get("Content-Type", "") if method == "PATCH" else None
            body = await request.read() if method == "PATCH" else await _body(request)
            return _json(orjson.dumps(self.store.set_scale(res, ns, name, body, content_type)))
        if method == "PUT":
            if sub == "finalize" and res is R.NAMESPACES:
                body = await _body(request)
                finalizers = ((body or {}).get("spec") or {}).get("finalizers") or []
                return _json(self.store.finalize_namespace(name, finalizers).raw)
            return _json(self.store.replace(res, ns, name, await _body(request), sub).raw)
        if method == "PATCH":
            content_type = request.headers.get("Content-Type", "")
            return _json(self.store.patch(res, ns, name, content_type, await request.read(), sub).raw)
        if method == "DELETE" and sub is None:
            entry = self.store.delete(res, ns, name, self._delete_options(await _body(request), q))
            if res is R.PODS or res.custom or self.store.get_obj(res, ns, name) is not None:
                return _json(entry.raw)  # pods, custom resources and pending deletions answer with the object
            details = {
                "name": name,
                "group": res.group,
                "kind": res.plural,
                "uid": entry.obj["metadata"].get("uid"),
            }
            return _json(orjson.dumps(status_dict(200, None, "", details)))
        raise ApiError(
            405, "MethodNotAllowed", "the server does not allow this method on the requested resource"
        )

    async def _control(self, request: web.Request, path: str) -> web.Response:
        """Run-time control of a `serve` process: GET /sim/stats, POST /sim/faults, /sim/compact, /sim/drop-watches."""
        try:
            if path == "/sim/stats" and request.method == "GET":
                return _json(orjson.dumps(self.stats()))
            if request.method != "POST":
                raise ApiError(405, "MethodNotAllowed", "the server does not allow this method")
            if path == "/sim/faults":
                changes = await _body(request) or {}
                if not isinstance(changes, dict):
                    raise bad_request("a JSON object of fault fields is expected")
                for key, value in changes.items():
                    if key.startswith("_") or key in ("target", "seed") or not hasattr(self.faults, key):
                        raise bad_request(f"unknown fault {key!r}")
                    setattr(self.faults, key, value)
                return _json(
                    orjson.dumps(
                        {
                            k: v
                            for k, v in vars(self.faults).items()
                            if not k.startswith("_") and k != "target"
                        }
                    )
                )
            if path == "/sim/node-usage":
                try:
                    return _json(orjson.dumps(self.node_load.update(await _body(request))))
                except ValueError as exc:
                    raise bad_request(str(exc)) from None
            if path == "/sim/compact":
                self.store.compact()
                return _json(orjson.dumps({"compactedAt": self.store.rv}))
            if path == "/sim/drop-watches":
                dropped = self.drop_watches(abort=request.query.get("abort") in _TRUE)
                return _json(orjson.dumps({"dropped": dropped}))
            raise _NOT_FOUND_PATH
        except ApiError as err:
            return _error(err)

    async def _prometheus(self, request: web.Request) -> web.Response:
        """Prometheus's ``/api/v1/query``, POST (form) or GET (hack/sim/usage.py)."""
        form: Any = await request.post() if request.method == "POST" else request.query
        status, body = self.node_load.prometheus(str(form.get("query", "")), form.get("time"))
        return _json(orjson.dumps(body), status)

    async def _elasticsearch(self, request: web.Request, path: str) -> web.Response:
        """An Elasticsearch's info (``GET /``) and ``INDEX/_search`` (hack/sim/usage.py)."""
        headers = {"X-Elastic-Product": "Elasticsearch"}  # what go-elasticsearch's product check reads
        parts = path.strip("/").split("/")
        if parts == [""] and request.method in ("GET", "HEAD"):
            return _json(orjson.dumps(ES_INFO), headers=headers)
        if len(parts) != 2 or parts[1] != "_search" or request.method not in ("GET", "POST"):
            return _json(
                orjson.dumps({"error": "caldera-sim serves only GET / and INDEX/_search", "status": 400}),
                400,
                headers,
            )
        try:
            body = orjson.loads(await request.read() or b"{}")
        except orjson.JSONDecodeError:
            body = None
        status, answer = self.node_load.elasticsearch(parts[0], body)
        return _json(orjson.dumps(answer), status, headers)

    def _custom_metrics(self, request: web.Request, path: str, user: User) -> web.Response:
        """``custom.metrics.k8s.io`` node metrics, all nodes (``*``) or one (hack/sim/usage.py);
        authorized as the API server authorizes ``get`` on ``nodes/METRIC``."""
        parts = path[len(CUSTOM_METRICS) :].strip("/").split("/")
        if len(parts) != 4 or parts[0] not in ("v1beta1", "v1beta2") or parts[1] != "nodes":
            return _error(_NOT_FOUND_PATH)
        version, _, name, metric = parts
        if request.method != "GET":
            return _error(ApiError(405, "MethodNotAllowed", "the server does not allow this method"))
        if request.query.get("labelSelector") or request.query.get("metricLabelSelector"):
            return _error(bad_request("caldera-sim evaluates no selector on custom metrics"))
        try:
            self.authz.authorize(
                user, Attributes("get", "custom.metrics.k8s.io", "nodes", subresource=metric, name=name)
            )
        except ApiError as err:
            return _error(err)
        nodes = [n["metadata"]["name"] for n in self.store.objects(R.NODES)]
        status, body = self.node_load.custom_metrics(nodes, name, metric, version)
        return _json(orjson.dumps(body), status)

    def _node_metrics(self, request: web.Request, path: str, user: User) -> web.Response:
        """``metrics.k8s.io/v1beta1`` NodeMetrics, list or one by name (hack/sim/usage.py)."""
        name = path[len(METRICS_NODES) :].strip("/")
        if request.method != "GET" or "/" in name:
            return _error(ApiError(405, "MethodNotAllowed", "the server does not allow this method"))
        try:
            self.authz.authorize(
                user, Attributes("get" if name else "list", "metrics.k8s.io", "nodes", name=name)
            )
        except ApiError as err:
            return _error(err)
        nodes = self.store.objects(R.NODES)
        if name:
            found = [n for n in nodes if n["metadata"]["name"] == name]
            item = self.node_load.node_metrics(found[0]) if found else None
            if item is None:
                return _error(ApiError(404, "NotFound", f'nodemetrics.metrics.k8s.io "{name}" not found'))
            return _json(orjson.dumps(item))
        items = [m for m in (self.node_load.node_metrics(n) for n in nodes) if m is not None]
        return _json(
            orjson.dumps(
                {
                    "kind": "NodeMetricsList",
                    "apiVersion": "metrics.k8s.io/v1beta1",
                    "metadata": {},
                    "items": items,
                }
            )
        )

    def stats(self) -> dict[str, Any]:
        kinds = {}
        for res_id, ks in self.store.kinds.items():
            if ks.res.id == res_id:  # views share their storage: count it once
                kinds[res_id] = {
                    "objects": len(ks.objects),
                    "history": len(ks.history),
                    "watchers": len(ks.watchers),
                }
        return {
            "resourceVersion": self.store.rv,
            "bindings": self.store.bindings,
            "requests": dict(self.requests),
            "watches": len(self.watches),
            "kinds": kinds,
        }

    async def _fault(self, request: web.Request) -> None:
        """Run before every resource request: request hooks, then the configured faults."""
        for hook in self.request_hooks:
            await hook(request)
        faults = self.faults
        if not faults.active:
            return
        if faults.target is not None and not faults.target(request.method, request.path):
            return
        delay = faults.pick_latency()
        if delay > 0:
            await asyncio.sleep(delay)
        code = faults.pick_error()
        if code == 429:
            raise _Throttled(faults.retry_after)
        if code == 500:
            raise ApiError(500, "InternalError", "Internal error occurred: injected by caldera-sim")

    # ---- verbs ----------------------------------------------------------------------------------------

    def _list(self, res: Resource, namespace: str | None, q: Any) -> web.Response:
        items, rv, token, remaining = self.store.list(
            res,
            namespace,
            q.get("labelSelector"),
            q.get("fieldSelector"),
            _int(q, "limit") or 0,
            q.get("continue"),
        )
        meta: dict[str, Any] = {"resourceVersion": str(rv)}
        if token:
            meta["continue"] = token
        if remaining is not None:
            meta["remainingItemCount"] = remaining
        body = (
            b'{"kind":"'
            + res.kind.encode()
            + b'List","apiVersion":"'
            + res.api_version.encode()
            + b'","metadata":'
            + orjson.dumps(meta)
            + b',"items":['
            + b",".join(items)
            + b"]}"
        )
        return _json(body)

    async def _watch(
        self, request: web.Request, res: Resource, namespace: str | None, q: Any, name: str | None = None
    ) -> web.StreamResponse:
        field_selector = q.get("fieldSelector")
        if name is not None:
            field_selector = f"metadata.name={name}" + (f",{field_selector}" if field_selector else "")
        w = self.store.watch(
            res,
            namespace,
            q.get("labelSelector"),
            field_selector,
            q.get("resourceVersion"),
            allow_bookmarks=q.get("allowWatchBookmarks") in _TRUE,
            send_initial_events=q.get("sendInitialEvents") in _TRUE,
        )
        timeout = _int(q, "timeoutSeconds")
        if timeout is None:
            timeout = int(self._rng.uniform(*self.watch_timeout))
        loop = asyncio.get_running_loop()
        timer = loop.call_later(max(0, timeout), w.close)
        self.watches[w] = request
        resp = web.StreamResponse(
            status=200, headers={"Content-Type": _JSON, "Cache-Control": "no-cache, private"}
        )
        resp.enable_chunked_encoding()
        try:
            await resp.prepare(request)
            lines = w.lines
            while True:
                if lines:
                    data = b"".join(lines)
                    lines.clear()
                    await resp.write(data)
                    continue
                if w.closed:
                    break
                w.wake.clear()
                await w.wake.wait()
            await resp.write_eof()
        except (ConnectionError, RuntimeError):
            pass  # the client went away
        finally:
            timer.cancel()
            w.close()
            self.store.unwatch(w)
            self.watches.pop(w, None)
        return resp

    @staticmethod
    def _delete_options(body: Any, q: Any) -> dict[str, Any]:
        options: dict[str, Any] = dict(body) if isinstance(body, dict) else {}
        grace = _int(q, "gracePeriodSeconds")
        if grace is not None and "gracePeriodSeconds" not in options:
            options["gracePeriodSeconds"] = grace
        if q.get("propagationPolicy") and "propagationPolicy" not in options:
            options["propagationPolicy"] = q["propagationPolicy"]
        if q.get("orphanDependents") in _TRUE:
            options.setdefault("orphanDependents", True)
        return options

    async def _delete_collection(
        self, request: web.Request, res: Resource, namespace: str | None, q: Any
    ) -> web.Response:
        options = self._delete_options(await _body(request), q)
        items, _rv, _token, _rem = self.store.list(
            res, namespace, q.get("labelSelector"), q.get("fieldSelector")
        )
        deleted = []
        for raw in items:
            meta = orjson.loads(raw)["metadata"]
            try:
                deleted.append(self.store.delete(res, meta.get("namespace", ""), meta["name"], options).raw)
            except ApiError as err:
                if err.code != 404:
                    raise
        body = (
            b'{"kind":"'
            + res.kind.encode()
            + b'List","apiVersion":"'
            + res.api_version.encode()
            + b'","metadata":{"resourceVersion":"'
            + str(self.store.rv).encode()
            + b'"},"items":['
            + b",".join(deleted)
            + b"]}"
        )
        return _json(body)


class _Throttled(ApiError):
    def __init__(self, retry_after: int):
        super().__init__(
            429,
            "TooManyRequests",
            "the server has received too many requests and has asked us to try again later",
            {"retryAfterSeconds": retry_after},
        )
        self.retry_after = retry_after


__all__ = ["ApiServer"]
