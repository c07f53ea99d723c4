"""Shared CLI plumbing: turn library errors into `Error: ...` and an exit code."""

from __future__ import annotations

import functools
import sys
from typing import Any, Callable

import click

from scm_xl.errors import ScmXlError


def handle_errors(func: Callable[..., Any]) -> Callable[..., Any]:
    """Run a command body; print ScmXlError as `Error: ...` and exit with its code."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except ScmXlError as exc:
            click.echo(f"Error: {exc}", err=True)
            sys.exit(exc.exit_code)
        except KeyboardInterrupt:
            click.echo("Interrupted.", err=True)
            sys.exit(130)

    return wrapper
