"""Many cell values, held column by column: what an engine computed, or what the reference says.

A filled 10,000-row workbook has about 1.4 million formula cells. Held as a dict keyed
(sheet, "A1"), each value costs a dict entry, a key tuple and an address string: about 180
bytes, 250 MB for the engine's values and as much again for the reference's. `CellGrid` keeps a
list per (sheet, column), from the column's first row: a value costs a list slot (and the float
itself). It is a mapping keyed (sheet title, "A1") like the dict it replaces, so every reader
of one value (a test, a mismatch's details) reads it as before, and the hot paths (comparing the
two grids, storing the values in the file) walk the columns (`columns`, `sheet_view`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any

from scm_xl.xlsx.package import column_name


@dataclass(frozen=True)
class CellError:
    """A spreadsheet error value such as #DIV/0!."""

    code: str

    def __str__(self) -> str:
        return self.code


CellValue = float | str | bool | CellError | None
CellKey = tuple[str, str]  # (sheet title exactly as in the workbook, "A1")
FormulaCells = Mapping[str, Sequence[str]]  # sheet title -> "A1", or "A1:C9" where every cell holds a formula


@dataclass(frozen=True)
class FormulaText:
    """A formula typed into a cell ("=A1*2"), where a str is a text (even one that reads "=A1*2")."""

    text: str


# What was typed into a cell of a saved workbook since: (sheet title, row, column, the value or
# formula). An engine that loads the file while its writer finishes the workbook is given these
# before it evaluates (`Engine.start_then`, `stamp.TypedSince`).
TypedCell = tuple[str, int, int, float | bool | str | FormulaText]

_COLUMN_NUMBERS: dict[str, int] = {}  # column letters -> number, each spelled once per process
MAX_COLUMN = 16384  # XFD


def cell_position(ref: str) -> tuple[int, int]:
    """(row, column) of one cell "A1": the hot path of reading back a million formula cells."""
    letters = ref.rstrip("0123456789")
    column = _COLUMN_NUMBERS.get(letters)
    if column is None:
        if not letters or len(letters) > 3 or not letters.isascii() or not letters.isupper() \
                or not letters.isalpha():
            raise ValueError(f"{ref!r} is not a cell reference")
        column = 0
        for ch in letters:
            column = column * 26 + ord(ch) - 64
        if column > MAX_COLUMN:
            raise ValueError(f"{ref!r} is not a cell reference")
        _COLUMN_NUMBERS[letters] = column
    digits = ref[len(letters):]
    if not digits:
        raise ValueError(f"{ref!r} is not a cell reference")
    return int(digits), column


def cell_count(ref: str) -> int:
    """How many cells a reference spans: 1 for "A1", the rectangle's for "C2:D12"."""
    if ":" not in ref:
        return 1
    first, last = ref.split(":")
    (top, left), (bottom, right) = cell_position(first), cell_position(last)
    return (bottom - top + 1) * (right - left + 1)


class _Absent:
    """No value here (None is a value: an empty cell or empty text)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "ABSENT"

    def __reduce__(self) -> str:  # unpickled as the one ABSENT, which the grid compares by identity
        return "ABSENT"


ABSENT: Any = _Absent()


class Column:
    """One column's values from row `first` on; ABSENT where the column holds no value."""

    __slots__ = ("first", "values")

    def __init__(self, first: int, values: list[Any]) -> None:
        self.first = first
        self.values = values

    def get(self, row: int) -> Any:
        at = row - self.first
        return self.values[at] if 0 <= at < len(self.values) else ABSENT


