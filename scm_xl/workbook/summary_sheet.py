"""The summary sheet the workbook opens on.

Every figure here is a reference to the cell that computes it elsewhere (a defined
name or a calibration-table cell), so the summary holds no arithmetic of its own; its
expected values are those of the cells it points at. The charts beside the figures, and
the chart-data sheet behind them, are scm_xl.workbook.charts'.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

from openpyxl import Workbook
from openpyxl.formatting.rule import CellIsRule
from openpyxl.styles import Alignment, Font, PatternFill
from openpyxl.worksheet.worksheet import Worksheet

from scm_xl.engines.base import CellError, CellValue
from scm_xl.model import RowCheck, RowLike
from scm_xl.workbook import charts
from scm_xl.workbook.layout import CONCURRENCY_TABLE, LENGTH_TABLE, MODEL_TABLE, Column, Layout
from scm_xl.workbook.styles import (
    BIG_FONT, BOLD, FORMULA_FILL, HEADER_FILL, HEADER_FONT, KEY_FILL, NOTE_FONT, TITLE_FONT, VERDICT_COLOURS,
    DEFAULT_FONT_SIZE, fit_row, row_height, wrapped_lines,
)

if TYPE_CHECKING:

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
# The per-request SLO block (slo_sheet writes it): its inputs, then its answer's references.
SLO_FIRST = INVERSE_FIRST + len(INVERSE) + 2  # heading
SLO_INPUT_ROWS = {key: SLO_FIRST + 1 + i for i, key in enumerate(("ttft", "tpot", "e2el", "attainment"))}
SLO_OUTPUT_ROWS = {key: SLO_FIRST + 1 + len(SLO_INPUT_ROWS) + i for i, key in enumerate(
    ("status", "concurrency", "max_tokens", "model", "attainment", "low", "tps", "goodput"))}
COEF_FIRST = SLO_FIRST + len(SLO_INPUT_ROWS) + len(SLO_OUTPUT_ROWS) + 2  # heading; the tables' headers one row below
COEF_TABLES: tuple[tuple[str, tuple[Column, ...], str, str], ...] = (
    # (name, calibration table, level column, value column)
    ("f(c)", CONCURRENCY_TABLE, "level", "f"),
    ("K_len", LENGTH_TABLE, "level", "k"),
    ("C_model", MODEL_TABLE, "name", "c"),
)
CHART_ANCHOR_COL = "H"


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
            # over its figures: levels and values are numbers (right), model names text (left)
            cell.alignment = Alignment(horizontal="left" if text == "model" else "right")
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
    ws.row_dimensions[ROWS["verdict"]].height = row_height(1, BIG_FONT.sz or DEFAULT_FONT_SIZE)  # the big verdict is not clipped
    colour_verdict(ws, f"B{ROWS['verdict']}")
    colour_verdict(ws, f"B{ROWS['loo_verdict']}")
    ws.column_dimensions["A"].width = 44
    ws.column_dimensions["B"].width = 16
    # a label longer than column A wraps within it (its row as tall), not cut off by its figure
    for row in (*(ROWS[figure.key] for figure in FIGURES), *FORWARD_ROWS.values(), *INVERSE_ROWS.values()):
        label = str(ws[f"A{row}"].value or "")
        if wrapped_lines(label, 44) > 1:
            ws[f"A{row}"].alignment = Alignment(wrap_text=True)
            fit_row(ws, row, [(label, 44, DEFAULT_FONT_SIZE)])
    for col in "CDEF":
        ws.column_dimensions[col].width = 14
    last = COEF_FIRST + 1 + max(layout.c_slots, layout.l_slots, layout.m_slots)
    ws.print_area = f"A1:V{max(last, charts.LAST_ROW)}"


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


__all__ = ["CHART_ANCHOR_COL", "FIGURES", "colour_verdict", "expected_sheet", "formulas", "write_sheet"]
