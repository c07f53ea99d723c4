"""Time build + fill + recalculate + verify for growing raw-row counts, per engine.

Each measurement runs in a fresh process so its peak memory (max RSS) is its own.
Writes benchmarks/results/workbook.md.

    python benchmarks/bench_workbook.py            # 10, 100, 1000, 5000, 10000 rows
    python benchmarks/bench_workbook.py --rows 10,100 --engines formulas
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def make_csv(path: Path, n: int, seed: int = 1) -> None:
    """A noisy full factorial repeated until n rows: 2 models x 8 concurrency x 5 lengths."""
    from scm_xl.results import ResultRow, write_results

    rng = random.Random(seed)
    models = {"model-a": 1.0, "model-b": 2.2}
    levels = [1, 2, 4, 8, 16, 32, 64, 128]
    lengths = [50, 100, 200, 400, 800]
    rows = []
    i = 0
    while len(rows) < n:
        model = list(models)[i % 2]
        c = levels[(i // 2) % len(levels)]
        length = lengths[(i // 16) % len(lengths)]
        repeat = i // 80
        tps = 40 * c ** 0.8 * (length / 50) ** -0.1 / models[model] * rng.lognormvariate(0, 0.05)
        total_requests = 10 * c
        tokens = total_requests * length
        rows.append(ResultRow(exp_id=f"E{i + 1:05d}", model=model, concurrency=c, requests_per_slot=10,
                              total_requests=total_requests, max_tokens=length, total_time_s=tokens / tps,
                              total_output_tokens=tokens, repeat=repeat))
        i += 1
    write_results(path, rows)


def one(rows: int, engine: str) -> dict[str, object]:
    from scm_xl.workbook.fill import fill

    with tempfile.TemporaryDirectory() as tmp:
        csv_path = Path(tmp) / "results.csv"
        make_csv(csv_path, rows)
        start = time.perf_counter()
        report = fill(csv_path, output=Path(tmp) / "out.xlsx", engine=engine, force=True)
        seconds = time.perf_counter() - start
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    peak_children_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return {"rows": rows, "engine": report.verification.engine, "seconds": round(seconds, 2),
            "recalc_seconds": round(report.verification.seconds, 2),
            "cells": report.verification.cells_compared, "ok": report.verification.ok,
            "peak_mb": round(max(peak_mb, peak_children_mb))}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", default="10,100,1000,5000,10000")
    parser.add_argument("--engines", default="formulas,libreoffice")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        rows, engine = args.child.split(":")
        print(json.dumps(one(int(rows), engine)))
        return
    results = []
    for n in [int(x) for x in args.rows.split(",")]:
        for engine in args.engines.split(","):
            out = subprocess.run([sys.executable, __file__, "--child", f"{n}:{engine}"],
                                 capture_output=True, text=True, timeout=1800)
            if out.returncode != 0:
                print(out.stderr[-2000:], file=sys.stderr)
                results.append({"rows": n, "engine": engine, "error": out.stderr.strip().splitlines()[-1:]})
                continue
            result = json.loads(out.stdout.strip().splitlines()[-1])
            results.append(result)
            print(result, flush=True)
    by = {(r["rows"], r["engine"]): r for r in results}
    lines = ["| raw rows | formulas: end to end | formulas: recalc | formulas peak MB | "
             "libreoffice: end to end | libreoffice: recalc | libreoffice peak MB | formulas / libreoffice | cells verified |",
             "|---|---|---|---|---|---|---|---|---|"]
    for n in sorted({r["rows"] for r in results}):
        f, lo = by.get((n, "formulas"), {}), by.get((n, "libreoffice"), {})
        ratio = (f"{f['seconds'] / lo['seconds']:.2f}x" if f.get("seconds") and lo.get("seconds") else "-")
        lines.append(
            f"| {n:,} | {f.get('seconds', '-')} s | {f.get('recalc_seconds', '-')} s | {f.get('peak_mb', '-')} | "
            f"{lo.get('seconds', '-')} s | {lo.get('recalc_seconds', '-')} s | {lo.get('peak_mb', '-')} | {ratio} | "
            f"{f.get('cells') or lo.get('cells') or '-'} |")
    out_dir = HERE / "results"
    out_dir.mkdir(exist_ok=True)
    (out_dir / "workbook.md").write_text(
        "Build + fill + recalculate + verify, whole `fill` call, fresh process each, 2-core machine.\n"
        "Peak MB is the larger of the Python process and its children (soffice).\n\n" + "\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
