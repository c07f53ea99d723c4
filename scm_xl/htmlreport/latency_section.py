"""The report's latency-model section and the calculator's method choice, as data (no I/O).

What the page says about `scm_xl.latency.LatencyModel`: per served model its coefficients with
90% intervals and their meaning in words (the decode step one row per measured served batch), the knee in words, efficiency, queue share and output
ratio; the leave-one-out error (shown beside the chain's and least squares'); the Little's-law
flags. And which method the calculator opens on (`scm_xl.methods.choose_method("auto", ...)`)
with the reason, in the page's language.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from scm_xl.latency import LITTLE_TOLERANCE, SOFT_KNEE_GAIN, step_name
from scm_xl.latency import format_level as _level


def _percent(value: float | None, texts: dict[str, Any]) -> str:
    return str(texts["missing"]) if value is None else f"{value:.2f}%"


def _number(value: float, digits: int = 3) -> str:
    """Seconds per token and the like span many decades: three significant figures."""
    text = f"{value:.{digits}g}"
    return "0" if text in ("-0", "0") else text


def _interval(interval: list[float] | None, missing: str) -> str:
    return f"{_number(interval[0])} – {_number(interval[1])}" if interval else missing


def knee_words(knee: Any, texts: dict[str, Any]) -> str:
    """`Knee.describe()` in the page's language (the English is the CLI's own)."""
    if texts["html_lang"] == "en":
        return str(knee.describe())
    if knee.kind == "limit" and knee.concurrency is not None:
        span = (f"（数据允许 {_level(knee.interval[0])}–{_level(knee.interval[1])}）"
                if knee.interval and knee.interval[0] != knee.interval[1] else "")
        return f"吞吐量在并发 {_level(knee.concurrency)} 附近停止增长{span}"
    if knee.kind == "soft" and knee.concurrency is not None:
        return (f"从并发 {_level(knee.concurrency)} 起，并发翻倍吞吐量增长不足 "
                f"{round((SOFT_KNEE_GAIN - 1) * 100)}%（未见硬上限）")
    return f"在已测并发范围内（最高 {knee.measured_max}）没有拐点"


def choice_words(choice: Any, texts: dict[str, Any]) -> str:
    """Why `choose_method("auto", ...)` took its method at the base prompt level, in the page's
    language (in English the words of `scm-xl predict`)."""
    ranked = sorted((value, name) for name, value in choice.holdout_mape_pct.items() if value is not None)
    if not ranked:
        return str(texts["why_none"])
    best_value, best = ranked[0]
    others = ", ".join(f"{name} {value:.1f}%" for value, name in ranked[1:])
    return (texts["why_ranked"].format(best=best, value=f"{best_value:.1f}")
            + (texts["why_against"].format(others=others) if others else ""))


@dataclass(frozen=True)
class TermRow:
    part: str
    term: str
    value: str
    interval: str
    meaning: str


@dataclass(frozen=True)
class FitSection:
    model: str
    knee: str
    rows: int
    efficiency: str
    queue_share: str
    output_ratio: str
    prompt_levels: str
    concurrency_range: str
    terms: list[TermRow]


def term_meanings(fit: Any, texts: dict[str, Any]) -> dict[str, str]:
    """Each coefficient's meaning in the page's language: the decode step once per knot (the
    measured served batch n, `step(n)`), then the shared terms by name."""
    words = texts["latency"]["terms"]
    steps = {step_name(knot): texts["latency"]["step_at"].format(n=_level(knot)) for knot in fit.terms.knots}
    return {**words, **steps}


def fit_section(fit: Any, texts: dict[str, Any]) -> FitSection:
    words = term_meanings(fit, texts)
    lines = []
    for part, linear in (("ITL", fit.itl), ("TTFT", fit.ttft)):
        intervals = linear.intervals()
        for name, value in linear.coefficients().items():
            lines.append(TermRow(part, name, _number(value), _interval(intervals.get(name), texts["missing"]),
                                 words.get(name, "")))
    low, high = fit.concurrency_range
    return FitSection(
        model=fit.model, knee=knee_words(fit.knee, texts), rows=len(fit.rows), efficiency=f"{fit.efficiency:.3f}",
        queue_share=f"{fit.queue_share:.3f}", output_ratio=f"{fit.output_ratio:.3f}",
        prompt_levels=", ".join(_level(p) for p in fit.prompt_levels),
        concurrency_range=f"{low}–{high}" if high != low else str(low), terms=lines)


def latency_context(latency: Any, texts: dict[str, Any]) -> dict[str, Any] | None:
    """The section's content, None when the data have no latency model."""
    if latency is None or not latency.available:
        return None
    words = texts["latency"]
    holdout = latency.holdout
    tolerance = round(LITTLE_TOLERANCE * 100)
    return {
        "fits": [fit_section(fit, texts) for fit in latency.fits.values()],
        "holdout_mape": _percent(holdout.mape_pct, texts),
        "holdout_rows": holdout.predicted_rows,
        "little_flags": [{"exp_id": exp_id, "ratio": f"{ratio:.3f}"} for exp_id, ratio in latency.little_flags],
        "little_ok": words["little_ok"].format(tol=tolerance),
        "little_help": words["little_help"].format(tol=tolerance),
        "skipped": list(latency.skipped),
    }


def holdout_line(latency: Any, texts: dict[str, Any]) -> dict[str, Any] | None:
    """The latency model's row in the hold-out table, beside chain and least squares."""
    if latency is None or not latency.available:
        return None
    holdout = latency.holdout
    return {"method": texts["js"]["method_names"]["latency"], "mape": _percent(holdout.mape_pct, texts),
            "max": _percent(holdout.max_pct, texts), "rows": holdout.predicted_rows, "verdict": holdout.verdict}
