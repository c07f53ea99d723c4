"""The summary sheet the workbook opens on.

Every figure here is a reference to the cell that computes it elsewhere (a defined
name or a calibration-table cell), so the summary holds no arithmetic of its own; its
expected values are those of the cells it points at. The charts beside the figures, and
the chart-data sheet behind them, are scm_xl.workbook.charts'.

The inputs a person changes (the forward and inverse questions and the method) are typed
here and nowhere else (`INPUTS`): yellow, unlocked cells with data validation, which the
derivation and calibration sheets read. Every other cell is locked and the sheet protected
(`scm_xl.workbook.protection`), so typing over a formula is refused by the program itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from openpyxl.formatting.rule import CellIsRule
from openpyxl.styles import Alignment, Font, PatternFill
from openpyxl.worksheet.datavalidation import DataValidation
from openpyxl.worksheet.worksheet import Worksheet

from scm_xl.engines.base import CellValue
from scm_xl.rules import DEFAULT_FORWARD, DEFAULT_METHOD, DEFAULT_TARGET, METHODS
from scm_xl.workbook.layout import CONCURRENCY_TABLE, KEYED_COLUMNS, LENGTH_TABLE, MODEL_TABLE, Column, Layout
from scm_xl.workbook.styles import (
    BIG_FONT, BOLD, FORMULA_FILL, HEADER_FILL, HEADER_FONT, INPUT_FILL, KEY_FILL, NOTE_FONT, TITLE_FONT,
    VERDICT_COLOURS, DEFAULT_FONT_SIZE, fit_row, row_height, wrapped_lines, write_value,
)

if TYPE_CHECKING:
    from scm_xl.workbook.formulas import Formulas

Expected = dict[tuple[str, str], CellValue]

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
        "method": "推导所用方法（chain = 链式；lsq = 最小二乘）",
        "knee": "拐点：吞吐在此并发附近不再增长（延迟模型）",
        "forward": "正向：给定配置 → TPS",
        "concurrency": "并发数",
        "max_tokens": "max_tokens",
        "model": "模型（空 = 基准模型，生效值在C列）",
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
        "hint": "请在黄色单元格（B列）输入；其余单元格是公式，已锁定（工作表保护，无密码）。",
        "type_in": "请在 {where} 输入{what}",
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
        "method": "method of the answers (chain or lsq)",
        "knee": "knee: throughput stops growing near concurrency (latency model)",
        "forward": "Forward: configuration → TPS",
        "concurrency": "concurrency",
        "max_tokens": "max_tokens",
        "model": "model (blank = the base model, in C)",
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
        "hint": "Type in the yellow cells (column B); every other cell is a formula, locked (sheet protection, no "
                "password).",
        "type_in": "type the {what} in {where}",
    },
}

# What each input is called in verify's "type the ... in ..." (by input key, see INPUTS).
INPUT_NAMES = {
    "zh": {"forward.concurrency": "正向并发数", "forward.max_tokens": "正向 max_tokens", "forward.model": "正向模型",
           "forward.prompt_tokens": "正向提示长度 Token", "inverse.target_tps": "目标 TPS",
           "inverse.max_tokens": "反向 max_tokens", "inverse.model": "反向模型", "inverse.max_latency": "P95 延迟上限",
           "inverse.prompt_tokens": "反向提示长度 Token", "method": "方法"},
    "en": {"forward.concurrency": "forward concurrency", "forward.max_tokens": "forward max_tokens",
           "forward.model": "forward model", "forward.prompt_tokens": "forward prompt tokens",
           "inverse.target_tps": "target TPS", "inverse.max_tokens": "inverse max_tokens",
           "inverse.model": "inverse model", "inverse.max_latency": "P95 latency limit",
           "inverse.prompt_tokens": "inverse prompt tokens", "method": "method"},
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
# Under it, replicas, cost and rate limits (slo_sheet writes them too): a heading, inputs (the last,
# minimise, the plan's order: capacity.MINIMISE), answer (status first: says when cost has no price).
SLO_CAPACITY_FIRST = SLO_FIRST + 1 + len(SLO_INPUT_ROWS) + len(SLO_OUTPUT_ROWS)
SLO_CAPACITY_INPUT_ROWS = {key: SLO_CAPACITY_FIRST + 1 + i for i, key in enumerate(
    ("rpm", "tpm", "target_tps", "price_in", "price_out", "gpu_hour_price", "gpus", "minimise"))}
SLO_CAPACITY_OUTPUT_ROWS = {key: SLO_CAPACITY_FIRST + 1 + len(SLO_CAPACITY_INPUT_ROWS) + i for i, key in enumerate(
    ("status", "bound", "binding", "replicas", "concurrency", "max_tokens", "model", "cost_million", "cost_hour"))}
SLO_LAST = max(SLO_CAPACITY_OUTPUT_ROWS.values())
SLO_BLOCKS = {"slo_in": SLO_INPUT_ROWS, "slo_out": SLO_OUTPUT_ROWS, "capacity_in": SLO_CAPACITY_INPUT_ROWS,
              "capacity_out": SLO_CAPACITY_OUTPUT_ROWS}
SLO_HEADINGS = {"slo": SLO_FIRST, "capacity": SLO_CAPACITY_FIRST}


def slo_cell(block: str, key: str) -> str:
    """The value cell of row `key` of one of the SLO blocks (SLO_BLOCKS), "B31"; the sheet's
    addresses are spelled here, slo_sheet writes and reads the block through these."""
    return f"B{SLO_BLOCKS[block][key]}"


def slo_label_cell(block: str, key: str) -> str:
    """The label cell beside `slo_cell(block, key)`."""
    return f"A{SLO_BLOCKS[block][key]}"


def slo_heading_cell(heading: str) -> str:
    """The heading cell of the SLO block ("slo") or of the capacity block under it ("capacity")."""
    return f"A{SLO_HEADINGS[heading]}"
COEF_FIRST = SLO_LAST + 2  # heading; the tables' headers one row below
COEF_TABLES: tuple[tuple[str, tuple[Column, ...], str, str], ...] = (
    # (name, calibration table, level column, value column)
    ("f(c)", CONCURRENCY_TABLE, "level", "f"),
    ("K_len", LENGTH_TABLE, "level", "k"),
    ("C_model", MODEL_TABLE, "name", "c"),
)
CHART_ANCHOR_COL = "H"
HINT_ROW = 2  # the one line that says where to type

# The inputs a person types, each in one Summary cell (column B of its row): the forward and
# inverse questions and the method. The derivation and calibration sheets read these cells.
FORWARD_INPUTS = ("concurrency", "max_tokens", "model", "prompt_tokens")
INVERSE_INPUTS = ("target_tps", "max_tokens", "model", "max_latency", "prompt_tokens")
INPUTS: dict[str, str] = {
    **{f"forward.{key}": f"B{FORWARD_ROWS[key]}" for key in FORWARD_INPUTS},
    **{f"inverse.{key}": f"B{INVERSE_ROWS[key]}" for key in INVERSE_INPUTS},
    "method": f"B{ROWS['method']}",
}
# What a new workbook's inputs hold (blank: the input's own default, see the derivation sheet).
INPUT_DEFAULTS: dict[str, object] = {
    "forward.concurrency": DEFAULT_FORWARD["concurrency"], "forward.max_tokens": DEFAULT_FORWARD["max_tokens"],
    "inverse.target_tps": DEFAULT_TARGET["tps"], "inverse.max_tokens": DEFAULT_TARGET["max_tokens"],
    "method": DEFAULT_METHOD,
}
# Beside an input, in column C: the value it takes effect as (a blank model is the base model).
EFFECTIVE_COL = "C"


def input_ref(layout: Layout, key: str) -> str:
    """An input's Summary cell as a formula reference ('Summary'!$B$16)."""
    address = INPUTS[key]
    return f"{layout.qtitle('summary')}!${address[0]}${address[1:]}"


