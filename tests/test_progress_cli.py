"""Progress on stderr: a status line naming the step when stderr is a terminal, nothing otherwise."""

from __future__ import annotations

import io
import sys

import pytest

from scm_xl.cli._common import progress_display


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
