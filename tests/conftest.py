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
import sys
import tempfile

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
# steps, a server's delayed replies, `scm-xl demo`'s collections (about 230 s of the suite's wall
# time, 90 CPU-seconds). Their measurements want a core free when they wake (a latency, a knee, an
# SLO's good requests), so they run one after another on one worker (one work unit for xdist's
# loadfile scheduler), while the other workers (pyproject's `-n 3`: two more) take every other
# module, a file at a time: never more than two modules computing at once on a two-core machine,
# and the waiting done beside them instead of between them.
WAITING_MODULES = frozenset({
    "test_collect_checks", "test_collect_hostile", "test_collector", "test_compare", "test_compare_slo",
    "test_compare_zh", "test_demo", "test_goodput", "test_latency_model", "test_latency_sheet",
    "test_one_answer", "test_plan_collect", "test_prompt_levels", "test_ratelimit", "test_report_latency",
    "test_report_slo", "test_simulator", "test_simulator_slots", "test_slo_between", "test_slo_zh",
    "test_status_line", "test_transport", "test_workbook_slo",
})
WAITING_UNIT = "tests/(the modules that wait on real time)"


# The computing workers yield the CPU to the waiting one: before its first test of a module not in
# WAITING_MODULES a worker lowers its own priority (os.nice, inherited by the soffice and scm-xl
# processes it starts), once: a measurement that wakes for its next step then finds a core at
# once, as it did with a core to itself. The waiting worker gets its unit first (the largest, and
# xdist hands out the largest first) and joins the others, niced, when the unit is done. Nothing
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
