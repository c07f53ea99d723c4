"""A workbook's cells read the cheap way, for tests that read a few cells of one or two sheets.

`openpyxl.load_workbook` builds every cell of every sheet: a filled workbook's twenty sheets and
thousands of formulas cost 0.2 to 0.7 CPU-seconds a load, and the suite loaded workbooks a few
hundred times, mostly to read some cells of one sheet. `sheet(path, title)` parses that one sheet,
through openpyxl's own reader (its read-only mode: the same cell parser, values as a full load
gives them, formulas too with `formulas=True`), into an immutable snapshot read as a worksheet
is read: `ws["B7"].value`, `ws.cell(row, column).value`, `ws.max_row`, `ws.max_column`,
`ws.sheet_state`.
`layout(path)` is the layout scm-xl reads from the workbook's meta sheet, without the rest;
`outline(path)` its sheets (in order, with their states) and defined names, without any sheet.

`worksheet(path, title)` is one sheet as `openpyxl.load_workbook` gives it (styles, page setup,
charts, protection, validations), the other sheets' cells never parsed.
`retyped(source, target, title, {"B5": 130})` types a few values or formulas over cells a
workbook already has, every other byte of it kept: a person's edit of a few cells, without
openpyxl's load and save of the whole workbook.
Anything else of a workbook (a workbook to change in any other way and save, every sheet's
styles at once) still comes from `openpyxl.load_workbook`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

import openpyxl
from openpyxl.cell.read_only import EmptyCell
from openpyxl.utils.cell import coordinate_to_tuple, get_column_letter


@dataclass(frozen=True)
class Cell:
    row: int
    column: int
    value: Any

    @property
    def coordinate(self) -> str:
        return f"{get_column_letter(self.column)}{self.row}"


class Sheet:
    """One sheet's cells as the file holds them (cached values, or formulas with `formulas=True`)."""

    def __init__(self, title: str, cells: dict[tuple[int, int], Any], sheet_state: str = "visible") -> None:
        self.title = title
        self.sheet_state = sheet_state  # visible, hidden or veryHidden, as the workbook says
        self._cells: Mapping[tuple[int, int], Any] = MappingProxyType(cells)
        # as openpyxl counts them: the last row and column holding a cell in the file (styled or not)
        self.max_row = max((row for row, _ in cells), default=1)
        self.max_column = max((column for _, column in cells), default=1)

    def cell(self, row: int, column: int) -> Cell:
        return Cell(row, column, self._cells.get((row, column)))

    def __getitem__(self, coordinate: str) -> Cell:
        row, column = coordinate_to_tuple(coordinate)
        return self.cell(row, column)

    def __contains__(self, coordinate: str) -> bool:
        return coordinate_to_tuple(coordinate) in self._cells

    def values(self) -> Iterator[Cell]:
        """Every cell the file holds, row by row."""
        for (row, column), value in sorted(self._cells.items()):
            yield Cell(row, column, value)


def sheets(path: str | Path, *titles: str, formulas: bool = False) -> dict[str, Sheet]:
    """The named sheets of the workbook at `path`, each parsed once, the others not at all."""
    wb = openpyxl.load_workbook(path, read_only=True, data_only=not formulas)
    try:
        out = {}
        for title in titles:
            ws = wb[title]
            ws.reset_dimensions()  # every row the file holds, whatever its <dimension> says
            cells = {(c.row, c.column): c.value for row in ws.iter_rows() for c in row
                     if not isinstance(c, EmptyCell)}
            out[title] = Sheet(title, cells, ws.sheet_state)
        return out
    finally:
        wb.close()


def sheet(path: str | Path, title: str, *, formulas: bool = False) -> Sheet:
    """One sheet of the workbook at `path`: its cached values, or its formulas with `formulas=True`."""
    return sheets(path, title, formulas=formulas)[title]


@dataclass(frozen=True)
class Outline:
    """What a workbook says of itself: its sheets in order, each one's state, its defined names."""

    sheetnames: list[str]
    sheet_states: dict[str, str]  # title -> visible, hidden or veryHidden
    defined_names: dict[str, str]  # workbook-level name -> what it refers to ("'Calibration'!$C$13")


