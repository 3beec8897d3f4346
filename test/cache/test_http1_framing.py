"""The writer's connection reads an answer the same whatever pieces the network delivers it in:
whole in one read (the fast path of the common small 2xx), byte by byte, or split anywhere. Each
answer shape of RFC 9112 is fed to a connection in every split and the results compared with what
the answer says, written out here by hand."""

from __future__ import annotations

import asyncio
import random

import pytest

from caldera.cache.http1 import LIMIT, Http1Pool, _Conn


class Transport:
    """Stands in for the socket: records what is written and whether it was closed."""

    def __init__(self) -> None:
        self.written: list[bytes] = []
        self.closed = False

    def write(self, data: bytes) -> None:
        self.written.append(data)

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.closed = True


def splits(answer: bytes, seed: int) -> list[list[bytes]]:
    """The answer whole, byte by byte, cut after each byte in two, and in random pieces."""
    out = [[answer], [answer[i : i + 1] for i in range(len(answer))]]
    out += [[answer[:i], answer[i:]] for i in range(1, len(answer))]
    rng = random.Random(seed)
    for _ in range(20):
        cuts = sorted(rng.sample(range(1, len(answer)), min(5, len(answer) - 1)))
        out.append([answer[a:b] for a, b in zip([0, *cuts], [*cuts, len(answer)], strict=True)])
    return out


STATUS_201 = b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Success","code":201}'
CONFLICT = b'{"kind":"Status","code":409,"reason":"Conflict","message":"pod p is already assigned"}'

