"""The least-squares calibration: every valid row counts, with intervals and hold-out error (no I/O).

Long because the fit, its intervals (Student t from first principles, no scipy at run time),
both leave-one-outs and the interaction/plateau checks share the design and its pseudo-inverse.

The separable model in logs is linear,

    ln TPS = ln BaseTPS + ln f(c) + ln K_len(L) + ln K_in(P) - ln C_model(m) + noise,

so it is fitted by ordinary least squares on all included rows (`model.filter_rows`)
with dummy coding: one column per non-base level, the base levels (the chain's base
model, base max_tokens, base concurrency and base prompt level, from `model.calibrate`)
as reference, so f(base c) = K_len(base L) = K_in(P0) = C_model(base model) = 1. With no
prompt levels in the data there are no K_in columns. The coefficients are therefore
the chain's coefficients: where the design is exactly identified the fit reproduces
the chain, and otherwise it is the OLS solution (numpy.linalg.lstsq on the same
design matrix). Replicates need no special handling (OLS on replicates of a cell
fits their mean log, the chain's geometric mean).

Identification. The fit uses the SVD of the design matrix. A coefficient is
*identified* when the data pin it down (its unit vector lies in the row space); a
level whose column is all zero, or a design with aliased levels, leaves coefficients
unidentified: they are reported as None, never guessed. A forward prediction exists
when its design vector lies in the row space ("estimable"), which can hold even if a
single coefficient is not identified.

Intervals (90%, analytic, log space, t with n - rank residual degrees of freedom):
each coefficient ± t·se, then exponentiated; for a forward prediction a confidence
interval for the expected (median) TPS and a prediction interval for one new run.
An exactly identified design has no residual degrees of freedom and so no intervals.

Hold-out (leave-one-out). Each included row is predicted from a fit without it, by
the hat-matrix shortcut e_i / (1 - h_ii) (equal to a refit). A row with h_ii = 1 is
the only evidence for some direction of the model: without it its own prediction is
not identified, so it gets no LOO prediction and is counted. `chain_holdout` does the
same for the chain by recalibrating without the row (base levels pinned). The verdict
uses `model.verdict_for` on the LOO errors: judged on prediction, not on fit.

Interaction check (is the separable model true?). Residuals are averaged per
(concurrency, max_tokens) cell, with two or more models per (model, concurrency) cell,
and with two or more prompt levels per (concurrency, prompt level) cell: a longer prompt
that costs more at a higher concurrency (prefill of joining requests, a slot limit that
makes requests queue) shows there, and is said so in words. A cell breaks the separable model when its mean residual is significant
(|mean| > t·se at 90% two-sided, Bonferroni over the cells of its kind, se from the hat
matrix) *and* large (at least 10% in TPS). Single-row cells rarely pass the first test:
without replicates an interaction cannot be told from noise. An interaction in one cell
also leaves smaller residuals of the opposite sign in the other cells of its row and
column; with only two levels of a factor they are as large, and the check reports both
cells, since the data cannot say which one is off. A rate-limit plateau is
reported when, for a (model, max_tokens, prompt level), the median TPS at the highest measured
concurrency is within 5% of that at the next level down (concurrency at least 1.5x)
while the fitted f predicts at least 10% growth between them.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass, field
from statistics import median
from typing import Any, Sequence

import numpy as np

from scm_xl.model import (
    Calibration, ConcurrencyLevel, LengthLevel, ModelLevel, PromptLevel, RowStatus, Settings,
    base_prompt_level, c_label, calibrate, check_rows, f_label, k_label, p_label, prompt_level_table, same_model,
    verdict_for,
)
from scm_xl.report_texts import Joined, Text

CONFIDENCE = 0.90
# An interaction cell must also move TPS by at least this much to be reported.
INTERACTION_MIN_EFFECT = 0.10
# Plateau: top two concurrency levels within this TPS ratio, concurrency up by at least
# PLATEAU_MIN_STEP, while the fitted f grows by at least PLATEAU_MIN_GROWTH.
PLATEAU_FLAT_RATIO = 1.05
PLATEAU_MIN_STEP = 1.5
PLATEAU_MIN_GROWTH = 1.10
# Numerical tolerances for identification (projections onto the null space).
_IDENTIFIED_TOL = 1e-9
_LEVERAGE_ONE = 1e-9

BASE_LABEL = "BaseTPS"


# ---------------------------------------------------------------------------
# Student's t distribution (no scipy): regularised incomplete beta, inverted
# ---------------------------------------------------------------------------

def _beta_continued_fraction(a: float, b: float, x: float) -> float:
    """Lentz's continued fraction for the incomplete beta function."""
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 100_000):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-15:
            break
    return h


def regularized_beta(a: float, b: float, x: float) -> float:
    """I_x(a, b), the regularised incomplete beta function."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = (math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
                 + a * math.log(x) + b * math.log1p(-x))
    front = math.exp(log_front)
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _beta_continued_fraction(a, b, x) / a
    return 1.0 - front * _beta_continued_fraction(b, a, 1.0 - x) / b


def t_cdf(t: float, dof: float) -> float:
    """P(T <= t) for Student's t with `dof` degrees of freedom."""
    if dof <= 0:
        raise ValueError(f"degrees of freedom must be positive, got {dof}")
    tail = 0.5 * regularized_beta(dof / 2.0, 0.5, dof / (dof + t * t))
    return 1.0 - tail if t > 0 else tail


