"""Goodput by the DistServe definition (scm_xl/goodput.py): the SLO spelling, per-request
attainment and goodput against a hand count of a per-request CSV (one built here, one the
collector wrote against the simulator on 127.0.0.1), the Wilson interval against statsmodels,
the requests CSV's reasons and errors, and the inverse against a brute-force search."""

from __future__ import annotations

import csv
import itertools
import random
from pathlib import Path

import pytest
from click.testing import CliRunner

from scm_xl.cli import main
from scm_xl.errors import InputError, UsageError
from scm_xl.goodput import (
    E2EL, FAILED, SAMPLE_SIZE, TARGET_TPS, TPOT, TTFT, WILSON_CONFIDENCE, ExperimentGoodput, RequestSample, Slo,
    Tally, evaluate, parse_slo, read_samples, requests_needed, requests_path_for, select_cells, solve_slo, tally,
    wilson_interval,
)
from scm_xl.results import read_results, write_results
from scm_xl.simulator import SimConfig, running_simulator
from support.goodput import HAND, result_row, write_requests

NO_KEYS = {"SCM_XL_API_KEY": None, "SILICONFLOW_API_KEY": None, "OPENAI_API_KEY": None}


def proportion_confint(count: int, nobs: int, alpha: float, method: str) -> tuple[float, float]:
    """statsmodels' interval, the reference the Wilson interval is checked against; statsmodels is
    imported by the tests that ask (a second of every pytest worker's collection otherwise)."""
    from statsmodels.stats.proportion import proportion_confint as theirs

    low, high = theirs(count, nobs, alpha=alpha, method=method)
    return low, high
SLO = Slo(ttft_s=0.5, tpot_s=0.05, e2el_s=2.0)


# -- the SLO ------------------------------------------------------------------------------------

@pytest.mark.parametrize("text", ["ttft=0.5,tpot=0.05,e2el=10", "ttft:0.5,tpot:0.05,e2el:9.9s",
                                  "ttft=500ms, tpot=50ms e2el=10s", "TTFT = 0.5, tpot=0.05,e2el=10000ms"])
def test_slo_spellings(text: str) -> None:
    slo = parse_slo(text)
    assert slo.ttft_s == pytest.approx(0.5) and slo.tpot_s == pytest.approx(0.05)
    assert slo.e2el_s == pytest.approx(10 if "9.9" not in text else 9.9) and slo.attainment == 0.95


def test_any_subset_and_the_target() -> None:
    slo = parse_slo("e2el=3", attainment=0.9)
    assert (slo.ttft_s, slo.tpot_s, slo.e2el_s, slo.attainment) == (None, None, 3.0, 0.9)
    assert slo.describe() == "e2el=3 @ 90%"


@pytest.mark.parametrize(("text", "named"), [
    ("ttft=abc", "'ttft=abc'"), ("foo=1", "unknown threshold 'foo'"), ("ttft=0", "'ttft=0'"),
    ("ttft=-1", "'ttft=-1'"), ("ttft=1,ttft=2", "ttft is given twice"), ("ttft", "'ttft' is not KEY=VALUE"),
    ("", "empty"), ("ttft=nan", "'ttft=nan'"), ("ttft=inf", "'ttft=inf'"), ("e2el=5,tpot=1e999", "'tpot=1e999'"),
    ("ttft:500", "'ttft:500' is ambiguous"),  # vLLM's milliseconds, read as seconds it would be 500 s
])
def test_bad_slo_items_are_named(text: str, named: str) -> None:
    with pytest.raises(UsageError) as caught:
        parse_slo(text)
    assert named in str(caught.value) and str(caught.value).startswith("--slo")


def test_attainment_target_must_be_provable() -> None:
    for bad in (0.0, 1.0, 1.5):
        with pytest.raises(UsageError, match="attainment"):
            Slo(e2el_s=1, attainment=bad)


# -- per request and per experiment ---------------------------------------------------------------

