"""The latency model of the first-principles article (§5.2), fitted to the measurements (no I/O).

One request's latency is its time to first token plus one inter-token gap per further token,

    latency = TTFT(n, P) + (L_out - 1) x ITL(n, P, L_out),        n = min(c, K)

and a closed loop of c clients (what `scm-xl collect` runs) turns latency into throughput by
Little's law: TPS = c x L_out / latency. Above the server's knee K (its slot limit, or where KV
capacity or compute stops the batch from growing) only K requests are served at once; the
others wait, so the served part stays that of K and the wait grows with c:

    wait(c) = w x latency_K x W(c),   TTFT(c) = TTFT_K + wait,   latency(c) = latency_K + wait,
    TPS(c) = K x L_out / latency_K      (flat: throughput stops growing at K)

W is the mean wait in service times. In a steady state W = c / K - 1. A measured run of N requests
starts with K of them served at once and the rest queued, and ends with the queue draining, so its
mean wait is less: with equal service times and first-come-first-served slots, request j (0-based)
starts in service round floor(j / K) and was sent when request j - c ended, which gives

    W(c, K, N) = [F(N) - F(N - c) - (N - c)] / N,    F(M) = K a (a - 1) / 2 + b a,  M = a K + b

(`finite_wait`; W(c, K, N) -> c / K - 1 as N grows). The rows above the knee give w, the share of
that wait the server really showed (1 when service times are equal); forecasts are for a steady
state unless a run's length is given.

The two parts are linear in their coefficients, so each is one least-squares fit a person can
redo (the workbook's latency sheet does, with MINVERSE on the normal equations of columns scaled by
products of the rows' largest batch, prompt and output), weighted by 1/y, i.e. relative errors, so
short and long requests count alike:

    ITL  = a + b n + d n (P + L_out / 2) + e n P / L_out     step time: fixed (weights read once per
                                                            step), per sequence, KV cache read over the
                                                            context, and the prefill of requests joining
                                                            the batch (n / L_out of them per step)
    TTFT = t0 + s ITL + b ITL min(1, n - 1) + p P + q n P  a fixed cost, the decode step the request
                                                            joins (ITL as fitted above), the step in
                                                            progress it waits out when other requests
                                                            are in flight (none at concurrency 1: the
                                                            server is idle when it arrives), prefill at
                                                            a rate per prompt token, and the queueing
                                                            of prefills that arrive together (c x P)

P is the server-counted mean prompt length of the experiment (`prompt_tokens`; the requested
`prompt_level` when the server sent no usage). A term whose factor was never varied (one prompt
level, one concurrency) is left out and the model answers only where that factor was measured.

The knee K is chosen by profile: every candidate (each whole number of slots from the lowest
measured concurrency to below the highest, a geometric grid of them over wide ranges, and "none")
is fitted, and the one with the smallest squared log error of TPS over all rows wins; a finite K
must beat "none" by an F test (one extra parameter, 90%). Its interval is the set of candidates
whose error is not significantly worse (the same F bound): the data cannot tell those apart. Each
model (by name) gets its own fit. The workbook's latency sheet takes K as a value (the one
`fill` profiles, or one a person types) and fits the rest live (`fit_model(..., knee_given=K)`).

Little's law is checked per experiment: c x L_out / TPS should equal the mean latency. A row
where it does not (by more than LITTLE_TOLERANCE) is flagged: the client did not keep its slots
busy (or the run was too short for its start-up and tail to average out), so its TPS is not the
server's; it is still fitted. Experiments with failed or rate-limited requests, no output or a
manual exclude are not fitted.

Hold-out: every fitted row is predicted by a refit without it (knee included), the error in TPS
is the method's leave-one-out error, comparable with the chain's and least squares'.

Long because it is one model: the observations, the two fits, the knee's profile and F test, the
forecast and the hold-out share the terms and their scales, which the workbook's latency sheet
mirrors term by term.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from dataclasses import dataclass, field
from operator import mul
from statistics import median
from typing import Any, Iterable, Sequence

import numpy as np

from scm_xl.lsq import HoldOut, HoldOutRow, _holdout, t_two_sided
from scm_xl.results import has_fault

CONFIDENCE = 0.90
# Little's law: flag an experiment whose c x L_out / TPS and mean latency differ by more than this.
LITTLE_TOLERANCE = 0.15
# Candidate knees (slot counts are whole numbers): every whole number up to this span of
# concurrency, beyond it this many per doubling.
KNEE_MAX_WHOLE = 64
KNEE_GRID_PER_OCTAVE = 8
# Two prompt lengths within this ratio count as one level (a server counts a few tokens either way).
PROMPT_LEVEL_RATIO = 1.05
# A soft knee (no slot limit, compute binds): the concurrency from which doubling gains under this.
SOFT_KNEE_GAIN = 1.10
# The fewest rows of one model the latency model is fitted on: one experiment would fix step(c) and
# t0 exactly (no degree of freedom, nothing to check it against, and a forecast only at that one
# concurrency); below this a model has no fit (`fit_model`: None; the workbook's sheet: unsolved).
MIN_ROWS = 2

ITL_TERMS = ("step", "d", "e")  # step(n): one per measured batch
TTFT_TERMS = ("t0", "s", "b", "p", "q")
TERM_WORDS = {
    "step": "s per decode step at this batch (measured; linear between batches)",
    "d": "s per step per context token",
    "e": "s per step per joining prompt token", "t0": "s fixed",
    "s": "decode steps (the one the request joins)",
    "b": "decode steps waited out (the one in progress when others are in flight; none at concurrency 1)",
    "p": "s per prompt token (prefill)", "q": "s per prompt token per concurrent request (queued prefill)",
}


@dataclass(frozen=True)
class Observation:
    """What the latency model reads of one experiment."""

    exp_id: str
    model: str
    concurrency: int
    max_tokens: int
    prompt: float  # server-counted mean prompt tokens (or the requested level); 0 when unknown
    output: float  # mean output tokens per successful request
    tps: float
    ttft: float  # mean TTFT (P50 where the mean was not recorded)
    latency: float  # mean end-to-end latency (P50 where the mean was not recorded)
    itl: float
    ttft_p95: float | None
    latency_p95: float | None
    requests: int = 0  # requests the experiment sent (its length N in `finite_wait`); 0: unknown

    @property
    def little_ratio(self) -> float:
        """c x L_out / TPS over the measured latency: 1 when the client kept every slot busy."""
        return self.concurrency * self.output / self.tps / self.latency


def observations(rows: Iterable[Any]) -> tuple[list[Observation], list[str]]:
    """The rows the latency model can fit, and why each other row cannot be used (exp_id: reason):
    the physical filter's fault rule, some output, no manual exclude; every prompt level counts."""
    used, skipped = [], []
    for row in rows:
        if has_fault(row) or row.total_output_tokens <= 0 or row.override == "exclude":
            skipped.append(f"{row.exp_id}: not eligible (faults, no output or excluded)")
            continue
        ttft = row.ttft_mean_s if getattr(row, "ttft_mean_s", None) is not None else row.ttft_p50_s
        latency = row.latency_mean_s if getattr(row, "latency_mean_s", None) is not None else row.latency_p50_s
        if ttft is None or latency is None or row.mean_itl_s is None:
            skipped.append(f"{row.exp_id}: no TTFT, latency or ITL recorded")
            continue
        if not (ttft > 0 and latency > 0 and row.mean_itl_s > 0):  # the fit divides by each
            skipped.append(f"{row.exp_id}: a TTFT, latency or ITL of 0 (every token in one chunk?)")
            continue
        good = row.ok_requests if row.ok_requests else row.total_requests
        prompt = row.prompt_tokens if row.prompt_tokens is not None else getattr(row, "prompt_level", None)
        used.append(Observation(
            exp_id=row.exp_id, model=row.model, concurrency=row.concurrency, max_tokens=row.max_tokens,
            prompt=float(prompt or 0), output=row.total_output_tokens / good, tps=row.tps, ttft=ttft,
            latency=latency, itl=row.mean_itl_s, ttft_p95=row.ttft_p95_s, latency_p95=row.latency_p95_s,
            requests=int(row.total_requests or 0)))
    return used, skipped