@functools.lru_cache(maxsize=1024)
def t_ppf(p: float, dof: float) -> float:
    """The p-quantile of Student's t (inverse of `t_cdf`), to about 1e-12."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"probability must be strictly between 0 and 1, got {p}")
    if dof <= 0:
        raise ValueError(f"degrees of freedom must be positive, got {dof}")
    if p == 0.5:
        return 0.0
    if p < 0.5:
        return -t_ppf(1.0 - p, dof)
    low, high = 0.0, 1.0
    while t_cdf(high, dof) < p:
        low, high = high, high * 2.0
    for _ in range(200):  # bisection: robust for every dof, fast enough when cached
        middle = 0.5 * (low + high)
        if t_cdf(middle, dof) < p:
            low = middle
        else:
            high = middle
        if high - low <= 1e-13 * max(1.0, high):
            break
    return 0.5 * (low + high)


def t_two_sided(confidence: float, dof: float) -> float:
    """The t multiplier of a two-sided interval at `confidence`."""
    return t_ppf(0.5 + confidence / 2.0, dof)


# ---------------------------------------------------------------------------
# Concurrency between measured levels: log-log interpolation
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class ConcurrencyBlend:
    """ln f(c) as a weighted sum of ln f at measured levels (weights sum to 1)."""

    weights: tuple[tuple[int, float], ...]
    interpolated: bool = False
    extrapolated: bool = False


def concurrency_blend(concurrency: float, levels: Sequence[int], *,
                      extrapolate: bool = False) -> ConcurrencyBlend | None:
    """How ln f(concurrency) follows from the levels with a known f.

    A measured level is itself. Between two levels, ln f is linear in ln c (log-log
    interpolation). Outside the measured range, the line through the two nearest levels
    is extended, only when `extrapolate`. None when that is impossible.
    """
    ordered = sorted(set(levels))
    if concurrency in ordered:
        return ConcurrencyBlend(((int(concurrency), 1.0),))
    if concurrency <= 0 or len(ordered) < 2:
        return None
    inside = ordered[0] < concurrency < ordered[-1]
    if not inside and not extrapolate:
        return None
    if inside:
        upper = next(i for i, level in enumerate(ordered) if level > concurrency)
        low, high = ordered[upper - 1], ordered[upper]
    elif concurrency < ordered[0]:
        low, high = ordered[0], ordered[1]
    else:
        low, high = ordered[-2], ordered[-1]
    weight = (math.log(concurrency) - math.log(low)) / (math.log(high) - math.log(low))
    return ConcurrencyBlend(((low, 1.0 - weight), (high, weight)),
                            interpolated=inside, extrapolated=not inside)


# ---------------------------------------------------------------------------
# Results
# ---------------------------------------------------------------------------

Interval = tuple[float, float]


@dataclass(frozen=True)
class Coefficient:
    """One model coefficient; `value` and `interval` are in its own units (not logs)."""

    label: str  # "BaseTPS", "f(4)", "K_len(200)", "C_model(name)", "K_in(640)"
    kind: str  # "base" | "f" | "k_len" | "c_model" | "k_in"
    level: int | str | None
    rows: int  # fitted rows at this level (for the base: at the base point)
    value: float | None  # None: not identified by the data
    std_error_log: float | None  # standard error of ln(value)
    interval: Interval | None  # 90%; None when unidentified or no residual dof

    @property
    def identified(self) -> bool:
        return self.value is not None


@dataclass(frozen=True)
class Forecast:
    """A forward prediction; intervals are 90% and None where they cannot be given."""

    concurrency: float
    max_tokens: int
    model: str
    tps: float | None
    mean_interval: Interval | None = None  # for the expected (median) TPS
    prediction_interval: Interval | None = None  # for one new run
    interpolated: bool = False
    extrapolated: bool = False
    missing: tuple[str, ...] = ()  # why there is no prediction
    # Predicted percentiles (the latency model predicts them; chain and lsq do not).
    latency_p95_s: float | None = None
    ttft_p95_s: float | None = None
    prompt_tokens: float | None = None  # the workload's prompt length (None: the base prompt level)


@dataclass(frozen=True)
class RowFit:
    status: RowStatus
    fitted_tps: float
    residual_log: float  # ln measured - ln fitted
    leverage: float
    loo_predicted_tps: float | None
    loo_error_pct: float | None  # (measured - LOO predicted) / measured x 100


@dataclass(frozen=True)
class _Levels:
    """The dummy coding: reference levels and the non-base levels that get a column."""

    base_concurrency: int
    base_max_tokens: int
    base_model: str
    concurrency: tuple[int, ...]
    max_tokens: tuple[int, ...]
    models: tuple[str, ...]  # display names, first spelling seen
    base_prompt_level: int | None = None  # None: no prompt levels in the data
    prompt_levels: tuple[int, ...] = ()  # the non-base prompt levels (K_in columns, after the models)

    @property
    def size(self) -> int:
        return 1 + len(self.concurrency) + len(self.max_tokens) + len(self.models) + len(self.prompt_levels)

    def labels(self) -> list[str]:
        return ([BASE_LABEL] + [f_label(c) for c in self.concurrency]
                + [k_label(length) for length in self.max_tokens] + [c_label(m) for m in self.models]
                + [p_label(level) for level in self.prompt_levels])

    def measured_prompt_levels(self) -> list[int]:
        """Every fitted prompt level, the base one included."""
        base = [self.base_prompt_level] if self.base_prompt_level is not None else []
        return sorted(set(base) | set(self.prompt_levels))

    def vector(self, blend: ConcurrencyBlend, max_tokens: int, model: str,
               prompt: ConcurrencyBlend | None = None) -> np.ndarray | None:
        x = np.zeros(self.size)
        x[0] = 1.0
        offset = 1
        for level, weight in blend.weights:
            if level != self.base_concurrency:
                if level not in self.concurrency:
                    return None
                x[offset + self.concurrency.index(level)] += weight
        offset += len(self.concurrency)
        if max_tokens != self.base_max_tokens:
            if max_tokens not in self.max_tokens:
                return None
            x[offset + self.max_tokens.index(max_tokens)] = 1.0
        offset += len(self.max_tokens)
        if not same_model(model, self.base_model):
            index = next((i for i, m in enumerate(self.models) if same_model(m, model)), None)
            if index is None:
                return None
            x[offset + index] = -1.0  # ln TPS falls with ln C_model
        offset += len(self.models)
        for level, weight in (prompt.weights if prompt is not None else ()):
            if level != self.base_prompt_level:
                if level not in self.prompt_levels:
                    return None
                x[offset + self.prompt_levels.index(level)] += weight
        return x


def _at_level(level: int | None) -> ConcurrencyBlend | None:
    """A row's prompt level as the design sees it (None: no levels, the base)."""
    return ConcurrencyBlend(((level, 1.0),)) if level is not None else None


