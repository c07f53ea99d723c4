"""Recalculation engines: each recalculates a saved workbook and returns every formula cell's value.

    formulas     (alias embedded) pure Python, always available; slow on large sheets
    ironcalc     Rust, from PyPI; fast at any size, wrong on array (CSE) idioms of element-wise functions
    libreoffice  headless soffice; about 1 s to start, fast at any size
    excel        Microsoft Excel through xlwings, on Windows or macOS only
"""

from __future__ import annotations

from scm_xl.engines.base import CellError, CellValue, Engine, Recalculated
from scm_xl.engines.excel import ExcelEngine
from scm_xl.engines.formulas_engine import FormulasEngine
from scm_xl.engines.ironcalc_engine import IronCalcEngine
from scm_xl.engines.libreoffice import LibreOfficeEngine
from scm_xl.errors import UsageError

__all__ = [
    "AUTO_LIBREOFFICE_ROWS", "ENGINE_ALIASES", "ENGINE_NAMES", "CellError", "CellValue", "Engine",
    "ExcelEngine", "FormulasEngine", "IronCalcEngine", "LibreOfficeEngine", "Recalculated", "choose_engine",
    "get_engine",
]

ENGINES: dict[str, type[Engine]] = {
    "formulas": FormulasEngine,
    "ironcalc": IronCalcEngine,
    "libreoffice": LibreOfficeEngine,
    "excel": ExcelEngine,
}
ENGINE_ALIASES = {"embedded": "formulas"}
ENGINE_NAMES = (*ENGINES, *ENGINE_ALIASES)
# Above this many raw rows LibreOffice is faster than the formulas engine on our layout
# (benchmarks/results/workbook.md: 1,000 rows take about 15 s in formulas, 6 s in LibreOffice).
AUTO_LIBREOFFICE_ROWS = 500


def get_engine(name: str) -> Engine:
    """The engine called `name` (one of ENGINE_NAMES)."""
    engine = ENGINES.get(ENGINE_ALIASES.get(name, name))
    if engine is None:
        raise UsageError(f"unknown engine {name!r}: choose one of {', '.join(ENGINE_NAMES)}")
    return engine()


def choose_engine(name: str, rows: int) -> tuple[Engine, str | None]:
    """The engine for `name`, which may also be "auto", and a note saying why auto switched, if it did."""
    if name != "auto":
        if name not in ENGINE_NAMES:
            raise UsageError(f"unknown engine {name!r}: choose one of auto, {', '.join(ENGINE_NAMES)}")
        return get_engine(name), None
    if rows > AUTO_LIBREOFFICE_ROWS:
        libreoffice = LibreOfficeEngine()
        if libreoffice.available():
            return libreoffice, f"auto: {rows} rows, using libreoffice (faster on large sheets)"
    return FormulasEngine(), None
