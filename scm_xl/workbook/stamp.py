"""Per-row formulas from one template, for sheets with thousands of rows.

A column whose formula is the same relative formula in every row (the same formula in
R1C1 terms: only relative row numbers move) is written as an xlsx shared formula, as Excel
itself saves a filled-down column: the first cell holds the text and the range, every
other cell only the index of that formula. Excel, LibreOffice, IronCalc and openpyxl read
it as one formula per cell; the file is a fraction of the size, and an engine parses the
formula once per column instead of once per cell (IronCalc loads a 10,000-row workbook
about 20 times faster). A column that is not the same relative formula everywhere is
written one formula per cell, as before.

openpyxl holds only each shared column's first and last cell; the cells between are
`PendingFills`, which `BuiltWorkbook.save` writes straight into the sheet XML: a million
openpyxl cells cost seconds and hundreds of megabytes that a 10,000-row workbook does not
need. A built workbook is saved through its `BuiltWorkbook` and no other way: its openpyxl
`save` refuses (it would silently leave the pending cells out).
"""

from __future__ import annotations

import contextlib
import functools
import math
import re
import shutil
import zipfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from openpyxl import Workbook
from openpyxl.cell.cell import ILLEGAL_CHARACTERS_RE, Cell, MergedCell
from openpyxl.compat.strings import safe_string
from openpyxl.formula.translate import Translator
from openpyxl.utils import column_index_from_string
from openpyxl.utils.indexed_list import IndexedList
from openpyxl.worksheet.formula import ArrayFormula
from openpyxl.worksheet.worksheet import Worksheet

from scm_xl.xlsx.fills import FilledColumn, with_fills, with_rows
from scm_xl.xlsx.package import SheetRewrite, column_name, copy_package, sheet_parts
from scm_xl.xlsx.values import FormulaText, TypedCell, cell_count
from scm_xl.workbook.styles import fonts_in_schema_order

SENTINEL_ROW = 1048000  # a row number no sheet reaches


class SharedFormula(ArrayFormula):
    """One cell of an xlsx shared formula (ECMA-376 §18.3.1.40, t="shared"): the first cell
    carries the formula text and the range it is shared over, the others only its index.

    openpyxl writes the attributes an ArrayFormula yields, so this subclass is all it takes;
    openpyxl reading the file back gives each cell its own translated formula."""

    t = "shared"

    def __init__(self, index: int, ref: str | None = None, text: str | None = None) -> None:
        super().__init__(ref, text)
        self.index = index

    def __iter__(self) -> Iterator[tuple[str, str]]:
        yield "t", "shared"
        if self.ref:
            yield "ref", self.ref
        yield "si", str(self.index)


def is_formula(value: object) -> bool:
    """A cell value that is a formula: text starting with "=", or an array or shared formula."""
    return isinstance(value, ArrayFormula) or (isinstance(value, str) and value.startswith("="))


def _stamped(base: Mapping[str, str], row: int, marks: list[tuple[str, int]]) -> dict[str, str]:
    stamped = {}
    for key, text in base.items():
        text = text.replace(str(SENTINEL_ROW), str(row))
        for mark, offset in marks:
            text = text.replace(mark, str(row + offset))
        stamped[key] = text
    return stamped


@functools.lru_cache(maxsize=4096)
def shares(text: str, first: str, later: str, expected: str) -> bool:
    """Whether the formula `text` at cell `first`, copied to `later`, reads `expected` (so the
    column can be one shared formula). Remembered: every workbook of a layout asks the same
    questions (about 300; openpyxl's tokenizer takes a fifth of a small workbook's build)."""
    if not text.startswith("="):
        return False
    return Translator(text, origin=first).translate_formula(later) == expected


@dataclass(frozen=True)
class _Fill:
    """A shared formula's cells between its first and last, written into the file by
    `BuiltWorkbook.save` rather than held as a million openpyxl cells."""

    column: int
    first: int  # the first row without an openpyxl cell
    last: int
    index: int
    anchor: Cell


