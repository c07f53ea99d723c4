"""Baseline drift between two calibrations: has the endpoint changed since the baseline? (no I/O)

Both sides are fitted by least squares (`scm_xl.lsq.fit`) with the baseline's base point
(model, max_tokens, concurrency, prompt level) as the reference of both, so every coefficient
means the same thing on each side.

The test, per coefficient identified on both sides with a standard error on both sides:

    t = (ln new - ln baseline) / sqrt(se_baseline^2 + se_new^2)

with Welch-Satterthwaite degrees of freedom from the two fits' residual dof, two-sided.
A coefficient has *moved beyond its noise* when p < (1 - DRIFT_CONFIDENCE) / k, k the number
of tests (Bonferroni: 95% family-wise), and it *drifted* when it also moved by at least
MIN_DRIFT_EFFECT (5%): with many replicates a 1% wobble is significant but is no change a
deployment owner acts on.

The absolute level. BaseTPS is the only coefficient that is not a ratio: every other one is
relative to the base point. When the new data lack the base point (the model was renamed, or
its base max_tokens or base concurrency was not measured again) BaseTPS is not identified on
the new side, and the ratios alone would call a halved throughput stable. Then the level is
tested on the new rows the baseline's model predicts (`level_shift`, label LEVEL_LABEL): the
geometric mean of their measured TPS against that of the baseline's predictions of them, by the
same Welch t test and 5% (one more test in the Bonferroni family). Its standard error on the
baseline's side is the mean of the predictions' standard errors (an upper bound: they share the
baseline's coefficients); on the new side the new fit's residual sigma / sqrt(rows).

Verdict:

- `insufficient` when either side has no residual degrees of freedom (its noise is unknown,
  e.g. the article's seven rows fitting seven numbers) or nothing can be compared;
- `drift` when any coefficient, or the level, drifted;
- without the base point in the new data, `stable` only on the evidence of the rows the
  baseline predicts: the level's 90% interval of change lies within +-MIN_DRIFT_EFFECT (shown
  not to have moved by 5%, not merely not shown to have moved) and no more of those rows fall
  outside the baseline's 90% prediction interval than chance allows (one-sided binomial,
  p >= 1 - DRIFT_CONFIDENCE). Otherwise, or when the baseline's model predicts none of the new
  rows, `insufficient`: the data cannot say whether the level moved;
- else `stable`.

Beside the test, the baseline's model predicts the new rows (hold-out of old on new), each at
its own prompt level: MAPE, max error and how many fall inside the baseline's 90% prediction
interval.

When both sides have a latency model (`scm_xl.latency`: TTFT, latency and ITL recorded), the
baseline's latency model predicts the new rows too, each row matched to a baseline experiment
by (model, concurrency, max_tokens, prompt_level) and predicted at its own measured prompt and
output length (as the model's own leave-one-out does): MAPE, max error and how many fall inside
its 90% prediction interval. Where the prompt levels of the two sides differ, that is said and
only the levels both measured are compared. The knee of each model is compared as well: it
moved when both sides found a slot limit and the ranges the data allow do not overlap, or when
one side found one where the other measured past it without one. None of this changes the
verdict (it is the least-squares coefficients' and the level's alone).

Long because the verdict is one argument: the coefficient tests, the level test without the base
point, the hold-out of old on new and the latency comparison share the two fits and the rows
they matched, and a verdict that rests on part of them is how a halved throughput was called stable.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Sequence

from scm_xl.compare_texts import LEVEL_LABEL, Text, label_text, levels, say, verdict_word, words
from scm_xl.lsq import BASE_LABEL, Coefficient, LsqFit, fit, t_cdf, t_two_sided
from scm_xl.model import Analysis, same_model, verdict_for
from scm_xl.rules import Lang

DRIFT_CONFIDENCE = 0.95
MIN_DRIFT_EFFECT = 0.05
VERDICTS = ("stable", "drift", "insufficient")
# LEVEL_LABEL (from compare_texts, which says it in words): the absolute level, tested on the new rows
# when BaseTPS cannot be


@dataclass(frozen=True)
class CoefficientShift:
    label: str
    kind: str
    baseline: float | None
    baseline_interval: tuple[float, float] | None
    new: float | None
    new_interval: tuple[float, float] | None
    change_pct: float | None  # (new / baseline - 1) x 100
    t_statistic: float | None
    dof: float | None
    p_value: float | None
    significant: bool  # moved beyond its noise (Bonferroni)
    drifted: bool  # significant and at least MIN_DRIFT_EFFECT
    status: str  # compared | baseline_only | new_only | unidentified | no_noise

    def as_dict(self) -> dict[str, Any]:
        return {"label": self.label, "kind": self.kind, "baseline": self.baseline,
                "baseline_interval": list(self.baseline_interval) if self.baseline_interval else None,
                "new": self.new, "new_interval": list(self.new_interval) if self.new_interval else None,
                "change_pct": self.change_pct, "t": self.t_statistic, "dof": self.dof, "p_value": self.p_value,
                "significant": self.significant, "drifted": self.drifted, "status": self.status}


@dataclass(frozen=True)
class OldOnNewRow:
    exp_id: str
    model: str
    concurrency: int
    max_tokens: int
    measured_tps: float
    predicted_tps: float | None  # the baseline's model; None: not predictable from the baseline
    error_pct: float | None
    inside_prediction_interval: bool | None
    predicted_log_se: float | None = None  # standard error of ln(the baseline's expected TPS) at the row


@dataclass(frozen=True)
class OldOnNew:
    rows: list[OldOnNewRow]
    predicted_rows: int
    missing_rows: int
    mape_pct: float | None
    max_pct: float | None
    inside_interval: int  # rows inside the baseline's 90% prediction interval
    with_interval: int  # rows that had one
    interval_confidence: float = 0.90  # of the baseline's prediction intervals

    def as_dict(self) -> dict[str, Any]:
        return {"mape_pct": self.mape_pct, "max_pct": self.max_pct, "rows": self.predicted_rows,
                "missing_rows": self.missing_rows, "inside_prediction_interval": self.inside_interval,
                "with_prediction_interval": self.with_interval,
                "verdict": verdict_for(self.mape_pct, self.max_pct, self.predicted_rows),
                "per_row": [dataclasses.asdict(r) for r in self.rows]}


@dataclass
class Comparison:
    baseline_name: str
    new_name: str
    base_point: tuple[str | None, int | None, int | None]  # (model, max_tokens, concurrency)
    coefficients: list[CoefficientShift]
    old_on_new: OldOnNew
    verdict: str
    reasons: list[str]  # compare_texts.Text: English, and said in another language
    confidence: float = DRIFT_CONFIDENCE
    min_effect: float = MIN_DRIFT_EFFECT
    baseline_rows: int = 0
    new_rows: int = 0
    baseline_dof: int = 0
    new_dof: int = 0
    tests: int = field(default=0)
    latency: LatencyComparison | None = None  # None: neither side has a latency model (or no rows given)
    # What of the baseline's base point the new data lack (then BaseTPS is not compared and the level
    # is judged on the new rows, LEVEL_LABEL); None: BaseTPS was compared or nothing could be.
    base_point_missing: str | None = None  # a compare_texts.Text

    @property
    def drifted(self) -> list[str]:
        return [c.label for c in self.coefficients if c.drifted]

    @property
    def alpha_per_test(self) -> float | None:
        return (1 - self.confidence) / self.tests if self.tests else None

    def test_description(self, lang: Lang = "en") -> str:
        alpha = self.alpha_per_test
        bonferroni = Text("bonferroni", alpha=alpha) if alpha is not None else Text("bonferroni_none")
        level = any(s.label == LEVEL_LABEL for s in self.coefficients)
        what = Text("test_what_level" if level else "test_what")
        return say(Text("test", conf=self.confidence, tests=self.tests, what=what, bonferroni=bonferroni,
                        effect=self.min_effect), lang)

    def level_rule(self, lang: Lang = "en") -> str | None:
        """The rule the verdict followed without the base point (None: it had the base point)."""
        if self.base_point_missing is None:
            return None
        return say(Text("level_rule", label=label_text(LEVEL_LABEL), conf=2 * self.confidence - 1,
                        effect=self.min_effect), lang)

    def as_dict(self) -> dict[str, Any]:
        model, length, concurrency = self.base_point
        return {
            "baseline": self.baseline_name, "new": self.new_name, "verdict": self.verdict,
            "drifted": self.drifted, "reasons": list(self.reasons), "test": self.test_description(),
            "confidence": self.confidence, "min_effect_pct": self.min_effect * 100, "tests": self.tests,
            "alpha_per_test": self.alpha_per_test,
            "base_point": {"model": model, "max_tokens": length, "concurrency": concurrency},
            "baseline_rows": self.baseline_rows, "new_rows": self.new_rows,
            "baseline_dof": self.baseline_dof, "new_dof": self.new_dof,
            "coefficients": [c.as_dict() for c in self.coefficients],
            "old_on_new": self.old_on_new.as_dict(),
            "base_point_missing": self.base_point_missing, "level_rule": self.level_rule(),
            "latency": self.latency.as_dict() if self.latency is not None else None,
        }


def _shift(label: str, old: Coefficient | None, new: Coefficient | None, old_dof: int, new_dof: int) -> CoefficientShift:
    either = old or new
    kind = either.kind if either else ""
    if old is None or new is None:
        status = "new_only" if old is None else "baseline_only"
    elif old.value is None or new.value is None:
        status = "unidentified"
    elif old.std_error_log is None or new.std_error_log is None:
        status = "no_noise"
    else:
        status = "compared"
    change = t = dof = None
    if old is not None and new is not None and old.value is not None and new.value is not None:
        change = (new.value / old.value - 1) * 100
    if status == "compared":
        assert old is not None and new is not None and old.std_error_log is not None and new.std_error_log is not None
        assert old.value is not None and new.value is not None  # "compared" needs both values
        var_old, var_new = old.std_error_log ** 2, new.std_error_log ** 2
        spread = math.sqrt(var_old + var_new)
        diff = math.log(new.value) - math.log(old.value)
        if spread > 0:
            t = diff / spread
            dof = (var_old + var_new) ** 2 / (var_old ** 2 / old_dof + var_new ** 2 / new_dof) \
                if var_old + var_new > 0 else float(old_dof + new_dof)
        else:  # no noise at all on either side: any change is beyond it
            t = math.copysign(math.inf, diff) if diff else 0.0
            dof = float(old_dof + new_dof)
    return CoefficientShift(label=label, kind=kind, baseline=old.value if old else None,
                            baseline_interval=old.interval if old else None, new=new.value if new else None,
                            new_interval=new.interval if new else None, change_pct=change, t_statistic=t, dof=dof,
                            p_value=None, significant=False, drifted=False, status=status)


def _p_value(t: float, dof: float) -> float:
    if math.isinf(t):
        return 0.0
    return 2.0 * (1.0 - t_cdf(abs(t), dof))


def old_on_new(baseline: LsqFit, new: Analysis) -> OldOnNew:
    """The baseline's least-squares model predicting each included new row at its own prompt level
    (no extrapolation), with the standard error of each prediction's log for `level_shift`."""
    t = t_two_sided(baseline.confidence, baseline.dof) if baseline.dof > 0 else None
    rows = []
    for s in new.statuses:
        if not s.included or s.tps <= 0:
            continue
        forecast = baseline.forecast(s.concurrency, s.max_tokens, s.model, prompt_tokens=s.prompt_level)
        error = (s.tps - forecast.tps) / s.tps * 100 if forecast.tps is not None else None
        interval = forecast.prediction_interval
        inside = interval[0] <= s.tps <= interval[1] if interval else None
        mean = forecast.mean_interval
        se = math.log(mean[1] / mean[0]) / (2 * t) if mean is not None and t else None
        rows.append(OldOnNewRow(s.exp_id, s.model, s.concurrency, s.max_tokens, s.tps, forecast.tps, error, inside,
                                se))
    errors = [abs(r.error_pct) for r in rows if r.error_pct is not None]
    return OldOnNew(rows=rows, predicted_rows=len(errors), missing_rows=len(rows) - len(errors),
                    mape_pct=sum(errors) / len(errors) if errors else None, max_pct=max(errors) if errors else None,
                    inside_interval=sum(1 for r in rows if r.inside_prediction_interval),
                    with_interval=sum(1 for r in rows if r.inside_prediction_interval is not None),
                    interval_confidence=baseline.confidence)


