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

import asyncio
import time
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any, Protocol, Sequence

from scm_xl.collect.config import API_KEY_ENV_VARS
from scm_xl.collect.matrix import MatrixPoint
from scm_xl.collect.prompts import (
    TOLERANCE, Calibration, LevelText, Messages, Nonces, PromptGroup, UserPrompt, distinct_prompts, make_groups,
    synthetic_text, to_measure, user_messages, with_nonce, words_for_prefix,
)
from scm_xl.collect.records import RequestRecord
from scm_xl.errors import UsageError

if TYPE_CHECKING:
    import httpx

    from scm_xl.collect.config import CollectConfig
    from scm_xl.collect.send import Sender


class Collector(Protocol):
    """What the pre-flight and the prompt measurements need of the collector that runs the matrix
    (scm_xl.collect.run's): its senders, a request for a point, and sending one. A protocol, so
    this module needs nothing of run.py, which imports it."""

    config: CollectConfig
    senders: list[Sender]
    url: str

    def request(self, point: MatrixPoint, max_tokens: int | None = None,
                messages: Any = None) -> httpx.Request: ...

    async def send(self, sender: Sender, prepared: Any, record: RequestRecord) -> None: ...

PREFLIGHT_MAX_TOKENS = 4
PROBE_WORDS = (16, 160)  # the two calibration probes' filler words
_MEASURE_IN_FLIGHT = 8  # --prompts measurements sent at once


class PreflightFailed(UsageError):
    """The pre-flight request showed that the matrix cannot run (exit 2, nothing written)."""


async def preflight(collector: Collector, points: Sequence[MatrixPoint]) -> list[RequestRecord]:
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
        await collector.send(sender, prepared, record)
        records.append(record)
        problem = diagnose(record, url=collector.url, model=model, key_source=collector.config.api_key_source,
                           key_sent=collector.config.api_key is not None)
        if problem is not None:
            raise PreflightFailed(f"pre-flight request failed: {problem} Nothing was written.")
    return records


def diagnose(record: RequestRecord, *, url: str, model: str, key_source: str | None, key_sent: bool,
             model_checked: bool = False) -> str | None:
    """What is wrong, in words, or None when the matrix may run. With `model_checked` (an earlier
    request of the model succeeded) a 4xx is the server refusing this request, not the model:
    vLLM, say, names "This model's maximum context length" when a prompt is too long."""
    status, error_class, said = record.http_status, record.error_class, record.error
    if error_class == "connect_error" or error_class == "timeout" and "Connect" in said:
        return f"cannot reach {url} ({error_class}: {said}). Is the server running, and --base-url right?"
    if status in (401, 403):
        if not key_sent:
            where = f"no API key was sent (set {' or '.join(API_KEY_ENV_VARS)}, or pass --api-key-file)"
        else:
            where = f"the API key came from {_source(key_source)}"
        return f"HTTP {status}: the server refused the API key; {where}. Server said: {_end(said)}"
    if not model_checked and (status == 404 or (status is not None and 400 <= status < 500
                                                 and "model" in said.lower() and status not in (408, 409, 429))):
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


# -- prompt levels --------------------------------------------------------------------------


async def calibrate_levels(collector: Collector, points: Sequence[MatrixPoint], nonces: Nonces,
                           shared_prefix: int = 0) -> tuple[dict[str, Calibration], list[str]]:
    """Per model: the filler words that make each of its points' prompt levels, as the server counts
    them; and warnings for levels still more than 5% off after the one adjustment."""
    levels: dict[str, set[int]] = {}
    first: dict[str, MatrixPoint] = {}
    for point in points:
        if point.prompt_level is not None:
            levels.setdefault(point.model, set()).add(point.prompt_level)
            first.setdefault(point.model, point)
    calibrations: dict[str, Calibration] = {}
    warnings: list[str] = []
    for model, point in first.items():
        def count(words: int, prefix_words: int, what: str, check: bool = False) -> Awaitable[int]:
            text = synthetic_text(nonces.next(), words, prefix_words)
            return _count_tokens(collector, point, user_messages(text), what, check=check)  # noqa: B023 (awaited at once)

        short, long = PROBE_WORDS
        at_short = await count(short, 0, "", check=True)
        at_long = await count(long, 0, f"the {long}-word calibration prompt")
        rate = (at_long - at_short) / (long - short)
        if rate <= 0:
            raise PreflightFailed(f"pre-flight: the server's usage.prompt_tokens did not grow with the prompt "
                                  f"({at_short} tokens for {short} words, {at_long} for {long}), so prompt "
                                  f"lengths cannot be measured on it. Nothing was written.")
        calibration = Calibration(model=model, overhead=at_short - rate * short, tokens_per_word=rate,
                                  prefix_words=words_for_prefix(shared_prefix, rate))
        for level in sorted(levels[model]):
            what = f"prompt level {level} tokens (model {model!r})"
            words = calibration.words_for(level)
            if words - calibration.prefix_words < 1:
                shortest = round(calibration.overhead + rate * (calibration.prefix_words + 1))
                parts = "the chat template, the nonce and the shared prefix" if calibration.prefix_words \
                    else "the chat template and the nonce"
                raise PreflightFailed(f"pre-flight: {what} is shorter than the shortest prompt scm-xl can make "
                                      f"there (about {shortest} tokens: {parts}); choose a larger level. "
                                      "Nothing was written.")
            measured = await count(words, calibration.prefix_words, what)
            if abs(measured - level) > TOLERANCE * level:
                words = max(calibration.prefix_words + 1, words + round((level - measured) / rate))
                measured = await count(words, calibration.prefix_words, what)
            found = LevelText(level=level, words=words, measured=measured)
            calibration.levels[level] = found
            if not found.hit:
                warnings.append(f"Prompt level {level} for {model}: the server counts {measured} tokens "
                                f"({found.off_by:+.0%}) after one adjustment; results.csv's prompt_tokens "
                                "has the measured length.")
        calibrations[model] = calibration
    return calibrations, warnings


