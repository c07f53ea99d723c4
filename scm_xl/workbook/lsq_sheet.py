"""The least-squares sheet: scm_xl.lsq's fit and leave-one-out as live formulas.

    ln TPS = ln BaseTPS + ln f(c) + ln K_len(L) - ln C_model(m)

is fitted by ordinary least squares on the normal equations, with CSE array formulas
over fixed-size blocks (MMULT, MINVERSE, TRANSPOSE; LINEST is not needed):

  w     per raw row, 1 when the row is fitted: included, and its concurrency,
        max_tokens and model are levels of the calibration tables (the same rows as
        `lsq.fitted_rows`: levels beyond the table slots are not fitted).
  X     the design matrix, raw rows x p with p = 1 + c_slots + l_slots + m_slots: the
        intercept w, one column per concurrency slot, per max_tokens slot (1 at the
        row's level) and per model slot (-1: ln TPS falls with ln C_model). The base
        levels (the BaseConcurrency / BaseMaxTokens / BaseModel cells) and empty
        slots get all-zero columns: the chain's dummy coding.
  A     X'X + D, where D puts 1 on the diagonal of every all-zero column, so A is
        invertible whenever the data identify every other column; the coefficient
        of an all-zero column is then exactly 0 (factor 1), reported as
        "base" for a base level and "unidentified" otherwise.
  M     A^-1 = MINVERSE(A / 2^20) / 2^20. The scaling by a power of two is exact;
        it keeps `formulas`, which rounds MINVERSE's result to 15 decimals, at full
        precision when A's entries are large.
  beta  M X'y; fitted ln TPS X beta; leverage h_i = row sums of (X M) * X;
        leave-one-out prediction exp(y_i - e_i / (1 - h_i)) where h_i < 1 - 1e-9.

Aliased designs. When some level is confounded with others (X has linearly dependent
non-zero columns, e.g. a model measured only at a max_tokens the base model never
ran), A is singular. `lsq.fit` still reports the estimable parts through the SVD;
the sheet does not: its status reads "aliased", and it shows no coefficients, fitted
values, leverages or LOO figures (LOO verdict "insufficient"). The check is
max |A M - I| < 1e-6 on the engine's own inverse (or a MINVERSE error): A is an
integer matrix, so it is either invertible with a small residual or singular with
one of order 1. `expected_sheet` mirrors this with `fit.rank < fit.parameters`.

`expected_sheet` takes every figure from `lsq.fit` / `lsq.lsq_holdout` (coefficients,
sigma, dof, fitted values, leverages, LOO); the working blocks X, D, X'y and A are
mirrored from their definitions, and M is numpy's inverse of A.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from openpyxl.utils import get_column_letter
from openpyxl.worksheet.formula import ArrayFormula
from openpyxl.worksheet.worksheet import Worksheet

from scm_xl import lsq
from scm_xl.engines.base import CellValue
from scm_xl.model import Analysis, RowStatus, Settings, f_label, k_label, same_model, verdict_for
from scm_xl.workbook.layout import EXCELLENT_MAPE, EXCELLENT_MAX, GOOD_MAPE, GOOD_MAX, Layout

SHEET_TITLES: dict[str, str] = {"zh": "最小二乘", "en": "LeastSquares"}

SUMMARY_KEYS = ("status", "invertible", "observations", "parameters", "dof", "sigma", "base_tps",
                "loo_rows", "loo_missing", "loo_mape", "loo_max", "loo_verdict")
SUMMARY_FIRST = 4
SUMMARY_ROWS = {key: SUMMARY_FIRST + i for i, key in enumerate(SUMMARY_KEYS)}

DEFINED_NAMES = {
    "LSQ_Status": "status",
    "LSQ_BaseTPS": "base_tps",
    "LSQ_DOF": "dof",
    "LSQ_Sigma": "sigma",
    "LOO_Rows": "loo_rows",
    "LOO_MAPE": "loo_mape",
    "LOO_Max": "loo_max",
    "LOO_Verdict": "loo_verdict",
}
"""Workbook-scoped names -> summary keys."""

STATUSES = ("ok", "aliased", "no data")
ROLES = ("base", "identified", "unidentified")
SCALE = 1048576  # 2^20: MINVERSE(A / SCALE) / SCALE is exact scaling
INVERTIBLE_TOL = "0.000001"
LEVERAGE_ONE = "0.000000001"  # lsq._LEVERAGE_ONE, written out

COEF_KEYS = ("index", "kind", "level", "rows", "xty", "beta", "role", "value")
COEF_COLS = {key: get_column_letter(i + 1) for i, key in enumerate(COEF_KEYS)}
ROW_KEYS = ("exp_id", "fit", "ln_tps", "fitted_ln", "fitted_tps", "residual", "leverage", "loo_tps", "loo_pct",
            "loo_abs_pct")
ROW_COLS = {key: get_column_letter(i + 1) for i, key in enumerate(ROW_KEYS)}
WORK_COL = len(ROW_KEYS) + 2  # the design matrix, A and M start here (column L)

TEXTS: dict[str, dict[str, str]] = {
    "zh": {
        "title": "最小二乘标定：ln TPS = ln BaseTPS + ln f(c) + ln K_len(L) − ln C_model(m)，对全部纳入行做对数空间普通最小二乘",
        "note": "基准水平（系数标定表的基准并发、基准 max_tokens、基准模型）为参照，系数为 1；"
                "没有拟合行的水平为 unidentified。留一法（LOO）用帽子矩阵：杠杆 h = 1 的行没有 LOO 预测。"
                "状态 aliased：有水平相互混杂（设计矩阵列线性相关），本表不给出解。",
        "verdict_rule": "判定只看 LOO 预测误差：excellent: MAPE≤5% 且 最大≤10%；good: MAPE≤10% 且 最大≤20%；fail: 更差；"
                        "insufficient: 没有 LOO 行",
        "status": "状态（ok / aliased / no data）",
        "invertible": "法方程矩阵可逆（1 = 是）",
        "observations": "拟合行数",
        "parameters": "参数个数（秩）",
        "dof": "残差自由度",
        "sigma": "残差标准差 σ（对数空间）",
        "base_tps": "BaseTPS（最小二乘）",
        "loo_rows": "有 LOO 预测的行数",
        "loo_missing": "无 LOO 预测的行数（h = 1）",
        "loo_mape": "LOO 平均偏差率 MAPE %",
        "loo_max": "LOO 最大偏差率 %",
        "loo_verdict": "LOO 判定",
        "coef_title": "系数（按参数顺序；ln 系数为 0 表示参照水平或无法标定）",
        "rows_title": "逐行：拟合值、杠杆与留一法预测（与原始数据表逐行对齐）",
        "work_title": "计算过程：设计矩阵 X（列顺序同系数表 #）",
        "a_title": "A = XᵀX + D（D：全零列的对角置 1）",
        "m_title": "M = A⁻¹",
        "index": "#", "kind": "系数", "level": "水平", "rows": "拟合行数", "xty": "Xᵀy", "beta": "ln 系数",
        "role": "角色", "value": "系数值",
        "exp_id": "实验编号", "fit": "参与拟合", "ln_tps": "ln(TPS)", "fitted_ln": "拟合 ln(TPS)",
        "fitted_tps": "拟合TPS", "residual": "残差(ln)", "leverage": "杠杆 h", "loo_tps": "LOO预测TPS",
        "loo_pct": "LOO偏差率%", "loo_abs_pct": "|LOO偏差率|%",
    },
    "en": {
        "title": "Least squares: ln TPS = ln BaseTPS + ln f(c) + ln K_len(L) − ln C_model(m), OLS in logs on every "
                 "included row",
        "note": "The base levels (the calibration sheet's base concurrency, base max_tokens and base model) are the "
                "reference, factor 1; a level with no fitted rows is unidentified. Leave-one-out (LOO) uses the hat "
                "matrix: a row with leverage h = 1 has no LOO prediction. Status aliased: some levels are confounded "
                "(dependent design columns) and the sheet gives no solution.",
        "verdict_rule": "The verdict uses LOO prediction errors only: excellent: MAPE≤5% and max≤10%; good: MAPE≤10% "
                        "and max≤20%; fail: worse; insufficient: no LOO rows",
        "status": "status (ok / aliased / no data)",
        "invertible": "normal matrix invertible (1 = yes)",
        "observations": "fitted rows",
        "parameters": "parameters (rank)",
        "dof": "residual degrees of freedom",
        "sigma": "residual sigma (ln TPS)",
        "base_tps": "BaseTPS (least squares)",
        "loo_rows": "rows with a LOO prediction",
        "loo_missing": "rows without one (h = 1)",
        "loo_mape": "LOO MAPE %",
        "loo_max": "LOO max |error| %",
        "loo_verdict": "LOO verdict",
        "coef_title": "Coefficients (in parameter order; ln coefficient 0 = reference or unidentified)",
        "rows_title": "Per row: fit, leverage and leave-one-out prediction (aligned with the raw-data rows)",
        "work_title": "Workings: design matrix X (columns in the order of the coefficient table's #)",
        "a_title": "A = X'X + D (D: 1 on the diagonal of all-zero columns)",
        "m_title": "M = A^-1",
        "index": "#", "kind": "coefficient", "level": "level", "rows": "fitted rows", "xty": "X'y",
        "beta": "ln coefficient", "role": "role", "value": "value",
        "exp_id": "exp_id", "fit": "fitted", "ln_tps": "ln(TPS)", "fitted_ln": "fitted ln(TPS)",
        "fitted_tps": "fitted TPS", "residual": "residual (ln)", "leverage": "leverage h",
        "loo_tps": "LOO predicted TPS", "loo_pct": "LOO error %", "loo_abs_pct": "|LOO error| %",
    },
}


@dataclass(frozen=True)
class LsqLayout:
    """Where things are on the sheet, from the workbook layout's sizes."""

    layout: Layout

    @property
    def title(self) -> str:
        return SHEET_TITLES[self.layout.lang]

    @property
    def p(self) -> int:
        lo = self.layout
        return 1 + lo.c_slots + lo.l_slots + lo.m_slots

    # parameter blocks: (kind, first parameter index 0-based, size)
    @property
    def blocks(self) -> dict[str, tuple[int, int]]:
        lo = self.layout
        return {"BaseTPS": (0, 1), "f": (1, lo.c_slots), "K_len": (1 + lo.c_slots, lo.l_slots),
                "C_model": (1 + lo.c_slots + lo.l_slots, lo.m_slots)}

    coef_header = SUMMARY_FIRST + len(SUMMARY_KEYS) + 2

    @property
    def coef_first(self) -> int:
        return self.coef_header + 1

    @property
    def coef_last(self) -> int:
        return self.coef_first + self.p - 1

    @property
    def row_header(self) -> int:
        return self.coef_last + 3

    @property
    def row_first(self) -> int:
        return self.row_header + 1

    @property
    def row_last(self) -> int:
        return self.row_first + self.layout.rows - 1

    def summary_cell(self, key: str) -> str:
        return f"B{SUMMARY_ROWS[key]}"

    def summary_ref(self, key: str) -> str:
        return f"$B${SUMMARY_ROWS[key]}"

    def coef(self, key: str, first: int = 0, size: int | None = None) -> str:
        """The coefficient-table column `key`, parameters first..first+size-1 (default all)."""
        size = self.p - first if size is None else size
        col = COEF_COLS[key]
        return f"${col}${self.coef_first + first}:${col}${self.coef_first + first + size - 1}"

    def rows(self, key: str) -> str:
        col = ROW_COLS[key]
        return f"${col}${self.row_first}:${col}${self.row_last}"

    def work_col(self, j: int) -> str:
        """Column letter of design column j (0-based): X, A share these columns."""
        return get_column_letter(WORK_COL + j)

    def m_col(self, j: int) -> str:
        return get_column_letter(WORK_COL + self.p + 1 + j)

    def x(self, first: int = 0, size: int | None = None) -> str:
        size = self.p - first if size is None else size
        return (f"${self.work_col(first)}${self.row_first}:"
                f"${self.work_col(first + size - 1)}${self.row_last}")

    @property
    def a(self) -> str:
        return f"${self.work_col(0)}${self.coef_first}:${self.work_col(self.p - 1)}${self.coef_last}"

    @property
    def m(self) -> str:
        return f"${self.m_col(0)}${self.coef_first}:${self.m_col(self.p - 1)}${self.coef_last}"

    def defined_names(self) -> dict[str, str]:
        return {name: self.summary_cell(key) for name, key in DEFINED_NAMES.items()}


