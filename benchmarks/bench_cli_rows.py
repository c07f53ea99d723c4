"""How the CLI scales with rows, end to end (not a test): `scm-xl fill` from CSV to verified workbook.

Issue 12 found `fill` super-linear in rows (0.2/0.9/3.1/15/84 CPU-s at 250/500/1k/2k/4k rows,
about n^2.5): the chain's leave-one-out recalibrated once per row. This times two things:

1. The analysis the CLI adds to the library's work, alone: filter, chain calibration, least
   squares with its hold-out, the chain's leave-one-out and the interaction check
   (`lsq.least_squares_analysis`), from 250 up to 100,000 rows.
2. `scm-xl fill ROWS.csv -o out.xlsx --json out.json` as a subprocess, wall time and the CPU
   time of the process and its children (LibreOffice included), at each size up to 10,000 rows.

The rows: 2 models x 8 concurrency levels x 6 max_tokens, replicated to the size asked, with
log-normal noise (a campaign repeated over days). The machine is shared with other jobs, so
wall figures carry their load; CPU seconds move less.

Writes benchmarks/results/cli_rows.md.

    python benchmarks/bench_cli_rows.py [--sizes 250,1000,10000] [--analysis-sizes ...] [--engine auto]
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from scm_xl.results import ResultRow, write_results  # noqa: E402

CONCURRENCY = (1, 2, 4, 8, 16, 32, 64, 128)
LENGTHS = (50, 100, 200, 400, 800, 1600)
MODELS = {"Qwen2.5-7B": 1.0, "Qwen2.5-14B": 1.9}


def rows_of(count: int, seed: int = 7) -> list[ResultRow]:
    rng = random.Random(seed)
    cells = [(m, c, length) for m in MODELS for c in CONCURRENCY for length in LENGTHS]
    rows = []
    for i in range(count):
        model, c, length = cells[i % len(cells)]
        tps = 45.0 * c ** 0.8 * (50 / length) ** 0.3 / MODELS[model] * math.exp(rng.gauss(0, 0.05))
        total_requests = 4 * c
        tokens = total_requests * length
        rows.append(ResultRow(exp_id=f"R{i + 1:06d}", model=model, concurrency=c, requests_per_slot=4,
                              total_requests=total_requests, max_tokens=length,
                              total_time_s=round(tokens / tps, 6), total_output_tokens=tokens))
    return rows


def time_analysis(count: int) -> tuple[float, float]:
    from scm_xl.lsq import least_squares_analysis
    from scm_xl.model import analyze

    rows = rows_of(count)
    start_wall, start_cpu = time.perf_counter(), time.process_time()
    analysis = analyze(rows)
    least_squares_analysis(analysis.statuses, analysis.settings).report()
    return time.perf_counter() - start_wall, time.process_time() - start_cpu


def time_fill(count: int, engine: str, folder: Path) -> tuple[float, float, int, str]:
    csv = folder / f"rows_{count}.csv"
    write_results(csv, rows_of(count))
    out, report = folder / f"rows_{count}.xlsx", folder / f"rows_{count}.json"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", "from scm_xl.cli import main; main()", "fill", str(csv), "-o", str(out), "--json",
                           str(report), "--engine", engine, "--force", "--no-progress"],
                          capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    verified = next((line for line in done.stdout.splitlines() if line.startswith(("verified", "MISMATCH"))),
                    done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "")
    return wall, cpu, done.returncode, verified


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="250,1000,4000,10000")
    parser.add_argument("--analysis-sizes", default="250,1000,4000,10000,100000")
    parser.add_argument("--engine", default="auto")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "cli_rows.md"))
    args = parser.parse_args()
    sizes = [int(v) for v in args.sizes.split(",") if v]
    analysis_sizes = [int(v) for v in args.analysis_sizes.split(",") if v]

    lines = ["# The CLI against rows, end to end", "",
             f"`python benchmarks/bench_cli_rows.py --sizes {args.sizes} --analysis-sizes {args.analysis_sizes} "
             f"--engine {args.engine}`", "",
             f"Machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
             "shared with other jobs while measured (wall times carry their load).",
             f"Commit: {_commit()}", "",
             "## The analysis the CLI adds (filter, chain, least squares, both leave-one-outs, interactions)", "",
             "| rows | wall s | CPU s |", "|---:|---:|---:|"]
    for count in analysis_sizes:
        wall, cpu = time_analysis(count)
        lines.append(f"| {count:,} | {wall:.2f} | {cpu:.2f} |")
        print(lines[-1], flush=True)
    lines += ["", f"## `scm-xl fill ROWS.csv -o out.xlsx --json out.json --engine {args.engine}`", "",
              "| rows | wall s | CPU s (process and children) | exit | verification |",
              "|---:|---:|---:|---:|---|"]
    with tempfile.TemporaryDirectory(prefix="scm-xl-bench-") as folder:
        for count in sizes:
            wall, cpu, code, verified = time_fill(count, args.engine, Path(folder))
            load = os.getloadavg()[0]
            lines.append(f"| {count:,} | {wall:.1f} | {cpu:.1f} | {code} | {verified[:90]} (load {load:.1f}) |")
            print(lines[-1], flush=True)
    out = Path(args.out)
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"wrote {out}")


def _commit() -> str:
    try:
        return subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True).stdout.strip() or "unknown"
    except OSError:
        return "unknown"


if __name__ == "__main__":
    main()
