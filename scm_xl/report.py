"""Reports: the JSON contract for users' CI, and plain-text tables for people.

Every JSON shape the CLI prints or writes is built here (`analysis_to_dict`,
`prediction_to_dict`, `forecast_to_dict`, `solution_to_dict`, `constrained_to_dict`,
`caveats_to_dict`), and `to_json` is the one serialiser: non-finite numbers become
null, so the output is always valid JSON. Text for people uses words ("n/a", "short
output"); the JSON keeps the machine names ("short_output", null).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from scm_xl.model import Analysis, Prediction, RowCheck, Solution, same_model
from scm_xl.outputs import atomic_write_text
from scm_xl.terminal import table, terminal_width, wrapped
from scm_xl.report_texts import PHYSICS_NAMES, say, words
from scm_xl.rules import ROLE_NAMES, TEXTS, VERDICT_NAMES
from scm_xl.verify import Verification

if TYPE_CHECKING:
    from scm_xl.constrained import ConstrainedSolution
    from scm_xl.lsq import Forecast
    from scm_xl.rules import Lang

NA = "n/a"
# The physics checks' codes (JSON) and their names for people (both languages: report_texts).
PHYSICS_WORDS = PHYSICS_NAMES["en"]
ROLE_WORDS = {"identify": "identify row (defines a coefficient, so it tests nothing)",
              "check": "check row (predicted from other rows)",
              "unidentified": "unidentified row", "excluded": "excluded row"}


def _level_key(value: float | int) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def _clean(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def analysis_to_dict(analysis: Analysis, verification: Verification | None = None,
                     holdout: dict[str, Any] | None = None) -> dict[str, Any]:
    """The public JSON report. Keys are a contract: add, never rename.

    `holdout` is the least-squares analysis (scm_xl.lsq.least_squares_analysis(...).report()): its
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
            # only with prompt levels in the data (K_in(P); the base point's level)
            **({"k_in": {_level_key(lv.prompt_level): lv.k_in for lv in cal.prompt_levels},
                "k_in_anchor_concurrency": {_level_key(lv.prompt_level): lv.anchor_concurrency
                                            for lv in cal.prompt_levels},
                "base_prompt_level": cal.base_prompt_level} if cal.prompt_levels else {}),
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
                **({"prompt_level": ch.status.prompt_level, "k_in": ch.k_in} if cal.prompt_levels else {}),
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
    report["physics_summary"] = physics_summary(analysis)
    if holdout is not None:
        report["holdout"] = holdout
        report["loo_mape_pct"] = holdout.get("loo_mape_pct")
        report["loo_max_pct"] = holdout.get("loo_max_pct")
        report["intervals"] = holdout.get("intervals")
    if verification is not None:
        report["verification"] = verification.to_dict()
    return report


def render_holdout(holdout: dict[str, Any], *, lang: Lang = "en") -> str:
    t = words(lang)
    chain = holdout.get("chain_holdout") or {}

    def line(key: str, part: dict[str, Any]) -> str:
        return t[key].format(mape=_pct(part.get("loo_mape_pct"), na=t["na"]),
                             max=_pct(part.get("loo_max_pct"), na=t["na"]), rows=part.get("loo_rows"),
                             verdict=_verdict(part.get("verdict"), lang))
    return "\n".join([line("loo_lsq", holdout), line("loo_chain", chain),
                      wrapped(t["separable"].format(summary=_separable(holdout, lang)))])


def _verdict(verdict: Any, lang: Lang) -> str:
    """A verdict (or a hold-out's) in words; what is not a verdict as it is."""
    return VERDICT_NAMES[lang].get(verdict, str(verdict)) if isinstance(verdict, str) else str(verdict)