def test_attainment_and_goodput_equal_a_hand_count(tmp_path: Path) -> None:
    write_requests(tmp_path / "results.requests.csv", HAND)
    samples = read_samples(tmp_path / "results.csv", tmp_path / "results.requests.csv")
    table = evaluate([result_row()], samples, SLO)
    assert table.unjudged == {} and table.reason is None
    t = table.experiments[0].tally
    assert (t.requests, t.good, t.good_output_tokens, t.output_tokens) == (8, 3, 21, 51)
    assert t.attainment == 3 / 8
    assert t.goodput_tps == pytest.approx(21 / 3.0) and t.tps == pytest.approx(result_row().tps)
    assert dict(t.misses) == {TTFT: 1, TPOT: 2, E2EL: 1, FAILED: 2}
    assert t.binding == TPOT  # tpot and failed tie at 2: the first in THRESHOLDS order
    assert t.mean_latency_s == pytest.approx((0.6 + 1.0 + 1.5 + 2.5 + 1.9 + 0.05 + 0.85 + 0.5) / 8)
    assert t.mean_prompt_tokens == 100 and t.mean_output_tokens == 51 / 8


def test_tpot_at_one_token_holds_vacuously() -> None:
    one = RequestSample("E", True, ttft_s=0.1, latency_s=1.9, output_tokens=1, prompt_tokens=None)
    assert one.tpot_s is None
    assert tally([one], Slo(tpot_s=0.001), 1.0).good == 1
    two = RequestSample("E", True, ttft_s=0.1, latency_s=1.9, output_tokens=2, prompt_tokens=None)
    assert two.tpot_s == pytest.approx(1.8) and tally([two], Slo(tpot_s=0.001), 1.0).good == 0
    no_first_token = RequestSample("E", True, ttft_s=None, latency_s=0.1, output_tokens=0, prompt_tokens=None)
    assert tally([no_first_token], Slo(ttft_s=1), 1.0).good == 0  # unmeasured: cannot be shown to hold


def test_goodput_equals_a_hand_count_of_what_the_collector_wrote(tmp_path: Path) -> None:
    """A real run: the simulator with fixed delays (first token 10 ms, then 4 ms per token), the
    collector's own CSVs; attainment and goodput re-counted here from the CSV's cells."""
    results = tmp_path / "results.csv"
    with running_simulator(SimConfig(model_name="m", ttft_s=0.01, itl_s=0.004)) as url:
        outcome = CliRunner().invoke(main, ["collect", "--base-url", url, "-m", "m", "-c", "1,2",
                                            "--max-tokens", "3,12", "-n", "3", "--warmup", "1", "-q",
                                            "--out", str(results)], env=NO_KEYS)
    assert outcome.exit_code == 0, outcome.output
    assert requests_path_for(results) == tmp_path / "requests.csv"
    slo = Slo(ttft_s=0.5, tpot_s=0.2, e2el_s=0.03)  # 3 tokens take ~18 ms, 12 tokens ~54 ms
    rows = read_results(results).rows
    table = evaluate(rows, read_samples(results), slo)
    assert table.unjudged == {} and len(table.experiments) == 4
    with open(tmp_path / "requests.csv", encoding="utf-8", newline="") as handle:
        cells = [r for r in csv.DictReader(handle) if r["warmup"] == "false"]
    for experiment, row in zip(table.experiments, rows):
        mine = [r for r in cells if r["exp_id"] == row.exp_id]
        good = [r for r in mine if r["status"] == "ok" and float(r["ttft_s"]) <= 0.5
                and float(r["latency_s"]) <= 0.03
                and (int(r["completion_tokens"]) <= 1 or (float(r["latency_s"]) - float(r["ttft_s"]))
                     / (int(r["completion_tokens"]) - 1) <= 0.2)]
        t = experiment.tally
        assert t.requests == len(mine) == row.concurrency * 3
        assert t.good == len(good)
        assert t.goodput_tps == pytest.approx(sum(int(r["completion_tokens"]) for r in good) / row.total_time_s)
        assert t.goodput_tps <= t.tps == pytest.approx(row.tps)
        assert t.interval == pytest.approx(proportion_confint(len(good), len(mine), alpha=0.05, method="wilson"))


# -- the Wilson interval --------------------------------------------------------------------------