def level_shift(rows: OldOnNew, old_dof: int, new_fit: LsqFit) -> CoefficientShift | None:
    """The new rows' level against the baseline's predictions of them (see the module docstring):
    the geometric mean of the measured TPS of the rows the baseline predicts with a standard error,
    against the geometric mean of those predictions, as a shift for the same Welch t test. None
    when it predicts no new row or a side has no noise estimate."""
    # The rows with a standard error are the rows with a prediction interval (`rows.with_interval`).
    used = [r for r in rows.rows if r.predicted_tps is not None and r.predicted_log_se is not None]
    if not used or new_fit.sigma is None or old_dof <= 0 or new_fit.dof <= 0:
        return None
    n = len(used)

    def side(mean_log: float, se: float, dof: int) -> Coefficient:
        spread = t_two_sided(new_fit.confidence, dof) * se
        return Coefficient(label=LEVEL_LABEL, kind="level", level=None, rows=n, value=math.exp(mean_log),
                           std_error_log=se, interval=(math.exp(mean_log - spread), math.exp(mean_log + spread)))

    old = side(sum(math.log(r.predicted_tps) for r in used if r.predicted_tps) / n,
               sum(r.predicted_log_se for r in used if r.predicted_log_se is not None) / n, old_dof)
    new = side(sum(math.log(r.measured_tps) for r in used) / n, new_fit.sigma / math.sqrt(n), new_fit.dof)
    return _shift(LEVEL_LABEL, old, new, old_dof, new_fit.dof)


