"""Ctrl-C, SIGTERM and kill -9 while real LibreOffice runs: a clean exit, no soffice left running,
no temporary folder left behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import openpyxl
import pytest

from scm_xl.engines import LibreOfficeEngine

pytestmark = [pytest.mark.libreoffice, pytest.mark.slow, pytest.mark.soffice_per_run]

ROWS = 10_000  # enough quadratic work that soffice is still busy when the signal comes
CHILD = """
import sys
from scm_xl.engines import LibreOfficeEngine
try:
    LibreOfficeEngine().recalculate(sys.argv[1])
except KeyboardInterrupt:
    print("Interrupted.", file=sys.stderr)
    sys.exit(130)
print("finished")
"""


@pytest.fixture(scope="module")
def heavy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not LibreOfficeEngine().available():
        pytest.skip("LibreOffice is not installed")
    book = openpyxl.Workbook()
    sheet = book.active
    for row in range(1, ROWS + 1):
        sheet.append([row, f"=A{row}*2", f'=SUMIF($A$1:$A${ROWS},"<"&A{row})'])
    path = tmp_path_factory.mktemp("heavy") / "heavy.xlsx"
    book.save(path)
    return path


def _processes_mentioning(marker: str) -> list[str]:
    """The command lines of running processes that mention `marker`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if marker in command:
            found.append(command)
    return found


def _wait_until(condition: object, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():  # type: ignore[operator]
            return True
        time.sleep(0.02)
    return False


def _start_and_signal(heavy: Path, tmp_path: Path, signum: int) -> tuple[subprocess.Popen[str], Path]:
    """A child recalculating `heavy` with LibreOffice, sent `signum` once soffice.bin is working."""
    temp = tmp_path / "tmp"
    temp.mkdir()
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(heavy)], env={**os.environ, "TMPDIR": str(temp)},
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    started = _wait_until(lambda: any("soffice.bin" in c for c in _processes_mentioning(str(temp))), 60)
    assert started, "soffice.bin never started"
    if signum == signal.SIGINT:
        os.killpg(child.pid, signum)  # what a terminal does on Ctrl-C: the foreground process group
    else:
        os.kill(child.pid, signum)
    return child, temp


def _assert_nothing_left(temp: Path) -> None:
    assert _wait_until(lambda: not _processes_mentioning(str(temp)), 30), _processes_mentioning(str(temp))
    assert _wait_until(lambda: not any(temp.iterdir()), 30), sorted(p.name for p in temp.iterdir())


def test_ctrl_c_interrupts_cleanly(heavy: Path, tmp_path: Path) -> None:
    child, temp = _start_and_signal(heavy, tmp_path, signal.SIGINT)
    stdout, stderr = child.communicate(timeout=60)
    assert (child.returncode, stdout, stderr) == (130, "", "Interrupted.\n")  # no traceback, no OSError
    _assert_nothing_left(temp)


def test_sigterm_cleans_up_and_exits_143(heavy: Path, tmp_path: Path) -> None:
    child, temp = _start_and_signal(heavy, tmp_path, signal.SIGTERM)
    stdout, stderr = child.communicate(timeout=60)
    assert (child.returncode, stdout, stderr) == (143, "", "")
    _assert_nothing_left(temp)


def test_kill_9_leaves_no_soffice_and_no_profile(heavy: Path, tmp_path: Path) -> None:
    child, temp = _start_and_signal(heavy, tmp_path, signal.SIGKILL)
    child.communicate(timeout=60)
    assert child.returncode == -signal.SIGKILL
    _assert_nothing_left(temp)


def test_normal_run_leaves_nothing(tmp_path: Path) -> None:
    book = openpyxl.Workbook()
    book.active["A1"] = "=1+1"
    book.save(tmp_path / "small.xlsx")
    temp = tmp_path / "tmp"
    temp.mkdir()
    done = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path / "small.xlsx")], capture_output=True,
                          text=True, env={**os.environ, "TMPDIR": str(temp)}, timeout=120)
    assert (done.returncode, done.stdout, done.stderr) == (0, "finished\n", "")
    assert not _processes_mentioning(str(temp))
    assert not any(temp.iterdir())