class CellGrid(MutableMapping[CellKey, CellValue]):
    """Cell values keyed (sheet title, "A1"), stored as a list per (sheet, column)."""

    __slots__ = ("_sheets", "_count")

    def __init__(self, items: Mapping[CellKey, CellValue] | Iterable[tuple[CellKey, CellValue]] = ()) -> None:
        self._sheets: dict[str, dict[int, Column]] = {}
        self._count = 0
        self.update(items)

    # -- by position ---------------------------------------------------------------------------
    def put(self, sheet: str, row: int, col: int, value: CellValue) -> None:
        columns = self._sheets.get(sheet)
        if columns is None:
            columns = self._sheets[sheet] = {}
        column = columns.get(col)
        if column is None:
            columns[col] = Column(row, [value])
            self._count += 1
            return
        at = row - column.first
        values = column.values
        if at < 0:  # above the first row held: the list starts earlier
            column.values = values = [ABSENT] * -at + values
            column.first = row
            at = 0
        if at >= len(values):
            values.extend([ABSENT] * (at - len(values) + 1))
        if values[at] is ABSENT:
            self._count += 1
        values[at] = value

    def put_column(self, sheet: str, col: int, first: int, values: list[Any]) -> None:
        """A whole column at once (`values` from row `first`, ABSENT where there is none); it
        must not hold values yet."""
        columns = self._sheets.setdefault(sheet, {})
        if col in columns:
            raise ValueError(f"column {column_name(col)} of {sheet!r} holds values already")
        columns[col] = Column(first, values)
        self._count += sum(1 for value in values if value is not ABSENT)

    def put_sheet(self, sheet: str, columns: dict[int, Column]) -> None:
        """A whole sheet at once (`columns` as `columns(sheet)` gives them); it must hold no values yet."""
        if self._sheets.get(sheet):
            raise ValueError(f"sheet {sheet!r} holds values already")
        self._sheets[sheet] = columns
        self._count += sum(1 for column in columns.values() for value in column.values if value is not ABSENT)

    def lookup(self, sheet: str, row: int, col: int) -> Any:
        """The value at (row, col) of `sheet`, or ABSENT."""
        column = self._sheets.get(sheet, {}).get(col)
        return ABSENT if column is None else column.get(row)

    def sheets(self) -> list[str]:
        return list(self._sheets)

    def columns(self, sheet: str) -> dict[int, Column]:
        """The columns of `sheet` (column number from 1 -> its values); empty when none."""
        return self._sheets.get(sheet, {})

    def sheet_view(self, sheet: str) -> SheetView:
        """The values of one sheet keyed (row, column), as `cached_values` takes them."""
        return SheetView(self._sheets.get(sheet, {}))

    # -- the mapping (sheet, "A1") -> value ---------------------------------------------------
    def __setitem__(self, key: CellKey, value: CellValue) -> None:
        sheet, ref = key
        row, col = cell_position(ref)
        self.put(sheet, row, col, value)

    def __getitem__(self, key: CellKey) -> CellValue:
        sheet, ref = key
        try:
            row, col = cell_position(ref)
        except (ValueError, KeyError):
            raise KeyError(key) from None
        return _found(self.lookup(sheet, row, col), key)

    def __contains__(self, key: object) -> bool:
        try:
            self[key]  # type: ignore[index]
        except (KeyError, TypeError, ValueError):
            return False
        return True

    def __delitem__(self, key: CellKey) -> None:
        sheet, ref = key
        row, col = cell_position(ref)
        column = self._sheets.get(sheet, {}).get(col)
        if column is None or column.get(row) is ABSENT:
            raise KeyError(key)
        column.values[row - column.first] = ABSENT
        self._count -= 1

    def __iter__(self) -> Iterator[CellKey]:
        for sheet, columns in self._sheets.items():
            for col, column in columns.items():
                name = column_name(col)
                for at, value in enumerate(column.values):
                    if value is not ABSENT:
                        yield sheet, f"{name}{column.first + at}"

    def items(self) -> Iterator[tuple[CellKey, CellValue]]:  # type: ignore[override]
        for sheet, columns in self._sheets.items():
            for col, column in columns.items():
                name = column_name(col)
                for at, value in enumerate(column.values):
                    if value is not ABSENT:
                        yield (sheet, f"{name}{column.first + at}"), value

    def __len__(self) -> int:
        return self._count

    def __repr__(self) -> str:
        return f"CellGrid({self._count} values in {len(self._sheets)} sheets)"


def _found(value: Any, key: object) -> CellValue:
    """A looked-up value, or KeyError where the grid holds none."""
    if value is ABSENT:
        raise KeyError(key)
    return value


class SheetView(Mapping[tuple[int, int], CellValue]):
    """One sheet of a CellGrid keyed (row, column)."""

    __slots__ = ("_columns",)

    def __init__(self, columns: dict[int, Column]) -> None:
        self._columns = columns

    def __getitem__(self, key: tuple[int, int]) -> CellValue:
        column = self._columns.get(key[1])
        return _found(ABSENT if column is None else column.get(key[0]), key)

    def column(self, col: int) -> Column | None:
        return self._columns.get(col)

    def __iter__(self) -> Iterator[tuple[int, int]]:
        for col, column in self._columns.items():
            for at, value in enumerate(column.values):
                if value is not ABSENT:
                    yield column.first + at, col

    def __len__(self) -> int:
        return sum(1 for _ in self)


def identical(one: Mapping[tuple[int, int], CellValue], other: Mapping[tuple[int, int], CellValue]) -> bool:
    """Whether two sheets' values are the same cell for cell: the same cells, each value of the
    same type and equal, a float to the bit (0.0 and -0.0 differ; a NaN is never the same). Stored
    in a file, they are then the same bytes. Walks the columns of two `SheetView`s in C-level
    sweeps; anything else, or columns held from different rows, counts as different (a caller
    then does the work it would have saved)."""
    if not isinstance(one, SheetView) or not isinstance(other, SheetView):
        return False
    mine, theirs = one._columns, other._columns
    if mine.keys() != theirs.keys():
        return False
    for col, column in mine.items():
        values, others = column.values, theirs[col].values
        if column.first != theirs[col].first or len(values) != len(others) or values != others \
                or list(map(type, values)) != list(map(type, others)):
            return False
        # equal floats print alike, but for the sign of a zero
        if 0.0 in values and any(type(value) is float and value == 0.0
                                 and math.copysign(1.0, value) != math.copysign(1.0, that)
                                 for value, that in zip(values, others)):
            return False
    return True


__all__ = ["ABSENT", "CellError", "CellGrid", "CellKey", "CellValue", "Column", "FormulaCells", "SheetView",
           "cell_count", "cell_position", "identical"]
