"""The report's charts: what each one shows, drawn as inline SVG by `svgchart` (no script, no
network: the SVG is the chart; the legend is HTML beside it).

One encoding across the page, so a reader learns it once: colour (and marker, where one panel
holds a single model) is max_tokens; marker and dash are the model; the latency model's charts
give each concurrency level its own colour and marker. Legends name the factor in each entry
("max_tokens 50", "concurrency 4"), never a bare number.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import median
from typing import Any, Iterable, Sequence

from scm_xl.htmlreport.svgchart import (NEUTRAL, Axis, LegendEntry, LegendGroup, Marker, Panel, Rule, Series,
                                        Style, colours, dash, figure, marker)
from scm_xl.lsq import LsqFit
from scm_xl.model import Analysis
from scm_xl.rules import ROLES

# A grid of concurrency values between measured levels for the fitted curves.
CURVE_POINTS = 24
# Above this many rows a chart shows each cell's median instead of every row: the points
# would overlap anyway, and the page stays small and quick to make.
POINT_LIMIT = 300
ROLE_ORDER = ["check", *(role for role in ROLES if role != "check")]  # the legend: the test rows first
ROLE_STYLES = {"check": Style("#1b7f3b", "circle"), "identify": Style("#2b6cb0", "square"),
               "unidentified": Style("#b7791f", "triangle"), "excluded": Style("#9b2c2c", "cross")}


@dataclass(frozen=True)
class Chart:
    key: str
    title: str
    markup: str | None  # the panels as inline SVG and the legend as HTML; None: nothing to draw (see note)
    note: str | None = None
    panels: int = 1  # a chart of several panels takes the page's whole width


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


def _g(value: float) -> str:
    return f"{value:.4g}"


def _models_in_order(names: Iterable[str]) -> list[str]:
    """Each model once (the first spelling seen), in the order met."""
    seen: dict[str, str] = {}
    for name in names:
        seen.setdefault(name.casefold(), name)
    return list(seen.values())


def _prompt_order(levels: Iterable[int | None], base: int | None) -> list[int | None]:
    """The prompt levels of a chart's data, the base level first, then the others smallest first."""
    present = set(levels)
    return sorted(present, key=lambda level: (level != base, -1 if level is None else level))


def _at_prompt(texts: dict[str, Any], title: str | None, level: int | None, several: bool) -> str | None:
    """A panel's title with its prompt level, where the chart has several: a run at another prompt
    length is another series, drawn in a panel of its own (never merged with the base level's)."""
    if not several or level is None:
        return title
    words = texts["js"]["at_prompt"].format(p=level)
    comma = ", " if texts["html_lang"] == "en" else "，"
    return f"{title}{comma}{words}" if title else words


class Encoding:
    """max_tokens -> colour, model -> marker and dash: the same on every chart of the page."""

    def __init__(self, lengths: Iterable[int], models: Iterable[str]) -> None:
        self.lengths = sorted(set(lengths))
        self.models = _models_in_order(models)
        self._colour = dict(zip(self.lengths, colours(len(self.lengths))))

    def colour(self, length: int) -> str:
        return self._colour[length]

    def marker(self, model: str) -> Marker:
        return marker(self.index(model))

    def dash(self, model: str) -> str:
        return dash(self.index(model))

    def index(self, model: str) -> int:
        return next(i for i, m in enumerate(self.models) if m.casefold() == model.casefold())

    def style(self, model: str, length: int, *, filled: bool = True) -> Style:
        return Style(self.colour(length), self.marker(model), self.dash(model), filled)

    def length_group(self, texts: dict[str, Any], *, with_marker_of: str | None = None) -> LegendGroup:
        """The colours, named "max_tokens N" (keyed with the one model's marker, or as swatches)."""
        return LegendGroup(texts["max_tokens"], [
            LegendEntry(texts["length_label"].format(n=length),
                        Style(self.colour(length), self.marker(with_marker_of) if with_marker_of else "swatch"))
            for length in self.lengths])

    def model_group(self, texts: dict[str, Any], *, line: bool) -> LegendGroup:
        """The models' markers (and dashes, for lines), in a neutral colour."""
        return LegendGroup(texts["model"], [
            LegendEntry(model, Style(NEUTRAL, self.marker(model), self.dash(model)), line=line)
            for model in self.models])


