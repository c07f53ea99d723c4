"""How the workbook looks: fills, fonts, and the small writers every sheet module uses.

Yellow cells are for typing, grey ones are formulas, blue headers, pale blue for the
figures a person came for. Sheet modules import from here (never from build.py).
"""

from __future__ import annotations

import math
from copy import copy
from typing import Any, cast

from typing import TYPE_CHECKING, Iterable

from openpyxl import Workbook
from openpyxl.cell.cell import Cell as XlCell
from openpyxl.compat.strings import safe_string
from openpyxl.styles import Alignment, Font, PatternFill
from openpyxl.utils.indexed_list import IndexedList
from openpyxl.utils import column_index_from_string, get_column_letter
from openpyxl.worksheet.formula import ArrayFormula
from openpyxl.worksheet.worksheet import Worksheet

from scm_xl.xlsx.text_fit import (  # noqa: F401  (the sheet writers take them from here)
    DEFAULT_FONT_SIZE, row_height, text_width, wrapped_lines,
)

if TYPE_CHECKING:
    from scm_xl.workbook.stamp import PendingFills
    from scm_xl.rules import Lang
    from scm_xl.workbook.layout import Column

INPUT_FILL = PatternFill("solid", fgColor="FFF2CC")  # pale yellow: type here
FORMULA_FILL = PatternFill("solid", fgColor="EDEDED")  # grey: computed, do not type
HEADER_FILL = PatternFill("solid", fgColor="1F4E78")
KEY_FILL = PatternFill("solid", fgColor="DDEBF7")
HEADER_FONT = Font(bold=True, color="FFFFFF")
TITLE_FONT = Font(bold=True, size=14)
BIG_FONT = Font(bold=True, size=18)
BOLD = Font(bold=True)
NOTE_FONT = Font(italic=True, color="595959")
WORKINGS_TAB = "808080"  # tab colour of the workings sheets
FORMULA_PREFIXES = ("=", "+", "-", "@")
BOLD_WIDTH = 1.15  # a bold header's word against the same word in the body font

# Verdict colours (conditional formatting): background, font.
VERDICT_COLOURS = {
    "excellent": ("C6EFCE", "006100"),
    "good": ("DDEBF7", "1F4E78"),
    "fail": ("FFC7CE", "9C0006"),
    "insufficient": ("FFEB9C", "9C5700"),
}


class _SchemaOrderFont(Font):
    """A font written with its children in the order of the Open XML SDK's schema, Excel's own
    (`<sz/><color/><name/><family/><scheme/>`). openpyxl writes name and family first, which
    ECMA-376 allows (CT_Font is a repeatable choice) but the SDK's schema, and so the validators
    built on it (openxml-audit), call an unexpected element: Excel is then predicted to repair."""

    __elements__ = ("b", "i", "strike", "condense", "extend", "outline", "shadow", "u", "vertAlign", "sz",
                    "color", "name", "family", "charset", "scheme")
    __nested__ = Font.__nested__  # the metaclass derives these from the class's own fields: none here


def _in_schema_order(font: Font) -> Font:
    if type(font) is _SchemaOrderFont:
        return font
    ordered = _SchemaOrderFont()
    for key in Font.__elements__:
        setattr(ordered, key, getattr(font, key))
    return ordered


def fonts_in_schema_order(wb: Workbook) -> None:
    """Have `wb` write every font (cell fonts and conditional formats') in the schema's order;
    called just before saving. The fonts keep their positions, so every cell keeps its font."""
    book = cast(Any, wb)  # openpyxl writes the stylesheet from these private lists; no public API, no stubs
    book._fonts = IndexedList([_in_schema_order(font) for font in book._fonts])
    for style in book._differential_styles.styles:
        if style.font is not None:
            style.font = _in_schema_order(style.font)


def write_text(cell: XlCell, value: str) -> None:
    """Write a string as text, even if it looks like a formula."""
    cell.value = value
    if value.startswith(FORMULA_PREFIXES):
        cell.data_type = "s"
        cell.quotePrefix = True


def write_value(cell: XlCell, value: Any) -> None:
    """Type a value into a cell as a person would: text stays text (even "=cmd"), numbers stay
    numbers, a float as its file will hold it (`as_saved`)."""
    if isinstance(value, str):
        write_text(cell, value)
    elif type(value) is float:
        cell.value = as_saved(value)
    else:
        cell.value = value


def as_saved(value: float) -> float:
    """A float as the saved file holds it: openpyxl writes 16 significant digits
    (`openpyxl.compat.safe_string`), so 12.126047822328516 is 12.12604782232852 in the file. Every
    input cell is typed through `write_value`, so a workbook held in memory holds what its file
    will, and the reference `fill` computes from its inputs is the one `verify` computes from the
    file: to the bit, as IronCalc computes from it."""
    return float(safe_string(value)) if math.isfinite(value) else value