def _levels(values: Iterable[float], ratio: float = PROMPT_LEVEL_RATIO) -> list[float]:
    """Distinct values, merging those within `ratio` of the previous one."""
    levels: list[float] = []
    for value in sorted(values):
        if not levels or value > levels[-1] * ratio + 1e-9:
            levels.append(value)
    return levels


@dataclass(frozen=True)
class Terms:
    """Which terms the data can identify (a factor never varied leaves its terms out).

    The decode step is one coefficient per measured served batch n (a knot), linear in n between
    knots and along the end segments beyond them: what the server's kernels really cost at each
    batch size (llama.cpp on one thread is slower at batch 2-6 than at 8), as the chain's f(c) is
    per level. The context terms d and e are shared by every batch."""

    knots: tuple[float, ...]  # the served batches measured, ascending
    prompt: bool  # the prompt length varied (the longest over 5% above the shortest)
    context: bool  # the prompt or the output length varied: the KV-read term d
    joining: bool  # both varied: the joining-prefill term e (otherwise aliased with d and the steps)
    busy: bool = False  # TTFT rows at concurrency 1 and at two batches from 2 up: the waited-out step b

    @property
    def batch(self) -> bool:
        return len(self.knots) >= 2

    def weights(self, n: float) -> list[float]:
        """n as a blend of the knots: linear between the two around it, along the nearest end
        segment outside them; one knot: that knot."""
        knots = self.knots
        out = [0.0] * len(knots)
        if len(knots) == 1:
            out[0] = 1.0
            return out
        upper = min(max(bisect_left(knots, n), 1), len(knots) - 1)  # the first knot at or above n
        low, high = knots[upper - 1], knots[upper]
        w = (n - low) / (high - low)
        out[upper - 1], out[upper] = 1.0 - w, w
        return out

    def itl(self, n: float, prompt: float, output: float) -> list[float]:
        features = self.weights(n)
        if self.context:
            features.append(n * (prompt + output / 2))
        if self.joining:
            features.append(n * prompt / output)
        return features

    def ttft(self, n: float, prompt: float, step: float) -> list[float]:
        """`step`: the fitted decode step (ITL) at n and this prompt: a request waits for the step
        in progress to end and then joins the next."""
        features = [1.0]
        if self.batch:
            features.append(step)
        if self.busy:
            features.append(step * busy_share(n))
        if self.prompt:
            features.append(prompt)
            if self.batch:
                features.append(n * prompt)
        return features

    def itl_names(self) -> list[str]:
        return [step_name(knot) for knot in self.knots] + (["d"] if self.context else []) \
            + (["e"] if self.joining else [])

    def ttft_names(self) -> list[str]:
        names = ["t0"] + (["s"] if self.batch else []) + (["b"] if self.busy else [])
        if self.prompt:
            names += ["p"] + (["q"] if self.batch else [])
        return names


