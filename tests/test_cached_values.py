"""Computed values stored beside the formulas: readers that do not calculate see them,
LibreOffice still recalculates, and everything else in the file stays as it was."""

from __future__ import annotations

import re
import warnings
import zipfile
from collections.abc import Mapping
from pathlib import Path

import openpyxl
import pytest
from openpyxl.chart import BarChart, Reference
from openpyxl.formatting.rule import CellIsRule
from openpyxl.styles import PatternFill
from openpyxl.workbook.defined_name import DefinedName
from openpyxl.worksheet.datavalidation import DataValidation
from openpyxl.worksheet.formula import ArrayFormula

from scm_xl.engines import CellError, FormulasEngine, LibreOfficeEngine, Recalculated, get_engine
from scm_xl.outputs import raise_or_hold
from scm_xl.xlsx.cached_values import SheetValues, write_cached_values
from scm_xl.xlsx.package import sheet_parts
from scm_xl.xlsx.values import CellGrid

RAW = "原始数据"
USER = "我的笔记"  # a user's own sheet, with a chart
SPECIAL = 'a<b & "c" > \'d\' ]]> 中文'


def values_by_sheet(values: Mapping[tuple[str, str], object]) -> dict[str, SheetValues]:
    """Values keyed (sheet, "A1"), as write_cached_values takes them: by sheet, keyed (row, column)."""
    grid = values if isinstance(values, CellGrid) else CellGrid(values.items())  # type: ignore[arg-type]
    return {sheet: grid.sheet_view(sheet) for sheet in grid.sheets()}


def write_source(path: Path) -> Path:
    book = openpyxl.Workbook()
    raw = book.active
    raw.title = RAW
    raw.append(["kind", "number", "double", "label"])
    for row, (kind, number) in enumerate([("a", 1), ("b", 2), ("a", 3), ("b", None)], start=2):
        raw.append([kind, number])
        raw[f"C{row}"] = f'=IF(ISNUMBER(B{row}),B{row}*2,"")'
        raw[f"D{row}"] = f'=A{row}&"-"&B{row}'
    raw["C2"].fill = PatternFill("solid", fgColor="FFFF00")  # a style the cached cell must keep
    raw.conditional_formatting.add("C2:C5", CellIsRule(operator="greaterThan", formula=["4"],
                                                       fill=PatternFill("solid", fgColor="FF0000")))
    choice = DataValidation(type="list", formula1='"a,b"', allow_blank=True)
    raw.add_data_validation(choice)
    choice.add("A2:A20")
    calc = book.create_sheet("Calc")
    calc["A1"] = f"=SUM('{RAW}'!B2:B5)"
    calc["A2"] = f'="{SPECIAL.replace(chr(34), chr(34) * 2)}"'
    calc["A3"] = "=A1>5"
    calc["A4"] = "=1/0"
    calc["A5"] = '=IF(A1>0,"",1)'
    calc["A6"] = "=Total/4"
    calc["A7"] = "=A1/7"  # a number with many digits
    calc["A8"] = "=-A1*1E-300"
    calc["B1"] = ArrayFormula("B1:C2", "=Total*{1,2;3,4}")  # B2:C2 are not in the XML
    calc["C1"].number_format = "0.00"  # ... but C1 is, as a styled empty cell
    calc["E5"] = "typed by hand"
    book.defined_names["Total"] = DefinedName("Total", attr_text="Calc!$A$1")
    user = book.create_sheet(USER)
    user.append(["x", "y"])
    for x in range(1, 6):
        user.append([x, x * x])
    chart = BarChart()
    chart.add_data(Reference(user, min_col=2, min_row=1, max_row=6), titles_from_data=True)
    user.add_chart(chart, "D2")
    book.save(path)
    return path


EXPECTED = {
    (RAW, "C2"): 2.0, (RAW, "C3"): 4.0, (RAW, "C4"): 6.0, (RAW, "C5"): None,
    (RAW, "D2"): "a-1", (RAW, "D3"): "b-2", (RAW, "D4"): "a-3", (RAW, "D5"): "b-",
    ("Calc", "A1"): 6.0, ("Calc", "A2"): SPECIAL, ("Calc", "A3"): True, ("Calc", "A4"): CellError("#DIV/0!"),
    ("Calc", "A5"): None, ("Calc", "A6"): 1.5, ("Calc", "A7"): 6 / 7, ("Calc", "A8"): -6e-300,
    ("Calc", "B1"): 6.0, ("Calc", "C1"): 12.0, ("Calc", "B2"): 18.0, ("Calc", "C2"): 24.0,
}


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_source(tmp_path_factory.mktemp("cached") / "book.xlsx")


