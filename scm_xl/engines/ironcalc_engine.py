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
from collections.abc import Callable
from pathlib import Path

from scm_xl.engines import ironcalc_worker
from scm_xl.engines.base import Engine, Pending, Recalculated, engine_failed
from scm_xl.xlsx.values import CellGrid, FormulaCells, cell_position
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
        return self.start(path, cells).result()

    def start(self, path: Path, cells: FormulaCells | None = None) -> Pending:
        """IronCalc's values of every formula cell of `path` (`cells`: the formula cells, when the
        caller knows them). A workbook of WORKER_CELLS formula cells or more is evaluated in a
        process of its own (`ironcalc_worker`), started now; a smaller one here, when the result
        is asked for: starting a process would cost more than it saves."""
        self.require()
        path = Path(path)
        start = time.perf_counter()
        try:
            size = path.stat().st_size  # a missing file: the worker's reading refuses it, as every engine does
        except OSError:
            size = 0
        own_process = (sum(_count(ref) for refs in cells.values() for ref in refs) if cells is not None
                       else size // WORKER_BYTES_PER_CELL) >= WORKER_CELLS
        if not own_process:
            return Pending(lambda: self._recalculated(path, start, lambda: ironcalc_worker.evaluate(path, cells)))
        worker = _Worker(path, cells)
        return Pending(lambda: self._recalculated(path, start, worker.values), worker.kill)

    def _recalculated(self, path: Path, start: float, evaluate: Callable[[], CellGrid]) -> Recalculated:
        try:
            values = evaluate()
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


class _Worker:
    """`ironcalc_worker.evaluate` in a process of its own, started at once: the request goes to
    its standard input now, `values` waits for the answer on its standard output."""

    def __init__(self, path: Path, cells: FormulaCells | None) -> None:
        request = pickle.dumps({"path": str(path), "cells": None if cells is None else dict(cells)},
                               protocol=pickle.HIGHEST_PROTOCOL)
        self.process = subprocess.Popen([sys.executable, "-m", "scm_xl.engines.ironcalc_worker"],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        stdin = self.process.stdin
        assert stdin is not None
        try:
            stdin.write(request)  # the worker reads it at once; its answer comes only at its end
            stdin.close()
        except BrokenPipeError:  # the worker died at its start: `values` says so
            pass
        except BaseException:
            self.kill()
            raise
        self.process.stdin = None  # written and closed: communicate() only reads

    def values(self) -> CellGrid:
        try:
            out, err = self.process.communicate()
        except BaseException:  # interrupted: the worker goes with the command
            self.kill()
            raise
        try:
            answer = pickle.loads(out) if out else None
        except Exception:  # a worker killed half-way through its answer
            answer = None
        if not isinstance(answer, dict):
            tail = err.decode("utf-8", "replace").strip().splitlines()[-1:] or [
                f"exit status {self.process.returncode}"]
            raise ironcalc_worker.EngineFailed(f"the worker process ended without an answer ({tail[0]})")
        if "read_failed" in answer:
            raise ironcalc_worker.ReadFailed(answer["read_failed"])
        if "engine_failed" in answer:
            raise ironcalc_worker.EngineFailed(answer["engine_failed"])
        values: CellGrid = answer["values"]
        return values

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.communicate()
