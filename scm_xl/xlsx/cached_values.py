"""Store an engine's computed values in a saved workbook, beside the formulas.

openpyxl writes formula cells with an empty value, so a reader that does not
calculate (openpyxl `data_only`, pandas, file and mail previews) sees blanks.
`write_cached_values` copies the xlsx and gives every formula cell the value an
engine computed, as Excel itself saves it: the formula stays, the value goes in
<v>, with t="str" for text, "b" for booleans and "e" for errors. The cells of an
array formula's range each get their own <v>.

`fill` writes its final file this way from openpyxl's own (sparse) file: the shared
columns' middle cells, which openpyxl never held (`workbook.stamp.BuiltWorkbook.save` says which), are written in
the same pass, each with its value, instead of a second pass over every cell of a saved
file. Otherwise only the <c> elements of formula cells (and of array ranges) change, and the
<row> of a formula cell whose style wraps text and whose value needs more lines
than its row has: that row gets the height the text needs at its column's width
(`_RowFitter`), as no program sizes the rows of an .xlsx it opens (LibreOffice
prints the lines of a wrapped cell over the next rows otherwise). Every other
byte of the sheet XML, and every other part of the package (styles, charts,
defined names, data validation, other sheets), is copied as it is. The sheet XML
is streamed row by row, so memory stays small on a 10,000-row sheet. The workbook
keeps calcPr fullCalcOnLoad="1", so Excel recalculates on open; LibreOffice
recalculates cells whose inputs a person changes, and its own setting decides
whether it recalculates everything on load.

`render_ahead` renders sheets before the engine's values are in, with the values the
caller expects (`fill`: the reference's), and `write_cached_values` copies each one whose
values turn out identical to the bit.

Long because it is one rewrite of one stream: a sheet's rows as they come, its formula
cells, the cells of array ranges, the pending cells rendered a block of rows at a time,
and the heights of rows whose wrapped values need more lines; rendering ahead is the same
rewrite, earlier.
"""

from __future__ import annotations

import math
import re
import zipfile
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

from scm_xl.outputs import scratch_file
from scm_xl.xlsx.fills import FilledColumn
from scm_xl.xlsx.package import (
    CHUNK, ROW_ELEMENT, column_name, column_number, copy_package, row_blocks, sheet_parts, with_cells,
)
from scm_xl.xlsx.text_fit import DEFAULT_FONT_SIZE, WIDE_WIDTH, row_height, wrapped_lines
from scm_xl.xlsx.values import ABSENT, CellError, CellGrid, CellValue, SheetView, cell_position, identical

Position = tuple[int, int]  # (row, column), both from 1
SheetValues = Mapping[Position, CellValue]

BLOCK_ROWS = 1024  # pending cells rendered this many rows at a time (a list per column, then rows)

# "Anything up to </c>" is written as runs of bytes other than "<": several times faster than .*?
_CELL = re.compile(rb'<c\b((?:\s+r="([A-Z]+)[0-9]+")?[^>]*?)(/>|>([^<]*(?:<(?!/c>)[^<]*)*)</c>)')
_FORMULA = re.compile(rb"<f\b[^>]*?/>|<f\b[^>]*>[^<]*</f>")  # formula text has no "<": it is escaped
_EXT = re.compile(rb"<extLst\b[^<]*(?:<(?!/extLst>)[^<]*)*</extLst>")
_CELL_R = re.compile(rb'\sr\s*=\s*["\']([A-Z]+[0-9]+)["\']')
_TYPE = re.compile(rb'\st\s*=\s*("[^"]*"|\'[^\']*\')')
_ATTR = re.compile(rb'\s([\w:]+)\s*=\s*("[^"]*"|\'[^\']*\')')
_REF = re.compile(rb"([A-Z]+)([0-9]+)")
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")
_STYLE = re.compile(rb'\ss="([0-9]+)"')
_COLS = re.compile(rb"<cols>.*?</cols>", re.S)
_COL = re.compile(rb"<col\b[^>]*>")
_FORMAT_PR = re.compile(rb"<sheetFormatPr\b[^>]*>")
_HEIGHT_ATTRS = re.compile(rb'\s(?:ht|customHeight)\s*=\s*("[^"]*"|\'[^\']*\')')
_MAIN_NS = "{http://schemas.openxmlformats.org/spreadsheetml/2006/main}"
EXCEL_COLUMN_WIDTH = 8.43  # a column with no width of its own, as Excel and openpyxl size it