@dataclass(frozen=True)
class LinearFit:
    """A relative least-squares fit y ~ X beta (weights 1/y^2), with standard errors."""

    names: tuple[str, ...]
    beta: tuple[float, ...]
    std_errors: tuple[float | None, ...]
    dof: int

    def value(self, features: Sequence[float]) -> float:
        return float(sum(map(mul, self.beta, features)))

    def coefficients(self) -> dict[str, float]:
        return dict(zip(self.names, self.beta))

    def intervals(self, confidence: float = CONFIDENCE) -> dict[str, list[float] | None]:
        if self.dof <= 0:
            return {name: None for name in self.names}
        t = t_two_sided(confidence, self.dof)
        return {name: (None if se is None else [b - t * se, b + t * se])
                for name, b, se in zip(self.names, self.beta, self.std_errors)}


def step_name(knot: float) -> str:
    return f"step({format_level(knot)})"


def varied(values: Sequence[float]) -> bool:
    """The largest over PROMPT_LEVEL_RATIO times the smallest."""
    return max(values) > min(values) * PROMPT_LEVEL_RATIO


def efficiency_of(rows: Sequence[Observation]) -> float:
    """The median Little's-law ratio TPS x latency / (c x L_out) of the rows (the workbook's
    per-row "Little ratio" column and its median)."""
    return median(r.tps * r.latency / (r.concurrency * r.output) for r in rows)


def output_ratio_of(rows: Sequence[Observation]) -> float:
    """The median share of max_tokens the requests reached, at most 1."""
    return min(1.0, median(r.output / r.max_tokens for r in rows))


def busy_share(n: float) -> float:
    """How often a request finds the server mid-step: never alone (n = 1), always with another
    request in flight (n >= 2), linear between."""
    return min(1.0, max(0.0, n - 1.0))


def busy_identified(ttft_batches: Iterable[float]) -> bool:
    """The waited-out step b needs TTFT rows at batch 1 and at two batches from 2 up (with one, it
    is aliased with t0 and s)."""
    levels = set(ttft_batches)
    return 1.0 in levels and len({n for n in levels if n >= 2}) >= 2


def finite_wait(concurrency: float, knee: float, requests: int) -> float:
    """The mean wait for a slot, in service times, over a closed-loop run of `requests` requests by
    `concurrency` clients on int(knee) slots (the module docstring's W(c, K, N)); the steady state
    c / K - 1 when `requests` is 0 (unknown)."""
    if concurrency <= knee:
        return 0.0
    if requests <= 0:
        return concurrency / knee - 1.0
    slots, c = max(int(knee), 1), int(round(concurrency))

    def rounds(m: int) -> int:  # sum over j < m of floor(j / slots)
        a, b = divmod(m, slots)
        return slots * a * (a - 1) // 2 + b * a

    if requests <= c:
        return rounds(requests) / requests
    return (rounds(requests) - rounds(requests - c) - (requests - c)) / requests


