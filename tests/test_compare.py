"""`scm-xl compare BASELINE NEW`: coefficients side by side, which moved beyond their noise,
the baseline's model on the new rows, and a verdict (stable / drift / insufficient)."""

from __future__ import annotations

import re

import dataclasses
import json
import math
import subprocess
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from data.gen import replicated_factorial, write_csv
from scm_xl.cli import main
from scm_xl.results import read_results
from support.cli import CLI, scm_xl
from support.parallel import in_parallel
from support.paths import ARTICLE



def run(*args: object) -> Any:
    return CliRunner().invoke(main, [str(a) for a in args])


def compare_json(*args: object, exit_code: int = 0) -> dict[str, Any]:
    result = run("compare", *args, "--json")
    assert result.exit_code == exit_code, result.output
    return json.loads(result.stdout)


def slower(rows: list[Any], factor: float, where: Any = lambda row: True) -> list[Any]:
    """The same experiments with TPS times `factor` where `where` holds (the clock ran longer)."""
    return [dataclasses.replace(r, total_time_s=round(r.total_time_s / factor, 6)) if where(r) else r for r in rows]


@pytest.fixture()
def runs(tmp_path: Path) -> dict[str, Path]:
    """Two measurements of one deployment (same truth, independent noise) and a 10% slower one."""
    first = replicated_factorial(seed=1, repeats=3, sigma=0.03, prefix="A")
    second = replicated_factorial(seed=2, repeats=3, sigma=0.03, prefix="B")
    return {"baseline": write_csv(tmp_path / "baseline.csv", first),
            "same": write_csv(tmp_path / "same.csv", second),
            "slower": write_csv(tmp_path / "slower.csv", slower(second, 0.9)),
            "plateau": write_csv(tmp_path / "plateau.csv", slower(second, 0.8, lambda r: r.concurrency == 8))}


def test_two_runs_of_one_deployment_are_stable(runs: dict[str, Path]) -> None:
    data = compare_json(runs["baseline"], runs["same"])
    assert data["verdict"] == "stable" and data["drifted"] == []
    assert data["tests"] == len([c for c in data["coefficients"] if c["status"] == "compared"]) > 5
    old_on_new = data["old_on_new"]
    assert old_on_new["rows"] == 72 and old_on_new["mape_pct"] < 5
    assert "Welch" in data["test"] and "Bonferroni" in data["test"]


def test_ten_percent_slower_is_drift_in_base_tps(runs: dict[str, Path]) -> None:
    data = compare_json(runs["baseline"], runs["slower"])
    assert data["verdict"] == "drift"
    assert data["drifted"] == ["BaseTPS"]  # the ratios f, K_len and C_model did not move
    base = next(c for c in data["coefficients"] if c["label"] == "BaseTPS")
    assert -13 < base["change_pct"] < -7 and base["p_value"] < data["alpha_per_test"]
    assert data["old_on_new"]["mape_pct"] > 8  # the baseline over-predicts every new row


def test_a_plateau_at_the_top_names_that_coefficient(runs: dict[str, Path]) -> None:
    data = compare_json(runs["baseline"], runs["plateau"])
    assert data["verdict"] == "drift" and data["drifted"] == ["f(8)"]


def test_the_test_is_welch_t_on_the_logs(runs: dict[str, Path]) -> None:
    """Each p-value is the two-sided Welch t test on ln(coefficient), recomputed here with scipy."""
    from scipy import stats

    from scm_xl.compare import compare
    from scm_xl.lsq import fit
    from scm_xl.model import analyze

    old = analyze(read_results(runs["baseline"]).rows)
    new = analyze(read_results(runs["slower"]).rows)
    comparison = compare(old, new)
    old_fit, new_fit = fit(old.statuses, old.settings), fit(new.statuses, new.settings)
    for shift in comparison.coefficients:
        a, b = old_fit.coefficient(shift.label), new_fit.coefficient(shift.label)
        assert a is not None and b is not None and a.std_error_log and b.std_error_log
        va, vb = a.std_error_log ** 2, b.std_error_log ** 2
        t = (math.log(b.value) - math.log(a.value)) / math.sqrt(va + vb)
        dof = (va + vb) ** 2 / (va ** 2 / old_fit.dof + vb ** 2 / new_fit.dof)
        assert shift.p_value == pytest.approx(2 * stats.t.sf(abs(t), dof), rel=1e-6, abs=1e-12)
        assert shift.significant == (shift.p_value < 0.05 / comparison.tests)


def test_the_article_is_insufficient(tmp_path: Path) -> None:
    data = compare_json(ARTICLE, ARTICLE, "--fail-on-drift", exit_code=1)  # nothing shown: CI fails
    assert data["verdict"] == "insufficient" and data["drifted"] == []
    assert any("no residual degrees of freedom" in reason for reason in data["reasons"])
    result = run("compare", ARTICLE, ARTICLE)
    assert result.exit_code == 0 and "verdict: insufficient" in result.output


def test_fail_on_drift_exit_codes(runs: dict[str, Path]) -> None:
    assert run("compare", runs["baseline"], runs["slower"], "--fail-on-drift").exit_code == 1
    assert run("compare", runs["baseline"], runs["slower"]).exit_code == 0  # only asked for, it fails
    assert run("compare", runs["baseline"], runs["same"], "--fail-on-drift").exit_code == 0
    assert run("compare", ARTICLE, ARTICLE, "--fail-on-drift").exit_code == 1  # insufficient fails too


