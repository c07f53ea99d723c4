"""The per-request SLO in the workbook (scm_xl/workbook/slo_sheet.py): the records on a workings
sheet of their own, the Summary's SLO inputs, attainment / Wilson interval / goodput as formulas
verified cell by cell on IronCalc and LibreOffice, against a hand count of the per-request CSV
and against `scm-xl solve --slo`; a person's edit of a threshold in real LibreOffice; a requests
CSV too large for a workbook; results without one."""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from openpyxl.utils import get_column_letter
from click.testing import CliRunner

from scm_xl import goodput
from scm_xl.cli import main
from scm_xl.collect.records import REQUEST_COLUMNS
from scm_xl.results import ResultRow, read_results, write_results
from scm_xl.workbook import printing, slo_sheet, summary_sheet
from scm_xl.workbook.fill import fill
from scm_xl.workbook.layout import Lang
from scm_xl.workbook.styles import BOLD_WIDTH, row_height, text_width, wrapped_lines
from support import books, engines
from support.paths import UNO_PYTHON
from support.slo import collect_fixed_delays

SLO_TEXT, ATTAINMENT = "ttft=0.5,e2el=0.03", 0.4  # 3 tokens take ~18 ms (good), 12 tokens ~54 ms (a miss)
SLO = goodput.parse_slo(SLO_TEXT, ATTAINMENT)


def _values(path: Path) -> dict[str, books.Sheet]:
    """The values the engine computed (fill stores them in the file): the Summary, the SLO sheet and
    the per-request sheet."""
    return books.sheets(path, "Summary", slo_sheet.SHEET_TITLES["en"], slo_sheet.REQUESTS_TITLES["en"])


def _summary(wb: dict[str, books.Sheet]) -> dict[str, object]:
    ws = wb["Summary"]
    return {key: ws[f"B{row}"].value for key, row in summary_sheet.SLO_OUTPUT_ROWS.items()}


def _experiments(wb: dict[str, books.Sheet]) -> dict[str, dict[str, object]]:
    """The SLO sheet's per-experiment table, by exp_id."""
    ws = wb[slo_sheet.SHEET_TITLES["en"]]
    out = {}
    for row in range(slo_sheet.FIRST, ws.max_row + 1):
        exp_id = ws[f"{slo_sheet.EXP_COLS['exp_id']}{row}"].value
        if exp_id:
            out[exp_id] = {key: ws[f"{col}{row}"].value for key, col in slo_sheet.EXP_COLS.items()}
    return out


