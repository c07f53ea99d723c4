"""The report's charts: Vega-Lite specifications built with Altair, rendered to inline SVG
by vl-convert (no script, no network: the SVG is the chart)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import median
from typing import Any, Iterable, Sequence

import altair as alt
import vl_convert

from scm_xl.lsq import LsqFit
from scm_xl.model import Analysis
from scm_xl.rules import ROLES

# A grid of concurrency values between measured levels for the fitted curves.
CURVE_POINTS = 24
# Above this many rows a chart shows each cell's median instead of every row: the points
# would overlap anyway, and the page stays small and quick to make.
POINT_LIMIT = 300
WIDTH, HEIGHT = 300, 220
FONT = "system-ui, -apple-system, 'Segoe UI', 'Noto Sans CJK SC', 'PingFang SC', 'Microsoft YaHei', sans-serif"
ROLE_ORDER = ["check", *(role for role in ROLES if role != "check")]  # the legend: the test rows first
ROLE_COLOURS = ["#1b7f3b", "#2b6cb0", "#b7791f", "#9b2c2c"]


@dataclass(frozen=True)
class Chart:
    key: str
    title: str
    svg: str | None  # None: nothing to draw (see note)
    note: str | None = None


def _config(chart: alt.TopLevelMixin) -> alt.TopLevelMixin:
    return chart.configure(font=FONT).configure_view(stroke="#ccc").configure_legend(orient="bottom")


def _concurrency_axis(levels: Sequence[float], title: str) -> alt.X:
    """A log2 concurrency axis whose ticks are the measured levels (not 1.5, 3, 3.5 ...)."""
    ticks = sorted({float(v) for v in levels})
    return alt.X("c:Q", title=title, scale=alt.Scale(type="log", base=2), axis=alt.Axis(values=ticks, format="d"))


def render_svg(chart: alt.TopLevelMixin, *, validate: bool = False) -> str:
    """The chart as SVG text. The specs are validated against the Vega-Lite schema by the
    tests (validate=True); at run time that costs more than drawing."""
    # The data is inline; no URL may be fetched while drawing.
    return vl_convert.vegalite_to_svg(_config(chart).to_dict(validate=validate), allowed_base_urls=[])


def summarise(records: list[dict[str, Any]], keys: Sequence[str], values: Sequence[str], *,
              always: bool = False) -> list[dict[str, Any]]:
    """Records as they are, or (beyond POINT_LIMIT, or `always`) one per `keys` group with the
    median of each of `values` and the group's size as "n"."""
    if not always and len(records) <= POINT_LIMIT:
        return records
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for record in records:
        groups.setdefault(tuple(record[k] for k in keys), []).append(record)
    return [{**{k: members[0][k] for k in keys}, **{v: median(m[v] for m in members) for v in values},
             "n": len(members)} for members in groups.values()]


def _note(texts: dict[str, Any], rows: int, points: Iterable[Any]) -> str | None:
    shown = len(list(points))
    return texts["aggregated"].format(rows=rows, points=shown) if shown < rows else None


def measured_vs_predicted(analysis: Analysis, texts: dict[str, Any]) -> tuple[str | None, str | None]:
    rows = [{"measured": ch.status.tps, "predicted": ch.predicted_tps, "role": texts["roles"][ch.role],
             "model": ch.status.model, "c": ch.status.concurrency, "L": ch.status.max_tokens}
            for ch in analysis.checks if ch.predicted_tps is not None and ch.status.tps > 0]
    if not rows:
        return None, None
    points = summarise(rows, ("model", "c", "L", "role"), ("measured", "predicted"))
    top = max(max(p["measured"], p["predicted"]) for p in points) * 1.05
    role_domain = [texts["roles"][r] for r in ROLE_ORDER]
    scatter = alt.Chart(alt.Data(values=points)).mark_point(filled=True, size=60, opacity=0.85).encode(
        x=alt.X("measured:Q", title=texts["axis_measured"], scale=alt.Scale(domain=[0, top])),
        y=alt.Y("predicted:Q", title=texts["axis_predicted"], scale=alt.Scale(domain=[0, top])),
        color=alt.Color("role:N", title=texts["role"], scale=alt.Scale(domain=role_domain, range=ROLE_COLOURS)),
        shape=alt.Shape("role:N", title=texts["role"], scale=alt.Scale(domain=role_domain)),
    )
    diagonal = alt.Chart(alt.Data(values=[{"v": 0.0}, {"v": top}])).mark_line(
        color="#888", strokeDash=[4, 4]).encode(x="v:Q", y="v:Q")
    return (render_svg((diagonal + scatter).properties(width=WIDTH + 60, height=HEIGHT + 60)),
            _note(texts, len(rows), points))