def test_text_and_html_output(runs: dict[str, Path], tmp_path: Path) -> None:
    page = tmp_path / "drift.html"
    result = run("compare", runs["baseline"], runs["slower"], "--html", page, "--lang", "zh")
    assert result.exit_code == 0, result.output
    assert "判定：漂移" in result.output and "BaseTPS" in result.output  # --lang sets what it prints too
    html = page.read_text(encoding="utf-8")
    assert 'data-verdict="drift"' in html and "漂移" in html and "<svg" in html and "https://" not in html
    # the page's sentences (reasons, test, knee and latency notes) in its language, not only its labels
    visible = re.sub(r"<(style|script|svg|code)\b.*?</\1>|<[^>]+>", " ", html, flags=re.S)
    visible = re.sub(r"\S+/\S+|scm-xl|\w+\([^)]*\)", " ", visible)  # model names, scm-xl, C_model(m)
    english = re.findall(r"\b[a-z]{3,}\b", visible)  # an English word (BaseTPS, MAPE, Welch are names)
    assert not english, [visible[max(0, m.start() - 60):m.end() + 20] for m in
                         re.finditer(r"\b[a-z]{3,}\b", visible)][:3]
    again = run("compare", runs["baseline"], runs["slower"], "--html", page)
    assert again.exit_code == 2 and "already exists" in again.output  # the overwrite policy
    assert run("compare", runs["baseline"], runs["slower"], "--html", page, "--force").exit_code == 0


def test_save_baseline(runs: dict[str, Path], tmp_path: Path) -> None:
    baseline = tmp_path / "kept.csv"
    result = run("compare", baseline, runs["baseline"], "--save-baseline")
    assert result.exit_code == 0 and "no baseline yet" in result.output
    assert [r.exp_id for r in read_results(baseline).rows] == [r.exp_id for r in read_results(runs["baseline"]).rows]
    # Stable: the new run becomes the baseline (replacing an existing file takes --force).
    assert run("compare", baseline, runs["same"], "--save-baseline", "--force").exit_code == 0
    assert read_results(baseline).rows[0].exp_id.startswith("B")
    # Drift: the baseline is kept, and CI fails.
    result = run("compare", baseline, runs["slower"], "--save-baseline", "--force", "--fail-on-drift")
    assert result.exit_code == 1 and "baseline" in result.output and "kept" in result.output
    assert read_results(baseline).rows[0].exp_id.startswith("B")
    assert read_results(baseline).rows[0].total_time_s == read_results(runs["same"]).rows[0].total_time_s
    result = run("compare", tmp_path / "b.xlsx", runs["same"], "--save-baseline")
    assert result.exit_code == 2 and ".csv" in result.output


def test_bad_input_is_an_error(tmp_path: Path) -> None:
    result = run("compare", tmp_path / "missing.csv", ARTICLE)
    assert result.exit_code == 2 and result.output.startswith("Error: ")
    bad = tmp_path / "bad.csv"
    bad.write_text(ARTICLE.read_text(encoding="utf-8").replace(",10,", ",ten,", 1), encoding="utf-8")
    result = run("compare", ARTICLE, bad)
    assert result.exit_code == 2 and "bad.csv:" in result.output and "Traceback" not in result.output


# ---------------------------------------------------------------------------
# Real simulator runs on 127.0.0.1
# ---------------------------------------------------------------------------

def simulate(out: Path, efficiency: float) -> Path:
    """One short measurement of `serve-sim` (roofline timing of Qwen2.5-7B on an A100 at `efficiency`),
    both commands run as a person runs them; several run at once (tests/support/parallel.py)."""
    command = [*CLI, "serve-sim", "--host", "127.0.0.1", "--port", "0", "--model", "qwen2.5-7b", "--gpu", "a100-80gb",
               "--efficiency", str(efficiency), "--model-name", "sim"]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True) as server:
        try:
            line = server.stdout.readline() if server.stdout else ""
            assert "http://127.0.0.1:" in line, line
            base_url = line.strip().rsplit(" ", 1)[-1]
            result = scm_xl("collect", "--base-url", base_url, "-m", "sim", "-c", "1,2,4", "--max-tokens", "8,16",
                            "--repeats", "3", "-n", "2", "--ignore-eos", "-o", out, "-q")
            assert result.exit_code == 0, result.output
        finally:
            server.terminate()
            server.wait(timeout=10)
    return out


@pytest.mark.slow
def test_simulator_runs_stable_then_drift(tmp_path: Path) -> None:
    first, second, slower_run = in_parallel(
        lambda: simulate(tmp_path / "first.csv", 0.3), lambda: simulate(tmp_path / "second.csv", 0.3),
        lambda: simulate(tmp_path / "slower.csv", 0.27))  # the deployment lost 10% of its efficiency

    stable = compare_json(first, second, "--fail-on-drift")
    assert stable["verdict"] == "stable", stable["reasons"]
    drift = compare_json(first, slower_run, "--fail-on-drift", exit_code=1)
    assert drift["verdict"] == "drift" and "BaseTPS" in drift["drifted"], drift["reasons"]
    base = next(c for c in drift["coefficients"] if c["label"] == "BaseTPS")
    assert -15 < base["change_pct"] < -5