def write_cached_values(src: str | Path, dst: str | Path, values: Mapping[str, SheetValues], *,
                        fills: Mapping[str, Sequence[FilledColumn]] | None = None,
                        ahead: RenderedAhead | None = None) -> int:
    """Copy the workbook `src` to `dst` with `values` (sheet title -> (row, col) -> value) cached
    in its formula cells; return how many cells got a value.

    Cells without a formula are left alone, and so are formula cells `values` has no entry for.
    Each sheet's values are looked up when the copy reaches that sheet, not before: `values` may
    be a mapping that waits for them (`fill` stores a sheet while an engine reads the next back).
    `fills` (sheet title -> pending shared columns, as `stamp.BuiltWorkbook.save` returns them) are the cells `src`
    does not hold yet (openpyxl's file, saved with `BuiltWorkbook.save(sparse=...)`): each is
    written straight with its value, in the same pass, as `BuiltWorkbook.save` would have
    written it empty. `dst` may be `src`; it is replaced only once the copy is complete.
    `ahead` holds sheets rendered before `values` were in (`render_ahead`): a sheet whose values
    are identical to those it was rendered with is copied from there, not rendered again.
    """
    src, dst = Path(src), Path(dst)
    with zipfile.ZipFile(src) as source:
        fills = fills or {}
        parts = _parts_naming(source, src, set(values) | set(fills))
        title_of = {parts[title]: title for title in values}  # each sheet's values asked for at its turn
        fills_of = {parts[title]: columns for title, columns in fills.items() if columns}
        wrapping = _wrapping_styles(source)
    written = 0

    def counted(pieces: Iterator[bytes | int]) -> Iterator[bytes]:
        nonlocal written
        for piece in pieces:
            if isinstance(piece, int):
                written += piece
            else:
                yield piece

    def sheet(name: str, blocks: Iterator[bytes]) -> Iterator[bytes | int]:
        sheet_values = values[title_of[name]] if name in title_of else {}
        kept = ahead.take(name, sheet_values) if ahead is not None else None
        return kept if kept is not None else _rewrite_sheet(blocks, sheet_values, wrapping, fills_of.get(name, ()))

    def rewrite(name: str) -> Callable[[Iterator[bytes]], Iterator[bytes]] | None:
        if name in title_of or name in fills_of:
            return lambda blocks: counted(sheet(name, blocks))
        if name == "xl/workbook.xml":
            return lambda blocks: iter([_full_calc_on_load(b"".join(blocks))])
        return None

    dst.parent.mkdir(parents=True, exist_ok=True)
    copy_package(src, dst, rewrite, compression=None)  # each member compressed as it was
    return written


