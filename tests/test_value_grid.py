"""The value grid (xlsx.values.CellGrid), IronCalc in its worker process, and the formula
cells fill names to the engine instead of having it read them from the file."""

from __future__ import annotations

import io
import os
import pickle
import re
import signal
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from scm_xl.engines import CellError, IronCalcEngine, ironcalc_engine  # noqa: F401
from scm_xl.engines.base import Pending, Recalculated, formula_refs
from scm_xl.xlsx.values import ABSENT, CellGrid, cell_position
from scm_xl.errors import EngineError
from scm_xl.verify import NOT_A_FORMULA, compare
from scm_xl.workbook.registry import build_workbook
from scm_xl.workbook.layout import Layout
from support.engines import EXPECTED, write_workbook
from support.paths import ARTICLE


def test_the_grid_is_a_mapping_keyed_by_sheet_and_address() -> None:
    grid = CellGrid()
    grid[("S", "B3")] = 1.5
    grid[("S", "B1")] = "text"
    grid[("S", "A2")] = None  # a value (an empty result), not an absence
    grid[("T", "AB12")] = CellError("#N/A")
    assert len(grid) == 4
    assert dict(grid.items()) == {("S", "B3"): 1.5, ("S", "B1"): "text", ("S", "A2"): None,
                                  ("T", "AB12"): CellError("#N/A")}
    assert set(grid) == set(dict(grid.items()))
    assert ("S", "A2") in grid and ("S", "B2") not in grid and ("U", "A1") not in grid
    with pytest.raises(KeyError):
        grid[("S", "B2")]
    assert grid.get(("S", "B2"), "none") == "none"
    grid[("S", "B3")] = 2.5  # replaced, not counted twice
    del grid[("S", "B1")]
    assert len(grid) == 3 and grid[("S", "B3")] == 2.5 and ("S", "B1") not in grid
    assert grid.lookup("S", 2, 1) is None and grid.lookup("S", 9, 1) is ABSENT


def test_a_grid_survives_pickling_with_its_absent_cells() -> None:
    grid = CellGrid({("S", "B1"): 1.0, ("S", "B4"): "x"})  # B2 and B3 held as ABSENT in the column
    copy = pickle.loads(pickle.dumps(grid))
    assert dict(copy.items()) == dict(grid.items()) and len(copy) == 2
    assert copy.lookup("S", 2, 2) is ABSENT


def test_cell_positions_are_read_and_bad_ones_refused() -> None:
    assert cell_position("A1") == (1, 1) and cell_position("XFD1048576") == (1048576, 16384)
    for bad in ("1", "A", "a1", "XFE1", "ABCD1", "", "A1:B2"):
        with pytest.raises(ValueError):
            cell_position(bad)


def _recalculated(values: dict[tuple[str, str], object]) -> Recalculated:
    return Recalculated("test", values, 0.0)  # type: ignore[arg-type]


@pytest.mark.parametrize("grids", [False, True])
def test_comparing_grids_finds_what_comparing_dicts_finds(grids: bool) -> None:
    expected = {("S", "A1"): 1.0, ("S", "A2"): 1.0, ("S", "A3"): "x", ("S", "A4"): None, ("S", "A5"): 2.0,
                ("S", "B1"): True, ("S", "B2"): CellError("#DIV/0!"), ("Other", "A1"): 5.0}
    actual = {("S", "A1"): 1.0 + 1e-12, ("S", "A2"): 1.1, ("S", "A3"): "x", ("S", "A4"): "",
              ("S", "B1"): 1.0, ("S", "B2"): CellError("#DIV/0!"), ("S", "C9"): 3.0, ("Other", "A1"): 6.0}
    exp = CellGrid(expected) if grids else expected
    act = CellGrid(actual) if grids else actual
    result = compare(exp, _recalculated(act), {"S"})  # type: ignore[arg-type]
    assert [(m.cell, m.expected, m.actual) for m in result.mismatches] == [
        ("A2", 1.0, 1.1), ("A5", 2.0, NOT_A_FORMULA)]
    assert result.typed_over[0].cell == "A5" and result.unexpected == ["'S'!C9"]
    assert result.cells_compared == 7  # A1-A5, B1, B2; C9 has no reference value; Other is not compared


