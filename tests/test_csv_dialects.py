"""CSVs as spreadsheet programs write them: encodings, delimiters, decimal commas.

The files under tests/data/dialects are bytes LibreOffice wrote and the bytes Excel writes
for its save formats (tests/data/dialects/GENERATED.md says how each was made).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from scm_xl.cli import main
from scm_xl.errors import InputError
from scm_xl.results import read_results, read_results_many

DIALECTS = Path(__file__).parent / "data" / "dialects"
CHINESE = "通义千问-7B"

CASES = [
    # file, encoding, delimiter, model
    ("libreoffice_utf8.csv", "utf-8", ",", CHINESE),
    ("libreoffice_unicode_tab.csv", "utf-16", "\t", CHINESE),
    ("libreoffice_semicolon.csv", "utf-8", ";", CHINESE),
    ("libreoffice_gb18030.csv", "gb18030", ",", CHINESE),
    ("excel_csv_utf8.csv", "utf-8", ",", CHINESE),
    ("excel_csv_gbk.csv", "gb18030", ",", CHINESE),
    ("excel_unicode_text.txt", "utf-16", "\t", CHINESE),
    ("excel_csv_semicolon_decimal_comma.csv", "cp1252", ";", "Qwen2.5-7B"),
]


@pytest.mark.parametrize("name, encoding, delimiter, model", CASES, ids=[c[0] for c in CASES])
def test_each_dialect_reads_the_same_rows(name: str, encoding: str, delimiter: str, model: str) -> None:
    table = read_results(DIALECTS / name)
    assert (table.encoding, table.delimiter) == (encoding, delimiter)
    assert [(r.exp_id, r.model, r.concurrency, r.total_requests, r.total_time_s, r.total_output_tokens)
            for r in table.rows] == [("E01", model, 1, 10, 0.55, 25), ("E02", model, 2, 20, 0.42, 50),
                                     ("E03", model, 4, 40, 0.71, 100)]
    note = table.rows[2].notes
    assert note in ('逗号, 和引号" 在备注里', 'virgule, et "guillemets"')
    legacy = {"gb18030": "GB18030/GBK", "cp1252": "Windows-1252"}
    # The encoding chosen for a file that is not UTF-8 is named, so a wrong guess can be seen.
    assert table.warnings == ([f"{DIALECTS / name}: not UTF-8; read as {legacy[encoding]} (the \"CSV\" of a "
                               f"{'Chinese' if encoding == 'gb18030' else 'Western'} Windows): check its names, "
                               "or save it from the spreadsheet as \"CSV UTF-8\""] if encoding in legacy else [])


def test_utf16_without_bom(tmp_path: Path) -> None:
    text = (DIALECTS / "excel_unicode_text.txt").read_bytes()[2:].decode("utf-16-le")
    path = tmp_path / "nobom.txt"
    path.write_bytes(text.encode("utf-16-le"))
    assert read_results(path).rows[0].model == CHINESE
    path.write_bytes(text.encode("utf-16-be"))
    assert read_results(path).rows[0].model == CHINESE


def test_decimal_comma_only_in_semicolon_files(tmp_path: Path) -> None:
    header = "exp_id\tmodel\tconcurrency\trequests_per_slot\ttotal_requests\tmax_tokens\ttotal_time_s\t" \
             "total_output_tokens"
    path = tmp_path / "tab.csv"
    path.write_text(header + "\nE01\tm\t1\t10\t10\t50\t0,55\t25\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"tab.csv:2: total_time_s: not a number: \"0,55\" "
                                         r"\(use '.' as the decimal separator\)"):
        read_results(path)
    path = tmp_path / "semi.csv"
    path.write_text(header.replace("\t", ";") + "\nE01;m;1;10;10;50;0,55;25\n", encoding="utf-8")
    assert read_results(path).rows[0].total_time_s == 0.55


def test_several_files_of_several_dialects_merge_with_their_sources(tmp_path: Path) -> None:
    with pytest.raises(InputError) as info:
        read_results_many([DIALECTS / "excel_csv_gbk.csv", DIALECTS / "excel_unicode_text.txt"])
    gbk = DIALECTS / "excel_csv_gbk.csv"
    assert str(info.value) == (f'{DIALECTS / "excel_unicode_text.txt"}:2: exp_id: duplicate exp_id "E01": '
                               f"also in {gbk}:2 (pass --rename-duplicates to keep both, renamed)")
    table = read_results_many([gbk, DIALECTS / "excel_unicode_text.txt"], rename_duplicates=True)
    assert [r.exp_id for r in table.rows] == ["E01", "E02", "E03", "E01@excel_unicode_text",
                                              "E02@excel_unicode_text", "E03@excel_unicode_text"]
    assert {r.source for r in table.rows[:3]} == {str(gbk)}
    assert {r.source for r in table.rows[3:]} == {str(DIALECTS / "excel_unicode_text.txt")}
    assert table.sources == [str(gbk), str(DIALECTS / "excel_unicode_text.txt")]
    assert len([w for w in table.warnings if "renamed" in w]) == 3


def test_same_file_twice_is_refused() -> None:
    path = DIALECTS / "excel_csv_gbk.csv"
    with pytest.raises(InputError, match="given twice"):
        read_results_many([path, path])


def _workbook_rows(path: Path) -> list[tuple[str, str, float]]:
    from scm_xl.workbook.io import read_inputs
    from scm_xl.workbook.registry import load_inputs, read_layout

    wb = load_inputs(path)  # as verify reads them
    layout = read_layout(wb, path)
    return [(row.exp_id, row.model, row.total_time_s) for _, row in read_inputs(wb, layout, path).rows]


@pytest.mark.slow
def test_fill_takes_gbk_utf16_semicolon_and_tab_files_together(tmp_path: Path) -> None:
    """One fill of the four dialects Excel users send: every row lands in the workbook, decoded."""
    files = [DIALECTS / name for name in ("excel_csv_gbk.csv", "excel_unicode_text.txt",
                                          "libreoffice_semicolon.csv", "libreoffice_unicode_tab.csv")]
    out = tmp_path / "all.xlsx"
    result = CliRunner().invoke(main, ["fill", *map(str, files), "-o", str(out), "--rename-duplicates",
                                       "--engine", "ironcalc"])
    assert result.exit_code == 0, result.output
    rows = _workbook_rows(out)
    assert len(rows) == 12
    assert {model for _, model, _ in rows} == {CHINESE}
    assert [t for _, _, t in rows] == [0.55, 0.42, 0.71] * 4
    assert rows[3][0] == "E01@excel_unicode_text"


def test_fill_of_a_workbook_says_what_to_do(tmp_path: Path) -> None:
    book = tmp_path / "article.xlsx"
    book.write_bytes(b"PK\x03\x04" + b"\0" * 60)
    result = CliRunner().invoke(main, ["fill", str(book)])
    assert result.exit_code == 2
    assert "this is a workbook (.xlsx), not a results CSV" in result.output
    assert f"scm-xl verify {book}" in result.output and f"--workbook {book}" in result.output
    assert "Traceback" not in result.output