class PendingFills:
    """The shared columns' middle cells of a workbook being built, and each sheet's next
    shared-formula index: what `write_filled` adds and `BuiltWorkbook.save` writes."""

    def __init__(self) -> None:
        self._fills: list[_Fill] = []
        self._indexes: dict[int, tuple[Worksheet, int]] = {}  # id(ws) -> (ws, next index)

    def next_index(self, ws: Worksheet) -> int:
        """The next shared-formula index of a sheet (unique within the sheet, as xlsx requires)."""
        _, index = self._indexes.get(id(ws), (ws, 0))
        self._indexes[id(ws)] = (ws, index + 1)  # holding ws keeps its id from being reused
        return index

    def add(self, fill: _Fill) -> None:
        self._fills.append(fill)

    def rows(self, ws: Worksheet, column: int) -> range:
        """The rows of `ws`'s column `column` (from 1) whose cells are a pending shared formula's
        middle cells: not in the workbook object, each holding that formula once saved."""
        for fill in self._fills:
            if fill.column == column and fill.anchor.parent is ws:
                return range(fill.first, fill.last + 1)
        return range(0)

    def columns(self) -> dict[str, list[FilledColumn]]:
        """`by_sheet` without the columns' styles (asked before saving: `by_sheet` then is not)."""
        out: dict[str, list[FilledColumn]] = {}
        for fill in self._fills:
            out.setdefault(fill.anchor.parent.title, []).append(
                FilledColumn(fill.column, fill.first, fill.last, fill.index, None))
        return out

    def by_sheet(self) -> dict[str, list[FilledColumn]]:
        """Sheet title -> the columns to write into that sheet's XML (asked once the workbook is
        saved: asking a cell's style_id before gives the styles other numbers)."""
        out: dict[str, list[FilledColumn]] = {}
        for fill in self._fills:
            anchor = fill.anchor
            out.setdefault(anchor.parent.title, []).append(FilledColumn(
                fill.column, fill.first, fill.last, fill.index, anchor.style_id if anchor.has_style else None))
        return out


def write_filled(ws: Worksheet, fills: PendingFills, letters: Mapping[str, str],
                 template: Callable[[int], dict[str, str]], rows: range, *related: int,
                 number_formats: Mapping[str, str] | None = None) -> list[str]:
    """Write `template`'s formulas down `rows`, each key into its column `letters[key]`: as one
    shared formula where the column is the same relative formula in every row (its first and
    last cell in `ws`, the cells between added to `fills`), else one formula per cell;
    `number_formats` (key -> format) for every cell of a column. Returns the keys written cell
    by cell."""
    if not rows:
        return []
    formats = number_formats or {}
    base = template(SENTINEL_ROW)
    marks = [(str(SENTINEL_ROW + offset), offset) for offset in related]
    first = _stamped(base, rows[0], marks)
    second = _stamped(base, rows[1], marks) if len(rows) > 1 else first
    last = _stamped(base, rows[-1], marks)
    shared, plain = [], []
    for key, text in first.items():
        col = letters[key]
        if len(rows) > 1 and shares(text, f"{col}{rows[0]}", f"{col}{rows[1]}", second[key]) \
                and shares(text, f"{col}{rows[0]}", f"{col}{rows[-1]}", last[key]):
            shared.append(key)
        else:
            plain.append(key)
    for key in shared:
        col = letters[key]
        index = fills.next_index(ws)
        anchor = ws[f"{col}{rows[0]}"]
        anchor.value = SharedFormula(index, f"{col}{rows[0]}:{col}{rows[-1]}", first[key])
        follower = SharedFormula(index)  # one object: openpyxl only reads it when it writes
        if len(rows) > 2:
            fills.add(_Fill(column_index_from_string(col), rows[1], rows[-2], index, anchor))
        for row in [rows[0], rows[-1]]:  # the last cell keeps the sheet's extent
            cell = ws[f"{col}{row}"]
            if row != rows[0]:
                cell.value = follower
            if key in formats:
                cell.number_format = formats[key]
    if plain:
        plain_base = {key: base[key] for key in plain}
        for row in rows:
            for key, text in _stamped(plain_base, row, marks).items():
                cell = ws[f"{letters[key]}{row}"]
                cell.value = text
                if key in formats:
                    cell.number_format = formats[key]
    return plain


