"""IronCalc's work on one workbook: load it, evaluate it, read every formula cell back.

`IronCalcEngine` runs this in the caller's process for a small workbook and, for a large one,
in a process of its own (`python -m scm_xl.engines.ironcalc_worker`: the request, a pickle on
standard input, names the workbook and, when the caller knows them, its formula cells; the
answer, pickles on standard output, is the values sheet by sheet, or the failure). A process of its own,
because at 10,000 rows IronCalc's model is a few hundred megabytes that the command then
never holds, because IronCalc holds Python's lock while it evaluates (the caller computes the
reference meanwhile), and because a Rust panic or abort then ends the worker, not the command.
This module imports no more than it needs (no numpy, no openpyxl): the worker starts in a
tenth of a second.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import posixpath
import re
import sys
import tempfile
import zipfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from scm_xl.xlsx import package
from scm_xl.xlsx.values import CellError, CellGrid, CellValue, Column, FormulaCells, FormulaText, TypedCell, cell_position


class ReadFailed(Exception):
    """The workbook could not be read as an xlsx package (the engine never saw it)."""


class EngineFailed(Exception):
    """IronCalc could not load or evaluate the workbook."""


def formula_cells(path: Path) -> dict[str, list[str]]:
    """Each sheet's formulas: "A1" for a plain formula, the whole range "C2:C12" for an array formula."""
    try:
        return package.workbook_formula_refs(path)
    except package.Unreadable as exc:
        raise ReadFailed(str(exc)) from exc


def evaluate(path: Path, cells: FormulaCells | None = None, *, prepared: bool = False) -> CellGrid:
    """Every formula cell's value as IronCalc computes it (`cells`: the formula cells, when the
    caller knows them; else read from the file; `prepared`: `path` was written through
    `prepare`, and IronCalc loads it as it is)."""
    values = CellGrid()
    for sheet, columns in sheet_by_sheet(path, cells, prepared=prepared):
        values.put_sheet(sheet, columns)
    return values


def sheet_by_sheet(path: Path, cells: FormulaCells | None = None, *, prepared: bool = False,
                   typed: Callable[[], tuple[Sequence[TypedCell], FormulaCells] | None] | None = None,
                   ) -> Iterator[tuple[str, dict[int, Column]]]:
    """`evaluate`'s values one sheet at a time, in the order of `cells` (the workbook's, read
    from the file): the whole workbook is evaluated before the first, and each sheet is read
    back when it is asked for, so that a caller can store one sheet's values while the next is
    read (`main`). `typed`, when given, is asked once the workbook is loaded for what was typed
    into it since its file was saved, which goes in before it is evaluated, and for its formula
    cells then, which are read back in place of `cells` (None: the caller gave up, and nothing
    is evaluated)."""
    import ironcalc

    refs = cells if cells is not None else formula_cells(path)
    try:
        with tempfile.TemporaryDirectory(prefix="scm-xl-ironcalc-") as folder, _printing_to_stderr():
            loaded = path if prepared else for_ironcalc(path, Path(folder))
            model = ironcalc.load_from_xlsx(str(loaded), "en", "UTC")
            sheet_index = {props["name"]: i for i, props in enumerate(model.get_worksheets_properties())}
            if typed is not None:
                since = typed()
                if since is None:
                    return
                _type_in(model, sheet_index, since[0])
                refs = since[1]
            model.evaluate()
    except Exception as exc:
        raise EngineFailed(str(exc)) from exc
    except BaseException as exc:
        # A Rust panic arrives as pyo3's PanicException, which derives from BaseException only.
        if type(exc).__name__ != "PanicException":
            raise
        raise EngineFailed(str(exc)) from exc
    reader = _Reader(ironcalc, model)
    for sheet, sheet_refs in refs.items():
        if not sheet_refs:
            continue
        index = sheet_index.get(sheet)
        if index is None:
            raise EngineFailed(f"ironcalc did not load sheet {sheet!r} of {path}")
        values = CellGrid()
        for ref in sheet_refs:
            if ":" not in ref:
                row, col = cell_position(ref)
                values.put(sheet, row, col, reader.one(index, row, col))
                continue
            first, last = ref.split(":")
            (top, left), (bottom, right) = cell_position(first), cell_position(last)
            for col in range(left, right + 1):
                column = reader.column(index, col, top, bottom)
                if values.columns(sheet).get(col) is None:
                    values.put_column(sheet, col, top, column)
                else:
                    for at, value in enumerate(column):
                        values.put(sheet, top + at, col, value)
        yield sheet, values.columns(sheet)