def terms_of(rows: Sequence[Observation], knee: float | None = None) -> Terms:
    """The knots (the served batches min(c, K) measured) and which factors the rows varied."""
    knots = tuple(sorted({min(r.concurrency, knee) if knee is not None else float(r.concurrency) for r in rows}))
    prompt, output = varied([r.prompt for r in rows]), varied([r.output for r in rows])
    served = [float(r.concurrency) for r in rows if knee is None or r.concurrency <= knee]
    return Terms(knots=tuple(float(k) for k in knots), prompt=prompt, context=prompt or output,
                 joining=prompt and output, busy=len(knots) >= 2 and busy_identified(served))


def _relative_lstsq(names: Sequence[str], x: list[list[float]], y: list[float],
                    scales: dict[str, float]) -> LinearFit | None:
    """min sum ((y - x beta) / y)^2 by the normal equations on columns divided by `scales` (what
    the workbook's latency sheet computes with MINVERSE); None when singular."""
    design = np.array(x, dtype=float)
    target = np.array(y, dtype=float)
    scale = np.array([scales[name] for name in names], dtype=float)
    z = design / scale / target[:, None]
    a = z.T @ z
    try:
        inverse = np.linalg.inv(a)
    except np.linalg.LinAlgError:
        return None
    if not np.all(np.isfinite(inverse)) or np.abs(a @ inverse - np.eye(len(names))).max() > 1e-6:
        return None
    beta_scaled = inverse @ z.sum(axis=0)
    beta = beta_scaled / scale
    dof = len(y) - len(names)
    errors: list[float | None] = [None] * len(names)
    if dof > 0:
        residual = 1.0 - z @ beta_scaled
        sigma2 = float(residual @ residual) / dof
        errors = [math.sqrt(max(sigma2 * float(inverse[i, i]), 0.0)) / float(scale[i]) for i in range(len(names))]
    return LinearFit(tuple(names), tuple(float(b) for b in beta), tuple(errors), dof)


@dataclass(frozen=True)
class Knee:
    """Where throughput stops growing: a fitted slot limit (with the candidates the data cannot
    tell from it), or a soft knee from the fitted curve, or none within the measured levels."""

    kind: str  # "limit" | "soft" | "none"
    concurrency: float | None
    interval: tuple[float, float] | None
    measured_max: int

    def describe(self) -> str:
        if self.kind == "limit" and self.concurrency is not None:
            span = (f" (the data allow {format_level(self.interval[0])}-{format_level(self.interval[1])})"
                    if self.interval and self.interval[0] != self.interval[1] else "")
            return f"throughput stops growing near concurrency {format_level(self.concurrency)}{span}"
        if self.kind == "soft" and self.concurrency is not None:
            return (f"throughput grows less than {round((SOFT_KNEE_GAIN - 1) * 100)}% per doubling from "
                    f"concurrency {format_level(self.concurrency)} (no hard limit seen)")
        return f"no knee within the measured concurrency (up to {self.measured_max})"

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "concurrency": self.concurrency,
                "interval": list(self.interval) if self.interval else None, "text": self.describe()}


def format_level(value: float) -> str:
    """A concurrency or prompt length as the texts print it: whole from 10 up or within 0.05 of a whole
    number, else one decimal."""
    return f"{value:.0f}" if abs(value - round(value)) < 0.05 or value >= 10 else f"{value:.1f}"


@dataclass(frozen=True)
class LatencyForecast:
    """A forward prediction of the latency model; None fields where it cannot answer."""

    concurrency: float
    max_tokens: int
    prompt_tokens: float
    model: str
    tps: float | None
    ttft_s: float | None = None
    latency_s: float | None = None
    itl_s: float | None = None
    ttft_p95_s: float | None = None
    latency_p95_s: float | None = None
    tps_interval: tuple[float, float] | None = None  # 90% prediction interval for one run
    beyond_knee: bool = False
    extrapolated: tuple[str, ...] = ()  # factors outside the measured range
    missing: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {"tps": self.tps, "ttft_s": self.ttft_s, "latency_s": self.latency_s, "itl_s": self.itl_s,
                "ttft_p95_s": self.ttft_p95_s, "latency_p95_s": self.latency_p95_s,
                "tps_interval": list(self.tps_interval) if self.tps_interval else None,
                "beyond_knee": self.beyond_knee, "extrapolated": list(self.extrapolated),
                "missing": list(self.missing)}


