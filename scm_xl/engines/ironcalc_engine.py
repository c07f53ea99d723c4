"""IronCalc: a spreadsheet engine written in Rust, on PyPI as `ironcalc`; no external program needed.

It loads the xlsx itself and evaluates every formula in one call; reading a cell back
costs a few microseconds. On scm-xl's per-row layout it agrees with LibreOffice and the
Python reference on every formula cell (benchmarks/results/engines.md).
Known limits: it reads an empty styled cell written as <c s=".." t="n"/> as 0, and it cannot
find a part named by an absolute relationship target (Target="/xl/comments/comment1.xml", as
openpyxl writes a cell comment's): both worked around in the copy it is given
(`ironcalc_worker.for_ironcalc`). It computes
some array (CSE) idioms wrongly: ISNUMBER/ISTEXT applied to a range, COUNTIF/MATCH with a
range as criteria or lookup value, SMALL with an array k. Ordinary per-row formulas,
SUMPRODUCT, MMULT, MINVERSE, TRANSPOSE and scalar MINIFS/MAXIFS it computes right. When it
fails on a file, the error names the other engines installed (`base.engine_failed`).
"""

from __future__ import annotations

import importlib
import pickle
import subprocess
import sys
import time
from pathlib import Path

from scm_xl.engines import ironcalc_worker
from scm_xl.engines.base import Engine, Recalculated, engine_failed
from scm_xl.engines.ironcalc_worker import FormulaCells
from scm_xl.engines.values import CellGrid, cell_position
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

    def recalculate(self, path: Path, cells: FormulaCells | None = None) -> Recalculated:
        """IronCalc's values of every formula cell of `path` (`cells`: the formula cells, when the
        caller knows them). A workbook of WORKER_CELLS formula cells or more is evaluated in a
        process of its own (`ironcalc_worker`); a smaller one here, where starting a process would
        cost more than it saves."""
        self.require()
        path = Path(path)
        start = time.perf_counter()
        try:
            size = path.stat().st_size  # a missing file: the worker's reading refuses it, as every engine does
        except OSError:
            size = 0
        own_process = (sum(_count(ref) for refs in cells.values() for ref in refs) if cells is not None
                       else size // WORKER_BYTES_PER_CELL) >= WORKER_CELLS
        try:
            values = _in_worker(path, cells) if own_process else ironcalc_worker.evaluate(path, cells)
        except ironcalc_worker.ReadFailed as exc:
            raise EngineError(str(exc)) from exc
        except ironcalc_worker.EngineFailed as exc:
            raise engine_failed("ironcalc", path, exc) from exc
        return Recalculated(self.name, values, time.perf_counter() - start)


# From about this many formula cells (a filled workbook of a thousand rows has 150,000) the
# evaluation runs in a worker process: it then overlaps the reference's computation, and its
# model's memory is the worker's. Below, the worker's start (about 0.1 s) is most of the gain.
WORKER_CELLS = 100_000
WORKER_BYTES_PER_CELL = 6  # a filled workbook's compressed bytes per formula cell, about (for a file given alone)


def _count(ref: str) -> int:
    if ":" not in ref:
        return 1
    first, last = ref.split(":")
    (top, left), (bottom, right) = cell_position(first), cell_position(last)
    return (bottom - top + 1) * (right - left + 1)


def _in_worker(path: Path, cells: FormulaCells | None) -> CellGrid:
    """`ironcalc_worker.evaluate` in a process of its own."""
    request = pickle.dumps({"path": str(path), "cells": None if cells is None else dict(cells)},
                           protocol=pickle.HIGHEST_PROTOCOL)
    process = subprocess.Popen([sys.executable, "-m", "scm_xl.engines.ironcalc_worker"], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        out, err = process.communicate(request)
    except BaseException:  # interrupted: the worker goes with the command
        process.kill()
        process.wait()
        raise
    try:
        answer = pickle.loads(out) if out else None
    except Exception:  # a worker killed half-way through its answer
        answer = None
    if not isinstance(answer, dict):
        tail = err.decode("utf-8", "replace").strip().splitlines()[-1:] or [f"exit status {process.returncode}"]
        raise ironcalc_worker.EngineFailed(f"the worker process ended without an answer ({tail[0]})")
    if "read_failed" in answer:
        raise ironcalc_worker.ReadFailed(answer["read_failed"])
    if "engine_failed" in answer:
        raise ironcalc_worker.EngineFailed(answer["engine_failed"])
    values: CellGrid = answer["values"]
    return values
