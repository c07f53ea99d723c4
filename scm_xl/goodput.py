"""Goodput by the DistServe definition: per-request SLOs, attainment with a Wilson interval, and
the inverse under an SLO (no printing; the CLI and the workbook show what these return).

Why: scm-xl's other latency limits (constrained.py) are per-experiment P95s, which no peer
uses. vLLM (`--goodput`), GuideLLM and AIPerf (`max-goodput-under-slo`) judge each request: a
request is *good* only when every threshold of the SLO holds for it. Their figures and these
line up.

SLO: any subset of three per-request thresholds, in seconds, each met when the value is at
or under it (`<=`, as vLLM compares):

    ttft   time to first token (scm-xl's clock starts when the request fell due, so client
           queueing and 429 retry waits count, as a user sees them)
    tpot   time per output token after the first: (latency - ttft) / (output_tokens - 1).
           With one output token (or none) TPOT is undefined and the threshold holds
           vacuously, as in vLLM (there is no second token to be late)
    e2el   end-to-end latency of the request

A failed request (status failed, or rate_limited that gave up) is a miss whatever its times.
A successful request whose value is unmeasured (no first token arrived, so no TTFT; no TTFT
or latency with two or more tokens, so no TPOT) misses that threshold: it cannot be shown to
hold. Warm-up requests are left out, as the results row leaves them out.

Per experiment: *attainment* = good requests / measured requests, with a Wilson score
interval at WILSON_CONFIDENCE; *goodput* = output tokens of the good requests / the results
row's total_time_s, the same wall time its TPS divides by (so goodput <= TPS: both sum the
same requests' completion tokens, which `evaluate` checks); *binding* = what misses most.

The inverse (`solve_slo`) searches the measured cells only (model x concurrency x max_tokens at
one prompt level, repeats pooled): a cell *meets* the SLO when the lower end of its attainment
interval is at or above the attainment target, which takes enough requests (`requests_needed`).
"""

from __future__ import annotations

import csv
import io
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from statistics import NormalDist
from typing import Any

from scm_xl.errors import InputError, UsageError
from scm_xl.input_files import read_capped
from scm_xl.slo_texts import REASONS, Text

TTFT, TPOT, E2EL = "ttft", "tpot", "e2el"
THRESHOLDS: tuple[str, ...] = (TTFT, TPOT, E2EL)
FAILED = "failed"  # a miss that no threshold explains: the request did not succeed
SAMPLE_SIZE = "sample_size"  # no request missed, but too few to prove the attainment target
TARGET_TPS = "target_tps"  # every cheaper cell that meets the SLO falls short of the target
DEFAULT_ATTAINMENT = 0.95  # the share of good requests an SLO asks for (AIPerf's default too)
# One confidence for every attainment interval (two-sided; GuideLLM's Wilson interval too).
WILSON_CONFIDENCE = 0.95
# vLLM's --goodput KEY:VALUE counts milliseconds; scm-xl's plain numbers are seconds. A plain
# colon-spelt value this large is refused as ambiguous: as seconds it is implausible for a
# per-request threshold, as vLLM's milliseconds it is plausible (ttft:500 is half a second).
AMBIGUOUS_COLON_VALUE = 10.0
# The most of a requests CSV read (one line per request: a few million requests).
MAX_REQUESTS_BYTES = 512 * 1024 * 1024
# The requests-CSV columns goodput reads (scm_xl.collect.records.REQUEST_COLUMNS names them all).
NEEDED_COLUMNS: tuple[str, ...] = ("exp_id", "warmup", "status", "error_class", "ttft_s", "latency_s",
                                   "prompt_tokens", "completion_tokens")

# What each name means, for people (the JSON keeps the names); Chinese: slo_texts.REASONS, the one
# home of both languages.
REASON_WORDS: dict[str, str] = {name: REASONS["en"][name] for name in (*THRESHOLDS, FAILED, SAMPLE_SIZE, TARGET_TPS)}


_ITEM = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*([=:])\s*([^\s]*?)\s*(ms|s)?\s*", re.IGNORECASE)
_NUMBER = re.compile(r"[+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")


# ---------------------------------------------------------------------------
# The SLO
# ---------------------------------------------------------------------------

