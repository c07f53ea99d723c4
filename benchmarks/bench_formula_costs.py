"""What each sheet's (or column's) formulas cost IronCalc's `evaluate`, on a filled workbook of N
rows. Two ways:

- by default, the formulas of one group are taken out of a copy (their stored values stay, so the
  cells that read them still compute), and IronCalc evaluates the copy; the time saved against the
  whole workbook, alternating whole and stripped runs, is that group's cost (with what it makes
  IronCalc evaluate of the cells it reads). A small saving drowns in the machine's noise.
- `--alone`: every formula but the group's is taken out (values kept), and IronCalc evaluates only
  the group's, reading stored values; with nothing kept the copy gives the floor. Far steadier,
  and the groups' times add up to about the whole.

The first lever of the house issue is fewer or cheaper cells per row: this says which. Writes
benchmarks/results/formula_costs[_alone][_<sheet>].md.

    python benchmarks/bench_formula_costs.py --rows 10000 --rounds 2
    python benchmarks/bench_formula_costs.py --rows 10000 --alone
    python benchmarks/bench_formula_costs.py --rows 10000 --columns Work_Rows
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import tempfile
import time
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))

from bench_workbook import filled_workbook, head_commit  # noqa: E402  (the benchmark's one data generator)

_FORMULA = re.compile(rb"<f\b[^>]*/>|<f\b[^>]*>[^<]*</f>")
_CELL = re.compile(rb'<c r="([A-Z]+)[0-9]+"[^>]*?(?:/>|>[^<]*(?:<(?!/c>)[^<]*)*</c>)')


def evaluate_seconds(path: Path) -> float:
    import ironcalc

    from scm_xl.engines.ironcalc_worker import for_ironcalc as _for_ironcalc

    with tempfile.TemporaryDirectory() as folder:
        model = ironcalc.load_from_xlsx(str(_for_ironcalc(path, Path(folder))), "en", "UTC")
    start = time.perf_counter()
    model.evaluate()
    return time.perf_counter() - start


def stripped(source: Path, part: str, columns: set[str] | None, out: Path) -> int:
    """A copy of `source` with the formulas of sheet part `part` (only `columns`, when given)
    taken out, their cached values kept; how many formulas it took out."""
    taken = 0

    def cell(match: re.Match[bytes]) -> bytes:
        nonlocal taken
        if columns is not None and match.group(1).decode() not in columns:
            return match.group(0)
        new, n = _FORMULA.subn(b"", match.group(0))
        taken += n
        return new

    with zipfile.ZipFile(source) as book, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as copy:
        for info in book.infolist():
            data = book.read(info)
            if info.filename == part:
                data = _CELL.sub(cell, data)
            copy.writestr(info, data)
    return taken


def alone(source: Path, keep: str | None, columns: set[str] | None, parts: dict[str, str], out: Path) -> int:
    """A copy of `source` with every formula taken out but those of sheet part `keep` (only
    `columns`, when given), their cached values kept; how many formulas it kept."""
    kept = 0

    def cell(match: re.Match[bytes]) -> bytes:
        nonlocal kept
        if columns is None or match.group(1).decode() in columns:
            kept += len(_FORMULA.findall(match.group(0)))
            return match.group(0)
        return _FORMULA.sub(b"", match.group(0))

    sheets = set(parts.values())
    with zipfile.ZipFile(source) as book, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as copy:
        for info in book.infolist():
            data = book.read(info)
            if info.filename in sheets:
                data = _CELL.sub(cell, data) if info.filename == keep else _CELL.sub(
                    lambda m: _FORMULA.sub(b"", m.group(0)), data)
            copy.writestr(info, data)
    return kept


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=10000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--columns", help="one sheet: time each of its formula columns instead of each sheet")
    parser.add_argument("--alone", action="store_true",
                        help="time each group evaluated alone (every other formula taken out)")
    args = parser.parse_args()
    from scm_xl.xlsx.package import sheet_parts

    commit = head_commit()
    with tempfile.TemporaryDirectory(prefix="scm-costs-") as tmp:
        folder = Path(tmp)
        book = filled_workbook(folder, args.rows)
        with zipfile.ZipFile(book) as zf:
            parts = sheet_parts(zf)
            groups: list[tuple[str, str, set[str] | None]] = []
            if args.columns:
                xml = zf.read(parts[args.columns])
                columns = sorted({m.group(1).decode() for m in _CELL.finditer(xml) if b"<f" in m.group(0)},
                                 key=lambda c: (len(c), c))
                groups = [(f"{args.columns}!{c}", parts[args.columns], {c}) for c in columns]
            else:
                groups = [(title, part, None) for title, part in parts.items()
                          if b"<f" in zf.read(part)]
        whole: list[float] = []
        costs: dict[str, list[float]] = {name: [] for name, _, _ in groups}
        counts: dict[str, int] = {}
        if args.alone:
            report_alone(args, commit, book, groups, parts, folder)
            return
        for _ in range(args.rounds):
            for name, part, columns in groups:
                copy = folder / "stripped.xlsx"
                counts[name] = stripped(book, part, columns, copy)
                base = evaluate_seconds(book)
                without = evaluate_seconds(copy)
                whole.append(base)
                costs[name].append(base - without)
                print(f"{name}: {counts[name]} formulas, {base:.1f} s whole, {without:.1f} s without", flush=True)
    median_whole = statistics.median(whole)
    rows = sorted(((statistics.median(v), name) for name, v in costs.items()), reverse=True)
    what = f"each formula column of {args.columns}" if args.columns else "each sheet"
    lines = [f"# What {what} costs IronCalc's evaluate at {args.rows:,} rows ({commit})", "",
             f"`python benchmarks/bench_formula_costs.py --rows {args.rows} --rounds {args.rounds}"
             + (f" --columns {args.columns}" if args.columns else "") + "`: the whole workbook evaluates in "
             f"{median_whole:.1f} s (median of {len(whole)}); each group's formulas taken out (values kept), "
             "whole and stripped runs alternating. Costs overlap (a group's saving includes the cells it "
             "made IronCalc evaluate) and the machine is shared: read the order, not the sums.", "",
             "| group | formulas | s saved (median) | µs per formula |", "|---|---:|---:|---:|"]
    lines += [f"| {name} | {counts[name]:,} | {cost:.1f} | {cost / max(counts[name], 1) * 1e6:.1f} |"
              for cost, name in rows]
    write_results("formula_costs", args, lines)


def write_results(stem: str, args: argparse.Namespace, lines: list[str]) -> None:
    """benchmarks/results/<stem>[_<sheet>].md, and the same on standard output."""
    text = "\n".join(lines) + "\n"
    name = stem + (f"_{args.columns.lower()}" if args.columns else "") + ".md"
    (HERE / "results" / name).write_text(text, encoding="utf-8")
    print(text)


def report_alone(args: argparse.Namespace, commit: str, book: Path, groups: list[tuple[str, str, set[str] | None]],
                 parts: dict[str, str], folder: Path) -> None:
    copy = folder / "alone.xlsx"
    times: dict[str, list[float]] = {name: [] for name, _, _ in groups}
    counts: dict[str, int] = {}
    whole: list[float] = []
    floor: list[float] = []
    for _ in range(args.rounds):
        whole.append(evaluate_seconds(book))
        alone(book, None, None, parts, copy)
        floor.append(evaluate_seconds(copy))
        for name, part, columns in groups:
            counts[name] = alone(book, part, columns, parts, copy)
            times[name].append(evaluate_seconds(copy))
            print(f"{name}: {counts[name]} formulas alone {times[name][-1]:.2f} s", flush=True)
    rows = sorted(((statistics.median(v), name) for name, v in times.items()), reverse=True)
    base = statistics.median(floor)
    what = f"each formula column of {args.columns}" if args.columns else "each sheet"
    lines = [f"# What {what} costs IronCalc's evaluate alone at {args.rows:,} rows ({commit})", "",
             f"`python benchmarks/bench_formula_costs.py --rows {args.rows} --rounds {args.rounds} --alone"
             + (f" --columns {args.columns}" if args.columns else "") + "`: every formula but the group's "
             "taken out of a copy (values kept), IronCalc evaluates the rest; medians of "
             f"{args.rounds}. The whole workbook: {statistics.median(whole):.1f} s; the copy with no formula "
             f"(the floor, in every time below): {base:.2f} s.", "",
             "| group | formulas | s alone | s above the floor | µs per formula |", "|---|---:|---:|---:|---:|"]
    lines += [f"| {name} | {counts[name]:,} | {t:.2f} | {t - base:.2f} | {(t - base) / max(counts[name], 1) * 1e6:.1f} |"
              for t, name in rows]
    write_results("formula_costs_alone", args, lines)


if __name__ == "__main__":
    main()
