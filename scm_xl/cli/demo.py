"""CLI: demo, the main job on the built-in simulator."""

from __future__ import annotations

import sys

import click

from scm_xl.cli._common import FiniteFloat, handle_errors, lang_option, progress_display, resolve_lang
from scm_xl.cli.options import Aliased
from scm_xl.cli.workbook import ends_cleanly_on_sigterm


@click.command()
@click.option("--output", "-o", "--out", "out_dir", cls=Aliased, old=("--out",), default="scm-demo",
              show_default=True, type=click.Path(file_okay=False),
              help="Folder for results.csv, requests.csv and workbook.xlsx; an existing one is refused "
                   "unless --force.")
@click.option("--force", is_flag=True, help="Replace the demo's files in an existing --output folder.")
@lang_option("Language of the workbook and of the summary printed. ")
@click.option("--target-tps", type=FiniteFloat(0), default=None,
              help="Target TPS for the inverse answer [default: one the simulated deployment reaches, "
                   "about 250: three streams' worth of its ceiling at 60% efficiency].")
@click.option("--show-unreachable", is_flag=True,
              help="Also answer for a target above what the measured levels reach (the unreachable case).")
@click.option("--no-progress", is_flag=True,
              help="No progress on stderr (shown by default when stderr is a terminal).")
@handle_errors
@ends_cleanly_on_sigterm  # SIGTERM unwinds as Ctrl-C does: no staging folder left, the simulators stopped
def demo(out_dir: str, force: bool, lang: str | None, target_tps: float | None, show_unreachable: bool,
         no_progress: bool) -> None:
    """Run the whole pipeline on the built-in simulated endpoint (127.0.0.1, no API key):
    collect a small matrix, fill the workbook, recalculate it with the embedded engine,
    verify every formula cell, and print the coefficients, the verdict and the inverse answer."""
    from scm_xl.demo import check_out_dir, render, run_demo, starting_line

    check_out_dir(out_dir, force=force)  # refuse before saying anything else
    language = resolve_lang(lang)
    click.echo(starting_line(language), err=True)
    show = not no_progress and sys.stderr.isatty()
    with progress_display(show) as progress:
        result = run_demo(out_dir, target_tps=target_tps, lang=language, force=force,
                          show_unreachable=show_unreachable, quiet=not show, say=progress,
                          console=progress.console if progress is not None else None)
    click.echo(render(result))
    if not result.report.verification.ok:
        sys.exit(1)


commands = [demo]
