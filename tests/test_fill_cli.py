"""The workbook commands through the CLI: fill, verify, predict, solve, on real files."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import openpyxl
import pytest
from click.testing import CliRunner, Result
from data.gen import sparse_design, write_csv
from openpyxl.styles import Font
from openpyxl.worksheet.worksheet import Worksheet

from scm_xl.cli import main
from scm_xl.results import read_results
from scm_xl.workbook import summary_sheet
from scm_xl.workbook.registry import read_layout
from scm_xl.workbook.layout import Layout
from support import books
from support.paths import ARTICLE

HEADER = ("exp_id,model,concurrency,requests_per_slot,total_requests,max_tokens,"
          "total_time_s,total_output_tokens")
GOOD = "E01,Qwen2.5-7B,1,10,10,50,0.55,25"
USER_SHEET = "我的分析"
USER_FORMULA = "='{raw}'!G2*2"


def run(*args: str) -> Result:
    return CliRunner().invoke(main, [str(a) for a in args])


def assert_ok(result: Result) -> None:
    assert result.exit_code == 0, result.output
    assert "Traceback" not in result.output


def assert_usage_error(result: Result, message: str) -> None:
    """Exit 2, `Error: <message>` on stderr after nothing but the steps' progress lines, no traceback."""
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert isinstance(result.exception, SystemExit)
    steps, _, error = result.stderr.partition("Error: ")
    assert all(line.startswith("scm-xl [") for line in steps.splitlines()), result.stderr
    assert f"Error: {error}".startswith(f"Error: {message}"), result.stderr


def row_block(lines: list[str], exp_id: str) -> str:
    """A consistency-table row with its wrapped note (the indented lines under it), as one string."""
    start = next(i for i, line in enumerate(lines) if line.startswith(exp_id + " "))
    block = [lines[start]]
    for line in lines[start + 1:]:
        if not line.startswith(" "):
            break
        block.append(line.strip())
    return " ".join(block)


def raw_row_of(ws: Worksheet | books.Sheet, layout: Layout, exp_id: str) -> int:
    col = layout.entry_col("exp_id")
    return next(r for r in range(layout.raw_first, layout.raw_last + 1) if ws[f"{col}{r}"].value == exp_id)


@pytest.fixture(scope="module")
def article_fill(tmp_path_factory: pytest.TempPathFactory) -> tuple[Result, Path, dict]:
    folder = tmp_path_factory.mktemp("article")
    workbook, report = folder / "article.xlsx", folder / "report.json"
    result = run("fill", ARTICLE, "-o", workbook, "--json", report)
    assert_ok(result)
    return result, workbook, json.loads(report.read_text(encoding="utf-8"))


# --- fill ---------------------------------------------------------------------------

def test_fill_prints_coefficients_consistency_and_verification(article_fill: tuple[Result, Path, dict]) -> None:
    result, workbook, report = article_fill
    assert_ok(result)
    out = result.stdout
    assert f"wrote {workbook}" in out
    lines = out.splitlines()
    assert any(line.split()[:2] == ["BaseTPS", "45.45"] for line in lines)
    assert any(line.split()[:2] == ["f(2)", "2.62"] for line in lines)
    assert any(line.split()[:2] == ["f(4)", "3.10"] for line in lines)
    assert any(line.split()[:2] == ["K_len(100)", "0.50"] for line in lines)
    e06 = row_block(lines, "E06")
    assert "excluded" in e06 and "TPS falls as concurrency rises" in e06
    e07 = row_block(lines, "E07")
    assert "unidentified" in e07 and "missing f(8)" in e07
    assert max(len(line) for line in lines) <= 80  # fits a terminal; values are never cut
    assert "verdict: insufficient" in out
    verified = next(line for line in lines if line.startswith("verified:"))
    assert f"recalculated by {report['verification']['engine']} match" in verified
    assert workbook.is_file()


