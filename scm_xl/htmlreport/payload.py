"""The calibration the page's calculator computes from, as plain JSON-ready data (no I/O).

The page's JavaScript repeats the arithmetic of `scm-xl predict` and `scm-xl solve --method`
(scm_xl.model.predict, scm_xl.lsq.LsqFit.forecast, scm_xl.constrained.solve) on these numbers,
in the same order, so its answers agree with the CLI's to rounding. What the browser cannot
recompute cheaply or identically is computed here once: Student's t multiplier, the pseudo-inverse
of X'X, the projector onto the design's null space, the measured P95 per cell and the 429 onsets.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

from scm_xl import constrained
from scm_xl.lsq import LsqFit, t_two_sided
from scm_xl.model import Analysis, Calibration
from scm_xl.lsq import _IDENTIFIED_TOL  # the estimability tolerance forecast() uses

PAYLOAD_VERSION = 1


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
        "beta": [float(v) for v in result._beta],
        "xtx_pinv": [[float(v) for v in row] for row in result._xtx_pinv],
        "null_projector": [[float(v) for v in row] for row in result._null_projector],
        "sigma": result.sigma,
        "dof": result.dof,
        "confidence": result.confidence,
        "t": t_two_sided(result.confidence, result.dof) if result.sigma is not None else None,
    })
    return data


def calculator_payload(analysis: Analysis, fit: LsqFit, rows: Sequence[Any]) -> dict[str, Any]:
    """Everything the calculator needs, for both methods."""
    cells = [[key[0], key[1], key[2], _number(p.latency_p95_s), _number(p.ttft_p95_s)]
             for key, p in constrained.measured_percentiles(rows).items()]
    return {
        "version": PAYLOAD_VERSION,
        "chain": _calibration(analysis.calibration),
        "lsq": _lsq(fit),
        "cells": cells,  # [model casefolded, concurrency, max_tokens, P95 latency s, P95 TTFT s]
        "onsets": constrained.rate_limit_onsets(rows),  # model casefolded -> lowest concurrency with a 429
        "search_factor": constrained.SEARCH_FACTOR,
        "identified_tol": _IDENTIFIED_TOL,
    }
