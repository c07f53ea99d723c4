"""The quick suite at an earlier commit and at this checkout, run one after the other, in rounds.

The 2-core machines here swing by 10% or more from one run of the suite to the next (the same
tree gave 241 s and 256 s within the hour), so a change to the suite's time is measured against
its base in the same hour: each round runs the base commit's tree (a `git worktree`) and then
this checkout, each as the README runs the suite (pyproject's addopts) with the project's venv,
from its own folder (`python -m pytest`: the tree's own scm_xl and tests; PYTHONPATH names the tree,
so the processes the suite starts run its scm_xl too, not the venv's editable install, which is
this checkout's: before, the base's commands ran this checkout's code). Wall seconds as pytest
says them and the CPU seconds of the whole run (its processes and everything they waited for).
Writes benchmarks/results/suite_ab.md.

    python benchmarks/bench_suite_ab.py --base 601ad17 --rounds 2
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from bench_workbook import head_commit, worktrees  # noqa: E402


def run_suite(tree: Path) -> dict[str, object]:
    """The suite in `tree`: pytest's last line, its wall seconds and the CPU seconds of the run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    # PYTHONPATH: every process the suite starts (`scm-xl` as a command, the engines' helpers) imports
    # the tree's own scm_xl, not the one the venv's editable install points at (this checkout's)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(tree), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"], cwd=tree,
                          capture_output=True, text=True, env=env)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    said = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else "(no output)"
    seconds = re.search(r" in ([\d.]+)s", said)
    failed = [line.split()[1] for line in done.stdout.splitlines() if line.startswith("FAILED ")]
    return {"said": said + (f" ({', '.join(failed)})" if failed else ""), "exit": done.returncode,
            "pytest_s": float(seconds.group(1)) if seconds else wall,
            "cpu_s": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", required=True, help="the commit to compare with")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--out", type=Path, default=HERE / "results" / "suite_ab.md")
    args = parser.parse_args()
    head = head_commit()
    runs: dict[str, list[dict[str, object]]] = {"base": [], "head": []}
    with tempfile.TemporaryDirectory(prefix="scm-xl-suite-ab-") as folder, \
            worktrees(Path(folder), {"base": args.base}, compile_first=False) as trees:
        for round_number in range(1, args.rounds + 1):
            for name, tree in (("base", trees["base"]), ("head", ROOT)):
                result = run_suite(tree)
                runs[name].append(result)
                print(f"round {round_number} {name}: {result['said']} (exit {result['exit']}), "
                      f"CPU {result['cpu_s']:.0f} s", flush=True)

    def median(name: str, key: str) -> float:
        return statistics.median(float(r[key]) for r in runs[name])  # type: ignore[arg-type]

    lines = [f"# The quick suite: {head} against {args.base}, alternating", "",
             f"`python benchmarks/bench_suite_ab.py --base {args.base} --rounds {args.rounds}`: each round runs "
             f"the suite at {args.base} (a git worktree) and then at {head} (this checkout), each as the README "
             "runs it (`python -m pytest` from the tree's folder, pyproject's addopts).", "",
             "| round | tree | pytest said | exit | wall s (pytest) | CPU s (the run and all it waited for) |",
             "|---:|---|---|---:|---:|---:|"]
    for name in ("base", "head"):
        for number, r in enumerate(runs[name], start=1):
            lines.append(f"| {number} | {name} ({args.base if name == 'base' else head}) | {r['said']} | {r['exit']} "
                         f"| {float(r['pytest_s']):.1f} | {float(r['cpu_s']):.0f} |")  # type: ignore[arg-type]
    lines += ["", f"Medians: base {median('base', 'pytest_s'):.1f} s and {median('base', 'cpu_s'):.0f} CPU-s; "
                  f"head {median('head', 'pytest_s'):.1f} s and {median('head', 'cpu_s'):.0f} CPU-s "
                  f"({median('head', 'pytest_s') / median('base', 'pytest_s'):.2f} of the base's wall time).", ""]
    args.out.write_text("\n".join(lines), encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