@pytest.mark.parametrize("grids", [False, True])
def test_a_column_equal_to_the_reference_counts_its_cells_and_no_more(grids: bool) -> None:
    """Columns the engine gives exactly as the reference (compared whole, as most are): each cell
    with a value counted once, a gap in both not counted, a column shorter or starting lower than
    the reference's compared over its own rows; one differing cell is still found."""
    expected = {("S", "D1"): 1.0, ("S", "D2"): "two", ("S", "D4"): None,
                ("S", "E1"): 5.0, ("S", "E2"): 6.0, ("S", "E3"): 7.0,
                ("S", "F1"): 1.0, ("S", "F2"): 2.0, ("S", "F3"): 3.0}
    actual = {("S", "D1"): 1.0, ("S", "D2"): "two", ("S", "D4"): None,  # D3 absent in both
              ("S", "E2"): 6.0, ("S", "E3"): 7.0,  # from row 2: E1 typed over
              ("S", "F1"): 1.0, ("S", "F2"): 2.5, ("S", "F3"): 3.0}
    exp = CellGrid(expected) if grids else expected
    act = CellGrid(actual) if grids else actual
    result = compare(exp, _recalculated(act), {"S"})  # type: ignore[arg-type]
    assert [(m.cell, m.expected, m.actual) for m in result.mismatches] == [
        ("E1", 5.0, NOT_A_FORMULA), ("F2", 2.0, 2.5)]
    assert result.cells_compared == 9 and result.unexpected == []


def test_known_formula_cells_are_the_cells_in_the_file(tmp_path: Path) -> None:
    """What fill names to the engine is every formula cell the saved file holds, no more."""
    layout = Layout(lang="en", rows=40)
    built = build_workbook(layout)
    path = tmp_path / "built.xlsx"
    fills = built.save(path)
    known = built.formula_cells(fills)
    parsed = formula_refs(path)

    def expand(refs: dict[str, list[str]]) -> set[tuple[str, int, int]]:
        out = set()
        for sheet, sheet_refs in refs.items():
            for ref in sheet_refs:
                first, _, last = ref.partition(":")
                (top, left), (bottom, right) = cell_position(first), cell_position(last or first)
                out |= {(sheet, row, col) for row in range(top, bottom + 1) for col in range(left, right + 1)}
        return out

    assert expand(known) == expand(parsed)
    assert sum(":" in ref for refs in known.values() for ref in refs) > 50  # the pending columns, as ranges


@pytest.fixture
def in_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    workers_from_now(monkeypatch)  # every workbook evaluated in the worker


def workers_from_now(monkeypatch: pytest.MonkeyPatch) -> list[ironcalc_engine._Worker]:
    """From now on every workbook is evaluated in the worker process; the list gets each worker
    started."""
    monkeypatch.setattr(ironcalc_engine, "WORKER_CELLS", 1)
    started: list[ironcalc_engine._Worker] = []
    real = ironcalc_engine._Worker

    def counted(*args: object, **kwargs: object) -> ironcalc_engine._Worker:
        started.append(real(*args, **kwargs))  # type: ignore[arg-type]
        return started[-1]

    monkeypatch.setattr(ironcalc_engine, "_Worker", counted)
    return started