def _separable(holdout: dict[str, Any], lang: Lang) -> str:
    """The least-squares interaction check in words (`InteractionCheck.summary`, a Text, in
    `lang`); a summary that is plain text (a report read back) is put together from its parts."""
    summary = holdout.get("interaction_summary")
    if lang == "en" or summary is None or hasattr(summary, "say"):
        return str(say(summary, lang)) if summary is not None else words(lang)["na"]
    t = words(lang)
    if holdout.get("sigma_log") is None:  # no residual degrees of freedom: nothing testable
        return t["separable_untestable"]
    if holdout.get("separable"):
        return t["separable_ok"]
    prompt = holdout.get("prompt_interaction")
    parts = [*(holdout.get("interactions") or []), *(holdout.get("plateaus") or [])]
    lead = t["separable_prompt"].format(prompt=say(prompt, lang)) if prompt else ""
    return t["separable_summary"].format(prompt=lead, broken=t["separable_broken"],
                                         parts=t["parts_sep"].join(str(say(part, lang)) for part in parts))


def render_latency(latency: dict[str, Any], *, lang: Lang = "en") -> str:
    """The latency model's hold-out, knee and Little's-law flags, for fill and verify."""
    t = words(lang)
    holdout = latency["holdout"]
    lines = [wrapped(t["loo_latency"].format(mape=_pct(holdout.get("loo_mape_pct"), na=t["na"]),
                                             max=_pct(holdout.get("loo_max_pct"), na=t["na"]),
                                             rows=holdout.get("loo_rows"),
                                             verdict=_verdict(holdout.get("verdict"), lang)))]
    if latency.get("knee"):
        lines.append(wrapped(t["knee"].format(knee=latency["knee"])))
    flags = latency.get("little_law_flags") or []
    if flags:
        shown = ", ".join(f"{f['exp_id']} ({f['ratio']:.2f})" for f in flags[:5])
        more = t["little_more"].format(n=len(flags) - 5) if len(flags) > 5 else ""
        lines.append(wrapped(t["little_law"].format(n=len(flags), shown=shown, more=more)))
    return "\n".join(lines)


def _pct(value: Any, digits: int = 2, *, na: str = NA) -> str:
    """A percentage with its sign, or "n/a" (never "-%")."""
    return na if value is None else f"{_fmt(value, digits)}%"


def c_model_first_principles(cal: Any) -> dict[str, float]:
    """C_model predicted from weight bytes read per token relative to the base model,
    for the models the catalog knows (scm_xl.physics)."""
    from scm_xl.physics import c_model_table

    return c_model_table(cal.base_model, [m.model for m in cal.models])


def finite(data: Any) -> Any:
    """`data` with every NaN or infinity replaced by None (JSON has no such numbers)."""
    if isinstance(data, float):
        return data if math.isfinite(data) else None
    if isinstance(data, dict):
        return {key: finite(value) for key, value in data.items()}
    if isinstance(data, (list, tuple)):
        return [finite(value) for value in data]
    return data


def to_json(data: Any, *, indent: int | None = None) -> str:
    """The one JSON serialiser: valid JSON always (no NaN/Infinity), UTF-8 text kept."""
    return json.dumps(finite(data), ensure_ascii=False, indent=indent, allow_nan=False)


def write_json(path: str | Path, data: dict[str, Any]) -> None:
    """Write the JSON report atomically, with the user's umask like every other output."""
    atomic_write_text(path, to_json(data, indent=2) + "\n")


def _fmt(value: Any, digits: int = 2, *, na: str = NA) -> str:
    if value is None:
        return na
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        text = f"{value:.{digits}f}"
        return text[1:] if text.startswith("-") and float(text) == 0 else text
    return str(value)