# What another sheet reads for a blank input: "" (its formulas' "blank = default" rules test
# ISNUMBER or `&""`), but 0 for the target TPS, which is compared with numbers (a blank cell
# compared as 0 there before the inputs moved to the Summary: every measured level meets it).
BLANK_AS = {"inverse.target_tps": 0.0}


def mirror(layout: Layout, key: str) -> str:
    """The formula with which another sheet reads an input: the typed value, BLANK_AS (else "")
    when blank (`cell&""`: IronCalc takes an empty cell as unequal to "")."""
    ref = input_ref(layout, key)
    blank = f"{BLANK_AS[key]:g}" if key in BLANK_AS else '""'
    return f"=IF({ref}&\"\"=\"\",{blank},{ref})"


def typed_over_hint(layout: Layout, sheet: str, cell: str) -> str:
    """Where a person who typed over formula cell `sheet`!`cell` should type instead: the input
    the cell reads or answers for ("type the target TPS in 'Summary'!B27"), or "" (not an
    answer of the Summary's questions)."""
    row = int("".join(ch for ch in cell if ch.isdigit()) or 0)
    col = "".join(ch for ch in cell if ch.isalpha())
    key = ""
    if sheet == layout.title("derivation"):
        fw, inv = layout.keyed_rows("forward"), layout.keyed_rows("inverse")
        mirrors = {**{fw[k]: f"forward.{k}" for k in FORWARD_INPUTS}, **{inv[k]: f"inverse.{k}" for k in INVERSE_INPUTS}}
        if col == KEYED_COLUMNS["value"] and row in mirrors:
            key = mirrors[row]
        elif min(fw.values()) <= row <= max(fw.values()):
            key = "forward.concurrency"
        elif row >= min(inv.values()):
            key = "inverse.target_tps"
    elif sheet == layout.title("calibration") and cell == layout.keyed_cell("settings", "method"):
        key = "method"
    elif sheet == layout.title("summary"):
        if row == ROWS["method"]:
            key = "method"
        elif row in FORWARD_ROWS.values():
            key = "forward.concurrency"
        elif row in INVERSE_ROWS.values():
            key = "inverse.target_tps"
    return input_hint(layout, key) if key else ""


