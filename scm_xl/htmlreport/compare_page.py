"""The drift comparison (scm_xl.compare) as one self-contained HTML page."""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

import altair as alt
import jinja2
from markupsafe import Markup

from scm_xl import __version__
from scm_xl.compare import Comparison
from scm_xl.htmlreport.page import write_text_atomic
from scm_xl.htmlreport.svgchart import FONT
from scm_xl.compare_texts import label_text, say
from scm_xl.compare_texts import words as compare_words
from scm_xl.htmlreport.texts import PAGE, Lang


def render_svg(chart: alt.TopLevelMixin, *, validate: bool = False) -> str:
    """The chart as SVG text, drawn by Vega-Lite in vl-convert's JavaScript engine (the report's
    charts are written by `svgchart` instead: starting the engine is most of a second). The tests
    validate the spec against the Vega-Lite schema (validate=True)."""
    import vl_convert

    configured = chart.configure(font=FONT).configure_view(stroke="#ccc").configure_legend(orient="bottom")
    # The data is inline; no URL may be fetched while drawing.
    return str(vl_convert.vegalite_to_svg(configured.to_dict(validate=validate), allowed_base_urls=[]))


VERDICT_CLASS = {"stable": "ok", "drift": "bad", "insufficient": "warn"}


def _fmt(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _interval(interval: tuple[float, float] | None) -> str:
    return f"{interval[0]:.2f} – {interval[1]:.2f}" if interval else "-"


def coefficient_chart(comparison: Comparison, labels: dict[str, str]) -> str | None:
    """Each coefficient relative to the baseline's value, with both 90% intervals."""
    records = []
    for s in comparison.coefficients:
        if s.baseline is None or s.new is None:
            continue
        for side, value, interval in ((labels["baseline"], s.baseline, s.baseline_interval),
                                      (labels["new"], s.new, s.new_interval)):
            low, high = interval if interval else (value, value)
            records.append({"coefficient": s.label, "side": side, "ratio": value / s.baseline,
                            "low": low / s.baseline, "high": high / s.baseline})
    if not records:
        return None
    order = [s.label for s in comparison.coefficients if s.baseline is not None and s.new is not None]
    y = alt.Y("coefficient:N", sort=order, title=None)
    y_offset = alt.YOffset("side:N")
    colour = alt.Color("side:N", title=None)
    base = alt.Chart(alt.Data(values=records))
    bars = base.mark_rule(strokeWidth=2).encode(x=alt.X("low:Q", title=labels["ratio"], scale=alt.Scale(zero=False)),
                                                x2="high:Q", y=y, yOffset=y_offset, color=colour)
    dots = base.mark_point(filled=True, size=50).encode(x="ratio:Q", y=y, yOffset=y_offset, color=colour)
    one = alt.Chart(alt.Data(values=[{"x": 1.0}])).mark_rule(color="#888", strokeDash=[4, 4]).encode(x="x:Q")
    return render_svg(alt.layer(one, bars, dots).properties(width=420, height=max(120, 34 * len(order))))


COMPARE_TEXT: dict[Lang, dict[str, str]] = {
    "en": {"title": "SCM drift comparison", "baseline": "baseline", "new": "new", "verdict": "verdict",
           "test": "Test", "coefficients": "Coefficients", "old_on_new": "The baseline's model on the new rows",
           "ratio": "value ÷ baseline value (90% intervals)", "coefficient": "coefficient", "change": "change %",
           "p": "p", "moved": "moved", "mape": "MAPE", "max": "max", "rows": "rows",
           "inside": "inside the baseline's 90% prediction interval", "reasons": "why",
           "verdicts_stable": "stable", "verdicts_drift": "drift", "verdicts_insufficient": "insufficient",
           "drift_mark": "drift", "noise_mark": "beyond noise, small",
           "latency": "The baseline's latency model on the new rows",
           "latency_help": "Rows matched by model, concurrency, max_tokens and prompt level, each predicted at its "
                           "own measured prompt and output length. This does not enter the verdict.",
           "latency_not_compared": "Not compared.", "unmatched": "unmatched", "knee": "knee",
           "knee_moved": "moved", "knee_same": "not moved", "prompt_levels": "prompt levels",
           "none_recorded": "none recorded"},
    "zh": {"title": "SCM 基线漂移对比", "baseline": "基线", "new": "新数据", "verdict": "判定",
           "test": "检验方法", "coefficients": "系数", "old_on_new": "用基线模型预测新数据",
           "ratio": "数值 ÷ 基线数值（90% 区间）", "coefficient": "系数", "change": "变化 %",
           "p": "p", "moved": "是否漂移", "mape": "MAPE", "max": "最大偏差", "rows": "行",
           "inside": "落在基线 90% 预测区间内", "reasons": "原因",
           "verdicts_stable": "稳定", "verdicts_drift": "漂移", "verdicts_insufficient": "数据不足",
           "drift_mark": "漂移", "noise_mark": "超出噪声但幅度小",
           "latency": "用基线的延迟模型预测新数据",
           "latency_help": "按模型、并发、max_tokens 与提示长度档位匹配行，每行按其实测的提示与输出长度预测。不影响判定。",
           "latency_not_compared": "未比较。", "unmatched": "未匹配", "knee": "拐点",
           "knee_moved": "已移动", "knee_same": "未移动", "prompt_levels": "提示长度档位",
           "none_recorded": "未记录"},
}


def compare_context(comparison: Comparison, lang: Lang) -> dict[str, Any]:
    words = COMPARE_TEXT[lang]
    rows = [{"label": say(label_text(s.label), lang), "baseline": _fmt(s.baseline), "baseline_interval": _interval(s.baseline_interval),
             "new": _fmt(s.new), "new_interval": _interval(s.new_interval), "change": _fmt(s.change_pct, 1),
             "p": "-" if s.p_value is None else f"{s.p_value:.2g}",
             "moved": words["drift_mark"] if s.drifted else (words["noise_mark"] if s.significant else
                                                             ("-" if s.status == "compared" else
                                                              compare_words(lang).get(f"status_{s.status}", s.status))),
             "drifted": s.drifted} for s in comparison.coefficients]
    o = comparison.old_on_new
    lat = comparison.latency
    latency = None
    if lat is not None:
        def levels(values: list[int | None]) -> str:
            return ", ".join(words["none_recorded"] if v is None else str(v) for v in values) or "-"

        latency = {"status": lat.status, "compared": lat.status == "compared", "mape": _fmt(lat.mape_pct),
                   "max": _fmt(lat.max_pct), "rows": lat.predicted_rows, "unmatched": len(lat.unmatched),
                   "inside": lat.inside_interval, "with": lat.with_interval,
                   "notes": [say(n, lang) for n in lat.notes],
                   "baseline_levels": levels(lat.baseline_prompt_levels), "new_levels": levels(lat.new_prompt_levels),
                   "knees": [{"model": k.model, "text": say(k.text, lang), "moved": k.moved, "status": k.status}
                             for k in lat.knees]}
    return {"w": words, "t": PAGE[lang], "c": comparison, "rows": rows, "version": __version__,
            "reasons": [say(r, lang) for r in comparison.reasons], "test": comparison.test_description(lang),
            "verdict_text": words[f"verdicts_{comparison.verdict}"],
            "verdict_class": VERDICT_CLASS[comparison.verdict],
            "old": {"mape": _fmt(o.mape_pct), "max": _fmt(o.max_pct), "rows": o.predicted_rows,
                    "inside": o.inside_interval, "with": o.with_interval},
            "chart": Markup(coefficient_chart(comparison, words) or ""), "latency": latency}


def render_comparison_html(comparison: Comparison, lang: Lang = "en") -> str:
    folder = resources.files("scm_xl.htmlreport") / "templates"
    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.globals["style"] = Markup((folder / "style.css").read_text(encoding="utf-8"))
    template = env.from_string((folder / "compare.html.j2").read_text(encoding="utf-8"))
    return template.render(**compare_context(comparison, lang))


def write_comparison_html(comparison: Comparison, path: str | Path, lang: Lang = "en") -> Path:
    return write_text_atomic(path, render_comparison_html(comparison, lang))
