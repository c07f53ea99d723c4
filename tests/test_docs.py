"""Docs are code: every command has --help and is in the README, and the README's commands run."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from scm_xl.cli import main
from support.paths import ARTICLE

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


def all_commands(group: click.Group = main, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    found = []
    for name, command in group.commands.items():
        path = (*prefix, name)
        found.append(path)
        if isinstance(command, click.Group):
            found += all_commands(command, path)
    return found


@pytest.mark.parametrize("path", all_commands(), ids=lambda p: " ".join(p))
def test_every_command_has_help(path: tuple[str, ...]) -> None:
    result = CliRunner().invoke(main, [*path, "--help"])
    assert result.exit_code == 0, result.output
    assert "Usage: " in result.output


@pytest.mark.parametrize("path", [p for p in all_commands() if len(p) == 1], ids=lambda p: p[0])
def test_every_command_is_in_the_readme(path: tuple[str, ...]) -> None:
    assert f"scm-xl {path[0]}" in README


def test_readme_opens_with_the_two_commands() -> None:
    blocks = re.findall(r"```\n(.*?)```", README, flags=re.S)
    first = blocks[0].strip().splitlines()
    assert first[0].endswith("scm-xl demo")
    assert first[1].endswith("pytest")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    # .ci/run runs each step of the README's test command, in order (other steps may sit between).
    lines = [line.strip() for line in ci.splitlines()]
    positions = [next((i for i, line in enumerate(lines) if step in line and not line.startswith("#")), -1)
                 for step in first[1].split(" && ")]
    assert -1 not in positions and positions == sorted(positions), ".ci/run must run the README's test command"


def _cell_count_as_n(line: str) -> str:
    """The verified line's cell count moves with the workbook's layout; its claim does not."""
    return re.sub(r"^verified: \d+ cells", "verified: N cells", line)


def transcript_commands() -> list[list[str]]:
    block = README.split("A transcript on the article's seven rows")[1].split("```")[1]
    return [shlex.split(line[2:]) for line in block.splitlines() if line.startswith("$ ")]


def test_readme_transcript_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "examples").mkdir()
    example = ARTICLE
    (tmp_path / "examples" / example.name).write_bytes(example.read_bytes())
    commands = transcript_commands()
    assert len(commands) >= 3
    outputs = []
    for argv in commands:
        assert argv[0] == "scm-xl"
        result = CliRunner().invoke(main, argv[1:])
        assert result.exit_code == 0, (argv, result.output)
        outputs.append(result.output)
    # The numbers the README quotes are the numbers the commands print.
    assert "BaseTPS              45.45" in outputs[0]
    assert "verdict: insufficient" in outputs[0]
    # Every line the README quotes from the fill output is printed as quoted.
    quoted = README.split("A transcript on the article's seven rows")[1].split("```")[1].split("$ ")[1]
    printed = [_cell_count_as_n(out.rstrip()) for out in outputs[0].splitlines()]
    for line in quoted.splitlines()[1:]:
        if line.strip() and line.strip() != "...":
            assert _cell_count_as_n(line.rstrip()) in printed, line
    assert json.loads(outputs[1])["tps"] == pytest.approx(59.5238, abs=1e-3)
    solved = json.loads(outputs[2])
    assert (solved["concurrency"], solved["reachable"]) == (2, True)
    assert solved["tps"] == pytest.approx(119.0476, abs=1e-3)
