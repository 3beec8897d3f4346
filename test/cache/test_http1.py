"""The lean HTTP/1.1 writer: keep-alive reuse, Content-Length and chunked answers, servers that close,
interim answers, and errors that say what happened. A raw asyncio server on 127.0.0.1 plays the API
server so every framing case is written out byte for byte."""

from __future__ import annotations

import asyncio

import pytest

from caldera.cache.client import ApiClient, ApiError, ClusterConfig
from caldera.cache.http1 import Http1Pool


class RawServer:
    """Answers each request with the next scripted byte string (or closes when it is None)."""

    def __init__(self, answers: list[bytes | None]) -> None:
        self.answers = answers
        self.requests: list[bytes] = []
        self.connections = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":", 1)[1])
                body = await reader.readexactly(length)
                self.requests.append(head + body)
                answer = self.answers.pop(0)
                if answer is None:
                    break
                writer.write(answer)
                await writer.drain()
                if b"Connection: close" in answer:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        writer.close()

    async def __aenter__(self) -> str:
        self.server = await asyncio.start_server(self.handle, "127.0.0.1", 0)
        port = self.server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    async def __aexit__(self, *exc: object) -> None:
        self.server.close()


def ok(body: bytes, extra: bytes = b"") -> bytes:
    return (
        b"HTTP/1.1 201 Created\r\nContent-Type: application/json\r\n"
        + extra
        + (b"Content-Length: %d\r\n\r\n" % len(body) + body)
    )


async def test_requests_share_one_keep_alive_connection_and_carry_the_fixed_headers():
    server = RawServer([ok(b'{"a":1}'), ok(b'{"a":2}'), ok(b'{"a":3}')])
    async with server as url:
        pool = Http1Pool(url, {"Authorization": "Bearer t"}, max_connections=4)
        answers = [await pool.request("POST", f"/p/{i}", b"{}", "application/json", 5) for i in range(3)]
        pool.close()
    assert [a[2] for a in answers] == [b'{"a":1}', b'{"a":2}', b'{"a":3}']
    assert server.connections == 1
    first = server.requests[0]
    assert first.startswith(b"POST /p/0 HTTP/1.1\r\n")
    assert b"Authorization: Bearer t\r\n" in first and b"Content-Length: 2\r\n" in first


async def test_chunked_answers_interim_answers_and_close_delimited_answers_are_read_whole():
    chunked = (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"5\r\nhello\r\n7;ext=1\r\n, world\r\n0\r\nX-Trailer: 1\r\n\r\n"
    )
    interim = b"HTTP/1.1 100 Continue\r\n\r\n" + ok(b"after")
    closing = b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nuntil the end"
    server = RawServer([chunked, interim, closing, ok(b"fresh")])
    async with server as url:
        pool = Http1Pool(url, {}, max_connections=1)
        bodies = [
            (await pool.request("PATCH", "/x", b"{}", "application/merge-patch+json", 5))[2] for _ in range(4)
        ]
        pool.close()
    assert bodies == [b"hello, world", b"after", b"until the end", b"fresh"]
    assert server.connections == 2  # the closed one was replaced


async def test_errors_become_api_errors_with_the_server_message_and_retry_after():
    status = b'{"kind":"Status","code":409,"reason":"Conflict","message":"pod p is already assigned"}'
    answers = [
        b"HTTP/1.1 409 Conflict\r\nContent-Length: %d\r\n\r\n" % len(status) + status,
        b"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 2\r\nContent-Length: 0\r\n\r\n",
        None,  # the server hangs up without answering
    ]
    async with RawServer(answers) as url:
        client = ApiClient(ClusterConfig(host=url))
        with pytest.raises(ApiError) as conflict:
            await client.request("POST", "/api/v1/namespaces/d/pods/p/binding", data=b"{}")
        with pytest.raises(ApiError) as throttled:
            await client.request("POST", "/x", body={"a": 1})
        with pytest.raises(ApiError) as dropped:
            await client.request("DELETE", "/y", params={"propagationPolicy": "Background"})
        await client.close()
    assert (conflict.value.code, conflict.value.reason) == (409, "Conflict")
    assert "already assigned" in conflict.value.message
    assert (throttled.value.code, throttled.value.retry_after) == (429, 2.0)
    assert dropped.value.code == 0 and dropped.value.transient


async def test_a_slow_server_is_a_timeout_and_the_connection_is_not_reused():
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(5)
        writer.close()

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    pool = Http1Pool(f"http://127.0.0.1:{port}", {})
    with pytest.raises(TimeoutError):
        await pool.request("POST", "/slow", b"{}", "application/json", 0.2)
    assert pool._idle == []
    server.close()


async def test_each_request_times_out_at_its_own_deadline_while_others_are_answered():
    release = asyncio.Event()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                await reader.readexactly(2)
                if head.startswith(b"POST /slow"):
                    await release.wait()  # never answers in time
                    break
                writer.write(ok(b"{}"))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    pool = Http1Pool(f"http://127.0.0.1:{port}", {}, max_connections=8)
    loop = asyncio.get_running_loop()
    started = loop.time()

    async def slow(timeout: float) -> float:
        with pytest.raises(TimeoutError):
            await pool.request("POST", "/slow", b"{}", "application/json", timeout)
        return loop.time() - started

    async def fast() -> int:
        answered = 0
        for _ in range(20):
            status, _, _ = await pool.request("POST", "/fast", b"{}", "application/json", 10)
            answered += status == 201
            await asyncio.sleep(0.01)
        return answered

    short, long, answered = await asyncio.gather(slow(0.3), slow(0.8), fast())
    assert answered == 20
    assert 0.3 <= short < long and 0.8 <= long < 5
    assert not pool._busy  # the timed-out connections were cut and dropped, none kept
    assert all(not conn.expired for conn in pool._idle)
    pool.close()
    release.set()
    await asyncio.sleep(0.05)  # the server's handlers close their ends
    server.close()
    await server.wait_closed()


async def test_framing_fields_are_read_whatever_their_case_and_spacing():
    lower = b"HTTP/1.1 201 Created\r\ncontent-type: application/json\r\ncontent-length:5\r\n\r\nfirst"
    shouting = b"HTTP/1.1 200 OK\r\nCONTENT-LENGTH:  6 \r\nConnection:  CLOSE \r\n\r\nsecond"
    server = RawServer([lower, shouting, ok(b"third")])
    async with server as url:
        pool = Http1Pool(url, {}, max_connections=1)
        answers = [await pool.request("POST", "/x", b"{}", "application/json", 5) for _ in range(3)]
        pool.close()
    assert [a[2] for a in answers] == [b"first", b"second", b"third"]
    assert [a[0] for a in answers] == [201, 200, 201]
    assert server.connections == 2  # "Connection: CLOSE" was honoured
