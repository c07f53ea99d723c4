"""The raw-data sheet: the rows a person types or pastes (one per experiment), and three display
cells per row that say what became of it (its TPS, its role, why it was left out).

This module owns the sheet's writer (headers, input colours, validation, the hint on a row
inserted by hand, print setup), its display formulas and their reference values, side by side
and independent: that independence is what `verify` checks. Its columns are `layout.py`'s
(`ENTRY_COLUMNS`), because the filler writes rows there and every workings sheet reads them by
position (INDEX into each input column's range, from the header down; the defined names
`SCM_In_<column>` name the same ranges, and `io.covered_rows` reads how far they reach).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from openpyxl.utils import get_column_letter
from openpyxl.worksheet.datavalidation import DataValidation
from openpyxl.worksheet.worksheet import Worksheet

from scm_xl.rules import OVERRIDE_VALUES
from scm_xl.xlsx.values import CellValue
from scm_xl.workbook.expected import Expected, text_value
from scm_xl.workbook.formulas import Formulas
from scm_xl.workbook.io import Inputs
from scm_xl.workbook.layout import (
    DISPLAY_KEYS, ENTRY_COLUMNS, NUMERIC_INPUT_KEYS, SHEET_TITLES, WORKINGS_KEYS, Layout,
)
from scm_xl.workbook.printing import MIN_PRINT_SCALE, PAGE_WIDTH_CHARS, print_setup
from scm_xl.workbook.sheet import Building, Checking, SheetSpec, names_on
from scm_xl.workbook.stamp import write_filled
from scm_xl.workbook.styles import FORMULA_FILL, INPUT_FILL, _header, fill_column, wrap_column


# -- the formulas ----------------------------------------------------------------


def display_formulas(fx: Formulas) -> dict[str, str]:
    """What became of each typed row, looked up by position (ROW()), so the cells can be
    moved, sorted or filled down with the row in any spreadsheet program."""
    lo = fx.lo
    at = f"ROW()-{lo.raw_header_row}"
    calc = lo.raw_range

    def pick(rng: str) -> str:
        return f"INDEX({rng},{at})"

    guard = f"{at}>ROWS({calc('present')})"
    role = lo.cons_range("role", sheet=True)
    note = lo.cons_range("note", sheet=True)
    unusable = pick(calc("unusable"))
    physics = pick(calc("physics_text"))
    return {
        "show_tps": f"=IF({guard},\"\",{pick(calc('tps'))})",
        "show_role": f"=IF({guard},\"\",IF({unusable}<>\"\",\"unusable\",{pick(role)}))",
        "show_status": (f"=IF({guard},\"\",IF({unusable}<>\"\",{unusable},"
                        f"{pick(note)}&IF(AND({pick(note)}<>\"\",{physics}<>\"\"),\"; \",\"\")&{physics}))"),
    }


# -- the reference ---------------------------------------------------------------


def display_values(exp: Expected, layout: Layout, inputs: Inputs) -> None:
    """The raw-data sheet's display cells, wherever they hold their formulas."""
    title = layout.title("raw")
    cons = layout.title("consistency")
    for sheet_row in inputs.display_rows:
        position = sheet_row - layout.raw_header_row
        values: dict[str, CellValue] = {key: None for key in DISPLAY_KEYS}
        if 1 <= position <= layout.rows:
            calc_row = layout.raw_first + position - 1
            cons_row = layout.cons_first + position - 1
            unusable = exp.get(layout.raw_address("unusable", calc_row))
            note = exp.get((cons, f"{layout.cons_col('note')}{cons_row}")) or ""
            physics = exp.get(layout.raw_address("physics_text", calc_row)) or ""
            values["show_tps"] = exp.get(layout.raw_address("tps", calc_row))
            if unusable:
                values["show_role"] = "unusable"
                values["show_status"] = unusable
            else:
                values["show_role"] = exp.get((cons, f"{layout.cons_col('role')}{cons_row}"))
                values["show_status"] = text_value(f"{note}{'; ' if note and physics else ''}{physics}")
        for key, value in values.items():
            exp[(title, f"{layout.entry_col(key)}{sheet_row}")] = value


# -- the writer ------------------------------------------------------------------


# The raw-data columns that hold text (their headers sit left, the numbers' right).
RAW_TEXT_KEYS = tuple(c.key for c in ENTRY_COLUMNS if c.key not in NUMERIC_INPUT_KEYS and c.key != "show_tps")


def write_sheet(ws: Worksheet, b: Building) -> dict[str, str]:
    """The sheet a person types into: inputs, and three display columns per covered row; a defined
    name for each input column's range."""
    layout, fills = b.layout, b.fills
    _header(ws, layout.raw_header_row, 1, ENTRY_COLUMNS, layout.lang, text_keys=RAW_TEXT_KEYS)
    ws.freeze_panes = f"B{layout.raw_first}"
    for column in ENTRY_COLUMNS:
        letter = layout.entry_col(column.key)
        if column.kind == "input":
            ws.column_dimensions[letter].fill = INPUT_FILL
    display = display_formulas(b.fx)
    formats = {"show_tps": "0.00"}
    rows = range(layout.raw_first, layout.raw_last + 1)
    letters = {key: layout.entry_col(key) for key in display}
    write_filled(ws, fills, letters, lambda _: display, rows, number_formats=formats)
    for letter in letters.values():
        ws.column_dimensions[letter].fill = FORMULA_FILL
    wrap_column(ws, letters["show_status"], rows, fills)
    fill_column(ws, letters["show_tps"], rows, fills)  # its number format made its cells' own style, white
    last_col = get_column_letter(len(ENTRY_COLUMNS))
    ws.auto_filter.ref = f"A{layout.raw_header_row}:{last_col}{layout.raw_last}"
    _validations(ws, layout)
    _hint_inserted_rows(ws, layout, letters)
    # Pages side by side at a readable size (one page wide it printed at about 4 pt), each
    # with the header row and the exp_id column that says which row is which.
    width = sum(ws.column_dimensions[get_column_letter(i)].width for i in range(1, len(ENTRY_COLUMNS) + 1))
    print_setup(ws, repeat_rows=f"{layout.raw_header_row}:{layout.raw_header_row}",
                pages_wide=math.ceil(width * MIN_PRINT_SCALE / PAGE_WIDTH_CHARS), repeat_cols="A:A")
    return {**names_on(layout, "raw"), **layout.entry_names()}