def _refuse_plain_save(*_: object, **__: object) -> None:
    raise TypeError("a built workbook is saved with BuiltWorkbook.save: openpyxl's save would leave "
                    "the shared columns' pending cells out")


class BuiltWorkbook:
    """A workbook as `registry.build_workbook` made it: the openpyxl workbook, which the sheet
    writers and `io` edit, and the cells it does not hold (`fills`). `save` is the only way to
    write it; the openpyxl workbook's own `save` refuses."""

    def __init__(self, wb: Workbook, fills: PendingFills) -> None:
        self.wb = wb
        self.fills = fills
        self.released = False
        wb.save = _refuse_plain_save  # type: ignore[method-assign]

    def save(self, path: str | Path | None, *, sparse: str | Path | None = None,
             engine_input: Callable[[str], SheetRewrite | None] | None = None) -> dict[str, list[FilledColumn]]:
        """Save to `path`, the pending cells written into the sheets' XML (streamed, row by row)
        as openpyxl would have. Returns those columns, by sheet.

        `sparse`, when given, keeps openpyxl's own file there (without the pending cells), for
        `cached_values.write_cached_values(..., fills=<what this returned>)` to write the final
        file from in one pass, the pending cells with their values; `path` is then the engine's
        input, and `engine_input` (an engine's `prepare`) rewrites its members on the way (only
        then: without `sparse`, `path` is the final file, and save refuses an `engine_input`).
        `path` None, with `sparse`: only openpyxl's own file (the engine's input was saved
        before, and the engine given what was typed since: `typed_since`)."""
        if self.released:
            raise RuntimeError("this workbook's cells were released after it was saved")
        if path is None:
            if sparse is None or engine_input is not None:
                raise ValueError("save(None) writes openpyxl's own file only, at sparse")
            return _save_sparse(self.wb, self.fills, Path(sparse))
        return _save(self.wb, self.fills, path, sparse=sparse, engine_input=engine_input)

    def formula_cell_count(self) -> int:
        """How many formula cells `save` writes now (`formula_cells` counted, without spelling an
        address for each: an engine decides from it how to evaluate the workbook)."""
        count = sum(fill.last - fill.first + 1 for columns in self.fills.columns().values() for fill in columns)
        for ws in self.wb.worksheets:
            count += sum(1 if array is None else cell_count(array) for _, array in _formulas_held(ws))
        return count

    def typed_since(self) -> TypedSince:
        """What the workbook holds now, to say later what was typed into it since (`TypedSince`)."""
        if self.released:
            raise RuntimeError("this workbook's cells were released after it was saved")
        return TypedSince(self.wb)

    def release(self) -> None:
        """Drop the cells the openpyxl workbook holds, once saved (the file has them): at 10,000
        rows their memory then serves the reference's values and the engine's, which come next.
        The workbook cannot be saved again."""
        for ws in self.wb.worksheets:
            ws._cells.clear()
        self.released = True

    def formula_cells(self, fills: Mapping[str, Sequence[FilledColumn]]) -> dict[str, list[str]]:
        """Each sheet's formula cells in the file `save` wrote (given what it returned, or the
        pending columns as they stand: `PendingFills.columns`): "A1" for a formula openpyxl held, an
        array formula's whole range, and each pending column as one range. An engine then need not
        read a million cells' XML to find them (`Engine.recalculate(cells=...)`)."""
        cells: dict[str, list[str]] = {}
        for ws in self.wb.worksheets:
            refs = cells.setdefault(ws.title, [])
            for cell, array in _formulas_held(ws):
                refs.append(array if array is not None else cell.coordinate)
            for fill in fills.get(ws.title, ()):
                name = column_name(fill.column)
                refs.append(f"{name}{fill.first}:{name}{fill.last}")
        return cells


