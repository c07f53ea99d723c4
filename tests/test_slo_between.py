"""The SLO inverse between measured concurrency levels (scm_xl.slo_between), on a simulator whose
step time grows with the batch: the truth at the levels left out is measured, not assumed."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import pytest
from click.testing import CliRunner

from scm_xl import goodput, slo_between
from scm_xl.cli import main
from scm_xl.latency import latency_model
from scm_xl.results import read_results
from scm_xl.simulator import SimConfig, running_simulator
from support.slo import NO_KEYS

# step = 30 ms + 10 ms per sequence: TPOT about 70 ms at concurrency 4 and 80 ms at 5, TPS about
# c / step. The SLO's TPOT threshold sits midway between the measured ITLs at 4 and 5, and the target
# TPS midway (geometric) between the measured TPS at 3 and 4: measuring every level, the answer is
# concurrency 4 on one replica, and the levels 3 and 4 are the ones left out.
SIM = SimConfig(model_name="m", step_base_s=0.03, step_per_seq_s=0.01, prefill_s_per_token=0.0)
ATTAINMENT = "0.6"
DENSE, LEFT_OUT = (1, 2, 3, 4, 5), (3, 4)


@pytest.fixture(scope="module")
def measured(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every level of DENSE measured: results.csv and its requests CSV."""
    folder = tmp_path_factory.mktemp("between")
    results = folder / "results.csv"
    with running_simulator(SIM) as url:
        outcome = CliRunner().invoke(main, ["collect", "--base-url", url, "-m", "m",
                                            "-c", ",".join(map(str, DENSE)), "--max-tokens", "6", "-n", "6",
                                            "--warmup", "1", "-q", "--output", str(results)], env=NO_KEYS)
    assert outcome.exit_code == 0, outcome.output
    return results


def _question(results: Path) -> tuple[str, str]:
    """The SLO text and the target TPS, placed by the dense measurement (see SIM)."""
    by_level = {row.concurrency: row for row in read_results(results).rows}
    itl = (by_level[4].mean_itl_s + by_level[5].mean_itl_s) / 2
    return f"tpot={itl:.5f}", f"{math.sqrt(by_level[3].tps * by_level[4].tps):.3f}"


def _without(results: Path, folder: Path, left_out: tuple[int, ...]) -> Path:
    """A copy of the measurement without the experiments at `left_out` (results and requests)."""
    with results.open(newline="") as f:
        rows = list(csv.DictReader(f))
    gone = {r["exp_id"] for r in rows if int(r["concurrency"]) in left_out}
    out = folder / "sparse.csv"
    for source, target in ((results, out), (goodput.requests_path_for(results), goodput.requests_path_for(out))):
        with source.open(newline="") as f:
            reader = csv.DictReader(f)
            kept = [r for r in reader if r["exp_id"] not in gone]
            fields = reader.fieldnames
        assert fields is not None
        with target.open("w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=fields)
            writer.writeheader()
            writer.writerows(kept)
    return out


def _cells(results: Path, slo: goodput.Slo) -> tuple[list[goodput.SloCell], goodput.RequestSamples, list]:
    rows = read_results(results).rows
    samples = goodput.read_samples(results)
    return goodput.cells(goodput.evaluate(rows, samples, slo).experiments, slo), samples, rows


def test_a_level_left_out_is_predicted_as_it_measured(measured: Path, tmp_path: Path) -> None:
    slo = goodput.parse_slo(_question(measured)[0], float(ATTAINMENT))
    truth = {c.concurrency: c for c in _cells(measured, slo)[0]}
    cells, samples, rows = _cells(_without(measured, tmp_path, LEFT_OUT), slo)
    predicted, reasons = slo_between.between_cells(cells, samples.by_exp, latency_model(rows), slo)
    assert reasons == []
    by_level = {c.concurrency: c for c in predicted}
    assert sorted(by_level) == [3, 4]  # every whole level strictly between measured ones, no more
    assert (by_level[3].predicted_from, by_level[4].predicted_from) == (2, 5)  # nearest on a log scale
    four = by_level[4]
    assert four.tally.requests == truth[5].tally.requests  # its requests, rescaled
    # measured, 4 meets the SLO and 5 does not; the rescaled requests of 5 say what 4 said
    assert truth[4].meets and not truth[5].meets and truth[5].tally.attainment < 0.5
    assert four.meets and four.tally.attainment == pytest.approx(truth[4].tally.attainment, abs=0.1)
    for level in LEFT_OUT:
        assert by_level[level].tally.tps == pytest.approx(truth[level].tally.tps, rel=0.03)


def _solve(results: Path, question: tuple[str, str], *extra: str) -> dict:
    slo, target = question
    outcome = CliRunner().invoke(main, ["solve", str(results), "--target-tps", target, "--slo", slo,
                                        "--attainment", ATTAINMENT, "--json", *extra], env=NO_KEYS)
    assert outcome.exit_code == 0, outcome.output
    return json.loads(outcome.output)


def test_between_levels_picks_what_measuring_every_level_picks(measured: Path, tmp_path: Path) -> None:
    sparse, question = _without(measured, tmp_path, LEFT_OUT), _question(measured)
    brute = _solve(measured, question)["capacity"]["chosen"]  # every level measured: the truth
    between = _solve(sparse, question, "--between-levels")
    chosen = between["capacity"]["chosen"]
    assert (chosen["replicas"], chosen["concurrency"]) == (brute["replicas"], brute["concurrency"]) == (1, 4)
    assert chosen["predicted_from"] == 5 and brute["predicted_from"] is None
    # measured levels only, the sparse data need more slots than the truth
    alone = _solve(sparse, question)["capacity"]["chosen"]
    assert (alone["replicas"], alone["concurrency"]) != (1, 4)
    assert alone["predicted_from"] is None


def test_the_answer_says_it_is_predicted(measured: Path, tmp_path: Path) -> None:
    sparse, (slo, target) = _without(measured, tmp_path, LEFT_OUT), _question(measured)
    outcome = CliRunner().invoke(main, ["solve", str(sparse), "--target-tps", target, "--slo", slo,
                                        "--attainment", ATTAINMENT, "--between-levels"], env=NO_KEYS)
    assert outcome.exit_code == 0, outcome.output
    text = " ".join(outcome.output.split())
    assert "concurrency 4" in text and "predicted from the requests of concurrency 5 by the latency model" in text
    assert "rescaled requests" in text and slo_between.PREDICTED_NOTE in text
    outcome = CliRunner().invoke(main, ["predict", str(sparse), "--concurrency", "4", "--max-tokens", "6",
                                        "--method", "latency", "--slo", slo, "--attainment", ATTAINMENT,
                                        "--json"], env=NO_KEYS)
    assert outcome.exit_code == 0, outcome.output
    data = json.loads(outcome.output)["slo"]
    assert data["predicted"] is True and data["source"] == "predicted_between_levels"
    assert data["predicted_from"] == 5 and data["meets_slo"] is True


def test_between_levels_needs_an_slo(measured: Path) -> None:
    outcome = CliRunner().invoke(main, ["solve", str(measured), "--target-tps", "50", "--between-levels"],
                                 env=NO_KEYS)
    assert outcome.exit_code == 2 and "--between-levels need --slo" in outcome.output
