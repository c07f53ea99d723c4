"""The pre-flight: one short streaming request per model before the matrix, through the same
senders and request path as the matrix, so that a wrong endpoint, key, model or a server that
does not stream stops the run with a clear message (exit 2) before anything is written.

What stops the run: the endpoint cannot be reached (connection refused, DNS, TLS, a connect
timeout); HTTP 401/403 (naming where the key came from, never the key); HTTP 404, or a 4xx
that names the model (unknown model or wrong path); any other 4xx but 408, 409 and 429 (the
server refuses the request itself); a JSON answer to a streaming request. What does not: 5xx,
429, read timeouts, truncated or malformed streams: the endpoint is there and the matrix will
record those, as it records every fault.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Sequence

from scm_xl.collect.config import API_KEY_ENV_VARS
from scm_xl.collect.matrix import MatrixPoint
from scm_xl.collect.records import RequestRecord
from scm_xl.errors import UsageError

if TYPE_CHECKING:
    from scm_xl.collect.run import _Collector

PREFLIGHT_MAX_TOKENS = 4


class PreflightFailed(UsageError):
    """The pre-flight request showed that the matrix cannot run (exit 2, nothing written)."""


async def preflight(collector: _Collector, points: Sequence[MatrixPoint]) -> list[RequestRecord]:
    """Send one short request per model of `points`; raise PreflightFailed on a problem the
    matrix would only repeat. Returns the pre-flight records (not written anywhere)."""
    first: dict[str, MatrixPoint] = {}
    for point in points:
        first.setdefault(point.model, point)
    sender = collector.senders[0]
    records: list[RequestRecord] = []
    for model, point in first.items():
        request = collector.request(point, max_tokens=min(point.max_tokens, PREFLIGHT_MAX_TOKENS))
        prepared = await sender.prepare(request)
        record = RequestRecord(point=point, slot=0, seq=0, warmup=True, scheduled_at=time.perf_counter())
        await collector._request(sender, prepared, record)
        records.append(record)
        problem = diagnose(record, url=collector.url, model=model, key_source=collector.config.api_key_source,
                           key_sent=collector.config.api_key is not None)
        if problem is not None:
            raise PreflightFailed(f"pre-flight request failed: {problem} Nothing was written.")
    return records


def diagnose(record: RequestRecord, *, url: str, model: str, key_source: str | None, key_sent: bool) -> str | None:
    """What is wrong, in words, or None when the matrix may run."""
    status, error_class, said = record.http_status, record.error_class, record.error
    if error_class == "connect_error" or error_class == "timeout" and "Connect" in said:
        return f"cannot reach {url} ({error_class}: {said}). Is the server running, and --base-url right?"
    if status in (401, 403):
        if not key_sent:
            where = f"no API key was sent (set {' or '.join(API_KEY_ENV_VARS)}, or pass --api-key-file)"
        else:
            where = f"the API key came from {_source(key_source)}"
        return f"HTTP {status}: the server refused the API key; {where}. Server said: {_end(said)}"
    if status == 404 or (status is not None and 400 <= status < 500 and "model" in said.lower()
                         and status not in (408, 409, 429)):
        return (f"HTTP {status} for model {model!r} at {url}: the model is unknown to this server, or the "
                f"base URL path is wrong (it usually ends in /v1). Server said: {_end(said)}")
    if status is not None and 400 <= status < 500 and status not in (408, 409, 429):
        return f"HTTP {status}: the server refused the request. Server said: {_end(said)}"
    if error_class == "not_streamed":
        return ("the server does not stream: it answered a streaming request (stream=true) with one JSON "
                "body; the collector needs server-sent events to time tokens.")
    return None


def _end(text: str) -> str:
    return text if text.endswith((".", "?", "!")) else text + "."


def _source(key_source: str | None) -> str:
    if key_source is None:
        return "the configuration"
    return f"${key_source}" if key_source in API_KEY_ENV_VARS else f"the file {key_source}"
