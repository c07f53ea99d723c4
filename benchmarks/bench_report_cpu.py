"""Benchmark (not a test): the CPU time of `scm-xl report` on the article's seven rows.

Each run is the command in a fresh process, as a person types it:
`scm-xl report examples/article_qwen2.5-7b.csv -o OUT --force`; its CPU time is the child's user +
system seconds (getrusage), the median of --repeats runs after one warm-up run. Target: under
1 CPU-second, the page still one offline file.

Bytecode: an installed package runs from cached bytecode, so the main figure's runs get a private
PYTHONPYCACHEPREFIX (filled by the warm-up, the work tree left clean) even where the environment
sets PYTHONDONTWRITEBYTECODE; the second figure compiles every module on each run, as a
checkout with PYTHONDONTWRITEBYTECODE=1 does.

Where the time went (python -X importtime and cProfile, when the charts changed): before, about
1.2 s drawing four charts through vl-convert's JavaScript engine (mostly starting it) and 0.4 s
importing Altair; the charts are now SVG text from scm_xl/htmlreport/svgchart.py. What is left
is mostly importing the CLI, whose package imports every command's modules (numpy, openpyxl, the
formula engines) before `report` runs.

`--before REV` measures the code of a git revision too (its tree from `git archive`, run on this
virtualenv's packages), for the before/after table.

    python benchmarks/bench_report_cpu.py [--repeats 3] [--before REV]

Writes benchmarks/results/report_cpu.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import statistics
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ARTICLE = ROOT / "examples" / "article_qwen2.5-7b.csv"
RESULTS = ROOT / "benchmarks" / "results" / "report_cpu.md"
TARGET_S = 1.0


def cpu_of(command: list[str], env: dict[str, str], cwd: Path) -> float:
    """User + system CPU seconds of one run of `command` (the child and anything it waited for)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(command, env=env, cwd=cwd, check=True, stdout=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def measure(tree: Path, folder: Path, repeats: int, cache: bool) -> list[float]:
    """CPU seconds of `repeats` runs of the report command on the code in `tree`."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")}
    if cache:
        env["PYTHONPYCACHEPREFIX"] = str(folder / "pycache")
    else:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    out = folder / "report.html"
    # `tree` first on the path: the code measured is that tree's, whatever is installed.
    command = [sys.executable, "-c", f"import sys; sys.path.insert(0, {str(tree)!r}); "
               "sys.argv[0] = 'scm-xl'; from scm_xl.cli import main; main()",
               "report", str(ARTICLE), "-o", str(out), "--force"]
    cpu_of(command, env, tree)  # warm-up: fills the bytecode cache and the OS's file cache
    runs = [cpu_of(command, env, tree) for _ in range(repeats)]
    html = out.read_text(encoding="utf-8")
    assert html.startswith("<!DOCTYPE html>") and "https://" not in html, "not the offline page"
    return runs


def tree_of(revision: str, folder: Path) -> Path:
    """The files of git `revision`, extracted under `folder`."""
    target = folder / f"tree-{revision.replace('/', '_')}"
    target.mkdir()
    archive = folder / "tree.tar"
    subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", "-o", str(archive), revision], check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(target, filter="data")
    return target


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--before", help="also measure this git revision (e.g. the commit before a change)")
    args = parser.parse_args()
    rows: list[tuple[str, dict[bool, list[float]]]] = []
    with tempfile.TemporaryDirectory(prefix="scm-bench-cpu-") as tmp:
        folder = Path(tmp)
        trees = []
        if args.before:
            commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", args.before], check=True,
                                    capture_output=True, text=True).stdout.strip()
            trees.append((f"before (commit {commit})", tree_of(args.before, folder)))
        trees.append(("this tree", ROOT))
        for i, (name, tree) in enumerate(trees):
            runs = {}
            for cache in (True, False):
                work = folder / f"run-{i}-{int(cache)}"
                work.mkdir()
                runs[cache] = measure(tree, work, args.repeats, cache)
            rows.append((name, runs))

    def cell(runs: list[float]) -> str:
        return f"{statistics.median(runs):.2f} ({', '.join(f'{r:.2f}' for r in runs)})"

    lines = [
        "# `scm-xl report` CPU time (`python benchmarks/bench_report_cpu.py`)",
        "",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; shared with "
        f"other jobs (load average {os.getloadavg()[0]:.1f} at the end of the run).",
        "",
        f"The command on the article's 7 rows (`{ARTICLE.relative_to(ROOT)}`), a fresh process each run: "
        f"user + system CPU seconds, median of {args.repeats} after a warm-up (the runs in brackets). "
        f"Target: under {TARGET_S:.0f} s with cached bytecode, as an installed package runs.",
        "",
        "| code | cached bytecode | no bytecode cache |",
        "|---|---|---|",
    ]
    for name, runs in rows:
        lines.append(f"| {name} | {cell(runs[True])} | {cell(runs[False])} |")
        print(f"{name}: median {statistics.median(runs[True]):.2f} CPU s (user+sys, cached bytecode), "
              f"{statistics.median(runs[False]):.2f} without a bytecode cache")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"wrote {RESULTS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
