"""Per-row formulas from one template, for sheets with thousands of rows.

A column whose formula is the same relative formula in every row (the same formula in
R1C1 terms: only relative row numbers move) is written as an xlsx shared formula, as Excel
itself saves a filled-down column: the first cell holds the text and the range, every
other cell only the index of that formula. Excel, LibreOffice, IronCalc and openpyxl read
it as one formula per cell; the file is a fraction of the size, and an engine parses the
formula once per column instead of once per cell (IronCalc loads a 10,000-row workbook
about 20 times faster). A column that is not the same relative formula everywhere is
written one formula per cell, as before.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

from openpyxl.formula.translate import Translator
from openpyxl.worksheet.formula import ArrayFormula
from openpyxl.worksheet.worksheet import Worksheet

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


def stamp_rows(template: Callable[[int], dict[str, str]], rows: range,
               *related: int) -> Iterator[tuple[int, dict[str, str]]]:
    """Per-row formulas from one template: `template(SENTINEL_ROW)` with the sentinel (and the
    rows it relates to: sentinel + offset for each offset in `related`) replaced in each row.
    Writing 10,000 rows this way is one string replace per cell instead of one formula build."""
    base = template(SENTINEL_ROW)
    marks = [(str(SENTINEL_ROW + offset), offset) for offset in related]
    for row in rows:
        yield row, _stamped(base, row, marks)


def _stamped(base: Mapping[str, str], row: int, marks: list[tuple[str, int]]) -> dict[str, str]:
    stamped = {}
    for key, text in base.items():
        text = text.replace(str(SENTINEL_ROW), str(row))
        for mark, offset in marks:
            text = text.replace(mark, str(row + offset))
        stamped[key] = text
    return stamped


def shares(text: str, first: str, later: str, expected: str) -> bool:
    """Whether the formula `text` at cell `first`, copied to `later`, reads `expected` (so the
    column can be one shared formula)."""
    if not text.startswith("="):
        return False
    return Translator(text, origin=first).translate_formula(later) == expected


def write_filled(ws: Worksheet, letters: Mapping[str, str], template: Callable[[int], dict[str, str]],
                 rows: range, *related: int, share: bool = True) -> list[str]:
    """Write `template`'s formulas down `rows`, each key into its column `letters[key]`: as one
    shared formula where the column is the same relative formula in every row, else one
    formula per cell. Returns the keys written cell by cell."""
    if not rows:
        return []
    base = template(SENTINEL_ROW)
    marks = [(str(SENTINEL_ROW + offset), offset) for offset in related]
    first = _stamped(base, rows[0], marks)
    second = _stamped(base, rows[1], marks) if len(rows) > 1 else first
    last = _stamped(base, rows[-1], marks)
    shared, plain = [], []
    for key, text in first.items():
        col = letters[key]
        if share and len(rows) > 1 and shares(text, f"{col}{rows[0]}", f"{col}{rows[1]}", second[key]) \
                and shares(text, f"{col}{rows[0]}", f"{col}{rows[-1]}", last[key]):
            shared.append(key)
        else:
            plain.append(key)
    for key in shared:
        col = letters[key]
        index = _next_index(ws)
        ws[f"{col}{rows[0]}"] = SharedFormula(index, f"{col}{rows[0]}:{col}{rows[-1]}", first[key])
        follower = SharedFormula(index)  # one object: openpyxl only reads it when it writes
        for row in rows[1:]:
            ws[f"{col}{row}"] = follower
    if plain:
        plain_base = {key: base[key] for key in plain}
        for row in rows:
            for key, text in _stamped(plain_base, row, marks).items():
                ws[f"{letters[key]}{row}"] = text
    return plain


def _next_index(ws: Worksheet) -> int:
    """The next shared-formula index of a sheet (unique within the sheet, as xlsx requires)."""
    index: int = getattr(ws, "_scm_shared_index", 0)
    ws._scm_shared_index = index + 1  # type: ignore[attr-defined]
    return index
