"""Every recalculation engine passes the same tests on real workbooks written by openpyxl."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import formulas
import openpyxl
import pytest
from openpyxl.worksheet.formula import ArrayFormula

from scm_xl.engines import (
    ENGINE_NAMES,
    CellError,
    ExcelEngine,
    FormulasEngine,
    IronCalcEngine,
    LibreOfficeEngine,
    Recalculated,
    choose_engine,
    get_engine,
)
from scm_xl.errors import EngineError, UsageError
from support.engines import ALL_ENGINES as ENGINES
from support.engines import EXPECTED, RAW, computed, write_workbook
from support.paths import ARTICLE

# LibreOffice here as scm-xl runs it for a user: a soffice of its own for each recalculation
pytestmark = pytest.mark.soffice_per_run

# Array (CSE) idioms that apply a scalar function element by element: IronCalc 0.9 computes them
# wrongly (../shared/notes/recalc-engines.md), so its results are compared without them.
ARRAY_IDIOMS = {(RAW, f"{col}{row}") for col in "CD" for row in range(2, 13)} | {("Calc", "A10")}


@pytest.fixture(scope="module")
def workbook(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_workbook(tmp_path_factory.mktemp("engines") / "book.xlsx")


_results: dict[str, Recalculated] = {}


def _once(name: str, workbook: Path) -> Recalculated:
    """`workbook` recalculated by the engine `name`, once per session."""
    if name not in _results:
        _results[name] = get_engine(name).recalculate(workbook)
    return _results[name]


@pytest.fixture(params=ENGINES)
def recalculated(request: pytest.FixtureRequest, workbook: Path) -> Recalculated:
    return _once(request.param, workbook)


def _comparable(recalculated: Recalculated) -> dict[tuple[str, str], object]:
    skip = ARRAY_IDIOMS if recalculated.engine == "ironcalc" else set()
    return {key: value for key, value in recalculated.values.items() if key not in skip}


def test_values(recalculated: Recalculated) -> None:
    assert set(recalculated.values) == set(EXPECTED)
    assert _comparable(recalculated) == {key: EXPECTED[key] for key in _comparable(recalculated)}
    assert recalculated.seconds > 0


def test_ironcalc_array_idioms_are_still_wrong(workbook: Path) -> None:
    """Pinned: the day an IronCalc upgrade computes them, this fails and the notes need updating."""
    values = get_engine("ironcalc").recalculate(workbook).values
    wrong = {key for key in ARRAY_IDIOMS if values[key] != EXPECTED[key]}
    assert wrong == {key for key in ARRAY_IDIOMS if EXPECTED[key] is not None}  # blanks come out blank


def test_get_accepts_absolute_and_lower_case(recalculated: Recalculated) -> None:
    assert recalculated.get("Calc", "$a$1") == 47.0
    assert recalculated.get(RAW, "C4") is None


def test_types_are_plain(recalculated: Recalculated) -> None:
    for value in recalculated.values.values():
        assert value is None or type(value) in (float, str, bool, CellError)


@pytest.mark.libreoffice
def test_engines_agree(workbook: Path) -> None:
    libreoffice = _once("libreoffice", workbook).values
    assert _once("formulas", workbook).values == libreoffice
    assert _comparable(_once("ironcalc", workbook)) == {
        key: value for key, value in libreoffice.items() if key not in ARRAY_IDIOMS}


@pytest.mark.libreoffice
def test_ironcalc_agrees_with_libreoffice_on_the_filled_article(tmp_path: Path) -> None:
    """The workbook scm-xl writes, cell by cell: the reason IronCalc may be the default engine."""
    from scm_xl.verify import same_value
    from scm_xl.workbook.fill import fill

    out = tmp_path / "article.xlsx"
    report = fill(ARTICLE, output=out, engine="ironcalc", lang="en")
    assert report.verification.ok
    ironcalc = computed(report).values  # what IronCalc computed for the fill's check
    libreoffice = LibreOfficeEngine().recalculate(out).values
    assert set(ironcalc) == set(libreoffice) and len(ironcalc) > 5000
    assert [key for key, value in ironcalc.items() if not same_value(libreoffice[key], value)] == []


@pytest.mark.parametrize("name", ["ironcalc", pytest.param("libreoffice", marks=pytest.mark.libreoffice)])
def test_hidden_column_of_formulas_past_a_thousand_rows(name: str, tmp_path: Path) -> None:
    """LibreOffice 7.4 leaves out such cells past row 1001 unless the engine shows the column."""
    book = openpyxl.Workbook()
    data = book.active
    data.title = "Data"
    calc = book.create_sheet("Calc")
    for row in range(1, 1501):
        data[f"A{row}"] = row
        calc[f"B{row}"] = f"=Data!A{row}*2"
    calc.column_dimensions["B"].hidden = True
    book.save(tmp_path / "hidden.xlsx")
    values = get_engine(name).recalculate(tmp_path / "hidden.xlsx").values
    assert values == {("Calc", f"B{row}"): 2.0 * row for row in range(1, 1501)}


def test_formulas_prints_nothing(workbook: Path, capfd: pytest.CaptureFixture[str]) -> None:
    FormulasEngine().recalculate(workbook)
    assert capfd.readouterr() == ("", "")


def test_formulas_failure_is_engine_error(workbook: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(model: object, *args: object, **kwargs: object) -> None:
        raise ValueError("cannot compile")

    monkeypatch.setattr(formulas.ExcelModel, "finish", fail)
    with pytest.raises(EngineError, match="formulas engine failed on .*book.xlsx: cannot compile") as caught:
        FormulasEngine().recalculate(workbook)
    assert isinstance(caught.value.__cause__, ValueError)


@pytest.mark.parametrize("name", ENGINES)
def test_unreadable_workbook(name: str, tmp_path: Path) -> None:
    broken = tmp_path / "broken.xlsx"
    broken.write_text("not a zip file")
    with pytest.raises(EngineError, match="cannot read workbook .*broken.xlsx"):
        get_engine(name).recalculate(broken)


@pytest.mark.libreoffice
def test_libreoffice_leaves_input_alone_and_converts(workbook: Path, tmp_path: Path) -> None:
    before = workbook.read_bytes(), os.stat(workbook).st_mtime_ns
    out = LibreOfficeEngine().convert(workbook, tmp_path / "out" / "recalculated.xlsx")
    assert (workbook.read_bytes(), os.stat(workbook).st_mtime_ns) == before
    assert sorted(p.name for p in workbook.parent.iterdir()) == ["book.xlsx"]
    cached = openpyxl.load_workbook(out, data_only=True)
    assert cached["Calc"]["A1"].value == 47
    formulas_kept = openpyxl.load_workbook(out)
    assert formulas_kept["Calc"]["A1"].value.replace("'", "") == f"=SUM({RAW}!B2:B12)"  # LO drops the quotes


@pytest.mark.libreoffice
def test_libreoffice_timeout(workbook: Path) -> None:
    with pytest.raises(EngineError, match="LibreOffice took more than 0.01 s"):
        LibreOfficeEngine(timeout=0.01).recalculate(workbook)


def test_libreoffice_missing(workbook: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SCM_XL_SOFFICE", "/nonexistent")
    assert not LibreOfficeEngine().available()
    with pytest.raises(EngineError, match="LibreOffice not found: install it, e.g. apt-get install -y"):
        LibreOfficeEngine().recalculate(workbook)


@pytest.mark.skipif(ExcelEngine().available(), reason="Excel is installed here")
def test_excel_unavailable_says_what_it_needs(workbook: Path) -> None:
    with pytest.raises(EngineError) as caught:
        get_engine("excel").recalculate(workbook)
    assert str(caught.value) == (
        "the excel engine needs Microsoft Excel on Windows or macOS and `pip install 'scm-xl[excel]'`"
    )


def test_get_engine_names_and_alias() -> None:
    assert ENGINE_NAMES == ("formulas", "ironcalc", "libreoffice", "gnumeric", "excel", "embedded")
    assert {get_engine(name).name for name in ENGINE_NAMES} == {"formulas", "ironcalc", "libreoffice", "gnumeric",
                                                                "excel"}
    assert get_engine("embedded").name == "ironcalc"


@pytest.mark.parametrize("choose", [get_engine, lambda name: choose_engine(name, 10)])
def test_unknown_engine(choose: object) -> None:
    with pytest.raises(UsageError, match="unknown engine 'numbers': choose one of .*formulas, ironcalc, libreoffice"):
        choose("numbers")  # type: ignore[operator]


@pytest.mark.parametrize("rows", [7, 1000, 10_000, 50_000])
def test_auto_is_ironcalc_at_every_size(rows: int) -> None:
    """IronCalc is the faster engine at every size measured (benchmarks/results/workbook.md),
    with LibreOffice installed or not."""
    assert [(engine.name, note) for engine, note in [choose_engine("auto", rows)]] == [("ironcalc", None)]


def test_explicit_engine_is_kept() -> None:
    assert [choose_engine(name, 50_000)[0].name for name in ("formulas", "libreoffice", "embedded")] == [
        "formulas", "libreoffice", "ironcalc"]
    assert choose_engine("formulas", 50_000)[1] is None


def _without_ironcalc(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ironcalc", None)  # what `import ironcalc` meets where no wheel installed


@pytest.mark.libreoffice
def test_auto_without_ironcalc_takes_libreoffice_and_says_so(monkeypatch: pytest.MonkeyPatch,
                                                              workbook: Path) -> None:
    _without_ironcalc(monkeypatch)
    engine, note = choose_engine("auto", 7)
    assert (engine.name, note) == ("libreoffice", "auto: the ironcalc package is not installed, using libreoffice")
    with pytest.raises(EngineError, match=r"ironcalc engine needs the ironcalc package: pip install"):
        get_engine("ironcalc").recalculate(workbook)


def test_auto_without_ironcalc_or_libreoffice_takes_formulas(monkeypatch: pytest.MonkeyPatch) -> None:
    _without_ironcalc(monkeypatch)
    monkeypatch.setenv("SCM_XL_SOFFICE", "/nonexistent")
    engine, note = choose_engine("auto", 5000)
    assert engine.name == "formulas"
    assert note == ("auto: neither the ironcalc package nor LibreOffice is installed, using formulas "
                    "(slow: minutes for 5000 rows; pip install 'ironcalc>=0.9.1,<0.10')")


def test_excel_engine_with_a_stand_in_for_xlwings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Excel cannot run here, so a stand-in for xlwings checks how its answers are read."""
    book = openpyxl.Workbook()
    sheet = book.active
    sheet.title = RAW
    sheet["B2"], sheet["C3"] = "=1/0", "=2*3"
    sheet["D2"] = ArrayFormula("D2:D3", "=B2:B3")
    book.save(tmp_path / "book.xlsx")
    calls: list[str] = []

    class UsedRange:  # B2:D3, as xlwings gives it with options(ndim=2, err_to_str=True)
        row, column = 2, 2

        def options(self, **options: object) -> UsedRange:
            assert options == {"ndim": 2, "err_to_str": True}
            return self

        value = [["#DIV/0!", None, 1], [None, 6, True]]

    class Book:
        sheets = {RAW: type("Sheet", (), {"name": RAW, "used_range": UsedRange()})()}

        def close(self) -> None:
            calls.append("close")

    class App:
        def __init__(self, *, visible: bool, add_book: bool) -> None:
            assert not visible and not add_book
            self.books = self

        def open(self, path: str, **options: object) -> Book:
            calls.append("open")
            return Book()

        def calculate(self) -> None:
            calls.append("calculate")

        def quit(self) -> None:
            calls.append("quit")

    monkeypatch.setitem(sys.modules, "xlwings", type(sys)("xlwings"))
    monkeypatch.setattr(sys.modules["xlwings"], "App", App, raising=False)
    monkeypatch.setattr(ExcelEngine, "available", lambda self: True)
    result = ExcelEngine().recalculate(tmp_path / "book.xlsx")
    assert result.values == {(RAW, "B2"): CellError("#DIV/0!"), (RAW, "C3"): 6.0, (RAW, "D2"): 1.0, (RAW, "D3"): True}
    assert calls == ["open", "calculate", "close", "quit"]


