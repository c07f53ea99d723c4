"""Hostile and unusual .xlsx files (issue 20): every command that opens a workbook refuses a bomb
fast, with exit 2 and the part named; a commented workbook works with the default engine; the
cell someone typed over leads the mismatch list. Every hostile file is built here."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import openpyxl
import pytest
from click.testing import CliRunner, Result
from openpyxl.comments import Comment

from scm_xl.cli import main
from scm_xl.errors import InputError
from scm_xl.safety import XlsxLimits, check_xlsx
from support import books
from support.paths import ARTICLE

SCM_XL = str(Path(sys.executable).with_name("scm-xl"))
MAIN_NS = b"http://schemas.openxmlformats.org/spreadsheetml/2006/main"
USER_SHEET = "Notes"


def run(*args: object) -> Result:
    return CliRunner().invoke(main, [str(a) for a in args])


def refused(result: Result, *words: str) -> None:
    """Exit 2, `Error: ...` naming `words` on stderr, no traceback."""
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert result.stderr.startswith("Error: "), result.stderr
    for word in words:
        assert word in result.stderr, result.stderr


def sheet(data: bytes, before: bytes = b"", after: bytes = b"") -> bytes:
    return (b'<?xml version="1.0" encoding="UTF-8"?><worksheet xmlns="' + MAIN_NS + b'">' + before
            + b"<sheetData>" + data + b"</sheetData>" + after + b"</worksheet>")


def package(path: Path, parts: dict[str, bytes], level: int = 6) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=level) as archive:
        archive.writestr("[Content_Types].xml", b"<Types/>")
        archive.writestr("xl/workbook.xml", b"<workbook/>")
        for name, data in parts.items():
            archive.writestr(name, data)
    return path


def one_sheet(path: Path, data: bytes, before: bytes = b"", after: bytes = b"") -> Path:
    return package(path, {"xl/worksheets/sheet1.xml": sheet(data, before, after)})


@pytest.fixture(scope="module")
def article(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The article's rows filled into a workbook, with a sheet of the user's own."""
    folder = tmp_path_factory.mktemp("article")
    plain = folder / "article.xlsx"
    assert run("fill", ARTICLE, "-o", plain, "--lang", "en").exit_code == 0
    wb = openpyxl.load_workbook(plain)
    wb.create_sheet(USER_SHEET)["A1"] = "my notes"
    wb.save(plain)
    return plain


# --- 13: bombs under every limit the check had -----------------------------------------

def test_many_sheets_each_under_the_ratio_floor_are_refused_before_decompressing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # 54 sheets of 7.8 MiB (under the 8 MiB floor of the per-part ratio), 29.6M cells (under the old
    # 30M), 1.5 MB on disk: the old check let it through and `verify` ran out of time and memory.
    cells = 548_000
    part = sheet(b'<row r="1">' + b'<c r="A1"/>    ' * cells + b"</row>")
    bomb = package(tmp_path / "sheets.xlsx", {f"xl/worksheets/sheet{i}.xml": part for i in range(1, 55)}, level=1)
    assert len(part) < 8 * 1024 * 1024 and 54 * cells < 30_000_000 and bomb.stat().st_size < 3_000_000

    def never(*args: object, **kwargs: object) -> None:
        raise AssertionError("decompressed a part: the zip directory alone shows the bomb")

    monkeypatch.setattr(zipfile.ZipFile, "open", never)
    with pytest.raises(InputError, match=r"sheets.xlsx: refused: the workbook unpacks to 42\d MiB from [\d.,]+ "
                                         r"(MiB|bytes), \d+ to 1 \(limit 100\); is it a zip bomb\?"):
        check_xlsx(bomb)


def test_one_merged_range_over_the_whole_sheet_is_refused_at_once(tmp_path: Path) -> None:
    # A 500-byte file whose one <mergeCell> made openpyxl build 17 billion cells (MemoryError after 110 s).
    bomb = one_sheet(tmp_path / "merge.xlsx", b'<row r="1"><c r="A1"><v>1</v></c></row>',
                     after=b'<mergeCells count="1"><mergeCell ref="A1:XFD1048576"/></mergeCells>')
    start = time.perf_counter()
    with pytest.raises(InputError, match=r"part xl/worksheets/sheet1.xml reaches row 1,048,576 with a merged "
                                         r"range \(A1:XFD1048576\) \(limit 250,000\); is it a cell bomb\?"):
        check_xlsx(bomb)
    assert time.perf_counter() - start < 1