def change_interval(shift: CoefficientShift, confidence: float) -> tuple[float, float] | None:
    """The two-sided `confidence` interval of a compared shift's change, in % (None: not compared)."""
    if shift.status != "compared" or shift.baseline is None or shift.new is None or shift.dof is None:
        return None
    diff = math.log(shift.new / shift.baseline)
    spread = abs(diff / shift.t_statistic) if shift.t_statistic else 0.0
    half = t_two_sided(confidence, shift.dof) * spread
    return (math.exp(diff - half) - 1) * 100, (math.exp(diff + half) - 1) * 100


def binomial_tail(k: int, n: int, p: float) -> float:
    """P(X >= k) for X ~ Binomial(n, p): how often chance leaves k or more rows outside their interval."""
    return min(1.0, sum(math.comb(n, j) * p ** j * (1 - p) ** (n - j) for j in range(max(k, 0), n + 1)))


def missing_base_point(new_fit: LsqFit, base_point: tuple[str | None, int | None, int | None],
                       prompt_level: int | None) -> Text:
    """What of the base point the new fit's rows lack, in words."""
    model, length, concurrency = base_point
    used = [r.status for r in new_fit.rows]
    of_model = [s for s in used if model is not None and same_model(s.model, model)]
    at_length = [s for s in of_model if s.max_tokens == length]
    at_concurrency = [s for s in at_length if s.concurrency == concurrency]
    if not of_model:
        what = Text("miss_model", model=model)
    elif not at_length:
        what = Text("miss_length", model=model, length=length)
    elif not at_concurrency:
        what = Text("miss_concurrency", model=model, length=length, c=concurrency)
    elif prompt_level is not None and not any(s.prompt_level in (None, prompt_level) for s in at_concurrency):
        what = Text("miss_prompt", model=model, length=length, c=concurrency, prompt=prompt_level)
    else:
        what = None
    point = Text("point", model=model, length=length, c=concurrency,
                prompt=Text("point_prompt", prompt=prompt_level) if prompt_level is not None else "")
    if what is None:
        return Text("base_unidentified", point=point)
    return Text("base_lacking", point=point, what=what)


