"""The cells of shared formulas that a workbook object never held, written into a sheet's XML.

`workbook.stamp` writes a filled-down column as one xlsx shared formula and keeps only its
first and last cell in openpyxl; the cells between are `FilledColumn`s. `with_fills` puts
them into the saved sheet XML, streamed block by block, each in its row and in column order,
and `cached_values` writes them again with their values. `with_rows` puts cells given as XML
into their rows: the plain value cells `workbook.stamp` writes itself rather than through
openpyxl.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from scm_xl.xlsx.package import ROW_ELEMENT, column_name, with_cells

_ROW_NUMBER = re.compile(rb'<row\b[^>]*?\sr="([0-9]+)"')


@dataclass(frozen=True)
class FilledColumn:
    """A pending shared formula's middle cells, as the file holds them: rows `first` to `last`
    of `column` (from 1), each `<c r=".." s="style"><f t="shared" si="index"/>`."""

    column: int
    first: int
    last: int
    index: int
    style: int | None  # the cells' style (cellXfs index); None: unstyled

    @property
    def formula(self) -> bytes:
        return b'<f t="shared" si="%d"/>' % self.index

    @property
    def style_attr(self) -> bytes:
        return b"" if self.style is None else b' s="%d"' % self.style


def with_fills(blocks: Iterator[bytes], fills: list[FilledColumn]) -> Iterator[bytes]:
    """The sheet XML with every pending cell in its row, in column order."""
    cells = []  # (first, last, column, cell XML with %d for the row)
    for fill in fills:
        name = column_name(fill.column).encode("ascii")
        cells.append((fill.first, fill.last, fill.column,
                      b'<c r="' + name + b'%d"' + fill.style_attr + b">" + fill.formula + b"<v></v></c>"))
    cells.sort(key=lambda item: item[2])
    first = min(item[0] for item in cells)
    last = max(item[1] for item in cells)
    written = first - 1  # the rows before `first` need nothing
    # A row the file does not hold yet (most rows: openpyxl holds a shared column's first and last
    # cell only) is written whole from one template per run of rows that the same columns cover:
    # one formatting a row instead of one a cell.
    bounds = sorted({lo for lo, _, _, _ in cells} | {hi + 1 for _, hi, _, _ in cells})
    runs: list[tuple[int, int, bytes, int]] = []  # (first row, last row, the row's cells with %d, how many)
    for lo, hi in zip(bounds, bounds[1:]):
        covering = [xml for c_lo, c_hi, _, xml in cells if c_lo <= lo and hi - 1 <= c_hi]
        if covering:
            runs.append((lo, hi - 1, b"".join(covering), len(covering)))

    def added(row: int) -> list[tuple[int, bytes]]:
        return [(column, xml % row) for lo, hi, column, xml in cells if lo <= row <= hi] if first <= row <= last else []

    def new_rows(upto: int) -> bytes:
        """The rows before row `upto` (the file holds `upto`, or END) not written yet."""
        nonlocal written
        out = []
        for lo, hi, template, count in runs:
            start, stop = max(lo, written + 1), min(hi, upto - 1, last)
            for row in range(start, stop + 1):
                out.append(b'<row r="%d">' % row + template % ((row,) * count) + b"</row>")
        written = max(written, upto)
        return b"".join(out)

    return _placed(blocks, new_rows, added, "the shared formulas' cells")


END = 1 << 31  # a row number after every row: `_placed`'s "the rows that are left"


def _placed(blocks: Iterator[bytes], rows_before: Callable[[int], bytes],
            cells_of: Callable[[int], list[tuple[int, bytes]]], what: str) -> Iterator[bytes]:
    """The sheet XML with rows and cells put in: `rows_before(n)` gives the new rows that go
    before row n, which the XML holds (END: every one left, before </sheetData>), and `cells_of(n)`
    the (column, <c> XML) pairs that go among row n's own cells (`package.with_cells`). Rows
    ascend; a row without its number cannot be placed (`what`: what could not)."""
    for block in blocks:
        out: list[bytes] = []
        start = 0
        for match in ROW_ELEMENT.finditer(block):
            number = _ROW_NUMBER.match(match.group(0))
            if number is None:
                raise ValueError(f"a sheet row without r=: cannot place {what}")
            row = int(number.group(1))
            out.append(block[start:match.start()])
            start = match.end()
            out.append(rows_before(row))
            extra = cells_of(row)
            out.append(with_cells(match.group(0), extra) if extra else match.group(0))
        rest = block[start:]
        if b"<sheetData/>" in rest:
            rest = rest.replace(b"<sheetData/>", b"<sheetData>" + rows_before(END) + b"</sheetData>", 1)
        end = rest.find(b"</sheetData>")
        if end >= 0:
            rest = rest[:end] + rows_before(END) + rest[end:]
        out.append(rest)
        yield b"".join(out)


_DIMENSION_REF = re.compile(rb'(<dimension\b[^>]*?\sref=")[^"]*(")')


def with_rows(blocks: Iterator[bytes], rows: Mapping[int, Sequence[tuple[int, bytes]]],
              dimension: str | None = None) -> Iterator[bytes]:
    """The sheet XML with the cells `rows` (row -> its (column, <c> XML) pairs in column order)
    each in its row: among the cells of a row the XML holds (`package.with_cells`), or in a row
    of their own (`<row r="N">`) where it holds none, rows in ascending order. `dimension`,
    when given, is the sheet's <dimension ref>: the extent with these cells counted."""
    pending = sorted(rows)
    at = 0  # pending[at:] are the rows not written yet

    def rows_before(number: int) -> bytes:
        nonlocal at
        out = []
        while at < len(pending) and pending[at] < number:
            row = pending[at]
            out.append(b'<row r="%d">' % row + b"".join(xml for _, xml in rows[row]) + b"</row>")
            at += 1
        return b"".join(out)

    def cells_of(number: int) -> list[tuple[int, bytes]]:
        nonlocal at
        if at < len(pending) and pending[at] == number:
            at += 1
            return list(rows[number])
        return []

    def with_extent(blocks: Iterator[bytes]) -> Iterator[bytes]:
        pending_ref = dimension is not None
        for block in blocks:
            if pending_ref and dimension is not None and b"<dimension" in block:
                ref = dimension.encode("ascii")
                block = _DIMENSION_REF.sub(lambda m: m.group(1) + ref + m.group(2), block, count=1)
                pending_ref = False
            yield block

    yield from _placed(with_extent(blocks), rows_before, cells_of, "the cells")
    if at < len(pending):
        raise ValueError("the sheet XML ended before its rows")