@pytest.mark.parametrize("after, data, what", [
    (b'<mergeCells count="1"><mergeCell ref="A1:Z40000"/></mergeCells>', b"", "a merged range A1:Z40000"),
    (b'<hyperlinks><hyperlink ref="A1:Z40000" display="x"/></hyperlinks>', b"", "a hyperlink's range A1:Z40000"),
    (b"", b'<row r="1"><c r="A1"><f t="array" ref="A1:Z40000">1</f></c></row>', "an array formula A1:Z40000"),
])
def test_ranges_that_make_a_reader_build_a_million_cells_are_refused(tmp_path: Path, after: bytes, data: bytes,
                                                                      what: str) -> None:
    # 26 columns x 40,000 rows: within the rows a sheet may reach, but 1,040,000 cell objects.
    bomb = one_sheet(tmp_path / "range.xlsx", data, after=after)
    with pytest.raises(InputError, match=f"cover more than 1,000,000 cells .* part xl/worksheets/sheet1.xml has "
                                         f"{what}; is it a cell bomb"):
        check_xlsx(bomb)


@pytest.mark.parametrize("data, before, how", [
    (b'<row r="1048576"><c r="A1048576"><v>1</v></c></row>', b"", "with a cell"),
    (b'<row r="1"><c r="A1048576"><v>1</v></c></row>', b"", "with a cell"),  # the cell's r is what a reader uses
    (b"<row r='1'><c\tr = '$A$0001048576'><v>1</v></c></row>", b"", "with a cell"),
    (b'<row r="1"><c r="A1"><v>1</v></c></row>', b'<dimension ref="A1:XFD1048576"/>', "with its <dimension>"),
])
def test_a_sheet_that_reaches_past_the_rows_is_refused(tmp_path: Path, data: bytes, before: bytes, how: str) -> None:
    # One cell at the bottom of the sheet: scm-xl reads its sheets down to the last row used.
    with pytest.raises(InputError, match=f"reaches row 1,048,576 {how}"):
        check_xlsx(one_sheet(tmp_path / "far.xlsx", data, before))


def test_a_cell_past_the_last_column_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="reaches column 16,385 with a cell"):
        check_xlsx(one_sheet(tmp_path / "wide.xlsx", b'<row r="1"><c r="XFE1"><v>1</v></c></row>'))


def test_rows_without_numbers_count_too(tmp_path: Path) -> None:
    book = one_sheet(tmp_path / "rows.xlsx", b"<row><c><v>1</v></c></row>" * 11)
    check_xlsx(book, XlsxLimits(max_rows=11))
    with pytest.raises(InputError, match="reaches row 12 counting its <row> elements"):
        check_xlsx(one_sheet(tmp_path / "rows12.xlsx", b"<row><c><v>1</v></c></row>" * 12), XlsxLimits(max_rows=11))


def test_cells_are_limited_per_sheet_and_in_sum(tmp_path: Path) -> None:
    row = b'<row r="1">' + b'<c r="A1"/>' * 600 + b"</row>"
    book = package(tmp_path / "two.xlsx", {f"xl/worksheets/sheet{i}.xml": sheet(row) for i in (1, 2)})
    check_xlsx(book, XlsxLimits(max_sheet_cells=600, max_cells=1200))
    with pytest.raises(InputError, match="part xl/worksheets/sheet1.xml holds more than 599 cells"):
        check_xlsx(book, XlsxLimits(max_sheet_cells=599))
    with pytest.raises(InputError, match="the workbook holds more than 1,199 cells"):
        check_xlsx(book, XlsxLimits(max_cells=1199))


def test_cells_with_a_namespace_prefix_are_counted(tmp_path: Path) -> None:
    data = b'<x:row r="1">' + b'<x:c r="A1"/>' * 50 + b"</x:row>"
    book = package(tmp_path / "prefixed.xlsx", {"xl/worksheets/sheet1.xml": b'<x:worksheet xmlns:x="' + MAIN_NS
                                                + b'"><x:sheetData>' + data + b"</x:sheetData></x:worksheet>"})
    check_xlsx(book, XlsxLimits(max_cells=50))
    with pytest.raises(InputError, match="more than 49 cells"):
        check_xlsx(book, XlsxLimits(max_cells=49))