@pytest.fixture(scope="module")
def collected(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real run: the simulator with fixed delays (first token 10 ms, then 4 ms a token) on
    127.0.0.1, the collector's results CSV and the per-request CSV beside it."""
    return collect_fixed_delays(tmp_path_factory.mktemp("slo"))


@pytest.fixture(scope="module")
def filled_libreoffice(collected: Path) -> Path:
    out = collected.with_name("filled-lo.xlsx")
    outcome = CliRunner().invoke(main, ["fill", str(collected), "-o", str(out), "--lang", "en", "--engine",
                                        "libreoffice", "--slo", SLO_TEXT, "--attainment", str(ATTAINMENT)])
    assert outcome.exit_code == 0, outcome.output
    return out


def _hand_count(results: Path, slo: goodput.Slo) -> dict[str, tuple[int, int, int]]:
    """exp_id -> (measured requests, good requests, good output tokens), counted from the CSV's cells."""
    with open(goodput.requests_path_for(results), encoding="utf-8", newline="") as handle:
        cells = [r for r in csv.DictReader(handle) if r["warmup"] == "false"]
    out = {}
    for exp_id in sorted({r["exp_id"] for r in cells}):
        mine = [r for r in cells if r["exp_id"] == exp_id]
        good = [r for r in mine if r["status"] == "ok"
                and (slo.ttft_s is None or float(r["ttft_s"]) <= slo.ttft_s)
                and (slo.e2el_s is None or float(r["latency_s"]) <= slo.e2el_s)]
        out[exp_id] = (len(mine), len(good), sum(int(r["completion_tokens"]) for r in good))
    return out


@pytest.mark.libreoffice
@pytest.mark.parametrize("engine", ["ironcalc", "libreoffice"])
def test_fill_with_the_requests_csv_verifies_and_counts_as_by_hand(collected: Path, engine: str,
                                                                   tmp_path: Path) -> None:
    report = fill(collected, output=tmp_path / "filled.xlsx", engine=engine, lang="en", slo=SLO)
    assert report.verification.ok, [str(m) for m in report.verification.mismatches[:10]]
    wb = _values(tmp_path / "filled.xlsx")
    assert wb[slo_sheet.REQUESTS_TITLES["en"]].sheet_state == "hidden"
    # the SLO sheet's formula cells were among those compared
    title = slo_sheet.SHEET_TITLES["en"]
    assert sum(1 for sheet, _ in report.verification.values if sheet == title) > 50
    hand = _hand_count(collected, SLO)
    rows = {row.exp_id: row for row in read_results(collected).rows}
    table = _experiments(wb)
    assert sorted(table) == sorted(hand) == sorted(rows)
    for exp_id, (requests, good, good_tokens) in hand.items():
        shown = table[exp_id]
        assert shown["judged"] == 1 and shown["requests"] == requests and shown["good"] == good
        assert shown["attainment"] == pytest.approx(good / requests, rel=1e-12)
        assert shown["goodput"] == pytest.approx(good_tokens / rows[exp_id].total_time_s, rel=1e-9)
        low, high = goodput.wilson_interval(good, requests)
        assert (shown["low"], shown["high"]) == (pytest.approx(low, abs=1e-9), pytest.approx(high, abs=1e-9))
    assert {v[1] for v in hand.values()} != {0}  # some requests met the SLO, so the answer is a real one
    assert any(v[1] < v[0] for v in hand.values())  # and some missed


@pytest.mark.libreoffice
def test_the_summary_answers_what_solve_slo_answers(collected: Path, filled_libreoffice: Path) -> None:
    wb = _values(filled_libreoffice)
    summary = wb["Summary"]
    typed = {key: summary[f"B{row}"].value for key, row in summary_sheet.SLO_INPUT_ROWS.items()}
    assert typed == {"ttft": 0.5, "tpot": None, "e2el": 0.03, "attainment": ATTAINMENT}
    target = float(summary[summary_sheet.INPUTS["inverse.target_tps"]].value)  # typed on the Summary
    rows = read_results(collected).rows
    table = goodput.evaluate(rows, goodput.read_samples(collected), SLO)
    solution = goodput.solve_slo(goodput.select_cells(table.experiments, SLO), float(target), SLO)
    assert solution.cheapest is not None
    cheapest = solution.cheapest
    shown = _summary(wb)
    assert (shown["model"], shown["concurrency"], shown["max_tokens"]) == (
        cheapest.model, cheapest.concurrency, cheapest.max_tokens)
    assert shown["attainment"] == pytest.approx(cheapest.tally.attainment)
    assert shown["low"] == pytest.approx(cheapest.tally.interval[0], abs=1e-9)
    assert shown["tps"] == pytest.approx(cheapest.tally.tps) and shown["goodput"] == pytest.approx(
        cheapest.tally.goodput_tps)
    assert shown["status"] == slo_sheet.TEXTS["en"]["found"]
    # and what the CLI says on the same data
    outcome = CliRunner().invoke(main, ["solve", str(collected), "--target-tps", f"{target:g}", "--slo", SLO_TEXT,
                                        "--attainment", str(ATTAINMENT), "--json"])
    assert outcome.exit_code == 0, outcome.output
    answer = json.loads(outcome.output)["solution"]["cheapest"]
    assert (answer["model"], answer["concurrency"], answer["max_tokens"]) == (
        shown["model"], shown["concurrency"], shown["max_tokens"])


@pytest.mark.libreoffice
def test_a_person_changes_the_slo_in_libreoffice(filled_libreoffice: Path, tmp_path: Path) -> None:
    """Typing a tighter e2el threshold on the Summary (10 ms: no request is that fast) changes every
    experiment's attainment, the SLO answer and the Summary; verify passes on the saved file."""
    if not shutil.which("soffice"):
        pytest.skip("LibreOffice (soffice) not installed")
    if not Path(UNO_PYTHON).exists():
        pytest.fail("python3-uno is needed for the LibreOffice edit tests (apt-get install python3-uno)")
    edited = tmp_path / "edited.xlsx"
    e2el = f"B{summary_sheet.SLO_INPUT_ROWS['e2el']}"
    spec = tmp_path / "jobs.json"
    spec.write_text(json.dumps([{"in": str(filled_libreoffice), "out": str(edited), "sheet": "Summary",
                                 "edits": [{"set": e2el, "value": 0.01}]}]))
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    result = subprocess.run([UNO_PYTHON, str(Path(__file__).with_name("uno_edit.py")), str(spec)],
                            capture_output=True, text=True, timeout=240, env=env)
    assert result.returncode == 0, result.stderr[-2000:]

    before, after = _values(filled_libreoffice), _values(edited)
    assert after["Summary"][e2el].value == 0.01
    assert any(row["attainment"] > 0 for row in _experiments(before).values())
    assert all(row["attainment"] == 0 and row["goodput"] == 0 for row in _experiments(after).values())
    assert _summary(before)["concurrency"] is not None
    shown = _summary(after)
    assert shown["status"] == slo_sheet.TEXTS["en"]["none"]
    assert shown["concurrency"] is None and shown["model"] is None
    report = engines.verified_as_saved(edited)  # LibreOffice's values as saved, and IronCalc's
    assert report.inputs.slo_typed["e2el"] == 0.01  # the reference read the person's SLO


def _request(exp_id: str, status: str, ttft: str, latency: str, tokens: int, *, error_class: str = "",
             warmup: bool = False) -> dict[str, str]:
    row = dict.fromkeys(REQUEST_COLUMNS, "")
    row.update(exp_id=exp_id, model="m", concurrency="2", max_tokens="10", repeat="1", slot="0", seq="0",
               warmup="true" if warmup else "false", ttft_s=ttft, latency_s=latency, prompt_tokens="100",
               completion_tokens=str(tokens), status=status, error_class=error_class)
    return row


# E001 against ttft 0.5, tpot 0.05, e2el 2, counted by hand: 8 measured, 3 good (rows 1, 5, 7) with 21 tokens.
HAND = [
    _request("E001", "ok", "0.2", "0.6", 10),            # tpot 0.4/9 = 0.044: good
    _request("E001", "ok", "0.6", "1.0", 10),            # ttft 0.6 > 0.5: miss
    _request("E001", "ok", "0.3", "1.5", 10),            # tpot 1.2/9 = 0.133: miss
    _request("E001", "ok", "0.4", "2.5", 10),            # e2el 2.5: miss
    _request("E001", "ok", "0.1", "1.9", 1),             # one token: tpot holds vacuously: good
    _request("E001", "failed", "", "0.05", 0, error_class="http_5xx"),            # failed: a miss
    _request("E001", "rate_limited", "0.45", "0.85", 10),  # 429 retried, then ok: good
    _request("E001", "rate_limited", "", "0.5", 0, error_class="rate_limited"),   # gave up: a miss
    _request("E001", "ok", "5.0", "9.0", 10, warmup=True),  # warm-up: not counted
]


def _write(folder: Path, requests: list[dict[str, str]] | None, rows: list[ResultRow]) -> Path:
    results = folder / "results.csv"
    write_results(results, rows)
    if requests is not None:
        with open(goodput.requests_path_for(results), "w", encoding="utf-8", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=REQUEST_COLUMNS, lineterminator="\n")
            writer.writeheader()
            writer.writerows(requests)
    return results


def _result(exp_id: str, concurrency: int, *, total_requests: int = 8, tokens: int = 51) -> ResultRow:
    return ResultRow(exp_id=exp_id, model="m", concurrency=concurrency, requests_per_slot=4,
                     total_requests=total_requests, max_tokens=10, total_time_s=3.0, total_output_tokens=tokens)


def test_a_hand_written_requests_csv_counts_failures_as_misses(tmp_path: Path) -> None:
    """Every kind of request goodput.py tells apart, in the collector's format; E002's requests
    are not the ones its results row counts, so it is not judged (as goodput.evaluate)."""
    requests = HAND + [_request("E002", "ok", "0.1", "0.2", 10)]
    results = _write(tmp_path, requests, [_result("E001", 2), _result("E002", 4, total_requests=5, tokens=10)])
    outcome = CliRunner().invoke(main, ["fill", str(results), "-o", str(tmp_path / "hand.xlsx"), "--lang", "en",
                                        "--engine", "ironcalc", "--slo", "ttft=0.5,tpot=0.05,e2el=2"])
    assert outcome.exit_code == 0, outcome.output
    assert "per-request records: 9 measured requests" in outcome.output
    table = _experiments(_values(tmp_path / "hand.xlsx"))
    e1 = table["E001"]
    assert (e1["requests"], e1["good"], e1["good_tokens"], e1["judged"]) == (8, 3, 21, 1)
    assert e1["attainment"] == 3 / 8 and e1["goodput"] == pytest.approx(21 / 3.0)
    assert table["E002"]["judged"] == 0 and table["E002"]["attainment"] is None


def test_without_a_requests_csv_fill_says_so_and_verifies(tmp_path: Path) -> None:
    results = _write(tmp_path, None, [_result("E001", 2), _result("E002", 4)])
    outcome = CliRunner().invoke(main, ["fill", str(results), "-o", str(tmp_path / "none.xlsx"), "--lang", "en",
                                        "--engine", "ironcalc", "--slo", "e2el=2"])
    assert outcome.exit_code == 0, outcome.output
    said = [line for line in outcome.output.splitlines() if "no per-request CSV" in line]
    assert len(said) == 1 and str(goodput.requests_path_for(results)) in said[0]
    wb = _values(tmp_path / "none.xlsx")
    assert wb[slo_sheet.REQUESTS_TITLES["en"]].max_row == 1  # the header only
    assert _summary(wb)["status"] == slo_sheet.TEXTS["en"]["no_requests"]


def test_a_rebuilt_workbook_keeps_its_records_and_slo(tmp_path: Path) -> None:
    results = _write(tmp_path, HAND, [_result("E001", 2)])
    first = tmp_path / "first.xlsx"
    assert fill(results, output=first, engine="ironcalc", lang="en", slo=goodput.parse_slo("e2el=2", 0.3)
                ).verification.ok
    again = fill(None, workbook=first, output=tmp_path / "again.xlsx", engine="ironcalc")
    assert again.verification.ok
    assert again.inputs.slo_typed == {"ttft": None, "tpot": None, "e2el": 2, "attainment": 0.3}
    assert len(again.inputs.slo_data.records) == 8
    # e2el 2 alone: the successes but the 2.5 s one (rows 1, 2, 3, 5, 7)
    assert _experiments(_values(tmp_path / "again.xlsx"))["E001"]["good"] == 5


def test_a_requests_csv_too_large_for_a_workbook_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(slo_sheet, "MAX_REQUEST_ROWS", 5)
    results = _write(tmp_path, HAND, [_result("E001", 2)])
    out = tmp_path / "big.xlsx"
    outcome = CliRunner().invoke(main, ["fill", str(results), "-o", str(out), "--engine", "ironcalc"])
    assert outcome.exit_code == 2, outcome.output
    assert "8 measured requests: a workbook holds at most 5 per-request records" in outcome.output
    assert str(goodput.requests_path_for(results)) in outcome.output
    assert "Traceback" not in outcome.output and not out.exists()


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_tables_read_right_on_screen_and_on_paper(tmp_path: Path, lang: Lang) -> None:
    """The tables' headers are TEXTS' h_ texts, each column as wide as its header's longest word
    and the row as tall as the most lines; the helper columns are grouped and hidden (their
    formulas there all the same: fill verified them); printed, the settings on two pages and
    each table on pages of its own, at MIN_PRINT_SCALE or larger, each page's columns within
    its width, down to the last experiment. Rebuilt (fill --workbook) it prints the same; a
    workbook without per-request records prints its settings alone."""
    results = _write(tmp_path, HAND, [_result("E001", 2), _result("E002", 4, total_requests=5, tokens=10)])
    filled, again, bare = tmp_path / "filled.xlsx", tmp_path / "again.xlsx", tmp_path / "bare.xlsx"
    assert fill(results, output=filled, engine="ironcalc", lang=lang, slo=SLO).verification.ok
    assert fill(None, workbook=filled, output=again, engine="ironcalc").verification.ok
    goodput.requests_path_for(results).unlink()
    assert fill(results, output=bare, engine="ironcalc", lang=lang, slo=SLO).verification.ok
    t = slo_sheet.TEXTS[lang]
    hidden = set(slo_sheet.hidden_columns())
    setups = []
    for path in (filled, again):
        ws = books.worksheet(path, slo_sheet.SHEET_TITLES[lang])
        for cols in (slo_sheet.EXP_COLS, slo_sheet.CELL_COLS):
            for key, col in cols.items():
                cell, dim = ws[f"{col}{slo_sheet.HEADER_ROW}"], ws.column_dimensions[col]
                assert cell.value == t[f"h_{key}"]
                assert (col in hidden) == bool(dim.hidden) == (dim.outlineLevel == 1), (key, col)
                if col not in hidden:
                    longest = max(text_width(word) for word in cell.value.split())
                    assert dim.width >= longest * BOLD_WIDTH, (key, dim.width)
                    assert row_height(wrapped_lines(cell.value, dim.width)) <= ws.row_dimensions[cell.row].height
        assert ws[f"{slo_sheet.CELL_COLS['lat_sum']}{slo_sheet.FIRST}"].value.startswith("=SUMIFS(")
        scale = ws.page_setup.scale or 0
        assert scale >= 100 * printing.MIN_PRINT_SCALE and ws.sheet_properties.pageSetUpPr is not None
        assert not ws.sheet_properties.pageSetUpPr.fitToPage  # the scale, not fitted to pages (which ignores breaks)
        area = str(ws.print_area).rpartition("!")[2].replace("$", "")
        assert area == f"A1:{list(slo_sheet.CELL_COLS.values())[-1]}{slo_sheet.FIRST + 1}"  # two experiments
        breaks = [0] + [b.id for b in ws.col_breaks.brk] + [len(slo_sheet.EXP_KEYS) + 1 + len(slo_sheet.CELL_KEYS)]
        assert len(slo_sheet.EXP_KEYS) + 1 in breaks  # the configurations start a page
        for first, last in zip(breaks, breaks[1:]):
            page = [get_column_letter(i) for i in range(first + 1, last + 1) if get_column_letter(i) not in hidden]
            assert sum(ws.column_dimensions[col].width for col in page) <= printing.PAGE_WIDTH_CHARS * 100 / scale
        assert [b.id for b in ws.row_breaks.brk] == [slo_sheet.ANSWER_ROWS["status"],
                                                     slo_sheet.CAP_ANSWER_ROWS["binding"]]
        assert ws.print_title_rows == f"${slo_sheet.HEADER_ROW}:${slo_sheet.HEADER_ROW}"
        merged = sorted(str(r) for r in ws.merged_cells.ranges)  # the notes, written once though fill writes twice
        assert len(set(merged)) == len(merged) and f"A{slo_sheet.NOTE_ROW}:{get_column_letter(breaks[1])}{slo_sheet.NOTE_ROW}" \
            in merged
        setups.append((scale, breaks, area, merged))
    assert setups[0] == setups[1]
    ws = books.worksheet(bare, slo_sheet.SHEET_TITLES[lang])
    area = str(ws.print_area).rpartition("!")[2].replace("$", "")
    assert area.startswith("A1:") and area.endswith(f"{slo_sheet.CAP_ANSWER_ROWS['binding']}")
    assert not ws.col_breaks.brk and [b.id for b in ws.row_breaks.brk] == [slo_sheet.ANSWER_ROWS["status"]]
