"""The charts a person reads on the summary sheet, and the hidden chart-data sheet behind them.

The charts follow the person. Every series reads a fixed-size range of formulas on the chart-data
sheet, and a cell of that range holds #N/A where there is no point (charts skip #N/A):

- measured against predicted TPS: one series per role (check, identify) over every row the
  consistency sheet has, so a row typed in, deleted or sorted moves its point at the next
  recalculation, with no `fill`; the empty template has this chart too and fills as rows are typed;
- TPS, P95 latency and P95 TTFT against concurrency (three charts): one series per (model, max_tokens) the data
  held when the workbook was filled (a series for every slot would put empty names in the legend),
  each over every concurrency slot of the calibration sheet, so a concurrency level typed in later
  joins its line at once. A model or max_tokens typed in later joins the charts at the next
  `scm-xl fill --workbook` (the sheet says so).

The formula text and the reference value of each chart-data cell are side by side here; `verify`
compares them like every other sheet's.
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
from openpyxl.worksheet.worksheet import Worksheet

from scm_xl.engines.base import CellError, CellValue
from scm_xl.model import RowLike, RowStatus
from scm_xl.workbook.formulas import ANY_NUMBER
from scm_xl.workbook.layout import CONCURRENCY_TABLE, Layout

if TYPE_CHECKING:
    from scm_xl.workbook.stamp import PendingFills
    from openpyxl.chart.series import Series as XlSeries  # the class; openpyxl.chart.Series is its factory

Expected = dict[tuple[str, str], CellValue]
NA = CellError("#N/A")

FIRST_ROW = 2  # row 1 holds the headers
# The TPS table: a block of c_slots rows per (model, max_tokens); the model and max_tokens are values
# (read back by scm_xl.workbook.io), the rest formulas.
CELL_COLUMNS = {"model": "A", "max_tokens": "B", "concurrency": "C", "tps": "D", "latency": "E", "ttft": "F"}
# The measured-vs-predicted table: one row per consistency-sheet row, measured and predicted of each role.
FIT_COLUMNS = {("check", "measured"): "H", ("check", "predicted"): "I",
               ("identify", "measured"): "J", ("identify", "predicted"): "K"}
DIAGONAL = ("N", "O")  # y = x: two points, rows 2 and 3, through the smallest and largest plotted value
ROLE_COLOURS = {"check": "2E75B6", "identify": "A5A5A5"}
HEADERS = {"A": "model", "B": "max_tokens", "C": "concurrency", "D": "TPS (tok/s)", "E": "P95 latency (s)",
           "F": "P95 TTFT (s)", "H": "check: measured TPS", "I": "check: predicted TPS",
           "J": "identify: measured TPS", "K": "identify: predicted TPS", "N": "y = x", "O": "y = x"}
CHART_TEXTS = {
    "zh": {"tps": "TPS 与并发（每个模型 × max_tokens 一条曲线，基准提示长度档位纳入行的几何均值）",
           "fit": "实测 TPS 与预测 TPS（按角色；对角线 y = x）",
           "latency": "P95 延迟（秒）与并发", "ttft": "首字延迟 P95（秒）与并发",
           "note": "图表随数据实时更新；新的模型或 max_tokens 在下次 scm-xl fill --workbook 后成为新曲线。",
           "concurrency": "并发数", "tps_axis": "TPS（tok/s）", "seconds": "秒", "measured": "实测 TPS（tok/s）",
           "predicted": "预测 TPS（tok/s）", "max_tokens": "max_tokens", "check": "检验行", "identify": "标定行"},
    "en": {"tps": "TPS against concurrency (one line per model × max_tokens; geometric mean of included rows at "
                  "the base prompt level)",
           "fit": "Measured against predicted TPS, by role (the diagonal is y = x)",
           "latency": "P95 latency (s) against concurrency",
           "ttft": "P95 time to first token (s) against concurrency",
           "note": "The charts follow the data as it changes; a new model or max_tokens becomes a line of its "
                   "own at the next scm-xl fill --workbook.",
           "concurrency": "concurrency", "tps_axis": "TPS (tok/s)", "seconds": "s", "measured": "measured TPS (tok/s)",
           "predicted": "predicted TPS (tok/s)", "max_tokens": "max_tokens", "check": "check rows",
           "identify": "identify rows"},
}


@dataclass(frozen=True)
class ChartPoints:
    """The lines of the TPS and latency charts, fixed when the workbook is filled."""

    groups: tuple[tuple[str, int], ...]  # (model, max_tokens), sorted
    latency: frozenset[tuple[str, int]]  # the groups whose included rows all measured P95 latency and TTFT


def chart_points(rows: Sequence[RowLike], statuses: Sequence[RowStatus],
                 base_prompt_level: int | None = None) -> ChartPoints:
    """The (model, max_tokens) of the included rows at the base prompt level, as the reference
    sees them (rows and statuses in sheet order)."""
    from scm_xl.model import at_base_prompt

    groups: dict[tuple[str, int], bool] = {}
    for row, status in zip(rows, statuses):
        if status.included and at_base_prompt(status, base_prompt_level):
            key = _group_key(groups, row.model, row.max_tokens)
            measured = all(getattr(row, name, None) is not None for name in ("latency_p95_s", "ttft_p95_s"))
            groups[key] = groups.get(key, True) and measured
    ordered = tuple(sorted(groups, key=lambda g: (g[0].casefold(), g[1])))
    return ChartPoints(groups=ordered, latency=frozenset(g for g, ok in groups.items() if ok))


def _group_key(groups: Mapping[tuple[str, int], bool], model: str, length: int) -> tuple[str, int]:
    """Models compare case-blind, as the sheets' AVERAGEIFS do: the first spelling names the line."""
    for known, known_length in groups:
        if known_length == length and known.casefold() == model.casefold():
            return known, known_length
    return model, length


