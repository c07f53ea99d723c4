"""`scm-xl compare` where the new data do not hold the baseline's base point, and `--save-baseline`
under the one overwrite rule (review issue 20, findings 1 and 7).

The base point (model, max_tokens, concurrency) anchors BaseTPS; without it in the new data only
ratios are compared, so the absolute level must be judged from the baseline's model on the new
rows, and "cannot tell" must be `insufficient`, never `stable`."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any, Callable

import pytest
from click.testing import CliRunner

from data.gen import replicated_factorial, write_csv
from scm_xl.cli import main
from scm_xl.results import ResultRow, read_results
from support.paths import ARTICLE

SIM_PROMPT_LEVELS = Path(__file__).with_name("data") / "sim_prompt_levels.csv"  # prompt levels 32, 256, 640
BASE = ("model-a", 50, 1)  # the base point replicated_factorial's rows give: model, max_tokens, concurrency


def run(*args: object) -> Any:
    return CliRunner().invoke(main, [str(a) for a in args])


def scaled(rows: list[ResultRow], factor: float) -> list[ResultRow]:
    """The same experiments with TPS times `factor` (the clock ran 1/factor as long)."""
    return [dataclasses.replace(r, total_time_s=round(r.total_time_s / factor, 6)) for r in rows]


def renamed(rows: list[ResultRow]) -> list[ResultRow]:
    """The base model served under a new name (the other model keeps its name)."""
    return [dataclasses.replace(r, model="model-a-v2") if r.model == BASE[0] else r for r in rows]


def all_renamed(rows: list[ResultRow]) -> list[ResultRow]:
    """Every model under a new name: the baseline's model can predict no new row."""
    return [dataclasses.replace(r, model=r.model + "-v2") for r in rows]


def no_base_concurrency(rows: list[ResultRow]) -> list[ResultRow]:
    return [r for r in rows if r.concurrency != BASE[2]]


def no_base_max_tokens(rows: list[ResultRow]) -> list[ResultRow]:
    return [r for r in rows if r.max_tokens != BASE[1]]


MISSING: dict[str, Callable[[list[ResultRow]], list[ResultRow]]] = {
    "model renamed": renamed, "all models renamed": all_renamed,
    "base concurrency not measured again": no_base_concurrency,
    "base max_tokens not measured again": no_base_max_tokens}


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A baseline, and for each way of losing its base point the new data unchanged and at half speed."""
    folder = tmp_path_factory.mktemp("base_point")
    first = replicated_factorial(seed=1, repeats=2, sigma=0.03, prefix="A")
    second = replicated_factorial(seed=2, repeats=2, sigma=0.03, prefix="B")
    paths = {"baseline": write_csv(folder / "baseline.csv", first)}
    for i, (name, lose) in enumerate(MISSING.items()):
        paths[f"{name}, same"] = write_csv(folder / f"same{i}.csv", lose(second))
        paths[f"{name}, half"] = write_csv(folder / f"half{i}.csv", lose(scaled(second, 0.5)))
    return paths


def compare_json(*args: object) -> tuple[int, dict[str, Any]]:
    result = run("compare", *args, "--json")
    assert result.exit_code in (0, 1), result.output
    return result.exit_code, json.loads(result.stdout)


@pytest.mark.parametrize("name", list(MISSING))
def test_half_the_throughput_without_the_base_point_is_never_stable(data: dict[str, Path], name: str) -> None:
    exit_code, result = compare_json(data["baseline"], data[f"{name}, half"], "--fail-on-drift")
    assert result["verdict"] in ("drift", "insufficient"), result["reasons"]
    assert exit_code == 1  # a CI gate fails on both
    base = next(c for c in result["coefficients"] if c["label"] == "BaseTPS")
    assert base["status"] != "compared"  # the case in point: BaseTPS is not identified on the new side
    if result["old_on_new"]["rows"]:  # the baseline's model predicts some new rows: the level drifted
        assert result["verdict"] == "drift" and result["drifted"] == ["level (old on new)"], result["reasons"]
        level = next(c for c in result["coefficients"] if c["label"] == "level (old on new)")
        assert -55 < level["change_pct"] < -45 and level["status"] == "compared"
    else:  # it predicts none: nothing says whether the level moved
        assert result["verdict"] == "insufficient"
        assert any("predicts none of the new rows" in reason for reason in result["reasons"])
    assert any("base point" in reason for reason in result["reasons"])
    assert run("compare", data["baseline"], data[f"{name}, half"]).exit_code == 0  # only asked for, it fails


@pytest.mark.parametrize("name", list(MISSING))
def test_unchanged_data_without_the_base_point_is_no_false_drift(data: dict[str, Path], name: str) -> None:
    """Stable only on the evidence of the rows the baseline predicts; with none, insufficient."""
    exit_code, result = compare_json(data["baseline"], data[f"{name}, same"], "--fail-on-drift")
    assert result["verdict"] != "drift" and result["drifted"] == [], result["reasons"]
    if result["old_on_new"]["rows"]:
        assert result["verdict"] == "stable" and exit_code == 0, result["reasons"]
        assert any("on the evidence of the" in reason for reason in result["reasons"])
    else:
        assert result["verdict"] == "insufficient" and exit_code == 1
    text = run("compare", data["baseline"], data[f"{name}, same"]).output
    assert "base point" in text and f"verdict: {result['verdict']}" in text


def test_the_printed_rule_is_stated(data: dict[str, Path]) -> None:
    text = run("compare", data["baseline"], data["base concurrency not measured again, half"]).output
    assert "level (old on new)" in text and "verdict: drift" in text
    assert "BaseTPS is not compared" in text and "concurrency 1" in text


def test_the_base_prompt_level_is_pinned_too(tmp_path: Path) -> None:
    """The fourth way to lose the base point: its prompt level not measured again. The new side
    used to pick its own base level, so K_in(640) meant 640 against 256 there and against 32 in
    the baseline: unchanged data read as drift."""
    rows = read_results(SIM_PROMPT_LEVELS).rows
    without = [r for r in rows if r.prompt_level != 32]  # the baseline's base prompt level is 32
    same = write_csv(tmp_path / "same.csv", without)
    half = write_csv(tmp_path / "half.csv", scaled(without, 0.5))
    exit_code, result = compare_json(SIM_PROMPT_LEVELS, same, "--fail-on-drift")
    assert result["verdict"] == "insufficient" and result["drifted"] == [] and exit_code == 1, result["reasons"]
    assert "prompt level 32" in result["base_point_missing"]
    assert any("not shown within" in reason for reason in result["reasons"])  # 24 rows, no replicates: too loose
    exit_code, result = compare_json(SIM_PROMPT_LEVELS, half, "--fail-on-drift")
    assert result["verdict"] == "drift" and result["drifted"] == ["level (old on new)"] and exit_code == 1


def test_the_html_page_shows_the_level(data: dict[str, Path], tmp_path: Path) -> None:
    page = tmp_path / "level.html"
    result = run("compare", data["baseline"], data["model renamed, half"], "--html", page)
    assert result.exit_code == 0, result.output
    html = page.read_text(encoding="utf-8")
    assert 'data-verdict="drift"' in html and "level (old on new)" in html and "base point" in html


def test_fail_on_drift_fails_on_insufficient() -> None:
    """The article's rows have no noise estimate: nothing was compared, so CI must not pass."""
    article = ARTICLE
    result = run("compare", article, article, "--fail-on-drift")
    assert result.exit_code == 1 and "verdict: insufficient" in result.output
    assert run("compare", article, article).exit_code == 0