# ---------------------------------------------------------------------------
# The latency model: the baseline's predictions of the new rows, and the knee
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class LatencyRow:
    exp_id: str
    model: str
    concurrency: int
    max_tokens: int
    prompt_level: int | None
    measured_tps: float
    predicted_tps: float | None  # the baseline's latency model at the row's prompt and output length
    error_pct: float | None
    inside_prediction_interval: bool | None


@dataclass(frozen=True)
class KneeShift:
    model: str
    baseline: dict[str, Any]  # Knee.as_dict()
    new: dict[str, Any]
    status: str  # same | moved | appeared | gone | untested | none
    moved: bool
    text: str  # a compare_texts.Text

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class LatencyComparison:
    """The baseline's latency model on the new rows, and each model's knee on both sides."""

    status: str  # compared | unavailable | prompt_levels_differ
    notes: list[str]  # compare_texts.Texts
    baseline_prompt_levels: list[int | None]
    new_prompt_levels: list[int | None]
    rows: list[LatencyRow]
    unmatched: list[str]  # new experiments with no baseline experiment of the same key
    predicted_rows: int
    mape_pct: float | None
    max_pct: float | None
    inside_interval: int
    with_interval: int
    knees: list[KneeShift]

    @property
    def knee_moved(self) -> bool:
        return any(k.moved for k in self.knees)

    def as_dict(self) -> dict[str, Any]:
        return {"status": self.status, "notes": list(self.notes),
                "match": ["model", "concurrency", "max_tokens", "prompt_level"],
                "baseline_prompt_levels": list(self.baseline_prompt_levels),
                "new_prompt_levels": list(self.new_prompt_levels),
                "mape_pct": self.mape_pct, "max_pct": self.max_pct, "rows": self.predicted_rows,
                "unmatched_rows": list(self.unmatched), "inside_prediction_interval": self.inside_interval,
                "with_prediction_interval": self.with_interval,
                "verdict": verdict_for(self.mape_pct, self.max_pct, self.predicted_rows),
                "knee_moved": self.knee_moved, "knees": [k.as_dict() for k in self.knees],
                "per_row": [dataclasses.asdict(r) for r in self.rows]}


