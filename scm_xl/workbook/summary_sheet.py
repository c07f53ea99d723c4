"""The summary sheet the workbook opens on, and the charts a person reads.

Every figure here is a reference to the cell that computes it elsewhere (a defined
name or a calibration-table cell), so the summary holds no arithmetic of its own; its
expected values are those of the cells it points at.

Charts are drawn from the hidden chart-data sheet. Their series are sized to the data
the workbook was filled with (one block of points per model and max_tokens, no empty
slots), so no chart shows a phantom series and no cell behind one holds an error. The
points' values stay live formulas: edit a row and the points move; a new level typed
in later appears after the next `scm-xl fill --workbook`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

from openpyxl import Workbook
from openpyxl.chart import Reference, ScatterChart, Series
from openpyxl.chart.legend import Legend
from openpyxl.chart.marker import Marker
from openpyxl.chart.shapes import GraphicalProperties
from openpyxl.formatting.rule import CellIsRule
from openpyxl.styles import Font, PatternFill
from openpyxl.worksheet.worksheet import Worksheet

from scm_xl.engines.base import CellError, CellValue
from scm_xl.model import RowCheck, RowLike
from scm_xl.workbook.layout import CONCURRENCY_TABLE, LENGTH_TABLE, MODEL_TABLE, Column, Layout
from scm_xl.workbook.styles import (
    BIG_FONT, BOLD, FORMULA_FILL, HEADER_FILL, HEADER_FONT, KEY_FILL, NOTE_FONT, TITLE_FONT, VERDICT_COLOURS,
)

if TYPE_CHECKING:
    from openpyxl.chart.series import Series as XlSeries  # the class; openpyxl.chart.Series is its factory

    from scm_xl.workbook.formulas import Formulas

Expected = dict[tuple[str, str], CellValue]
NA = CellError("#N/A")

TEXTS = {
    "zh": {
        "title": "SCM 标定总览：TPS = BaseTPS × f(并发) × K_len(max_tokens) × K_in(提示长度) ÷ C_model(模型)",
        "answer": "结论",
        "verdict": "判定（只看 check 行）",
        "check_rows": "检验行数 (check)",
        "mape": "平均偏差率 MAPE %",
        "max_deviation": "最大偏差率 %",
        "identify_rows": "标定行数 (identify)",
        "unidentified_rows": "无法预测行数 (unidentified)",
        "excluded_rows": "剔除行数 (excluded)",
        "unusable_rows": "无法使用的行（见原始数据表“状态说明”列）",
        "physics_rows": "有物理警告的行",
        "loo_mape": "留一法（最小二乘）MAPE %",
        "loo_verdict": "留一法判定",
        "base_tps": "BaseTPS",
        "method": "推导所用方法",
        "knee": "拐点：吞吐在此并发附近不再增长（延迟模型）",
        "forward": "正向：给定配置 → TPS",
        "concurrency": "并发数",
        "max_tokens": "max_tokens",
        "model": "模型",
        "prompt_tokens": "提示长度 Token（空 = 基准档位）",
        "forward_tps": "预测 TPS",
        "inverse": "反向：目标 TPS → 推荐并发",
        "target_tps": "目标 TPS",
        "max_latency": "P95 延迟上限 (s)",
        "recommended": "推荐并发",
        "recommended_tps": "该并发下预测 TPS",
        "best_tps": "可达最高 TPS",
        "coefficients": "系数一览",
        "chart_tps": "TPS 与并发（每个模型 × max_tokens 一条曲线，基准提示长度档位纳入行的几何均值）",
        "chart_fit": "实测 TPS 与预测 TPS（按角色；对角线 y = x）",
        "chart_latency": "P95 延迟与首字延迟 P95（秒）与并发",
        "chart_note": "图表的点随数据变化；新增的档位在下次 scm-xl fill --workbook 后出现在图中。",
        "no_charts": "还没有数据：用 scm-xl fill 填入结果后生成图表。",
        "na": "n/a",
    },
    "en": {
        "title": "SCM calibration at a glance: TPS = BaseTPS × f(concurrency) × K_len(max_tokens) × K_in(prompt) ÷ "
                 "C_model(model)",
        "answer": "The answer",
        "verdict": "verdict (check rows only)",
        "check_rows": "check rows",
        "mape": "MAPE %",
        "max_deviation": "max |deviation| %",
        "identify_rows": "identify rows",
        "unidentified_rows": "unidentified rows",
        "excluded_rows": "excluded rows",
        "unusable_rows": "unusable rows (see the status column on RawData)",
        "physics_rows": "rows with physics warnings",
        "loo_mape": "hold-out (least squares, leave-one-out) MAPE %",
        "loo_verdict": "hold-out verdict",
        "base_tps": "BaseTPS",
        "method": "method of the answers",
        "knee": "knee: throughput stops growing near concurrency (latency model)",
        "forward": "Forward: configuration → TPS",
        "concurrency": "concurrency",
        "max_tokens": "max_tokens",
        "model": "model",
        "prompt_tokens": "prompt tokens (blank = the base level)",
        "forward_tps": "predicted TPS",
        "inverse": "Inverse: target TPS → recommended concurrency",
        "target_tps": "target TPS",
        "max_latency": "P95 latency limit (s)",
        "recommended": "recommended concurrency",
        "recommended_tps": "predicted TPS there",
        "best_tps": "best reachable TPS",
        "coefficients": "Coefficients at a glance",
        "chart_tps": "TPS against concurrency (one line per model × max_tokens; geometric mean of included rows at the "
                     "base prompt level)",
        "chart_fit": "Measured against predicted TPS, by role (the diagonal is y = x)",
        "chart_latency": "P95 latency and P95 time to first token (s) against concurrency",
        "chart_note": "The points follow the data; a level typed in later joins the charts after scm-xl fill --workbook.",
        "no_charts": "No data yet: fill the workbook with scm-xl fill to draw the charts.",
        "na": "n/a",
    },
}


@dataclass(frozen=True)
class Figure:
    """One summary row: a label and a formula pointing at the cell that computes it."""

    key: str
    source: str  # a defined name, or "" when `formula` builds the reference
    na_when_blank: bool = False
    number_format: str | None = None


FIGURES: tuple[Figure, ...] = (
    Figure("verdict", "Verdict"),
    Figure("check_rows", "CheckRows"),
    Figure("mape", "MAPE", na_when_blank=True, number_format="0.00"),
    Figure("max_deviation", "MaxDeviation", na_when_blank=True, number_format="0.00"),
    Figure("identify_rows", "IdentifyRows"),
    Figure("unidentified_rows", "UnidentifiedRows"),
    Figure("excluded_rows", "ExcludedRows"),
    Figure("unusable_rows", ""),
    Figure("physics_rows", ""),
    Figure("loo_mape", "LOO_MAPE", na_when_blank=True, number_format="0.00"),
    Figure("loo_verdict", "LOO_Verdict"),
    Figure("base_tps", "BaseTPS", na_when_blank=True, number_format="0.00"),
    Figure("method", "Method"),
    Figure("knee", "LatencyKnee", na_when_blank=True),
)
FIRST_FIGURE_ROW = 4
ROWS = {figure.key: FIRST_FIGURE_ROW + i for i, figure in enumerate(FIGURES)}
FORWARD_FIRST = ROWS["knee"] + 2  # "Forward" heading row
FORWARD = {"concurrency": ("ForwardConcurrency", None), "max_tokens": ("ForwardMaxTokens", None),
           "model": ("", None), "prompt_tokens": ("ForwardPromptTokens", None), "forward_tps": ("ForwardTPS", "0.00")}
INVERSE = {"target_tps": ("TargetTPS", None), "max_tokens": ("TargetMaxTokens", None), "model": ("", None),
           "max_latency": ("MaxLatencyP95", None), "prompt_tokens": ("TargetPromptTokens", None),
           "recommended": ("RecommendedConcurrency", None),
           "recommended_tps": ("RecommendedTPS", "0.00"), "best_tps": ("BestTPS", "0.00")}
FORWARD_ROWS = {key: FORWARD_FIRST + 1 + i for i, key in enumerate(FORWARD)}
INVERSE_FIRST = FORWARD_FIRST + len(FORWARD) + 2
INVERSE_ROWS = {key: INVERSE_FIRST + 1 + i for i, key in enumerate(INVERSE)}
COEF_FIRST = INVERSE_FIRST + len(INVERSE) + 2  # heading; the tables' headers one row below
COEF_TABLES: tuple[tuple[str, tuple[Column, ...], str, str], ...] = (
    # (name, calibration table, level column, value column)
    ("f(c)", CONCURRENCY_TABLE, "level", "f"),
    ("K_len", LENGTH_TABLE, "level", "k"),
    ("C_model", MODEL_TABLE, "name", "c"),
)
CHART_ANCHOR_COL = "H"
CHARTS_LAST_ROW = 64  # the third chart, anchored at row 44, ends about here


def colour_verdict(ws: Worksheet, address: str) -> None:
    """Colour a verdict cell by its value (conditional formatting, so it follows edits)."""
    for verdict, (fill, font) in VERDICT_COLOURS.items():
        ws.conditional_formatting.add(address, CellIsRule(
            operator="equal", formula=[f'"{verdict}"'], fill=PatternFill("solid", fgColor=fill),
            font=Font(bold=True, color=font)))


def _coef_slots(layout: Layout, table: tuple[Column, ...]) -> tuple[int, int]:
    """(first row on the calibration sheet, slots) of a coefficient table."""
    if table is CONCURRENCY_TABLE:
        return layout.c_table_first, layout.c_slots
    if table is LENGTH_TABLE:
        return layout.l_table_first, layout.l_slots
    return layout.m_table_first, layout.m_slots


def _coef_cells(layout: Layout) -> list[tuple[str, str, str]]:
    """(summary address, calibration address, number format) of every coefficient-glance cell."""
    out = []
    for i, (_, table, level_key, value_key) in enumerate(COEF_TABLES):
        first, slots = _coef_slots(layout, table)
        level_col = chr(ord("A") + 2 * i)
        value_col = chr(ord("A") + 2 * i + 1)
        for slot in range(slots):
            row = COEF_FIRST + 2 + slot
            out.append((f"{level_col}{row}", f"${layout.table_col(table, level_key)}${first + slot}", ""))
            out.append((f"{value_col}{row}", f"${layout.table_col(table, value_key)}${first + slot}", "0.000"))
    return out


def formulas(layout: Layout, fx: Formulas) -> dict[str, tuple[str, str | None]]:
    """address -> (formula, number format) of every formula cell on the summary sheet."""
    t = TEXTS[layout.lang]
    na = '"' + t["na"] + '"'
    out: dict[str, tuple[str, str | None]] = {}
    calc = layout.raw_range
    sources = {
        "unusable_rows": f"COUNTIFS({calc('has_input')},1,{calc('present')},0)",
        "physics_rows": f"COUNTIF({calc('physics')},\">0\")",
    }
    for figure in FIGURES:
        ref = layout.name_ref(figure.source) if figure.source in layout.defined_names() else figure.source
        ref = ref or sources[figure.key]
        text = f"=IF(ISNUMBER({ref}),{ref},{na})" if figure.na_when_blank else f"={ref}"
        out[f"B{ROWS[figure.key]}"] = (text, figure.number_format)
    for block, rows in ((FORWARD, FORWARD_ROWS), (INVERSE, INVERSE_ROWS)):
        for key, (name, number_format) in block.items():
            if key == "model":
                source_row = layout.forward_rows["model"] if block is FORWARD else layout.inverse_rows["model"]
                ref = f"{layout.qtitle('derivation')}!$D${source_row}"
            else:
                ref = layout.name_ref(name)
            out[f"B{rows[key]}"] = (f"=IF({ref}&\"\"=\"\",\"\",{ref})", number_format)
    for address, source, number_format in _coef_cells(layout):
        ref = f"{layout.qtitle('calibration')}!{source}"
        out[address] = (f"=IF({ref}&\"\"=\"\",\"\",{ref})", number_format or None)
    return out


def write_sheet(ws: Worksheet, layout: Layout, fx: Formulas) -> None:
    t = TEXTS[layout.lang]
    ws["A1"] = t["title"]
    ws["A1"].font = TITLE_FONT
    ws["A3"] = t["answer"]
    ws["A3"].font = BOLD
    for figure in FIGURES:
        ws[f"A{ROWS[figure.key]}"] = t[figure.key]
    ws[f"A{FORWARD_FIRST}"] = t["forward"]
    ws[f"A{FORWARD_FIRST}"].font = BOLD
    for key, row in FORWARD_ROWS.items():
        ws[f"A{row}"] = t[key]
    ws[f"A{INVERSE_FIRST}"] = t["inverse"]
    ws[f"A{INVERSE_FIRST}"].font = BOLD
    for key, row in INVERSE_ROWS.items():
        ws[f"A{row}"] = t[key]
    ws[f"A{COEF_FIRST}"] = t["coefficients"]
    ws[f"A{COEF_FIRST}"].font = BOLD
    for i, (name, _, _, _) in enumerate(COEF_TABLES):
        level_col, value_col = chr(ord("A") + 2 * i), chr(ord("A") + 2 * i + 1)
        for col, text in ((level_col, "level" if name != "C_model" else "model"), (value_col, name)):
            cell = ws[f"{col}{COEF_FIRST + 1}"]
            cell.value = text
            cell.font = HEADER_FONT
            cell.fill = HEADER_FILL
    glance = {address for address, _, _ in _coef_cells(layout)}
    for address, (text, number_format) in formulas(layout, fx).items():
        ws[address] = text
        if address not in glance:  # empty coefficient slots stay white, not a grey block
            ws[address].fill = FORMULA_FILL
        if number_format:
            ws[address].number_format = number_format
    for key in ("verdict", "check_rows", "mape", "max_deviation"):
        ws[f"B{ROWS[key]}"].fill = KEY_FILL
    for key in ("forward_tps", "recommended", "recommended_tps"):
        row = FORWARD_ROWS.get(key) or INVERSE_ROWS[key]
        ws[f"B{row}"].fill = KEY_FILL
    ws[f"B{ROWS['verdict']}"].font = BIG_FONT
    colour_verdict(ws, f"B{ROWS['verdict']}")
    colour_verdict(ws, f"B{ROWS['loo_verdict']}")
    ws.column_dimensions["A"].width = 44
    ws.column_dimensions["B"].width = 16
    for col in "CDEF":
        ws.column_dimensions[col].width = 14
    ws[f"{CHART_ANCHOR_COL}3"] = t["no_charts"]
    ws[f"{CHART_ANCHOR_COL}3"].font = NOTE_FONT
    last = COEF_FIRST + 1 + max(layout.c_slots, layout.l_slots, layout.m_slots)
    ws.print_area = f"A1:V{max(last, CHARTS_LAST_ROW)}"


def expected_sheet(layout: Layout, exp: Mapping[tuple[str, str], CellValue],
                   defined: Mapping[str, tuple[str, str]], extra: Mapping[str, CellValue]) -> Expected:
    """The summary's expected values: those of the cells it points at.

    defined: defined name -> (sheet title, "A1"); extra: the two counts computed here
    ("unusable_rows", "physics_rows")."""
    t = TEXTS[layout.lang]
    title = layout.title("summary")
    out: Expected = {}

    def value_of(name: str) -> CellValue:
        return exp.get(defined[name]) if name in defined else None

    def blank_to_empty(value: CellValue) -> CellValue:
        return None if value is None or value == "" else value

    for figure in FIGURES:
        value = extra[figure.key] if not figure.source else value_of(figure.source)
        if figure.na_when_blank and not (isinstance(value, float) and not isinstance(value, bool)):
            value = t["na"]
        out[(title, f"B{ROWS[figure.key]}")] = value
    derivation = layout.title("derivation")
    for block, rows in ((FORWARD, FORWARD_ROWS), (INVERSE, INVERSE_ROWS)):
        for key, (name, _) in block.items():
            if key == "model":
                source_row = layout.forward_rows["model"] if block is FORWARD else layout.inverse_rows["model"]
                value = exp.get((derivation, f"D{source_row}"))
            elif name in defined and defined[name] in exp:
                value = value_of(name)
            else:  # a typed input cell
                value = extra.get(name)
            out[(title, f"B{rows[key]}")] = blank_to_empty(value)
    calibration = layout.title("calibration")
    for address, source, _ in _coef_cells(layout):
        out[(title, address)] = blank_to_empty(exp.get((calibration, source.replace("$", ""))))
    return out


# ---------------------------------------------------------------------------
# Charts and the chart-data sheet
# ---------------------------------------------------------------------------

CELL_HEADERS = ("model", "max_tokens", "concurrency", "TPS", "latency_p95_s", "ttft_p95_s")
FIT_HEADERS = ("role", "position", "exp_id", "measured TPS", "predicted TPS")
FIT_COL = 8  # H: the measured-vs-predicted table starts here
ROLE_COLOURS = {"check": "2E75B6", "identify": "A5A5A5"}


@dataclass(frozen=True)
class ChartPoints:
    """What the charts draw, fixed when the workbook is filled."""

    cells: tuple[tuple[str, int, int], ...]  # (model, max_tokens, concurrency), grouped and sorted
    fit: tuple[tuple[str, int], ...]  # (role, position on the raw-data sheet), grouped by role
    latency: frozenset[tuple[str, int, int]]  # the cells whose included rows measured P95 latency and TTFT


def chart_points(rows: Sequence[RowLike], checks: Sequence[RowCheck],
                 base_prompt_level: int | None = None) -> ChartPoints:
    """The points of the charts: each included (model, max_tokens, concurrency) at the base prompt
    level and each check or identify row with a prediction. rows and checks are the reference's, in
    sheet order (positions are 1-based within the rows given)."""
    from scm_xl.model import at_base_prompt

    cells: dict[tuple[str, int, int], bool] = {}
    fit: list[tuple[str, int]] = []
    for position, (row, check) in enumerate(zip(rows, checks), start=1):
        status = check.status
        if status.included and at_base_prompt(status, base_prompt_level):
            key = (row.model, row.max_tokens, row.concurrency)
            measured = all(getattr(row, name, None) is not None for name in ("latency_p95_s", "ttft_p95_s"))
            cells[key] = cells.get(key, True) and measured
        if check.role in ROLE_COLOURS and check.predicted_tps is not None:
            fit.append((check.role, position))
    ordered = tuple(sorted(cells, key=lambda c: (c[0].casefold(), c[1], c[2])))
    fit.sort(key=lambda item: (list(ROLE_COLOURS).index(item[0]), item[1]))
    return ChartPoints(cells=ordered, fit=tuple(fit), latency=frozenset(k for k, v in cells.items() if v))


def _cell_formulas(layout: Layout, row: int) -> dict[str, str]:
    calc = layout.raw_range
    crit = (f"{calc('model')},$A{row},{calc('max_tokens')},$B{row},{calc('concurrency')},$C{row},"
            f"{calc('p0_included')},1")
    return {
        "D": f"=IFERROR(EXP(AVERAGEIFS({calc('ln_tps')},{crit})),NA())",
        "E": f"=IFERROR(AVERAGEIFS({calc('latency_p95_s')},{crit}),NA())",
        "F": f"=IFERROR(AVERAGEIFS({calc('ttft_p95_s')},{crit}),NA())",
    }


def _fit_formulas(layout: Layout, row: int) -> dict[str, str]:
    measured = layout.cons_range("measured", sheet=True)
    predicted = layout.cons_range("predicted", sheet=True)
    exp_id = layout.cons_range("exp_id", sheet=True)
    at = f"$I{row}"
    return {
        "J": f"=INDEX({exp_id},{at})",
        "K": f"=IF(ISNUMBER(INDEX({measured},{at})),INDEX({measured},{at}),NA())",
        "L": f"=IF(ISNUMBER(INDEX({predicted},{at})),INDEX({predicted},{at}),NA())",
    }


def add_charts(wb: Workbook, layout: Layout, points: ChartPoints) -> None:
    """Write the chart-data sheet's tables and draw the charts on the summary sheet."""
    data = wb[layout.title("chart_data")]
    summary = cast(Worksheet, wb[layout.title("summary")])  # a worksheet, never a chartsheet: build.py makes it
    t = TEXTS[layout.lang]
    for i, name in enumerate(CELL_HEADERS):
        data.cell(row=1, column=1 + i, value=name)
    for i, name in enumerate(FIT_HEADERS):
        data.cell(row=1, column=FIT_COL + i, value=name)
    for i, (model, length, concurrency) in enumerate(points.cells):
        row = 2 + i
        data[f"A{row}"] = model
        data[f"A{row}"].data_type = "s"
        data[f"B{row}"] = length
        data[f"C{row}"] = concurrency
        for col, text in _cell_formulas(layout, row).items():
            if col == "D" or (model, length, concurrency) in points.latency:
                data[f"{col}{row}"] = text
    for i, (role, position) in enumerate(points.fit):
        row = 2 + i
        data[f"H{row}"] = role
        data[f"I{row}"] = position
        for col, text in _fit_formulas(layout, row).items():
            data[f"{col}{row}"] = text
    if not points.cells:
        return
    summary[f"{CHART_ANCHOR_COL}3"] = t["chart_note"]
    groups = _groups(points.cells)
    summary.add_chart(_tps_chart(data, groups, t["chart_tps"]), f"{CHART_ANCHOR_COL}4")
    if points.fit:
        summary.add_chart(_fit_chart(data, points, t["chart_fit"]), f"{CHART_ANCHOR_COL}24")
    if points.latency:
        measured = [(model, length, first, last) for model, length, first, last in groups
                    if all(points.cells[r - 2] in points.latency for r in range(first, last + 1))]
        if measured:
            summary.add_chart(_latency_chart(data, measured, t["chart_latency"]), f"{CHART_ANCHOR_COL}44")


