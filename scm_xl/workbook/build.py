"""Build the calibration workbook: sheets, live formulas, styles, validation, chart."""

from __future__ import annotations

import os
import tempfile
from datetime import datetime
from pathlib import Path

from openpyxl import Workbook
from openpyxl.cell.cell import Cell as XlCell
from openpyxl.chart import Reference, ScatterChart, Series
from openpyxl.styles import Alignment, Font, PatternFill
from openpyxl.utils import get_column_letter
from openpyxl.workbook.defined_name import DefinedName
from openpyxl.worksheet.datavalidation import DataValidation
from openpyxl.worksheet.formula import ArrayFormula
from openpyxl.worksheet.worksheet import Worksheet

from scm_xl.errors import InputError
from scm_xl.workbook.catalog_tables import CatalogLayout, physics_catalog, physics_column_formulas, write_tables
from scm_xl.workbook import lsq_sheet, replicates_sheet
from scm_xl.workbook.first_principles import write_calculator
from scm_xl.workbook.formulas import Formulas
from scm_xl.workbook.layout import (
    CELLS_TABLE, CHART_LENGTH_SLOTS, CONCURRENCY_TABLE, CONSISTENCY_COLUMNS, DEFAULT_FORWARD, DEFAULT_PHYSICS_PRECISION,
    DEFAULT_SHORT_OUTPUT_RATIO, DEFAULT_TARGET, METHODS,
    INVERSE_TABLE, LENGTH_TABLE, META_SHEET, MODEL_TABLE, RAW_COLUMNS, SHEET_KEYS, Column, Layout,
)

INPUT_FILL = PatternFill("solid", fgColor="FFF2CC")  # pale yellow: type here
FORMULA_FILL = PatternFill("solid", fgColor="EDEDED")  # grey: computed, do not type
HEADER_FILL = PatternFill("solid", fgColor="1F4E78")
KEY_FILL = PatternFill("solid", fgColor="DDEBF7")
HEADER_FONT = Font(bold=True, color="FFFFFF")
TITLE_FONT = Font(bold=True, size=14)
BOLD = Font(bold=True)
FORMULA_PREFIXES = ("=", "+", "-", "@")
BUILD_TIMESTAMP = datetime(2026, 1, 1, 0, 0, 0)

