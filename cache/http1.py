"""A lean HTTP/1.1 client for the scheduler's small writes (bindings, status patches, events).

A binding is a 200-byte POST answered by a small Status; aiohttp spends most of a request's CPU on
what such a request does not need (URL and header objects, tracing hooks, a response object with its
own parsers). What the pool saves is measured by an A/B in the repository, the binder's writes
through this pool and through ApiClient's aiohttp session, same workload against caldera-sim
(hack/bench_http.py):

    caldera-sim bench http --binds 5000 --concurrency 16 --repeat 3

    two runs on 2 shared CPUs (load average 0.8-1.3); client CPU per bind, median [min - max]
    of 3 repeats; binds/s are bounded by the simulator (~90 us of its CPU per bind) and vary
    run 1 (10:29 UTC)  pool 36.0 us [34.8 - 37.2]   aiohttp 97.2 us [96.2 - 101.9]
    run 2 (10:31 UTC)  pool 36.3 us [35.9 - 46.1]   aiohttp 91.6 us [79.7 - 95.1]

55-61 µs of client CPU saved per bind (60-63 % of aiohttp's), 3.6 and 10.8 times the widest
run-to-run spread within an arm; this module stays only while that command shows such a gain.

Here a request is one pre-built byte string written on a pooled keep-alive connection, and
the connection's protocol parses the answer as its bytes arrive: a status line, headers, and a body
by Content-Length or chunked transfer coding (RFC 9112 sections 6 and 7.1), handed to the waiting
request whole (a stream reader cost a coroutine and a buffer copy per line and body read). Callers
that send many requests of one shape have its fixed parts encoded once (``shape``, ``send``).
Watches and lists stay on aiohttp.

Errors surface as :class:`ConnectionError` / :class:`TimeoutError`; callers map them to their own.
A connection that was idle for longer than ``idle_timeout`` is not reused (servers close idle
keep-alive connections; a write on one that was closed meanwhile would fail for nothing).
"""

from __future__ import annotations

import asyncio
import math
import ssl
import time
import weakref
from collections import deque
from urllib.parse import urlsplit

#: Longest header block (and chunk-size line) accepted, as the stream reader's limit was.
LIMIT = 1 << 20

# Where a connection's parser is in the answer it reads.
_HEAD, _LENGTH, _CHUNK_SIZE, _CHUNK_DATA, _TRAILER, _UNTIL_CLOSE = range(6)