def measured_vs_predicted(analysis: Analysis, texts: dict[str, Any]) -> tuple[str | None, str | None]:
    rows = [{"measured": ch.status.tps, "predicted": ch.predicted_tps, "role": ch.role,
             "model": ch.status.model, "c": ch.status.concurrency, "L": ch.status.max_tokens}
            for ch in analysis.checks if ch.predicted_tps is not None and ch.status.tps > 0]
    if not rows:
        return None, None
    points = summarise(rows, ("model", "c", "L", "role"), ("measured", "predicted"))
    roles = [role for role in ROLE_ORDER if any(p["role"] == role for p in points)]
    series = [Series(ROLE_STYLES[role], [(p["measured"], p["predicted"]) for p in points if p["role"] == role],
                     tips=[_tip(texts, p["model"], p["c"], p["L"], f"{_g(p['measured'])} → {_g(p['predicted'])}")
                           for p in points if p["role"] == role])
              for role in roles]
    legend = [LegendGroup(texts["role"], [LegendEntry(texts["roles"][role], ROLE_STYLES[role]) for role in roles])]
    markup = figure([Panel(None, series, diagonal=True)], Axis(texts["axis_measured"]), Axis(texts["axis_predicted"]),
                    legend)
    return markup, _note(texts, len(rows), points)


def _tip(texts: dict[str, Any], model: str, c: float, length: int | str, value: str) -> str:
    return (f"{model}, {texts['concurrency_label'].format(c=_g(float(c)))}, "
            f"{texts['length_label'].format(n=length)}: {value}")


def _curve_grid(levels: Sequence[int]) -> list[float]:
    low, high = min(levels), max(levels)
    if high <= low:
        return [float(low)]
    grid = {float(level) for level in levels}
    for i in range(CURVE_POINTS + 1):
        grid.add(math.exp(math.log(low) + (math.log(high) - math.log(low)) * i / CURVE_POINTS))
    return sorted(grid)


def _concurrency_axis(texts: dict[str, Any], levels: Iterable[float]) -> Axis:
    """A log2 concurrency axis whose ticks are the measured levels (not 1.5, 3, 3.5 ...)."""
    return Axis(texts["axis_concurrency"], log2=True, ticks=sorted({float(v) for v in levels}))


