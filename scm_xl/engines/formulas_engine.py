"""The embedded engine: the pure-Python `formulas` package, no external program needed."""

from __future__ import annotations

import contextlib
import io
import time
import warnings
from pathlib import Path

import formulas
import schedula
from formulas.ranges import Ranges
from formulas.tokens.operand import XlError

from scm_xl.engines.base import (
    CellError, CellValue, Engine, FormulaCells, Recalculated, formula_refs, normalise, range_cells,
)
from scm_xl.errors import EngineError


class FormulasEngine(Engine):
    name = "formulas"

    def available(self) -> bool:
        return True

    def recalculate(self, path: Path, cells: FormulaCells | None = None) -> Recalculated:
        path = Path(path)
        start = time.perf_counter()
        refs = cells if cells is not None else formula_refs(path)
        try:
            solution = _solve(path)
        except Exception as exc:
            raise EngineError(f"formulas engine failed on {path}: {exc}") from exc
        values: dict[tuple[str, str], CellValue] = {}
        for sheet, sheet_refs in refs.items():
            for ref in sheet_refs:
                # formulas keys an array formula by its whole range, a plain formula by its cell
                found = solution.get((sheet.upper(), ref))
                for row, col, cell in range_cells(ref):
                    if found is None:
                        value = solution.get((sheet.upper(), cell), [[None]])[0][0]
                    else:
                        value = found[row][col] if row < len(found) and col < len(found[0]) else None
                    values[(sheet, cell)] = _plain(value)
        return Recalculated(self.name, values, time.perf_counter() - start)


def _solve(path: Path) -> dict[tuple[str, str], list[list[object]]]:
    """Calculate the workbook; results keyed by (SHEET upper-cased, "A1" or "A1:C3")."""
    # formulas draws tqdm progress bars on stderr and may warn (numpy division by zero, openpyxl)
    with warnings.catch_warnings(), contextlib.redirect_stderr(io.StringIO()), \
            contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        solution = formulas.ExcelModel().loads(str(path)).finish().calculate()
    results = {}
    for key, ranges in solution.items():
        # keys look like "'[book.xlsx]SHEET'!A1"; defined names and odd nodes have no sheet
        quoted_sheet, _, ref = str(key).rpartition("!")
        sheet = quoted_sheet.strip("'").partition("]")[2]
        if sheet and isinstance(ranges, Ranges):
            results[(sheet, ref)] = ranges.value.tolist()
    return results


def _plain(value: object) -> CellValue:
    """A formulas result element as a plain value: unwrap Ranges, map XlError and empty."""
    while isinstance(value, Ranges):  # an array element can itself be a one-cell range
        value = value.value[0][0]
    if isinstance(value, XlError):
        return CellError(str(value))
    if isinstance(value, schedula.Token):  # "empty" and its kin; Token subclasses str
        return None
    return normalise(value)
