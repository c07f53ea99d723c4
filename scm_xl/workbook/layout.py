"""The geometry of the six core sheets (raw data, workings, cells, calibration, consistency,
derivation): their titles, columns, keyed rows and defined names.

The builder writes formulas at these addresses, the filler writes raw rows into the input
columns, and the verifier reads results back from the same places. The other sheets' addresses
are their own modules' (lsq_sheet, latency_sheet, replicates_sheet, slo_sheet, summary_sheet,
first_principles, charts), and no other module spells those
(tests/test_registry.py). Of the core sheets' addresses, the keyed blocks ("B" typed, "C"
effective, "D" extra, on the calibration, consistency and derivation sheets) are spelled here
alone (`Layout.keyed_cell`; tests/test_registry.py checks); the tables and per-row columns are
asked of this module (`table_col`, `cons_col`, `raw_cell`...) but build.py, formulas.py,
expected.py and the raw-data, calibration, consistency and derivation sheets' modules still join a
column and a row into an address themselves.

Sizes are parameters (raw-row capacity and level slots), so a workbook can grow
to fit the data; the chosen sizes are stored on a hidden meta sheet so the
verifier rebuilds exactly the layout the builder used.

Long because it is the geometry of the six core sheets (raw data, workings, cells,
calibration, consistency, derivation) in one place; the house issue's one-module-per-sheet
shape is where it splits.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

from openpyxl.utils import get_column_letter

from scm_xl.results import NUMERIC_INPUT_COLUMNS, REQUIRED_COLUMNS
from scm_xl.rules import Lang

LAYOUT_VERSION = 6  # 4: the questions and method typed on the Summary; 5: the capacity plan's order there;
# 6: the per-row workings wrapped onto sheets of at most WORKINGS_WIDTH columns
DEFAULT_ROWS = 200  # capacity of a template; a filled workbook is sized to its data
ROW_HEADROOM = 50  # rows a person can type under the data of a filled workbook
# ... or a tenth of the data, up to this many: more rows than that are a paste, not typing (verify
# names each row below the formulas, and fill --workbook grows them), and every spare row costs
# each per-row sheet its formulas, in the file and in every recalculation
ROW_HEADROOM_MAX = 500
MIN_FILLED_ROWS = 30
DEFAULT_CONCURRENCY_SLOTS = 16
DEFAULT_LENGTH_SLOTS = 12
DEFAULT_MODEL_SLOTS = 6
DEFAULT_CELL_SLOTS = 64
DEFAULT_PROMPT_SLOTS = 8

META_SHEET = "_scm_meta"

# The per-row workings are one table (RAW_COLUMNS) wrapped onto hidden sheets of at most this many
# columns, the first columns on "calc", the next on "calc2" and so on. Why: IronCalc (the default
# engine) pays for every cell a range scan visits in proportion to the number of cells in that
# cell's row, and the aggregates (the cells sheet's counts, the calibration's averages, the
# charts' points) scan the workings' columns: on one sheet of 60 columns they cost it most of a
# 10,000-row recalculation; at 12 columns a sheet, a fraction (benchmarks/results/fill_speed.md).
WORKINGS_WIDTH = 12
WORKINGS_SHEETS = 5  # ceil(len(RAW_COLUMNS) / WORKINGS_WIDTH): checked where RAW_COLUMNS is defined

# The workings sheets' keys ("calc", "calc2", ...); their titles are below, the order of all the
# sheets is the registry's (scm_xl.workbook.registry.SHEETS).
WORKINGS_KEYS = ("calc", *(f"calc{i}" for i in range(2, WORKINGS_SHEETS + 1)))
SHEET_TITLES: dict[Lang, dict[str, str]] = {
    "zh": {
        "summary": "总览",
        "readme": "说明",
        "raw": "原始数据",
        "calibration": "系数标定",
        "consistency": "自洽检验",
        "derivation": "双向推导",
        "first_principles": "第一性原理",
        "calc": "计算_逐行",
        "calc2": "计算_逐行2",
        "calc3": "计算_逐行3",
        "calc4": "计算_逐行4",
        "calc5": "计算_逐行5",
        "cells": "计算_单元",
        "chart_data": "计算_图表",
    },
    "en": {
        "summary": "Summary",
        "readme": "README",
        "raw": "RawData",
        "calibration": "Calibration",
        "consistency": "Consistency",
        "derivation": "Derivation",
        "first_principles": "FirstPrinciples",
        "calc": "Work_Rows",
        "calc2": "Work_Rows2",
        "calc3": "Work_Rows3",
        "calc4": "Work_Rows4",
        "calc5": "Work_Rows5",
        "cells": "Work_Cells",
        "chart_data": "Work_Charts",
    },
}


# The keyed blocks of the core sheets (the calibration's settings and its base figures, the
# consistency's summary, the derivation's forward and inverse questions) share one column
# contract: the label in A ("label"), then the value (typed by a person, or the block's output) in B, the
# effective value or coefficient in C, and an extra (the precision's bytes, a looked-up model or
# prompt level) in D. Layout.keyed_cell spells their cells; nothing else does.
KEYED_BLOCK_SHEETS = {"settings": "calibration", "base": "calibration", "summary": "consistency",
                      "forward": "derivation", "inverse": "derivation"}  # block -> the sheet it lies on
KEYED_BLOCKS = tuple(KEYED_BLOCK_SHEETS)
KEYED_COLUMNS = {"label": "A", "value": "B", "effective": "C", "extra": "D",
                 # a typed prompt length's K_in (in "effective") is interpolated between the known
                 # levels below and above it and their K_in, in these columns of its row
                 "prompt_low": "E", "prompt_high": "F", "prompt_k_low": "G", "prompt_k_high": "H"}
PROMPT_BRACKET = ("prompt_low", "prompt_high", "prompt_k_low", "prompt_k_high")


# The workbook's defined names on the keyed blocks: (name, block, row key, column role).
DEFINED_NAMES: tuple[tuple[str, str, str, str], ...] = (
    ("BaseModel", "settings", "base_model", "effective"),
    ("BaseMaxTokens", "settings", "base_max_tokens", "effective"),
    ("BaseConcurrency", "settings", "base_concurrency", "effective"),
    ("MonotonicTolerancePct", "settings", "monotonic_tolerance_pct", "effective"),
    ("StrictPhysics", "settings", "strict_physics", "effective"),
    ("ShortOutputRatio", "settings", "short_output_ratio", "effective"),
    ("PhysicsPrecision", "settings", "physics_precision", "effective"),
    ("PhysicsBytes", "settings", "physics_precision", "extra"),
    ("Method", "settings", "method", "effective"),
    ("BasePromptLevel", "settings", "base_prompt_level", "effective"),
    ("BaseTPS", "base", "tps", "effective"),
    ("BaseRows", "base", "rows", "effective"),
    ("CheckRows", "summary", "check_rows", "value"),
    ("IdentifyRows", "summary", "identify_rows", "value"),
    ("UnidentifiedRows", "summary", "unidentified_rows", "value"),
    ("ExcludedRows", "summary", "excluded_rows", "value"),
    ("MAPE", "summary", "mape", "value"),
    ("MaxDeviation", "summary", "max_deviation", "value"),
    ("Verdict", "summary", "verdict", "value"),
    ("ForwardConcurrency", "forward", "concurrency", "value"),
    ("ForwardMaxTokens", "forward", "max_tokens", "value"),
    ("ForwardModel", "forward", "model", "value"),
    ("ForwardPromptTokens", "forward", "prompt_tokens", "value"),
    ("ForwardTPS", "forward", "tps", "value"),
    ("ForwardMissing", "forward", "missing", "value"),
    ("TargetTPS", "inverse", "target_tps", "value"),
    ("TargetMaxTokens", "inverse", "max_tokens", "value"),
    ("TargetModel", "inverse", "model", "value"),
    ("MaxLatencyP95", "inverse", "max_latency", "value"),
    ("TargetPromptTokens", "inverse", "prompt_tokens", "value"),
    ("RecommendedConcurrency", "inverse", "concurrency", "value"),
    ("RecommendedTPS", "inverse", "tps", "value"),
    ("BestTPS", "inverse", "best_tps", "value"),
    ("BestConcurrency", "inverse", "best_concurrency", "value"),
)


@dataclass(frozen=True)
class Column:
    key: str
    zh: str
    en: str
    kind: Literal["input", "formula"]
    width: float = 12

    def header(self, lang: Lang) -> str:
        return self.zh if lang == "zh" else self.en


# The raw-data sheet a person types into: the results-CSV columns (required ones first, in the
# CSV's order, so a pasted block lands right), then three columns that show what became of each
# row, then the optional inputs. It holds no computing formula: the display cells only look up
# their row's figures on the workings sheet by position, so rows can be inserted, deleted,
# sorted and typed below the data in any spreadsheet program.
ENTRY_COLUMNS: tuple[Column, ...] = (
    Column("exp_id", "实验编号", "exp_id", "input", 10),
    Column("model", "模型", "model", "input", 22),
    Column("concurrency", "并发数", "concurrency", "input", 9),
    Column("requests_per_slot", "请求数/并发", "requests_per_slot", "input", 10),
    Column("total_requests", "总请求数", "total_requests", "input", 9),
    Column("max_tokens", "max_tokens", "max_tokens", "input", 10),
    Column("total_time_s", "总耗时(s)", "total_time_s", "input", 10),
    Column("total_output_tokens", "总输出Token", "total_output_tokens", "input", 11),
    Column("show_tps", "TPS", "TPS", "formula", 9),
    Column("show_role", "角色", "role", "formula", 11),
    Column("show_status", "状态说明", "status", "formula", 46),
    Column("repeat", "重复序号", "repeat", "input", 8),
    Column("ok_requests", "成功请求", "ok_requests", "input", 9),
    Column("failed_requests", "失败请求", "failed_requests", "input", 9),
    Column("rate_limited_requests", "限流请求(429)", "rate_limited_requests", "input", 11),
    Column("latency_p50_s", "延迟P50(s)", "latency_p50_s", "input", 10),
    Column("latency_p95_s", "延迟P95(s)", "latency_p95_s", "input", 10),
    Column("latency_p99_s", "延迟P99(s)", "latency_p99_s", "input", 10),
    Column("ttft_p50_s", "首字P50(s)", "ttft_p50_s", "input", 10),
    Column("ttft_p95_s", "首字P95(s)", "ttft_p95_s", "input", 10),
    Column("ttft_p99_s", "首字P99(s)", "ttft_p99_s", "input", 10),
    Column("mean_itl_s", "平均字间隔(s)", "mean_itl_s", "input", 10),
    Column("prompt_tokens", "平均输入Token", "prompt_tokens", "input", 10),
    Column("prompt_level", "提示长度档位", "prompt_level", "input", 10),
    Column("ttft_mean_s", "首字均值(s)", "ttft_mean_s", "input", 10),
    Column("latency_mean_s", "延迟均值(s)", "latency_mean_s", "input", 10),
    Column("gpu", "GPU", "gpu", "input", 12),
    Column("override", "人工纳入/剔除", "override", "input", 12),
    Column("notes", "备注", "notes", "input", 24),
    Column("source", "来源文件", "source", "input", 18),
)
RAW_INPUT_KEYS = tuple(c.key for c in ENTRY_COLUMNS if c.kind == "input")
DISPLAY_KEYS = tuple(c.key for c in ENTRY_COLUMNS if c.kind == "formula")
# Inputs that must hold a number when given (the rest are text).
NUMERIC_INPUT_KEYS = NUMERIC_INPUT_COLUMNS  # one home: the results-CSV schema
REQUIRED_INPUT_KEYS = REQUIRED_COLUMNS

# The per-row workings sheet: row k+1 holds the k-th row under the raw-data header. Its first
# columns copy that row's inputs (by position, so edits on the raw-data sheet never break a
# formula), then every per-row quantity is one ordinary formula per row and column.
_MIRRORED = tuple(c for c in ENTRY_COLUMNS if c.kind == "input" and c.key not in ("notes", "source"))
RAW_COLUMNS: tuple[Column, ...] = (Column("in_range", "在引用范围内", "in_range", "formula", 7),) + tuple(
    Column(c.key, c.zh, c.en, "formula", c.width) for c in _MIRRORED) + (
    Column("has_input", "有输入", "has_input", "formula", 7),
    Column("unusable_code", "无法使用代码", "unusable_code", "formula", 7),
    Column("unusable", "无法使用原因", "unusable_reason", "formula", 30),
    Column("present", "有效行", "present", "formula", 7),
    Column("tps", "TPS", "tps", "formula", 10),
    Column("ln_tps", "ln(TPS)", "ln_tps", "formula", 9),
    Column("fault", "失败/限流", "fault", "formula", 8),
    Column("eligible", "可比较", "eligible", "formula", 8),
    Column("cell_key", "单元键", "cell_key", "formula", 22),
    Column("model_no", "模型序号", "model_number", "formula", 8),
    Column("cell_code", "单元编码", "cell_code", "formula", 14),
    Column("lower_max", "更低并发最高TPS", "faster_lower_concurrency_tps", "formula", 12),
    Column("mono", "单调性违例", "monotonic_violation", "formula", 10),
    Column("included", "纳入", "included", "formula", 7),
    Column("reason", "剔除原因", "reason", "formula", 40),
    Column("c_included", "纳入并发", "concurrency_included", "formula", 9),
    Column("l_included", "纳入长度", "max_tokens_included", "formula", 9),
    Column("m_included", "纳入模型", "model_included", "formula", 14),
    Column("position", "位置", "position", "formula", 7),
    Column("f_known", "f已标定", "f_known", "formula", 8),
    # The prompt level: the row's own, a blank one counted as the base level (BasePromptLevel);
    # its slot in the K_in table (0: no levels anywhere, blank: beyond the slots); whether it is
    # the base level; and whether the row is included there (the rows BaseTPS, f, K_len and
    # C_model are identified from).
    Column("p_level", "提示长度档位(生效)", "prompt_level_effective", "formula", 9),
    Column("p_index", "提示档位序号", "prompt_level_slot", "formula", 8),
    Column("at_p0", "基准提示档位", "at_base_prompt_level", "formula", 8),
    Column("p0_included", "纳入且在基准档位", "included_at_base_prompt_level", "formula", 9),
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
    Column("physics_text", "物理检查", "physics_checks", "formula", 50),
)
RAW_FORMULA_KEYS = tuple(c.key for c in RAW_COLUMNS)
assert -(-len(RAW_COLUMNS) // WORKINGS_WIDTH) == WORKINGS_SHEETS, "WORKINGS_SHEETS must fit RAW_COLUMNS"
# Each workings column's sheet and column number (from 1) on it: RAW_COLUMNS in order, wrapped.
RAW_PLACES: dict[str, tuple[str, int]] = {
    column.key: (WORKINGS_KEYS[i // WORKINGS_WIDTH], i % WORKINGS_WIDTH + 1) for i, column in enumerate(RAW_COLUMNS)}


def workings_columns(sheet_key: str) -> tuple[Column, ...]:
    """The workings columns on one workings sheet, in order."""
    return tuple(column for column in RAW_COLUMNS if RAW_PLACES[column.key][0] == sheet_key)


@functools.cache  # asked once per typed row
def unusable_tests(lang: Lang) -> tuple[tuple[str, str, str], ...]:
    """Why a typed row cannot be used, tested in this order: (input key, "blank" | "text",
    message). The workings number the first failing test (its code, 1-based) and show its
    message; the reference walks the same list."""
    from scm_xl.rules import TEXTS

    tests = []
    for column in ENTRY_COLUMNS:
        if column.kind != "input" or column.key in ("notes", "source"):
            continue
        header = column.header(lang)
        if column.key in REQUIRED_INPUT_KEYS:
            tests.append((column.key, "blank", TEXTS[lang]["unusable_blank"].format(column=header)))
        if column.key in NUMERIC_INPUT_KEYS:
            tests.append((column.key, "text", TEXTS[lang]["unusable_text"].format(column=header)))
    return tuple(tests)

# Consistency sheet: one row per raw row, array formulas aligned with the raw rows.
CONSISTENCY_COLUMNS: tuple[Column, ...] = (
    Column("exp_id", "实验编号", "exp_id", "formula", 10),
    Column("model", "模型", "model", "formula", 24),
    Column("concurrency", "并发数", "concurrency", "formula", 9),
    Column("max_tokens", "max_tokens", "max_tokens", "formula", 10),
    Column("prompt_level", "提示长度档位", "prompt level", "formula", 9),
    Column("included", "纳入", "included", "formula", 7),
    Column("measured", "实测TPS", "measured TPS", "formula", 11),
    Column("f", "f(c)", "f(c)", "formula", 9),
    Column("k", "K_len", "K_len", "formula", 9),
    Column("k_in", "K_in", "K_in", "formula", 9),
    Column("c", "C_model", "C_model", "formula", 9),
    Column("predicted", "预测TPS", "predicted TPS", "formula", 11),
    Column("deviation", "绝对偏差", "deviation", "formula", 10),
    Column("deviation_pct", "偏差率%", "deviation %", "formula", 10),
    Column("role", "角色", "role", "formula", 12),
    Column("note", "说明", "note", "formula", 44),
    Column("check_abs_pct", "检验行|偏差率|%", "|deviation| % (check rows)", "formula", 12),
    Column("f_known", "f已知", "f known", "formula", 6),
    Column("k_known", "K已知", "K_len known", "formula", 6),
    Column("c_known", "C已知", "C_model known", "formula", 6),
    Column("p_known", "K_in已知", "K_in known", "formula", 6),
    Column("anchor", "K锚定并发", "K_len anchor concurrency", "formula", 9),
    Column("p_anchor", "K_in锚定并发", "K_in anchor concurrency", "formula", 9),
    Column("physics_text", "物理检查", "physics checks", "formula", 50),
)

CONCURRENCY_TABLE = (
    Column("level", "并发档位", "concurrency", "formula", 10),
    Column("rows", "标定行数", "rows", "formula", 9),
    Column("f", "f(c)", "f(c)", "formula", 10),
    Column("known", "已标定", "known", "formula", 8),
)
LENGTH_TABLE = (
    Column("level", "max_tokens档位", "max_tokens", "formula", 12),
    Column("anchor", "锚定并发", "anchor concurrency", "formula", 10),
    Column("rows", "标定行数", "rows", "formula", 9),
    Column("k", "K_len", "K_len", "formula", 10),
    Column("known", "已标定", "known", "formula", 8),
)
PROMPT_TABLE = (
    Column("level", "提示长度档位", "prompt level", "formula", 12),
    Column("anchor", "锚定并发", "anchor concurrency", "formula", 10),
    Column("rows", "标定行数", "rows", "formula", 9),
    Column("k", "K_in", "K_in", "formula", 10),
    Column("known", "已标定", "known", "formula", 8),
)
MODEL_TABLE = (
    Column("name", "模型", "model", "formula", 24),
    Column("rows", "基准点行数", "rows at the base point", "formula", 10),
    Column("tps", "基准点TPS", "TPS at the base point", "formula", 11),
    Column("c", "C_model", "C_model", "formula", 10),
    Column("known", "已标定", "known", "formula", 8),
)
# Cells sheet: one slot per distinct (model, max_tokens, prompt level, concurrency) of the raw
# rows, in order of model number (models numbered by first appearance), then max_tokens, then
# prompt level, then concurrency. Each row of the workings carries its cell as one number, the
# cell code ((model number x L-scale + max_tokens) x P-scale + prompt slot) x C-scale +
# concurrency, the L and C scales one more than the largest max_tokens and concurrency, the P
# scale one more than the number of prompt levels (the K_in table's slot, not the level: the
# code stays far below 2^53; with no levels the P scale is 1 and the slot 0, so the code is
# what it was without them); each slot holds the smallest code above the slot
# before it (MINIFS over the rows), so listing K cells costs K scans of the rows. The
# recurrence stays inside one column: LibreOffice's threaded calculation of formula groups
# computes a recurrence that runs through two columns wrongly (7.4, measured). The per-row
# filter looks its neighbours up here, so no per-row formula scans the whole raw table
# (that would grow with the square of the rows).
CELLS_TABLE = (
    Column("slot", "#", "#", "input", 5),  # plain numbers 1..K: ROW() would tie the slots to their own formulas
    Column("key", "单元键", "cell_key", "formula", 26),
    Column("first_row", "首行", "first_row", "formula", 7),
    Column("model", "模型", "model", "formula", 24),
    Column("max_tokens", "max_tokens", "max_tokens", "formula", 10),
    Column("concurrency", "并发数", "concurrency", "formula", 9),
    Column("model_no", "模型序号", "model_number", "formula", 8),
    Column("code", "单元编码", "cell_code", "formula", 14),
    Column("rows", "行数", "rows", "formula", 7),
    Column("eligible", "可比较行数", "eligible_rows", "formula", 9),
    Column("max_tps", "可比较最高TPS", "max_eligible_tps", "formula", 12),
    Column("mean_ln", "可比较ln(TPS)均值", "mean_ln_tps", "formula", 12),
    Column("lower_max", "更低并发最高TPS", "faster_lower_concurrency_tps", "formula", 12),
    Column("group_low_c", "同组最低并发", "group_lowest_concurrency", "formula", 10),
    Column("group_base", "最低并发TPS(几何均值)", "group_base_tps", "formula", 12),
    Column("p_index", "提示档位序号", "prompt_level_slot", "formula", 8),
    Column("prompt_level", "提示长度档位", "prompt_level", "formula", 9),
)

# Beside the cells: the models of the raw rows in order of first appearance (their number is
# the slot), each found as the first row whose model differs from every model above it.
SEEN_MODELS_TABLE = (
    Column("first", "首次出现位置", "first_position", "formula", 9),
    Column("name", "模型", "model", "formula", 24),
)
SCALE_KEYS = ("l_scale", "c_scale", "p_scale")  # headed by their keys, one column each after the seen models
# MINIFS takes at most 127 criteria pairs; the last model slot needs one per model above it.
MAX_MODELS = 120

INVERSE_TABLE = (
    Column("level", "并发档位", "concurrency", "formula", 10),
    Column("predicted", "预测TPS", "predicted TPS", "formula", 12),
    Column("latency", "实测P95延迟(s)", "measured P95 latency (s)", "formula", 12),
    Column("allowed", "满足延迟上限", "within the latency limit", "formula", 10),
    Column("meets", "达标并发", "meets the target", "formula", 10),
)

# The rules (texts, roles, verdict bands, thresholds, defaults) live in scm_xl/rules.py; the
# sheets read them from there.
from scm_xl.rules import (  # noqa: E402  (re-exported for the sheet modules)
    DEFAULT_FORWARD, DEFAULT_PHYSICS_PRECISION, DEFAULT_SHORT_OUTPUT_RATIO, DEFAULT_TARGET, EXCELLENT_MAPE,
    EXCELLENT_MAX, GOOD_MAPE, GOOD_MAX, METHODS, OVERRIDE_VALUES, ROLES, SUPERLINEAR_TOLERANCE, TEXTS, VERDICTS,
)

_LETTERS: dict[tuple[int, int], dict[str, str]] = {}


def _letters(table: tuple[Column, ...], start_col: int) -> dict[str, str]:
    """Column letters of a table's keys (cached: formula writers ask millions of times)."""
    key = (id(table), start_col)
    if key not in _LETTERS:
        _LETTERS[key] = {col.key: get_column_letter(start_col + i) for i, col in enumerate(table)}
    return _LETTERS[key]


