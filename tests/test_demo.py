"""The main job end to end: simulator on loopback, collect, fill, recalculate, verify."""

from __future__ import annotations

import csv
from pathlib import Path

import openpyxl
import pytest
from click.testing import CliRunner

from scm_xl.cli import main
from scm_xl.results import read_results


@pytest.mark.slow
def test_demo_end_to_end(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    result = CliRunner().invoke(main, ["demo", "--out", str(out), "--target-tps", "200"])
    assert result.exit_code == 0, result.output
    assert "Traceback" not in result.output

    table = read_results(out / "results.csv")
    assert len(table.rows) == 24  # 2 models x 4 concurrency x 3 max_tokens
    assert {r.model for r in table.rows} == {"Qwen/Qwen2.5-7B-Instruct", "meta-llama/Llama-3.1-8B-Instruct"}
    assert all(r.failed_requests == 0 and r.rate_limited_requests == 0 for r in table.rows)
    with open(out / "requests.csv", newline="", encoding="utf-8") as fh:
        requests = list(csv.DictReader(fh))
    assert {r["exp_id"] for r in requests} == {r.exp_id for r in table.rows}
    assert sum(int(r["completion_tokens"]) for r in requests if r["warmup"] != "true") == \
        sum(r.total_output_tokens for r in table.rows)

    wb = openpyxl.load_workbook(out / "workbook.xlsx")
    assert "BaseTPS" in wb.defined_names
    text = result.output
    assert "verified:" in text and "match the Python reference" in text
    # Clean simulator data: the physics checks stay quiet, and there is something to check.
    assert "physics warnings: 0 of 24 rows" in text
    assert "check rows: 17" in text
    assert "verdict: insufficient" not in text
    assert "Inverse: 200 TPS at max_tokens 64 needs concurrency 4" in text
