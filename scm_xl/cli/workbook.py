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
    from scm_xl.lsq import analyze as lsq_analyze
    from scm_xl.report import (
        analysis_to_dict, render_coefficients, render_consistency, render_holdout, render_verification, write_json,
    )

    for warning in report.warnings:
        click.echo(f"warning: {warning}", err=True)
    holdout = lsq_analyze(report.analysis.statuses, report.analysis.settings).report()
    click.echo(render_coefficients(report.analysis))
    click.echo()
    click.echo(render_consistency(report.analysis))
    click.echo(render_holdout(holdout))
    click.echo()
    click.echo(render_verification(report.verification))
    if json_path:
        write_json(json_path, analysis_to_dict(report.analysis, report.verification, holdout))


@click.command()
@click.argument("results", type=click.Path(dir_okay=False))
@click.option("--workbook", type=click.Path(dir_okay=False),
              help="Fill this existing scm-xl workbook, keeping its other sheets and hand-set cells.")
@click.option("-o", "--output", type=click.Path(dir_okay=False),
              help="Output workbook (default: RESULTS name with .xlsx, or the --workbook itself).")
@click.option("--engine", type=ENGINE_CHOICE, default="auto", show_default=True,
              help="Recalculation engine. auto: the embedded formulas engine, or libreoffice above 500 raw "
                   "rows when it is installed (it says so).")
@click.option("--json", "json_path", type=click.Path(dir_okay=False), help="Write the JSON report here.")
@click.option("--lang", type=click.Choice(["zh", "en"]), default="zh", show_default=True,
              help="Language of a new workbook.")
@click.option("--force", is_flag=True, help="Overwrite an existing output without keeping a .bak copy.")
@click.option("--strict-physics/--physics-warnings", default=None,
              help="Exclude rows with physics warnings (sets the workbook switch); default: keep the workbook's.")
@click.option("--method", type=click.Choice(["chain", "lsq"]), default=None,
              help="The workbook's method cell: which coefficients its forward and inverse answers use "
                   "(default: keep the workbook's; chain in a new one).")
@handle_errors
def fill(results: str, workbook: str | None, output: str | None, engine: str, json_path: str | None,
         lang: str, force: bool, strict_physics: bool | None, method: str | None) -> None:
    """Write RESULTS (a results CSV) into the workbook, recalculate it with a
    real engine, and compare every formula cell with the Python reference.
    Exits 1 if any cell disagrees."""
    from scm_xl.workbook.fill import fill as run_fill

    report = run_fill(results, workbook=workbook, output=output, engine=engine, lang=lang,  # type: ignore[arg-type]
                      force=force, strict_physics=strict_physics, method=method)
    if report.backup:
        click.echo(f"kept the previous file as {report.backup}", err=True)
    click.echo(f"wrote {report.path}")
    _print_report(report, json_path)
    if not report.verification.ok:
        sys.exit(1)


@click.command()
@click.argument("workbook", type=click.Path(dir_okay=False))
@click.option("--engine", type=ENGINE_CHOICE, default="auto", show_default=True,
              help="Recalculation engine. auto: the embedded formulas engine, or libreoffice above 500 raw "
                   "rows when it is installed (it says so).")
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


METHOD_CHOICE = click.Choice(["chain", "lsq"])
STRICT_OPTION = click.option(
    "--strict-physics/--physics-warnings", default=None,
    help="Exclude rows with physics warnings (default: the workbook's switch; off for a CSV).")


def _int_list(text: str | None, what: str) -> tuple[int, ...] | None:
    from scm_xl.errors import UsageError

    if text is None:
        return None
    try:
        values = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise UsageError(f"{what} must be comma-separated whole numbers, got {text!r}") from None
    if not values or any(v < 1 for v in values):
        raise UsageError(f"{what} must be positive whole numbers, got {text!r}")
    return values


@click.command()
@click.argument("source", type=click.Path(dir_okay=False))
@click.option("--concurrency", type=click.FloatRange(min=0, min_open=True), required=True)
@click.option("--max-tokens", type=click.IntRange(min=1), required=True)
@click.option("--model", help="Model (default: the base model).")
@click.option("--method", type=METHOD_CHOICE, default="chain", show_default=True,
              help="chain: the article's one-row-per-coefficient chain; lsq: least squares on all rows, "
                   "with a 90% interval, interpolating between measured concurrency levels.")
