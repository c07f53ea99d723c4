"""The least-squares sheet: scm_xl.lsq's fit and leave-one-out as live formulas.

Long because the sheet's layout, its formulas and its expected values are one unit: each
formula sits next to the reference value it must equal.

    ln TPS = ln BaseTPS + ln f(c) + ln K_len(L) - ln C_model(m) + ln K_in(P)

is fitted by ordinary least squares on the normal equations. The design matrix X (raw
rows x p, p = 1 + c_slots + l_slots + m_slots + p_slots) has at most five non-zero entries
per row: the intercept, +1 in the column of the row's concurrency slot, max_tokens slot and
prompt-level slot (the K_in table's), and -1 in its model slot's column (ln TPS falls with
ln C_model). Without prompt levels the K_in block's columns are all zero. The sheet therefore
never writes X out. Every per-row quantity is one ordinary formula in its own row (no
multi-cell array formula; IronCalc, LibreOffice and `formulas` compute them alike):

  fit   per raw row, 1 when the row is fitted: included, and its concurrency,
        max_tokens, model and prompt level are levels of the calibration tables (the same
        rows as `lsq.fitted_rows`: levels beyond the table slots are not fitted).
  f#, K#, C#, P#   the parameter number (the coefficient table's #) of the row's non-zero
        column in each block; 0 at a base level (the BaseConcurrency / BaseMaxTokens /
        BaseModel / BasePromptLevel cells: the chain's dummy coding, an all-zero column)
        and for every row when there are no prompt levels.
  A     X'X + D, p x p ordinary formulas: the diagonal is the number of fitted rows of
        the column (1 for an all-zero column: D), the intercept row and column are
        those counts signed, a cross-block entry is COUNTIFS over two # columns, and
        within a block X's columns never share a row, so those entries are the constant
        0. A is invertible whenever the data identify every non-zero column; the
        coefficient of an all-zero column is then exactly 0 (factor 1), reported as
        "base" for a base level and "unidentified" otherwise.
  X'y   SUMIFS of the fitted rows' ln TPS over a # column.
  M     A^-1 = MINVERSE(A / 2^20) / 2^20, the one array formula (p x p). The scaling by
        a power of two is exact; it keeps `formulas`, which rounds MINVERSE's result to
        15 decimals, at full precision when A's entries are large.
  beta  SUMPRODUCT of M's column and X'y (M is symmetric); per row the fitted ln TPS is
        the sum of the row's betas, and its leverage h = x M x' the fifteen-term sum over its
        non-zero columns (INDEX into M); leave-one-out prediction exp(y - e / (1 - h))
        where h < 1 - 1e-9.

Cost: a few cells per raw row, each reading O(1) cells, plus p^2 COUNTIFS (skipped
where either column has no fitted rows): linear in the number of rows.

Aliased designs. When some level is confounded with others (X has linearly dependent
non-zero columns, e.g. a model measured only at a max_tokens the base model never
ran), A is singular. `lsq.fit` still reports the estimable parts through the SVD;
the sheet does not: its status reads "aliased", and it shows no coefficients, fitted
values, leverages or LOO figures (LOO verdict "insufficient"). The check is
max |A M - I| < 1e-6 on the engine's own inverse (or a MINVERSE error), in one
single-cell array formula: A is an integer matrix, so it is either invertible with a
small residual or singular with one of order 1. `expected_sheet` mirrors this with
`fit.rank < fit.parameters`.

`expected_sheet` takes every figure from `lsq.fit` / `lsq.lsq_holdout` (coefficients,
sigma, dof, fitted values, leverages, LOO); the workings (# columns, X'y, A) are
mirrored from their definitions, and M is numpy's inverse of A.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

import numpy as np
from openpyxl.utils import get_column_letter
from openpyxl.worksheet.formula import ArrayFormula
from openpyxl.worksheet.properties import Outline
from openpyxl.worksheet.worksheet import Worksheet

from scm_xl import lsq
from scm_xl.engines.base import CellValue
from scm_xl.model import (
    Analysis, Calibration, ConcurrencyLevel, LengthLevel, ModelLevel, PromptLevel, RowStatus, Settings, f_label, k_label,
    p_label, same_model, verdict_for,
)
from scm_xl.rules import EXCELLENT_MIN_ROWS, verdict_rule
from scm_xl.workbook.layout import EXCELLENT_MAPE, EXCELLENT_MAX, GOOD_MAPE, GOOD_MAX, Layout
from scm_xl.workbook.sheet import Building, Checking, SheetSpec

if TYPE_CHECKING:
    from scm_xl.workbook.stamp import PendingFills

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
SCALE = 1048576  # 2^20: MINVERSE(A / SCALE) / SCALE is exact scaling
INVERTIBLE_TOL = "0.000001"
LEVERAGE_ONE = "0.000000001"  # lsq._LEVERAGE_ONE, written out

COEF_KEYS = ("index", "kind", "level", "rows", "xty", "beta", "role", "value")
COEF_COLS = {key: get_column_letter(i + 1) for i, key in enumerate(COEF_KEYS)}
ROW_KEYS = ("exp_id", "fit", "ln_tps", "fitted_ln", "fitted_tps", "residual", "leverage", "loo_tps", "loo_pct",
            "loo_abs_pct")
ROW_COLS = {key: get_column_letter(i + 1) for i, key in enumerate(ROW_KEYS)}
TEXT_KEYS = ("kind", "role", "exp_id")  # columns of names: their headers sit left, the others over numbers
# The printed columns' widths (characters).
WIDTHS = {"A": 34, "B": 16, "C": 14, "D": 12, "E": 12, "F": 12, "G": 13, "H": 14, "I": 11, "J": 12}
WORK_COL = len(ROW_KEYS) + 2  # the workings (# columns, A and M) start here (column L)
# Per raw row: the parameter number of the row's non-zero column in each block (workings).
PARAM_KEYS = {"f": "f_param", "K_len": "k_param", "C_model": "c_param", "K_in": "p_param"}
SIGNS = {"BaseTPS": 1, "f": 1, "K_len": 1, "C_model": -1, "K_in": 1}  # the sign of a block's non-zero entries in X

TEXTS: dict[str, dict[str, str]] = {
    "zh": {
        "title": "最小二乘标定：ln TPS = ln BaseTPS + ln f(c) + ln K_len(L) + ln K_in(P) − ln C_model(m)，"
                 "对全部纳入行做对数空间普通最小二乘",
        "note": "基准水平（系数标定表的基准并发、基准 max_tokens、基准模型、基准提示长度档位）为参照，系数为 1；"
                "没有拟合行的水平为 unidentified。留一法（LOO）用帽子矩阵：杠杆 h = 1 的行没有 LOO 预测。"
                "状态 aliased：有水平相互混杂（设计矩阵列线性相关），本表不给出解。",
        "verdict_rule": "判定只看 LOO 预测误差：" + verdict_rule("zh", " LOO 行"),
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
        "work_title": "计算过程（已折叠）：每行在设计矩阵 X 中非零列的参数编号 #（0 = 基准水平）",
        "a_title": "A = XᵀX + D（D：全零列的对角置 1）",
        "m_title": "M = A⁻¹",
        "index": "#", "kind": "系数", "level": "水平", "rows": "拟合行数", "xty": "Xᵀy", "beta": "ln 系数",
        "role": "角色", "value": "系数值",
        "exp_id": "实验编号", "fit": "参与拟合", "ln_tps": "ln(TPS)", "fitted_ln": "拟合 ln(TPS)",
        "fitted_tps": "拟合TPS", "residual": "残差(ln)", "leverage": "杠杆 h", "loo_tps": "LOO预测TPS",
        "loo_pct": "LOO偏差率%", "loo_abs_pct": "|LOO偏差率|%",
        "f_param": "f #", "k_param": "K_len #", "c_param": "C_model #", "p_param": "K_in #",
    },
    "en": {
        "title": "Least squares: ln TPS = ln BaseTPS + ln f(c) + ln K_len(L) + ln K_in(P) − ln C_model(m), OLS in "
                 "logs on every included row",
        "note": "The base levels (the calibration sheet's base concurrency, base max_tokens, base model and base "
                "prompt level) are the "
                "reference, factor 1; a level with no fitted rows is unidentified. Leave-one-out (LOO) uses the hat "
                "matrix: a row with leverage h = 1 has no LOO prediction. Status aliased: some levels are confounded "
                "(dependent design columns) and the sheet gives no solution.",
        "verdict_rule": "The verdict uses LOO prediction errors only: " + verdict_rule("en", "LOO rows"),
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
        "work_title": "Workings (collapsed): each row's parameter number (#) of its non-zero design columns "
                      "(0 = base level)",
        "a_title": "A = X'X + D (D: 1 on the diagonal of all-zero columns)",
        "m_title": "M = A^-1",
        "index": "#", "kind": "coefficient", "level": "level", "rows": "fitted rows", "xty": "X'y",
        "beta": "ln coefficient", "role": "role", "value": "value",
        "exp_id": "exp_id", "fit": "fitted", "ln_tps": "ln(TPS)", "fitted_ln": "fitted ln(TPS)",
        "fitted_tps": "fitted TPS", "residual": "residual (ln)", "leverage": "leverage h",
        "loo_tps": "LOO predicted TPS", "loo_pct": "LOO error %", "loo_abs_pct": "|LOO error| %",
        "f_param": "f #", "k_param": "K_len #", "c_param": "C_model #", "p_param": "K_in #",
    },
}


@functools.lru_cache(maxsize=32)
def _parameter_kinds(lsq: LsqLayout) -> tuple[str, ...]:
    """Each parameter's block, by its index (the blocks lie one after another from 0): worked out
    once per layout, as `kind_of` is asked for every cell of the sheet's p x p matrices."""
    return tuple(kind for kind, (_, size) in lsq.blocks.items() for _ in range(size))


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
        return 1 + lo.c_slots + lo.l_slots + lo.m_slots + lo.p_slots

    # parameter blocks: (kind, first parameter index 0-based, size)
    @property
    def blocks(self) -> dict[str, tuple[int, int]]:
        lo = self.layout
        return {"BaseTPS": (0, 1), "f": (1, lo.c_slots), "K_len": (1 + lo.c_slots, lo.l_slots),
                "C_model": (1 + lo.c_slots + lo.l_slots, lo.m_slots),
                "K_in": (1 + lo.c_slots + lo.l_slots + lo.m_slots, lo.p_slots)}

    def kind_of(self, j: int) -> str:
        """The block of parameter j (0-based)."""
        kinds = _parameter_kinds(self)
        if not 0 <= j < len(kinds):
            raise IndexError(f"parameter {j} of {len(kinds)}")
        return kinds[j]

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

    def calc_row(self, row: int) -> int:
        """The workings-sheet row of the same raw row as sheet row `row` of the per-row table."""
        return row - self.row_first + self.layout.raw_first

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
        """Column letter of A's column j (0-based); the # columns of the per-row rows are the first four."""
        return get_column_letter(WORK_COL + j)

    def m_col(self, j: int) -> str:
        return get_column_letter(WORK_COL + self.p + 1 + j)

    def param_col(self, kind: str) -> str:
        return self.work_col(list(PARAM_KEYS).index(kind))

    def params(self, kind: str) -> str:
        """The # column of a block, over the per-row rows."""
        col = self.param_col(kind)
        return f"${col}${self.row_first}:${col}${self.row_last}"

    @property
    def a(self) -> str:
        return f"${self.work_col(0)}${self.coef_first}:${self.work_col(self.p - 1)}${self.coef_last}"

    @property
    def m(self) -> str:
        return f"${self.m_col(0)}${self.coef_first}:${self.m_col(self.p - 1)}${self.coef_last}"

    def a_is_formula(self, i: int, j: int) -> bool:
        """Whether A[i, j] is a formula: all but a block's off-diagonal entries, which are the constant 0."""
        return i == j or i == 0 or j == 0 or self.kind_of(i) != self.kind_of(j)

    @property
    def print_area(self) -> str:
        """What a person reads: summary, coefficient table and the per-row table (columns A..J)."""
        return f"A1:{ROW_COLS[ROW_KEYS[-1]]}{self.row_last}"

    def defined_names(self) -> dict[str, str]:
        return {name: self.summary_cell(key) for name, key in DEFINED_NAMES.items()}


