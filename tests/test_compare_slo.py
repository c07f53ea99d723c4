"""compare --slo: both sides' requests judged under one SLO (the per-request CSV beside each), each
configuration's attainment old -> new, and a configuration that met the SLO and no longer does flagged.
Real runs on the simulator on 127.0.0.1: the new one decodes five times slower."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from scm_xl import goodput
from scm_xl.cli import main
from scm_xl.results import read_results
from support.slo import collect_fixed_delays

SLO_TEXT, ATTAINMENT = "e2el=0.05", 0.4  # 3 tokens: ~18 ms at 4 ms a token (good), ~90 ms at 40 ms (a miss)


def collect(folder: Path, itl_s: float) -> Path:
    return collect_fixed_delays(folder, itl_s=itl_s, concurrency="1,2", max_tokens="3")


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return (collect(tmp_path_factory.mktemp("baseline"), 0.004), collect(tmp_path_factory.mktemp("new"), 0.04))


def pooled(results: Path) -> dict[int, goodput.SloCell]:
    """The configurations of one run judged by hand through the goodput module: concurrency -> cell."""
    slo = goodput.parse_slo(SLO_TEXT, ATTAINMENT)
    table = goodput.evaluate(read_results(results).rows, goodput.read_samples(results), slo)
    return {cell.concurrency: cell for cell in goodput.cells(table.experiments, slo)}


def test_attainment_old_and_new_and_the_drop(runs: tuple[Path, Path]) -> None:
    baseline, new = runs
    result = CliRunner().invoke(main, ["compare", str(baseline), str(new), "--slo", SLO_TEXT,
                                       "--attainment", str(ATTAINMENT), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)["slo"]
    old, fresh = pooled(baseline), pooled(new)
    assert all(cell.meets for cell in old.values()) and not any(cell.meets for cell in fresh.values())
    rows = {row["concurrency"]: row for row in data["rows"]}
    assert sorted(rows) == [1, 2]
    for c, row in rows.items():
        assert row["baseline"]["attainment"] == old[c].tally.attainment
        assert row["new"]["attainment"] == fresh[c].tally.attainment
        assert row["baseline"]["attainment_interval"] == list(old[c].tally.interval)
        assert row["dropped_below_target"] is True
    assert data["dropped_below_target"] == 2 and data["baseline_reason"] is None is data["new_reason"]
    text = CliRunner().invoke(main, ["compare", str(baseline), str(new), "--slo", SLO_TEXT,
                                     "--attainment", str(ATTAINMENT)]).output
    assert "Under the SLO e2el" in text and text.count("DROPPED below the target") == 2
    assert "2 configuration(s) met the SLO in the baseline and no longer do" in text
    # the same run against itself: nothing dropped
    same = json.loads(CliRunner().invoke(main, ["compare", str(baseline), str(baseline), "--slo", SLO_TEXT,
                                                "--attainment", str(ATTAINMENT), "--json"]).output)["slo"]
    assert same["dropped_below_target"] == 0 and len(same["rows"]) == 2


def test_without_the_per_request_csv_it_says_so(runs: tuple[Path, Path], tmp_path: Path) -> None:
    baseline, new = runs
    alone = tmp_path / "results.csv"
    shutil.copy(new, alone)  # no requests.csv beside it
    result = CliRunner().invoke(main, ["compare", str(baseline), str(alone), "--slo", SLO_TEXT])
    assert result.exit_code == 0, result.output
    assert f"new: no per-request CSV {tmp_path / 'requests.csv'}" in result.output
    assert "attainment not compared" in result.output


def test_a_bad_slo_is_refused_before_anything_is_read(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["compare", str(tmp_path / "a.csv"), str(tmp_path / "b.csv"),
                                       "--slo", "ttft=fast"])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "--slo" in result.output and "ttft" in result.output