def _type_in(model: Any, sheet_index: dict[str, int], typed: Sequence[TypedCell]) -> None:
    """Each typed value into its cell as the value it is, not parsed as input (a text stays a
    text even when it reads "=1+1"), and each typed formula as a formula."""
    for sheet, row, col, value in typed:
        index = sheet_index.get(sheet)
        if index is None:
            raise EngineFailed(f"a value was typed into sheet {sheet!r}, which the workbook does not have")
        if isinstance(value, FormulaText):
            model.update_cell_with_formula(index, row, col, value.text)
        elif isinstance(value, bool):
            model.update_cell_with_bool(index, row, col, value)
        elif isinstance(value, (int, float)):
            model.update_cell_with_number(index, row, col, float(value))
        else:
            model.update_cell_with_text(index, row, col, value)


@contextlib.contextmanager
def _printing_to_stderr() -> Iterator[None]:
    """IronCalc prints a line to the standard output for each formula cell saved without a value
    (<c><f>..</f></c>, as some writers save one): in the worker that line would break its answer,
    in the command it would land in `--json` output. While IronCalc works, what it prints goes to
    the standard error."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)


class _Reader:
    """IronCalc's computed values as every engine reports them. IronCalc gives a number as float,
    a logical as bool, a text or an error as str, an empty result as None: only a str that starts
    with "#" needs the cell's type (an error, or a text that looks like one), and a None whether
    it is a logical, so most cells cost one call."""

    def __init__(self, ironcalc: Any, model: Any) -> None:
        self.get = model.get_cell_value
        self.kind = model.get_cell_type
        self.error = ironcalc.CellType.ErrorValue
        self.logical = ironcalc.CellType.LogicalValue

    def one(self, sheet: int, row: int, col: int) -> CellValue:
        value = self.get(sheet, row, col)
        kind = type(value)
        if kind is float or kind is bool:
            return value
        return self._other(sheet, row, col, value)

    def column(self, sheet: int, col: int, top: int, bottom: int) -> list[CellValue]:
        get = self.get
        out = [get(sheet, row, col) for row in range(top, bottom + 1)]
        for at, value in enumerate(out):
            kind = type(value)
            if kind is not float and kind is not bool:
                out[at] = self._other(sheet, top + at, col, value)
        return out

    def _other(self, sheet: int, row: int, col: int, value: Any) -> CellValue:
        if isinstance(value, str):
            if value.startswith("#") and self.kind(sheet, row, col) == self.error:
                # The standard codes match the other engines'. IronCalc's own (#N/IMPL! for a function it
                # lacks, #CIRC!, #SPILL!) are kept as they are: each is a disagreement worth seeing.
                return CellError(value)
            return value or None
        if value is None:
            return False if self.kind(sheet, row, col) == self.logical else None
        if isinstance(value, (int, float)):
            return float(value)
        raise EngineFailed(f"unexpected cell value {value!r} of type {type(value).__name__}")


# An empty cell that only carries a style (<c r="B4" s="11"/>, every yellow input cell a
# person has not typed into): IronCalc 0.9.1 reads it as the number 0, so `=B4<>""` is TRUE
# there and FALSE in Excel and LibreOffice. And IronCalc 0.9.1 looks a relationship's target
# up as written, so an absolute one ("/xl/comments/comment1.xml": openpyxl writes every cell
# comment so) is "not found in archive" and the whole workbook fails to load. IronCalc gets a
# copy without those cells and with every internal target made relative to its part.
# The copy also leaves out the sheets' conditional formats and data validations, which change
# no cell's value: IronCalc 0.9.1 evaluates a conditional format's formula for every cell of its
# range at every evaluate, and the raw-data sheet's (the orange hint on a row inserted by hand)
# covers every input cell: 0.8 s of a 10,000-row workbook's evaluate (benchmarks/results/fill_phases.md).
def prepare(name: str) -> package.SheetRewrite | None:
    """How the package member `name` reads in IronCalc's copy (None: as it is)."""
    if _is_sheet(name):
        return _strip
    if name.endswith(".rels"):
        return lambda blocks: (relative_targets(name, block) for block in blocks)
    return None