def _groups(cells: Sequence[tuple[str, int, int]]) -> list[tuple[str, int, int, int]]:
    """(model, max_tokens, first data row, last data row) of each block of points."""
    out: list[tuple[str, int, int, int]] = []
    for i, (model, length, _) in enumerate(cells):
        row = 2 + i
        if out and out[-1][0] == model and out[-1][1] == length:
            out[-1] = (model, length, out[-1][2], row)
        else:
            out.append((model, length, row, row))
    return out


def _scatter(title: str, x_title: str, y_title: str) -> ScatterChart:
    """A scatter chart as ECMA-376 requires one: with its scatterStyle, which openpyxl leaves out
    unless set and without which Excel repairs the file. "lineMarker" is Excel's own for points
    joined by lines; whether a series draws its line is the series' business (`_series`)."""
    chart = ScatterChart()
    chart.scatterStyle = "lineMarker"
    chart.title = title
    chart.style = 2
    chart.x_axis.title = x_title
    chart.y_axis.title = y_title
    chart.height = 9.5
    chart.width = 17
    chart.x_axis.delete = False
    chart.y_axis.delete = False
    cast(Legend, chart.legend).position = "r"  # a new chart has a legend; the stubs allow None
    return chart


def _series(ws: Worksheet, x_col: int, y_col: int, first: int, last: int, title: str,
            line: bool = True, colour: str | None = None) -> XlSeries:
    x = Reference(ws, min_col=x_col, min_row=first, max_row=last)
    y = Reference(ws, min_col=y_col, min_row=first, max_row=last)
    series = Series(y, x, title=title)
    # <c:smooth val="0"/>: straight segments between the measured points. Without it LibreOffice
    # draws the series smoothed, bending the line where nothing was measured.
    series.smooth = False
    series.marker = Marker(symbol="circle", size=7)
    if colour:  # points drawn in a fixed colour (LibreOffice hides an unfilled marker of a line-less series)
        series.marker.graphicalProperties = GraphicalProperties(solidFill=colour)
        series.marker.graphicalProperties.line.solidFill = colour
    if not line:
        series.graphicalProperties.line.noFill = True
    return series