LABELS = {
    "zh": {
        "calibration_title": "系数标定：TPS = BaseTPS × f(并发) × K_len(max_tokens) ÷ C_model(模型)",
        "settings": "设置（B列留空 = 自动）",
        "input": "手工输入",
        "effective": "生效值",
        "base_model": "基准模型",
        "base_max_tokens": "基准 max_tokens",
        "base_concurrency": "基准并发",
        "monotonic_tolerance_pct": "单调性容差 %",
        "strict_physics": "严格物理检查（1 = 剔除有物理警告的行）",
        "short_output_ratio": "输出过短阈值（实际/请求 Token 比例）",
        "physics_precision": "物理检查的权重精度（字节数在D列）",
        "method": "推导所用方法（chain = 文章的链式；lsq = 最小二乘）",
        "base_tps": "BaseTPS（基准点几何均值）",
        "base_rows": "基准点行数",
        "c_table": "并发增益 f(c) = TPS(c, 基准长度) / BaseTPS",
        "l_table": "长度系数 K_len(L) = TPS(锚定并发, L) / (BaseTPS × f(锚定并发))",
        "m_table": "模型系数 C_model(m) = BaseTPS / TPS(m 的基准点)",
        "chart_grid": "图表数据：基准模型各并发 × max_tokens 的 TPS（几何均值）",
        "chart_title": "TPS 与并发（每个 max_tokens 一条曲线）",
        "consistency_title": "自洽检验：只有“check”行（系数全部来自其他行）才是真正的检验",
        "check_rows": "检验行数 (check)",
        "identify_rows": "标定行数 (identify)",
        "unidentified_rows": "无法预测行数 (unidentified)",
        "excluded_rows": "剔除行数 (excluded)",
        "mape": "平均偏差率 MAPE %（仅检验行）",
        "max_deviation": "最大偏差率 %（仅检验行）",
        "verdict": "判定",
        "verdict_rule": "excellent: MAPE≤5% 且 最大≤10%；good: MAPE≤10% 且 最大≤20%；fail: 更差；insufficient: 没有检验行（不算通过）",
        "derivation_title": "双向推导",
        "forward": "正向预测：给定配置 → TPS",
        "inverse": "反向求解：目标 TPS → 最小已测并发",
        "concurrency": "并发数",
        "max_tokens": "max_tokens",
        "model": "模型（留空 = 基准模型）",
        "coefficient": "系数",
        "effective_model": "生效模型",
        "forward_tps": "预测 TPS",
        "forward_missing": "缺少的系数",
        "target_tps": "目标 TPS",
        "recommended_concurrency": "推荐并发",
        "recommended_tps": "推荐并发下的预测 TPS",
        "best_tps": "可达最高 TPS（对偶问题）",
        "best_concurrency": "最高 TPS 的并发",
        "inverse_table": "各已测并发档位的预测",
    },
    "en": {
        "calibration_title": "Calibration: TPS = BaseTPS × f(concurrency) × K_len(max_tokens) ÷ C_model(model)",
        "settings": "Settings (leave column B blank = automatic)",
        "input": "hand-set",
        "effective": "effective",
        "base_model": "base model",
        "base_max_tokens": "base max_tokens",
        "base_concurrency": "base concurrency",
        "monotonic_tolerance_pct": "monotonic tolerance %",
        "strict_physics": "strict physics (1 = exclude rows with physics warnings)",
        "short_output_ratio": "short-output threshold (output / requested tokens)",
        "physics_precision": "weight precision for physics checks (bytes in D)",
        "method": "method for forward and inverse (chain = the article's; lsq = least squares)",
        "base_tps": "BaseTPS (geometric mean at the base point)",
        "base_rows": "rows at the base point",
        "c_table": "Concurrency gain f(c) = TPS(c, base length) / BaseTPS",
        "l_table": "Length factor K_len(L) = TPS(anchor c, L) / (BaseTPS × f(anchor c))",
        "m_table": "Model cost C_model(m) = BaseTPS / TPS(m at the base point)",
        "chart_grid": "Chart data: TPS of the base model by concurrency × max_tokens (geometric mean)",
        "chart_title": "TPS against concurrency (one series per max_tokens)",
        "consistency_title": "Consistency: only 'check' rows (all coefficients from other rows) test the model",
        "check_rows": "check rows",
        "identify_rows": "identify rows",
        "unidentified_rows": "unidentified rows",
        "excluded_rows": "excluded rows",
        "mape": "MAPE % (check rows only)",
        "max_deviation": "max |deviation| % (check rows only)",
        "verdict": "verdict",
        "verdict_rule": "excellent: MAPE≤5% and max≤10%; good: MAPE≤10% and max≤20%; fail: worse; insufficient: no check rows (never a pass)",
        "derivation_title": "Forward and inverse",
        "forward": "Forward: configuration → TPS",
        "inverse": "Inverse: target TPS → smallest measured concurrency",
        "concurrency": "concurrency",
        "max_tokens": "max_tokens",
        "model": "model (blank = base model)",
        "coefficient": "coefficient",
        "effective_model": "effective model",
        "forward_tps": "predicted TPS",
        "forward_missing": "missing coefficients",
        "target_tps": "target TPS",
        "recommended_concurrency": "recommended concurrency",
        "recommended_tps": "predicted TPS there",
        "best_tps": "best reachable TPS (the dual answer)",
        "best_concurrency": "concurrency of the best TPS",
        "inverse_table": "Prediction at each measured concurrency level",
    },
}

