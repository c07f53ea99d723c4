"""One spelling per option across commands; the old spellings still work but are no longer shown.

`--output`/`-o` names every file or folder a command writes, `--force` replaces what is there,
`--model`/`-m` names a model (repeatable where a command takes several), `--repeats`/`-r` the runs of
every cell. Spellings an earlier release used (`--out`, `--overwrite`, `--models`) stay accepted as
hidden aliases, so a script written against them keeps working.
"""

from __future__ import annotations

from typing import Any

import click


class Aliased(click.Option):
    """A click option some of whose names are old spellings: accepted, left out of --help."""

    def __init__(self, *args: Any, old: tuple[str, ...] = (), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        unknown = set(old) - set(self.opts) - set(self.secondary_opts)
        if unknown:
            raise ValueError(f"old spellings {sorted(unknown)} are not names of {self.opts}")
        self.old = old

    def get_help_record(self, ctx: click.Context) -> tuple[str, str] | None:
        shown = self.opts
        self.opts = [name for name in shown if name not in self.old]
        try:
            return super().get_help_record(ctx)
        finally:
            self.opts = shown