def test_fill_json_report_contract(article_fill: tuple[Result, Path, dict]) -> None:
    result, _, report = article_fill
    assert_ok(result)
    assert {"coefficients", "rows", "consistency", "verification"} <= set(report)

    coefficients = report["coefficients"]
    assert {"base_tps", "f", "k_len", "c_model"} <= set(coefficients)
    assert round(coefficients["base_tps"], 2) == 45.45
    assert list(coefficients["f"]) == ["1", "2", "4", "8"]
    assert round(coefficients["f"]["2"], 2) == 2.62
    assert coefficients["f"]["8"] is None
    assert list(coefficients["k_len"]) == ["50", "100", "200"]
    assert round(coefficients["k_len"]["100"], 2) == 0.50
    assert coefficients["c_model"] == {"Qwen2.5-7B": 1.0}

    row_keys = {"exp_id", "model", "concurrency", "max_tokens", "measured_tps", "predicted_tps",
                "deviation_pct", "role", "included", "reason"}
    rows = {row["exp_id"]: row for row in report["rows"]}
    assert list(rows) == [f"E0{n}" for n in range(1, 8)]
    for row in rows.values():
        assert row_keys <= set(row)
        assert isinstance(row["included"], bool)
        assert isinstance(row["concurrency"], int) and isinstance(row["max_tokens"], int)
    assert rows["E04"]["role"] == "identify"
    assert round(rows["E04"]["measured_tps"], 2) == 59.52
    assert rows["E06"]["included"] is False
    assert rows["E06"]["role"] == "excluded"
    assert rows["E06"]["predicted_tps"] is None
    assert rows["E06"]["reason"].startswith("excluded: TPS falls as concurrency rises")
    assert rows["E07"]["role"] == "unidentified"
    assert rows["E07"]["reason"] == ""

    consistency = report["consistency"]
    assert {"check_rows", "mape_pct", "max_deviation_pct", "verdict"} <= set(consistency)
    assert consistency["check_rows"] == 0
    assert consistency["mape_pct"] is None and consistency["max_deviation_pct"] is None
    assert consistency["verdict"] == "insufficient"

    verification = report["verification"]
    assert {"engine", "cells_compared", "mismatches"} <= set(verification)
    from scm_xl.engines import ENGINE_NAMES

    assert verification["engine"] in ENGINE_NAMES  # auto's choice is the engines' business
    assert verification["cells_compared"] > 1000
    assert verification["mismatches"] == []


# --- bad input --------------------------------------------------------------------------

BAD_INPUTS = {
    "missing_column": (HEADER.replace(",total_time_s", "") + "\nE01,m,1,10,10,50,25\n",
                       "{path}:1: missing required column total_time_s"),
    "non_numeric": (f"{HEADER}\n{GOOD}\nE02,m,two,10,20,50,0.42,50\n",
                    '{path}:3: concurrency: not a number: "two"'),
    "zero_concurrency": (f"{HEADER}\nE01,m,0,10,10,50,0.55,25\n",
                         "{path}:2: concurrency: must be positive, got 0"),
    "negative_time": (f"{HEADER}\nE01,m,1,10,10,50,-0.5,25\n",
                      "{path}:2: total_time_s: must be positive, got -0.5"),
    "zero_time": (f"{HEADER}\nE01,m,1,10,10,50,0,25\n",
                  "{path}:2: total_time_s: must be positive, got 0"),
    "empty": ("", "{path}:1: empty file: no header row"),
    "header_only": (f"{HEADER}\n", "{path}:1: no data rows"),
    "duplicate_exp_id": (f"{HEADER}\n{GOOD}\nE02,m,2,10,20,50,0.42,50\n{GOOD}\n",
                         '{path}:4: exp_id: duplicate exp_id "E01" (first used on line 2)'),
    "workbook": (b"PK\x03\x04\x14\x00\x00\x00\x08\x00", "{path}: this is a workbook (.xlsx), not a results CSV"),
    "binary": (HEADER.encode() + b"\nE01,m\x00,1,10,10,50,0.55,25\n",
               "{path}:2: not a CSV text file (it contains NUL bytes)"),
    "ambiguous_bytes": (f"{HEADER}\nE01,m,1,10,10,50,0.55,25\n".encode() + b"E02,\xc4\xe3 a\xc4\xe3b,1,10,10,50,0.55,25\n",
                        "{path}:3: not a CSV in UTF-8, UTF-16, GB18030/GBK or Windows-1252"),
    "control_character": (f"{HEADER},notes\n{GOOD},bad\x01note\n",
                          "{path}:2: notes: control character U+0001 at character 4"),
    "too_long_text": (f"{HEADER},notes\n{GOOD},{'x' * 32_768}\n",
                      "{path}:2: notes: text of 32,768 characters: a spreadsheet cell holds at most 32,767"),
    "thousands": (f'{HEADER}\nE01,m,1,10,10,50,0.55,"1,234"\n',
                  '{path}:2: total_output_tokens: not a number: "1,234" (the comma looks like a thousands '
                  "separator: write 1234 without it"),
    "subnormal_time": (f"{HEADER}\nE01,m,1,10,10,50,1e-320,25\n",
                       "{path}:2: total_time_s: 1e-320 is closer to zero than a spreadsheet can store"),
}


