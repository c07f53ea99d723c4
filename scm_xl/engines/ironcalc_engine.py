"""IronCalc: a spreadsheet engine written in Rust, on PyPI as `ironcalc`; no external program needed.

It loads the xlsx itself and evaluates every formula in one call; reading a cell back
costs a few microseconds. On scm-xl's per-row layout it agrees with LibreOffice and the
Python reference on every formula cell (benchmarks/results/engines.md).
Known limits: it reads an empty styled cell written as <c s=".." t="n"/> as 0 (worked
around below), and it computes some array (CSE) idioms wrongly: ISNUMBER/ISTEXT applied
to a range, COUNTIF/MATCH with a range as criteria or lookup value, SMALL with an array k.
Ordinary per-row formulas, SUMPRODUCT, MMULT, MINVERSE, TRANSPOSE and scalar
MINIFS/MAXIFS it computes right.
"""

from __future__ import annotations

import importlib
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from scm_xl.engines import xlsx_cells
from scm_xl.engines.base import CellError, CellValue, Engine, Recalculated, absolute_cells, formula_refs, normalise
from scm_xl.errors import EngineError

UNAVAILABLE = "the ironcalc engine needs the ironcalc package: pip install 'ironcalc>=0.9.1,<0.10'"


class IronCalcEngine(Engine):
    name = "ironcalc"
    unavailable_message = UNAVAILABLE

    def available(self) -> bool:
        try:  # a wheel exists for most platforms, not all (e.g. musl Linux)
            importlib.import_module("ironcalc")
        except ImportError:
            return False
        return True

    def recalculate(self, path: Path) -> Recalculated:
        self.require()
        import ironcalc

        path = Path(path)
        start = time.perf_counter()
        refs = formula_refs(path)  # also refuses a missing or unreadable file, as every engine does
        model = _evaluated(ironcalc, path)
        sheet_index = {props["name"]: i for i, props in enumerate(model.get_worksheets_properties())}
        values: dict[tuple[str, str], CellValue] = {}
        for sheet, sheet_refs in refs.items():
            if not sheet_refs:
                continue
            index = sheet_index.get(sheet)
            if index is None:
                raise EngineError(f"ironcalc did not load sheet {sheet!r} of {path}")
            for ref in sheet_refs:
                for row, col, cell in absolute_cells(ref):
                    values[(sheet, cell)] = _value(ironcalc, model, index, row, col)
        return Recalculated(self.name, values, time.perf_counter() - start)


# An empty cell that only carries a style (<c r="B4" s="11"/>, every yellow input cell a
# person has not typed into): IronCalc 0.9.1 reads it as the number 0, so `=B4<>""` is TRUE
# there and FALSE in Excel and LibreOffice. IronCalc gets a copy without them.
def _without_styled_empty_cells(path: Path, into: Path) -> Path:
    copy = into / path.name

    def strip(blocks: Iterator[bytes]) -> Iterator[bytes]:
        return (xlsx_cells.STYLED_EMPTY_CELL.sub(b"", block) for block in blocks)

    xlsx_cells.copy_package(path, copy, lambda name: strip if _is_sheet(name) else None)
    return copy


def _is_sheet(name: str) -> bool:
    return name.startswith("xl/worksheets/sheet") and name.endswith(".xml")


def _evaluated(ironcalc: Any, path: Path) -> Any:
    try:
        with tempfile.TemporaryDirectory(prefix="scm-xl-ironcalc-") as folder:
            model = ironcalc.load_from_xlsx(str(_without_styled_empty_cells(path, Path(folder))), "en", "UTC")
        model.evaluate()
    except Exception as exc:
        raise EngineError(f"ironcalc failed on {path}: {exc}") from exc
    except BaseException as exc:
        # A Rust panic arrives as pyo3's PanicException, which derives from BaseException only.
        if type(exc).__name__ != "PanicException":
            raise
        raise EngineError(f"ironcalc failed on {path}: {exc}") from exc
    return model


def _value(ironcalc: Any, model: Any, sheet: int, row: int, col: int) -> CellValue:
    kind = model.get_cell_type(sheet, row, col)
    value = model.get_cell_value(sheet, row, col)
    if kind == ironcalc.CellType.ErrorValue:
        # The standard codes match the other engines'. IronCalc's own (#N/IMPL! for a function it
        # lacks, #CIRC!, #SPILL!) are kept as they are: each is a disagreement worth seeing.
        return CellError(str(value))
    if kind == ironcalc.CellType.LogicalValue:
        return bool(value)
    return normalise(value)  # numbers as float, "" and empty as None
