"""The latency model against the simulator, where the truth is known (not a test).

The simulator runs with a slot limit (max_seqs 6) and step costs that grow with the batch and the
context. `scm-xl collect`'s library calibrates on concurrency 1, 2, 4, 8, 16 x max_tokens 16, 48 x
prompts of 32 and 512 tokens, then measures configurations the design never saw (concurrency 3
and 12, prompts of 256 and 32 tokens, max_tokens 32). Prints and writes each unseen
configuration's measured and predicted TPS and TTFT, the hold-out error and the knee. TTFT above
the knee is predicted for a run as long as the measured one (`requests=`: its queue starts empty).

    python benchmarks/bench_latency_sim.py            # about 90 s
"""

from __future__ import annotations

import asyncio
import dataclasses
import tempfile
import time
from pathlib import Path

from scm_xl.collect import CollectConfig, run_collection
from scm_xl.latency import latency_model
from scm_xl.results import read_results
from scm_xl.simulator import SimConfig, running_simulator

SLOTS = 6
# Requests per slot: TTFT below the knee is two decode steps (milliseconds), so a run needs tens of
# requests for its mean to be the simulator's own figure rather than its start-up's.
REQUESTS_PER_SLOT = 10
SIM = SimConfig(model_name="sim", step_base_s=0.004, step_per_seq_s=0.0004, step_per_ctx_token_s=2e-6,
                prefill_s_per_token=0.00002, max_seqs=SLOTS, seed=1)
REPORT = Path(__file__).resolve().parent / "results" / "latency_sim.md"


def collect(url: str, folder: Path, tag: str, prompt: int, concurrency: tuple[int, ...],
            max_tokens: tuple[int, ...]) -> list:
    path = folder / f"{tag}{prompt}.csv"
    config = CollectConfig(base_url=url, models=("sim",), concurrency=concurrency, max_tokens=max_tokens,
                           requests_per_slot=REQUESTS_PER_SLOT, prompt="x" * (4 * prompt), results_path=path, overwrite=True,
                           ignore_eos=True)
    asyncio.run(run_collection(config, progress=False))
    return [dataclasses.replace(r, exp_id=f"{tag}{r.exp_id}-P{prompt}", prompt_level=prompt)
            for r in read_results(path).rows]


def main() -> None:
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp, running_simulator(SIM) as url:
        folder = Path(tmp)
        train = [r for p in (32, 512) for r in collect(url, folder, "T", p, (1, 2, 4, 8, 16), (16, 48))]
        unseen = collect(url, folder, "U", 256, (3, 12), (32,)) + collect(url, folder, "V", 32, (3, 12), (32,))
    model = latency_model(train)
    lines = ["# The latency model on the simulator (slot limit 6)", "",
             "`python benchmarks/bench_latency_sim.py`", "",
             f"Calibration: {len(train)} experiments; leave-one-out MAPE {model.holdout.mape_pct:.2f}% "
             f"(max {model.holdout.max_pct:.2f}%); knee: {model.knee_text()} (the simulator has {SLOTS} slots).",
             "", "| unseen | c | prompt tokens | TPS measured | predicted | error | TTFT measured | predicted | error |",
             "|---|---|---|---|---|---|---|---|---|"]
    errors, ttft_errors = [], []
    for r in unseen:
        f = model.forecast(r.concurrency, r.max_tokens, "sim", r.prompt_tokens, requests=r.total_requests)
        assert f.tps is not None and f.ttft_s is not None
        e_tps = (f.tps - r.tps) / r.tps * 100
        e_ttft = (f.ttft_s - r.ttft_mean_s) / r.ttft_mean_s * 100
        errors.append(abs(e_tps))
        ttft_errors.append(abs(e_ttft))
        lines.append(f"| {r.exp_id} | {r.concurrency} | {r.prompt_tokens} | {r.tps:.1f} | {f.tps:.1f} | {e_tps:+.1f}% "
                     f"| {r.ttft_mean_s * 1000:.1f} ms | {f.ttft_s * 1000:.1f} ms | {e_ttft:+.1f}% |")
    lines += ["", f"TPS MAPE on the unseen configurations: {sum(errors) / len(errors):.2f}% "
                  f"(max {max(errors):.2f}%); TTFT MAPE {sum(ttft_errors) / len(ttft_errors):.2f}% "
                  f"(max {max(ttft_errors):.2f}%). {REQUESTS_PER_SLOT} requests per slot; "
                  f"{time.perf_counter() - start:.0f} s in all.", ""]
    REPORT.write_text("\n".join(lines), encoding="utf-8")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
