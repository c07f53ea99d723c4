"""`registry.load_inputs`: `verify`, `predict`, `solve` and `report` read a workbook's inputs from
a copy without the formula cells the input readers never read, as each sheet's spec declares
(`SheetSpec.inputs`, `SheetSpec.input_rows`): none on a sheet they do not read, those below
INPUT_ROWS (or the rows its spec gives for the layout) on a sheet they read the top of, every one
on a sheet read whole. What they read must be what the whole workbook
gives, a person's edits included, and a sheet declared unread must be one they do not read."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from openpyxl import Workbook
from openpyxl.worksheet.worksheet import Worksheet

from scm_xl.results import write_results
from scm_xl.workbook import latency_sheet
from scm_xl.workbook.fill import WorkbookReport, fill, verify
from scm_xl.workbook.io import INPUT_ROWS, load, read_inputs
from scm_xl.workbook.layout import Layout
from scm_xl.workbook.registry import BY_KEY, SHEETS, input_reads, load_inputs, read_layout
from scm_xl.xlsx.package import formula_cells_dropped
from support import books
from support.rows import make_row

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from bench_cli_rows import rows_of  # noqa: E402  (the benchmark's campaign)

ROWS = 240  # past INPUT_ROWS: the per-row sheets lose their formula cells below it


@pytest.fixture(scope="module")
def filled_report(tmp_path_factory: pytest.TempPathFactory) -> WorkbookReport:
    folder = tmp_path_factory.mktemp("inputs-only")
    csv = folder / "results.csv"
    write_results(csv, rows_of(ROWS))
    report = fill(csv, output=folder / "filled.xlsx", lang="en")
    assert report.verification.ok and report.layout.raw_last > INPUT_ROWS
    return report


@pytest.fixture(scope="module")
def filled(filled_report: WorkbookReport) -> Path:
    return filled_report.path


@pytest.fixture(scope="module")
def loaded(filled: Path) -> tuple[Workbook, Workbook]:
    """The filled workbook loaded whole, and for its inputs only."""
    return load(filled), load_inputs(filled)


@pytest.fixture(scope="module")
def edited(filled: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The filled workbook after a person typed: a formula into the Summary's target, a knee on
    the latency sheet, and a raw row past INPUT_ROWS cleared of its display formulas."""
    layout = books.layout(filled)
    summary = books.worksheet(filled, layout.title("summary"))
    target = next(cell for row in summary.iter_rows() for cell in row
                  if cell.fill is not None and str(cell.fill.fgColor.rgb).endswith("FFF2CC"))
    raw = books.sheet(filled, layout.title("raw"), formulas=True)
    cleared = {cell.coordinate: None for cell in raw.values()
               if cell.row == INPUT_ROWS + 20 and isinstance(cell.value, str) and cell.value.startswith("=")}
    assert cleared
    out = tmp_path_factory.mktemp("edited") / "edited.xlsx"
    books.retyped(filled, out, layout.title("summary"), {target.coordinate: books.Formula("=50+50")})
    books.retyped(out, out, latency_sheet.SHEET_TITLES["en"], {"B5": 8})
    books.retyped(out, out, layout.title("raw"), cleared)
    return out


@pytest.mark.parametrize("which", ["filled", "edited"])
def test_the_inputs_are_those_of_the_whole_workbook(which: str, request: pytest.FixtureRequest) -> None:
    path: Path = request.getfixturevalue(which)
    whole, partial = request.getfixturevalue("loaded") if which == "filled" else (load(path),
                                                                                   load_inputs(path))
    layout = read_layout(whole, path)
    assert read_layout(partial, path) == layout
    inputs = read_inputs(whole, layout, path)
    assert read_inputs(partial, layout, path) == inputs
    assert len(inputs.rows) == ROWS
    if which == "edited":  # the edits are there to be read
        assert "'=50+50'" in repr(inputs)  # read as typed, wherever the Summary's first input goes
        assert inputs.notes  # the cleared display formulas are noticed


