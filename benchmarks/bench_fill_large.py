"""`scm-xl fill` as a command on a large results CSV: wall and CPU seconds, peak memory of the
largest process and of all its processes at once (the house issue's "100,000 rows must fit in
2 GB"). One fresh process per size, this checkout's code, the default engine; each run is
`bench_fill_speed.measure`, so the figures read as that benchmark's do. Writes
benchmarks/results/fill_large.md.

    python benchmarks/bench_fill_large.py --rows 30000,100000
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from bench_fill_speed import (  # one measurement of a fill command, one table of them
    MEASURED_ALIGN, MEASURED_HEADER, measure, measured_cells, write_table,
)
from bench_workbook import head_commit, make_csv

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
LIMIT_MB = 2048  # the house issue's ceiling for 100,000 rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="30000,100000", help="comma-separated sizes")
    args = parser.parse_args()
    sizes = [int(size) for size in args.rows.split(",")]
    head = head_commit()
    runs = []
    with tempfile.TemporaryDirectory(prefix="scm-bench-large-") as tmp:
        folder = Path(tmp)
        for rows in sizes:
            csv = folder / f"rows{rows}.csv"
            make_csv(csv, rows)
            result = measure(f"rows{rows}", ROOT, csv, None, folder)
            result["rows"] = rows
            runs.append(result)
            print(result, flush=True)
            (folder / f"rows{rows}.xlsx").unlink(missing_ok=True)
    lines = [f"# `scm-xl fill` on large results CSVs ({head})", "",
             f"`python benchmarks/bench_fill_large.py --rows {args.rows}`: one fresh command per size, the "
             "default engine, on the 2-core machine; peak memory as `bench_fill_speed.py` measures it "
             f"(the largest process; all processes at once, sampled every 50 ms). Ceiling: {LIMIT_MB:,} MB.", "",
             f"| rows | {MEASURED_HEADER} |", f"|---:|{MEASURED_ALIGN}|"]
    for r in runs:
        lines.append(f"| {r['rows']:,} | {measured_cells(r)} |")
    write_table("fill_large", lines)


if __name__ == "__main__":
    main()