def _sorted_levels(levels: set[int | None]) -> list[int | None]:
    return sorted(levels, key=lambda level: (level is not None, level or 0))


def _knee_fmt(value: float) -> str:
    return f"{value:.0f}" if abs(value - round(value)) < 0.05 or value >= 10 else f"{value:.1f}"


def knee_shift(model: str, old: Any, new: Any) -> KneeShift:
    """Whether a model's knee (`scm_xl.latency.Knee`) moved between the baseline and the new data."""
    def span(knee: Any) -> tuple[float, float]:
        low, high = knee.interval if knee.interval else (knee.concurrency, knee.concurrency)
        return float(low), float(high)

    old_limit = old.kind == "limit" and old.concurrency is not None
    new_limit = new.kind == "limit" and new.concurrency is not None
    if old_limit and new_limit:
        (a, b), (c, d) = span(old), span(new)
        if b < c or d < a:
            status, text = "moved", Text("knee_moved", old=_knee_fmt(old.concurrency), new=_knee_fmt(new.concurrency))
        else:
            status, text = "same", Text("knee_same", new=_knee_fmt(new.concurrency), old=_knee_fmt(old.concurrency))
    elif old_limit:
        if new.measured_max > span(old)[1]:
            status, text = "gone", Text("knee_gone", old=_knee_fmt(old.concurrency), measured=new.measured_max)
        else:
            status, text = "untested", Text("knee_untested_old", old=_knee_fmt(old.concurrency),
                                           measured=new.measured_max)
    elif new_limit:
        if new.concurrency < old.measured_max:
            status, text = "appeared", Text("knee_appeared", new=_knee_fmt(new.concurrency), measured=old.measured_max)
        else:
            status, text = "untested", Text("knee_untested_new", new=_knee_fmt(new.concurrency),
                                           measured=old.measured_max)
    else:
        status, text = "none", Text("knee_none")
    return KneeShift(model=model, baseline=old.as_dict(), new=new.as_dict(), status=status,
                     moved=status in ("moved", "appeared", "gone"), text=text)