def _formulas_held(ws: Worksheet) -> Iterator[tuple[Cell | MergedCell, str | None]]:
    """Each formula cell openpyxl holds in `ws`, with an array formula's whole range ("C2:C12": a
    formula in every cell of it; None for any other formula)."""
    for cell in ws._cells.values():
        if cell.data_type != "f":
            continue
        value = cell.value
        if isinstance(value, ArrayFormula) and not isinstance(value, SharedFormula) and value.ref and ":" in value.ref:
            yield cell, value.ref.replace("$", "")
        else:
            yield cell, None


class TypedSince:
    """The cells of a workbook as they were (`BuiltWorkbook.typed_since`), and `typed()`: the
    values and formulas typed into it since, as an engine that loaded the file saved then can be
    given them (`Engine.start_then`). `fill` saves the engine's input as the workbook was built,
    then types a new workbook's rows and analyses them, and the analysis types a few hundred cells
    more (the latency sheet's fitted knee, the charts' groups and their rows' formulas).

    `typed()` is None where anything else changed: a cell emptied or removed, an array or shared
    formula, a value an engine takes only from a file (a date, an error), a sheet added, renamed
    or moved, a defined name (print areas are no defined name here: openpyxl keeps a sheet's
    print area apart, and no formula reads it). Then the engine must load the file as it ends up."""

    def __init__(self, wb: Workbook) -> None:
        self.wb = wb
        self.titles = list(wb.sheetnames)
        self.names = _defined_names(wb)
        self.cells = {ws.title: {key: (getattr(cell, "_value", None), cell.data_type) for key, cell in ws._cells.items()}
                      for ws in wb.worksheets}

    def typed(self) -> list[TypedCell] | None:
        wb = self.wb
        if list(wb.sheetnames) != self.titles or _defined_names(wb) != self.names:
            return None
        typed: list[TypedCell] = []
        for ws in wb.worksheets:
            before = self.cells[ws.title]
            kept = 0
            for key, cell in ws._cells.items():
                value, kind = getattr(cell, "_value", None), cell.data_type
                was = before.get(key)
                if was is not None:
                    kept += 1
                    if (was[0] is value or was[0] == value) and was[1] == kind:
                        continue
                elif value is None:  # an empty cell openpyxl made when one was looked at
                    continue
                if kind == "f" and type(value) is str:
                    typed.append((ws.title, key[0], key[1], FormulaText(value)))
                    continue
                if value is None or kind not in _TYPED_KINDS or type(value) not in _TYPED_VALUES:
                    return None
                typed.append((ws.title, key[0], key[1], value))
            if kept != len(before):  # a cell removed
                return None
        return typed


_TYPED_KINDS = frozenset({"n", "s", "b", "inlineStr"})  # not "e" (an error) or "d" (a date)
_TYPED_VALUES = frozenset({int, float, bool, str})


def _defined_names(wb: Workbook) -> dict[tuple[str | None, str], str | None]:
    names: dict[tuple[str | None, str], str | None] = {(None, name): defined.attr_text
                                                       for name, defined in wb.defined_names.items()}
    for ws in wb.worksheets:
        names.update({(ws.title, name): defined.attr_text for name, defined in ws.defined_names.items()})
    return names


def _save_sparse(wb: Workbook, pending: PendingFills, sparse: Path) -> dict[str, list[FilledColumn]]:
    """openpyxl's own file at `sparse`, its large sheets' plain cells written in (`_PlainCells`);
    returns the pending cells by sheet, for the file written from it."""
    with _as_if_never_saved(wb):
        fonts_in_schema_order(wb)  # Excel's order: a schema validator then predicts no repair
        plain = _PlainCells.take(wb)
        try:
            Workbook.save(wb, sparse)
        finally:
            plain.put_back()
        if plain.sheets:
            plain.write_into(sparse)
        return pending.by_sheet()  # after saving: a cell's style_id numbers its style, in the order asked


