"""A lean HTTP/1.1 client for the scheduler's small writes (bindings, status patches, events).

aiohttp costs a few hundred microseconds of Python per request (URL and header objects, tracing
hooks, a response object with its own parsers); a binding is a 200-byte POST answered by a small
Status. Here a request is one pre-built byte string written on a pooled keep-alive connection and
the answer is read with the stream reader: a status line, headers, and a body by Content-Length or
chunked transfer coding (RFC 9112 sections 6 and 7.1). Watches and lists stay on aiohttp.

Errors surface as :class:`ConnectionError` / :class:`TimeoutError`; callers map them to their own.
A connection that was idle for longer than ``idle_timeout`` is not reused (servers close idle
keep-alive connections; a write on one that was closed meanwhile would fail for nothing).
"""

from __future__ import annotations

import asyncio
import math
import ssl
import time
from urllib.parse import urlsplit


class _Conn:
    __slots__ = ("deadline", "expired", "reader", "used", "writer")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.used = time.monotonic()
        #: loop time by which the request in flight must be answered
        self.deadline = 0.0
        #: the deadline passed: the connection was cut, the request is a timeout
        self.expired = False

    def close(self) -> None:
        self.writer.close()


class Http1Pool:
    def __init__(
        self,
        base_url: str,
        headers: dict[str, str],
        ssl_context: ssl.SSLContext | bool | None = None,
        max_connections: int = 100,
        idle_timeout: float = 30.0,
    ) -> None:
        parts = urlsplit(base_url)
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
        host_header = parts.netloc.rsplit("@", 1)[-1]
        fixed = {"Host": host_header, **headers}
        self._fixed = "".join(f"{k}: {v}\r\n" for k, v in fixed.items()).encode("latin-1")
        self._idle: list[_Conn] = []
        self._slots = asyncio.Semaphore(max_connections)
        self.idle_timeout = idle_timeout
        self.opened = 0
        # Request timeouts: one timer for the pool, due at the earliest deadline of the requests in
        # flight, instead of an asyncio.timeout (a timer armed and cancelled) per request. A request
        # still unanswered at its deadline has its connection cut and raises TimeoutError.
        self._busy: set[_Conn] = set()
        self._sweep: asyncio.TimerHandle | None = None
        self._sweep_at = math.inf
        self._sweep_loop: asyncio.AbstractEventLoop | None = None

    async def _connect(self) -> _Conn:
        reader, writer = await asyncio.open_connection(self.host, self.port, ssl=self.ssl, limit=1 << 20)
        self.opened += 1
        return _Conn(reader, writer)

    def _take(self) -> _Conn | None:
        now = time.monotonic()
        while self._idle:
            conn = self._idle.pop()
            if now - conn.used < self.idle_timeout and not conn.reader.at_eof():
                return conn
            conn.close()
        return None

    async def request(
        self, method: str, path: str, body: bytes | None, content_type: str, timeout: float
    ) -> tuple[int, dict[str, str], bytes]:
        """(status, headers with lower-case names, body); the headers of answers of 300 and above
        only (callers read them for errors: Retry-After), an empty map otherwise."""
        head = f"{method} {self.prefix}{path} HTTP/1.1\r\n".encode("latin-1") + self._fixed
        if body is not None:
            head += f"Content-Type: {content_type}\r\nContent-Length: {len(body)}\r\n\r\n".encode("latin-1")
            payload = head + body
        else:
            payload = head + b"Content-Length: 0\r\n\r\n"
        async with self._slots:
            conn = self._take()
            loop = asyncio.get_running_loop()
            deadline = loop.time() + timeout
            try:
                if conn is None:
                    async with asyncio.timeout_at(deadline):
                        conn = await self._connect()
                self._watch(conn, deadline, loop)
                conn.writer.write(payload)
                status, headers, data, keep = await _read_response(conn.reader, method)
            except asyncio.CancelledError:
                if conn is not None:
                    self._busy.discard(conn)
                    conn.close()
                raise
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
            if keep:
                conn.used = time.monotonic()
                self._idle.append(conn)
            else:
                conn.close()
            return status, headers, data

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
                conn.writer.transport.abort()  # the pending read ends at once (EOF)
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


async def _read_response(
    reader: asyncio.StreamReader, method: str
) -> tuple[int, dict[str, str], bytes, bool]:
    while True:
        try:
            raw = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError as exc:
            raise ConnectionResetError("connection closed before a response") from exc
        first = raw[: raw.find(b"\r\n")]
        status_line = first.split(b" ", 2)
        if len(status_line) < 2 or not status_line[0].startswith(b"HTTP/1."):
            raise ConnectionError(f"not an HTTP/1.x response: {first[:80].decode('latin-1')!r}")
        status = int(status_line[1])
        if 100 <= status < 200:
            continue  # interim (100 Continue): the real answer follows
        break
    # Only the fields that frame the answer are looked up (in the lower-cased block: names are
    # case-insensitive); the full header map is built for answers callers read as errors.
    lower = raw.lower()
    keep = _field(lower, b"connection") != b"close" and status_line[0] != b"HTTP/1.0"
    try:
        if method == "HEAD" or status in (204, 304):
            data = b""
        elif b"chunked" in (_field(lower, b"transfer-encoding") or b""):
            data = await _read_chunked(reader)
        elif (length := _field(lower, b"content-length")) is not None:
            data = await reader.readexactly(int(length))
        else:
            data = await reader.read()  # delimited by the close
            keep = False
    except asyncio.IncompleteReadError as exc:
        raise ConnectionResetError("connection closed in the middle of a response") from exc
    return status, _headers(raw) if status >= 300 else {}, data, keep


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


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    parts: list[bytes] = []
    while True:
        size_line = await reader.readuntil(b"\r\n")
        size = int(size_line.split(b";", 1)[0].strip(), 16)
        if size == 0:
            while (await reader.readuntil(b"\r\n")) != b"\r\n":  # trailer fields, then the end
                pass
            return b"".join(parts)
        parts.append(await reader.readexactly(size))
        await reader.readexactly(2)
