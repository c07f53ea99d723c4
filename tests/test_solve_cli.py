"""solve/predict across every knob (issue 5) through the CLI."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from data.gen import full_factorial, write_csv
from scm_xl.cli import main


@pytest.fixture(scope="module")
def factorial(tmp_path_factory: pytest.TempPathFactory) -> Path:
    rows = full_factorial(seed=5, sigma=0.02)
    # P95 latencies grow with concurrency; model-b saw 429s from concurrency 8 on.
    rows = [dataclasses.replace(r, latency_p95_s=0.5 * r.concurrency,
                                rate_limited_requests=1 if (r.model == "model-b" and r.concurrency >= 8) else 0)
            for r in rows]
    return write_csv(tmp_path_factory.mktemp("solve") / "factorial.csv", rows)


def run(*args: object, exit_code: int = 0) -> dict:
    result = CliRunner().invoke(main, [str(a) for a in args])
    assert result.exit_code == exit_code, result.output
    return json.loads(result.stdout)


def test_plain_solve_keeps_the_article_contract(factorial: Path) -> None:
    data = run("solve", factorial, "--target-tps", 60, "--max-tokens", 50, "--json")
    assert set(data) >= {"concurrency", "tps", "reachable"}
    assert data["reachable"] and data["tps"] >= 60


def test_lsq_solve_interpolates_and_marks_it(factorial: Path) -> None:
    measured = {1, 2, 4, 8}
    data = run("solve", factorial, "--target-tps", 100, "--method", "lsq", "--json")
    assert data["reachable"]
    cheapest = data["cheapest"]
    assert cheapest["tps"] >= 100
    assert cheapest["interpolated"] == (cheapest["concurrency"] not in measured)
    assert cheapest["tps_interval"][0] < cheapest["tps"] < cheapest["tps_interval"][1]
    assert data["best"]["tps"] >= cheapest["tps"]


def test_constraints_bind(factorial: Path) -> None:
    data = run("solve", factorial, "--target-tps", 10_000, "--max-concurrency", 4, "--json")
    assert data["reachable"] is False
    assert "target_tps" in data["best_binding"] or "max_concurrency" in data["best_binding"]
    data = run("solve", factorial, "--target-tps", 120, "--max-latency-p95", 1.5, "--json")
    if data["reachable"]:
        assert data["cheapest"]["latency_p95_s"] <= 1.5
    else:
        assert any(b.startswith("latency_p95") for b in data["binding"])
    data = run("solve", factorial, "--target-tps", 50, "--allowed-models", "model-b", "--json")
    assert data["model"] in (None, "model-b")
    if data["reachable"]:
        assert data["concurrency"] < 8  # model-b's 429s start at 8


def test_extrapolation_only_when_asked(factorial: Path) -> None:
    plain = run("predict", factorial, "--concurrency", 32, "--max-tokens", 50, "--method", "lsq", "--json",
                exit_code=1)
    assert plain["tps"] is None
    allowed = run("predict", factorial, "--concurrency", 32, "--max-tokens", 50, "--method", "lsq",
                  "--extrapolate", "--json")
    assert allowed["tps"] is not None and allowed["extrapolated"] is True


def test_bad_constraint_is_a_usage_error(factorial: Path) -> None:
    result = CliRunner().invoke(main, ["solve", str(factorial), "--target-tps", "10", "--allowed-max-tokens", "5x"])
    assert result.exit_code == 2
    assert "Invalid value for '--allowed-max-tokens': expected comma-separated integers" in result.output
    assert "Traceback" not in result.output


def test_a_search_without_method_says_chain_is_its_default(factorial: Path) -> None:
    """Searching every knob without --method answers with the chain; it says so, and not that chain
    was asked for."""
    outcome = CliRunner().invoke(main, ["solve", str(factorial), "--target-tps", "50", "--max-concurrency", "4"])
    assert outcome.exit_code == 0, outcome.output
    line = next(line for line in outcome.output.splitlines() if line.strip().startswith("method:"))
    assert "chain" in line and "the default for a search" in line and "asked for" not in line
    asked = CliRunner().invoke(main, ["solve", str(factorial), "--target-tps", "50", "--max-concurrency", "4",
                                      "--method", "chain"])
    assert "asked for (--method)" in asked.output