def input_hint(layout: Layout, key: str) -> str:
    """"type the target TPS in 'Summary'!B16": where verify sends a person who typed over a formula."""
    t = TEXTS[layout.lang]
    return t["type_in"].format(what=INPUT_NAMES[layout.lang][key],
                               where=f"'{layout.title('summary')}'!{INPUTS[key]}")


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
        if figure.key == "method":  # typed here; the effective method beside it
            out[f"{EFFECTIVE_COL}{ROWS[figure.key]}"] = (f"={layout.name_ref(figure.source)}", None)
            continue
        ref = layout.name_ref(figure.source) if figure.source in layout.defined_names() else figure.source
        ref = ref or sources[figure.key]
        text = f"=IF(ISNUMBER({ref}),{ref},{na})" if figure.na_when_blank else f"={ref}"
        out[f"B{ROWS[figure.key]}"] = (text, figure.number_format)
    for block, rows, typed in ((FORWARD, FORWARD_ROWS, FORWARD_INPUTS), (INVERSE, INVERSE_ROWS, INVERSE_INPUTS)):
        for key, (name, number_format) in block.items():
            if key == "model":  # the effective model (blank: the base model) beside the typed one
                source = layout.keyed_cell("forward" if block is FORWARD else "inverse", "model", "extra", absolute=True)
                ref = f"{layout.qtitle('derivation')}!{source}"
                out[f"{EFFECTIVE_COL}{rows[key]}"] = (f"=IF({ref}&\"\"=\"\",\"\",{ref})", None)
            if key in typed:
                continue
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
    ws[f"A{HINT_ROW}"] = t["hint"]
    ws[f"A{HINT_ROW}"].font = NOTE_FONT
    write_inputs(ws, layout)
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
    ws.print_area = f"A1:V{last}"  # the charts extend it to the last one drawn (workbook.charts.cover)
    ws.page_setup.fitToHeight = 1  # the answer and its charts on one page (printing.print_setup keeps it)


