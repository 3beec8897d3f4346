"""List-then-watch for one kind of object, decoded with msgspec straight from the wire.

A :class:`Reflector` lists (in pages), hands the full set to its handler so deletes that happened
while it was away are noticed, then watches from the list's resourceVersion. A dropped stream
resumes from the last resourceVersion seen (bookmarks keep it fresh); a 410 means re-list. Errors
back off exponentially with jitter. A malformed object is logged and skipped.

An event the handler fails to apply is never lost: it is counted
(``caldera_watch_apply_errors_total{kind}``), the watch stops, and the kind is re-listed so the
handler reconciles it (cache/informer.py ``KindHandler.replace``). Until that succeeds the kind is not
synced, so cycles wait for it (the readiness answer names it); if it keeps failing, the re-lists back
off, and after ``RESYNC_WAITS`` in a row cycles go on with the kind as the cache holds it, saying so
in an error line at each attempt.

The stream is read a chunk at a time (every complete line it brought), and an event is decoded in
one pass, object included; events are counted (``on_event``) per chunk and type.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

import msgspec
from prometheus_client import Counter

from caldera.cache.client import ApiClient, ApiError, backoff_delay
from caldera.framework.objects import ObjectError, decode

log = logging.getLogger("caldera.watch")

T = TypeVar("T")

APPLY_ERRORS = Counter(
    "caldera_watch_apply_errors",
    "Watch events (or re-lists) the cache failed to apply; each makes the kind re-listed and reconciled.",
    ["kind"],
)

#: failed reconciles in a row during which cycles wait for the kind; after them cycles go on
RESYNC_WAITS = 3


class _ListMeta(msgspec.Struct, frozen=True):
    resource_version: str = msgspec.field(default="", name="resourceVersion")
    continue_: str = msgspec.field(default="", name="continue")


class _List(msgspec.Struct, frozen=True):
    metadata: _ListMeta = _ListMeta()
    items: list[msgspec.Raw] | None = None


class _Event(msgspec.Struct, frozen=True):
    type: str = ""
    object: msgspec.Raw = msgspec.Raw(b"{}")


class _Meta(msgspec.Struct, frozen=True):
    resource_version: str = msgspec.field(default="", name="resourceVersion")


class _MetaOnly(msgspec.Struct, frozen=True):
    metadata: _Meta = _Meta()


class _Status(msgspec.Struct, frozen=True):
    code: int = 0
    reason: str = ""
    message: str = ""


#: what decoding a line or an object raises when it is not what it should be (msgspec raises
#: RecursionError for JSON nested deeper than it decodes)
_UNDECODABLE = (msgspec.DecodeError, msgspec.ValidationError, RecursionError)

#: watch events ("Event") and list pages ("List") decoded in one pass, per kind (``_one_pass``)
_one_pass_decoders: dict[tuple[type, str], msgspec.json.Decoder[Any]] = {}
#: the event types the one-pass decoding serves; any other goes the two-pass way
_OBJECT_EVENTS = frozenset({"ADDED", "MODIFIED", "DELETED"})


def _one_pass(kind: type, whole: str) -> msgspec.json.Decoder[Any] | None:
    """A decoder of a whole watch event (``whole`` "Event") or list page ("List") of ``kind``
    objects, the objects decoded in the same pass (None for a kind that is not a struct)."""
    if not (isinstance(kind, type) and issubclass(kind, msgspec.Struct)):
        return None
    decoder = _one_pass_decoders.get((kind, whole))
    if decoder is None:
        fields = (
            [("type", str, ""), ("object", kind | None, None)]
            if whole == "Event"
            else [("metadata", _ListMeta, _ListMeta()), ("items", list[kind] | None, None)]  # type: ignore[valid-type]
        )
        struct = msgspec.defstruct(f"_{kind.__name__}{whole}", fields, frozen=True)
        decoder = _one_pass_decoders[(kind, whole)] = msgspec.json.Decoder(struct)
    return decoder


def _typed_event_decoder(kind: type) -> msgspec.json.Decoder[Any] | None:
    """A decoder of a whole watch event of ``kind`` objects: the object is decoded in the same pass as
    the event, instead of kept raw and decoded again (about 30% of the decoding time of a pod
    event). Same struct, same decoding rules as :func:`decode`, so the same object comes out."""
    return _one_pass(kind, "Event")


def _typed_list_decoder(kind: type) -> msgspec.json.Decoder[Any] | None:
    """A decoder of a whole list page of ``kind`` objects: the items are decoded in the same pass as
    the page, instead of kept raw and each decoded again (about a quarter of the decoding time of a
    page of pods or nodes). Same structs, same decoding rules as :func:`decode`, so the same objects
    come out; a page with an item that does not decode goes the two-pass way, where that item is
    logged and skipped."""
    return _one_pass(kind, "List")


_list_decoder = msgspec.json.Decoder(_List)
_event_decoder = msgspec.json.Decoder(_Event)
_meta_decoder = msgspec.json.Decoder(_MetaOnly)
_status_decoder = msgspec.json.Decoder(_Status)


class Handler(Protocol[T]):  # type: ignore[misc]
    def replace(self, objects: list[T]) -> None:
        """The complete current set after a (re-)list."""

    def upsert(self, obj: T) -> None: ...

    def delete(self, obj: T) -> None: ...


@dataclass
class ReflectorStats:
    lists: int = 0
    watches: int = 0
    events: int = 0
    bookmarks: int = 0
    expired: int = 0
    errors: int = 0
    skipped: int = 0
    last_error: str = ""


class Expired(Exception):
    pass


class Resync(Exception):
    """The handler failed to apply an event or a list: re-list and reconcile the kind."""


class Reflector(Generic[T]):
    def __init__(
        self,
        client: ApiClient,
        path: str,
        kind: type[T],
        handler: Handler[T],
        *,
        name: str = "",
        params: dict[str, str] | None = None,
        page_size: int = 500,
        watch_timeout: int = 300,
        decode_fn: Callable[[type[T], bytes], T] | None = None,
        on_event: Callable[[str, str, int], None] | None = None,
        optional: bool = False,
    ) -> None:
        self.optional = optional
        self._absent_logged = False
        self.client = client
        self.path = path
        self.kind = kind
        self.handler = handler
        self.name = name or getattr(kind, "__name__", path)
        self.params = params or {}
        self.page_size = page_size
        self.watch_timeout = watch_timeout
        self._decode = decode_fn or decode  # type: ignore[assignment]
        self._typed = _typed_event_decoder(kind) if decode_fn is None else None
        self._typed_list = _typed_list_decoder(kind) if decode_fn is None else None
        self.on_event = on_event
        self.resource_version = ""
        self.synced = asyncio.Event()
        self._error_at: float | None = None
        self._open_at = 0.0
        self.stats = ReflectorStats()
        #: failed applies in a row (reset after a minute without one), and when the last was
        self._resyncs = 0
        self._resync_at = 0.0

    def _connected(self) -> None:
        self._open_at = time.monotonic()

    def _failing(self) -> None:
        self._error_at = time.monotonic()

    def fresh(self, settle: float = 0.1) -> bool:
        """Listed, and connected since the last error for a moment (a server that answers a resumed
        watch with 410 does so at once): what a cycle needs so that it does not place pods by a
        picture the cluster has moved away from, e.g. onto a node deleted during an outage."""
        if not self.synced.is_set():
            return False
        if self._error_at is None:
            return True
        return self._open_at > self._error_at and time.monotonic() - self._open_at >= settle

    def _decode_obj(self, raw: bytes) -> T | None:
        try:
            return self._decode(self.kind, raw)  # type: ignore[arg-type,type-var]
        except ObjectError as exc:
            self.stats.skipped += 1
            log.warning("%s: skipping a malformed object: %s", self.name, exc)
            return None
        except _UNDECODABLE as exc:
            self.stats.skipped += 1
            log.warning("%s: skipping a malformed object: %s", self.name, exc)
            return None

    async def list(self) -> None:
        objects: list[T] = []
        params = dict(self.params)
        if self.page_size:
            params["limit"] = str(self.page_size)
        cont = ""
        version = ""
        while True:
            if cont:
                params["continue"] = cont
            raw = await self.client.request("GET", self.path, params=params, timeout=60)
            page, items = self._decode_page(raw)
            objects += items
            version = page.metadata.resource_version or version
            cont = page.metadata.continue_
            if not cont:
                break
        self.stats.lists += 1
        try:
            self.handler.replace(objects)
        except Exception as exc:
            APPLY_ERRORS.labels(self.name).inc()
            raise Resync(f"the re-list of {len(objects)} objects failed to apply: {exc!r}") from None
        self.resource_version = version
        self.synced.set()
        self._connected()
        log.debug("%s: listed %d objects at resourceVersion %s", self.name, len(objects), version)

    def _decode_page(self, raw: bytes) -> tuple[Any, Sequence[T]]:
        """One list page and its objects (the page's metadata says where the list goes on). One pass
        when every item decodes, else item by item."""
        typed = self._typed_list
        if typed is not None:
            try:
                whole = typed.decode(raw)
            except _UNDECODABLE:
                whole = None
            if whole is not None:
                return whole, whole.items or ()
        try:
            page = _list_decoder.decode(raw)
        except _UNDECODABLE as exc:
            raise ApiError(0, "BadList", f"{self.name}: undecodable list: {exc}") from None
        decoded = (self._decode_obj(item) for item in page.items or ())
        return page, [obj for obj in decoded if obj is not None]

    async def watch(self) -> None:
        """Watch until the stream ends; raises :class:`Expired` on 410."""
        params = dict(self.params)
        params.update(
            watch="1",
            resourceVersion=self.resource_version,
            allowWatchBookmarks="true",
            timeoutSeconds=str(self.watch_timeout),
        )
        self.stats.watches += 1
        counts: dict[str, int] = {}
        async for lines in self.client.stream_chunks(
            self.path, params, timeout=self.watch_timeout + 30, on_open=self._connected
        ):
            # A chunk's lines in one go (no coroutine switch per line); the events are counted per
            # chunk too, even when a line ends the watch (an ERROR event raises).
            try:
                for line in lines:
                    etype = self._line(line)
                    if etype:
                        counts[etype] = counts.get(etype, 0) + 1
            finally:
                if counts:
                    if self.on_event is not None:
                        for etype, n in counts.items():
                            self.on_event(self.name, etype, n)
                    counts.clear()

    def _line(self, line: bytes) -> str:
        """Handle one watch line; the type of the event passed to the handler ("" for none)."""
        typed = self._typed
        if typed is not None:
            # One pass for the common case; anything else (a bookmark, an error, a malformed
            # object, which must be logged and skipped as below) goes the two-pass way.
            try:
                whole = typed.decode(line)
            except _UNDECODABLE:
                whole = None
            if whole is not None and whole.object is not None and whole.type in _OBJECT_EVENTS:
                self.stats.events += 1
                self._dispatch(whole.type, whole.object)
                return whole.type  # type: ignore[no-any-return]
        try:
            event = _event_decoder.decode(line)
        except _UNDECODABLE as exc:
            self.stats.skipped += 1
            log.warning("%s: skipping an undecodable watch line: %s", self.name, exc)
            return ""
        etype = event.type
        if etype == "ERROR":
            try:
                status = _status_decoder.decode(event.object)
            except _UNDECODABLE:
                status = _Status(code=500, message="undecodable error event")
            if status.code == 410:
                raise Expired(status.message)
            raise ApiError(status.code, status.reason, status.message)
        if etype == "BOOKMARK":
            self.stats.bookmarks += 1
            try:
                rv = _meta_decoder.decode(event.object).metadata.resource_version
            except _UNDECODABLE:
                rv = ""
            if rv:
                self.resource_version = rv
            return ""
        self.stats.events += 1
        obj = self._decode_obj(event.object)
        if obj is None:
            # Still move past it: re-reading it would fail the same way.
            try:
                rv = _meta_decoder.decode(event.object).metadata.resource_version
                if rv:
                    self.resource_version = rv
            except _UNDECODABLE:
                pass
            return ""
        self._dispatch(etype, obj)
        return etype

    def _dispatch(self, etype: str, obj: T) -> None:
        try:
            if etype == "DELETED":
                self.handler.delete(obj)
            else:
                self.handler.upsert(obj)
        except Exception as exc:
            APPLY_ERRORS.labels(self.name).inc()
            raise Resync(f"a {etype} event failed to apply: {exc!r}") from None
        rv = _resource_version(obj)
        if rv:
            self.resource_version = rv

    async def run(self, stop: asyncio.Event | None = None) -> None:
        """List, then watch forever: resume on drops, re-list on 410, back off on errors."""
        attempt = 0
        need_list = True
        while stop is None or not stop.is_set():
            started = time.monotonic()
            try:
                if need_list:
                    await self.list()
                    need_list = False
                await self.watch()
                attempt = 0
                if time.monotonic() - started < 1.0:
                    # A server that closes streams at once must not make us spin.
                    await asyncio.sleep(backoff_delay(0, base=0.2))
                continue
            except Expired as exc:
                # Until the re-list, this kind may have missed anything: no cycle should trust it.
                self.synced.clear()
                self._failing()
                self.stats.expired += 1
                log.info("%s: watch expired (%s); re-listing", self.name, exc)
                need_list = True
                attempt = 0
                continue
            except Resync as exc:
                need_list = True
                delay = self._resync(str(exc))
                await asyncio.sleep(delay)
                continue
            except asyncio.CancelledError:
                raise
            except ApiError as exc:
                self.stats.errors += 1
                self.stats.last_error = str(exc)
                if exc.code == 410:
                    self.synced.clear()
                    self._failing()
                    need_list = True
                    continue
                self._failing()
                if need_list and exc.code in (403, 404) and self.optional:
                    # The kind is not served here (a CRD not installed), or this scheduler may not read
                    # it (an older RBAC without PDBs or storage): treat it as empty for now, loudly.
                    if exc.code == 403:
                        log.warning(
                            "%s: not allowed to list (%s); scheduling goes on as if there were none",
                            self.name,
                            exc,
                        )
                    elif not self._absent_logged:
                        # once: a cluster without the group (no DRA, no HyperNode CRD) says so every 30 s
                        self._absent_logged = True
                        log.info(
                            "%s: not served by this API server (%s); scheduling goes on without them",
                            self.name,
                            self.path,
                        )
                    self.handler.replace([])
                    self.synced.set()
                    self._error_at = None
                    await asyncio.sleep(30)
                    continue
                log.warning("%s: %s failed: %s", self.name, "list" if need_list else "watch", exc)
            except Exception as exc:
                self._failing()
                self.stats.errors += 1
                self.stats.last_error = repr(exc)
                log.exception("%s: unexpected error", self.name)
            if time.monotonic() - started > 30:
                attempt = 0
            await asyncio.sleep(backoff_delay(attempt, base=0.2, cap=5.0))
            attempt += 1

    def _resync(self, why: str) -> float:
        """An apply failed: the kind is re-listed after the delay returned (growing while it keeps
        failing); cycles wait for the first ``RESYNC_WAITS`` tries, then go on, said at each."""
        now = time.monotonic()
        if now - self._resync_at > 60.0:
            self._resyncs = 0
        self._resync_at = now
        self._resyncs += 1
        self.stats.errors += 1
        self.stats.last_error = why
        if self._resyncs <= RESYNC_WAITS:
            self.synced.clear()
            self._failing()
            log.warning("%s: %s; re-listing it, cycles wait until it is reconciled", self.name, why)
        else:
            self.synced.set()
            self._error_at = None
            log.error(
                "%s: %s (%d times in a row); re-listing it with back-off, and cycles go on with %s "
                "as the cache holds it, which may differ from the API",
                self.name,
                why,
                self._resyncs,
                self.name,
            )
        return backoff_delay(self._resyncs - 1, base=0.2, cap=60.0)


def _resource_version(obj: Any) -> str:
    meta = getattr(obj, "metadata", None)
    return getattr(meta, "resource_version", "") if meta is not None else ""
