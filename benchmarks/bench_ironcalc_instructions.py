"""What IronCalc's load and evaluate of a filled workbook cost in instructions, commit against commit:
a count, not a time, so it repeats on this shared machine, whose timings of the same command differ
2x from hour to hour (valgrind's callgrind counts the instructions of `load_from_xlsx` and
`evaluate` of the copy the engine is given, Python's start included; the same for every commit).

Each commit fills the same CSV in a `git worktree` of its own (this checkout's virtual environment,
PYTHONPATH putting its scm_xl first), then the copy IronCalc is given by *that* commit is counted
(an older commit gave IronCalc other rewrites). Writes benchmarks/results/ironcalc_instructions.md.

    python benchmarks/bench_ironcalc_instructions.py --commits 2816aee,HEAD --rows 1000
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from bench_workbook import make_csv, worktrees  # noqa: E402  (the benchmarks' data and worktrees)

# Fill, then hand the filled workbook to that commit's own copy for IronCalc (run in the temporary
# folder: `python -c` puts the working folder first on the path, which would import this checkout).
_FILL = """
import sys, shutil, tempfile
from pathlib import Path
from scm_xl.workbook.fill import fill
from scm_xl.engines.ironcalc_worker import for_ironcalc
report = fill(sys.argv[1], output=sys.argv[2], force=True, lang="en")
assert report.verification.ok, "the workbook did not verify"
shutil.copy(for_ironcalc(Path(sys.argv[2]), Path(tempfile.mkdtemp())), sys.argv[3])
"""
# Load and evaluate, nothing else.
_EVALUATE = """
import sys, ironcalc
ironcalc.load_from_xlsx(sys.argv[1], "en", "UTC").evaluate()
"""
_COLLECTED = re.compile(r"Collected : (\d+)")


def count(script: str, *args: str) -> int:
    done = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, "-c",
                           script, *args], capture_output=True, text=True, check=True)
    found = _COLLECTED.search(done.stderr)
    if found is None:
        raise SystemExit(f"callgrind printed no count:\n{done.stderr[-2000:]}")
    return int(found.group(1))


def formula_counts(path: Path) -> tuple[int, int]:
    """(formulas IronCalc parses: plain ones and shared ones' first cells, shared followers)."""
    import zipfile

    parsed = followers = 0
    with zipfile.ZipFile(path) as book:
        for name in book.namelist():
            if name.startswith("xl/worksheets/sheet"):
                xml = book.read(name)
                follow = len(re.findall(rb'<f t="shared" si="[0-9]+"\s*/>', xml))
                followers += follow
                parsed += xml.count(b"<f") - follow
    return parsed, followers


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--commits", default="2816aee,HEAD")
    parser.add_argument("--rows", type=int, default=1000)
    args = parser.parse_args()
    commits = args.commits.split(",")
    results = []
    with tempfile.TemporaryDirectory(prefix="scm-instructions-") as tmp:
        folder = Path(tmp)
        csv = folder / "rows.csv"
        make_csv(csv, args.rows)
        for commit in commits:
            name = subprocess.run(["git", "rev-parse", "--short", commit], cwd=ROOT, check=True, capture_output=True,
                                  text=True).stdout.strip()
            with worktrees(folder, {name: commit}) as trees:
                tree = trees[name]
                filled, copy = folder / f"{name}.xlsx", folder / f"{name}-ironcalc.xlsx"
                subprocess.run([sys.executable, "-c", _FILL, str(csv), str(filled), str(copy)], check=True,
                               env={"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin"}, cwd=folder, capture_output=True)
                instructions = count(_EVALUATE, str(copy))
                start = count("import ironcalc")
                results.append((commit, name, instructions - start, *formula_counts(copy)))
                print(results[-1], flush=True)
    first = results[0][2]
    lines = [f"# IronCalc's load and evaluate at {args.rows:,} rows, in instructions", "",
             f"`python benchmarks/bench_ironcalc_instructions.py --commits {args.commits} --rows {args.rows}` "
             "(valgrind's callgrind; Python's start and `import ironcalc` subtracted)", "",
             "| commit | instructions (G) | against the first | formulas parsed | shared followers |",
             "|---|---:|---:|---:|---:|"]
    lines += [f"| {commit} ({name}) | {n / 1e9:.2f} | {n / first:.0%} | {parsed:,} | {followers:,} |"
              for commit, name, n, parsed, followers in results]
    (HERE / "results" / "ironcalc_instructions.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