def render_coefficients(analysis: Analysis, *, lang: Lang = "en") -> str:
    t = words(lang)
    na = t["na"]
    cal = analysis.calibration
    rows = [["BaseTPS", _fmt(cal.base_tps, na=na),
             t["base_point"].format(model=cal.base_model, length=cal.base_max_tokens, c=cal.base_concurrency)]]
    rows += [[f"f({lv.concurrency})", _fmt(lv.f, na=na),
              t["row_count"].format(n=lv.rows) if lv.f is not None else t["not_identified"]]
             for lv in cal.concurrency_levels]
    rows += [[f"K_len({lv.max_tokens})", _fmt(lv.k_len, na=na),
              t["anchor"].format(c=lv.anchor_concurrency) if lv.k_len is not None else t["not_identified"]]
             for lv in cal.length_levels]
    rows += [[f"K_in({lv.prompt_level})", _fmt(lv.k_in, na=na),
              ((t["base_prompt"] if lv.prompt_level == cal.base_prompt_level else "")
               + t["anchor"].format(c=lv.anchor_concurrency)) if lv.k_in is not None else t["not_identified"]]
             for lv in cal.prompt_levels]
    first_principles = c_model_first_principles(cal)
    rows += [[f"C_model({m.model})", _fmt(m.c_model, na=na),
              (t["row_count"].format(n=m.rows) if m.c_model is not None else t["not_identified"])
              + (t["first_principles"].format(value=f"{first_principles[m.model]:.3f}")
                 if m.model in first_principles else "")]
             for m in cal.models]
    return table([t["h_coefficient"], t["h_value"], t["h_from"]], rows, width=terminal_width(), shrink=0)


# A rows table longer than this prints only the rows that need a look (see printed_checks).
MAX_PRINTED_ROWS = 40
WORST_CHECK_ROWS = 10


def printed_checks(checks: Sequence[RowCheck]) -> list[RowCheck]:
    """The rows a terminal shows: all of them up to MAX_PRINTED_ROWS; beyond, every excluded or
    unidentified row (up to that many) and the WORST_CHECK_ROWS check rows furthest off, in order."""
    if len(checks) <= MAX_PRINTED_ROWS:
        return list(checks)
    flagged = [i for i, ch in enumerate(checks) if ch.role in ("excluded", "unidentified")][:MAX_PRINTED_ROWS]
    off = sorted((i for i, ch in enumerate(checks) if ch.role == "check" and ch.deviation_pct is not None),
                 key=lambda i: -abs(checks[i].deviation_pct or 0.0))[:WORST_CHECK_ROWS]
    return [checks[i] for i in sorted(set(flagged) | set(off))]


def render_consistency(analysis: Analysis, *, lang: Lang = "en") -> str:
    """The rows table (a long one: printed_checks, and how many it leaves out) and the verdict lines."""
    t = words(lang)
    na = t["na"]
    prompts = bool(analysis.calibration.prompt_levels)  # a prompt column only when the data has levels
    shown = printed_checks(analysis.checks)
    rows = [[ch.status.exp_id, str(ch.status.concurrency), str(ch.status.max_tokens),
             *([str(ch.status.prompt_level)] if prompts else []), ch.status.model,
             _fmt(ch.status.tps, na=na), _fmt(ch.predicted_tps, na=na), _fmt(ch.deviation_pct, 1, na=na),
             ROLE_NAMES[lang].get(ch.role, ch.role), _note(ch, lang)]
            for ch in shown]
    c = analysis.consistency
    summary = (t["rows_summary"].format(check=c.check_rows, identify=c.identify_rows,
                                        unidentified=c.unidentified_rows, excluded=c.excluded_rows) + "\n"
               + t["mape_summary"].format(mape=_pct(c.mape_pct, na=na), max=_pct(c.max_deviation_pct, na=na),
                                          verdict=_verdict(c.verdict, lang)))
    if len(shown) < len(analysis.checks):
        summary = wrapped(t["rows_shown"].format(shown=len(shown), total=len(analysis.checks), limit=MAX_PRINTED_ROWS,
                                                 worst=WORST_CHECK_ROWS), width=terminal_width()) + "\n" + summary
    return table([t["h_exp_id"], t["h_c"], t["h_max_tokens"], *([t["h_prompt"]] if prompts else []), t["h_model"],
                  t["h_measured"], t["h_predicted"], t["h_dev"], t["h_role"], t["h_note"]], rows,
                 width=terminal_width(), shrink=4 if prompts else 3) + "\n\n" + summary


def _note(check: RowCheck, lang: Lang = "en") -> str:
    """The row's note; a row strict physics excluded names the checks that fired."""
    note = check.note(lang)
    if check.status.reason_code == "physics":
        names = PHYSICS_NAMES[lang]
        note += words(lang)["physics_checks"].format(
            checks=words(lang)["list_sep"].join(names.get(code, code) for code in check.status.physics.codes()))
    return note