# ---------------------------------------------------------------------------
# Formulas
# ---------------------------------------------------------------------------


def _q(text: str) -> str:
    return '"' + text.replace('"', '""') + '"'


class _Refs:
    def __init__(self, ll: LsqLayout) -> None:
        lo = ll.layout
        self.ll = ll
        self.raw = lo.raw_range
        self.bc = lo.name_ref("BaseConcurrency")
        self.bl = lo.name_ref("BaseMaxTokens")
        self.bm = lo.name_ref("BaseModel")
        self.c_levels = lo.c_table_range("level")
        self.l_levels = lo.l_table_range("level")
        self.m_levels = lo.m_table_range("name")
        self.ok = ll.summary_ref("invertible")
        self.n_fit = ll.summary_ref("observations")
        self.index = ll.coef("index")
        self.identity = f"({self.index}=TRANSPOSE({self.index}))"

    def fit_possible(self) -> str:
        return f"AND({self.n_fit}>0,ISNUMBER({self.bc}),ISNUMBER({self.bl}),{self.bm}<>\"\")"


def design_formulas(ll: LsqLayout) -> dict[str, str]:
    """The four blocks of X, keyed by parameter kind (each one CSE array formula).

    One comparison per element (`formulas` spends microseconds on each): a row that is
    not fitted takes the value 0 and the base level the value -1, which match neither
    each other, nor any level, nor an empty slot's "".
    """
    r = _Refs(ll)
    raw = r.raw
    w = ll.rows("fit")

    def block(values: str, levels: str, base: str) -> str:
        return f"IF({w}=1,{values},0)=TRANSPOSE(IF({levels}={base},-1,{levels}))"

    return {
        "BaseTPS": f"={w}*1",
        "f": f"=({block(raw('concurrency'), r.c_levels, r.bc)})*1",
        "K_len": f"=({block(raw('max_tokens'), r.l_levels, r.bl)})*1",
        "C_model": f"=-({block(raw('model'), r.m_levels, r.bm)})",
    }