@dataclass
class ModelFit:
    """The latency model of one served model."""

    model: str
    terms: Terms
    itl: LinearFit
    ttft: LinearFit
    knee_limit: float | None  # the K used (None: no limit)
    knee: Knee
    efficiency: float  # median measured TPS / (c L_out / latency): Little's law as the client saw it
    queue_share: float  # measured wait for a slot / the run's expected wait W(c, K, N) x latency_K
    output_ratio: float  # median L_out / max_tokens (1: every request ran to max_tokens)
    ttft_p95_ratio: float | None
    latency_p95_ratio: float | None
    sigma_log: float | None  # of TPS, residual
    dof: int
    rows: list[Observation]
    concurrency_range: tuple[int, int]
    prompt_levels: tuple[float, ...]
    max_tokens_range: tuple[int, int]

    def served(self, concurrency: float) -> float:
        return min(concurrency, self.knee_limit) if self.knee_limit is not None else concurrency

    def _parts(self, concurrency: float, output: float, prompt: float) -> tuple[float, float, float]:
        n = self.served(concurrency)
        itl = self.itl.value(self.terms.itl(n, prompt, output))
        ttft = self.ttft.value(self.terms.ttft(n, prompt, itl))
        return ttft, itl, ttft + (output - 1) * itl

    def forecast(self, concurrency: float, max_tokens: int, prompt_tokens: float | None = None, *,
                 output_tokens: float | None = None, requests: int = 0) -> LatencyForecast:
        """TPS, TTFT and latency at a configuration; `output_tokens` (the mean per request) defaults
        to max_tokens times the share the measured requests reached. Above the knee the wait is the
        steady state's, or a run of `requests` requests' (`finite_wait`) when given."""
        prompt = self.prompt_levels[0] if prompt_tokens is None else float(prompt_tokens)
        output = max(1.0, output_tokens if output_tokens is not None else max_tokens * self.output_ratio)
        base = dict(concurrency=concurrency, max_tokens=max_tokens, prompt_tokens=prompt, model=self.model)
        missing = []
        if not self.terms.prompt and not any(abs(prompt - level) <= level * (PROMPT_LEVEL_RATIO - 1) + 1
                                             for level in self.prompt_levels):
            missing.append(f"prompt length: only {format_level(self.prompt_levels[0])} tokens measured")
        if not self.terms.batch and concurrency != self.concurrency_range[0]:
            missing.append(f"concurrency: only {self.concurrency_range[0]} measured")
        if missing:
            return LatencyForecast(tps=None, missing=tuple(missing), **base)  # type: ignore[arg-type]
        ttft_s, itl, latency_s = self._parts(concurrency, output, prompt)
        if not (ttft_s > 0 and itl > 0 and latency_s > 0):
            return LatencyForecast(tps=None, missing=("the fitted times are not positive there",),
                                   **base)  # type: ignore[arg-type]
        beyond = self.knee_limit is not None and concurrency > self.knee_limit
        wait = self.queue_share * latency_s * finite_wait(concurrency, self.knee_limit, requests) \
            if self.knee_limit is not None and beyond else 0.0
        latency_total = latency_s + wait
        ttft_total = ttft_s + wait
        tps = self.efficiency * self.served(concurrency) * output / latency_s
        interval = None
        if self.sigma_log is not None and self.dof > 0:
            spread = t_two_sided(CONFIDENCE, self.dof) * self.sigma_log * math.sqrt(1 + 1 / len(self.rows))
            interval = (tps * math.exp(-spread), tps * math.exp(spread))
        outside = []
        low_c, high_c = self.concurrency_range
        if not low_c <= concurrency <= high_c:
            outside.append("concurrency")
        if self.terms.prompt and not self.prompt_levels[0] / PROMPT_LEVEL_RATIO <= prompt \
                <= self.prompt_levels[-1] * PROMPT_LEVEL_RATIO:
            outside.append("prompt length")
        if not self.max_tokens_range[0] <= max_tokens <= self.max_tokens_range[1]:
            outside.append("max_tokens")
        return LatencyForecast(
            tps=tps, ttft_s=ttft_total, latency_s=latency_total, itl_s=itl,
            ttft_p95_s=ttft_total * self.ttft_p95_ratio if self.ttft_p95_ratio else None,
            latency_p95_s=latency_total * self.latency_p95_ratio if self.latency_p95_ratio else None,
            tps_interval=interval, beyond_knee=beyond, extrapolated=tuple(outside),
            **base)  # type: ignore[arg-type]

    def report(self) -> dict[str, Any]:
        return {
            "model": self.model, "rows": len(self.rows), "knee": self.knee.as_dict(),
            "itl": {"coefficients": self.itl.coefficients(), "intervals": self.itl.intervals()},
            "ttft": {"coefficients": self.ttft.coefficients(), "intervals": self.ttft.intervals()},
            "efficiency": self.efficiency, "queue_share": self.queue_share, "output_ratio": self.output_ratio,
            "ttft_p95_ratio": self.ttft_p95_ratio, "latency_p95_ratio": self.latency_p95_ratio,
            "sigma_log_tps": self.sigma_log, "prompt_levels": list(self.prompt_levels),
            "concurrency_range": list(self.concurrency_range), "max_tokens_range": list(self.max_tokens_range),
        }