@dataclass
class LsqFit:
    """The fitted separable model. `calibration` has the chain's shape (None = unidentified)."""

    calibration: Calibration
    coefficients: list[Coefficient]
    rows: list[RowFit]
    observations: int
    parameters: int
    rank: int
    dof: int
    sigma: float | None  # residual standard deviation of ln TPS; None without residual dof
    covariance: np.ndarray  # of the log coefficients, sigma^2 pinv(X'X); NaN where unidentified or no dof
    confidence: float
    _levels: _Levels | None = field(repr=False, default=None)
    _beta: np.ndarray = field(repr=False, default_factory=lambda: np.zeros(0))
    _xtx_pinv: np.ndarray = field(repr=False, default_factory=lambda: np.zeros((0, 0)))
    _null_projector: np.ndarray = field(repr=False, default_factory=lambda: np.zeros((0, 0)))

    @property
    def unidentified(self) -> tuple[str, ...]:
        return tuple(c.label for c in self.coefficients if not c.identified)

    @property
    def exactly_identified(self) -> bool:
        return self.dof == 0 and self.rank == self.parameters

    def coefficient(self, label: str) -> Coefficient | None:
        return next((c for c in self.coefficients if c.label == label), None)

    def intervals(self) -> dict[str, list[float] | None]:
        return {c.label: (list(c.interval) if c.interval else None) for c in self.coefficients}

    def measured_concurrency_levels(self) -> list[int]:
        """The fitted concurrency levels (whether a prediction through one is identified is
        decided by estimability, not by its own f: ratios of f can be known when f is not)."""
        return [level.concurrency for level in self.calibration.concurrency_levels]

    def forecast(self, concurrency: float, max_tokens: int, model: str | None = None, *,
                 extrapolate: bool = False, prompt_tokens: float | None = None) -> Forecast:
        """Predicted TPS with 90% intervals; concurrency between measured levels is
        interpolated in log-log space, outside them only with `extrapolate`. `prompt_tokens`
        None is the base prompt level; between two fitted prompt levels ln K_in is
        interpolated in ln P, outside them there is no prediction (never extrapolated)."""
        model = model or self.calibration.base_model or ""
        if self._levels is None:
            return Forecast(concurrency, max_tokens, model, None, missing=("no data",), prompt_tokens=prompt_tokens)
        blend = concurrency_blend(concurrency, self.measured_concurrency_levels(), extrapolate=extrapolate)
        if blend is None:
            label = f_label(_int_or(concurrency))  # a level between two prints as 2.5
            reason = f"{label} is outside the measured range" if self.measured_concurrency_levels() else label
            return Forecast(concurrency, max_tokens, model, None, missing=(reason,), prompt_tokens=prompt_tokens)
        prompt = None
        if prompt_tokens is not None:
            measured = self._levels.measured_prompt_levels()
            prompt = concurrency_blend(prompt_tokens, measured)
            if prompt is None:
                label = p_label(_int_or(prompt_tokens))
                reason = f"{label} is outside the measured prompt levels" if measured else label
                return Forecast(concurrency, max_tokens, model, None, missing=(reason,), prompt_tokens=prompt_tokens)
        x = self._levels.vector(blend, max_tokens, model, prompt)
        if x is None or not self._estimable(x):
            missing = tuple(label for label, known in (
                (k_label(max_tokens), self.calibration.k_len(max_tokens) is not None),
                (c_label(model), self.calibration.c_model(model) is not None),
            ) if not known) or ("not identified by the data",)
            return Forecast(concurrency, max_tokens, model, None, missing=missing,
                            interpolated=blend.interpolated, extrapolated=blend.extrapolated,
                            prompt_tokens=prompt_tokens)
        log_tps = float(x @ self._beta)
        mean_interval = prediction_interval = None
        if self.sigma is not None:
            t = t_two_sided(self.confidence, self.dof)
            variance_mean = self.sigma ** 2 * float(x @ self._xtx_pinv @ x)
            spread_mean = t * math.sqrt(max(variance_mean, 0.0))
            spread_new = t * math.sqrt(max(variance_mean, 0.0) + self.sigma ** 2)
            mean_interval = (math.exp(log_tps - spread_mean), math.exp(log_tps + spread_mean))
            prediction_interval = (math.exp(log_tps - spread_new), math.exp(log_tps + spread_new))
        return Forecast(concurrency, max_tokens, model, math.exp(log_tps), mean_interval,
                        prediction_interval, blend.interpolated or (prompt is not None and prompt.interpolated),
                        blend.extrapolated, prompt_tokens=prompt_tokens)

    def _estimable(self, x: np.ndarray) -> bool:
        projected = self._null_projector @ x
        return float(projected @ projected) <= _IDENTIFIED_TOL * (1.0 + float(x @ x))


# ---------------------------------------------------------------------------
# Fitting
# ---------------------------------------------------------------------------

def _int_or(value: float) -> int | float:
    return int(value) if float(value).is_integer() else value


def _distinct_sorted(values: Sequence[int], limit: int | None) -> list[int]:
    levels = sorted(set(values))
    return levels[:limit] if limit is not None else levels


def fitted_rows(statuses: Sequence[RowStatus], settings: Settings = Settings()) -> list[RowStatus]:
    """The rows the fit uses: included rows whose levels fall within the workbook's slots (the
    prompt levels: those of the K_in table, over every row, `model.prompt_level_table`)."""
    prompts = set(prompt_level_table(statuses, base_prompt_level(statuses, settings), settings.prompt_slots))
    included = [s for s in statuses if s.included and s.ln_tps is not None
                and (s.prompt_level is None or s.prompt_level in prompts)]
    concurrency = set(_distinct_sorted([s.concurrency for s in included], settings.concurrency_slots))
    lengths = set(_distinct_sorted([s.max_tokens for s in included], settings.length_slots))
    models: list[str] = []
    for s in included:
        if not any(same_model(m, s.model) for m in models):
            models.append(s.model)
    if settings.model_slots is not None:
        models = models[:settings.model_slots]
    return [s for s in included if s.concurrency in concurrency and s.max_tokens in lengths
            and any(same_model(m, s.model) for m in models)]


Design = Sequence[tuple[str, int, int] | tuple[str, int, int, int | None]]


def _prompt_of(cell: tuple[str, int, int] | tuple[str, int, int, int | None]) -> int | None:
    return cell[3] if len(cell) > 3 else None


def design_matrix(cells: Design, *, base_model: str, base_concurrency: int,
                  base_max_tokens: int, base_prompt_level: int | None = None) -> tuple[np.ndarray, list[str]]:
    """The dummy-coded design matrix of (model, concurrency, max_tokens[, prompt level]) rows, and
    its column labels."""
    levels = _levels_for(cells, base_model, base_concurrency, base_max_tokens, base_prompt_level)
    rows = [levels.vector(ConcurrencyBlend(((cell[1], 1.0),)), cell[2], cell[0], _at_level(_prompt_of(cell)))
            for cell in cells]
    matrix = np.array(rows, dtype=float).reshape(len(rows), levels.size)
    return matrix, levels.labels()


