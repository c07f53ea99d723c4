"""IronCalc: a spreadsheet engine written in Rust, on PyPI as `ironcalc`; no external program needed.

It loads the xlsx itself and evaluates every formula in one call; reading a cell back
costs a few microseconds. On scm-xl's per-row layout it agrees with LibreOffice and the
Python reference on every formula cell (benchmarks/results/engines.md).
Known limits: it reads an empty styled cell written as <c s=".." t="n"/> as 0, and it cannot
find a part named by an absolute relationship target (Target="/xl/comments/comment1.xml", as
openpyxl writes a cell comment's): both worked around in the copy it is given
(`ironcalc_worker.for_ironcalc`; `fill` writes the file it recalculates so at once,
`ironcalc_worker.prepare`). It computes
some array (CSE) idioms wrongly: ISNUMBER/ISTEXT applied to a range, COUNTIF/MATCH with a
range as criteria or lookup value, SMALL with an array k. Ordinary per-row formulas,
SUMPRODUCT, MMULT, MINVERSE, TRANSPOSE and scalar MINIFS/MAXIFS it computes right. When it
fails on a file, the error names the other engines installed (`base.engine_failed`).
"""

from __future__ import annotations

import contextlib
import importlib
import pickle
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

from scm_xl.engines import ironcalc_worker
from scm_xl.engines.base import Engine, Pending, Recalculated, engine_failed
from scm_xl.xlsx.values import CellGrid, FormulaCells, SheetView, TypedCell, cell_count
from scm_xl.errors import EngineError
from scm_xl.outputs import scratch_file

T = TypeVar("T")

UNAVAILABLE = "the ironcalc engine needs the ironcalc package: pip install 'ironcalc>=0.9.1,<0.10'"


class IronCalcEngine(Engine):
    name = "ironcalc"
    unavailable_message = UNAVAILABLE
    prepare = staticmethod(ironcalc_worker.prepare)

    def available(self) -> bool:
        try:  # a wheel exists for most platforms, not all (e.g. musl Linux)
            importlib.import_module("ironcalc")
        except ImportError:
            return False
        return True

    def recalculate(self, path: Path, cells: FormulaCells | None = None) -> Recalculated:
        return self.start(path, cells).result()

    def start(self, path: Path, cells: FormulaCells | None = None, *, prepared: bool = False) -> Pending:
        """IronCalc's values of every formula cell of `path` (`cells`: the formula cells, when the
        caller knows them). A workbook of WORKER_CELLS formula cells or more is evaluated in a
        process of its own (`ironcalc_worker`), started now; a smaller one here, when the result
        is asked for: starting a process would cost more than it saves."""
        self.require()
        path = Path(path)
        start = time.perf_counter()
        count = _cells_in(path, cells)
        if count < WORKER_CELLS:
            return Pending(lambda: self._recalculated(
                path, start, lambda: ironcalc_worker.evaluate(path, cells, prepared=prepared)))
        alone = count >= ALONE_CELLS
        worker = _Worker(path, cells, spool=alone, prepared=prepared)
        return self._pending(path, start, worker, alone=alone)

    def loads_apart(self, count: int) -> bool:
        """A workbook evaluated in the worker process, and not alone: a smaller one is evaluated
        here, a much larger one alone (ALONE_CELLS: while the worker loads it, the command's
        memory would not be the worker's)."""
        return WORKER_CELLS <= count < ALONE_CELLS

    def start_then(self, path: Path, cells: FormulaCells, *, prepared: bool = False) -> Pending:
        """The worker loads the workbook at once and evaluates it once `Pending.type_in` gives
        what was typed since: at 10,000 rows IronCalc's load (about 1.2 s) then overlaps `fill`'s
        analysis of the rows."""
        self.require()
        if not self.loads_apart(_counted(cells)):
            raise TypeError("ironcalc evaluates this workbook here or alone, not beside its writer")
        path = Path(path)
        start = time.perf_counter()
        worker = _Worker(path, cells, prepared=prepared, then=True)
        return self._pending(path, start, worker, alone=False, type_in=worker.type_in)

    def _pending(self, path: Path, start: float, worker: _Worker, *, alone: bool,
                 type_in: Callable[[Sequence[TypedCell], FormulaCells], None] | None = None) -> Pending:
        return Pending(lambda: self._recalculated(path, start, worker.values), worker.kill,
                       lambda title: self._answered(path, lambda: worker.sheet(title)), alone=alone,
                       working=worker.working, type_in=type_in)

    def _recalculated(self, path: Path, start: float, evaluate: Callable[[], CellGrid]) -> Recalculated:
        return Recalculated(self.name, self._answered(path, evaluate), time.perf_counter() - start)

    @staticmethod
    def _answered(path: Path, answer: Callable[[], T]) -> T:
        try:
            return answer()
        except ironcalc_worker.ReadFailed as exc:
            raise EngineError(str(exc)) from exc
        except ironcalc_worker.EngineFailed as exc:
            raise engine_failed("ironcalc", path, exc) from exc