def tps_against_concurrency(analysis: Analysis, fit: LsqFit,
                            texts: dict[str, Any]) -> tuple[str | None, str | None, int]:
    """One panel per model (and per prompt level, where there are several): measured TPS (hollow:
    excluded) and the least-squares curve per max_tokens."""
    measured = [{"model": s.model, "c": s.concurrency, "L": s.max_tokens, "tps": s.tps, "P": s.prompt_level,
                 "role": "included" if s.included else "excluded"} for s in analysis.statuses if s.tps > 0]
    if not measured:
        return None, None, 0
    records = summarise(measured, ("model", "c", "L", "P", "role"), ("tps",))
    note = _note(texts, len(measured), records)
    base = analysis.base_prompt_level
    prompts = _prompt_order([r["P"] for r in records], base)
    several = len(prompts) > 1
    curves: list[dict[str, Any]] = []
    levels = fit.measured_concurrency_levels()
    if levels:
        grid = _curve_grid(levels)
        for level in fit.calibration.models:
            for prompt in prompts:
                at_base = prompt is None or prompt == base
                # at the base level every max_tokens the fit knows; at another, those measured there
                lengths = [length.max_tokens for length in fit.calibration.length_levels] if at_base else sorted(
                    {r["L"] for r in records if r["P"] == prompt and r["model"].casefold() == level.model.casefold()})
                for length in lengths:
                    points = [(c, fit.forecast(c, length, level.model,
                                               prompt_tokens=None if at_base else prompt).tps) for c in grid]
                    curve = [(c, tps) for c, tps in points if tps is not None]
                    if curve:
                        curves.append({"model": level.model, "L": length, "P": prompt, "points": curve})
    models = _models_in_order([r["model"] for r in records] + [c["model"] for c in curves])
    code = Encoding([r["L"] for r in records] + [c["L"] for c in curves], models)
    panels = []
    for prompt in prompts:
        for model in models:
            mine = [r for r in records if r["model"].casefold() == model.casefold() and r["P"] == prompt]
            if not mine:
                continue
            series = [Series(Style(code.colour(c["L"]), dash=""), c["points"], kind="line")
                      for c in curves if c["model"].casefold() == model.casefold() and c["P"] == prompt]
            for length in code.lengths:
                for role in ("included", "excluded"):
                    cell = [r for r in mine if r["L"] == length and r["role"] == role]
                    if cell:
                        series.append(Series(code.style(model, length, filled=role == "included"),
                                             [(r["c"], r["tps"]) for r in cell],
                                             tips=[_tip(texts, model, r["c"], length, f"{_g(r['tps'])} tok/s")
                                                   for r in cell]))
            panels.append(Panel(_at_prompt(texts, model, prompt, several), series))
    one = models[0] if len(models) == 1 else None
    shape: Marker = code.marker(one) if one else "circle"
    kinds = [LegendEntry(texts["series_measured"], Style(NEUTRAL, shape))]
    if any(r["role"] == "excluded" for r in records):
        kinds.append(LegendEntry(texts["series_excluded"], Style(NEUTRAL, shape, filled=False)))
    if curves:
        kinds.append(LegendEntry(texts["series_fitted"], Style(NEUTRAL, "none"), line=True))
    legend = [code.length_group(texts, with_marker_of=one)]
    if not one:
        legend.append(code.model_group(texts, line=False))
    legend.append(LegendGroup(None, kinds))
    markup = figure(panels, _concurrency_axis(texts, [r["c"] for r in records]), Axis(texts["axis_tps"]), legend)
    return markup, note, len(panels)


def latency_against_concurrency(rows: Sequence[Any], texts: dict[str, Any],
                                base_prompt: int | None = None) -> tuple[str | None, int]:
    """P95 latency and P95 TTFT (a panel each, each its own seconds scale) against concurrency:
    a line per model and max_tokens, coloured by max_tokens, marked and dashed by model. Runs at
    another prompt level than the base (`base_prompt`; a blank level is the base) are panels of
    their own, on the same metric's scale: a cell's median never mixes two prompt lengths."""
    levels = [getattr(row, "prompt_level", None) for row in rows]
    known = [level for level in levels if level is not None]
    base = base_prompt if base_prompt is not None else (min(known) if known else None)
    records = []
    for row, level in zip(rows, levels):
        for field, metric in (("latency_p95_s", "latency"), ("ttft_p95_s", "ttft")):
            value = getattr(row, field, None)
            if value is not None and row.total_output_tokens > 0:
                records.append({"model": row.model, "c": row.concurrency, "L": row.max_tokens,
                                "P": base if level is None else level, "seconds": value, "metric": metric})
    if not records:
        return None, 0
    # The median of each cell's runs: the figure the inverse's latency limit is judged on.
    records = summarise(records, ("model", "c", "L", "P", "metric"), ("seconds",), always=True)
    code = Encoding([r["L"] for r in records], [r["model"] for r in records])
    prompts = _prompt_order([r["P"] for r in records], base)
    panels = []
    for prompt in prompts:
        for metric, title in (("latency", texts["metric_latency"]), ("ttft", texts["metric_ttft"])):
            series = []
            for model in code.models:
                for length in code.lengths:
                    cell = sorted(((r["c"], r["seconds"]) for r in records
                                   if r["metric"] == metric and r["L"] == length and r["P"] == prompt
                                   and r["model"].casefold() == model.casefold()))
                    if cell:
                        style = code.style(model, length)
                        series.append(Series(style, cell, kind="line"))
                        series.append(Series(style, cell, tips=[_tip(texts, model, c, length, f"{_g(s)} s")
                                                                for c, s in cell]))
            if series:
                panels.append(Panel(_at_prompt(texts, title, prompt, len(prompts) > 1), series, y_group=metric))
    legend = [code.length_group(texts), code.model_group(texts, line=True)]
    return figure(panels, _concurrency_axis(texts, [r["c"] for r in records]), Axis(texts["axis_seconds"]), legend,
                  share_y=False), len(panels)