def test_the_copy_leaves_out_the_per_row_formulas_below_input_rows(filled: Path,
                                                                    loaded: tuple[Workbook, Workbook]) -> None:
    whole, partial = loaded
    layout = read_layout(whole, filled)
    work = layout.title("calc")
    below = [cell for cell in partial[work]._cells.values() if cell.row > INPUT_ROWS and cell.data_type == "f"]
    assert below == [] and any(cell.row > INPUT_ROWS for cell in whole[work]._cells.values())
    raw = layout.title("raw")  # read whole
    assert len(partial[raw]._cells) == len(whole[raw]._cells)
    formulas = [sum(1 for ws in book.worksheets for cell in ws._cells.values() if cell.data_type == "f")
                for book in (whole, partial)]
    assert formulas[1] < formulas[0] * 0.9  # at 240 rows; at 10,000 rows 2% are left


def test_a_sheet_declared_unread_is_not_read_and_keeps_no_formula_cell(filled: Path,
                                                                        loaded: tuple[Workbook, Workbook],
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    whole, partial = loaded
    layout = read_layout(whole, filled)
    unread = {spec.title(layout.lang) for spec in SHEETS if spec.inputs == "none"}
    assert {BY_KEY[key].title(layout.lang) for key in ("lsq", "consistency", "calc")} <= unread
    assert layout.title("raw") not in unread
    for title in unread:
        assert not any(cell.data_type == "f" for cell in partial[title]._cells.values())
        assert any(cell.data_type == "f" for cell in whole[title]._cells.values()) or title == layout.title("readme")
    opened: list[str] = []  # every sheet the readers open
    sheet_named = Workbook.__getitem__
    monkeypatch.setattr(Workbook, "__getitem__", lambda wb, title: opened.append(title) or sheet_named(wb, title))
    read_inputs(whole, read_layout(whole, filled), filled)
    assert layout.title("raw") in opened and not unread & set(opened)


def test_verify_reads_the_copy_and_still_checks_every_formula_cell(filled_report: WorkbookReport) -> None:
    report = verify(filled_report.path)
    assert report.verification.ok and len(report.inputs.rows) == ROWS
    assert report.verification.cells_compared == filled_report.verification.cells_compared


@pytest.mark.parametrize("sizes", [{}, {"c_slots": 300}], ids=["default", "300 concurrency slots"])
def test_every_cell_the_readers_read_lies_in_the_rows_the_specs_declare(sizes: dict[str, int],
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The input readers, run on a workbook of empty sheets, touch no row of a sheet below what its
    spec declares for the layout (`registry.input_reads`): the latency sheet's forward inputs move
    down with the concurrency slots, past INPUT_ROWS at 300 (a formula typed there was read as
    blank when every "top" sheet ended at INPUT_ROWS)."""
    layout = Layout(lang="en", **sizes)
    touched: dict[str, set[int]] = {}

    def rows_of(found: object) -> Iterator[int]:
        if isinstance(found, tuple):
            for one in found:
                yield from rows_of(one)
        else:
            yield found.row  # type: ignore[attr-defined]

    cell, item, iter_rows = Worksheet.cell, Worksheet.__getitem__, Worksheet.iter_rows

    def cell_read(ws: Worksheet, row: int, column: int | None = None, value: object = None) -> object:
        touched.setdefault(ws.title, set()).add(row)
        return cell(ws, row, column, value)

    def item_read(ws: Worksheet, key: str) -> object:
        found = item(ws, key)
        touched.setdefault(ws.title, set()).update(rows_of(found))
        return found

    def rows_read(ws: Worksheet, min_row: int | None = None, max_row: int | None = None, *args: object,
                  **kwargs: object) -> object:
        touched.setdefault(ws.title, set()).add(max_row or ws.max_row)
        return iter_rows(ws, min_row, max_row, *args, **kwargs)

    monkeypatch.setattr(Worksheet, "cell", cell_read)
    monkeypatch.setattr(Worksheet, "__getitem__", item_read)
    monkeypatch.setattr(Worksheet, "iter_rows", rows_read)
    wb = Workbook()
    wb.remove(wb.active)
    for spec in SHEETS:
        wb.create_sheet(spec.title(layout.lang))
    read_inputs(wb, layout, Path("empty.xlsx"))
    reads = input_reads(layout)
    assert touched[latency_sheet.SHEET_TITLES["en"]]
    for title, rows in touched.items():
        read = reads[title]
        bound = {"whole": max(rows), "top": INPUT_ROWS, "none": 0}[read] if isinstance(read, str) else read
        assert max(rows) <= bound, (title, read)
    latency = reads[latency_sheet.SHEET_TITLES["en"]]
    assert isinstance(latency, int) and (latency > INPUT_ROWS) == bool(sizes)


def test_formula_cells_below_the_row_go_and_everything_else_stays() -> None:
    block = (b'<sheetData><row r="199"><c r="A199"><f>1+1</f><v>2</v></c></row>'
             b'<row r="200" ht="20"><c r="A200" s="3"/><c r="B200"><f>B1</f><v></v></c></row>'
             b'<row r="201"><c r="A201" s="3"/><c r="B201" t="str"><f t="shared" ref="B201:B202" si="0">A1</f>'
             b'<v>x</v></c><c r="C201"><v>7</v></c><c r="D201" t="inlineStr"><is><t>=not a formula</t></is></c>'
             b'<c r="E201"><f>E1</f></c></row>'
             b'<row r="202"><c r="B202" t="str"><f t="shared" si="0"/><v>y</v></c></row>')
    assert formula_cells_dropped(block, 200) == (
        b'<sheetData><row r="199"><c r="A199"><f>1+1</f><v>2</v></c></row>'
        b'<row r="200" ht="20"><c r="A200" s="3"/><c r="B200"><f>B1</f><v></v></c></row>'
        b'<row r="201"><c r="A201" s="3"/><c r="C201"><v>7</v></c><c r="D201" t="inlineStr"><is>'
        b'<t>=not a formula</t></is></c></row>'
        b'<row r="202"></row>')
    later = b'<row r="300"><c r="A300"><f>1</f><v>1</v></c><c r="B300"><v>2</v></c></row><row><c><f>3</f></c></row>'
    assert formula_cells_dropped(later, 200) == b'<row r="300"><c r="B300"><v>2</v></c></row><row></row>'
    unnumbered = b'<row><c><f>3</f></c></row><row r="300"><c r="A300"><f>1</f></c></row>'
    assert formula_cells_dropped(unnumbered, 200) == b'<row><c><f>3</f></c></row><row r="300"></row>'


def test_fill_computes_from_the_numbers_its_file_holds(tmp_path: Path) -> None:
    """openpyxl saves a float with 16 significant digits: a measured time of 12.126047822328516 s
    is 12.12604782232852 in the file. `fill` computes its reference from the inputs as the file
    holds them, so it is the reference `verify` computes from that file, to the bit."""
    rows = [replace(make_row(f"E{i}", "m", c, 50, 41.233550067262314 / c), total_time_s=12.126047822328516 * (i + 1))
            for i, c in enumerate((1, 2, 4))]
    csv = tmp_path / "results.csv"
    write_results(csv, rows)
    report = fill(csv, output=tmp_path / "filled.xlsx", lang="en")
    assert report.verification.ok
    raw = books.sheet(report.path, report.layout.title("raw"), formulas=True)
    saved = {raw[f"{report.layout.entry_col('exp_id')}{n}"].value: raw[f"{report.layout.entry_col('total_time_s')}{n}"].value
             for n in range(report.layout.raw_first, report.layout.raw_first + len(rows))}
    given = {row.exp_id: row.total_time_s for row in rows}
    read = {row.exp_id: row.total_time_s for _, row in report.inputs.rows}
    assert read == saved and saved["E0"] != given["E0"] == 12.126047822328516  # 17 digits given, 16 kept
    again = verify(report.path)
    assert [s.tps for s in again.analysis.statuses] == [s.tps for s in report.analysis.statuses]
