"""Answers with their caveats: what predict and solve rest on, the way forward when the data
cannot answer (exit 1), physics warnings in fill's summary, words for people and names in JSON."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from data.gen import sparse_design, write_csv
from scm_xl.cli import main
from scm_xl.model import Settings, analyze
from scm_xl.report import render_consistency, render_physics, to_json
from scm_xl.results import read_results
from support.paths import ARTICLE



def run(*args: object) -> Result:
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.fixture(scope="module")
def sparse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_csv(tmp_path_factory.mktemp("caveats") / "sparse.csv", sparse_design())


def test_predict_says_the_answer_is_a_measured_identify_row() -> None:
    result = run("predict", ARTICLE, "--concurrency", 2, "--max-tokens", 100)
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        "predicted TPS: 59.52",
        "  this is measured row E04 (59.52 TPS), which defines K_len(100): the answer",
        "    repeats that measurement and tests nothing",
        "  consistency verdict: insufficient (0 check rows, MAPE n/a)",
        "  hold-out error (chain, leave-one-out): MAPE n/a, max n/a over 0 rows, verdict",
        "    insufficient",
        "  method: chain (the default: the workbook's method cell, chain for a CSV;",
        "    --method to choose)",
    ]
    data = json.loads(run("predict", ARTICLE, "--concurrency", 2, "--max-tokens", 100, "--json").stdout)
    assert data["caveats"]["measured_rows"] == [{"exp_id": "E04", "measured_tps": pytest.approx(50 / 0.84),
                                                 "role": "identify", "included": True,
                                                 "identifies": ["K_len(100)"], "reason": ""}]
    assert data["caveats"]["verdict"] == "insufficient"


def test_predict_at_a_check_row_gives_its_error_and_the_hold_out(sparse: Path) -> None:
    rows = {(r.model, r.concurrency, r.max_tokens): r for r in read_results(sparse).rows}
    measured = rows[("model-a", 4, 200)]
    result = run("predict", sparse, "--concurrency", 4, "--max-tokens", 200, "--method", "chain")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    predicted = float(lines[0].split()[-1])
    off = abs(predicted - measured.tps) / measured.tps * 100
    assert lines[1] == (f"  measured here: row {measured.exp_id} at {measured.tps:.2f} TPS "
                        f"(a check row, the model is {off:.1f}% off)")
    assert lines[2].startswith("  consistency verdict: ") and "MAPE n/a" not in lines[2]
    data = json.loads(run("predict", sparse, "--concurrency", 4, "--max-tokens", 200, "--method", "chain",
                          "--json").stdout)
    assert data["caveats"]["holdout_rows"] > 0 and data["caveats"]["holdout_mape_pct"] is not None
    assert lines[3].startswith("  hold-out error (chain, leave-one-out): MAPE ")


def test_predict_an_unknown_model_exits_1_with_the_known_ones() -> None:
    result = run("predict", ARTICLE, "--concurrency", 2, "--max-tokens", 100, "--model", "Llama-70B")
    assert result.exit_code == 1
    assert result.stderr == ("Error: cannot predict: not identified by the data: C_model(Llama-70B)\n"
                             "  models with a known C_model: Qwen2.5-7B\n")


def test_predict_between_levels_points_to_lsq() -> None:
    result = run("predict", ARTICLE, "--concurrency", 3, "--max-tokens", 50)
    assert result.exit_code == 1
    assert result.stderr == ("Error: cannot predict: not identified by the data: f(3)\n"
                             "  concurrency levels with a known f: 1, 2, 4\n"
                             "  --method lsq interpolates between measured levels\n")


def test_solve_at_an_unmeasured_length_exits_1_with_the_measured_ones() -> None:
    result = run("solve", ARTICLE, "--target-tps", 100, "--max-tokens", 300)
    assert result.exit_code == 1
    assert result.stderr == ("Error: cannot solve: not identified by the data at max_tokens 300: K_len(300)\n"
                             "  max_tokens with a known K_len: 50, 100, 200\n")
    data = json.loads(run("solve", ARTICLE, "--target-tps", 100, "--max-tokens", 300, "--json").stdout)
    assert (data["identified"], data["missing"]) == (False, ["K_len(300)"])


def test_solve_names_its_measured_row_and_verdict() -> None:
    result = run("solve", ARTICLE, "--target-tps", 100, "--max-tokens", 50)
    assert result.exit_code == 0
    assert result.stdout.splitlines()[:3] == [
        "concurrency 2: predicted TPS 119.05 (target 100 at max_tokens 50)",
        "  this is measured row E02 (119.05 TPS), which defines f(2): the answer repeats",
        "    that measurement and tests nothing"]


def test_constrained_solve_speaks_words_and_the_json_keeps_names() -> None:
    args = ("solve", ARTICLE, "--target-tps", 100, "--method", "lsq", "--max-latency-p95", 5)
    out = run(*args).stdout
    assert max(len(line) for line in out.splitlines()) <= 80
    text = " ".join(line.strip() for line in out.splitlines())
    assert "latency_p95_unmeasured" not in text and "(bound by -)" not in text
    assert ("what stops a cheaper configuration: no measured P95 latency for that configuration, "
            "so the limit cannot be proven") in text
    data = json.loads(run(*args, "--json").stdout)
    assert data["binding"] == ["latency_p95_unmeasured"]


@pytest.mark.parametrize("args", [
    ["predict", "--concurrency", "nan", "--max-tokens", "50"],
    ["predict", "--concurrency", "inf", "--max-tokens", "50"],
    ["predict", "--concurrency", "-Infinity", "--max-tokens", "50"],
    ["solve", "--target-tps", "nan"],
    ["solve", "--target-tps", "inf"],
    ["solve", "--target-tps", "100", "--max-latency-p95", "nan"],
])
def test_nan_and_inf_are_refused(args: list[str]) -> None:
    result = CliRunner().invoke(main, [args[0], str(ARTICLE), *args[1:], "--json"])
    assert result.exit_code == 2, result.output
    assert "is not a finite number" in result.output
    assert result.stdout == ""


def test_json_never_holds_nan_or_infinity() -> None:
    text = to_json({"a": math.nan, "b": [math.inf, -math.inf, 1.5], "c": {"d": math.nan}})
    assert json.loads(text) == {"a": None, "b": [None, None, 1.5], "c": {"d": None}}
    assert "NaN" not in text and "Infinity" not in text


def test_physics_summary_counts_by_check_and_strict_mode_names_the_check() -> None:
    rows = read_results(ARTICLE).rows
    summary = render_physics(analyze(rows)).splitlines()
    assert summary[0] == "physics warnings on 7 of 7 rows: short output 7, superlinear gain 1"
    assert summary[1] == "  E01: short output: 25 of 500 requested tokens"
    assert summary[-1] == "warnings only: these rows are still used (--strict-physics excludes them)"
    strict = analyze(rows, Settings(strict_physics=True))
    assert render_physics(strict).splitlines()[-1] == "strict physics: 6 of these rows excluded"  # E06 falls to the monotonic rule first
    lines = render_consistency(strict).splitlines()
    e02 = lines.index(next(line for line in lines if line.startswith("E02 ")))
    assert lines[e02 + 1] == "    excluded: strict physics (short output, superlinear gain)"


def test_no_dash_percent_anywhere() -> None:
    text = render_consistency(analyze(read_results(ARTICLE).rows))
    assert "-%" not in text
    assert "MAPE (check rows): n/a   max: n/a   verdict: insufficient" in text


def test_a_least_squares_answer_at_an_identify_row_does_not_claim_to_repeat_it() -> None:
    """The chain reproduces an identify row; least squares fits every row, so its answer there is its
    own: the caveat says how far it is, not that it "repeats that measurement"."""
    from scm_xl.report import render_caveats

    caveats = {"measured_rows": [
        {"exp_id": "E1", "measured_tps": 167.95, "role": "identify", "included": True, "identifies": ["f(2)"]},
        {"exp_id": "E2", "measured_tps": 163.95, "role": "identify", "included": True, "identifies": ["f(2)"]}],
        "verdict": "good", "check_rows": 5, "mape_pct": 3.0, "holdout_method": "lsq", "holdout_mape_pct": 4.0,
        "holdout_max_pct": 8.0, "holdout_rows": 9, "holdout_verdict": "good"}
    lsq = render_caveats(caveats, 160.0)
    assert lsq[0] == ("measured here: rows E1, E2 (replicates, mean 165.95 TPS), which defines f(2) "
                      "in the chain; this answer is -3.6% from it")
    assert not any("tests nothing" in line for line in lsq)  # and said once, not once per replicate
    assert render_caveats(caveats, 165.95)[0].endswith("the answer repeats that measurement and tests nothing")
