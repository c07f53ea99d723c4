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
import re
import shutil
import textwrap
import unicodedata
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from scm_xl.model import Analysis, Prediction, RowCheck, Solution, same_model
from scm_xl.outputs import atomic_write_text
from scm_xl.verify import Verification

if TYPE_CHECKING:
    from scm_xl.constrained import ConstrainedSolution
    from scm_xl.lsq import Forecast

NA = "n/a"
WIDTH = 80  # terminal tables and lines fit this
MIN_TEXT_WIDTH = 24  # a wrapped text column narrower than this goes under its row instead
MIN_SHRUNK = 12  # a column a table may shorten to fit (a model name) keeps at least this many columns
# The physics checks' codes (JSON) and their names for people.
PHYSICS_WORDS = {"short_output": "short output", "superlinear": "superlinear gain",
                 "over_ceiling": "above the roofline ceiling", "kv_over": "KV cache over GPU memory"}
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


def render_holdout(holdout: dict[str, Any]) -> str:
    chain = holdout.get("chain_holdout") or {}
    return "\n".join([
        f"leave-one-out, lsq:   MAPE {_pct(holdout.get('loo_mape_pct'))}, max {_pct(holdout.get('loo_max_pct'))} "
        f"over {holdout.get('loo_rows')} rows, verdict {holdout.get('verdict')}",
        f"leave-one-out, chain: MAPE {_pct(chain.get('loo_mape_pct'))}, max {_pct(chain.get('loo_max_pct'))} "
        f"over {chain.get('loo_rows')} rows, verdict {chain.get('verdict')}",
        wrapped(f"separable model: {holdout.get('interaction_summary', NA)}")])


def render_latency(latency: dict[str, Any]) -> str:
    """The latency model's hold-out, knee and Little's-law flags, for fill and verify."""
    holdout = latency["holdout"]
    lines = [wrapped(f"leave-one-out, latency: MAPE {_pct(holdout.get('loo_mape_pct'))}, max "
                     f"{_pct(holdout.get('loo_max_pct'))} over {holdout.get('loo_rows')} rows, verdict "
                     f"{holdout.get('verdict')} (TTFT + (L - 1) x ITL, every prompt level)")]
    if latency.get("knee"):
        lines.append(wrapped(f"knee: {latency['knee']}"))
    flags = latency.get("little_law_flags") or []
    if flags:
        shown = ", ".join(f"{f['exp_id']} ({f['ratio']:.2f})" for f in flags[:5])
        more = f" and {len(flags) - 5} more" if len(flags) > 5 else ""
        lines.append(wrapped(f"Little's law off by more than 15% (c x L / TPS against the mean latency) on "
                             f"{len(flags)} rows: {shown}{more}: the client did not keep its slots busy there"))
    return "\n".join(lines)


def _pct(value: Any, digits: int = 2) -> str:
    """A percentage with its sign, or "n/a" (never "-%")."""
    return NA if value is None else f"{_fmt(value, digits)}%"


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


def _fmt(value: Any, digits: int = 2) -> str:
    if value is None:
        return NA
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        text = f"{value:.{digits}f}"
        return text[1:] if text.startswith("-") and float(text) == 0 else text
    return str(value)


def display_width(text: str) -> int:
    """Columns `text` takes on a terminal: East Asian wide and fullwidth characters two, combining
    marks and zero-width characters none, the rest one."""
    width = 0
    for ch in text:
        if unicodedata.combining(ch) or unicodedata.category(ch) in ("Mn", "Me", "Cf"):
            continue
        width += 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1
    return width


def _pad(text: str, width: int) -> str:
    return text + " " * max(width - display_width(text), 0)


def _take(text: str, width: int, *, from_end: bool = False) -> str:
    """The longest start (or end) of `text` at most `width` columns wide."""
    out, used = [], 0
    for ch in (reversed(text) if from_end else text):
        w = display_width(ch)
        if used + w > width:
            break
        out.append(ch)
        used += w
    return "".join(reversed(out) if from_end else out)


