"""A plan file runs in the collector as written; the simulator takes its timing from the roofline."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from scm_xl.cli import main
from scm_xl.results import read_results
from scm_xl.roofline import load_catalog
from scm_xl.simulator import SimConfig, roofline_timing, running_simulator


def invoke(*args: object) -> str:
    result = CliRunner().invoke(main, [str(a) for a in args])
    assert result.exit_code == 0, result.output
    return result.output


def test_collect_runs_a_plan_in_its_randomised_order(tmp_path: Path) -> None:
    plan = tmp_path / "plan.toml"
    invoke("plan", "-m", "sim-model", "-c", "1,2,4", "--max-tokens", "4,8", "--design", "full", "-r", "2",
           "-n", "1", "--seed", "7", "-o", plan)
    import tomllib

    planned = [e["exp_id"] for e in sorted(tomllib.loads(plan.read_text())["experiments"], key=lambda e: e["order"])]
    out = tmp_path / "results.csv"
    with running_simulator(SimConfig.zero_delay(model_name="sim-model")) as base_url:
        invoke("collect", "--matrix", plan, "--base-url", base_url, "-o", out, "-q")
    rows = read_results(out).rows
    assert [r.exp_id for r in rows] == planned  # exactly the plan, in its order
    assert {(r.concurrency, r.max_tokens) for r in rows} == {(c, m) for c in (1, 2, 4) for m in (4, 8)}
    assert sorted({r.repeat for r in rows}) == [1, 2]


def test_a_plan_cannot_be_changed_from_the_command_line(tmp_path: Path) -> None:
    plan = tmp_path / "plan.toml"
    invoke("plan", "-m", "m", "-c", "1,2", "--max-tokens", "4", "--design", "full", "-o", plan)
    result = CliRunner().invoke(main, ["collect", "--matrix", str(plan), "--base-url", "http://127.0.0.1:9/v1",
                                       "-c", "8", "-o", str(tmp_path / "r.csv")])
    assert result.exit_code == 2
    assert "cannot change a plan's [[experiments]] list" in result.output


def test_roofline_timing_is_the_roofline() -> None:
    catalog = load_catalog()
    model, gpu = catalog.find_model("qwen2.5-7b"), catalog.find_gpu("a100-80gb")
    timing = roofline_timing("qwen2.5-7b", "a100-80gb", efficiency=0.5)
    # Decode at batch 1 reads the weights it uses (bf16; an untied input embedding only one row a
    # token) once per token, at half the bandwidth.
    assert timing["step_base_s"] == pytest.approx(model.read_params * 2 / (gpu.memory_bandwidth * 0.5))
    assert timing["step_per_seq_s"] == 0.0 and 0 < timing["step_per_ctx_token_s"] * 1024 < timing["step_base_s"]
    assert timing["prefill_s_per_token"] > 0


def test_simulator_on_the_roofline_behaves_like_the_deployment(tmp_path: Path) -> None:
    timing = roofline_timing("qwen2.5-7b", "h100-sxm", efficiency=0.8)
    out = tmp_path / "r.csv"
    config = SimConfig(model_name="qwen", **timing)
    with running_simulator(config) as base_url:
        invoke("collect", "--base-url", base_url, "-m", "qwen", "-c", "1", "--max-tokens", "40", "-n", "2",
               "--ignore-eos", "-o", out, "-q")
    row = read_results(out).rows[0]
    ceiling = 1 / timing["step_base_s"]  # tokens per second of one stream
    assert 0.7 * ceiling < row.tps < 1.02 * ceiling
