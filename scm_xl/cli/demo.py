"""CLI: demo, the main job on the built-in simulator."""

from __future__ import annotations

import sys

import click

from scm_xl.cli._common import handle_errors


@click.command()
@click.option("--out", "out_dir", default="scm-demo", show_default=True, type=click.Path(file_okay=False),
              help="Folder for results.csv, requests.csv and workbook.xlsx.")
@click.option("--target-tps", default=500.0, show_default=True, type=click.FloatRange(min=0, min_open=True),
              help="Target TPS for the inverse answer.")
@click.option("--progress/--no-progress", default=False, help="Show the collector's progress bar.")
@handle_errors
def demo(out_dir: str, target_tps: float, progress: bool) -> None:
    """Run the whole pipeline on the built-in simulated endpoint (127.0.0.1, no API key):
    collect a small matrix, fill the workbook, recalculate it with the embedded engine,
    verify every formula cell, and print the coefficients, the verdict and the inverse answer."""
    from scm_xl.demo import render, run_demo

    click.echo("Running the demo on the built-in simulator (127.0.0.1 only, no API key) ...", err=True)
    result = run_demo(out_dir, target_tps=target_tps, quiet=not progress)
    click.echo(render(result))
    if not result.report.verification.ok:
        sys.exit(1)


commands = [demo]
