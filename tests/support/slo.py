"""Real runs for the per-request SLO tests: the collector against a simulator with fixed delays."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from scm_xl import goodput
from scm_xl.cli import main
from scm_xl.simulator import SimConfig, running_simulator

NO_KEYS = {"SCM_XL_API_KEY": None, "SILICONFLOW_API_KEY": None, "OPENAI_API_KEY": None}  # never a key


def collect_fixed_delays(folder: Path, *, itl_s: float = 0.004, concurrency: str = "1,2,4",
                         max_tokens: str = "3,12") -> Path:
    """`scm-xl collect` on 127.0.0.1 against a simulator whose first token takes 10 ms and every
    next one `itl_s`, 3 requests a slot after one warm-up; the results CSV, the requests CSV beside it."""
    results = folder / "results.csv"
    with running_simulator(SimConfig(model_name="m", ttft_s=0.01, itl_s=itl_s)) as url:
        outcome = CliRunner().invoke(main, ["collect", "--base-url", url, "-m", "m", "-c", concurrency,
                                            "--max-tokens", max_tokens, "-n", "3", "--warmup", "1", "-q",
                                            "--output", str(results)], env=NO_KEYS)
    assert outcome.exit_code == 0, outcome.output
    assert goodput.requests_path_for(results).exists()
    return results
