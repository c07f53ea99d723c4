"""The report page: what it shows, as data, and the one self-contained HTML file made from it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Sequence

import jinja2
from markupsafe import Markup

from scm_xl import __version__
from scm_xl.errors import UsageError
from scm_xl.htmlreport.charts import Chart, all_charts, latency_charts
from scm_xl.htmlreport.latency_section import choice_words, holdout_line, knee_words, latency_context
from scm_xl.htmlreport.payload import calculator_payload, latency_payload
from scm_xl.htmlreport.slo_section import slo_section
from scm_xl.htmlreport.texts import LANGS, PAGE, Lang
from scm_xl.lsq import LsqAnalysis, least_squares_analysis
from scm_xl.model import Analysis, c_label, f_label, k_label
from scm_xl.report import c_model_first_principles
from scm_xl.report_texts import say
from scm_xl.report_texts import words as report_words
from scm_xl.rules import DEFAULT_METHOD, DEFAULT_TARGET

VERDICT_CLASS = {"excellent": "ok", "good": "ok", "fail": "bad", "insufficient": "warn"}


def embed_json(data: Any) -> Markup:
    """JSON safe inside <script type="application/json">: no '<', '>' or '&' can end the element."""
    text = json.dumps(data, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    return Markup(text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e"))


def _fmt(value: float | None, missing: str, digits: int = 2) -> str:
    """The number, or the page's word for a value the data do not give (`missing`: "n/a", "无")."""
    if value is None:
        return missing
    text = f"{value:.{digits}f}"
    return text[1:] if text.startswith("-") and float(text) == 0 else text


def percent(value: float | None, missing: str, digits: int = 2) -> str:
    """"12.34%", or the missing word alone (never "n/a%")."""
    return missing if value is None else f"{_fmt(value, missing, digits)}%"


def _interval(interval: tuple[float, float] | None, missing: str) -> str:
    return f"{_fmt(interval[0], missing)} – {_fmt(interval[1], missing)}" if interval else missing


@dataclass(frozen=True)
class CoefficientRow:
    label: str
    chain: str
    chain_from: str
    lsq: str
    lsq_interval: str
    lsq_rows: str


def coefficient_rows(analysis: Analysis, lsq: LsqAnalysis, texts: dict[str, Any]) -> list[CoefficientRow]:
    cal = analysis.calibration
    fit = lsq.fit
    first_principles = c_model_first_principles(cal)
    na = texts["missing"]

    def lsq_cells(label: str, reference: bool) -> tuple[str, str, str]:
        coefficient = fit.coefficient(label)
        if coefficient is None:  # a reference level of the fit: 1 by definition
            return ("1.00", na, na) if reference and fit.coefficients else (na, na, na)
        return _fmt(coefficient.value, na), _interval(coefficient.interval, na), str(coefficient.rows)

    rows = [CoefficientRow("BaseTPS", _fmt(cal.base_tps, na), texts["base_point"].format(
        model=cal.base_model or na, length=cal.base_max_tokens or na, c=cal.base_concurrency or na),
        *lsq_cells("BaseTPS", False))]
    for lv in cal.concurrency_levels:
        rows.append(CoefficientRow(f_label(lv.concurrency), _fmt(lv.f, na),
                                   texts["row_count"].format(n=lv.rows) if lv.f is not None else texts["not_identified"],
                                   *lsq_cells(f_label(lv.concurrency), lv.concurrency == cal.base_concurrency)))
    for level in cal.length_levels:
        rows.append(CoefficientRow(k_label(level.max_tokens), _fmt(level.k_len, na),
                                   texts["anchor"].format(c=level.anchor_concurrency) if level.k_len is not None
                                   else texts["not_identified"],
                                   *lsq_cells(k_label(level.max_tokens), level.max_tokens == cal.base_max_tokens)))
    for m in cal.models:
        origin = texts["row_count"].format(n=m.rows) if m.c_model is not None else texts["not_identified"]
        if m.model in first_principles:
            origin += f"; {texts['first_principles']} {first_principles[m.model]:.3f}"
        is_base = cal.base_model is not None and m.model.casefold() == cal.base_model.casefold()
        label = c_label(m.model)
        rows.append(CoefficientRow(label, _fmt(m.c_model, na), origin, *lsq_cells(label, is_base)))
    return rows