def shorten(text: str, width: int) -> str:
    """`text` in at most `width` columns, marked with an ellipsis where shortened: a model's
    organisation goes first ("Qwen/Qwen2.5-7B-Instruct" -> "…/Qwen2.5-7B-Instruct"), then its
    end ("Qwen2.5-7B-Ins…"): the family and the size lead a model's name."""
    if display_width(text) <= width:
        return text
    if width <= 1:
        return "…"[:width]
    short = re.sub(r"[^/\s(]+/", "…/", text, count=1)
    if display_width(short) <= width:
        return short
    short = short.replace("…/", "", 1)
    return _take(short, width - 1) + "…"


def _wrap(text: str, width: int) -> list[str]:
    """`text` in lines of at most `width` columns: broken at spaces, and between two CJK characters
    (which need no space); a word is cut only when it is wider than a whole line."""
    tokens = re.findall(r"\s+|[\u2e80-\u9fff\uf900-\ufaff\uff00-\uffef]|[^\s\u2e80-\u9fff\uf900-\ufaff\uff00-\uffef]+",
                        text.strip())
    lines: list[str] = []
    line = ""
    for token in tokens:
        if token.isspace():
            if line:
                line += token
            continue
        while display_width(token) > width:  # wider than a line: cut it
            if line.strip():
                lines.append(line.rstrip())
            piece = _take(token, width)
            lines.append(piece)
            token, line = token[len(piece):], ""
        if display_width(line + token) > width and line.strip():
            lines.append(line.rstrip())
            line = ""
        line += token
    if line.strip():
        lines.append(line.rstrip())
    return lines or [""]


def terminal_width() -> int:
    """The width tables are fitted to: the terminal's (COLUMNS, else the terminal itself), at most
    WIDTH so what a test or a log records does not depend on the window it ran in."""
    return max(min(shutil.get_terminal_size((WIDTH, 24)).columns, WIDTH), 40)


def table(headers: list[str], rows: list[list[str]], *, width: int | None = None, shrink: int | None = None) -> str:
    """Columns padded to their widest cell, in terminal columns (a CJK character is two); values
    are never cut except the `shrink` column's.

    A header may hold a line break (a unit under its name). With `width`, no line is wider: the
    `shrink` column (a model name) is shortened with an ellipsis as far as needed, not below
    MIN_SHRUNK columns or its header; then the last column (free text) wraps to what the others
    leave of it, or goes under its row, indented, when less than `MIN_TEXT_WIDTH` is left.
    """
    head = [h.split("\n") for h in headers]
    depth = max(len(h) for h in head)
    head = [h + [""] * (depth - len(h)) for h in head]
    wrap = width is not None
    sized = len(headers) - 1 if wrap else len(headers)
    widths = [max([display_width(x) for x in head[i]] + [display_width(r[i]) for r in rows]) for i in range(sized)]
    if width is not None and shrink is not None and shrink < sized:
        over = sum(widths) + 2 * (sized - 1) - width  # the columns before the text must fit on one line
        floor = max(MIN_SHRUNK, *(display_width(x) for x in head[shrink]))
        if over > 0 and widths[shrink] > floor:
            widths[shrink] = max(widths[shrink] - over, floor)
            rows = [[shorten(cell, widths[shrink]) if i == shrink else cell for i, cell in enumerate(r)] for r in rows]
    indent = sum(widths) + 2 * len(widths)
    room = (width - indent) if width is not None else 0
    beside = wrap and room >= MIN_TEXT_WIDTH
    if wrap:
        longest = max((display_width(r[-1]) for r in rows), default=0)
        widths.append(max([display_width(x) for x in head[-1]] + [min(room, longest)]) if beside
                      else max(display_width(x) for x in head[-1]))
    if wrap and not beside:  # the text goes under each row, and its header under the others
        lines = ["  ".join(_pad(h[k], w) for h, w in zip(head[:-1], widths)).rstrip() for k in range(depth)]
        lines += ["    " + x for x in head[-1] if x]
        lines.append("  ".join("-" * w for w in widths[:-1]))
    else:
        lines = ["  ".join(_pad(h[k], w) for h, w in zip(head, widths)).rstrip() for k in range(depth)]
        lines.append("  ".join("-" * w for w in widths))
    for r in rows:
        if not wrap:
            lines.append("  ".join(_pad(cell, w) for cell, w in zip(r, widths)).rstrip())
            continue
        first = "  ".join(_pad(cell, w) for cell, w in zip(r[:-1], widths))
        if beside:
            chunks = _wrap(r[-1], room)
            lines.append(f"{first}  {chunks[0]}".rstrip())
            lines += [" " * indent + chunk for chunk in chunks[1:]]
        else:
            lines.append(first.rstrip())
            assert width is not None
            if r[-1].strip():
                lines += ["    " + chunk for chunk in _wrap(r[-1], width - 4)]
    return "\n".join(lines)