def matrix_formulas(ll: LsqLayout) -> dict[str, str]:
    """A and M (each one CSE array formula over p x p)."""
    r = _Refs(ll)
    x = ll.x()
    return {
        "a": f"=MMULT(TRANSPOSE({x}),{x})+{r.identity}*({ll.coef('rows')}=0)",
        "m": f"=IF({r.ok}=1,MINVERSE({ll.a}/{SCALE})/{SCALE},\"\")",
    }


def coefficient_formulas(ll: LsqLayout) -> dict[str, str]:
    """Coefficient-table columns that are one array formula over all parameters."""
    r = _Refs(ll)
    x = ll.x()
    y = ll.rows("ln_tps")
    role, beta = ll.coef("role"), ll.coef("beta")
    return {
        # a column's non-zero entries share one sign: |column . w| counts them
        "rows": f"=ABS(MMULT(TRANSPOSE({x}),{ll.x(0, 1)}))",
        "xty": f"=MMULT(TRANSPOSE({x}),IF(ISNUMBER({y}),{y},0))",
        "beta": f"=IF({r.ok}=1,MMULT({ll.m},{ll.coef('xty')}),\"\")",
        "value": f"=IF({role}=\"base\",1,IF({role}=\"identified\",EXP({beta}),\"\"))",
    }