class RenderedAhead:
    """Sheets' XML with values cached, rendered before an engine's values are in, with values
    the caller expects it to give (`fill`: the reference's, while IronCalc's worker evaluates),
    held uncompressed in a file without a name beside the output. `take` gives a sheet back only
    when the values it is asked for are identical to those it was rendered with
    (`values.identical`: the same cells, types and bits), so the file gets the very bytes that
    rendering it then would have given."""

    def __init__(self, folder: str | Path) -> None:
        self.file = scratch_file(folder, "scm-xl-ahead-")
        # member name -> (the values it was rendered with, its offset and length in the file,
        # how many cells got a value)
        self.parts: dict[str, tuple[SheetValues, int, int, int]] = {}
        self.kept: list[str] = []  # the members `take` gave back

    def take(self, name: str, values: SheetValues) -> Iterator[bytes | int] | None:
        """Member `name` as rendered ahead (a count of the cells that got a value, then the XML),
        when `values` are those it was rendered with; else None."""
        part = self.parts.get(name)
        if part is None or not identical(part[0], values):
            return None
        self.kept.append(name)
        return self._pieces(*part[1:])

    def _pieces(self, offset: int, length: int, written: int) -> Iterator[bytes | int]:
        yield written
        self.file.seek(offset)
        while length > 0:
            piece = self.file.read(min(CHUNK, length))
            if not piece:
                raise OSError("the sheets rendered ahead were cut short")
            length -= len(piece)
            yield piece

    def close(self) -> None:
        self.file.close()

    def __enter__(self) -> RenderedAhead:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def render_ahead(src: str | Path, values: Mapping[str, SheetValues], *, folder: str | Path,
                 fills: Mapping[str, Sequence[FilledColumn]] | None = None,
                 go_on: Callable[[], bool] = lambda: True) -> RenderedAhead:
    """Render the sheets of `values` (title -> values) of the workbook `src` as
    `write_cached_values` would with those values and `fills`, one after another while
    `go_on()` says there is time (the caller has nothing else to do: `fill` while IronCalc's
    worker still evaluates); `write_cached_values(..., ahead=)` then copies each sheet whose
    values turn out identical."""
    ahead = RenderedAhead(folder)
    try:
        with zipfile.ZipFile(src) as source:
            parts = _parts_naming(source, src, values)
            wrapping = _wrapping_styles(source)
            for title, sheet_values in values.items():
                if not go_on():
                    break
                name = parts[title]
                offset, written = ahead.file.tell(), 0
                with source.open(name) as reader:
                    for piece in _rewrite_sheet(row_blocks(reader), sheet_values, wrapping,
                                                (fills or {}).get(title, ())):
                        if isinstance(piece, int):
                            written += piece
                        else:
                            ahead.file.write(piece)
                ahead.parts[name] = (sheet_values, offset, ahead.file.tell() - offset, written)
    except BaseException:
        ahead.close()
        raise
    return ahead


# -- the package -----------------------------------------------------------------------------------


def _parts_naming(source: zipfile.ZipFile, src: str | Path, titles: Iterable[str]) -> dict[str, str]:
    """The sheet parts of `source` (the workbook `src`) by title, refused where `titles` name a
    sheet it does not have."""
    parts = sheet_parts(source)
    unknown = sorted(set(titles) - set(parts))
    if unknown:
        raise ValueError(f"{src}: no sheet named {', '.join(map(repr, unknown))}")
    return parts


def _full_calc_on_load(xml: bytes) -> bytes:
    """workbook.xml with calcPr fullCalcOnLoad="1": Excel recalculates on open."""
    match = re.search(rb"<calcPr\b[^>]*?/?>", xml)
    if match is None:
        # calcPr comes after sheets and definedNames, before anything else workbook.xml may hold
        later = re.search(rb"<(?:oleSize|customWorkbookViews|pivotCaches|smartTagPr|smartTagTypes|webPublishing"
                          rb"|fileRecoveryPr|webPublishObjects|extLst)\b|</workbook>", xml)
        at = later.start() if later else len(xml)
        return xml[:at] + b'<calcPr fullCalcOnLoad="1"/>' + xml[at:]
    tag = match.group(0)
    if re.search(rb'\sfullCalcOnLoad\s*=\s*["\'](?:1|true)["\']', tag):
        return xml
    tag = re.sub(rb'\sfullCalcOnLoad\s*=\s*("[^"]*"|\'[^\']*\')', b"", tag)
    end = -2 if tag.endswith(b"/>") else -1
    tag = tag[:end].rstrip() + b' fullCalcOnLoad="1"' + tag[end:]
    return xml[:match.start()] + tag + xml[match.end():]


def _wrapping_styles(book: zipfile.ZipFile) -> dict[int, float]:
    """The cell styles (cellXfs index) that wrap text, each with its font's size in points."""
    try:
        styles = ElementTree.fromstring(book.read("xl/styles.xml"))
    except KeyError:
        return {}
    sizes = []
    for font in styles.iterfind(f"{_MAIN_NS}fonts/{_MAIN_NS}font"):
        size = font.find(f"{_MAIN_NS}sz")
        try:
            sizes.append(float(size.get("val", "")) if size is not None else DEFAULT_FONT_SIZE)
        except ValueError:
            sizes.append(DEFAULT_FONT_SIZE)
    wrapping = {}
    for index, xf in enumerate(styles.iterfind(f"{_MAIN_NS}cellXfs/{_MAIN_NS}xf")):
        alignment = xf.find(f"{_MAIN_NS}alignment")
        if alignment is not None and alignment.get("wrapText") in ("1", "true"):
            font_id = int(xf.get("fontId", "0") or 0)
            wrapping[index] = sizes[font_id] if 0 <= font_id < len(sizes) else DEFAULT_FONT_SIZE
    return wrapping