# ---------------------------------------------------------------------------
# Formulas
# ---------------------------------------------------------------------------


def _cell_ref(range_ref: str, offset: int) -> str:
    """Cell `offset` (0-based) of a one-column range such as 'Sheet'!$A$5:$A$20."""
    sheet, _, cells = range_ref.rpartition("!")
    first = cells.split(":")[0]
    col = first.rstrip("0123456789")
    row = int(first[len(col):])
    col = col.rstrip("$")
    return f"{sheet}!{col}${row + offset}" if sheet else f"{col}${row + offset}"


class _Refs:
    def __init__(self, ll: LsqLayout) -> None:
        lo = ll.layout
        self.ll = ll
        self.bc = lo.name_ref("BaseConcurrency")
        self.bl = lo.name_ref("BaseMaxTokens")
        self.bm = lo.name_ref("BaseModel")
        self.bp = lo.name_ref("BasePromptLevel")
        self.levels = {"f": lo.c_table_range("level"), "K_len": lo.l_table_range("level"),
                       "C_model": lo.m_table_range("name"), "K_in": lo.p_table_range("level")}
        self.bases = {"f": self.bc, "K_len": self.bl, "C_model": self.bm, "K_in": self.bp}
        self.raw_keys = {"f": "concurrency", "K_len": "max_tokens", "C_model": "model", "K_in": "p_level"}
        self.ok = ll.summary_ref("invertible")
        self.n_fit = ll.summary_ref("observations")
        self.index = ll.coef("index")
        self.identity = f"({self.index}=TRANSPOSE({self.index}))"

    def fit_possible(self) -> str:
        return f"AND({self.n_fit}>0,ISNUMBER({self.bc}),ISNUMBER({self.bl}),{self.bm}<>\"\")"