def wrapped(text: str, width: int = WIDTH, indent: str = "  ") -> str:
    """A long line wrapped to `width`, continuation lines indented; words are never cut."""
    return "\n".join(textwrap.wrap(text, width, subsequent_indent=indent, break_long_words=False,
                                   break_on_hyphens=False)) or text


def render_coefficients(analysis: Analysis) -> str:
    cal = analysis.calibration
    rows = [["BaseTPS", _fmt(cal.base_tps),
             f"tok/s at the base point: {cal.base_model}, max_tokens {cal.base_max_tokens}, "
             f"concurrency {cal.base_concurrency}"]]
    rows += [[f"f({lv.concurrency})", _fmt(lv.f), f"{lv.rows} row(s)" if lv.f is not None else "not identified"]
             for lv in cal.concurrency_levels]
    rows += [[f"K_len({lv.max_tokens})", _fmt(lv.k_len),
              f"anchor concurrency {lv.anchor_concurrency}" if lv.k_len is not None else "not identified"]
             for lv in cal.length_levels]
    rows += [[f"K_in({lv.prompt_level})", _fmt(lv.k_in),
              (("base prompt level; " if lv.prompt_level == cal.base_prompt_level else "")
               + f"anchor concurrency {lv.anchor_concurrency}") if lv.k_in is not None else "not identified"]
             for lv in cal.prompt_levels]
    first_principles = c_model_first_principles(cal)
    rows += [[f"C_model({m.model})", _fmt(m.c_model),
              (f"{m.rows} row(s)" if m.c_model is not None else "not identified")
              + (f"; first principles {first_principles[m.model]:.3f}" if m.model in first_principles else "")]
             for m in cal.models]
    return table(["coefficient", "value", "from"], rows, width=terminal_width(), shrink=0)


def render_consistency(analysis: Analysis) -> str:
    prompts = bool(analysis.calibration.prompt_levels)  # a prompt column only when the data has levels
    rows = [[ch.status.exp_id, str(ch.status.concurrency), str(ch.status.max_tokens),
             *([str(ch.status.prompt_level)] if prompts else []), ch.status.model,
             _fmt(ch.status.tps), _fmt(ch.predicted_tps), _fmt(ch.deviation_pct, 1), ch.role, _note(ch)]
            for ch in analysis.checks]
    c = analysis.consistency
    summary = (f"check rows: {c.check_rows}   identify: {c.identify_rows}   unidentified: {c.unidentified_rows}"
               f"   excluded: {c.excluded_rows}\n"
               f"MAPE (check rows): {_pct(c.mape_pct)}   max: {_pct(c.max_deviation_pct)}   "
               f"verdict: {c.verdict}")
    return table(["exp_id", "c", "max\ntokens", *(["prompt"] if prompts else []), "model", "measured\ntok/s",
                  "predicted\ntok/s", "dev\n%", "role", "note"], rows, width=terminal_width(),
                 shrink=4 if prompts else 3) + "\n\n" + summary