# (method, answer bytes, expected (status, headers, body, keep-alive))
CASES = [
    (
        "POST",
        b"HTTP/1.1 201 Created\r\nAudit-Id: 1\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n%s" % (len(STATUS_201), STATUS_201),
        (201, {}, STATUS_201, True),
    ),
    (
        "PATCH",
        b"HTTP/1.1 200 OK\r\ncontent-length:  5 \r\nConnection: Close\r\n\r\nhello",
        (200, {}, b"hello", False),
    ),
    (
        "POST",
        b"HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"5\r\nhello\r\n7;ext=1\r\n, world\r\n0\r\nX-Trailer: 1\r\n\r\n",
        (201, {}, b"hello, world", True),
    ),
    (
        "POST",
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\n{}",
        (201, {}, b"{}", True),
    ),
    (
        "POST",
        b"HTTP/1.1 409 Conflict\r\nRetry-After: 2\r\nContent-Length: %d\r\n\r\n%s"
        % (len(CONFLICT), CONFLICT),
        (409, {"retry-after": "2", "content-length": str(len(CONFLICT))}, CONFLICT, True),
    ),
    ("DELETE", b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n", (204, {}, b"", True)),
    ("HEAD", b"HTTP/1.1 200 OK\r\nContent-Length: 120\r\n\r\n", (200, {}, b"", True)),
    ("POST", b"HTTP/1.0 201 Created\r\nContent-Length: 2\r\n\r\n{}", (201, {}, b"{}", False)),
]


@pytest.mark.parametrize("case", range(len(CASES)))
async def test_an_answer_reads_the_same_in_any_pieces(case: int) -> None:
    method, answer, expected = CASES[case]
    for pieces in splits(answer, case):
        conn = _Conn()
        conn.connection_made(Transport())  # type: ignore[arg-type]
        waiter = conn.expect(method)
        for piece in pieces:
            assert not waiter.done(), "answered before the last byte"
            conn.data_received(piece)
        assert waiter.done(), f"no answer after {pieces!r}"
        assert waiter.result() == expected, pieces
        assert conn.waiter is None and not conn.buffer


async def test_an_answer_delimited_by_the_close_ends_at_the_close() -> None:
    answer = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil the end"
    for pieces in splits(answer, 9):
        conn = _Conn()
        conn.connection_made(Transport())  # type: ignore[arg-type]
        waiter = conn.expect("POST")
        for piece in pieces:
            conn.data_received(piece)
        assert not waiter.done()
        conn.eof_received()
        assert waiter.result() == (200, {}, b"until the end", False)
        assert conn.eof


async def test_answers_on_a_kept_connection_follow_each_other() -> None:
    conn = _Conn()
    conn.connection_made(Transport())  # type: ignore[arg-type]
    for status, body in ((201, b"one"), (200, b"two"), (201, b"three")):
        waiter = conn.expect("POST")
        conn.data_received(b"HTTP/1.1 %d X\r\nContent-Length: %d\r\n\r\n%s" % (status, len(body), body))
        assert waiter.result() == (status, {}, body, True)


async def test_a_close_before_or_during_an_answer_and_garbage_are_errors() -> None:
    conn = _Conn()
    conn.connection_made(Transport())  # type: ignore[arg-type]
    waiter = conn.expect("POST")
    conn.connection_lost(None)
    with pytest.raises(ConnectionResetError, match="before a response"):
        waiter.result()

    conn = _Conn()
    conn.connection_made(Transport())  # type: ignore[arg-type]
    waiter = conn.expect("POST")
    conn.data_received(b"HTTP/1.1 201 Created\r\nContent-Length: 10\r\n\r\n{}")
    conn.eof_received()
    with pytest.raises(ConnectionResetError, match="middle of a response"):
        waiter.result()

    conn = _Conn()
    conn.connection_made(Transport())  # type: ignore[arg-type]
    waiter = conn.expect("POST")
    conn.data_received(b"SSH-2.0-OpenSSH_9\r\n\r\n")
    with pytest.raises(ConnectionError, match=r"not an HTTP/1\.x response"):
        waiter.result()
    assert conn.eof, "a connection that lost its framing is not reused"

    conn = _Conn()
    conn.connection_made(Transport())  # type: ignore[arg-type]
    waiter = conn.expect("POST")
    conn.data_received(b"HTTP/1.1 200 OK\r\nX-Big: " + b"a" * (LIMIT + 10))
    with pytest.raises(asyncio.LimitOverrunError):
        waiter.result()


async def test_a_request_carries_the_prefix_the_fixed_headers_and_its_body_as_written_out_here() -> None:
    pool = Http1Pool(
        "https://api.example:6443/prefix/", {"Authorization": "Bearer t", "Accept": "application/json"}
    )
    conn = _Conn()
    transport = Transport()
    conn.connection_made(transport)  # type: ignore[arg-type]
    pool._idle.append(conn)
    body = b'{"a":1}'
    request = asyncio.ensure_future(pool.request("POST", "/api/v1/x", body, "application/json", 5))
    await asyncio.sleep(0)
    conn.data_received(b"HTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\n{}")
    assert await request == (201, {}, b"{}")
    assert transport.written == [
        b"POST /prefix/api/v1/x HTTP/1.1\r\nHost: api.example:6443\r\nAuthorization: Bearer t\r\n"
        b"Accept: application/json\r\nContent-Type: application/json\r\nContent-Length: 7\r\n\r\n" + body
    ]
    pool.close()


async def test_requests_beyond_the_connection_limit_wait_their_turn_and_a_cancelled_wait_frees_nothing() -> (
    None
):
    in_flight = 0
    most = 0
    release = asyncio.Event()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal in_flight, most
        try:
            while True:
                await reader.readuntil(b"\r\n\r\n")
                await reader.readexactly(2)
                in_flight += 1
                most = max(most, in_flight)
                await release.wait()
                in_flight -= 1
                writer.write(b"HTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\n{}")
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    pool = Http1Pool(f"http://127.0.0.1:{port}", {}, max_connections=2)
    requests = [
        asyncio.ensure_future(pool.request("POST", f"/p/{i}", b"{}", "application/json", 10))
        for i in range(6)
    ]
    await asyncio.sleep(0.2)
    assert in_flight == 2, "two requests on the wire, four waiting for a slot"
    requests[3].cancel()  # gives up while waiting: no slot is lost or gained by it
    await asyncio.sleep(0)
    release.set()
    answers = await asyncio.gather(*requests, return_exceptions=True)
    assert isinstance(answers[3], asyncio.CancelledError)
    assert [a[0] for i, a in enumerate(answers) if i != 3] == [201] * 5  # type: ignore[index]
    assert most == 2
    assert pool._free == 2 and not pool._slot_waiters
    assert pool.opened == 2
    pool.close()
    server.close()
    await server.wait_closed()


async def test_a_binding_answer_that_comes_whole_takes_the_fast_path() -> None:
    """The answer of a kube-apiserver to a binding (201, a Status, Content-Length) read in one piece is
    read without the general parser (which keeps the head it read), once per bind."""
    answer = (
        b"HTTP/1.1 201 Created\r\nAudit-Id: 5c5a\r\nCache-Control: no-cache, private\r\n"
        b"Content-Type: application/json\r\nX-Kubernetes-Pf-Flowschema-Uid: 1\r\n"
        b"Date: Mon, 23 Nov 2026 02:00:00 GMT\r\nContent-Length: %d\r\n\r\n%s" % (len(STATUS_201), STATUS_201)
    )
    conn = _Conn()
    conn.connection_made(Transport())  # type: ignore[arg-type]
    waiter = conn.expect("POST")
    conn.data_received(answer)
    assert waiter.result() == (201, {}, STATUS_201, True)
    assert conn.head == b"", "the general parser was used"
