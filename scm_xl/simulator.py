"""A built-in OpenAI-compatible endpoint: no GPU, no key, loopback by default.

Long because it is a whole server: the HTTP/1.1 protocol, the continuous-batching
scheduler with its roofline step times, and the fault injection the collector's tests need
live together, and splitting them would spread one event loop's state over modules.

It serves `/v1/chat/completions` (SSE streaming and plain JSON) and
`/v1/models`, on a raw asyncio protocol (a minimal HTTP/1.1 server with
keep-alive and chunked transfer encoding) so that one core sustains thousands
of streams and the simulator is never the bottleneck when the collector is
benchmarked.

Token timing, in order of precedence:

* **Fixed delays** (`ttft_s` and/or `itl_s` set): each request gets its first
  token `ttft_s` after it arrived and every further token `itl_s` later, on
  absolute deadlines, whatever the load. Used to check measurement accuracy.
* **Continuous batching** (the default): one global decode loop. Each step
  emits one token to every active sequence and lasts (`SimConfig.step_s`)

      step_base_s + step_per_seq_s * active_sequences
        + step_per_ctx_token_s * sum over the active sequences of (prompt_tokens + tokens produced so far)
        + prefill_s_per_token * sum over the requests joining in this step of prompt_tokens

  A joining request is active in the step it joins (its prefill runs in that step
  and yields its first token), so the step that produces a sequence's k-th token
  counts its context as prompt_tokens + k - 1: the KV cache a decode step reads
  grows with the prompt, with every token produced and with the batch. The sum of
  contexts is kept as a running total, so a step costs O(1) to time whatever the
  batch. Prompt tokens are estimated as message characters / `chars_per_token`.
  `max_seqs` (0: unlimited) caps the sequences decoding at once, like a server's
  KV-cache slots: further requests wait first in, first out, join in arrival order
  as slots free up (a slot freed at the end of a step is taken in the next one),
  and their TTFT includes the wait. In a closed-loop load test this makes the
  throughput knee at concurrency = max_seqs.
* **Zero delay** (all step costs 0, e.g. `SimConfig.zero_delay()`): the same
  loop with no sleeping, one token per chunk as fast as the core allows.

One stream alone (concurrency 1, prompt P tokens, L tokens, b = step_base_s +
step_per_seq_s, c = step_per_ctx_token_s, p = prefill_s_per_token) therefore sees
TTFT = b + (p + c) P and the gap before token k (2 <= k <= L) = b + c (P + k - 1):
a mean ITL of b + c (P + L / 2) (`SimConfig.expected_stream`).

A sequence ends at `max_tokens` (finish_reason "length") unless an EOS is
sampled with probability `eos_prob` per token after `min_tokens` (finish_reason
"stop"); `ignore_eos` turns EOS off. Faults: `max_concurrency` (beyond it: 429
with Retry-After), `error_rate` (500 before any token), `stall_prob`/`stall_s`
(one pause mid-stream), `truncate_prob` (the stream ends cleanly at the HTTP
level but without a finish chunk or `[DONE]`). `seed` makes sampling
reproducible for a given arrival order.

The server measures its own truth, since event-loop timers fire up to about a
millisecond off and a loaded core adds its own queueing: `GET /sim/stats`
returns the TTFT (from when the request's last byte was read) and inter-token
gaps it actually produced, `GET /sim/requests` the same per request (the last
100,000), both on `time.perf_counter()` (CLOCK_MONOTONIC, comparable across
processes on Linux); `POST /sim/reset` clears them. The stats also give
`max_active` (most requests in flight: decoding or waiting), `max_decoding` (most
sequences in one decode step), `max_waiting` (most requests left waiting for a slot
after a step took its joiners; 0 without `max_seqs`), and right now `decoding` and
`queued` (received, not yet decoding).

Library use: `SimServer(config)` with `await start()` -> (host, port) and
`await stop()` inside a running loop, or `with running_simulator(config) as
base_url:` to run one in a background thread.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import json
import math
import os
import random
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator, TypedDict

from scm_xl.errors import UsageError
from scm_xl.rules import DEFAULT_MODEL, RATE_LIMIT_WINDOW_S

LOOPBACK = "127.0.0.1"

# Tokens the simulator "generates": one per chunk, cycled.
_WORDS = (" The", " quick", " brown", " fox", " jumps", " over", " the", " lazy", " dog", ".")
_TOKEN_SUFFIXES = tuple(b'"delta":{"content":' + json.dumps(word).encode() + b'},"finish_reason":null}]}\n\n'
                        for word in _WORDS)

_MAX_HEADER_BYTES = 64 * 1024
_MAX_BODY_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True, kw_only=True)
class SimConfig:
    """How the simulated endpoint behaves. All times are in seconds."""

    model_name: str = DEFAULT_MODEL
    host: str = LOOPBACK
    port: int = 0
    # Continuous-batching decode loop (a roofline can derive these: `roofline_timing`).
    step_base_s: float = 0.008
    step_per_seq_s: float = 0.0002
    prefill_s_per_token: float = 0.00005
    step_per_ctx_token_s: float = 0.0  # per step, per context token of every active sequence
    max_seqs: int = 0  # sequences decoding at once (KV slots); 0: unlimited. Decode loop only.
    chars_per_token: float = 4.0
    default_max_tokens: int = 256
    eos_prob: float = 0.0
    # Fixed-delay mode: when either is set, timing ignores the decode loop.
    ttft_s: float | None = None
    itl_s: float | None = None
    # Admission and faults.
    max_concurrency: int = 0  # 0: unlimited
    retry_after_s: float = 1.0
    rpm: int = 0  # requests per minute (a provider's rate limit, `RateLimiter`); 0: unlimited
    tpm: int = 0  # tokens per minute, counted as prompt + max_tokens at admission; 0: unlimited
    error_rate: float = 0.0
    stall_prob: float = 0.0
    stall_s: float = 1.0
    truncate_prob: float = 0.0
    seed: int | None = None
    usage: bool = True  # send usage when asked; False simulates a server that never does
    strict_model: bool = False  # 404 for a model other than model_name

    def __post_init__(self) -> None:
        for name in ("step_base_s", "step_per_seq_s", "prefill_s_per_token", "step_per_ctx_token_s",
                     "retry_after_s", "stall_s"):
            if getattr(self, name) < 0:
                raise UsageError(f"{name} must be >= 0, got {getattr(self, name)}")
        for name in ("ttft_s", "itl_s"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise UsageError(f"{name} must be >= 0, got {value}")
        for name in ("eos_prob", "error_rate", "stall_prob", "truncate_prob"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise UsageError(f"{name} must be between 0 and 1, got {value}")
        if self.chars_per_token <= 0:
            raise UsageError(f"chars_per_token must be > 0, got {self.chars_per_token}")
        if self.default_max_tokens < 1:
            raise UsageError(f"default_max_tokens must be >= 1, got {self.default_max_tokens}")
        for name in ("max_concurrency", "max_seqs", "rpm", "tpm"):
            if getattr(self, name) < 0:
                raise UsageError(f"{name} must be >= 0, got {getattr(self, name)}")
        if not 0 <= self.port <= 65535:
            raise UsageError(f"port must be between 0 and 65535, got {self.port}")

    @classmethod
    def zero_delay(cls, **overrides: Any) -> SimConfig:
        """A config that emits tokens as fast as possible (for client-overhead benchmarks)."""
        values: dict[str, Any] = {"step_base_s": 0.0, "step_per_seq_s": 0.0, "prefill_s_per_token": 0.0,
                                  "step_per_ctx_token_s": 0.0}
        values.update(overrides)
        return cls(**values)

    @property
    def fixed_delay(self) -> bool:
        return self.ttft_s is not None or self.itl_s is not None

    def step_s(self, sequences: int, context_tokens: int = 0, prefill_tokens: int = 0) -> float:
        """One decode step of the batching loop, in seconds: `sequences` active (joiners
        included), `context_tokens` their prompt + produced tokens summed, `prefill_tokens`
        the prompt tokens of those joining in this step."""
        step = self.step_base_s + self.step_per_seq_s * sequences
        if context_tokens and self.step_per_ctx_token_s:
            step += self.step_per_ctx_token_s * context_tokens
        if prefill_tokens and self.prefill_s_per_token:
            step += self.prefill_s_per_token * prefill_tokens
        return step

    def expected_stream(self, prompt_tokens: int, max_tokens: int) -> dict[str, float]:
        """What one stream alone (concurrency 1) should see, in seconds, from the step costs.

        The first token ends the step the request joins in: one decode step with the
        prompt as context plus its prefill, ttft = b + (p + c) P (b = step_base_s +
        step_per_seq_s, c = step_per_ctx_token_s, p = prefill_s_per_token, P =
        prompt_tokens). Token k (2 <= k <= L = max_tokens) comes one step later, a step
        with context P + k - 1: gap b + c (P + k - 1). `itl_s` is the mean of those L - 1
        gaps, b + c (P + L / 2) (for L = 1 the gap a second token would have, b + c (P + 1));
        total = ttft + (L - 1) itl_s. `tps` = max_tokens / total, the per-stream TPS net of
        network and client time; `ttft_share` = ttft / total. Fixed delays: ttft_s, itl_s."""
        if self.fixed_delay:
            ttft, itl = self.ttft_s or 0.0, self.itl_s or 0.0
        else:
            step = self.step_base_s + self.step_per_seq_s
            ctx = self.step_per_ctx_token_s
            ttft = step + (self.prefill_s_per_token + ctx) * prompt_tokens
            itl = step + ctx * (prompt_tokens + (max_tokens / 2 if max_tokens > 1 else 1))
        total = ttft + (max_tokens - 1) * itl
        return {"ttft_s": ttft, "itl_s": itl, "total_s": total,
                "tps": max_tokens / total if total > 0 else math.inf,
                "ttft_share": ttft / total if total > 0 else 0.0}

    def prompt_tokens_for(self, text: str) -> int:
        """The prompt tokens the simulator counts for a one-message prompt."""
        return max(1, math.ceil(len(text) / self.chars_per_token))


@dataclass
class SimStats:
    """What the simulator actually did (its own clock: time.perf_counter())."""

    requests: int = 0
    completed: int = 0
    rejected_429: int = 0
    errors_500: int = 0
    truncated: int = 0
    tokens: int = 0
    ttft_sum_s: float = 0.0
    ttft_count: int = 0
    itl_span_sum_s: float = 0.0  # sum over sequences of (last token - first token)
    itl_gaps: int = 0  # sum over sequences of (tokens - 1)
    max_itl_s: float = 0.0
    max_active: int = 0  # requests in flight (decoding or waiting for a slot)
    max_decoding: int = 0  # sequences in one decode step
    max_waiting: int = 0  # requests left waiting for a slot after a step took its joiners
    first_request_at: float | None = None
    last_byte_at: float | None = None

    def as_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["mean_ttft_s"] = self.ttft_sum_s / self.ttft_count if self.ttft_count else None
        data["mean_itl_s"] = self.itl_span_sum_s / self.itl_gaps if self.itl_gaps else None
        data["clock_now"] = time.perf_counter()
        return data




class RateLimiter:
    """A provider's per-minute limits on requests and tokens over a sliding window, answering as
    OpenAI does: every response carries x-ratelimit-limit/-remaining/-reset for requests and
    tokens; a request over a limit gets HTTP 429 with Retry-After (whole seconds until the window
    admits it). Tokens are counted as prompt + max_tokens when the request is admitted."""

    def __init__(self, rpm: int, tpm: int, window_s: float = RATE_LIMIT_WINDOW_S) -> None:
        self.rpm, self.tpm, self.window_s = rpm, tpm, window_s
        self._admitted: collections.deque[tuple[float, int]] = collections.deque()  # (when, tokens)
        self._tokens = 0

    def admit(self, now: float, tokens: int) -> tuple[bool, dict[str, str], str]:
        """(admitted, the headers to send, why not)."""
        window = self._admitted
        while window and window[0][0] <= now - self.window_s:
            self._tokens -= window.popleft()[1]
        why = ""
        wait = 0.0
        if self.rpm and len(window) >= self.rpm:
            why = f"rate limit reached: {self.rpm} requests per minute"
            wait = window[len(window) - self.rpm][0] + self.window_s - now
        elif self.tpm and tokens > self.tpm:
            why = f"request too large: {tokens} tokens (prompt + max_tokens) over the limit of {self.tpm} per minute"
            wait = self.window_s
        elif self.tpm and self._tokens + tokens > self.tpm:
            why = f"rate limit reached: {self.tpm} tokens per minute"
            freed, needed = 0, self._tokens + tokens - self.tpm
            for when, spent in window:
                freed += spent
                if freed >= needed:
                    wait = when + self.window_s - now
                    break
        if not why:
            window.append((now, tokens))
            self._tokens += tokens
        newest = window[-1][0] if window else now
        reset = f"{max(0.0, newest + self.window_s - now):.3f}s"
        headers: dict[str, str] = {}
        if self.rpm:
            headers.update({"x-ratelimit-limit-requests": str(self.rpm),
                            "x-ratelimit-remaining-requests": str(max(0, self.rpm - len(window))),
                            "x-ratelimit-reset-requests": reset})
        if self.tpm:
            headers.update({"x-ratelimit-limit-tokens": str(self.tpm),
                            "x-ratelimit-remaining-tokens": str(max(0, self.tpm - self._tokens)),
                            "x-ratelimit-reset-tokens": reset})
        if why:
            headers["retry-after"] = str(max(1, math.ceil(wait)))
        return not why, headers, why


class _Sequence:
    """One request being generated."""

    __slots__ = (
        "server", "connection", "transport", "stream", "include_usage", "prompt_tokens", "max_tokens",
        "min_tokens", "eos_prob", "produced", "finish_reason", "stall_at", "stall_until", "truncate_at",
        "chunks", "closed", "ident", "created", "model", "received_at", "first_at", "last_at", "max_gap",
        "headers",
    )

    def __init__(self, server: SimServer, connection: _HTTPConnection, *, stream: bool, include_usage: bool,
                 prompt_tokens: int, max_tokens: int, min_tokens: int, eos_prob: float, model: str,
                 stall_at: int, truncate_at: int, received_at: float) -> None:
        self.server = server
        self.connection = connection
        self.transport = connection.transport
        self.stream = stream
        self.include_usage = include_usage
        self.prompt_tokens = prompt_tokens
        self.max_tokens = max_tokens
        self.min_tokens = min_tokens
        self.eos_prob = eos_prob
        self.produced = 0
        self.finish_reason: str | None = None
        self.stall_at = stall_at  # 0: never
        self.stall_until = 0.0
        self.truncate_at = truncate_at  # 0: never
        self.closed = False
        server._ids += 1
        self.ident = f"chatcmpl-sim{server._ids}"
        self.created = int(time.time())
        self.model = model
        self.received_at = received_at
        self.first_at = 0.0
        self.last_at = 0.0
        self.max_gap = 0.0
        self.headers: dict[str, str] = {}  # sent with the response (the rate limiter's)
        self.chunks: tuple[bytes, ...] = ()
        if stream:
            prefix = b"data: " + self._chunk_prefix()
            self.chunks = tuple(_http_chunk(prefix + suffix) for suffix in _TOKEN_SUFFIXES)

    def _chunk_prefix(self) -> bytes:
        return (
            '{"id":"%s","object":"chat.completion.chunk","created":%d,"model":%s,"choices":[{"index":0,'
            % (self.ident, self.created, json.dumps(self.model))
        ).encode()

    def start_stream(self) -> None:
        extra = "".join(f"{name}: {value}\r\n" for name, value in self.headers.items()).encode()
        head = (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n"
                b"transfer-encoding: chunked\r\n" + extra + b"\r\n")
        role = _http_chunk(b"data: " + self._chunk_prefix()
                           + b'"delta":{"role":"assistant","content":""},"finish_reason":null}]}\n\n')
        self.transport.write(head + role)

    def emit(self, now: float) -> bool:
        """Produce one token at `now`; False once the sequence is finished."""
        connection = self.connection
        if connection.closed:
            self._close(now, aborted=True)
            return False
        if connection.paused:
            return True  # the reader is behind (flow control): it gets no token this step
        produced = self.produced + 1
        self.produced = produced
        if self.stream:
            self.transport.write(self.chunks[(produced - 1) % len(_WORDS)])
        if produced == 1:
            self.first_at = now
        else:
            gap = now - self.last_at
            if gap > self.max_gap:
                self.max_gap = gap
        self.last_at = now
        if self.truncate_at and produced >= self.truncate_at:
            self.transport.write(b"0\r\n\r\n")  # a clean HTTP end, but no finish chunk or [DONE]
            self.server._stats.truncated += 1
            self._close(now, aborted=False)
            return False
        if produced >= self.max_tokens:
            self.finish_reason = "length"
        elif self.eos_prob and produced >= self.min_tokens and self.server._rng.random() < self.eos_prob:
            self.finish_reason = "stop"
        else:
            return True
        self._finish(now)
        return False

    def _finish(self, now: float) -> None:
        assert self.finish_reason is not None  # the caller has just set it
        usage = {"prompt_tokens": self.prompt_tokens, "completion_tokens": self.produced,
                 "total_tokens": self.prompt_tokens + self.produced}
        if self.stream:
            prefix = self._chunk_prefix()
            body = b"data: " + prefix + b'"delta":{},"finish_reason":"' + self.finish_reason.encode() + b'"}]}\n\n'
            if self.include_usage:
                body += b"data: " + json.dumps({
                    "id": self.ident, "object": "chat.completion.chunk", "created": self.created,
                    "model": self.model, "choices": [], "usage": usage}, separators=(",", ":")).encode() + b"\n\n"
            body += b"data: [DONE]\n\n"
            self.transport.write(_http_chunk(body) + b"0\r\n\r\n")
        else:
            text = "".join(_WORDS[i % len(_WORDS)] for i in range(self.produced))
            payload: dict[str, Any] = {
                "id": self.ident, "object": "chat.completion", "created": self.created, "model": self.model,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                             "finish_reason": self.finish_reason}],
            }
            if self.server.config.usage:
                payload["usage"] = usage
            self.transport.write(_json_response(200, payload, self.headers))
        self._close(now, aborted=False)

    def _close(self, now: float, *, aborted: bool) -> None:
        if self.closed:
            return
        self.closed = True
        server = self.server
        server._in_flight -= 1
        stats = server._stats
        server._recent.append((self.received_at, self.first_at, self.last_at, self.produced, not aborted))
        if self.produced:
            stats.tokens += self.produced
            stats.ttft_sum_s += self.first_at - self.received_at
            stats.ttft_count += 1
            if self.produced > 1:
                stats.itl_span_sum_s += self.last_at - self.first_at
                stats.itl_gaps += self.produced - 1
                if self.max_gap > stats.max_itl_s:
                    stats.max_itl_s = self.max_gap
        if not aborted:
            stats.completed += 1
            stats.last_byte_at = now
            self.connection.response_done()


class _HTTPConnection(asyncio.Protocol):
    """One client connection: minimal HTTP/1.1 (keep-alive, Content-Length request bodies).

    A request counts as received when the data that completed it was read
    from the socket, so the simulator's own TTFT includes its queueing.
    """

    def __init__(self, server: SimServer) -> None:
        self.server = server
        self.transport: Any = None
        self.buffer = b""
        self.busy = False  # a response is in progress
        self.keep_alive = True
        self.closed = False
        self.paused = False
        self.resumed: asyncio.Future[None] | None = None

    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        self.server._connections.add(self)

    def data_received(self, data: bytes) -> None:
        arrived = time.perf_counter()
        self.buffer = self.buffer + data if self.buffer else data
        if not self.busy:
            self._next_request(arrived)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.server._connections.discard(self)
        self.resume_writing()

    def pause_writing(self) -> None:
        self.paused = True

    def resume_writing(self) -> None:
        self.paused = False
        if self.resumed is not None and not self.resumed.done():
            self.resumed.set_result(None)

    async def writable(self) -> None:
        """Wait while the client reads slower than we write."""
        while self.paused and not self.closed:
            self.resumed = asyncio.get_running_loop().create_future()
            await self.resumed

    def reply(self, response: bytes) -> None:
        """Send a whole response and go on to the next request."""
        self.transport.write(response)
        self.response_done()

    def fail(self, response: bytes) -> None:
        """Send an error response and close (the request could not be framed)."""
        self.transport.write(response)
        self.keep_alive = False
        self.response_done()

    def response_done(self) -> None:
        self.busy = False
        if not self.keep_alive:
            self.transport.close()
        elif self.buffer and not self.closed:
            self._next_request(time.perf_counter())  # a pipelined request

    def _next_request(self, arrived: float) -> None:
        buffer = self.buffer
        head_end = buffer.find(b"\r\n\r\n")
        if head_end < 0:
            if len(buffer) > _MAX_HEADER_BYTES:
                self.fail(_json_error(431, "request header too large"))
            return
        try:
            method, target, headers = _parse_head(buffer[:head_end + 4])
        except ValueError as exc:
            self.fail(_json_error(400, str(exc)))
            return
        if headers.get("transfer-encoding", "identity").lower() != "identity":
            self.fail(_json_error(411, "chunked request bodies are not supported"))
            return
        try:
            length = int(headers.get("content-length", "0"))
        except ValueError:
            self.fail(_json_error(400, "bad content-length"))
            return
        if length < 0 or length > _MAX_BODY_BYTES:
            self.fail(_json_error(413, "request body too large"))
            return
        end = head_end + 4 + length
        if len(buffer) < end:
            return  # the body is still coming
        self.buffer = buffer[end:]
        self.keep_alive = headers.get("connection", "").lower() != "close"
        self.busy = True
        self.server._dispatch(self, method, target, buffer[head_end + 4:end], arrived)


class SimServer:
    """The simulated endpoint. `await start()` binds and returns (host, port)."""

    def __init__(self, config: SimConfig | None = None) -> None:
        self.config = config or SimConfig()
        self._rng = random.Random(self.config.seed)
        self._server: asyncio.AbstractServer | None = None
        self._decode_task: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._connections: set[_HTTPConnection] = set()
        self._active: list[_Sequence] = []
        self._waiting: collections.deque[_Sequence] = collections.deque()  # received, not yet decoding (FIFO)
        self._context_tokens = 0  # sum over self._active of prompt_tokens + produced
        self._wake: asyncio.Event | None = None
        self._in_flight = 0
        self._ids = 0
        self._limiter = RateLimiter(self.config.rpm, self.config.tpm) if self.config.rpm or self.config.tpm else None
        self._stats = SimStats()
        # (received_at, first_token_at, last_token_at, tokens, completed) of recent requests
        self._recent: collections.deque[tuple[float, float, float, int, bool]] = collections.deque(maxlen=100_000)
        self.host: str | None = None
        self.port: int | None = None

    def __repr__(self) -> str:
        return f"SimServer(model={self.config.model_name!r}, address={self.host}:{self.port})"

    @property
    def base_url(self) -> str:
        if self.port is None:
            raise RuntimeError("the simulator is not started")
        return f"http://{self.host}:{self.port}/v1"

    def stats(self) -> dict[str, Any]:
        data = self._stats.as_dict()
        data["decoding"] = len(self._active)
        data["queued"] = len(self._waiting)
        return data

    def recent_requests(self) -> list[dict[str, Any]]:
        """Per-request truth of the last (up to 100,000) finished requests, oldest first."""
        return [{"received_at": r[0], "first_token_at": r[1] if r[3] else None, "last_token_at": r[2] if r[3] else None,
                 "tokens": r[3], "completed": r[4]} for r in self._recent]

    def reset_stats(self) -> None:
        self._stats = SimStats()
        self._recent.clear()

    async def start(self) -> tuple[str, int]:
        self._wake = asyncio.Event()
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: _HTTPConnection(self), self.config.host, self.config.port, backlog=4096, reuse_address=True)
        sockname = self._server.sockets[0].getsockname()
        self.host, self.port = sockname[0], sockname[1]
        if not self.config.fixed_delay:
            self._decode_task = asyncio.create_task(self._decode_loop())
        return self.host, self.port

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for connection in list(self._connections):
            connection.transport.abort()
        tasks = list(self._tasks)
        if self._decode_task is not None:
            tasks.append(self._decode_task)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None

    async def serve_forever(self, on_ready: Callable[[str], None] | None = None) -> None:
        """Start, report the base URL to `on_ready`, and serve until cancelled."""
        await self.start()
        if on_ready is not None:
            on_ready(self.base_url)
        try:
            await asyncio.Event().wait()
        finally:
            await self.stop()

    # -- decode loop -------------------------------------------------------

    async def _decode_loop(self) -> None:
        config = self.config
        loop = asyncio.get_running_loop()
        clock = loop.time
        perf = time.perf_counter
        assert self._wake is not None
        waiting = self._waiting
        slots = config.max_seqs
        deadline = clock()
        while True:
            if not self._active and not waiting:
                self._wake.clear()
                await self._wake.wait()
                deadline = clock()
            active = self._active
            prefill_tokens = 0
            if waiting:
                # Join in arrival order while slots are free (all of them without max_seqs).
                free = len(waiting) if not slots else slots - len(active)
                while free > 0 and waiting:
                    seq = waiting.popleft()
                    if seq.connection.closed:  # the client left while waiting: it takes no slot
                        seq._close(perf(), aborted=True)
                        continue
                    active.append(seq)
                    prefill_tokens += seq.prompt_tokens
                    free -= 1
                self._context_tokens += prefill_tokens
                stats = self._stats
                if len(active) > stats.max_decoding:
                    stats.max_decoding = len(active)
                if len(waiting) > stats.max_waiting:
                    stats.max_waiting = len(waiting)
                if not active:
                    continue
            step = config.step_s(len(active), self._context_tokens, prefill_tokens)
            if step > 0:
                # Absolute deadlines: a step that woke late (event-loop timers fire up to about
                # a millisecond off) shortens the next sleep instead of adding its lateness to
                # every step, which would act as a fixed per-token cost and flatten the
                # difference between models. Only a loop more than a whole step behind (a
                # stalled process) restarts the schedule from now.
                deadline = next_deadline(deadline, clock(), step)
                delay = deadline - clock()
                await asyncio.sleep(delay if delay > 0 else 0)
            else:
                await asyncio.sleep(0)
            now = perf()
            still: list[_Sequence] = []
            context = self._context_tokens
            for seq in active:
                if seq.stall_at and seq.produced + 1 == seq.stall_at:
                    if not seq.stall_until:
                        seq.stall_until = now + config.stall_s
                    if now < seq.stall_until:
                        still.append(seq)
                        continue
                    seq.stall_at = 0
                before = seq.produced
                if seq.emit(now):
                    still.append(seq)
                    context += seq.produced - before  # 0 when its reader is behind
                else:
                    context -= seq.prompt_tokens + before  # it leaves the batch and frees its slot
            self._context_tokens = context
            self._active = still

    async def _run_fixed(self, seq: _Sequence) -> None:
        """Fixed-delay timing: first token ttft_s after the request arrived, then one per itl_s.

        Deadlines are absolute (from the arrival time), so lateness does not accumulate.
        """
        config = self.config
        ttft = config.ttft_s or 0.0
        itl = config.itl_s or 0.0
        start = seq.received_at
        perf = time.perf_counter
        index = 0
        while True:
            if seq.stall_at and index + 1 == seq.stall_at:
                start += config.stall_s
            delay = start + ttft + index * itl - perf()
            if delay > 0:
                await asyncio.sleep(delay)
            elif index % 64 == 63:
                await asyncio.sleep(0)  # zero delays: let other streams run
            if seq.connection.paused:
                await seq.connection.writable()
            if not seq.emit(perf()):
                return
            index += 1

    # -- HTTP ----------------------------------------------------------------

    def _dispatch(self, connection: _HTTPConnection, method: str, target: str, body: bytes,
                  received_at: float) -> None:
        path = target.split("?", 1)[0].rstrip("/")
        if path == "/v1/chat/completions":
            if method != "POST":
                connection.reply(_json_error(405, "use POST"))
            else:
                self._chat_completion(connection, body, received_at)
        elif path == "/v1/models":
            connection.reply(_json_response(200, {"object": "list", "data": [
                {"id": self.config.model_name, "object": "model", "created": 0, "owned_by": "scm-xl-sim"}]}))
        elif path == "/sim/stats":
            connection.reply(_json_response(200, self.stats()))
        elif path == "/sim/requests":
            connection.reply(_json_response(200, self.recent_requests()))
        elif path == "/sim/reset" and method == "POST":
            self.reset_stats()
            connection.reply(_json_response(200, {"ok": True}))
        elif path in ("/health", "/v1/health"):
            connection.reply(_json_response(200, {"ok": True}))
        else:
            connection.reply(_json_error(404, f"no route for {method} {path}"))

    def _chat_completion(self, connection: _HTTPConnection, body: bytes, received_at: float) -> None:
        config = self.config
        try:
            request = json.loads(body)
            if not isinstance(request, dict):
                raise ValueError("the body must be a JSON object")
            messages = request.get("messages")
            if not isinstance(messages, list) or not messages:
                raise ValueError("'messages' must be a non-empty list")
            max_tokens = request.get("max_tokens", request.get("max_completion_tokens"))
            max_tokens = config.default_max_tokens if max_tokens is None else _positive_int(max_tokens, "max_tokens")
            min_tokens = request.get("min_tokens") or 0
            min_tokens = min(_positive_int(min_tokens, "min_tokens", allow_zero=True), max_tokens)
            stream = bool(request.get("stream", False))
            options = request.get("stream_options") or {}
            include_usage = bool(options.get("include_usage", False)) and config.usage if stream else False
            model = request.get("model") or config.model_name
            if not isinstance(model, str):
                raise ValueError("'model' must be a string")
        except (ValueError, TypeError, AttributeError) as exc:
            connection.reply(_json_error(400, f"bad request: {exc}"))
            return
        stats = self._stats
        stats.requests += 1
        if stats.first_request_at is None:
            stats.first_request_at = received_at
        if config.strict_model and model != config.model_name:
            connection.reply(_json_error(404, f"the model {model!r} does not exist", code="model_not_found"))
            return
        if config.max_concurrency and self._in_flight >= config.max_concurrency:
            stats.rejected_429 += 1
            connection.reply(_json_error(429, "too many concurrent requests", code="rate_limit_exceeded",
                                         headers={"retry-after": f"{config.retry_after_s:g}"}))
            return
        limit_headers: dict[str, str] = {}
        if self._limiter is not None:
            prompt_tokens = self._prompt_tokens(messages)
            admitted, limit_headers, why = self._limiter.admit(time.monotonic(), prompt_tokens + max_tokens)
            if not admitted:
                stats.rejected_429 += 1
                connection.reply(_json_error(429, why, code="rate_limit_exceeded", headers=limit_headers))
                return
        rng = self._rng
        if config.error_rate and rng.random() < config.error_rate:
            stats.errors_500 += 1
            connection.reply(_json_error(500, "simulated internal error", code="internal_error"))
            return
        stall_at = rng.randint(1, max_tokens) if config.stall_prob and rng.random() < config.stall_prob else 0
        truncate_at = 0
        if stream and config.truncate_prob and rng.random() < config.truncate_prob:
            truncate_at = rng.randint(1, max(1, max_tokens - 1))
        eos_prob = 0.0 if request.get("ignore_eos") else config.eos_prob
        seq = _Sequence(self, connection, stream=stream, include_usage=include_usage,
                        prompt_tokens=self._prompt_tokens(messages), max_tokens=max_tokens,
                        min_tokens=min_tokens, eos_prob=eos_prob, model=model, stall_at=stall_at,
                        truncate_at=truncate_at, received_at=received_at)
        seq.headers = limit_headers
        self._in_flight += 1
        if self._in_flight > stats.max_active:
            stats.max_active = self._in_flight
        if stream:
            seq.start_stream()
        if config.fixed_delay:
            task = asyncio.get_running_loop().create_task(self._run_fixed(seq))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        else:
            self._waiting.append(seq)
            assert self._wake is not None
            self._wake.set()

    def _prompt_tokens(self, messages: list[Any]) -> int:
        chars = 0
        for message in messages:
            content = message.get("content") if isinstance(message, dict) else None
            if isinstance(content, str):
                chars += len(content)
            elif isinstance(content, list):
                chars += sum(len(part.get("text", "")) for part in content if isinstance(part, dict))
        return max(1, math.ceil(chars / self.config.chars_per_token))


# -- helpers ---------------------------------------------------------------


def next_deadline(deadline: float, now: float, step: float) -> float:
    """When the decode step that starts now should end: one step after the last deadline,
    so lateness does not accumulate; from now when more than a whole step behind."""
    if now - deadline > step:
        deadline = now
    return deadline + step

_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed", 411: "Length Required",
            413: "Payload Too Large", 429: "Too Many Requests", 431: "Request Header Fields Too Large",
            500: "Internal Server Error"}


def _http_chunk(data: bytes) -> bytes:
    return b"%x\r\n%b\r\n" % (len(data), data)


def _json_response(status: int, payload: Any, headers: dict[str, str] | None = None) -> bytes:
    body = json.dumps(payload).encode()
    extra = "".join(f"{name}: {value}\r\n" for name, value in (headers or {}).items())
    head = (f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\n{extra}\r\n")
    return head.encode() + body


def _json_error(status: int, message: str, *, code: str | None = None,
                headers: dict[str, str] | None = None) -> bytes:
    error = {"message": message, "type": "error", "code": code or str(status)}
    return _json_response(status, {"error": error}, headers)


def _parse_head(head: bytes) -> tuple[str, str, dict[str, str]]:
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise ValueError("bad request line")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if not line:
            continue
        name, sep, value = line.partition(":")
        if not sep:
            raise ValueError("bad header line")
        headers[name.strip().lower()] = value.strip()
    return parts[0], parts[1], headers


def _positive_int(value: Any, name: str, *, allow_zero: bool = False) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < (0 if allow_zero else 1):
        raise ValueError(f"'{name}' must be a {'non-negative' if allow_zero else 'positive'} integer")
    return value


def new_event_loop() -> asyncio.AbstractEventLoop:
    """An event loop: uvloop's when it is installed (faster), else asyncio's.

    SCM_XL_EVENT_LOOP=asyncio forces asyncio's own loop.
    """
    if os.environ.get("SCM_XL_EVENT_LOOP", "").lower() != "asyncio":
        try:
            import uvloop
        except ImportError:
            pass
        else:
            return uvloop.new_event_loop()
    return asyncio.new_event_loop()


@contextlib.contextmanager
def running_simulator(config: SimConfig | None = None, **overrides: Any) -> Iterator[str]:
    """Run a simulator in a background thread; yields its base URL (http://127.0.0.1:PORT/v1).

    `overrides` replace fields of `config` (or of the default SimConfig).
    """
    config = dataclasses.replace(config or SimConfig(), **overrides)
    server = SimServer(config)
    loop = new_event_loop()
    ready = threading.Event()
    failure: list[BaseException] = []
    stop_event: list[asyncio.Event] = []

    async def main() -> None:
        stop = asyncio.Event()
        stop_event.append(stop)
        try:
            await server.start()
        except BaseException as exc:  # report to the caller's thread
            failure.append(exc)
            ready.set()
            return
        ready.set()
        try:
            await stop.wait()
        finally:
            await server.stop()

    thread = threading.Thread(target=loop.run_until_complete, args=(main(),), name="scm-xl-sim", daemon=True)
    thread.start()
    ready.wait()
    if failure:
        thread.join()
        loop.close()
        raise failure[0]
    try:
        yield server.base_url
    finally:
        loop.call_soon_threadsafe(stop_event[0].set)
        thread.join(timeout=10)
        if not thread.is_alive():
            loop.close()


class RooflineTiming(TypedDict):
    """The SimConfig fields that `roofline_timing` derives (SimConfig(**timing) takes them)."""

    step_base_s: float
    step_per_seq_s: float
    step_per_ctx_token_s: float
    prefill_s_per_token: float
    max_seqs: int


def roofline_timing(model: str, gpu: str, *, efficiency: float = 1.0, context: int = 1024) -> RooflineTiming:
    """SimConfig step times and slot limit for a catalog model on a catalog GPU (one GPU,
    bf16) at an efficiency (scm_xl.roofline.simulator_params):

    * step_base_s: the weights' read time per decode step;
    * step_per_ctx_token_s: the KV-cache read of one context token (KV bytes per token /
      effective bandwidth), charged per step for every token of every active sequence's
      prompt + output so far, so the simulator's KV read follows each sequence's own length;
    * step_per_seq_s: what a sequence costs per step besides that read: tensor-parallel
      communication, 0 on one GPU. (The roofline's per-sequence KV read at `context` is
      step_per_ctx_token_s x context; charging it here too would count the same bytes twice.)
    * prefill_s_per_token: the prefill bound of a `context`-token prompt spread over its tokens;
    * max_seqs: the sequences whose KV cache fits at `context` tokens beside the weights
      (floor((memory - weights) / (KV bytes per token x context)), at least 1; 0, unlimited,
      when the model's KV shape is unknown).

    With every sequence at `context` tokens the simulator's step equals the memory-bound
    decode step of `scm_xl.roofline.analyze` at that context.
    """
    from scm_xl.roofline import Deployment, load_catalog, simulator_params

    catalog = load_catalog()
    deployment = Deployment(model=catalog.find_model(model), gpu=catalog.find_gpu(gpu), context=context,
                            bandwidth_efficiency=efficiency, compute_efficiency=efficiency)
    params = simulator_params(deployment)
    return {"step_base_s": float(params["base_step_seconds"] or 0.0),
            "step_per_seq_s": float(params["per_sequence_comm_seconds"] or 0.0),
            "step_per_ctx_token_s": float(params["per_context_token_seconds"] or 0.0),
            "prefill_s_per_token": float(params["prefill_seconds_per_token"] or 0.0),
            "max_seqs": int(params["max_seqs"] or 0)}
