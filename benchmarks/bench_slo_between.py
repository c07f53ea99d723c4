"""The SLO inverse between measured concurrency levels against the simulator, where every level is
also measured (not a test).

The simulator has a slot limit (6) and step costs that grow with the batch, so TPOT and TTFT grow
with concurrency and throughput stops growing at the knee. `scm-xl collect` measures every
concurrency 1-10 at two max_tokens; the sparse design keeps 1, 2, 4, 8, 10 and leaves out 3, 5, 6,
7, 9. For each left-out level, `slo_between` predicts the attainment (from the nearest measured
level's requests, rescaled by the latency model) and the TPS; they are compared with the level's
own measurement. Then for a sweep of SLOs and targets, `solve --slo --between-levels` on the sparse
design is compared with `solve --slo` on every level (brute force over the truth).

    python benchmarks/bench_slo_between.py            # about 2 minutes
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from scm_xl import capacity, goodput, slo_between
from scm_xl.collect import CollectConfig, run_collection
from scm_xl.latency import latency_model
from scm_xl.results import read_results
from scm_xl.simulator import SimConfig, running_simulator

SLOTS = 6
SIM = SimConfig(model_name="sim", step_base_s=0.006, step_per_seq_s=0.002, prefill_s_per_token=0.00002,
                max_seqs=SLOTS, seed=1)
LEVELS, KEPT = tuple(range(1, 11)), (1, 2, 4, 8, 10)
MAX_TOKENS = (16, 48)
REQUESTS_PER_SLOT = 8
REPORT = Path(__file__).resolve().parent / "results" / "slo_between.md"


def measure(url: str, folder: Path) -> Path:
    path = folder / "results.csv"
    config = CollectConfig(base_url=url, models=("sim",), concurrency=LEVELS, max_tokens=MAX_TOKENS,
                           requests_per_slot=REQUESTS_PER_SLOT, prompt="x" * 128, results_path=path,
                           overwrite=True, ignore_eos=True)
    asyncio.run(run_collection(config, progress=False))
    return path


def pick(cells: list[goodput.SloCell], target: float, slo: goodput.Slo) -> tuple[int, int, int] | None:
    plan = capacity.plan(cells, target, slo)
    if plan.chosen is None:
        return None
    return plan.chosen.replicas, plan.chosen.cell.concurrency, plan.chosen.cell.max_tokens


def main() -> None:
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp, running_simulator(SIM) as url:
        path = measure(url, Path(tmp))
        rows = read_results(path).rows
        samples = goodput.read_samples(path)
    sparse_rows = [r for r in rows if r.concurrency in KEPT]
    fitted = latency_model(sparse_rows)
    lines = ["# SLO attainment between measured levels (simulator, truth measured)", "",
             f"Simulator: step {SIM.step_base_s * 1000:g} ms + {SIM.step_per_seq_s * 1000:g} ms per sequence, "
             f"{SLOTS} slots; concurrency {LEVELS[0]}-{LEVELS[-1]} x max_tokens {MAX_TOKENS} measured, "
             f"{REQUESTS_PER_SLOT} requests a slot; the sparse design keeps concurrency {KEPT}.", "",
             f"Knee of the sparse fit: {fitted.knee_text()}", ""]
    # per left-out level: predicted vs measured, at an SLO on each level's own median TPOT
    errors_tps, errors_att = [], []
    lines += ["| SLO | max_tokens | c | from | measured attainment | predicted | measured TPS | predicted | error |",
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    slos = []
    for level in (2, 3, 5):  # TPOT thresholds that split the levels below the knee differently
        itl = statistics.median(r.mean_itl_s for r in rows if r.concurrency == level and r.mean_itl_s)
        slos.append(goodput.parse_slo(f"tpot={itl * 1.02:.5f}", 0.6))
    for level in (7, 9):  # TTFT thresholds above the knee, where requests wait for a slot
        ttft = statistics.median(r.ttft_p50_s for r in rows if r.concurrency == level and r.ttft_p50_s)
        slos.append(goodput.parse_slo(f"ttft={ttft * 1.05:.5f}", 0.6))
    for slo in slos:
        truth = {(c.concurrency, c.max_tokens): c for c in goodput.cells(goodput.evaluate(rows, samples, slo).experiments, slo)}
        sparse = goodput.cells(goodput.evaluate(sparse_rows, samples, slo).experiments, slo)
        predicted, reasons = slo_between.between_cells(sparse, samples.by_exp, fitted, slo)
        assert not reasons, reasons
        for cell in predicted:
            real = truth[(cell.concurrency, cell.max_tokens)]
            error = (cell.tally.tps - real.tally.tps) / real.tally.tps * 100
            errors_tps.append(abs(error))
            errors_att.append(abs(cell.tally.attainment - real.tally.attainment))
            lines.append(f"| {slo.describe()} | {cell.max_tokens} | {cell.concurrency} | {cell.predicted_from} | "
                         f"{real.tally.attainment:.0%} | {cell.tally.attainment:.0%} | {real.tally.tps:.1f} | "
                         f"{cell.tally.tps:.1f} | {error:+.1f}% |")
    # the inverse: brute force over every measured level against the sparse design with predictions
    agree = total = better = 0
    disagreements = []
    for slo in slos:
        truth_cells = goodput.cells(goodput.evaluate(rows, samples, slo).experiments, slo)
        sparse = goodput.cells(goodput.evaluate(sparse_rows, samples, slo).experiments, slo)
        predicted, _ = slo_between.between_cells(sparse, samples.by_exp, fitted, slo)
        both = sorted(sparse + predicted, key=lambda c: c.cost)
        top = max(c.tally.tps for c in truth_cells)
        for share in (0.3, 0.45, 0.6, 0.75, 0.9, 1.2, 1.8):
            target = top * share
            want, got, alone = pick(truth_cells, target, slo), pick(both, target, slo), pick(sparse, target, slo)
            total += 1
            agree += want == got
            better += alone != want and got == want
            if want != got:
                disagreements.append(f"{slo.describe()}, target {target:.0f}: every level {want}, "
                                     f"between-levels {got}")
    lines += ["", f"TPS at left-out levels: MAPE {statistics.mean(errors_tps):.2f}%, max {max(errors_tps):.2f}% "
              f"over {len(errors_tps)} configurations; attainment: mean absolute difference "
              f"{statistics.mean(errors_att) * 100:.1f} points, max {max(errors_att) * 100:.1f}.",
              f"Inverse (replicas, concurrency, max_tokens): between-levels on the sparse design picks what "
              f"brute force over every measured level picks in {agree} of {total} questions "
              f"(measured levels alone miss it in {better} of those).", ""]
    lines += [f"- {d}" for d in disagreements]
    lines += ["", f"`python benchmarks/bench_slo_between.py`, {time.perf_counter() - start:.0f} s."]
    text = "\n".join(lines) + "\n"
    REPORT.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