def block_formulas(ll: LsqLayout) -> dict[str, dict[str, str]]:
    """Level and role of each parameter block: kind -> {"level": ..., "role": ...}."""
    r = _Refs(ll)
    out: dict[str, dict[str, str]] = {
        "BaseTPS": {"role": f"=IF({r.ok}=1,\"identified\",\"unidentified\")"},
    }
    for kind, levels, base in (("f", r.c_levels, r.bc), ("K_len", r.l_levels, r.bl), ("C_model", r.m_levels, r.bm)):
        first, size = ll.blocks[kind]
        rows = ll.coef("rows", first, size)
        out[kind] = {
            "level": f"={levels}",
            "role": (f"=IF({levels}=\"\",\"\",IF({levels}={base},\"base\","
                     f"IF(({r.ok}=1)*({rows}>0),\"identified\",\"unidentified\")))"),
        }
    return out


def row_formulas(ll: LsqLayout) -> dict[str, str]:
    """Per raw row (one array formula per column)."""
    r = _Refs(ll)
    raw = r.raw
    c = ll.rows
    x = ll.x()
    ones = f"({r.index}>0)*1"
    return {
        "exp_id": f"=IF({raw('present')}=1,{raw('exp_id')}&\"\",\"\")",
        "fit": (f"=({raw('included')}=1)*(COUNTIF({r.c_levels},{raw('concurrency')})>0)"
                f"*(COUNTIF({r.l_levels},{raw('max_tokens')})>0)*(COUNTIF({r.m_levels},{raw('model')})>0)"),
        "ln_tps": f"=IF({c('fit')}=1,{raw('ln_tps')},\"\")",
        "fitted_ln": f"=IF(({c('fit')}=1)*({r.ok}=1),MMULT({x},{ll.coef('beta')}),\"\")",
        "fitted_tps": f"=IF(ISNUMBER({c('fitted_ln')}),EXP({c('fitted_ln')}),\"\")",
        "residual": f"=IF(ISNUMBER({c('fitted_ln')}),{c('ln_tps')}-{c('fitted_ln')},\"\")",
        "leverage": f"=IF(ISNUMBER({c('fitted_ln')}),MMULT(MMULT({x},{ll.m})*{x},{ones}),\"\")",
        "loo_tps": (f"=IF(ISNUMBER({c('leverage')}),IF({c('leverage')}<1-{LEVERAGE_ONE},"
                    f"EXP({c('ln_tps')}-{c('residual')}/(1-{c('leverage')})),\"\"),\"\")"),
        "loo_pct": f"=IF(ISNUMBER({c('loo_tps')}),({raw('tps')}-{c('loo_tps')})/{raw('tps')}*100,\"\")",
        "loo_abs_pct": f"=IF(ISNUMBER({c('loo_pct')}),ABS({c('loo_pct')}),\"\")",
    }


