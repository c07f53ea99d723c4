"""Benchmark the calibration methods on a 3x5 design with 5 repeats (not a test).

Two parts, both on the article's next step (concurrency 1,2,4,8,16 x max_tokens 50,100,200,
every cell 5 times, in the randomised order `scm-xl plan` gives):

1. The pipeline, end to end: `plan.make_plan` -> the collector -> the built-in simulator
   (a subprocess on 127.0.0.1, continuous batching, with `--stall-prob` so that some
   requests pause mid-stream: run-to-run noise of the kind short experiments show) ->
   `model.filter_rows` -> least squares and the chain, with leave-one-out hold-out error.
   The plan runs one experiment at a time in its own order (the collector's matrix file
   does not take an explicit run list yet). Reference TPS per cell: the median of 5
   further, independent runs of the cell on a fresh simulator with the same settings.
2. Known truth: the same design simulated directly, TPS = truth x exp(N(0, sigma)),
   20 seeded draws per noise level, so the error against the truth can be measured too.

Figures reported per method: hold-out (LOO) MAPE and max over rows; LOO MAPE over cell
medians (replicates summarised first); the error of the predicted surface against the
reference (truth) per cell. The noise floor is the MAPE a perfect model would score on
single rows (no method can predict a run's own noise).

Writes benchmarks/results/calibration.md.

    python benchmarks/bench_calibration.py [--quick] [--client-core 0] [--server-core 1]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import math
import os
import platform
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from scm_xl import lsq, model, plan, replicates
from scm_xl.collect import CollectConfig, run_collection
from scm_xl.results import ResultRow, read_results
from scm_xl.simulator import new_event_loop
from simulator_process import Simulator

ROOT = Path(__file__).resolve().parent
RESULTS = ROOT / "results" / "calibration.md"

CONCURRENCY = (1, 2, 4, 8, 16)
MAX_TOKENS = (50, 100, 200)
REPEATS = 5
SEED = 20240501
SIM_MODEL = "sim-7b"
# A fast decode loop so the whole plan takes about a minute.
SIM_TIMING = ["--step-base-s", "0.002", "--step-per-seq-s", "0.00005", "--prefill-s-per-token", "0.00002"]
SIM_NOISE = ["--stall-prob", "0.03", "--stall-s", "0.05"]


def run_experiments(base_url: str, experiments: Sequence[plan.Experiment], requests_per_slot: int,
                    workdir: Path) -> list[ResultRow]:
    """Each experiment through the collector, in the given order; rows carry the plan's exp_id."""
    rows = []
    for experiment in experiments:
        path = workdir / f"{experiment.exp_id}.csv"
        config = CollectConfig(base_url=base_url, models=(experiment.model,),
                               concurrency=(experiment.concurrency,), max_tokens=(experiment.max_tokens,),
                               repeats=1, requests_per_slot=requests_per_slot, results_path=path,
                               overwrite=True)
        with asyncio.Runner(loop_factory=new_event_loop) as runner:
            runner.run(run_collection(config, progress=False))
        (row,) = read_results(path).rows
        rows.append(dataclasses.replace(row, exp_id=experiment.exp_id))
    return rows


@dataclass
class Scores:
    lsq_loo_mape: float | None
    lsq_loo_max: float | None
    chain_loo_mape: float | None
    chain_loo_max: float | None
    chain_loo_missing: int
    lsq_median_loo: float | None
    chain_median_loo: float | None
    lsq_truth_mape: float
    chain_truth_mape: float
    noise_floor: float
    rows_included: int
    rows: int
    verdict: str
    separable: str


def score(rows: Sequence[ResultRow], truth: dict[tuple[int, int], float]) -> Scores:
    statuses = model.filter_rows(rows)
    analysis = lsq.least_squares_analysis(statuses)
    medians = lsq.least_squares_analysis(replicates.median_statuses(statuses))
    chain = model.calibrate(statuses)
    lsq_errors, chain_errors = [], []
    for (c, length), reference in truth.items():
        lsq_tps = analysis.fit.forecast(c, length).tps
        chain_tps = model.predict(chain, c, length).tps
        lsq_errors.append(abs(lsq_tps / reference - 1) * 100)
        if chain_tps is not None:
            chain_errors.append(abs(chain_tps / reference - 1) * 100)
    floor = statistics.fmean(abs(s.tps / truth[(s.concurrency, s.max_tokens)] - 1) * 100
                             for s in statuses if s.included)
    return Scores(
        lsq_loo_mape=analysis.holdout.mape_pct, lsq_loo_max=analysis.holdout.max_pct,
        chain_loo_mape=analysis.chain_holdout.mape_pct, chain_loo_max=analysis.chain_holdout.max_pct,
        chain_loo_missing=analysis.chain_holdout.missing_rows,
        lsq_median_loo=medians.holdout.mape_pct, chain_median_loo=medians.chain_holdout.mape_pct,
        lsq_truth_mape=statistics.fmean(lsq_errors),
        chain_truth_mape=statistics.fmean(chain_errors) if chain_errors else math.nan,
        noise_floor=floor, rows_included=sum(s.included for s in statuses), rows=len(statuses),
        verdict=analysis.holdout.verdict, separable=analysis.interactions.summary(),
    )