README_TEXT = {
    "zh": [
        "SCM 系数标定工作簿（scm-xl 生成）",
        "",
        "模型：TPS = BaseTPS × f(并发) × K_len(max_tokens) ÷ C_model(模型)",
        "黄色单元格是输入，灰色单元格是公式（请勿覆盖）。在“原始数据”表里新增或修改一行，所有结果随之更新。",
        "",
        "原始数据：每行一次实验。物理过滤：无输出、存在失败/限流请求、或“并发升高而TPS下降”的行被剔除，原因写在“剔除原因”列；“人工纳入/剔除”列（include/exclude）优先于自动过滤。",
        "系数标定：按文章的链式方法标定。基准点默认取第一个模型、max_tokens=50（没有则取最小长度）、最低并发，可在B列手工指定。重复实验取几何均值。",
        "自洽检验：每行一个角色。identify = 这一行本身定义了某个系数（偏差按构造为0，不是检验）；check = 它用到的系数全部来自其他行（真正的检验）；unidentified = 缺少系数；excluded = 被过滤。",
        "判定只看 check 行：excellent（MAPE≤5% 且最大≤10%）、good（MAPE≤10% 且最大≤20%）、fail；没有 check 行时为 insufficient，绝不算通过。",
        "双向推导：正向预测给定配置的 TPS；反向求达到目标 TPS 的最小已测并发，以及对偶问题（可达最高 TPS）。",
        "",
        "校验：scm-xl verify 本文件 —— 用真实公式引擎重算每个公式单元格，并与 Python 参考实现逐一比较。",
    ],
    "en": [
        "SCM calibration workbook (built by scm-xl)",
        "",
        "Model: TPS = BaseTPS × f(concurrency) × K_len(max_tokens) ÷ C_model(model)",
        "Yellow cells are inputs, grey cells are formulas (do not type over them). Add or edit a row on the raw-data sheet and every result follows.",
        "",
        "RawData: one experiment per row. Physical filter: rows with no output, with failed or rate-limited requests, or whose TPS falls as concurrency rises are excluded, with the reason in the 'reason' column; the 'override' column (include/exclude) wins over the automatic filter.",
        "Calibration: the article's chain. The base point defaults to the first model, max_tokens 50 (else the smallest length) and the lowest concurrency; set them by hand in column B. Replicates are combined by their geometric mean.",
        "Consistency: each row has a role. identify = the row defines a coefficient (deviation 0 by construction, not a test); check = every coefficient it needs came from other rows (the real test); unidentified = a coefficient is missing; excluded = filtered out.",
        "The verdict uses check rows only: excellent (MAPE≤5% and max≤10%), good (MAPE≤10% and max≤20%), fail; with no check rows it is 'insufficient', never a pass.",
        "Derivation: forward prediction for a configuration; inverse: the smallest measured concurrency that meets a target TPS, and the dual (best reachable TPS).",
        "",
        "Check it: scm-xl verify THIS_FILE recalculates every formula cell with a real engine and compares it with the Python reference.",
    ],
}


def write_text(cell: XlCell, value: str) -> None:
    """Write a string as text, even if it looks like a formula."""
    cell.value = value
    if value.startswith(FORMULA_PREFIXES):
        cell.data_type = "s"
        cell.quotePrefix = True


def _header(ws: Worksheet, row: int, col: int, columns: tuple[Column, ...], lang: str) -> None:
    for i, column in enumerate(columns):
        cell = ws.cell(row=row, column=col + i, value=column.header(lang))  # type: ignore[arg-type]
        cell.font = HEADER_FONT
        cell.fill = HEADER_FILL
        cell.alignment = Alignment(wrap_text=True, vertical="center")
        ws.column_dimensions[get_column_letter(col + i)].width = max(
            ws.column_dimensions[get_column_letter(col + i)].width or 0, column.width)


def _array(ws: Worksheet, col: str, first: int, last: int, formula: str, fill: PatternFill = FORMULA_FILL,
           number_format: str | None = None, column_style: bool = False) -> None:
    """One CSE array formula over a column range.

    column_style styles the whole sheet column instead of each cell: the per-row tables
    fill whole columns, and thousands of styled empty cells slow every engine's load.
    """
    ref = f"{col}{first}:{col}{last}"
    ws[f"{col}{first}"] = ArrayFormula(ref, formula)
    if column_style:
        dim = ws.column_dimensions[col]
        dim.fill = fill
        if number_format:
            dim.number_format = number_format
        cells = [ws[f"{col}{first}"]]
    else:
        cells = [ws[f"{col}{row}"] for row in range(first, last + 1)]
    for cell in cells:
        cell.fill = fill
        if number_format:
            cell.number_format = number_format