@pytest.fixture(scope="module")
def recalculated(source: Path) -> Recalculated:
    result = FormulasEngine().recalculate(source)
    assert result.values == pytest.approx(EXPECTED)  # the engine's own answers are the ones to store
    return result


@pytest.fixture(scope="module")
def cached(source: Path, recalculated: Recalculated, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("out") / "cached.xlsx"
    assert write_cached_values(source, out, values_by_sheet(recalculated.values)) == len(EXPECTED)
    return out


def _load(path: Path, **options: bool) -> openpyxl.Workbook:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return openpyxl.load_workbook(path, **options)


def _as_read(value: object) -> object:
    """How openpyxl reads a value back: errors as their code, empty text as None."""
    return value.code if isinstance(value, CellError) else value


def test_openpyxl_data_only_reads_every_value(cached: Path) -> None:
    book = _load(cached, data_only=True)
    read = {(sheet, cell): book[sheet][cell].value for sheet, cell in EXPECTED}
    assert read == pytest.approx({key: _as_read(value) for key, value in EXPECTED.items()})
    assert read[("Calc", "A7")] == 6 / 7  # every digit of the float survives
    assert type(read[("Calc", "A3")]) is bool


def test_source_reads_blank_without_recalculation(source: Path) -> None:
    book = _load(source, data_only=True)
    assert all(book[sheet][cell].value is None for sheet, cell in EXPECTED)


def test_pandas_reads_the_values(cached: Path) -> None:
    import pandas as pd  # here: a worker that never runs this test never imports pandas

    raw = pd.read_excel(cached, sheet_name=RAW)
    assert raw["double"].tolist()[:3] == [2, 4, 6]
    assert raw["label"].tolist() == ["a-1", "b-2", "a-3", "b-"]
    calc = pd.read_excel(cached, sheet_name="Calc", header=None)
    assert calc.iloc[0, 0] == 6 and calc.iloc[1, 0] == SPECIAL
    assert pd.isna(calc.iloc[3, 0])  # pandas reads an error as NaN
    assert calc.iloc[0:2, 1:3].values.tolist() == [[6, 12], [18, 24]]


def test_formulas_styles_and_cells_unchanged(source: Path, cached: Path) -> None:
    """Every cell reads as before, except an array formula's other cells, which now hold its values
    (as in a file Excel saved)."""
    before, after = _load(source), _load(cached)
    assert [after["Calc"][cell].value for cell in ("C1", "B2", "C2")] == [12, 18, 24]
    assert before.sheetnames == after.sheetnames
    for sheet in before.worksheets:
        for row in sheet.iter_rows():
            for cell in row:
                other = after[sheet.title][cell.coordinate]
                value = cell.value.text if isinstance(cell.value, ArrayFormula) else cell.value
                other_value = other.value.text if isinstance(other.value, ArrayFormula) else other.value
                if (sheet.title, cell.coordinate) in {("Calc", "C1"), ("Calc", "B2"), ("Calc", "C2")}:
                    continue
                assert (other_value, other.style_id, other.number_format) == (
                    value, cell.style_id, cell.number_format), cell.coordinate
    assert after["Calc"]["B1"].value.ref == "B1:C2"
    assert after.defined_names["Total"].attr_text == "Calc!$A$1"


def test_everything_but_the_cells_is_byte_for_byte(source: Path, cached: Path) -> None:
    with zipfile.ZipFile(source) as old, zipfile.ZipFile(cached) as new:
        assert old.namelist() == new.namelist()
        changed = {name for name in old.namelist() if old.read(name) != new.read(name)}
        assert changed == {"xl/worksheets/sheet1.xml", "xl/worksheets/sheet2.xml"}  # the user's sheet3 is not
        assert any(name.startswith("xl/charts/") for name in new.namelist())
        for name in changed:
            old_xml, new_xml = old.read(name), new.read(name)
            # what surrounds the cells (conditional formatting, validation, ...) is the same bytes
            assert old_xml.split(b"<sheetData>")[0] == new_xml.split(b"<sheetData>")[0]
            assert old_xml.split(b"</sheetData>")[1] == new_xml.split(b"</sheetData>")[1]
        assert b'fullCalcOnLoad="1"' in new.read("xl/workbook.xml")


def test_full_calc_on_load_is_added_where_missing(source: Path, recalculated: Recalculated,
                                                  tmp_path: Path) -> None:
    without = tmp_path / "no_calcpr.xlsx"
    with zipfile.ZipFile(source) as old, zipfile.ZipFile(without, "w") as new:
        for name in old.namelist():
            data = old.read(name)
            if name == "xl/workbook.xml":
                data = re.sub(rb"<calcPr[^>]*/>", b"", data)
            new.writestr(name, data)
    write_cached_values(without, tmp_path / "out.xlsx", values_by_sheet(recalculated.values))
    with zipfile.ZipFile(tmp_path / "out.xlsx") as out:
        xml = out.read("xl/workbook.xml")
    assert re.search(rb'<calcPr fullCalcOnLoad="1"/></workbook>$', xml)
    assert _load(tmp_path / "out.xlsx", data_only=True)["Calc"]["A1"].value == 6


def test_in_place_and_failure_leaves_file_alone(source: Path, recalculated: Recalculated, tmp_path: Path) -> None:
    book = tmp_path / "book.xlsx"
    book.write_bytes(source.read_bytes())
    with pytest.raises(ValueError, match="no sheet named 'Missing'"):
        write_cached_values(book, book, {"Missing": {(1, 1): 1.0}})
    assert book.read_bytes() == source.read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["book.xlsx"]  # no temporary file left
    assert write_cached_values(book, book, values_by_sheet(recalculated.values)) == len(EXPECTED)
    assert _load(book, data_only=True)["Calc"]["A1"].value == 6


def test_control_characters_are_escaped(source: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.xlsx"
    write_cached_values(source, out, {"Calc": {(1, 1): "bell\x07 tab\t"}})
    assert _load(out, data_only=True)["Calc"]["A1"].value == "bell_x0007_ tab\t"


def test_large_sheet_is_linear(tmp_path: Path) -> None:
    """10,000 rows of per-row formulas: every value lands in its own row."""
    book = openpyxl.Workbook()
    sheet = book.active
    for row in range(1, 10_001):
        sheet.append([row, f"=A{row}*3", f'="r"&A{row}'])
    book.save(tmp_path / "big.xlsx")
    values = {(row, 2): row * 3.0 for row in range(1, 10_001)} | {(row, 3): f"r{row}" for row in range(1, 10_001)}
    assert write_cached_values(tmp_path / "big.xlsx", tmp_path / "out.xlsx", {"Sheet": values}) == 20_000
    read = _load(tmp_path / "out.xlsx", read_only=True, data_only=True)
    rows = list(read["Sheet"].iter_rows(values_only=True))
    assert rows[0] == (1, 3, "r1") and rows[-1] == (10_000, 30_000, "r10000") and len(rows) == 10_000


@pytest.mark.parametrize("held", [False, True], ids=["gap rows absent", "a gap row held as text"])
def test_pending_columns_with_a_gap_count_every_cell_stored(tmp_path: Path, held: bool) -> None:
    """Pending cells are rendered a block of rows at a time; a block that starts in rows no
    pending column covers (a gap between two columns' ranges) still counts the cells it stores,
    whether the file holds its first row or not."""
    from scm_xl.xlsx.cached_values import BLOCK_ROWS
    from scm_xl.xlsx.fills import FilledColumn

    gap = BLOCK_ROWS + 2  # the first block is rows 2..BLOCK_ROWS + 1: the second starts here, in the gap
    book = openpyxl.Workbook()
    book.active["A1"] = "label"
    if held:
        book.active[f"A{gap}"] = "a person's note in the gap"
    book.save(tmp_path / "sparse.xlsx")
    fills = {"Sheet": [FilledColumn(2, 2, gap - 1, 0, None), FilledColumn(3, gap + 70, gap + 170, 1, None)]}
    values: dict[tuple[int, int], object] = {(row, 2): 1.5 for row in range(2, gap)}
    values |= {(row, 3): float(row) for row in range(gap + 70, gap + 171)}
    out = tmp_path / "out.xlsx"
    assert write_cached_values(tmp_path / "sparse.xlsx", out, {"Sheet": values}, fills=fills) == len(values)
    read = _load(out, data_only=True)["Sheet"]
    assert read["B2"].value == 1.5 and read[f"C{gap + 170}"].value == gap + 170
    assert read[f"A{gap}"].value == ("a person's note in the gap" if held else None)


@pytest.mark.libreoffice
def test_libreoffice_still_recalculates(cached: Path, tmp_path: Path) -> None:
    edited = tmp_path / "edited.xlsx"
    book = _load(cached)
    book[RAW]["B2"] = 10  # a person changes an input
    book.save(edited)
    recalculated = LibreOfficeEngine().recalculate(edited)
    assert recalculated.get(RAW, "C2") == 20.0
    assert recalculated.get("Calc", "A1") == 15.0
    assert recalculated.get("Calc", "A6") == 3.75  # through the defined name
    # openpyxl kept the array's other cells as the old values (6, 12, 18, 24); LibreOffice recomputes them
    assert [recalculated.get("Calc", cell) for cell in ("B1", "C1", "B2", "C2")] == [15.0, 30.0, 45.0, 60.0]


@pytest.mark.parametrize("engine", ["formulas", "ironcalc", pytest.param("libreoffice", marks=pytest.mark.libreoffice)])
def test_engines_ignore_stored_values(source: Path, engine: str, tmp_path: Path) -> None:
    """Stored values never stand in for an engine's own calculation: all of them wrong, on purpose."""
    stale = tmp_path / "stale.xlsx"
    write_cached_values(source, stale, {sheet: {position: 999.0 for position in cells}
                                        for sheet, cells in values_by_sheet(EXPECTED).items()})
    assert _load(stale, data_only=True)["Calc"]["A1"].value == 999
    assert get_engine(engine).recalculate(stale).values == pytest.approx(EXPECTED)


def test_an_interruption_as_a_member_is_opened_is_what_propagates_and_leaves_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A signal's exit (the CLI's SIGTERM handler raises one) can land between `ZipFile.open` and
    its `with`, the member's writer made but never entered: the exit is what propagates, not
    `ZipFile.close`'s complaint about an open writer; the target is untouched and no temporary
    copy stays."""
    source = write_source(tmp_path / "book.xlsx")
    before = source.read_bytes()
    real = zipfile._ZipWriteFile.__init__  # type: ignore[attr-defined]
    made: list[int] = []

    def interrupted(self: object, *args: object) -> None:
        real(self, *args)
        made.append(1)
        if len(made) == 3:
            raise_or_hold(SystemExit(143))  # the CLI's SIGTERM handler, landing before `open` returns

    monkeypatch.setattr(zipfile._ZipWriteFile, "__init__", interrupted)  # type: ignore[attr-defined]
    with pytest.raises(SystemExit):
        write_cached_values(source, source, {RAW: {(2, 3): 2.0}})
    monkeypatch.undo()
    assert len(made) == 3
    assert [p.name for p in tmp_path.iterdir()] == ["book.xlsx"] and source.read_bytes() == before


def test_sheets_rendered_ahead_are_kept_only_when_their_values_are_identical(source: Path, recalculated: Recalculated,
                                                                              tmp_path: Path) -> None:
    """`fill` renders the sheets with the reference's values while the engine works, and keeps a
    sheet so rendered only where the engine's values turn out identical (to the bit): the file
    is the same either way, and a sheet whose values differ in one cell is rendered again."""
    from scm_xl.xlsx.cached_values import render_ahead

    engine = values_by_sheet(recalculated.values)
    plain = tmp_path / "plain.xlsx"
    written = write_cached_values(source, plain, engine)
    changed = CellGrid(recalculated.values.items())
    cell = next(key for key, value in recalculated.values.items() if isinstance(value, float) and key[0] == RAW)
    changed[cell] = float(recalculated.values[cell]) + 1e-12  # a reference that differs in one cell's last bits
    for reference, kept in ((values_by_sheet(recalculated.values), set(engine)),
                            (values_by_sheet(changed), set(engine) - {RAW})):
        with render_ahead(source, reference, folder=tmp_path) as ahead:
            out = tmp_path / "ahead.xlsx"
            assert write_cached_values(source, out, values_by_sheet(recalculated.values), ahead=ahead) == written
            with zipfile.ZipFile(source) as book:
                parts = {part: title for title, part in sheet_parts(book).items()}
            assert {parts[name] for name in ahead.kept} == kept
        with zipfile.ZipFile(plain) as a, zipfile.ZipFile(out) as b:
            assert a.namelist() == b.namelist() and all(a.read(name) == b.read(name) for name in a.namelist())


def test_identical_values_are_the_same_cells_types_and_bits() -> None:
    from scm_xl.xlsx.values import ABSENT, identical

    def view(*values: object) -> SheetValues:
        return CellGrid({("S", f"A{row}"): value for row, value in enumerate(values, start=1)
                         if value is not ABSENT}.items()).sheet_view("S")

    assert identical(view(1.5, "x", None, True, CellError("#N/A"), 0.0), view(1.5, "x", None, True, CellError("#N/A"), 0.0))
    for one, other in ((0.0, -0.0), (1.0, True), (0.0, False), (1.5, 1.5000000000000002), (float("nan"), float("nan")),
                       ("", None), (1.0, "1")):
        assert not identical(view(2.0, one), view(2.0, other)), (one, other)
    assert not identical(view(1.0, 2.0), view(1.0))  # a cell fewer
    assert not identical({(1, 1): 1.0}, {(1, 1): 1.0})  # not two grids' sheets: not told, so not the same
