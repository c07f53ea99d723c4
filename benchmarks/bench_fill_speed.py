"""`scm-xl fill` as a command, end to end, against an older commit and against the LibreOffice engine,
in one run, alternating (the house issue's speed figures: two machines of the same kind differ 2x
here, so only ratios measured side by side mean anything).

Each measurement is a fresh `python -m scm_xl fill ROWS.csv -o out.xlsx` process (imports, analysis,
printing included) under /usr/bin/time: wall seconds, CPU seconds of the process and its children
(soffice), peak resident memory. The older commit runs from a `git worktree` of it, with this
checkout's virtual environment (PYTHONPATH puts its scm_xl first), and so does this checkout's
HEAD (a worktree too: uncommitted edits are not measured). Both trees are byte-compiled first, as
an installed package is; `--as-checked-out` runs them as checked out (each command then compiles
what it imports, where PYTHONDONTWRITEBYTECODE is set). Writes benchmarks/results/fill_speed.md
(`--out NAME`: NAME.md).

    python benchmarks/bench_fill_speed.py --base 1030633 --rows 10000 --rounds 2
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_workbook import head_commit, make_csv, worktrees  # noqa: E402  (the benchmark's one data generator)


def tree_rss_kb(root: int) -> int:
    """The resident memory of `root` and every process under it, summed (kB)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                parent = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(parent, []).append(int(entry))
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        todo += children.get(pid, [])
        try:
            with open(f"/proc/{pid}/status") as f:
                total += next((int(line.split()[1]) for line in f if line.startswith("VmRSS:")), 0)
        except OSError:
            pass
    return total


def measure(label: str, source: Path, csv: Path, engine: str | None, folder: Path) -> dict[str, object]:
    out = folder / f"{label}.xlsx"
    out.unlink(missing_ok=True)
    return measure_command(label, source, ["fill", str(csv), "-o", str(out)] + (["--engine", engine] if engine else []),
                           folder)


def measure_command(label: str, source: Path, arguments: list[str], folder: Path) -> dict[str, object]:
    """`python -m scm_xl ARGUMENTS` with `source`'s scm_xl, in `folder`: wall and CPU seconds, peak
    memory of the largest process and of all of them at once, and whether it printed "verified:"."""
    command = ["/usr/bin/time", "-f", "%e %U %S %M", sys.executable, "-m", "scm_xl", *arguments]
    env = {**os.environ, "PYTHONPATH": str(source)}
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                               cwd=folder)
    summed = 0
    sampler_done = threading.Event()

    def sample() -> None:  # every process of the command at once (fill may run its engine in another)
        nonlocal summed
        while not sampler_done.wait(0.05):
            summed = max(summed, tree_rss_kb(process.pid))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    stdout, stderr = process.communicate(timeout=3600)
    sampler_done.set()
    sampler.join()
    wall, user, system, peak_kb = stderr.strip().splitlines()[-1].split()
    return {"label": label, "exit": process.returncode, "wall": float(wall), "cpu": float(user) + float(system),
            "peak_mb": int(peak_kb) / 1024,  # the largest of the process and its children, each alone
            "summed_mb": summed / 1024,  # all of them at once, sampled every 50 ms
            "verified": "verified:" in stdout}


# The columns every command measurement is tabled with (`measured_cells` fills them).
MEASURED_HEADER = "wall s | CPU s | peak MB, largest process | peak MB, all at once | exit | verified"
MEASURED_ALIGN = "---:|---:|---:|---:|---:|---"


def write_table(name: str, lines: list[str]) -> None:
    """A benchmark's results, as benchmarks/results/NAME.md and on the standard output."""
    out = HERE / "results" / f"{name}.md"
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))
    print(f"wrote {out}")