def _positive(value: float) -> float:
    return value if value > 0 else 1.0


def itl_scales(rows: Sequence[Observation], knee: float | None) -> dict[str, float]:
    """The ITL columns' scales: products of the rows' largest batch, prompt and output (any positive
    scale gives the same fit; these keep the normal equations well conditioned)."""
    n = max(min(r.concurrency, knee) if knee is not None else r.concurrency for r in rows)
    prompt, longest, shortest = max(r.prompt for r in rows), max(r.output for r in rows), min(r.output for r in rows)
    steps = {step_name(knot): 1.0 for knot in terms_of(rows, knee).knots}
    return {**steps, "d": _positive(n * (prompt + longest / 2)), "e": _positive(n * prompt / shortest)}


def ttft_scales(rows: Sequence[Observation], knee: float | None, step_max: float) -> dict[str, float]:
    """The TTFT columns' scales (`step_max`: the largest fitted ITL over the rows)."""
    n = max(min(r.concurrency, knee) if knee is not None else r.concurrency for r in rows)
    prompt = max(r.prompt for r in rows)
    return {"t0": 1.0, "s": _positive(step_max), "b": _positive(step_max), "p": _positive(prompt),
            "q": _positive(n * prompt)}


Fitted = tuple[Terms, LinearFit, LinearFit]


@dataclass(frozen=True)
class _RowFit:
    """A fit at one knee, with what it computed of each row on the way: the row's decode step
    (its fitted ITL at the served batch) and, for a row at or below the knee, its TTFT features
    (the same at the served batch, which is then the row's own concurrency). `_profile`
    predicts every row from these instead of computing them again: the same numbers, by the same
    arithmetic in the same order."""

    fitted: Fitted
    steps: list[float]  # by row
    ttft_features: list[list[float] | None]  # by row; None above the knee


def _fit_given_knee(rows: Sequence[Observation], knee: float | None) -> _RowFit | None:
    terms = terms_of(rows, knee)

    def served(c: int) -> float:
        return min(c, knee) if knee is not None else c

    itl_x = [terms.itl(served(r.concurrency), r.prompt, r.output) for r in rows]
    itl = _relative_lstsq(terms.itl_names(), itl_x, [r.itl for r in rows], itl_scales(rows, knee))
    if itl is None:
        return None
    steps = [itl.value(row) for row in itl_x]
    # TTFT of the served part: fitted on the rows at or below the knee (above it the measured TTFT
    # is mostly the wait for a slot, which a finite run only approximates). There the served batch
    # is the row's concurrency, so its step is the one above.
    ttft_features: list[list[float] | None] = [
        terms.ttft(r.concurrency, r.prompt, step) if knee is None or r.concurrency <= knee else None
        for r, step in zip(rows, steps)]
    ttft_rows = [features for features in ttft_features if features is not None]
    ttft_y = [r.ttft for r in rows if knee is None or r.concurrency <= knee]
    names = terms.ttft_names()
    if len(ttft_y) < len(names):
        return None
    ttft = _relative_lstsq(names, ttft_rows, ttft_y, ttft_scales(rows, knee, max(steps)))
    return _RowFit((terms, itl, ttft), steps, ttft_features) if ttft is not None else None


def _predict_row(itl: LinearFit, ttft: LinearFit, terms: Terms, knee: float | None,
                 r: Observation) -> tuple[float, float] | None:
    """(TPS by Little's law before the efficiency factor, latency) for a row."""
    n = min(r.concurrency, knee) if knee is not None else r.concurrency
    step = itl.value(terms.itl(n, r.prompt, r.output))
    return _predicted(r, knee, step, ttft.value(terms.ttft(n, r.prompt, step)))


def _predicted(r: Observation, knee: float | None, step: float, first: float) -> tuple[float, float] | None:
    """`_predict_row` from the row's fitted step and TTFT."""
    served = first + (r.output - 1) * step
    if not served > 0:
        return None
    latency = served * (r.concurrency / knee if knee is not None and r.concurrency > knee else 1.0)
    return r.concurrency * r.output / latency, latency


def _profile(rows: Sequence[Observation], knee: float | None) -> tuple[float, Fitted] | None:
    fit = _fit_given_knee(rows, knee)
    if fit is None:
        return None
    terms, itl, ttft = fit.fitted
    error = 0.0
    for r, step, features in zip(rows, fit.steps, fit.ttft_features):
        if features is None:  # above the knee: served at the knee
            features = terms.ttft(knee, r.prompt, step)  # type: ignore[arg-type]
        predicted = _predicted(r, knee, step, ttft.value(features))
        if predicted is None:
            return None
        tps, latency = predicted
        error += math.log(r.tps / tps) ** 2
    return error, fit.fitted


