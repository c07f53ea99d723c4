"""Conformance of FastTransport (scm_xl/collect/transport.py), the collector's own HTTP/1.1 client.

It stays because it measured far ahead of httpx's transport and of httpx-aiohttp
(benchmarks/results/transport.md); these tests are what it must keep doing. Real servers on
127.0.0.1 only: raw asyncio servers for exact bytes, a TLS server with a trustme certificate,
a forward proxy (the fallback to httpx's transport), and fakellm, a third-party
OpenAI-compatible server (FastAPI on uvicorn).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
import threading

import httpx
import pytest

from scm_xl.collect import CollectConfig, FastTransport, HttpxSender, open_senders, run_collection
from scm_xl.collect.send import FastSender
from support.servers import SSE_HEAD, collect, raw_server, read_request, requests_of, sse_chunk, token_event
from support.servers import fakellm  # noqa: F401  (the fixture)

SSE_BODY = b"".join(sse_chunk(token_event(f"w{i}")) for i in range(3)) + sse_chunk("data: [DONE]\n\n") + b"0\r\n\r\n"
SSE_TEXT = b"".join(token_event(f"w{i}").encode() for i in range(3)) + b"data: [DONE]\n\n"


async def fetch_all(base_url: str, count: int, *, transport: FastTransport | None = None) -> list[bytes]:
    """`count` POSTs one after another through FastTransport; their bodies."""
    async with httpx.AsyncClient(transport=transport or FastTransport()) as http:
        bodies = []
        for _ in range(count):
            response = await http.post(f"{base_url}/chat/completions", content=b"{}")
            bodies.append(response.content)
        return bodies


async def close_all(senders) -> None:
    for sender in senders:
        await sender.aclose()


def counting_server(answer: bytes, *, close_after: bool = False):
    """A raw_server handler answering every request with `answer`; counts connections and requests."""
    seen = {"connections": 0, "requests": 0}

    async def handle(reader, writer):
        seen["connections"] += 1
        while True:
            await read_request(reader)
            seen["requests"] += 1
            writer.write(answer)
            await writer.drain()
            if close_after:
                writer.close()
                return

    return handle, seen


# -- framing -------------------------------------------------------------------------------------


def test_chunked_framing_split_at_every_byte_boundary():
    """The response sent in two writes, split at every offset in turn (head, sizes, CRLFs, data,
    the last chunk, the trailer section), on one keep-alive connection."""
    response = SSE_HEAD + b"".join(sse_chunk(token_event(f"w{i}")) for i in range(2)) + b"0\r\nx-t: 1\r\n\r\n"
    splits = list(range(1, len(response)))

    async def split(reader, writer):
        writer.transport.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for at in splits:
            await read_request(reader)
            writer.write(response[:at])
            await writer.drain()
            await asyncio.sleep(0.002)  # a separate read on the client side
            writer.write(response[at:])
            await writer.drain()

    with raw_server(split) as base_url:
        bodies = asyncio.run(fetch_all(base_url, len(splits)))
    expected = b"".join(token_event(f"w{i}").encode() for i in range(2))
    assert [i for i, body in enumerate(bodies) if body != expected] == []


def test_chunked_framing_one_byte_at_a_time():
    async def dribble(reader, writer):
        writer.transport.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        await read_request(reader)
        for byte in SSE_HEAD + SSE_BODY:
            writer.write(bytes([byte]))
            await writer.drain()
            await asyncio.sleep(0)
        await reader.read()

    with raw_server(dribble) as base_url:
        assert asyncio.run(fetch_all(base_url, 1)) == [SSE_TEXT]


def test_bad_chunked_framing_is_a_protocol_error():
    async def bad(reader, writer):
        await read_request(reader)
        writer.write(SSE_HEAD + b"zz\r\nhello\r\n0\r\n\r\n")
        await writer.drain()
        await reader.read()

    with raw_server(bad) as base_url:
        with pytest.raises(httpx.RemoteProtocolError, match="bad chunk size"):
            asyncio.run(fetch_all(base_url, 1))


# -- connections ---------------------------------------------------------------------------------


def test_keep_alive_reuses_one_connection():
    handle, seen = counting_server(b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhello")
    with raw_server(handle) as base_url:
        assert asyncio.run(fetch_all(base_url, 5)) == [b"hello"] * 5
    assert seen == {"connections": 1, "requests": 5}


def test_stale_keep_alive_connection_is_replaced():
    """A server that closes every connection after one response, without saying so."""
    handle, seen = counting_server(b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhello", close_after=True)

    async def fetch(base_url: str) -> list[bytes]:
        async with httpx.AsyncClient(transport=FastTransport()) as http:
            texts = []
            for _ in range(3):
                texts.append((await http.post(f"{base_url}/x", content=b"{}")).content)
                await asyncio.sleep(0.05)  # let the close arrive: the next request must not fail
            return texts

    with raw_server(handle) as base_url:
        assert asyncio.run(fetch(base_url)) == [b"hello"] * 3
    assert seen == {"connections": 3, "requests": 3}


def test_connection_close_is_honoured():
    """`Connection: close`: the connection is not reused, even if the server leaves it open."""
    handle, seen = counting_server(b"HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 2\r\n\r\nok")
    with raw_server(handle) as base_url:
        assert asyncio.run(fetch_all(base_url, 3)) == [b"ok"] * 3
    assert seen == {"connections": 3, "requests": 3}


def test_http_1_0_server_body_until_close():
    """An HTTP/1.0 answer with no length: the body runs to the close; no reuse."""
    async def old(reader, writer):
        await read_request(reader)
        writer.write(b"HTTP/1.0 200 OK\r\ncontent-type: text/event-stream\r\n\r\n" + SSE_TEXT)
        await writer.drain()
        writer.close()

    with raw_server(old) as base_url:
        assert asyncio.run(fetch_all(base_url, 2)) == [SSE_TEXT] * 2


def test_http_1_0_server_with_content_length_is_not_reused():
    handle, seen = counting_server(b"HTTP/1.0 200 OK\r\ncontent-length: 2\r\n\r\nok")
    with raw_server(handle) as base_url:
        assert asyncio.run(fetch_all(base_url, 3)) == [b"ok"] * 3
    assert seen["connections"] == 3


def test_interim_100_continue_is_skipped():
    handle, _ = counting_server(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
    with raw_server(handle) as base_url:
        assert asyncio.run(fetch_all(base_url, 2)) == [b"ok"] * 2


def test_collector_over_a_http_1_0_server(tmp_path):
    async def old(reader, writer):
        await read_request(reader)
        writer.write(b"HTTP/1.0 200 OK\r\ncontent-type: text/event-stream\r\n\r\n" + SSE_TEXT)
        await writer.drain()
        writer.close()

    with raw_server(old) as base_url:
        report = collect(tmp_path, base_url, concurrency=(2,), requests_per_slot=2)
    assert report.rows[0].ok_requests == 4 and report.rows[0].total_output_tokens == 12


# -- TLS -----------------------------------------------------------------------------------------


@contextlib.contextmanager
def tls_server(server_context: ssl.SSLContext):
    """An SSE server speaking TLS on 127.0.0.1, in a thread; yields its https base URL."""
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    holder: dict = {}

    async def handle(reader, writer):
        try:
            while True:
                await read_request(reader)
                writer.write(SSE_HEAD + sse_chunk(token_event("secure")) + sse_chunk("data: [DONE]\n\n")
                             + b"0\r\n\r\n")
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, ssl.SSLError):
            writer.close()

    async def serve():
        server = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=server_context)
        holder["port"], holder["stop"] = server.sockets[0].getsockname()[1], asyncio.Event()
        ready.set()
        async with server:
            await holder["stop"].wait()

    thread = threading.Thread(target=loop.run_until_complete, args=(serve(),), daemon=True)
    thread.start()
    ready.wait()
    try:
        yield f"https://127.0.0.1:{holder['port']}/v1"
    finally:
        loop.call_soon_threadsafe(holder["stop"].set)
        thread.join(5)
        loop.close()


@pytest.fixture(scope="module")
def certificate_authority():
    trustme = pytest.importorskip("trustme")
    authority = trustme.CA()
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    authority.issue_cert("127.0.0.1").configure_cert(server_context)
    client_context = ssl.create_default_context()
    authority.configure_trust(client_context)
    return server_context, client_context


def test_tls_with_a_self_signed_certificate(tmp_path, certificate_authority):
    server_context, client_context = certificate_authority
    with tls_server(server_context) as base_url:
        report = collect(tmp_path, base_url, concurrency=(2,), requests_per_slot=2, api_key="k",
                         ssl_context=client_context)
    assert report.rows[0].ok_requests == 4
    assert {r["completion_tokens"] for r in requests_of(tmp_path)} == {"1"}


def test_tls_with_an_untrusted_certificate_stops_at_the_pre_flight(tmp_path, certificate_authority):
    from scm_xl.collect import PreflightFailed

    server_context, _ = certificate_authority
    with tls_server(server_context) as base_url:
        with pytest.raises(PreflightFailed, match="cannot reach .*(certificate|SSL)"):
            collect(tmp_path, base_url, concurrency=(1,), api_key="k")  # the system's trust store
    assert list(tmp_path.iterdir()) == []


# -- proxies: httpx's transport takes over ------------------------------------------------------


def test_a_proxy_in_the_environment_selects_httpx_and_is_used(tmp_path, monkeypatch):
    """HTTP_PROXY points at a forward proxy on 127.0.0.1 that answers itself: the remote name
    in the base URL is never resolved, and nothing leaves loopback."""
    seen: list[bytes] = []

    async def proxy(reader, writer):
        while True:
            head = await read_request(reader)
            seen.append(head.split(b"\r\n", 1)[0])
            writer.write(SSE_HEAD + SSE_BODY)
            await writer.drain()

    with raw_server(proxy) as proxy_url:
        for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy", "HTTPS_PROXY", "https_proxy"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("HTTP_PROXY", proxy_url.removesuffix("/v1"))
        config = CollectConfig(base_url="http://api.scm-xl.invalid/v1", api_key="k", models=("m",),
                               results_path=tmp_path / "results.csv")
        senders = open_senders(config, 1)
        assert [type(s) for s in senders] == [HttpxSender]
        asyncio.run(close_all(senders))
        report = collect(tmp_path, "http://api.scm-xl.invalid/v1", api_key="k", concurrency=(1,), requests_per_slot=2)
    assert report.rows[0].ok_requests == 2
    # absolute-form request lines: the proxy was asked (pre-flight, then the two requests)
    assert seen == [b"POST http://api.scm-xl.invalid/v1/chat/completions HTTP/1.1"] * 3


def test_loopback_never_goes_through_a_proxy(monkeypatch):
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")
    config = CollectConfig(base_url="http://127.0.0.1:8000/v1")
    senders = open_senders(config, 1)
    assert [type(s) for s in senders] == [FastSender]
    asyncio.run(close_all(senders))


# -- a third-party OpenAI-compatible server ------------------------------------------------------


@pytest.mark.parametrize("transport", ["fast", "httpx"])
def test_a_third_party_openai_compatible_server(tmp_path, fakellm, transport):
    report = asyncio.run(run_collection(CollectConfig(
        base_url=fakellm, models=("gpt-4o-mini",), concurrency=(1, 3), max_tokens=(16,), requests_per_slot=2,
        results_path=tmp_path / "results.csv", transport=transport)))
    assert [row.ok_requests for row in report.rows] == [2, 6]
    records = requests_of(tmp_path)
    # five words, one chunk each, no usage: counted from chunks
    assert {(r["chunks"], r["completion_tokens"], r["tokens_counted"], r["finish_reason"]) for r in records} == {
        ("5", "5", "true", "stop")}