@dataclass(frozen=True, kw_only=True)
class Slo:
    """Per-request thresholds in seconds (None: no threshold) and the attainment target."""

    ttft_s: float | None = None
    tpot_s: float | None = None
    e2el_s: float | None = None
    attainment: float = DEFAULT_ATTAINMENT

    def __post_init__(self) -> None:
        for name, value in self.thresholds():
            if not (math.isfinite(value) and value > 0):
                raise UsageError(f"SLO {name} threshold must be a positive number of seconds, got {value}")
        if not self.thresholds():
            raise UsageError("an SLO needs at least one threshold (ttft, tpot or e2el)")
        # 1.0 cannot be proven: a Wilson lower bound stays below 1 at any sample size
        if not (math.isfinite(self.attainment) and 0 < self.attainment < 1):
            raise UsageError(f"SLO attainment must be between 0 and 1 (exclusive), got {self.attainment}")

    def thresholds(self) -> tuple[tuple[str, float], ...]:
        """(name, seconds) of the thresholds set, in THRESHOLDS order."""
        values = {TTFT: self.ttft_s, TPOT: self.tpot_s, E2EL: self.e2el_s}
        return tuple((name, value) for name in THRESHOLDS if (value := values[name]) is not None)

    def describe(self) -> str:
        """The SLO as vLLM/GuideLLM spell it, in seconds, with its target: "ttft=0.5,e2el=10 @ 95%"."""
        return ",".join(f"{name}={value:g}" for name, value in self.thresholds()) + f" @ {self.attainment:.0%}"


def parse_slo(text: str, attainment: float = DEFAULT_ATTAINMENT, *, option: str = "--slo") -> Slo:
    """An SLO from `ttft=0.5,tpot=0.05,e2el=10` (seconds; `ttft:0.5` as vLLM spells it, `500ms`
    for milliseconds, items separated by commas or spaces). UsageError names the bad item."""
    items = [item for item in re.split(r"[,\s]+", re.sub(r"\s*([=:])\s*", r"\1", text.strip())) if item]
    if not items:
        raise UsageError(f"{option}: empty: give thresholds like ttft=0.5,tpot=0.05,e2el=10 (seconds)")
    values: dict[str, float] = {}
    for item in items:
        match = _ITEM.fullmatch(item)
        if match is None:
            raise UsageError(f"{option}: {item!r} is not KEY=VALUE (keys: {', '.join(THRESHOLDS)}; "
                             "e.g. ttft=0.5 or ttft=500ms)")
        key, sign, number, unit = match.group(1).lower(), match.group(2), match.group(3), match.group(4)
        if key not in THRESHOLDS:
            raise UsageError(f"{option}: {item!r}: unknown threshold {key!r} (use {', '.join(THRESHOLDS)})")
        if key in values:
            raise UsageError(f"{option}: {item!r}: {key} is given twice")
        if not _NUMBER.fullmatch(number):
            raise UsageError(f"{option}: {item!r}: {number!r} is not a positive number of seconds "
                             "(or of milliseconds with ms)")
        value = float(number)
        if not value > 0 or not math.isfinite(value):
            raise UsageError(f"{option}: {item!r}: a threshold must be a positive, finite number")
        if unit is None and sign == ":" and value >= (AMBIGUOUS_COLON_VALUE if key != TPOT else 1.0):
            raise UsageError(f"{option}: {item!r} is ambiguous: scm-xl reads a plain number as seconds "
                             f"({value:g} s), vLLM's --goodput as milliseconds; write {key}={value:g}s "
                             f"or {key}={value:g}ms")
        values[key] = value / 1000 if (unit or "").lower() == "ms" else value
    return Slo(ttft_s=values.get(TTFT), tpot_s=values.get(TPOT), e2el_s=values.get(E2EL), attainment=attainment)


# ---------------------------------------------------------------------------
# Wilson interval
# ---------------------------------------------------------------------------

def _z(confidence: float) -> float:
    return NormalDist().inv_cdf(1 - (1 - confidence) / 2)