@pytest.mark.parametrize("case", BAD_INPUTS)
def test_fill_bad_input(case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    content, message = BAD_INPUTS[case]
    path = tmp_path / "results.csv"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    monkeypatch.chdir(tmp_path)  # where fill writes results.xlsx without -o
    for args in ([], ["-o", tmp_path / "out.xlsx"]):
        result = run("fill", path, *args)
        assert_usage_error(result, message.format(path=path))
        assert sorted(p.name for p in tmp_path.iterdir()) == ["results.csv"]  # no workbook, no temp file


def test_fill_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "nope.csv"
    assert_usage_error(run("fill", path, "-o", tmp_path / "out.xlsx"), f"{path}: file not found")
    assert list(tmp_path.iterdir()) == []


# --- formula injection ------------------------------------------------------------------

INJECTED = {"exp_id": ['=HYPERLINK("http://x","y")'], "notes": ["+1+1", "-2", "@SUM(A1)"]}


def test_text_that_looks_like_a_formula_stays_text(tmp_path: Path) -> None:
    csv = tmp_path / "injected.csv"
    csv.write_text(
        f"{HEADER},notes\n"
        '"=HYPERLINK(""http://x"",""y"")",Qwen2.5-7B,1,10,10,50,0.55,25,+1+1\n'
        "E02,Qwen2.5-7B,2,10,20,50,0.42,50,-2\n"
        "E03,Qwen2.5-7B,4,10,40,50,0.71,100,@SUM(A1)\n",
        encoding="utf-8")
    out = tmp_path / "out.xlsx"
    assert_ok(run("build", "template", "-o", out))
    result = run("fill", csv, "-o", out, "--force")
    assert_ok(result)
    # verified: the engine's consistency sheet echoes the id as the same text the reference has
    assert "verified:" in result.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["injected.csv", "out.xlsx"]  # no backup kept

    lo = books.layout(out)
    raw = books.worksheet(out, lo.title("raw"))
    for key, texts in INJECTED.items():
        cells = [raw[f"{lo.entry_col(key)}{lo.raw_first + i}"] for i in range(3)]
        values = [cell.value for cell in cells]
        for text in texts:
            cell = cells[values.index(text)]
            assert cell.data_type == "s", (key, text)
            assert cell.value == text


# --- the user's own workbook -------------------------------------------------------------

def users_workbook(tmp_path: Path, *, with_sheet: bool) -> tuple[Path, Layout, dict[tuple[str, str], object]]:
    """A template a person filled by hand: the article's rows, an override, hand-set cells, maybe a sheet."""
    mine = tmp_path / "mine.xlsx"
    assert_ok(run("build", "template", "-o", mine))
    wb = openpyxl.load_workbook(mine)
    lo = read_layout(wb, mine)
    raw = wb[lo.title("raw")]
    for i, row in enumerate(read_results(ARTICLE).rows):
        for key in ("exp_id", "model", "concurrency", "requests_per_slot", "total_requests", "max_tokens",
                    "total_time_s", "total_output_tokens"):
            raw[f"{lo.entry_col(key)}{lo.raw_first + i}"] = getattr(row, key)
    raw[f"{lo.entry_col('override')}{raw_row_of(raw, lo, 'E03')}"] = "exclude"
    hand_set = {
        (lo.title("calibration"), f"B{lo.settings_rows['base_concurrency']}"): 2,
        (lo.title("calibration"), f"B{lo.settings_rows['monotonic_tolerance_pct']}"): 5,
        (lo.title("summary"), summary_sheet.INPUTS["forward.concurrency"]): 4,  # the inputs are typed there
        (lo.title("summary"), summary_sheet.INPUTS["forward.max_tokens"]): 200,
        (lo.title("summary"), summary_sheet.INPUTS["inverse.target_tps"]): 120,
    }
    for (title, address), value in hand_set.items():
        wb[title][address] = value
    if with_sheet:
        sheet = wb.create_sheet(USER_SHEET)
        sheet["A1"], sheet["B1"], sheet["C1"] = "我的笔记", 42, USER_FORMULA.format(raw=lo.title("raw"))
        sheet["B1"].font = Font(bold=True, color="FF0000")
        sheet["B1"].number_format = "0.000"
    wb.save(mine)
    return mine, lo, hand_set


def new_results(tmp_path: Path) -> Path:
    """The article's experiments in reverse order plus one more, with no override column."""
    rows = read_results(ARTICLE).rows
    path = tmp_path / "new.csv"
    path.write_text("\n".join([HEADER] + [
        f"{r.exp_id},{r.model},{r.concurrency},{r.requests_per_slot},{r.total_requests},{r.max_tokens},"
        f"{r.total_time_s},{r.total_output_tokens}" for r in reversed(rows)
    ] + ["E08,Qwen2.5-7B,8,10,80,50,1.25,400"]) + "\n", encoding="utf-8")
    return path


def test_fill_into_a_users_workbook_keeps_hand_set_cells_and_overrides(tmp_path: Path) -> None:
    mine, lo, hand_set = users_workbook(tmp_path, with_sheet=False)
    e03_before = raw_row_of(books.sheet(mine, lo.title("raw"), formulas=True), lo, "E03")
    original = mine.read_bytes()
    report = tmp_path / "report.json"
    # Updating it in place replaces the user's file: refused, untouched, unless --force.
    refused = run("fill", new_results(tmp_path), "--workbook", mine, "--json", report)
    assert_usage_error(refused, f"--workbook {mine} would be updated in place: pass --force to replace it")
    assert mine.read_bytes() == original and not report.exists()
    result = run("fill", new_results(tmp_path), "--workbook", mine, "--json", report, "--force")
    assert_ok(result)
    assert "verified:" in result.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine.xlsx", "new.csv", "report.json"]  # no backups

    wb = books.sheets(mine, *{title for title, _ in hand_set}, lo.title("raw"), formulas=True)
    for (title, address), value in hand_set.items():
        assert wb[title][address].value == value, (title, address)
    raw = wb[lo.title("raw")]
    e03_after = raw_row_of(raw, lo, "E03")
    assert e03_after != e03_before  # it moved with the new order, and the override followed it
    assert raw[f"{lo.entry_col('override')}{e03_after}"].value == "exclude"
    assert raw[f"{lo.entry_col('override')}{e03_before}"].value is None
    assert raw[f"{lo.entry_col('total_output_tokens')}{raw_row_of(raw, lo, 'E08')}"].value == 400

    data = json.loads(report.read_text(encoding="utf-8"))
    assert data["verification"]["mismatches"] == []
    by_id = {row["exp_id"]: row for row in data["rows"]}
    assert by_id["E03"]["included"] is False
    assert by_id["E03"]["reason"] == "excluded: manual override"
    assert data["coefficients"]["base_point"]["concurrency"] == 2  # the hand-set base concurrency
    assert data["coefficients"]["base_tps"] == pytest.approx(50 / 0.42)


def test_fill_into_a_users_workbook_keeps_their_sheets(tmp_path: Path) -> None:
    mine, lo, hand_set = users_workbook(tmp_path, with_sheet=True)
    result = run("fill", new_results(tmp_path), "--workbook", mine, "--force")
    assert "Traceback" not in result.output
    assert_ok(result)
    assert "verified:" in result.stdout

    sheet = books.worksheet(mine, USER_SHEET)
    ours = [lo.title(k) for k in ("summary", "raw", "calibration", "consistency", "derivation")]
    assert sheet.parent.sheetnames[:5] == ours
    user_formula = USER_FORMULA.format(raw=lo.title("raw"))
    assert [sheet[a].value for a in ("A1", "B1", "C1")] == ["我的笔记", 42, user_formula]
    assert sheet["B1"].font.b and sheet["B1"].font.color.rgb == "00FF0000"
    assert sheet["B1"].number_format == "0.000"
    wb = books.sheets(mine, *{title for title, _ in hand_set}, formulas=True)
    for (title, address), value in hand_set.items():
        assert wb[title][address].value == value, (title, address)


# --- verify -------------------------------------------------------------------------------

def test_verify_a_hand_broken_workbook_exits_1_naming_the_cell(article_fill: tuple[Result, Path, dict],
                                                               tmp_path: Path) -> None:
    path = tmp_path / "broken.xlsx"
    lo = books.layout(article_fill[1])
    cell = lo.defined_names()["Verdict"]
    books.retyped(article_fill[1], path, lo.title(cell.sheet), {cell.address: books.Formula('="excellent"')})

    report = tmp_path / "verify.json"
    result = run("verify", path, "--json", report)
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    assert "MISMATCH: " in result.stdout
    where = f"'{lo.title(cell.sheet)}'!{cell.address}"
    assert f"{where}: workbook 'excellent', reference 'insufficient'" in result.stdout
    mismatches = json.loads(report.read_text(encoding="utf-8"))["verification"]["mismatches"]
    assert {"sheet": lo.title(cell.sheet), "cell": cell.address,
            "expected": "insufficient", "actual": "excellent"} in mismatches
    # Anything else that disagrees follows from the broken cell (the summary sheet echoes the verdict).
    assert all(m["expected"] == "insufficient" and m["actual"] == "excellent" for m in mismatches)


def test_verify_a_workbook_that_is_not_ours(tmp_path: Path) -> None:
    path = tmp_path / "other.xlsx"
    wb = openpyxl.Workbook()
    wb.active["A1"] = "hello"
    wb.save(path)
    assert_usage_error(run("verify", path), f"{path}: not an scm-xl workbook")


def test_verify_a_file_that_is_not_a_workbook(tmp_path: Path) -> None:
    path = tmp_path / "fake.xlsx"
    path.write_text("not a zip", encoding="utf-8")
    assert_usage_error(run("verify", path), f"{path}: not a readable .xlsx workbook")


def test_fill_workbook_that_is_not_ours_is_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "other.xlsx"
    openpyxl.Workbook().save(path)
    before = path.read_bytes()
    assert_usage_error(run("fill", ARTICLE, "--workbook", path, "--force"), f"{path}: not an scm-xl workbook")
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other.xlsx"]


# --- predict and solve ---------------------------------------------------------------------

@pytest.fixture(params=["csv", "workbook"])
def source(request: pytest.FixtureRequest, article_fill: tuple[Result, Path, dict]) -> Path:
    return ARTICLE if request.param == "csv" else article_fill[1]


def test_predict_json(source: Path) -> None:
    result = run("predict", source, "--concurrency", "2", "--max-tokens", "100", "--json")
    assert_ok(result)
    data = json.loads(result.stdout)
    assert round(data["tps"], 2) == 59.52


def test_predict_names_what_is_missing_and_exits_1(source: Path) -> None:
    result = run("predict", source, "--concurrency", "8", "--max-tokens", "100", "--json")
    assert result.exit_code == 1, result.output
    data = json.loads(result.stdout)
    assert data["tps"] is None
    assert data["missing"] == ["f(8)"]
    assert data["hints"] == ["concurrency levels with a known f: 1, 2, 4",
                             "--method lsq --extrapolate extends beyond the measured levels (marked)"]
    plain = run("predict", source, "--concurrency", "8", "--max-tokens", "100")
    assert plain.exit_code == 1
    assert plain.stdout == ""
    assert plain.stderr == ("Error: cannot predict: not identified by the data: f(8)\n"
                            "  concurrency levels with a known f: 1, 2, 4\n"
                            "  --method lsq --extrapolate extends beyond the measured levels (marked)\n")


def test_solve_json(source: Path) -> None:
    result = run("solve", source, "--target-tps", "100", "--max-tokens", "50", "--json")
    assert_ok(result)
    data = json.loads(result.stdout)
    assert data["concurrency"] == 2
    assert round(data["tps"], 2) == 119.05
    assert data["reachable"] is True


def test_solve_unreachable(source: Path) -> None:
    result = run("solve", source, "--target-tps", "1000", "--max-tokens", "50", "--json")
    assert_ok(result)
    data = json.loads(result.stdout)
    assert {"concurrency", "tps", "reachable"} <= set(data)
    assert data["reachable"] is False
    assert data["concurrency"] is None and data["tps"] is None
    plain = run("solve", source, "--target-tps", "1000", "--max-tokens", "50")
    assert plain.stdout.startswith("unreachable with the measured levels")


def test_predict_and_solve_with_a_second_model(tmp_path: Path) -> None:
    csv = write_csv(tmp_path / "sparse.csv", sparse_design())
    result = run("predict", csv, "--concurrency", "2", "--max-tokens", "50", "--model", "MODEL-B", "--json")
    assert_ok(result)
    slower = json.loads(result.stdout)["tps"]
    base = json.loads(run("predict", csv, "--concurrency", "2", "--max-tokens", "50", "--json").stdout)["tps"]
    assert 1.5 < base / slower < 2.0  # the truth is C_model(model-b) = 1.6


# --- engines --------------------------------------------------------------------------------

def test_excel_engine_here_is_a_clear_error(article_fill: tuple[Result, Path, dict], tmp_path: Path) -> None:
    copy = tmp_path / "article.xlsx"
    shutil.copy(article_fill[1], copy)
    assert_usage_error(run("verify", copy, "--engine", "excel"), "the excel engine needs Microsoft Excel")
    assert_usage_error(run("fill", ARTICLE, "-o", tmp_path / "new.xlsx", "--engine", "excel"),
                       "the excel engine needs Microsoft Excel")


def test_fill_with_an_unavailable_engine_writes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "new.xlsx"
    assert_usage_error(run("fill", ARTICLE, "-o", out, "--engine", "excel"),
                       "the excel engine needs Microsoft Excel")
    assert not out.exists()