@dataclass(frozen=True)
class RowLine:
    exp_id: str
    model: str
    concurrency: int
    max_tokens: int
    measured: str
    predicted: str
    deviation: str
    role: str
    role_text: str
    why: str


def row_lines(analysis: Analysis, lang: Lang) -> list[RowLine]:
    texts = PAGE[lang]
    na = texts["missing"]
    lines = []
    for ch in analysis.checks:
        why = "; ".join(part for part in (ch.note(lang), ch.status.physics.text(lang)) if part)
        lines.append(RowLine(ch.status.exp_id, ch.status.model, ch.status.concurrency, ch.status.max_tokens,
                             _fmt(ch.status.tps, na), _fmt(ch.predicted_tps, na), _fmt(ch.deviation_pct, na, 1), ch.role,
                             texts["roles"][ch.role], why))
    return lines


def _levels(analysis: Analysis, lsq: LsqAnalysis) -> tuple[list[int], list[int], list[str]]:
    concurrency = sorted({lv.concurrency for lv in analysis.calibration.concurrency_levels}
                         | set(lsq.fit.measured_concurrency_levels()))
    lengths = sorted({lv.max_tokens for cal in (analysis.calibration, lsq.fit.calibration)
                      for lv in cal.length_levels if lv.k_len is not None})
    models: list[str] = []
    for cal in (analysis.calibration, lsq.fit.calibration):
        for m in cal.models:
            if m.c_model is not None and not any(m.model.casefold() == seen.casefold() for seen in models):
                models.append(m.model)
    return concurrency, lengths, models


def separable_summary(lsq: LsqAnalysis, texts: dict[str, Any], lang: Lang = "en") -> str:
    """The interaction check in the page's language, the cells it names too."""
    check = lsq.interactions
    if not check.testable and not check.plateaus:
        return texts["separable_untestable"]
    if check.separable:
        return texts["separable_ok"]
    parts = [str(say(c.describe(), lang)) for c in check.broken] + [str(say(p.describe(), lang))
                                                                     for p in check.plateaus]
    return texts["separable_broken"] + report_words(lang)["parts_sep"].join(parts)


