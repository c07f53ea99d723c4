"""Gnumeric (`ssconvert --recalc`), a fourth engine that shares no code with the others,
recalculates the workbooks scm-xl writes and agrees with the Python reference on every formula
cell: the article, demo-like data with a prompt axis and latency columns, and 1,000 rows.

Before the workbook guarded MINIFS/MAXIFS (`formulas.ifs_or_zero`), Gnumeric's #DIV/0! over an
empty match (Excel documents 0) spread to 2,307 of the article's 14,160 formula cells.
"""

from __future__ import annotations

import sys
from pathlib import Path

import openpyxl
import pytest
from click.testing import CliRunner

from scm_xl.cli import main
from scm_xl.engines import CellError, GnumericEngine, get_engine
from scm_xl.errors import EngineError
from scm_xl.report import render_verification
from scm_xl.results import write_results
from scm_xl.workbook.fill import WorkbookReport, fill
from support.engines import EXPECTED, write_workbook
from support.paths import ARTICLE

ROOT = Path(__file__).resolve().parents[1]
SIM = Path(__file__).parent / "data" / "sim_prompt_levels.csv"
sys.path.insert(0, str(ROOT / "benchmarks"))
from bench_cli_rows import rows_of  # noqa: E402  (the benchmark's 1,000-row campaign)

pytestmark = pytest.mark.gnumeric


def _agrees(report: WorkbookReport, at_least: int) -> None:
    v = report.verification
    assert v.engine == "gnumeric"
    assert v.ok, render_verification(v)
    assert v.cells_compared > at_least


def test_article_agrees_on_every_cell(tmp_path: Path) -> None:
    _agrees(fill(ARTICLE, output=tmp_path / "article.xlsx", engine="gnumeric"), 10_000)


def test_demo_like_data_agrees_on_every_cell(tmp_path: Path) -> None:
    # a prompt axis, latency columns (the latency sheet's MINIFS/MAXIFS) and English sheet names
    _agrees(fill(SIM, output=tmp_path / "sim.xlsx", engine="gnumeric", lang="en"), 10_000)


@pytest.mark.slow
def test_thousand_rows_agree_on_every_cell(tmp_path: Path) -> None:
    # about 9 s of CPU (ssconvert 4.5 s of it): benchmarks/results/engines.md
    csv = tmp_path / "rows.csv"
    write_results(csv, rows_of(1000))
    _agrees(fill(csv, output=tmp_path / "rows.xlsx", engine="gnumeric"), 100_000)


def test_empty_template_agrees(tmp_path: Path) -> None:
    # no rows at all: every MINIFS/MAXIFS over the raw rows has no match
    out = tmp_path / "template.xlsx"
    assert CliRunner().invoke(main, ["build", "template", "-o", str(out), "--rows", "25"]).exit_code == 0
    result = CliRunner().invoke(main, ["verify", str(out), "--engine", "gnumeric"])
    assert result.exit_code == 0, result.output


def test_minifs_over_no_match(tmp_path: Path) -> None:
    """Why the workbook guards MINIFS/MAXIFS: Gnumeric 1.12 gives #DIV/0! where Excel documents 0,
    also when the matched cells hold no number; the guarded form is 0 on it."""
    book = openpyxl.Workbook()
    ws = book.active
    ws.title = "S"
    for row in ([1, "a", 5], [2, "b", "x"], [3, "b", None]):
        ws.append(row)
    ws["E1"] = '=_xlfn.MINIFS(C1:C3,B1:B3,"zz")'
    ws["E2"] = '=_xlfn.MAXIFS(C1:C3,B1:B3,"b")'
    ws["E3"] = '=IF(COUNTIFS(C1:C3,">-1E+300",B1:B3,"b")=0,0,_xlfn.MAXIFS(C1:C3,B1:B3,"b"))'
    ws["E4"] = '=_xlfn.MAXIFS(C1:C3,B1:B3,"a")'
    book.save(tmp_path / "minifs.xlsx")
    values = GnumericEngine().recalculate(tmp_path / "minifs.xlsx").values
    assert values == {("S", "E1"): CellError("#DIV/0!"), ("S", "E2"): CellError("#DIV/0!"),
                      ("S", "E3"): 0.0, ("S", "E4"): 5.0}


def test_engine_values_and_types(tmp_path: Path) -> None:
    """The engines' shared probe workbook (tests/test_engines.py): Gnumeric's values, with its two
    array idioms that the workbook does not use (benchmarks/results/engines.md)."""
    wrong = {("Calc", "A10"): 6.0,  # {=SUM(COUNTIFS(r,{"a","b"}))}: the first constant only
             # {=COUNTIFS(A2:A12,A2:A12)}: the first row's criterion ("a": 6) in every row
             **{("原始数据", f"D{row}"): 6.0 for row in (3, 6, 8, 10, 12)}}
    values = get_engine("gnumeric").recalculate(write_workbook(tmp_path / "book.xlsx")).values
    assert values == {**EXPECTED, **wrong}


def test_leaves_input_alone(tmp_path: Path) -> None:
    book = write_workbook(tmp_path / "book.xlsx")
    before = book.read_bytes()
    GnumericEngine().recalculate(book)
    assert book.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["book.xlsx"]


def test_missing_ssconvert(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SCM_XL_SSCONVERT", "/nonexistent")
    assert not GnumericEngine().available()
    with pytest.raises(EngineError, match="ssconvert not found: install it, e.g. apt-get install -y gnumeric"):
        GnumericEngine().recalculate(write_workbook(tmp_path / "book.xlsx"))


def test_unreadable_and_missing_workbooks(tmp_path: Path) -> None:
    broken = tmp_path / "broken.xlsx"
    broken.write_text("not a zip file")
    with pytest.raises(EngineError, match="cannot read workbook .*broken.xlsx"):
        GnumericEngine().recalculate(broken)
    with pytest.raises(EngineError, match="no such workbook: .*missing.xlsx"):
        GnumericEngine().recalculate(tmp_path / "missing.xlsx")


def test_timeout(tmp_path: Path) -> None:
    with pytest.raises(EngineError, match="Gnumeric took more than 0.01 s"):
        GnumericEngine(timeout=0.01).recalculate(write_workbook(tmp_path / "book.xlsx"))


def test_a_file_ssconvert_cannot_load_is_a_clear_error(tmp_path: Path) -> None:
    """A package without its root relationships: scm-xl finds the sheets without them, ssconvert
    finds no workbook (exit 1). The error names the file, what ssconvert said and the other
    engines, with no traceback."""
    import zipfile

    source = write_workbook(tmp_path / "book.xlsx")
    bad = tmp_path / "bad.xlsx"
    with zipfile.ZipFile(source) as book, zipfile.ZipFile(bad, "w") as copy:
        for info in book.infolist():
            if info.filename != "_rels/.rels":
                copy.writestr(info, book.read(info))
    with pytest.raises(EngineError, match=r"gnumeric failed on .*bad.xlsx: ssconvert exit 1: .*No workbook stream"
                                          r".*; another engine reads the file its own way: try --engine"):
        GnumericEngine().recalculate(bad)