def _tps_chart(data: Worksheet, groups: list[tuple[str, int, int, int]], title: str) -> ScatterChart:
    chart = _scatter(title, "concurrency", "TPS")
    for model, length, first, last in groups:
        chart.series.append(_series(data, 3, 4, first, last, f"{model} · {length}"))
    return chart


def _latency_chart(data: Worksheet, groups: list[tuple[str, int, int, int]], title: str) -> ScatterChart:
    chart = _scatter(title, "concurrency", "s")
    for model, length, first, last in groups:
        chart.series.append(_series(data, 3, 5, first, last, f"P95 {model} · {length}"))
        chart.series.append(_series(data, 3, 6, first, last, f"TTFT P95 {model} · {length}"))
    return chart


def _fit_chart(data: Worksheet, points: ChartPoints, title: str) -> ScatterChart:
    chart = _scatter(title, "measured TPS", "predicted TPS")
    start = 2
    for role in ROLE_COLOURS:
        count = sum(1 for r, _ in points.fit if r == role)
        if count:
            chart.series.append(_series(data, 11, 12, start, start + count - 1, role, line=False,
                                        colour=ROLE_COLOURS[role]))
        start += count
    # y = x through the measured range: two points on the data sheet (N, O).
    last = 1 + len(points.fit)
    data["N1"], data["O1"] = "y = x", "y = x"
    data["N2"] = f"=MIN($K$2:$K${last},$L$2:$L${last})"
    data["N3"] = f"=MAX($K$2:$K${last},$L$2:$L${last})"
    data["O2"], data["O3"] = "=$N$2", "=$N$3"
    chart.series.append(_series(data, 14, 15, 2, 3, "y = x"))
    return chart