def report_context(analysis: Analysis, rows: Sequence[Any], lang: Lang, source_name: str,
                   questions: dict[str, Any] | None = None, *, results_path: str | Path | None = None,
                   slo: Any = None, lsq: LsqAnalysis | None = None) -> dict[str, Any]:
    """Everything the page shows, computed once (the template only lays it out). The calculator
    opens on `questions` (a workbook's own, `fill.questions_from_inputs`), else on the questions
    every surface asks by default (`methods.default_questions`). "Under an SLO" judges the
    per-request CSV beside `results_path` under `slo` (a goodput.Slo; None: none given). `lsq` is
    the least-squares analysis of `analysis` when the caller has run it (`fill --html`)."""
    if lang not in LANGS:
        raise UsageError(f"unknown language {lang!r}: use zh or en")
    from scm_xl.latency import latency_model
    from scm_xl.methods import base_prompt, choose_method, default_questions

    texts = PAGE[lang]
    if lsq is None:
        lsq = least_squares_analysis(analysis.statuses, analysis.settings)
    holdout = lsq.report()
    consistency = analysis.consistency
    concurrency, lengths, models = _levels(analysis, lsq)
    latency = latency_model(rows)
    base = base_prompt(analysis, rows)
    # What `scm-xl predict --method auto` takes without --prompt-tokens (the base prompt level).
    auto = choose_method("auto", analysis, holdout, latency, prompt_tokens=None, base=base)
    auto_data = {"method": auto.method, "why": choice_words(auto, texts)}
    latency_data = latency_payload(latency, base, auto_data)
    for fit, data in zip(latency.fits.values(), latency_data["fits"]):
        data["knee_words"] = knee_words(fit.knee, texts)
    # The forward form's choices: the chain's and least squares' levels, and the latency model's
    # (which answers at any max_tokens, so its input takes a number).
    forward_lengths = sorted(set(lengths) | {r.max_tokens for fit in latency.fits.values() for r in fit.rows})
    forward_models = list(models) + [fit.model for fit in latency.fits.values()
                                     if not any(fit.model.casefold() == m.casefold() for m in models)]
    cal = analysis.calibration
    second = concurrency[1] if len(concurrency) > 1 else (concurrency[0] if concurrency else 1)
    asked = questions or default_questions(rows) or {}
    forward_q, inverse_q = asked.get("forward", {}), asked.get("inverse", {})
    method = asked.get("method") or DEFAULT_METHOD
    charts: list[Chart] = all_charts(analysis, lsq.fit, rows, texts)
    na = texts["missing"]
    holdouts = [
        {"method": texts["lsq"], "mape": percent(holdout["loo_mape_pct"], na),
         "max": percent(holdout["loo_max_pct"], na), "rows": holdout["loo_rows"], "verdict": holdout["verdict"]},
        {"method": texts["chain"], "mape": percent(lsq.chain_holdout.mape_pct, na),
         "max": percent(lsq.chain_holdout.max_pct, na),
         "rows": lsq.chain_holdout.predicted_rows, "verdict": lsq.chain_holdout.verdict},
    ]
    latency_line = holdout_line(latency, texts)
    if latency_line is not None:
        holdouts.append(latency_line)
    method_names = texts["js"]["method_names"]
    model = _one_of(forward_q.get("model") or cal.base_model, forward_models)
    inv_model = _one_of(inverse_q.get("model") or cal.base_model, forward_models)
    defaults = {
        "method": method,
        "concurrency": forward_q.get("concurrency", second),
        "max_tokens": forward_q.get("max_tokens") if forward_q.get("max_tokens") in forward_lengths
        else (forward_lengths[0] if forward_lengths else 1),
        "model": model or (forward_models[0] if forward_models else ""),
        "target": inverse_q.get("target_tps", DEFAULT_TARGET["tps"]),
        "inv_length": inverse_q.get("max_tokens", cal.base_max_tokens),
        # the inverse asks at the question's max_tokens and model (every one when the data lack it)
        "inv_lengths": [inverse_q["max_tokens"]] if inverse_q.get("max_tokens") in forward_lengths
        else list(forward_lengths),
        "inv_models": [inv_model] if inv_model else list(forward_models),
    }
    slo_context, slo_data = slo_section(results_path, rows, slo, float(defaults["target"]), texts, lang)
    payload = calculator_payload(analysis, lsq.fit, rows, latency_data, lang)
    payload["slo"] = slo_data
    return {
        "t": texts,
        "lang": lang,
        "version": __version__,
        "source": source_name,
        "row_count": len(analysis.statuses),
        "verdict": consistency.verdict,
        "verdict_class": VERDICT_CLASS.get(consistency.verdict, "warn"),
        "consistency": consistency,
        "mape": percent(consistency.mape_pct, na), "max_dev": percent(consistency.max_deviation_pct, na),
        "holdouts": holdouts,
        "separable": separable_summary(lsq, texts, lang),
        "physics_warned": sum(1 for s in analysis.statuses if s.physics.count),
        "coefficients": coefficient_rows(analysis, lsq, texts),
        "rows": row_lines(analysis, lang),
        "charts": charts,
        "calibration_json": embed_json(payload),
        "slo": slo_context,
        "texts_json": embed_json(texts["js"]),
        "lengths": lengths,
        "models": models,
        "forward_lengths": forward_lengths,
        "forward_models": forward_models,
        "latency": latency_context(latency, texts),
        "latency_charts": latency_charts(latency, texts),
        "auto": auto_data,
        "base_prompt": base,
        "defaults": defaults,
        "opens_on": texts["opens_on"].format(method=method_names.get(method, method), target=f"{defaults['target']:g}",
                                             length=defaults["inv_length"], auto=method_names[auto.method],
                                             why=auto_data["why"]),
    }


