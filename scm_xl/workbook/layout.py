"""The one place that names the workbook's sheets, cells, columns and defined names.

The builder writes formulas at these addresses, the filler writes raw rows into
the input columns, and the verifier reads results back from the same places.
Nothing else in scm-xl spells a cell address.

Sizes are parameters (raw-row capacity and level slots), so a workbook can grow
to fit the data; the chosen sizes are stored on a hidden meta sheet so the
verifier rebuilds exactly the layout the builder used.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from openpyxl.utils import get_column_letter

Lang = Literal["zh", "en"]

LAYOUT_VERSION = 1
DEFAULT_ROWS = 200
DEFAULT_CONCURRENCY_SLOTS = 16
DEFAULT_LENGTH_SLOTS = 12
DEFAULT_MODEL_SLOTS = 6
DEFAULT_CELL_SLOTS = 64
CHART_LENGTH_SLOTS = 6  # series in the TPS-vs-concurrency chart

META_SHEET = "_scm_meta"

SHEET_KEYS = ("readme", "raw", "calibration", "consistency", "derivation", "first_principles", "cells")
SHEET_TITLES: dict[Lang, dict[str, str]] = {
    "zh": {
        "readme": "说明",
        "raw": "原始数据",
        "calibration": "系数标定",
        "consistency": "自洽检验",
        "derivation": "双向推导",
        "first_principles": "第一性原理",
        "cells": "单元汇总",
    },
    "en": {
        "readme": "README",
        "raw": "RawData",
        "calibration": "Calibration",
        "consistency": "Consistency",
        "derivation": "Derivation",
        "first_principles": "FirstPrinciples",
        "cells": "Cells",
    },
}


@dataclass(frozen=True)
class Column:
    key: str
    zh: str
    en: str
    kind: Literal["input", "formula"]
    width: float = 12

    def header(self, lang: Lang) -> str:
        return self.zh if lang == "zh" else self.en


# Raw-data sheet. Input columns first (the results-CSV fields a person types),
# then the per-row helper columns, each one array formula over the whole column.
RAW_COLUMNS: tuple[Column, ...] = (
    Column("exp_id", "实验编号", "exp_id", "input", 10),
    Column("concurrency", "并发数", "concurrency", "input", 9),
    Column("requests_per_slot", "请求数/并发", "requests_per_slot", "input", 10),
    Column("total_requests", "总请求数", "total_requests", "input", 9),
    Column("max_tokens", "max_tokens", "max_tokens", "input", 10),
    Column("model", "模型", "model", "input", 24),
    Column("total_time_s", "总耗时(s)", "total_time_s", "input", 10),
    Column("total_output_tokens", "总输出Token", "total_output_tokens", "input", 11),
    Column("ok_requests", "成功请求", "ok_requests", "input", 9),
    Column("failed_requests", "失败请求", "failed_requests", "input", 9),
    Column("rate_limited_requests", "限流请求(429)", "rate_limited_requests", "input", 11),
    Column("repeat", "重复序号", "repeat", "input", 8),
    Column("gpu", "GPU", "gpu", "input", 12),
    Column("prompt_tokens", "平均输入Token", "prompt_tokens", "input", 10),
    Column("override", "人工纳入/剔除", "override", "input", 12),
    Column("notes", "备注", "notes", "input", 24),
    Column("tps", "TPS", "tps", "formula", 10),
    Column("ln_tps", "ln(TPS)", "ln_tps", "formula", 9),
    Column("present", "有效行", "present", "formula", 7),
    Column("fault", "失败/限流", "fault", "formula", 8),
    Column("eligible", "可比较", "eligible", "formula", 8),
    Column("cell_key", "单元键", "cell_key", "formula", 22),
    Column("cell_first", "单元首行", "cell_first_row", "formula", 8),
    Column("lower_max", "更低并发最高TPS", "faster_lower_concurrency_tps", "formula", 12),
    Column("mono", "单调性违例", "monotonic_violation", "formula", 10),
    Column("included", "纳入", "included", "formula", 7),
    Column("reason", "剔除原因", "reason", "formula", 40),
    Column("c_included", "纳入并发", "concurrency_included", "formula", 9),
    Column("l_included", "纳入长度", "max_tokens_included", "formula", 9),
    Column("f_known", "f已标定", "f_known", "formula", 8),
    # Physics checks (the first-principles seed): warnings unless strict physics is on.
    Column("model_id", "目录模型ID", "catalog_model_id", "formula", 8),
    Column("gpu_id", "目录GPU ID", "catalog_gpu_id", "formula", 8),
    Column("short_output", "输出过短", "short_output", "formula", 8),
    Column("group_low_c", "同组最低并发", "group_lowest_concurrency", "formula", 10),
    Column("superlinear", "超线性增益", "superlinear_gain", "formula", 9),
    Column("ceiling", "单流上限TPS", "per_stream_ceiling_tps", "formula", 11),
    Column("over_ceiling", "超物理上限", "above_ceiling", "formula", 9),
    Column("kv_over", "KV超显存", "kv_over_memory", "formula", 9),
    Column("physics", "物理警告数", "physics_warnings", "formula", 9),
    Column("short_text", "输出过短说明", "short_output_text", "formula", 12),
    Column("superlinear_text", "超线性说明", "superlinear_text", "formula", 12),
    Column("ceiling_text", "超上限说明", "ceiling_text", "formula", 12),
    Column("kv_text", "KV说明", "kv_text", "formula", 12),
    Column("physics_text", "物理检查", "physics_checks", "formula", 50),
)
RAW_INPUT_KEYS = tuple(c.key for c in RAW_COLUMNS if c.kind == "input")
RAW_FORMULA_KEYS = tuple(c.key for c in RAW_COLUMNS if c.kind == "formula")

# Consistency sheet: one row per raw row, array formulas aligned with the raw rows.
CONSISTENCY_COLUMNS: tuple[Column, ...] = (
    Column("exp_id", "实验编号", "exp_id", "formula", 10),
    Column("model", "模型", "model", "formula", 24),
    Column("concurrency", "并发数", "concurrency", "formula", 9),
    Column("max_tokens", "max_tokens", "max_tokens", "formula", 10),
    Column("included", "纳入", "included", "formula", 7),
    Column("measured", "实测TPS", "measured_tps", "formula", 11),
    Column("f", "f(c)", "f(c)", "formula", 9),
    Column("k", "K_len", "K_len", "formula", 9),
    Column("c", "C_model", "C_model", "formula", 9),
    Column("predicted", "预测TPS", "predicted_tps", "formula", 11),
    Column("deviation", "绝对偏差", "deviation", "formula", 10),
    Column("deviation_pct", "偏差率%", "deviation_pct", "formula", 10),
    Column("role", "角色", "role", "formula", 12),
    Column("note", "说明", "note", "formula", 44),
    Column("check_abs_pct", "检验行|偏差率|%", "check_abs_pct", "formula", 12),
    Column("f_known", "f已知", "f_known", "formula", 6),
    Column("k_known", "K已知", "k_known", "formula", 6),
    Column("c_known", "C已知", "c_known", "formula", 6),
    Column("anchor", "K锚定并发", "k_anchor_concurrency", "formula", 9),
    Column("physics_text", "物理检查", "physics_checks", "formula", 50),
)

CONCURRENCY_TABLE = (
    Column("level", "并发档位", "concurrency", "formula", 10),
    Column("rows", "标定行数", "rows", "formula", 9),
    Column("f", "f(c)", "f(c)", "formula", 10),
    Column("known", "已标定", "known", "formula", 8),
)
LENGTH_TABLE = (
    Column("level", "max_tokens档位", "max_tokens", "formula", 12),
    Column("anchor", "锚定并发", "anchor_concurrency", "formula", 10),
    Column("rows", "标定行数", "rows", "formula", 9),
    Column("k", "K_len", "K_len", "formula", 10),
    Column("known", "已标定", "known", "formula", 8),
)
MODEL_TABLE = (
    Column("name", "模型", "model", "formula", 24),
    Column("rows", "基准点行数", "base_point_rows", "formula", 10),
    Column("tps", "基准点TPS", "base_point_tps", "formula", 11),
    Column("c", "C_model", "C_model", "formula", 10),
    Column("known", "已标定", "known", "formula", 8),
)
# Cells sheet: one slot per distinct (model, max_tokens, concurrency) of the raw rows, in
# order of first appearance. The per-row filter looks its neighbours up here, so no per-row
# formula scans the whole raw table (that would grow with the square of the rows).
CELLS_TABLE = (
    Column("slot", "#", "#", "input", 5),  # plain numbers 1..K: ROW() would tie the slots to their own formulas
    Column("key", "单元键", "cell_key", "formula", 26),
    Column("first_row", "首行", "first_row", "formula", 7),
    Column("model", "模型", "model", "formula", 24),
    Column("max_tokens", "max_tokens", "max_tokens", "formula", 10),
    Column("concurrency", "并发数", "concurrency", "formula", 9),
    Column("rows", "行数", "rows", "formula", 7),
    Column("eligible", "可比较行数", "eligible_rows", "formula", 9),
    Column("max_tps", "可比较最高TPS", "max_eligible_tps", "formula", 12),
    Column("mean_ln", "可比较ln(TPS)均值", "mean_ln_tps", "formula", 12),
    Column("lower_max", "更低并发最高TPS", "faster_lower_concurrency_tps", "formula", 12),
    Column("group_low_c", "同组最低并发", "group_lowest_concurrency", "formula", 10),
    Column("group_base", "最低并发TPS(几何均值)", "group_base_tps", "formula", 12),
)

INVERSE_TABLE = (
    Column("level", "并发档位", "concurrency", "formula", 10),
    Column("predicted", "预测TPS", "predicted_tps", "formula", 12),
    Column("meets", "达标并发", "meets_target", "formula", 10),
)

# Text that formulas emit. The reference renders the same templates, so the
# workbook and Python agree to the character. "{x}" marks a value spliced in.
TEXTS: dict[Lang, dict[str, str]] = {
    "en": {
        "no_output": "excluded: no output tokens",
        "manual_exclude": "excluded: manual override",
        "manual_include": "included: manual override",
        "fault": "excluded: failed or rate-limited requests",
        "physics": "excluded: strict physics",
        "short_output": "short output: {tokens} of {expected} requested tokens",
        "superlinear": "superlinear gain from c={c0} (f(c) > c: batching cannot do that; suspect caching, rate limits or noise)",
        "over_ceiling": "per-stream TPS above the roofline ceiling of {ceiling} tok/s",
        "kv_over": "KV cache of {c} sequences exceeds GPU memory",
        "mono": "excluded: TPS falls as concurrency rises (a lower-concurrency row of the same model and max_tokens is faster)",
        "identifies": "identifies",
        "missing": "missing",
        "unidentified": "unidentified",
        "unreachable": "unreachable with the measured levels",
        "unreachable_short": "unreachable",
    },
    "zh": {
        "no_output": "剔除：无输出Token",
        "manual_exclude": "剔除：人工指定",
        "manual_include": "纳入：人工指定",
        "fault": "剔除：存在失败或限流请求",
        "physics": "剔除：严格物理检查",
        "short_output": "输出过短：{tokens} / 请求的 {expected} Token",
        "superlinear": "相对 c={c0} 超线性增益（f(c) > c：批处理做不到，疑为缓存、限流或噪声）",
        "over_ceiling": "单流TPS超过屋顶线上限 {ceiling} tok/s",
        "kv_over": "{c} 个序列的KV缓存超出显存",
        "mono": "剔除：并发升高而TPS下降（同模型同max_tokens下有更低并发的行更快）",
        "identifies": "标定",
        "missing": "缺少",
        "unidentified": "无法预测",
        "unreachable": "在已测并发档位内无法达到",
        "unreachable_short": "unreachable",
    },
}

ROLES = ("identify", "check", "unidentified", "excluded")
VERDICTS = ("excellent", "good", "fail", "insufficient")
OVERRIDE_VALUES = ("include", "exclude")

# Verdict thresholds (percent): MAPE and max absolute deviation of check rows.
EXCELLENT_MAPE, EXCELLENT_MAX = 5.0, 10.0
GOOD_MAPE, GOOD_MAX = 10.0, 20.0

# Defaults of the hand-set cells.
DEFAULT_FORWARD = {"concurrency": 2, "max_tokens": 100}
DEFAULT_TARGET = {"tps": 100, "max_tokens": 50}
DEFAULT_SHORT_OUTPUT_RATIO = 0.5
# A gain above c/c0 by more than this is superlinear; within it, timing noise on a
# nearly linear deployment would raise false alarms.
SUPERLINEAR_TOLERANCE = 0.05
DEFAULT_PHYSICS_PRECISION = "bf16"
METHODS = ("chain", "lsq")  # the method cell: which coefficients the forward and inverse answers use


@dataclass(frozen=True)
class Cell:
    sheet: str  # sheet key, not title
    address: str


@dataclass(frozen=True)
class Layout:
    lang: Lang = "zh"
    rows: int = DEFAULT_ROWS
    c_slots: int = DEFAULT_CONCURRENCY_SLOTS
    l_slots: int = DEFAULT_LENGTH_SLOTS
    m_slots: int = DEFAULT_MODEL_SLOTS
    cell_slots: int = DEFAULT_CELL_SLOTS

    # ---- sheets -------------------------------------------------------
    def title(self, key: str) -> str:
        return SHEET_TITLES[self.lang][key]

    def text(self, key: str) -> str:
        return TEXTS[self.lang][key]

    # ---- raw-data sheet ----------------------------------------------
    raw_header_row = 1
    raw_first = 2

    @property
    def raw_last(self) -> int:
        return self.raw_first + self.rows - 1

    def raw_col(self, key: str) -> str:
        for i, col in enumerate(RAW_COLUMNS, start=1):
            if col.key == key:
                return get_column_letter(i)
        raise KeyError(key)

    def raw_range(self, key: str, *, sheet: bool = True, absolute: bool = True) -> str:
        col = self.raw_col(key)
        d = "$" if absolute else ""
        ref = f"{d}{col}{d}{self.raw_first}:{d}{col}{d}{self.raw_last}"
        return f"{self.qtitle('raw')}!{ref}" if sheet else ref

    def qtitle(self, key: str) -> str:
        return f"'{self.title(key)}'"

    # ---- calibration sheet -------------------------------------------
    # Settings: label in A, hand-set input in B (blank = automatic), effective value in C.
    settings_rows = {
        "base_model": 4,
        "base_max_tokens": 5,
        "base_concurrency": 6,
        "monotonic_tolerance_pct": 7,
        "strict_physics": 8,
        "short_output_ratio": 9,
        "physics_precision": 10,
        "method": 11,
    }
    base_tps_row = 13
    base_rows_row = 14
    c_table_header = 16

    @property
    def c_table_first(self) -> int:
        return self.c_table_header + 1

    @property
    def l_table_header(self) -> int:
        return self.c_table_first + self.c_slots + 2

    @property
    def l_table_first(self) -> int:
        return self.l_table_header + 1

    @property
    def m_table_header(self) -> int:
        return self.l_table_first + self.l_slots + 2

    @property
    def m_table_first(self) -> int:
        return self.m_table_header + 1

    # The chart's data grid sits to the right of the tables: TPS by concurrency (rows)
    # and max_tokens (columns), base model.
    chart_grid_col = 8  # H
    chart_header_row = 16

    def c_table_range(self, key: str, *, sheet: bool = True) -> str:
        return self._table_range(CONCURRENCY_TABLE, key, self.c_table_first, self.c_slots, sheet)

    def l_table_range(self, key: str, *, sheet: bool = True) -> str:
        return self._table_range(LENGTH_TABLE, key, self.l_table_first, self.l_slots, sheet)

    def m_table_range(self, key: str, *, sheet: bool = True) -> str:
        return self._table_range(MODEL_TABLE, key, self.m_table_first, self.m_slots, sheet)

    def table_col(self, table: tuple[Column, ...], key: str, start_col: int = 1) -> str:
        for i, col in enumerate(table):
            if col.key == key:
                return get_column_letter(start_col + i)
        raise KeyError(key)

    def _table_range(self, table: tuple[Column, ...], key: str, first: int, n: int, sheet: bool) -> str:
        col = self.table_col(table, key)
        ref = f"${col}${first}:${col}${first + n - 1}"
        return f"{self.qtitle('calibration')}!{ref}" if sheet else ref

    # ---- cells sheet ---------------------------------------------------
    cells_header_row = 1
    cells_first = 2

    @property
    def cells_last(self) -> int:
        return self.cells_first + self.cell_slots - 1

    def cells_range(self, key: str, *, sheet: bool = True) -> str:
        col = self.table_col(CELLS_TABLE, key)
        ref = f"${col}${self.cells_first}:${col}${self.cells_last}"
        return f"{self.qtitle('cells')}!{ref}" if sheet else ref

    # ---- consistency sheet -------------------------------------------
    summary_rows = {
        "check_rows": 4,
        "identify_rows": 5,
        "unidentified_rows": 6,
        "excluded_rows": 7,
        "mape": 8,
        "max_deviation": 9,
        "verdict": 10,
    }
    cons_header_row = 13

    @property
    def cons_first(self) -> int:
        return self.cons_header_row + 1

    @property
    def cons_last(self) -> int:
        return self.cons_first + self.rows - 1

    def cons_col(self, key: str) -> str:
        return self.table_col(CONSISTENCY_COLUMNS, key)

    def cons_range(self, key: str, *, sheet: bool = False) -> str:
        col = self.cons_col(key)
        ref = f"${col}${self.cons_first}:${col}${self.cons_last}"
        return f"{self.qtitle('consistency')}!{ref}" if sheet else ref

    # ---- derivation sheet (forward and inverse) -----------------------
    forward_rows = {"concurrency": 5, "max_tokens": 6, "model": 7, "tps": 9, "missing": 10}
    inverse_rows = {"target_tps": 14, "max_tokens": 15, "model": 16,
                    "concurrency": 18, "tps": 19, "best_tps": 20, "best_concurrency": 21}
    inverse_table_header = 24

    @property
    def inverse_table_first(self) -> int:
        return self.inverse_table_header + 1

    def inverse_range(self, key: str) -> str:
        col = self.table_col(INVERSE_TABLE, key)
        return f"${col}${self.inverse_table_first}:${col}${self.inverse_table_first + self.c_slots - 1}"

    # ---- defined names ------------------------------------------------
    def defined_names(self) -> dict[str, Cell]:
        s, c, d = self.settings_rows, self.summary_rows, self.forward_rows
        inv = self.inverse_rows
        return {
            "BaseModel": Cell("calibration", f"C{s['base_model']}"),
            "BaseMaxTokens": Cell("calibration", f"C{s['base_max_tokens']}"),
            "BaseConcurrency": Cell("calibration", f"C{s['base_concurrency']}"),
            "MonotonicTolerancePct": Cell("calibration", f"C{s['monotonic_tolerance_pct']}"),
            "StrictPhysics": Cell("calibration", f"C{s['strict_physics']}"),
            "ShortOutputRatio": Cell("calibration", f"C{s['short_output_ratio']}"),
            "PhysicsPrecision": Cell("calibration", f"C{s['physics_precision']}"),
            "PhysicsBytes": Cell("calibration", f"D{s['physics_precision']}"),
            "Method": Cell("calibration", f"C{s['method']}"),
            "BaseTPS": Cell("calibration", f"C{self.base_tps_row}"),
            "BaseRows": Cell("calibration", f"C{self.base_rows_row}"),
            "CheckRows": Cell("consistency", f"B{c['check_rows']}"),
            "IdentifyRows": Cell("consistency", f"B{c['identify_rows']}"),
            "UnidentifiedRows": Cell("consistency", f"B{c['unidentified_rows']}"),
            "ExcludedRows": Cell("consistency", f"B{c['excluded_rows']}"),
            "MAPE": Cell("consistency", f"B{c['mape']}"),
            "MaxDeviation": Cell("consistency", f"B{c['max_deviation']}"),
            "Verdict": Cell("consistency", f"B{c['verdict']}"),
            "ForwardConcurrency": Cell("derivation", f"B{d['concurrency']}"),
            "ForwardMaxTokens": Cell("derivation", f"B{d['max_tokens']}"),
            "ForwardModel": Cell("derivation", f"B{d['model']}"),
            "ForwardTPS": Cell("derivation", f"B{d['tps']}"),
            "ForwardMissing": Cell("derivation", f"B{d['missing']}"),
            "TargetTPS": Cell("derivation", f"B{inv['target_tps']}"),
            "TargetMaxTokens": Cell("derivation", f"B{inv['max_tokens']}"),
            "TargetModel": Cell("derivation", f"B{inv['model']}"),
            "RecommendedConcurrency": Cell("derivation", f"B{inv['concurrency']}"),
            "RecommendedTPS": Cell("derivation", f"B{inv['tps']}"),
            "BestTPS": Cell("derivation", f"B{inv['best_tps']}"),
            "BestConcurrency": Cell("derivation", f"B{inv['best_concurrency']}"),
        }

    def name_ref(self, name: str) -> str:
        cell = self.defined_names()[name]
        col = "".join(ch for ch in cell.address if ch.isalpha())
        row = "".join(ch for ch in cell.address if ch.isdigit())
        return f"{self.qtitle(cell.sheet)}!${col}${row}"

    # ---- meta -----------------------------------------------------------
    def meta(self) -> dict[str, object]:
        return {
            "layout_version": LAYOUT_VERSION,
            "lang": self.lang,
            "rows": self.rows,
            "c_slots": self.c_slots,
            "l_slots": self.l_slots,
            "m_slots": self.m_slots,
            "cell_slots": self.cell_slots,
        }


def fitted_layout(lang: Lang, n_rows: int, n_concurrency: int, n_lengths: int, n_models: int,
                  n_cells: int = 0, min_rows: int = DEFAULT_ROWS) -> Layout:
    """The default layout, grown where the data needs more rows or slots (with room for
    a few cells typed in later)."""
    return Layout(
        lang=lang,
        rows=max(min_rows, n_rows),
        c_slots=max(DEFAULT_CONCURRENCY_SLOTS, n_concurrency),
        l_slots=max(DEFAULT_LENGTH_SLOTS, n_lengths),
        m_slots=max(DEFAULT_MODEL_SLOTS, n_models),
        cell_slots=max(DEFAULT_CELL_SLOTS, n_cells + 16),
    )