def _levels_for(cells: Design, base_model: str, base_concurrency: int,
                base_max_tokens: int, base_prompt_level: int | None = None) -> _Levels:
    models: list[str] = []
    for cell in cells:
        model = cell[0]
        if not same_model(model, base_model) and not any(same_model(m, model) for m in models):
            models.append(model)
    prompts = {level for cell in cells if (level := _prompt_of(cell)) is not None}
    return _Levels(
        base_concurrency=base_concurrency, base_max_tokens=base_max_tokens, base_model=base_model,
        concurrency=tuple(sorted({cell[1] for cell in cells} - {base_concurrency})),
        max_tokens=tuple(sorted({cell[2] for cell in cells} - {base_max_tokens})),
        models=tuple(models), base_prompt_level=base_prompt_level,
        prompt_levels=tuple(sorted(prompts - {base_prompt_level})) if base_prompt_level is not None else (),
    )


def fit(statuses: Sequence[RowStatus], settings: Settings = Settings(), *,
        confidence: float = CONFIDENCE) -> LsqFit:
    """Fit ln TPS on the included rows by OLS with the chain's base levels as reference."""
    chain = calibrate(statuses, settings)
    used = fitted_rows(statuses, settings)
    if not used or chain.base_model is None or chain.base_concurrency is None or chain.base_max_tokens is None:
        return _empty_fit(chain, confidence)

    base_model = next((s.model for s in used if same_model(s.model, chain.base_model)), chain.base_model)
    levels = _levels_for([(s.model, s.concurrency, s.max_tokens, s.prompt_level) for s in used], base_model,
                         chain.base_concurrency, chain.base_max_tokens, chain.base_prompt_level)
    x_rows = [levels.vector(ConcurrencyBlend(((s.concurrency, 1.0),)), s.max_tokens, s.model,
                            _at_level(s.prompt_level)) for s in used]
    design = np.array(x_rows, dtype=float)
    response = np.array([s.ln_tps for s in used], dtype=float)
    n, p = design.shape

    u, singular, vt = np.linalg.svd(design, full_matrices=False)
    tolerance = singular.max() * max(n, p) * np.finfo(float).eps if singular.size else 0.0
    rank = int((singular > tolerance).sum())
    u_r, s_r, v_r = u[:, :rank], singular[:rank], vt[:rank]
    beta = v_r.T @ ((u_r.T @ response) / s_r)
    xtx_pinv = v_r.T @ np.diag(1.0 / s_r ** 2) @ v_r
    null_projector = np.eye(p) - v_r.T @ v_r
    identified = np.diag(null_projector) <= _IDENTIFIED_TOL

    fitted_log = design @ beta
    residuals = response - fitted_log
    dof = n - rank
    sigma = math.sqrt(float(residuals @ residuals) / dof) if dof > 0 else None
    covariance = (sigma ** 2 if sigma is not None else math.nan) * xtx_pinv
    covariance[~identified, :] = math.nan
    covariance[:, ~identified] = math.nan
    leverage = (u_r ** 2).sum(axis=1)

    t = t_two_sided(confidence, dof) if dof > 0 else None
    labels = levels.labels()
    kinds = (["base"] + ["f"] * len(levels.concurrency) + ["k_len"] * len(levels.max_tokens)
             + ["c_model"] * len(levels.models) + ["k_in"] * len(levels.prompt_levels))
    level_values: list[int | str | None] = [None, *levels.concurrency, *levels.max_tokens, *levels.models,
                                            *levels.prompt_levels]
    row_counts = _row_counts(used, levels)
    coefficients: list[Coefficient] = []
    for j, label in enumerate(labels):
        value = interval = se = None
        if identified[j]:
            value = math.exp(beta[j])
            if sigma is not None and t is not None:
                se = math.sqrt(max(float(covariance[j, j]), 0.0))
                interval = (math.exp(beta[j] - t * se), math.exp(beta[j] + t * se))
        coefficients.append(Coefficient(label=label, kind=kinds[j], level=level_values[j],
                                        rows=row_counts[j], value=value, std_error_log=se,
                                        interval=interval))

    rows = []
    for i, s in enumerate(used):
        loo_tps = loo_pct = None
        if leverage[i] < 1.0 - _LEVERAGE_ONE:
            loo_log = response[i] - residuals[i] / (1.0 - leverage[i])
            loo_tps = math.exp(loo_log)
            loo_pct = (s.tps - loo_tps) / s.tps * 100
        rows.append(RowFit(status=s, fitted_tps=math.exp(fitted_log[i]), residual_log=float(residuals[i]),
                           leverage=float(leverage[i]), loo_predicted_tps=loo_tps, loo_error_pct=loo_pct))

    calibration = _as_calibration(chain, base_model, used, levels, coefficients)
    return LsqFit(calibration=calibration, coefficients=coefficients, rows=rows, observations=n,
                  parameters=p, rank=rank, dof=dof, sigma=sigma, covariance=covariance,
                  confidence=confidence, _levels=levels, _beta=beta, _xtx_pinv=xtx_pinv,
                  _null_projector=null_projector)


def _row_counts(used: Sequence[RowStatus], levels: _Levels) -> list[int]:
    counts = [sum(1 for s in used if s.concurrency == levels.base_concurrency
                  and s.max_tokens == levels.base_max_tokens and same_model(s.model, levels.base_model)
                  and s.prompt_level == levels.base_prompt_level)]
    counts += [sum(1 for s in used if s.concurrency == c) for c in levels.concurrency]
    counts += [sum(1 for s in used if s.max_tokens == length) for length in levels.max_tokens]
    counts += [sum(1 for s in used if same_model(s.model, m)) for m in levels.models]
    counts += [sum(1 for s in used if s.prompt_level == level) for level in levels.prompt_levels]
    return counts