def _curve_grid(levels: Sequence[int]) -> list[float]:
    low, high = min(levels), max(levels)
    if high <= low:
        return [float(low)]
    grid = {float(level) for level in levels}
    for i in range(CURVE_POINTS + 1):
        grid.add(math.exp(math.log(low) + (math.log(high) - math.log(low)) * i / CURVE_POINTS))
    return sorted(grid)


def tps_against_concurrency(analysis: Analysis, fit: LsqFit, texts: dict[str, Any]) -> tuple[str | None, str | None]:
    measured = [{"model": s.model, "c": s.concurrency, "L": str(s.max_tokens), "tps": s.tps, "kind": "measured",
                 "role": "included" if s.included else "excluded"} for s in analysis.statuses if s.tps > 0]
    if not measured:
        return None, None
    records = summarise(measured, ("model", "c", "L", "kind", "role"), ("tps",))
    note = _note(texts, len(measured), records)
    levels = fit.measured_concurrency_levels()
    if levels:
        grid = _curve_grid(levels)
        for level in fit.calibration.models:
            for length in fit.calibration.length_levels:
                for c in grid:
                    forecast = fit.forecast(c, length.max_tokens, level.model)
                    if forecast.tps is not None:
                        records.append({"model": level.model, "c": c, "L": str(length.max_tokens),
                                        "tps": forecast.tps, "kind": "fitted"})
    lengths = sorted({r["L"] for r in records}, key=int)
    colour = alt.Color("L:N", title="max_tokens", sort=lengths)
    x = _concurrency_axis([r["c"] for r in records if r["kind"] == "measured"], texts["axis_concurrency"])
    y = alt.Y("tps:Q", title=texts["axis_tps"])
    base = alt.Chart()
    line = base.mark_line(strokeWidth=1.5).encode(x=x, y=y, color=colour, detail="L:N").transform_filter(
        alt.datum.kind == "fitted")
    dots = base.mark_point(filled=True, size=50).encode(
        x=x, y=y, color=colour,
        shape=alt.Shape("role:N", title=texts["role"], scale=alt.Scale(domain=["included", "excluded"],
                                                                        range=["circle", "cross"]))
    ).transform_filter(alt.datum.kind == "measured")
    chart = alt.layer(line, dots, data=alt.Data(values=records)).properties(width=WIDTH, height=HEIGHT).facet(
        column=alt.Column("model:N", title=texts["model"]))
    return render_svg(chart), note


def latency_against_concurrency(rows: Sequence[Any], texts: dict[str, Any]) -> str | None:
    records = []
    for row in rows:
        for field, metric in (("latency_p95_s", texts["metric_latency"]), ("ttft_p95_s", texts["metric_ttft"])):
            value = getattr(row, field, None)
            if value is not None and row.total_output_tokens > 0:
                records.append({"model": row.model, "c": row.concurrency, "L": str(row.max_tokens),
                                "seconds": value, "metric": metric})
    if not records:
        return None
    # The median of each cell's runs: the figure the inverse's latency limit is judged on.
    records = summarise(records, ("model", "c", "L", "metric"), ("seconds",), always=True)
    lengths = sorted({r["L"] for r in records}, key=int)
    chart = alt.Chart(alt.Data(values=records)).mark_line(point=True).encode(
        x=_concurrency_axis([r["c"] for r in records], texts["axis_concurrency"]),
        y=alt.Y("seconds:Q", title=texts["axis_seconds"]),
        color=alt.Color("L:N", title="max_tokens", sort=lengths),
        strokeDash=alt.StrokeDash("model:N", title=texts["model"]),
        detail="model:N",
    ).properties(width=WIDTH, height=HEIGHT).facet(column=alt.Column("metric:N", title=None))
    return render_svg(chart)