def summary_formulas(ll: LsqLayout) -> dict[str, str]:
    r = _Refs(ll)
    s = ll.summary_ref
    ok = r.ok
    return {
        "status": f"=IF({r.fit_possible()},IF({ok}=1,\"ok\",\"aliased\"),\"no data\")",
        "invertible": (
            f"=IF({r.fit_possible()},IFERROR(IF(MAX(ABS(MMULT({ll.a},MINVERSE({ll.a}/{SCALE})/{SCALE})"
            f"-{r.identity}))<{INVERTIBLE_TOL},1,0),0),0)"
        ),
        "observations": f"=SUM({ll.rows('fit')})",
        "parameters": f"=IF({ok}=1,COUNTIF({ll.coef('rows')},\">0\"),\"\")",
        "dof": f"=IF({ok}=1,{s('observations')}-{s('parameters')},\"\")",
        "sigma": f"=IF({ok}=1,IF({s('dof')}>0,SQRT(SUMSQ({ll.rows('residual')})/{s('dof')}),\"\"),\"\")",
        "base_tps": f"=IF({ok}=1,EXP(${COEF_COLS['beta']}${ll.coef_first}),\"\")",
        "loo_rows": f"=COUNT({ll.rows('loo_pct')})",
        "loo_missing": f"=IF({ok}=1,{s('observations')}-{s('loo_rows')},\"\")",
        "loo_mape": f"=IF({s('loo_rows')}>0,AVERAGE({ll.rows('loo_abs_pct')}),\"\")",
        "loo_max": f"=IF({s('loo_rows')}>0,MAX({ll.rows('loo_abs_pct')}),\"\")",
        "loo_verdict": (
            f"=IF({s('loo_rows')}=0,\"insufficient\","
            f"IF(AND({s('loo_mape')}<={EXCELLENT_MAPE:g},{s('loo_max')}<={EXCELLENT_MAX:g}),\"excellent\","
            f"IF(AND({s('loo_mape')}<={GOOD_MAPE:g},{s('loo_max')}<={GOOD_MAX:g}),\"good\",\"fail\")))"
        ),
    }


# ---------------------------------------------------------------------------
# Writing the sheet
# ---------------------------------------------------------------------------


def _array_block(ws: Worksheet, ref: str, formula: str) -> None:
    ws[ref.replace("$", "").split(":")[0]] = ArrayFormula(ref.replace("$", ""), formula)


