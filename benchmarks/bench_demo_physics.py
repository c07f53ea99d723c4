"""Does the demo's simulator obey the roofline it is given? (issue 10; not a test)

Two figures, each over three runs:

1. Per-stream TPS at max_tokens 64 and concurrency 1 for each demo model (Qwen2.5-7B,
   Llama-3.1-8B on a simulated A100 80GB at 60% efficiency): measured by the collector
   over real loopback HTTP, against `efficiency x ceiling` after the TTFT share
   (the simulator states it: `SimConfig.expected_stream`). Target: within 3%.
2. The whole demo (`scm_xl.demo.run_demo`, the same code as `scm-xl demo`): the calibrated
   C_model of Llama against first principles (weight bytes read per token). Target: within 2%.

Writes benchmarks/results/demo_physics.md.

    python benchmarks/bench_demo_physics.py [--runs 3] [--skip-demo]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

from scm_xl.collect import DEFAULT_PROMPT, CollectConfig, run_collection
from scm_xl.demo import DEMO_EFFICIENCY, DEMO_GPU, DEMO_MODELS, ceiling_tps, run_demo, sim_config_for
from scm_xl.results import read_results
from scm_xl.roofline import c_model_from_first_principles
from scm_xl.simulator import running_simulator

ROOT = Path(__file__).resolve().parent
MAX_TOKENS = 64
REQUESTS = 4  # sequential requests per run at concurrency 1


def per_stream_run(served: str, key: str, seed: int) -> dict[str, float]:
    config = sim_config_for(key, DEMO_GPU, efficiency=DEMO_EFFICIENCY, served_name=served, seed=seed)
    expected = config.expected_stream(config.prompt_tokens_for(DEFAULT_PROMPT), MAX_TOKENS)
    with tempfile.TemporaryDirectory() as tmp, running_simulator(config) as url:
        collect = CollectConfig(base_url=url, models=(served,), concurrency=(1,), max_tokens=(MAX_TOKENS,),
                                requests_per_slot=REQUESTS, results_path=Path(tmp) / "r.csv", overwrite=True,
                                ignore_eos=True)
        asyncio.run(run_collection(collect, progress=False))
        row = read_results(Path(tmp) / "r.csv").rows[0]
    measured = row.total_output_tokens / row.total_time_s
    # efficiency x ceiling: the roofline's single-stream ceiling at the demo's context, scaled
    target = DEMO_EFFICIENCY * ceiling_tps(key) * (1 - expected["ttft_share"]) \
        * MAX_TOKENS / (MAX_TOKENS - 1)  # tokens over (TTFT + 63 steps) = ceiling x decode share x 64/63
    return {"measured": measured, "target": target, "simulator": expected["tps"],
            "ttft_share": expected["ttft_share"], "dev_pct": (measured / target - 1) * 100}


def demo_run(i: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        demo = run_demo(Path(tmp) / "demo", quiet=True)
        seconds = time.perf_counter() - started
    llama = DEMO_MODELS[1][0]
    cal = demo.report.analysis.calibration
    calibrated = cal.c_model(llama)
    physics = c_model_from_first_principles(DEMO_MODELS[0][1], DEMO_MODELS[1][1])
    # The chain identifies C_model from one row per model (concurrency 1 at the base length, two
    # requests); how far each fell below what its simulator states shows whether load on the
    # machine, not the simulator, moved the figure.
    identify = {}
    for served, key in DEMO_MODELS:
        rows = [s for s in demo.report.analysis.statuses
                if s.model == served and s.concurrency == 1 and s.max_tokens == cal.base_max_tokens]
        config = sim_config_for(key, DEMO_GPU, efficiency=DEMO_EFFICIENCY, served_name=served)
        expected = config.expected_stream(config.prompt_tokens_for(DEFAULT_PROMPT), cal.base_max_tokens)["tps"]
        identify[key] = (rows[0].tps / expected - 1) * 100 if rows else float("nan")
    return {"calibrated": calibrated, "physics": physics, "dev_pct": (calibrated / physics - 1) * 100,
            "verified": float(demo.report.verification.ok), "seconds": seconds,
            "reachable": float(demo.solution.reachable), "base_max_tokens": cal.base_max_tokens,
            "identify": identify}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--skip-demo", action="store_true")
    args = parser.parse_args()

    lines = ["# The demo's simulator against its roofline (issue 10)", "",
             f"Machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}; "
             "the machine was shared with other agents' work while this ran, so the figures carry their noise.",
             f"Command: `python benchmarks/bench_demo_physics.py --runs {args.runs}`"
             + (" --skip-demo" if args.skip_demo else ""), "",
             f"## Per-stream TPS at max_tokens {MAX_TOKENS}, concurrency 1 ({REQUESTS} sequential requests a run)", "",
             "Target = efficiency x roofline ceiling x decode share (the simulator states the TTFT share); "
             "it must hold within 3%.", "",
             "| model | run | ceiling tok/s | target tok/s | simulator expects | measured | deviation |",
             "|---|---|---|---|---|---|---|"]
    worst = 0.0
    for served, key in DEMO_MODELS:
        for run in range(1, args.runs + 1):
            r = per_stream_run(served, key, seed=run)
            worst = max(worst, abs(r["dev_pct"]))
            lines.append(f"| {key} | {run} | {ceiling_tps(key):.2f} | {r['target']:.2f} | {r['simulator']:.2f} | "
                         f"{r['measured']:.2f} | {r['dev_pct']:+.2f}% |")
            print(lines[-1], flush=True)
    lines += ["", f"Worst deviation: {worst:.2f}% (target: within 3%).", ""]
    if not args.skip_demo:
        lines += ["## The demo's calibrated C_model(Llama-3.1-8B) against first principles", "",
                  "The chain identifies C_model from one row per model (concurrency 1 at the base length, "
                  "two requests); the last two columns say how far each of those rows fell from what its "
                  "simulator states, i.e. how much the load on the machine moved them.", "",
                  "| run | calibrated | first principles | deviation | verified | inverse reachable | seconds "
                  "| Qwen identify row vs simulator | Llama identify row vs simulator |",
                  "|---|---|---|---|---|---|---|---|---|"]
        devs = []
        for run in range(1, args.runs + 1):
            r = demo_run(run)
            devs.append(abs(r["dev_pct"]))
            lines.append(f"| {run} | {r['calibrated']:.4f} | {r['physics']:.4f} | {r['dev_pct']:+.2f}% | "
                         f"{'yes' if r['verified'] else 'no'} | {'yes' if r['reachable'] else 'no'} | "
                         f"{r['seconds']:.1f} | {r['identify'][DEMO_MODELS[0][1]]:+.2f}% | "
                         f"{r['identify'][DEMO_MODELS[1][1]]:+.2f}% |")
            print(lines[-1], flush=True)
        lines += ["", f"Worst deviation: {max(devs):.2f}% (target: within 2%); median {statistics.median(devs):.2f}%.",
                  ""]
    out = ROOT / "results" / "demo_physics.md"
    out.write_text("\n".join(lines), encoding="utf-8")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
