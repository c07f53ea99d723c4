"""Hostile or mistaken results CSVs (issue 20's review): each is refused with file, line and
column and exit 2, or read right, never half-read and never with a traceback.

European number formats, Windows-1252 read as GB18030, impossible token counts, levels
beyond what the workbook's cell codes hold, endless inputs, overflowing numbers, a renamed
duplicate exp_id that grows too long, and `collect --resume` on a CSV re-saved with a BOM.
Every file is built here; the endless ones are the system's own devices.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from scm_xl.cli import main
from scm_xl.errors import InputError
from scm_xl.results import (
    CHINESE_HEADERS, MAX_CELL_CODE, MAX_RESULTS_BYTES, MAX_TPS, MAX_WHOLE_NUMBER, MIN_TPS, REQUIRED_COLUMNS,
    read_results, read_results_many,
)

HEADER = ",".join(REQUIRED_COLUMNS)
SEMI_HEADER = ";".join(REQUIRED_COLUMNS)
SCM_XL = str(Path(sys.executable).with_name("scm-xl"))


def write(tmp_path: Path, text: str, name: str = "results.csv", encoding: str = "utf-8") -> Path:
    path = tmp_path / name
    path.write_bytes(text.encode(encoding))
    return path


def error_of(path: Path) -> str:
    with pytest.raises(InputError) as info:
        read_results(path)
    return str(info.value)


def run(*args: object) -> Result:
    return CliRunner().invoke(main, [str(a) for a in args])


def refused(result: Result, *parts: str) -> str:
    """Exit 2, `Error: ...` holding every part, no traceback; the error text."""
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert isinstance(result.exception, SystemExit)
    for part in parts:
        assert part in result.stderr, result.stderr
    return result.stderr


# --- 2. European number formats ---------------------------------------------------------------

def test_a_decimal_comma_file_reads_dots_as_thousands(tmp_path: Path) -> None:
    path = write(tmp_path, SEMI_HEADER + "\nE01;m;1;1000;1.000;50;1,5;2.000\nE02;m;2;10;20;50.000;1.234,5;1.000.000\n")
    first, second = read_results(path).rows
    assert (first.total_requests, first.total_time_s, first.total_output_tokens) == (1000, 1.5, 2000)
    assert (second.total_time_s, second.total_output_tokens) == (1234.5, 1_000_000)


def test_a_semicolon_file_with_decimal_points_keeps_them(tmp_path: Path) -> None:
    path = write(tmp_path, SEMI_HEADER + "\nE01;m;1;10;10;50;0.55;25\nE02;m;2;10;20;50;1.234;50\n")
    assert [row.total_time_s for row in read_results(path).rows] == [0.55, 1.234]


def test_a_dot_that_could_be_either_is_refused_with_its_place(tmp_path: Path) -> None:
    path = write(tmp_path, SEMI_HEADER + "\nE01;m;1;10;10;50;3;25\nE02;m;2;10;20;50;1.234;2.000\n")
    message = error_of(path)
    assert message.startswith(f"{path}:3: total_time_s: ambiguous number \"1.234\"")
    assert "1234" in message and "thousands" in message


def test_decimal_commas_and_decimal_points_in_one_file_are_refused(tmp_path: Path) -> None:
    path = write(tmp_path, SEMI_HEADER + "\nE01;m;1;10;10;50;0,55;25\nE02;m;2;10;20;50;0.42;50\n")
    message = error_of(path)
    assert message.startswith(f"{path}:3: total_time_s: \"0.42\" writes \".\" as the decimal point, "
                              "but \"0,55\" (line 2, total_time_s) writes \",\" as the decimal point")


def test_fill_refuses_the_ambiguous_file(tmp_path: Path) -> None:
    path = write(tmp_path, SEMI_HEADER + "\nE01;m;1;10;10;50;1;2.000\nE02;m;2;10;20;50;1;4.000\n")
    refused(run("fill", path, "-o", tmp_path / "out.xlsx", "--engine", "ironcalc"),
            f"{path}:2: total_output_tokens: ambiguous number \"2.000\"")
    assert not (tmp_path / "out.xlsx").exists()


# The same in comma and tab files, whose decimals are written with ".": a whole-number column's
# "2.000" (2, or 2000 with "." between thousands) was read as 2 without a word.

@pytest.mark.parametrize("delimiter", [",", "\t"])
def test_a_whole_number_with_a_dot_in_a_comma_or_tab_file_is_refused_when_nothing_shows_which(
        tmp_path: Path, delimiter: str) -> None:
    header = delimiter.join(REQUIRED_COLUMNS)
    path = write(tmp_path, header + "\n" + "\n".join(delimiter.join(cells) for cells in (
        ["E01", "m", "1", "10", "10", "50", "3", "250"], ["E02", "m", "2", "10", "20", "50", "4", "2.000"])) + "\n")
    message = error_of(path)
    assert message.startswith(f"{path}:3: total_output_tokens: ambiguous number \"2.000\": it is 2 with \".\" as "
                              "the decimal point, 2000 with \".\" between thousands"), message
    refused(run("fill", path, "-o", tmp_path / "out.xlsx", "--engine", "ironcalc"),
            f"{path}:3: total_output_tokens: ambiguous number \"2.000\"")
    assert not (tmp_path / "out.xlsx").exists()


def test_a_comma_file_whose_other_numbers_show_the_convention_reads_dotted_whole_numbers_by_it(
        tmp_path: Path) -> None:
    # decimals elsewhere: "." is the decimal point, so 2.000 is 2 (as a semicolon file reads it)
    path = write(tmp_path, HEADER + "\nE01,m,1,10,10,50,0.55,25\nE02,m,2,10,20,50,0.6,2.000\n")
    assert [row.total_output_tokens for row in read_results(path).rows] == [25, 2]
    # "." between thousands elsewhere (12.345.678 reads no other way): 2.000 is 2000
    path = write(tmp_path, HEADER + "\nE01,m,1,1.000,1.000,50.000,3,2.000\nE02,m,2,10,20,50.000,4,1.000.000\n")
    first, second = read_results(path).rows
    assert (first.requests_per_slot, first.max_tokens, first.total_output_tokens) == (1000, 50_000, 2000)
    assert second.total_output_tokens == 1_000_000
    # both in one file: refused, naming both
    path = write(tmp_path, HEADER + "\nE01,m,1,10,10,50,0.55,25\nE02,m,2,10,20,50000,4,12.345.678\n")
    assert error_of(path).startswith(f"{path}:3: total_output_tokens: \"12.345.678\" writes \",\" as the decimal "
                                     "point and \".\" between thousands, but \"0.55\" (line 2, total_time_s) "
                                     "writes \".\" as the decimal point")
    # a time with three decimals is a time: nothing to refuse in a comma file
    path = write(tmp_path, HEADER + "\nE01,m,1,10,10,50,1.234,25\n")
    assert read_results(path).rows[0].total_time_s == 1.234


# --- 3. legacy encodings ----------------------------------------------------------------------

def test_windows_1252_pair_of_accents_is_not_read_as_chinese(tmp_path: Path) -> None:
    path = write(tmp_path, HEADER + "\nE01,Größe-7B,1,10,10,50,0.55,25\n", encoding="cp1252")
    table = read_results(path)
    assert table.rows[0].model == "Größe-7B"
    assert table.encoding == "cp1252"
    assert any("Windows-1252" in warning and str(path) in warning for warning in table.warnings)


def test_gbk_chinese_headers_and_names_still_read(tmp_path: Path) -> None:
    chinese = {canonical: header for header, canonical in reversed(list(CHINESE_HEADERS.items()))}
    header = ",".join(chinese.get(column, column) for column in REQUIRED_COLUMNS)
    for encoding in ("gbk", "gb18030"):
        rows = "\nE01,通义千问-7B,1,10,10,50,0.55,25\nE02,Qwen中文版,2,10,20,50,0.6,50\n"
        path = write(tmp_path, header + rows, name=f"{encoding}.csv", encoding=encoding)
        table = read_results(path)
        assert [row.model for row in table.rows] == ["通义千问-7B", "Qwen中文版"]
        assert table.encoding == "gb18030"
        assert any("GB18030" in warning for warning in table.warnings)


WESTERN = ["café crème", "Société Générale", "Müller", "Übergröße", "señor año", "30°C", "Zürich – Genève",
           "CRÉÉE", "première"]
CHINESE = ["深度求索", "鲲鹏", "Qwen2.5-7B-指令版", "测试，第一轮", "中", "Qwen中文", "模型A", "书生·浦语", "Qwen鲲鹏"]


def test_real_names_in_each_legacy_encoding_read_right(tmp_path: Path) -> None:
    for number, (name, encoding) in enumerate([(n, "cp1252") for n in WESTERN] + [(n, "gbk") for n in CHINESE]):
        path = write(tmp_path, HEADER + f"\nE01,{name},1,10,10,50,0.55,25\n", name=f"{number}.csv", encoding=encoding)
        assert read_results(path).rows[0].model == name


def test_bytes_that_fit_neither_legacy_encoding_well_are_refused(tmp_path: Path) -> None:
    # Five accented capitals in a row: no Western word looks so, and as GBK they are half a character short.
    path = write(tmp_path, HEADER + "\nE01,ÀÁÂÃÄ,1,10,10,50,0.55,25\n", encoding="cp1252")
    assert "save it from the spreadsheet as \"CSV UTF-8\"" in error_of(path)


def test_fill_of_utf8_and_windows_1252_files_of_one_model_calibrates_one_model(tmp_path: Path) -> None:
    utf8 = write(tmp_path, HEADER + "\nA1,Größe-7B,1,10,10,50,0.55,25\nA2,Größe-7B,2,10,20,50,0.6,50\n",
                 name="utf8.csv")
    western = write(tmp_path, HEADER + "\nB1,Größe-7B,4,10,40,50,0.7,100\n", name="western.csv",
                    encoding="cp1252")
    result = run("fill", utf8, western, "-o", tmp_path / "out.xlsx", "--engine", "ironcalc", "--lang", "en")
    assert result.exit_code == 0, result.output
    assert "Windows-1252" in result.stderr
    assert "Gr鲞e" not in result.output
    table = read_results_many([utf8, western])
    assert {row.model for row in table.rows} == {"Größe-7B"}


# --- 4. impossible token counts ---------------------------------------------------------------

def test_more_output_tokens_than_the_requests_allow_are_refused(tmp_path: Path) -> None:
    path = write(tmp_path, HEADER + "\nE01,m,1,10,10,8,0.55,80\nE02,m,2,10,20,8,0.6,1000000000000\n")
    refused(run("fill", path, "-o", tmp_path / "out.xlsx", "--engine", "ironcalc"),
            f"{path}:3: total_output_tokens: 1000000000000 output tokens exceed max_tokens x total_requests "
            "= 8 x 20 = 160")
    assert not (tmp_path / "out.xlsx").exists()
    assert len(read_results(write(tmp_path, HEADER + "\nE01,m,1,10,10,8,0.55,80\n", "ok.csv")).rows) == 1


# --- 9. levels the workbook's cell codes cannot hold -----------------------------------------

def test_levels_whose_cell_codes_pass_2_to_the_53_are_refused(tmp_path: Path) -> None:
    path = write(tmp_path, HEADER + "\nE01,m,1,10,10,100000000,0.55,25\nE02,m,100000000,1,100000000,50,1000,5000000\n")
    refused(run("fill", path, "-o", tmp_path / "out.xlsx", "--engine", "ironcalc"),
            f"{path}:3: concurrency: 100000000 is too large", f"{MAX_CELL_CODE:,}")
    assert not (tmp_path / "out.xlsx").exists()


def test_levels_just_inside_the_cell_code_limit_are_read(tmp_path: Path) -> None:
    # (models + 1) x (largest max_tokens + 1) x (prompt levels + 1) x (largest concurrency + 1)
    assert MAX_CELL_CODE == 2 * 10**6 * 10**8
    path = write(tmp_path, HEADER + "\nE01,m,1,10,10,999999,0.55,25\nE02,m,99999999,1,99999999,50,1,5\n")
    assert len(read_results(path).rows) == 2
    path = write(tmp_path, HEADER + "\nE01,m,1,10,10,999999,0.55,25\nE02,m,100000000,1,100000000,50,1,5\n")
    assert error_of(path).startswith(f"{path}:3: concurrency: 100000000 is too large")
    # A second model in another file passes it too: the files are checked together.
    other = write(tmp_path, HEADER + "\nF01,n,1,10,10,999999,0.55,25\n", name="other.csv")
    path = write(tmp_path, HEADER + "\nE01,m,1,10,10,999999,0.55,25\nE02,m,66666666,1,66666666,50,1,5\n")
    assert len(read_results(path).rows) == 2
    with pytest.raises(InputError, match=f"^{other}:2: model: n is too large"):
        read_results_many([path, other])


@pytest.mark.libreoffice
def test_the_largest_cell_codes_below_the_limit_decode_right_in_libreoffice(tmp_path: Path) -> None:
    """The limit is LibreOffice's (it rounds quotients to 15 digits): 12 models whose cell codes
    reach just under MAX_CELL_CODE, the worst case (a model's largest max_tokens and concurrency
    in one row, so INT(code / scale) sits just under a whole number), verify in LibreOffice."""
    concurrency = MAX_CELL_CODE // (13 * 10**6) - 1
    lines = [HEADER]
    for model in range(1, 13):
        for c in (1, 2, concurrency):
            lines.append(f"M{model}C{c},model{model},{c},1,{c},999999,{c},{10 * c}")
    path = write(tmp_path, "\n".join(lines) + "\n")
    result = run("fill", path, "-o", tmp_path / "out.xlsx", "--engine", "libreoffice")
    assert result.exit_code == 0, result.output
    assert "cells recalculated by libreoffice match the Python reference" in result.output


@pytest.mark.parametrize("time, says", [
    ("1e308", f"= 5e-307 tok/s, below {MIN_TPS:g} tok/s, the least TPS the workbook computes right"),
    ("1e20", f"= 5e-19 tok/s, below {MIN_TPS:g} tok/s"),
    ("1e-17", f"= 5e+18 tok/s, above {MAX_TPS:g} tok/s, the most the workbook computes right"),
])
def test_a_time_whose_tps_the_workbook_cannot_hold_is_refused(tmp_path: Path, time: str, says: str) -> None:
    """total_time_s 1e308 was read, then verification failed: the workbook took its TPS of 5e-307
    for 0 ("no output tokens") where the reference did not."""
    path = write(tmp_path, HEADER + f"\nE01,m,1,10,10,50,0.55,25\nE02,m,2,10,20,50,{time},50\n"
                                    "E03,m,4,10,40,50,0.7,100\n")
    refused(run("fill", path, "-o", tmp_path / "out.xlsx", "--engine", "ironcalc"),
            f"{path}:3: total_time_s: total_output_tokens / total_time_s = 50 / {float(time)!r}", says)
    assert not (tmp_path / "out.xlsx").exists()


def test_rows_at_the_tps_limits_fill_and_verify(tmp_path: Path) -> None:
    """The limits are what the workbook computes right: rows at both, with ordinary ones, verify."""
    path = write(tmp_path, HEADER + f"\nE01,m,1,10,10,50,{25 / MIN_TPS!r},25\nE02,m,2,10,20,50,{50 / MAX_TPS!r},50\n"
                                    "E03,m,4,10,40,50,0.7,100\nE04,m,1,10,10,100,0.9,50\n")
    assert [row.tps for row in read_results(path).rows][:2] == [pytest.approx(MIN_TPS), pytest.approx(MAX_TPS)]
    result = run("fill", path, "-o", tmp_path / "out.xlsx", "--engine", "ironcalc", "--lang", "en")
    assert result.exit_code == 0, result.output
    assert "match the Python reference" in result.output


def test_a_whole_number_beyond_2_to_the_53_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, HEADER + f"\nE01,m,1,10,10,50,0.55,{2**53 + 2}\n")
    message = error_of(path)
    assert message.startswith(f"{path}:2: total_output_tokens: ") and f"{MAX_WHOLE_NUMBER:,}" in message


# --- 15. endless and oversized inputs ----------------------------------------------------------

@pytest.mark.parametrize("command", ["fill", "report"])
@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom"])
def test_a_device_is_refused_at_once(tmp_path: Path, command: str, device: str) -> None:
    if not os.path.exists(device):
        pytest.skip(f"no {device}")
    args = ["-o", str(tmp_path / ("out.html" if command == "report" else "out.xlsx"))]
    done = subprocess.run([SCM_XL, command, device, *args], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert f"{device}: not a regular file (a character device)" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    fifo = tmp_path / "results.csv"
    os.mkfifo(fifo)
    done = subprocess.run([SCM_XL, "fill", str(fifo), "-o", str(tmp_path / "out.xlsx")],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert "not a regular file (a FIFO (named pipe))" in done.stderr and "Traceback" not in done.stderr


def test_a_results_csv_above_the_cap_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, HEADER + "\nE01,m,1,10,10,50,0.55,25\n")
    with open(path, "r+b") as handle:
        handle.truncate(MAX_RESULTS_BYTES + 1)  # sparse: no disk, no time
    refused(run("fill", path, "-o", tmp_path / "out.xlsx"),
            f"{path}: refused: larger than {MAX_RESULTS_BYTES // 2**20} MiB")


# --- 17. overflowing numbers ------------------------------------------------------------------

@pytest.mark.parametrize("value", ["1e308", "1" + "0" * 400])
def test_an_overflowing_concurrency_is_a_clean_error(tmp_path: Path, value: str) -> None:
    path = write(tmp_path, HEADER + f"\nE01,m,1,10,10,50,0.55,25\nE02,m,{value},10,20,50,0.6,50\n")
    refused(run("fill", path, "-o", tmp_path / "out.xlsx", "--engine", "ironcalc"), f"{path}:3: concurrency: ")


# --- 22. a renamed exp_id that grows too long; --resume after a BOM ---------------------------

def test_a_renamed_duplicate_that_grows_too_long_names_its_file_and_line(tmp_path: Path) -> None:
    long_id = "E" * 32_762  # "@second" makes it 32,769 characters, above MAX_CELL_TEXT
    first = write(tmp_path, HEADER + f"\n{long_id},m,1,10,10,50,0.55,25\n", name="first.csv")
    second = write(tmp_path, HEADER + f"\nX,m,1,10,10,50,0.55,25\n{long_id},m,2,10,20,50,0.6,50\n",
                   name="second.csv")
    with pytest.raises(InputError) as info:
        read_results_many([first, second], rename_duplicates=True)
    assert str(info.value).startswith(f"{second}:3: exp_id: renamed ")
    refused(run("fill", first, second, "--rename-duplicates", "-o", tmp_path / "out.xlsx"), f"{second}:3: exp_id: ")


def test_resume_onto_a_results_csv_resaved_with_a_bom(tmp_path: Path) -> None:
    from scm_xl.simulator import SimConfig, running_simulator

    results = tmp_path / "results.csv"
    args = ["-m", "m", "-c", "1,2", "--max-tokens", "2", "-n", "1", "-q", "--out", str(results)]
    env = {"SCM_XL_API_KEY": None, "SILICONFLOW_API_KEY": None, "OPENAI_API_KEY": None}
    with running_simulator(SimConfig.zero_delay()) as base_url:
        first = CliRunner().invoke(main, ["collect", "--base-url", base_url, *args[:3], "1", *args[4:]], env=env)
        assert first.exit_code == 0, first.output
        results.write_bytes(b"\xef\xbb\xbf" + results.read_bytes().replace(b"\n", b"\r\n"))  # as Excel saves it
        result = CliRunner().invoke(main, ["collect", "--base-url", base_url, *args, "--resume"], env=env)
    assert result.exit_code == 0, result.output
    assert [row.exp_id for row in read_results(results).rows] == ["E001", "E002"]


def test_a_leading_zero_group_is_a_decimal_not_thousands(tmp_path):
    """0,250 and 0.125 cannot hold a thousands separator (no group follows a leading 0): they are
    decimals in any convention, so a semicolon file of them reads without a refusal."""
    from scm_xl.results import read_results

    path = tmp_path / "eu.csv"
    path.write_text("exp_id;model;concurrency;requests_per_slot;total_requests;max_tokens;total_time_s;"
                    "total_output_tokens;latency_p50_s\nE1;m;1;2;2;50;0,250;100;0,125\n", encoding="utf-8")
    row = read_results(path).rows[0]
    assert row.total_time_s == 0.25 and row.latency_p50_s == 0.125