def latency_comparison(baseline_rows: Sequence[Any], new_rows: Sequence[Any], *,
                       baseline_name: str = "baseline", new_name: str = "new") -> LatencyComparison | None:
    """The baseline's latency model on the new rows and the knees (see the module docstring);
    None when neither side has a latency model."""
    from scm_xl.latency import latency_model, observations

    def usable(rows: Sequence[Any]) -> list[tuple[Any, Any]]:
        pairs = []
        for row in rows:
            used, _ = observations([row])
            if used:
                pairs.append((row, used[0]))
        return pairs

    def key(row: Any) -> tuple[str, int, int, int | None]:
        return row.model.casefold(), row.concurrency, row.max_tokens, getattr(row, "prompt_level", None)

    old_model, new_model = latency_model(baseline_rows), latency_model(new_rows)
    if not old_model.available and not new_model.available:
        return None
    old_pairs, new_pairs = usable(baseline_rows), usable(new_rows)
    old_levels = _sorted_levels({getattr(r, "prompt_level", None) for r, _ in old_pairs})
    new_levels = _sorted_levels({getattr(r, "prompt_level", None) for r, _ in new_pairs})
    empty = dict(baseline_prompt_levels=old_levels, new_prompt_levels=new_levels, rows=[], unmatched=[],
                 predicted_rows=0, mape_pct=None, max_pct=None, inside_interval=0, with_interval=0, knees=[])
    missing = [name for name, model in ((baseline_name, old_model), (new_name, new_model)) if not model.available]
    if missing:
        unavailable: list[str] = [Text("no_latency_data", name=name) for name in missing]
        return LatencyComparison(status="unavailable", notes=unavailable, **empty)  # type: ignore[arg-type]

    notes: list[str] = []  # compare_texts.Texts
    shared = set(old_levels) & set(new_levels)
    knees = []
    for name, new_fit in new_model.fits.items():
        old_fit = old_model.fits.get(name)
        if old_fit is None:
            notes.append(Text("no_latency_model", model=new_fit.model, baseline=baseline_name))
            continue
        knees.append(knee_shift(new_fit.model, old_fit.knee, new_fit.knee))
    if old_levels != new_levels:
        sides = dict(old_name=baseline_name, old=levels(old_levels), new_name=new_name, new=levels(new_levels))
        if not shared:
            notes.append(Text("levels_apart", **sides))
            return LatencyComparison(status="prompt_levels_differ", notes=notes,
                                     **{**empty, "knees": knees})  # type: ignore[arg-type]
        notes.append(Text("levels_some", **sides, shared=levels(_sorted_levels(shared))))
    cells = {key(row) for row, _ in old_pairs}
    rows, unmatched = [], []
    for row, obs in new_pairs:
        if key(row) not in cells:
            unmatched.append(row.exp_id)
            continue
        fit = old_model.fit_for(row.model)
        forecast = fit.forecast(obs.concurrency, obs.max_tokens, obs.prompt, output_tokens=obs.output) \
            if fit is not None else None
        predicted = forecast.tps if forecast is not None else None
        error = (obs.tps - predicted) / obs.tps * 100 if predicted is not None else None
        interval = forecast.tps_interval if forecast is not None else None
        inside = interval[0] <= obs.tps <= interval[1] if interval else None
        rows.append(LatencyRow(row.exp_id, row.model, row.concurrency, row.max_tokens,
                               getattr(row, "prompt_level", None), obs.tps, predicted, error, inside))
    if unmatched and old_levels == new_levels:
        notes.append(Text("unmatched", n=len(unmatched)))
    errors = [abs(r.error_pct) for r in rows if r.error_pct is not None]
    return LatencyComparison(
        status="compared", notes=notes, baseline_prompt_levels=old_levels, new_prompt_levels=new_levels,
        rows=rows, unmatched=unmatched, predicted_rows=len(errors),
        mape_pct=sum(errors) / len(errors) if errors else None, max_pct=max(errors) if errors else None,
        inside_interval=sum(1 for r in rows if r.inside_prediction_interval),
        with_interval=sum(1 for r in rows if r.inside_prediction_interval is not None), knees=knees)


