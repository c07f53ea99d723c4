"""The recalculation engines side by side: `fill` + recalculate + verify, and IronCalc cell by cell.

For each size (the article's CSV, then synthetic results from tests/data/gen.py) and each
engine, one `fill` call runs in a fresh process, so its wall time and peak memory (the larger
of the process and its children, i.e. soffice) are its own. Then one filled workbook per size
is recalculated by IronCalc and by LibreOffice and every formula cell is compared: IronCalc
against LibreOffice, and each against the Python reference (scm_xl.verify.compare). Writes
benchmarks/results/engines.md.

    python benchmarks/bench_engines.py                      # article, 1000, 10000 rows; 3 engines
    python benchmarks/bench_engines.py --sizes article,1000 --engines ironcalc,libreoffice --repeat 3
"""

from __future__ import annotations

import argparse
import inspect
import json
import math
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from importlib.metadata import version
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
ARTICLE = ROOT / "examples" / "article_qwen2.5-7b.csv"


NOTES = "## Notes (by hand)"


def make_csv(size: str, folder: Path) -> Path:
    """The results CSV for `size`: "article", or a row count of synthetic replicated factorials."""
    if size == "article":
        return ARTICLE
    sys.path.insert(0, str(ROOT / "tests" / "data"))
    from gen import replicated_factorial, write_csv  # tests/data/gen.py

    rows = int(size)
    made = replicated_factorial(seed=7, repeats=math.ceil(rows / 24), sigma=0.05, prefix="B")[:rows]
    return write_csv(folder / f"results_{rows}.csv", made)


def one_fill(csv_path: Path, out: Path, engine: str) -> dict[str, object]:
    """Child process: one whole `fill` (build, write, recalculate, verify)."""
    from scm_xl.workbook.fill import fill

    options = {"force": True} if "force" in inspect.signature(fill).parameters else {}  # older fill() asked
    start = time.perf_counter()
    report = fill(csv_path, output=out, engine=engine, lang="en", **options)
    seconds = time.perf_counter() - start
    peak = max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
               resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) / 1024
    verification = report.verification
    return {"engine": verification.engine, "seconds": seconds, "recalc_seconds": verification.seconds,
            "cells": verification.cells_compared, "mismatches": len(verification.mismatches),
            "ok": verification.ok, "peak_mb": peak}


def cell_by_cell(workbook: Path) -> dict[str, object]:
    """Child process: IronCalc against LibreOffice and the reference on one filled workbook."""
    import openpyxl

    from scm_xl.engines import get_engine
    from scm_xl.engines.base import absolute_cells, formula_refs
    from scm_xl.verify import compare, same_value
    from scm_xl.workbook.registry import own_sheet_titles
    from scm_xl.workbook.registry import expected_cells
    from scm_xl.workbook.io import load, read_inputs
    from scm_xl.workbook.registry import read_layout
    from scm_xl.workbook.layout import META_SHEET

    book = load(workbook)
    layout = read_layout(book, workbook)
    _, expected = expected_cells(layout, read_inputs(book, layout, workbook))
    sheets = set(own_sheet_titles(layout)) - {META_SHEET}
    ironcalc = get_engine("ironcalc").recalculate(workbook)
    libreoffice = get_engine("libreoffice").recalculate(workbook)
    disagree = sorted(key for key in set(ironcalc.values) | set(libreoffice.values)
                      if key[0] in sheets and not same_value(libreoffice.values.get(key), ironcalc.values.get(key)))
    formulas = openpyxl.load_workbook(workbook)  # the formula text of each disagreeing cell
    anchors = {(sheet, cell): ref.split(":")[0] for sheet, refs in formula_refs(workbook).items()
               for ref in refs if ":" in ref for _, _, cell in absolute_cells(ref)}  # array cells: their formula
    by_column: dict[str, dict[str, object]] = {}
    for sheet, cell in disagree:
        column = f"'{sheet}'!{cell.rstrip('0123456789')}"
        entry = by_column.setdefault(column, {"cells": 0, "first": cell})
        entry["cells"] = int(entry["cells"]) + 1  # type: ignore[call-overload]
        if "formula" not in entry:
            anchor = anchors.get((sheet, cell), cell)
            text = formulas[sheet][anchor].value
            text = getattr(text, "text", text)
            entry["formula"] = text if anchor == cell else f"{anchor}: {text}"
            entry["libreoffice"] = repr(libreoffice.values.get((sheet, cell)))
            entry["ironcalc"] = repr(ironcalc.values.get((sheet, cell)))
    compared = sum(1 for key in ironcalc.values if key[0] in sheets)
    return {
        "cells": compared,
        "ironcalc_vs_libreoffice": len(disagree),
        "ironcalc_vs_reference": len(compare(expected, ironcalc, sheets).mismatches),
        "libreoffice_vs_reference": len(compare(expected, libreoffice, sheets).mismatches),
        "columns": by_column,
    }


