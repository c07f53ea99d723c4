"""Shared test plumbing.

Tests marked `libreoffice` need a real `soffice`. Where it is missing they are
skipped, unless SCM_XL_REQUIRE_LIBREOFFICE=1 (set by .ci/run), which turns the
skip into a failure so CI can never pass without having run them.
Tests marked `browser` need Chromium, chromedriver and selenium, the same way under
SCM_XL_REQUIRE_BROWSER=1. Tests marked `gnumeric` need Gnumeric's `ssconvert`, the same
way under SCM_XL_REQUIRE_GNUMERIC=1.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

# The language scm-xl writes and prints follows the locale where --lang is not given
# (scm_xl.cli._common.resolve_lang). The suite pins an English locale, so a machine set to Chinese
# runs it as CI does; the tests of the rule set their own.
os.environ["LC_ALL"] = "C.UTF-8"
os.environ.pop("LC_MESSAGES", None)

# Bytecode: the suite starts its Python processes by the hundred (pytest's workers, `scm-xl` as
# a command, the engines' helpers), and where the environment sets PYTHONDONTWRITEBYTECODE each
# one compiles every module it imports, pytest's workers every test module too (about 3.5 of a
# worker's 6 CPU-seconds of collection). The suite's processes keep their bytecode instead in a
# private PYTHONPYCACHEPREFIX outside the work tree (as benchmarks/bench_report_cpu.py does), so
# nothing is written beside the sources. Set here, before xdist starts its workers: they and
# every process the tests start inherit it; this process uses it from here on.
if not os.environ.get("PYTHONPYCACHEPREFIX"):
    os.environ["PYTHONPYCACHEPREFIX"] = os.path.join(
        tempfile.gettempdir(), f"scm-xl-tests-pycache-{os.getuid() if hasattr(os, 'getuid') else 0}")
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.pycache_prefix = os.environ["PYTHONPYCACHEPREFIX"]
sys.dont_write_bytecode = False


# Garbage collection: a worker's heap holds what every module imported and collected, and the
# module-scoped fixtures' workbooks (openpyxl builds an object a cell), and the collector's full
# collections walked all of it: 61 of the workers' 352 CPU-seconds went to the cyclic garbage
# collector, 52 of them to about 300 full collections (measured with gc.callbacks). Once
# collected, a worker's imports and test items are frozen (gc.freeze: never walked again; they live
# as long as the worker), and the collector runs less often (a young collection every 20,000 net
# allocations instead of 700): 16 CPU-seconds then.
GC_THRESHOLDS = (20_000, 50, 100)


def pytest_collection_finish(session: pytest.Session) -> None:
    import gc

    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


def soffice_path() -> str | None:
    return shutil.which("soffice") or shutil.which("libreoffice")


def ssconvert_path() -> str | None:
    return shutil.which("ssconvert")


def browser_missing() -> str | None:
    """Why the headless-browser tests cannot run here, or None when they can."""
    import importlib.util

    if not (shutil.which("chromium") and shutil.which("chromedriver")):
        return "chromium and chromium-driver not installed"
    if importlib.util.find_spec("selenium") is None:
        return "selenium not installed"
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    _longest_first(items)
    missing = browser_missing()
    if missing and os.environ.get("SCM_XL_REQUIRE_BROWSER") != "1":
        for item in items:
            if "browser" in item.keywords:
                item.add_marker(pytest.mark.skip(reason=missing))
    if not ssconvert_path() and os.environ.get("SCM_XL_REQUIRE_GNUMERIC") != "1":
        for item in items:
            if "gnumeric" in item.keywords:
                item.add_marker(pytest.mark.skip(reason="Gnumeric (ssconvert) not installed"))
    if soffice_path():
        return
    required = os.environ.get("SCM_XL_REQUIRE_LIBREOFFICE") == "1"
    if required:
        return  # pytest_runtest_setup fails them instead
    for item in items:
        if "libreoffice" in item.keywords:
            item.add_marker(pytest.mark.skip(reason="LibreOffice (soffice) not installed"))


def pytest_runtest_setup(item: pytest.Item) -> None:
    _yield_to_the_waiting(item)
    if "browser" in item.keywords and os.environ.get("SCM_XL_REQUIRE_BROWSER") == "1":
        missing = browser_missing()
        if missing:
            pytest.fail(f"the browser tests are required (SCM_XL_REQUIRE_BROWSER=1) but {missing}")
    if "gnumeric" in item.keywords and not ssconvert_path() and os.environ.get("SCM_XL_REQUIRE_GNUMERIC") == "1":
        pytest.fail("Gnumeric is required (SCM_XL_REQUIRE_GNUMERIC=1) but ssconvert was not found")
    if "libreoffice" in item.keywords and not soffice_path():
        if os.environ.get("SCM_XL_REQUIRE_LIBREOFFICE") == "1":
            pytest.fail("LibreOffice is required (SCM_XL_REQUIRE_LIBREOFFICE=1) but soffice was not found")


# --- the workers' share of the machine -----------------------------------------------------------
#
# These modules spend most of their time waiting on real time, not computing: the simulator's
# steps, a server's delayed replies, `scm-xl demo`'s collections (about 165 s of the suite's wall
# time, 65 CPU-seconds; the demos a module reads start as the module starts and run beside its
# other tests: tests/support/cli.py's Started). A module that collects for a second and then
# computes for twenty (test_workbook_slo) computes with the others. Their measurements want a core
# free when they wake (a latency, a knee, an SLO's good requests), so they run one after another
# on one worker (one work unit for xdist's loadfile scheduler), while the other workers
# (pyproject's `-n 3`: two more) take every other module, a file at a time: never more than two
# modules computing at once on a two-core machine, and the waiting done beside them instead of
# between them.
WAITING_MODULES = frozenset({
    "test_collect_checks", "test_collect_hostile", "test_collector", "test_compare", "test_compare_slo",
    "test_compare_zh", "test_demo", "test_goodput", "test_latency_model", "test_latency_sheet",
    "test_one_answer", "test_plan_collect", "test_prompt_levels", "test_ratelimit", "test_report_latency",
    "test_report_slo", "test_simulator", "test_simulator_slots", "test_slo_between", "test_slo_zh",
    "test_status_line", "test_transport",
})
WAITING_UNIT = "tests/(the modules that wait on real time)"


# The computing workers yield the CPU to the waiting one: before its first test of a module not in
# WAITING_MODULES a worker lowers its own priority (os.nice, inherited by the soffice and scm-xl
# processes it starts), once: a measurement that wakes for its next step then finds a core at
# once, as it did with a core to itself. The waiting worker gets its unit first (collected first:
# LONGEST_FIRST below) and joins the others, niced, when the unit is done. Nothing
# changes for a run without workers (-n 0).
NICENESS = 10
_niced = False


def _yield_to_the_waiting(item: pytest.Item) -> None:
    global _niced
    if _niced or not hasattr(os, "nice") or "PYTEST_XDIST_WORKER" not in os.environ:
        return
    if item.path.stem in WAITING_MODULES:
        return
    os.nice(NICENESS)
    _niced = True


# The modules that take the longest, longest first (each one's tests added up: wall seconds in
# benchmarks/results/suite_cpu.md). xdist's loadfile scheduling hands out the modules in the order
# collected (pyproject's addopts: --no-loadscope-reorder; by default it orders them by their
# number of tests, and most of these have few): the long ones start at once, and the many short
# ones fill in around them at the end, instead of a long one running on alone while the other
# workers have nothing left. A module not named keeps its place after these; WAITING_MODULES,
# one unit, go first of all.
LONGEST_FIRST = (
    "test_person_edits", "test_workbook_capacity", "test_workbook", "test_workbook_slo", "test_ooxml_valid",
    "test_lsq_sheet", "test_workbook_latency", "test_fill_hostile", "test_workbook_print", "test_replicates_sheet",
    "test_prompt_factor", "test_fill_cli", "test_gnumeric", "test_live_charts", "test_report_html", "test_value_grid",
    "test_inputs_only", "test_safety", "test_engines", "test_cli_zh", "test_summary_inputs", "test_xlsx_hostile",
    "test_progress_cli", "test_shared_formulas", "test_workbook_for_people", "test_hostile_csv",
)


def _longest_first(items: list[pytest.Item]) -> None:
    rank = {stem: i for i, stem in enumerate(LONGEST_FIRST)}

    def order(item: pytest.Item) -> int:
        stem = item.path.stem
        return -1 if stem in WAITING_MODULES else rank.get(stem, len(rank))

    items.sort(key=order)  # stable: each module's tests keep their order, and the modules theirs


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """xdist's loadfile scheduling, WAITING_MODULES one work unit (see above)."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class WaitingTogether(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = super()._split_scope(nodeid)
            return WAITING_UNIT if os.path.splitext(os.path.basename(path))[0] in WAITING_MODULES else path

    return WaitingTogether(config, log)  # type: ignore[arg-type]