def _as_calibration(chain: Calibration, base_model: str, used: Sequence[RowStatus], levels: _Levels,
                    coefficients: list[Coefficient]) -> Calibration:
    value = {c.label: c.value for c in coefficients}
    base_tps = value[BASE_LABEL]
    concurrency_levels = [
        ConcurrencyLevel(concurrency=c, rows=sum(1 for s in used if s.concurrency == c),
                         f=1.0 if c == levels.base_concurrency else value[f_label(c)])
        for c in sorted({s.concurrency for s in used})]
    length_levels = [
        LengthLevel(max_tokens=length, anchor_concurrency=None,
                    rows=sum(1 for s in used if s.max_tokens == length),
                    k_len=1.0 if length == levels.base_max_tokens else value[k_label(length)])
        for length in sorted({s.max_tokens for s in used})]
    models: list[ModelLevel] = []
    for s in used:
        if any(same_model(m.model, s.model) for m in models):
            continue
        c_model = 1.0 if same_model(s.model, levels.base_model) else value[c_label(s.model)]
        point = base_tps / c_model if base_tps is not None and c_model is not None else None
        models.append(ModelLevel(model=s.model, rows=sum(1 for r in used if same_model(r.model, s.model)),
                                 base_point_tps=point, c_model=c_model))
    prompt_levels = [
        PromptLevel(prompt_level=level, anchor_concurrency=None, rows=sum(1 for s in used if s.prompt_level == level),
                    k_in=1.0 if level == levels.base_prompt_level else value[p_label(level)])
        for level in levels.measured_prompt_levels()]
    return Calibration(base_model=base_model, base_max_tokens=levels.base_max_tokens,
                       base_concurrency=levels.base_concurrency,
                       base_rows=next(c.rows for c in coefficients if c.label == BASE_LABEL),
                       base_tps=base_tps, concurrency_levels=concurrency_levels,
                       length_levels=length_levels, models=models, base_prompt_level=levels.base_prompt_level,
                       prompt_levels=prompt_levels)


def _empty_fit(chain: Calibration, confidence: float) -> LsqFit:
    calibration = dataclasses.replace(chain, base_rows=0, base_tps=None, concurrency_levels=[],
                                      length_levels=[], models=[], prompt_levels=[])
    return LsqFit(calibration=calibration, coefficients=[], rows=[], observations=0, parameters=0,
                  rank=0, dof=0, sigma=None, covariance=np.zeros((0, 0)), confidence=confidence)


# ---------------------------------------------------------------------------
# Hold-out (leave-one-out)
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class HoldOutRow:
    exp_id: str
    model: str
    concurrency: int
    max_tokens: int
    tps: float
    predicted_tps: float | None  # from a fit without this row; None: not identified without it
    error_pct: float | None  # (measured - predicted) / measured x 100


@dataclass(frozen=True)
class HoldOut:
    method: str  # "lsq" | "chain"
    rows: list[HoldOutRow]
    predicted_rows: int
    missing_rows: int  # rows with no LOO prediction
    mape_pct: float | None
    max_pct: float | None
    verdict: str

    def as_dict(self) -> dict[str, Any]:
        return {"method": self.method, "loo_mape_pct": self.mape_pct, "loo_max_pct": self.max_pct,
                "loo_rows": self.predicted_rows, "loo_missing_rows": self.missing_rows,
                "verdict": self.verdict}


def _holdout(method: str, rows: list[HoldOutRow]) -> HoldOut:
    errors = [abs(r.error_pct) for r in rows if r.error_pct is not None]
    mape = sum(errors) / len(errors) if errors else None
    worst = max(errors) if errors else None
    return HoldOut(method=method, rows=rows, predicted_rows=len(errors), missing_rows=len(rows) - len(errors),
                   mape_pct=mape, max_pct=worst, verdict=verdict_for(mape, worst, len(errors)))


def lsq_holdout(result: LsqFit) -> HoldOut:
    """Leave-one-out errors of the least-squares fit (hat-matrix shortcut)."""
    return _holdout("lsq", [
        HoldOutRow(r.status.exp_id, r.status.model, r.status.concurrency, r.status.max_tokens,
                   r.status.tps, r.loo_predicted_tps, r.loo_error_pct) for r in result.rows])


def chain_holdout(statuses: Sequence[RowStatus], settings: Settings = Settings()) -> HoldOut:
    """Leave-one-out errors of the chain: each included row predicted by the chain without it.

    The base model, length and concurrency stay those of the full data, so holding out
    the only base-point row leaves the chain without a BaseTPS (no prediction).

    Closed form, linear in the rows: every chain coefficient is a geometric mean over
    one (model, max_tokens, prompt level, concurrency) cell, so leaving a row out changes
    only its own cell's count and log sum. `_ChainCells` keeps those per cell and recomputes
    the few coefficients a prediction needs from them; rows whose removal could reorder the
    model slots (the first row of a model when the slots are full) or the prompt-level slots
    (the only row of a level when they are full) fall back to a recalibration without them,
    which is exact by definition.
    """
    full = calibrate(statuses, settings)
    pinned = dataclasses.replace(settings, base_model=full.base_model, base_max_tokens=full.base_max_tokens,
                                 base_concurrency=full.base_concurrency, base_prompt_level=full.base_prompt_level)
    cells = _ChainCells(statuses, full, settings)
    rows = []
    for i, s in enumerate(statuses):
        if not s.included:
            continue
        if cells.needs_recalibration(i):
            without = [other for j, other in enumerate(statuses) if j != i]
            # the row's own prediction, at its prompt level's K_in (as `model.check_rows` makes it)
            predicted = check_rows([s], calibrate(without, pinned))[0].predicted_tps
        else:
            predicted = cells.predict_without(i)
        error = (s.tps - predicted) / s.tps * 100 if predicted is not None else None
        rows.append(HoldOutRow(s.exp_id, s.model, s.concurrency, s.max_tokens, s.tps, predicted, error))
    return _holdout("chain", rows)


