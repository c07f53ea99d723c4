"""The load collector: streams chat completions from an OpenAI-compatible endpoint.

`run_collection(config)` runs the matrix models x concurrency x max_tokens x
repeats. In each experiment, `concurrency` slots each send `requests_per_slot`
streaming requests one after another (closed loop). A request is *due* when
the previous request of its slot ended (or when the experiment starts), and
its clock starts then, not when it was sent, so client-side queueing shows in
TTFT and latency instead of hiding.

After each experiment, its per-request rows go to `requests.csv` and then its
one results row (the commit point) to the results CSV through
`scm_xl.results.append_result`, flushed and fsynced: an interrupted run leaves
valid files, and `resume` skips the experiments already there.

Per request: scheduled and send times, TTFT (first content chunk), end-to-end
latency (to the last byte), mean and max inter-chunk latency, prompt and
completion tokens (from `usage`, else counted chunks, marked `tokens_counted`),
HTTP status and an error class. Every request ends in exactly one status:

    ok            a complete stream ([DONE] or a finish_reason), never throttled
    rate_limited  got at least one HTTP 429 (whether or not a retry then succeeded)
    failed        anything else: error_class is http_4xx, http_5xx (or another
                  http_Nxx), timeout, connect_error, connection_error,
                  truncated_stream, malformed_sse, line_too_long (an SSE line
                  over `max_line_bytes`), stream_error (an error event),
                  not_streamed (a JSON answer) or client_error

HTTP 429 is retried after Retry-After (capped at `max_retry_after_s`), at most
`max_retries` times. Streams are sharded over several `httpx.AsyncClient`s
(one per `streams_per_client` slots, at most `max_clients`), because one
client on httpx's default transport stalls beyond about 128 concurrent
streams. By default each client runs on `FastTransport`, a lean HTTP/1.1
transport defined below: httpx's own spends most of the collector's CPU
(see benchmarks/results/collector.md); `transport="httpx"` selects it, and
"auto" does so when the environment sets a proxy.

The API key lives in a `Secret`; it is sent only in the Authorization header
and redacted from every message the collector records or raises.

Library use:

    config = CollectConfig(base_url="http://127.0.0.1:8000/v1", concurrency=(1, 4),
                           max_tokens=(64,), results_path=Path("out/results.csv"))
    report = await run_collection(config, console=rich.console.Console())
"""

from __future__ import annotations

import asyncio
import csv
import dataclasses
import email.utils
import http.cookiejar
import ipaddress
import json
import math
import os
import sys
import time
import tomllib
import urllib.request
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping
from urllib.parse import urlsplit

import httpx

from scm_xl import stats
from scm_xl.errors import InputError, ScmXlError, UsageError
from scm_xl.results import ResultRow, append_result, read_results

DEFAULT_BASE_URL = "https://api.siliconflow.cn/v1"
DEFAULT_MODEL = "Qwen/Qwen2.5-7B-Instruct"
DEFAULT_CONCURRENCY: tuple[int, ...] = (1, 2, 4, 8)
DEFAULT_MAX_TOKENS: tuple[int, ...] = (50, 100, 200)
DEFAULT_PROMPT = "Write a short story about a lighthouse keeper who finds a message in a bottle."
API_KEY_ENV_VARS: tuple[str, ...] = ("SCM_XL_API_KEY", "SILICONFLOW_API_KEY", "OPENAI_API_KEY")
DEFAULT_MAX_LINE_BYTES = 1024 * 1024

REQUEST_COLUMNS: tuple[str, ...] = (
    "exp_id", "model", "concurrency", "max_tokens", "repeat", "slot", "seq", "warmup",
    "scheduled_s", "sent_s", "ttft_s", "latency_s", "mean_itl_s", "max_itl_s",
    "prompt_tokens", "completion_tokens", "tokens_counted", "chunks", "finish_reason",
    "status", "http_status", "error_class", "error", "retries", "retry_wait_s",
)

ClientFactory = Callable[[], httpx.AsyncClient]

_ERROR_TEXT_LIMIT = 300
_ERROR_BODY_LIMIT = 4096