def _knee_candidates(levels: Sequence[int]) -> list[float]:
    """Slot counts to try: every whole number from the lowest measured concurrency up to (not
    including) the highest; beyond KNEE_MAX_WHOLE levels, a geometric grid of whole numbers."""
    low, high = min(levels), max(levels)
    if high - low <= KNEE_MAX_WHOLE:
        return [float(c) for c in range(low, high)]
    candidates = {float(c) for c in levels if c < high}
    steps = int(math.ceil(math.log2(high / low) * KNEE_GRID_PER_OCTAVE))
    for i in range(steps):
        value = round(low * 2 ** (i / KNEE_GRID_PER_OCTAVE))
        if value < high:
            candidates.add(float(value))
    return sorted(candidates)


PROFILE = "profile"


def fit_model(rows: Sequence[Observation], model: str, knee_given: float | None | str = PROFILE) -> ModelFit | None:
    """The latency model of one served model's rows; None when too few rows to fit it (under
    MIN_ROWS, or too few for the terms they vary). The knee is profiled unless given (a slot count,
    or None for no knee: the workbook's knee cell)."""
    if len(rows) < MIN_ROWS:
        return None
    prompts = _levels(r.prompt for r in rows)
    concurrency = sorted({r.concurrency for r in rows})
    measured_terms = terms_of(rows)
    best = _profile(rows, None if knee_given == PROFILE else knee_given)  # type: ignore[arg-type]
    if best is None:
        return None
    none_error, fitted = best
    knee: float | None = None if knee_given == PROFILE else knee_given  # type: ignore[assignment]
    profile: list[tuple[float, float]] = []
    if knee_given == PROFILE and measured_terms.batch and len(concurrency) >= 3:
        for candidate in _knee_candidates(concurrency):
            result = _profile(rows, candidate)
            if result is not None:
                profile.append((candidate, result[0]))
                if result[0] < best[0]:
                    best, knee, fitted = result, candidate, result[1]
    terms, itl, ttft = fitted
    parameters = len(itl.names) + len(ttft.names) + 1
    dof = max(len(rows) - parameters, 1)
    knee_info = Knee("none", None, None, max(concurrency))
    if knee is not None and knee_given != PROFILE:
        knee_info = Knee("limit", knee, (knee, knee), max(concurrency))
    elif knee is not None:
        f_crit = t_two_sided(CONFIDENCE, dof) ** 2
        scale = best[0] / dof
        if scale <= 0 or (none_error - best[0]) / max(scale, 1e-300) > f_crit:
            allowed = [c for c, error in profile if (error - best[0]) / max(scale, 1e-300) <= f_crit]
            knee_info = Knee("limit", knee, (min(allowed), max(allowed)) if allowed else (knee, knee),
                             max(concurrency))
        else:
            knee, (terms, itl, ttft) = None, _profile(rows, None)[1]  # type: ignore[index]
    efficiency = efficiency_of(rows)
    residuals = []
    for r in rows:
        predicted = _predict_row(itl, ttft, terms, knee, r)
        if predicted is not None:
            residuals.append(math.log(r.tps / (efficiency * predicted[0])))
    tps_dof = len(residuals) - (len(itl.names) + len(ttft.names) + 1 + (knee is not None))
    sigma = math.sqrt(sum(e * e for e in residuals) / tps_dof) if tps_dof > 0 else None
    fit = ModelFit(
        model=model, terms=terms, itl=itl, ttft=ttft, knee_limit=knee, knee=knee_info, efficiency=efficiency,
        queue_share=1.0,
        output_ratio=output_ratio_of(rows),
        ttft_p95_ratio=None, latency_p95_ratio=None, sigma_log=sigma, dof=max(tps_dof, 0), rows=list(rows),
        concurrency_range=(concurrency[0], concurrency[-1]), prompt_levels=tuple(prompts),
        max_tokens_range=(min(r.max_tokens for r in rows), max(r.max_tokens for r in rows)))
    if knee is not None:  # a finite run starts and ends with short queues: its mean wait is less
        shares = []
        for r in rows:
            if r.concurrency > knee:
                served = fit.forecast(knee, r.max_tokens, r.prompt, output_tokens=r.output)
                expected = finite_wait(r.concurrency, knee, r.requests)  # 0: the run was too short to queue
                if served.latency_s and served.ttft_s is not None and expected > 0:
                    shares.append((r.ttft - served.ttft_s) / (served.latency_s * expected))
        if shares:
            fit.queue_share = max(0.0, median(shares))
    ttft_ratios, latency_ratios = [], []
    for r in rows:
        forecast = fit.forecast(r.concurrency, r.max_tokens, r.prompt, output_tokens=r.output, requests=r.requests)
        if forecast.ttft_s and r.ttft_p95 is not None:
            ttft_ratios.append(r.ttft_p95 / forecast.ttft_s)
        if forecast.latency_s and r.latency_p95 is not None:
            latency_ratios.append(r.latency_p95 / forecast.latency_s)
    fit.ttft_p95_ratio = median(ttft_ratios) if ttft_ratios else None
    fit.latency_p95_ratio = median(latency_ratios) if latency_ratios else None
    if knee_info.kind == "none" and terms.batch:
        fit.knee = _soft_knee(fit, rows, max(concurrency))
    return fit