def _note(check: RowCheck) -> str:
    """The row's note; a row strict physics excluded names the checks that fired."""
    note = check.note("en")
    if check.status.reason_code == "physics":
        note += f" ({', '.join(PHYSICS_WORDS.get(code, code) for code in check.status.physics.codes())})"
    return note


def physics_summary(analysis: Analysis, limit: int = 3) -> dict[str, Any]:
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
        "first": [{"exp_id": s.exp_id, "checks": s.physics.codes(), "text": s.physics.text("en")}
                  for s in warned[:limit]],
    }


def render_physics(analysis: Analysis, limit: int = 3) -> str:
    """Physics warnings for people: counts by check and the first rows; "" when there are none."""
    summary = physics_summary(analysis, limit)
    if not summary["rows"]:
        return ""
    counts = ", ".join(f"{PHYSICS_WORDS.get(code, code)} {count}" for code, count in summary["by_check"].items())
    lines = [wrapped(f"physics warnings on {summary['rows']} of {summary['of_rows']} rows: {counts}")]
    lines += [wrapped(f"  {item['exp_id']}: {item['text']}", indent="    ") for item in summary["first"]]
    if summary["rows"] > limit:
        lines.append(wrapped(f"  ... and {summary['rows'] - limit} more (every row: the JSON report, or the "
                             "workbook's consistency sheet)", indent="    "))
    if summary["strict"]:
        lines.append(f"strict physics: {summary['excluded']} of these rows excluded")
    else:
        lines.append("warnings only: these rows are still used (--strict-physics excludes them)")
    return "\n".join(lines)


def render_workbook_answers(layout: Any, inputs: Any, values: dict[tuple[str, str], Any]) -> list[str]:
    """The forward and inverse answers as the workbook's engine computed them (its Derivation
    sheet: the numbers a person sees on opening it), in words; [] where it gave none."""
    def value(name: str) -> Any:
        cell = layout.defined_names()[name]
        found = values.get((layout.title(cell.sheet), cell.address))
        return found if isinstance(found, (int, float)) and not isinstance(found, bool) else None

    lines = []
    target, length = inputs.inverse.get("target_tps"), inputs.inverse.get("max_tokens")
    concurrency, tps = value("RecommendedConcurrency"), value("RecommendedTPS")
    if target is not None and concurrency is not None and tps is not None:
        at = f" at max_tokens {length:g}" if isinstance(length, (int, float)) else ""
        lines.append(f"the workbook's inverse: {target:g} TPS{at} -> concurrency {concurrency:g} "
                     f"(predicted {_fmt(tps)} TPS)")
    forward_c, forward_l, forward = inputs.forward.get("concurrency"), inputs.forward.get("max_tokens"), \
        value("ForwardTPS")
    if isinstance(forward_c, (int, float)) and isinstance(forward_l, (int, float)) and forward is not None:
        lines.append(f"the workbook's forward: concurrency {forward_c:g}, max_tokens {forward_l:g} -> "
                     f"{_fmt(forward)} TPS")
    return lines


def render_verification(v: Verification, limit: int = 20) -> str:
    """The verification for people: the causes first (typed rows the formulas do not cover,
    formula cells typed over), then the cells that disagree because of them, each list cut at
    `limit` with how many more there are."""
    if v.ok:
        return (f"verified: {v.cells_compared} cells recalculated by {v.engine} "  # every formula cell; 80 columns
                f"match the Python reference")
    lines = []
    if v.uncovered:
        lines.append(f"NOT COVERED: {len(v.uncovered)} typed row(s) lie below the {v.rows_covered} rows the "
                     "formulas cover; the workbook ignores them (refill with `scm-xl fill --workbook` to grow it):")
        lines += _first([f"  {row}" for row in v.uncovered], limit, "row")
    if v.mismatches or v.unexpected:
        lines.append(f"MISMATCH: {len(v.mismatches) + len(v.unexpected)} of {v.cells_compared} formula cells "
                     f"({v.engine}) disagree with the Python reference")
        typed = v.typed_over
        others = [m for m in v.mismatches if not m.typed_over]
        if typed:
            one = len(typed) == 1
            lines.append(f"  {len(typed)} formula cell{'' if one else 's'} typed over (restore "
                         f"{'its formula' if one else 'their formulas'}, or refill the workbook):")
            lines += _first([f"  {m}" for m in typed], limit, "cell")
            rest = len(others) + len(v.unexpected)
            if rest:
                verb = "cell disagrees" if rest == 1 else "cells disagree"
                lines.append(f"  {rest} other {verb} (they may follow from the cell{'' if one else 's'} above):")
        lines += _first([f"  {m}" for m in others], limit, "cell")
        lines += _first([f"  {ref}: no reference value" for ref in v.unexpected], limit, "cell")
    return "\n".join(lines)