class _ChainCells:
    """The chain's inputs as per-cell (count, sum of ln TPS), to recalibrate without one row cheaply.

    Mirrors `model.calibrate` with its base levels pinned to the full calibration's.
    """

    def __init__(self, statuses: Sequence[RowStatus], full: Calibration, settings: Settings) -> None:
        self.statuses = statuses
        self.base_model = (full.base_model or "").casefold()
        self.base_length = full.base_max_tokens
        self.base_c = full.base_concurrency
        self.base_prompt = full.base_prompt_level
        self.cells: dict[tuple[str, int, int | None, int], tuple[int, float]] = {}
        per_c: dict[int, int] = {}
        per_length: dict[int, int] = {}
        per_model: dict[str, int] = {}
        per_prompt: dict[int | None, int] = {}  # every row (the K_in table lists the levels of all rows)
        first_of_model: dict[str, int] = {}
        for i, s in enumerate(statuses):
            per_prompt[s.prompt_level] = per_prompt.get(s.prompt_level, 0) + 1
            if not s.included:
                continue
            key = (s.model.casefold(), s.max_tokens, s.prompt_level, s.concurrency)
            if s.ln_tps is not None:
                n, total = self.cells.get(key, (0, 0.0))
                self.cells[key] = (n + 1, total + s.ln_tps)
            per_c[s.concurrency] = per_c.get(s.concurrency, 0) + 1
            per_length[s.max_tokens] = per_length.get(s.max_tokens, 0) + 1
            per_model[key[0]] = per_model.get(key[0], 0) + 1
            first_of_model.setdefault(key[0], i)
        self.per_c, self.per_length, self.per_model, self.per_prompt = per_c, per_length, per_model, per_prompt
        self.first_of_model = first_of_model
        self.c_levels = set(level.concurrency for level in full.concurrency_levels)
        self.length_levels = set(level.max_tokens for level in full.length_levels)
        self.model_levels = {level.model.casefold() for level in full.models}
        self.prompt_levels = {level.prompt_level for level in full.prompt_levels}
        self.sorted_c = sorted(self.c_levels)
        self.models_full = settings.model_slots is not None and len(per_model) > settings.model_slots
        self.prompts_full = (settings.prompt_slots is not None
                             and len([p for p in per_prompt if p is not None]) > settings.prompt_slots)

    def needs_recalibration(self, i: int) -> bool:
        s = self.statuses[i]
        return ((self.models_full and self.first_of_model.get(s.model.casefold()) == i)
                or (self.prompts_full and self.per_prompt.get(s.prompt_level) == 1))

    def predict_without(self, i: int) -> float | None:
        s = self.statuses[i]
        model = s.model.casefold()
        # Sole row of a level: without it the level is gone, and so is its coefficient.
        if (self.per_c[s.concurrency] == 1 or self.per_length[s.max_tokens] == 1 or self.per_model[model] == 1
                or (s.prompt_level is not None and self.per_prompt[s.prompt_level] == 1)):
            return None
        if (s.concurrency not in self.c_levels or s.max_tokens not in self.length_levels
                or model not in self.model_levels
                or (s.prompt_level is not None and s.prompt_level not in self.prompt_levels)):
            return None  # beyond the workbook's slots: the full calibration has no such level either
        removed = (model, s.max_tokens, s.prompt_level, s.concurrency)
        ln_removed = s.ln_tps if s.ln_tps is not None else 0.0

        def mean_tps(key: tuple[str, int, int | None, int]) -> float | None:
            n, total = self.cells.get(key, (0, 0.0))
            if key == removed and s.ln_tps is not None:
                n, total = n - 1, total - ln_removed
            return math.exp(total / n) if n > 0 else None

        bm, bl, bc, p0 = self.base_model, self.base_length, self.base_c, self.base_prompt
        if bl is None or bc is None:
            return None
        base = mean_tps((bm, bl, p0, bc))
        if base is None:
            return None

        def f(c: int) -> float | None:
            if c not in self.c_levels:
                return None
            tps = mean_tps((bm, bl, p0, c))
            return tps / base if tps is not None else None

        def anchored(length: int, level: int | None) -> float | None:
            """TPS(bm, length, c*, level) / (base f(c*)) at the lowest c with a row there and a known f."""
            for c in self.sorted_c:
                at = mean_tps((bm, length, level, c))
                f_c = f(c) if at is not None else None
                if at is not None and f_c is not None:
                    return at / (base * f_c)
            return None

        f_row = f(s.concurrency)
        if f_row is None:
            return None
        # K_len: anchored at the lowest concurrency with a base-model row at this length and a known f.
        k = anchored(s.max_tokens, p0)
        if k is None:
            return None
        # K_in likewise, at the base length and the row's prompt level (1 with no levels).
        k_in = anchored(bl, s.prompt_level) if s.prompt_level is not None else 1.0
        if k_in is None:
            return None
        at_base_point = mean_tps((model, bl, p0, bc))
        if at_base_point is None:
            return None
        c_model = base / at_base_point
        return base * f_row * k * k_in / c_model


# ---------------------------------------------------------------------------
# Interaction check
# ---------------------------------------------------------------------------

PROMPT_KIND = "concurrency x prompt"


@dataclass(frozen=True)
class InteractionCell:
    kind: str  # "concurrency x max_tokens" | "model x concurrency" | "concurrency x prompt"
    model: str | None
    concurrency: int
    max_tokens: int | None
    rows: int
    mean_residual_log: float
    effect_pct: float  # measured vs separable prediction: (exp(mean residual) - 1) x 100
    threshold_log: float  # t x se: a larger |mean residual| is significant
    breaks_model: bool
    prompt_level: int | None = None  # the "concurrency x prompt" cells' prompt level

    def describe(self) -> str:
        """The cell in words: a report_texts.Text (its str the English; `say(lang)` another language)."""
        return Text("with_rows", what=self.effect(), rows=self.rows)

    def effect(self) -> Text:
        """Where the cell is and how far TPS is from the separable model there (no row count)."""
        direction = Text("above" if self.effect_pct > 0 else "below")
        if self.kind == PROMPT_KIND:
            return Text("cell_prompt", c=self.concurrency, prompt=self.prompt_level, pct=abs(self.effect_pct),
                        direction=direction)
        where = (Text("cell_c_length", c=self.concurrency, length=self.max_tokens) if self.model is None
                 else Text("cell_model_c", model=self.model, c=self.concurrency))
        return Text("cell_measured", where=where, pct=abs(self.effect_pct), direction=direction)


@dataclass(frozen=True)
class Plateau:
    model: str
    max_tokens: int
    concurrency_from: int
    concurrency_to: int
    tps_from: float
    tps_to: float
    f_growth_pct: float  # what the fitted f predicts between the two levels
    faults_at_or_above: bool  # failed or rate-limited rows at these concurrencies
    prompt_level: int | None = None

    def describe(self) -> str:
        """The plateau in words: a report_texts.Text (its str the English; `say(lang)` another language)."""
        return Text("plateau", model=self.model, length=self.max_tokens,
                    prompt=Text("plateau_prompt", level=self.prompt_level) if self.prompt_level is not None else "",
                    low=self.concurrency_from, high=self.concurrency_to, tps_low=self.tps_from, tps_high=self.tps_to,
                    growth=self.f_growth_pct, faults=Text("plateau_faults") if self.faults_at_or_above else "")


