"""The scm-xl command line: a thin click layer over the library.

Each submodule holds the commands of one area and lists them in `commands`; `COMMAND_MODULES`
says which submodule holds which command, so that a command imports only its own area (`scm-xl
fill` imports neither the collector's HTTP stack nor asyncio).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, MutableMapping

import click

from scm_xl import __version__
from scm_xl.cli._common import ScmXlGroup

# command -> the submodule of scm_xl.cli that lists it, in the order the commands were added
# (tests/test_cli_options.py checks this against each submodule's `commands`)
COMMAND_MODULES: dict[str, str] = {
    "demo": "demo", "build": "workbook", "fill": "workbook", "verify": "workbook", "predict": "workbook",
    "solve": "workbook", "report": "report", "compare": "report", "collect": "collect", "serve-sim": "collect",
    "plan": "plan", "roofline": "roofline",
}


class _Commands(MutableMapping[str, click.Command]):
    """The top group's commands by name, each submodule imported when one of its commands is first
    looked up (listing them all, as `--help` does, imports every one)."""

    def __init__(self, modules: dict[str, str]) -> None:
        self._modules = dict(modules)
        self._commands: dict[str, click.Command] = {}

    def __getitem__(self, name: str) -> click.Command:
        if name not in self._commands and name in self._modules:
            for command in importlib.import_module(f"scm_xl.cli.{self._modules[name]}").commands:
                self._commands.setdefault(command.name, command)
        return self._commands[name]

    def __setitem__(self, name: str, command: click.Command) -> None:
        self._commands[name] = command

    def __delitem__(self, name: str) -> None:
        self._modules.pop(name, None)
        self._commands.pop(name, None)

    def __iter__(self) -> Iterator[str]:
        yield from self._modules
        yield from (name for name in self._commands if name not in self._modules)

    def __len__(self) -> int:
        return len(set(self._modules) | set(self._commands))

    def __contains__(self, name: object) -> bool:
        return name in self._modules or name in self._commands


@click.group(cls=ScmXlGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="scm-xl")
def main() -> None:
    """Measure an OpenAI-compatible LLM endpoint and calibrate a readable
    throughput model, TPS = BaseTPS x f(concurrency) x K_len / C_model,
    in an Excel workbook of live formulas."""


main.commands = _Commands(COMMAND_MODULES)
