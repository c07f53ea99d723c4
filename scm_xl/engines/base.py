"""The engine interface, the value types every engine returns, and helpers they share."""

from __future__ import annotations

import abc
import datetime
import numbers
from collections.abc import Callable, Iterator, MutableMapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import SupportsFloat, cast

import numpy as np
from openpyxl.utils.cell import get_column_letter, range_boundaries
from openpyxl.utils.datetime import to_excel

from scm_xl.xlsx import package
from scm_xl.errors import EngineError


# The value types live with the grid that holds many of them (xlsx.values: no numpy or
# openpyxl there, so the IronCalc worker process imports little); every engine names them here.
from scm_xl.xlsx.values import (  # noqa: E402,F401
    CellError, CellGrid, CellKey, CellValue, FormulaCells, SheetView, TypedCell, cell_position,
)


@dataclass
class Recalculated:
    """The computed value of every formula cell of one workbook, as one engine saw it."""

    engine: str
    values: MutableMapping[CellKey, CellValue]  # a dict, or a CellGrid (xlsx.values) for many cells
    seconds: float

    def get(self, sheet: str, cell: str) -> CellValue:
        return self.values[(sheet, cell.replace("$", "").upper())]


class Pending:
    """A recalculation under way, or about to run: `result()` waits for its values (or raises
    its EngineError), `sheet(title)` for one sheet's (an engine that answers sheet by sheet
    gives each as it comes), `cancel()` gives it up (an interrupted command ends the engine's
    process). `alone`: the engine's process needs the machine's memory to itself (a very large
    workbook): its values come once it has ended, and the caller computes nothing large until
    then (`fill` takes them before it computes the reference). `working()`: the engine is still
    at work in a process of its own, and none of its values is in yet: time the caller may spend
    on work it would otherwise do after (`fill` renders the sheets ahead). `type_in(typed, cells)`:
    what was typed into the workbook since its file was saved, and its formula cells now, for a
    recalculation begun by `Engine.start_then`, which evaluates once it has them."""

    def __init__(self, result: Callable[[], Recalculated], cancel: Callable[[], None] | None = None,
                 sheet: Callable[[str], SheetView] | None = None, *, alone: bool = False,
                 working: Callable[[], bool] | None = None,
                 type_in: Callable[[Sequence[TypedCell], FormulaCells], None] | None = None) -> None:
        self._result = result
        self._cancel = cancel
        self._sheet = sheet
        self.alone = alone
        self._working = working
        self._type_in = type_in
        self._done: Recalculated | None = None
        self._grid: CellGrid | None = None

    def type_in(self, typed: Sequence[TypedCell], cells: FormulaCells) -> None:
        if self._type_in is None:
            raise TypeError("only a recalculation begun by Engine.start_then is given typed cells")
        self._type_in(typed, cells)

    def result(self) -> Recalculated:
        if self._done is None:
            self._done = self._result()
        return self._done

    def sheet(self, title: str) -> SheetView:
        """The values of sheet `title`'s formula cells, keyed (row, column)."""
        if self._sheet is not None:
            return self._sheet(title)
        if self._grid is None:  # an engine's dict keyed (sheet, "A1"), held by sheet and column once
            values = self.result().values
            self._grid = values if isinstance(values, CellGrid) else CellGrid(values.items())
        return self._grid.sheet_view(title)

    def cancel(self) -> None:
        if self._cancel is not None:
            self._cancel()

    def working(self) -> bool:
        return self._working is not None and self._done is None and self._working()


