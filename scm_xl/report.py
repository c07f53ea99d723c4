"""Reports: the JSON contract for users' CI, and plain-text tables for people."""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any

from scm_xl.errors import InputError
from scm_xl.model import Analysis, Prediction, Solution
from scm_xl.verify import Verification


def _level_key(value: float | int) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def _clean(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def analysis_to_dict(analysis: Analysis, verification: Verification | None = None,
                     holdout: dict[str, Any] | None = None) -> dict[str, Any]:
    """The public JSON report. Keys are a contract: add, never rename.

    `holdout` is the least-squares analysis (scm_xl.lsq.analyze(...).report()): its
    leave-one-out figures and 90% intervals are added under "holdout", with
    `loo_mape_pct`, `loo_max_pct` and `intervals` also at the top level.
    """
    cal = analysis.calibration
    c = analysis.consistency
    report: dict[str, Any] = {
        "coefficients": {
            "base_tps": cal.base_tps,
            "base_point": {"model": cal.base_model, "max_tokens": cal.base_max_tokens,
                           "concurrency": cal.base_concurrency, "rows": cal.base_rows},
            "f": {_level_key(lv.concurrency): lv.f for lv in cal.concurrency_levels},
            "k_len": {_level_key(lv.max_tokens): lv.k_len for lv in cal.length_levels},
            "k_len_anchor_concurrency": {_level_key(lv.max_tokens): lv.anchor_concurrency
                                         for lv in cal.length_levels},
            "c_model": {m.model: m.c_model for m in cal.models},
            "c_model_first_principles": c_model_first_principles(cal),
        },
        "rows": [
            {
                "exp_id": ch.status.exp_id,
                "model": ch.status.model,
                "concurrency": ch.status.concurrency,
                "max_tokens": ch.status.max_tokens,
                "measured_tps": _clean(ch.status.tps),
                "predicted_tps": ch.predicted_tps,
                "deviation_pct": ch.deviation_pct,
                "role": ch.role,
                "included": ch.status.included,
                "reason": ch.status.reason("en"),
                "physics_warnings": ch.status.physics.codes(),
                "physics": ch.status.physics.text("en"),
                "per_stream_ceiling_tps": ch.status.physics.ceiling_tps,
                "identifies": list(ch.identifies),
                "missing": list(ch.missing),
            }
            for ch in analysis.checks
        ],
        "consistency": {
            "check_rows": c.check_rows,
            "identify_rows": c.identify_rows,
            "unidentified_rows": c.unidentified_rows,
            "excluded_rows": c.excluded_rows,
            "mape_pct": c.mape_pct,
            "max_deviation_pct": c.max_deviation_pct,
            "verdict": c.verdict,
        },
    }
    if holdout is not None:
        report["holdout"] = holdout
        report["loo_mape_pct"] = holdout.get("loo_mape_pct")
        report["loo_max_pct"] = holdout.get("loo_max_pct")
        report["intervals"] = holdout.get("intervals")
    if verification is not None:
        report["verification"] = verification.to_dict()
    return report


def render_holdout(holdout: dict[str, Any]) -> str:
    chain = holdout.get("chain_holdout") or {}
    return (f"hold-out (leave-one-out): lsq MAPE {_fmt(holdout.get('loo_mape_pct'))}% max "
            f"{_fmt(holdout.get('loo_max_pct'))}% over {holdout.get('loo_rows')} rows, verdict "
            f"{holdout.get('verdict')}; chain MAPE {_fmt(chain.get('loo_mape_pct'))}% max {_fmt(chain.get('loo_max_pct'))}%, "
            f"verdict {chain.get('verdict')}\n"
            f"separable model: {holdout.get('interaction_summary', '-')}")


def c_model_first_principles(cal: Any) -> dict[str, float]:
    """C_model predicted from weight bytes (active parameters) relative to the base model,
    for the models the catalog knows."""
    from scm_xl.workbook.catalog_tables import physics_catalog

    catalog = physics_catalog()
    base = catalog.model(cal.base_model) if cal.base_model else None
    if base is None:
        return {}
    ratios = {}
    for m in cal.models:
        spec = catalog.model(m.model)
        if spec is not None:
            ratios[m.model] = spec.active_params / base.active_params
    return ratios


def write_json(path: str | Path, data: dict[str, Any]) -> None:
    """Write JSON atomically (temp file, then rename)."""
    path = Path(path)
    directory = path.parent if str(path.parent) else Path(".")
    if not directory.exists():
        raise InputError(f"folder does not exist: {directory}", path=str(path))
    fd, tmp = tempfile.mkstemp(prefix=".scm-xl-", suffix=".json", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh, ensure_ascii=False, indent=2)
            fh.write("\n")
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _fmt(value: Any, digits: int = 2) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        text = f"{value:.{digits}f}"
        return text[1:] if text.startswith("-") and float(text) == 0 else text
    return str(value)


def table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths)),
             "  ".join("-" * w for w in widths)]
    lines += ["  ".join(cell.ljust(w) for cell, w in zip(r, widths)) for r in rows]
    return "\n".join(lines)


