"""The results CSV: reading, validation errors (path:line: column: problem), writing."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

from scm_xl.errors import InputError
from scm_xl.results import (
    RESULT_COLUMNS,
    ResultRow,
    append_result,
    read_results,
    write_results,
)
from support.paths import ARTICLE

DATA = Path(__file__).parent / "data"
EXAMPLES = Path(__file__).parent.parent / "examples"
HEADER = ("exp_id,model,concurrency,requests_per_slot,total_requests,max_tokens,"
          "total_time_s,total_output_tokens")
GOOD = "E01,Qwen2.5-7B,1,10,10,50,0.55,25"


def write(tmp_path: Path, text: str, name: str = "results.csv") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def error_of(path: Path) -> str:
    with pytest.raises(InputError) as info:
        read_results(path)
    return str(info.value)


def raw_row(**changes: object) -> ResultRow:
    """A ResultRow from its fields as given (no TPS arithmetic, unlike support.rows.make_row): the
    validation tests set any field to anything."""
    values: dict[str, object] = dict(
        exp_id="E01", model="Qwen2.5-7B", concurrency=1, requests_per_slot=10,
        total_requests=10, max_tokens=50, total_time_s=0.55, total_output_tokens=25)
    values.update(changes)
    return ResultRow(**values)  # type: ignore[arg-type]


# --- the article's examples ---------------------------------------------------

def test_article_example_loads_with_recomputed_tps() -> None:
    table = read_results(ARTICLE)
    assert table.warnings == []
    assert [row.exp_id for row in table.rows] == [f"E0{n}" for n in range(1, 8)]
    first = table.rows[0]
    assert first.tps == pytest.approx(45.454545, rel=1e-6)
    assert (first.model, first.concurrency, first.max_tokens, first.line) == ("Qwen2.5-7B", 1, 50, 2)
    assert first.notes == "from the article's table"
    assert table.rows[6].tps == pytest.approx(200 / 1.57)


def test_chinese_example_matches_english_example() -> None:
    english = read_results(ARTICLE)
    chinese = read_results(EXAMPLES / "article_qwen2.5-7b_zh.csv")
    assert chinese.warnings == []
    assert chinese.rows[0].tps == pytest.approx(45.454545, rel=1e-6)
    assert chinese.rows == [dataclasses.replace(row, notes=None) for row in english.rows]


# --- header handling ----------------------------------------------------------

def test_bom_crlf_and_header_case_and_spaces() -> None:
    table = read_results(DATA / "results_bom_crlf.csv")
    assert table.warnings == []
    assert [(row.exp_id, row.concurrency, row.line) for row in table.rows] == [("E01", 1, 2), ("E02", 2, 3)]


def test_full_width_parentheses_in_chinese_header() -> None:
    table = read_results(DATA / "results_zh_fullwidth.csv")
    assert table.rows[0].total_time_s == 0.55


def test_error_names_the_chinese_header() -> None:
    path = DATA / "results_zh_bad_time.csv"
    assert error_of(path) == f"{path}:3: 总耗时(s): must be positive, got 0"


def test_missing_required_column_lists_accepted_headers(tmp_path: Path) -> None:
    path = write(tmp_path, "exp_id,model,concurrency,requests_per_slot,total_requests,max_tokens\n"
                           "E01,m,1,10,10,50\n")
    assert error_of(path) == (
        f"{path}:1: missing required columns total_time_s, total_output_tokens (accepted headers: "
        "total_time_s or 总耗时(s) or 总耗时（s）; total_output_tokens or 总输出Token)")


def test_duplicate_column(tmp_path: Path) -> None:
    path = write(tmp_path, HEADER + ",并发数\n" + GOOD + ",1\n")
    assert error_of(path) == (
        f'{path}:1: 并发数: duplicate column: "concurrency" (column 3) is also concurrency')


def test_warnings_for_unknown_column_tps_and_total_requests() -> None:
    path = DATA / "results_warnings.csv"
    table = read_results(path)
    assert table.warnings == [
        f'{path}:1: ignored column "operator"',
        f"{path}:2: tps: given 12.3 but total_output_tokens/total_time_s = 45.45; "
        "using the recomputed value",
        f"{path}:3: total_requests: 25 is not concurrency x requests_per_slot = 2 x 10 = 20",
    ]
    assert table.rows[0].tps == pytest.approx(25 / 0.55)


def test_tps_within_rounding_does_not_warn(tmp_path: Path) -> None:
    path = write(tmp_path, HEADER + ",tps\n" + GOOD + ",45.45\nE02,m,1,10,10,50,0.001,0,0.005\n")
    assert read_results(path).warnings == []


# --- text cells ---------------------------------------------------------------

def test_text_cells_are_read_verbatim() -> None:
    table = read_results(DATA / "results_text_cells.csv")
    first, second, third = table.rows
    assert first.gpu == "H200, 141 GB"
    assert first.notes == 'said "hi", then\nwent on'
    assert first.override == "exclude"
    assert (second.model, second.override, second.notes) == ("通义千问-7B", "include", "=SUM(A1:A2)")
    assert third.notes == "+1 @home -x"
    assert [row.line for row in table.rows] == [2, 4, 5]  # E01's note spans lines 2-3


@pytest.mark.parametrize("word, expected", [
    ("include", "include"), ("IN", "include"), ("1", "include"), ("Yes", "include"),
    ("纳入", "include"), ("exclude", "exclude"), ("Ex", "exclude"), ("0", "exclude"),
    ("no", "exclude"), ("剔除", "exclude"), ("", None), ("  ", None),
])
def test_override_words(tmp_path: Path, word: str, expected: str | None) -> None:
    path = write(tmp_path, HEADER + ",override\n" + GOOD + f",{word}\n")
    assert read_results(path).rows[0].override == expected


# --- errors -------------------------------------------------------------------

ROW_ERRORS = [
    # (data row, extra header columns, expected text after "path:2: ")
    ("E01,,1,10,10,50,0.55,25", "", "model: required value is blank"),
    (" ,m,1,10,10,50,0.55,25", "", "exp_id: required value is blank"),
    ("E01,m,one,10,10,50,0.55,25", "", 'concurrency: not a number: "one"'),
    ("E01,m,1,10,10,50,1,5,25", "", "expected 8 fields (as in the header) but found 9"),
    ('E01,m,1,10,10,50,"1,5",25', "",
     "total_time_s: not a number: \"1,5\" (use '.' as the decimal separator)"),
    ('E01,m,1,10,10,50,0.55,"1,234"', "",
     "total_output_tokens: not a number: \"1,234\" (the comma looks like a thousands separator: "
     "write 1234 without it; if it is a decimal comma, use '.')"),
    ("E01,m,1,10,10,50,1e-320,25", "",
     "total_time_s: 1e-320 is closer to zero than a spreadsheet can store (it would read as 0)"),
    ("E01,m,1,10,10,50,3e-308,10000000000", "",
     "total_time_s: total_output_tokens / total_time_s = 10000000000 / 3e-308 is not a finite TPS; "
     "total_time_s is too small"),
    ("E01\x01,m,1,10,10,50,0.55,25", "",
     "exp_id: control character U+0001 at character 4: a spreadsheet cell cannot hold it; remove it"),
    ("E01,m,1,10,10,50,0.55,25,bad \x01 note", ",notes",
     "notes: control character U+0001 at character 5: a spreadsheet cell cannot hold it; remove it"),
    ("E01,m,1,10,10,50,0.55,25," + "x" * 32_768, ",notes",
     "notes: text of 32,768 characters: a spreadsheet cell holds at most 32,767, so it would be cut; "
     "shorten it"),
    ("E01," + "m" * 32_768 + ",1,10,10,50,0.55,25", "",
     "model: text of 32,768 characters: a spreadsheet cell holds at most 32,767, so it would be cut; "
     "shorten it"),
    ("E01,m,1,10,10,50,0.55," + "9" * 50 + "x", "",
     f'total_output_tokens: not a number: "{"9" * 40}..."'),
    ("E01,m,2.5,10,10,50,0.55,25", "", 'concurrency: must be a whole number, got "2.5"'),
    ("E01,m,2.0,10,20,50,0.55,25,1.5", ",ok_requests",
     'ok_requests: must be a whole number, got "1.5"'),
    ("E01,m,0,10,10,50,0.55,25", "", "concurrency: must be positive, got 0"),
    ("E01,m,1,0,10,50,0.55,25", "", "requests_per_slot: must be positive, got 0"),
    ("E01,m,1,10,-10,50,0.55,25", "", "total_requests: must be positive, got -10"),
    ("E01,m,1,10,10,0,0.55,25", "", "max_tokens: must be positive, got 0"),
    ("E01,m,1,10,10,50,0,25", "", "total_time_s: must be positive, got 0"),
    ("E01,m,1,10,10,50,0.55,-1", "", "total_output_tokens: must not be negative, got -1"),
    ("E01,m,1,10,10,50,0.55,25,-2", ",failed_requests", "failed_requests: must not be negative, got -2"),
    ("E01,m,1,10,10,50,0.55,25,-5", ",prompt_tokens", "prompt_tokens: must not be negative, got -5"),
    ("E01,m,1,10,10,50,nan,25", "", 'total_time_s: not a finite number: "nan"'),
    ("E01,m,1,10,10,50,-Infinity,25", "", 'total_time_s: not a finite number: "-Infinity"'),
    ("E01,m,1,10,10,50,1e400,25", "", 'total_time_s: not a finite number: "1e400"'),
    ("E01,m,1,10,10,50,0.55,25,inf", ",tps", 'tps: not a finite number: "inf"'),
    ("E01,Qwen*,1,10,10,50,0.55,25", "",
     "model: model name \"Qwen*\" contains '*', which acts as a wildcard in spreadsheet "
     "COUNTIFS criteria; rename the model"),
    ("E01,Qwen?7B,1,10,10,50,0.55,25", "",
     "model: model name \"Qwen?7B\" contains '?', which acts as a wildcard in spreadsheet "
     "COUNTIFS criteria; rename the model"),
    ("E01,a~b,1,10,10,50,0.55,25", "",
     "model: model name \"a~b\" contains '~', which acts as a wildcard in spreadsheet "
     "COUNTIFS criteria; rename the model"),
    ("E01,>big,1,10,10,50,0.55,25", "",
     "model: model name \">big\" starts with '>', which acts as a comparison operator in "
     "spreadsheet COUNTIFS criteria; rename the model"),
    ("E01,m,1,10,10,50,0.55,25,maybe", ",override",
     'override: unrecognised override "maybe": use include or exclude '
     "(also accepted: in/ex, 1/0, yes/no, 纳入/剔除)"),
    ("E01,m,2,10,20,50,0.55,25,15,4,2", ",ok_requests,failed_requests,rate_limited_requests",
     "total_requests: ok_requests + failed_requests + rate_limited_requests = 21 "
     "exceeds total_requests = 20"),
]


@pytest.mark.parametrize("data_row, extra_header, expected", ROW_ERRORS)
def test_row_errors(tmp_path: Path, data_row: str, extra_header: str, expected: str) -> None:
    path = write(tmp_path, HEADER + extra_header + "\n" + data_row + "\n")
    assert error_of(path) == f"{path}:2: {expected}"


def test_whole_file_is_validated_before_returning(tmp_path: Path) -> None:
    path = write(tmp_path, HEADER + "\n" + GOOD + "\nE02,m,1,10,10,50,0.55,25\n\nE03,m,x,10,10,50,1,1\n")
    assert error_of(path) == f'{path}:5: concurrency: not a number: "x"'


def test_duplicate_exp_id_names_first_line(tmp_path: Path) -> None:
    path = write(tmp_path, HEADER + "\n" + GOOD + "\nE02,m,1,10,10,50,1,1\nE01,m,2,10,20,50,1,1\n")
    assert error_of(path) == f'{path}:4: exp_id: duplicate exp_id "E01" (first used on line 2)'


def test_zero_output_tokens_is_allowed(tmp_path: Path) -> None:
    path = write(tmp_path, HEADER + "\nE01,m,1,10,10,50,0.55,0\n")
    assert read_results(path).rows[0].tps == 0


def test_whole_numbers_written_as_floats_are_accepted(tmp_path: Path) -> None:
    path = write(tmp_path, HEADER + "\nE01,m,2.0,1e1,20,50,1,25\n")
    row = read_results(path).rows[0]
    assert (row.concurrency, row.requests_per_slot) == (2, 10)


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "nope.csv"
    assert error_of(path) == f"{path}: file not found"


def test_directory_is_unreadable(tmp_path: Path) -> None:
    assert error_of(tmp_path) == f"{tmp_path}: not a regular file (a folder): give the path of a file saved on disk"


@pytest.mark.parametrize("text", ["", "\n\n", "  \n"])
def test_empty_file(tmp_path: Path, text: str) -> None:
    path = write(tmp_path, text)
    assert error_of(path) == f"{path}:1: empty file: no header row"


def test_header_without_data_rows(tmp_path: Path) -> None:
    path = write(tmp_path, HEADER + "\n\n")
    assert error_of(path) == f"{path}:1: no data rows"


def test_a_workbook_is_named_as_one(tmp_path: Path) -> None:
    path = tmp_path / "results.xlsx"
    path.write_bytes(b"PK\x03\x04\x14\x00\x06\x00")
    assert error_of(path) == (f"{path}: this is a workbook (.xlsx), not a results CSV: to check it run "
                              f"`scm-xl verify {path}`; to add a CSV's rows to it run "
                              f"`scm-xl fill RESULTS.csv --workbook {path}`")


def test_binary_file(tmp_path: Path) -> None:
    path = tmp_path / "results.csv"
    path.write_bytes(HEADER.encode() + b"\nE01,m,1\x00\x00,10,10,50,1,1\n")
    assert error_of(path) == f"{path}:2: not a CSV text file (it contains NUL bytes)"


def test_ambiguous_legacy_bytes_name_the_line(tmp_path: Path) -> None:
    # Evidence both ways: C4 E3 alone in a cell is the common hanzi 你, between Latin letters the
    # accented pair "Äã"; the reader does not guess.
    path = tmp_path / "results.csv"
    path.write_bytes((HEADER + ",notes\n" + GOOD + ",ok\n").encode() + GOOD.replace("1", "2").encode()
                     + b",\xc4\xe3 a\xc4\xe3b\n")
    assert error_of(path) == (f'{path}:3: not a CSV in UTF-8, UTF-16, GB18030/GBK or Windows-1252 (its bytes do '
                              'not show clearly which, if any): save it from the spreadsheet as "CSV UTF-8"')


def test_unclosed_quote(tmp_path: Path) -> None:
    path = write(tmp_path, HEADER + ",notes\n" + GOOD + ',"never closed\n')
    assert error_of(path) == f"{path}:2: bad CSV: unexpected end of data"


# --- rows built in code ---------------------------------------------------------

def test_row_built_in_code_is_checked() -> None:
    with pytest.raises(InputError) as info:
        raw_row(concurrency=0)
    assert str(info.value) == "concurrency: must be positive, got 0"
    with pytest.raises(InputError):
        raw_row(model="gpt-4o*")
    with pytest.raises(InputError):
        raw_row(total_time_s=float("nan"))


def test_row_normalises_text_and_override() -> None:
    row = raw_row(exp_id=" E01 ", model="Qwen ", gpu=" ", override=" Ex ", notes="")
    assert (row.exp_id, row.model, row.gpu, row.override, row.notes) == ("E01", "Qwen", None, "exclude", None)
    assert row.line == 0


def test_to_csv_dict() -> None:
    row = raw_row(total_time_s=2.0, latency_p50_s=0.1 + 0.2, ttft_p99_s=1e-7, gpu="H200")
    cells = row.to_csv_dict()
    assert list(cells) == list(RESULT_COLUMNS)
    assert cells["total_time_s"] == "2"
    assert cells["latency_p50_s"] == "0.30000000000000004"
    assert cells["ttft_p99_s"] == "1e-07"
    assert cells["tps"] == "12.5"
    assert cells["concurrency"] == "1"
    assert cells["repeat"] == "" and cells["notes"] == ""


# --- writing ------------------------------------------------------------------

def full_rows() -> list[ResultRow]:
    return [
        raw_row(repeat=1, ok_requests=9, failed_requests=0, rate_limited_requests=1,
                 latency_p50_s=0.1 + 0.2, latency_p95_s=0.9, latency_p99_s=1.25,
                 ttft_p50_s=0.05, ttft_p95_s=0.08, ttft_p99_s=1e-7, mean_itl_s=0.0123456789,
                 prompt_tokens=128, gpu="H200, 141 GB", override="纳入",
                 notes='quoted "x", comma\nnewline, 中文, =SUM(A1)'),
        raw_row(exp_id="E02", model="通义千问", concurrency=2, total_requests=20,
                 total_time_s=3.0, total_output_tokens=0, notes="-starts with a dash"),
    ]


def test_write_then_read_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "out.csv"
    rows = full_rows()
    write_results(path, rows)
    table = read_results(path)
    assert table.rows == rows
    assert table.warnings == []
    assert [row.line for row in table.rows] == [2, 4]
    assert path.read_text(encoding="utf-8").splitlines()[0] == ",".join(RESULT_COLUMNS)


def test_write_replaces_atomically_and_leaves_no_temp_file(tmp_path: Path) -> None:
    path = write(tmp_path, "old content\n", name="out.csv")
    os.chmod(path, 0o640)
    write_results(path, full_rows())
    assert os.listdir(tmp_path) == ["out.csv"]
    assert path.stat().st_mode & 0o777 == 0o640
    assert len(read_results(path).rows) == 2


def test_write_rejects_duplicate_exp_id(tmp_path: Path) -> None:
    path = tmp_path / "out.csv"
    with pytest.raises(InputError) as info:
        write_results(path, [raw_row(), raw_row()])
    assert str(info.value) == f'{path}: exp_id: duplicate exp_id "E01"'
    assert not path.exists()


def test_write_into_missing_directory(tmp_path: Path) -> None:
    path = tmp_path / "missing" / "out.csv"
    with pytest.raises(InputError) as info:
        write_results(path, full_rows())
    assert str(info.value) == f"{path}: cannot write file: No such file or directory"


def test_append_creates_header_then_rows(tmp_path: Path) -> None:
    path = tmp_path / "out.csv"
    first, second = full_rows()
    append_result(path, first)
    append_result(path, second)
    assert read_results(path).rows == [first, second]


def test_append_to_empty_file_writes_header(tmp_path: Path) -> None:
    path = write(tmp_path, "")
    append_result(path, raw_row())
    assert read_results(path).rows == [raw_row()]


def test_append_after_interrupted_line_starts_a_new_line(tmp_path: Path) -> None:
    path = tmp_path / "out.csv"
    append_result(path, raw_row())
    with open(path, "a", encoding="utf-8") as handle:
        handle.write("E02,m,1")  # the collector died here
    append_result(path, raw_row(exp_id="E03"))
    lines = path.read_text(encoding="utf-8").splitlines()
    assert lines[2] == "E02,m,1"
    assert lines[3].startswith("E03,")
    assert error_of(path) == f"{path}:3: expected {len(RESULT_COLUMNS)} fields (as in the header) but found 3"


def test_append_rejects_duplicate_exp_id(tmp_path: Path) -> None:
    path = tmp_path / "out.csv"
    append_result(path, raw_row())
    with pytest.raises(InputError) as info:
        append_result(path, raw_row())
    assert str(info.value) == f'{path}: exp_id: duplicate exp_id "E01": already on line 2'


def test_append_rejects_a_foreign_header(tmp_path: Path) -> None:
    path = EXAMPLES / "article_qwen2.5-7b_zh.csv"
    copy = write(tmp_path, path.read_text(encoding="utf-8"))
    with pytest.raises(InputError) as info:
        append_result(copy, raw_row(exp_id="E08"))
    assert str(info.value).startswith(
        f"{copy}:1: cannot append: the header is not scm-xl's canonical header (exp_id,")


def test_the_workbook_takes_its_input_columns_from_here() -> None:
    """One home for the results columns: the workbook's raw-data inputs are these."""
    from scm_xl.results import NUMERIC_INPUT_COLUMNS, REQUIRED_COLUMNS
    from scm_xl.workbook import layout

    assert layout.REQUIRED_INPUT_KEYS == REQUIRED_COLUMNS
    assert layout.NUMERIC_INPUT_KEYS == NUMERIC_INPUT_COLUMNS
