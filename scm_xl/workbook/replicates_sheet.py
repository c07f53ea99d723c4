"""The replicates sheet: scm_xl.replicates as live formulas.

One row per distinct (model, concurrency, max_tokens) cell among the present raw
rows, in the cells sheet's order (model number, the models numbered by first
appearance, then max_tokens, then concurrency), in a fixed number of slots (cells
beyond them are counted but not shown). Per cell: the number of runs, the
median TPS, the mean, the CV (sample standard deviation over the mean), the flag (CV
above the threshold, an input cell) and the stability note's figures: repeats needed,
and how many more.

How rows are grouped. The workbook has one list of cells: the cells sheet (its slot k
is the k-th smallest cell code of the workings, `model.cell_order`). Slot k of this
table is slot k of that list. A helper column (grouped and collapsed), one
ordinary formula per raw row, gives each present row the slot of its cell: MATCH of
the row's cell key in the cells sheet's keys (case-insensitive, as the reference's
casefold; the collector and `fill` refuse model names with wildcards or differing only
in case). Every per-cell figure then selects rows by one numeric comparison with the
slot number: COUNTIF, AVERAGEIFS, SUMIFS, and for the median a single-cell array formula
MEDIAN(IF(slot-k, "", TPS)) (a row of no cell has slot 0). The "" (not IF's default FALSE)
matters: IronCalc 0.9.1 counts FALSE as 0 in MEDIAN(IF()).
Each cell costs one pass over the raw rows, each raw row one pass over the slots:
linear in the rows for a fixed number of slots. No multi-cell array formula.

`expected_sheet` mirrors every formula cell from `scm_xl.replicates.summarize` on the
present rows (all of `model.analyze`'s statuses).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from openpyxl.utils import get_column_letter
from openpyxl.worksheet.properties import Outline
from openpyxl.worksheet.worksheet import Worksheet

from scm_xl.engines.base import CellValue
from scm_xl.model import Analysis, cell_order, prompt_index
from scm_xl.replicates import DEFAULT_CV_THRESHOLD, Z_90, summarize
from scm_xl.workbook.layout import CELLS_TABLE, Layout
from scm_xl.workbook.literals import q as _q
from scm_xl.workbook.sheet import Building, Checking, SheetSpec

if TYPE_CHECKING:
    from scm_xl.workbook.stamp import PendingFills

SHEET_TITLES: dict[str, str] = {"zh": "重复实验", "en": "Replicates"}
DEFAULT_SLOTS = 64

DEFINED_NAMES = {
    "REP_CVThreshold": "threshold",
    "REP_Cells": "cells",
    "REP_FlaggedCells": "flagged",
}
"""Workbook-scoped names -> summary keys (the threshold name is the effective value)."""

# Rows of the top block; the hand-set threshold is typed in B, its effective value is in C.
TITLE_ROW, NOTE_ROW, SLOTS_NOTE_ROW = 1, 2, 3
THRESHOLD_ROW = 5
SUMMARY_ROWS = {"cells": 6, "shown": 7, "flagged": 8, "hidden_note": 9}
TABLE_HEADER_ROW = 11
TABLE_FIRST_ROW = 12

# Table columns (A..L), then a gap, then the per-slot key and the per-row helper (grouped and collapsed).
TABLE_KEYS = ("slot", "first_row", "model", "concurrency", "max_tokens", "n", "median", "mean", "cv",
              "flagged", "repeats_needed", "more_repeats", "prompt_level")
TABLE_COLS = {key: get_column_letter(i + 1) for i, key in enumerate(TABLE_KEYS)}
# The printed columns' widths (characters); column A holds the labels above the table too.
WIDTHS = {"A": 40, "B": 14, "C": 24, "D": 10, "E": 11, "F": 9, "G": 11, "H": 11, "I": 9, "J": 8, "K": 12,
          "L": 11, "M": 10}
HELPER_KEYS = ("cell_slot", "dev", "dev_sq")
HELPER_COLS = {key: get_column_letter(len(TABLE_KEYS) + 2 + i) for i, key in enumerate(HELPER_KEYS)}
PRINT_COLS = f"A:{TABLE_COLS['prompt_level']}"

TEXTS: dict[str, dict[str, str]] = {
    "zh": {
        "title": "重复实验：相同（模型, 并发, max_tokens, 提示长度档位）的多次运行取中位数",
        "note": "CV = 样本标准差 / 均值（至少 2 次运行）；CV 高于阈值的组合被标记。所需重复次数 = max(2, ⌈(1.645 × CV / 阈值)²⌉)："
                "使均值的 90% 置信半宽不超过阈值。只统计有效行（含被剔除的行）。",
        "slots_note": "表格有 {slots} 行：超出的组合只计数，不显示。",
        "threshold": "CV 阈值（B列手工输入，C列生效值）",
        "cells": "组合数",
        "shown": "显示的组合数",
        "flagged": "被标记的组合数（CV > 阈值）",
        "hidden_note": "提示",
        "hidden": "还有 {hidden} 个组合未显示：表格只有 {slots} 行",
        "slot": "#", "first_row": "首次运行所在行", "model": "模型", "concurrency": "并发数",
        "max_tokens": "max_tokens", "n": "运行次数", "median": "TPS中位数", "mean": "TPS均值", "cv": "CV",
        "flagged_col": "标记", "repeats_needed": "所需重复次数", "more_repeats": "还需次数", "prompt_level": "提示长度档位",
        "cell_slot": "该行组合的 #（计算过程）",
        "dev": "TPS − 组合首次运行的 TPS（计算过程）",
        "dev_sq": "上一列的平方（计算过程）",
    },
    "en": {
        "title": "Replicates: runs of the same (model, concurrency, max_tokens, prompt level) summarised by their median",
        "note": "CV = sample standard deviation / mean (two runs or more); cells whose CV is above the threshold are "
                "flagged. Repeats needed = max(2, ceil((1.645 x CV / threshold)^2)): runs for the 90% half-width of "
                "the mean to be within the threshold. Every present row counts, excluded ones too.",
        "slots_note": "The table has {slots} rows: cells beyond them are counted, not shown.",
        "threshold": "CV threshold (type in B; C is the effective value)",
        "cells": "distinct cells",
        "shown": "cells shown",
        "flagged": "flagged cells (CV > threshold)",
        "hidden_note": "note",
        "hidden": "{hidden} more cell(s) not shown: the table has {slots} rows",
        "slot": "#", "first_row": "first run on row", "model": "model", "concurrency": "concurrency",
        "max_tokens": "max_tokens", "n": "runs", "median": "median TPS", "mean": "mean TPS", "cv": "CV",
        "flagged_col": "flagged", "repeats_needed": "repeats needed", "more_repeats": "more repeats",
        "prompt_level": "prompt level",
        "cell_slot": "# of this row's cell (workings)",
        "dev": "TPS − its cell's first run's TPS (workings)",
        "dev_sq": "its square (workings)",
    },
}


@dataclass(frozen=True)
class ReplicatesLayout:
    """Where things are on the sheet, for a workbook layout and a slot count."""

    layout: Layout
    slots: int = DEFAULT_SLOTS

    @property
    def title(self) -> str:
        return SHEET_TITLES[self.layout.lang]

    @property
    def table_last(self) -> int:
        return TABLE_FIRST_ROW + self.slots - 1

    @property
    def helper_last(self) -> int:
        return TABLE_FIRST_ROW + self.layout.rows - 1

    def table(self, key: str, *, absolute: bool = True) -> str:
        col = TABLE_COLS[key]
        d = "$" if absolute else ""
        return f"{d}{col}{d}{TABLE_FIRST_ROW}:{d}{col}{d}{self.table_last}"

    def helper(self, key: str) -> str:
        col = HELPER_COLS[key]
        return f"${col}${TABLE_FIRST_ROW}:${col}${self.helper_last}"

    def cell(self, key: str, row: int) -> str:
        return f"{TABLE_COLS[key]}{row}"

    def calc_row(self, row: int) -> int:
        """The workings-sheet row of the raw row whose helper sits on sheet row `row`."""
        return row - TABLE_FIRST_ROW + self.layout.raw_first

    def cells_row(self, row: int) -> int:
        """The cells-sheet row of the slot on table row `row` (the same slot numbers)."""
        return row - TABLE_FIRST_ROW + self.layout.cells_first

    @property
    def threshold_input(self) -> str:
        return threshold_cell()

    @property
    def threshold_cell(self) -> str:
        return f"C{THRESHOLD_ROW}"

    def summary_cell(self, key: str) -> str:
        if key == "threshold":
            return self.threshold_cell
        return f"B{SUMMARY_ROWS[key]}"

    @property
    def print_area(self) -> str:
        return f"A1:{TABLE_COLS['prompt_level']}{self.table_last}"

    def defined_names(self) -> dict[str, str]:
        return {name: self.summary_cell(key) for name, key in DEFINED_NAMES.items()}


# ---------------------------------------------------------------------------
# Formulas
# ---------------------------------------------------------------------------


def _abs(address: str) -> str:
    col = "".join(ch for ch in address if ch.isalpha())
    row = "".join(ch for ch in address if ch.isdigit())
    return f"${col}${row}"


def _cells_cell(rl: ReplicatesLayout, key: str, row: int) -> str:
    """The cells-sheet cell of column `key` for the slot on table row `row`."""
    lo = rl.layout
    col = lo.table_col(CELLS_TABLE, key)
    return f"{lo.qtitle('cells')}!${col}${rl.cells_row(row)}"


def helper_formulas(rl: ReplicatesLayout, row: int) -> dict[str, str]:
    """The per-row helper on sheet row `row`: the slot number of the row's cell, looked up by its numeric
    code on the cells sheet (the workbook's one list of cells, `model.cell_order`); "" for a row that is
    not present, has no code, or whose cell has no slot."""
    lo = rl.layout
    calc = rl.calc_row(row)
    code = lo.raw_cell("cell_code", calc)
    slot, dev = f"${HELPER_COLS['cell_slot']}{row}", f"${HELPER_COLS['dev']}{row}"
    return {
        # 0 for a row of no cell (blank, unusable, or beyond the cells sheet's slots): a number in
        # every row, so that the median's array can select a slot by subtraction (slot_formulas)
        "cell_slot": (f"=IF({lo.raw_cell('present', calc)},IF(ISNUMBER({code}),IFERROR(MATCH({code},"
                      f"{lo.cells_range('code')},0),0),0),0)"),
        # the deviation from the cell's first run, and its square, which the CV sums: SUMIFS over
        # the rows instead of an array STDEV per slot, at a fraction of the cost. Shifted by a run of
        # the cell, not by the mean: identical runs give deviations of exactly 0, and so a CV of 0
        "dev": (f"=IF({slot}>0,{lo.raw_cell('tps', calc)}-INDEX({lo.raw_range('tps')},"
                f"INDEX({lo.cells_range('first_row')},{slot})),\"\")"),
        "dev_sq": f"=IF(ISNUMBER({dev}),{dev}*{dev},\"\")",
    }


def slot_formulas(rl: ReplicatesLayout, row: int) -> dict[str, str]:
    """Every formula of the table row `row` (one slot): ordinary formulas, but for the median, a
    single-cell array formula (MEDIAN over IF(..., TPS, ""): with "" and not FALSE for the other rows,
    which IronCalc would count as 0)."""
    lo = rl.layout
    c = {key: f"${col}{row}" for key, col in TABLE_COLS.items()}
    first, cv, n, mean, needed = c["first_row"], c["cv"], c["n"], c["mean"], c["repeats_needed"]
    has = f"ISNUMBER({first})"
    thr = _abs(rl.threshold_cell)
    slots = rl.helper("cell_slot")
    # the rows of slot k by subtraction, not comparison (slot - k is 0 there): IronCalc 0.9.1 compares two
    # numbers by printing both to 15 digits, which made the per-slot medians a tenth of its evaluate
    runs = f"IF({slots}-{c['slot']},\"\",{lo.raw_range('tps')})"
    # the sample variance from the deviations d from the cell's first run: (Σd² − (Σd)²/n) / (n − 1).
    # IronCalc's STDEV of 40 identical 177.78s is 4.7e-6 (or #NUM!, the root of a negative); this is 0
    sums = f"SUMIFS({rl.helper('dev')},{slots},{c['slot']})"
    squares = f"SUMIFS({rl.helper('dev_sq')},{slots},{c['slot']})"
    ratio = f"({Z_90!r}*{cv}/{thr})"
    ceiling = f"-INT(-({ratio}*{ratio}-0.000000000001))"
    cells_first = _cells_cell(rl, "first_row", row)
    return {
        "first_row": f"=IF(ISNUMBER({cells_first}),{cells_first}+{lo.raw_header_row},\"\")",
        "model": f"=IF({has},{_cells_cell(rl, 'model', row)}&\"\",\"\")",
        "concurrency": f"=IF({has},{_cells_cell(rl, 'concurrency', row)},\"\")",
        "max_tokens": f"=IF({has},{_cells_cell(rl, 'max_tokens', row)},\"\")",
        "prompt_level": f"=IF({has},{_cells_cell(rl, 'prompt_level', row)},\"\")",
        # the rows of slot k are the rows of the cells sheet's slot k: its count, not a COUNTIF here
        # (IronCalc 0.9.1 measures the whole sheet of a COUNTIF's range at every call)
        "n": f"=IF({has},{_cells_cell(rl, 'rows', row)},\"\")",
        "median": f"=IF({has},MEDIAN({runs}),\"\")",
        "mean": f"=IF({has},AVERAGEIFS({lo.raw_range('tps')},{slots},{c['slot']}),\"\")",
        "cv": f"=IF({has},IF(AND({n}>=2,{mean}<>0),SQRT(MAX(0,{squares}-{sums}*{sums}/{n})/({n}-1))/{mean},\"\"),\"\")",
        "flagged": f"=IF({has},IF(ISNUMBER({cv}),IF({cv}>{thr},1,0),0),\"\")",
        "repeats_needed": f"=IF(ISNUMBER({cv}),IF({ceiling}<2,2,{ceiling}),\"\")",
        "more_repeats": f"=IF(ISNUMBER({needed}),IF({needed}-{n}>0,{needed}-{n},0),\"\")",
    }


ARRAY_KEYS = ("median",)


def summary_formulas(rl: ReplicatesLayout) -> dict[str, str]:
    t = TEXTS[rl.layout.lang]
    inp = _abs(rl.threshold_input)
    cells = _abs(rl.summary_cell("cells"))
    before, _, rest = t["hidden"].partition("{hidden}")
    middle, _, after = rest.partition("{slots}")
    return {
        "threshold": f"=IF(AND(ISNUMBER({inp}),{inp}>0),{inp},{DEFAULT_CV_THRESHOLD!r})",
        # every distinct cell the cells sheet lists (its slots), also those beyond this table's rows
        "cells": f"=COUNT({rl.layout.cells_range('model_no')})",
        "shown": f"=MIN({cells},{rl.slots})",
        "flagged": f"=COUNTIF({rl.table('flagged')},1)",
        "hidden_note": (
            f"=IF({cells}>{rl.slots},{_q(before)}&({cells}-{rl.slots})&{_q(middle + str(rl.slots) + after)},\"\")"
        ),
    }


def write_sheet(ws: Worksheet, layout: Layout, fills: PendingFills, *, slots: int = DEFAULT_SLOTS,
                threshold: float | None = DEFAULT_CV_THRESHOLD) -> dict[str, str]:
    """Write the replicates sheet into `ws`; return defined name -> "A1" on it."""
    from scm_xl.workbook.stamp import write_filled
    from openpyxl.styles import Alignment

    from scm_xl.workbook.styles import (
        BOLD, DEFAULT_FONT_SIZE, FORMULA_FILL, INPUT_FILL, KEY_FILL, TITLE_FONT, _formula, fit_row, header_cells,
        wrapped_note,
    )

    if slots < 1:
        raise ValueError(f"slots must be at least 1, got {slots}")
    if slots > layout.cell_slots:
        raise ValueError(f"slots ({slots}) must not exceed the workbook's cell slots ({layout.cell_slots})")
    rl = ReplicatesLayout(layout, slots)
    t = TEXTS[layout.lang]
    ws[f"A{TITLE_ROW}"] = t["title"]
    ws[f"A{TITLE_ROW}"].font = TITLE_FONT
    ws[f"A{NOTE_ROW}"] = t["note"]
    ws[f"A{SLOTS_NOTE_ROW}"] = t["slots_note"].replace("{slots}", str(slots))

    summary = summary_formulas(rl)
    ws[f"A{THRESHOLD_ROW}"] = t["threshold"]
    ws[f"A{THRESHOLD_ROW}"].font = BOLD
    ws[rl.threshold_input] = threshold
    ws[rl.threshold_input].fill = INPUT_FILL
    _formula(ws, rl.threshold_cell, summary["threshold"], "0.00")
    for key, row in SUMMARY_ROWS.items():
        ws[f"A{row}"] = t[key]
        _formula(ws, f"B{row}", summary[key])
    ws[rl.summary_cell("flagged")].fill = KEY_FILL

    for col, width in WIDTHS.items():
        ws.column_dimensions[col].width = width
    headers = {**{key: t[key] for key in TABLE_KEYS if key != "flagged"}, "flagged": t["flagged_col"],
               **{key: t[key] for key in HELPER_KEYS}}
    columns = {**TABLE_COLS, **HELPER_COLS}
    header_cells(ws, TABLE_HEADER_ROW, [(key, col, headers[key], WIDTHS.get(col, 0)) for key, col in columns.items()],
                 text_keys=("model",))
    # the notes and the threshold's label wrap inside the printed columns instead of running past them
    last = TABLE_COLS[TABLE_KEYS[-1]]
    note_width = float(sum(ws.column_dimensions[col].width or 0 for col in TABLE_COLS.values()))
    for row in (NOTE_ROW, SLOTS_NOTE_ROW):
        wrapped_note(ws, f"A{row}", last, note_width)
    ws[f"A{THRESHOLD_ROW}"].alignment = Alignment(wrap_text=True, vertical="center")
    fit_row(ws, THRESHOLD_ROW, [(t["threshold"], WIDTHS["A"], DEFAULT_FONT_SIZE)])

    formats = {"median": "0.00", "mean": "0.00", "cv": "0.0%"}
    for i in range(slots):
        row = TABLE_FIRST_ROW + i
        ws[f"{TABLE_COLS['slot']}{row}"] = i + 1
        for key, text in slot_formulas(rl, row).items():
            _formula(ws, rl.cell(key, row), text, formats.get(key), array=key in ARRAY_KEYS, fill=None)
    for col in list(TABLE_COLS.values())[1:]:
        ws.column_dimensions[col].fill = FORMULA_FILL
    rows = range(TABLE_FIRST_ROW, rl.helper_last + 1)
    offset = layout.raw_first - TABLE_FIRST_ROW  # the workings row of each helper row
    write_filled(ws, fills, HELPER_COLS, lambda r: helper_formulas(rl, r), rows, offset)
    for key in ("median", "flagged"):
        ws[rl.cell(key, TABLE_FIRST_ROW)].fill = FORMULA_FILL
    ws.freeze_panes = f"A{TABLE_FIRST_ROW}"
    helper_cols = list(HELPER_COLS.values())
    ws.column_dimensions.group(helper_cols[0], helper_cols[-1], outline_level=1, hidden=True)
    ws.column_dimensions[helper_cols[0]].width = 14
    cast(Outline, ws.sheet_properties.outlinePr).summaryRight = False  # openpyxl always makes it; its stubs allow None
    spacer = ws.column_dimensions[get_column_letter(len(TABLE_KEYS) + 1)]
    spacer.width, spacer.collapsed = 3, True  # the group's button shows it as collapsed
    ws.print_area = rl.print_area
    return rl.defined_names()


def read_threshold(ws: Worksheet) -> Any:
    """The hand-set CV threshold as typed (None when blank)."""
    value = ws[threshold_cell()].value
    return None if value == "" else value


def write_threshold(ws: Worksheet, value: Any) -> None:
    """Set the hand-set CV threshold (as read by `read_threshold`)."""
    ws[threshold_cell()].value = value


def threshold_cell() -> str:
    """The hand-set CV threshold's cell."""
    return f"B{THRESHOLD_ROW}"


# ---------------------------------------------------------------------------
# The reference: what each formula cell should hold
# ---------------------------------------------------------------------------


def effective_threshold(typed: Any) -> float:
    """What the effective-threshold cell computes from the typed value."""
    if isinstance(typed, (int, float)) and not isinstance(typed, bool) and typed > 0:
        return float(typed)
    return DEFAULT_CV_THRESHOLD


def expected_sheet(layout: Layout, analysis: Analysis, *, slots: int = DEFAULT_SLOTS,
                   threshold: Any = DEFAULT_CV_THRESHOLD,
                   sheet_rows: Sequence[int] | None = None) -> dict[tuple[str, str], CellValue]:
    """Every formula cell of the sheet, from `replicates.summarize` over the present rows.

    `threshold` is the value typed in the threshold cell; `sheet_rows` the raw-sheet row
    of each status (default: consecutive from the first raw row, as `io.write_rows` puts them).
    """
    rl = ReplicatesLayout(layout, slots)
    statuses = analysis.statuses
    rows = list(sheet_rows) if sheet_rows is not None else [layout.raw_first + i for i in range(len(statuses))]
    if len(rows) != len(statuses):
        raise ValueError("sheet_rows must give one raw-sheet row per status")
    thr = effective_threshold(threshold)
    # The cells as the cells sheet lists them (its slots), each summarised over its runs.
    base_level = analysis.calibration.base_prompt_level
    levels = [level.prompt_level for level in analysis.calibration.prompt_levels]
    order = cell_order(statuses, layout.m_slots, layout.cell_slots, base_level=base_level, prompt_levels=levels)

    def key_of(row: Any) -> tuple[str, int, int | None, int]:
        return (row.model.casefold(), row.max_tokens, prompt_index(row, base_level, levels), row.concurrency)

    summaries = {key_of(c): c for c in summarize(statuses, cv_threshold=thr)}
    keys = list(order)
    cells = [summaries[key] for key in keys]
    slot_numbers = {key: slot for slot, key in enumerate(order, start=1)}
    first_of: dict[tuple[str, int, int | None, int], int] = {}
    slot_of: dict[int, int] = {}  # sheet row -> its cell's slot (1-based, as the cells sheet numbers them)
    tps_of = {sheet_row: s.tps for s, sheet_row in zip(statuses, rows)}
    for s, sheet_row in zip(statuses, rows):
        cell_key = key_of(s)
        first_of.setdefault(cell_key, sheet_row)
        if cell_key in slot_numbers:
            slot_of[sheet_row] = slot_numbers[cell_key]

    title = rl.title
    out: dict[tuple[str, str], CellValue] = {}
    for i in range(layout.rows):
        slot = slot_of.get(layout.raw_first + i)
        # the cells sheet holds layout.cell_slots cells; a row of a cell beyond them has no slot
        slot = slot if slot is not None and slot <= layout.cell_slots else None
        out[(title, f"{HELPER_COLS['cell_slot']}{TABLE_FIRST_ROW + i}")] = 0.0 if slot is None else float(slot)
        tps = tps_of.get(layout.raw_first + i)
        first = tps_of.get(first_of[keys[slot - 1]]) if slot is not None else None
        dev = tps - first if tps is not None and first is not None else None
        out[(title, f"{HELPER_COLS['dev']}{TABLE_FIRST_ROW + i}")] = dev
        out[(title, f"{HELPER_COLS['dev_sq']}{TABLE_FIRST_ROW + i}")] = None if dev is None else dev * dev

    for i in range(slots):
        row = TABLE_FIRST_ROW + i
        values: dict[str, CellValue] = {key: None for key in TABLE_KEYS if key != "slot"}
        if i < len(cells):
            c = cells[i]
            values.update({
                "first_row": float(first_of[key_of(c)]),
                "prompt_level": float(c.prompt_level) if c.prompt_level is not None else None,
                "model": c.model, "concurrency": float(c.concurrency), "max_tokens": float(c.max_tokens),
                "n": float(c.n), "median": c.median_tps, "mean": c.mean_tps, "cv": c.cv,
                "flagged": 1.0 if c.flagged else 0.0,
                "repeats_needed": float(c.repeats_needed) if c.repeats_needed is not None else None,
                "more_repeats": float(c.more_repeats) if c.more_repeats is not None else None,
            })
        for key, value in values.items():
            out[(title, rl.cell(key, row))] = value

    t = TEXTS[layout.lang]
    hidden = max(0, len(cells) - slots)
    out[(title, rl.threshold_cell)] = thr
    out[(title, rl.summary_cell("cells"))] = float(len(cells))
    out[(title, rl.summary_cell("shown"))] = float(min(len(cells), slots))
    out[(title, rl.summary_cell("flagged"))] = float(sum(1 for c in cells[:slots] if c.flagged))
    out[(title, rl.summary_cell("hidden_note"))] = (
        t["hidden"].replace("{hidden}", str(hidden)).replace("{slots}", str(slots)) if hidden else None)
    return out



def _write(ws: Worksheet, b: Building) -> dict[str, str]:
    return write_sheet(ws, b.layout, b.fills, slots=b.layout.cell_slots)


def _reference(c: Checking) -> None:
    c.exp.update(expected_sheet(c.layout, c.analysis, slots=c.layout.cell_slots, threshold=c.inputs.cv_threshold,
                                sheet_rows=[sheet_row for sheet_row, _ in c.inputs.rows]))


SHEET = SheetSpec("replicates", SHEET_TITLES, _write, _reference,
                  input_rows=lambda layout: THRESHOLD_ROW)  # its one input: `read_threshold`


__all__ = [
    "SHEET", "DEFAULT_SLOTS", "DEFINED_NAMES", "SHEET_TITLES", "ReplicatesLayout", "effective_threshold",
    "expected_sheet", "read_threshold", "threshold_cell", "write_sheet", "write_threshold",
]