def wilson_interval(good: int, total: int, confidence: float = WILSON_CONFIDENCE) -> tuple[float, float]:
    """The Wilson score interval of good/total (statsmodels' proportion_confint(method="wilson")).

    Why Wilson: unlike the normal interval it stays inside [0, 1] and does not collapse to a
    point at 0 or all requests good, which is where attainment usually sits."""
    if total <= 0 or not 0 <= good <= total:
        raise ValueError(f"need 0 <= good <= total and total > 0, got {good}/{total}")
    z2 = _z(confidence) ** 2
    share = good / total
    denominator = 1 + z2 / total
    centre = (share + z2 / (2 * total)) / denominator
    half = math.sqrt(share * (1 - share) / total + z2 / (4 * total * total)) * _z(confidence) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


def requests_needed(attainment: float, confidence: float = WILSON_CONFIDENCE) -> int:
    """The fewest requests whose Wilson lower bound reaches `attainment` when every one is good:
    n / (n + z^2) >= a, so n >= a z^2 / (1 - a). Fewer can never prove the target."""
    need = math.ceil(attainment * _z(confidence) ** 2 / (1 - attainment))
    while need > 1 and wilson_interval(need - 1, need - 1, confidence)[0] >= attainment:
        need -= 1
    while wilson_interval(need, need, confidence)[0] < attainment:
        need += 1
    return need


# ---------------------------------------------------------------------------
# The per-request CSV
# ---------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class RequestSample:
    """One measured request as goodput needs it (times in seconds from when it fell due)."""

    exp_id: str
    succeeded: bool
    ttft_s: float | None
    latency_s: float | None
    output_tokens: int
    prompt_tokens: int | None
    line: int = 0  # its line in the requests CSV; 0 when built in code

    @property
    def tpot_s(self) -> float | None:
        """(latency - ttft) / (output_tokens - 1); None when undefined (one token or fewer) or unmeasured."""
        if self.output_tokens <= 1 or self.ttft_s is None or self.latency_s is None:
            return None
        return (self.latency_s - self.ttft_s) / (self.output_tokens - 1)


def misses(sample: RequestSample, slo: Slo) -> tuple[str, ...]:
    """What the request misses: (FAILED,) for a failed request, else the thresholds over their
    limit or unmeasured; () for a good request."""
    if not sample.succeeded:
        return (FAILED,)
    missed = []
    for name, limit in slo.thresholds():
        if name == TPOT:
            if sample.output_tokens <= 1:
                continue  # undefined: holds vacuously
            value = sample.tpot_s
        else:
            value = sample.ttft_s if name == TTFT else sample.latency_s
        if value is None or value > limit:
            missed.append(name)
    return tuple(missed)


@dataclass(frozen=True)
class RequestSamples:
    """The measured (non-warm-up) requests of a requests CSV by exp_id, or why there are none."""

    path: Path
    by_exp: Mapping[str, Sequence[RequestSample]]
    reason: str | None = None  # set when by_exp is empty for a reason callers should say
    dropped_line: int | None = None  # a half-written last line (a collector killed mid-write)


def requests_path_for(results_path: str | Path) -> Path:
    """Where `scm-xl collect` writes the requests CSV for `results_path` by default (its one home
    is CollectConfig.requests_csv: requests.csv beside results.csv, NAME.requests.csv beside NAME.csv)."""
    from scm_xl.collect.config import CollectConfig

    return CollectConfig(results_path=Path(results_path)).requests_csv


def read_samples(results_path: str | Path, requests_path: str | Path | None = None) -> RequestSamples:
    """The requests CSV beside `results_path` (or `requests_path`), read for goodput.

    Absent, empty, or not a requests CSV (a needed column missing): no samples and a `reason`,
    so callers fall back to the per-experiment percentiles and say why. A requests CSV with a bad
    cell: InputError naming path, line and column (damaged data is not to be skipped quietly)."""
    path = Path(requests_path) if requests_path is not None else requests_path_for(results_path)
    if not path.exists():
        return RequestSamples(path, {}, reason=Text("no_requests_csv", path=path))
    text = _decode(path, read_capped(path, MAX_REQUESTS_BYTES, "a requests CSV"))
    if not text.strip():
        return RequestSamples(path, {}, reason=Text("requests_empty", path=path))
    try:
        by_exp = _parse_samples(path, text)
        dropped = None
    except InputError as exc:
        # a collector killed while appending leaves a last line without its newline (and without
        # its results row): drop that line, as --resume does; a bad line elsewhere is an error
        last = text.count("\n") + 1
        if text.endswith(("\n", "\r")) or "\n" not in text or exc.line != last:
            raise
        by_exp, dropped = _parse_samples(path, text[:text.rindex("\n") + 1]), last
    if isinstance(by_exp, str):
        return RequestSamples(path, {}, reason=by_exp)
    reason = None if by_exp else Text("no_measured_requests", path=path)
    return RequestSamples(path, by_exp, reason=reason, dropped_line=dropped)