class _RowFitter:
    """The height a row needs for the wrapped texts its formula cells hold: the lines each
    text takes at its column's width (`text_fit.wrapped_lines`, the estimate every sheet's own
    labels are sized by) at its font's line height; rows that need one line are left alone.
    A wrapped cell merged across columns is sized by its first column (taller than it needs,
    never clipped): the sheet names its merged ranges only after its rows."""

    def __init__(self, wrapping: Mapping[int, float], header: bytes) -> None:
        self.wrapping = wrapping
        found = _FORMAT_PR.search(header)
        attrs = dict(_ATTR.findall(found.group(0))) if found else {}
        self.default = _number(attrs.get(b"defaultColWidth"), EXCEL_COLUMN_WIDTH)
        self.widths: dict[int, float] = {}  # column -> width; 0 for a hidden one
        cols = _COLS.search(header)
        for col in _COL.findall(cols.group(0) if cols else b""):
            col_attrs = dict(_ATTR.findall(col))
            width = 0.0 if col_attrs.get(b"hidden", b'"0"')[1:-1] in (b"1", b"true") \
                else _number(col_attrs.get(b"width"), self.default)
            low = int(_number(col_attrs.get(b"min"), 0))
            for column in range(low, int(_number(col_attrs.get(b"max"), low)) + 1):
                self.widths[column] = width
        self.lines: dict[tuple[str, float], int] = {}

    def height(self, attrs: bytes, column: int, value: CellValue) -> float:
        """Points the cell needs (0: one line is enough, or it does not wrap)."""
        if not isinstance(value, str) or not value:
            return 0.0
        style = _STYLE.search(attrs)
        size = self.wrapping.get(int(style.group(1))) if style else None
        if size is None:
            return 0.0
        width = self.widths.get(column, self.default)
        if width <= 0 or (len(value) * WIDE_WIDTH <= width - 0.5 and "\n" not in value):
            return 0.0  # hidden, or one line even if every character were wide
        key = (value, width)
        lines = self.lines.get(key)
        if lines is None:
            lines = self.lines[key] = wrapped_lines(value, width)
        return row_height(lines, size) if lines > 1 else 0.0

    @staticmethod
    def fitted(head: bytes, needed: float) -> bytes:
        """The <row> start tag `head` at least `needed` points tall."""
        attrs = dict(_ATTR.findall(head))
        if _number(attrs.get(b"ht"), 0.0) >= needed:
            return head
        bare = _HEIGHT_ATTRS.sub(b"", head[:-1])
        return bare + b' ht="' + repr(needed).encode("ascii") + b'" customHeight="1">'


def _number_texts(values: list[Any]) -> list[bytes] | None:
    """Each value's <v> text when every one is a finite float (as `_typed` writes a number: no
    ".0" on a whole one), else None; in C-level sweeps, not a Python step per value."""
    if not values or set(map(type, values)) != {float}:
        return None
    texts = list(map(repr, values))
    joined = "\n".join(texts)
    if "n" in joined:  # inf or nan: no finite float's repr holds an n
        return None
    return joined.replace(".0\n", "\n").removesuffix(".0").encode("ascii").split(b"\n")


def _number(attr: bytes | None, default: float) -> float:
    """A quoted XML attribute as a number (`default` when absent or not a number)."""
    try:
        return float(attr[1:-1]) if attr else default
    except ValueError:
        return default


# -- the sheet -------------------------------------------------------------------------------------


