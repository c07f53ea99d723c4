"""Latency in the workbook: the raw-data sheet carries the percentiles, and the inverse on the
derivation sheet takes a P95-latency limit, agreeing with `scm-xl solve --max-latency-p95`."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import openpyxl
import pytest
from click.testing import CliRunner
from data.gen import full_factorial

from scm_xl.cli import main
from scm_xl.engines import get_engine
from scm_xl.results import write_results
from scm_xl.workbook import summary_sheet
from scm_xl.workbook.fill import fill, verify
from scm_xl.workbook.layout import Layout

LAYOUT = Layout(lang="en")


def with_latency(rows):  # type: ignore[no-untyped-def]
    """P95 latency grows with concurrency and length; one fault-free replicate differs, so the
    workbook has to take the median as solve does."""
    out = []
    for row in rows:
        latency = 0.02 * row.max_tokens * (1 + 0.4 * row.concurrency) + (0.3 if row.repeat == 2 else 0.0)
        out.append(replace(row, latency_p95_s=round(latency, 4), ttft_p95_s=round(0.05 * row.concurrency, 4)))
    return out


@pytest.fixture(scope="module")
def csv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("latency") / "latency.csv"
    write_results(path, with_latency(full_factorial(seed=5)))
    return path


def _solve(csv: Path, target: float, limit: float | None) -> dict:
    args = ["solve", str(csv), "--target-tps", str(target), "--max-tokens", "50", "--model", "model-a", "--json"]
    if limit is not None:
        args += ["--max-latency-p95", str(limit)]
    result = CliRunner().invoke(main, args)
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.output)


@pytest.mark.parametrize("limit", [None, 2.0, 3.5, 0.5])
def test_the_inverse_with_a_latency_limit_matches_solve(csv: Path, limit: float | None, tmp_path: Path) -> None:
    target = 60.0
    out = tmp_path / "latency.xlsx"
    fill(csv, output=out, engine="ironcalc", lang="en")
    wb = openpyxl.load_workbook(out)
    summary = wb[LAYOUT.title("summary")]  # the inputs are typed on the Summary
    inv = LAYOUT.inverse_rows
    summary[summary_sheet.INPUTS["inverse.target_tps"]] = target
    summary[summary_sheet.INPUTS["inverse.max_tokens"]] = 50
    summary[summary_sheet.INPUTS["inverse.model"]] = "model-a"
    summary[summary_sheet.INPUTS["inverse.max_latency"]] = limit
    wb.save(out)
    report = verify(out, engine="ironcalc")
    assert report.verification.ok
    values = get_engine("ironcalc").recalculate(out)
    title = LAYOUT.title("derivation")
    recommended = values.get(title, f"B{inv['concurrency']}")
    answer = _solve(csv, target, limit)
    if answer.get("concurrency") is None:
        assert recommended == "unreachable"
    else:
        assert recommended == answer["concurrency"]
        assert values.get(title, f"B{inv['tps']}") == pytest.approx(answer["tps"], rel=1e-9)


def test_the_raw_data_sheet_carries_the_percentiles(csv: Path, tmp_path: Path) -> None:
    out = tmp_path / "latency.xlsx"
    fill(csv, output=out, engine="ironcalc", lang="en")
    raw = openpyxl.load_workbook(out)[LAYOUT.title("raw")]
    assert raw[f"{LAYOUT.entry_col('latency_p95_s')}1"].value == "latency_p95_s"
    assert isinstance(raw[f"{LAYOUT.entry_col('latency_p95_s')}2"].value, float)
    assert isinstance(raw[f"{LAYOUT.entry_col('ttft_p95_s')}2"].value, float)
    summary = openpyxl.load_workbook(out)[LAYOUT.title("summary")]
    assert len(summary._charts) == 4  # TPS, measured vs predicted, P95 latency, P95 TTFT