class _Conn(asyncio.Protocol):
    """One keep-alive connection; the answer to the request in flight is parsed as its bytes arrive
    (``data_received``) and handed to the waiting request whole: no stream reader, and no coroutine
    per line or body read. The framing is RFC 9112's: interim 1xx answers skipped (section 4), a body
    by Content-Length (6.2), by chunked transfer coding (7.1, chunk extensions and trailer fields read
    past) or delimited by the close (6.3 item 8); none for HEAD, 204 and 304 (6.3 item 1)."""

    __slots__ = (
        "buffer",
        "chunks",
        "deadline",
        "eof",
        "expired",
        "head",
        "keep",
        "method",
        "need",
        "state",
        "status",
        "transport",
        "used",
        "waiter",
    )

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.used = time.monotonic()
        #: loop time by which the request in flight must be answered
        self.deadline = 0.0
        #: the deadline passed: the connection was cut, the request is a timeout
        self.expired = False
        #: the peer closed its side or the connection is gone: not to be reused
        self.eof = False
        self.buffer = bytearray()
        self.waiter: asyncio.Future[tuple[int, dict[str, str], bytes, bool]] | None = None
        self.method = ""
        self.state = _HEAD
        self.need = 0
        self.status = 0
        self.head = b""
        self.keep = True
        self.chunks: list[bytes] = []

    # -- asyncio.Protocol ------------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        buffer = self.buffer
        if not buffer and self.state == _HEAD and self.waiter is not None:
            # The common case: a small 2xx answer that came whole in one read, framed by its
            # Content-Length. The same reading as ``_advance`` (and ``_field``: the first field of
            # that name, any case, its value stripped), without the calls: this runs once per bind.
            end = data.find(b"\r\n\r\n")
            if (
                end > 0
                and data.startswith(b"HTTP/1.1 2")
                and data[12:13] in (b" ", b"\r")
                and data[9:12] != b"204"
                and self.method != "HEAD"
            ):
                lower = data[: end + 2].lower()  # every field line between CRLFs
                at = lower.find(b"\r\ncontent-length:")
                if at > 0 and lower.find(b"\r\ntransfer-encoding:") < 0:
                    at += 17
                    length = lower[at : lower.find(b"\r\n", at)].strip()
                    if length.isdigit() and len(data) == end + 4 + int(length):
                        at = lower.find(b"\r\nconnection:")
                        keep = at < 0 or lower[at + 13 : lower.find(b"\r\n", at + 13)].strip() != b"close"
                        self._done(int(data[9:12]), {}, data[end + 4 :], keep)
                        return
        buffer += data
        if self.waiter is not None:
            self._advance()

    def eof_received(self) -> bool | None:
        self._closed(None)
        return None  # the transport closes itself

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed(exc)

    # -- the request in flight -------------------------------------------------------------------
    def expect(self, method: str) -> asyncio.Future[tuple[int, dict[str, str], bytes, bool]]:
        """Get ready for the answer to a request about to be written; the future has it."""
        waiter = self.waiter = asyncio.get_running_loop().create_future()
        self.method = method
        self.state = _HEAD
        self.chunks = []
        if self.buffer:  # bytes that came early (they are this request's answer, if anything)
            self._advance()
        if self.eof and self.waiter is waiter:
            self._closed(None)
        return waiter

    def close(self) -> None:
        self.eof = True
        if self.transport is not None:
            self.transport.close()

    def _done(self, status: int, headers: dict[str, str], data: bytes, keep: bool) -> None:
        waiter, self.waiter = self.waiter, None
        self.state = _HEAD
        if waiter is not None and not waiter.done():
            waiter.set_result((status, headers, data, keep))

    def _fail(self, exc: BaseException) -> None:
        waiter, self.waiter = self.waiter, None
        self.eof = True  # a connection whose framing is lost is not reused
        if waiter is not None and not waiter.done():
            waiter.set_exception(exc)

    def _closed(self, exc: Exception | None) -> None:
        self.eof = True
        if self.waiter is None:
            return
        if self.state == _UNTIL_CLOSE:
            data = bytes(self.buffer)
            self.buffer.clear()
            self._done(self.status, self._headers(), data, False)
        elif self.state == _HEAD and not self.buffer:
            self._fail(ConnectionResetError("connection closed before a response"))
        else:
            self._fail(ConnectionResetError("connection closed in the middle of a response"))

    def _headers(self) -> dict[str, str]:
        return _headers(self.head) if self.status >= 300 else {}

    def _advance(self) -> None:
        """Read as far as the buffered bytes go; hand the answer over when it is complete."""
        buffer = self.buffer
        try:
            while self.waiter is not None:
                state = self.state
                if state == _HEAD:
                    end = buffer.find(b"\r\n\r\n")
                    if end < 0:
                        if len(buffer) > LIMIT:
                            raise asyncio.LimitOverrunError("answer header block over the limit", len(buffer))
                        return
                    head = bytes(buffer[: end + 4])
                    del buffer[: end + 4]
                    first = head[: head.find(b"\r\n")]
                    status_line = first.split(b" ", 2)
                    if len(status_line) < 2 or not status_line[0].startswith(b"HTTP/1."):
                        raise ConnectionError(f"not an HTTP/1.x response: {first[:80].decode('latin-1')!r}")
                    status = int(status_line[1])
                    if 100 <= status < 200:
                        continue  # interim (100 Continue): the real answer follows
                    # Only the fields that frame the answer are looked up (in the lower-cased block:
                    # names are case-insensitive); the full header map is built for answers callers
                    # read as errors.
                    self.status, self.head = status, head
                    lower = head.lower()
                    self.keep = _field(lower, b"connection") != b"close" and status_line[0] != b"HTTP/1.0"
                    if self.method == "HEAD" or status in (204, 304):
                        self._done(status, self._headers(), b"", self.keep)
                    elif b"chunked" in (_field(lower, b"transfer-encoding") or b""):
                        self.state = _CHUNK_SIZE
                    elif (length := _field(lower, b"content-length")) is not None:
                        self.need = int(length)
                        if self.need < 0:
                            raise ValueError(f"negative Content-Length {self.need}")
                        self.state = _LENGTH
                    else:
                        self.keep = False
                        self.state = _UNTIL_CLOSE
                elif state == _LENGTH:
                    if len(buffer) < self.need:
                        return
                    data = bytes(buffer[: self.need])
                    del buffer[: self.need]
                    self._done(self.status, self._headers(), data, self.keep)
                elif state == _CHUNK_SIZE or state == _TRAILER:
                    end = buffer.find(b"\r\n")
                    if end < 0:
                        if len(buffer) > LIMIT:
                            raise asyncio.LimitOverrunError("chunk line over the limit", len(buffer))
                        return
                    line = bytes(buffer[:end])
                    del buffer[: end + 2]
                    if state == _TRAILER:
                        if not line:  # the empty line after the trailer fields: the end
                            data = b"".join(self.chunks)
                            self.chunks = []
                            self._done(self.status, self._headers(), data, self.keep)
                        continue
                    size = int(line.split(b";", 1)[0].strip(), 16)
                    if size == 0:
                        self.state = _TRAILER
                    else:
                        self.need = size + 2  # the chunk and its CRLF
                        self.state = _CHUNK_DATA
                elif state == _CHUNK_DATA:
                    if len(buffer) < self.need:
                        return
                    self.chunks.append(bytes(buffer[: self.need - 2]))
                    del buffer[: self.need]
                    self.state = _CHUNK_SIZE
                else:  # _UNTIL_CLOSE: complete at the close
                    return
        except (ConnectionError, ValueError, asyncio.LimitOverrunError) as exc:
            self._fail(exc)