# The smallest formulas of each shape the workbook uses, on A1:A3 = -1, 2, -3 and B1:B3 = x, y, x.
# "{...}" is an array (CSE) formula over rows 1-3; the others are filled down rows 1-3 ({r} = the row).
PROBES = [
    "{=ISNUMBER(A1:A3)}", "{=ISTEXT(B1:B3)*1}", "{=COUNTIF(B1:B3,B1:B3)}", "{=MATCH(B1:B3,B1:B3,0)}",
    "{=SMALL(A1:A3,{1;2;3})}", "{=ABS(A1:A3)}", "{=IF(A1:A3>0,A1:A3,0)}", "{=IFERROR(1/A1:A3,0)}",
    '{=(B1:B3&"")="x"}', "=ISNUMBER(A{r})", "=COUNTIF($B$1:$B$3,B{r})", "=MATCH(B{r},$B$1:$B$3,0)",
    "=SMALL($A$1:$A$3,{r})", '=IF(D{r}<>"",1,0)', '=IF(D{r}&""<>"",1,0)', "=ISBLANK(D{r})",
]


def probe(folder: Path) -> list[dict[str, object]]:
    """Child process: each probe formula on IronCalc and LibreOffice. Column D is empty but styled,
    as openpyxl writes an input cell nobody typed into (<c r="D1" s="1" t="n"/>)."""
    import openpyxl
    from openpyxl.styles import PatternFill
    from openpyxl.utils import get_column_letter
    from openpyxl.worksheet.formula import ArrayFormula

    from scm_xl.engines import get_engine
    from scm_xl.verify import same_value

    book = openpyxl.Workbook()
    sheet = book.active
    for row, (number, text) in enumerate([(-1, "x"), (2, "y"), (-3, "x")], start=1):
        sheet.cell(row, 1, number)
        sheet.cell(row, 2, text)
        sheet.cell(row, 4).fill = PatternFill("solid", fgColor="FFFF00")
    for i, formula in enumerate(PROBES):
        column = get_column_letter(6 + i)
        if formula.startswith("{"):
            sheet[f"{column}1"] = ArrayFormula(f"{column}1:{column}3", formula[1:-1])
        else:
            for row in (1, 2, 3):
                sheet[f"{column}{row}"] = formula.format(r=row)
    path = folder / "probe.xlsx"
    book.save(path)
    # The engine as fill runs it, and IronCalc on the file as openpyxl wrote it (no workaround)
    ironcalc = get_engine("ironcalc").recalculate(path).values
    libreoffice = get_engine("libreoffice").recalculate(path).values
    import ironcalc as raw_ironcalc

    model = raw_ironcalc.load_from_xlsx(str(path), "en", "UTC")
    model.evaluate()
    results = []
    for i, formula in enumerate(PROBES):
        column = get_column_letter(6 + i)
        cells = [("Sheet", f"{column}{row}") for row in (1, 2, 3)]
        lo = [libreoffice[c] for c in cells]
        ic = [ironcalc[c] for c in cells]
        bare = [model.get_cell_value(0, row, 6 + i) for row in (1, 2, 3)]
        results.append({"formula": formula, "libreoffice": repr(lo), "ironcalc": repr(ic), "ironcalc_bare": repr(bare),
                        "same": all(same_value(a, b) for a, b in zip(lo, ic))})  # LibreOffice keeps 15 digits
    return results


