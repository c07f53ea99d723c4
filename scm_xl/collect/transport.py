"""A lean HTTP/1.1 client transport for httpx, on plain asyncio protocols.

Why it exists: httpx's own transport (httpcore + h11 + anyio) spends most of
the collector's CPU on a streamed chunk, and one client stalls beyond about
128 concurrent streams; benchmarks/results/transport.md measures it against
httpx's transport and httpx-aiohttp on the same load and records the decision.

What it speaks: HTTP/1.1 (and HTTP/1.0 answers) with keep-alive, chunked and
Content-Length bodies, bodies read until close, interim 1xx answers, TLS.
What it does not: proxies (the collector falls back to httpx's transport when
the environment sets one), HTTP/2, connection limits (the collector holds the
concurrency itself). Errors are httpx's own exceptions (ConnectError,
ConnectTimeout, ReadTimeout, ReadError, RemoteProtocolError), so callers
handle one family whichever transport runs. The conformance suite is
tests/test_transport.py.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

import httpx

class FastTransport(httpx.AsyncBaseTransport):
    """HTTP/1.1 with keep-alive on plain asyncio protocols, behind httpx's transport seam.

    httpx's default transport (httpcore + h11 + anyio) spends about 40 us of
    CPU per streamed chunk and scans its pool on every request; measured on
    this kind of machine it caps the collector near 14k tokens per CPU-second.
    This transport parses the response head and chunked framing itself and
    hands the body over in pieces, with the same httpx exceptions
    (ConnectError, ConnectTimeout, ReadTimeout, ReadError, RemoteProtocolError).
    It has no proxy, HTTP/2 or connection-limit support: the collector holds
    the concurrency itself, and `transport="httpx"` gives httpx's own.
    """

    def __init__(self, *, ssl_context: Any = None, keepalive_per_host: int = 4096) -> None:
        self._ssl_context = ssl_context
        self._idle: dict[tuple[str, str, int], list[_H1Connection]] = {}
        self._open: set[_H1Connection] = set()
        self._keepalive_per_host = keepalive_per_host
        self._watchdog: asyncio.Task[None] | None = None
        self._watch_interval = 1.0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        return await self.send_prepared(await self.prepare(request))

    @staticmethod
    async def prepare(request: httpx.Request) -> _PreparedRequest:
        """The request serialized once (head and body bytes, pool key, timeouts), so that
        sending it again and again is only a socket write (see `send_prepared`)."""
        url = request.url
        if url.scheme not in ("http", "https"):
            raise httpx.UnsupportedProtocol(f"unsupported URL scheme {url.scheme!r}", request=request)
        port = url.port or (443 if url.scheme == "https" else 80)
        timeouts = request.extensions.get("timeout") or {}
        body = await request.aread()
        lines = [request.method.encode(), b" ", url.raw_path, b" HTTP/1.1\r\n"]
        for name, value in request.headers.raw:
            lines += [name, b": ", value, b"\r\n"]
        lines.append(b"\r\n")
        return _PreparedRequest(request=request, key=(url.scheme, url.host, port), payload=b"".join(lines) + body,
                                read_timeout=timeouts.get("read"), connect_timeout=timeouts.get("connect"),
                                head_only=request.method == "HEAD")

    async def send_prepared(self, prepared: _PreparedRequest) -> httpx.Response:
        """Send a request serialized by `prepare` (on an idle keep-alive connection if any)."""
        idle = self._idle.get(prepared.key)
        while idle:
            connection = idle.pop()
            if connection.usable():
                try:
                    return await self._exchange(connection, prepared)
                except _StaleConnection:
                    continue  # the server closed an idle connection: use a fresh one
        request = prepared.request
        connection = await self._connect(prepared.key, request, prepared.connect_timeout)
        try:
            return await self._exchange(connection, prepared)
        except _StaleConnection:
            raise httpx.RemoteProtocolError("server disconnected without sending a response",
                                            request=request) from None

    async def _connect(self, key: tuple[str, str, int], request: httpx.Request,
                       timeout: float | None) -> _H1Connection:
        scheme, host, port = key
        loop = asyncio.get_running_loop()
        ssl_context = None
        if scheme == "https":
            if self._ssl_context is None:
                self._ssl_context = httpx.create_ssl_context()
            ssl_context = self._ssl_context
        try:
            async with asyncio.timeout(timeout):
                _, connection = await loop.create_connection(
                    lambda: _H1Connection(self), host, port, ssl=ssl_context,
                    server_hostname=host if ssl_context else None)
        except TimeoutError:
            raise httpx.ConnectTimeout(f"connecting to {host}:{port} timed out", request=request) from None
        except OSError as exc:
            raise httpx.ConnectError(f"cannot connect to {host}:{port}: {exc.strerror or exc}",
                                     request=request) from None
        connection.key = key
        self._open.add(connection)
        return connection

    async def _exchange(self, connection: _H1Connection, prepared: _PreparedRequest) -> httpx.Response:
        read_timeout = prepared.read_timeout
        connection.begin(prepared.request, read_timeout, head_only=prepared.head_only)
        self._ensure_watchdog(read_timeout)
        connection.transport.write(prepared.payload)
        status, reason, headers = await connection.read_head()
        body = _H1Body(connection)
        return httpx.Response(status, headers=headers, stream=body,
                              extensions={"http_version": b"HTTP/1.1", "reason_phrase": reason,
                                          "arrival_clock": body})

    def _release(self, connection: _H1Connection) -> None:
        if connection.reusable():
            idle = self._idle.setdefault(connection.key, [])
            if len(idle) < self._keepalive_per_host:
                idle.append(connection)
                return
        connection.close()

    def _ensure_watchdog(self, read_timeout: float | None) -> None:
        if read_timeout is None:
            return
        interval = min(1.0, max(0.01, read_timeout / 5))
        if self._watchdog is None or self._watchdog.done() or interval < self._watch_interval:
            if self._watchdog is not None:
                self._watchdog.cancel()
            self._watch_interval = interval
            self._watchdog = asyncio.get_running_loop().create_task(self._watch())

    async def _watch(self) -> None:
        """Fail reads that have been silent longer than their read timeout."""
        loop = asyncio.get_running_loop()
        while self._open:
            await asyncio.sleep(self._watch_interval)
            now = loop.time()
            for connection in list(self._open):
                connection.check_timeout(now)

    async def aclose(self) -> None:
        if self._watchdog is not None:
            self._watchdog.cancel()
        for connection in list(self._open):
            connection.close()
        self._idle.clear()
        # A TLS close waits for the peer's close_notify: give the closes a moment to finish
        # (connection_lost leaves _open), then drop what is left, so no socket outlives the pool.
        deadline = time.perf_counter() + 0.5
        while self._open and time.perf_counter() < deadline:
            await asyncio.sleep(0.01)
        for connection in list(self._open):
            if connection.transport is not None:
                connection.transport.abort()


@dataclass(frozen=True, slots=True)
class _PreparedRequest:
    """A request as FastTransport writes it: built once, sent any number of times."""

    request: httpx.Request
    key: tuple[str, str, int]
    payload: bytes
    read_timeout: float | None
    connect_timeout: float | None
    head_only: bool


class _StaleConnection(Exception):
    """A reused keep-alive connection closed before any byte of the response."""


_HEAD, _LENGTH, _CHUNK_SIZE, _CHUNK_DATA, _CHUNK_END, _TRAILERS, _UNTIL_CLOSE, _DONE = range(8)
_MAX_HEAD_BYTES = 64 * 1024
_PAUSE_BYTES = 1024 * 1024


class _H1Connection(asyncio.Protocol):
    """One HTTP/1.1 connection: parses a response head and its body framing."""

    def __init__(self, pool: FastTransport) -> None:
        self.pool = pool
        self.key: tuple[str, str, int] = ("", "", 0)
        self.transport: Any = None
        self.loop = asyncio.get_running_loop()
        self.state = _DONE
        self.raw = b""
        self.pieces: list[bytes] = []
        self.arrivals: list[float] = []  # perf_counter() when each piece was read from the socket
        self.arrival = 0.0  # of the data being parsed now
        self.buffered = 0
        self.paused = False
        self.waiter: asyncio.Future[None] | None = None
        self.error: Exception | None = None
        self.closed = False
        self.received_any = False
        self.reused = False
        self.keep_alive = True
        self.remaining = 0
        self.head: tuple[int, bytes, list[tuple[bytes, bytes]]] | None = None
        self.request: httpx.Request | None = None
        self.read_timeout: float | None = None
        self.last_activity = 0.0
        self.head_only = False

    # protocol callbacks
    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.arrival = time.perf_counter()
        self.last_activity = self.loop.time()
        self.received_any = True
        try:
            self._feed(data)
        except httpx.RemoteProtocolError as exc:
            self._fail(exc)
            self.transport.close()

    def eof_received(self) -> bool:
        return False  # close our side too

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.pool._open.discard(self)
        if self.state == _UNTIL_CLOSE:
            self.state = _DONE
            self.keep_alive = False
            self._wake()
        elif self.state != _DONE and self.error is None:
            if self.state == _HEAD and self.reused and not self.received_any:
                self._fail(_StaleConnection())
            elif exc is not None:
                self._fail(httpx.ReadError(f"connection lost: {exc}", request=self.request))
            else:
                self._fail(httpx.RemoteProtocolError(
                    "peer closed connection without sending complete message body", request=self.request))
        self._wake()

    # used by the transport and the body stream
    def usable(self) -> bool:
        return not self.closed and self.state == _DONE and self.error is None and not self.transport.is_closing()

    def reusable(self) -> bool:
        return self.keep_alive and self.usable() and not self.raw and not self.pieces

    def begin(self, request: httpx.Request, read_timeout: float | None, *, head_only: bool) -> None:
        self.reused = self.head is not None
        self.state = _HEAD
        self.request = request
        self.read_timeout = read_timeout
        self.head = None
        self.head_only = head_only
        self.received_any = False
        self.error = None
        self.last_activity = self.loop.time()

    async def read_head(self) -> tuple[int, bytes, list[tuple[bytes, bytes]]]:
        while self.head is None:
            if self.error is not None:
                raise self.error
            await self.wait()
        return self.head

    async def wait(self) -> None:
        self.waiter = self.loop.create_future()
        try:
            await self.waiter
        finally:
            self.waiter = None

    def take(self) -> tuple[list[bytes], list[float]]:
        """The pieces read so far and their arrival times."""
        pieces, arrivals = self.pieces, self.arrivals
        self.pieces, self.arrivals = [], []
        self.buffered = 0
        if self.paused and not self.closed:
            self.paused = False
            self.transport.resume_reading()
        return pieces, arrivals

    def check_timeout(self, now: float) -> None:
        if (self.waiter is not None and self.read_timeout is not None and self.error is None
                and now - self.last_activity > self.read_timeout):
            self._fail(httpx.ReadTimeout(f"no data for {self.read_timeout:g} s", request=self.request))
            self.transport.close()

    def close(self) -> None:
        self.keep_alive = False
        if self.transport is not None:
            self.transport.close()

    # internals
    def _wake(self) -> None:
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _fail(self, exc: Exception) -> None:
        if self.error is None:
            self.error = exc
        self._wake()

    def _emit(self, data: bytes) -> None:
        self.pieces.append(data)
        self.arrivals.append(self.arrival)
        self.buffered += len(data)
        if self.buffered > _PAUSE_BYTES and not self.paused:
            self.paused = True
            self.transport.pause_reading()

    def _feed(self, data: bytes) -> None:
        state = self.state
        if state == _CHUNK_DATA and not self.raw:  # the hot path: one whole chunk per read
            remaining = self.remaining
            size = len(data)
            if size < remaining:
                self.remaining = remaining - size
                self._emit(data)
                self._wake()
                return
        buffer = self.raw + data if self.raw else data
        position = 0
        end = len(buffer)
        emitted = False
        while position < end:
            if state == _CHUNK_DATA:
                take = min(self.remaining, end - position)
                self._emit(buffer[position:position + take] if take != end or position else buffer)
                emitted = True
                position += take
                self.remaining -= take
                if self.remaining == 0:
                    state = _CHUNK_END
            elif state == _CHUNK_END:
                if end - position < 2:
                    break
                if buffer[position:position + 2] != b"\r\n":
                    raise httpx.RemoteProtocolError("bad chunked encoding: missing CRLF after a chunk",
                                                    request=self.request)
                position += 2
                state = _CHUNK_SIZE
            elif state == _CHUNK_SIZE:
                line_end = buffer.find(b"\r\n", position)
                if line_end < 0:
                    if end - position > 1024:
                        raise httpx.RemoteProtocolError("bad chunked encoding: chunk size line too long",
                                                        request=self.request)
                    break
                try:
                    size = int(buffer[position:line_end].split(b";", 1)[0], 16)
                except ValueError:
                    raise httpx.RemoteProtocolError("bad chunked encoding: bad chunk size",
                                                    request=self.request) from None
                position = line_end + 2
                if size == 0:
                    state = _TRAILERS
                else:
                    self.remaining = size
                    state = _CHUNK_DATA
            elif state == _TRAILERS:
                line_end = buffer.find(b"\r\n", position)
                if line_end < 0:
                    break
                if line_end == position:  # the empty line that ends the message
                    state = _DONE
                position = line_end + 2
            elif state == _LENGTH:
                take = min(self.remaining, end - position)
                if take:
                    self._emit(buffer[position:position + take])
                    emitted = True
                position += take
                self.remaining -= take
                if self.remaining == 0:
                    state = _DONE
            elif state == _UNTIL_CLOSE:
                self._emit(buffer[position:])
                emitted = True
                position = end
            elif state == _HEAD:
                head_end = buffer.find(b"\r\n\r\n", position)
                if head_end < 0:
                    if end - position > _MAX_HEAD_BYTES:
                        raise httpx.RemoteProtocolError("response head too large", request=self.request)
                    break
                state = self._parse_head(buffer[position:head_end])
                position = head_end + 4
                emitted = True
            else:  # _DONE: bytes after the end of a response
                if self.request is not None:
                    self.keep_alive = False
                position = end
            if state == _DONE:
                emitted = True
        self.raw = buffer[position:] if position < end else b""
        self.state = state
        if emitted:
            self._wake()

    def _parse_head(self, head: bytes) -> int:
        lines = head.split(b"\r\n")
        status_line = lines[0].split(b" ", 2)
        if len(status_line) < 2 or not status_line[0].startswith(b"HTTP/1."):
            raise httpx.RemoteProtocolError(f"bad status line {lines[0][:80]!r}", request=self.request)
        try:
            status = int(status_line[1])
        except ValueError:
            raise httpx.RemoteProtocolError(f"bad status line {lines[0][:80]!r}", request=self.request) from None
        reason = status_line[2] if len(status_line) > 2 else b""
        headers: list[tuple[bytes, bytes]] = []
        length: int | None = None
        chunked = False
        keep_alive = status_line[0] == b"HTTP/1.1"
        for line in lines[1:]:
            name, sep, value = line.partition(b":")
            if not sep:
                raise httpx.RemoteProtocolError("bad header line", request=self.request)
            name = name.strip()
            value = value.strip()
            headers.append((name, value))
            lower = name.lower()
            if lower == b"content-length":
                try:
                    length = int(value)
                except ValueError:
                    raise httpx.RemoteProtocolError("bad content-length", request=self.request) from None
            elif lower == b"transfer-encoding":
                chunked = value.lower().endswith(b"chunked")
            elif lower == b"connection":
                if b"close" in value.lower():
                    keep_alive = False
                elif b"keep-alive" in value.lower():
                    keep_alive = True
        if 100 <= status < 200:
            return _HEAD  # an interim response: wait for the final one
        self.keep_alive = keep_alive
        self.head = (status, reason, headers)
        if self.head_only or status in (204, 304):
            return _DONE
        if chunked:
            return _CHUNK_SIZE
        if length is not None:
            self.remaining = length
            return _LENGTH if length else _DONE
        self.keep_alive = False
        return _UNTIL_CLOSE


class _H1Body(httpx.AsyncByteStream):
    """The body of one response; gives the connection back to the pool when read to the end.

    `arrival` is when the piece last yielded was read from the socket, and
    `finished_at` when the last byte was: the collector timestamps tokens with
    these (response.extensions["arrival_clock"]) rather than with the time its
    task got to run, which lags under load.
    """

    def __init__(self, connection: _H1Connection) -> None:
        self.connection = connection
        self.released = False
        self.arrival = 0.0
        self.finished_at = 0.0

    async def __aiter__(self) -> Any:
        connection = self.connection
        while True:
            if connection.pieces:
                pieces, arrivals = connection.take()
                for piece, arrival in zip(pieces, arrivals):
                    self.arrival = arrival
                    yield piece
                continue
            if connection.state == _DONE:
                break
            if connection.error is not None:
                raise connection.error
            await connection.wait()
        self.finished_at = connection.arrival
        self._release()

    def _release(self) -> None:
        if not self.released:
            self.released = True
            self.connection.pool._release(self.connection)

    async def aclose(self) -> None:
        if not self.released:
            self.released = True
            connection = self.connection
            if connection.state == _DONE and not connection.pieces:
                connection.pool._release(connection)
            else:
                connection.close()  # not read to the end: the connection cannot be reused