def physics_summary(analysis: Analysis, limit: int = 3, *, lang: Lang = "en") -> dict[str, Any]:
    """Rows with physics warnings: counts by check (machine names) and the first few rows."""
    warned = [s for s in analysis.statuses if s.physics.count > 0]
    by_check: dict[str, int] = {}
    for s in warned:
        for code in s.physics.codes():
            by_check[code] = by_check.get(code, 0) + 1
    return {
        "rows": len(warned), "of_rows": len(analysis.statuses), "by_check": by_check,
        "strict": analysis.settings.strict_physics,
        "excluded": sum(1 for s in warned if s.reason_code == "physics"),
        "first": [{"exp_id": s.exp_id, "checks": s.physics.codes(), "text": s.physics.text(lang)}
                  for s in warned[:limit]],
    }


def render_physics(analysis: Analysis, limit: int = 3, *, lang: Lang = "en") -> str:
    """Physics warnings for people: counts by check and the first rows; "" when there are none."""
    t = words(lang)
    summary = physics_summary(analysis, limit, lang=lang)
    if not summary["rows"]:
        return ""
    names = PHYSICS_NAMES[lang]
    counts = t["list_sep"].join(t["physics_count"].format(check=names.get(code, code), count=count)
                                for code, count in summary["by_check"].items())
    lines = [wrapped(t["physics_head"].format(rows=summary["rows"], of=summary["of_rows"], counts=counts))]
    lines += [wrapped(t["physics_row"].format(exp_id=item["exp_id"], text=item["text"]), indent="    ")
              for item in summary["first"]]
    if summary["rows"] > limit:
        lines.append(wrapped(t["physics_more"].format(n=summary["rows"] - limit), indent="    "))
    if summary["strict"]:
        lines.append(t["physics_strict"].format(n=summary["excluded"]))
    else:
        lines.append(t["physics_kept"])
    return "\n".join(lines)


def render_workbook_answers(layout: Any, inputs: Any, values: Mapping[tuple[str, str], Any], *,
                            lang: Lang = "en") -> list[str]:
    """The forward and inverse answers as the workbook's engine computed them (its Derivation
    sheet: the numbers a person sees on opening it), in words; [] where it gave none."""
    def value(name: str) -> Any:
        cell = layout.defined_names()[name]
        found = values.get((layout.title(cell.sheet), cell.address))
        return found if isinstance(found, (int, float)) and not isinstance(found, bool) else None

    t = words(lang)
    lines = []
    target, length = inputs.inverse.get("target_tps"), inputs.inverse.get("max_tokens")
    concurrency, tps = value("RecommendedConcurrency"), value("RecommendedTPS")
    if target is not None and concurrency is not None and tps is not None:
        at = t["wb_inverse_at"].format(length=f"{length:g}") if isinstance(length, (int, float)) else ""
        lines.append(t["wb_inverse"].format(target=f"{target:g}", at=at, c=f"{concurrency:g}",
                                            tps=_fmt(tps, na=t["na"])))
    forward_c, forward_l, forward = inputs.forward.get("concurrency"), inputs.forward.get("max_tokens"), \
        value("ForwardTPS")
    if isinstance(forward_c, (int, float)) and isinstance(forward_l, (int, float)) and forward is not None:
        lines.append(t["wb_forward"].format(c=f"{forward_c:g}", length=f"{forward_l:g}",
                                            tps=_fmt(forward, na=t["na"])))
    return lines


