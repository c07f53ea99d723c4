"""Where the quick suite's CPU goes: each test's CPU seconds in its own worker process, in the
processes it waited for (LibreOffice, the IronCalc worker, a command run as a process) and in its
worker's running LibreOffice (conftest's libreoffice_server, which converts and edits for it and
which no test waits for), and how many times LibreOffice was started, file by file.

On the 2-core machine the suite is CPU-bound (its CPU seconds are about twice its wall seconds), so
its wall time comes down only with its CPU: tests waiting on the simulator's clock already overlap
the others. The suite runs as `.venv/bin/pytest` runs it (pyproject's addopts), with a plugin that
records every test's CPU and a `soffice` on PATH that counts its starts before it runs the real one.
Writes benchmarks/results/suite_cpu.md; `--keep DIR` keeps every test's record (its CPU, its
wall time, when it ended and on which worker) in DIR/tests.jsonl, for a timeline of the workers.

    python benchmarks/bench_suite_cpu.py
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from bench_workbook import head_commit  # noqa: E402

sys.path.insert(0, str(ROOT / "tests"))
from conftest import WAITING_MODULES  # noqa: E402  (the suite's own list; importing it sets the suite's environment)

PLUGIN = '''
import json, os, resource, time
import pytest

TICKS = os.sysconf("SC_CLK_TCK")

def _cpu():
    me, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime, children.ru_utime + children.ru_stime

def _running_libreoffice():
    """CPU seconds of the worker's running LibreOffice (conftest's libreoffice_server, its pid in
    soffice_forward.PID_VARIABLE, and soffice.bin under it): no test waits for it, so no rusage has it."""
    from support.soffice_forward import PID_VARIABLE  # the tests' folder is on the workers' path

    pid = os.environ.get(PID_VARIABLE)
    if not pid:
        return 0.0
    total = 0.0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                text = stat.read()
        except OSError:
            continue
        fields = text[text.rindex(")") + 2:].split()
        if entry == pid or fields[1] == pid:
            total += (int(fields[11]) + int(fields[12])) / TICKS
    return total

@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    before, start, office = _cpu(), time.perf_counter(), _running_libreoffice()
    yield
    after, office_after = _cpu(), _running_libreoffice()
    children = after[1] - before[1]
    if office_after < office:  # its worker's last test: the session's teardown ended the LibreOffice, and
        # reaped it here; what it had worked for the tests before is theirs, not this one's
        children, office_after = max(0.0, children - office), office
    with open(os.path.join(os.environ["SCM_XL_SUITE_CPU"], f"tests-{os.getpid()}.jsonl"), "a") as out:
        out.write(json.dumps({"id": item.nodeid, "own": after[0] - before[0], "children": children,
                              "office": office_after - office,
                              "wall": time.perf_counter() - start, "ended": time.time(),
                              "worker": os.environ.get("PYTEST_XDIST_WORKER", "")}) + "\\n")
'''

SHIM = """#!/bin/sh
echo "$PYTEST_CURRENT_TEST" >> "{log}"
exec "{soffice}" "$@"
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE / "results" / "suite_cpu.md")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--keep", type=Path, help="copy each test's record (JSON lines) into this folder")
    args = parser.parse_args()
    soffice = shutil.which("soffice")
    with tempfile.TemporaryDirectory(prefix="scm-suite-cpu-") as tmp:
        folder = Path(tmp)
        (folder / "scm_suite_cpu.py").write_text(PLUGIN, encoding="utf-8")
        starts = folder / "soffice.log"
        if soffice:
            shim = folder / "soffice"
            shim.write_text(SHIM.format(log=starts, soffice=soffice), encoding="utf-8")
            shim.chmod(0o755)
        env = {**os.environ, "SCM_XL_SUITE_CPU": str(folder), "PATH": f"{folder}{os.pathsep}{os.environ['PATH']}",
               "PYTHONPATH": os.pathsep.join(filter(None, [str(folder), os.environ.get("PYTHONPATH")]))}
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        run = subprocess.run([str(ROOT / ".venv" / "bin" / "pytest"), "-q", "-p", "scm_suite_cpu",
                              "-p", "no:cacheprovider"], cwd=ROOT, env=env, capture_output=True, text=True)
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        system = after.ru_stime - before.ru_stime
        tests = [json.loads(line) for path in folder.glob("tests-*.jsonl") for line in path.read_text().splitlines()]
        if args.keep:
            args.keep.mkdir(parents=True, exist_ok=True)
            (args.keep / "tests.jsonl").write_text("".join(json.dumps(t) + "\n" for t in tests), encoding="utf-8")
        launches: dict[str, int] = defaultdict(int)
        if starts.exists():
            for line in starts.read_text().splitlines():
                launches[line.split("::")[0] or "(outside a test)"] += 1
    summary = run.stdout.strip().splitlines()[-1] if run.stdout.strip() else "(no output)"
    by_file: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0.0, 0.0, 0.0])
    for test in tests:
        entry = by_file[test["id"].split("::")[0]]
        entry[0] += 1
        entry[1] += test["own"]
        entry[2] += test["children"]
        entry[3] += test["wall"]
        entry[4] += test["office"]
    waiting = [0, 0.0, 0.0, 0.0, 0.0]
    for name, entry in by_file.items():
        if Path(name).stem in WAITING_MODULES:
            waiting = [a + b for a, b in zip(waiting, entry)]
    own = sum(t["own"] for t in tests)
    children = sum(t["children"] for t in tests)
    office = sum(t["office"] for t in tests)
    lines = [
        f"# The quick suite's CPU, test file by test file ({head_commit()})", "",
        "`python benchmarks/bench_suite_cpu.py`: `.venv/bin/pytest` as pyproject's addopts run it, with a "
        "plugin that records each test's CPU seconds (its worker process; the processes it waited for; its worker's "
        "running LibreOffice, read from /proc) and a `soffice` on PATH that counts LibreOffice's starts.", "",
        f"- pytest said: {summary} (exit {run.returncode})",
        f"- wall {wall:.0f} s; CPU {cpu:.0f} s, of which system {system:.0f} s: {cpu / wall:.2f} cores busy on average",
        f"- inside the tests: {own:.0f} CPU-s in the workers, {children:.0f} CPU-s in the processes they waited for, "
        f"{office:.0f} CPU-s in the running LibreOffices (conftest's libreoffice_server, one a worker); the rest "
        f"({cpu - own - children - office:.0f} s) is collection, xdist, and processes nobody waited for",
        f"- LibreOffice started {sum(launches.values())} times",
        f"- the modules that wait on real time (conftest's WAITING_MODULES, one after another on one worker): "
        f"{waiting[0]:.0f} tests, {waiting[3]:.0f} s of wall time added up, {waiting[1] + waiting[2] + waiting[4]:.0f} CPU-s; "
        "the suite takes at least that long, and at least its CPU over the machine's cores", "",
        "| file | tests | CPU-s own | CPU-s waited-for processes | CPU-s the running LibreOffice | wall s (summed) "
        "| LibreOffice starts |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name, (count, mine, theirs, seconds, its) in sorted(
            by_file.items(), key=lambda kv: -(kv[1][1] + kv[1][2] + kv[1][4]))[:args.top]:
        lines.append(f"| {name} | {count:.0f} | {mine:.1f} | {theirs:.1f} | {its:.1f} | {seconds:.1f} | "
                     f"{launches.get(name, 0)} |")
    lines += ["", "The tests that cost the most CPU (a waited-for process's may be another test's: a process is "
              "counted where it is reaped):", "",
              "| CPU-s | own | waited-for | the running LibreOffice | wall s | test |", "|---:|---:|---:|---:|---:|---|"]
    for test in sorted(tests, key=lambda t: -(t["own"] + t["children"] + t["office"]))[:args.top]:
        lines.append(f"| {test['own'] + test['children'] + test['office']:.1f} | {test['own']:.1f} | "
                     f"{test['children']:.1f} | {test['office']:.1f} | {test['wall']:.1f} | {test['id']} |")
    args.out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))
    if run.returncode != 0:
        print(run.stdout[-3000:], file=sys.stderr)


if __name__ == "__main__":
    main()