@dataclass
class InteractionCheck:
    cells: list[InteractionCell]
    plateaus: list[Plateau]
    testable: bool  # residual degrees of freedom exist

    @property
    def broken(self) -> list[InteractionCell]:
        return [c for c in self.cells if c.breaks_model]

    @property
    def separable(self) -> bool:
        return not self.broken and not self.plateaus

    def prompt_interaction(self) -> str | None:
        """The concurrency x prompt interaction in words (a report_texts.Text), led by the cell that
        moves TPS most (None when no such cell breaks the separable model)."""
        cells = [c for c in self.broken if c.kind == PROMPT_KIND]
        if not cells:
            return None
        worst = max(cells, key=lambda c: abs(c.mean_residual_log))
        others = [c for c in self.cells if c.kind == PROMPT_KIND]
        low_c = min(c.concurrency for c in others)
        low_p = min(c.prompt_level or 0 for c in others)
        if worst.concurrency > low_c and (worst.prompt_level or 0) > low_p:
            lead = "lead_more_high" if worst.effect_pct < 0 else "lead_less_high"
        elif worst.concurrency == low_c and (worst.prompt_level or 0) > low_p:
            lead = "lead_more_low" if worst.effect_pct < 0 else "lead_less_low"
        else:
            lead = "lead_depends"
        return Text("prompt_interaction", lead=Text(lead), where=worst.effect())

    def summary(self) -> str:
        """The check in words: a report_texts.Text (its str the English; `say(lang)` another language)."""
        if not self.testable:
            return Text("separable_untestable")
        if self.separable:
            return Text("separable_ok")
        parts = [c.describe() for c in self.broken] + [p.describe() for p in self.plateaus]
        prompt = self.prompt_interaction()
        return Text("separable_summary", prompt=Text("separable_prompt", prompt=prompt) if prompt else "",
                    broken=Text("separable_broken"), parts=Joined(tuple(parts), "parts_sep"))


def interaction_check(result: LsqFit, statuses: Sequence[RowStatus] = (), *,
                      confidence: float = CONFIDENCE,
                      min_effect: float = INTERACTION_MIN_EFFECT) -> InteractionCheck:
    """Cells whose mean residual breaks the separable model, and rate-limit plateaus."""
    if result.sigma is None or not result.rows:
        return InteractionCheck(cells=[], plateaus=_plateaus(result, statuses), testable=False)
    residuals = np.array([r.residual_log for r in result.rows])
    levels = result._levels
    assert levels is not None
    design = np.array([levels.vector(ConcurrencyBlend(((r.status.concurrency, 1.0),)), r.status.max_tokens,
                                     r.status.model, _at_level(r.status.prompt_level)) for r in result.rows])
    u, singular, _ = np.linalg.svd(design, full_matrices=False)
    basis = u[:, :result.rank]

    families: list[tuple[str, list[tuple[tuple[Any, ...], list[int]]]]] = []
    by_cl: dict[tuple[int, int], list[int]] = {}
    for i, r in enumerate(result.rows):
        by_cl.setdefault((r.status.concurrency, r.status.max_tokens), []).append(i)
    families.append(("concurrency x max_tokens", [((None, c, length), idx) for (c, length), idx in by_cl.items()]))
    if len(levels.models) >= 1:
        by_mc: dict[tuple[str, int], list[int]] = {}
        display: dict[str, str] = {}
        for i, r in enumerate(result.rows):
            key = r.status.model.casefold()
            display.setdefault(key, r.status.model)
            by_mc.setdefault((key, r.status.concurrency), []).append(i)
        families.append(("model x concurrency",
                         [((display[m], c, None), idx) for (m, c), idx in by_mc.items()]))

    cells: list[InteractionCell] = []
    for kind, groups in families:
        t = t_ppf(1.0 - (1.0 - confidence) / (2 * len(groups)), result.dof)
        for group_key, indices in groups:
            model, concurrency, max_tokens = group_key[:3]
            weights = np.zeros(len(result.rows))
            weights[indices] = 1.0 / len(indices)
            # var(mean residual) = sigma^2 a'(I - H)a, with H = U U'
            projected = basis.T @ weights
            variance = max(float(weights @ weights - projected @ projected), 0.0)
            threshold = t * result.sigma * math.sqrt(variance)
            mean_residual = float(residuals[indices].mean())
            effect = math.exp(mean_residual) - 1.0
            breaks = abs(mean_residual) > threshold and abs(effect) >= min_effect
            cells.append(InteractionCell(kind=kind, model=model, concurrency=concurrency,
                                         max_tokens=max_tokens, rows=len(indices),
                                         mean_residual_log=mean_residual, effect_pct=effect * 100,
                                         threshold_log=threshold, breaks_model=breaks))
    cells += _prompt_interactions(result, design, confidence, min_effect)
    return InteractionCheck(cells=cells, plateaus=_plateaus(result, statuses), testable=True)


def f_cdf(x: float, d1: float, d2: float) -> float:
    """P(F <= x) for Fisher's F with (d1, d2) degrees of freedom."""
    if x <= 0:
        return 0.0
    return regularized_beta(d1 / 2.0, d2 / 2.0, d1 * x / (d1 * x + d2))


