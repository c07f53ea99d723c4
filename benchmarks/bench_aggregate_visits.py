"""How many cells the filled workbook's aggregates read, sheet by sheet: where IronCalc's evaluate
goes once the per-row formulas are cheap.

Every formula of a filled N-row workbook (a shared formula counted once per cell of its range) is
read from the file, and each range it names is counted cell by cell, except the first argument of
INDEX and the argument of ROWS, which IronCalc reads in constant time (their sheet of 126,000
formulas evaluates alone in 0.09 s: benchmarks/results/ironcalc_growth.md). The count is an upper
bound: SUMIFS and its kin stop testing a row at its first failing criterion. Each cell read costs
IronCalc a row lookup, a column lookup and, for a formula cell, a look at its evaluation state, all
hash maps that outgrow the caches of a large model (`perf record` of its evaluate: 40% of the
samples in `Model::evaluate_cell` itself). Writes benchmarks/results/aggregate_visits.md.

    python benchmarks/bench_aggregate_visits.py --rows 10000
"""

from __future__ import annotations

import argparse
import html
import re
import sys
import tempfile
import zipfile
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from bench_workbook import filled_workbook, head_commit  # noqa: E402  (the benchmark's one data generator)

_FORMULA = re.compile(r"<f\b([^>]*?)(?:/>|>(.*?)</f>)", re.DOTALL)
_SHARED_REF = re.compile(r'\sref="([A-Z]+)(\d+)(?::([A-Z]+)(\d+))?"')
_RANGE = re.compile(r"\$?([A-Z]{1,3})\$?(\d+):\$?([A-Z]{1,3})\$?(\d+)")
_CONSTANT_TIME = (re.compile(r"INDEX\(([^,()]+),"), re.compile(r"ROWS\(([^,()]+)\)"))
_ADDRESS = re.compile(r"\$?[A-Z]{1,3}\$?\d+")
SMALL_RANGE = 50  # a range of fewer cells is a lookup table's, not the rows'


def visits(formula: str) -> int:
    """The cells of the rows-sized ranges `formula` reads (INDEX's first argument and ROWS's not)."""
    from scm_xl.xlsx.package import column_number

    for pattern in _CONSTANT_TIME:
        formula = pattern.sub(lambda m: m.group(0).replace(m.group(1), "A1"), formula)
    total = 0
    for left, top, right, bottom in _RANGE.findall(formula):
        cells = (int(bottom) - int(top) + 1) * (column_number(right.encode()) - column_number(left.encode()) + 1)
        total += cells if cells >= SMALL_RANGE else 0
    return total


def count(path: Path) -> tuple[dict[str, tuple[int, int]], Counter[tuple[str, str]], Counter[tuple[str, str]]]:
    """Per sheet (formula cells, cells visited); visits and formula cells per normalised pattern."""
    from scm_xl.xlsx.package import column_number, sheet_parts

    by_sheet: dict[str, tuple[int, int]] = {}
    by_pattern: Counter[tuple[str, str]] = Counter()
    cells_of: Counter[tuple[str, str]] = Counter()
    with zipfile.ZipFile(path) as book:
        for title, part in sheet_parts(book).items():
            xml = book.read(part).decode("utf-8")
            formulas = visited = 0
            for attrs, text in _FORMULA.findall(xml):
                if not text:
                    continue  # a shared formula's follower: counted with its master's range
                text = html.unescape(text)
                n = 1
                ref = _SHARED_REF.search(attrs)
                if 't="shared"' in attrs and ref and ref.group(3):
                    n = (int(ref.group(4)) - int(ref.group(2)) + 1) * (
                        column_number(ref.group(3).encode()) - column_number(ref.group(1).encode()) + 1)
                seen = visits(text) * n
                formulas += n
                visited += seen
                if seen:
                    pattern = (title, _ADDRESS.sub("R", text)[:110])
                    by_pattern[pattern] += seen
                    cells_of[pattern] += n
            by_sheet[title] = (formulas, visited)
    return by_sheet, by_pattern, cells_of


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10000)
    parser.add_argument("--out", type=Path, default=HERE / "results" / "aggregate_visits.md")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="scm-visits-") as tmp:
        book = filled_workbook(Path(tmp), args.rows)
        by_sheet, by_pattern, cells_of = count(book)
    total_formulas = sum(f for f, _ in by_sheet.values())
    total_visits = sum(v for _, v in by_sheet.values())
    lines = [
        f"# Cells the aggregates of a filled {args.rows:,}-row workbook read ({head_commit()})", "",
        f"`python benchmarks/bench_aggregate_visits.py --rows {args.rows}`: every formula of the filled "
        "workbook, a shared formula once per cell of its range; each range of at least "
        f"{SMALL_RANGE} cells it names counted cell by cell, except INDEX's first argument and ROWS's "
        "(constant time in IronCalc). An upper bound: SUMIFS and its kin stop at a row's first failing "
        "criterion.", "",
        f"{total_formulas:,} formula cells read {total_visits / 1e6:.1f} million cells through their "
        f"aggregates ({total_visits / max(args.rows, 1):,.0f} a raw row).", "",
        "| sheet | formula cells | cells read (millions) |", "|---|---:|---:|",
    ]
    for title, (formulas, visited) in sorted(by_sheet.items(), key=lambda kv: -kv[1][1]):
        if formulas:
            lines.append(f"| {title} | {formulas:,} | {visited / 1e6:.1f} |")
    lines += ["", "The patterns that read the most (addresses written R; `×` the formula cells of the pattern):", "",
              "| cells read (millions) | × | sheet | formula |", "|---:|---:|---|---|"]
    for (title, pattern), visited in by_pattern.most_common(20):
        shown = pattern.replace("|", "\\|")
        lines.append(f"| {visited / 1e6:.2f} | {cells_of[(title, pattern)]:,} | {title} | `{shown}` |")
    args.out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