def block_row(layout: Layout, group: int, slot: int) -> int:
    """The chart-data row of concurrency slot `slot` (0-based) of line `group` (0-based)."""
    return FIRST_ROW + group * layout.c_slots + slot


def fit_last_row(layout: Layout) -> int:
    return FIRST_ROW + layout.rows - 1


def _level_cell(layout: Layout, slot: int) -> str:
    """The calibration sheet's concurrency level of slot `slot` (0-based), with its sheet."""
    return f"{layout.qtitle('calibration')}!${layout.table_col(CONCURRENCY_TABLE, 'level')}$" \
           f"{layout.c_table_first + slot}"


def _cons_cell(layout: Layout, key: str, position: int) -> str:
    """The consistency sheet's cell of row `position` (its row relative, so the fit table's
    columns are shared formulas)."""
    return f"{layout.qtitle('consistency')}!${layout.cons_col(key)}{layout.cons_first + position}"


def cell_formulas(layout: Layout, row: int, slot: int) -> dict[str, str]:
    """The formulas of one TPS-table row: concurrency slot `slot`'s level, and the geometric mean
    TPS, mean P95 latency and mean P95 TTFT of the included base-prompt rows of this line there."""
    calc = layout.raw_range
    col = CELL_COLUMNS
    level = _level_cell(layout, slot)
    # the model (a text) last: IronCalc stops at a row's first failing criterion, and a text costs twice a number
    crit = (f"{calc('concurrency')},${col['concurrency']}{row},{calc('max_tokens')},${col['max_tokens']}{row},"
            f"{calc('p0_included')},1,{calc('model')},${col['model']}{row}")
    # a slot without a level is #N/A at once: its averages would scan every row to find none
    known = f"ISNUMBER(${col['concurrency']}{row})"
    return {
        col["concurrency"]: f"=IF(ISNUMBER({level}),{level},NA())",
        col["tps"]: f"=IF({known},IFERROR(EXP(AVERAGEIFS({calc('ln_tps')},{crit})),NA()),NA())",
        col["latency"]: f"=IF({known},IFERROR(AVERAGEIFS({calc('latency_p95_s')},{crit}),NA()),NA())",
        col["ttft"]: f"=IF({known},IFERROR(AVERAGEIFS({calc('ttft_p95_s')},{crit}),NA()),NA())",
    }


