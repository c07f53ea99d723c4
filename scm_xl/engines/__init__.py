"""Recalculation engines: each recalculates a saved workbook and returns every formula cell's value.

    ironcalc     (alias embedded) Rust, from PyPI: the default; fastest up to a few thousand rows
    formulas     pure Python, always installed; very slow on the per-row layout (about 36 s for the article)
    libreoffice  headless soffice; about 1 s to start, slower than IronCalc at every size measured
    gnumeric     Gnumeric's ssconvert --recalc; shares no code with the others: a fourth opinion
    excel        Microsoft Excel through xlwings, on Windows or macOS only

On the per-row layout IronCalc, LibreOffice and Gnumeric agree with the Python reference on
every formula cell (benchmarks/results/engines.md). `auto` takes IronCalc, the faster at every
size measured (7 to 10,000 rows, benchmarks/results/workbook.md); without the ironcalc
package (a platform without its wheel) LibreOffice if installed, else formulas, and says so.
IronCalc still computes some array (CSE) idioms wrongly (listed in the benchmark); the
workbook does not use them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from scm_xl.errors import UsageError

if TYPE_CHECKING:
    from scm_xl.engines.base import CellError, CellValue, Engine, Recalculated
    from scm_xl.engines.excel import ExcelEngine
    from scm_xl.engines.formulas_engine import FormulasEngine
    from scm_xl.engines.gnumeric import GnumericEngine
    from scm_xl.engines.ironcalc_engine import IronCalcEngine
    from scm_xl.engines.libreoffice import LibreOfficeEngine

__all__ = [
    "ENGINE_ALIASES", "ENGINE_NAMES", "CellError", "CellValue", "Engine",
    "ExcelEngine", "FormulasEngine", "GnumericEngine", "IronCalcEngine", "LibreOfficeEngine", "Recalculated",
    "choose_engine", "engine_class", "get_engine",
]

# Each engine's module and class, imported when first asked for: the command line needs only the
# names, and `import scm_xl.cli` then loads neither numpy nor openpyxl (the engines' modules do).
ENGINE_CLASSES: dict[str, tuple[str, str]] = {
    "formulas": ("formulas_engine", "FormulasEngine"),
    "ironcalc": ("ironcalc_engine", "IronCalcEngine"),
    "libreoffice": ("libreoffice", "LibreOfficeEngine"),
    "gnumeric": ("gnumeric", "GnumericEngine"),
    "excel": ("excel", "ExcelEngine"),
}
ENGINE_ALIASES = {"embedded": "ironcalc"}
ENGINE_NAMES = (*ENGINE_CLASSES, *ENGINE_ALIASES)
_LAZY = {**{cls: module for module, cls in ENGINE_CLASSES.values()},
         **{name: "base" for name in ("CellError", "CellValue", "Engine", "Recalculated")}}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


def engine_class(name: str) -> type[Engine]:
    """The class of the engine called `name` (a key of ENGINE_CLASSES), imported now."""
    module, cls = ENGINE_CLASSES[name]
    found: type[Engine] = getattr(importlib.import_module(f"{__name__}.{module}"), cls)
    return found


def get_engine(name: str) -> Engine:
    """The engine called `name` (one of ENGINE_NAMES)."""
    canonical = ENGINE_ALIASES.get(name, name)
    if canonical not in ENGINE_CLASSES:
        raise UsageError(f"unknown engine {name!r}: choose one of {', '.join(ENGINE_NAMES)}")
    return engine_class(canonical)()


def choose_engine(name: str, rows: int) -> tuple[Engine, str | None]:
    """The engine for `name`, which may also be "auto", and a note saying why auto did not take
    the embedded engine, if it did not. `rows` sizes the warning about the slow engine."""
    if name != "auto":
        if name not in ENGINE_NAMES:
            raise UsageError(f"unknown engine {name!r}: choose one of auto, {', '.join(ENGINE_NAMES)}")
        return get_engine(name), None
    ironcalc = engine_class("ironcalc")()
    if ironcalc.available():
        return ironcalc, None
    libreoffice = engine_class("libreoffice")()
    if libreoffice.available():  # faster than formulas at every size on this layout
        return libreoffice, "auto: the ironcalc package is not installed, using libreoffice"
    return engine_class("formulas")(), (
        "auto: neither the ironcalc package nor LibreOffice is installed, using formulas "
        f"(slow: minutes for {rows} rows; pip install 'ironcalc>=0.9.1,<0.10')")
