"""What a person sees on a terminal while a command runs with a status line and a progress bar under
it (the demo's collection): rendered by a terminal emulator (pyte) from the exact bytes written."""

from __future__ import annotations

import asyncio
import io
import sys
from pathlib import Path

import pyte
import pytest

from scm_xl.cli._common import progress_display
from scm_xl.collect.config import CollectConfig
from scm_xl.collect.run import run_collection
from scm_xl.simulator import SimConfig, running_simulator

WIDTH = 80
SPINNER = set("⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏")


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def screen_of(written: str, width: int = WIDTH) -> list[str]:
    screen = pyte.Screen(width, 24)
    pyte.Stream(screen).feed(written.replace("\n", "\r\n"))  # a tty's onlcr
    return [line.rstrip() for line in screen.display]


def test_a_status_line_over_a_progress_bar_leaves_no_stale_lines(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    monkeypatch.setenv("COLUMNS", str(WIDTH))
    monkeypatch.setenv("TERM", "xterm-256color")
    long_step = "collect from the simulated meta-llama/Llama-3.1-8B-Instruct (12 experiments, 32-token prompts)"
    assert len(long_step) > WIDTH
    seen: list[list[str]] = []
    with running_simulator(SimConfig.zero_delay()) as base_url, progress_display(True) as status:
        assert status is not None
        for part in range(2):  # two collections under one status line, as the demo runs them
            status(f"{long_step} {part}")
            seen.append(screen_of(terminal.getvalue()))
            config = CollectConfig(base_url=base_url, models=("m",), concurrency=(1, 2), max_tokens=(2,),
                                   requests_per_slot=1, results_path=tmp_path / f"r{part}.csv")
            asyncio.run(run_collection(config, progress=True, progress_console=status.console))
        status("fill the workbook")
        seen.append(screen_of(terminal.getvalue()))
    final = [line for line in screen_of(terminal.getvalue()) if line]
    assert final == [], final  # the status line and both bars are gone once the work is done
    for screen in seen:  # while it runs: one status line, within the width, never a second frozen one
        status_lines = [line for line in screen if line and line[0] in SPINNER]
        assert len(status_lines) == 1, screen
        assert not any(line.startswith(("prompts)", "32-token")) for line in screen), screen
    assert seen[-1][0].endswith("fill the workbook")