# --- one LibreOffice a worker ------------------------------------------------------------------
#
# Each `--engine libreoffice` recalculation starts soffice anew (about 2.5 CPU-seconds, most of a
# small workbook's recalculation), some seventy times in the suite. A worker starts one LibreOffice,
# listening on a pipe, with the engine's profile setting (recalculate every xlsx on load), and the
# engine's soffice is tests/support/soffice_forward.py, which has that LibreOffice convert the file
# (real LibreOffice computes every value) and runs the real soffice for anything else or when none
# answers. A person's edits (tests/uno_edit.py) are made in that LibreOffice too. Tests marked
# `soffice_per_run` get the real soffice, started per recalculation: the engine's own start, guard
# and signals are theirs to test. SCM_XL_TEST_SOFFICE_SERVER=0 turns it off (uno_edit.py then
# starts a LibreOffice of its own, as it does where none runs).
FORWARD = Path(__file__).resolve().parent / "support" / "soffice_forward.py"


def _uno_available() -> bool:
    from support.paths import UNO_PYTHON

    if not os.access(UNO_PYTHON, os.X_OK):
        return False
    return subprocess.run([UNO_PYTHON, "-c", "import uno"], capture_output=True).returncode == 0


@pytest.fixture(scope="session", autouse=True)
def libreoffice_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    soffice = soffice_path()
    if (soffice is None or os.environ.get("SCM_XL_SOFFICE") or os.environ.get("SCM_XL_TEST_SOFFICE_SERVER") == "0"
            or not _uno_available()):
        yield
        return
    from scm_xl.engines.libreoffice import PROFILE_SETTINGS
    from support.soffice_forward import PID_VARIABLE, PIPE_VARIABLE, REAL_VARIABLE

    folder = tmp_path_factory.mktemp("soffice-server")
    (folder / "profile" / "user").mkdir(parents=True)
    (folder / "profile" / "user" / "registrymodifications.xcu").write_text(PROFILE_SETTINGS, encoding="utf-8")
    pipe = f"scmxltests{os.getpid()}"
    nice = ["nice", "-n", str(NICENESS)] if shutil.which("nice") else []  # as the computing workers
    process = subprocess.Popen(
        [*nice, soffice, f"-env:UserInstallation={(folder / 'profile').as_uri()}", "--headless", "--invisible",
         "--norestore", "--nologo", "--nodefault", f"--accept=pipe,name={pipe};urp;"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        env={**os.environ, "TMPDIR": str(folder)})
    saved = {key: os.environ.get(key) for key in ("SCM_XL_SOFFICE", PIPE_VARIABLE, PID_VARIABLE, REAL_VARIABLE)}
    os.environ.update({"SCM_XL_SOFFICE": str(FORWARD), PIPE_VARIABLE: pipe, PID_VARIABLE: str(process.pid),
                       REAL_VARIABLE: soffice})
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        try:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(timeout=30)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            process.wait()


@pytest.fixture(autouse=True)
def _soffice_per_run(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    if request.node.get_closest_marker("soffice_per_run") is not None:
        from support.soffice_forward import PIPE_VARIABLE

        monkeypatch.delenv("SCM_XL_SOFFICE", raising=False)
        monkeypatch.delenv(PIPE_VARIABLE, raising=False)
