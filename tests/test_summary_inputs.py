"""The inputs a person changes are typed in one place, the Summary the workbook opens on: yellow,
unlocked cells with data validation, which the derivation and calibration sheets read. Every
formula cell is locked and the formula sheets protected without a password, so LibreOffice
itself refuses typing over a formula; the raw-data sheet stays open to every edit. `verify`
names the input cell when a formula was typed over anyway (a program that writes the file, as
`books.retyped` does here, ignores protection)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import openpyxl
import pytest
from click.testing import CliRunner

from scm_xl.cli import main
from scm_xl.errors import InputError
from scm_xl.report import render_verification
from scm_xl.rules import METHODS
from scm_xl.workbook import protection, summary_sheet
from scm_xl.workbook.fill import fill, verify
from scm_xl.workbook.io import load
from scm_xl.workbook.registry import read_layout
from scm_xl.workbook.layout import LAYOUT_VERSION, META_SHEET, Layout
from scm_xl.workbook.stamp import is_formula
from support import books, engines
from support.paths import ARTICLE, UNO_PYTHON

LAYOUT = Layout(lang="en")
SUMMARY = LAYOUT.title("summary")
TARGET = summary_sheet.INPUTS["inverse.target_tps"]
RECOMMENDED = f"B{summary_sheet.INVERSE_ROWS['recommended']}"
RECOMMENDED_TPS = f"B{summary_sheet.INVERSE_ROWS['recommended_tps']}"


@pytest.fixture(scope="module")
def filled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("inputs") / "article.xlsx"
    report = fill(ARTICLE, output=out, engine="ironcalc", lang="en")
    assert report.verification.ok, [str(m) for m in report.verification.mismatches[:5]]
    return out


def _solve(target: float) -> dict:
    """What plain `scm-xl solve` (the article's inverse, over measured levels) answers for the
    workbook's inverse question at another target."""
    result = CliRunner().invoke(main, ["solve", str(ARTICLE), "--target-tps", f"{target:g}", "--max-tokens", "50",
                                       "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def _values(path: Path) -> dict[str, books.Sheet]:
    return books.sheets(path, SUMMARY)


# --- (a) typing into the Summary in LibreOffice -----------------------------------------------

@pytest.mark.libreoffice
def test_a_target_typed_on_the_summary_in_libreoffice_moves_the_answer(filled: Path, tmp_path: Path) -> None:
    """In LibreOffice, a new target TPS typed into the Summary's target cell changes the recommended
    concurrency and its predicted TPS after recalculation, as `solve` answers it; typing over the
    recommended concurrency (a formula) is refused by LibreOffice's own sheet protection; the saved
    file verifies."""
    if not shutil.which("soffice"):
        pytest.skip("LibreOffice (soffice) not installed")
    if not Path(UNO_PYTHON).exists():
        pytest.fail("python3-uno is needed for the LibreOffice edit tests (apt-get install python3-uno)")
    before = _values(filled)[SUMMARY]
    old_target = before[TARGET].value
    old = _solve(old_target)
    assert before[RECOMMENDED].value == old["concurrency"]
    new_target = 130.0
    new = _solve(new_target)
    assert new["concurrency"] != old["concurrency"]  # the edit must move the answer to be a test

    edited, report = tmp_path / "edited.xlsx", tmp_path / "typed.json"
    spec = tmp_path / "jobs.json"
    spec.write_text(json.dumps([{"in": str(filled), "out": str(edited), "sheet": SUMMARY, "report": str(report),
                                 "edits": [{"type": TARGET, "value": new_target},
                                           {"type": RECOMMENDED, "value": 1}]}]))
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    result = subprocess.run([UNO_PYTHON, str(Path(__file__).with_name("uno_edit.py")), str(spec)],
                            capture_output=True, text=True, timeout=240, env=env)
    assert result.returncode == 0, result.stderr[-2000:]
    typed, over = json.loads(report.read_text())
    assert typed["protected"] and not typed["locked"] and not typed["refused"]  # the input cell takes it
    assert over["protected"] and over["locked"] and over["refused"]  # the formula cell is refused
    assert over["after"] == over["before"] and over["after"].startswith("=")

    after = _values(edited)[SUMMARY]
    assert after[TARGET].value == new_target
    assert after[RECOMMENDED].value == new["concurrency"]
    assert after[RECOMMENDED_TPS].value == pytest.approx(new["tps"], rel=1e-9)
    assert is_formula(books.sheet(edited, SUMMARY, formulas=True)[RECOMMENDED].value)
    checked = engines.verified_as_saved(edited)  # LibreOffice's values as saved, and IronCalc's
    assert checked.inputs.inverse["target_tps"] == new_target  # read back from the Summary


def test_a_target_typed_on_the_summary_is_the_workbooks_question(filled: Path, tmp_path: Path) -> None:
    """The same edit written into the file (`books.retyped`), recalculated by IronCalc: the answer
    follows the Summary."""
    path = tmp_path / "copy.xlsx"
    books.retyped(filled, path, SUMMARY, {TARGET: 130})
    report = verify(path, engine="ironcalc")
    assert report.verification.ok, render_verification(report.verification)
    shown = {(sheet, cell): value for (sheet, cell), value in report.verification.values.items() if sheet == SUMMARY}
    answer = _solve(130)
    assert shown[(SUMMARY, RECOMMENDED)] == answer["concurrency"]
    assert shown[(SUMMARY, RECOMMENDED_TPS)] == pytest.approx(answer["tps"], rel=1e-9)
    derivation = LAYOUT.title("derivation")
    assert report.verification.values[(derivation, f"B{LAYOUT.inverse_rows['target_tps']}")] == 130


def test_the_method_typed_on_the_summary_drives_the_calibration_sheet(filled: Path, tmp_path: Path) -> None:
    path = tmp_path / "copy.xlsx"
    method = books.sheet(filled, SUMMARY, formulas=True)[summary_sheet.INPUTS["method"]].value
    assert method == METHODS[0]  # a new workbook's default
    books.retyped(filled, path, SUMMARY, {summary_sheet.INPUTS["method"]: "lsq"})
    report = verify(path, engine="ironcalc")
    assert report.verification.ok, render_verification(report.verification)
    assert report.analysis.settings.method == "lsq"
    calibration = LAYOUT.title("calibration")
    assert report.verification.values[(calibration, f"C{LAYOUT.settings_rows['method']}")] == "lsq"
    assert report.verification.values[(SUMMARY, f"C{summary_sheet.ROWS['method']}")] == "lsq"


# --- (b) locked formulas, protected sheets, open raw data ---------------------------------------

def test_formula_cells_are_locked_and_the_sheets_protected_without_a_password(filled: Path) -> None:
    wb = openpyxl.load_workbook(filled)
    summary = wb[SUMMARY]
    assert summary.protection.sheet and not summary.protection.password
    inputs = set(summary_sheet.INPUTS.values()) | {f"B{row}" for row in summary_sheet.SLO_INPUT_ROWS.values()}
    formulas = 0
    for cell in summary._cells.values():
        if is_formula(cell.value):
            formulas += 1
            assert cell.protection.locked, cell.coordinate
    assert formulas > 40
    for address in inputs:
        assert summary[address].protection.locked is False, address
        assert protection.is_input(summary[address]), address
    for key in ("calibration", "consistency", "derivation", "first_principles", "readme", "calc", "cells"):
        ws = wb[LAYOUT.title(key)]
        assert ws.protection.sheet and not ws.protection.password, key
        for cell in ws._cells.values():
            if is_formula(cell.value):
                assert cell.protection.locked, (key, cell.coordinate)
            if protection.is_input(cell):  # the calibration overrides, the calculator's inputs
                assert cell.protection.locked is False, (key, cell.coordinate)
    # the derivation and calibration sheets read the Summary's inputs: formulas now, not typed cells
    derivation = wb[LAYOUT.title("derivation")]
    for rows, keys, block in ((LAYOUT.forward_rows, summary_sheet.FORWARD_INPUTS, "forward"),
                              (LAYOUT.inverse_rows, summary_sheet.INVERSE_INPUTS, "inverse")):
        for key in keys:
            text = derivation[f"B{rows[key]}"].value
            assert is_formula(text) and summary_sheet.INPUTS[f"{block}.{key}"].replace("B", "$B$") in text, key
    method = wb[LAYOUT.title("calibration")][f"B{LAYOUT.settings_rows['method']}"].value
    assert is_formula(method) and summary_sheet.INPUTS["method"].replace("B", "$B$") in method
    overrides = wb[LAYOUT.title("calibration")][f"B{LAYOUT.settings_rows['base_concurrency']}"]
    assert overrides.protection.locked is False
    # every sheet with hand-set cells keeps them unlocked
    for title in ("Replicates", "LatencyModel", "FirstPrinciples"):
        assert any(protection.is_input(c) and c.protection.locked is False for c in wb[title]._cells.values()), title
    raw = wb[LAYOUT.title("raw")]
    assert not raw.protection.sheet  # rows are inserted, deleted, sorted and typed there


# --- (c) data validation ------------------------------------------------------------------------

def _validation(ws: openpyxl.worksheet.worksheet.Worksheet, address: str) -> object:
    found = [dv for dv in ws.data_validations.dataValidation if address in dv.sqref]
    assert len(found) == 1, address
    return found[0]


def test_the_inputs_have_data_validation(filled: Path) -> None:
    summary = books.worksheet(filled, SUMMARY)
    for block in ("forward", "inverse"):
        model = _validation(summary, summary_sheet.INPUTS[f"{block}.model"])
        assert model.type == "list" and model.formula1 == LAYOUT.seen_models_range("name")  # the data's models
        length = _validation(summary, summary_sheet.INPUTS[f"{block}.max_tokens"])
        assert length.type == "list" and length.formula1 == LAYOUT.l_table_range("level")  # the length levels
    method = _validation(summary, summary_sheet.INPUTS["method"])
    assert method.type == "list" and method.formula1 == '"' + ",".join(METHODS) + '"'
    for key in ("forward.concurrency", "forward.prompt_tokens", "inverse.target_tps", "inverse.max_latency",
                "inverse.prompt_tokens"):
        number = _validation(summary, summary_sheet.INPUTS[key])
        assert number.type in ("whole", "decimal") and number.operator == "greaterThanOrEqual", key
        assert number.formula1 == "0", key
    assert summary["A2"].value == summary_sheet.TEXTS["en"]["hint"]  # one line saying where to type


# --- (d) verify names the input cell ------------------------------------------------------------

@pytest.mark.parametrize("sheet, cell, input_key", [
    (SUMMARY, RECOMMENDED, "inverse.target_tps"),  # an answer typed over: type the question instead
    (LAYOUT.title("derivation"), f"B{LAYOUT.inverse_rows['target_tps']}", "inverse.target_tps"),
    (LAYOUT.title("derivation"), f"B{LAYOUT.forward_rows['max_tokens']}", "forward.max_tokens"),
    (LAYOUT.title("calibration"), f"B{LAYOUT.settings_rows['method']}", "method"),
])
def test_verify_names_the_input_cell_when_a_formula_was_typed_over(filled: Path, tmp_path: Path, sheet: str,
                                                                   cell: str, input_key: str) -> None:
    path = tmp_path / "copy.xlsx"
    books.retyped(filled, path, sheet, {cell: 150 if input_key != "method" else "lsq"})
    report = verify(path, engine="ironcalc")
    assert not report.verification.ok
    typed = [m for m in report.verification.typed_over if (m.sheet, m.cell) == (sheet, cell)]
    assert len(typed) == 1
    where = f"'{SUMMARY}'!{summary_sheet.INPUTS[input_key]}"
    assert typed[0].hint == summary_sheet.input_hint(LAYOUT, input_key) and where in typed[0].hint
    text = render_verification(report.verification)
    assert f"'{sheet}'!{cell} (not a formula: the cell was typed over)" in text and where in text
    result = CliRunner().invoke(main, ["verify", str(path), "--engine", "ironcalc"])
    assert result.exit_code == 1 and where in result.output


# --- the layout version ---------------------------------------------------------------------------

def test_a_workbook_of_the_old_layout_is_refused_clearly(filled: Path, tmp_path: Path) -> None:
    path = tmp_path / "copy.xlsx"
    meta = books.sheet(filled, META_SHEET, formulas=True)
    row = next(r for r in range(1, meta.max_row + 1) if meta.cell(row=r, column=1).value == "layout_version")
    books.retyped(filled, path, META_SHEET, {f"B{row}": LAYOUT_VERSION - 1})
    with pytest.raises(InputError, match=f"layout version {LAYOUT_VERSION - 1} is not {LAYOUT_VERSION}"):
        read_layout(load(path), path)
