"""How the workbook looks: fills, fonts, and the small writers every sheet module uses.

Yellow cells are for typing, grey ones are formulas, blue headers, pale blue for the
figures a person came for. Sheet modules import from here (never from build.py).
"""

from __future__ import annotations

from typing import Any, cast

from typing import TYPE_CHECKING, Iterable

from openpyxl import Workbook
from openpyxl.cell.cell import Cell as XlCell
from openpyxl.styles import Alignment, Font, PatternFill
from openpyxl.utils.indexed_list import IndexedList
from openpyxl.utils import get_column_letter
from openpyxl.worksheet.formula import ArrayFormula
from openpyxl.worksheet.worksheet import Worksheet

if TYPE_CHECKING:
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
    """Type a value into a cell as a person would: text stays text (even "=cmd"), numbers stay numbers."""
    if isinstance(value, str):
        write_text(cell, value)
    else:
        cell.value = value


def header(ws: Worksheet, row: int, col: int, columns: Iterable[Column], lang: Lang) -> None:
    """A row of column headers (layout Columns), widening the columns to fit."""
    for i, column in enumerate(columns):
        cell = ws.cell(row=row, column=col + i, value=column.header(lang))
        cell.font = HEADER_FONT
        cell.fill = HEADER_FILL
        cell.alignment = Alignment(wrap_text=True, vertical="center")
        letter = get_column_letter(col + i)
        ws.column_dimensions[letter].width = max(ws.column_dimensions[letter].width or 0, column.width)


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