@pytest.mark.parametrize("name", ENGINES)
def test_missing_workbook(name: str, tmp_path: Path) -> None:
    with pytest.raises(EngineError, match="missing.xlsx"):
        get_engine(name).recalculate(tmp_path / "missing.xlsx")


def _rewritten(source: Path, target: Path, change: dict[str, bytes | None]) -> Path:
    """A copy of the package `source` with the parts in `change` replaced (None: left out)."""
    import zipfile

    with zipfile.ZipFile(source) as book, zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as copy:
        for info in book.infolist():
            data = change.get(info.filename, book.read(info))
            if data is not None:
                copy.writestr(info, data)
    return target


def test_ironcalc_reads_absolute_relationship_targets(workbook: Path, tmp_path: Path) -> None:
    # openpyxl writes a cell comment's part as Target="/xl/comments/comment1.xml"; IronCalc 0.9.1 found
    # no such member and failed on the whole workbook (issue 20).
    from openpyxl.comments import Comment

    commented = tmp_path / "commented.xlsx"
    wb = openpyxl.load_workbook(workbook)
    wb[RAW]["A1"].comment = Comment("a note", "me")
    wb.save(commented)
    values = IronCalcEngine().recalculate(commented).values
    assert values[("Calc", "A1")] == 47.0


def test_relative_targets_keeps_external_links() -> None:
    from scm_xl.engines.ironcalc_worker import relative_targets

    rels = (b'<Relationships><Relationship Id="a" Target="/xl/comments/comment1.xml"/>'
            b"<Relationship Id='b' Target='/home/me/other.xlsx' TargetMode='External'/>"
            b'<Relationship Id="c" Target="../drawings/drawing1.xml"/></Relationships>')
    assert relative_targets("xl/worksheets/_rels/sheet1.xml.rels", rels) == rels.replace(
        b"/xl/comments/comment1.xml", b"../comments/comment1.xml")
    assert relative_targets("_rels/.rels", b'<Relationship Target="/xl/workbook.xml"/>') == \
        b'<Relationship Target="xl/workbook.xml"/>'