def roofline(analysis: Analysis, texts: dict[str, Any]) -> tuple[str | None, bool, int]:
    """Per-stream TPS against concurrency, with each model's ceiling where the catalog knows it
    (a panel per prompt level, where there are several).

    Returns the markup, whether any ceiling was drawn and the number of panels."""
    rows = [{"model": s.model, "c": s.concurrency, "per_stream": s.tps / s.concurrency, "L": s.max_tokens,
             "P": s.prompt_level} for s in analysis.statuses if s.tps > 0]
    if not rows:
        return None, False, 0
    points = summarise(rows, ("model", "c", "L", "P"), ("per_stream",))
    prompts = _prompt_order([p["P"] for p in points], analysis.base_prompt_level)
    ceilings: dict[str, float] = {}
    for s in analysis.statuses:
        if s.physics.ceiling_tps is not None and not any(m.casefold() == s.model.casefold() for m in ceilings):
            ceilings[s.model] = s.physics.ceiling_tps
    code = Encoding([p["L"] for p in points], [p["model"] for p in points] + list(ceilings))
    by_prompt: dict[int | None, list[Series]] = {}
    for prompt in prompts:
        series = by_prompt.setdefault(prompt, [])
        for model in code.models:
            for length in code.lengths:
                cell = [p for p in points if p["L"] == length and p["P"] == prompt
                        and p["model"].casefold() == model.casefold()]
                if cell:
                    series.append(Series(code.style(model, length), [(p["c"], p["per_stream"]) for p in cell],
                                         tips=[_tip(texts, model, p["c"], length, f"{_g(p['per_stream'])} tok/s")
                                               for p in cell]))
    several = len(code.models) > 1

    def ceiling(model: str, value: float) -> tuple[str, Style]:
        # a dash of its own per model (the lines' solid first pattern skipped: a rule is always dashed)
        return (f"{texts['series_ceiling']} {value:.0f}" + (f" ({model})" if several else ""),
                Style(NEUTRAL, "none", dash(code.index(model) + 1)))

    rules = [Rule(value, *ceiling(model, value)) for model, value in ceilings.items()]
    one = None if several else code.models[0]
    legend = [code.length_group(texts, with_marker_of=one)]
    if several:
        legend.append(code.model_group(texts, line=False))
    if rules:
        legend.append(LegendGroup(None, [LegendEntry(*ceiling(model, value), line=True)
                                         for model, value in ceilings.items()]))
    panels = [Panel(_at_prompt(texts, None, prompt, len(prompts) > 1), series, rules)
              for prompt, series in by_prompt.items()]
    markup = figure(panels, _concurrency_axis(texts, [p["c"] for p in points]), Axis(texts["axis_per_stream"]), legend)
    return markup, bool(ceilings), len(panels)


