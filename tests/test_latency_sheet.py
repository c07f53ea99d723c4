"""The latency model live in the workbook: the LatencyModel sheet equals scm_xl.latency cell by
cell on IronCalc and LibreOffice, its knee is the one fill profiles, and a person who types another
knee into it in LibreOffice sees every coefficient and forecast follow (verify passes)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from scm_xl.latency import latency_model
from scm_xl.results import read_results
from scm_xl.workbook.fill import fill, verify
from scm_xl.workbook.latency_sheet import SETTING_ROWS, SHEET_TITLES, LatencyLayout
from support import books
from support.latency import Sweep, measure
from support.paths import UNO_PYTHON

TITLE = SHEET_TITLES["en"]


@pytest.fixture(scope="module")
def measured_csv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from scm_xl.results import write_results

    folder = tmp_path_factory.mktemp("latency_sheet")
    rows = [row for sweep in measure(folder, *(Sweep("T", prompt, (1, 2, 4, 8, 16), (16,)) for prompt in (32, 512)))
            for row in sweep]
    path = folder / "results.csv"
    write_results(path, rows)
    return path


@pytest.fixture(scope="module")
def filled(measured_csv: Path) -> Path:
    out = measured_csv.with_name("filled.xlsx")
    report = fill(measured_csv, output=out, lang="en")
    assert report.verification.ok, [str(m) for m in report.verification.mismatches[:5]]
    return out


def _values(path: Path) -> books.Sheet:
    return books.sheet(path, TITLE)


def _rows(path: Path) -> LatencyLayout:
    """The sheet's layout in the filled workbook (its sizes from the hidden meta sheet)."""
    return LatencyLayout(books.layout(path))


def test_the_sheet_holds_the_fitted_knee_and_the_python_forecast(filled: Path, measured_csv: Path) -> None:
    ws = _values(filled)
    FORWARD_ROWS = _rows(filled).forward_rows
    model = latency_model(read_results(measured_csv).rows)
    fit = model.fit_for("sim")
    assert fit is not None and fit.knee_limit is not None
    assert ws[f"D{SETTING_ROWS['knee']}"].value == fit.knee_limit
    assert ws[f"C{SETTING_ROWS['knee']}"].value == fit.knee_limit
    c, length = ws[f"B{FORWARD_ROWS['concurrency']}"].value, ws[f"B{FORWARD_ROWS['max_tokens']}"].value
    forecast = model.forecast(c, length, "sim", None)
    assert ws[f"B{FORWARD_ROWS['tps']}"].value == pytest.approx(forecast.tps, rel=1e-9)
    assert ws[f"B{FORWARD_ROWS['ttft']}"].value == pytest.approx(forecast.ttft_s, rel=1e-9)


@pytest.mark.libreoffice
def test_libreoffice_computes_the_sheet_as_the_reference(measured_csv: Path, tmp_path: Path) -> None:
    report = fill(measured_csv, output=tmp_path / "lo.xlsx", lang="en", engine="libreoffice")
    assert report.verification.ok, [str(m) for m in report.verification.mismatches[:5]]
    assert any(sheet == TITLE for sheet, _ in report.verification.values)


@pytest.mark.libreoffice
def test_a_knee_typed_in_libreoffice_flows_through(filled: Path, tmp_path: Path) -> None:
    if not shutil.which("soffice"):
        pytest.skip("LibreOffice (soffice) not installed")
    before = _values(filled)
    ll = _rows(filled)
    FORWARD_ROWS = ll.forward_rows
    knee = before[f"C{SETTING_ROWS['knee']}"].value
    typed = knee + 2
    edited = tmp_path / "edited.xlsx"
    spec = tmp_path / "jobs.json"
    spec.write_text(json.dumps([{"in": str(filled), "out": str(edited), "sheet": TITLE, "edits": [
        {"set": f"B{SETTING_ROWS['knee']}", "value": typed},
        {"set": f"B{FORWARD_ROWS['concurrency']}", "value": 12},
        {"set": f"B{FORWARD_ROWS['prompt_tokens']}", "value": 300}]}]))
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    result = subprocess.run([UNO_PYTHON, str(Path(__file__).with_name("uno_edit.py")), str(spec)],
                            capture_output=True, text=True, timeout=240, env=env)
    assert result.returncode == 0, result.stderr[-2000:]
    after = _values(edited)
    assert after[f"C{SETTING_ROWS['knee']}"].value == typed
    d_row = ll.coef_rows["d"]
    assert after[f"B{d_row}"].value != before[f"B{d_row}"].value  # a coefficient refitted at the typed knee
    report = verify(edited, engine="ironcalc")
    assert report.verification.ok, [str(m) for m in report.verification.mismatches[:5]]
    # the typed knee survives a refill (a person's hand-set cell)
    again = fill(None, workbook=edited, output=tmp_path / "again.xlsx")
    assert again.verification.ok
    assert _values(tmp_path / "again.xlsx")[f"B{SETTING_ROWS['knee']}"].value == typed
