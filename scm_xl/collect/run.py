"""The run loop: closed-loop slots, per-request timing, SSE parsing, and one results row per experiment.

`run_collection(config)` checks everything it can before any traffic (output folders and
files, names, an earlier run's files for `--resume`), sends a pre-flight request
(collect/preflight.py), then runs the matrix models x concurrency x max_tokens x repeats
(x prompt levels: then the pre-flight measures the prompts first, and every request sends
its own prompt, see collect/prompts.py) (or a plan's run list, or one shard of it). In each experiment, `concurrency` slots each
send `requests_per_slot` streaming requests one after another. A request is *due* when the
previous request of its slot ended (or when the experiment starts), and its clock starts
then, not when it was sent, so client-side queueing shows in TTFT and latency instead of
hiding.

Per request: scheduled and send times, TTFT (first content chunk), end-to-end latency (to
the last byte), mean and max inter-chunk latency, prompt and completion tokens (from
`usage`, else counted chunks, marked `tokens_counted`), HTTP status and an error class;
with prompt levels also the prompt's nonce, and for --prompts its file line and the seed.
Every request ends in exactly one status:

    ok            a complete stream ([DONE] or a finish_reason), never throttled
    rate_limited  got at least one HTTP 429 (whether or not a retry then succeeded)
    failed        anything else: error_class is http_4xx, http_5xx (or another
                  http_Nxx), timeout, connect_error, connection_error,
                  truncated_stream, malformed_sse, line_too_long (an SSE line
                  over `max_line_bytes`), stream_error (an error event),
                  not_streamed (a JSON answer), bad_usage (a complete stream
                  whose usage.completion_tokens it cannot hold, see
                  records.usage_problem: its tokens are the counted chunks) or
                  client_error

HTTP 429 is retried after Retry-After (capped at `max_retry_after_s`), at most
`max_retries` times. Every request goes through one `Sender` (collect/send.py).

Library use:

    config = CollectConfig(base_url="http://127.0.0.1:8000/v1", concurrency=(1, 4),
                           max_tokens=(64,), results_path=Path("out/results.csv"))
    report = await run_collection(config, console=rich.console.Console())
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import math
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any, AsyncIterable, cast

import httpx

from scm_xl import stats
from scm_xl.collect.config import API_KEY_ENV_VARS, CollectConfig, is_loopback_url, matrix_points, whole_matrix
from scm_xl.collect.matrix import MatrixPoint, empty_shard, matrix_id
from scm_xl.collect.preflight import calibrate_levels, measure_prompts, preflight
from scm_xl.collect.progress import BarSlot, CollectionReport, ProgressBar, RunCounters, summary_table
from scm_xl.collect.ratelimit import RateLimitSeen, read_headers as read_ratelimit_headers
from scm_xl.collect.prompts import FilePrompts, Messages, Nonces, SyntheticPrompts, load_prompts
from scm_xl.collect.records import (
    RequestRecord, all_failed, append_requests, check_outputs, read_requests, usage_problem,
)
from scm_xl.collect.send import Sender, SenderFactory, open_senders
from scm_xl.errors import ScmXlError, UsageError
from scm_xl.results import REASONING_NOTE, ResultRow, append_result, format_shard

_ERROR_TEXT_LIMIT = 300
_ERROR_BODY_LIMIT = 4096


class _StreamError(Exception):
    def __init__(self, error_class: str, message: str) -> None:
        super().__init__(message)
        self.error_class = error_class


# -- the report -----------------------------------------------------------------------


# -- the engine -----------------------------------------------------------------------


class _Collector:
    def __init__(self, config: CollectConfig, senders: list[Sender], progress: RunCounters) -> None:
        self.config = config
        self.senders = senders
        self.progress = progress
        self.url = config.base_url.rstrip("/") + "/chat/completions"
        self.secret = config.api_key
        headers = {"content-type": "application/json", "accept": "text/event-stream"}
        if config.api_key is not None:
            headers["authorization"] = f"Bearer {config.api_key.reveal()}"
        self.headers = headers
        self.timeout = httpx.Timeout(config.timeout_s, pool=None)
        # With prompt levels, what each request sends (set after the pre-flight measured them);
        # None: every request sends config.prompt.
        self.prompts: SyntheticPrompts | FilePrompts | None = None
        # Recorded in every results row: which matrix, and which shard of it (results._check_shards).
        self.matrix_id = matrix_id(whole_matrix(config))
        self.shard = format_shard(*config.shard) if config.shard is not None else None

    def request(self, point: MatrixPoint, max_tokens: int | None = None,
                messages: Messages | None = None) -> httpx.Request:
        """The experiment's request (one object: it is only read when sent); `messages` replace
        the plain prompt."""
        return httpx.Request("POST", self.url, content=self.body(point, max_tokens, messages), headers=self.headers,
                             extensions={"timeout": self.timeout.as_dict()})

    def body(self, point: MatrixPoint, max_tokens: int | None = None, messages: Messages | None = None) -> bytes:
        config = self.config
        payload: dict[str, Any] = {
            "model": point.model,
            "messages": [{"role": "user", "content": config.prompt}] if messages is None else messages,
            "max_tokens": point.max_tokens if max_tokens is None else max_tokens,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if config.ignore_eos:
            payload["ignore_eos"] = True
        if config.min_tokens is not None:
            payload["min_tokens"] = min(config.min_tokens, point.max_tokens)
        if config.temperature is not None:
            payload["temperature"] = config.temperature
        return json.dumps(payload, separators=(",", ":")).encode()

    async def run_experiment(self, point: MatrixPoint) -> tuple[ResultRow, list[RequestRecord], float]:
        # Built and prepared once per experiment, per sender, before the clock starts: when a
        # request falls due only the socket write is left to do. With prompt levels every
        # request has its own prompt: all are prepared before the clock starts (_run_slots).
        prepared: list[Any] | None = None
        if self.prompts is None:
            request = self.request(point)
            prepared = [await sender.prepare(request) for sender in self.senders]
        config = self.config
        warm: list[RequestRecord] = []
        if config.warmup:
            slots = min(config.warmup, point.concurrency)
            per_slot = [config.warmup // slots + (1 if s < config.warmup % slots else 0) for s in range(slots)]
            await self._run_slots(point, prepared, per_slot, warm, warmup=True)
        origin = time.perf_counter()
        measured: list[RequestRecord] = []
        await self._run_slots(point, prepared, [config.requests_per_slot] * point.concurrency, measured,
                              warmup=False)
        finished = time.perf_counter()
        row = self._result_row(point, measured, fallback_wall=finished - origin)
        return row, warm + measured, origin

    async def _run_slots(self, point: MatrixPoint, prepared: list[Any] | None, per_slot: list[int],
                         records: list[RequestRecord], *, warmup: bool) -> None:
        # Everything that can be done before the start instant is: the records and the slot tasks
        # exist before `start` is read, so that with many slots due at once the clock of the last
        # one does not also run through the creation of the others.
        senders = self.senders
        progress = self.progress
        start = 0.0
        planned = [[RequestRecord(point=point, slot=slot, seq=seq, warmup=warmup, scheduled_at=0.0)
                    for seq in range(count)] for slot, count in enumerate(per_slot)]
        if prepared is None:
            ready = await self._prepare_each(point, planned, warmup=warmup)
        else:
            ready = [[prepared[slot % len(senders)]] * count for slot, count in enumerate(per_slot)]

        async def slot_worker(slot: int, slot_records: list[RequestRecord]) -> None:
            sender = senders[slot % len(senders)]
            slot_ready = ready[slot]
            due = start  # read when the task first runs, after `start` was set
            for record, request in zip(slot_records, slot_ready):
                record.scheduled_at = due
                await self.send(sender, request, record)
                records.append(record)
                if not warmup:
                    progress.requests += 1
                    progress.tokens += record.completion_tokens
                due = record.ended_at or time.perf_counter()

        async with asyncio.TaskGroup() as group:
            for slot, slot_records in enumerate(planned):
                group.create_task(slot_worker(slot, slot_records))
            start = time.perf_counter()  # no await since the tasks were made: none has run yet

    async def _prepare_each(self, point: MatrixPoint, planned: list[list[RequestRecord]], *,
                            warmup: bool) -> list[list[Any]]:
        """Every planned request's own prompt (recorded on its record), prepared by its slot's sender."""
        assert self.prompts is not None
        choices = iter(self.prompts.choose(point, sum(map(len, planned)), "warmup" if warmup else "measured"))
        ready: list[list[Any]] = []
        for slot, slot_records in enumerate(planned):
            sender = self.senders[slot % len(self.senders)]
            slot_ready = []
            for record in slot_records:
                choice = next(choices)
                record.prompt_nonce, record.prompt_line, record.prompt_seed = choice.nonce, choice.line, self.prompts.seed
                slot_ready.append(await sender.prepare(self.request(point, messages=choice.messages)))
            ready.append(slot_ready)
        return ready

    async def send(self, sender: Sender, prepared: Any, record: RequestRecord) -> None:
        """Send one prepared request through `sender`, retrying as the config says, into `record`."""
        config = self.config
        try:
            while True:
                if config.request_timeout_s is None:
                    retry_after = await self._attempt(sender, prepared, record)
                else:
                    async with asyncio.timeout(config.request_timeout_s):
                        retry_after = await self._attempt(sender, prepared, record)
                if retry_after is None:
                    break
                if record.retries >= config.max_retries:
                    record.error_class = "rate_limited"
                    record.error = self._text(f"HTTP 429 after {record.retries} retries")
                    break
                record.retries += 1
                record.retry_wait_s += retry_after
                await asyncio.sleep(retry_after)
        except _StreamError as exc:
            record.error_class = exc.error_class
            record.error = self._text(str(exc))
        except (httpx.TimeoutException, TimeoutError) as exc:
            record.error_class = "timeout"
            record.error = self._text(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)
        except httpx.ConnectError as exc:
            record.error_class = "connect_error"
            record.error = self._text(f"{type(exc).__name__}: {exc}")
        except (httpx.TransportError, OSError) as exc:
            record.error_class = "connection_error"
            record.error = self._text(f"{type(exc).__name__}: {exc}")
        except Exception as exc:  # noqa: BLE001 - a failure of one request must not end the run
            record.error_class = "client_error"
            record.error = self._text(f"{type(exc).__name__}: {exc}")
        if record.ended_at is None:
            record.ended_at = time.perf_counter()
        if record.sent_at is None:
            record.sent_at = record.ended_at

    async def _attempt(self, sender: Sender, prepared: Any, record: RequestRecord) -> float | None:
        """One HTTP attempt; returns the wait before a retry after a 429, else None."""
        if record.sent_at is None:
            record.sent_at = time.perf_counter()
        response = await sender.send(prepared)
        try:
            record.http_status = response.status_code
            seen = read_ratelimit_headers(response.headers)
            if seen:
                record.ratelimit = seen
            if response.status_code == 429:
                record.rate_limited_hits += 1
                await _read_limited(response)
                return _retry_delay(response.headers.get("retry-after"), record.retries,
                                    self.config.max_retry_after_s)
            if response.status_code != 200:
                detail = (await _read_limited(response)).decode("utf-8", "replace").strip()
                record.error_class = f"http_{response.status_code // 100}xx"
                record.error = self._text(f"HTTP {response.status_code}: {detail}")
                record.ended_at = time.perf_counter()
                return None
            await self._read_stream(response, record)
        finally:
            await response.aclose()
        return None

    async def _read_stream(self, response: httpx.Response, record: RequestRecord) -> None:
        perf = time.perf_counter
        loads = json.loads
        max_line = self.config.max_line_bytes
        chunks = 0
        reasoning = 0  # of the chunks, those with reasoning_content only
        first = last = 0.0
        max_gap = 0.0
        done = False
        finish: str | None = None
        usage: Any = None
        pending = b""
        # The raw stream skips httpx's per-chunk bookkeeping; decode only when the body is encoded.
        iterator: AsyncIterable[bytes] = (response.aiter_bytes() if "content-encoding" in response.headers
                                          else cast(httpx.AsyncByteStream, response.stream))
        clock = response.extensions.get("arrival_clock")  # FastTransport: when bytes left the socket
        try:
            if "json" in response.headers.get("content-type", ""):
                detail = (await _read_limited(response)).decode("utf-8", "replace")
                raise _StreamError("not_streamed", f"the server answered JSON, not an event stream: {detail}")
            async for data in iterator:
                now = clock.arrival if clock is not None else perf()
                if pending:
                    data = pending + data
                lines = data.split(b"\n")
                pending = lines.pop()
                if len(pending) > max_line:
                    raise _StreamError("line_too_long", f"an SSE line exceeded {max_line} bytes")
                for line in lines:
                    if line[:5] != b"data:":
                        if len(line) > max_line:
                            raise _StreamError("line_too_long", f"an SSE line exceeded {max_line} bytes")
                        continue  # blank line, comment, event:, id:, retry:
                    if len(line) > max_line:
                        raise _StreamError("line_too_long", f"an SSE line exceeded {max_line} bytes")
                    payload = line[5:].strip()
                    if payload == b"[DONE]":
                        done = True
                        continue
                    try:
                        event = loads(payload)
                    except ValueError:
                        raise _StreamError("malformed_sse", f"SSE data is not JSON: {payload[:80]!r}") from None
                    if not isinstance(event, dict):
                        raise _StreamError("malformed_sse", f"SSE data is not a JSON object: {payload[:80]!r}")
                    choices = event.get("choices")
                    if choices:
                        choice = choices[0]
                        delta = choice.get("delta") or {}
                        if delta.get("content") or delta.get("reasoning_content"):
                            chunks += 1
                            if not delta.get("content"):
                                reasoning += 1
                            if chunks == 1:
                                first = now
                            elif now - last > max_gap:
                                max_gap = now - last
                            last = now
                        if choice.get("finish_reason"):
                            finish = choice["finish_reason"]
                    if event.get("usage"):
                        usage = event["usage"]
                    if event.get("error"):
                        raise _StreamError("stream_error", f"error event in stream: {json.dumps(event['error'])[:200]}")
            if pending.strip():
                raise _StreamError("truncated_stream", "the stream ended inside an SSE line")
            if not done and finish is None:
                raise _StreamError("truncated_stream", "the stream ended without a finish_reason or [DONE]")
            problem = self._usage_problem(usage, chunks, reasoning, record.point.max_tokens)
            if problem is not None:
                raise _StreamError("bad_usage", f"{problem}: its tokens are counted from the chunks")
            record.succeeded = True
        finally:
            record.ended_at = clock.finished_at if clock is not None and clock.finished_at else perf()
            record.chunks = chunks
            record.reasoning_chunks = reasoning
            if chunks:
                record.first_token_at = first
                record.last_token_at = last
                record.max_itl_s = max_gap if chunks > 1 else None
            record.finish_reason = finish
            completion = _usage_count(usage, "completion_tokens")
            if completion is not None and self._usage_problem(usage, chunks, reasoning,
                                                              record.point.max_tokens) is None:
                record.completion_tokens = completion
                prompt = _usage_count(usage, "prompt_tokens")
                record.prompt_tokens = prompt if prompt is not None and prompt >= 0 else None
            else:
                record.completion_tokens = chunks
                record.tokens_counted = True

    @staticmethod
    def _usage_problem(usage: Any, chunks: int, reasoning: int, max_tokens: int) -> str | None:
        """Why the stream's usage.completion_tokens cannot be true (records.usage_problem); None
        also when there is no count (the chunks are counted then, and the notes say so)."""
        completion = _usage_count(usage, "completion_tokens")
        if completion is None:
            return None
        return usage_problem(completion, chunks - reasoning, reasoning, max_tokens)

    def _text(self, message: str) -> str:
        message = " ".join(message.split())
        if self.secret is not None:
            message = self.secret.redact(message)
        return message[:_ERROR_TEXT_LIMIT]

    def _result_row(self, point: MatrixPoint, records: list[RequestRecord], *, fallback_wall: float) -> ResultRow:
        config = self.config
        sent = [r.sent_at for r in records if r.sent_at is not None]
        ended = [r.ended_at for r in records if r.ended_at is not None]
        wall = (max(ended) - min(sent)) if sent and ended else 0.0
        if wall <= 0:
            wall = max(fallback_wall, 1e-6)
        succeeded = [r for r in records if r.succeeded]
        latencies = stats.percentiles(r.latency_s for r in succeeded if r.latency_s is not None)
        ttfts = stats.percentiles(r.ttft_s for r in succeeded if r.ttft_s is not None)
        gaps = sum(r.chunks - 1 for r in succeeded if r.chunks > 1)
        mean_itl = sum(r.itl_span_s for r in succeeded if r.chunks > 1) / gaps if gaps else None
        prompt = stats.mean(r.prompt_tokens for r in succeeded if r.prompt_tokens is not None)
        ttft_mean = stats.mean(r.ttft_s for r in succeeded if r.ttft_s is not None)
        latency_mean = stats.mean(r.latency_s for r in succeeded if r.latency_s is not None)
        statuses = Counter(r.status for r in records)
        limits = RateLimitSeen()
        for r in sorted(records, key=lambda r: r.ended_at or 0.0):
            limits.add(r.ratelimit)
        return ResultRow(
            exp_id=point.exp_id, model=point.model, concurrency=point.concurrency,
            requests_per_slot=config.requests_per_slot, total_requests=len(records),
            max_tokens=point.max_tokens, total_time_s=wall,
            total_output_tokens=sum(r.completion_tokens for r in records), repeat=point.repeat,
            ok_requests=statuses["ok"], failed_requests=statuses["failed"],
            rate_limited_requests=statuses["rate_limited"],
            latency_p50_s=latencies[0] if latencies else None,
            latency_p95_s=latencies[1] if latencies else None,
            latency_p99_s=latencies[2] if latencies else None,
            ttft_p50_s=ttfts[0] if ttfts else None,
            ttft_p95_s=ttfts[1] if ttfts else None,
            ttft_p99_s=ttfts[2] if ttfts else None,
            mean_itl_s=mean_itl, prompt_tokens=None if prompt is None else round(prompt),
            prompt_level=point.prompt_level, ttft_mean_s=ttft_mean, latency_mean_s=latency_mean,
            gpu=config.gpu, notes=self._notes(point, records), matrix_id=self.matrix_id, shard=self.shard,
            **limits.columns(),
        )

    def _notes(self, point: MatrixPoint, records: list[RequestRecord]) -> str | None:
        config = self.config
        notes: list[str] = []
        limited = [r for r in records if r.rate_limited_hits]
        if limited:
            hits = sum(r.rate_limited_hits for r in limited)
            wait = sum(r.retry_wait_s for r in limited)
            gave_up = sum(1 for r in limited if r.error_class == "rate_limited")
            notes.append(f"rate-limited: {len(limited)} request(s) got HTTP 429 ({hits} times; "
                         f"{wait:.1f} s waited; {gave_up} gave up)")
        failed = Counter(r.error_class for r in records if not r.succeeded and not r.rate_limited_hits)
        if failed:
            detail = ", ".join(f"{name} {count}" for name, count in sorted(failed.items()))
            notes.append(f"failed: {sum(failed.values())} ({detail})")
        counted = sum(1 for r in records if r.tokens_counted and r.succeeded)
        if counted:
            notes.append(f"tokens counted from chunks for {counted} request(s) (no usage)")
        reasoned = sum(1 for r in records if r.reasoning_chunks)
        if reasoned:  # results.check_output_tokens reads this note: max_tokens may not cap their output
            notes.append(f"{REASONING_NOTE}: {reasoned} request(s) streamed reasoning, which max_tokens may not cap")
        contradicted = sum(1 for r in records if r.error_class == "bad_usage")
        if contradicted:
            notes.append(f"usage contradicted the stream for {contradicted} request(s) (more tokens than its "
                         "chunks or max_tokens allow): their tokens are counted from chunks")
        succeeded = [r for r in records if r.succeeded]
        if succeeded:
            mean_length = sum(r.completion_tokens for r in succeeded) / len(succeeded)
            if mean_length < point.max_tokens * 0.99:
                notes.append(f"mean output {mean_length:.1f} of max_tokens {point.max_tokens}")
        if config.ignore_eos:
            notes.append("ignore_eos")
        if config.min_tokens:
            notes.append(f"min_tokens={config.min_tokens}")
        prompt_note = self.prompts.note(point) if self.prompts is not None else None
        if prompt_note:
            notes.append(prompt_note)
        return "; ".join(notes) or None


def _usage_count(usage: Any, name: str) -> int | None:
    """An integer count of a usage object (bool is not one), else None."""
    value = usage.get(name) if isinstance(usage, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


async def _read_limited(response: httpx.Response) -> bytes:
    data = b""
    async for piece in response.aiter_bytes():
        data += piece
        if len(data) >= _ERROR_BODY_LIMIT:
            break
    return data[:_ERROR_BODY_LIMIT]


def _retry_delay(header: str | None, retries_so_far: int, cap: float) -> float:
    """Seconds to wait after a 429: Retry-After (seconds or an HTTP date), else backoff; capped."""
    delay: float | None = None
    if header:
        try:
            delay = float(header)
        except ValueError:
            try:
                when = email.utils.parsedate_to_datetime(header)
                delay = when.timestamp() - time.time()
            except (TypeError, ValueError):
                delay = None
    if delay is None or not math.isfinite(delay):
        delay = 0.5 * 2 ** retries_so_far
    return min(max(delay, 0.0), cap)



# -- entry point --------------------------------------------------------------------


def _prompt_seed(config: CollectConfig) -> int:
    """The seed of a --prompts run's order: given, else the one an earlier run recorded in the
    requests CSV it resumes (the same measured sample, so the same levels), else drawn."""
    if config.prompt_seed is not None:
        return config.prompt_seed
    requests = config.requests_csv
    if config.resume and requests.exists() and requests.stat().st_size > 0:
        for row in read_requests(requests):
            seed = (row.get("prompt_seed") or "").strip()
            if seed.lstrip("-").isdigit():
                return int(seed)
    import random

    return random.SystemRandom().randrange(1, 2 ** 31)


async def run_collection(config: CollectConfig, *, console: Any = None, progress: bool | None = None,
                         senders: SenderFactory = open_senders, check_first: bool = True,
                         progress_console: Any = None, progress_slot: BarSlot | None = None) -> CollectionReport:
    """Run the matrix and write both CSVs; returns what was run.

    Before any traffic, the outputs are checked (UsageError/InputError; nothing written);
    then, with `check_first`, one pre-flight request per model (PreflightFailed, exit 2,
    nothing written). `senders(config, max_concurrency)` opens the senders every request
    goes through (collect/send.py). With a rich `console`, a summary table is printed at the
    end; a progress bar goes to stderr when `progress` is True, or when it is None, a console
    is given and stderr is a terminal; with `progress_console` (a rich Console showing the caller's
    own status line) the bar draws under that line and goes at the end; with `progress_slot` (several
    runs at once) the bar is the run's own on the caller's SharedBars display, shown unless `progress`
    is False. An interruption (CancelledError) propagates after the finished experiments were saved.
    """
    points = matrix_points(config)
    if config.shard is not None and not points:
        raise UsageError(empty_shard(whole_matrix(config), *config.shard) or "")
    if config.api_key is None and not is_loopback_url(config.base_url):
        raise UsageError(f"no API key for {config.base_url}: set {' or '.join(API_KEY_ENV_VARS)}, "
                         "or pass --api-key-file")
    user_prompts = load_prompts(config.prompts_path) if config.prompts_path is not None else None
    outputs = check_outputs(config, points)
    todo = outputs.todo
    report = CollectionReport(results_path=config.results_path, requests_path=config.requests_csv,
                              skipped=outputs.skipped, rerun=outputs.rerun, rerun_failing=outputs.rerun_failing,
                              superseded=outputs.superseded, dropped_line=outputs.dropped_line)
    started = time.perf_counter()
    if todo:
        counter = RunCounters()
        show = progress if progress is not None else \
            (progress_slot is not None or (console is not None and sys.stderr.isatty()))
        opened = senders(config, max(point.concurrency for point in todo))
        try:
            collector = _Collector(config, opened, counter)
            if user_prompts is not None:
                # The levels are the file's, measured now; which experiments are left depends on them.
                assert config.prompts_path is not None
                seed = _prompt_seed(config)
                nonces = Nonces()
                groups = await measure_prompts(collector, todo[0], user_prompts, config.file_prompt_levels, seed,
                                               nonces, str(config.prompts_path))
                if check_first:
                    await preflight(collector, [point for point in todo if point.model != todo[0].model])
                measured = [group.level for group in groups]
                if config.shard is not None and not matrix_points(config, measured):  # fewer levels than asked
                    raise UsageError(f"{empty_shard(whole_matrix(config, measured), *config.shard)} (with the "
                                     f"{len(measured)} prompt level(s) the file's prompts make). Nothing was written.")
                outputs = check_outputs(config, matrix_points(config, measured))
                todo = outputs.todo
                report.skipped, report.rerun, report.dropped_line = outputs.skipped, outputs.rerun, outputs.dropped_line
                report.rerun_failing, report.superseded = outputs.rerun_failing, outputs.superseded
                collector.prompts = FilePrompts(config.prompts_path, groups, seed, nonces)
            elif config.uses_prompt_levels:
                nonces = Nonces()
                calibrations, report.prompt_warnings = await calibrate_levels(collector, todo, nonces,
                                                                              config.shared_prefix)
                collector.prompts = SyntheticPrompts(calibrations, nonces, config.shared_prefix)
            elif check_first:
                await preflight(collector, todo)
            outputs.apply(config)  # only now: a failed pre-flight leaves every file as it was
            bar = ProgressBar(todo, config.requests_per_slot, counter, progress_console, progress_slot) \
                if show else None
            if bar is not None:
                bar.start()
            try:
                for point in todo:
                    if bar is not None:
                        bar.begin(point)
                    try:
                        row, records, origin = await collector.run_experiment(point)
                    except ScmXlError:
                        raise
                    except Exception as exc:  # a bug must not print the key either
                        raise ScmXlError(collector._text(f"{point.exp_id} failed: {type(exc).__name__}: {exc}")) from None
                    records.sort(key=lambda r: (not r.warmup, r.slot, r.seq))
                    append_requests(config.requests_csv, records, origin)
                    append_result(config.results_path, row)
                    report.rows.append(row)
                    if all_failed(row):
                        report.failed_experiments[row.exp_id] = Counter(
                            r.error_class or r.status for r in records if not r.warmup and not r.succeeded)
                    if bar is not None:
                        bar.finished(row)
            finally:
                if bar is not None:
                    await bar.stop()
        finally:
            await asyncio.gather(*(sender.aclose() for sender in opened), return_exceptions=True)
    else:
        outputs.apply(config)
    report.wall_s = time.perf_counter() - started
    if console is not None:
        console.print(summary_table(report))
        for line in report.problems():
            console.print(line, markup=False, highlight=False)
    return report