def _prompt_interactions(result: LsqFit, design: np.ndarray, confidence: float,
                         min_effect: float) -> list[InteractionCell]:
    """Concurrency x prompt interaction, by a nested F test: the separable fit against one that
    adds a free factor for every (concurrency, prompt level) cell off the base concurrency and
    the base prompt level. Each added factor is that cell's TPS against what the separable model
    says there (exp(gamma) - 1); a cell breaks the separable model when the F test rejects it at
    `confidence`, its own factor is significant (t, Bonferroni over the cells) and moves TPS by
    at least `min_effect`. Nothing to test without two prompt and two concurrency levels, or
    without residual degrees of freedom once the factors are added (replicates, or a second
    max_tokens, give them)."""
    levels = result._levels
    assert levels is not None and result.sigma is not None
    pairs = sorted({(r.status.concurrency, r.status.prompt_level) for r in result.rows
                    if r.status.prompt_level is not None and r.status.prompt_level != levels.base_prompt_level
                    and r.status.concurrency != levels.base_concurrency})
    if not pairs:
        return []
    extra = np.array([[1.0 if (r.status.concurrency, r.status.prompt_level) == pair else 0.0 for pair in pairs]
                      for r in result.rows])
    augmented = np.hstack([design, extra])
    response = np.array([r.status.ln_tps for r in result.rows], dtype=float)
    n = len(result.rows)
    u, singular, vt = np.linalg.svd(augmented, full_matrices=False)
    tolerance = singular.max() * max(augmented.shape) * np.finfo(float).eps
    rank = int((singular > tolerance).sum())
    dof = n - rank
    if dof <= 0 or rank <= result.rank:
        return []
    v_r, s_r = vt[:rank], singular[:rank]
    beta = v_r.T @ ((u[:, :rank].T @ response) / s_r)
    residual = response - augmented @ beta
    rss_full = float(residual @ residual)
    rss_separable = result.sigma ** 2 * result.dof
    added = rank - result.rank
    if rss_full <= 0:
        rejected = rss_separable > 0
    else:
        statistic = ((rss_separable - rss_full) / added) / (rss_full / dof)
        rejected = 1.0 - f_cdf(statistic, added, dof) < 1.0 - confidence
    sigma = math.sqrt(rss_full / dof)
    covariance = v_r.T @ np.diag(1.0 / s_r ** 2) @ v_r
    null = np.eye(augmented.shape[1]) - v_r.T @ v_r
    t = t_ppf(1.0 - (1.0 - confidence) / (2 * len(pairs)), dof)
    out = []
    offset = design.shape[1]
    for j, (concurrency, level) in enumerate(pairs):
        column = offset + j
        if null[column, column] > _IDENTIFIED_TOL:
            continue  # aliased: the data cannot separate this cell's own factor
        gamma = float(beta[column])
        threshold = t * sigma * math.sqrt(max(float(covariance[column, column]), 0.0))
        effect = math.exp(gamma) - 1.0
        breaks = bool(rejected) and abs(gamma) > threshold and abs(effect) >= min_effect
        members = sum(1 for r in result.rows if (r.status.concurrency, r.status.prompt_level) == (concurrency, level))
        out.append(InteractionCell(kind=PROMPT_KIND, model=None, concurrency=concurrency, max_tokens=None,
                                   rows=members, mean_residual_log=gamma, effect_pct=effect * 100,
                                   threshold_log=threshold, breaks_model=breaks, prompt_level=level))
    return out


def _plateaus(result: LsqFit, statuses: Sequence[RowStatus]) -> list[Plateau]:
    """Flat TPS at the top two concurrency levels of a (model, max_tokens) where f grows.

    Uses every eligible row (no faults, some output), including rows the monotonic
    filter excluded: a plateau is exactly where TPS stops rising.
    """
    cal = result.calibration
    groups: dict[tuple[str, int, int], dict[int, list[float]]] = {}
    display: dict[str, str] = {}
    for s in statuses:
        if s.eligible and s.tps > 0:
            display.setdefault(s.model.casefold(), s.model)
            groups.setdefault((s.model.casefold(), s.max_tokens, s.prompt_level or 0), {}).setdefault(
                s.concurrency, []).append(s.tps)
    plateaus = []
    for (model_key, length, prompt), by_c in sorted(groups.items()):
        if len(by_c) < 2:
            continue
        low, high = sorted(by_c)[-2:]
        tps_low, tps_high = median(by_c[low]), median(by_c[high])
        f_low, f_high = cal.f(low), cal.f(high)
        if f_low is None or f_high is None or high / low < PLATEAU_MIN_STEP:
            continue
        growth = f_high / f_low
        if tps_high / tps_low < PLATEAU_FLAT_RATIO and growth >= PLATEAU_MIN_GROWTH:
            faults = any(s.fault and s.model.casefold() == model_key and s.max_tokens == length
                         and (s.prompt_level or 0) == prompt and s.concurrency >= low for s in statuses)
            plateaus.append(Plateau(model=display[model_key], max_tokens=length, concurrency_from=low,
                                    concurrency_to=high, tps_from=tps_low, tps_to=tps_high,
                                    f_growth_pct=(growth - 1.0) * 100, faults_at_or_above=faults,
                                    prompt_level=prompt or None))
    return plateaus


# ---------------------------------------------------------------------------
# All together
# ---------------------------------------------------------------------------

@dataclass
class LsqAnalysis:
    fit: LsqFit
    holdout: HoldOut
    chain_holdout: HoldOut
    interactions: InteractionCheck

    def report(self) -> dict[str, Any]:
        """Fields for the JSON report (`loo_mape_pct`, `loo_max_pct`, `intervals`, `method`, ...).

        With aliased levels (rank below the parameter count) the workbook's least-squares
        sheet gives no fit, so the report's hold-out says so too rather than disagree with it;
        `forecast` still predicts the estimable combinations.
        """
        result = self.fit
        aliased = result.rank < result.parameters
        return {
            "method": "lsq",
            "loo_mape_pct": None if aliased else self.holdout.mape_pct,
            "loo_max_pct": None if aliased else self.holdout.max_pct,
            "loo_rows": 0 if aliased else self.holdout.predicted_rows,
            "loo_missing_rows": len(self.holdout.rows) if aliased else self.holdout.missing_rows,
            "verdict": "insufficient" if aliased else self.holdout.verdict,
            "aliased": aliased,
            "confidence": result.confidence,
            "coefficients": {c.label: c.value for c in result.coefficients},
            "intervals": result.intervals(),
            "unidentified": list(result.unidentified),
            "observations": result.observations,
            "parameters": result.parameters,
            "rank": result.rank,
            "dof": result.dof,
            "sigma_log": result.sigma,
            "chain_holdout": self.chain_holdout.as_dict(),
            # None: no residual dof to test cells, and no plateau seen.
            "separable": (self.interactions.separable
                          if self.interactions.testable or self.interactions.plateaus else None),
            "interactions": [c.describe() for c in self.interactions.broken],
            "plateaus": [p.describe() for p in self.interactions.plateaus],
            "interaction_summary": self.interactions.summary(),
            **({"prompt_interaction": prompt} if (prompt := self.interactions.prompt_interaction()) else {}),
        }


def least_squares_analysis(statuses: Sequence[RowStatus], settings: Settings = Settings(), *,
                           confidence: float = CONFIDENCE) -> LsqAnalysis:
    """Fit, hold out (lsq and chain), and check the separable model, on filtered rows."""
    result = fit(statuses, settings, confidence=confidence)
    return LsqAnalysis(fit=result, holdout=lsq_holdout(result), chain_holdout=chain_holdout(statuses, settings),
                       interactions=interaction_check(result, statuses, confidence=confidence))
