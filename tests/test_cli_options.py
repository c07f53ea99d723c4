"""One spelling per option across commands, help text on every option, old spellings still accepted."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from scm_xl.cli import main
from scm_xl.cli.options import Aliased

# The spelling every command uses for one meaning; the names each meaning must not be spelled with
ONE_SPELLING = {
    "--output": ("--out", "--output-file", "--out-file"),
    "--force": ("--overwrite", "--replace"),
    "--model": ("--models",),
}


def commands(group: click.Group = main, path: tuple[str, ...] = ()) -> Iterator[tuple[str, click.Command]]:
    for name, command in group.commands.items():
        if isinstance(command, click.Group):
            yield from commands(command, (*path, name))
        else:
            yield " ".join((*path, name)), command


def shown_names(command: click.Command) -> set[str]:
    """Option names --help shows."""
    ctx = click.Context(command)
    names: set[str] = set()
    for param in command.params:
        record = param.get_help_record(ctx) if isinstance(param, click.Option) else None
        if record:
            names |= {word.strip(",") for word in record[0].split() if word.startswith("-")}
    return names


@pytest.mark.parametrize("name,command", list(commands()), ids=[name for name, _ in commands()])
def test_every_option_has_help_and_one_spelling(name: str, command: click.Command) -> None:
    for param in command.params:
        if isinstance(param, click.Option) and not param.hidden:
            assert param.help, f"{name} {param.opts[0]} has no help text"
    shown = shown_names(command)
    for meaning, others in ONE_SPELLING.items():
        assert not shown & set(others), f"{name} shows {sorted(shown & set(others))}; the one spelling is {meaning}"


def test_the_old_spellings_still_work_and_are_not_shown(tmp_path: Path) -> None:
    runner = CliRunner()
    old = runner.invoke(main, ["plan", "--models", "a,b", "-c", "1,2", "--max-tokens", "50", "--design", "full",
                               "-r", "1", "--out", str(tmp_path / "old.toml")])
    new = runner.invoke(main, ["plan", "--model", "a,b", "-c", "1,2", "--max-tokens", "50", "--design", "full",
                               "-r", "1", "--output", str(tmp_path / "new.toml")])
    assert old.exit_code == new.exit_code == 0, old.output + new.output
    assert (tmp_path / "old.toml").read_text().count("[[experiments]]") == \
        (tmp_path / "new.toml").read_text().count("[[experiments]]") == 4
    again = runner.invoke(main, ["plan", "--model", "a", "-o", str(tmp_path / "new.toml"), "--overwrite"])
    assert again.exit_code == 0, again.output
    for command in ("plan", "collect", "demo"):
        text = runner.invoke(main, [command, "--help"], terminal_width=200).output
        assert "--output" in text and "--out " not in text and "--out," not in text, text
        assert "--overwrite" not in text and "--models" not in text


def test_collect_and_plan_spell_repeats_alike() -> None:
    for name in ("collect", "plan"):
        command = main.commands[name]
        (repeats,) = [p for p in command.params if isinstance(p, click.Option) and "--repeats" in p.opts]
        assert "-r" in repeats.opts, name


def test_an_old_spelling_must_be_a_name_of_the_option() -> None:
    with pytest.raises(ValueError, match="not names of"):
        Aliased(["--output", "-o"], old=("--out",))


def test_each_command_is_found_in_the_module_that_lists_it_and_runs_without_the_others() -> None:
    """`COMMAND_MODULES` names, for each command, the submodule whose `commands` list holds it, and
    every such command is there; a command imports only its own submodule (`scm-xl fill` neither
    the collector nor asyncio)."""
    import importlib
    import subprocess
    import sys

    from scm_xl.cli import COMMAND_MODULES

    listed = {command.name: name for name in set(COMMAND_MODULES.values())
              for command in importlib.import_module(f"scm_xl.cli.{name}").commands}
    assert listed == COMMAND_MODULES
    assert [command.name for command in main.commands.values()] == list(COMMAND_MODULES)
    imported = subprocess.run(
        [sys.executable, "-c", "import sys; from scm_xl.cli import main\n"
         "try:\n    main(['fill', '--help'])\nexcept SystemExit:\n    pass\n"
         "print(sorted(m for m in sys.modules if m.startswith('scm_xl.cli.') or m == 'asyncio'))"],
        capture_output=True, text=True, check=True).stdout.splitlines()[-1]
    assert "scm_xl.cli.workbook" in imported and "scm_xl.cli.collect" not in imported \
        and "'asyncio'" not in imported and "scm_xl.cli.demo" not in imported