def _formula(ws: Worksheet, address: str, formula: str, number_format: str | None = None,
             array: bool = False) -> None:
    ws[address] = ArrayFormula(address, formula) if array else formula
    ws[address].fill = FORMULA_FILL
    if number_format:
        ws[address].number_format = number_format


def _label(ws: Worksheet, address: str, text: str, bold: bool = False) -> None:
    ws[address] = text
    if bold:
        ws[address].font = BOLD


def build_workbook(layout: Layout, into: Workbook | None = None) -> Workbook:
    """A fresh calibration workbook, or scm-xl's sheets built at the front of `into`.

    `into` must not hold scm-xl's sheets any more (see `remove_own_sheets`); its other
    sheets, styles and names stay as they are.
    """
    fresh = into is None
    wb = Workbook() if into is None else into
    lang = layout.lang
    labels = LABELS[lang]
    sheets: dict[str, Worksheet] = {}
    if fresh:
        first = wb.active
        assert first is not None
        first.title = layout.title("readme")
        sheets["readme"] = first
    else:
        sheets["readme"] = wb.create_sheet(layout.title("readme"), index=0)
    for index, key in enumerate(SHEET_KEYS[1:], start=1):
        sheets[key] = wb.create_sheet(layout.title(key), index=index)
    catalog_layout = CatalogLayout(lang, physics_catalog())
    fx = Formulas(layout, catalog_layout)

    # -- README ---------------------------------------------------------------
    ws = sheets["readme"]
    for i, line in enumerate(README_TEXT[lang], start=1):
        ws.cell(row=i, column=1, value=line)
    ws["A1"].font = TITLE_FONT
    ws.column_dimensions["A"].width = 140

    # -- raw data -------------------------------------------------------------
    ws = sheets["raw"]
    _header(ws, layout.raw_header_row, 1, RAW_COLUMNS, lang)
    ws.freeze_panes = "B2"
    for column in RAW_COLUMNS:
        if column.kind == "input":
            ws.column_dimensions[layout.raw_col(column.key)].fill = INPUT_FILL
    number_formats = {"tps": "0.00", "ln_tps": "0.0000"}
    for key, formula in fx.raw_columns().items():
        _array(ws, layout.raw_col(key), layout.raw_first, layout.raw_last, formula,
               number_format=number_formats.get(key), column_style=True)
    _validations(ws, layout)

    # -- calibration ----------------------------------------------------------
    ws = sheets["calibration"]
    _label(ws, "A1", labels["calibration_title"])
    ws["A1"].font = TITLE_FONT
    _label(ws, "A3", labels["settings"], bold=True)
    _label(ws, "B3", labels["input"], bold=True)
    _label(ws, "C3", labels["effective"], bold=True)
    settings = fx.settings()
    for key, row in layout.settings_rows.items():
        _label(ws, f"A{row}", labels[key])
        ws[f"B{row}"].fill = INPUT_FILL
        _formula(ws, f"C{row}", settings[key])
    srows = layout.settings_rows
    _formula(ws, f"D{srows['physics_precision']}", settings["physics_bytes"])
    ws[f"B{srows['monotonic_tolerance_pct']}"] = 0
    ws[f"B{srows['strict_physics']}"] = 0
    ws[f"B{srows['short_output_ratio']}"] = DEFAULT_SHORT_OUTPUT_RATIO
    ws[f"B{srows['physics_precision']}"] = DEFAULT_PHYSICS_PRECISION
    strict = DataValidation(type="list", formula1='"0,1"', allow_blank=True)
    ws.add_data_validation(strict)
    strict.add(f"B{srows['strict_physics']}")
    ws[f"B{srows['method']}"] = METHODS[0]
    method = DataValidation(type="list", formula1=f'"{",".join(METHODS)}"', allow_blank=True)
    ws.add_data_validation(method)
    method.add(f"B{srows['method']}")
    _label(ws, f"A{layout.base_tps_row}", labels["base_tps"], bold=True)
    _formula(ws, f"C{layout.base_tps_row}", settings["base_tps"], "0.00")
    ws[f"C{layout.base_tps_row}"].fill = KEY_FILL
    _label(ws, f"A{layout.base_rows_row}", labels["base_rows"])
    _formula(ws, f"C{layout.base_rows_row}", settings["base_rows"])
    ws.column_dimensions["A"].width = 50
    ws.column_dimensions["B"].width = 14
    ws.column_dimensions["C"].width = 26

    _label(ws, f"A{layout.c_table_header - 1}", labels["c_table"], bold=True)
    _header(ws, layout.c_table_header, 1, CONCURRENCY_TABLE, lang)
    for row in range(layout.c_table_first, layout.c_table_first + layout.c_slots):
        for key, formula in fx.concurrency_row(row).items():
            _formula(ws, f"{layout.table_col(CONCURRENCY_TABLE, key)}{row}", formula,
                     "0.00" if key == "f" else None)

    _label(ws, f"A{layout.l_table_header - 1}", labels["l_table"], bold=True)
    _header(ws, layout.l_table_header, 1, LENGTH_TABLE, lang)
    for row in range(layout.l_table_first, layout.l_table_first + layout.l_slots):
        for key, formula in fx.length_row(row).items():
            _formula(ws, f"{layout.table_col(LENGTH_TABLE, key)}{row}", formula,
                     "0.00" if key == "k" else None)

    _label(ws, f"A{layout.m_table_header - 1}", labels["m_table"], bold=True)
    _header(ws, layout.m_table_header, 1, MODEL_TABLE, lang)
    for row in range(layout.m_table_first, layout.m_table_first + layout.m_slots):
        formulas, name_is_array = fx.model_row(row)
        for key, formula in formulas.items():
            _formula(ws, f"{layout.table_col(MODEL_TABLE, key)}{row}", formula,
                     "0.00" if key in ("c", "tps") else None, array=(key == "name" and name_is_array))

    _chart_grid(ws, layout, fx, labels)

    # -- consistency ----------------------------------------------------------
    ws = sheets["consistency"]
    _label(ws, "A1", labels["consistency_title"])
    ws["A1"].font = TITLE_FONT
    _label(ws, "A2", labels["verdict_rule"])
    summary = fx.summary()
    for key, row in layout.summary_rows.items():
        _label(ws, f"A{row}", labels[key], bold=key in ("mape", "max_deviation", "verdict"))
        _formula(ws, f"B{row}", summary[key], "0.00" if key in ("mape", "max_deviation") else None)
        if key in ("mape", "max_deviation", "verdict", "check_rows"):
            ws[f"B{row}"].fill = KEY_FILL
    ws.column_dimensions["A"].width = 34
    _header(ws, layout.cons_header_row, 1, CONSISTENCY_COLUMNS, lang)
    ws.freeze_panes = f"B{layout.cons_first}"
    cons_formats = {"measured": "0.00", "f": "0.000", "k": "0.000", "c": "0.000", "predicted": "0.00",
                    "deviation": "0.00", "deviation_pct": "0.0", "check_abs_pct": "0.0"}
    for key, formula in fx.consistency_columns().items():
        _array(ws, layout.cons_col(key), layout.cons_first, layout.cons_last, formula,
               number_format=cons_formats.get(key), column_style=True)

    # -- derivation -------------------------------------------------------------
    ws = sheets["derivation"]
    _derivation(ws, layout, fx, labels)

    # -- replicates and least squares (hold-out) ----------------------------------
    position = wb.sheetnames.index(layout.title("derivation")) + 1
    rep_ws = wb.create_sheet(replicates_sheet.SHEET_TITLES[lang], index=position)
    lsq_ws = wb.create_sheet(lsq_sheet.SHEET_TITLES[lang], index=position + 1)
    extra_names = {
        name: f"'{ws_.title}'!${_col(address)}${_row(address)}"
        for ws_, names in ((rep_ws, replicates_sheet.write_sheet(rep_ws, layout, slots=layout.cell_slots)),
                           (lsq_ws, lsq_sheet.write_sheet(lsq_ws, layout)))
        for name, address in names.items()
    }

    # -- cells: per (model, max_tokens, concurrency) figures the filter looks up --
    ws = sheets["cells"]
    _header(ws, layout.cells_header_row, 1, CELLS_TABLE, lang)
    ws.freeze_panes = f"A{layout.cells_first}"
    cell_formats = {"max_tps": "0.00", "mean_ln": "0.0000", "lower_max": "0.00", "group_base": "0.00"}
    slot_col = layout.table_col(CELLS_TABLE, "slot")
    for i in range(layout.cell_slots):
        ws[f"{slot_col}{layout.cells_first + i}"] = i + 1
    for key, formula in fx.cells_columns().items():
        _array(ws, layout.table_col(CELLS_TABLE, key), layout.cells_first, layout.cells_last, formula,
               number_format=cell_formats.get(key), column_style=True)

    # -- first principles: the roofline calculator and the catalog ---------------
    ws = sheets["first_principles"]
    write_tables(ws, catalog_layout)
    calculator_names = write_calculator(ws, lang, catalog_layout)
    for field, formula in physics_column_formulas(catalog_layout, layout.name_ref("PhysicsBytes")).items():
        col = get_column_letter(catalog_layout.model_col(field))
        ws[f"{col}{catalog_layout.model_header}"] = field
        ws[f"{col}{catalog_layout.model_header}"].font = HEADER_FONT
        ws[f"{col}{catalog_layout.model_header}"].fill = HEADER_FILL
        _array(ws, col, catalog_layout.model_first, catalog_layout.model_last, formula)

    # -- defined names and meta -------------------------------------------------
    for name, cell in layout.defined_names().items():
        col = "".join(ch for ch in cell.address if ch.isalpha())
        row = "".join(ch for ch in cell.address if ch.isdigit())
        wb.defined_names[name] = DefinedName(name, attr_text=f"{layout.qtitle(cell.sheet)}!${col}${row}")
    for name, ref in extra_names.items():
        wb.defined_names[name] = DefinedName(name, attr_text=ref)
    for name, address in calculator_names.items():
        col = "".join(ch for ch in address if ch.isalpha())
        row = "".join(ch for ch in address if ch.isdigit())
        wb.defined_names[name] = DefinedName(
            name, attr_text=f"{layout.qtitle('first_principles')}!${col}${row}")
    meta = wb.create_sheet(META_SHEET)
    for i, (key, value) in enumerate(layout.meta().items(), start=1):
        meta.cell(row=i, column=1, value=key)
        meta.cell(row=i, column=2, value=value)
    meta.sheet_state = "hidden"
    wb.active = 1
    if fresh:
        # Fixed document properties, so the same command builds the same workbook.
        wb.properties.creator = "scm-xl"
        wb.properties.created = BUILD_TIMESTAMP
        wb.properties.modified = BUILD_TIMESTAMP
    return wb