def _first(lines: list[str], limit: int, what: str) -> list[str]:
    """`lines` up to `limit`, and a line saying how many more there are (all of them are in the JSON)."""
    if len(lines) <= limit:
        return lines
    return lines[:limit] + [f"  ... and {len(lines) - limit} more (every {what}: the JSON report, --json)"]


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
                  model: str | None, what: str = "this") -> list[str]:
    """Lines saying that a configuration an answer names (the best reachable, say) was measured
    and excluded, at what TPS and why: its TPS is the model's, not the measurement's."""
    if concurrency is None or max_tokens is None:
        return []
    return [f"{what} configuration was measured: row {ch.status.exp_id} at {_fmt(ch.status.tps)} TPS, and "
            f"{_excluded_why(ch.status.reason('en'))}; the TPS above is the model's, not that measurement"
            for ch in measured_rows_at(analysis, concurrency, max_tokens, model) if not ch.status.included]


def _excluded_why(reason: str | None) -> str:
    """"excluded: why" (the row's reason, which may already say "excluded")."""
    reason = (reason or "").strip()
    return reason if reason.startswith("excluded") else f"excluded: {reason or 'not used'}"


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


def verdict_line(verdict: str, check_rows: int, mape_pct: float | None) -> str:
    """The consistency verdict with the check rows it rests on (and the rule's minimum for excellent)."""
    from scm_xl.rules import EXCELLENT_MIN_ROWS

    rows = f"{check_rows} check row{'' if check_rows == 1 else 's'}"
    short = (f"; excellent needs at least {EXCELLENT_MIN_ROWS}"
             if 0 < check_rows < EXCELLENT_MIN_ROWS and verdict == "good" else "")
    return f"consistency verdict: {verdict} ({rows}, MAPE {_pct(mape_pct)}{short})"


# An answer within this share of an identify row's measurement repeats it (the chain's does, exactly).
REPEATS_MEASUREMENT = 0.005