def all_charts(analysis: Analysis, fit: LsqFit, rows: Sequence[Any], texts: dict[str, Any]) -> list[Chart]:
    aggregated = len(analysis.statuses) > POINT_LIMIT
    markup, note = measured_vs_predicted(analysis, texts)
    charts = [Chart("measured-predicted", texts["chart_measured_predicted"], markup,
                    note if markup else texts["no_predictions"])]
    markup, note, panels = tps_against_concurrency(analysis, fit, texts)
    charts.append(Chart("tps-concurrency", texts["chart_tps_concurrency"], markup,
                        note if markup else texts["no_output"], panels))
    latency, panels = latency_against_concurrency(rows, texts, analysis.base_prompt_level)
    charts.append(Chart("latency", texts["chart_latency"], latency,
                        texts["latency_medians"] if latency else texts["no_latency"], panels))
    markup, has_ceiling, panels = roofline(analysis, texts)
    notes = [text for text in (None if has_ceiling else texts["no_ceiling"],
                               texts["aggregated_short"] if aggregated else None) if text]
    charts.append(Chart("roofline", texts["chart_roofline"], markup, " ".join(notes) or None, max(panels, 1)))
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


def latency_against_prompt(latency: Any, metric: str, texts: dict[str, Any]) -> tuple[str | None, str | None, int]:
    """TPS (`metric` "tps") or mean TTFT ("ttft") against prompt length: one colour and marker per
    concurrency level, one panel per max_tokens (and per model when there are several); the
    measured experiments as points, the latency model's predictions as straight segments between
    prompt lengths. (None, why, 0) when no model was measured at two or more prompt levels."""
    words = texts["latency"]
    fits = [fit for fit in latency.fits.values() if fit.terms.prompt]
    if not fits:
        return None, words["one_prompt"], 0
    measured: list[dict[str, Any]] = []
    for fit in fits:
        for r in fit.rows:
            measured.append({"model": fit.model, "c": r.concurrency, "L": r.max_tokens,
                             "level": _level_of(r.prompt, fit.prompt_levels), "P": r.prompt,
                             "y": r.tps if metric == "tps" else r.ttft})
    records = summarise(measured, ("model", "c", "L", "level"), ("P", "y"))
    note = _note(texts, len(measured), records)
    levels = sorted({r["c"] for r in records})
    palette = dict(zip(levels, colours(len(levels))))
    style = {c: Style(palette[c], marker(i)) for i, c in enumerate(levels)}
    several = len({fit.model.casefold() for fit in fits}) > 1
    panels = []
    for fit in fits:
        grid = _prompt_grid(fit.prompt_levels)
        for length in sorted({r.max_tokens for r in fit.rows}):
            series = []
            for c in sorted({r.concurrency for r in fit.rows}):
                forecasts = [(prompt, fit.forecast(c, length, prompt)) for prompt in grid]
                line = [(p, f.tps if metric == "tps" else f.ttft_s) for p, f in forecasts]
                line = [(p, v) for p, v in line if v is not None]
                if line:
                    series.append(Series(Style(palette[c], "none"), line, kind="line"))
            for c in levels:
                cell = sorted((r["P"], r["y"]) for r in records
                              if r["model"] == fit.model and r["L"] == length and r["c"] == c)
                if cell:
                    unit = "tok/s" if metric == "tps" else "s"
                    series.append(Series(style[c], cell, tips=[
                        f"{_tip(texts, fit.model, c, length, f'{_g(y)} {unit}')} @ {_g(p)} tok" for p, y in cell]))
            title = texts["length_label"].format(n=length)
            panels.append(Panel(f"{fit.model}, {title}" if several else title, series))
    legend = [LegendGroup(texts["concurrency"], [LegendEntry(texts["concurrency_label"].format(c=_g(float(c))),
                                                             style[c], line=True) for c in levels]),
              LegendGroup(None, [LegendEntry(texts["series_measured"], Style(NEUTRAL, "circle")),
                                 LegendEntry(words["series_model"], Style(NEUTRAL, "none"), line=True)])]
    y_title = texts["axis_tps"] if metric == "tps" else words["axis_ttft"]
    markup = figure(panels, Axis(words["axis_prompt"], zero=False), Axis(y_title), legend)
    return markup, note, len(panels)


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
        markup, note, panels = latency_against_prompt(latency, metric, texts)
        charts.append(Chart(key, title, markup,
                            " ".join(t for t in (words["chart_note"] if markup else None, note) if t) or None, panels))
    return charts