def pipeline(quick: bool, client_core: int | None, server_core: int | None) -> tuple[Scores, dict]:
    requests_per_slot = 2 if quick else 3
    matrix = plan.make_plan(models=[SIM_MODEL], concurrency=CONCURRENCY, max_tokens=MAX_TOKENS,
                            design="orthogonal", repeats=REPEATS, requests_per_slot=requests_per_slot, seed=SEED)
    if client_core is not None:
        os.sched_setaffinity(0, {client_core})
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        simulator = Simulator(["--model-name", SIM_MODEL, *SIM_TIMING, *SIM_NOISE, "--seed", "1"], server_core)
        try:
            started = time.perf_counter()
            rows = run_experiments(simulator.base_url, matrix.experiments, requests_per_slot, workdir)
            took = time.perf_counter() - started
        finally:
            simulator.stop()
        reference_runs = REPEATS
        reference_plan = plan.make_plan(models=[SIM_MODEL], concurrency=CONCURRENCY, max_tokens=MAX_TOKENS,
                                        design="full", repeats=reference_runs,
                                        requests_per_slot=requests_per_slot, seed=SEED + 1)
        (workdir / "reference").mkdir()
        fresh = Simulator(["--model-name", SIM_MODEL, *SIM_TIMING, *SIM_NOISE, "--seed", "2"], server_core)
        try:
            reference_rows = run_experiments(fresh.base_url, reference_plan.experiments, requests_per_slot,
                                             workdir / "reference")
        finally:
            fresh.stop()
    truth = {(cell.concurrency, cell.max_tokens): cell.median_tps for cell in replicates.summarize(reference_rows)}
    measured_tps = sum(r.total_output_tokens for r in rows) / sum(r.total_time_s for r in rows)
    info = {
        "experiments": len(matrix.experiments), "requests": matrix.total_requests, "seconds": took,
        "output_tokens": sum(r.total_output_tokens for r in rows), "measured_tps": measured_tps,
        "estimated_seconds": matrix.estimated_seconds(measured_tps), "requests_per_slot": requests_per_slot,
        "array": matrix.array, "cells_flagged": sum(c.flagged for c in replicates.summarize(
            [s for s in model.filter_rows(rows) if s.included])),
    }
    return score(rows, truth), info


def known_truth(draws: int, sigma: float, rng: np.random.Generator) -> list[Scores]:
    f = {1: 1.0, 2: 1.9, 4: 3.5, 8: 6.0, 16: 9.0}
    k = {50: 1.0, 100: 0.9, 200: 0.75}
    truth = {(c, length): 45.0 * f[c] * k[length] for c in CONCURRENCY for length in MAX_TOKENS}
    results = []
    for draw in range(draws):
        matrix = plan.make_plan(models=["m"], concurrency=CONCURRENCY, max_tokens=MAX_TOKENS, repeats=REPEATS,
                                seed=draw + 1)
        rows = []
        for e in matrix.experiments:
            tps = truth[(e.concurrency, e.max_tokens)] * math.exp(rng.normal(0.0, sigma))
            tokens = e.concurrency * 10 * e.max_tokens
            rows.append(ResultRow(exp_id=e.exp_id, model="m", concurrency=e.concurrency, requests_per_slot=10,
                                  total_requests=10 * e.concurrency, max_tokens=e.max_tokens,
                                  total_time_s=tokens / tps, total_output_tokens=tokens))
        results.append(score(rows, truth))
    return results


def mean(values) -> float:
    values = [v for v in values if v is not None and not math.isnan(v)]
    return statistics.fmean(values) if values else math.nan