def outline(path: str | Path) -> Outline:
    """The workbook's sheets and defined names, read without parsing any sheet."""
    wb = openpyxl.load_workbook(path, read_only=True)
    try:
        return Outline(list(wb.sheetnames), {ws.title: ws.sheet_state for ws in wb.worksheets},
                       {name: defined.attr_text for name, defined in wb.defined_names.items()})
    finally:
        wb.close()


def layout(path: str | Path):  # type: ignore[no-untyped-def]
    """The layout the workbook at `path` was built with (`registry.read_layout`, the checks included)."""
    from scm_xl.workbook.registry import read_layout

    wb = openpyxl.load_workbook(path, read_only=True)
    try:
        return read_layout(wb, path)
    finally:
        wb.close()


@dataclass(frozen=True)
class Formula:
    """A formula for `retyped` to type into a cell, as a person types it: "=1+1"."""

    text: str


def retyped(source: str | Path, target: str | Path, title: str, values: Mapping[str, Any]) -> None:
    """`source` copied to `target` with cells of sheet `title` holding other values
    (`{"B3": 10**7, "B4": "abc", "C9": Formula('="x"'), "D2": None}`: a number, a text, a
    boolean or a formula, as a person types it over what was there, a formula too, or nothing:
    the cell cleared), every other byte of the package as it was (the other formula cells keep
    their cached values): for a test that types a few cells, where `openpyxl.load_workbook` and
    `save` rewrite the whole workbook (a second or so of CPU). Each cell must already be in the
    sheet; it keeps its style. A cell that holds the master of a shared formula is refused (the
    cells that share it would lose their formula)."""
    import re
    import zipfile
    from xml.sax.saxutils import escape

    from scm_xl.xlsx import package

    with zipfile.ZipFile(source) as book:
        part = package.sheet_parts(book)[title]

    def cell(ref: str, style: bytes, value: Any) -> bytes:
        head = f'<c r="{ref}"'.encode() + style
        if value is None:  # the cell cleared
            return head + b"/>"
        if isinstance(value, Formula):
            assert value.text.startswith("="), value
            return head + f"><f>{escape(value.text[1:])}</f></c>".encode()
        if isinstance(value, bool):
            return head + f' t="b"><v>{int(value)}</v></c>'.encode()
        if isinstance(value, (int, float)):
            return head + f' t="n"><v>{value!r}</v></c>'.encode()
        return head + f' t="inlineStr"><is><t>{escape(str(value))}</t></is></c>'.encode()

    found: set[str] = set()

    def replaced(match: re.Match[bytes]) -> bytes:
        ref = (match.group(1) + match.group(2)).decode()
        if ref not in values:
            return match.group(0)
        shared_master = re.search(rb'<f\b[^>]*t="shared"[^>]*\sref=', match.group(0))
        assert not shared_master, f"{title}!{ref} holds a shared formula"
        found.add(ref)
        style = re.search(rb'\ss="[0-9]+"', match.group(3))
        return cell(ref, style.group(0) if style else b"", values[ref])

    def rewrite(name: str) -> package.SheetRewrite | None:
        if name != part:
            return None
        # the byte layer's own cell pattern (a cell whose r is its first attribute, as every writer puts it)
        return lambda blocks: (package._CELL_WITH_R.sub(replaced, block) for block in blocks)

    package.copy_package(source, target, rewrite, compression=None)
    missing = set(values) - found
    assert not missing, f"{title} holds no cell at {sorted(missing)}"


def worksheet(path: str | Path, title: str, **options: Any) -> Any:
    """Sheet `title` of the workbook at `path` as `openpyxl.load_workbook(path, **options)[title]`
    gives it (styles, column widths, page setup, breaks, merged cells, charts, protection,
    validations), without parsing the cells of any other sheet: openpyxl reads a copy in which
    the other sheets keep everything but their rows. A filled workbook's other sheets are most of
    what a full load parses."""
    import tempfile
    import zipfile

    from scm_xl.xlsx import package

    with zipfile.ZipFile(path) as book:
        others = {part for name, part in package.sheet_parts(book).items() if name != title}

    def rewrite(name: str) -> package.SheetRewrite | None:
        if name not in others:
            return None
        return lambda blocks: (package.ROW_ELEMENT.sub(b"", block) for block in blocks)

    with tempfile.TemporaryDirectory(prefix="scm-xl-test-sheet-") as folder:
        copy = Path(folder) / Path(path).name
        package.copy_package(path, copy, rewrite)
        return openpyxl.load_workbook(copy, **options)[title]