def _child(args: list[str], timeout: float) -> dict[str, object]:
    try:
        done = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"stopped after {timeout:g} s"}
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["exit " + str(done.returncode)])[-1]
        return {"error": last}
    return json.loads(done.stdout.strip().splitlines()[-1])


def _machine() -> str:
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    soffice = subprocess.run(["soffice", "--version"], capture_output=True, text=True).stdout.strip()
    return (f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {os.cpu_count()} cores, load average {load} "
            f"at start (the machine is shared with other agents: compare ratios, not seconds); "
            f"Python {platform.python_version()}, formulas {version('formulas')}, ironcalc {version('ironcalc')}, "
            f"{soffice or 'LibreOffice not found'}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="article,1000,10000")
    parser.add_argument("--engines", default="formulas,ironcalc,libreoffice")
    parser.add_argument("--repeat", type=int, default=1, help="fills per size and engine (median reported)")
    parser.add_argument("--timeout", type=float, default=900, help="seconds before one fill is stopped")
    parser.add_argument("--no-compare", action="store_true", help="skip the cell-by-cell comparison")
    parser.add_argument("--skip", default="", help="ENGINE:SIZE pairs not to run, e.g. formulas:10000")
    parser.add_argument("--out", default=str(HERE / "results" / "engines.md"))
    parser.add_argument("--child-fill", nargs=3, help=argparse.SUPPRESS)
    parser.add_argument("--child-compare", help=argparse.SUPPRESS)
    parser.add_argument("--child-probe", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child_fill:
        csv_path, out, engine = args.child_fill
        print(json.dumps(one_fill(Path(csv_path), Path(out), engine)))
        return
    if args.child_compare:
        print(json.dumps(cell_by_cell(Path(args.child_compare))))
        return
    if args.child_probe:
        print(json.dumps({"probes": probe(Path(args.child_probe))}))
        return

    machine = _machine()
    sizes, engines = args.sizes.split(","), args.engines.split(",")
    timing: dict[tuple[str, str], dict[str, object]] = {}
    comparison: dict[str, dict[str, object]] = {}
    rows_of: dict[str, int] = {}
    with tempfile.TemporaryDirectory(prefix="bench-engines-") as tmp:
        for size in sizes:
            csv_path = make_csv(size, Path(tmp))
            rows_of[size] = sum(1 for _ in csv_path.open(encoding="utf-8-sig")) - 1
            workbook = Path(tmp) / f"{size}.xlsx"
            for engine in engines:
                if f"{engine}:{size}" in args.skip.split(","):
                    timing[(size, engine)] = {"error": "not run (--skip)"}
                    continue
                runs = [_child(["--child-fill", str(csv_path), str(workbook), engine], args.timeout)
                        for _ in range(args.repeat)]
                good = [run for run in runs if "error" not in run]
                result: dict[str, object] = dict(good[0]) if good else dict(runs[0])
                if good:
                    result["seconds"] = statistics.median(
                        float(run["seconds"]) for run in good)  # type: ignore[arg-type]
                    result["peak_mb"] = max(float(run["peak_mb"]) for run in good)  # type: ignore[arg-type]
                    result["runs"] = len(good)
                timing[(size, engine)] = result
                print(size, engine, result, flush=True)
            if not args.no_compare and workbook.exists():
                comparison[size] = _child(["--child-compare", str(workbook)], args.timeout)
                print(size, "compare", {k: v for k, v in comparison[size].items() if k != "columns"}, flush=True)

        probes = {} if args.no_compare else _child(["--child-probe", tmp], args.timeout)

    lines = [
        "# Recalculation engines side by side",
        "",
        f"Measured {machine}.",
        "",
        "`fill` end to end (build, write, recalculate, verify against the Python reference), one fresh process",
        f"per run, median of {args.repeat}. Peak MB is the larger of the Python process and its children (soffice).",
        "Command: `python benchmarks/bench_engines.py " + " ".join(sys.argv[1:]) + "`",
        "",
        "| size | rows | engine | end to end | of which recalculate | peak MB | formula cells | verified |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for size in sizes:
        for engine in engines:
            r = timing[(size, engine)]
            if "error" in r:
                lines.append(f"| {size} | {rows_of[size]:,} | {engine} | {r['error']} | | | | |")
                continue
            verified = "yes" if r["ok"] else f"no: {r['mismatches']} cells differ"
            seconds = float(r["seconds"])  # type: ignore[arg-type]
            lines.append(f"| {size} | {rows_of[size]:,} | {engine} | {seconds:.2f} s "
                         f"| {float(r['recalc_seconds']):.2f} s | {float(r['peak_mb']):.0f} "  # type: ignore[arg-type]
                         f"| {r['cells']:,} | {verified} |")
    if comparison:
        lines += ["", "## IronCalc cell by cell", "",
                  "Every formula cell of scm-xl's sheets, recalculated by IronCalc and by LibreOffice.", "",
                  "| size | formula cells | IronCalc ≠ LibreOffice | IronCalc ≠ reference "
                  "| LibreOffice ≠ reference |",
                  "|---|---|---|---|---|"]
        for size, c in comparison.items():
            if "error" in c:
                lines.append(f"| {size} | {c['error']} | | | |")
                continue
            lines.append(f"| {size} | {c['cells']:,} | {c['ironcalc_vs_libreoffice']:,} | "
                         f"{c['ironcalc_vs_reference']:,} | {c['libreoffice_vs_reference']:,} |")
        for size, c in comparison.items():
            columns = c.get("columns") or {}
            if not columns:
                continue
            lines += ["", f"Columns where IronCalc and LibreOffice disagree ({size}):", "",
                      "| column | cells | first cell | its formula | LibreOffice | IronCalc |",
                      "|---|---|---|---|---|---|"]
            for column, e in sorted(columns.items()):  # type: ignore[union-attr]
                formula = str(e["formula"]).replace("|", "\\|")
                lines.append(f"| {column} | {e['cells']} | {e['first']} | `{formula}` | {e['libreoffice']} "
                             f"| {e['ironcalc']} |")
    if probes.get("probes"):
        lines += ["", "## The smallest formulas, IronCalc against LibreOffice", "",
                  "Rows 1-3 of a fresh sheet: A = -1, 2, -3; B = x, y, x; D empty but styled (as openpyxl writes an "
                  "input cell nobody typed into). `{...}` is an array formula over rows 1-3. \"IronCalc as read\" is "
                  "IronCalc on the file as openpyxl wrote it, without the engine's styled-empty-cell workaround.", "",
                  "| formula | same | LibreOffice | IronCalc (engine) | IronCalc as read |", "|---|---|---|---|---|"]
        for p in probes["probes"]:  # type: ignore[union-attr]
            lines.append(f"| `{p['formula']}` | {'yes' if p['same'] else '**no**'} | {p['libreoffice']} "
                         f"| {p['ironcalc']} | {p['ironcalc_bare']} |")
    elif probes:
        lines += ["", f"Probe failed: {probes.get('error')}"]
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    kept = ""
    if out.exists():  # a section written by hand survives a new run
        text = out.read_text(encoding="utf-8")
        if NOTES in text:
            kept = "\n" + NOTES + text.split(NOTES, 1)[1].rstrip("\n") + "\n"
    out.write_text("\n".join(lines) + "\n" + kept, encoding="utf-8")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
