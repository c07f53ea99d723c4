"""The calibration the page's calculator computes from, as plain JSON-ready data (no I/O).

The page's JavaScript repeats the arithmetic of `scm-xl predict` and `scm-xl solve --method`
(scm_xl.model.predict, scm_xl.lsq.LsqFit.forecast, scm_xl.latency.ModelFit.forecast,
scm_xl.constrained.solve, scm_xl.methods.choose_method) on these numbers,
in the same order, so its answers agree with the CLI's to rounding. What the browser cannot
recompute cheaply or identically is computed here once: Student's t multiplier, the pseudo-inverse
of X'X, the projector onto the design's null space, the measured P95 per cell and the 429 onsets
(at the base prompt level, and at every measured prompt level for a question about one).
"""

from __future__ import annotations

import math
from typing import Any, Sequence

from scm_xl import constrained
from scm_xl.lsq import LsqFit, t_two_sided
from scm_xl.model import Analysis, Calibration
from scm_xl.lsq import _IDENTIFIED_TOL  # the estimability tolerance forecast() uses

PAYLOAD_VERSION = 3


def _number(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def _calibration(cal: Calibration) -> dict[str, Any]:
    return {
        "base_tps": _number(cal.base_tps),
        "base_model": cal.base_model,
        "base_max_tokens": cal.base_max_tokens,
        "base_concurrency": cal.base_concurrency,
        "f": [[lv.concurrency, _number(lv.f)] for lv in cal.concurrency_levels],
        "k_len": [[lv.max_tokens, _number(lv.k_len)] for lv in cal.length_levels],
        "c_model": [[m.model, m.model.casefold(), _number(m.c_model)] for m in cal.models],
        # K_in(P) at every prompt level of the rows, the base one (1) included (Calibration.k_in_at
        # interpolates between them in log-log); none where the data have no prompt levels
        "base_prompt_level": cal.base_prompt_level,
        "k_in": [[lv.prompt_level, _number(lv.k_in)] for lv in cal.prompt_levels],
    }


def _lsq(result: LsqFit) -> dict[str, Any]:
    levels = result._levels
    data: dict[str, Any] = {"calibration": _calibration(result.calibration),
                            "measured_concurrency": result.measured_concurrency_levels(),
                            "available": levels is not None}
    if levels is None:
        return data
    data.update({
        "base_concurrency": levels.base_concurrency,
        "base_max_tokens": levels.base_max_tokens,
        "base_model_key": levels.base_model.casefold(),
        "concurrency": list(levels.concurrency),
        "max_tokens": list(levels.max_tokens),
        "model_keys": [m.casefold() for m in levels.models],
        # K_in columns (after the models: the non-base prompt levels) and every fitted prompt level
        # (the base one included), between which LsqFit.forecast blends the columns in log-log
        "base_prompt_level": levels.base_prompt_level,
        "prompt_levels": [int(v) for v in levels.prompt_levels],
        "measured_prompt_levels": [int(v) for v in levels.measured_prompt_levels()],
        "beta": [float(v) for v in result._beta],
        "xtx_pinv": [[float(v) for v in row] for row in result._xtx_pinv],
        "null_projector": [[float(v) for v in row] for row in result._null_projector],
        "sigma": result.sigma,
        "dof": result.dof,
        "confidence": result.confidence,
        "t": t_two_sided(result.confidence, result.dof) if result.sigma is not None else None,
    })
    return data


def _cells(rows: Sequence[Any]) -> list[list[Any]]:
    return [[key[0], key[1], key[2], _number(p.latency_p95_s), _number(p.ttft_p95_s)]
            for key, p in constrained.measured_percentiles(rows).items()]


def _excluded(analysis: Analysis, lang: Any) -> list[list[Any]]:
    """Measured rows that were excluded, at the base prompt level (report.measured_rows_at's rows):
    [model casefolded, concurrency, max_tokens, measured TPS, exp_id, why in the page's language]:
    an answer at one of them says it was measured there and excluded."""
    level = analysis.base_prompt_level
    return [[ch.status.model.casefold(), ch.status.concurrency, ch.status.max_tokens, _number(ch.status.tps),
             ch.status.exp_id, ch.status.reason(lang)]
            for ch in analysis.checks if not ch.status.included
            and (level is None or ch.status.prompt_level in (None, level))]


def calculator_payload(analysis: Analysis, fit: LsqFit, rows: Sequence[Any],
                       latency: dict[str, Any] | None = None, lang: Any = "en") -> dict[str, Any]:
    """Everything the calculator needs, for every method (`latency`: `latency_payload`'s)."""
    from scm_xl.model import at_base_prompt, base_prompt_level

    # Chain and least squares are judged on the rows at the asked prompt level, the base one when
    # none is asked (constrained.solve_request); the latency model on every row's 429s.
    level = base_prompt_level(rows, analysis.settings)
    at_base = [r for r in rows if at_base_prompt(r, level)]
    levels = sorted({p for r in rows if (p := getattr(r, "prompt_level", None)) is not None})
    at_level = {p: [r for r in rows if getattr(r, "prompt_level", None) == p] for p in levels}
    return {
        "version": PAYLOAD_VERSION,
        "chain": _calibration(analysis.calibration),
        "lsq": _lsq(fit),
        # choose_method: with prompt levels, auto ranks every method at any prompt length; without,
        # a prompt other than the rows' is the latency model's
        "has_prompt_levels": analysis.base_prompt_level is not None,
        "cells": _cells(at_base),  # [model casefolded, concurrency, max_tokens, P95 latency s, P95 TTFT s]
        "onsets": constrained.rate_limit_onsets(at_base),  # model casefolded -> lowest concurrency with a 429
        # [prompt level, its cells, its onsets] for a question at a measured prompt level (any other
        # prompt length has no measured rows: no cells, no onsets)
        "prompt_cells": [[p, _cells(at_level[p]), constrained.rate_limit_onsets(at_level[p])] for p in levels],
        "onsets_all": constrained.rate_limit_onsets(rows),  # the same over every prompt level (latency)
        "search_factor": constrained.SEARCH_FACTOR,
        "excluded": _excluded(analysis, lang),
        "identified_tol": _IDENTIFIED_TOL,
        "latency": latency if latency is not None else latency_payload(None, None, {"method": "chain", "why": ""}),
    }


def _fit_payload(fit: Any) -> dict[str, Any]:
    """One served model's latency fit (`scm_xl.latency.ModelFit`): the numbers its `forecast`
    computes from, and the words it answers with where it cannot answer."""
    from scm_xl.latency import CONFIDENCE, format_level as latency_fmt

    terms = fit.terms
    levels = list(fit.prompt_levels)
    return {
        "model": fit.model, "key": fit.model.casefold(),
        # Terms: the measured served batches (the decode step's knots, ascending) and which factors
        # varied; the page builds the features as Terms.itl/ttft do (Terms.weights over the knots,
        # then d where `context`, e where `joining`), in the order of the names below
        "terms": {"knots": [float(k) for k in terms.knots], "prompt": bool(terms.prompt),
                  "context": bool(terms.context), "joining": bool(terms.joining), "batch": bool(terms.batch),
                  "busy": bool(terms.busy)},
        "itl_names": list(fit.itl.names), "itl_beta": [float(v) for v in fit.itl.beta],
        "ttft_names": list(fit.ttft.names), "ttft_beta": [float(v) for v in fit.ttft.beta],
        "knee_limit": _number(fit.knee_limit), "knee": fit.knee.as_dict(),
        "efficiency": fit.efficiency, "queue_share": fit.queue_share, "output_ratio": fit.output_ratio,
        "ttft_p95_ratio": _number(fit.ttft_p95_ratio), "latency_p95_ratio": _number(fit.latency_p95_ratio),
        "sigma_log": _number(fit.sigma_log), "dof": fit.dof, "rows": len(fit.rows),
        "t": t_two_sided(CONFIDENCE, fit.dof) if fit.sigma_log is not None and fit.dof > 0 else None,
        "concurrency_range": list(fit.concurrency_range), "prompt_levels": levels,
        "max_tokens_range": list(fit.max_tokens_range),
        "measured_concurrency": sorted({r.concurrency for r in fit.rows}),
        "max_tokens_levels": sorted({r.max_tokens for r in fit.rows}),
        # ModelFit.forecast's words where a factor was never varied
        "missing_prompt": f"prompt length: only {latency_fmt(levels[0])} tokens measured" if levels else None,
        "missing_concurrency": f"concurrency: only {fit.concurrency_range[0]} measured",
    }


def latency_payload(latency: Any, base_prompt: float | None, auto: dict[str, Any]) -> dict[str, Any]:
    """The latency model (`scm_xl.latency.LatencyModel`) for the calculator: ModelFit.forecast
    is repeated in the page on these numbers. `auto` is the method `choose_method("auto", ...)`
    takes at the base prompt level, with its reason in the page's language."""
    from scm_xl.latency import PROMPT_LEVEL_RATIO

    fits = list(latency.fits.values()) if latency is not None else []
    return {
        "available": bool(fits),
        "fits": [_fit_payload(fit) for fit in fits],
        "no_fit": "no experiment has TTFT, latency and ITL recorded",
        "base_prompt": base_prompt,
        "prompt_ratio": PROMPT_LEVEL_RATIO,
        "auto": auto,
    }
