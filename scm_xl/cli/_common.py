"""Shared CLI plumbing: the one place that maps failures to exit codes, option types, progress.

Exit codes (STYLE.md): 0 ok; 1 a check failed (`CheckFailed`: a verify mismatch, an
answer the data cannot give); 2 bad input or usage (`InputError`, `UsageError`,
`EngineError`, click's own usage errors); 130 interrupted. Errors are printed in the language of
the command (resolve_lang): scm-xl's by `handle_errors`, click's own by the top group `ScmXlGroup`.
"""

from __future__ import annotations

import contextlib
import functools
import io
import math
import sys
from typing import TYPE_CHECKING, Any, Callable, Iterator

import click

from scm_xl.errors import InputError, ScmXlError

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
            if str(exc):  # an empty CheckFailed: the command already printed the answer
                click.echo(_error_line(exc), err=True)
            sys.exit(exc.exit_code)
        except KeyboardInterrupt:
            click.echo("Interrupted.", err=True)
            sys.exit(130)

    return wrapper


def _error_line(exc: ScmXlError) -> str:
    """`Error: message`, in the language of a command that has --lang (resolve_lang), else English;
    an InputError raised `worded` says its problem in that language too (InputError.text)."""
    ctx = click.get_current_context(silent=True)
    if ctx is None or "lang" not in ctx.params:
        return f"Error: {exc}"
    lang = resolve_lang(ctx.params["lang"])
    message = exc.text(lang) if isinstance(exc, InputError) else str(exc)
    return _in_words(lang, message)


def remark(kind: str, text: Any, lang: "Lang") -> str:
    """A `kind` ("warning" or "note") line for stderr, its text said in `lang`: English as the
    commands always printed it, other languages wrapped to the terminal."""
    from scm_xl.report_texts import say, words
    from scm_xl.terminal import wrapped

    line = words(lang)[kind].format(text=say(text, lang))
    return line if lang == "en" else wrapped(line)


def _in_words(lang: "Lang", message: str) -> str:
    from scm_xl.report_texts import words

    return words(lang)["error"].format(text=message)


_ARGV = "scm_xl.argv"  # the command line, in the root context's meta (shared by every context below it)


class ScmXlGroup(click.Group):
    """scm-xl's top group: click's own usage errors (an invalid value, no such option, a missing
    argument...), raised while any command's arguments are parsed, in the language of that command
    (`usage_error_lang`); in English they are click's, untouched."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        ctx.meta.setdefault(_ARGV, list(args))
        try:
            return super().parse_args(ctx, args)
        except click.UsageError as exc:
            localised = _localised(exc, ctx.meta[_ARGV])
            if localised is None:
                raise
            raise localised from exc

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.UsageError as exc:
            localised = _localised(exc, ctx.meta.get(_ARGV, []))
            if localised is None:
                raise
            raise localised from exc


# click's "no arguments: show the help" is a UsageError whose show() prints the help (click 8.2+)
_SHOWS_HELP: tuple[type[BaseException], ...] = tuple(
    kind for kind in (getattr(click.exceptions, "NoArgsIsHelpError", None),) if kind is not None)


def _localised(exc: click.UsageError, argv: list[str]) -> LocalisedUsageError | None:
    """`exc` to show in the language of the command it stopped, None where that is English."""
    if isinstance(exc, (LocalisedUsageError, *_SHOWS_HELP)):
        return None
    lang = usage_error_lang(exc, argv)
    return None if lang == "en" else LocalisedUsageError(exc, lang)


def usage_error_lang(exc: click.UsageError, argv: list[str]) -> "Lang":
    """The language of a usage error: that of the command it stopped (its --lang, which need not be
    parsed yet, so the command line is read for it: `lang_in_argv`; else the locale: resolve_lang).
    A command without --lang speaks English, as the rest of its output does; a group (scm-xl,
    scm-xl build: an unknown command) follows the command line and the locale."""
    ctx = exc.ctx
    command = ctx.command if ctx is not None else None
    if command is not None and not isinstance(command, click.Group) and \
            not any(param.name == "lang" for param in command.params):
        return "en"
    given = ctx.params.get("lang") if ctx is not None else None
    return resolve_lang(given if given in ("zh", "en") else lang_in_argv(argv))


def lang_in_argv(argv: list[str]) -> str | None:
    """The last `--lang zh|en` (or `--lang=...`) on a command line, up to a `--`; None if none."""
    found = None
    for index, arg in enumerate(argv):
        if arg == "--":
            break
        if arg == "--lang" and index + 1 < len(argv):
            value = argv[index + 1]
        elif arg.startswith("--lang="):
            value = arg[len("--lang="):]
        else:
            continue
        if value in ("zh", "en"):
            found = value
    return found


class LocalisedUsageError(click.UsageError):
    """A click usage error shown in `lang`: its usage and "Try ... for help." lines and its message
    translated by the patterns of scm_xl.error_texts (what no pattern knows stays English)."""

    def __init__(self, original: click.UsageError, lang: "Lang") -> None:
        super().__init__(original.format_message(), original.ctx)
        self.original = original
        self.lang = lang

    def format_message(self) -> str:
        from scm_xl.error_texts import click_message

        return click_message(self.lang, self.original.format_message())

    def show(self, file: Any = None) -> None:
        from scm_xl.error_texts import click_usage

        shown = io.StringIO()
        self.original.show(shown)  # click's own lines, whatever its version prints above the error
        text = shown.getvalue()
        error = f"Error: {self.original.format_message()}\n"
        head = text[:-len(error)] if text.endswith(error) else ""
        color = self.ctx.color if self.ctx is not None else None
        click.echo(click_usage(self.lang, head) + _in_words(self.lang, self.format_message()), file=file,
                   err=True, color=color)


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