@dataclass(frozen=True)
class NamedCell:
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
    p_slots: int = DEFAULT_PROMPT_SLOTS

    # ---- sheets -------------------------------------------------------
    def title(self, key: str) -> str:
        return SHEET_TITLES[self.lang][key]

    def text(self, key: str) -> str:
        return TEXTS[self.lang][key]

    # ---- per-row workings ("raw" quantities, one row per raw-data row) ----
    # Row k+1 of the workings sheet holds the k-th row under the raw-data sheet's header.
    raw_header_row = 1
    raw_first = 2

    @property
    def raw_last(self) -> int:
        return self.raw_first + self.rows - 1

    def raw_col(self, key: str) -> str:
        """The column of a workings key on its own workings sheet (`raw_sheet`)."""
        return get_column_letter(RAW_PLACES[key][1])  # openpyxl keeps a table of them

    def raw_place(self, key: str) -> tuple[str, int]:
        """(sheet title, column number) of a workings key: where its column of reference values goes."""
        sheet, column = RAW_PLACES[key]
        return self.title(sheet), column

    def raw_sheet(self, key: str) -> str:
        """The key of the workings sheet that holds a workings column."""
        return RAW_PLACES[key][0]

    def raw_range(self, key: str, *, sheet: bool = True, absolute: bool = True) -> str:
        col = self.raw_col(key)
        d = "$" if absolute else ""
        ref = f"{d}{col}{d}{self.raw_first}:{d}{col}{d}{self.raw_last}"
        return f"{self.qtitle(self.raw_sheet(key))}!{ref}" if sheet else ref

    def raw_cell(self, key: str, row: int, *, sheet: bool = True) -> str:
        """One workings cell (row = the workings row, raw_first.. raw_last), with its sheet."""
        ref = f"${self.raw_col(key)}{row}"
        return f"{self.qtitle(self.raw_sheet(key))}!{ref}" if sheet else ref

    def raw_address(self, key: str, row: int) -> tuple[str, str]:
        """(sheet title, "A1") of one workings cell: where a reference reads a workings value back."""
        return self.title(self.raw_sheet(key)), f"{self.raw_col(key)}{row}"

    def qtitle(self, key: str) -> str:
        return f"'{self.title(key)}'"

    # ---- the raw-data sheet a person edits ------------------------------
    def entry_col(self, key: str) -> str:
        return _letters(ENTRY_COLUMNS, 1)[key]

    def entry_name(self, key: str) -> str:
        """The defined name of an input column's range (it grows and shrinks with the rows)."""
        return f"SCM_In_{key}"

    def entry_names(self) -> dict[str, str]:
        """Defined name -> "A1:A81" on the raw-data sheet, one per input column the workings copy."""
        out = {}
        for column in ENTRY_COLUMNS:
            if column.kind == "input" and column.key not in ("notes", "source"):
                col = self.entry_col(column.key)
                out[self.entry_name(column.key)] = f"{col}{self.raw_header_row}:{col}{self.raw_last}"
        return out

    # The workings sheet of the unusable-row reason keeps the messages (constants) in this column,
    # one a row, after a blank column.
    @property
    def messages_col(self) -> str:
        return get_column_letter(len(workings_columns(self.raw_sheet("unusable"))) + 2)

    def entry_range(self, key: str) -> str:
        """An input column from the header row down to the last covered row. Starting at the
        header keeps a row inserted right under it inside the range."""
        col = self.entry_col(key)
        return f"{self.qtitle('raw')}!${col}${self.raw_header_row}:${col}${self.raw_last}"

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
        "base_prompt_level": 12,
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
    def p_table_header(self) -> int:
        return self.l_table_first + self.l_slots + 2

    @property
    def p_table_first(self) -> int:
        return self.p_table_header + 1

    @property
    def m_table_header(self) -> int:
        return self.p_table_first + self.p_slots + 2

    @property
    def m_table_first(self) -> int:
        return self.m_table_header + 1


    def c_table_range(self, key: str, *, sheet: bool = True) -> str:
        return self._table_range(CONCURRENCY_TABLE, key, self.c_table_first, self.c_slots, sheet)

    def l_table_range(self, key: str, *, sheet: bool = True) -> str:
        return self._table_range(LENGTH_TABLE, key, self.l_table_first, self.l_slots, sheet)

    def m_table_range(self, key: str, *, sheet: bool = True) -> str:
        return self._table_range(MODEL_TABLE, key, self.m_table_first, self.m_slots, sheet)

    def p_table_range(self, key: str, *, sheet: bool = True) -> str:
        return self._table_range(PROMPT_TABLE, key, self.p_table_first, self.p_slots, sheet)

    def table_col(self, table: tuple[Column, ...], key: str, start_col: int = 1) -> str:
        return _letters(table, start_col)[key]

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

    @property
    def seen_models_start(self) -> int:
        """The first column of the seen-models table (one blank column after the cells)."""
        return len(CELLS_TABLE) + 2

    def seen_models_col(self, key: str) -> str:
        return self.table_col(SEEN_MODELS_TABLE, key, self.seen_models_start)

    def scale_col(self, key: str) -> str:
        """The column of a cell-code scale ("l_scale", "c_scale", "p_scale"), after the seen-models table."""
        return get_column_letter(self.seen_models_start + len(SEEN_MODELS_TABLE) + 1 + SCALE_KEYS.index(key))

    def scale_cell(self, key: str, *, sheet: bool = True) -> str:
        ref = f"${self.scale_col(key)}${self.cells_first}"
        return f"{self.qtitle('cells')}!{ref}" if sheet else ref

    def seen_models_range(self, key: str, *, sheet: bool = True) -> str:
        col = self.seen_models_col(key)
        ref = f"${col}${self.cells_first}:${col}${self.cells_first + self.m_slots - 1}"
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
    forward_rows = {"concurrency": 5, "max_tokens": 6, "model": 7, "prompt_tokens": 8, "tps": 9, "missing": 10}
    inverse_rows = {"target_tps": 14, "max_tokens": 15, "model": 16, "max_latency": 17, "prompt_tokens": 18,
                    "concurrency": 19, "tps": 20, "best_tps": 21, "best_concurrency": 22}
    inverse_table_header = 25

    @property
    def inverse_table_first(self) -> int:
        return self.inverse_table_header + 1

    def inverse_range(self, key: str) -> str:
        col = self.table_col(INVERSE_TABLE, key)
        return f"${col}${self.inverse_table_first}:${col}${self.inverse_table_first + self.c_slots - 1}"

    # ---- keyed rows -----------------------------------------------------
    def keyed_rows(self, block: str) -> dict[str, int]:
        """The rows of one keyed block (KEYED_BLOCKS): key -> sheet row."""
        if block == "base":
            return {"tps": self.base_tps_row, "rows": self.base_rows_row}
        rows: dict[str, int] = getattr(self, f"{block}_rows")
        return rows

    def keyed_cell(self, block: str, key: str, role: str = "value", *, absolute: bool = False) -> str:
        """The cell of row `key` of a keyed block in column `role` (KEYED_COLUMNS): "C7", or "$C$7"."""
        col, row = KEYED_COLUMNS[role], self.keyed_rows(block)[key]
        return f"${col}${row}" if absolute else f"{col}{row}"

    def keyed_heading(self, block: str, role: str = "label") -> str:
        """The heading cell above a keyed block's first row, in column `role`."""
        return f"{KEYED_COLUMNS[role]}{min(self.keyed_rows(block).values()) - 1}"

    # ---- defined names ------------------------------------------------
    def defined_names(self) -> dict[str, NamedCell]:
        return dict(_named_cells(self))

    def name_ref(self, name: str) -> str:
        return _name_refs(self)[name]

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
            "p_slots": self.p_slots,
        }