# ---------------------------------------------------------------------------
# --save-baseline and the overwrite rule (scm_xl.outputs)
# ---------------------------------------------------------------------------

def test_save_baseline_never_rewrites_its_own_input(data: dict[str, Path], tmp_path: Path) -> None:
    same = tmp_path / "x.csv"
    same.write_bytes(data["baseline"].read_bytes())
    before = same.read_bytes()
    for extra in ([], ["--force"]):
        result = run("compare", same, same, "--save-baseline", *extra)
        assert result.exit_code == 2 and "is the input" in result.output and "Traceback" not in result.output
        assert same.read_bytes() == before
    link = tmp_path / "link.csv"  # the same file by another name
    link.symlink_to(same)
    result = run("compare", link, same, "--save-baseline", "--force")
    assert result.exit_code == 2 and "is the input" in result.output and same.read_bytes() == before


def test_save_baseline_replaces_an_existing_baseline_only_with_force(data: dict[str, Path], tmp_path: Path) -> None:
    kept = tmp_path / "kept.csv"
    kept.write_bytes(data["baseline"].read_bytes())
    before = kept.read_bytes()
    new = write_csv(tmp_path / "new.csv", replicated_factorial(seed=2, repeats=2, sigma=0.03, prefix="B"))
    result = run("compare", kept, new, "--save-baseline")
    assert result.exit_code == 2 and "already exists" in result.output and "--force" in result.output
    assert kept.read_bytes() == before and "verdict" not in result.output  # refused before any work
    result = run("compare", kept, new, "--save-baseline", "--force")
    assert result.exit_code == 0 and "verdict: stable" in result.output, result.output
    assert read_results(kept).rows[0].exp_id.startswith("B")


def test_save_baseline_keeps_the_baseline_unless_stable(data: dict[str, Path], tmp_path: Path) -> None:
    """An insufficient comparison cannot vouch for the new rows: the baseline stays."""
    kept = tmp_path / "kept.csv"
    kept.write_bytes(data["baseline"].read_bytes())
    before = kept.read_bytes()
    result = run("compare", kept, data["all models renamed, half"], "--save-baseline", "--force")
    assert result.exit_code == 0 and "verdict: insufficient" in result.output
    assert "kept" in result.output and kept.read_bytes() == before