def table(rows: list[tuple[str, list[Scores]]]) -> list[str]:
    lines = ["| data | noise floor | LOO MAPE lsq | LOO MAPE chain | LOO max lsq | LOO max chain "
             "| median-cell LOO lsq | median-cell LOO chain | vs truth lsq | vs truth chain | chain/lsq vs truth |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, scores in rows:
        lsq_truth, chain_truth = mean(s.lsq_truth_mape for s in scores), mean(s.chain_truth_mape for s in scores)
        lines.append(
            f"| {name} | {mean(s.noise_floor for s in scores):.2f}% "
            f"| {mean(s.lsq_loo_mape for s in scores):.2f}% | {mean(s.chain_loo_mape for s in scores):.2f}% "
            f"| {mean(s.lsq_loo_max for s in scores):.1f}% | {mean(s.chain_loo_max for s in scores):.1f}% "
            f"| {mean(s.lsq_median_loo for s in scores):.2f}% | {mean(s.chain_median_loo for s in scores):.2f}% "
            f"| {lsq_truth:.2f}% | {chain_truth:.2f}% | {chain_truth / lsq_truth:.2f}x |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="Fewer requests and draws.")
    parser.add_argument("--client-core", type=int, default=None)
    parser.add_argument("--server-core", type=int, default=None)
    parser.add_argument("--no-simulator", action="store_true", help="Only the known-truth part.")
    args = parser.parse_args()

    sections: list[tuple[str, list[Scores]]] = []
    info = None
    if not args.no_simulator:
        sim_scores, info = pipeline(args.quick, args.client_core, args.server_core)
        sections.append(("simulator + collector (stalls)", [sim_scores]))
        print(f"pipeline: {info}", file=sys.stderr)
    rng = np.random.default_rng(SEED)
    draws = 5 if args.quick else 20
    for sigma in (0.05, 0.10):
        sections.append((f"known truth, sigma {sigma:.2f} ({draws} draws)", known_truth(draws, sigma, rng)))

    lines = [
        "# Calibration: least squares vs the chain on a 3x5 design, 5 repeats",
        "",
        f"Generated by `python benchmarks/bench_calibration.py{' --quick' if args.quick else ''}` on "
        f"{platform.node() or 'this machine'} ({platform.machine()}, Python {platform.python_version()}, "
        f"{os.cpu_count()} CPUs).",
        "",
        "Design: concurrency 1,2,4,8,16 x max_tokens 50,100,200, every cell 5 times, blocked random order "
        "(`scm-xl plan --design orthogonal`, which for two factors is the full factorial).",
        "Columns: mean absolute percentage errors. *LOO* = leave-one-out over rows (the hold-out the verdict "
        "uses); *median-cell LOO* = the same over cell medians; *vs truth* = the predicted TPS of each of the "
        "15 cells against the reference (known truth, or for the simulator the median of 5 independent further runs); "
        "*noise floor* = the MAPE a perfect model scores on single rows.",
        "",
        *table(sections),
        "",
    ]
    if info is not None:
        sim = sections[0][1][0]
        lines += [
            "## The pipeline run",
            "",
            f"- {info['experiments']} experiments, {info['requests']} requests "
            f"({info['requests_per_slot']} per concurrency slot), {info['output_tokens']} output tokens.",
            f"- The plan took {info['seconds']:.1f} s on the simulator; `plan` estimates "
            f"{info['estimated_seconds']:.1f} s at the measured {info['measured_tps']:.0f} TPS "
            "(output tokens / TPS, without per-experiment overhead).",
            f"- Rows included by the physical filter: {sim.rows_included} of {sim.rows}; cells with CV > 10%: "
            f"{info['cells_flagged']} of 15.",
            f"- Verdict on hold-out (lsq): {sim.verdict}. Interaction check: {sim.separable}.",
            f"- Chain rows without a LOO prediction: {sim.chain_loo_missing}.",
            "",
        ]
    ratios = [mean(s.chain_truth_mape for s in scores) / mean(s.lsq_truth_mape for s in scores)
              for _, scores in sections]
    lsq_loo = [mean(s.lsq_loo_mape for s in scores) for _, scores in sections]
    lines += [
        "## Reading the figures",
        "",
        f"- Target 1, hold-out MAPE < 5% with lsq: {', '.join(f'{v:.2f}%' for v in lsq_loo)} "
        "(per data row above). Row-level LOO error is bounded below by each run's own noise (the floor), "
        "which no method can predict: at 5% noise lsq is under 5%, at 10% nothing can be.",
        "- Target 2, lsq at least halving chain's error: on row-level LOO, no (both sit near the floor; "
        "lsq's excess over the floor is a fraction of the chain's). On the predicted surface against the "
        f"truth, chain/lsq = {', '.join(f'{r:.2f}x' for r in ratios)}. The chain takes each coefficient "
        "from one cell, so its surface carries the noise of up to three cells; least squares pools all "
        "75 rows.",
        "",
    ]
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text("\n".join(lines), encoding="utf-8")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