def _strip(blocks: Iterable[bytes]) -> Iterator[bytes]:
    for block in blocks:
        block = package.STYLED_EMPTY_CELL.sub(b"", block)
        if b"<conditionalFormatting" in block or b"<dataValidations" in block:  # after </sheetData>
            block = _NOT_VALUES.sub(b"", block)
        yield block


def for_ironcalc(path: Path, into: Path) -> Path:
    """IronCalc's copy of `path`, in the folder `into` (`fill`, which writes the file, writes
    it so at once: `prepare`)."""
    copy = into / path.name
    try:
        package.copy_package(path, copy, prepare)
    except (OSError, KeyError, ValueError, zipfile.BadZipFile) as exc:
        raise ReadFailed(f"cannot read workbook {path}: {exc}") from exc
    return copy


# A sheet's conditional formats and its data validations, whole (the sheet's trailer after
# </sheetData>, which `package.row_blocks` yields in one block).
_NOT_VALUES = re.compile(rb"<conditionalFormatting\b.*?</conditionalFormatting>|<dataValidations\b.*?</dataValidations>"
                         rb"|<dataValidations\b[^>]*/>", re.DOTALL)
_RELATIONSHIP = re.compile(rb"<(?:[A-Za-z_][\w.-]*:)?Relationship\b[^>]*>")
_ABSOLUTE_TARGET = re.compile(rb"""(\sTarget\s*=\s*["'])/([^"']*)(["'])""")
_EXTERNAL = re.compile(rb"""\sTargetMode\s*=\s*["']External["']""")


def relative_targets(rels_name: str, xml: bytes) -> bytes:
    """The relationships part `rels_name` ("xl/worksheets/_rels/sheet1.xml.rels") with each
    absolute internal target ("/xl/comments/comment1.xml") written relative to the part the
    relationships belong to ("../comments/comment1.xml"); external targets (links) as they are."""
    base = posixpath.dirname(posixpath.dirname(rels_name)) or "."  # the folder above _rels/

    def relative(match: re.Match[bytes]) -> bytes:
        if _EXTERNAL.search(match.group(0)):
            return match.group(0)
        return _ABSOLUTE_TARGET.sub(
            lambda t: t.group(1) + posixpath.relpath(t.group(2).decode("utf-8") or ".", base).encode("utf-8")
            + t.group(3), match.group(0))

    return _RELATIONSHIP.sub(relative, xml)


def _is_sheet(name: str) -> bool:
    return name.startswith("xl/worksheets/sheet") and name.endswith(".xml")


def main() -> int:
    """The worker process: one request in; out, one answer per sheet as each is read back
    ({"sheet": title, "columns": ...}), then {"done": True}, or a failure ({"read_failed": ...}
    or {"engine_failed": ...}) in place of whatever is left: the caller stores a sheet's values
    while the next is read (`ironcalc_engine._Worker`)."""
    request = pickle.load(sys.stdin.buffer)
    out = sys.stdout.buffer

    def typed() -> tuple[Sequence[TypedCell], FormulaCells] | None:
        try:
            since = pickle.load(sys.stdin.buffer)
        except EOFError:  # the command gave up before it had them to give
            return None
        return since["typed"], since["cells"]

    def send(answer: dict[str, Any]) -> None:
        pickle.dump(answer, out, protocol=pickle.HIGHEST_PROTOCOL)
        out.flush()

    try:
        for sheet, columns in sheet_by_sheet(Path(request["path"]), request.get("cells"),
                                             prepared=bool(request.get("prepared")),
                                             typed=typed if request.get("then") else None):
            send({"sheet": sheet, "columns": columns})
    except ReadFailed as exc:
        send({"read_failed": str(exc)})
    except EngineFailed as exc:
        send({"engine_failed": str(exc)})
    else:
        send({"done": True})
    return 0


if __name__ == "__main__":
    sys.exit(main())