def _rewrite_sheet(chunks: Iterator[bytes], values: SheetValues, wrapping: Mapping[int, float] | None = None,
                   fills: Sequence[FilledColumn] = ()) -> Iterator[bytes | int]:
    """The sheet XML with values cached, in pieces; an int piece counts the cells written.
    `wrapping` (style index -> font size) names the styles whose rows are fitted to their text;
    `fills` are pending shared columns to write in, each cell with its value."""
    state = _SheetState(values, fills)
    buffer = b""
    header = b""  # what comes before <sheetData>: the column widths
    before = True
    for chunk in chunks:
        buffer += chunk
        if before:
            start = re.search(rb"<sheetData\b[^>]*?(/?)>", buffer)
            if start is None:
                keep = max(0, len(buffer) - 64)  # the tag may be split across chunks
                header += buffer[:keep]
                yield buffer[:keep]
                buffer = buffer[keep:]
                continue
            before = False
            if wrapping:
                state.fitter = _RowFitter(wrapping, header + buffer[:start.end()])
            yield buffer[:start.end()]
            buffer = buffer[start.end():]
            if start.group(1):  # <sheetData/>: no cells at all
                yield buffer
                buffer = b""
                state.done = True
        if state.done:
            yield buffer
            buffer = b""
            continue
        end = buffer.find(b"</sheetData>")
        cut = end if end >= 0 else buffer.rfind(b"</row>") + len(b"</row>")
        if cut < len(b"</row>") and end < 0:
            continue  # not one whole row yet
        yield from state.rows(buffer[:cut])
        buffer = buffer[cut:]
        if end >= 0:
            yield from state.remaining_rows()
            state.done = True
            yield buffer
            buffer = b""
    if buffer:
        if not state.done and not before:
            yield from state.rows(buffer)
            yield from state.remaining_rows()
        yield buffer