def fit_formulas(layout: Layout, position: int) -> dict[str, str]:
    """The formulas of the measured-vs-predicted row of consistency row `position` (0-based)."""
    role = _cons_cell(layout, "role", position)
    predicted = _cons_cell(layout, "predicted", position)
    out = {}
    for (which, key), col in FIT_COLUMNS.items():
        value = _cons_cell(layout, key, position)
        out[col] = f"=IF(AND({role}=\"{which}\",ISNUMBER({predicted}),ISNUMBER({value})),{value},NA())"
    return out


def diagonal_formulas(layout: Layout) -> dict[str, str]:
    """y = x from the smallest to the largest value plotted (#N/A with nothing plotted)."""
    first, last = min(FIT_COLUMNS.values()), max(FIT_COLUMNS.values())
    values = f"${first}${FIRST_ROW}:${last}${fit_last_row(layout)}"
    x, y = DIAGONAL
    return {
        f"{x}{FIRST_ROW}": f"=IF(COUNT({values})=0,NA(),_xlfn.MINIFS({values},{values},{ANY_NUMBER}))",
        f"{x}{FIRST_ROW + 1}": f"=IF(COUNT({values})=0,NA(),_xlfn.MAXIFS({values},{values},{ANY_NUMBER}))",
        f"{y}{FIRST_ROW}": f"=${x}${FIRST_ROW}",
        f"{y}{FIRST_ROW + 1}": f"=${x}${FIRST_ROW + 1}",
    }


def write_sheet(data: Worksheet, layout: Layout, fills: PendingFills) -> None:
    """The chart-data sheet as every workbook has it, the template too: headers, the fit table (one
    shared formula a column: IronCalc 0.9.1 parses every formula it loads that is not a shared one's
    follower, about 35 microseconds each), y = x."""
    from scm_xl.workbook.stamp import write_filled

    for col, text in HEADERS.items():
        data[f"{col}1"] = text
    letters = {col: col for col in FIT_COLUMNS.values()}
    write_filled(data, fills, letters, lambda row: fit_formulas(layout, row - FIRST_ROW),
                 range(FIRST_ROW, FIRST_ROW + layout.rows), layout.cons_first - FIRST_ROW)
    for address, text in diagonal_formulas(layout).items():
        data[address] = text


# Where each chart's top-left corner sits on the summary sheet (at the anchor column); one below the other
ANCHOR_ROWS = {"tps": 4, "fit": 24, "latency": 44, "ttft": 64}
CHART_ROWS = 23  # the rows a chart covers, rows of wrapped labels included


def cover(summary: Worksheet, key: str) -> None:
    """Extend the summary's print area down to the end of chart `key`, so a chart prints whole and
    no page is printed for a chart that is not there."""
    area = str(summary.print_area or "A1:V1").split(",")[0].rpartition("!")[2].replace("$", "")
    first, _, last = area.partition(":")
    column = last.rstrip("0123456789")
    end = max(int(last[len(column):]), ANCHOR_ROWS[key] + CHART_ROWS)
    summary.print_area = f"{first}:{column}{end}"


def add_fit_chart(summary: Worksheet, data: Worksheet, layout: Layout, anchor_col: str) -> None:
    """The measured-vs-predicted chart, in every workbook, and the note above the charts saying
    what follows the data."""
    from scm_xl.workbook.styles import NOTE_FONT

    t = CHART_TEXTS[layout.lang]
    summary[f"{anchor_col}3"] = t["note"]
    summary[f"{anchor_col}3"].font = NOTE_FONT
    summary.add_chart(_fit_chart(data, layout, t), f"{anchor_col}{ANCHOR_ROWS['fit']}")
    cover(summary, "fit")