def _col(address: str) -> str:
    return "".join(ch for ch in address if ch.isalpha())


def _row(address: str) -> str:
    return "".join(ch for ch in address if ch.isdigit())


def own_sheet_titles(layout: Layout) -> list[str]:
    return ([layout.title(k) for k in SHEET_KEYS]
            + [module.SHEET_TITLES[layout.lang] for module in (replicates_sheet, lsq_sheet)] + [META_SHEET])


def remove_own_sheets(wb: Workbook, layout: Layout) -> None:
    """Remove scm-xl's sheets and defined names from a workbook, keeping everything else."""
    from scm_xl.workbook.first_principles import DEFINED_NAMES

    for title in own_sheet_titles(layout):
        if title in wb.sheetnames:
            wb.remove(wb[title])
    for name in [*layout.defined_names(), *DEFINED_NAMES, *replicates_sheet.DEFINED_NAMES, *lsq_sheet.DEFINED_NAMES]:
        if name in wb.defined_names:
            del wb.defined_names[name]


def _validations(ws: Worksheet, layout: Layout) -> None:
    def rng(key: str) -> str:
        return layout.raw_range(key, sheet=False, absolute=False)

    positive_int = DataValidation(type="whole", operator="greaterThanOrEqual", formula1="1", allow_blank=True,
                                  showErrorMessage=True, error="a whole number ≥ 1")
    count = DataValidation(type="whole", operator="greaterThanOrEqual", formula1="0", allow_blank=True,
                           showErrorMessage=True, error="a whole number ≥ 0")
    seconds = DataValidation(type="decimal", operator="greaterThan", formula1="0", allow_blank=True,
                             showErrorMessage=True, error="seconds > 0")
    override = DataValidation(type="list", formula1='"include,exclude"', allow_blank=True,
                              showErrorMessage=True, error="include, exclude or blank")
    for dv in (positive_int, count, seconds, override):
        ws.add_data_validation(dv)
    for key in ("concurrency", "requests_per_slot", "total_requests", "max_tokens"):
        positive_int.add(rng(key))
    for key in ("total_output_tokens", "ok_requests", "failed_requests", "rate_limited_requests", "repeat"):
        count.add(rng(key))
    seconds.add(rng("total_time_s"))
    override.add(rng("override"))