def roofline(analysis: Analysis, texts: dict[str, Any]) -> tuple[str | None, bool]:
    """Per-stream TPS against concurrency, with each model's ceiling where the catalog knows it.

    Returns the SVG and whether any ceiling was drawn."""
    rows = [{"model": s.model, "c": s.concurrency, "per_stream": s.tps / s.concurrency, "L": str(s.max_tokens)}
            for s in analysis.statuses if s.tps > 0]
    if not rows:
        return None, False
    points = summarise(rows, ("model", "c", "L"), ("per_stream",))
    ceilings: dict[str, float] = {}
    for s in analysis.statuses:
        if s.physics.ceiling_tps is not None:
            ceilings.setdefault(s.model, s.physics.ceiling_tps)
    x = _concurrency_axis([p["c"] for p in points], texts["axis_concurrency"])
    dots = alt.Chart(alt.Data(values=points)).mark_point(filled=True, size=50).encode(
        x=x, y=alt.Y("per_stream:Q", title=texts["axis_per_stream"]),
        color=alt.Color("model:N", title=texts["model"]), shape=alt.Shape("L:N", title="max_tokens"))
    layers: list[Any] = [dots]
    if ceilings:
        rules = [{"model": m, "ceiling": v, "label": f"{texts['series_ceiling']} {v:.0f}"} for m, v in ceilings.items()]
        rule = alt.Chart(alt.Data(values=rules)).mark_rule(strokeDash=[6, 3], strokeWidth=2).encode(
            y="ceiling:Q", color=alt.Color("model:N", title=texts["model"]))
        label = alt.Chart(alt.Data(values=rules)).mark_text(align="left", dx=4, dy=-6, fontSize=11).encode(
            y="ceiling:Q", text="label:N", color=alt.Color("model:N", title=texts["model"]))
        layers += [rule, label]
    chart = alt.layer(*layers).properties(width=WIDTH + 60, height=HEIGHT + 40)
    return render_svg(chart), bool(ceilings)


def all_charts(analysis: Analysis, fit: LsqFit, rows: Sequence[Any], texts: dict[str, Any]) -> list[Chart]:
    aggregated = len(analysis.statuses) > POINT_LIMIT
    svg, note = measured_vs_predicted(analysis, texts)
    charts = [Chart("measured-predicted", texts["chart_measured_predicted"], svg,
                    note if svg else texts["no_predictions"])]
    svg, note = tps_against_concurrency(analysis, fit, texts)
    charts.append(Chart("tps-concurrency", texts["chart_tps_concurrency"], svg, note if svg else texts["no_output"]))
    latency = latency_against_concurrency(rows, texts)
    charts.append(Chart("latency", texts["chart_latency"], latency,
                        texts["latency_medians"] if latency else texts["no_latency"]))
    svg, has_ceiling = roofline(analysis, texts)
    notes = [text for text in (None if has_ceiling else texts["no_ceiling"],
                               texts["aggregated_short"] if aggregated else None) if text]
    charts.append(Chart("roofline", texts["chart_roofline"], svg, " ".join(notes) or None))
    return charts


def _prompt_grid(levels: Sequence[float]) -> list[float]:
    """The measured prompt levels and CURVE_POINTS steps between the lowest and the highest (linear)."""
    low, high = min(levels), max(levels)
    grid = {float(level) for level in levels}
    if high > low:
        grid.update(low + (high - low) * i / CURVE_POINTS for i in range(CURVE_POINTS + 1))
    return sorted(grid)