@click.option("--extrapolate", is_flag=True, help="lsq: allow concurrency outside the measured range.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@STRICT_OPTION
@handle_errors
def predict(source: str, concurrency: float, max_tokens: int, model: str | None, method: str,
            extrapolate: bool, as_json: bool, strict_physics: bool | None) -> None:
    """Forward: the predicted TPS at a configuration. SOURCE is a results CSV or a filled workbook."""
    from scm_xl.report import prediction_to_dict
    from scm_xl.workbook.fill import analysis_from_source

    analysis, _ = analysis_from_source(source, strict_physics=strict_physics)
    if method == "chain":
        from scm_xl.model import predict as run_predict

        data = prediction_to_dict(run_predict(analysis.calibration, concurrency, max_tokens, model))
    else:
        from scm_xl.lsq import fit

        forecast = fit(analysis.statuses, analysis.settings).forecast(concurrency, max_tokens, model,
                                                                      extrapolate=extrapolate)
        data = {"tps": forecast.tps, "missing": list(forecast.missing), "method": "lsq",
                "tps_interval": list(forecast.mean_interval) if forecast.mean_interval else None,
                "tps_prediction_interval": list(forecast.prediction_interval)
                if forecast.prediction_interval else None,
                "interpolated": forecast.interpolated, "extrapolated": forecast.extrapolated}
    if as_json:
        click.echo(json.dumps(data))
    elif data["tps"] is None:
        click.echo(f"unidentified: missing {', '.join(data['missing'])}")
    else:
        interval = data.get("tps_interval")
        extra = f" (90% interval {interval[0]:.2f} to {interval[1]:.2f})" if interval else ""
        click.echo(f"predicted TPS: {data['tps']:.2f}{extra}")


@click.command()
@click.argument("source", type=click.Path(dir_okay=False))
@click.option("--target-tps", type=click.FloatRange(min=0, min_open=True), required=True)
@click.option("--max-tokens", type=click.IntRange(min=1), help="Output length (default: the base max_tokens).")
@click.option("--model", help="Model (default: the base model).")
@click.option("--method", type=METHOD_CHOICE, default=None,
              help="Search every knob with this method's model (default: the article's inverse, "
                   "smallest measured concurrency at one max_tokens and model).")
@click.option("--max-latency-p95", type=click.FloatRange(min=0, min_open=True),
              help="Limit on the measured P95 latency (s) of the chosen configuration.")
@click.option("--max-ttft-p95", type=click.FloatRange(min=0, min_open=True),
              help="Limit on the measured P95 time to first token (s).")
@click.option("--max-concurrency", type=click.IntRange(min=1), help="Highest concurrency allowed.")
@click.option("--allowed-max-tokens", help="Comma-separated max_tokens values allowed.")
@click.option("--allowed-models", help="Comma-separated models allowed.")
@click.option("--rate-limit", type=click.IntRange(min=1),
              help="Concurrency at which the provider starts answering 429 (default: where the data saw 429s).")
@click.option("--extrapolate", is_flag=True, help="Allow concurrency beyond the measured range (marked).")
@click.option("--conservative", is_flag=True, help="lsq: judge on the lower end of the 90% interval.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@STRICT_OPTION
@handle_errors
def solve(source: str, target_tps: float, max_tokens: int | None, model: str | None, method: str | None,
          max_latency_p95: float | None, max_ttft_p95: float | None, max_concurrency: int | None,
          allowed_max_tokens: str | None, allowed_models: str | None, rate_limit: int | None,
          extrapolate: bool, conservative: bool, as_json: bool, strict_physics: bool | None) -> None:
    """Inverse: the configuration that reaches a target TPS.

    Plain, it is the article's inverse: the smallest measured concurrency whose predicted
    TPS meets the target at one max_tokens and model. With --method or any constraint it
    searches every knob (concurrency, max_tokens, model) for the cheapest configuration
    that meets the target under the constraints, names the binding constraint, and gives
    the dual answer: the best TPS under the constraints."""
    from scm_xl.errors import UsageError
    from scm_xl.workbook.fill import analysis_from_source

    analysis, rows = analysis_from_source(source, strict_physics=strict_physics)
    across = method is not None or any(v is not None for v in (
        max_latency_p95, max_ttft_p95, max_concurrency, allowed_max_tokens, allowed_models, rate_limit)) \
        or extrapolate or conservative
    if not across:
        from scm_xl.model import solve as run_solve
        from scm_xl.report import solution_to_dict

        length = max_tokens or analysis.calibration.base_max_tokens
        if length is None:
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
        return

    from scm_xl import constrained

    lengths = _int_list(allowed_max_tokens, "--allowed-max-tokens")
    if max_tokens is not None:
        lengths = (max_tokens,) if lengths is None else tuple(v for v in lengths if v == max_tokens)
    models = tuple(m.strip() for m in allowed_models.split(",") if m.strip()) if allowed_models else None
    if model is not None:
        models = (model,) if models is None else tuple(m for m in models if m.casefold() == model.casefold())
    constraints = constrained.Constraints(
        max_latency_p95_s=max_latency_p95, max_ttft_p95_s=max_ttft_p95, max_concurrency=max_concurrency,
        max_tokens=lengths, models=models, rate_limit_concurrency=rate_limit)
    if (method or "chain") == "lsq":
        from scm_xl.lsq import fit

        surface = constrained.lsq_surface(fit(analysis.statuses, analysis.settings))
    else:
        surface = constrained.chain_surface(analysis.calibration)
    result = constrained.solve(surface, target_tps, rows=rows, constraints=constraints, extrapolate=extrapolate,
                               conservative=conservative)
    best = result.cheapest
    data = {"concurrency": best.concurrency if best else None, "tps": best.tps if best else None,
            "reachable": result.reachable, "max_tokens": best.max_tokens if best else None,
            "model": best.model if best else None, **result.report()}
    if as_json:
        click.echo(json.dumps(data))
        return
    if best:
        marks = ", ".join(m for m, flag in (("interpolated", best.interpolated),
                                            ("extrapolated", best.extrapolated)) if flag)
        interval = f", 90% interval {best.mean_interval[0]:.2f} to {best.mean_interval[1]:.2f}" \
            if best.mean_interval else ""
        click.echo(f"cheapest: concurrency {best.concurrency}, max_tokens {best.max_tokens}, model {best.model}: "
                   f"predicted TPS {best.tps:.2f}{interval}{f' ({marks})' if marks else ''}")
    else:
        click.echo(f"unreachable: no configuration reaches {target_tps:g} TPS under the constraints")
    click.echo(f"binding: {', '.join(result.binding) or '-'}")
    if result.best:
        click.echo(f"best under the constraints: {result.best.tps:.2f} TPS at concurrency {result.best.concurrency}, "
                   f"max_tokens {result.best.max_tokens}, model {result.best.model}"
                   f" (bound by {', '.join(result.best_binding) or '-'})")
    for note in result.notes:
        click.echo(f"note: {note}")


commands = [build, fill, verify, predict, solve]