def fit_row(ws: Worksheet, row: int, texts: Iterable[tuple[str, float, float]]) -> None:
    """Give `row` the height its tallest text needs: texts are (text, column width, font size)."""
    needed = max((row_height(wrapped_lines(text, width), size) for text, width, size in texts), default=0.0)
    current = ws.row_dimensions[row].height or 0
    if needed > max(current, row_height(1)):
        ws.row_dimensions[row].height = needed


def wrapped_note(ws: Worksheet, address: str, last_col: str, width: float, font: Font | None = None) -> None:
    """A long note wrapped within columns from its own to `last_col` (merged), `width`
    characters in all, its row as tall as the wrapped text: on screen and on paper it stays
    inside the page instead of running past the margin."""
    cell = ws[address]
    if font is not None:
        cell.font = font
    cell.alignment = Alignment(wrap_text=True, vertical="top")
    if cell.column_letter != last_col:
        ws.merge_cells(f"{address}:{last_col}{cell.row}")
    size = (cell.font.sz if cell.font is not None and cell.font.sz else None) or DEFAULT_FONT_SIZE
    fit_row(ws, cell.row, [(str(cell.value or ""), width, float(size))])


def header(ws: Worksheet, row: int, col: int, columns: Iterable[Column], lang: Lang,
           text_keys: Iterable[str] = ()) -> None:
    """A row of column headers (layout Columns) from column `col` on: see header_cells."""
    header_cells(ws, row, [(column.key, get_column_letter(col + i), column.header(lang), column.width)
                           for i, column in enumerate(columns)], text_keys)


def header_cells(ws: Worksheet, row: int, cells: Iterable[tuple[str, str, str, float]],
                 text_keys: Iterable[str] = ()) -> None:
    """Column headers, each (key, column letter, text, least width), widening the columns to fit,
    the row as tall as the longest wrapped header. A header sits where its figures do: right over
    numbers, left over the columns in `text_keys` (names, roles, notes)."""
    text = set(text_keys)
    fitted = []
    for key, letter, label, least in cells:
        cell = ws[f"{letter}{row}"]
        cell.value = label
        cell.font = HEADER_FONT
        cell.fill = HEADER_FILL
        cell.alignment = Alignment(wrap_text=True, vertical="center", horizontal="left" if key in text else "right")
        # a column openpyxl has not seen yet is 0 wide here, not its default 13 (which would
        # widen every narrower column to 13)
        existing = ws.column_dimensions[letter].width if letter in ws.column_dimensions else 0
        # wide enough for the header's longest word: a word broken over two lines reads as two
        longest = max((text_width(word) for word in label.split()), default=0.0)
        ws.column_dimensions[letter].width = max(existing or 0, least, math.ceil(longest * BOLD_WIDTH + 1.5))
        if not ws.column_dimensions[letter].hidden:
            fitted.append((label, float(ws.column_dimensions[letter].width), DEFAULT_FONT_SIZE))
    fit_row(ws, row, fitted)


def array(ws: Worksheet, col: str, first: int, last: int, formula: str, fill: PatternFill = FORMULA_FILL,
          number_format: str | None = None, column_style: bool = False) -> None:
    """One CSE array formula over a column range (workings sheets only: a person cannot
    insert or delete a row through one)."""
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


def formula(ws: Worksheet, address: str, text: str, number_format: str | None = None,
            array: bool = False, fill: PatternFill | None = FORMULA_FILL) -> None:
    ws[address] = ArrayFormula(address, text) if array else text
    if fill is not None:
        ws[address].fill = fill
    if number_format:
        ws[address].number_format = number_format


def label(ws: Worksheet, address: str, text: str, bold: bool = False) -> None:
    ws[address] = text
    if bold:
        ws[address].font = BOLD


# The names the sheet modules used when these lived in build.py.
_array = array
_formula = formula
_label = label
_header = header


WRAPPED = Alignment(wrap_text=True)  # at the bottom, beside its row's figures


def wrap_column(ws: Worksheet, letter: str, rows: range, fills: PendingFills) -> None:
    """The formula texts of column `letter` wrap within it, on every row of `rows` (a pending
    shared formula's middle cells take the style of its first). Their rows get the height their
    text needs only where the text is known: `cached_values` sizes them as it stores a filled
    workbook's values (no program sizes a wrapped row of an .xlsx it opens); the template's
    empty rows keep the default height."""
    for cell in fill_column(ws, letter, rows, fills):
        cell.alignment = WRAPPED


def fill_column(ws: Worksheet, letter: str, rows: range, fills: PendingFills) -> list[XlCell]:
    """Give column `letter`'s cells in `rows` its fill (a cell's own style replaces its column's:
    keep its colour) and return them; a pending shared formula's middle cells (`fills`) are left alone,
    as they take the style of its first."""
    middle = fills.rows(ws, column_index_from_string(letter))
    fill = copy(ws.column_dimensions[letter].fill)
    cells = [ws[f"{letter}{row}"] for row in rows if row not in middle]
    for cell in cells:
        cell.fill = fill
    return cells