# From about this many formula cells (a filled workbook of a thousand rows has 150,000) the
# evaluation runs in a worker process: it then overlaps the reference's computation, and its
# model's memory is the worker's. Below, the worker's start (about 0.1 s) is most of the gain.
WORKER_CELLS = 100_000
# From about this many (a workbook of 30,000 rows has 4 million) the worker's model and the
# command's reference would not fit in 2 GB together (at 100,000 rows: 1.3-1.5 GB and 1.2 GB):
# the worker writes its answer to a file no one else can open, and its values are taken once
# it has ended (`Pending.alone`), so the two are never held at once
# (benchmarks/results/fill_large.md). Below, they overlap: the reference is computed while
# IronCalc evaluates, and a sheet is stored while the next is read back.
ALONE_CELLS = 4_000_000
WORKER_BYTES_PER_CELL = 6  # a filled workbook's compressed bytes per formula cell, about (for a file given alone)


def _cells_in(path: Path, cells: FormulaCells | None) -> int:
    """How many formula cells `path` has: counted in `cells`, or estimated from the file's size."""
    if cells is not None:
        return _counted(cells)
    try:
        return path.stat().st_size // WORKER_BYTES_PER_CELL
    except OSError:  # a missing file: the worker's reading refuses it, as every engine does
        return 0


def _counted(cells: FormulaCells) -> int:
    return sum(cell_count(ref) for refs in cells.values() for ref in refs)