def _level_of(value: float, levels: Sequence[float]) -> float:
    return min(levels, key=lambda level: abs(level - value))


def latency_against_prompt(latency: Any, metric: str, texts: dict[str, Any]) -> tuple[str | None, str | None]:
    """TPS (`metric` "tps") or mean TTFT ("ttft") against prompt length: one colour per concurrency
    level, one panel per max_tokens (and a row per model when there are several); the measured
    experiments as points, the latency model's predictions as straight segments between prompt
    lengths. (None, why) when no model was measured at two or more prompt levels."""
    words = texts["latency"]
    fits = [fit for fit in latency.fits.values() if fit.terms.prompt]
    if not fits:
        return None, words["one_prompt"]
    measured: list[dict[str, Any]] = []
    for fit in fits:
        for r in fit.rows:
            measured.append({"model": fit.model, "c": r.concurrency, "L": str(r.max_tokens),
                             "level": _level_of(r.prompt, fit.prompt_levels), "P": r.prompt,
                             "y": r.tps if metric == "tps" else r.ttft, "kind": "measured"})
    records = summarise(measured, ("model", "c", "L", "level", "kind"), ("P", "y"))
    note = _note(texts, len(measured), records)
    for fit in fits:
        grid = _prompt_grid(fit.prompt_levels)
        for c in sorted({r.concurrency for r in fit.rows}):
            for length in sorted({r.max_tokens for r in fit.rows}):
                for prompt in grid:
                    forecast = fit.forecast(c, length, prompt)
                    value = forecast.tps if metric == "tps" else forecast.ttft_s
                    if value is not None:
                        records.append({"model": fit.model, "c": c, "L": str(length), "P": prompt, "y": value,
                                        "kind": "fitted"})
    levels = sorted({r["c"] for r in records})
    lengths = sorted({r["L"] for r in records}, key=int)
    scale = alt.Scale(scheme="tableau10") if len(levels) <= 10 else alt.Scale(scheme="viridis")
    colour = alt.Color("c:O", title=texts["axis_concurrency"], sort=levels, scale=scale,
                       legend=alt.Legend(columns=min(len(levels), 8), symbolType="stroke"))
    x = alt.X("P:Q", title=words["axis_prompt"], scale=alt.Scale(zero=False))
    y = alt.Y("y:Q", title=words["axis_tps"] if metric == "tps" else words["axis_ttft"])
    line = alt.Chart().mark_line(strokeWidth=1.5, interpolate="linear").encode(
        x=x, y=y, color=colour, detail="c:O", order="P:Q").transform_filter(alt.datum.kind == "fitted")
    dots = alt.Chart().mark_point(filled=True, size=45).encode(x=x, y=y, color=colour).transform_filter(
        alt.datum.kind == "measured")
    layered = alt.layer(line, dots, data=alt.Data(values=records)).properties(width=WIDTH, height=HEIGHT)
    column = alt.Column("L:N", title="max_tokens", sort=lengths)
    if len({fit.model.casefold() for fit in fits}) > 1:  # a row of panels per model
        chart = layered.facet(column=column, row=alt.Row("model:N", title=texts["model"]))
    else:
        chart = layered.facet(column=column)
    return render_svg(chart), note


def latency_charts(latency: Any, texts: dict[str, Any]) -> list[Chart]:
    """The latency section's charts (empty without a latency model)."""
    if latency is None or not latency.available:
        return []
    words = texts["latency"]
    if not any(fit.terms.prompt for fit in latency.fits.values()):
        return [Chart("latency-prompt", words["chart_tps"], None, words["one_prompt"])]
    charts = []
    for key, metric, title in (("latency-tps-prompt", "tps", words["chart_tps"]),
                               ("latency-ttft-prompt", "ttft", words["chart_ttft"])):
        svg, note = latency_against_prompt(latency, metric, texts)
        charts.append(Chart(key, title, svg, " ".join(t for t in (words["chart_note"] if svg else None, note) if t)
                            or None))
    return charts