def _parse_samples(path: Path, text: str) -> dict[str, list[RequestSample]] | str:
    """The measured samples by exp_id, or why the text is not a requests CSV; InputError at a bad line."""
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    line = 1
    try:
        header = [cell.strip() for cell in next(reader, [])]
        absent = [column for column in NEEDED_COLUMNS if column not in header]
        if absent:
            return Text("not_requests_csv", path=path, columns=", ".join(absent))
        index = {column: header.index(column) for column in NEEDED_COLUMNS}
        by_exp: dict[str, list[RequestSample]] = {}
        line = reader.line_num + 1
        for cells in reader:
            here, line = line, reader.line_num + 1
            if not any(cell.strip() for cell in cells):
                continue
            if len(cells) != len(header):
                raise InputError(f"expected {len(header)} fields (as in the header) but found {len(cells)}",
                                 path=str(path), line=here)
            sample = _sample(path, here, {column: cells[i].strip() for column, i in index.items()})
            if sample is not None:
                by_exp.setdefault(sample.exp_id, []).append(sample)
    except csv.Error as exc:
        raise InputError(f"bad CSV: {exc}", path=str(path), line=line) from None
    return by_exp


def _decode(path: Path, data: bytes) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError("not UTF-8 text (scm-xl collect writes its requests CSV in UTF-8)", path=str(path),
                         line=data.count(b"\n", 0, exc.start) + 1) from None


def _sample(path: Path, line: int, cell: dict[str, str]) -> RequestSample | None:
    """One row as a sample; None for a warm-up request. The status rule is the collector's:
    succeeded = status ok, or rate_limited (a 429 retried) with no error_class."""
    def fail(column: str, problem: str) -> InputError:
        return InputError(problem, path=str(path), line=line, column=column)

    warmup = cell["warmup"].lower()
    if warmup not in ("true", "false"):
        raise fail("warmup", f"expected true or false, got {cell['warmup']!r}")
    if warmup == "true":
        return None
    status = cell["status"]
    if status not in ("ok", "rate_limited", "failed"):
        raise fail("status", f"expected ok, rate_limited or failed, got {status!r}")

    def number(column: str, whole: bool = False) -> float | None:
        text = cell[column]
        if not text:
            return None
        if not _NUMBER.fullmatch(text) or (whole and not text.isdigit()):
            raise fail(column, f"expected a {'whole ' if whole else ''}number that is not negative, got {text!r}")
        value = float(text)
        if not math.isfinite(value):
            raise fail(column, f"not a finite number: {text!r}")
        return value

    tokens = number("completion_tokens", whole=True)
    if tokens is None:
        raise fail("completion_tokens", "required value is blank")
    prompt = number("prompt_tokens", whole=True)
    if not cell["exp_id"]:
        raise fail("exp_id", "required value is blank")
    return RequestSample(exp_id=cell["exp_id"], succeeded=status == "ok" or (status == "rate_limited"
                                                                            and not cell["error_class"]),
                         ttft_s=number("ttft_s"), latency_s=number("latency_s"), output_tokens=int(tokens),
                         prompt_tokens=None if prompt is None else int(prompt), line=line)


