"""The method cell: the workbook's forward and inverse answers from the chain or from least squares."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from data.gen import full_factorial, write_csv
from scm_xl.cli import main
from scm_xl.workbook.fill import verify
from scm_xl.workbook import summary_sheet
from scm_xl.workbook.layout import Layout
from support import books
from support.engines import ENGINES, computed



@pytest.fixture(scope="module")
def filled(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    tmp = tmp_path_factory.mktemp("method")
    csv_path = write_csv(tmp / "r.csv", full_factorial(seed=11, sigma=0.04))
    out = tmp / "r.xlsx"
    result = CliRunner().invoke(main, ["fill", str(csv_path), "-o", str(out), "--lang", "en", "--method", "lsq"])
    assert result.exit_code == 0, result.output
    lo = Layout(lang="en")
    books.retyped(out, out, lo.title("summary"), {  # the inputs are typed on the Summary
        summary_sheet.INPUTS["forward.concurrency"]: 4,
        summary_sheet.INPUTS["forward.max_tokens"]: 100,
        summary_sheet.INPUTS["forward.model"]: "model-b"})
    return csv_path, out


@pytest.mark.parametrize("engine", ENGINES)
def test_method_lsq_drives_the_forward_answer(filled: tuple[Path, Path], engine: str) -> None:
    csv_path, path = filled
    report = verify(path, engine=engine)
    assert report.verification.ok, report.verification.mismatches[:5]
    assert report.analysis.settings.method == "lsq"
    values = computed(report)  # the engine's values of every formula cell, from verify's recalculation
    lo = Layout(lang="en")
    forward = values.get(lo.title("derivation"), f"B{lo.forward_rows['tps']}")
    cli = CliRunner().invoke(main, ["predict", str(csv_path), "--concurrency", "4", "--max-tokens", "100",
                                    "--model", "model-b", "--method", "lsq", "--json"])
    assert forward == pytest.approx(json.loads(cli.output)["tps"], rel=1e-9)  # the sheet equals lsq.py
    chain = CliRunner().invoke(main, ["predict", str(csv_path), "--concurrency", "4", "--max-tokens", "100",
                                      "--model", "model-b", "--method", "chain", "--json"])
    assert forward != pytest.approx(json.loads(chain.output)["tps"], rel=1e-9)  # and differs from the chain