def test_sheets_are_limited(tmp_path: Path) -> None:
    parts = {f"xl/worksheets/sheet{i}.xml": sheet(b"") for i in range(1, 4)}
    check_xlsx(package(tmp_path / "s.xlsx", parts), XlsxLimits(max_sheets=3))
    with pytest.raises(InputError, match="more than 2 sheets"):
        check_xlsx(package(tmp_path / "s2.xlsx", parts), XlsxLimits(max_sheets=2))


# --- 17: XML that declares a DTD ------------------------------------------------------------

XXE = (b'<?xml version="1.0"?><!DOCTYPE workbook [<!ENTITY xxe SYSTEM "file:///etc/passwd">]>'
       b'<workbook xmlns="' + MAIN_NS + b'"><sheets><sheet name="&xxe;" sheetId="1"/></sheets></workbook>')


def with_part(source: Path, target: Path, name: str, data: bytes) -> Path:
    """A copy of the workbook `source` with the part `name` replaced by `data`."""
    with zipfile.ZipFile(source) as book, zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as copy:
        for info in book.infolist():
            copy.writestr(info, data if info.filename == name else book.read(info))
    return target


def test_an_entity_in_the_workbook_part_is_refused_naming_the_part(tmp_path: Path) -> None:
    template = tmp_path / "t.xlsx"
    assert run("build", "template", "-o", template, "--rows", "20").exit_code == 0
    hostile = with_part(template, tmp_path / "xxe.xlsx", "xl/workbook.xml", XXE)
    for command in (["verify", hostile], ["report", hostile, "-o", tmp_path / "r.html"],
                    ["predict", hostile, "--concurrency", "1", "--max-tokens", "50"]):
        refused(run(*command), f"{hostile}: refused: part xl/workbook.xml declares a DTD")
    assert not (tmp_path / "r.html").exists()


@pytest.mark.parametrize("data", [
    XXE.decode("ascii").encode("utf-16"),  # UTF-16 with its BOM: an XML parser reads it
    XXE.decode("ascii").encode("utf-16-le"),
])
def test_a_dtd_in_utf16_is_refused(tmp_path: Path, data: bytes) -> None:
    with pytest.raises(InputError, match="part xl/custom.xml declares a DTD"):
        check_xlsx(package(tmp_path / "u16.xlsx", {"xl/custom.xml": data}))


@pytest.mark.parametrize("data, problem", [
    (XXE.decode("ascii").encode("utf-32"), "is XML in an encoding other than UTF-8 or UTF-16"),
    (XXE.decode("ascii").encode("cp500"), "is XML in an encoding other than UTF-8 or UTF-16"),  # EBCDIC
    (b'<?xml version="1.0" encoding="UTF-7"?><workbook/>', "declares the encoding 'UTF-7'"),
])
def test_xml_in_an_encoding_that_could_hide_a_dtd_is_refused(tmp_path: Path, data: bytes, problem: str) -> None:
    with pytest.raises(InputError, match=f"part xl/custom.xml {problem}"):
        check_xlsx(package(tmp_path / "enc.xlsx", {"xl/custom.xml": data}))


# --- 15: files that are not regular files -----------------------------------------------------

@pytest.mark.parametrize("command", [["verify", "/dev/zero"], ["report", "/dev/urandom", "-o", "{out}"],
                                     ["verify", "{fifo}"]])
def test_a_device_or_fifo_is_refused_before_reading(tmp_path: Path, command: list[str]) -> None:
    fifo = tmp_path / "pipe.xlsx"
    os.mkfifo(fifo)  # opening it would block until someone writes
    args = [part.format(out=tmp_path / "r.html", fifo=fifo) for part in command]
    done = subprocess.run([SCM_XL, *args], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert "not a regular file" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "r.html").exists()


# --- 12: report and compare check a workbook as verify does ---------------------------------

def test_report_and_compare_refuse_a_bomb(tmp_path: Path) -> None:
    bomb = one_sheet(tmp_path / "bomb.xlsx", b" " * (20 * 1024 * 1024))
    base = tmp_path / "base.csv"
    for command in (["report", bomb, "-o", tmp_path / "r.html"], ["compare", ARTICLE, bomb],
                    ["compare", bomb, ARTICLE], ["compare", "--save-baseline", base, bomb]):
        start = time.perf_counter()
        refused(run(*command), "is it a zip bomb?")
        assert time.perf_counter() - start < 10
    assert not (tmp_path / "r.html").exists() and not base.exists()