def _soft_knee(fit: ModelFit, rows: Sequence[Observation], measured_max: int) -> Knee:
    """The lowest measured-range concurrency from which doubling gains less than SOFT_KNEE_GAIN."""
    reference = median(r.max_tokens for r in rows)
    prompt = fit.prompt_levels[0]
    c = float(fit.concurrency_range[0])
    while c * 2 <= measured_max:
        now, doubled = fit.forecast(c, int(reference), prompt).tps, fit.forecast(c * 2, int(reference), prompt).tps
        if now and doubled and doubled / now < SOFT_KNEE_GAIN:
            return Knee("soft", c, None, measured_max)
        c *= 2 ** (1 / KNEE_GRID_PER_OCTAVE)
    return Knee("none", None, None, measured_max)


@dataclass
class LatencyModel:
    """The latency model of every model in the data, its hold-out error and its Little's-law flags."""

    fits: dict[str, ModelFit]  # by model name casefolded
    holdout: HoldOut
    skipped: list[str]
    little_flags: list[tuple[str, float]] = field(default_factory=list)  # (exp_id, ratio) off by > tolerance

    @property
    def available(self) -> bool:
        return bool(self.fits)

    def fit_for(self, model: str | None) -> ModelFit | None:
        if model is None:
            return next(iter(self.fits.values()), None)
        return self.fits.get(model.casefold())

    def forecast(self, concurrency: float, max_tokens: int, model: str | None = None,
                 prompt_tokens: float | None = None, *, requests: int = 0) -> LatencyForecast:
        """ModelFit.forecast for `model` (a steady state, or a run of `requests` requests)."""
        fit = self.fit_for(model)
        if fit is None:
            name = model or ""
            reason = ("no experiment has TTFT, latency and ITL recorded" if not self.fits
                      else f"the latency model has no fit for {name!r}")
            return LatencyForecast(concurrency, max_tokens, float(prompt_tokens or 0), name, None, missing=(reason,))
        return fit.forecast(concurrency, max_tokens, prompt_tokens, requests=requests)

    def knee_text(self) -> str | None:
        texts = [f"{fit.model}: {fit.knee.describe()}" if len(self.fits) > 1 else fit.knee.describe()
                 for fit in self.fits.values()]
        return "; ".join(texts) if texts else None

    def report(self) -> dict[str, Any]:
        return {
            "method": "latency", "available": self.available,
            "models": [fit.report() for fit in self.fits.values()],
            "knee": self.knee_text(),
            "holdout": self.holdout.as_dict(),
            "little_law_flags": [{"exp_id": exp_id, "ratio": ratio} for exp_id, ratio in self.little_flags],
            "skipped": list(self.skipped),
        }


def _fit_all(rows: Sequence[Observation]) -> dict[str, ModelFit]:
    by_model: dict[str, list[Observation]] = {}
    names: dict[str, str] = {}
    for r in rows:
        by_model.setdefault(r.model.casefold(), []).append(r)
        names.setdefault(r.model.casefold(), r.model)
    fits = {}
    for key, members in by_model.items():
        fit = fit_model(members, names[key])
        if fit is not None:
            fits[key] = fit
    return fits


def latency_model(rows: Iterable[Any]) -> LatencyModel:
    """Fit the latency model on results rows (see the module docstring), with its hold-out."""
    used, skipped = observations(rows)
    fits = _fit_all(used)
    holdout_rows = []
    for i, r in enumerate(used):
        rest = [o for j, o in enumerate(used) if j != i and o.model.casefold() == r.model.casefold()]
        fit = fit_model(rest, r.model)
        # Each row is predicted at its own measured output length.
        predicted = (fit.forecast(r.concurrency, r.max_tokens, r.prompt, output_tokens=r.output).tps
                     if fit is not None else None)
        error = (r.tps - predicted) / r.tps * 100 if predicted is not None else None
        holdout_rows.append(HoldOutRow(r.exp_id, r.model, r.concurrency, r.max_tokens, r.tps, predicted, error))
    flags = [(r.exp_id, r.little_ratio) for r in used if abs(r.little_ratio - 1) > LITTLE_TOLERANCE]
    return LatencyModel(fits=fits, holdout=_holdout("latency", holdout_rows), skipped=skipped, little_flags=flags)