def add_line_charts(wb: Workbook, layout: Layout, points: ChartPoints, anchor_col: str) -> None:
    """The TPS table's blocks, one per line, and the TPS, P95 latency and P95 TTFT charts where
    there are lines to draw; once the rows are known (`fill`)."""
    data = wb[layout.title("chart_data")]
    summary = cast(Worksheet, wb[layout.title("summary")])  # a worksheet, never a chartsheet: build.py makes it
    t = CHART_TEXTS[layout.lang]
    for group, (model, length) in enumerate(points.groups):
        for slot in range(layout.c_slots):
            row = block_row(layout, group, slot)
            data[f"{CELL_COLUMNS['model']}{row}"] = model
            data[f"{CELL_COLUMNS['model']}{row}"].data_type = "s"  # a model named like a formula stays text
            data[f"{CELL_COLUMNS['max_tokens']}{row}"] = length
            for col, text in cell_formulas(layout, row, slot).items():
                data[f"{col}{row}"] = text
    lines = list(enumerate(points.groups))
    if lines:
        summary.add_chart(_line_chart(data, layout, lines, "tps", t["tps"], t["tps_axis"], t),
                          f"{anchor_col}{ANCHOR_ROWS['tps']}")
        cover(summary, "tps")
    measured = [(g, group) for g, group in lines if group in points.latency]
    for key in ("latency", "ttft") if measured else ():
        summary.add_chart(_line_chart(data, layout, measured, key, t[key], t["seconds"], t),
                          f"{anchor_col}{ANCHOR_ROWS[key]}")
        cover(summary, key)


def _scatter(title: str, x_title: str, y_title: str) -> ScatterChart:
    """A scatter chart as ECMA-376 requires one: with its scatterStyle, which openpyxl leaves out
    unless set and without which Excel repairs the file. "lineMarker" is Excel's own for points
    joined by lines; whether a series draws its line is the series' business (`_series`). The legend
    sits right of the plot, in a chart wide enough for a model name and its max_tokens, so it covers
    neither the title nor the plot; latency and TTFT are two charts, so no legend holds more than one
    entry per line of the TPS chart."""
    chart = ScatterChart()
    chart.scatterStyle = "lineMarker"
    chart.title = title
    chart.style = 2
    chart.x_axis.title = x_title
    chart.y_axis.title = y_title
    chart.height = 9.5
    chart.width = 24
    chart.x_axis.delete = False
    chart.y_axis.delete = False
    cast(Legend, chart.legend).position = "r"  # a new chart has a legend; the stubs allow None
    return chart


def _series(ws: Worksheet, x_col: str, y_col: str, first: int, last: int, title: str,
            line: bool = True, colour: str | None = None) -> XlSeries:
    from openpyxl.utils import column_index_from_string

    x = Reference(ws, min_col=column_index_from_string(x_col), min_row=first, max_row=last)
    y = Reference(ws, min_col=column_index_from_string(y_col), min_row=first, max_row=last)
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


def _line_name(model: str, length: int, t: Mapping[str, str]) -> str:
    return f"{model} · {t['max_tokens']} {length}"


def _line_chart(data: Worksheet, layout: Layout, lines: Sequence[tuple[int, tuple[str, int]]], column: str,
                title: str, y_title: str, t: Mapping[str, str]) -> ScatterChart:
    """One line per (model, max_tokens): the TPS-table column `column` against concurrency."""
    chart = _scatter(title, t["concurrency"], y_title)
    for g, (model, length) in lines:
        first, last = block_row(layout, g, 0), block_row(layout, g, layout.c_slots - 1)
        chart.series.append(_series(data, CELL_COLUMNS["concurrency"], CELL_COLUMNS[column], first, last,
                                    _line_name(model, length, t)))
    return chart