def expected_chart_data(layout: Layout, keys: Sequence[tuple[object, object, object, bool]],
                        fit: Sequence[tuple[object, object]], included: Sequence[tuple[object, ...]],
                        consistency: Mapping[int, tuple[CellValue, CellValue, CellValue]]) -> Expected:
    """The chart-data sheet's expected values, from the keys and positions found on it.

    included: (model, max_tokens, concurrency, tps, latency_p95, ttft_p95) of each included row;
    consistency: position -> (exp_id, measured, predicted) as the consistency sheet shows them."""
    title = layout.title("chart_data")
    out: Expected = {}
    for i, (model, length, concurrency, with_latency) in enumerate(keys):
        row = 2 + i
        members = [r for r in included if _same_key(r, model, length, concurrency)]
        tps = [r[3] for r in members if isinstance(r[3], float) and r[3] > 0]
        out[(title, f"D{row}")] = math.exp(sum(math.log(v) for v in tps) / len(tps)) if tps and len(tps) == len(
            members) else NA
        for col, index in (("E", 4), ("F", 5)) if with_latency else ():
            values = [v for v in (r[index] for r in members) if isinstance(v, float)]
            out[(title, f"{col}{row}")] = sum(values) / len(values) if values else NA
    measured_values: list[float] = []
    for i, (_, position) in enumerate(fit):
        row = 2 + i
        exp_id, measured, predicted = consistency.get(int(position), (None, None, None)) \
            if isinstance(position, (int, float)) else (None, None, None)
        out[(title, f"J{row}")] = exp_id
        out[(title, f"K{row}")] = measured if isinstance(measured, float) else NA
        out[(title, f"L{row}")] = predicted if isinstance(predicted, float) else NA
        measured_values += [v for v in (measured, predicted) if isinstance(v, float)]
    if fit:
        low = min(measured_values) if len(measured_values) == 2 * len(fit) else NA
        high = max(measured_values) if len(measured_values) == 2 * len(fit) else NA
        out[(title, "N2")], out[(title, "N3")] = low, high
        out[(title, "O2")], out[(title, "O3")] = low, high
    return out


def _same_key(row: tuple[object, ...], model: object, length: object, concurrency: object) -> bool:
    return (str(row[0]).casefold() == str(model).casefold() and row[1] == length and row[2] == concurrency)


__all__ = ["ChartPoints", "FIGURES", "add_charts", "chart_points", "colour_verdict", "expected_chart_data",
           "expected_sheet", "formulas", "write_sheet"]
