"""Microsoft Excel itself, driven through xlwings: Windows or macOS with Excel installed only."""

from __future__ import annotations

import importlib.util
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from openpyxl.cell.cell import ERROR_CODES
from openpyxl.utils.cell import coordinate_to_tuple

from scm_xl.engines.base import (
    CellError, CellValue, Engine, FormulaCells, Recalculated, formula_refs, normalise, range_cells,
)
from scm_xl.errors import EngineError

UNAVAILABLE = "the excel engine needs Microsoft Excel on Windows or macOS and `pip install 'scm-xl[excel]'`"


class ExcelEngine(Engine):
    name = "excel"
    unavailable_message = UNAVAILABLE

    def available(self) -> bool:
        # xlwings imports on Linux too, but it cannot calculate there
        return sys.platform in ("win32", "darwin") and importlib.util.find_spec("xlwings") is not None

    def recalculate(self, path: Path, cells: FormulaCells | None = None) -> Recalculated:
        if not self.available():
            raise EngineError(UNAVAILABLE)
        import xlwings

        path = Path(path)
        start = time.perf_counter()
        refs = cells if cells is not None else formula_refs(path)
        try:
            app = xlwings.App(visible=False, add_book=False)
        except Exception as exc:
            raise EngineError(f"could not start Excel: {exc}") from exc
        try:
            app.display_alerts = False
            book = app.books.open(str(path.resolve()), update_links=False, read_only=True)
            try:
                app.calculate()
                values = {}
                for sheet, sheet_refs in refs.items():
                    values.update(_sheet_values(book.sheets[sheet], sheet_refs))
            finally:
                book.close()  # without saving: the input stays as it was
        except Exception as exc:
            raise EngineError(f"Excel failed on {path}: {exc}") from exc
        finally:
            app.quit()
        return Recalculated(self.name, values, time.perf_counter() - start)


def _sheet_values(sheet: Any, refs: Sequence[str]) -> dict[tuple[str, str], CellValue]:
    """The values of one xlwings sheet's formula cells, read in one call through its used range."""
    used = sheet.used_range
    # err_to_str: errors as "#DIV/0!" rather than None; ndim=2 even for one row or cell
    grid = used.options(ndim=2, err_to_str=True).value
    values: dict[tuple[str, str], CellValue] = {}
    for ref in refs:
        for _, _, cell in range_cells(ref):
            row, col = coordinate_to_tuple(cell)
            grid_row, grid_col = row - used.row, col - used.column
            inside = 0 <= grid_row < len(grid) and 0 <= grid_col < len(grid[0])
            value = grid[grid_row][grid_col] if inside else None
            is_error = isinstance(value, str) and value in ERROR_CODES
            values[(sheet.name, cell)] = CellError(value) if isinstance(value, str) and is_error else normalise(value)
    return values