def render_caveats(caveats: dict[str, Any], answer_tps: float | None = None) -> list[str]:
    """The measured rows at the answer's configuration in words. Identify rows are said once for
    all their replicates, and "repeats that measurement" only when the answer does: another
    method's answer there is its own (least squares fits every row)."""
    lines = []
    identify = [row for row in caveats["measured_rows"] if row["role"] == "identify"]
    if identify:
        ids = ", ".join(row["exp_id"] for row in identify)
        measured = sum(row["measured_tps"] for row in identify) / len(identify)
        names = ", ".join(dict.fromkeys(name for row in identify for name in row["identifies"]))
        label = (f"row {ids}" if len(identify) == 1 else f"rows {ids} (replicates, mean {_fmt(measured)} TPS)")
        tps = f" ({_fmt(measured)} TPS)" if len(identify) == 1 else ""
        if answer_tps is None or abs(answer_tps - measured) <= REPEATS_MEASUREMENT * measured:
            lines.append(f"this is measured {label}{tps}, which defines {names}: the answer repeats that "
                         "measurement and tests nothing")
        else:
            off = (answer_tps - measured) / measured * 100
            lines.append(f"measured here: {label}{tps}, which defines {names} in the chain; this answer is "
                         f"{off:+.1f}% from it")
    for row in caveats["measured_rows"]:
        if row["role"] == "identify":
            continue
        elif row["role"] == "check":
            off = (f", the model is {abs(answer_tps - row['measured_tps']) / row['measured_tps'] * 100:.1f}% off"
                   if answer_tps is not None and row["measured_tps"] else "")
            lines.append(f"measured here: row {row['exp_id']} at {_fmt(row['measured_tps'])} TPS "
                         f"(a check row{off})")
        elif not row.get("included", True):
            lines.append(f"measured here: row {row['exp_id']} at {_fmt(row['measured_tps'])} TPS, "
                         f"{_excluded_why(row.get('reason'))}; the answer is the model's, not that measurement")
        else:
            lines.append(f"measured here: row {row['exp_id']} at {_fmt(row['measured_tps'])} TPS "
                         f"({row['role']}: not used)")
    lines.append(verdict_line(caveats["verdict"], caveats["check_rows"], caveats["mape_pct"]))
    lines.append(f"hold-out error ({caveats['holdout_method']}, leave-one-out): MAPE "
                 f"{_pct(caveats['holdout_mape_pct'])}, max {_pct(caveats['holdout_max_pct'])} over "
                 f"{caveats['holdout_rows'] or 0} rows, verdict {caveats['holdout_verdict'] or 'insufficient'}")
    return lines


def unidentified_hints(analysis: Analysis, missing: Sequence[str], *, concurrency: float | None,
                       max_tokens: int | None, model: str | None, method: str) -> list[str]:
    """The way forward when the data cannot answer: measured levels, known models, the other method."""
    cal = analysis.calibration
    known_c = [lv.concurrency for lv in cal.concurrency_levels if lv.f is not None]
    known_l = [lv.max_tokens for lv in cal.length_levels if lv.k_len is not None]
    known_m = [m.model for m in cal.models if m.c_model is not None]
    hints = []
    if concurrency is not None and any(label.startswith("f(") for label in missing):
        hints.append(f"concurrency levels with a known f: {_join(known_c)}")
        if method == "chain" and len(known_c) >= 2:
            inside = known_c[0] < concurrency < known_c[-1]
            hints.append("--method lsq interpolates between measured levels" if inside else
                         "--method lsq --extrapolate extends beyond the measured levels (marked)")
    if max_tokens is not None and any(label.startswith("K_len(") for label in missing):
        hints.append(f"max_tokens with a known K_len: {_join(known_l)}")
    if model is not None and any(label.startswith("C_model(") for label in missing):
        measured = [m.model for m in cal.models]
        if any(same_model(model, m) for m in measured):
            hints.append(f"{model} was measured, but not at the base point (concurrency {cal.base_concurrency}, "
                         f"max_tokens {cal.base_max_tokens}); measure it there")
        hints.append(f"models with a known C_model: {_join(known_m)}")
    if any(label.startswith("K_in(") for label in missing):
        known_p = [lv.prompt_level for lv in cal.prompt_levels if lv.k_in is not None]
        hints.append(f"prompt levels with a known K_in (between two, it is interpolated): {_join(known_p)}"
                     if known_p else "no prompt levels were measured (results column prompt_level)")
    if method == "chain" and not hints:
        hints.append("--method lsq uses every row and may identify it")
    return hints


def _join(values: Sequence[object]) -> str:
    return ", ".join(str(v) for v in values) if values else "none"


def solution_to_dict(s: Solution) -> dict[str, Any]:
    return {
        "concurrency": s.concurrency, "tps": s.tps, "reachable": s.reachable,
        "target_tps": s.target_tps, "max_tokens": s.max_tokens, "model": s.model,
        "best_concurrency": s.best_concurrency, "best_tps": s.best_tps,
        "levels": [{"concurrency": c, "predicted_tps": tps} for c, tps in s.table],
    }