def _one_of(model: str | None, models: Sequence[str]) -> str | None:
    """`model` as the page spells it among `models` (casefolded match), or None."""
    if not model:
        return None
    return next((m for m in models if m.casefold() == model.casefold()), None)


def _template() -> jinja2.Template:
    folder = resources.files("scm_xl.htmlreport") / "templates"
    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.globals["style"] = Markup((folder / "style.css").read_text(encoding="utf-8"))
    env.globals["calculator_js"] = Markup((folder / "calculator.js").read_text(encoding="utf-8"))
    return env.from_string((folder / "report.html.j2").read_text(encoding="utf-8"))


def render_report(analysis: Analysis, rows: Sequence[Any], lang: Lang = "zh", source_name: str = "",
                  questions: dict[str, Any] | None = None, *, results_path: str | Path | None = None,
                  slo: Any = None, lsq: LsqAnalysis | None = None) -> str:
    """The report as one HTML string: styles, script, charts and data inline."""
    return _template().render(**report_context(analysis, rows, lang, source_name, questions,
                                               results_path=results_path, slo=slo, lsq=lsq))


def write_text_atomic(path: str | Path, text: str) -> Path:
    """Write a whole file or nothing (the house's one atomic write); the folder must exist."""
    from scm_xl.outputs import atomic_write_text, check_writable

    check_writable(path, force=True)  # the overwrite policy is the command's; this checks the folder
    atomic_write_text(path, text)
    return Path(path)


def write_report(source: Any, path: str | Path, lang: Lang | None = None, *,
                 rows: Sequence[Any] | None = None, strict_physics: bool | None = None, slo: Any = None,
                 warnings: list[str] | None = None) -> Path:
    """Write the self-contained HTML report to `path` and return the path.

    `source` is one of:
    - a results CSV or a filled workbook (a path; `strict_physics` overrides the workbook's switch);
    - an `Analysis`, with `rows` the results rows it was made from (for latency percentiles,
      429 onsets and the charts);
    - a fill/verify report (`scm_xl.workbook.fill.WorkbookReport`: its `.analysis` and the rows
      of its `.inputs`), as `fill --html` passes it.
    `lang` defaults to the workbook's language for a fill report, else "zh". `slo` (a goodput.Slo)
    judges the per-request CSV beside a results CSV source in the section "Under an SLO".
    """
    source_name = ""
    results_path = None
    questions = None
    lsq = None
    if isinstance(source, Analysis):
        if rows is None:
            raise UsageError("write_report(analysis, ...) needs the rows the analysis was made from")
        analysis = source
    elif hasattr(source, "analysis") and hasattr(source, "inputs"):
        analysis = source.analysis
        lsq = getattr(source, "lsq", None)  # fill's own, not a second fit
        rows = rows if rows is not None else [row for _, row in source.inputs.rows]
        layout = getattr(source, "layout", None)
        lang = lang or getattr(layout, "lang", None)
        source_name = Path(getattr(source, "path", "") or "").name
        from scm_xl.workbook.fill import questions_from_inputs

        questions = questions_from_inputs(source.inputs, rows)
    else:
        from scm_xl.workbook.fill import analysis_from_source, questions_from_source

        analysis, loaded = analysis_from_source(source, strict_physics=strict_physics, warnings=warnings)
        rows, source_name, results_path = loaded, Path(source).name, source
        questions = questions_from_source(source, rows)
    return write_text_atomic(path, render_report(analysis, rows, lang or "zh", source_name, questions,
                                                 results_path=results_path, slo=slo, lsq=lsq))