def write_inputs(ws: Worksheet, layout: Layout) -> None:
    """The input cells: yellow, unlocked (the sheet is protected), a new workbook's defaults,
    and data validation (lists for model, max_tokens and method; numbers for the rest)."""
    from openpyxl.styles import Protection

    for key, address in INPUTS.items():
        cell = ws[address]
        write_value(cell, INPUT_DEFAULTS.get(key))
        cell.fill = INPUT_FILL
        cell.protection = Protection(locked=False)

    def add(validation: DataValidation, *keys: str) -> None:
        ws.add_data_validation(validation)
        for key in keys:
            validation.add(INPUTS[key])

    lo = layout
    # a model or max_tokens not measured yet is allowed after a warning: the answer then says
    # which coefficient is missing
    add(DataValidation(type="list", formula1=lo.seen_models_range("name"), allow_blank=True,
                       showErrorMessage=True, errorStyle="warning",
                       error="not a model of the data (blank = the base model)"),
        "forward.model", "inverse.model")
    add(DataValidation(type="list", formula1=lo.l_table_range("level"), allow_blank=True,
                       showErrorMessage=True, errorStyle="warning", error="not a calibrated max_tokens level"),
        "forward.max_tokens", "inverse.max_tokens")
    add(DataValidation(type="list", formula1='"' + ",".join(METHODS) + '"', allow_blank=True,
                       showErrorMessage=True, error=" or ".join(METHODS)), "method")
    add(DataValidation(type="whole", operator="greaterThanOrEqual", formula1="0", allow_blank=True,
                       showErrorMessage=True, error="a whole number ≥ 0"), "forward.concurrency")
    add(DataValidation(type="decimal", operator="greaterThanOrEqual", formula1="0", allow_blank=True,
                       showErrorMessage=True, error="a number ≥ 0"),
        "forward.prompt_tokens", "inverse.target_tps", "inverse.max_latency", "inverse.prompt_tokens")


def read_inputs(ws: Worksheet) -> dict[str, object]:
    """What the input cells hold, as typed (input key -> value)."""
    return {key: ws[address].value for key, address in INPUTS.items()}


def set_inputs(ws: Worksheet, typed: Mapping[str, object]) -> None:
    """Type values into the input cells (keys of INPUTS), text staying text."""
    for key, value in typed.items():
        write_value(ws[INPUTS[key]], value)


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
        if figure.key == "method":  # typed here; the effective method beside it
            out[(title, f"{EFFECTIVE_COL}{ROWS[figure.key]}")] = value_of(figure.source)
            continue
        value = extra[figure.key] if not figure.source else value_of(figure.source)
        if figure.na_when_blank and not (isinstance(value, float) and not isinstance(value, bool)):
            value = t["na"]
        out[(title, f"B{ROWS[figure.key]}")] = value
    derivation = layout.title("derivation")
    for block, rows, typed in ((FORWARD, FORWARD_ROWS, FORWARD_INPUTS), (INVERSE, INVERSE_ROWS, INVERSE_INPUTS)):
        for key, (name, _) in block.items():
            if key == "model":
                source = layout.keyed_cell("forward" if block is FORWARD else "inverse", "model", "extra")
                out[(title, f"{EFFECTIVE_COL}{rows[key]}")] = blank_to_empty(exp.get((derivation, source)))
            if key not in typed:
                out[(title, f"B{rows[key]}")] = blank_to_empty(value_of(name))
    calibration = layout.title("calibration")
    for address, source, _ in _coef_cells(layout):
        out[(title, address)] = blank_to_empty(exp.get((calibration, source.replace("$", ""))))
    return out


__all__ = ["CHART_ANCHOR_COL", "FIGURES", "INPUTS", "colour_verdict", "expected_sheet", "formulas", "input_hint",
           "input_ref", "mirror", "read_inputs", "set_inputs", "slo_cell", "slo_heading_cell", "slo_label_cell",
           "write_sheet"]