def fitted_layout(lang: Lang, n_rows: int, n_concurrency: int, n_lengths: int, n_models: int,
                  n_cells: int = 0, min_rows: int = MIN_FILLED_ROWS, n_prompts: int = 0) -> Layout:
    """A layout sized to the data, with headroom for rows, levels and cells typed in later."""
    return Layout(
        lang=lang,
        rows=max(min_rows, n_rows + max(ROW_HEADROOM, min(n_rows // 10, ROW_HEADROOM_MAX))),
        c_slots=max(DEFAULT_CONCURRENCY_SLOTS, n_concurrency),
        l_slots=max(DEFAULT_LENGTH_SLOTS, n_lengths),
        m_slots=max(DEFAULT_MODEL_SLOTS, n_models),
        cell_slots=max(DEFAULT_CELL_SLOTS, n_cells + 16),
        p_slots=max(DEFAULT_PROMPT_SLOTS, n_prompts),
    )


# A layout's defined names and their absolute references, worked out once per layout (a frozen
# dataclass, so hashable): the sheets' writers ask for them about 1,400 times a workbook.
@functools.lru_cache(maxsize=32)
def _named_cells(layout: Layout) -> Mapping[str, NamedCell]:
    return MappingProxyType({name: NamedCell(KEYED_BLOCK_SHEETS[block], layout.keyed_cell(block, key, role))
                             for name, block, key, role in DEFINED_NAMES})


@functools.lru_cache(maxsize=32)
def _name_refs(layout: Layout) -> Mapping[str, str]:
    return MappingProxyType({name: f"{layout.qtitle(KEYED_BLOCK_SHEETS[block])}!"
                                   f"{layout.keyed_cell(block, key, role, absolute=True)}"
                             for name, block, key, role in DEFINED_NAMES})


__all__ = [
    # the sheets' own facts
    "CELLS_TABLE", "CONCURRENCY_TABLE", "CONSISTENCY_COLUMNS", "Column", "DEFAULT_CELL_SLOTS",
    "DEFAULT_CONCURRENCY_SLOTS", "DEFAULT_LENGTH_SLOTS", "DEFAULT_MODEL_SLOTS", "DEFAULT_PROMPT_SLOTS", "DEFAULT_ROWS",
    "DEFINED_NAMES", "DISPLAY_KEYS", "KEYED_BLOCK_SHEETS", "KEYED_BLOCKS", "KEYED_COLUMNS", "NamedCell",
    "PROMPT_BRACKET", "PROMPT_TABLE",
    "ENTRY_COLUMNS", "INVERSE_TABLE", "LAYOUT_VERSION", "LENGTH_TABLE", "Lang", "Layout", "META_SHEET",
    "MAX_MODELS", "MIN_FILLED_ROWS", "MODEL_TABLE", "NUMERIC_INPUT_KEYS", "RAW_COLUMNS", "RAW_FORMULA_KEYS", "RAW_INPUT_KEYS",
    "REQUIRED_INPUT_KEYS", "ROW_HEADROOM", "ROW_HEADROOM_MAX", "RAW_PLACES", "SEEN_MODELS_TABLE", "SHEET_TITLES",
    "WORKINGS_KEYS", "WORKINGS_SHEETS", "WORKINGS_WIDTH", "fitted_layout", "workings_columns",
    # the rules, re-exported for the sheet modules (their home is scm_xl.rules)
    "DEFAULT_FORWARD", "DEFAULT_PHYSICS_PRECISION", "DEFAULT_SHORT_OUTPUT_RATIO", "DEFAULT_TARGET", "EXCELLENT_MAPE",
    "EXCELLENT_MAX", "GOOD_MAPE", "GOOD_MAX", "METHODS", "OVERRIDE_VALUES", "ROLES", "SUPERLINEAR_TOLERANCE", "TEXTS",
    "VERDICTS",
]