def write_sheet(ws: Worksheet, layout: Layout) -> dict[str, str]:
    """Write the least-squares sheet into `ws`; return defined name -> "A1" on it."""
    from scm_xl.workbook.styles import (
        BOLD, FORMULA_FILL, HEADER_FILL, HEADER_FONT, KEY_FILL, TITLE_FONT, _array, _formula,
    )

    ll = LsqLayout(layout)
    t = TEXTS[layout.lang]
    ws["A1"] = t["title"]
    ws["A1"].font = TITLE_FONT
    ws["A2"] = t["note"]
    ws["A3"] = t["verdict_rule"]

    summary = summary_formulas(ll)
    formats = {"sigma": "0.0000", "base_tps": "0.00", "loo_mape": "0.00", "loo_max": "0.00"}
    for key, row in SUMMARY_ROWS.items():
        ws[f"A{row}"] = t[key]
        _formula(ws, f"B{row}", summary[key], formats.get(key), array=key == "invertible")
        if key in DEFINED_NAMES.values():
            ws[f"B{row}"].fill = KEY_FILL
    for key in ("status", "loo_mape", "loo_max", "loo_verdict"):
        ws[f"A{SUMMARY_ROWS[key]}"].font = BOLD

    def header(row: int, cols: dict[str, str]) -> None:
        for key, col in cols.items():
            cell = ws[f"{col}{row}"]
            cell.value = t[key]
            cell.font = HEADER_FONT
            cell.fill = HEADER_FILL

    # -- coefficient table ----------------------------------------------------
    ws[f"A{ll.coef_header - 1}"] = t["coef_title"]
    ws[f"A{ll.coef_header - 1}"].font = BOLD
    header(ll.coef_header, COEF_COLS)
    for kind, (first, size) in ll.blocks.items():
        for i in range(size):
            row = ll.coef_first + first + i
            ws[f"{COEF_COLS['index']}{row}"] = first + i + 1
            ws[f"{COEF_COLS['kind']}{row}"] = kind
    coef_formats = {"xty": "0.000", "beta": "0.000000", "value": "0.0000"}
    for key, formula in coefficient_formulas(ll).items():
        _array(ws, COEF_COLS[key], ll.coef_first, ll.coef_last, formula, number_format=coef_formats.get(key))
    for kind, formulas in block_formulas(ll).items():
        first, size = ll.blocks[kind]
        for key, formula in formulas.items():
            _array(ws, COEF_COLS[key], ll.coef_first + first, ll.coef_first + first + size - 1, formula)

    # -- per-row table --------------------------------------------------------
    ws[f"A{ll.row_header - 1}"] = t["rows_title"]
    ws[f"A{ll.row_header - 1}"].font = BOLD
    header(ll.row_header, ROW_COLS)
    row_formats = {"ln_tps": "0.0000", "fitted_ln": "0.0000", "fitted_tps": "0.00", "residual": "0.0000",
                   "leverage": "0.000", "loo_tps": "0.00", "loo_pct": "0.0", "loo_abs_pct": "0.0"}
    for key, formula in row_formulas(ll).items():
        _array(ws, ROW_COLS[key], ll.row_first, ll.row_last, formula, number_format=row_formats.get(key),
               column_style=True)

    # -- workings: X, A, M ----------------------------------------------------
    ws[f"{ll.work_col(0)}{ll.row_header - 1}"] = t["work_title"]
    ws[f"{ll.work_col(0)}{ll.coef_header - 1}"] = t["a_title"]
    ws[f"{ll.m_col(0)}{ll.coef_header - 1}"] = t["m_title"]
    for j in range(ll.p):
        for col, row in ((ll.work_col(j), ll.row_header), (ll.work_col(j), ll.coef_header),
                         (ll.m_col(j), ll.coef_header)):
            ws[f"{col}{row}"] = j + 1
            ws[f"{col}{row}"].font = BOLD
        ws.column_dimensions[ll.work_col(j)].fill = FORMULA_FILL
        ws.column_dimensions[ll.work_col(j)].width = 6
        ws.column_dimensions[ll.m_col(j)].width = 9
    for kind, formula in design_formulas(ll).items():
        first, size = ll.blocks[kind]
        _array_block(ws, ll.x(first, size), formula)
    matrices = matrix_formulas(ll)
    _array_block(ws, ll.a, matrices["a"])
    _array_block(ws, ll.m, matrices["m"])
    for j in range(ll.p):
        ws[f"{ll.m_col(j)}{ll.coef_first}"].fill = FORMULA_FILL

    ws.freeze_panes = "B1"
    widths = {"A": 34, "B": 16, "C": 14, "D": 12, "E": 12, "F": 12, "G": 13, "H": 14, "I": 11, "J": 12}
    for col, width in widths.items():
        ws.column_dimensions[col].width = width
    return ll.defined_names()


# ---------------------------------------------------------------------------
# The reference: what each formula cell should hold
# ---------------------------------------------------------------------------