def row_formulas(ll: LsqLayout, row: int) -> dict[str, str]:
    """Every formula of per-row table row `row` (row_first..row_last): ordinary formulas that
    read their own raw row (the workings sheet, by position) and fixed cells."""
    r = _Refs(ll)
    lo = ll.layout
    calc = ll.calc_row(row)

    def raw(key: str) -> str:
        return lo.raw_cell(key, calc)

    def me(key: str) -> str:
        col = ROW_COLS[key] if key in ROW_COLS else ll.param_col(next(k for k, v in PARAM_KEYS.items() if v == key))
        return f"${col}{row}"

    fit = me("fit")
    # a row's prompt level is in the K_in table when it has a slot (0 with no levels at all). A level
    # is looked up with MATCH, not counted with COUNTIF: IronCalc 0.9.1 measures the whole sheet a
    # COUNTIF's range lies on at every call (tens of microseconds a row on the calibration sheet)
    in_tables = [f"ISNUMBER(MATCH({raw(r.raw_keys[k])},{r.levels[k]},0))" for k in PARAM_KEYS if k != "K_in"]
    in_tables.append(f"ISNUMBER({raw('p_index')})")
    out = {
        "exp_id": f"=IF({raw('present')},{raw('exp_id')}&\"\",\"\")",
        "fit": f"=IF({raw('present')},IF({raw('included')}=1," + "*".join(in_tables) + ",0),\"\")",
    }
    for kind, key in PARAM_KEYS.items():
        first, _ = ll.blocks[kind]
        value = raw(r.raw_keys[kind])
        if kind == "K_in":  # the slot is the K_in table's: no MATCH needed
            out[key] = (f"=IF({fit}=1,IF({raw('p_index')}=0,0,IF({value}={r.bases[kind]},0,"
                        f"{raw('p_index')}+{first})),\"\")")
            continue
        out[key] = (f"=IF({fit}=1,IF({value}={r.bases[kind]},0,MATCH({value},{r.levels[kind]},0)+{first}),"
                    f"\"\")")
    pf, pk, pc, pp = (me(PARAM_KEYS[k]) for k in ("f", "K_len", "C_model", "K_in"))
    beta = ll.coef("beta")

    def b(p: str) -> str:
        return f"INDEX({beta},MAX({p},1))*({p}>0)"

    def m(a: str, c: str) -> str:
        if a == "1":
            return f"INDEX({ll.m},1,MAX({c},1))*({c}>0)"
        return f"INDEX({ll.m},MAX({a},1),MAX({c},1))*({a}>0)*({c}>0)"

    intercept = _cell_ref(beta, 0)
    # x M x' with x = e_1 + e_f + e_K - e_C + e_P (the K_in terms are 0 without prompt levels)
    leverage = (f"INDEX({ll.m},1,1)+2*({m('1', pf)}+{m('1', pk)}-{m('1', pc)})"
                f"+{m(pf, pf)}+{m(pk, pk)}+{m(pc, pc)}+2*({m(pf, pk)}-{m(pf, pc)}-{m(pk, pc)})"
                f"+2*{m('1', pp)}+{m(pp, pp)}+2*({m(pf, pp)}+{m(pk, pp)}-{m(pc, pp)})")
    fitted, lev, loo, pct = me("fitted_ln"), me("leverage"), me("loo_tps"), me("loo_pct")
    out.update({
        "ln_tps": f"=IF({fit}=1,{raw('ln_tps')},\"\")",
        "fitted_ln": f"=IF(AND({fit}=1,{r.ok}=1),{intercept}+{b(pf)}+{b(pk)}-{b(pc)}+{b(pp)},\"\")",
        "fitted_tps": f"=IF(ISNUMBER({fitted}),EXP({fitted}),\"\")",
        "residual": f"=IF(ISNUMBER({fitted}),{me('ln_tps')}-{fitted},\"\")",
        "leverage": f"=IF(ISNUMBER({fitted}),{leverage},\"\")",
        "loo_tps": (f"=IF(ISNUMBER({lev}),IF({lev}<1-{LEVERAGE_ONE},"
                    f"EXP({me('ln_tps')}-{me('residual')}/(1-{lev})),\"\"),\"\")"),
        "loo_pct": f"=IF(ISNUMBER({loo}),({raw('tps')}-{loo})/{raw('tps')}*100,\"\")",
        "loo_abs_pct": f"=IF(ISNUMBER({pct}),ABS({pct}),\"\")",
    })
    return out