# ---------------------------------------------------------------------------
# Per experiment
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Tally:
    """The sums an attainment and a goodput are made of; experiments of one cell add up."""

    requests: int
    good: int
    output_tokens: int
    good_output_tokens: int
    wall_s: float
    misses: tuple[tuple[str, int], ...]  # (what, requests), every threshold of the SLO and FAILED
    latency_sum_s: float  # over every request with a latency (each occupies its slot that long)
    latency_count: int
    prompt_token_sum: int  # over the requests with a server-counted prompt
    prompt_count: int

    def __add__(self, other: Tally) -> Tally:
        counts = dict(self.misses)
        for name, count in other.misses:
            counts[name] = counts.get(name, 0) + count
        return Tally(self.requests + other.requests, self.good + other.good,
                     self.output_tokens + other.output_tokens, self.good_output_tokens + other.good_output_tokens,
                     self.wall_s + other.wall_s, tuple(counts.items()), self.latency_sum_s + other.latency_sum_s,
                     self.latency_count + other.latency_count, self.prompt_token_sum + other.prompt_token_sum,
                     self.prompt_count + other.prompt_count)

    @property
    def attainment(self) -> float:
        return self.good / self.requests

    @property
    def interval(self) -> tuple[float, float]:
        """The Wilson interval of the attainment at WILSON_CONFIDENCE."""
        return wilson_interval(self.good, self.requests)

    @property
    def tps(self) -> float:
        """Output tokens per second of wall time: the results row's TPS (pooled: time-weighted)."""
        return self.output_tokens / self.wall_s

    @property
    def goodput_tps(self) -> float:
        """Output tokens of good requests per second of the same wall time."""
        return self.good_output_tokens / self.wall_s

    @property
    def binding(self) -> str | None:
        """What misses most (a threshold, or FAILED); None when nothing missed. Ties: THRESHOLDS order."""
        most = max(self.misses, key=lambda item: item[1], default=None)  # max keeps the first of a tie
        return most[0] if most is not None and most[1] > 0 else None

    @property
    def mean_latency_s(self) -> float | None:
        return self.latency_sum_s / self.latency_count if self.latency_count else None

    @property
    def mean_prompt_tokens(self) -> float | None:
        return self.prompt_token_sum / self.prompt_count if self.prompt_count else None

    @property
    def mean_output_tokens(self) -> float:
        """Output tokens per request, over every request (those TPS counts)."""
        return self.output_tokens / self.requests


def tally(samples: Sequence[RequestSample], slo: Slo, wall_s: float) -> Tally:
    """Count the samples of one experiment against the SLO; `wall_s` is its results row's total_time_s."""
    counts = {name: 0 for name, _ in slo.thresholds()} | {FAILED: 0}
    good = good_tokens = 0
    for sample in samples:
        missed = misses(sample, slo)
        for name in missed:
            counts[name] += 1
        if not missed:
            good += 1
            good_tokens += sample.output_tokens
    latencies = [s.latency_s for s in samples if s.latency_s is not None]
    prompts = [s.prompt_tokens for s in samples if s.succeeded and s.prompt_tokens is not None]
    return Tally(requests=len(samples), good=good, output_tokens=sum(s.output_tokens for s in samples),
                 good_output_tokens=good_tokens, wall_s=wall_s, misses=tuple(counts.items()),
                 latency_sum_s=sum(latencies), latency_count=len(latencies),
                 prompt_token_sum=sum(prompts), prompt_count=len(prompts))


@dataclass(frozen=True)
class ExperimentGoodput:
    """One results row judged request by request."""

    exp_id: str
    model: str
    concurrency: int
    max_tokens: int
    prompt_level: int | None
    repeat: int | None
    tally: Tally

    def meets(self, slo: Slo) -> bool:
        """Whether the lower end of the attainment interval reaches the SLO's target."""
        return self.tally.interval[0] >= slo.attainment


@dataclass(frozen=True)
class GoodputTable:
    """Every results row that could be judged, and why the others could not (exp_id -> reason)."""

    slo: Slo
    experiments: list[ExperimentGoodput]
    unjudged: dict[str, str] = field(default_factory=dict)
    reason: str | None = None  # why none could be judged (the samples' reason, or every row unjudged)