def _fit_chart(data: Worksheet, layout: Layout, t: Mapping[str, str]) -> ScatterChart:
    chart = _scatter(t["fit"], t["measured"], t["predicted"])
    for role, colour in ROLE_COLOURS.items():
        chart.series.append(_series(data, FIT_COLUMNS[(role, "measured")], FIT_COLUMNS[(role, "predicted")],
                                    FIRST_ROW, fit_last_row(layout), t[role], line=False, colour=colour))
    x, y = DIAGONAL
    chart.series.append(_series(data, x, y, FIRST_ROW, FIRST_ROW + 1, "y = x"))
    return chart


# -- reference values -------------------------------------------------------------------------------

def expected_chart_data(layout: Layout, groups: Sequence[tuple[object, object]],
                        included: Sequence[tuple[object, ...]], levels: Sequence[CellValue],
                        consistency: Sequence[tuple[CellValue, CellValue, CellValue]]) -> Expected:
    """The chart-data sheet's expected values.

    groups: (model, max_tokens) of each block, as found on the sheet; included: (model, max_tokens,
    concurrency, tps, latency_p95, ttft_p95) of each included base-prompt row; levels: the
    calibration sheet's concurrency levels, slot by slot, as the reference computes them;
    consistency: (role, measured, predicted) of each consistency-sheet row, as the reference computes them."""
    title = layout.title("chart_data")
    col = CELL_COLUMNS
    out: Expected = {}
    for g, (model, length) in enumerate(groups):
        for slot in range(layout.c_slots):
            row = block_row(layout, g, slot)
            level = levels[slot] if slot < len(levels) else None
            concurrency = float(level) if isinstance(level, (int, float)) and not isinstance(level, bool) else None
            out[(title, f"{col['concurrency']}{row}")] = NA if concurrency is None else concurrency
            members = [r for r in included if concurrency is not None and _same(r, model, length, concurrency)]
            tps = [r[3] for r in members if isinstance(r[3], float) and r[3] > 0]
            out[(title, f"{col['tps']}{row}")] = (math.exp(sum(math.log(v) for v in tps) / len(tps))
                                                   if tps and len(tps) == len(members) else NA)
            for key, index in (("latency", 4), ("ttft", 5)):
                values = [v for v in (r[index] for r in members) if isinstance(v, float)]
                out[(title, f"{col[key]}{row}")] = sum(values) / len(values) if values else NA
    plotted: list[float] = []
    for position in range(layout.rows):
        role, measured, predicted = consistency[position] if position < len(consistency) else (None, None, None)
        for (which, key), column in FIT_COLUMNS.items():
            value = measured if key == "measured" else predicted
            shown = role == which and isinstance(predicted, float) and isinstance(value, float)
            out[(title, f"{column}{FIRST_ROW + position}")] = value if shown else NA
            if shown:
                plotted.append(cast(float, value))
    x, y = DIAGONAL
    low, high = (min(plotted), max(plotted)) if plotted else (NA, NA)
    out[(title, f"{x}{FIRST_ROW}")], out[(title, f"{x}{FIRST_ROW + 1}")] = low, high
    out[(title, f"{y}{FIRST_ROW}")], out[(title, f"{y}{FIRST_ROW + 1}")] = low, high
    return out


def _same(row: tuple[object, ...], model: object, length: object, concurrency: float) -> bool:
    return (str(row[0]).casefold() == str(model).casefold() and row[1] == length and row[2] == concurrency)


def read_groups(ws: Worksheet, layout: Layout) -> list[tuple[object, object]]:
    """The (model, max_tokens) of each block on a chart-data sheet, as written (or as a person left them)."""
    groups = []
    row = FIRST_ROW
    while (model := ws[f"{CELL_COLUMNS['model']}{row}"].value) is not None:
        groups.append((model, ws[f"{CELL_COLUMNS['max_tokens']}{row}"].value))
        row += layout.c_slots
    return groups
