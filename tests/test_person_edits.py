"""A person's edits on the raw-data sheet, made in real LibreOffice through its scripting bridge
(and the same edits through openpyxl): delete a row, insert one in the middle, type one under
the data, sort, type a number as text, type beyond the rows the formulas cover. After each,
`scm-xl verify` must pass (or fail where it should) and count exactly the rows now there."""

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
from scm_xl.results import write_results
from scm_xl.workbook.fill import fill, verify
from scm_xl.workbook.layout import ENTRY_COLUMNS, Layout
from data.gen import experiment, full_factorial
from support import books, engines
from support.paths import UNO_PYTHON

ENGINE = "libreoffice"
LANG = "en"
LAYOUT = Layout(lang=LANG)
SHEET = LAYOUT.title("raw")
LAST_COL = LAYOUT.entry_col(ENTRY_COLUMNS[-1].key)


def _col(key: str) -> str:
    return LAYOUT.entry_col(key)


def _typed_row(row: int, exp_id: str, concurrency: int = 2, max_tokens: int = 100) -> list[dict]:
    """The cells of a new experiment typed into sheet row `row`."""
    new = experiment(exp_id, "model-a", concurrency, max_tokens, 41.0)
    edits = [{"set": f"{_col('exp_id')}{row}", "text": new.exp_id},
             {"set": f"{_col('model')}{row}", "text": new.model}]
    for key in ("concurrency", "requests_per_slot", "total_requests", "max_tokens", "total_time_s",
                "total_output_tokens"):
        edits.append({"set": f"{_col(key)}{row}", "value": getattr(new, key)})
    return edits


def _exp_ids(path: Path) -> list[str]:
    ws = books.sheet(path, SHEET, formulas=True)
    out = []
    for row in range(2, ws.max_row + 1):
        value = ws[f"{_col('exp_id')}{row}"].value
        if value not in (None, ""):
            out.append(str(value))
    return out


@pytest.fixture(scope="module")
def filled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("edits")
    csv = folder / "results.csv"
    write_results(csv, full_factorial(seed=3))
    out = folder / "filled.xlsx"
    report = fill(csv, output=out, engine=ENGINE, lang=LANG)
    assert report.verification.ok
    return out


JOBS = {
    "delete": [{"delete_row": 5}],
    "insert": [{"insert_row": 8}, *_typed_row(8, "NEW1")],
    "append": _typed_row(28, "NEW2", concurrency=4, max_tokens=50),  # full_factorial has 26 rows: 2..27
    "sort": [{"sort": f"A2:{LAST_COL}{LAYOUT.raw_header_row + 26}", "column": 2, "ascending": False}],
    "text_number": [{"set": f"{_col('concurrency')}6", "text": "8"}],
}