@dataclass
class _Mirror:
    """The sheet's blocks as the reference computes them."""

    w: np.ndarray  # per sheet-row slot (layout.rows)
    x: np.ndarray  # rows x p
    y: np.ndarray  # ln TPS of fitted rows, 0 elsewhere
    a: np.ndarray
    levels: list[tuple[str, object]]  # (kind, level or None) per parameter


def _settings_for(layout: Layout, settings: Settings) -> Settings:
    return dataclasses.replace(settings, concurrency_slots=layout.c_slots, length_slots=layout.l_slots,
                               model_slots=layout.m_slots)


def expected_sheet(layout: Layout, analysis: Analysis, *,
                   sheet_rows: Sequence[int] | None = None) -> dict[tuple[str, str], CellValue]:
    """Every formula cell of the sheet, from `lsq.fit` on the analysis's statuses.

    `sheet_rows` is the raw-sheet row of each status (default: consecutive from the
    first raw row, as `io.write_rows` puts them).
    """
    ll = LsqLayout(layout)
    statuses = analysis.statuses
    rows = list(sheet_rows) if sheet_rows is not None else [layout.raw_first + i for i in range(len(statuses))]
    if len(rows) != len(statuses):
        raise ValueError("sheet_rows must give one raw-sheet row per status")
    settings = _settings_for(layout, analysis.settings)
    fit = lsq.fit(statuses, settings)
    used = {id(s) for s in lsq.fitted_rows(statuses, settings)}
    by_slot: dict[int, RowStatus] = {row - layout.raw_first: s for s, row in zip(statuses, rows)}
    mirror = _mirror(ll, analysis, by_slot, used)
    ok = fit.parameters > 0 and fit.rank == fit.parameters
    title = ll.title
    out: dict[tuple[str, str], CellValue] = {}

    def put(address: str, value: CellValue) -> None:
        out[(title, address)] = value

    # -- workings ---------------------------------------------------------------
    for i in range(layout.rows):
        for j in range(ll.p):
            put(f"{ll.work_col(j)}{ll.row_first + i}", float(mirror.x[i, j]))
    inverse = np.linalg.inv(mirror.a) if ok else None
    for i in range(ll.p):
        for j in range(ll.p):
            put(f"{ll.work_col(j)}{ll.coef_first + i}", float(mirror.a[i, j]))
            put(f"{ll.m_col(j)}{ll.coef_first + i}", float(inverse[i, j]) if inverse is not None else None)

    # -- coefficients -------------------------------------------------------------
    rows_per_column = (mirror.x * mirror.x).sum(axis=0)
    xty = mirror.x.T @ mirror.y
    cal = analysis.calibration
    bases = {"f": cal.base_concurrency, "K_len": cal.base_max_tokens, "C_model": cal.base_model}
    for j, (kind, level) in enumerate(mirror.levels):
        row = ll.coef_first + j
        if kind != "BaseTPS":
            put(f"{COEF_COLS['level']}{row}", _cell(level))
        put(f"{COEF_COLS['rows']}{row}", float(rows_per_column[j]))
        put(f"{COEF_COLS['xty']}{row}", float(xty[j]))
        value: CellValue = None
        beta: CellValue = None
        if kind == "BaseTPS":
            role: CellValue = "identified" if ok else "unidentified"
        elif level is None:
            role = None
        elif _same_level(kind, level, bases[kind]):
            role = "base"
        else:
            role = "identified" if ok and rows_per_column[j] > 0 else "unidentified"
        if ok:
            beta = 0.0
            if role == "identified":
                coefficient = _coefficient(fit, kind, level)
                assert coefficient is not None and coefficient.value is not None, (kind, level)
                value = coefficient.value
                beta = math.log(coefficient.value)
        if role == "base":
            value = 1.0
        put(f"{COEF_COLS['role']}{row}", role)
        put(f"{COEF_COLS['beta']}{row}", beta)
        put(f"{COEF_COLS['value']}{row}", value)

    # -- per row --------------------------------------------------------------------
    fits = {id(r.status): r for r in fit.rows} if ok else {}
    for i in range(layout.rows):
        row = ll.row_first + i
        s = by_slot.get(i)
        values: dict[str, CellValue] = {key: None for key in ROW_KEYS}
        values["fit"] = float(mirror.w[i])
        if s is not None:
            values["exp_id"] = s.exp_id or None
            if mirror.w[i]:
                values["ln_tps"] = s.ln_tps
            r = fits.get(id(s))
            if r is not None:
                values.update({
                    "fitted_ln": math.log(r.fitted_tps), "fitted_tps": r.fitted_tps,
                    "residual": r.residual_log, "leverage": r.leverage, "loo_tps": r.loo_predicted_tps,
                    "loo_pct": r.loo_error_pct,
                    "loo_abs_pct": abs(r.loo_error_pct) if r.loo_error_pct is not None else None,
                })
        for key, value in values.items():
            put(f"{ROW_COLS[key]}{row}", value)

    # -- summary ------------------------------------------------------------------------
    n_fit = len(used)
    possible = (n_fit > 0 and cal.base_concurrency is not None and cal.base_max_tokens is not None
                and cal.base_model is not None)
    holdout = lsq.lsq_holdout(fit)
    loo_rows = holdout.predicted_rows if ok else 0
    mape = holdout.mape_pct if ok else None
    worst = holdout.max_pct if ok else None
    base = fit.coefficient(lsq.BASE_LABEL)
    summary: dict[str, CellValue] = {
        "status": ("ok" if ok else "aliased") if possible else "no data",
        "invertible": 1.0 if ok else 0.0,
        "observations": float(n_fit),
        "parameters": float(fit.rank) if ok else None,
        "dof": float(fit.dof) if ok else None,
        "sigma": fit.sigma if ok else None,
        "base_tps": base.value if ok and base is not None else None,
        "loo_rows": float(loo_rows),
        "loo_missing": float(holdout.missing_rows) if ok else None,
        "loo_mape": mape,
        "loo_max": worst,
        "loo_verdict": verdict_for(mape, worst, loo_rows),
    }
    for key, value in summary.items():
        put(ll.summary_cell(key), value)
    return out


