"""The simulator design the latency tests share: a slot limit of 6 and step costs that grow with
the batch and the context (tests/test_latency_model.py, tests/test_latency_sheet.py), and the
measurements on it, each prompt length's on a simulator of its own, side by side."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

from scm_xl.collect import CollectConfig, run_collection
from scm_xl.results import ResultRow, read_results
from scm_xl.simulator import SimConfig, running_simulator
from support.parallel import in_parallel

SLOTS = 6
MEASURED_CONCURRENCY = (1, 2, 4, 8, 16)
SIM = SimConfig(model_name="sim", step_base_s=0.004, step_per_seq_s=0.0004, step_per_ctx_token_s=2e-6,
                prefill_s_per_token=0.00002, max_seqs=SLOTS, seed=1)


def collect(url: str, folder: Path, tag: str, prompt: int, concurrency: tuple[int, ...],
            max_tokens: tuple[int, ...], requests_per_slot: int = 3, repeats: int = 1) -> list[ResultRow]:
    """One prompt length's experiments on the simulator at `url`, each row's exp_id tagged and its
    prompt_level set (the simulator counts 4 characters a token)."""
    path = folder / f"{tag}{prompt}.csv"
    config = CollectConfig(base_url=url, models=("sim",), concurrency=concurrency, max_tokens=max_tokens,
                           requests_per_slot=requests_per_slot, prompt="x" * (4 * prompt), results_path=path,
                           overwrite=True, ignore_eos=True, repeats=repeats)
    asyncio.run(run_collection(config, progress=False))
    return [dataclasses.replace(r, exp_id=f"{tag}{r.exp_id}-P{prompt}", prompt_level=prompt)
            for r in read_results(path).rows]


@dataclasses.dataclass(frozen=True)
class Sweep:
    """One prompt length's experiments, measured on a simulator of its own (`config`)."""

    tag: str
    prompt: int
    concurrency: tuple[int, ...]
    max_tokens: tuple[int, ...]
    config: SimConfig = SIM
    requests_per_slot: int = 3
    repeats: int = 1

    def measure(self, folder: Path) -> list[ResultRow]:
        with running_simulator(self.config) as url:
            return collect(url, folder, self.tag, self.prompt, self.concurrency, self.max_tokens,
                           self.requests_per_slot, self.repeats)


def measure(folder: Path, *sweeps: Sweep) -> list[list[ResultRow]]:
    """Every sweep's rows, in order; the sweeps run at once, each on its own simulator."""
    return in_parallel(*(lambda sweep=sweep: sweep.measure(folder) for sweep in sweeps))