def test_report_and_compare_refuse_a_merged_range_bomb(tmp_path: Path) -> None:
    bomb = one_sheet(tmp_path / "merge.xlsx", b"",
                     after=b'<mergeCells count="1"><mergeCell ref="A1:XFD1048576"/></mergeCells>')
    refused(run("report", bomb, "-o", tmp_path / "r.html"), "is it a cell bomb?")
    refused(run("compare", ARTICLE, bomb), "is it a cell bomb?")


# --- 10: a cell comment and the default engine -------------------------------------------

def test_a_commented_workbook_verifies_with_the_default_engine(article: Path, tmp_path: Path) -> None:
    commented = tmp_path / "commented.xlsx"
    wb = openpyxl.load_workbook(article)
    wb[USER_SHEET]["A1"].comment = Comment("checked on Monday", "me")
    wb.worksheets[0]["A1"].comment = Comment("the summary", "me")
    wb.save(commented)
    with zipfile.ZipFile(commented) as book:  # openpyxl names the comments part by an absolute target
        rels = [book.read(n) for n in book.namelist() if n.startswith("xl/worksheets/_rels/")]
    assert any(b'Target="/xl/comments/' in r for r in rels)

    result = run("verify", commented)
    assert result.exit_code == 0, result.output
    assert "verified: " in result.stdout and "ironcalc" in result.stdout

    out = tmp_path / "refilled.xlsx"
    result = run("fill", ARTICLE, "--workbook", commented, "-o", out)
    assert result.exit_code == 0, result.output
    assert books.worksheet(out, USER_SHEET)["A1"].comment.text == "checked on Monday"


# --- 11: the typed-over cell leads --------------------------------------------------------

def test_the_typed_over_cell_leads_the_mismatches_and_the_rest_are_counted(article: Path, tmp_path: Path) -> None:
    broken = tmp_path / "typed.xlsx"
    # the calibration sheet: its C13 feeds the summary and the derivation
    calibration = books.outline(article).sheetnames[2]
    formula = books.sheet(article, calibration, formulas=True)["C13"].value
    assert isinstance(formula, str) and formula.startswith("=")
    books.retyped(article, broken, calibration, {"C13": 123.0})

    result = run("verify", broken)
    assert result.exit_code == 1, result.output
    lines = result.stdout[result.stdout.index("MISMATCH: "):].splitlines()
    total = int(lines[0].split()[1])
    assert total > 21  # more than the list shows
    assert lines[1] == "  1 formula cell typed over (restore its formula, or refill the workbook):"
    assert lines[2].startswith(f"  '{calibration}'!C13 (not a formula: the cell was typed over), reference ")
    assert lines[3] == f"  {total - 1} other cells disagree (they may follow from the cell above):"
    assert lines[24] == f"  ... and {total - 1 - 20} more (every cell: the JSON report, --json)"


def test_a_workbook_with_broken_xml_is_a_clean_error(tmp_path: Path) -> None:
    """Malformed (not hostile) XML in a part openpyxl parses is exit 2 naming the file, no traceback."""
    import zipfile

    from click.testing import CliRunner

    from scm_xl.cli import main

    source = tmp_path / "good.xlsx"
    assert CliRunner().invoke(main, ["build", "template", "-o", str(source)]).exit_code == 0
    broken = tmp_path / "broken.xlsx"
    with zipfile.ZipFile(source) as zin, zipfile.ZipFile(broken, "w") as zout:
        for item in zin.infolist():
            data = zin.read(item.filename)
            zout.writestr(item, b"<workbook><sheets><sheet" if item.filename == "xl/workbook.xml" else data)
    result = CliRunner().invoke(main, ["verify", str(broken)])
    assert result.exit_code == 2 and "Traceback" not in result.output, result.output
    assert "not a readable .xlsx workbook" in result.output and str(broken) in " ".join(result.output.split())


@pytest.mark.parametrize("command", [("verify",), ("fill", "--workbook")])
def test_a_results_csv_given_where_a_workbook_goes_is_refused_with_the_hint(tmp_path: Path,
                                                                          command: tuple[str, ...]) -> None:
    """openpyxl refuses any name but .xlsx/.xlsm/.xltx/.xltm with its own exception (a traceback once)."""
    csv = tmp_path / "results.csv"
    shutil.copy(ARTICLE, csv)
    args = [*command, csv] if command == ("verify",) else ["fill", ARTICLE, "--workbook", csv, "-o",
                                                           tmp_path / "out.xlsx"]
    result = run(*args, "-q")
    refused(result, str(csv), "not an .xlsx workbook", "scm-xl fill")
    assert not (tmp_path / "out.xlsx").exists()
