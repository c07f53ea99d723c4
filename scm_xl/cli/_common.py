"""Shared CLI plumbing: the one place that maps failures to exit codes, option types, progress.

Exit codes (STYLE.md): 0 ok; 1 a check failed (`CheckFailed`: a verify mismatch, an
answer the data cannot give); 2 bad input or usage (`InputError`, `UsageError`,
`EngineError`, click's own usage errors); 130 interrupted.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import math
import sys
from typing import TYPE_CHECKING, Any, Callable, Iterator

import click

from scm_xl.errors import ScmXlError

if TYPE_CHECKING:
    from scm_xl.rules import Lang

Progress = Callable[[str], None]


def handle_errors(func: Callable[..., Any]) -> Callable[..., Any]:
    """Run a command body; print ScmXlError as `Error: ...` and exit with its code."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except ScmXlError as exc:
            message = str(exc)
            if message:  # an empty CheckFailed: the command already printed the answer
                click.echo(_error_line(message), err=True)
            sys.exit(exc.exit_code)
        except KeyboardInterrupt:
            click.echo("Interrupted.", err=True)
            sys.exit(130)

    return wrapper


def _error_line(message: str) -> str:
    """`Error: message`, in the language of a command that has --lang (resolve_lang), else English."""
    ctx = click.get_current_context(silent=True)
    if ctx is None or "lang" not in ctx.params:
        return f"Error: {message}"
    from scm_xl.report_texts import words

    return words(resolve_lang(ctx.params["lang"]))["error"].format(text=message)


class FiniteFloat(click.ParamType):
    """A float that is finite (no nan, no inf), above `minimum` (exclusive when `open`)."""

    name = "number"

    def __init__(self, minimum: float | None = None, *, open: bool = True) -> None:
        self.minimum = minimum
        self.open = open

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        if isinstance(value, float):
            number = value
        else:
            try:
                number = float(str(value).strip())
            except ValueError:
                self.fail(f"{value!r} is not a number", param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        if self.minimum is not None and (number <= self.minimum if self.open else number < self.minimum):
            relation = "above" if self.open else "at least"
            self.fail(f"{value!r} must be {relation} {self.minimum:g}", param, ctx)
        return number


def parse_text_list(text: str | None) -> tuple[str, ...] | None:
    """A comma-separated list of names; None when not given."""
    if text is None:
        return None
    return tuple(part.strip() for part in text.split(",") if part.strip())


@contextlib.contextmanager
def progress_display(enabled: bool = True, first: str = "read the input") -> Iterator[StatusLine | None]:
    """A status line on stderr naming the running step, only when stderr is a terminal.

    Yields the callback to hand to the library (`progress=`), or None when silent.
    """
    if not enabled or not sys.stderr.isatty():
        yield None
        return
    from rich.console import Console
    from rich.live import Live
    from rich.spinner import Spinner

    console = Console(stderr=True)
    spinner = Spinner("dots")
    with Live(spinner, console=console, transient=True, refresh_per_second=8) as live:
        status = StatusLine(spinner, live, console)
        status(first)
        yield status


class StatusLine:
    """progress_display's callback: shows a step on the status line. `console` is the rich Console
    it is drawn on, for a progress bar that should draw under it (rich nests live displays on one
    console; on two they overwrite each other and leave frozen lines)."""

    def __init__(self, spinner: Any, live: Any, console: Any) -> None:
        self.spinner, self.live, self.console = spinner, live, console

    def __call__(self, step: str) -> None:
        from rich.text import Text

        text = Text(step)
        text.truncate(max(self.console.width - 3, 10), overflow="ellipsis")  # one line beside the spinner
        self.spinner.update(text=text)
        self.live.refresh()  # each step is on screen at once, not at the next tick


def call_supported(func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call `func` with the keyword arguments its signature takes, dropping the others.

    The workbook library gains options (progress, rename_duplicates) on its own schedule;
    the CLI passes them where they exist.
    """
    parameters = inspect.signature(func).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        return func(*args, **kwargs)
    return func(*args, **{name: value for name, value in kwargs.items() if name in parameters})


def accepts(func: Callable[..., Any], name: str) -> bool:
    return name in inspect.signature(func).parameters


def library_default(cls: Any, name: str) -> Any:
    """A click option's default, taken from the library dataclass that owns it (one home)."""
    import dataclasses

    return next(f.default for f in dataclasses.fields(cls) if f.name == name)


LANG_HELP = ("Language of what it writes and prints: zh or en (default: the locale, LC_ALL, LC_MESSAGES "
             "or LANG: zh* is zh, anything else en).")


def lang_option(lead: str = "") -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """--lang, one definition for the commands that write or print words; `lead` says what it sets
    beyond what they print (the command's parameter is `lang`, resolved with `resolve_lang`)."""
    return click.option("--lang", type=click.Choice(["zh", "en"]), default=None, help=lead + LANG_HELP)


def resolve_lang(lang: str | None) -> "Lang":
    """The one language rule of fill, verify, solve, predict, report, demo, compare and build
    template: `--lang` when given, else the locale (the first of LC_ALL, LC_MESSAGES, LANG that is
    set: zh... is zh), else en."""
    import os

    if lang is not None:
        return "zh" if lang == "zh" else "en"
    for name in ("LC_ALL", "LC_MESSAGES", "LANG"):
        value = os.environ.get(name)
        if value:
            return "zh" if value.casefold().startswith("zh") else "en"
    return "en"
