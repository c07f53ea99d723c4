"""What to measure and with which key: CollectConfig, the API key as a Secret, defaults.

The key lives in a `Secret`; it is sent only in the Authorization header and
redacted from every message the collector records or raises. A key holding a
control character (CR LF could add headers on the wire) or a non-ASCII one (a
header cannot carry it) is refused before any traffic, naming where it came
from, never its value.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import os
import ssl
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence
from urllib.parse import urlsplit

from scm_xl.collect.matrix import (
    MatrixPoint, check_cell, check_matrix_size, check_model_names, full_factorial, shard_points,
)
from scm_xl.errors import InputError, UsageError
from scm_xl.input_files import read_capped
from scm_xl.rules import DEFAULT_MODEL

DEFAULT_BASE_URL = "https://api.siliconflow.cn/v1"
DEFAULT_CONCURRENCY: tuple[int, ...] = (1, 2, 4, 8)
DEFAULT_MAX_TOKENS: tuple[int, ...] = (50, 100, 200)
DEFAULT_PROMPT = "Write a short story about a lighthouse keeper who finds a message in a bottle."
API_KEY_ENV_VARS: tuple[str, ...] = ("SCM_XL_API_KEY", "SILICONFLOW_API_KEY", "OPENAI_API_KEY")
DEFAULT_MAX_LINE_BYTES = 1024 * 1024
TRANSPORTS: tuple[str, ...] = ("auto", "fast", "httpx")
# The most of an --api-key-file read: a key is some hundred bytes; /dev/zero or a 300 MB file is refused at once.
MAX_KEY_FILE_BYTES = 64 * 1024


def has_control_character(text: str) -> bool:
    return any(ord(ch) < 32 or ord(ch) == 127 for ch in text)


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
        where = str(api_key_file)
        try:  # a device or FIFO is refused unread, and no more than the cap is read
            data = read_capped(where, MAX_KEY_FILE_BYTES, "an API key file")
        except InputError as exc:  # its words name the file, never what it holds
            raise InputError(f"cannot read the API key file: {exc.problem}", path=where) from None
        try:
            value = data.decode("utf-8-sig").strip()  # a BOM is no part of a key
        except UnicodeDecodeError:
            raise InputError("the API key file is not UTF-8 text", path=where) from None
        if not value:
            raise InputError("the API key file is empty", path=str(api_key_file))
        _check_key(value, f"the API key file {api_key_file}")
        return Secret(value), str(api_key_file)
    environ = os.environ if environ is None else environ
    for name in API_KEY_ENV_VARS:
        value = environ.get(name, "").strip()
        if value:
            _check_key(value, f"${name}")
            return Secret(value), name
    return None, None


def key_problem(value: str) -> str | None:
    """What makes `value` unusable as a key, in words that never include the key, or None.

    A control character (CR LF could add headers on the wire) and a character beyond ASCII
    (an HTTP header holds only ASCII: httpx would fail on it mid-run; a typographic quote or
    a no-break space pasted with the key is the usual one) are refused before any traffic."""
    if has_control_character(value):
        return "contains a control character (such as a line break), which could inject HTTP headers: fix the key"
    position = next((index for index, char in enumerate(value) if ord(char) > 126), None)
    if position is not None:
        return (f"contains a non-ASCII character (at character {position + 1}; a pasted typographic quote or "
                "no-break space?), which an HTTP header cannot carry: fix the key")
    return None


def _check_key(value: str, source: str) -> None:
    problem = key_problem(value)
    if problem is not None:
        raise UsageError(f"the API key from {source} {problem}")


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
    api_key_source: str | None = None  # the variable or file the key came from, for messages
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
    ssl_context: ssl.SSLContext | None = field(default=None, repr=False, compare=False)  # default: httpx's
    shard: tuple[int, int] | None = None  # (i, n): run every n-th experiment from the i-th
    gpu: str | None = None
    # An explicit run list (a `scm-xl plan` file); when given, it replaces the product of
    # models x concurrency x max_tokens (x prompt levels) x repeats.
    experiments: tuple[MatrixPoint, ...] | None = None
    # Prompt levels (collect/prompts.py): synthetic prompts of these server-counted lengths, a
    # factor like max_tokens; or the user's own prompts from `prompts_path`, grouped into at most
    # `prompt_levels` levels. Either excludes `prompt` (the one plain prompt).
    prompt_tokens: tuple[int, ...] = ()
    shared_prefix: int = 0  # tokens of synthetic filler shared by every request, before the nonce
    prompts_path: Path | None = None
    prompt_levels: int = 3
    prompt_seed: int | None = None  # the order --prompts prompts are sent in; None: drawn and recorded

    def __post_init__(self) -> None:
        set_ = lambda name, value: object.__setattr__(self, name, value)  # noqa: E731 (frozen)
        if isinstance(self.api_key, str):
            set_("api_key", Secret(self.api_key) if self.api_key else None)
        for name in ("models", "concurrency", "max_tokens", "prompt_tokens"):
            value = getattr(self, name)
            set_(name, (value,) if isinstance(value, (str, int)) else tuple(value))
        set_("results_path", Path(self.results_path))
        if self.requests_path is not None:
            set_("requests_path", Path(self.requests_path))
        if self.prompts_path is not None:
            set_("prompts_path", Path(self.prompts_path))
        if not self.models or any(not isinstance(m, str) or not m.strip() for m in self.models):
            raise UsageError("models must be one or more non-empty names")
        if len(set(self.models)) != len(self.models):
            raise UsageError(f"a model is listed twice: {', '.join(self.models)}")
        check_model_names(self.models if not self.experiments else dict.fromkeys(p.model for p in self.experiments))
        if self.gpu is not None:
            check_cell("gpu", self.gpu)
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
        if self.transport not in TRANSPORTS:
            raise UsageError(f"transport must be one of {', '.join(TRANSPORTS)}, got {self.transport!r}")
        if self.api_key is not None and (problem := key_problem(self.api_key.reveal())) is not None:
            raise UsageError(f"the API key {problem}")
        if self.shard is not None:
            index, count = self.shard
            if not 1 <= index <= count:
                raise UsageError(f"shard must be i/n with 1 <= i <= n, got {index}/{count}")
        if self.resume and self.overwrite:
            raise UsageError("--resume and --force exclude each other")
        self._check_prompts()
        self._check_size()

    def _check_size(self) -> None:
        """The matrix within what scm-xl runs and the workbook holds (matrix.check_matrix_size)."""
        if self.experiments:
            points = self.experiments
            models = len({point.model.strip().casefold() for point in points})
            levels = {point.prompt_level for point in points} - {None}
            prompt_levels = len(levels) if self.prompts_path is None else 1
            check_matrix_size(models=models, concurrency=[point.concurrency for point in points],
                              max_tokens=[point.max_tokens for point in points], prompt_levels=prompt_levels,
                              requests_per_slot=self.requests_per_slot, warmup=self.warmup,
                              experiments=len(points))
            return
        prompt_levels = self.file_prompt_levels if self.prompts_path is not None else len(self.prompt_tokens)
        experiments = (len(self.models) * len(self.concurrency) * len(self.max_tokens) * max(prompt_levels, 1)
                       * self.repeats)
        check_matrix_size(models=len(self.models), concurrency=self.concurrency, max_tokens=self.max_tokens,
                          prompt_levels=prompt_levels, requests_per_slot=self.requests_per_slot, warmup=self.warmup,
                          experiments=experiments)

    def _check_prompts(self) -> None:
        levels = self.prompt_tokens
        if any(isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in levels):
            raise UsageError(f"prompt_tokens must be positive integers, got {list(levels)}")
        if len(set(levels)) != len(levels):
            raise UsageError(f"a prompt level is listed twice: {', '.join(map(str, levels))}")
        planned = self.experiments is not None and any(p.prompt_level is not None for p in self.experiments)
        if self.prompts_path is not None and levels:
            raise UsageError("--prompts and --prompt-tokens exclude each other: --prompts groups the file's "
                             "prompts into --prompt-levels levels by their length")
        if self.prompts_path is not None and planned:
            raise UsageError("--prompts cannot run a plan with prompt levels (prompt_tokens): the file's "
                             "prompts make their own levels; plan without --prompt-tokens")
        if self.prompt != DEFAULT_PROMPT and (levels or planned or self.prompts_path is not None):
            other = "--prompts" if self.prompts_path is not None else "--prompt-tokens"
            raise UsageError(f"--prompt and {other} exclude each other: --prompt sends one fixed prompt, "
                             f"{other} prompts of chosen lengths")
        if self.shared_prefix < 0:
            raise UsageError(f"shared_prefix must be >= 0, got {self.shared_prefix}")
        if self.shared_prefix and not (levels or planned):
            raise UsageError("--shared-prefix needs --prompt-tokens: it shares the start of the synthetic prompts")
        if self.prompt_levels < 1:
            raise UsageError(f"prompt_levels must be >= 1, got {self.prompt_levels}")
        smallest = min(levels) if levels else min((p.prompt_level for p in self.experiments or ()
                                                   if p.prompt_level is not None), default=None)
        if self.shared_prefix and smallest is not None and self.shared_prefix >= smallest:
            raise UsageError(f"--shared-prefix {self.shared_prefix} must be smaller than the smallest prompt "
                             f"level ({smallest}): the nonce and the rest of the prompt follow it")

    @property
    def file_prompt_levels(self) -> int:
        """How many levels a --prompts file is grouped into: one for a plan's run list (the plan
        fixes the experiments), else `prompt_levels`."""
        return 1 if self.experiments else self.prompt_levels

    @property
    def uses_prompt_levels(self) -> bool:
        """Whether requests get prompts of measured lengths (synthetic or from a file), not `prompt`."""
        return bool(self.prompt_tokens) or self.prompts_path is not None or (
            self.experiments is not None and any(p.prompt_level is not None for p in self.experiments))

    @property
    def requests_csv(self) -> Path:
        """The per-request CSV: `requests_path`, else requests.csv beside results.csv
        (or NAME.requests.csv beside NAME.csv)."""
        if self.requests_path is not None:
            return self.requests_path
        stem = self.results_path.stem
        return self.results_path.with_name("requests.csv" if stem == "results" else f"{stem}.requests.csv")


def matrix_points(config: CollectConfig, prompt_levels: Sequence[int] | None = None) -> list[MatrixPoint]:
    """The experiments this run covers, in run order: those of `whole_matrix`, then its shard,
    if any."""
    points = whole_matrix(config, prompt_levels)
    return shard_points(points, *config.shard) if config.shard is not None else points


def whole_matrix(config: CollectConfig, prompt_levels: Sequence[int] | None = None) -> list[MatrixPoint]:
    """Every experiment of the matrix, in run order, before any shard: an explicit run list as
    given, else the full factorial (models, concurrency, max_tokens, prompt levels, repeats).

    `prompt_levels` are the levels a --prompts file's groups measured (at pre-flight); before
    that, a --prompts run's points hold the placeholders 1..prompt_levels. A plan's run list
    without prompt levels takes the one level a --prompts file then makes."""
    levels: Sequence[int] = config.prompt_tokens
    if config.prompts_path is not None:
        levels = tuple(prompt_levels) if prompt_levels is not None else tuple(range(1, config.file_prompt_levels + 1))
    if config.experiments:
        points = list(config.experiments)
        if config.prompts_path is not None:
            points = [dataclasses.replace(point, prompt_level=levels[0]) for point in points]
    else:
        points = full_factorial(config.models, config.concurrency, config.max_tokens, config.repeats, levels)
    return points
