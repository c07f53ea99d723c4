"""pandas views for notebook users: results, the analysis rows and requests.csv as DataFrames."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from scm_xl.collect.records import requests_frame
from scm_xl.model import analyze
from scm_xl.results import read_results
from support.paths import ARTICLE



def test_results_as_a_frame() -> None:
    table = read_results(ARTICLE)
    frame = table.to_frame()
    assert list(frame["exp_id"]) == [row.exp_id for row in table.rows]
    assert frame["tps"].iloc[0] == pytest.approx(25 / 0.55)
    assert frame["line"].iloc[0] == 2


def test_analysis_rows_as_a_frame() -> None:
    analysis = analyze(read_results(ARTICLE).rows)
    frame = analysis.to_frame()
    assert list(frame["role"]) == [check.role for check in analysis.checks]
    assert frame.set_index("exp_id").loc["E06", "reason"].startswith("excluded: TPS falls")
    assert frame.set_index("exp_id").loc["E04", "predicted_tps"] == pytest.approx(59.5238095, rel=1e-6)


def test_requests_csv_as_a_frame(tmp_path: Path) -> None:
    path = tmp_path / "requests.csv"
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["exp_id", "ok", "output_tokens", "ttft_s", "error"])
        writer.writerow(["E001", "true", "64", "0.05", ""])
        writer.writerow(["E001", "false", "", "", "connect_error"])
    frame = requests_frame(path)
    assert frame["output_tokens"].dtype.kind == "f" and frame["output_tokens"].iloc[0] == 64
    assert frame["ttft_s"].iloc[0] == pytest.approx(0.05)
    assert list(frame["error"]) == ["", "connect_error"]  # text stays text
