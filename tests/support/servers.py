"""Servers on 127.0.0.1 for the collector's tests, and what the tests say to them.

`raw_server` runs a tiny asyncio server whose handler answers as the test likes (a stream,
a lie, a reset); the SSE helpers build what it sends, `read_request` reads what it gets,
`counting` counts it. `collect` and `run_cli` run the collector at it, in the library and
through `scm-xl collect`; `http_client` is a plain httpx client for talking to one. `fakellm` is
a third-party OpenAI-compatible server, as a fixture:
import it by name where it is used. Nothing here leaves loopback.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import shutil
import socket
import ssl
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

from scm_xl.cli import main
from scm_xl.collect import CollectConfig, open_senders, read_requests, run_collection
from scm_xl.results import ResultRow

SENTINEL_KEY = "sk-SENTINEL-0123456789abcdef"


@functools.cache
def _tls() -> ssl.SSLContext:
    return httpx.create_ssl_context()


def http_client(timeout: float) -> httpx.Client:
    """An httpx client for a test's server on 127.0.0.1: no proxy from the environment. The
    clients share one SSL context (as the collector's senders do): httpx builds one for every
    client otherwise, the system's certificates loaded each time (30 ms of CPU), though these
    speak plain HTTP."""
    return httpx.Client(trust_env=False, timeout=timeout, verify=_tls())


NO_KEYS = {"SCM_XL_API_KEY": None, "SILICONFLOW_API_KEY": None, "OPENAI_API_KEY": None}


def collect(tmp_path: Path, base_url: str, *, senders=open_senders, check_first=True, **overrides):
    values = dict(models=("m",), concurrency=(1, 2), max_tokens=(4,), requests_per_slot=2,
                  results_path=tmp_path / "results.csv", base_url=base_url)
    values.update(overrides)
    return asyncio.run(run_collection(CollectConfig(**values), senders=senders, check_first=check_first))


def requests_of(tmp_path: Path, *, warmup: bool = False) -> list[dict[str, str]]:
    rows = read_requests(tmp_path / "requests.csv")
    return [row for row in rows if (row["warmup"] == "true") == warmup]


def run_cli(args: list[str], env: dict | None = None):
    return CliRunner().invoke(main, ["collect", *args], env={**NO_KEYS, **(env or {})})


@contextlib.contextmanager
def raw_server(handle):
    """A tiny asyncio server in a thread, `handle(reader, writer)` per connection; yields its base URL."""
    loop = asyncio.new_event_loop()
    started = threading.Event()
    holder: dict = {}
    handlers: set[asyncio.Task] = set()

    async def tracked(reader, writer):
        handlers.add(asyncio.current_task())
        try:
            await handle(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.transport.abort()

    async def serve() -> None:
        server = await asyncio.start_server(tracked, "127.0.0.1", 0)
        holder["port"] = server.sockets[0].getsockname()[1]
        holder["stop"] = asyncio.Event()
        started.set()
        async with server:
            await holder["stop"].wait()
            for task in handlers:
                task.cancel()
            await asyncio.gather(*handlers, return_exceptions=True)

    thread = threading.Thread(target=loop.run_until_complete, args=(serve(),), daemon=True)
    thread.start()
    started.wait()
    try:
        yield f"http://127.0.0.1:{holder['port']}/v1"
    finally:
        loop.call_soon_threadsafe(holder["stop"].set)
        thread.join(5)
        loop.run_until_complete(asyncio.sleep(0))  # let aborted transports finish closing
        loop.close()


async def read_request(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                   if line.lower().startswith(b"content-length")), 0)
    await reader.readexactly(length)
    return head


SSE_HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"


def sse_chunk(text: str) -> bytes:
    data = text.encode()
    return b"%x\r\n%b\r\n" % (len(data), data)


def token_event(word: str = "hi") -> str:
    return "data: " + json.dumps({"choices": [{"index": 0, "delta": {"content": word}, "finish_reason": None}]}) + "\n\n"


STREAM = SSE_HEAD + sse_chunk(token_event("a")) + sse_chunk(token_event("b")) + sse_chunk("data: [DONE]\n\n") \
    + b"0\r\n\r\n"


def counting(answer: bytes = STREAM):
    """A raw_server handler answering every request with `answer`; `heads` lists what it received."""
    heads: list[bytes] = []

    async def handle(reader, writer):
        while True:
            heads.append(await read_request(reader))
            writer.write(answer)
            await writer.drain()

    return handle, heads


def answer(status: int, body: dict, content_type: str = "application/json") -> bytes:
    data = json.dumps(body).encode()
    return (f"HTTP/1.1 {status} X\r\ncontent-type: {content_type}\r\ncontent-length: {len(data)}\r\n\r\n"
            .encode() + data)


def wide_row(exp_id: str, model: str, **values) -> ResultRow:
    """A results row of wide figures (a fast endpoint at high concurrency, slow tails), for the summary table."""
    base = dict(concurrency=1024, requests_per_slot=10, total_requests=10240, max_tokens=16384,
                total_time_s=81.0, total_output_tokens=10_000_000, ok_requests=10000, failed_requests=200,
                rate_limited_requests=40, latency_p50_s=123.456, latency_p99_s=4567.891, ttft_p50_s=12.3456,
                ttft_p99_s=98.7654, mean_itl_s=1.23456)
    base.update(values)
    return ResultRow(exp_id=exp_id, model=model, **base)


@pytest.fixture(scope="module")
def fakellm(tmp_path_factory):
    """fakellm (FastAPI on uvicorn) serving OpenAI's chat completions on 127.0.0.1."""
    executable = shutil.which("fakellm") or str(Path(sys.executable).with_name("fakellm"))
    if not os.path.exists(executable):
        pytest.skip("fakellm is not installed (pip install -e '.[test]')")
    folder = tmp_path_factory.mktemp("fakellm")
    config = folder / "fakellm.yaml"
    config.write_text('rules:\n  - respond:\n      content: "one two three four five"\n', encoding="utf-8")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen([executable, "serve", "--host", "127.0.0.1", "--port", str(port), "--config",
                                str(config)], cwd=folder, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
                break
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"fakellm did not start: {process.stderr.read() if process.stderr else ''}")
            time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        process.terminate()
        process.wait(10)
        if process.stderr is not None:
            process.stderr.close()