INSERTED_ROW_FILL = "FCE4D6"  # light orange: a row typed in where the display cells have no formula
INSERTED_ROW_HINT = {
    "zh": "橙色的行是手动插入的：表格程序不会把公式复制进插入的行，所以它在本表的 TPS、角色和状态三格是空的。"
          f"「{SHEET_TITLES['zh']['consistency']}」表已经按同一 exp_id 显示了它的 TPS、角色和原因；把上一行的这三格复制下来"
          "（或运行 scm-xl fill --workbook），本表也会显示。其余各表已经计入这一行。",
    "en": "An orange row was inserted by hand: a spreadsheet copies no formula into an inserted row, so its "
          f"TPS, role and status cells here are blank. The {SHEET_TITLES['en']['consistency']} sheet shows its TPS, role and reason "
          "already (the row of the same exp_id); copy those three cells from the row above (or run scm-xl "
          "fill --workbook) to see them here too. The other sheets count the row already.",
}
# The hints earlier versions wrote: still scm-xl's own when a person's workbook is filled again.
_EARLIER_HINTS = (
    "橙色的行是手动插入的：它的 TPS、角色和状态三格没有公式。把上一行的这三格复制下来"
    "（或运行 scm-xl fill --workbook），就会显示该行的 TPS、角色和原因。其余各表已经计入这一行。",
    "An orange row was inserted by hand: its TPS, role and status cells hold no formula. Copy those "
    "three cells from the row above (or run scm-xl fill --workbook) to see the row's TPS, role and "
    "reason. The other sheets count the row already.",
)


OWN_COMMENTS = frozenset((*INSERTED_ROW_HINT.values(), *_EARLIER_HINTS))  # scm-xl's own comments (never a person's)


def _hint_inserted_rows(ws: Worksheet, layout: Layout, display: Mapping[str, str]) -> None:
    """A row a person inserts gets no display formulas (a spreadsheet copies none into it): colour
    such a row orange (conditional formatting: it follows every edit) and say on the TPS column's
    header what to do. The workings count the row either way; only what it shows is missing."""
    from openpyxl.comments import Comment
    from openpyxl.formatting.rule import FormulaRule
    from openpyxl.styles import PatternFill

    first, last_col = layout.raw_first, get_column_letter(len(ENTRY_COLUMNS))
    exp_id, tps = layout.entry_col("exp_id"), display["show_tps"]
    rule = FormulaRule(formula=[f'AND(${exp_id}{first}<>"",NOT(_xlfn.ISFORMULA(${tps}{first})))'],
                       fill=PatternFill("solid", fgColor=INSERTED_ROW_FILL))
    ws.conditional_formatting.add(f"A{first}:{last_col}{layout.raw_last}", rule)
    header = ws[f"{tps}{layout.raw_header_row}"]
    header.comment = Comment(INSERTED_ROW_HINT[layout.lang], "scm-xl", width=340, height=150)


def _validations(ws: Worksheet, layout: Layout) -> None:
    def rng(key: str) -> str:
        col = layout.entry_col(key)
        return f"{col}{layout.raw_first}:{col}{layout.raw_last}"

    positive_int = DataValidation(type="whole", operator="greaterThanOrEqual", formula1="1", allow_blank=True,
                                  showErrorMessage=True, error="a whole number ≥ 1")
    count = DataValidation(type="whole", operator="greaterThanOrEqual", formula1="0", allow_blank=True,
                           showErrorMessage=True, error="a whole number ≥ 0")
    seconds = DataValidation(type="decimal", operator="greaterThan", formula1="0", allow_blank=True,
                             showErrorMessage=True, error="seconds > 0")
    override = DataValidation(type="list", formula1=f'"{",".join(OVERRIDE_VALUES)}"', allow_blank=True,
                              showErrorMessage=True, error=f"{', '.join(OVERRIDE_VALUES)} or blank")
    for dv in (positive_int, count, seconds, override):
        ws.add_data_validation(dv)
    for key in ("concurrency", "requests_per_slot", "total_requests", "max_tokens"):
        positive_int.add(rng(key))
    for key in ("total_output_tokens", "ok_requests", "failed_requests", "rate_limited_requests", "repeat"):
        count.add(rng(key))
    seconds.add(rng("total_time_s"))
    override.add(rng("override"))


def reference(c: Checking) -> None:
    display_values(c.exp, c.layout, c.inputs)


SHEET = SheetSpec("raw", {lang: SHEET_TITLES[lang]["raw"] for lang in SHEET_TITLES}, write_sheet, reference,
                  reads=(*WORKINGS_KEYS, "consistency"), inputs="whole")