def coefficient_formulas(ll: LsqLayout, j: int) -> dict[str, str]:
    """The coefficient-table row of parameter j (0-based): ordinary formulas."""
    r = _Refs(ll)
    kind = ll.kind_of(j)
    first, _ = ll.blocks[kind]
    row = ll.coef_first + j
    c = {key: f"${col}{row}" for key, col in COEF_COLS.items()}
    sign = "-" if SIGNS[kind] < 0 else ""
    y = ll.rows("ln_tps")
    out: dict[str, str] = {}
    if kind == "BaseTPS":
        out["rows"] = f"={r.n_fit}"
        out["xty"] = f"=SUM({y})"
        out["role"] = f"=IF({r.ok}=1,\"identified\",\"unidentified\")"
    else:
        out["level"] = f"={_cell_ref(r.levels[kind], j - first)}"
        out["rows"] = f"=SUMIFS({ll.rows('fit')},{ll.params(kind)},{j + 1})"  # a # is set on fitted rows (fit 1)
        out["xty"] = f"={sign}SUMIFS({y},{ll.params(kind)},{j + 1})"
        out["role"] = (f"=IF({c['level']}=\"\",\"\",IF({c['level']}={r.bases[kind]},\"base\","
                       f"IF(({r.ok}=1)*({c['rows']}>0),\"identified\",\"unidentified\")))")
    m_column = f"${ll.m_col(j)}${ll.coef_first}:${ll.m_col(j)}${ll.coef_last}"
    out["beta"] = f"=IF({r.ok}=1,SUMPRODUCT({m_column},{ll.coef('xty')}),\"\")"  # M is symmetric
    out["value"] = f"=IF({c['role']}=\"base\",1,IF({c['role']}=\"identified\",EXP({c['beta']}),\"\"))"
    return out