@contextlib.contextmanager
def _as_if_never_saved(wb: Workbook) -> Iterator[None]:
    """What openpyxl's save leaves behind in the workbook, put back as it was: the numbers it gave
    the cells' styles and the conditional formats' styles (in the order it met them) and the
    columns' outline level it worked out (written into the sheet's format at the next save). A
    workbook saved twice (`fill` saves the engine's input early, then openpyxl's own file once
    the analysis has typed its cells) then writes, the second time, what one save would have."""
    book = cast(Any, wb)  # the private lists openpyxl numbers styles with: no public API
    cell_styles = IndexedList(book._cell_styles)
    differential = list(book._differential_styles.styles)
    rules = [(rule, rule.dxfId) for ws in wb.worksheets for cf in ws.conditional_formatting for rule in cf.rules]
    outlines = [(ws.column_dimensions, ws.column_dimensions.max_outline) for ws in wb.worksheets]
    try:
        yield
    finally:
        book._cell_styles = cell_styles
        book._differential_styles.styles = differential
        for rule, dxf_id in rules:
            rule.dxfId = dxf_id
        for dimensions, outline in outlines:
            dimensions.max_outline = outline


def _save(wb: Workbook, pending: PendingFills, path: str | Path, *, sparse: str | Path | None = None,
          engine_input: Callable[[str], SheetRewrite | None] | None = None) -> dict[str, list[FilledColumn]]:
    if engine_input is not None and sparse is None:
        # without `sparse`, `path` is the final file, which no engine's rewrite may touch
        raise ValueError("engine_input rewrites the engine's input, which save writes only beside sparse")
    path = Path(path)
    first = Path(sparse) if sparse is not None else path
    by_sheet = _save_sparse(wb, pending, first)
    if not by_sheet and engine_input is None:
        if sparse is not None:
            shutil.copyfile(first, path)
        return by_sheet
    with zipfile.ZipFile(first) as book:
        parts = {sheet_parts(book)[title]: sheet_fills for title, sheet_fills in by_sheet.items()}

    def rewrite(name: str) -> SheetRewrite | None:
        fills = parts.get(name)
        then = engine_input(name) if engine_input is not None else None
        if fills is None:
            return then
        if then is None:
            return lambda blocks: with_fills(blocks, fills)
        # openpyxl's rows through the engine's rewrite (whole rows in, whole rows out), then the
        # pending cells, which it has no need to see: a few megabytes of XML read, not a hundred
        return lambda blocks: with_fills(iter(then(blocks)), fills)

    # With `sparse`, `path` is the engine's input, read once and then replaced by the file
    # `write_cached_values` writes: stored, not compressed (a 10,000-row workbook's sheets are
    # a hundred megabytes of XML, seconds to deflate)
    copy_package(first, path, rewrite,
                 compression=zipfile.ZIP_STORED if sparse is not None else zipfile.ZIP_DEFLATED)
    return by_sheet


# What lxml refuses to write (a lone surrogate, U+FFFE, U+FFFF): such text is left to openpyxl's
# writer, as before.
_NOT_LXML_TEXT = re.compile("[\ud800-\udfff\ufffe\uffff]")

# A sheet with at least this many plain value cells has them written by `_PlainCells` rather than
# by openpyxl: at 10,000 raw rows openpyxl's writer took 0.7-1.0 s over the raw sheet's 100,000
# typed values, `_PlainCells` takes 0.3 s (taking them out, then writing them in). Below, the
# second pass over the file that `write_into` makes costs about what it saves.
PLAIN_CELLS_AT_LEAST = 2_000