class _SheetState:
    def __init__(self, values: SheetValues, fills: Sequence[FilledColumn] = ()) -> None:
        self.values = values
        self.pending: dict[int, dict[int, None]] = {}  # array-range cells still to write, by row
        self.done = False
        self.row = 0
        self.fitter: _RowFitter | None = None
        # Deferred shared columns, in column order: (first, last, column, b' r="COL', the style
        # attribute, the formula element, the style).
        self.fills = sorted(((fill.first, fill.last, fill.column, b' r="' + column_name(fill.column).encode("ascii"),
                              fill.style_attr, fill.formula, fill.style) for fill in fills), key=lambda item: item[2])
        self.fill_last = max((fill.last for fill in fills), default=0)
        self.fill_next = min((fill.first for fill in fills), default=1)  # the first row not written yet
        # The pending cells are rendered a block of rows at a time, column by column, then turned
        # into rows: row block_first + i's cells are block_rows[i], with the height its wrapped
        # texts need; block_written counts the block's cells that got a value.
        self.block_first, self.block_end = 0, 0
        self.block_rows: list[tuple[bytes, ...]] = []
        self.block_columns: list[int] = []
        self.block_written = 0
        self.block_needed: list[float] = []

    def _column_values(self, col: int, top: int, bottom: int) -> list[Any]:
        """The values of `col` in rows top..bottom (ABSENT where none), as one list."""
        values = self.values
        column = values.column(col) if isinstance(values, SheetView) else None
        if column is None:
            return [values.get((row, col), ABSENT) for row in range(top, bottom + 1)]
        start, held = top - column.first, column.values
        if start >= 0 and bottom - column.first < len(held):
            return held[start:bottom - column.first + 1]  # most blocks: a slice
        return [column.get(row) for row in range(top, bottom + 1)]

    def _render_block(self, top: int) -> None:
        """Render the pending cells of rows top.. top + BLOCK_ROWS - 1."""
        bottom = min(top + BLOCK_ROWS - 1, self.fill_last)
        count = bottom - top + 1
        numbers = [b"%d" % row for row in range(top, bottom + 1)]
        self.block_first, self.block_end = top, bottom + 1
        needed = [0.0] * count
        written = 0
        columns: list[int] = []
        rendered: list[list[bytes]] = []
        fitter = self.fitter
        wrapping = fitter.wrapping if fitter is not None else {}
        isfinite = math.isfinite
        for first, last, column, at, style, formula, style_id in self.fills:
            low, high = max(first, top), min(last, bottom)
            if low > high:
                continue
            head = b"<c" + at
            tail = b'"' + style + b">" + formula
            values = self._column_values(column, low, high)
            rows = numbers[low - top:high - top + 1]
            texts = _number_texts(values)
            value_start = tail + b"<v>"
            if texts is not None:  # most columns: every value a finite number, rendered in one sweep
                join = b"".join
                cells = [join((head, number, value_start, text, b"</v></c>")) for number, text in zip(rows, texts)]
                written += len(cells)
            else:
                cells = []
                empty = tail + b"<v></v></c>"  # no value: as `BuiltWorkbook.save` writes it
                no_text = b'"' + style + b' t="str">' + formula + b"<v></v></c>"
                rest_of: dict[tuple[type, CellValue], bytes] = {}
                wraps = fitter is not None and style_id in wrapping
                for at_row, (number, value) in enumerate(zip(rows, values), start=low - top):
                    if type(value) is float and isfinite(value):  # `_typed`'s number, inline
                        cells.append(head + number + value_start + repr(value).removesuffix(".0").encode("ascii")
                                     + b"</v></c>")
                        written += 1
                    elif value is ABSENT:
                        cells.append(head + number + empty)
                    elif value is None:  # an empty result: `_value_cell`'s, inline (the next commonest)
                        cells.append(head + number + no_text)
                        written += 1
                    else:  # a text, logical or error: the cell after its number is the same for the same value
                        key = (type(value), value)
                        rest = rest_of.get(key)
                        if rest is None:
                            rest = rest_of[key] = _value_cell(None, b'"' + style, value, formula)[len(b"<c"):]
                        cells.append(head + number + rest)
                        written += 1
                        if wraps and isinstance(value, str) and fitter is not None:
                            needed[at_row] = max(needed[at_row], fitter.height(style, column, value))
            if low > top or high < bottom:  # rows outside the fill stay empty
                cells = [b""] * (low - top) + cells + [b""] * (bottom - high)
            columns.append(column)
            rendered.append(cells)
        # row by row: each pending column's <c> XML, b"" where it has none in that row
        self.block_rows = list(zip(*rendered)) if rendered else [() for _ in range(count)]
        self.block_columns = columns
        self.block_needed = needed
        self.block_written = written

    def _filled(self, row: int) -> tuple[tuple[bytes, ...], int, float]:
        """The pending cells of `row` (each pending column's <c> XML in column order, b"" where
        it has none: `_pairs` gives (column, XML) pairs), how many cells of a block got a value
        (given with the block's first row, 0 with the others: the caller counts it even when that
        row has no pending cell), and the height their wrapped texts need."""
        written = 0
        if not self.block_first <= row < self.block_end:
            self._render_block(row)
            written = self.block_written
        at = row - self.block_first
        return self.block_rows[at], written, self.block_needed[at]

    def _pairs(self, cells: tuple[bytes, ...]) -> list[tuple[int, bytes]]:
        """`_filled`'s cells of a row as (column, <c> XML), the empty ones left out."""
        return [(col, xml) for col, xml in zip(self.block_columns, cells) if xml]

    def _rows_before(self, number: int) -> Iterator[bytes | int]:
        """The rows before `number` that the XML does not hold and that get cells: array-range
        cells' and pending columns'."""
        rows = {r for r in self.pending if r < number}
        if self.fills and self.fill_next < number:
            rows.update(range(self.fill_next, min(number, self.fill_last + 1)))
            self.fill_next = number
        for row in sorted(rows):
            yield from self._new_row(row)

    def rows(self, xml: bytes) -> Iterator[bytes | int]:
        at = 0
        for match in ROW_ELEMENT.finditer(xml):
            yield xml[at:match.start()]
            at = match.end()
            yield from self._row(match.group(0))
        yield xml[at:]

    def remaining_rows(self) -> Iterator[bytes | int]:
        yield from self._rows_before(max([self.fill_last, *self.pending]) + 1)
        self.pending.clear()

    def _new_row(self, row: int) -> Iterator[bytes | int]:
        cells = self.pending.pop(row, {})
        parts = [(col, _value_cell(_cell_name(row, col), b"", self.values[(row, col)]))
                 for col in sorted(cells) if (row, col) in self.values]
        written = len(parts)
        needed = 0.0
        body = b"".join([xml for _, xml in parts])
        if self.fills:
            filled, block_written, needed = self._filled(row)
            if block_written:  # a block's count, whatever its first row holds
                yield block_written
            if any(filled):
                body = b"".join([xml for _, xml in sorted(parts + self._pairs(filled), key=lambda part: part[0])]) \
                    if parts else b"".join(filled)
        if body:
            if written:
                yield written
            head = b'<row r="%d">' % row
            yield (self.fitter.fitted(head, needed) if needed and self.fitter else head) + body + b"</row>"

    def _row(self, xml: bytes) -> Iterator[bytes | int]:
        open_end = xml.index(b">") + 1
        attrs = dict(_ATTR.findall(xml[:open_end]))
        number = int(attrs[b"r"][1:-1]) if b"r" in attrs else self.row + 1
        yield from self._rows_before(number)
        self.row = number
        filled: list[tuple[int, bytes]] = []
        filled_needed = 0.0
        if self.fills and self.fill_next <= number <= self.fill_last:
            cells, block_written, filled_needed = self._filled(number)
            if block_written:  # a block's count, whatever its first row holds
                yield block_written
            filled = self._pairs(cells)
            self.fill_next = number + 1
        if open_end == len(xml):  # <row .../>: a row with no cells
            if number not in self.pending and not filled:
                yield xml
                return
            head, body = xml[:-2].rstrip() + b">", b""
        else:
            head, body = xml[:open_end], xml[open_end:-len(b"</row>")]
        tail = b"</row>"
        if number not in self.pending and b"<f" not in body:
            if not filled:
                yield xml  # no formula and no array cell here: the row as it is
                return
            # only the pending cells get values (the raw-data sheet's rows: its inputs and three
            # display cells): its own cells as they are, not looked at one by one
            row_xml = (self.fitter.fitted(head, filled_needed) if filled_needed and self.fitter else head) + body + tail
            yield with_cells(row_xml, filled)
            return
        if number not in self.pending and b"array" not in body:
            fast = self._plain_row(number, body)
            if fast is not None:
                written, needed = fast[0], max(fast[2], filled_needed)
                if written:
                    yield written
                row_xml = (self.fitter.fitted(head, needed) if needed and self.fitter else head) + fast[1] + tail
                yield with_cells(row_xml, filled) if filled else row_xml
                return
        out: list[bytes] = []
        written = 0
        needed = 0.0
        fitter = self.fitter
        column = 0
        at = 0
        extra = self.pending.pop(number, {})
        for match in _CELL.finditer(body):
            out.append(body[at:match.start()])
            at = match.end()
            cell_attrs = match.group(1)
            if match.group(2):  # r="A1" first, as every writer puts it: no second search
                column = column_number(match.group(2))
            else:
                ref = _CELL_R.search(cell_attrs)
                column = _position(ref.group(1))[1] if ref else column + 1
            if extra:
                for col in sorted(c for c in extra if c < column):  # array cells before this one
                    out.append(self._array_cell(number, col))
                    written += (number, col) in self.values
                    del extra[col]
            content = match.group(4) or b""
            formula = _FORMULA.search(content) if b"<f" in content else None
            key = (number, column)
            if formula is not None and b"array" in formula.group(0):
                self._note_array(formula.group(0), key)
                extra.update(self.pending.pop(number, {}))  # an array range's cells to its right
            if formula is not None and key in self.values:
                out.append(_value_cell(None, _without_type(cell_attrs), self.values[key],
                                       formula.group(0), _extension(content)))
                written += 1
                if fitter is not None:
                    needed = max(needed, fitter.height(cell_attrs, column, self.values[key]))
            elif formula is None and column in extra and key in self.values:
                del extra[column]  # a styled empty cell inside an array range
                out.append(_value_cell(None, _without_type(cell_attrs), self.values[key], b"", _extension(content)))
                written += 1
            else:
                out.append(match.group(0))
        out.append(body[at:])
        for col in sorted(extra):
            if (number, col) in self.values:
                out.append(self._array_cell(number, col))
                written += 1
        needed = max(needed, filled_needed)
        if written:
            yield written
        row_xml = (fitter.fitted(head, needed) if needed and fitter else head) + b"".join(out) + tail
        yield with_cells(row_xml, filled) if filled else row_xml

    def _plain_row(self, number: int, body: bytes) -> tuple[int, bytes, float] | None:
        """A row without array formulas, every cell naming its r="A1" (as every writer does):
        one substitution over the row, and the height its wrapped texts need (0: no more than
        it has). None when a cell has no r, for the general path."""
        values = self.values
        fitter = self.fitter
        written = 0
        needed = 0.0
        missing = False

        def cell(match: re.Match[bytes]) -> bytes:
            nonlocal written, missing, needed
            content = match.group(4)
            if not content or b"<f" not in content:
                return match.group(0)
            letters = match.group(2)
            if letters is None:
                missing = True
                return match.group(0)
            key = (number, column_number(letters))
            if key not in values:
                return match.group(0)
            formula = _FORMULA.search(content)
            if formula is None:
                return match.group(0)
            written += 1
            extension = _extension(content) if b"<extLst" in content else b""
            value = values[key]
            if fitter is not None and isinstance(value, str):
                needed = max(needed, fitter.height(match.group(1), key[1], value))
            return _value_cell(None, _without_type(match.group(1)), value, formula.group(0), extension)

        out = _CELL.sub(cell, body)
        return None if missing else (written, out, needed)

    def _array_cell(self, row: int, col: int) -> bytes:
        if (row, col) not in self.values:
            return b""
        return _value_cell(_cell_name(row, col), b"", self.values[(row, col)])

    def _note_array(self, formula: bytes, anchor: Position) -> None:
        """An array formula's other cells carry their own values; remember where they are."""
        if b'"array"' not in formula and b"'array'" not in formula:
            return
        ref = re.search(rb'\sref\s*=\s*["\']([A-Z]+[0-9]+)(?::([A-Z]+[0-9]+))?["\']', formula)
        if ref is None or ref.group(2) is None:
            return
        top, left = _position(ref.group(1))
        bottom, right = _position(ref.group(2))
        for row in range(top, bottom + 1):
            for col in range(left, right + 1):
                if (row, col) != anchor:
                    self.pending.setdefault(row, {})[col] = None