class Engine(abc.ABC):
    """Recalculates a saved workbook."""

    name: str

    @abc.abstractmethod
    def recalculate(self, path: Path, cells: FormulaCells | None = None) -> Recalculated:
        """Recalculate the workbook at `path`; raise EngineError if that cannot be done. `cells`:
        the formula cells of each sheet ("A1", or "A1:C9" where every cell holds a formula), when
        the caller knows them (fill, which wrote them); an engine may read them from the file
        instead."""

    def start(self, path: Path, cells: FormulaCells | None = None, *, prepared: bool = False) -> Pending:
        """Begin recalculating `path`; the caller may work meanwhile, then asks `Pending.result`.
        An engine that works in a process of its own starts it now (IronCalc on a large
        workbook); by default the work is done when the result is asked for. `prepared`: the
        caller wrote `path` through `prepare` (an engine that needs a copy of its own then reads
        the file as it is)."""
        return Pending(lambda: self.recalculate(path, cells))

    def loads_apart(self, count: int) -> bool:
        """Whether this engine loads and evaluates a workbook of `count` formula cells in a process
        of its own, which `start_then` can begin before the workbook is final. The default: no."""
        return False

    def start_then(self, path: Path, cells: FormulaCells, *, prepared: bool = False) -> Pending:
        """`start` for a workbook its writer is still finishing (only where `loads_apart`): the
        engine loads `path` now, in its own process, while the caller types the last cells into
        its workbook (`fill`: what the analysis of the rows fills in), and evaluates once
        `Pending.type_in` gives them."""
        raise TypeError(f"{self.name} does not load a workbook in a process of its own")

    # How each member of the package this engine reads must be rewritten (package.copy_package's
    # `rewrite`), when it needs a copy of its own; None: it reads any workbook as it is. `fill`
    # writes the file it recalculates so at once, and says so (`start(prepared=True)`): a sheet's
    # rows as openpyxl saved them go through it, the pending formula cells join them after, so a
    # rewrite that changes formula cells does not belong here (IronCalc's drops styled empty cells,
    # conditional formats and validations, and makes relationship targets relative).
    prepare: Callable[[str], package.SheetRewrite | None] | None = None

    @abc.abstractmethod
    def available(self) -> bool:
        """Whether this engine can run on this machine."""

    unavailable_message = "this engine cannot run here"

    def require(self) -> None:
        """Raise EngineError, with what to install, if this engine cannot run here."""
        if not self.available():
            raise EngineError(self.unavailable_message)

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


def engine_failed(engine: str, path: Path, problem: object) -> EngineError:
    """The error for an engine that could not load or recalculate `path`, naming the other
    engines that can run here. Each engine has its own xlsx reader (IronCalc's is stricter about
    a package's structure than Excel's or LibreOffice's), so one engine's failure does not show
    the workbook is broken: the message says which other one to try."""
    from scm_xl.engines import ENGINE_CLASSES, engine_class  # the package lists the engines

    others = sorted((name for name in ENGINE_CLASSES if name != engine and engine_class(name)().available()),
                    key=lambda name: name == "formulas")  # the slow one last
    words = {"formulas": "--engine formulas (slow: minutes on a large workbook)"}
    hint = ""
    if others:
        hint = ("; another engine reads the file its own way: try " +
                " or ".join(words.get(name, f"--engine {name}") for name in others))
    return EngineError(f"{engine} failed on {path}: {problem}{hint}")


def normalise(value: object) -> CellValue:
    """One value as every engine reports it: numbers and dates as float, "" as None, errors as CellError."""
    if value is None or isinstance(value, CellError):
        return value
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, numbers.Number):
        return float(cast(SupportsFloat, value))  # typeshed's Number has no __float__; numbers here do
    if isinstance(value, str):
        return str(value) or None
    if isinstance(value, (datetime.date, datetime.time, datetime.timedelta)):
        return float(to_excel(value))  # openpyxl and xlwings turn date-formatted numbers into dates
    raise EngineError(f"unexpected cell value {value!r} of type {type(value).__name__}")


def formula_refs(path: Path) -> dict[str, list[str]]:
    """Each sheet's formulas: "A1" for a plain formula, the whole range "C2:C12" for an array formula."""
    try:
        return package.workbook_formula_refs(path)
    except package.Unreadable as exc:
        raise EngineError(str(exc)) from exc


def _bounds(ref: str) -> tuple[int, int, int, int]:
    """range_boundaries of a range with both corners (None comes only for whole rows or columns)."""
    return cast("tuple[int, int, int, int]", range_boundaries(ref))


def absolute_cells(ref: str) -> Iterator[tuple[int, int, str]]:
    """(row, column, "A1") for each cell of "A1" or "A1:C3", row by row."""
    if ":" not in ref:  # most formula cells: no range to build
        yield *cell_position(ref), ref
        return
    min_col, min_row, max_col, max_row = _bounds(ref)
    for row in range(min_row, max_row + 1):
        for col in range(min_col, max_col + 1):
            yield row, col, f"{get_column_letter(col)}{row}"


def range_cells(ref: str) -> Iterator[tuple[int, int, str]]:
    """(row offset, column offset, "A1") for each cell of "A1" or "A1:C3", row by row."""
    min_col, min_row, max_col, max_row = _bounds(ref)
    for row in range(min_row, max_row + 1):
        for col in range(min_col, max_col + 1):
            yield row - min_row, col - min_col, f"{get_column_letter(col)}{row}"