def _chart_grid(ws: Worksheet, layout: Layout, fx: Formulas, labels: dict[str, str]) -> None:
    grid_col = layout.chart_grid_col
    header_row = layout.chart_header_row
    first = layout.c_table_first
    last = first + layout.c_slots - 1
    _label(ws, f"{get_column_letter(grid_col)}{header_row - 1}", labels["chart_grid"], bold=True)
    level_col = get_column_letter(grid_col)
    ws[f"{level_col}{header_row}"] = "c \\ max_tokens"
    ws[f"{level_col}{header_row}"].font = BOLD
    _array(ws, level_col, first, last, f"={fx.ctab('level')}")
    chart = ScatterChart()
    chart.title = labels["chart_title"]
    chart.style = 2  # a multi-colour palette: one colour per max_tokens
    chart.x_axis.title = "concurrency"
    chart.y_axis.title = "TPS"
    chart.height = 9
    chart.width = 16
    xvalues = Reference(ws, min_col=grid_col, min_row=first, max_row=last)
    for slot in range(1, CHART_LENGTH_SLOTS + 1):
        header, body = fx.chart_column(slot)
        col = get_column_letter(grid_col + slot)
        _formula(ws, f"{col}{header_row}", header)
        _array(ws, col, first, last, body, number_format="0.00")
        values = Reference(ws, min_col=grid_col + slot, min_row=header_row, max_row=last)
        series = Series(values, xvalues, title_from_data=True)
        series.marker.symbol = "circle"
        chart.series.append(series)
    chart.x_axis.delete = False
    chart.y_axis.delete = False
    anchor_col = get_column_letter(grid_col + CHART_LENGTH_SLOTS + 2)
    ws.add_chart(chart, f"{anchor_col}3")