class _PlainCells:
    """The plain value cells of a workbook's large sheets (a number, or text, with no style,
    comment or link: a sheet's typed inputs), taken out of openpyxl while it saves and then
    written into its file (`write_into`) as openpyxl writes them (`plain_cell_xml`); the file
    is the same, in about a third of the time."""

    def __init__(self) -> None:
        # sheet title -> (its <dimension ref> with the cells, its rows' cells as XML, the cells)
        self.sheets: dict[str, tuple[str, dict[int, list[tuple[int, bytes]]], dict[tuple[int, int], Any]]] = {}
        self.worksheets: dict[str, Worksheet] = {}

    @classmethod
    def take(cls, wb: Workbook) -> _PlainCells:
        plain = cls()
        for ws in wb.worksheets:
            taken: dict[tuple[int, int], Any] = {}
            rows: dict[int, list[tuple[int, bytes]]] = {}
            letters: dict[int, bytes] = {}
            for key, cell in ws._cells.items():
                row, col = key
                name = letters.get(col)
                if name is None:
                    name = letters[col] = column_name(col).encode("ascii")
                xml = plain_cell_xml(cell, b"%s%d" % (name, row))
                if xml is not None:
                    taken[key] = cell
                    rows.setdefault(row, []).append((col, xml))
            if len(taken) < PLAIN_CELLS_AT_LEAST:
                continue
            dimension = ws.calculate_dimension()  # before: the extent the cells give it
            for key in taken:
                del ws._cells[key]
            for cells in rows.values():
                cells.sort()
            plain.sheets[ws.title] = (dimension, rows, taken)
            plain.worksheets[ws.title] = ws
        return plain

    def put_back(self) -> None:
        """The cells back in openpyxl's workbook, as they were (their order aside)."""
        for title, (_, _, taken) in self.sheets.items():
            self.worksheets[title]._cells.update(taken)

    def write_into(self, path: Path) -> None:
        """The cells into the file openpyxl saved at `path` (each member compressed as it was)."""
        with zipfile.ZipFile(path) as book:
            parts = {sheet_parts(book)[title]: (dimension, rows) for title, (dimension, rows, _) in self.sheets.items()}

        def rewrite(name: str) -> SheetRewrite | None:
            if name not in parts:
                return None
            dimension, rows = parts[name]
            return lambda blocks: with_rows(blocks, rows, dimension)

        copy_package(path, path, rewrite, compression=None)


def plain_cell_xml(cell: object, ref: bytes) -> bytes | None:
    """The <c> element of the cell at `ref` ("A1") as openpyxl's writer (lxml's) writes it, for
    a plain value cell: a finite int or float, or a non-empty text, with no style, comment or
    link (None for any other cell, which openpyxl writes). A number as openpyxl formats it
    (`openpyxl.compat.safe_string`: 16 significant digits); text as an inline string, escaped as
    lxml escapes it, with xml:space="preserve" where it starts or ends with white space."""
    if type(cell) is not Cell:
        return None
    plain: Any = cell  # its slots, read directly: 100,000 cells of a 10,000-row workbook's raw sheet
    if plain._comment is not None or plain._hyperlink is not None or (plain._style is not None and any(plain._style)):
        return None
    value = plain._value
    kind = type(value)
    if (kind is int or kind is float) and plain.data_type == "n":
        if not math.isfinite(value):
            return None
        return b'<c r="%s" t="n"><v>%s</v></c>' % (ref, safe_string(value).encode("ascii"))
    if kind is str and plain.data_type == "s" and value and ILLEGAL_CHARACTERS_RE.search(value) is None \
            and _NOT_LXML_TEXT.search(value) is None:
        text = value.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("\r", "&#13;") \
            .encode("ascii", "xmlcharrefreplace")  # as lxml writes it: every other character as &#N;
        space = b' xml:space="preserve"' if value != value.strip() else b""
        return b'<c r="%s" t="inlineStr"><is><t%s>%s</t></is></c>' % (ref, space, text)
    return None