def measured_cells(r: dict[str, object]) -> str:
    """One measurement's cells of a results table, in MEASURED_HEADER's order."""
    return (f"{r['wall']:.1f} | {r['cpu']:.1f} | {r['peak_mb']:.0f} | {r['summed_mb']:.0f} | {r['exit']} | "
            f"{'yes' if r['verified'] else 'no'}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--base", default="1030633", help="the older commit to compare with")
    parser.add_argument("--rows", type=int, default=10000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--as-checked-out", action="store_true",
                        help="run the trees without byte-compiling them first (each command then compiles "
                             "every module it imports where PYTHONDONTWRITEBYTECODE is set)")
    parser.add_argument("--out", default="fill_speed", help="the results file's name under benchmarks/results/")
    args = parser.parse_args()
    head = head_commit()
    with tempfile.TemporaryDirectory(prefix="scm-bench-") as tmp, \
            worktrees(Path(tmp), {"base": args.base, "head": "HEAD"}, compile_first=not args.as_checked_out) as trees:
        folder = Path(tmp)
        base, current = trees["base"], trees["head"]
        csv = folder / "rows.csv"
        make_csv(csv, args.rows)
        runs: list[dict[str, object]] = []
        for round_no in range(args.rounds):
            for label, source, engine in (("head", current, None), ("base", base, None),
                                          ("head-libreoffice", current, "libreoffice")):
                result = measure(label, source, csv, engine, folder)
                runs.append(result)
                print(round_no, result, flush=True)
    with open("/proc/loadavg") as f:
        load = " ".join(f.read().split()[:3])

    def median(label: str, key: str) -> float:
        return statistics.median(float(r[key]) for r in runs if r["label"] == label)  # type: ignore[arg-type]

    lines = [f"# `scm-xl fill` at {args.rows:,} rows: {head} against {args.base} and against LibreOffice", "",
             f"`python benchmarks/bench_fill_speed.py --base {args.base} --rows {args.rows} --rounds {args.rounds}"
             + (" --as-checked-out" if args.as_checked_out else "") + (f" --out {args.out}" if args.out != "fill_speed"
                                                                          else "") + "`"
             f" (load average {load} at the end, on a 2-core machine)", "",
             ("Both trees as checked out: each command compiles every module it imports (PYTHONDONTWRITEBYTECODE "
              "is set here)." if args.as_checked_out else
              "Both trees byte-compiled first, as an installed package is (`bench_workbook.worktrees`)."), "",
             "Peak memory two ways: the largest process (GNU time's maximum resident set, what earlier runs "
             "reported) and every process of the command at once (sampled every 50 ms): `fill` evaluates a "
             "large workbook in an IronCalc worker process, LibreOffice runs soffice.", "",
             f"| run | commit | engine | {MEASURED_HEADER} |", f"|---|---|---|{MEASURED_ALIGN}|"]
    for i, r in enumerate(runs):
        commit = args.base if r["label"] == "base" else head
        engine = "libreoffice" if r["label"] == "head-libreoffice" else "default (auto)"
        lines.append(f"| {i // 3 + 1} | {commit} | {engine} | {measured_cells(r)} |")
    lines += ["", "Medians: "
              f"{head} default {median('head', 'wall'):.1f} s wall / {median('head', 'cpu'):.1f} CPU-s / "
              f"{median('head', 'peak_mb'):.0f} MB; {args.base} default {median('base', 'wall'):.1f} s / "
              f"{median('base', 'cpu'):.1f} CPU-s / {median('base', 'peak_mb'):.0f} MB; {head} LibreOffice "
              f"{median('head-libreoffice', 'wall'):.1f} s / {median('head-libreoffice', 'cpu'):.1f} CPU-s.", "",
              f"Ratios (wall): {args.base} / {head} = {median('base', 'wall') / median('head', 'wall'):.2f}x "
              "(target 3x); LibreOffice / default = "
              f"{median('head-libreoffice', 'wall') / median('head', 'wall'):.2f}x (target 4x); peak memory "
              f"{head} / {args.base} = {median('head', 'peak_mb') / median('base', 'peak_mb'):.0%} by the largest "
              f"process, {median('head', 'summed_mb') / median('base', 'summed_mb'):.0%} by all processes at once "
              "(target at most 60%)."]
    write_table(args.out, lines)


if __name__ == "__main__":
    main()