def _derivation(ws: Worksheet, layout: Layout, fx: Formulas, labels: dict[str, str]) -> None:
    _label(ws, "A1", labels["derivation_title"])
    ws["A1"].font = TITLE_FONT
    fw = layout.forward_rows
    _label(ws, f"A{fw['concurrency'] - 1}", labels["forward"], bold=True)
    _label(ws, f"C{fw['concurrency'] - 1}", labels["coefficient"], bold=True)
    forward = fx.forward()
    for key, label in (("concurrency", labels["concurrency"]), ("max_tokens", labels["max_tokens"]),
                       ("model", labels["model"])):
        _label(ws, f"A{fw[key]}", label)
        ws[f"B{fw[key]}"].fill = INPUT_FILL
    ws[f"B{fw['concurrency']}"] = DEFAULT_FORWARD["concurrency"]
    ws[f"B{fw['max_tokens']}"] = DEFAULT_FORWARD["max_tokens"]
    _formula(ws, f"C{fw['concurrency']}", forward["f"], "0.000")
    _formula(ws, f"C{fw['max_tokens']}", forward["k"], "0.000")
    _formula(ws, f"D{fw['model']}", forward["model"])
    _formula(ws, f"C{fw['model']}", forward["c"], "0.000")
    _label(ws, f"A{fw['tps']}", labels["forward_tps"], bold=True)
    _formula(ws, f"B{fw['tps']}", forward["tps"], "0.00")
    ws[f"B{fw['tps']}"].fill = KEY_FILL
    _label(ws, f"A{fw['missing']}", labels["forward_missing"])
    _formula(ws, f"B{fw['missing']}", forward["missing"])

    inv = layout.inverse_rows
    inverse = fx.inverse()
    _label(ws, f"A{inv['target_tps'] - 1}", labels["inverse"], bold=True)
    for key, label in (("target_tps", labels["target_tps"]), ("max_tokens", labels["max_tokens"]),
                       ("model", labels["model"])):
        _label(ws, f"A{inv[key]}", label)
        ws[f"B{inv[key]}"].fill = INPUT_FILL
    ws[f"B{inv['target_tps']}"] = DEFAULT_TARGET["tps"]
    ws[f"B{inv['max_tokens']}"] = DEFAULT_TARGET["max_tokens"]
    _formula(ws, f"C{inv['max_tokens']}", inverse["k"], "0.000")
    _formula(ws, f"D{inv['model']}", inverse["model"])
    _formula(ws, f"C{inv['model']}", inverse["c"], "0.000")
    for key in ("concurrency", "tps", "best_tps", "best_concurrency"):
        label_key = {"concurrency": "recommended_concurrency", "tps": "recommended_tps"}.get(key, key)
        _label(ws, f"A{inv[key]}", labels[label_key], bold=key in ("concurrency", "tps"))
        _formula(ws, f"B{inv[key]}", inverse[key], "0.00" if key in ("tps", "best_tps") else None)
    ws[f"B{inv['concurrency']}"].fill = KEY_FILL
    ws[f"B{inv['tps']}"].fill = KEY_FILL
    _label(ws, f"A{layout.inverse_table_header - 1}", labels["inverse_table"], bold=True)
    _header(ws, layout.inverse_table_header, 1, INVERSE_TABLE, layout.lang)
    first = layout.inverse_table_first
    last = first + layout.c_slots - 1
    for key in ("level", "predicted", "meets"):
        _array(ws, layout.table_col(INVERSE_TABLE, key), first, last, inverse[key],
               number_format="0.00" if key == "predicted" else None)
    ws.column_dimensions["A"].width = 36
    ws.column_dimensions["B"].width = 16
    ws.column_dimensions["C"].width = 12
    ws.column_dimensions["D"].width = 22


