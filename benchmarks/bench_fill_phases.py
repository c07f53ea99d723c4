"""Where `fill` spends its time and memory at N rows: each phase's wall seconds and the process's
resident and peak memory (VmRSS, VmHWM) before and after it, and IronCalc's own steps (the copy
it is given, load, evaluate, read-back) timed apart on the filled file. One process, this
checkout. Writes benchmarks/results/fill_phases.md.

    python benchmarks/bench_fill_phases.py --rows 10000
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))

from bench_workbook import head_commit, make_csv  # noqa: E402  (the benchmark's one data generator)


def memory_mb() -> tuple[float, float]:
    status = Path("/proc/self/status").read_text()
    rss = re.search(r"VmRSS:\s+(\d+)", status)
    hwm = re.search(r"VmHWM:\s+(\d+)", status)
    return (int(rss.group(1)) / 1024 if rss else 0.0, int(hwm.group(1)) / 1024 if hwm else 0.0)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=10000)
    args = parser.parse_args()

    import ironcalc

    from scm_xl.engines import ironcalc_worker
    from scm_xl.engines.base import cell_position
    from scm_xl.workbook import fill as fill_module

    phases: list[tuple[str, float, float, float, float]] = []  # name, seconds, rss before, rss after, peak after

    def timed(module: Any, name: str) -> None:
        original: Callable[..., Any] = getattr(module, name)

        def wrapper(*a: Any, **k: Any) -> Any:
            before, _ = memory_mb()
            start = time.perf_counter()
            result = original(*a, **k)
            after, peak = memory_mb()
            phases.append((name, time.perf_counter() - start, before, after, peak))
            return result

        setattr(module, name, wrapper)

    from scm_xl.workbook.stamp import BuiltWorkbook

    for name in ("read_inputs", "analyze", "_check", "expected_cells", "compare", "_store_values"):
        timed(fill_module, name)
    for name in ("save", "formula_cells"):  # the built workbook's own steps, on its class
        timed(BuiltWorkbook, name)
    # _check starts the engine (at this size IronCalc's worker process), computes the reference
    # (expected_cells) while it works, waits for its values and compares them
    commit = head_commit()
    with tempfile.TemporaryDirectory(prefix="scm-phases-") as tmp:
        folder = Path(tmp)
        csv, out = folder / "rows.csv", folder / "out.xlsx"
        make_csv(csv, args.rows)
        start = time.perf_counter()
        report = fill_module.fill(csv, output=out, force=True)
        total = time.perf_counter() - start
        assert report.verification.ok
        _, peak = memory_mb()
        # IronCalc's steps on the filled file, apart
        steps: list[tuple[str, float]] = []
        at = time.perf_counter()
        refs = ironcalc_worker.formula_cells(out)
        steps.append(("formula cells listed (verify; fill knows them)", time.perf_counter() - at))
        with tempfile.TemporaryDirectory() as copy_folder:
            at = time.perf_counter()
            copy = ironcalc_worker.for_ironcalc(out, Path(copy_folder))
            steps.append(("copy made for IronCalc (verify; fill writes its input so)", time.perf_counter() - at))
            at = time.perf_counter()
            model = ironcalc.load_from_xlsx(str(copy), "en", "UTC")
            steps.append(("load_from_xlsx", time.perf_counter() - at))
        at = time.perf_counter()
        model.evaluate()
        steps.append(("evaluate", time.perf_counter() - at))
        index = {props["name"]: i for i, props in enumerate(model.get_worksheets_properties())}
        reader = ironcalc_worker._Reader(ironcalc, model)
        at = time.perf_counter()
        cells = 0
        for sheet, sheet_refs in refs.items():
            for ref in sheet_refs:
                if ":" not in ref:
                    reader.one(index[sheet], *cell_position(ref))
                    cells += 1
                    continue
                (top, left), (bottom, right) = (cell_position(end) for end in ref.split(":"))
                for col in range(left, right + 1):  # a run of formulas down a column, as the worker reads it
                    cells += len(reader.column(index[sheet], col, top, bottom))
        steps.append((f"read back {cells:,} formula cells", time.perf_counter() - at))

    lines = [f"# `fill` at {args.rows:,} rows, phase by phase ({commit})", "",
             f"`python benchmarks/bench_fill_phases.py --rows {args.rows}`: one process, the library's `fill` "
             f"(no CLI); {total:.1f} s in all, peak resident memory {peak:.0f} MB (this process; IronCalc's "
             "worker process has its own). `_check` holds `expected_cells` (computed while the engine works), "
             "the wait for the engine's values and `compare`.", "",
             "| phase | s | RSS before MB | RSS after MB | peak so far MB |", "|---|---:|---:|---:|---:|"]
    lines += [f"| {name} | {seconds:.1f} | {before:.0f} | {after:.0f} | {high:.0f} |"
              for name, seconds, before, after, high in phases]
    lines += ["", "IronCalc's steps, timed apart on the filled file:", "", "| step | s |", "|---|---:|"]
    lines += [f"| {name} | {seconds:.1f} |" for name, seconds in steps]
    text = "\n".join(lines) + "\n"
    (HERE / "results" / "fill_phases.md").write_text(text, encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
