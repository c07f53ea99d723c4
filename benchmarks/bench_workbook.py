"""Time build + fill + recalculate + verify + store values for growing raw-row counts, per engine.

Each measurement runs in a fresh process so its peak memory (max RSS) is its own. Besides the
wall time it records the CPU seconds of the process and its children (soffice): on a shared
machine the CPU time is what an idle machine's wall time would be. Writes
benchmarks/results/workbook.md.

    python benchmarks/bench_workbook.py                        # article, 1000, 10000 rows
    python benchmarks/bench_workbook.py --rows article,100 --engines ironcalc
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

HERE = Path(__file__).resolve().parent


def head_commit() -> str:
    """The short hash of this checkout's HEAD, which the benchmarks' results name."""
    return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                          cwd=HERE.parent, check=True).stdout.strip()


@contextlib.contextmanager
def worktrees(folder: Path, commits: dict[str, str], *, compile_first: bool = True) -> Iterator[dict[str, Path]]:
    """A `git worktree` of each commit (name -> commit: "HEAD", a hash) under `folder`, removed on
    the way out: a benchmark runs an older commit's code beside this one's (PYTHONPATH first).

    Each tree's scm_xl is byte-compiled first, as `pip install` compiles an installed package's
    modules: where PYTHONDONTWRITEBYTECODE is set (as on these machines), a fresh checkout would
    otherwise compile every module it imports again in every process it runs (about 0.25 s of a
    command's start here), which no installed scm-xl does. `compile_first=False`: as checked out."""
    trees: dict[str, Path] = {}
    try:
        for name, commit in commits.items():
            tree = folder / f"tree-{name}"
            subprocess.run(["git", "worktree", "add", "--detach", str(tree), commit], cwd=HERE.parent, check=True,
                           capture_output=True)
            trees[name] = tree
            if compile_first:
                subprocess.run([sys.executable, "-m", "compileall", "-q", str(tree / "scm_xl")], check=True,
                               capture_output=True)
        yield trees
    finally:
        for tree in trees.values():
            subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=HERE.parent, capture_output=True)


def filled_workbook(folder: Path, n: int) -> Path:
    """`make_csv`'s n rows filled by the library (`fill`, English, the default engine) into
    folder/filled<n>.xlsx: the workbook the engine benchmarks time."""
    from scm_xl.workbook.fill import fill

    csv, book = folder / f"rows{n}.csv", folder / f"filled{n}.xlsx"
    make_csv(csv, n)
    fill(csv, output=book, lang="en", force=True)
    return book


def make_csv(path: Path, n: int, seed: int = 1) -> None:
    """A noisy full factorial repeated until n rows: 2 models x 8 concurrency x 5 lengths."""
    from scm_xl.results import ResultRow, write_results

    rng = random.Random(seed)
    models = {"model-a": 1.0, "model-b": 2.2}
    levels = [1, 2, 4, 8, 16, 32, 64, 128]
    lengths = [50, 100, 200, 400, 800]
    rows: list[ResultRow] = []
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


ARTICLE = HERE.parent / "examples" / "article_qwen2.5-7b.csv"


def _cpu() -> float:
    me, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + children.ru_utime + children.ru_stime


def one(rows: str, engine: str) -> dict[str, object]:
    from scm_xl.workbook.fill import fill

    with tempfile.TemporaryDirectory() as tmp:
        csv_path = ARTICLE if rows == "article" else Path(tmp) / "results.csv"
        if rows != "article":
            make_csv(csv_path, int(rows))
        start, cpu = time.perf_counter(), _cpu()
        report = fill(csv_path, output=Path(tmp) / "out.xlsx", engine=engine)
        seconds, cpu_seconds = time.perf_counter() - start, _cpu() - cpu
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    peak_children_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return {"rows": rows, "engine": report.verification.engine, "seconds": round(seconds, 2),
            "cpu_seconds": round(cpu_seconds, 2), "recalc_seconds": round(report.verification.seconds, 2),
            "cells": report.verification.cells_compared, "ok": report.verification.ok,
            "peak_mb": round(max(peak_mb, peak_children_mb))}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", default="article,1000,10000")
    parser.add_argument("--engines", default="ironcalc,libreoffice")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        rows, engine = args.child.split(":")
        print(json.dumps(one(rows, engine)))
        return
    with open("/proc/loadavg") as f:
        load = " ".join(f.read().split()[:3])
    results = []
    for n in args.rows.split(","):
        for engine in args.engines.split(","):
            out = subprocess.run([sys.executable, __file__, "--child", f"{n}:{engine}"],
                                 capture_output=True, text=True, timeout=3600)
            if out.returncode != 0:
                print(out.stderr[-2000:], file=sys.stderr)
                results.append({"rows": n, "engine": engine, "error": out.stderr.strip().splitlines()[-1:]})
                continue
            result = json.loads(out.stdout.strip().splitlines()[-1])
            results.append(result)
            print(result, flush=True)
    lines = ["| raw rows | engine | wall | CPU (process + soffice) | recalculation | peak MB | formula cells | verified |",
             "|---|---|---|---|---|---|---|---|"]
    for r in results:
        if "error" in r:
            lines.append(f"| {r['rows']} | {r['engine']} | error: {r['error']} | | | | | |")
            continue
        lines.append(f"| {r['rows']} | {r['engine']} | {r['seconds']} s | {r['cpu_seconds']} s | "
                     f"{r['recalc_seconds']} s | {r['peak_mb']} | {r['cells']:,} | {'yes' if r['ok'] else 'NO'} |")
    out_dir = HERE / "results"
    out_dir.mkdir(exist_ok=True)
    (out_dir / "workbook.md").write_text(
        "`fill` end to end (build, write, recalculate, verify every formula cell, store the values), one fresh\n"
        f"process each, on the shared 2-core machine (load average {load} at the start): read the CPU column\n"
        "as the idle machine's time. Peak MB is the larger of the Python process and its children (soffice).\n"
        f"Command: `python benchmarks/bench_workbook.py --rows {args.rows} --engines {args.engines}`\n\n"
        + "\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