def render_verification(v: Verification, limit: int = 20, *, lang: Lang = "en") -> str:
    """The verification for people: the causes first (typed rows the formulas do not cover,
    formula cells typed over), then the cells that disagree because of them, each list cut at
    `limit` with how many more there are. The cells themselves are named as the verification
    names them (sheet, address, values), in `lang`."""
    t = words(lang)
    if v.ok:  # every formula cell; 80 columns
        return t["verified"].format(cells=v.cells_compared, engine=v.engine)
    lines = []
    if v.uncovered:
        lines.append(t["not_covered"].format(n=len(v.uncovered), rows=v.rows_covered))
        lines += _first([f"  {say(row, lang)}" for row in v.uncovered], limit, "row", lang=lang)
    if v.mismatches or v.unexpected:
        lines.append(t["mismatch"].format(n=len(v.mismatches) + len(v.unexpected), cells=v.cells_compared,
                                          engine=v.engine))
        typed = v.typed_over
        others = [m for m in v.mismatches if not m.typed_over]
        if typed:
            one = len(typed) == 1
            lines.append(t["typed_over_one" if one else "typed_over_many"].format(n=len(typed)))
            lines += _first([f"  {m.describe(lang)}" for m in typed], limit, "cell", lang=lang)
            rest = len(others) + len(v.unexpected)
            if rest:
                verb = t["disagrees_one" if rest == 1 else "disagrees_many"]
                lines.append(t["others_after_one" if one else "others_after_many"].format(n=rest, verb=verb))
        lines += _first([f"  {m.describe(lang)}" for m in others], limit, "cell", lang=lang)
        lines += _first([t["no_reference"].format(ref=ref) for ref in v.unexpected], limit, "cell", lang=lang)
    return "\n".join(lines)


def _first(lines: list[str], limit: int, what: str, *, lang: Lang = "en") -> list[str]:
    """`lines` up to `limit`, and a line saying how many more there are (all of them are in the JSON);
    `what`: "row" or "cell"."""
    if len(lines) <= limit:
        return lines
    return lines[:limit] + [words(lang)[f"more_{what}"].format(n=len(lines) - limit)]


def prediction_to_dict(p: Prediction) -> dict[str, Any]:
    return {"tps": p.tps, "missing": list(p.missing), "method": "chain"}


def forecast_to_dict(forecast: "Forecast") -> dict[str, Any]:
    """A least-squares forward prediction (`lsq.Forecast`) as JSON."""
    return {"tps": forecast.tps, "missing": list(forecast.missing), "method": "lsq",
            "tps_interval": list(forecast.mean_interval) if forecast.mean_interval else None,
            "tps_prediction_interval": list(forecast.prediction_interval)
            if forecast.prediction_interval else None,
            "interpolated": forecast.interpolated, "extrapolated": forecast.extrapolated}


def constrained_to_dict(result: "ConstrainedSolution") -> dict[str, Any]:
    """The solve across every knob as JSON: the cheapest answer's fields at the top level."""
    best = result.cheapest
    return {"concurrency": best.concurrency if best else None, "tps": best.tps if best else None,
            "reachable": result.reachable, "max_tokens": best.max_tokens if best else None,
            "model": best.model if best else None, **result.report()}


# ---------------------------------------------------------------------------
# Caveats: what an answer rests on
# ---------------------------------------------------------------------------

def measured_rows_at(analysis: Analysis, concurrency: float, max_tokens: int, model: str | None) -> list[RowCheck]:
    """The measured rows at exactly this configuration (any role), at the base prompt level (the
    answers' own; a row with a blank prompt level is at it): a row at another prompt length is
    not a measurement of this answer."""
    model = model or analysis.calibration.base_model or ""
    level = analysis.base_prompt_level
    return [ch for ch in analysis.checks if ch.status.concurrency == concurrency
            and ch.status.max_tokens == max_tokens and same_model(ch.status.model, model)
            and (level is None or ch.status.prompt_level in (None, level))]


def excluded_here(analysis: Analysis, concurrency: float | None, max_tokens: int | None,
                  model: str | None, what: str | None = None, *, lang: Lang = "en") -> list[str]:
    """Lines saying that a configuration an answer names (the best reachable, say) was measured
    and excluded, at what TPS and why: its TPS is the model's, not the measurement's. `what`
    names it (default "this", in `lang`)."""
    if concurrency is None or max_tokens is None:
        return []
    t = words(lang)
    return [t["excluded_here"].format(what=t["what_this"] if what is None else what, row=ch.status.exp_id,
                                      tps=_fmt(ch.status.tps, na=t["na"]),
                                      why=_excluded_why(ch.status.reason(lang), lang))
            for ch in measured_rows_at(analysis, concurrency, max_tokens, model) if not ch.status.included]