def evaluate(rows: Iterable[Any], samples: RequestSamples, slo: Slo) -> GoodputTable:
    """Judge each results row (`scm_xl.results.ResultRow`) on its requests.

    A row is left unjudged, with a reason, when the requests CSV has no rows for it, or rows
    that are not the ones its totals count (another run's file): then its figures would not be
    the results row's, and goodput could exceed its TPS."""
    rows = list(rows)
    if samples.reason is not None and not samples.by_exp:
        return GoodputTable(slo, [], {row.exp_id: samples.reason for row in rows}, reason=samples.reason)
    judged: list[ExperimentGoodput] = []
    unjudged: dict[str, str] = {}
    for row in rows:
        mine = samples.by_exp.get(row.exp_id)
        if not mine:
            unjudged[row.exp_id] = Text("no_request_rows", exp_id=row.exp_id, path=samples.path)
            continue
        tokens = sum(s.output_tokens for s in mine)
        if len(mine) != row.total_requests or tokens != row.total_output_tokens:
            unjudged[row.exp_id] = Text("not_same_requests", path=samples.path, requests=len(mine),
                                        exp_id=row.exp_id, tokens=tokens, row_requests=row.total_requests,
                                        row_tokens=row.total_output_tokens)
            continue
        judged.append(ExperimentGoodput(exp_id=row.exp_id, model=row.model, concurrency=row.concurrency,
                                        max_tokens=row.max_tokens, prompt_level=row.prompt_level,
                                        repeat=row.repeat, tally=tally(mine, slo, row.total_time_s)))
    reason = None if judged else (samples.reason or Text("none_judged"))
    return GoodputTable(slo, judged, unjudged, reason=reason)


# ---------------------------------------------------------------------------
# The inverse under an SLO
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class SloCell:
    """A measured configuration (model x concurrency x max_tokens at one prompt level), its
    repeats pooled: one attainment over all their requests, TPS and goodput time-weighted; or one
    predicted between measured levels (`predicted_from`)."""

    model: str
    concurrency: int
    max_tokens: int
    prompt_level: int | None
    exp_ids: tuple[str, ...]
    tally: Tally
    meets: bool  # the lower end of the attainment interval reaches the target
    rejected_by: tuple[str, ...]  # () when it meets the SLO; else (binding,) or (SAMPLE_SIZE,)
    # None: measured. Else the measured concurrency whose requests the latency model rescaled to
    # this one (scm_xl.slo_between): a prediction, and every surface says so.
    predicted_from: int | None = None

    @property
    def cost(self) -> tuple[int, int, str]:
        """constrained.py's order on measured cells: fewest slots, then the shorter max_tokens
        (the measured cells carry no C_model, so models are ordered by name)."""
        return (self.concurrency, self.max_tokens, self.model.casefold())

    def as_dict(self) -> dict[str, Any]:
        t = self.tally
        return {"model": self.model, "concurrency": self.concurrency, "max_tokens": self.max_tokens,
                "prompt_level": self.prompt_level, "exp_ids": list(self.exp_ids), "requests": t.requests,
                "good": t.good, "attainment": t.attainment, "attainment_interval": list(t.interval),
                "tps": t.tps, "goodput_tps": t.goodput_tps, "misses": dict(t.misses), "binding": t.binding,
                "meets_slo": self.meets, "rejected_by": list(self.rejected_by),
                "predicted_from": self.predicted_from}


def cells(experiments: Iterable[ExperimentGoodput], slo: Slo) -> list[SloCell]:
    """The experiments pooled per configuration, in cost order."""
    groups: dict[tuple[str, int, int, int | None], list[ExperimentGoodput]] = {}
    for experiment in experiments:
        key = (experiment.model.casefold(), experiment.concurrency, experiment.max_tokens, experiment.prompt_level)
        groups.setdefault(key, []).append(experiment)
    result = []
    for members in groups.values():
        pooled = members[0].tally
        for member in members[1:]:
            pooled = pooled + member.tally
        meets = pooled.interval[0] >= slo.attainment
        rejected: tuple[str, ...] = () if meets else ((pooled.binding,) if pooled.binding else (SAMPLE_SIZE,))
        first = members[0]
        result.append(SloCell(model=first.model, concurrency=first.concurrency, max_tokens=first.max_tokens,
                              prompt_level=first.prompt_level, exp_ids=tuple(m.exp_id for m in members),
                              tally=pooled, meets=meets, rejected_by=rejected))
    return sorted(result, key=lambda c: c.cost)