class _Worker:
    """`ironcalc_worker.main` in a process of its own, started at once: the request goes to its
    standard input now, and a thread takes its answer in as it comes, sheet by sheet: `sheet`
    waits for one sheet's values (`fill` stores them while the next is read back), `values` for
    them all. With `spool` the answer goes to a file and is taken in once the worker has ended
    (ALONE_CELLS). With `then`, the worker loads the workbook and waits for `type_in` before it
    evaluates (`IronCalcEngine.start_then`): its standard input stays open until then."""

    def __init__(self, path: Path, cells: FormulaCells | None, *, spool: bool = False, prepared: bool = False,
                 then: bool = False) -> None:
        request = pickle.dumps({"path": str(path), "cells": None if cells is None else dict(cells),
                                "prepared": prepared, "then": then}, protocol=pickle.HIGHEST_PROTOCOL)
        self.spool = scratch_file(path.parent, "scm-xl-ironcalc-") if spool else None  # beside the workbook
        try:
            self.process = subprocess.Popen([sys.executable, "-m", "scm_xl.engines.ironcalc_worker"],
                                            stdin=subprocess.PIPE, stderr=subprocess.PIPE,
                                            stdout=self.spool if self.spool is not None else subprocess.PIPE)
        except BaseException:
            if self.spool is not None:
                self.spool.close()
            raise
        self.grid = CellGrid()
        self.arrived: set[str] = set()
        self.failure: Exception | None = None
        self.finished = False
        self.changed = threading.Condition()
        stdin = self.process.stdin
        assert stdin is not None
        try:
            stdin.write(request)  # the worker reads it at once; its answers come once it has evaluated
            if then:
                stdin.flush()
            else:
                stdin.close()
        except BrokenPipeError:  # the worker died at its start: the reader says so
            pass
        except BaseException:
            self.process.kill()
            self.process.wait()
            raise
        self.stdin = stdin if then else None
        self.process.stdin = None
        self.reader = threading.Thread(target=self._read, name="scm-xl-ironcalc-answers", daemon=True)
        self.reader.start()

    def type_in(self, typed: Sequence[TypedCell], cells: FormulaCells) -> None:
        """Send the worker what was typed since the file was saved, and the formula cells to read
        back; it evaluates once it has read them. Written by a thread of its own: the worker reads
        them only once it has loaded the workbook, and more than a pipe's buffer would hold the
        command until then."""
        stdin, self.stdin = self.stdin, None
        if stdin is None:
            raise RuntimeError("the worker was given its typed cells already, or was not asked to wait for them")
        message = pickle.dumps({"typed": list(typed), "cells": dict(cells)}, protocol=pickle.HIGHEST_PROTOCOL)

        def write() -> None:
            try:
                stdin.write(message)
                stdin.close()
            except (BrokenPipeError, OSError, ValueError):  # the worker ended (the reader says why), or was killed
                pass

        threading.Thread(target=write, name="scm-xl-ironcalc-typed", daemon=True).start()

    def _read(self) -> None:
        stderr = self.process.stderr
        assert stderr is not None
        errors: list[bytes] = []
        drain = threading.Thread(target=lambda: errors.append(stderr.read()), daemon=True)  # never a full pipe
        drain.start()
        if self.spool is not None:  # the answer is read once the worker has ended
            self.process.wait()
            self.spool.seek(0)
        stdout = self.spool if self.spool is not None else self.process.stdout
        assert stdout is not None
        failure: Exception | None = None
        try:
            while True:
                try:
                    answer = pickle.load(stdout)
                except Exception:  # the end of its output, or a worker killed half-way through an answer
                    answer = None
                if not isinstance(answer, dict):
                    self.process.wait()
                    drain.join()
                    tail = b"".join(errors).decode("utf-8", "replace").strip().splitlines()[-1:] or [
                        f"exit status {self.process.returncode}"]
                    failure = ironcalc_worker.EngineFailed(f"the worker process ended without an answer ({tail[0]})")
                    break
                if "sheet" in answer:
                    with self.changed:
                        self.grid.put_sheet(answer["sheet"], answer["columns"])
                        self.arrived.add(answer["sheet"])
                        self.changed.notify_all()
                    continue
                if "read_failed" in answer:
                    failure = ironcalc_worker.ReadFailed(answer["read_failed"])
                elif "engine_failed" in answer:
                    failure = ironcalc_worker.EngineFailed(answer["engine_failed"])
                break
        finally:
            with self.changed:
                self.failure, self.finished = failure, True
                self.changed.notify_all()
            self.process.wait()
            drain.join()
            stdout.close()
            stderr.close()

    def _wait(self, title: str | None) -> None:
        """Until sheet `title` is in (None: every sheet), or the answer has ended; raises its failure."""
        try:
            with self.changed:
                while not self.finished and (title is None or title not in self.arrived):
                    self.changed.wait(0.5)
        except BaseException:  # interrupted: the worker goes with the command
            self.kill()
            raise
        if self.failure is not None and (title is None or title not in self.arrived):
            raise self.failure

    def working(self) -> bool:
        """Whether the worker is still at work: no sheet's values are in yet, and it has not ended."""
        with self.changed:
            return not self.arrived and not self.finished

    def sheet(self, title: str) -> SheetView:
        """The values of sheet `title` (none: it has no formula cell), once they are in."""
        self._wait(title)
        return self.grid.sheet_view(title)

    def values(self) -> CellGrid:
        self._wait(None)
        return self.grid

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.reader.join()
        if self.stdin is not None:  # never given its typed cells
            with contextlib.suppress(OSError):
                self.stdin.close()
            self.stdin = None
