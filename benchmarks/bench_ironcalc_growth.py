"""How IronCalc's evaluate grows with the rows: the filled workbook at two sizes, whole and each
sheet alone (every other formula taken out, values kept: `bench_formula_costs.alone`), and the
aggregate functions the workbook uses, each on one sheet of N rows, at the same two sizes.

A sheet alone grows about as its rows do; what grows faster is what the whole workbook pays beyond
its sheets alone: the aggregates visiting formula cells of a large model rather than stored values.
Writes benchmarks/results/ironcalc_growth.md.

    python benchmarks/bench_ironcalc_growth.py --rows 10000,30000
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))

from bench_formula_costs import alone, evaluate_seconds  # noqa: E402  (one way to take formulas out)
from bench_workbook import filled_workbook, head_commit  # noqa: E402  (the benchmark's one data generator)

# The aggregates of the workbook's sheets, over one column of N rows ({n}) with a criterion ({i}).
AGGREGATES = {
    "SUMIFS, two criteria": "=SUMIFS($B$1:$B${n},$A$1:$A${n},{i},$D$1:$D${n},1)",
    "MINIFS": "=_xlfn.MINIFS($B$1:$B${n},$A$1:$A${n},{i})",
    "AVERAGEIFS": "=AVERAGEIFS($B$1:$B${n},$A$1:$A${n},{i})",
    "MATCH": "=MATCH({i}+100,$B$1:$B${n},0)",
    "MEDIAN(IF(slot-k))": '=MEDIAN(IF($A$1:$A${n}-{i},"",$B$1:$B${n}))',
    "MEDIAN(IF(two comparisons))": '=MEDIAN(IF(($A$1:$A${n}={i})*($D$1:$D${n}=1)=1,$B$1:$B${n},""))',
    "SUMPRODUCT": "=SUMPRODUCT($B$1:$B${n},$D$1:$D${n})",
}
AGGREGATE_CELLS = 50  # formulas of each kind


def aggregate_seconds(form: str, n: int, over_formulas: bool) -> float:
    """IronCalc's evaluate of AGGREGATE_CELLS `form`s over N rows; the summed column B a formula
    of its own in every row when `over_formulas`."""
    import ironcalc

    model = ironcalc.create("growth", "en", "UTC")
    for row in range(1, n + 1):
        model.set_user_input(0, row, 1, str(row % 7))
        model.set_user_input(0, row, 3, str(row * 0.5))
        model.set_user_input(0, row, 2, f"=C{row}" if over_formulas else str(row * 0.5))
        model.set_user_input(0, row, 4, "1" if row % 3 else "0")
    for i in range(AGGREGATE_CELLS):
        model.set_user_input(0, i + 1, 6, form.format(n=n, i=i % 7))
    start = time.perf_counter()
    model.evaluate()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="10000,30000", help="two sizes, comma-separated")
    args = parser.parse_args()
    small, large = (int(size) for size in args.rows.split(","))
    from scm_xl.xlsx.package import sheet_parts

    commit = head_commit()
    whole: dict[int, float] = {}
    sheets: dict[str, dict[int, tuple[int, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="scm-growth-") as tmp:
        folder = Path(tmp)
        for rows in (small, large):
            book = filled_workbook(folder, rows)
            whole[rows] = evaluate_seconds(book)
            print(f"{rows:,} rows: whole {whole[rows]:.2f} s", flush=True)
            with zipfile.ZipFile(book) as zf:
                parts = sheet_parts(zf)
                groups = [(title, part) for title, part in parts.items() if b"<f" in zf.read(part)]
            for title, part in groups:
                copy = folder / "alone.xlsx"
                count = alone(book, part, None, parts, copy)
                sheets.setdefault(title, {})[rows] = (count, evaluate_seconds(copy))
                print(f"  {title}: {count:,} formulas alone {sheets[title][rows][1]:.2f} s", flush=True)
            book.unlink()
    alone_sum = {rows: sum(times[rows][1] for times in sheets.values()) for rows in (small, large)}
    beyond = {rows: whole[rows] - alone_sum[rows] for rows in (small, large)}
    growth = large / small

    def ratio(a: float, b: float) -> str:
        return f"{b / a:.1f}×" if a > 0.005 else "–"

    lines = [f"# How IronCalc's evaluate grows from {small:,} to {large:,} rows ({commit})", "",
             f"`python benchmarks/bench_ironcalc_growth.py --rows {small},{large}`: one run each; the rows "
             f"grow {growth:.1f}×.", "",
             "| | " + f"{small:,} rows, s | {large:,} rows, s | growth |", "|---|---:|---:|---:|",
             f"| the whole workbook | {whole[small]:.2f} | {whole[large]:.2f} | {ratio(whole[small], whole[large])} |",
             f"| its sheets alone, summed | {alone_sum[small]:.2f} | {alone_sum[large]:.2f} | "
             f"{ratio(alone_sum[small], alone_sum[large])} |",
             f"| the whole beyond its sheets alone | {beyond[small]:.2f} | {beyond[large]:.2f} | "
             f"{ratio(beyond[small], beyond[large])} |", "",
             "Each sheet alone (every other formula taken out, its values kept):", "",
             f"| sheet | formulas at {small:,} | s | s at {large:,} | growth |", "|---|---:|---:|---:|---:|"]
    for title, times in sorted(sheets.items(), key=lambda item: -item[1][large][1]):
        (count, a), (_, b) = times[small], times[large]
        lines.append(f"| {title} | {count:,} | {a:.2f} | {b:.2f} | {ratio(a, b)} |")
    lines += ["", f"The aggregates alone, {AGGREGATE_CELLS} of each over one column on one sheet, the column "
              "a stored value or a formula in every row:", "",
              f"| aggregate | values, {small:,} | values, {large:,} | formulas, {small:,} | formulas, {large:,} "
              f"| ns a visited cell, formulas at {large:,} |", "|---|---:|---:|---:|---:|---:|"]
    for name, form in AGGREGATES.items():
        times_ = [aggregate_seconds(form, rows, over) for over in (False, True) for rows in (small, large)]
        per_visit = times_[3] / (AGGREGATE_CELLS * large) * 1e9
        lines.append(f"| {name} | " + " | ".join(f"{t:.3f}" for t in times_) + f" | {per_visit:.0f} |")
        print(f"{name}: {times_}", flush=True)
    text = "\n".join(lines) + "\n"
    (HERE / "results" / "ironcalc_growth.md").write_text(text, encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
