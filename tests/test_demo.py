"""The main job end to end: simulator on loopback, collect, fill, recalculate, verify."""

from __future__ import annotations

import csv
from pathlib import Path

import openpyxl
import pytest
from click.testing import CliRunner

from scm_xl.cli import main
from scm_xl.demo import DEMO_EFFICIENCY, ceiling_tps, default_target_tps
from scm_xl.methods import default_questions
from scm_xl.results import read_results


@pytest.mark.slow
def test_demo_end_to_end(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    result = CliRunner().invoke(main, ["demo", "--out", str(out), "--target-tps", "200", "--lang", "en"])
    assert result.exit_code == 0, result.output
    assert "Traceback" not in result.output

    table = read_results(out / "results.csv")
    assert len(table.rows) == 28  # 2 models x 4 concurrency x 3 max_tokens, and the base model's long prompt at 4
    assert sorted({r.prompt_level for r in table.rows}) == [32, 1024]
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
    assert "physics warnings: 0 of 28 rows" in text
    assert "check rows: 20" in text  # K_in(1024) identified at concurrency 1, checked at 2, 4 and 8
    assert "verdict: insufficient" not in text
    flowing = " ".join(text.split())  # the two lines are wrapped to 80 columns
    assert "Workload: a 528-token prompt at concurrency 3, max_tokens 16 (neither measured)" in flowing
    assert "Leave-one-out error: chain" in flowing
    # the question every surface asks by default: the base max_tokens (16; 50 was not measured)
    length = default_questions(table.rows)["inverse"]["max_tokens"]
    assert length == 16
    assert f"Inverse: 200 TPS at max_tokens {length} needs concurrency 4" in text
    assert "unreachable" not in text  # only when asked


def test_the_default_target_is_one_the_deployment_reaches() -> None:
    # Qwen2.5-7B on the A100 80GB at context 256: 2,039e9 B/s over 14,141,238,272 B read per token plus
    # 14.7 MB of KV = 143.99 tok/s; x 0.6 = 86.4 per stream; 3 streams = 259 -> 250 (concurrency 4 gives ~320)
    assert ceiling_tps("qwen2.5-7b") == pytest.approx(2039e9 / (2 * 7070619136 + 2 * 28 * 4 * 128 * 2 * 256))
    assert default_target_tps() == 250.0
    assert 2 * DEMO_EFFICIENCY * ceiling_tps("qwen2.5-7b") < default_target_tps() \
        < 4 * DEMO_EFFICIENCY * ceiling_tps("qwen2.5-7b")


def test_an_existing_output_folder_is_refused_without_force(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    out.mkdir()
    (out / "results.csv").write_text("mine\n", encoding="utf-8")
    result = CliRunner().invoke(main, ["demo", "--out", str(out)])
    assert result.exit_code == 2
    assert "already exists" in result.output and "--force" in result.output
    assert (out / "results.csv").read_text(encoding="utf-8") == "mine\n"  # nothing touched
    assert sorted(p.name for p in tmp_path.iterdir()) == ["demo"]  # no staging folder left behind
    result = CliRunner().invoke(main, ["demo", "--out", str(out / "results.csv")])
    assert result.exit_code == 2 and "is a file" in result.output


@pytest.mark.slow
def test_demo_in_chinese_with_force_and_the_unreachable_case(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    out.mkdir()
    (out / "keep.txt").write_text("not the demo's\n", encoding="utf-8")
    (out / "workbook.xlsx").write_bytes(b"old")
    result = CliRunner().invoke(main, ["demo", "--out", str(out), "--force", "--lang", "zh", "--show-unreachable"])
    assert result.exit_code == 0, result.output
    text = result.output
    # the default target is reachable: the headline is a recommendation
    length = default_questions(read_results(out / "results.csv").rows)["inverse"]["max_tokens"]
    assert f"反推：max_tokens {length} 下要达到 250 TPS，需要并发" in text
    assert "无法达到" in text  # the unreachable case, asked for
    assert (out / "keep.txt").read_text(encoding="utf-8") == "not the demo's\n"
    wb = openpyxl.load_workbook(out / "workbook.xlsx")
    assert "第一性原理" in wb.sheetnames
    assert sorted(p.name for p in tmp_path.iterdir()) == ["demo"]