def test_the_worker_process_computes_what_ironcalc_computes_here(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    book = write_workbook(tmp_path / "engines.xlsx")
    here = IronCalcEngine().recalculate(book)
    called = workers_from_now(monkeypatch)
    there = IronCalcEngine().recalculate(book)
    assert called and isinstance(there.values, CellGrid)
    assert dict(there.values.items()) == dict(here.values.items())
    assert set(there.values) == set(EXPECTED)  # every formula cell (some computed wrongly: array idioms)
    assert there.values[("Calc", "A4")] == CellError("#DIV/0!") and there.values[("Calc", "A11")] is None


def test_the_worker_answers_sheet_by_sheet_in_the_workbook_order(tmp_path: Path) -> None:
    """The worker's answer is one pickle per sheet, in the order of the cells it was given, then
    the end: `fill` stores a sheet while the worker reads the next back."""
    book = write_workbook(tmp_path / "engines.xlsx")
    cells = formula_refs(book)
    request = pickle.dumps({"path": str(book), "cells": dict(reversed(list(cells.items())))})
    out = subprocess.run([sys.executable, "-m", "scm_xl.engines.ironcalc_worker"], input=request,
                         capture_output=True, check=True).stdout
    answers = []
    with io.BytesIO(out) as stream:
        while stream.tell() < len(out):
            answers.append(pickle.load(stream))
    assert [answer.get("sheet") for answer in answers] == [*reversed(list(cells)), None]
    assert answers[-1] == {"done": True}
    grid = CellGrid()
    for answer in answers[:-1]:
        grid.put_sheet(answer["sheet"], answer["columns"])
    assert dict(grid.items()) == dict(IronCalcEngine().recalculate(book).values.items())


@pytest.mark.parametrize("worker", [True, False], ids=["in its worker", "in the command"])
def test_what_ironcalc_prints_goes_to_the_standard_error(tmp_path: Path, worker: bool,
                                                         monkeypatch: pytest.MonkeyPatch,
                                                         capfd: pytest.CaptureFixture[str]) -> None:
    """IronCalc prints a line to the standard output for a formula cell saved without a value
    (<c><f>..</f></c>, as some writers save one): the worker's answers go there (the line broke
    them), and so does a command's `--json`. It goes to the standard error instead."""
    if worker:
        monkeypatch.setattr(ironcalc_engine, "WORKER_CELLS", 1)
    book = write_workbook(tmp_path / "engines.xlsx")
    bare = tmp_path / "bare.xlsx"
    with zipfile.ZipFile(book) as source, zipfile.ZipFile(bare, "w") as copy:
        for info in source.infolist():
            data = source.read(info)
            if info.filename == "xl/worksheets/sheet2.xml":
                data, found = re.subn(rb'(<c r="A6"[^>]*><f>[^<]*</f>)<v>[^<]*</v>', rb"\1", data)
                assert found == 1
            copy.writestr(info, data)
    values = IronCalcEngine().recalculate(bare).values
    assert values[("Calc", "A6")] == "total=47" and dict(values.items()) == dict(IronCalcEngine().recalculate(book)
                                                                                 .values.items())
    out, err = capfd.readouterr()
    assert out == "" and ("Calc!A6" in err) is not worker  # the worker's standard error is its own


def test_a_fill_stores_the_same_workbook_from_the_worker_sheet_by_sheet(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """`fill` stores each sheet's values as the worker sends it: the sheets it writes so are byte
    for byte those it writes from IronCalc in its own process, all at once."""
    from scm_xl.workbook.fill import fill

    here = fill(ARTICLE, output=tmp_path / "here.xlsx", lang="en")
    worker_class = ironcalc_engine._Worker
    given: list[int] = []
    real_type_in = worker_class.type_in

    def type_in(worker: ironcalc_engine._Worker, typed: list[object], cells: object) -> None:
        given.append(len(typed))
        real_type_in(worker, typed, cells)  # type: ignore[arg-type]

    monkeypatch.setattr(worker_class, "type_in", type_in)
    started = workers_from_now(monkeypatch)
    there = fill(ARTICLE, output=tmp_path / "there.xlsx", lang="en")
    assert started and here.verification.ok and there.verification.ok
    # the worker loaded the file saved before the analysis, then took the cells it typed (the
    # fitted knee, the charts' groups and rows): the file is the same as if it had waited
    assert len(started) == 1 and len(given) == 1 and given[0] > 0
    with zipfile.ZipFile(tmp_path / "here.xlsx") as one, zipfile.ZipFile(tmp_path / "there.xlsx") as two:
        sheets = [name for name in one.namelist() if name.startswith("xl/worksheets/sheet")]
        assert len(sheets) > 10 and sheets == [name for name in two.namelist() if name in sheets]
        assert all(one.read(name) == two.read(name) for name in sheets)
        assert one.read("xl/styles.xml") == two.read("xl/styles.xml")


def test_a_workbook_too_large_to_share_the_memory_is_evaluated_alone(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """From ALONE_CELLS formula cells the worker writes its answer to a file without a name and
    `fill` takes its values once the worker has ended, before it computes the reference: the two
    never hold their memory at once. The workbook is byte for byte the one the overlapping way
    writes, and nothing is left beside it."""
    from scm_xl.workbook import fill as fill_module

    overlapped = tmp_path / "overlapped"
    alone = tmp_path / "alone"
    overlapped.mkdir()
    alone.mkdir()
    workers = workers_from_now(monkeypatch)
    fill_module.fill(ARTICLE, output=overlapped / "book.xlsx", lang="en")
    assert len(workers) == 1 and workers[0].spool is None
    workers.clear()
    monkeypatch.setattr(ironcalc_engine, "ALONE_CELLS", 1)
    ended_first: list[bool] = []
    real_expected = fill_module.expected_cells

    def expected(*args: object, **kwargs: object) -> object:
        ended_first.append(all(worker.process.poll() is not None for worker in workers))
        return real_expected(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(fill_module, "expected_cells", expected)
    said: list[str] = []
    report = fill_module.fill(ARTICLE, output=alone / "book.xlsx", lang="en", progress=said.append)
    assert report.verification.ok and len(workers) == 1 and workers[0].spool is not None
    assert ended_first == [True]
    steps = [str(line).split(" (")[0] for line in said]
    assert steps.index("compute the reference") == steps.index("recalculate with ironcalc") + 1
    assert sorted(path.name for path in alone.iterdir()) == ["book.xlsx"]
    with zipfile.ZipFile(overlapped / "book.xlsx") as one, zipfile.ZipFile(alone / "book.xlsx") as two:
        sheets = [name for name in one.namelist() if name.startswith("xl/worksheets/sheet")]
        assert len(sheets) > 10 and all(one.read(name) == two.read(name) for name in sheets)


def test_a_worker_writing_its_answer_to_a_file_and_interrupted_is_an_engine_error(
        tmp_path: Path, in_worker: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ironcalc_engine, "ALONE_CELLS", 1)
    book = write_workbook(tmp_path / "engines.xlsx")
    pending = IronCalcEngine().start(book)
    assert pending.alone
    pending.cancel()
    with pytest.raises(EngineError, match="ended without an answer"):
        pending.result()
    assert sorted(path.name for path in tmp_path.iterdir()) == ["engines.xlsx"]


def test_each_sheet_is_given_as_it_comes_and_a_failure_after_some_is_an_engine_error(
        tmp_path: Path, in_worker: None) -> None:
    """`Pending.sheet` gives a sheet's values once the worker has sent them; a failure the worker
    meets later (here, a sheet it cannot find) is the answer for every sheet not sent yet and for
    the whole."""
    book = write_workbook(tmp_path / "engines.xlsx")
    cells = {"Calc": ["A1", "A6"], "No such sheet": ["A1"]}
    pending = IronCalcEngine().start(book, cells)
    calc = pending.sheet("Calc")
    assert dict(calc.items()) == {(1, 1): 47.0, (6, 1): "total=47"}
    with pytest.raises(EngineError, match="did not load sheet 'No such sheet'"):
        pending.sheet("No such sheet")
    with pytest.raises(EngineError, match="did not load sheet 'No such sheet'"):
        pending.result()


def test_an_engine_that_answers_at_once_gives_a_sheet_from_its_one_answer(tmp_path: Path) -> None:
    """Below WORKER_CELLS (and on every other engine) a sheet's values come from the one
    recalculation, which runs once however many sheets are asked for."""
    book = write_workbook(tmp_path / "engines.xlsx")
    pending = IronCalcEngine().start(book)
    whole = pending.result()
    assert pending.result() is whole
    assert dict(pending.sheet("Calc").items()) == {cell_position(ref): value for (sheet, ref), value
                                                   in whole.values.items() if sheet == "Calc"}


def test_a_sheet_of_an_engine_that_answers_with_a_dict_comes_from_one_recalculation() -> None:
    """LibreOffice, Gnumeric and the formulas engine answer with a dict keyed (sheet, "A1"): it is
    held by sheet and column once, however many sheets are asked for, and recalculated once."""
    runs = []

    def recalculate() -> Recalculated:
        runs.append(1)
        return Recalculated("dict", {("S", "B2"): 1.5, ("S", "A10"): "x", ("T", "C1"): None}, 0.0)

    pending = Pending(recalculate)
    assert dict(pending.sheet("S").items()) == {(2, 2): 1.5, (10, 1): "x"}
    assert dict(pending.sheet("T").items()) == {(1, 3): None} and dict(pending.sheet("U").items()) == {}
    assert pending.result().values[("S", "B2")] == 1.5 and runs == [1]


def test_a_workbook_the_worker_cannot_read_is_an_engine_error(tmp_path: Path, in_worker: None) -> None:
    broken = tmp_path / "broken.xlsx"
    broken.write_bytes(b"PK\x03\x04 not a zip at all" * 200)
    with pytest.raises(EngineError, match="cannot read workbook"):
        IronCalcEngine().recalculate(broken)


def test_an_interrupted_fill_ends_its_worker(tmp_path: Path, in_worker: None) -> None:
    """`cancel` (what an interrupted fill calls) ends the worker process at once."""
    book = write_workbook(tmp_path / "engines.xlsx")
    pending = IronCalcEngine().start(book)
    pending.cancel()
    with pytest.raises(EngineError, match="ended without an answer"):
        pending.result()


def test_a_worker_that_dies_is_an_engine_error_naming_the_other_engines(tmp_path: Path, in_worker: None,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    book = write_workbook(tmp_path / "engines.xlsx")
    real_popen = ironcalc_engine.subprocess.Popen

    def dying(*args: object, **kwargs: object) -> object:  # the worker is killed as it starts
        process = real_popen(*args, **kwargs)  # type: ignore[call-overload]
        os.kill(process.pid, signal.SIGKILL)
        return process

    monkeypatch.setattr(ironcalc_engine.subprocess, "Popen", dying)
    with pytest.raises(EngineError, match="ironcalc failed on .*ended without an answer.*--engine"):
        IronCalcEngine().recalculate(book)


def test_formula_cells_down_a_column_are_listed_as_runs(tmp_path: Path) -> None:
    """`formula_refs` lists a run of plain formulas down a column as one range (a 100,000-row
    workbook's 13 million cells were a gigabyte as one string each); a gap, a value typed over a
    formula and an array formula's range end a run or stand alone."""
    from scm_xl.xlsx.package import formula_refs as sheet_refs

    rows = []
    for row in range(1, 8):
        cells = [f'<c r="A{row}"><f>1</f><v>1</v></c>' if row != 4 else '<c r="A4"><v>9</v></c>',
                 f'<c r="B{row}"><f>2</f><v>2</v></c>' if row in (2, 3, 6) else "",
                 '<c r="C5"><f t="array" ref="C5:C7">ROW(A1:A3)</f><v>5</v></c>' if row == 5 else ""]
        rows.append(f'<row r="{row}">{"".join(cells)}</row>')
    xml = f'<worksheet><sheetData>{"".join(rows)}</sheetData></worksheet>'.encode()
    book = tmp_path / "runs.zip"
    with zipfile.ZipFile(book, "w") as out:
        out.writestr("xl/worksheets/sheet1.xml", xml)
    with zipfile.ZipFile(book) as read:
        refs = sheet_refs(read, "xl/worksheets/sheet1.xml")
    assert sorted(refs) == ["A1:A3", "A5:A7", "B2:B3", "B6", "C5:C7"]


def test_what_was_typed_since_a_save_is_listed_as_values_and_formulas() -> None:
    """`TypedSince` lists the values and formulas typed into a workbook since it was taken, as an
    engine that loaded the file saved then is given them; a text that reads like a formula stays a
    text. Anything more than typing (a cell emptied, a sheet moved, a defined name, an array
    formula) gives None: the engine must load the file as it ends up."""
    import openpyxl
    from openpyxl.workbook.defined_name import DefinedName
    from openpyxl.worksheet.formula import ArrayFormula

    from scm_xl.workbook.stamp import TypedSince
    from scm_xl.workbook.styles import write_text
    from scm_xl.xlsx.values import FormulaText

    def book() -> openpyxl.Workbook:
        wb = openpyxl.Workbook()
        wb.active.title = "S"
        wb["S"]["A1"] = 1.5
        wb["S"]["A2"] = "=A1*2"
        wb.create_sheet("T")
        return wb

    wb = book()
    since = TypedSince(wb)
    wb["S"]["A1"] = 2.5
    wb["S"]["B1"] = True
    write_text(wb["S"]["B2"], "=1+1")
    wb["S"]["B3"] = "=A1*3"
    wb["T"]["C4"] = 7
    _ = wb["T"]["D9"].value  # looked at, not typed into
    assert since.typed() == [("S", 1, 1, 2.5), ("S", 1, 2, True), ("S", 2, 2, "=1+1"),
                             ("S", 3, 2, FormulaText("=A1*3")), ("T", 4, 3, 7)]
    assert TypedSince(wb).typed() == []

    for change in (lambda wb: setattr(wb["S"]["A1"], "value", None),
                   lambda wb: wb.move_sheet("T", -1),
                   lambda wb: wb.defined_names.add(DefinedName("Rate", attr_text="S!$A$1")),
                   lambda wb: wb["S"].__setitem__("C1", ArrayFormula("C1:C2", "=A1:A2*2"))):
        wb = book()
        since = TypedSince(wb)
        change(wb)
        assert since.typed() is None


def test_the_worker_evaluates_what_was_typed_after_it_loaded_the_file(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """`start_then`: the worker loads the file at once and evaluates once it is given what was
    typed since (values, a text that reads like a formula, a formula) and the formula cells to
    read back."""
    from scm_xl.xlsx.values import FormulaText

    book = write_workbook(tmp_path / "engines.xlsx")
    cells = formula_refs(book)
    engine = IronCalcEngine()
    count = ironcalc_engine._counted(cells)
    assert not engine.loads_apart(count)  # a small workbook is evaluated in the command
    started = workers_from_now(monkeypatch)
    assert engine.loads_apart(count)
    pending = engine.start_then(book, cells)
    assert started and pending.working()
    typed = [("Calc", 20, 1, 5.0), ("Calc", 20, 2, "=1+1"), ("Calc", 20, 3, FormulaText("=A20*A1"))]
    pending.type_in(typed, {**cells, "Calc": [*cells["Calc"], "C20"]})
    values = pending.result().values
    assert values[("Calc", "C20")] == 5.0 * 47
    whole = dict(values.items())
    del whole[("Calc", "C20")]
    assert whole == dict(IronCalcEngine().recalculate(book).values.items())
    with pytest.raises(TypeError):
        IronCalcEngine().start(book).type_in(typed, cells)


def test_a_persons_workbook_is_filled_the_same_with_the_engine_started_early(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Filling a person's workbook puts their own sheet back among scm-xl's before the engine's
    input is saved, so the engine started early evaluates it as it ends up: one worker, and the
    workbook one single save writes."""
    import openpyxl

    from scm_xl.workbook.fill import fill

    fill(ARTICLE, output=tmp_path / "book.xlsx", lang="en")
    wb = openpyxl.load_workbook(tmp_path / "book.xlsx")
    mine = wb.create_sheet("Mine", 1)
    mine["A1"] = "my own notes"
    wb.save(tmp_path / "book.xlsx")
    here = fill(ARTICLE, workbook=tmp_path / "book.xlsx", output=tmp_path / "here.xlsx")
    started = workers_from_now(monkeypatch)
    there = fill(ARTICLE, workbook=tmp_path / "book.xlsx", output=tmp_path / "there.xlsx")
    assert here.verification.ok and there.verification.ok and len(started) == 1
    assert openpyxl.load_workbook(tmp_path / "there.xlsx", read_only=True).sheetnames[1] == "Mine"
    with zipfile.ZipFile(tmp_path / "here.xlsx") as one, zipfile.ZipFile(tmp_path / "there.xlsx") as two:
        sheets = [name for name in one.namelist() if name.startswith("xl/worksheets/sheet")]
        assert len(sheets) > 10 and all(one.read(name) == two.read(name) for name in sheets)
        assert one.read("xl/styles.xml") == two.read("xl/styles.xml")


def test_a_fill_that_changes_more_than_cells_restarts_its_early_engine(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the analysis changes more than typed cells (here a defined name, added where the
    print areas are set), the engine that loaded the file saved before is given up and another
    evaluates the file as it ends up: verified, and the same workbook as without the early start."""
    from openpyxl.workbook.defined_name import DefinedName

    from scm_xl.workbook import fill as fill_module

    real_trim = fill_module.trim_print_areas

    def trim_and_name(wb: object, *args: object) -> None:
        real_trim(wb, *args)  # type: ignore[arg-type]
        wb.defined_names.add(DefinedName("Mine", attr_text="'Summary'!$A$1"))  # type: ignore[attr-defined]

    monkeypatch.setattr(fill_module, "trim_print_areas", trim_and_name)
    here = fill_module.fill(ARTICLE, output=tmp_path / "here.xlsx", lang="en")
    started = workers_from_now(monkeypatch)
    there = fill_module.fill(ARTICLE, output=tmp_path / "there.xlsx", lang="en")
    assert here.verification.ok and there.verification.ok
    assert len(started) == 2 and started[0].process.returncode != 0  # the first was killed
    with zipfile.ZipFile(tmp_path / "here.xlsx") as one, zipfile.ZipFile(tmp_path / "there.xlsx") as two:
        sheets = [name for name in one.namelist() if name.startswith("xl/worksheets/sheet")]
        assert len(sheets) > 10 and all(one.read(name) == two.read(name) for name in sheets)
        assert one.read("xl/styles.xml") == two.read("xl/styles.xml")
        assert b"Mine" in two.read("xl/workbook.xml")


def test_a_built_workbook_counts_the_formula_cells_it_names(tmp_path: Path) -> None:
    """`formula_cell_count` is the number of cells `formula_cells` names (each pending column's,
    each array formula's range), counted without an address for each."""
    from scm_xl.workbook.fill import _layout_for
    from scm_xl.results import read_results
    from scm_xl.workbook.io import write_rows

    rows = list(read_results(ARTICLE).rows)
    layout = _layout_for(rows, "en")
    built = build_workbook(layout)
    write_rows(built.wb, layout, rows, clear=False)
    cells = built.formula_cells(built.fills.columns())
    named = ironcalc_engine._counted(cells)
    assert named > 10_000 and built.formula_cell_count() == named
    kinds = {":" in ref for refs in cells.values() for ref in refs}
    assert kinds == {True, False}  # cells spelled one by one, and ranges (pending columns, array formulas)