class Secret:
    """A secret string that never shows itself in repr, str or f-strings."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def redact(self, text: str) -> str:
        return text.replace(self._value, "***") if self._value else text

    def __repr__(self) -> str:
        return "Secret('***')"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)


def resolve_api_key(api_key_file: str | Path | None = None,
                    environ: Mapping[str, str] | None = None) -> tuple[Secret | None, str | None]:
    """The API key and where it came from (a variable or file name, never the key).

    An explicit `api_key_file` wins; otherwise the first set variable of
    API_KEY_ENV_VARS. (None, None) when there is none.
    """
    if api_key_file is not None:
        try:
            value = Path(api_key_file).read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise InputError(f"cannot read the API key file: {exc.strerror}", path=str(api_key_file)) from None
        if not value:
            raise InputError("the API key file is empty", path=str(api_key_file))
        return Secret(value), str(api_key_file)
    environ = os.environ if environ is None else environ
    for name in API_KEY_ENV_VARS:
        value = environ.get(name, "").strip()
        if value:
            return Secret(value), name
    return None, None


def is_loopback_url(url: str) -> bool:
    host = urlsplit(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True, kw_only=True)
class CollectConfig:
    """What to measure and where to write it. Times are in seconds."""

    base_url: str = DEFAULT_BASE_URL
    models: tuple[str, ...] = (DEFAULT_MODEL,)
    concurrency: tuple[int, ...] = DEFAULT_CONCURRENCY
    max_tokens: tuple[int, ...] = DEFAULT_MAX_TOKENS
    repeats: int = 1
    requests_per_slot: int = 10
    warmup: int = 0  # warm-up requests before each experiment, excluded from its figures
    prompt: str = DEFAULT_PROMPT
    ignore_eos: bool = False
    min_tokens: int | None = None
    temperature: float | None = None
    results_path: Path = Path("results.csv")
    requests_path: Path | None = None  # default: see requests_csv
    resume: bool = False
    overwrite: bool = False
    api_key: Secret | None = field(default=None, repr=False)
    timeout_s: float = 60.0  # connect, and the longest silence while reading a stream
    request_timeout_s: float | None = None  # whole request (one attempt), None: no limit
    max_retries: int = 5  # HTTP 429 retries per request
    max_retry_after_s: float = 10.0
    streams_per_client: int = 64
    max_clients: int = 16
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES
    # "fast": FastTransport; "httpx": httpx's own (HTTP proxies); "auto": fast unless the
    # environment sets a proxy for a non-loopback base URL
    transport: str = "auto"
    gpu: str | None = None
    # An explicit run list (a `scm-xl plan` file); when given, it replaces the product of
    # models x concurrency x max_tokens x repeats.
    experiments: tuple[MatrixPoint, ...] | None = None

    def __post_init__(self) -> None:
        set_ = lambda name, value: object.__setattr__(self, name, value)  # noqa: E731 (frozen)
        if isinstance(self.api_key, str):
            set_("api_key", Secret(self.api_key) if self.api_key else None)
        for name in ("models", "concurrency", "max_tokens"):
            value = getattr(self, name)
            set_(name, (value,) if isinstance(value, (str, int)) else tuple(value))
        set_("results_path", Path(self.results_path))
        if self.requests_path is not None:
            set_("requests_path", Path(self.requests_path))
        if not self.models or any(not isinstance(m, str) or not m.strip() for m in self.models):
            raise UsageError("models must be one or more non-empty names")
        for name in ("concurrency", "max_tokens"):
            values = getattr(self, name)
            if not values or any(isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in values):
                raise UsageError(f"{name} must be one or more positive integers, got {list(values)}")
        for name in ("repeats", "requests_per_slot", "streams_per_client", "max_clients", "max_line_bytes"):
            if getattr(self, name) < 1:
                raise UsageError(f"{name} must be >= 1, got {getattr(self, name)}")
        for name in ("warmup", "max_retries"):
            if getattr(self, name) < 0:
                raise UsageError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.min_tokens is not None and self.min_tokens < 0:
            raise UsageError(f"min_tokens must be >= 0, got {self.min_tokens}")
        if self.timeout_s <= 0 or (self.request_timeout_s is not None and self.request_timeout_s <= 0):
            raise UsageError("timeouts must be > 0")
        if self.max_retry_after_s < 0:
            raise UsageError(f"max_retry_after_s must be >= 0, got {self.max_retry_after_s}")
        scheme = urlsplit(self.base_url).scheme
        if scheme not in ("http", "https") or not urlsplit(self.base_url).hostname:
            raise UsageError(f"base URL must be http(s)://host[:port]/path, got {self.base_url!r}")
        if self.transport not in ("auto", "fast", "httpx"):
            raise UsageError(f"transport must be 'auto', 'fast' or 'httpx', got {self.transport!r}")
        if self.resume and self.overwrite:
            raise UsageError("--resume and --overwrite exclude each other")

    @property
    def requests_csv(self) -> Path:
        """The per-request CSV: `requests_path`, else requests.csv beside results.csv
        (or NAME.requests.csv beside NAME.csv)."""
        if self.requests_path is not None:
            return self.requests_path
        stem = self.results_path.stem
        return self.results_path.with_name("requests.csv" if stem == "results" else f"{stem}.requests.csv")


@dataclass(frozen=True)
class MatrixPoint:
    """One experiment of the matrix."""

    exp_id: str
    model: str
    concurrency: int
    max_tokens: int
    repeat: int

    @property
    def key(self) -> tuple[str, int, int, int]:
        return (self.model, self.concurrency, self.max_tokens, self.repeat)

    def label(self) -> str:
        return f"{self.exp_id} {self.model} c={self.concurrency} max_tokens={self.max_tokens}"


def matrix_points(config: CollectConfig) -> list[MatrixPoint]:
    """The matrix in run order: an explicit run list as given, else models, then
    concurrency, then max_tokens, then repeats."""
    if config.experiments:
        return list(config.experiments)
    points: list[MatrixPoint] = []
    index = 0
    for model in config.models:
        for concurrency in config.concurrency:
            for max_tokens in config.max_tokens:
                index += 1
                for repeat in range(1, config.repeats + 1):
                    exp_id = f"E{index:03d}" if config.repeats == 1 else f"E{index:03d}-R{repeat}"
                    points.append(MatrixPoint(exp_id, model, concurrency, max_tokens, repeat))
    return points


_MATRIX_KEYS: dict[str, type | tuple[type, ...]] = {
    "base_url": str, "models": list, "model": str, "concurrency": list, "max_tokens": list,
    "repeats": int, "requests_per_slot": int, "warmup": int, "prompt": str, "ignore_eos": bool,
    "min_tokens": int, "temperature": (int, float), "timeout_s": (int, float),
    "request_timeout_s": (int, float), "max_retries": int, "max_retry_after_s": (int, float), "gpu": str,
}


def load_matrix_file(path: str | Path) -> dict[str, Any]:
    """Read a TOML matrix file into CollectConfig field values (InputError on a bad one)."""
    where = str(path)
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError("file not found", path=where) from None
    except OSError as exc:
        raise InputError(f"cannot read file: {exc.strerror}", path=where) from None
    except UnicodeDecodeError:
        raise InputError("not a UTF-8 text file", path=where) from None
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"bad TOML: {exc}", path=where) from None
    data = data.get("matrix", data) if isinstance(data.get("matrix"), dict) else data
    data = dict(data)
    data.pop("plan", None)  # written by `scm-xl plan` for people: information only
    values: dict[str, Any] = {}
    if "experiments" in data:
        values["experiments"] = _experiments(data.pop("experiments"), where)
    for key, value in data.items():
        expected = _MATRIX_KEYS.get(key)
        if expected is None:
            raise InputError(f"unknown key {key!r} (known: {', '.join(sorted(_MATRIX_KEYS))})", path=where)
        if isinstance(value, bool) and expected is not bool or not isinstance(value, expected):
            raise InputError(f"{key!r} has the wrong type ({type(value).__name__})", path=where)
        if key in ("concurrency", "max_tokens") and not all(
                isinstance(v, int) and not isinstance(v, bool) for v in value):
            raise InputError(f"{key!r} must be a list of integers", path=where)
        if key == "models" and not all(isinstance(v, str) for v in value):
            raise InputError("'models' must be a list of strings", path=where)
        if key == "model":
            key, value = "models", [value]
        values[key] = tuple(value) if isinstance(value, list) else value
    return values


def _experiments(tables: Any, where: str) -> tuple[MatrixPoint, ...]:
    """`[[experiments]]` tables (from `scm-xl plan`): run exactly these, in `order`."""
    if not isinstance(tables, list) or not tables or not all(isinstance(t, dict) for t in tables):
        raise InputError("'experiments' must be one or more [[experiments]] tables", path=where)
    points: list[tuple[int, MatrixPoint]] = []
    seen: set[str] = set()
    for i, table in enumerate(tables, start=1):
        unknown = set(table) - {"order", "exp_id", "model", "concurrency", "max_tokens", "repeat"}
        if unknown:
            raise InputError(f"experiment {i}: unknown key(s) {', '.join(sorted(unknown))}", path=where)
        model, concurrency, length = table.get("model"), table.get("concurrency"), table.get("max_tokens")
        repeat, order = table.get("repeat", 1), table.get("order", i)
        if not isinstance(model, str) or not model.strip():
            raise InputError(f"experiment {i}: 'model' must be a name", path=where)
        for name, value in (("concurrency", concurrency), ("max_tokens", length), ("repeat", repeat),
                            ("order", order)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InputError(f"experiment {i}: {name!r} must be a positive integer", path=where)
        exp_id = table.get("exp_id", f"E{i:03d}")
        if not isinstance(exp_id, str) or not exp_id or exp_id in seen:
            raise InputError(f"experiment {i}: 'exp_id' must be a unique name", path=where)
        seen.add(exp_id)
        points.append((order, MatrixPoint(exp_id, model, concurrency, length, repeat)))
    return tuple(point for _, point in sorted(points, key=lambda item: item[0]))


# -- per-request record -------------------------------------------------------------


@dataclass(slots=True)
class RequestRecord:
    """One request as measured (absolute times on time.perf_counter())."""

    point: MatrixPoint
    slot: int
    seq: int
    warmup: bool
    scheduled_at: float
    sent_at: float | None = None
    first_token_at: float | None = None
    last_token_at: float | None = None
    ended_at: float | None = None
    chunks: int = 0
    max_itl_s: float | None = None
    prompt_tokens: int | None = None
    completion_tokens: int = 0
    tokens_counted: bool = False
    finish_reason: str | None = None
    http_status: int | None = None
    succeeded: bool = False
    error_class: str = ""
    error: str = ""
    retries: int = 0
    rate_limited_hits: int = 0
    retry_wait_s: float = 0.0

    @property
    def status(self) -> str:
        if self.rate_limited_hits:
            return "rate_limited"
        return "ok" if self.succeeded else "failed"

    @property
    def ttft_s(self) -> float | None:
        return None if self.first_token_at is None else self.first_token_at - self.scheduled_at

    @property
    def latency_s(self) -> float | None:
        return None if self.ended_at is None else self.ended_at - self.scheduled_at

    @property
    def itl_span_s(self) -> float:
        if self.first_token_at is None or self.last_token_at is None:
            return 0.0
        return self.last_token_at - self.first_token_at

    @property
    def mean_itl_s(self) -> float | None:
        return self.itl_span_s / (self.chunks - 1) if self.chunks > 1 else None

    def csv_row(self, origin: float) -> list[str]:
        point = self.point
        return [
            point.exp_id, point.model, str(point.concurrency), str(point.max_tokens), str(point.repeat),
            str(self.slot), str(self.seq), _bool(self.warmup),
            _seconds(self.scheduled_at - origin), _seconds(None if self.sent_at is None else self.sent_at - origin),
            _seconds(self.ttft_s), _seconds(self.latency_s), _seconds(self.mean_itl_s), _seconds(self.max_itl_s),
            "" if self.prompt_tokens is None else str(self.prompt_tokens), str(self.completion_tokens),
            _bool(self.tokens_counted), str(self.chunks), self.finish_reason or "", self.status,
            "" if self.http_status is None else str(self.http_status), self.error_class, self.error,
            str(self.retries), _seconds(self.retry_wait_s),
        ]


def _bool(value: bool) -> str:
    return "true" if value else "false"


def _seconds(value: float | None) -> str:
    return "" if value is None else f"{value:.6f}"


class _StreamError(Exception):
    def __init__(self, error_class: str, message: str) -> None:
        super().__init__(message)
        self.error_class = error_class


# -- the report -----------------------------------------------------------------------


@dataclass(kw_only=True)
class CollectionReport:
    """What a collection run did. `rows` are the experiments run now, in order."""

    results_path: Path
    requests_path: Path
    rows: list[ResultRow] = field(default_factory=list)
    skipped: list[MatrixPoint] = field(default_factory=list)
    wall_s: float = 0.0

    @property
    def total_requests(self) -> int:
        return sum(row.total_requests for row in self.rows)

    @property
    def failed_requests(self) -> int:
        return sum(row.failed_requests or 0 for row in self.rows)

    @property
    def rate_limited_requests(self) -> int:
        return sum(row.rate_limited_requests or 0 for row in self.rows)


# -- the engine -----------------------------------------------------------------------


class _Progress:
    """Counters the request path bumps; a ticker copies them to the rich bar."""

    __slots__ = ("requests", "tokens", "label")

    def __init__(self) -> None:
        self.requests = 0
        self.tokens = 0
        self.label = ""


class _Collector:
    def __init__(self, config: CollectConfig, clients: list[httpx.AsyncClient], progress: _Progress,
                 direct: dict[int, FastTransport]) -> None:
        self.config = config
        self.clients = clients
        self.direct = direct  # id(client) -> its FastTransport, for clients built here
        self.progress = progress
        self.url = config.base_url.rstrip("/") + "/chat/completions"
        self.secret = config.api_key
        headers = {"content-type": "application/json", "accept": "text/event-stream"}
        if config.api_key is not None:
            headers["authorization"] = f"Bearer {config.api_key.reveal()}"
        self.headers = headers
        self.timeout = httpx.Timeout(config.timeout_s, pool=None)

    def body(self, point: MatrixPoint) -> bytes:
        config = self.config
        payload: dict[str, Any] = {
            "model": point.model,
            "messages": [{"role": "user", "content": config.prompt}],
            "max_tokens": point.max_tokens,
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
        # One request object for the whole experiment: httpx only reads it when sending, and
        # building one per send costs more CPU than streaming a short reply.
        request = self.clients[0].build_request("POST", self.url, content=self.body(point), headers=self.headers,
                                             timeout=self.timeout)
        # For FastTransport clients, also its bytes (head and body), serialized once here rather
        # than at each send: when a request falls due only the socket write is left to do.
        prepared = await FastTransport.prepare(request) if self.direct else None
        config = self.config
        warm: list[RequestRecord] = []
        if config.warmup:
            slots = min(config.warmup, point.concurrency)
            per_slot = [config.warmup // slots + (1 if s < config.warmup % slots else 0) for s in range(slots)]
            await self._run_slots(point, request, prepared, per_slot, warm, warmup=True)
        origin = time.perf_counter()
        measured: list[RequestRecord] = []
        await self._run_slots(point, request, prepared, [config.requests_per_slot] * point.concurrency, measured,
                              warmup=False)
        finished = time.perf_counter()
        row = self._result_row(point, measured, fallback_wall=finished - origin)
        return row, warm + measured, origin

    async def _run_slots(self, point: MatrixPoint, request: httpx.Request, prepared: _PreparedRequest | None,
                         per_slot: list[int], records: list[RequestRecord], *, warmup: bool) -> None:
        # Everything that can be done before the start instant is: the records and the slot tasks
        # exist before `start` is read, so that with many slots due at once the clock of the last
        # one does not also run through the creation of the others.
        clients = self.clients
        direct = self.direct
        progress = self.progress
        start = 0.0
        planned = [[RequestRecord(point=point, slot=slot, seq=seq, warmup=warmup, scheduled_at=0.0)
                    for seq in range(count)] for slot, count in enumerate(per_slot)]

        async def slot_worker(slot: int, slot_records: list[RequestRecord]) -> None:
            client = clients[slot % len(clients)]
            transport = direct.get(id(client)) if prepared is not None else None
            due = start  # read when the task first runs, after `start` was set
            for record in slot_records:
                record.scheduled_at = due
                await self._request(client, request, record, transport, prepared)
                records.append(record)
                if not warmup:
                    progress.requests += 1
                    progress.tokens += record.completion_tokens
                due = record.ended_at or time.perf_counter()

        async with asyncio.TaskGroup() as group:
            for slot, slot_records in enumerate(planned):
                group.create_task(slot_worker(slot, slot_records))
            start = time.perf_counter()  # no await since the tasks were made: none has run yet

    async def _request(self, client: httpx.AsyncClient, request: httpx.Request, record: RequestRecord,
                       transport: FastTransport | None = None, prepared: _PreparedRequest | None = None) -> None:
        config = self.config
        try:
            while True:
                if config.request_timeout_s is None:
                    retry_after = await self._attempt(client, request, record, transport, prepared)
                else:
                    async with asyncio.timeout(config.request_timeout_s):
                        retry_after = await self._attempt(client, request, record, transport, prepared)
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

    async def _attempt(self, client: httpx.AsyncClient, request: httpx.Request, record: RequestRecord,
                       transport: FastTransport | None = None,
                       prepared: _PreparedRequest | None = None) -> float | None:
        """One HTTP attempt; returns the wait before a retry after a 429, else None."""
        if record.sent_at is None:
            record.sent_at = time.perf_counter()
        if transport is not None and prepared is not None:
            # Straight to our own transport with the bytes built before the experiment: the
            # client's auth, redirect, cookie and logging layers do nothing for a load generator
            # but cost about half the CPU of a request, and serializing it each time the rest.
            response = await transport.send_prepared(prepared)
        else:
            response = await client.send(request, stream=True)
        try:
            record.http_status = response.status_code
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
        first = last = 0.0
        max_gap = 0.0
        done = False
        finish: str | None = None
        usage: Any = None
        pending = b""
        # The raw stream skips httpx's per-chunk bookkeeping; decode only when the body is encoded.
        iterator = response.aiter_bytes() if "content-encoding" in response.headers else response.stream
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
            record.succeeded = True
        finally:
            record.ended_at = clock.finished_at if clock is not None and clock.finished_at else perf()
            record.chunks = chunks
            if chunks:
                record.first_token_at = first
                record.last_token_at = last
                record.max_itl_s = max_gap if chunks > 1 else None
            record.finish_reason = finish
            completion = usage.get("completion_tokens") if isinstance(usage, dict) else None
            if isinstance(completion, int) and not isinstance(completion, bool):
                record.completion_tokens = completion
                prompt = usage.get("prompt_tokens")
                record.prompt_tokens = prompt if isinstance(prompt, int) else None
            else:
                record.completion_tokens = chunks
                record.tokens_counted = True

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
        statuses = Counter(r.status for r in records)
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
            gpu=config.gpu, notes=self._notes(point, records),
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
        succeeded = [r for r in records if r.succeeded]
        if succeeded:
            mean_length = sum(r.completion_tokens for r in succeeded) / len(succeeded)
            if mean_length < point.max_tokens * 0.99:
                notes.append(f"mean output {mean_length:.1f} of max_tokens {point.max_tokens}")
        if config.ignore_eos:
            notes.append("ignore_eos")
        if config.min_tokens:
            notes.append(f"min_tokens={config.min_tokens}")
        return "; ".join(notes) or None


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


# -- files ------------------------------------------------------------------------------


def append_requests(path: Path, records: Iterable[RequestRecord], origin: float) -> None:
    """Append per-request rows (header first if new), flushed and fsynced."""
    exists = path.exists() and path.stat().st_size > 0
    if exists:
        _check_requests_header(path)
    try:
        with open(path, "a", encoding="utf-8", newline="") as handle:
            writer = csv.writer(handle, lineterminator="\n")
            if not exists:
                writer.writerow(REQUEST_COLUMNS)
            writer.writerows(record.csv_row(origin) for record in records)
            handle.flush()
            os.fsync(handle.fileno())
    except OSError as exc:
        raise InputError(f"cannot write file: {exc.strerror}", path=str(path)) from None


def read_requests(path: str | Path) -> list[dict[str, str]]:
    """The rows of a requests CSV as dicts (column -> text)."""
    with open(path, encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


def _check_requests_header(path: Path) -> None:
    with open(path, encoding="utf-8", newline="") as handle:
        header = next(csv.reader(handle), [])
    if tuple(header) != REQUEST_COLUMNS:
        raise InputError("cannot append: not a requests CSV written by this version of scm-xl", path=str(path), line=1)


def _prune_requests(path: Path, keep_exp_ids: set[str]) -> None:
    """Drop request rows of experiments that have no results row (an interrupted write)."""
    if not path.exists() or path.stat().st_size == 0:
        return
    _check_requests_header(path)
    rows = read_requests(path)
    kept = [row for row in rows if row.get("exp_id") in keep_exp_ids]
    if len(kept) == len(rows):
        return
    temp = path.with_name(f".{path.name}.tmp")
    with open(temp, "w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=REQUEST_COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(kept)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temp, path)


def _prepare_outputs(config: CollectConfig, points: list[MatrixPoint]) -> tuple[list[MatrixPoint], list[MatrixPoint]]:
    """Check the output files; return (points to run, points already done)."""
    results, requests = config.results_path, config.requests_csv
    results_exist = results.exists() and results.stat().st_size > 0
    if config.overwrite:
        results.unlink(missing_ok=True)
        requests.unlink(missing_ok=True)
        return points, []
    if not config.resume:
        for path in (results, requests):
            if path.exists() and path.stat().st_size > 0:
                raise UsageError(f"{path} already exists: pass --resume to continue it or --overwrite to replace it")
        return points, []
    if not results_exist:
        requests.unlink(missing_ok=True)  # request rows without any results row are orphans
        return points, []
    table = read_results(results)
    done_keys = {(row.model, row.concurrency, row.max_tokens, row.repeat or 1) for row in table.rows}
    taken = {row.exp_id for row in table.rows}
    _prune_requests(requests, taken)
    todo: list[MatrixPoint] = []
    skipped: list[MatrixPoint] = []
    for point in points:
        if point.key in done_keys:
            skipped.append(point)
            continue
        exp_id = point.exp_id
        suffix = 2
        while exp_id in taken:  # the matrix changed since the first run
            exp_id = f"{point.exp_id}-{suffix}"
            suffix += 1
        taken.add(exp_id)
        todo.append(dataclasses.replace(point, exp_id=exp_id))
    return todo, skipped


# -- a lean HTTP/1.1 transport for httpx.AsyncClient ----------------------------------


class _NoCookies(http.cookiejar.CookieJar):
    """A load generator keeps no cookies; parsing them costs CPU on every response."""

    def extract_cookies(self, response: Any, request: Any) -> None:
        return None


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


# -- entry point --------------------------------------------------------------------


async def run_collection(config: CollectConfig, *, client_factory: ClientFactory | None = None,
                         console: Any = None, progress: bool | None = None) -> CollectionReport:
    """Run the matrix and write both CSVs; returns what was run.

    `client_factory()` makes one httpx.AsyncClient (tests pass one built on
    httpx.MockTransport); by default clients are sized for the matrix. With a
    rich `console`, a summary table is printed at the end; a progress bar goes
    to stderr when `progress` is True, or when it is None, a console is given
    and stderr is a terminal. Raises ScmXlError for bad input; an interruption
    (CancelledError) propagates after the finished experiments were saved.
    """
    points = matrix_points(config)
    if config.api_key is None and not is_loopback_url(config.base_url) and client_factory is None:
        raise UsageError(f"no API key for {config.base_url}: set {' or '.join(API_KEY_ENV_VARS)}, "
                         "or pass --api-key-file")
    todo, skipped = _prepare_outputs(config, points)
    report = CollectionReport(results_path=config.results_path, requests_path=config.requests_csv, skipped=skipped)
    started = time.perf_counter()
    if todo:
        counter = _Progress()
        show = progress if progress is not None else (console is not None and sys.stderr.isatty())
        max_concurrency = max(point.concurrency for point in todo)
        clients, direct = _make_clients(config, client_factory, max_concurrency)
        try:
            collector = _Collector(config, clients, counter, direct)
            bar = _ProgressBar(todo, config, counter) if show else None
            if bar is not None:
                bar.start()
            try:
                for point in todo:
                    counter.label = point.label()
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
                    if bar is not None:
                        bar.finished(row)
            finally:
                if bar is not None:
                    await bar.stop()
        finally:
            await asyncio.gather(*(client.aclose() for client in clients), return_exceptions=True)
    report.wall_s = time.perf_counter() - started
    if console is not None:
        console.print(summary_table(report))
    return report


def _proxied(url: str) -> bool:
    """Whether the environment routes `url` through a proxy (HTTPS_PROXY, ALL_PROXY, NO_PROXY...)."""
    proxies = urllib.request.getproxies()
    host = urlsplit(url).hostname or ""
    scheme = urlsplit(url).scheme
    return bool(proxies.get(scheme) or proxies.get("all")) and not urllib.request.proxy_bypass(host)


def _make_clients(config: CollectConfig, factory: ClientFactory | None,
                  max_concurrency: int) -> tuple[list[httpx.AsyncClient], dict[int, FastTransport]]:
    """The clients slots are sharded over, and (for FastTransport clients) their transports."""
    count = max(1, min(config.max_clients, math.ceil(max_concurrency / config.streams_per_client)))
    if factory is not None:
        return [factory() for _ in range(count)], {}
    loopback = is_loopback_url(config.base_url)
    timeout = httpx.Timeout(config.timeout_s, pool=None)
    if config.transport == "fast" or config.transport == "auto" and (loopback or not _proxied(config.base_url)):
        clients, direct = [], {}
        for _ in range(count):
            transport = FastTransport()
            client = httpx.AsyncClient(transport=transport, timeout=timeout, trust_env=False, cookies=_NoCookies())
            clients.append(client)
            direct[id(client)] = transport
        return clients, direct
    per_client = math.ceil(max_concurrency / count) + 1
    ssl_context = httpx.create_ssl_context()  # one for all clients: each costs milliseconds to build
    clients = [
        httpx.AsyncClient(
            limits=httpx.Limits(max_connections=per_client, max_keepalive_connections=per_client),
            timeout=timeout, verify=ssl_context,
            trust_env=not loopback,  # never send loopback traffic to a proxy
        )
        for _ in range(count)
    ]
    return clients, {}


class _ProgressBar:
    """A rich progress bar on stderr, refreshed from the counters a few times a second."""

    def __init__(self, points: list[MatrixPoint], config: CollectConfig, counter: _Progress) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.counter = counter
        self.total = sum(point.concurrency * config.requests_per_slot for point in points)
        self.experiments = len(points)
        self.done = 0
        self.progress = Progress(
            TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[rate]}"),
            TimeElapsedColumn(), console=Console(stderr=True), transient=False,
        )
        self.task = self.progress.add_task("starting", total=self.total, rate="")
        self.ticker: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.progress.start()
        self.ticker = asyncio.create_task(self._tick())

    async def _tick(self) -> None:
        last_tokens, last_time = 0, time.perf_counter()
        while True:
            await asyncio.sleep(0.25)
            now = time.perf_counter()
            tokens = self.counter.tokens
            rate = (tokens - last_tokens) / (now - last_time)
            last_tokens, last_time = tokens, now
            self.progress.update(self.task, completed=self.counter.requests,
                                 description=f"[{self.done + 1}/{self.experiments}] {self.counter.label}",
                                 rate=f"{rate:,.0f} tok/s")

    def finished(self, row: ResultRow) -> None:
        self.done += 1

    async def stop(self) -> None:
        if self.ticker is not None:
            self.ticker.cancel()
            await asyncio.gather(self.ticker, return_exceptions=True)
        self.progress.update(self.task, completed=self.counter.requests, description="done", rate="")
        self.progress.stop()


def summary_table(report: CollectionReport) -> Any:
    """A rich Table of the experiments run (TPS, tails in ms, request outcomes)."""
    from rich.table import Table

    models = sorted({row.model for row in report.rows})
    title = f"scm-xl collect: {len(report.rows)} experiment(s) in {report.wall_s:.1f} s"
    if report.skipped:
        title += f", {len(report.skipped)} already done"
    if len(models) == 1:
        title += f"\n{models[0]}"
    table = Table(title=title, caption=f"results: {report.results_path}  requests: {report.requests_path}")
    columns = ["exp"] + (["model"] if len(models) > 1 else []) + [
        "c", "max_tok", "TPS", "lat p50", "lat p99", "TTFT p50", "TTFT p99", "ITL ms", "ok/fail/429"]
    for name in columns:
        table.add_column(name, justify="left" if name in ("exp", "model") else "right")
    for row in report.rows:
        cells = [row.exp_id] + ([row.model] if len(models) > 1 else []) + [
            str(row.concurrency), str(row.max_tokens), f"{row.tps:,.1f}", _ms(row.latency_p50_s),
            _ms(row.latency_p99_s), _ms(row.ttft_p50_s), _ms(row.ttft_p99_s), _ms(row.mean_itl_s),
            f"{row.ok_requests}/{row.failed_requests}/{row.rate_limited_requests}"]
        table.add_row(*cells)
    return table


def _ms(value: float | None) -> str:
    """Seconds shown as milliseconds."""
    return "-" if value is None else f"{value * 1000:,.1f}"