def test_an_engine_that_cannot_read_a_package_names_the_others(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A package without a styles part (the format allows it): openpyxl and the formulas engine read
    # it, IronCalc 0.9.1 does not. The error says which engine to use instead.
    import re
    import zipfile

    plain = tmp_path / "plain.xlsx"
    wb = openpyxl.Workbook()
    wb.active.title = "Calc"
    wb.active["A1"], wb.active["A2"] = 21, "=A1*2"
    wb.save(plain)
    with zipfile.ZipFile(plain) as book:
        rels = book.read("xl/_rels/workbook.xml.rels")
        types = book.read("[Content_Types].xml")
    bare = _rewritten(plain, tmp_path / "bare.xlsx", {
        "xl/styles.xml": None,
        "xl/_rels/workbook.xml.rels": re.sub(rb"<Relationship [^>]*styles[^>]*/>", b"", rels),
        "[Content_Types].xml": re.sub(rb"<Override [^>]*styles[^>]*/>", b"", types)})
    monkeypatch.setattr(LibreOfficeEngine, "available", lambda self: True)
    with pytest.raises(EngineError, match=r"ironcalc failed on .*bare.xlsx: .*; another engine reads the file its "
                                          r"own way: try --engine libreoffice or (--engine \w+ or )*--engine formulas \(slow"):
        IronCalcEngine().recalculate(bare)
    assert FormulasEngine().recalculate(bare).values == {("Calc", "A2"): 42.0}
