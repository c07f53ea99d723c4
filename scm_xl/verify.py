"""Compare an engine's recalculated workbook with the Python reference, as data.

Tolerance: numbers agree when math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9).
LibreOffice stores 15 significant digits (relative error ~5e-16) and the
engines sum in different orders, so exact equality would be noise; a real
disagreement in a formula is many orders of magnitude larger. Text must match
exactly; "" and an empty cell are the same; errors must have the same code.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from scm_xl.engines.base import CellError, CellValue, Recalculated
from scm_xl.xlsx.values import ABSENT, CellGrid
from scm_xl.xlsx.package import column_name
from scm_xl.report_texts import words
from scm_xl.rules import Lang

NOT_A_FORMULA = words("en")["not_a_formula"]  # what `actual` holds for a formula typed over (the JSON's)
REL_TOL = 1e-9
ABS_TOL = 1e-9


@dataclass(frozen=True)
class Mismatch:
    sheet: str
    cell: str
    expected: CellValue
    actual: CellValue
    # A formula cell someone typed a value over (`actual` is then NOT_A_FORMULA): a root cause, whose
    # value every formula reading the cell carries on, so it is reported before them.
    typed_over: bool = False
    hint: str = ""  # where to type instead (the input the cell reads), given by the workbook layer

    def __str__(self) -> str:
        return self.describe()

    def describe(self, lang: Lang = "en") -> str:
        """The cell, what the workbook holds and what the reference says, in `lang` (report_texts'
        words; the values as Python writes them, an empty cell "None" in English)."""
        t = words(lang)

        def shown(value: CellValue) -> str:
            return t["cell_empty"] if value is None else repr(value)

        ref = f"'{self.sheet}'!{self.cell}"
        if self.typed_over:
            hint = t["cell_hint"].format(hint=self.hint) if self.hint else ""
            return t["cell_typed_over"].format(ref=ref, not_a_formula=t["not_a_formula"],
                                               expected=shown(self.expected), hint=hint)
        return t["cell_differs"].format(ref=ref, actual=shown(self.actual), expected=shown(self.expected))


@dataclass
class Verification:
    engine: str
    cells_compared: int
    mismatches: list[Mismatch] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)  # formula cells the reference has no value for
    seconds: float = 0.0
    note: str | None = None
    # Typed rows below what the formulas cover ("row 412 (E411)"): the workbook ignores them.
    uncovered: list[str] = field(default_factory=list)
    rows_covered: int | None = None
    # The engine's values of every formula cell, kept so they can be stored in the file.
    values: Mapping[tuple[str, str], CellValue] = field(default_factory=dict, repr=False)

    @property
    def typed_over(self) -> list[Mismatch]:
        """The formula cells typed over: the likely causes of the other mismatches."""
        return [m for m in self.mismatches if m.typed_over]

    @property
    def ok(self) -> bool:
        return not self.mismatches and not self.unexpected and not self.uncovered

    def to_dict(self) -> dict[str, object]:
        return {
            "engine": self.engine,
            "cells_compared": self.cells_compared,
            "mismatches": [
                {"sheet": m.sheet, "cell": m.cell, "expected": _jsonable(m.expected), "actual": _jsonable(m.actual),
                 **({"hint": m.hint} if m.hint else {})}
                for m in self.mismatches
            ] + [{"sheet": ref.split("!")[0], "cell": ref.split("!")[-1], "expected": "no reference value",
                  "actual": None} for ref in self.unexpected],
            "tolerance": {"rel": REL_TOL, "abs": ABS_TOL},
            "seconds": round(self.seconds, 3),
            "uncovered_rows": list(self.uncovered),
            "rows_covered": self.rows_covered,
        }


def _jsonable(value: CellValue) -> object:
    if isinstance(value, CellError):
        return value.code
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value


def same_value(expected: CellValue, actual: CellValue) -> bool:
    if expected == "":
        expected = None
    if actual == "":
        actual = None
    if expected is None or actual is None:
        return expected is None and actual is None
    if isinstance(expected, CellError) or isinstance(actual, CellError):
        return expected == actual
    if isinstance(expected, bool) or isinstance(actual, bool):
        return expected == actual
    if isinstance(expected, (int, float)) and isinstance(actual, (int, float)):
        return math.isclose(float(expected), float(actual), rel_tol=REL_TOL, abs_tol=ABS_TOL)
    return expected == actual


def compare(expected: Mapping[tuple[str, str], CellValue], recalculated: Recalculated,
            sheets: set[str]) -> Verification:
    """Every formula cell of `sheets` in the recalculation, against the reference."""
    if isinstance(expected, CellGrid) and isinstance(recalculated.values, CellGrid):
        return _compare_grids(expected, recalculated, sheets)
    result = Verification(engine=recalculated.engine, cells_compared=0, seconds=recalculated.seconds,
                          values=recalculated.values)
    for (sheet, cell), actual in recalculated.values.items():
        if sheet not in sheets:
            continue
        key = (sheet, cell)
        if key not in expected:
            result.unexpected.append(f"'{sheet}'!{cell}")
            continue
        result.cells_compared += 1
        if not same_value(expected[key], actual):
            result.mismatches.append(Mismatch(sheet, cell, expected[key], actual))
    # A formula cell typed over with a constant is not in the engine's formula cells at all.
    for (sheet, cell), value in expected.items():
        if sheet in sheets and (sheet, cell) not in recalculated.values:
            result.cells_compared += 1
            result.mismatches.append(Mismatch(sheet, cell, value, NOT_A_FORMULA, typed_over=True))
    # Sort only what is reported (sorting every compared cell costs seconds on large sheets).
    result.mismatches.sort(key=lambda m: (m.sheet, _order(m.cell)))
    result.unexpected.sort()
    return result


def _compare_grids(expected: CellGrid, recalculated: Recalculated, sheets: set[str]) -> Verification:
    """`compare` column by column: the same verdicts, without a key string per cell (a million
    cells at 10,000 rows). Two values equal as Python sees them are the same value for
    `same_value` too, and most are; two floats are checked with the tolerance inline."""
    actual_grid = recalculated.values
    assert isinstance(actual_grid, CellGrid)
    result = Verification(engine=recalculated.engine, cells_compared=0, seconds=recalculated.seconds,
                          values=actual_grid)
    compared = 0
    for sheet in actual_grid.sheets():
        if sheet not in sheets:
            continue
        wanted = expected.columns(sheet)
        for col, column in actual_grid.columns(sheet).items():
            reference = wanted.get(col)
            ref_first = reference.first if reference is not None else 0
            ref_values = reference.values if reference is not None else []
            ref_len = len(ref_values)
            first = column.first
            values = column.values
            at_reference = first - ref_first
            if at_reference >= 0 and ref_values[at_reference:at_reference + len(values)] == values:
                # most columns (a 10,000-row workbook: 1.1 of its 1.4 million cells): every value
                # equal to the reference's as Python sees it, which the loop below passes first too
                compared += len(values) - values.count(ABSENT)
                continue
            for at, actual in enumerate(values):
                if actual is ABSENT:
                    continue
                i = first + at - ref_first
                value = ref_values[i] if 0 <= i < ref_len else ABSENT
                if value is ABSENT:
                    result.unexpected.append(f"'{sheet}'!{column_name(col)}{first + at}")
                    continue
                compared += 1
                if actual == value:
                    continue
                if type(actual) is float and type(value) is float:
                    difference = abs(actual - value)  # nan or inf: not <=, and same_value decides
                    if difference <= ABS_TOL or difference <= REL_TOL * max(abs(actual), abs(value)):
                        continue
                if not same_value(value, actual):
                    result.mismatches.append(Mismatch(sheet, f"{column_name(col)}{first + at}", value, actual))
    # A formula cell typed over with a constant is not in the engine's formula cells at all.
    for sheet in expected.sheets():
        if sheet not in sheets:
            continue
        held = actual_grid.columns(sheet)
        for col, column in expected.columns(sheet).items():
            first = column.first
            actual_column = held.get(col)
            if actual_column is not None:
                at_engine, count = first - actual_column.first, len(column.values)
                if at_engine >= 0 and at_engine + count <= len(actual_column.values) \
                        and ABSENT not in actual_column.values[at_engine:at_engine + count]:
                    continue  # the engine has a value in each of the column's rows (most columns)
            for at, value in enumerate(column.values):
                if value is not ABSENT and (actual_column is None or actual_column.get(first + at) is ABSENT):
                    compared += 1
                    result.mismatches.append(Mismatch(sheet, f"{column_name(col)}{first + at}", value,
                                                      NOT_A_FORMULA, typed_over=True))
    result.cells_compared = compared
    result.mismatches.sort(key=lambda m: (m.sheet, _order(m.cell)))
    result.unexpected.sort()
    return result


def _order(cell: str) -> tuple[int, str]:
    letters = "".join(ch for ch in cell if ch.isalpha())
    digits = "".join(ch for ch in cell if ch.isdigit())
    return (int(digits or 0), letters)
