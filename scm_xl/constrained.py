"""The inverse across every knob: the cheapest configuration that meets a target TPS (no I/O).

A *surface* is a calibrated model seen as a forecast callable (concurrency, max_tokens,
model) -> TPS, from either method: `chain_surface(calibration)` or `lsq_surface(fit)`
(which adds 90% intervals). Concurrency between measured levels is interpolated in
log-log space (ln f linear in ln c: `lsq.concurrency_blend`) and marked
`interpolated`; outside the measured range it is extrapolated along the line through
the two nearest levels, only when `extrapolate=True`, and marked `extrapolated`.

Candidates: every model whose C_model and every max_tokens whose K_len is known, at
every whole concurrency from 1 to `search_concurrency` (default: 4 x the highest
measured level, or the max-concurrency constraint if larger).

Constraints (a candidate failing one is *rejected by* it):

    model / max_tokens        not in the allowed sets
    max_concurrency           above the limit
    rate_limit                at or above the provider's rate limit: the lowest
                              concurrency at which a row of that model saw HTTP 429
                              (rate_limited_requests > 0), or the given limit
    extrapolation             outside the measured concurrency range without extrapolate
    latency_p95 / ttft_p95    the measured P95 of that (model, concurrency, max_tokens)
                              exceeds the limit (median over fault-free replicates)
    latency_p95_unmeasured /  no measured percentile for that cell (for example an
    ttft_p95_unmeasured       interpolated concurrency): it cannot be proven to meet
                              the limit, so it is rejected

Cost: fewest concurrent slots first (the resource a deployment pays for), then the
cheaper model (smaller C_model, i.e. the faster one), then the shorter max_tokens,
then the model name. The cheapest candidate that passes every constraint and whose
predicted TPS (with `conservative=True`: the lower end of its 90% interval for the
mean) reaches the target is the answer. The *binding* constraint is what rejected the
cheapest candidate that would have reached the target but did not pass; when every
cheaper candidate simply falls short, the binding constraint is the target itself
("target_tps"). The dual answer is the highest predicted TPS among candidates that
pass every constraint, with what binds it the same way.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from statistics import median
from typing import Any, Callable, Iterable, Sequence

from scm_xl.lsq import Forecast, LsqFit, concurrency_blend
from scm_xl.model import Calibration, c_label, f_label, k_label, same_model
from scm_xl.results import has_fault
from scm_xl.rules import Lang
from scm_xl.slo_texts import Joined, Text

SEARCH_FACTOR = 4

MODEL = "model"
MAX_TOKENS = "max_tokens"
MAX_CONCURRENCY = "max_concurrency"
RATE_LIMIT = "rate_limit"
EXTRAPOLATION = "extrapolation"
LATENCY_P95 = "latency_p95"
LATENCY_P95_UNMEASURED = "latency_p95_unmeasured"
TTFT_P95 = "ttft_p95"
TTFT_P95_UNMEASURED = "ttft_p95_unmeasured"
TARGET_TPS = "target_tps"

# What each name means, for people (the JSON keeps the names).
REASON_WORDS = {
    MODEL: "the model is not among the allowed ones",
    MAX_TOKENS: "max_tokens is not among the allowed values",
    MAX_CONCURRENCY: "above the highest concurrency allowed",
    RATE_LIMIT: "at or above the concurrency where the provider answers HTTP 429",
    EXTRAPOLATION: "outside the measured concurrency range (extrapolation not allowed)",
    LATENCY_P95: "P95 latency (measured, or predicted by the latency model) over the limit",
    LATENCY_P95_UNMEASURED: "no measured P95 latency for that configuration, so the limit cannot be proven",
    TTFT_P95: "P95 time to first token (measured, or predicted by the latency model) over the limit",
    TTFT_P95_UNMEASURED: "no measured P95 time to first token for that configuration, so the limit cannot be proven",
    TARGET_TPS: "the target itself: every cheaper configuration is predicted to fall short",
}


def describe_reasons(names: Iterable[str], lang: Lang = "en") -> str:
    """Machine names ("latency_p95_unmeasured") as words in `lang` (Chinese: report_texts.REASON_NAMES_ZH,
    the command line's); "" for none."""
    if lang != "en":
        from scm_xl.report_texts import describe_reasons as in_words

        return in_words(tuple(names), lang)
    return "; ".join(REASON_WORDS.get(name, name) for name in names)


ForecastFn = Callable[[int, int, str, bool], Forecast]


@dataclass(frozen=True)
class Surface:
    """A calibrated model as a forecast callable plus the levels it was measured at."""

    method: str  # "chain" | "lsq"
    forecast: ForecastFn = field(repr=False)  # (concurrency, max_tokens, model, extrapolate)
    concurrency_levels: tuple[int, ...]  # measured levels with a known f
    max_tokens_levels: tuple[int, ...]  # lengths with a known K_len
    models: tuple[tuple[str, float], ...]  # (model, C_model) with a known C_model
    # The latency model predicts P95 latency and TTFT at every candidate; the others are
    # judged on the measured percentiles of the cell.
    predicts_percentiles: bool = False
    knee: float | None = None  # where throughput stops growing (a fitted slot limit), when known


def chain_surface(cal: Calibration, prompt_tokens: float | None = None) -> Surface:
    """The chain's calibration as a surface (no intervals), at a workload's prompt length
    (K_in(P), None: the base level)."""
    known = tuple(level.concurrency for level in cal.concurrency_levels if level.f is not None)
    k_in = cal.k_in_at(prompt_tokens)

    def forecast(concurrency: int, max_tokens: int, model: str, extrapolate: bool) -> Forecast:
        blend = concurrency_blend(concurrency, known, extrapolate=extrapolate)
        k, c = cal.k_len(max_tokens), cal.c_model(model)
        missing = tuple(label for ok, label in (
            (blend is not None, f_label(concurrency)), (k is not None, k_label(max_tokens)),
            (k_in is not None, f"K_in({prompt_tokens:g})" if prompt_tokens is not None else "K_in"),
            (c is not None, c_label(model)), (cal.base_tps is not None, "BaseTPS")) if not ok)
        if missing or blend is None or k is None or c is None or cal.base_tps is None or k_in is None:
            return Forecast(concurrency, max_tokens, model, None, missing=missing)
        known_f = {level: value for level, value in ((lv, cal.f(lv)) for lv, _ in blend.weights) if value is not None}
        log_f = sum(weight * math.log(known_f[level]) for level, weight in blend.weights)
        return Forecast(concurrency, max_tokens, model, cal.base_tps * math.exp(log_f) * k * k_in / c,
                        interpolated=blend.interpolated, extrapolated=blend.extrapolated)

    return Surface(
        method="chain", forecast=forecast, concurrency_levels=known,
        max_tokens_levels=tuple(level.max_tokens for level in cal.length_levels if level.k_len is not None),
        models=tuple((m.model, m.c_model) for m in cal.models if m.c_model is not None),
    )


def latency_surface(latency: Any, prompt_tokens: float | None, max_tokens_levels: Sequence[int]) -> Surface:
    """The latency model (`scm_xl.latency.LatencyModel`) as a surface for a workload's prompt length:
    continuous in concurrency (interpolated between measured levels, extrapolated beyond them
    only when allowed), with predicted P95s."""
    fits = list(latency.fits.values())

    def forecast(concurrency: int, max_tokens: int, model: str, extrapolate: bool) -> Forecast:
        result = latency.forecast(concurrency, max_tokens, model, prompt_tokens)
        if result.tps is None:
            return Forecast(concurrency, max_tokens, model, None, missing=result.missing)
        fit = latency.fit_for(model)
        low, high = fit.concurrency_range
        outside = not low <= concurrency <= high
        if outside and not extrapolate:
            return Forecast(concurrency, max_tokens, model, None, missing=(f"concurrency {concurrency} outside "
                                                                          f"the measured {low}-{high}",),
                            extrapolated=True)
        measured = concurrency in {r.concurrency for r in fit.rows}
        return Forecast(concurrency, max_tokens, model, result.tps, prediction_interval=result.tps_interval,
                        interpolated=not measured and not outside, extrapolated=outside,
                        latency_p95_s=result.latency_p95_s, ttft_p95_s=result.ttft_p95_s)

    top = max((fit.concurrency_range[1] for fit in fits), default=0)
    knees = [fit.knee_limit for fit in fits if fit.knee_limit is not None]
    return Surface(method="latency", forecast=forecast,
                   concurrency_levels=tuple(sorted({r.concurrency for fit in fits for r in fit.rows})) or (top,),
                   max_tokens_levels=tuple(max_tokens_levels), models=tuple((fit.model, 1.0) for fit in fits),
                   predicts_percentiles=True, knee=min(knees) if knees else None)


def lsq_surface(result: LsqFit, prompt_tokens: float | None = None) -> Surface:
    """The least-squares fit as a surface (with 90% intervals where there are residual dof), at a
    workload's prompt length (None: the base level)."""
    cal = result.calibration

    def forecast(concurrency: int, max_tokens: int, model: str, extrapolate: bool) -> Forecast:
        return result.forecast(concurrency, max_tokens, model, extrapolate=extrapolate, prompt_tokens=prompt_tokens)

    return Surface(
        method="lsq", forecast=forecast, concurrency_levels=tuple(result.measured_concurrency_levels()),
        max_tokens_levels=tuple(level.max_tokens for level in cal.length_levels if level.k_len is not None),
        models=tuple((m.model, m.c_model) for m in cal.models if m.c_model is not None),
    )


# ---------------------------------------------------------------------------
# Measurements: percentiles per cell and the rate-limit onset
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class CellPercentiles:
    latency_p95_s: float | None
    ttft_p95_s: float | None
    runs: int


def measured_percentiles(rows: Iterable[Any]) -> dict[tuple[str, int, int], CellPercentiles]:
    """Median over fault-free runs of each cell's measured P95 latency and TTFT."""
    cells: dict[tuple[str, int, int], list[Any]] = {}
    for row in rows:
        if row.total_output_tokens > 0 and not has_fault(row):
            cells.setdefault((row.model.casefold(), row.concurrency, row.max_tokens), []).append(row)
    result = {}
    for key, members in cells.items():
        latency = [v for r in members if (v := getattr(r, "latency_p95_s", None)) is not None]
        ttft = [v for r in members if (v := getattr(r, "ttft_p95_s", None)) is not None]
        result[key] = CellPercentiles(latency_p95_s=median(latency) if latency else None,
                                      ttft_p95_s=median(ttft) if ttft else None, runs=len(members))
    return result


def rate_limit_onsets(rows: Iterable[Any]) -> dict[str, int]:
    """Per model (casefolded): the lowest concurrency at which any row saw HTTP 429."""
    onsets: dict[str, int] = {}
    for row in rows:
        if (getattr(row, "rate_limited_requests", None) or 0) > 0:
            key = row.model.casefold()
            onsets[key] = min(onsets.get(key, row.concurrency), row.concurrency)
    return onsets


# ---------------------------------------------------------------------------
# The solve
# ---------------------------------------------------------------------------

@dataclass(frozen=True, kw_only=True)
class Constraints:
    """Limits on the answer; None means no limit."""

    max_latency_p95_s: float | None = None
    max_ttft_p95_s: float | None = None
    max_concurrency: int | None = None
    max_tokens: tuple[int, ...] | None = None  # allowed set
    models: tuple[str, ...] | None = None  # allowed set (case-insensitive)
    rate_limit_concurrency: int | None = None  # given onset of 429s, for every model (else from the rows)

    def __post_init__(self) -> None:
        for name in ("max_latency_p95_s", "max_ttft_p95_s"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise ValueError(f"{name} must be positive, got {value}")
        for name in ("max_concurrency", "rate_limit_concurrency"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"{name} must be at least 1, got {value}")


@dataclass(frozen=True, kw_only=True)
class SolveRequest:
    """A solve as the user asks it (the CLI's options, parsed): which method, which knobs are fixed."""

    method: str | None = None  # None: the article's inverse unless a constraint asks for the search
    max_tokens: int | None = None  # fixed output length
    model: str | None = None  # fixed model
    allowed_max_tokens: tuple[int, ...] | None = None
    allowed_models: tuple[str, ...] | None = None
    max_latency_p95_s: float | None = None
    max_ttft_p95_s: float | None = None
    max_concurrency: int | None = None
    rate_limit_concurrency: int | None = None
    extrapolate: bool = False
    conservative: bool = False
    prompt_tokens: float | None = None  # the workload's prompt length; None: the base level

    @property
    def searches_every_knob(self) -> bool:
        """Plain requests get the article's inverse; a method, a prompt length or any constraint asks
        for the search."""
        return self.method is not None or self.extrapolate or self.conservative or any(v is not None for v in (
            self.prompt_tokens,
            self.max_latency_p95_s, self.max_ttft_p95_s, self.max_concurrency, self.allowed_max_tokens,
            self.allowed_models, self.rate_limit_concurrency))

    def constraints(self) -> Constraints:
        """The constraints, with a fixed max_tokens or model narrowing the allowed sets."""
        lengths = self.allowed_max_tokens
        if self.max_tokens is not None:
            lengths = (self.max_tokens,) if lengths is None else tuple(v for v in lengths if v == self.max_tokens)
        models = self.allowed_models
        if self.model is not None:
            models = (self.model,) if models is None else tuple(m for m in models if same_model(m, self.model))
        return Constraints(max_latency_p95_s=self.max_latency_p95_s, max_ttft_p95_s=self.max_ttft_p95_s,
                           max_concurrency=self.max_concurrency, max_tokens=lengths, models=models,
                           rate_limit_concurrency=self.rate_limit_concurrency)


def solve_request(request: SolveRequest, target_tps: float, *, calibration: Calibration,
                  statuses: Sequence[Any], settings: Any, rows: Sequence[Any] = (),
                  latency: Any = None) -> ConstrainedSolution:
    """Search every knob with the request's method (chain unless "lsq" or "latency") under its
    constraints. Chain and lsq answer at the request's prompt length through K_in and are judged on
    the percentiles measured at that prompt level (the base one when none is asked); the latency
    model (`latency`, a fitted `scm_xl.latency.LatencyModel`) predicts them for any prompt length."""
    from scm_xl.model import at_base_prompt, base_prompt_level

    method = request.method or "chain"
    if method == "latency":
        lengths = sorted({r.max_tokens for fit in latency.fits.values() for r in fit.rows}
                         | ({request.max_tokens} if request.max_tokens is not None else set()))
        surface = latency_surface(latency, request.prompt_tokens, lengths)
    else:
        # chain and lsq are judged on the measured percentiles at the asked prompt level (the base one
        # when none is asked; the percentiles of an interpolated prompt length are not measured)
        level = base_prompt_level(rows, settings)
        # without prompt levels every row has the one recorded prompt (methods.other_prompt_level said it
        # is this one); an unrecorded prompt proves nothing
        recorded = any(getattr(r, "prompt_tokens", None) is not None for r in rows)
        asked = None if level is None and recorded else request.prompt_tokens
        rows = [r for r in rows if (at_base_prompt(r, level) if asked is None
                                    else getattr(r, "prompt_level", None) == asked)]
        if method == "lsq":
            from scm_xl.lsq import fit

            surface = lsq_surface(fit(statuses, settings), asked)
        else:
            surface = chain_surface(calibration, asked)
    return solve(surface, target_tps, rows=rows, constraints=request.constraints(),
                 extrapolate=request.extrapolate, conservative=request.conservative)


@dataclass(frozen=True)
class Candidate:
    model: str
    concurrency: int
    max_tokens: int
    c_model: float
    tps: float
    mean_interval: tuple[float, float] | None
    prediction_interval: tuple[float, float] | None
    interpolated: bool
    extrapolated: bool
    latency_p95_s: float | None  # measured (predicted by the latency model), None when unknown
    ttft_p95_s: float | None
    rejected_by: tuple[str, ...]

    @property
    def cost(self) -> tuple[int, float, int, str]:
        return (self.concurrency, self.c_model, self.max_tokens, self.model.casefold())

    def as_dict(self) -> dict[str, Any]:
        return {
            "model": self.model, "concurrency": self.concurrency, "max_tokens": self.max_tokens,
            "tps": self.tps,
            "tps_interval": list(self.mean_interval) if self.mean_interval else None,
            "tps_prediction_interval": list(self.prediction_interval) if self.prediction_interval else None,
            "interpolated": self.interpolated, "extrapolated": self.extrapolated,
            "latency_p95_s": self.latency_p95_s, "ttft_p95_s": self.ttft_p95_s,
            "rejected_by": list(self.rejected_by),
        }


@dataclass
class ConstrainedSolution:
    method: str
    target_tps: float
    cheapest: Candidate | None  # None: no candidate meets the target under the constraints
    binding: tuple[str, ...]  # what stopped a cheaper configuration ("target_tps": they fall short)
    blocked: Candidate | None  # that cheaper configuration
    best: Candidate | None  # the dual answer: highest TPS under the constraints
    best_binding: tuple[str, ...]  # what stopped a higher TPS
    best_blocked: Candidate | None
    notes: list[str]  # slo_texts.Text: English (the JSON's), slo_texts.say(note, lang) in another language
    candidates: list[Candidate] = field(repr=False, default_factory=list)

    @property
    def reachable(self) -> bool:
        return self.cheapest is not None

    def report(self) -> dict[str, Any]:
        return {
            "method": self.method, "target_tps": self.target_tps, "reachable": self.reachable,
            "cheapest": self.cheapest.as_dict() if self.cheapest else None,
            "binding": list(self.binding),
            "blocked": self.blocked.as_dict() if self.blocked else None,
            "best": self.best.as_dict() if self.best else None,
            "best_binding": list(self.best_binding),
            "notes": list(self.notes),
        }


def solve(surface: Surface, target_tps: float, *, rows: Sequence[Any] = (),
          constraints: Constraints = Constraints(), extrapolate: bool = False,
          conservative: bool = False, search_concurrency: int | None = None) -> ConstrainedSolution:
    """The cheapest configuration reaching `target_tps` under `constraints`, and the dual.

    `rows` are the measured results rows (for percentiles and the 429 onset).
    """
    if not target_tps > 0:
        raise ValueError(f"target TPS must be positive, got {target_tps}")
    percentiles = measured_percentiles(rows)
    onsets = rate_limit_onsets(rows)
    notes: list[str] = []
    top = max(surface.concurrency_levels, default=0)
    cap = search_concurrency or max(SEARCH_FACTOR * top, constraints.max_concurrency or 0)

    if constraints.max_tokens is not None:
        unmeasured = sorted(set(constraints.max_tokens) - set(surface.max_tokens_levels))
        if unmeasured:
            notes.append(Text("c_not_calibrated", lengths=Joined(tuple(unmeasured))))
    if constraints.rate_limit_concurrency is not None:
        notes.append(Text("c_rate_given", c=constraints.rate_limit_concurrency))
    else:
        for model, _ in surface.models:
            if model.casefold() in onsets:
                notes.append(Text("c_429", c=onsets[model.casefold()], model=model))

    candidates: list[Candidate] = []
    for model, c_model in surface.models:
        for length in surface.max_tokens_levels:
            for concurrency in range(1, cap + 1):
                forecast = surface.forecast(concurrency, length, model, True)
                if forecast.tps is None:
                    continue
                cell = percentiles.get((model.casefold(), concurrency, length))
                if surface.predicts_percentiles:
                    cell = CellPercentiles(latency_p95_s=forecast.latency_p95_s, ttft_p95_s=forecast.ttft_p95_s,
                                           runs=0)
                reasons = _rejections(model, concurrency, length, forecast, cell, constraints, onsets, extrapolate)
                candidates.append(Candidate(
                    model=model, concurrency=concurrency, max_tokens=length, c_model=c_model,
                    tps=forecast.tps, mean_interval=forecast.mean_interval,
                    prediction_interval=forecast.prediction_interval, interpolated=forecast.interpolated,
                    extrapolated=forecast.extrapolated,
                    latency_p95_s=cell.latency_p95_s if cell else None,
                    ttft_p95_s=cell.ttft_p95_s if cell else None, rejected_by=reasons))
    candidates.sort(key=lambda c: c.cost)

    if conservative and not any(c.mean_interval for c in candidates):
        notes.append(Text("c_no_intervals"))

    def reaches(candidate: Candidate) -> bool:
        if conservative and candidate.mean_interval is not None:
            return candidate.mean_interval[0] >= target_tps
        return candidate.tps >= target_tps

    reaching = [c for c in candidates if reaches(c)]
    passing = [c for c in candidates if not c.rejected_by]
    cheapest = next((c for c in reaching if not c.rejected_by), None)
    stopped = [c for c in reaching if c.rejected_by and (cheapest is None or c.cost < cheapest.cost)]
    blocked = stopped[0] if stopped else None
    binding = blocked.rejected_by if blocked else (TARGET_TPS,)

    best = None
    if passing:  # ties in TPS go to the cheaper configuration (candidates are in cost order)
        top_tps = max(c.tps for c in passing)
        best = next(c for c in passing if c.tps == top_tps)
    higher = [c for c in candidates if c.rejected_by and (best is None or c.tps > best.tps)]
    best_blocked = None
    if higher:  # the highest TPS the constraints rule out
        top_tps = max(c.tps for c in higher)
        best_blocked = next(c for c in higher if c.tps == top_tps)
    best_binding = best_blocked.rejected_by if best_blocked else ()

    notes.extend(_explain(cheapest, blocked, candidates, constraints, target_tps, surface.method))
    if surface.knee is not None:
        for label, answer in (("c_the_answer", cheapest), ("c_the_best_answer", best)):
            if answer is not None and answer.concurrency > surface.knee:
                notes.append(Text("c_knee", label=Text(label), knee=surface.knee))
    return ConstrainedSolution(method=surface.method, target_tps=target_tps, cheapest=cheapest,
                               binding=binding, blocked=blocked, best=best, best_binding=best_binding,
                               best_blocked=best_blocked, notes=notes, candidates=candidates)


def _rejections(model: str, concurrency: int, length: int, forecast: Forecast, cell: CellPercentiles | None,
                constraints: Constraints, onsets: dict[str, int], extrapolate: bool) -> tuple[str, ...]:
    reasons = []
    if constraints.models is not None and not any(same_model(model, m) for m in constraints.models):
        reasons.append(MODEL)
    if constraints.max_tokens is not None and length not in constraints.max_tokens:
        reasons.append(MAX_TOKENS)
    if constraints.max_concurrency is not None and concurrency > constraints.max_concurrency:
        reasons.append(MAX_CONCURRENCY)
    onset = constraints.rate_limit_concurrency or onsets.get(model.casefold())
    if onset is not None and concurrency >= onset:
        reasons.append(RATE_LIMIT)
    if forecast.extrapolated and not extrapolate:
        reasons.append(EXTRAPOLATION)
    for limit, measured, over, unmeasured in (
            (constraints.max_latency_p95_s, cell.latency_p95_s if cell else None, LATENCY_P95,
             LATENCY_P95_UNMEASURED),
            (constraints.max_ttft_p95_s, cell.ttft_p95_s if cell else None, TTFT_P95, TTFT_P95_UNMEASURED)):
        if limit is None:
            continue
        if measured is None:
            reasons.append(unmeasured)
        elif measured > limit:
            reasons.append(over)
    return tuple(reasons)


def _describe(c: Candidate) -> Text:
    return Text("c_option", model=c.model, c=c.concurrency, length=c.max_tokens, tps=c.tps)


def _explain(cheapest: Candidate | None, blocked: Candidate | None, candidates: list[Candidate],
             constraints: Constraints, target_tps: float, method: str = "chain") -> list[str]:
    """The search's notes on its answer (slo_texts.Text: English, said in another language with
    slo_texts.say)."""
    notes: list[str] = []
    if cheapest is not None and cheapest.interpolated:
        how = Text("c_how_latency" if method == "latency" else "c_how_chain")
        notes.append(Text("c_between", c=cheapest.concurrency, how=how))
    if cheapest is not None and cheapest.extrapolated:
        notes.append(Text("c_outside", c=cheapest.concurrency))
    if blocked is not None and EXTRAPOLATION in blocked.rejected_by:
        notes.append(Text("c_needs_extrapolation", option=_describe(blocked)))
    if constraints.max_latency_p95_s is not None or constraints.max_ttft_p95_s is not None:
        unproven = sum(1 for c in candidates if LATENCY_P95_UNMEASURED in c.rejected_by
                       or TTFT_P95_UNMEASURED in c.rejected_by)
        if unproven:
            notes.append(Text("c_unproven", n=unproven))
    if cheapest is None and blocked is None:
        notes.append(Text("c_none", target=target_tps))
    return notes