async def measure_prompts(collector: Collector, point: MatrixPoint, prompts: Sequence[UserPrompt], levels: int,
                          seed: int, nonces: Nonces, where: str) -> list[PromptGroup]:
    """Measure the file's distinct prompts (or a seeded sample) on `point`'s model and group them
    into at most `levels` levels (see prompts.make_groups)."""
    chosen = to_measure(distinct_prompts(prompts), seed)
    measured: dict[str, int] = {}

    def what(prompt: UserPrompt) -> str:
        return f"the prompt at {where}:{prompt.line}"

    first, rest = chosen[0], chosen[1:]
    measured[first.key] = await _count_tokens(collector, point, with_nonce(list(first.messages), nonces.next()),
                                              what(first), check=True)
    gate = asyncio.Semaphore(_MEASURE_IN_FLIGHT)
    failed: list[tuple[int, PreflightFailed]] = []

    async def one(prompt: UserPrompt) -> None:
        async with gate:
            if failed:
                return  # the run stops: send no more
            try:
                measured[prompt.key] = await _count_tokens(
                    collector, point, with_nonce(list(prompt.messages), nonces.next()), what(prompt))
            except PreflightFailed as exc:
                failed.append((prompt.line, exc))

    await asyncio.gather(*(one(prompt) for prompt in rest))
    if failed:
        raise min(failed, key=lambda item: item[0])[1]  # the first line that failed of those sent
    return make_groups(prompts, measured, levels)


async def _count_tokens(collector: Collector, point: MatrixPoint, messages: Messages, what: str, *,
                        check: bool = False) -> int:
    """The server's usage.prompt_tokens for `messages`. With `check`, the request is also the
    pre-flight check of endpoint, key and model (`diagnose`); else the model is known good, and a
    refusal is about `what` (a prompt too long for the context, say)."""
    request = collector.request(point, max_tokens=min(point.max_tokens, PREFLIGHT_MAX_TOKENS), messages=messages)
    sender = collector.senders[0]
    prepared = await sender.prepare(request)
    record = RequestRecord(point=point, slot=0, seq=0, warmup=True, scheduled_at=time.perf_counter())
    await collector.send(sender, prepared, record)
    config = collector.config
    named = f"{what}: " if what else ""
    problem = diagnose(record, url=collector.url, model=point.model, key_source=config.api_key_source,
                       key_sent=config.api_key is not None, model_checked=not check)
    if problem is not None:
        raise PreflightFailed(f"pre-flight request failed: {named}{problem} Nothing was written.")
    if not record.succeeded:
        raise PreflightFailed(f"pre-flight request failed: {named}{record.error_class}: {_end(record.error)} "
                              "Prompt levels need it to measure the prompt's length. Nothing was written.")
    if record.prompt_tokens is None:
        raise PreflightFailed(
            f"prompt levels need usage.prompt_tokens, and the server at {collector.url} sent no usage in its "
            "stream (asked with stream_options.include_usage): without the server's own count the prompt "
            "lengths cannot be measured (scm-xl assumes no tokenizer). Run with --prompt instead, or against "
            "a server that reports usage. Nothing was written.")
    return record.prompt_tokens