def _without_type(attrs: bytes) -> bytes:
    return _TYPE.sub(b"", attrs) if b"t" in attrs else attrs


def _extension(content: bytes) -> bytes:
    found = _EXT.search(content)
    return found.group(0) if found else b""


def _value_cell(name: bytes | None, attrs: bytes, value: CellValue, formula: bytes = b"",
                extension: bytes = b"") -> bytes:
    """A <c> element holding `formula` and `value` as Excel writes a computed formula cell."""
    if name is not None:
        attrs = b' r="' + name + b'"' + attrs
    kind, text = _typed(value)
    type_attr = b' t="' + kind + b'"' if kind else b""
    body = formula + (b"<v>" + text + b"</v>" if text is not None else b"") + extension
    return b"<c" + attrs + type_attr + b">" + body + b"</c>"


def _typed(value: CellValue) -> tuple[bytes, bytes | None]:
    """The t attribute and <v> text for a value (None: no <v>)."""
    if isinstance(value, bool):
        return b"b", b"1" if value else b"0"
    if isinstance(value, CellError):
        return b"e", _xml_text(value.code)
    if isinstance(value, (int, float)):
        if not math.isfinite(value):
            return b"e", b"#NUM!"  # what Excel shows for an overflow
        return b"", repr(float(value)).removesuffix(".0").encode("ascii")
    if value is None:
        return b"str", b""  # the formula's result is empty text
    return b"str", _xml_text(str(value))


def _xml_text(text: str) -> bytes:
    # Characters XML cannot hold are written _xHHHH_, as OOXML does. A literal "_x0041_" is left as
    # it is: openpyxl and pandas read <v> literally, and Excel recalculates on open anyway.
    text = _NOT_XML.sub(lambda m: f"_x{ord(m.group(0)):04X}_", text)
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").encode("utf-8")


_COLUMN_NAMES: dict[int, bytes] = {}


def _position(ref: bytes) -> Position:
    match = _REF.fullmatch(ref)
    if match is None:
        raise ValueError(f"not a cell reference: {ref!r}")
    return int(match.group(2)), column_number(match.group(1))


def _cell_name(row: int, col: int) -> bytes:
    letters = _COLUMN_NAMES.get(col)
    if letters is None:
        _COLUMN_NAMES[col] = letters = column_name(col).encode("ascii")
    return letters + str(row).encode("ascii")