def a_formula(ll: LsqLayout, i: int, j: int) -> str | None:
    """A[i, j] (0-based), or None where it is the constant 0."""
    if not ll.a_is_formula(i, j):
        return None
    if i > j:
        return f"={ll.work_col(i)}{ll.coef_first + j}"  # symmetric: the upper triangle computes
    rows_i = f"${COEF_COLS['rows']}${ll.coef_first + i}"
    rows_j = f"${COEF_COLS['rows']}${ll.coef_first + j}"
    if i == j:
        return f"=IF({rows_i}=0,1,{rows_i})"
    ki, kj = ll.kind_of(i), ll.kind_of(j)
    sign = "-" if SIGNS[ki] * SIGNS[kj] < 0 else ""
    if i == 0:
        return f"={sign}{rows_j}"
    # the fitted rows (fit 1, the only rows with a #) counted as the sum of their fit column, not by
    # COUNTIFS: IronCalc 0.9.1 measures the whole sheet of a COUNTIFS's range at every call, and this
    # sheet holds a dozen columns of every raw row
    return (f"=IF({rows_i}*{rows_j}=0,0,{sign}SUMIFS({ll.rows('fit')},{ll.params(ki)},{i + 1},"
            f"{ll.params(kj)},{j + 1}))")


def m_formula(ll: LsqLayout) -> str:
    """M = A^-1 (one array formula over p x p)."""
    return f"=IF({_Refs(ll).ok}=1,MINVERSE({ll.a}/{SCALE})/{SCALE},\"\")"