@pytest.fixture(scope="module")
def uno_edited(filled: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Every job's edited file, made in one LibreOffice session."""
    if not shutil.which("soffice"):
        pytest.skip("LibreOffice (soffice) not installed")
    if not Path(UNO_PYTHON).exists():
        pytest.fail("python3-uno is needed for the LibreOffice edit tests (apt-get install python3-uno)")
    folder = tmp_path_factory.mktemp("uno")
    jobs = []
    outputs = {}
    for name, edits in JOBS.items():
        outputs[name] = folder / f"{name}.xlsx"
        jobs.append({"in": str(filled), "out": str(outputs[name]), "sheet": SHEET, "edits": edits})
    spec = folder / "jobs.json"
    spec.write_text(json.dumps(jobs))
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    result = subprocess.run([UNO_PYTHON, str(Path(__file__).with_name("uno_edit.py")), str(spec)],
                            capture_output=True, text=True, timeout=240, env=env)
    assert result.returncode == 0, result.stderr[-2000:]
    for path in outputs.values():
        assert path.exists()
    return outputs


def _verified(path: Path, engine: str = ENGINE) -> list[str]:
    report = verify(path, engine=engine)
    assert report.verification.ok, [str(m) for m in report.verification.mismatches[:10]]
    return [row.exp_id for _, row in report.inputs.rows]


pytestmark = pytest.mark.libreoffice


def test_delete_a_row_in_libreoffice(filled: Path, uno_edited: dict[str, Path]) -> None:
    before = _exp_ids(filled)
    rows = _verified(uno_edited["delete"])  # LibreOffice recalculates the saved file again
    assert rows == before[:3] + before[4:]  # sheet row 5 is the 4th experiment
    assert len(rows) == len(before) - 1
    # what the session saved is what that recalculation computed: the other edits check it so
    assert [row.exp_id for _, row in engines.verified_as_saved(uno_edited["delete"]).inputs.rows] == rows


def test_insert_a_row_in_the_middle_in_libreoffice(filled: Path, uno_edited: dict[str, Path]) -> None:
    before = _exp_ids(filled)
    report = engines.verified_as_saved(uno_edited["insert"])
    assert [row.exp_id for _, row in report.inputs.rows] == before[:6] + ["NEW1"] + before[6:]


def test_type_a_row_under_the_data_in_libreoffice(filled: Path, uno_edited: dict[str, Path]) -> None:
    before = _exp_ids(filled)
    report = engines.verified_as_saved(uno_edited["append"])
    assert [row.exp_id for _, row in report.inputs.rows] == before + ["NEW2"]


def test_sort_rows_in_libreoffice(filled: Path, uno_edited: dict[str, Path]) -> None:
    before = _exp_ids(filled)
    report = engines.verified_as_saved(uno_edited["sort"])
    rows = [row for _, row in report.inputs.rows]
    assert sorted(r.exp_id for r in rows) == sorted(before)
    assert [r.concurrency for r in rows] == sorted((r.concurrency for r in rows), reverse=True)


def test_a_number_typed_as_text_shows_why_the_row_is_unused(filled: Path, uno_edited: dict[str, Path]) -> None:
    before = _exp_ids(filled)
    report = engines.verified_as_saved(uno_edited["text_number"])
    assert [row.exp_id for _, row in report.inputs.rows] == before[:4] + before[5:]
    assert report.inputs.unusable == [(6, "unusable: concurrency is text, not a number")]
    shown = books.sheet(uno_edited["text_number"], SHEET)
    assert shown[f"{_col('show_role')}6"].value == "unusable"
    assert shown[f"{_col('show_status')}6"].value == "unusable: concurrency is text, not a number"


def test_verify_json_rows_are_the_experiments_in_the_sheet(uno_edited: dict[str, Path], tmp_path: Path) -> None:
    report_path = tmp_path / "report.json"
    result = CliRunner().invoke(main, ["verify", str(uno_edited["insert"]), "--json", str(report_path)])
    assert result.exit_code == 0, result.output
    rows = json.loads(report_path.read_text())["rows"]
    assert [row["exp_id"] for row in rows] == _exp_ids(uno_edited["insert"])


# -- the same edits through openpyxl -------------------------------------------------


def _openpyxl_edit(source: Path, target: Path, edit) -> None:  # type: ignore[no-untyped-def]
    wb = openpyxl.load_workbook(source)
    edit(wb[SHEET])
    wb.save(target)


def _type(ws, row: int, exp_id: str, concurrency: int = 2, max_tokens: int = 100) -> None:  # type: ignore[no-untyped-def]
    for edit in _typed_row(row, exp_id, concurrency, max_tokens):
        ws[edit["set"]] = edit.get("text", edit.get("value"))


def test_the_same_edits_through_openpyxl(filled: Path, tmp_path: Path) -> None:
    before = _exp_ids(filled)
    deleted = tmp_path / "deleted.xlsx"
    _openpyxl_edit(filled, deleted, lambda ws: ws.delete_rows(5))
    assert _verified(deleted, engine="auto") == before[:3] + before[4:]

    inserted = tmp_path / "inserted.xlsx"

    def insert(ws) -> None:  # type: ignore[no-untyped-def]
        ws.insert_rows(8)
        _type(ws, 8, "NEW1")

    _openpyxl_edit(filled, inserted, insert)
    assert _verified(inserted, engine="auto") == before[:6] + ["NEW1"] + before[6:]

    appended = tmp_path / "appended.xlsx"
    _openpyxl_edit(filled, appended, lambda ws: _type(ws, 28, "NEW2", 4, 50))
    assert _verified(appended, engine="auto") == before + ["NEW2"]


def test_a_row_beyond_the_formulas_fails_verify_by_name(filled: Path, tmp_path: Path) -> None:
    beyond = LAYOUT.raw_header_row + fill_rows(filled) + 3
    path = tmp_path / "beyond.xlsx"
    _openpyxl_edit(filled, path, lambda ws: _type(ws, beyond, "FAR"))
    report = verify(path)
    assert not report.verification.ok
    assert report.verification.uncovered == [f"row {beyond} (FAR)"]
    result = CliRunner().invoke(main, ["verify", str(path)])  # the command says so too
    assert result.exit_code == 1
    assert f"row {beyond} (FAR)" in result.output


def fill_rows(path: Path) -> int:
    meta = books.sheet(path, "_scm_meta", formulas=True)
    return int({meta.cell(r, 1).value: meta.cell(r, 2).value for r in range(1, meta.max_row + 1)}["rows"])


@pytest.mark.parametrize("rows", ["abc", -5, 10**7, 2.5, True])
def test_tampered_metadata_is_refused_with_exit_2(filled: Path, tmp_path: Path, rows: object) -> None:
    path = tmp_path / "tampered.xlsx"
    meta = books.sheet(filled, "_scm_meta", formulas=True)
    row = next(r for r in range(1, meta.max_row + 1) if meta.cell(r, 1).value == "rows")
    books.retyped(filled, path, "_scm_meta", {f"B{row}": rows})
    result = CliRunner().invoke(main, ["verify", str(path)])
    assert result.exit_code == 2, result.output
    assert "_scm_meta sheet's rows" in result.output
    assert "Traceback" not in result.output
