"""Progress on stderr: a status line naming the step when stderr is a terminal; for fill and
verify elsewhere (a CI log, a pipe) one plain line per step; nothing with --no-progress / -q."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest

from scm_xl.cli._common import progress_display
from support.paths import ARTICLE


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_terminal_sees_the_step(monkeypatch: pytest.MonkeyPatch) -> None:
    screen = Terminal()
    monkeypatch.setattr(sys, "stderr", screen)
    with progress_display(True) as progress:
        assert progress is not None
        progress("recalculate with libreoffice")
        progress("compare 1,234 cells")
    assert "recalculate with libreoffice" in screen.getvalue()
    assert "compare 1,234 cells" in screen.getvalue()


def test_silent_when_not_a_terminal_or_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    with progress_display(True) as progress:
        assert progress is None
    monkeypatch.setattr(sys, "stderr", Terminal())
    with progress_display(False) as progress:
        assert progress is None
    assert sys.stderr.getvalue() == ""


def test_fill_and_verify_offer_no_progress() -> None:
    from click.testing import CliRunner

    from scm_xl.cli import main

    for command in ("fill", "verify"):
        result = CliRunner().invoke(main, [command, "--help"])
        assert "--no-progress" in result.output


SCM_XL = str(Path(sys.executable).with_name("scm-xl"))


def test_fill_names_each_step_in_plain_lines_when_stderr_is_not_a_terminal(tmp_path: Path) -> None:
    out = tmp_path / "out.xlsx"
    done = subprocess.run([SCM_XL, "fill", str(ARTICLE), "-o", str(out), "--engine", "ironcalc"],
                          capture_output=True, text=True, timeout=120)  # stderr is a pipe, as in CI
    assert done.returncode == 0, done.stderr
    steps = [line for line in done.stderr.splitlines() if line.startswith("scm-xl [")]
    said = " | ".join(steps)
    for step in (f"read {ARTICLE}", "build the workbook", "save the workbook", "recalculate with ironcalc",
                 "formula cells with the reference", f"write {out}"):
        assert step in said, said
    assert all(line.split("] ", 1)[0].removeprefix("scm-xl [").strip().endswith(" s") for line in steps)
    assert "\r" not in done.stderr and "\x1b" not in done.stderr  # no spinner, no cursor movement

    quiet = subprocess.run([SCM_XL, "fill", str(ARTICLE), "-o", str(out), "--force", "-q"],
                           capture_output=True, text=True, timeout=120)
    assert quiet.returncode == 0, quiet.stderr
    assert "scm-xl [" not in quiet.stderr


def test_verify_names_its_steps_too(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from scm_xl.cli import main

    out = tmp_path / "out.xlsx"
    assert CliRunner().invoke(main, ["fill", str(ARTICLE), "-o", str(out), "-q"]).exit_code == 0
    result = CliRunner().invoke(main, ["verify", str(out)])
    assert result.exit_code == 0, result.output
    assert result.stderr.startswith(f"scm-xl [    0.0 s] read {out}\n"), result.stderr
    assert "recalculate with" in result.stderr