def summary_formulas(ll: LsqLayout) -> dict[str, str]:
    r = _Refs(ll)
    s = ll.summary_ref
    ok = r.ok
    # max |A M - I| on the engine's own inverse, in one single-cell array formula (p x p: cheap)
    residual = f"(MMULT({ll.a},MINVERSE({ll.a}/{SCALE})/{SCALE})-{r.identity})"
    return {
        "status": f"=IF({r.fit_possible()},IF({ok}=1,\"ok\",\"aliased\"),\"no data\")",
        "invertible": (
            f"=IF({r.fit_possible()},IFERROR(IF(MAX(ABS{residual})<{INVERTIBLE_TOL},1,0),0),0)"
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
            f"IF(AND({s('loo_mape')}<={EXCELLENT_MAPE:g},{s('loo_max')}<={EXCELLENT_MAX:g},"
            f"{s('loo_rows')}>={EXCELLENT_MIN_ROWS}),\"excellent\","
            f"IF(AND({s('loo_mape')}<={GOOD_MAPE:g},{s('loo_max')}<={GOOD_MAX:g}),\"good\",\"fail\")))"
        ),
    }


# ---------------------------------------------------------------------------
# Writing the sheet
# ---------------------------------------------------------------------------


def write_sheet(ws: Worksheet, layout: Layout, fills: PendingFills) -> dict[str, str]:
    """Write the least-squares sheet into `ws`; return defined name -> "A1" on it."""
    from scm_xl.workbook.stamp import write_filled
    from scm_xl.workbook.styles import BOLD, FORMULA_FILL, KEY_FILL, TITLE_FONT, _formula, header_cells, wrapped_note

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

    for col, width in WIDTHS.items():
        ws.column_dimensions[col].width = width

    def header(row: int, cols: dict[str, str]) -> None:
        header_cells(ws, row, [(key, col, t[key], WIDTHS.get(col, 0)) for key, col in cols.items()],
                     text_keys=TEXT_KEYS)

    # -- coefficient table ----------------------------------------------------
    ws[f"A{ll.coef_header - 1}"] = t["coef_title"]
    ws[f"A{ll.coef_header - 1}"].font = BOLD
    header(ll.coef_header, COEF_COLS)
    coef_formats = {"xty": "0.000", "beta": "0.000000", "value": "0.0000"}
    for j in range(ll.p):
        row = ll.coef_first + j
        ws[f"{COEF_COLS['index']}{row}"] = j + 1
        ws[f"{COEF_COLS['kind']}{row}"] = ll.kind_of(j)
        for key, text in coefficient_formulas(ll, j).items():
            _formula(ws, f"{COEF_COLS[key]}{row}", text, coef_formats.get(key))

    # -- per-row table --------------------------------------------------------
    ws[f"A{ll.row_header - 1}"] = t["rows_title"]
    ws[f"A{ll.row_header - 1}"].font = BOLD
    header(ll.row_header, ROW_COLS)
    row_formats = {"ln_tps": "0.0000", "fitted_ln": "0.0000", "fitted_tps": "0.00", "residual": "0.0000",
                   "leverage": "0.000", "loo_tps": "0.00", "loo_pct": "0.0", "loo_abs_pct": "0.0"}
    letters = {**ROW_COLS, **{key: ll.param_col(kind) for kind, key in PARAM_KEYS.items()}}
    offset = layout.raw_first - ll.row_first  # the workings row of each row
    rows = range(ll.row_first, ll.row_last + 1)
    write_filled(ws, fills, letters, lambda r: row_formulas(ll, r), rows, offset, number_formats=row_formats)
    for col in ROW_COLS.values():
        ws.column_dimensions[col].fill = FORMULA_FILL

    # -- workings: # columns, A, M (grouped and collapsed) ----------------------
    ws[f"{ll.work_col(0)}{ll.row_header - 1}"] = t["work_title"]
    ws[f"{ll.work_col(0)}{ll.coef_header - 1}"] = t["a_title"]
    ws[f"{ll.m_col(0)}{ll.coef_header - 1}"] = t["m_title"]
    for kind, key in PARAM_KEYS.items():
        ws[f"{ll.param_col(kind)}{ll.row_header}"] = t[key]
        ws[f"{ll.param_col(kind)}{ll.row_header}"].font = BOLD
    for j in range(ll.p):
        for col in (ll.work_col(j), ll.m_col(j)):
            ws[f"{col}{ll.coef_header}"] = j + 1
            ws[f"{col}{ll.coef_header}"].font = BOLD
        for i in range(ll.p):
            a_text = a_formula(ll, i, j)
            ws[f"{ll.work_col(j)}{ll.coef_first + i}"] = 0 if a_text is None else a_text
    ws[f"{ll.m_col(0)}{ll.coef_first}"] = ArrayFormula(ll.m.replace("$", ""), m_formula(ll))
    ws[f"{ll.m_col(0)}{ll.coef_first}"].fill = FORMULA_FILL
    first_work, last_work = ll.work_col(0), ll.m_col(ll.p - 1)
    ws.column_dimensions.group(first_work, last_work, outline_level=1, hidden=True)
    # the group's button sits beside column K (openpyxl always makes outlinePr; its stubs allow None)
    cast(Outline, ws.sheet_properties.outlinePr).summaryRight = False
    spacer = ws.column_dimensions[get_column_letter(WORK_COL - 1)]
    spacer.width, spacer.collapsed = 3, True  # the group's button shows it as collapsed

    ws.freeze_panes = "B1"
    # the notes wrap inside the printed columns (A..J) instead of running past them
    note_width = float(sum(ws.column_dimensions[col].width or 0 for col in WIDTHS))
    for address in ("A2", "A3"):
        wrapped_note(ws, address, max(WIDTHS), note_width)
    ws.print_area = ll.print_area
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
                               model_slots=layout.m_slots, prompt_slots=layout.p_slots)


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

    # -- workings -----------------------------------------------------------------
    params = _params(ll, mirror)
    for i in range(layout.rows):
        for kind, key in PARAM_KEYS.items():
            param = params[i][kind]
            put(f"{ll.param_col(kind)}{ll.row_first + i}", None if param is None else float(param))
    inverse = np.linalg.inv(mirror.a) if ok else None
    for i in range(ll.p):
        for j in range(ll.p):
            if ll.a_is_formula(i, j):
                put(f"{ll.work_col(j)}{ll.coef_first + i}", float(mirror.a[i, j]))
            put(f"{ll.m_col(j)}{ll.coef_first + i}", float(inverse[i, j]) if inverse is not None else None)

    # -- coefficients -------------------------------------------------------------
    rows_per_column = (mirror.x * mirror.x).sum(axis=0)
    xty = mirror.x.T @ mirror.y
    cal = analysis.calibration
    bases = {"f": cal.base_concurrency, "K_len": cal.base_max_tokens, "C_model": cal.base_model,
             "K_in": cal.base_prompt_level}
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
        if s is not None:
            values["fit"] = float(mirror.w[i])
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
    p_levels: list[object] = [p.prompt_level for p in cal.prompt_levels[:lo.p_slots]]
    levels: list[tuple[str, object]] = [("BaseTPS", None)]
    for kind, values, size in (("f", c_levels, lo.c_slots), ("K_len", l_levels, lo.l_slots),
                               ("C_model", m_levels, lo.m_slots), ("K_in", p_levels, lo.p_slots)):
        levels += [(kind, values[i] if i < len(values) else None) for i in range(size)]
    bases = {"f": cal.base_concurrency, "K_len": cal.base_max_tokens, "C_model": cal.base_model,
             "K_in": cal.base_prompt_level}
    n = lo.rows
    x = np.zeros((n, ll.p))
    w = np.zeros(n)
    y = np.zeros(n)
    for i in range(n):
        s = by_slot.get(i)
        if s is None or id(s) not in used:
            continue
        w[i] = 1.0
        y[i] = s.ln_tps
        x[i, 0] = 1.0
        own = {"f": s.concurrency, "K_len": s.max_tokens, "C_model": s.model, "K_in": s.prompt_level}
        for j, (kind, level) in enumerate(levels[1:], start=1):
            if level is None or _same_level(kind, level, bases[kind]):
                continue
            if _same_level(kind, own[kind], level):
                x[i, j] = -1.0 if kind == "C_model" else 1.0
    a = x.T @ x
    a += np.diag((np.diag(a) == 0).astype(float))
    return _Mirror(w=w, x=x, y=y, a=a, levels=levels)