def render_coefficients(analysis: Analysis) -> str:
    cal = analysis.calibration
    rows = [["BaseTPS", _fmt(cal.base_tps),
             f"base point: {cal.base_model}, max_tokens {cal.base_max_tokens}, concurrency {cal.base_concurrency}"]]
    rows += [[f"f({lv.concurrency})", _fmt(lv.f), f"{lv.rows} row(s)" if lv.f is not None else "not identified"]
             for lv in cal.concurrency_levels]
    rows += [[f"K_len({lv.max_tokens})", _fmt(lv.k_len),
              f"anchor concurrency {lv.anchor_concurrency}" if lv.k_len is not None else "not identified"]
             for lv in cal.length_levels]
    first_principles = c_model_first_principles(cal)
    rows += [[f"C_model({m.model})", _fmt(m.c_model),
              (f"{m.rows} row(s)" if m.c_model is not None else "not identified")
              + (f"; first principles {first_principles[m.model]:.3f}" if m.model in first_principles else "")]
             for m in cal.models]
    return table(["coefficient", "value", "from"], rows)


def render_consistency(analysis: Analysis) -> str:
    rows = [[ch.status.exp_id, str(ch.status.concurrency), str(ch.status.max_tokens), ch.status.model,
             _fmt(ch.status.tps), _fmt(ch.predicted_tps), _fmt(ch.deviation_pct, 1), ch.role, ch.note("en")]
            for ch in analysis.checks]
    c = analysis.consistency
    summary = (f"check rows: {c.check_rows}   identify: {c.identify_rows}   unidentified: {c.unidentified_rows}"
               f"   excluded: {c.excluded_rows}\n"
               f"MAPE (check rows): {_fmt(c.mape_pct)}%   max: {_fmt(c.max_deviation_pct)}%   "
               f"verdict: {c.verdict}")
    return table(["exp_id", "c", "max_tokens", "model", "measured", "predicted", "dev %", "role", "note"],
                 rows) + "\n\n" + summary


def render_verification(v: Verification, limit: int = 20) -> str:
    if v.ok:
        return (f"verified: {v.cells_compared} formula cells recalculated by {v.engine} "
                f"match the Python reference")
    lines = [f"MISMATCH: {len(v.mismatches) + len(v.unexpected)} of {v.cells_compared} formula cells "
             f"({v.engine}) disagree with the Python reference"]
    lines += [f"  {m}" for m in v.mismatches[:limit]]
    lines += [f"  {ref}: no reference value" for ref in v.unexpected[:limit]]
    return "\n".join(lines)


def prediction_to_dict(p: Prediction) -> dict[str, Any]:
    return {"tps": p.tps, "missing": list(p.missing)}


def solution_to_dict(s: Solution) -> dict[str, Any]:
    return {
        "concurrency": s.concurrency, "tps": s.tps, "reachable": s.reachable,
        "target_tps": s.target_tps, "max_tokens": s.max_tokens, "model": s.model,
        "best_concurrency": s.best_concurrency, "best_tps": s.best_tps,
        "levels": [{"concurrency": c, "predicted_tps": tps} for c, tps in s.table],
    }