def select_cells(experiments: Iterable[ExperimentGoodput], slo: Slo, *, model: str | None = None,
                 prompt_level: int | None = None) -> list[SloCell]:
    """The cells a search may choose from: one model when given, one prompt level (the workload's
    prompt length is not a knob: UsageError when the experiments span several and none is given)."""
    chosen = [e for e in experiments if model is None or e.model.casefold() == model.casefold()]
    levels = sorted({e.prompt_level for e in chosen}, key=lambda v: (v is not None, v or 0))
    if prompt_level is None and len(levels) > 1:
        raise UsageError("the experiments span prompt levels "
                         f"{', '.join('none' if v is None else str(v) for v in levels)}: choose the workload's one")
    if prompt_level is not None:
        chosen = [e for e in chosen if e.prompt_level == prompt_level]
    return cells(chosen, slo)


@dataclass
class SloSolution:
    """The cheapest measured cell meeting the SLO and the target TPS, and the dual."""

    slo: Slo
    target_tps: float
    cheapest: SloCell | None  # None: no measured cell meets both
    binding: tuple[str, ...]  # what stopped a cheaper cell that reaches the target (TARGET_TPS: none did)
    blocked: SloCell | None  # that cheaper cell
    best: SloCell | None  # the dual: the most goodput among cells meeting the SLO
    best_binding: tuple[str, ...]  # what stopped a cell with more goodput
    best_blocked: SloCell | None
    notes: list[str]
    candidates: list[SloCell] = field(repr=False, default_factory=list)

    @property
    def reachable(self) -> bool:
        return self.cheapest is not None

    def report(self) -> dict[str, Any]:
        return {"slo": self.slo.describe(), "target_tps": self.target_tps, "reachable": self.reachable,
                "confidence": WILSON_CONFIDENCE,
                "cheapest": self.cheapest.as_dict() if self.cheapest else None, "binding": list(self.binding),
                "blocked": self.blocked.as_dict() if self.blocked else None,
                "best": self.best.as_dict() if self.best else None, "best_binding": list(self.best_binding),
                "notes": list(self.notes)}


def solve_slo(candidates: Sequence[SloCell], target_tps: float, slo: Slo) -> SloSolution:
    """The cheapest cell whose attainment interval's lower end reaches the target attainment and
    whose TPS reaches `target_tps`; the *binding* is what rejected the cheapest cell that reaches
    the TPS but not the SLO (its most-missed threshold, FAILED or SAMPLE_SIZE), or TARGET_TPS when
    every cheaper cell falls short. The dual: the most goodput among cells meeting the SLO."""
    if not (math.isfinite(target_tps) and target_tps > 0):
        raise ValueError(f"target TPS must be positive, got {target_tps}")
    ordered = sorted(candidates, key=lambda c: c.cost)
    reaching = [c for c in ordered if c.tally.tps >= target_tps]
    cheapest = next((c for c in reaching if c.meets), None)
    stopped = [c for c in reaching if not c.meets and (cheapest is None or c.cost < cheapest.cost)]
    blocked = stopped[0] if stopped else None
    binding = blocked.rejected_by if blocked else (TARGET_TPS,)

    meeting = [c for c in ordered if c.meets]
    best = max(meeting, key=lambda c: c.tally.goodput_tps, default=None)  # max keeps the first (cheapest) tie
    higher = [c for c in ordered if not c.meets and (best is None or c.tally.goodput_tps > best.tally.goodput_tps)]
    best_blocked = max(higher, key=lambda c: c.tally.goodput_tps, default=None)
    best_binding = best_blocked.rejected_by if best_blocked else ()

    notes: list[str] = []  # Texts: English, and slo_texts.say(note, lang) in another language
    need = requests_needed(slo.attainment)
    few = [c for c in ordered if c.tally.requests < need]
    if few:
        notes.append(Text("few_requests", few=len(few), need=need, conf=WILSON_CONFIDENCE,
                          attainment=slo.attainment))
    if cheapest is None and blocked is None:
        notes.append(Text("none_reaches", target=target_tps))
    return SloSolution(slo=slo, target_tps=target_tps, cheapest=cheapest, binding=binding, blocked=blocked,
                       best=best, best_binding=best_binding, best_blocked=best_blocked, notes=notes,
                       candidates=ordered)
