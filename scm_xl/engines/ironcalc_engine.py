"""IronCalc: a spreadsheet engine written in Rust, on PyPI as `ironcalc`; no external program needed.

It loads the xlsx itself and evaluates every formula in one call; reading a cell back
costs a few microseconds. On scm-xl's per-row layout it agrees with LibreOffice and the
Python reference on every formula cell (benchmarks/results/engines.md).
Known limits: it reads an empty styled cell written as <c s=".." t="n"/> as 0, and it cannot
find a part named by an absolute relationship target (Target="/xl/comments/comment1.xml", as
openpyxl writes a cell comment's): both worked around in the copy it is given. It computes
some array (CSE) idioms wrongly: ISNUMBER/ISTEXT applied to a range, COUNTIF/MATCH with a
range as criteria or lookup value, SMALL with an array k. Ordinary per-row formulas,
SUMPRODUCT, MMULT, MINVERSE, TRANSPOSE and scalar MINIFS/MAXIFS it computes right. When it
fails on a file, the error names the other engines installed (`base.engine_failed`).
"""

from __future__ import annotations

import importlib
import posixpath
import re
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from scm_xl.engines import xlsx_cells
from scm_xl.engines.base import (
    CellError, CellValue, Engine, Recalculated, absolute_cells, cell_position, engine_failed, formula_refs,
    normalise,
)
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
                if ":" in ref:  # an array formula's range
                    for row, col, cell in absolute_cells(ref):
                        values[(sheet, cell)] = _value(ironcalc, model, index, row, col)
                    continue
                row, col = cell_position(ref)  # most formula cells: one cell, no generator to build
                values[(sheet, ref)] = _value(ironcalc, model, index, row, col)
        return Recalculated(self.name, values, time.perf_counter() - start)


# An empty cell that only carries a style (<c r="B4" s="11"/>, every yellow input cell a
# person has not typed into): IronCalc 0.9.1 reads it as the number 0, so `=B4<>""` is TRUE
# there and FALSE in Excel and LibreOffice. And IronCalc 0.9.1 looks a relationship's target
# up as written, so an absolute one ("/xl/comments/comment1.xml": openpyxl writes every cell
# comment so) is "not found in archive" and the whole workbook fails to load. IronCalc gets a
# copy without those cells and with every internal target made relative to its part.
def _for_ironcalc(path: Path, into: Path) -> Path:
    copy = into / path.name

    def strip(blocks: Iterator[bytes]) -> Iterator[bytes]:
        return (xlsx_cells.STYLED_EMPTY_CELL.sub(b"", block) for block in blocks)

    def rewrite(name: str) -> xlsx_cells.SheetRewrite | None:
        if _is_sheet(name):
            return strip
        if name.endswith(".rels"):
            return lambda blocks: (relative_targets(name, block) for block in blocks)
        return None

    xlsx_cells.copy_package(path, copy, rewrite)
    return copy


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


def _evaluated(ironcalc: Any, path: Path) -> Any:
    try:
        with tempfile.TemporaryDirectory(prefix="scm-xl-ironcalc-") as folder:
            model = ironcalc.load_from_xlsx(str(_for_ironcalc(path, Path(folder))), "en", "UTC")
        model.evaluate()
    except Exception as exc:
        raise engine_failed("ironcalc", path, exc) from exc
    except BaseException as exc:
        # A Rust panic arrives as pyo3's PanicException, which derives from BaseException only.
        if type(exc).__name__ != "PanicException":
            raise
        raise engine_failed("ironcalc", path, exc) from exc
    return model


def _value(ironcalc: Any, model: Any, sheet: int, row: int, col: int) -> CellValue:
    """One computed value. IronCalc gives a number as float, a logical as bool, a text or an
    error as str, an empty cell as None; only a str that starts with "#" needs the cell's type
    (an error, or a text that looks like one), so most cells cost one call."""
    value = model.get_cell_value(sheet, row, col)
    kind = type(value)
    if kind is float or kind is bool:
        return value
    if kind is str:
        if value.startswith("#") and model.get_cell_type(sheet, row, col) == ironcalc.CellType.ErrorValue:
            # The standard codes match the other engines'. IronCalc's own (#N/IMPL! for a function it
            # lacks, #CIRC!, #SPILL!) are kept as they are: each is a disagreement worth seeing.
            return CellError(value)
        return value or None
    if model.get_cell_type(sheet, row, col) == ironcalc.CellType.LogicalValue:
        return bool(value)
    return normalise(value)  # anything else as every engine reports it: empty as None