def _params(ll: LsqLayout, mirror: _Mirror) -> list[dict[str, int | None]]:
    """Per sheet row: the # (1-based) of its non-zero column in each block, 0 if none; None if not fitted."""
    out: list[dict[str, int | None]] = []
    for i in range(ll.layout.rows):
        row: dict[str, int | None] = {}
        for kind in PARAM_KEYS:
            first, size = ll.blocks[kind]
            if not mirror.w[i]:
                row[kind] = None
                continue
            nonzero = [j for j in range(first, first + size) if mirror.x[i, j] != 0]
            row[kind] = nonzero[0] + 1 if nonzero else 0
        out.append(row)
    return out


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
        return fit.coefficient(f_label(cast(int, level)))  # an f slot's level is a concurrency
    if kind == "K_len":
        return fit.coefficient(k_label(cast(int, level)))  # a K_len slot's level is a max_tokens
    if kind == "K_in":
        return fit.coefficient(p_label(cast(int, level)))  # a K_in slot's level is a prompt level
    return next((c for c in fit.coefficients if c.kind == "c_model" and same_model(str(c.level), str(level))), None)


def _cell(value: object) -> CellValue:
    if value is None:
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return str(value)


def as_calibration(layout: Layout, chain: Calibration, cells: Mapping[tuple[str, str], CellValue]) -> Calibration:
    """The sheet's coefficients (`cells`: its reference values) in the chain's shape, as the sheet
    shows them."""
    ll = LsqLayout(layout)
    title = ll.title

    def block(kind: str) -> list[tuple[CellValue, float | None]]:
        first, size = ll.blocks[kind]
        out = []
        for i in range(size):
            row = ll.coef_first + first + i
            value = cells.get((title, f"{COEF_COLS['value']}{row}"))
            level = cells.get((title, f"{COEF_COLS['level']}{row}"))
            out.append((level, float(value) if isinstance(value, float) else None))
        return out

    base = cells.get((title, ll.summary_cell("base_tps")))
    return Calibration(
        base_model=chain.base_model, base_max_tokens=chain.base_max_tokens,
        base_concurrency=chain.base_concurrency, base_rows=chain.base_rows,
        base_tps=base if isinstance(base, float) else None,
        concurrency_levels=[ConcurrencyLevel(int(level), 0, value) for level, value in block("f")
                            if isinstance(level, float)],
        length_levels=[LengthLevel(int(level), None, None, value) for level, value in block("K_len")
                       if isinstance(level, float)],
        models=[ModelLevel(str(level), 0, None, value) for level, value in block("C_model") if level],
        base_prompt_level=chain.base_prompt_level,
        prompt_levels=[PromptLevel(int(level), None, None, value) for level, value in block("K_in")
                       if isinstance(level, float)],
    )


def chosen_calibration(c: Checking) -> Calibration:
    """The calibration the method cell chooses: this sheet's coefficients when the method is "lsq",
    else the chain's. A reference that asks reads this sheet (`reads=("lsq",)`)."""
    chain = c.analysis.calibration
    return as_calibration(c.layout, chain, c.exp) if c.analysis.settings.method == "lsq" else chain


def _write(ws: Worksheet, b: Building) -> dict[str, str]:
    return write_sheet(ws, b.layout, b.fills)


def _reference(c: Checking) -> None:
    c.exp.update(expected_sheet(c.layout, c.analysis, sheet_rows=[sheet_row for sheet_row, _ in c.inputs.rows]))


SHEET = SheetSpec("lsq", SHEET_TITLES, _write, _reference, inputs="none")


__all__ = [
    "DEFINED_NAMES", "SHEET", "SHEET_TITLES", "STATUSES", "LsqLayout", "as_calibration", "chosen_calibration",
    "expected_sheet", "write_sheet",
]