def compare(baseline: Analysis, new: Analysis, *, baseline_name: str = "baseline", new_name: str = "new",
            confidence: float = DRIFT_CONFIDENCE, min_effect: float = MIN_DRIFT_EFFECT,
            baseline_rows: Sequence[Any] | None = None, new_rows: Sequence[Any] | None = None) -> Comparison:
    """Compare two analyses (each from `model.analyze` on its own rows); the verdict follows the
    module docstring. With both sides' results rows, the latency models are compared too
    (`latency_comparison`; the verdict is unchanged)."""
    old_fit = fit(baseline.statuses, baseline.settings)
    cal = old_fit.calibration
    base_point = (cal.base_model, cal.base_max_tokens, cal.base_concurrency)
    pinned = dataclasses.replace(new.settings, base_model=cal.base_model, base_max_tokens=cal.base_max_tokens,
                                 base_concurrency=cal.base_concurrency, base_prompt_level=cal.base_prompt_level)
    new_fit = fit(new.statuses, pinned)
    predictions = old_on_new(old_fit, new)

    reasons: list[str] = []  # compare_texts.Texts
    for name, side in ((baseline_name, old_fit), (new_name, new_fit)):
        if not side.coefficients:
            reasons.append(Text("no_rows", name=name))
        elif side.dof == 0:
            reasons.append(Text("no_dof", name=name, rows=side.observations, rank=side.rank))

    old_by = {c.label: c for c in old_fit.coefficients}
    new_by = {c.label: c for c in new_fit.coefficients}
    labels = list(old_by) + [label for label in new_by if label not in old_by]
    shifts = [_shift(label, old_by.get(label), new_by.get(label), old_fit.dof, new_fit.dof) for label in labels]
    missing = level = None
    if not reasons and not any(s.label == BASE_LABEL and s.status == "compared" for s in shifts):
        missing = missing_base_point(new_fit, base_point, cal.base_prompt_level)
        level = level_shift(predictions, old_fit.dof, new_fit)
        if level is not None:
            shifts.append(level)
    compared = [s for s in shifts if s.status == "compared"]
    tests = len(compared)
    alpha = (1 - confidence) / tests if tests else 0.0
    final = []
    for s in shifts:
        if s.status == "compared":
            assert s.t_statistic is not None and s.dof is not None and s.change_pct is not None
            p = _p_value(s.t_statistic, s.dof)
            significant = p < alpha
            s = dataclasses.replace(s, p_value=p, significant=significant,
                                    drifted=significant and abs(s.change_pct) >= min_effect * 100)
        final.append(s)
    level = next((s for s in final if s.label == LEVEL_LABEL), None)

    drifted = [s for s in final if s.drifted]
    moved: list[str] = [Text("moved_small", label=label_text(s.label), change=s.change_pct, effect=min_effect)
                        for s in final if s.significant and not s.drifted]
    if reasons:
        verdict = "insufficient"
    elif drifted:
        verdict = "drift"
        reasons = [Text("moved", label=label_text(s.label), change=s.change_pct, p=s.p_value) for s in drifted]
        if missing is not None and level is not None and level.drifted:
            reasons.append(Text("drift_without_base", missing=missing, rows=predictions.with_interval))
    elif missing is not None:
        verdict, reasons = _without_base_point(missing, level, predictions, confidence, min_effect)
        reasons += moved if verdict == "stable" else []
    elif not tests:
        verdict = "insufficient"
        reasons = [Text("nothing_on_both")]
    else:
        verdict = "stable"
        reasons = [Text("stable", effect=min_effect)] + moved
    return Comparison(baseline_name=baseline_name, new_name=new_name, base_point=base_point, coefficients=final,
                      old_on_new=predictions, verdict=verdict, reasons=reasons, confidence=confidence,
                      min_effect=min_effect, baseline_rows=len(baseline.statuses), new_rows=len(new.statuses),
                      baseline_dof=old_fit.dof, new_dof=new_fit.dof, tests=tests,
                      latency=latency_comparison(baseline_rows, new_rows, baseline_name=baseline_name,
                                                 new_name=new_name)
                      if baseline_rows is not None and new_rows is not None else None,
                      base_point_missing=missing)


def _without_base_point(missing: Text, level: CoefficientShift | None, predictions: OldOnNew, confidence: float,
                        min_effect: float) -> tuple[str, list[str]]:
    """The verdict and its reasons when BaseTPS could not be compared and nothing drifted: stable only on
    the evidence of the new rows the baseline predicts (the module docstring), else insufficient."""
    if level is None:
        return "insufficient", [Text("none_predicted", missing=missing)]
    interval = change_interval(level, 2 * confidence - 1)
    assert interval is not None and level.change_pct is not None  # a level shift is always compared
    low, high = interval
    outside = predictions.with_interval - predictions.inside_interval
    chance = binomial_tail(outside, predictions.with_interval, 1 - predictions.interval_confidence)
    rows = Text("rows_predicted", n=predictions.with_interval)
    facts = Text("facts", change=level.change_pct, conf=2 * confidence - 1, low=low, high=high,
                inside=predictions.inside_interval, with_interval=predictions.with_interval,
                pi=predictions.interval_confidence)
    within = -min_effect * 100 < low and high < min_effect * 100
    fits = chance >= 1 - confidence
    if within and fits:
        return "stable", [Text("stable_evidence", missing=missing, rows=rows, facts=facts)]
    why = [] if within else [Text("why_level", effect=min_effect)]
    why += [] if fits else [Text("why_outside", p=chance)]
    reason = why[0] if len(why) == 1 else Text("why_both", first=why[0], second=why[1])
    return "insufficient", [Text("insufficient_evidence", missing=missing, rows=rows, facts=facts, why=reason)]