def test_wilson_interval_is_statsmodels() -> None:
    assert WILSON_CONFIDENCE == 0.95
    for total in (1, 2, 7, 20, 73, 400):
        for good in sorted({0, 1, total // 3, total // 2, total - 1, total}):
            if 0 <= good <= total:
                ours = wilson_interval(good, total)
                theirs = proportion_confint(good, total, alpha=1 - WILSON_CONFIDENCE, method="wilson")
                assert ours == pytest.approx(theirs, abs=1e-12), (good, total)
    assert wilson_interval(9, 10, 0.90) == pytest.approx(proportion_confint(9, 10, alpha=0.10, method="wilson"))


def test_requests_needed_is_the_fewest_that_can_prove_the_target() -> None:
    for target in (0.5, 0.9, 0.95, 0.99):
        need = requests_needed(target)
        assert proportion_confint(need, need, alpha=0.05, method="wilson")[0] >= target
        assert proportion_confint(need - 1, need - 1, alpha=0.05, method="wilson")[0] < target
    assert requests_needed(0.95) == 73


# -- the requests CSV: naming, reasons, errors ----------------------------------------------------

def test_the_requests_csv_is_named_as_the_collector_names_it(tmp_path: Path) -> None:
    assert requests_path_for(tmp_path / "results.csv") == tmp_path / "requests.csv"
    assert requests_path_for(tmp_path / "run7.csv") == tmp_path / "run7.requests.csv"


def test_no_requests_csv_is_a_reason_not_an_error(tmp_path: Path) -> None:
    samples = read_samples(tmp_path / "results.csv")
    assert samples.by_exp == {} and "no per-request CSV" in (samples.reason or "")
    assert str(tmp_path / "requests.csv") in (samples.reason or "")
    table = evaluate([result_row()], samples, SLO)
    assert table.experiments == [] and table.reason == samples.reason and "E001" in table.unjudged
    (tmp_path / "requests.csv").write_text("")
    assert "is empty" in (read_samples(tmp_path / "results.csv").reason or "")
    (tmp_path / "requests.csv").write_text("exp_id,latency\nE001,1.0\n")
    reason = read_samples(tmp_path / "results.csv").reason or ""
    assert "not a requests CSV" in reason and "warmup" in reason


def test_a_bad_cell_names_file_line_and_column(tmp_path: Path) -> None:
    rows = [dict(r) for r in HAND]
    rows[2]["latency_s"] = "1,5"
    path = write_requests(tmp_path / "requests.csv", rows)
    with pytest.raises(InputError) as caught:
        read_samples(tmp_path / "results.csv")
    assert (caught.value.path, caught.value.line, caught.value.column) == (str(path), 4, "latency_s")
    rows[2]["latency_s"], rows[4]["status"] = "1.5", "fine"
    write_requests(path, rows)
    with pytest.raises(InputError, match=r"requests.csv:6: status: expected ok, rate_limited or failed"):
        read_samples(tmp_path / "results.csv")


def test_a_half_written_last_line_is_dropped(tmp_path: Path) -> None:
    path = write_requests(tmp_path / "requests.csv", HAND)
    path.write_text(path.read_text() + "E002,m,2,10,,1,0,0,false,0.0,0.0,0.1")  # killed mid-write
    samples = read_samples(tmp_path / "results.csv")
    assert samples.dropped_line == len(HAND) + 2 and set(samples.by_exp) == {"E001"}


def test_request_rows_that_are_not_the_results_rows_are_not_judged(tmp_path: Path) -> None:
    write_requests(tmp_path / "requests.csv", HAND)
    samples = read_samples(tmp_path / "results.csv")
    table = evaluate([result_row(total_requests=9), result_row("E002")], samples, SLO)
    assert table.experiments == [] and table.reason
    assert "8 measured request(s) of E001" in table.unjudged["E001"]
    assert "no request rows for E002" in table.unjudged["E002"]


# -- the inverse ------------------------------------------------------------------------------------

def synthetic(seed: int) -> list[ExperimentGoodput]:
    """Measured experiments of two models over a grid, with repeats, drawn at random."""
    rng = random.Random(seed)
    out = []
    for model, concurrency, max_tokens, repeat in itertools.product(("a", "B"), (1, 2, 4, 8, 16), (64, 256),
                                                                    (1, 2)):
        requests = rng.choice((20, 60, 120))
        good = max(0, requests - rng.choice((0, 0, 1, 3, 10, 40)))
        tokens = requests * max_tokens
        wall = tokens / (rng.uniform(20, 60) * concurrency)
        misses = ((TTFT, rng.randint(0, requests - good)), (TPOT, requests - good), (E2EL, 0), (FAILED, 0))
        out.append(ExperimentGoodput(
            exp_id=f"{model}{concurrency}-{max_tokens}-{repeat}", model=model, concurrency=concurrency,
            max_tokens=max_tokens, prompt_level=None, repeat=repeat,
            tally=Tally(requests, good, tokens, good * max_tokens, wall, misses, wall * requests, requests,
                        100 * requests, requests)))
    return out


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_inverse_picks_what_brute_force_picks(seed: int) -> None:
    slo = Slo(ttft_s=1, tpot_s=0.1, attainment=0.9)
    experiments = synthetic(seed)
    for target in (10, 50, 100, 300, 600, 1200, 1e6):
        solution = solve_slo(select_cells(experiments, slo), target, slo)
        found = []  # brute force: every measured configuration, its repeats pooled by hand
        for model, concurrency, max_tokens in itertools.product(("a", "B"), (1, 2, 4, 8, 16), (64, 256)):
            runs = [e.tally for e in experiments
                    if (e.model, e.concurrency, e.max_tokens) == (model, concurrency, max_tokens)]
            good, requests = sum(t.good for t in runs), sum(t.requests for t in runs)
            tps = sum(t.output_tokens for t in runs) / sum(t.wall_s for t in runs)
            low = proportion_confint(good, requests, alpha=0.05, method="wilson")[0]
            if low >= 0.9 and tps >= target:
                found.append((concurrency, max_tokens, model.casefold(), model))
        expected = min(found, default=None)
        got = solution.cheapest
        assert (None if got is None else (got.concurrency, got.max_tokens, got.model.casefold(), got.model)) \
            == expected, target


def cell_experiment(exp_id: str, concurrency: int, good: int, requests: int, tps: float,
                    misses: tuple[tuple[str, int], ...]) -> ExperimentGoodput:
    tokens = requests * 100
    return ExperimentGoodput(exp_id=exp_id, model="m", concurrency=concurrency, max_tokens=100, prompt_level=None,
                             repeat=1, tally=Tally(requests, good, tokens, good * 100, tokens / tps, misses,
                                                   1.0 * requests, requests, 50 * requests, requests))


def test_the_inverse_says_what_binds() -> None:
    slo = Slo(ttft_s=1, tpot_s=0.1, attainment=0.9)
    experiments = [
        cell_experiment("E1", 1, 200, 200, 40, ((TTFT, 0), (TPOT, 0), (FAILED, 0))),   # meets, too slow
        cell_experiment("E2", 2, 150, 200, 90, ((TTFT, 10), (TPOT, 45), (FAILED, 0))),  # fast, tpot misses
        cell_experiment("E4", 4, 200, 200, 150, ((TTFT, 0), (TPOT, 0), (FAILED, 0))),  # meets and fast
        cell_experiment("E8", 8, 10, 10, 300, ((TTFT, 0), (TPOT, 0), (FAILED, 0))),  # none missed, too few
    ]
    solution = solve_slo(select_cells(experiments, slo), 80, slo)
    assert solution.cheapest is not None and solution.cheapest.concurrency == 4
    assert solution.binding == (TPOT,) and solution.blocked is not None and solution.blocked.concurrency == 2
    assert solution.best is solution.cheapest and solution.best_binding == (SAMPLE_SIZE,)
    assert any("fewer than 35 requests" in note for note in solution.notes)
    short = solve_slo(select_cells(experiments[:1], slo), 80, slo)
    assert short.cheapest is None and short.binding == (TARGET_TPS,)
    assert solution.report()["cheapest"]["exp_ids"] == ["E4"]


def test_prompt_levels_are_not_a_knob() -> None:
    slo = Slo(e2el_s=1)
    one = cell_experiment("E1", 1, 10, 10, 40, ((E2EL, 0), (FAILED, 0)))
    other = ExperimentGoodput(**{**one.__dict__, "exp_id": "E2", "prompt_level": 512})
    with pytest.raises(UsageError, match="prompt levels none, 512"):
        select_cells([one, other], slo)
    assert [c.exp_ids for c in select_cells([one, other], slo, prompt_level=512)] == [("E2",)]


def test_results_written_and_read_back_keep_their_wall_time(tmp_path: Path) -> None:
    """goodput divides by the results CSV's total_time_s, as read back (the TPS it shows)."""
    write_results(tmp_path / "results.csv", [result_row()])
    write_requests(tmp_path / "requests.csv", HAND)
    rows = read_results(tmp_path / "results.csv").rows
    t = evaluate(rows, read_samples(tmp_path / "results.csv"), SLO).experiments[0].tally
    assert t.wall_s == rows[0].total_time_s and t.tps == rows[0].tps