def _excluded_why(reason: str | None, lang: Lang = "en") -> str:
    """"excluded: why" (the row's reason, which may already say "excluded")."""
    t = words(lang)
    reason = (reason or "").strip()
    return reason if reason.startswith(t["excluded_lead"]) else t["excluded_why"].format(reason=reason or t["not_used"])


def _reason_in(reason: str | None, lang: Lang) -> str | None:
    """A row's reason as the JSON gives it (English, rules.TEXTS) in `lang`; as it is when it is not one."""
    if lang == "en" or not reason:
        return reason
    code = next((key for key, text in TEXTS["en"].items() if text == reason), None)
    return TEXTS[lang][code] if code is not None else reason


def caveats_to_dict(analysis: Analysis, holdout: dict[str, Any] | None, *, concurrency: float | None,
                    max_tokens: int | None, model: str | None, method: str) -> dict[str, Any]:
    """What an answer at this configuration rests on: measured rows there, the verdict, the hold-out error."""
    rows = measured_rows_at(analysis, concurrency, max_tokens, model) \
        if concurrency is not None and max_tokens is not None else []
    c = analysis.consistency
    chosen = (holdout or {}) if method == "lsq" else ((holdout or {}).get("chain_holdout") or {})
    return {
        "measured_rows": [{"exp_id": ch.status.exp_id, "measured_tps": ch.status.tps, "role": ch.role,
                           "included": ch.status.included, "identifies": list(ch.identifies),
                           "reason": ch.status.reason("en")} for ch in rows],
        "verdict": c.verdict, "check_rows": c.check_rows, "mape_pct": c.mape_pct,
        "holdout_method": method,
        "holdout_mape_pct": chosen.get("loo_mape_pct"), "holdout_max_pct": chosen.get("loo_max_pct"),
        "holdout_rows": chosen.get("loo_rows"), "holdout_verdict": chosen.get("verdict"),
    }


def verdict_line(verdict: str, check_rows: int, mape_pct: float | None, *, lang: Lang = "en") -> str:
    """The consistency verdict with the check rows it rests on (and the rule's minimum for excellent)."""
    from scm_xl.rules import EXCELLENT_MIN_ROWS

    t = words(lang)
    rows = t["check_rows_one" if check_rows == 1 else "check_rows_many"].format(n=check_rows)
    short = (t["excellent_needs"].format(n=EXCELLENT_MIN_ROWS)
             if 0 < check_rows < EXCELLENT_MIN_ROWS and verdict == "good" else "")
    return t["verdict_line"].format(verdict=_verdict(verdict, lang), rows=rows, mape=_pct(mape_pct, na=t["na"]),
                                    short=short)


# An answer within this share of an identify row's measurement repeats it (the chain's does, exactly).
REPEATS_MEASUREMENT = 0.005