def save_atomic(wb: Workbook, path: str | Path, *, reproducible: bool = False) -> None:
    """Save to a temp file beside the target, then rename: nothing half-written.

    reproducible fixes the zip timestamps and the document's modified time, so the
    same build gives the same bytes (the committed template is checked that way).
    """
    path = Path(path)
    directory = path.parent if str(path.parent) else Path(".")
    if not directory.exists():
        raise InputError(f"folder does not exist: {directory}", path=str(path))
    fd, tmp = tempfile.mkstemp(prefix=".scm-xl-", suffix=".xlsx", dir=directory)
    os.close(fd)
    try:
        wb.save(tmp)
        if reproducible:
            _freeze_zip(tmp)
        mode = path.stat().st_mode & 0o777 if path.exists() else 0o666 & ~_umask()
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except OSError as exc:
        raise InputError(f"cannot write workbook: {exc.strerror or exc}", path=str(path)) from exc
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _freeze_zip(path: str) -> None:
    import re
    import zipfile

    with zipfile.ZipFile(path) as zf:
        members = [(info.filename, zf.read(info.filename)) for info in zf.infolist()]
    stamp = BUILD_TIMESTAMP.strftime("%Y-%m-%dT%H:%M:%SZ").encode()
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, data in members:
            if name == "docProps/core.xml":
                data = re.sub(rb"(<dcterms:modified[^>]*>)[^<]*(</dcterms:modified>)", rb"\g<1>" + stamp + rb"\g<2>",
                              data)
            info = zipfile.ZipInfo(name, date_time=BUILD_TIMESTAMP.timetuple()[:6])
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, data)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def build_template(path: str | Path, *, lang: str = "zh", rows: int | None = None) -> Path:
    layout = Layout(lang=lang, rows=rows) if rows else Layout(lang=lang)  # type: ignore[arg-type]
    wb = build_workbook(layout)
    save_atomic(wb, path, reproducible=True)
    return Path(path)
