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


@pytest.mark.slow
def test_the_demo_shows_one_status_line_over_a_bar_for_each_deployment(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """`scm-xl demo`'s three collections at once: one status line, a bar for each deployment under it
    on the same console, each bar gone (not frozen) once the collections end, and nothing left at the end."""
    import dataclasses

    import scm_xl.demo as demo

    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    monkeypatch.setenv("COLUMNS", str(WIDTH))
    monkeypatch.setenv("TERM", "xterm-256color")
    roofline_config = demo.sim_config_for

    def quicker(*args: object, **kwargs: object) -> SimConfig:  # the demo's deployments at 10x speed: sooner
        config = roofline_config(*args, **kwargs)  # type: ignore[arg-type]
        return dataclasses.replace(config, step_base_s=config.step_base_s / 10,
                                   step_per_seq_s=config.step_per_seq_s / 10,
                                   step_per_ctx_token_s=config.step_per_ctx_token_s / 10,
                                   prefill_s_per_token=config.prefill_s_per_token / 10)

    real_collection = demo.run_collection
    at_ends: list[list[str]] = []  # the screen as each collection ends (the others may still run)

    async def collection(config: CollectConfig, **kwargs: object) -> object:
        report = await real_collection(config, **kwargs)  # type: ignore[arg-type]
        slot = kwargs["progress_slot"]
        slot.bars.progress.refresh()  # type: ignore[attr-defined]
        at_ends.append(screen_of(terminal.getvalue()))
        return report

    monkeypatch.setattr(demo, "sim_config_for", quicker)
    monkeypatch.setattr(demo, "run_collection", collection)
    steps: list[tuple[str, list[str]]] = []
    with progress_display(True) as status:
        assert status is not None

        def say(step: str) -> None:
            status(step)
            steps.append((step, screen_of(terminal.getvalue())))

        demo.run_demo(tmp_path / "demo", quiet=False, say=say, console=status.console)
    final = [line for line in screen_of(terminal.getvalue()) if line]
    assert final == [], final
    collect_step = "collect from 3 simulated deployments at once (28 experiments)"
    assert [step for step, _ in steps].count(collect_step) == 1
    names = ["qwen2.5-7b p32", "llama-3.1-8b p32", "qwen2.5-7b p1024"]
    assert len(at_ends) == 3
    for screen in at_ends:  # one status line, then one bar a deployment, in the runs' order
        lines = [line for line in screen if line]
        assert len(lines) == 4, screen
        assert lines[0][0] in SPINNER and lines[0].endswith(collect_step), screen
        assert [next(name for name in names if f" {name} " in f" {line} ") for line in lines[1:]] == names, screen
    assert sum(f"{name} done: " in line for name in names for line in at_ends[-1]) == 3  # all done at the end
    after = [screen for step, screen in steps if step != collect_step]
    assert after  # the workbook's steps, once the collections are over: the status line alone
    for screen in after:
        lines = [line for line in screen if line]
        assert len(lines) == 1 and lines[0][0] in SPINNER, screen
