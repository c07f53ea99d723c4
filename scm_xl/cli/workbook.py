"""CLI: build template, fill, verify, predict, solve."""

from __future__ import annotations

import json
import sys

import click

from scm_xl.cli._common import handle_errors
from scm_xl.engines import ENGINE_NAMES

ENGINE_CHOICE = click.Choice(["auto", *ENGINE_NAMES])
DEFAULT_TEMPLATE = {"zh": "SCM_系数标定_模板.xlsx", "en": "SCM_calibration_template.xlsx"}


@click.group()
def build() -> None:
    """Build scm-xl artefacts."""


@build.command()
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Where to write the workbook.")
@click.option("--lang", type=click.Choice(["zh", "en"]), default="zh", show_default=True,
              help="Sheet names and labels.")
@click.option("--rows", type=click.IntRange(1, 100_000), help="Raw-data rows the formulas cover (default 200).")
@handle_errors
def template(output: str | None, lang: str, rows: int | None) -> None:
    """Build the empty calibration workbook: every coefficient, prediction,
    deviation and verdict a live formula over the raw-data sheet."""
    from scm_xl.workbook.build import build_template

    path = build_template(output or DEFAULT_TEMPLATE[lang], lang=lang, rows=rows)
    click.echo(f"wrote {path}")


def _print_report(report, json_path: str | None) -> None:
    from scm_xl.report import (
        analysis_to_dict, render_coefficients, render_consistency, render_verification, write_json,
    )

    for warning in report.warnings:
        click.echo(f"warning: {warning}", err=True)
    click.echo(render_coefficients(report.analysis))
    click.echo()
    click.echo(render_consistency(report.analysis))
    click.echo()
    click.echo(render_verification(report.verification))
    if json_path:
        write_json(json_path, analysis_to_dict(report.analysis, report.verification))


@click.command()
@click.argument("results", type=click.Path(dir_okay=False))
@click.option("--workbook", type=click.Path(dir_okay=False),
              help="Fill this existing scm-xl workbook, keeping its other sheets and hand-set cells.")
@click.option("-o", "--output", type=click.Path(dir_okay=False),
              help="Output workbook (default: RESULTS name with .xlsx, or the --workbook itself).")
@click.option("--engine", type=ENGINE_CHOICE, default="formulas", show_default=True,
              help="Recalculation engine; auto switches to libreoffice for large sheets.")
@click.option("--json", "json_path", type=click.Path(dir_okay=False), help="Write the JSON report here.")
@click.option("--lang", type=click.Choice(["zh", "en"]), default="zh", show_default=True,
              help="Language of a new workbook.")
@click.option("--force", is_flag=True, help="Overwrite an existing output without keeping a .bak copy.")
@click.option("--strict-physics/--physics-warnings", default=None,
              help="Exclude rows with physics warnings (sets the workbook switch); default: keep the workbook's.")
@handle_errors
def fill(results: str, workbook: str | None, output: str | None, engine: str, json_path: str | None,
         lang: str, force: bool, strict_physics: bool | None) -> None:
    """Write RESULTS (a results CSV) into the workbook, recalculate it with a
    real engine, and compare every formula cell with the Python reference.
    Exits 1 if any cell disagrees."""
    from scm_xl.workbook.fill import fill as run_fill

    report = run_fill(results, workbook=workbook, output=output, engine=engine, lang=lang,  # type: ignore[arg-type]
                      force=force, strict_physics=strict_physics)
    if report.backup:
        click.echo(f"kept the previous file as {report.backup}", err=True)
    click.echo(f"wrote {report.path}")
    _print_report(report, json_path)
    if not report.verification.ok:
        sys.exit(1)


@click.command()
@click.argument("workbook", type=click.Path(dir_okay=False))
@click.option("--engine", type=ENGINE_CHOICE, default="formulas", show_default=True)
@click.option("--json", "json_path", type=click.Path(dir_okay=False), help="Write the JSON report here.")
@handle_errors
def verify(workbook: str, engine: str, json_path: str | None) -> None:
    """Recalculate WORKBOOK as it stands (hand edits included) and compare every
    formula cell with the Python reference. Exits 1 on any disagreement."""
    from scm_xl.workbook.fill import verify as run_verify

    report = run_verify(workbook, engine=engine)
    _print_report(report, json_path)
    if not report.verification.ok:
        sys.exit(1)


@click.command()
@click.argument("source", type=click.Path(dir_okay=False))
@click.option("--concurrency", type=click.FloatRange(min=0, min_open=True), required=True)
@click.option("--max-tokens", type=click.IntRange(min=1), required=True)
@click.option("--model", help="Model (default: the base model).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--strict-physics/--physics-warnings", default=None,
              help="Exclude rows with physics warnings (default: the workbook's switch; off for a CSV).")
@handle_errors
def predict(source: str, concurrency: float, max_tokens: int, model: str | None, as_json: bool,
            strict_physics: bool | None) -> None:
    """Forward: the predicted TPS at a configuration. SOURCE is a results CSV or a filled workbook."""
    from scm_xl.model import predict as run_predict
    from scm_xl.report import prediction_to_dict
    from scm_xl.workbook.fill import analysis_from_source

    analysis, _ = analysis_from_source(source, strict_physics=strict_physics)
    prediction = run_predict(analysis.calibration, concurrency, max_tokens, model)
    if as_json:
        click.echo(json.dumps(prediction_to_dict(prediction)))
    elif prediction.tps is None:
        click.echo(f"unidentified: missing {', '.join(prediction.missing)}")
    else:
        click.echo(f"predicted TPS: {prediction.tps:.2f}")


@click.command()
@click.argument("source", type=click.Path(dir_okay=False))
@click.option("--target-tps", type=click.FloatRange(min=0, min_open=True), required=True)
@click.option("--max-tokens", type=click.IntRange(min=1), help="Output length (default: the base max_tokens).")
@click.option("--model", help="Model (default: the base model).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@handle_errors
def solve(source: str, target_tps: float, max_tokens: int | None, model: str | None, as_json: bool) -> None:
    """Inverse: the smallest measured concurrency whose predicted TPS meets the target."""
    from scm_xl.model import solve as run_solve
    from scm_xl.report import solution_to_dict
    from scm_xl.workbook.fill import analysis_from_source

    analysis, _ = analysis_from_source(source)
    length = max_tokens or analysis.calibration.base_max_tokens
    if length is None:
        from scm_xl.errors import UsageError

        raise UsageError("no base max_tokens could be calibrated; pass --max-tokens")
    solution = run_solve(analysis.calibration, target_tps, length, model)
    if as_json:
        click.echo(json.dumps(solution_to_dict(solution)))
    elif solution.reachable:
        click.echo(f"concurrency {solution.concurrency}: predicted TPS {solution.tps:.2f} "
                   f"(target {target_tps:g} at max_tokens {length})")
    else:
        best = f"; best reachable {solution.best_tps:.2f} at concurrency {solution.best_concurrency}" \
            if solution.best_tps is not None else ""
        click.echo(f"unreachable with the measured levels (target {target_tps:g} at max_tokens {length}){best}")


commands = [build, fill, verify, predict, solve]