def _mirror(ll: LsqLayout, analysis: Analysis, by_slot: dict[int, RowStatus], used: set[int]) -> _Mirror:
    lo = ll.layout
    cal = analysis.calibration
    c_levels: list[object] = [lv.concurrency for lv in cal.concurrency_levels[:lo.c_slots]]
    l_levels: list[object] = [lv.max_tokens for lv in cal.length_levels[:lo.l_slots]]
    m_levels: list[object] = [m.model for m in cal.models[:lo.m_slots]]
    levels: list[tuple[str, object]] = [("BaseTPS", None)]
    for kind, values, size in (("f", c_levels, lo.c_slots), ("K_len", l_levels, lo.l_slots),
                               ("C_model", m_levels, lo.m_slots)):
        levels += [(kind, values[i] if i < len(values) else None) for i in range(size)]
    bases = {"f": cal.base_concurrency, "K_len": cal.base_max_tokens, "C_model": cal.base_model}
    n = lo.rows
    x = np.zeros((n, ll.p))
    w = np.zeros(n)
    y = np.zeros(n)
    for i in range(n):
        s = by_slot.get(i)
        if s is None or id(s) not in used:
            continue
        w[i] = 1.0
        y[i] = s.ln_tps  # type: ignore[assignment]
        x[i, 0] = 1.0
        own = {"f": s.concurrency, "K_len": s.max_tokens, "C_model": s.model}
        for j, (kind, level) in enumerate(levels[1:], start=1):
            if level is None or _same_level(kind, level, bases[kind]):
                continue
            if _same_level(kind, own[kind], level):
                x[i, j] = -1.0 if kind == "C_model" else 1.0
    a = x.T @ x
    a += np.diag((np.diag(a) == 0).astype(float))
    return _Mirror(w=w, x=x, y=y, a=a, levels=levels)


def _same_level(kind: str, a: object, b: object) -> bool:
    if a is None or b is None:
        return False
    if kind == "C_model":
        return same_model(str(a), str(b))
    return a == b


def _coefficient(fit: lsq.LsqFit, kind: str, level: object) -> lsq.Coefficient | None:
    if kind == "BaseTPS":
        return fit.coefficient(lsq.BASE_LABEL)
    if kind == "f":
        return fit.coefficient(f_label(level))  # type: ignore[arg-type]
    if kind == "K_len":
        return fit.coefficient(k_label(level))  # type: ignore[arg-type]
    return next((c for c in fit.coefficients if c.kind == "c_model" and same_model(str(c.level), str(level))), None)


def _cell(value: object) -> CellValue:
    if value is None:
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return str(value)


__all__ = [
    "DEFINED_NAMES", "ROLES", "SHEET_TITLES", "STATUSES", "LsqLayout", "expected_sheet", "write_sheet",
]