class RequestShape:
    """A request head with its path left open (see ``Http1Pool.shape``)."""

    __slots__ = ("__weakref__", "after", "before", "content_type", "method", "suffix")

    def __init__(self, method: str, suffix: str, before: bytes, after: bytes, content_type: str = "") -> None:
        self.method = method
        self.suffix = suffix
        self.before = before
        self.after = after
        self.content_type = content_type

    def fill(self, path: str, body: bytes) -> bytes:
        """The request for ``path`` (+ the shape's suffix) with this body, in bytes."""
        return b"".join((self.before, path.encode("latin-1"), self.after, b"%d\r\n\r\n" % len(body), body))


class Http1Pool:
    def __init__(
        self,
        base_url: str,
        headers: dict[str, str],
        ssl_context: ssl.SSLContext | bool | None = None,
        max_connections: int = 100,
        idle_timeout: float = 30.0,
        server_hostname: str | None = None,
    ) -> None:
        parts = urlsplit(base_url)
        #: the name the server's certificate is checked against and sent as SNI (kubeconfig
        #: ``tls-server-name``), when not the host's
        self.server_hostname = server_hostname if parts.scheme == "https" else None
        self.tls = parts.scheme == "https"
        self.host = parts.hostname or "localhost"
        self.port = parts.port or (443 if self.tls else 80)
        self.prefix = parts.path.rstrip("/")
        self.ssl: ssl.SSLContext | None = None
        if self.tls:
            if isinstance(ssl_context, ssl.SSLContext):
                self.ssl = ssl_context
            elif ssl_context is False:
                self.ssl = ssl.create_default_context()
                self.ssl.check_hostname = False
                self.ssl.verify_mode = ssl.CERT_NONE
            else:
                self.ssl = ssl.create_default_context()
        self._host_header = parts.netloc.rsplit("@", 1)[-1]
        self._fixed = b""
        #: the shapes handed out, brought up to date when the headers change (a rotated token)
        self._handed: weakref.WeakSet[RequestShape] = weakref.WeakSet()
        self._idle: list[_Conn] = []
        #: (method, content type) -> the shape of requests with a body made through ``request``
        self._shapes: dict[tuple[str, str], RequestShape] = {}
        # Requests in flight are at most max_connections: a count, and the requests waiting for a
        # slot in arrival order (an asyncio.Semaphore cost three coroutines per request even when
        # slots were free).
        self._free = max(1, max_connections)
        self._slot_waiters: deque[asyncio.Future[None]] = deque()
        self.idle_timeout = idle_timeout
        self.opened = 0
        # Request timeouts: one timer for the pool, due at the earliest deadline of the requests in
        # flight, instead of an asyncio.timeout (a timer armed and cancelled) per request. A request
        # still unanswered at its deadline has its connection cut and raises TimeoutError.
        self._busy: set[_Conn] = set()
        self._sweep: asyncio.TimerHandle | None = None
        self._sweep_at = math.inf
        self._sweep_loop: asyncio.AbstractEventLoop | None = None
        self.set_headers(headers)

    def set_headers(self, headers: dict[str, str]) -> None:
        """The header fields every request carries from now on (a rotated bearer token), in the
        shapes handed out too; requests already written keep theirs."""
        fixed = {"Host": self._host_header, **headers}
        self._fixed = "".join(f"{k}: {v}\r\n" for k, v in fixed.items()).encode("latin-1")
        self._shapes.clear()
        for shape in list(self._handed):
            shape.after = self._after(shape.suffix, shape.content_type)

    def _after(self, suffix: str, content_type: str) -> bytes:
        return (
            f"{suffix} HTTP/1.1\r\n".encode("latin-1")
            + self._fixed
            + f"Content-Type: {content_type}\r\nContent-Length: ".encode("latin-1")
        )

    async def _connect(self) -> _Conn:
        _, conn = await asyncio.get_running_loop().create_connection(
            _Conn, self.host, self.port, ssl=self.ssl, server_hostname=self.server_hostname
        )
        self.opened += 1
        return conn

    def _take(self) -> _Conn | None:
        now = time.monotonic()
        while self._idle:
            conn = self._idle.pop()
            if now - conn.used < self.idle_timeout and not conn.eof:
                return conn
            conn.close()
        return None

    def shape(self, method: str, suffix: str, content_type: str) -> RequestShape:
        """The fixed parts of the requests ``method PATH+suffix`` with a body of ``content_type``,
        encoded once: ``RequestShape.fill`` makes each request from its path and body, the same bytes
        ``request`` writes for them."""
        shape = RequestShape(
            method,
            suffix,
            f"{method} {self.prefix}".encode("latin-1"),
            self._after(suffix, content_type),
            content_type,
        )
        self._handed.add(shape)
        return shape

    async def request(
        self, method: str, path: str, body: bytes | None, content_type: str, timeout: float
    ) -> tuple[int, dict[str, str], bytes]:
        """(status, headers with lower-case names, body); the headers of answers of 300 and above
        only (callers read them for errors: Retry-After), an empty map otherwise."""
        if body is not None:
            shape = self._shapes.get((method, content_type))
            if shape is None:
                shape = self._shapes[(method, content_type)] = self.shape(method, "", content_type)
            payload = shape.fill(path, body)
        else:
            payload = (
                f"{method} {self.prefix}{path} HTTP/1.1\r\n".encode("latin-1")
                + self._fixed
                + b"Content-Length: 0\r\n\r\n"
            )
        return await self.send(method, path, payload, timeout)

    async def send(
        self, method: str, path: str, payload: bytes, timeout: float
    ) -> tuple[int, dict[str, str], bytes]:
        """``request`` with the request already in bytes (``method`` and ``path`` as written in it:
        the answer to a HEAD has no body; the path names the request in errors)."""
        if self._free > 0 and not self._slot_waiters:
            self._free -= 1
        else:
            await self._wait_for_slot()
        try:
            conn = self._take()
            loop = asyncio.get_running_loop()
            deadline = loop.time() + timeout
            try:
                if conn is None:
                    async with asyncio.timeout_at(deadline):
                        conn = await self._connect()
                self._watch(conn, deadline, loop)
                answer = conn.expect(method)
                conn.transport.write(payload)  # type: ignore[union-attr]
                status, headers, data, keep = await answer
            except BaseException:
                if conn is not None:
                    self._busy.discard(conn)
                    conn.close()
                    if conn.expired:
                        raise TimeoutError(f"{method} {path}: no answer within {timeout:g}s") from None
                raise
            self._busy.discard(conn)
            if conn.expired:  # cut while the answer was read to its end (a close-delimited body)
                conn.close()
                raise TimeoutError(f"{method} {path}: no answer within {timeout:g}s")
            if keep and not conn.eof:
                conn.used = time.monotonic()
                self._idle.append(conn)
            else:
                conn.close()
            return status, headers, data
        finally:
            self._release_slot()

    async def _wait_for_slot(self) -> None:
        waiter = asyncio.get_running_loop().create_future()
        self._slot_waiters.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self._release_slot()  # handed a slot just as it was cancelled: pass it on
            raise

    def _release_slot(self) -> None:
        while self._slot_waiters:
            waiter = self._slot_waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)  # the slot goes straight to the longest waiting request
                return
        self._free += 1

    def _watch(self, conn: _Conn, deadline: float, loop: asyncio.AbstractEventLoop) -> None:
        conn.deadline = deadline
        self._busy.add(conn)
        if deadline < self._sweep_at or self._sweep_loop is not loop:
            self._sweep_loop = loop
            if self._sweep is not None:
                self._sweep.cancel()
            self._sweep = loop.call_at(deadline, self._expire, loop)
            self._sweep_at = deadline

    def _expire(self, loop: asyncio.AbstractEventLoop) -> None:
        """Cut the connections whose request is past its deadline; due again at the next deadline."""
        self._sweep = None
        self._sweep_at = math.inf
        now = loop.time()
        following = math.inf
        for conn in list(self._busy):
            if conn.deadline <= now:
                self._busy.discard(conn)
                conn.expired = True
                conn.transport.abort()  # type: ignore[union-attr]  # the pending read ends at once
            elif conn.deadline < following:
                following = conn.deadline
        if following < math.inf:
            self._sweep = loop.call_at(following, self._expire, loop)
            self._sweep_at = following

    def close(self) -> None:
        for conn in self._idle:
            conn.close()
        self._idle.clear()
        if self._sweep is not None:
            self._sweep.cancel()
            self._sweep = None
            self._sweep_at = math.inf


def _field(lower: bytes, name: bytes) -> bytes | None:
    """The value of header field ``name`` (lower case) in a lower-cased header block, or None."""
    at = lower.find(b"\r\n" + name + b":")
    if at < 0:
        return None
    start = at + len(name) + 3
    return lower[start : lower.find(b"\r\n", start)].strip()


def _headers(raw: bytes) -> dict[str, str]:
    headers: dict[str, str] = {}
    for line in raw.decode("latin-1").split("\r\n")[1:]:
        if line:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
    return headers