def render_caveats(caveats: dict[str, Any], answer_tps: float | None = None, *, lang: Lang = "en") -> list[str]:
    """The measured rows at the answer's configuration in words. Identify rows are said once for
    all their replicates, and "repeats that measurement" only when the answer does: another
    method's answer there is its own (least squares fits every row)."""
    t = words(lang)
    na = t["na"]
    lines = []
    identify = [row for row in caveats["measured_rows"] if row["role"] == "identify"]
    if identify:
        ids = ", ".join(row["exp_id"] for row in identify)
        measured = sum(row["measured_tps"] for row in identify) / len(identify)
        names = ", ".join(dict.fromkeys(name for row in identify for name in row["identifies"]))
        label = (t["label_row"].format(ids=ids) if len(identify) == 1
                 else t["label_rows"].format(ids=ids, tps=_fmt(measured, na=na)))
        tps = t["label_tps"].format(tps=_fmt(measured, na=na)) if len(identify) == 1 else ""
        if answer_tps is None or abs(answer_tps - measured) <= REPEATS_MEASUREMENT * measured:
            lines.append(t["repeats"].format(label=label, tps=tps, names=names))
        else:
            off = (answer_tps - measured) / measured * 100
            lines.append(t["measured_defines"].format(label=label, tps=tps, names=names, off=f"{off:+.1f}%"))
    for row in caveats["measured_rows"]:
        if row["role"] == "identify":
            continue
        elif row["role"] == "check":
            off = (t["model_off"].format(
                pct=f"{abs(answer_tps - row['measured_tps']) / row['measured_tps'] * 100:.1f}%")
                if answer_tps is not None and row["measured_tps"] else "")
            lines.append(t["measured_check"].format(row=row["exp_id"], tps=_fmt(row["measured_tps"], na=na), off=off))
        elif not row.get("included", True):
            lines.append(t["measured_excluded"].format(row=row["exp_id"], tps=_fmt(row["measured_tps"], na=na),
                                                       why=_excluded_why(_reason_in(row.get("reason"), lang), lang)))
        else:
            lines.append(t["measured_unused"].format(row=row["exp_id"], tps=_fmt(row["measured_tps"], na=na),
                                                     role=ROLE_NAMES[lang].get(row["role"], row["role"])))
    lines.append(verdict_line(caveats["verdict"], caveats["check_rows"], caveats["mape_pct"], lang=lang))
    lines.append(t["holdout_line"].format(
        method=caveats["holdout_method"], mape=_pct(caveats["holdout_mape_pct"], na=na),
        max=_pct(caveats["holdout_max_pct"], na=na), rows=caveats["holdout_rows"] or 0,
        verdict=_verdict(caveats["holdout_verdict"] or "insufficient", lang)))
    return lines


def unidentified_hints(analysis: Analysis, missing: Sequence[str], *, concurrency: float | None,
                       max_tokens: int | None, model: str | None, method: str, lang: Lang = "en") -> list[str]:
    """The way forward when the data cannot answer: measured levels, known models, the other method."""
    t = words(lang)
    cal = analysis.calibration
    known_c = [lv.concurrency for lv in cal.concurrency_levels if lv.f is not None]
    known_l = [lv.max_tokens for lv in cal.length_levels if lv.k_len is not None]
    known_m = [m.model for m in cal.models if m.c_model is not None]
    hints = []
    if concurrency is not None and any(label.startswith("f(") for label in missing):
        hints.append(t["hint_known_f"].format(levels=_join(known_c, lang)))
        if method == "chain" and len(known_c) >= 2:
            inside = known_c[0] < concurrency < known_c[-1]
            hints.append(t["hint_interpolate"] if inside else t["hint_extrapolate"])
    if max_tokens is not None and any(label.startswith("K_len(") for label in missing):
        hints.append(t["hint_known_len"].format(levels=_join(known_l, lang)))
    if model is not None and any(label.startswith("C_model(") for label in missing):
        measured = [m.model for m in cal.models]
        if any(same_model(model, m) for m in measured):
            hints.append(t["hint_not_base"].format(model=model, c=cal.base_concurrency, length=cal.base_max_tokens))
        hints.append(t["hint_known_models"].format(models=_join(known_m, lang)))
    if any(label.startswith("K_in(") for label in missing):
        known_p = [lv.prompt_level for lv in cal.prompt_levels if lv.k_in is not None]
        hints.append(t["hint_known_prompt"].format(levels=_join(known_p, lang)) if known_p else t["hint_no_prompt"])
    if method == "chain" and not hints:
        hints.append(t["hint_lsq"])
    return hints


def _join(values: Sequence[object], lang: Lang = "en") -> str:
    return ", ".join(str(v) for v in values) if values else words(lang)["none"]


def solution_to_dict(s: Solution) -> dict[str, Any]:
    return {
        "concurrency": s.concurrency, "tps": s.tps, "reachable": s.reachable,
        "target_tps": s.target_tps, "max_tokens": s.max_tokens, "model": s.model,
        "best_concurrency": s.best_concurrency, "best_tps": s.best_tps,
        "levels": [{"concurrency": c, "predicted_tps": tps} for c, tps in s.table],
    }