def compare_sources(baseline: str, new: str, *,
                    strict_physics: bool | None = None) -> tuple[Comparison, list[Any], list[Any]]:
    """Compare two sources (results CSV or filled workbook); also returns the baseline's and the new
    side's rows."""
    from pathlib import Path

    from scm_xl.workbook.fill import analysis_from_source

    old_analysis, old_rows = analysis_from_source(baseline, strict_physics=strict_physics)
    new_analysis, new_rows = analysis_from_source(new, strict_physics=strict_physics)
    return compare(old_analysis, new_analysis, baseline_name=Path(baseline).name, new_name=Path(new).name,
                   baseline_rows=old_rows, new_rows=new_rows), old_rows, new_rows


def _fmt(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _interval(interval: tuple[float, float] | None, lang: Lang = "en") -> str:
    return words(lang)["interval"].format(low=interval[0], high=interval[1]) if interval else "-"


def _moved(s: CoefficientShift, lang: Lang) -> str:
    """The table's last column: drifted, moved beyond its noise but little, compared, or why not compared."""
    w = words(lang)
    if s.drifted:
        return w["mark_drift"]
    if s.significant:
        return w["mark_noise"]
    return "-" if s.status == "compared" else w.get(f"status_{s.status}", s.status)


def render_comparison(c: Comparison, lang: Lang = "en") -> str:
    """The comparison as plain-text tables, in `lang`."""
    from scm_xl.terminal import table, wrapped

    w = words(lang)
    model, length, concurrency = c.base_point
    lines = [w["head"].format(name=c.baseline_name, rows=c.baseline_rows, dof=c.baseline_dof, new=c.new_name,
                              new_rows=c.new_rows, new_dof=c.new_dof),
             w["base_point"].format(model=model, length=length, c=concurrency),
             w["test_line"].format(test=c.test_description(lang)), ""]
    rows = [[say(label_text(s.label), lang), _fmt(s.baseline), _interval(s.baseline_interval, lang), _fmt(s.new),
             _interval(s.new_interval, lang), _fmt(s.change_pct, 1), "-" if s.p_value is None else f"{s.p_value:.2g}",
             _moved(s, lang)]
            for s in c.coefficients]
    lines.append(table([w["h_coefficient"], w["h_baseline"], w["h_interval"], w["h_new"], w["h_interval"],
                        w["h_change"], w["h_p"], w["h_moved"]], rows))
    o = c.old_on_new
    lines.append("")
    lines.append(w["old_on_new"].format(mape=_fmt(o.mape_pct), max=_fmt(o.max_pct), rows=o.predicted_rows,
                                        missing=o.missing_rows, inside=o.inside_interval,
                                        with_interval=o.with_interval))
    rule = c.level_rule(lang)
    if rule is not None:
        lines.append(wrapped(w["without_base_point"].format(rule=rule)))
    if c.latency is not None:
        lines.extend(render_latency_comparison(c.latency, lang))
    reasons = w["reasons_sep"].join(say(reason, lang) for reason in c.reasons)
    lines.append(w["verdict"].format(verdict=verdict_word(c.verdict, lang))
                 + (w["verdict_reasons"].format(reasons=reasons) if c.reasons else ""))
    return "\n".join(lines)


def render_latency_comparison(lat: LatencyComparison, lang: Lang = "en") -> list[str]:
    """The latency part of the comparison as text lines, in `lang` (they do not enter the verdict)."""
    from scm_xl.terminal import wrapped

    w = words(lang)
    lines = [""]
    if lat.status == "compared":
        lines.append(wrapped(w["lat_compared"].format(
            mape=_fmt(lat.mape_pct), max=_fmt(lat.max_pct), rows=lat.predicted_rows, unmatched=len(lat.unmatched),
            inside=lat.inside_interval, with_interval=lat.with_interval)))
    elif lat.status == "prompt_levels_differ":
        lines.append(w["lat_levels_differ"])
    else:
        lines.append(w["lat_none"])
    for knee in lat.knees:
        lines.append(wrapped(w["knee_line"].format(model=knee.model, text=say(knee.text, lang))
                             + (w["knee_moved_mark"] if knee.moved else "")))
    for note in lat.notes:
        lines.append(wrapped(w["note"].format(note=say(note, lang))))
    return lines
