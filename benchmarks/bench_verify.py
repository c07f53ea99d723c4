"""`scm-xl verify` of a filled workbook as a command, this checkout's HEAD against an older commit,
alternating in one run: wall and CPU seconds, peak memory of the largest process and of all at once
(`bench_fill_speed.measure_command`). The workbook is filled once, by HEAD. Writes
benchmarks/results/verify.md.

    python benchmarks/bench_verify.py --base b22b93d --rows 10000 --rounds 2
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_fill_speed import (  # noqa: E402  (one measurement of a command, one table of them)
    MEASURED_ALIGN, MEASURED_HEADER, measure, measure_command, measured_cells, write_table,
)
from bench_workbook import head_commit, make_csv, worktrees  # noqa: E402  (the benchmark's one data generator)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="b22b93d", help="the older commit to compare with")
    parser.add_argument("--rows", type=int, default=10000)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    head = head_commit()
    runs: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory(prefix="scm-bench-verify-") as tmp, \
            worktrees(Path(tmp), {"base": args.base, "head": "HEAD"}) as trees:
        folder = Path(tmp)
        csv = folder / "rows.csv"
        make_csv(csv, args.rows)
        filled = measure("filled", trees["head"], csv, None, folder)
        assert filled["exit"] == 0 and filled["verified"], filled
        book = folder / "filled.xlsx"
        for round_no in range(args.rounds):
            for label in ("head", "base"):
                result = measure_command(label, trees[label], ["verify", str(book)], folder)
                runs.append(result)
                print(round_no, result, flush=True)

    def median(label: str, key: str) -> float:
        return statistics.median(float(r[key]) for r in runs if r["label"] == label)  # type: ignore[arg-type]

    with open("/proc/loadavg") as f:
        load = " ".join(f.read().split()[:3])
    names = {"head": head, "base": args.base}
    lines = [f"# `scm-xl verify` of a {args.rows:,}-row workbook: {head} against {args.base}", "",
             f"`python benchmarks/bench_verify.py --base {args.base} --rows {args.rows} --rounds {args.rounds}` "
             f"(load average {load} at the end, on a 2-core machine). The workbook is filled once by {head}; "
             "each run is a fresh command.", "",
             f"| run | commit | {MEASURED_HEADER} |", f"|---|---|{MEASURED_ALIGN}|"]
    for i, r in enumerate(runs):
        lines.append(f"| {i // 2 + 1} | {names[str(r['label'])]} | {measured_cells(r)} |")
    lines += ["", f"Medians: {head} {median('head', 'wall'):.1f} s wall / {median('head', 'summed_mb'):.0f} MB at "
              f"once; {args.base} {median('base', 'wall'):.1f} s / {median('base', 'summed_mb'):.0f} MB "
              f"({median('base', 'wall') / median('head', 'wall'):.2f}x faster, "
              f"{median('head', 'summed_mb') / median('base', 'summed_mb'):.0%} of the memory)."]
    write_table("verify", lines)


if __name__ == "__main__":
    main()
