"""CLI: build template, fill, verify, predict, solve.

Each command checks its outputs against the overwrite policy (`scm_xl.outputs`) and any
workbook it reads against the zip-bomb limits (`scm_xl.safety`) before the library
runs, makes the library call, and prints what comes back (`scm_xl.report`).

fill and verify name each step on stderr as it starts (`step_lines`): a status line on a
terminal, one plain line per step elsewhere (a CI log, a pipe), so a run of minutes is
never silent. SIGTERM (`timeout`, a cancelled CI job) ends them as Ctrl-C does, through
their cleanup (`ends_cleanly_on_sigterm`): no temporary file is left beside the output.

Long because the five commands share their reading, checking and printing helpers; solve has
three answers (the article's inverse, the search over every knob, and the capacity plan under a
per-request SLO), each printed with what it rests on.
"""

from __future__ import annotations

import contextlib
import functools
import re
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from scm_xl.cli._common import (
    LANG_HELP, FiniteFloat, Progress, handle_errors, lang_option, parse_text_list,
    progress_display, remark, resolve_lang,
)
from scm_xl.cli.plan import int_list
from scm_xl.engines import ENGINE_NAMES

if TYPE_CHECKING:
    from scm_xl.capacity import Pricing
    from scm_xl.constrained import SolveRequest
    from scm_xl.goodput import Slo
    from scm_xl.latency import LatencyModel
    from scm_xl.methods import MethodChoice
    from scm_xl.model import Analysis
    from scm_xl.results import ResultRow
    from scm_xl.rules import Lang
    from scm_xl.workbook.fill import WorkbookReport

ENGINE_CHOICE = click.Choice(["auto", *ENGINE_NAMES])
DEFAULT_TEMPLATE = {"zh": "SCM_系数标定_模板.xlsx", "en": "SCM_calibration_template.xlsx"}
WORKBOOK_INPUT_SUFFIXES = (".xlsx", ".xlsm")
FORCE_OPTION = click.option("--force", is_flag=True,
                            help="Replace an output file that already exists (otherwise refused).")
PROGRESS_OPTION = click.option("--no-progress", "-q", "no_progress", is_flag=True,
                               help="Name no steps on stderr (by default a status line on a terminal, "
                                    "one plain line per step elsewhere, e.g. in a CI log).")


def capacity_options(lead: str, default: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """--rpm, --tpm, --price-in, --price-out, --gpu-hour-price and --gpus, one definition for
    solve and fill: `lead` says what they set, `default` where a limit not given comes from
    ({header}: the provider's header)."""
    options = [
        click.option("--rpm", type=FiniteFloat(0), help=f"{lead}the provider's requests-per-minute limit "
                     f"(default: {default.format(header='x-ratelimit-limit-requests')})."),
        click.option("--tpm", type=FiniteFloat(0), help=f"{lead}the provider's tokens-per-minute limit "
                     f"(default: {default.format(header='x-ratelimit-limit-tokens')})."),
        click.option("--price-in", type=FiniteFloat(0, open=False), help=f"{lead}price per million input tokens."),
        click.option("--price-out", type=FiniteFloat(0, open=False), help=f"{lead}price per million output tokens."),
        click.option("--gpu-hour-price", type=FiniteFloat(0, open=False),
                     help=f"{lead}price of one GPU per hour (with --gpus)."),
        click.option("--gpus", type=click.IntRange(min=1), help=f"{lead}GPUs per replica (with --gpu-hour-price)."),
    ]

    def apply(func: Callable[..., Any]) -> Callable[..., Any]:
        for option in reversed(options):
            func = option(func)
        return func
    return apply


COST_NEEDS_PRICE = "--minimise cost needs a price: --price-in and --price-out, or --gpu-hour-price and --gpus"


def minimise_option(lead: str, default: str | None, keep: str = "") -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """--minimise, one definition for solve and fill (capacity.MINIMISE): `default` None with
    `keep` saying what a value not given leaves."""
    from scm_xl.capacity import MINIMISE

    return click.option("--minimise", type=click.Choice(MINIMISE), default=default, show_default=default is not None,
                        help=f"{lead}choose the fewest replicas and slots, or the lowest cost (needs a price)"
                             + (f" (default: {keep})" if keep else "") + ".")


def pricing_of(price_in: float | None, price_out: float | None, gpu_hour_price: float | None,
               gpus: int | None) -> Pricing | None:
    """The capacity.Pricing the price options give (None: none given); UsageError, in the options'
    spelling, for a partial or double pricing."""
    from scm_xl.capacity import Pricing
    from scm_xl.errors import UsageError

    if all(v is None for v in (price_in, price_out, gpu_hour_price, gpus)):
        return None
    try:
        return Pricing(price_in=price_in, price_out=price_out, gpu_hour_price=gpu_hour_price, gpus=gpus)
    except UsageError as exc:  # the library's field names, as the options spell them
        text = str(exc)
        for field_name in ("gpu_hour_price", "price_in", "price_out", "gpus"):
            text = re.sub(rf"\b{field_name}\b", "--" + field_name.replace("_", "-"), text)
        raise UsageError(text) from None


ENGINE_HELP = ("Recalculation engine. auto: IronCalc (embedded, at every size); without the ironcalc "
               "package LibreOffice, else the slow pure-Python formulas engine (it says which and why).")


@contextlib.contextmanager
def step_lines(enabled: bool, first: str, lang: Lang = "en") -> Iterator[Progress | None]:
    """The progress callback for a long command: on a terminal the status line of
    `progress_display`; elsewhere one plain line per step on stderr with the seconds since the
    start (no spinner, no carriage returns: a CI log shows how far a run got and what is slow).
    Each step is said in `lang` (the library names its steps with report_texts.Text).
    Yields None when disabled."""
    from scm_xl.report_texts import say

    if not enabled:
        yield None
        return
    if sys.stderr.isatty():
        with progress_display(True, str(say(first, lang))) as progress:
            yield (lambda step: progress(str(say(step, lang)))) if progress is not None else None
        return
    start = time.perf_counter()

    def line(step: str) -> None:
        click.echo(f"scm-xl [{time.perf_counter() - start:7.1f} s] {say(step, lang)}", err=True)

    line(first)
    yield line


class Terminated(SystemExit):
    """SIGTERM arrived: the command unwinds (its `finally` blocks remove temporary files) and
    exits 143, the status SIGTERM's default action would have given."""


def ends_cleanly_on_sigterm(func: Callable[..., Any]) -> Callable[..., Any]:
    """Run a command with SIGTERM raising `Terminated` (SystemExit), so it ends through its cleanup,
    as Ctrl-C's KeyboardInterrupt does. Only in the main thread and where SIGTERM has its default
    action: a program that handles SIGTERM itself keeps its handler. A second SIGTERM during the
    cleanup kills at once (the default action is back)."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if threading.current_thread() is not threading.main_thread() or \
                signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
            return func(*args, **kwargs)

        from scm_xl.outputs import raise_or_hold  # imported here: a signal handler should not import

        def terminate(signum: int, frame: object) -> None:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            raise_or_hold(Terminated(128 + signum))  # held for a moment while a staged file is made

        # Every temporary file of this run (ours, openpyxl's, Python's own probe of the folder) goes in
        # one folder of its own, removed at the end: a signal that lands between a library's making a
        # temporary file and its noting it for removal then leaves nothing behind either
        before = tempfile.tempdir
        own = tempfile.mkdtemp(prefix="scm-xl-run-")
        tempfile.tempdir = own
        signal.signal(signal.SIGTERM, terminate)
        try:
            return func(*args, **kwargs)
        except Terminated:
            click.echo("Terminated.", err=True)
            raise
        finally:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            tempfile.tempdir = before
            shutil.rmtree(own, ignore_errors=True)

    return wrapper


@click.group()
def build() -> None:
    """Build scm-xl artefacts."""


@build.command()
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Where to write the workbook.")
@lang_option("Sheet names and labels. ")
@click.option("--rows", type=click.IntRange(1, 100_000), help="Raw-data rows the formulas cover (default 200).")
@FORCE_OPTION
@handle_errors
def template(output: str | None, lang: Lang | None, rows: int | None, force: bool) -> None:
    """Build the empty calibration workbook: every coefficient, prediction,
    deviation and verdict a live formula over the raw-data sheet."""
    lang = resolve_lang(lang)
    from scm_xl.outputs import WORKBOOK_SUFFIXES, Output, check_outputs, write_target
    from scm_xl.workbook.registry import build_template

    target = output or DEFAULT_TEMPLATE[lang]
    check_outputs([Output("-o", target, WORKBOOK_SUFFIXES, "workbook")], force=force)
    build_template(write_target(target), lang=lang, rows=rows)  # through a symlink, not over it
    click.echo(_words(lang)["wrote"].format(path=target))


def _check_workbook_input(path: str | Path) -> None:
    """Refuse a zip bomb before any parser opens the workbook."""
    from scm_xl.safety import check_xlsx

    check_xlsx(path)


def _latency_of(report: WorkbookReport) -> LatencyModel | None:
    """The latency model of a fill/verify report's rows (None when no row recorded TTFT and ITL)."""
    from scm_xl.latency import latency_model

    model = latency_model([row for _, row in report.inputs.rows])
    return model if model.available else None


def _words(lang: Lang) -> dict[str, str]:
    """What these commands print, in `lang` (scm_xl.report_texts, the one home of both languages)."""
    from scm_xl.report_texts import words

    return words(lang)


def _print_report(report: WorkbookReport, holdout: dict[str, Any], json_path: str | None, failed: str = "",
                  lang: Lang = "en") -> None:
    """Print the report (and write the JSON); exit 1 with `failed` (or nothing more) when the
    workbook disagrees with the reference."""
    from scm_xl.errors import CheckFailed
    from scm_xl.report import (
        analysis_to_dict, render_coefficients, render_consistency, render_holdout, render_latency, render_physics, render_verification, render_workbook_answers, write_json,
    )
    from scm_xl.terminal import wrapped

    t = _words(lang)
    for warning in report.warnings:
        click.echo(remark("warning", warning, lang), err=True)
    for note in report.notes:  # rows the workbook could not use, and why
        click.echo(remark("note", note, lang), err=True)
    click.echo(render_coefficients(report.analysis, lang=lang))
    click.echo()
    click.echo(render_consistency(report.analysis, lang=lang))
    click.echo(render_holdout(holdout, lang=lang))
    latency = _latency_of(report)
    if latency is not None:
        latency_report = latency.report()
        if lang != "en" and latency_report.get("knee"):
            latency_report["knee"] = _knee_words(latency, lang)
        click.echo(render_latency(latency_report, lang=lang))
    physics = render_physics(report.analysis, lang=lang)
    if physics:
        click.echo()
        click.echo(physics)
    click.echo()
    click.echo(render_verification(report.verification, lang=lang))
    if report.verification.ok:
        for line in render_workbook_answers(report.layout, report.inputs, report.verification.values, lang=lang):
            click.echo(wrapped(line, indent="  "))
        import os

        shown = os.path.relpath(report.path)
        shown = shown if not shown.startswith("..") else str(report.path)
        click.echo(wrapped(t["next_open"].format(path=shown, sheet=report.layout.title("summary")), indent="  "))
    if json_path:
        data = analysis_to_dict(report.analysis, report.verification, holdout)
        data["latency"] = latency.report() if latency is not None else None
        write_json(json_path, data)
    if not report.verification.ok:
        raise CheckFailed(failed)  # the mismatch is printed above; exit 1


@click.command()
@click.argument("results", nargs=-1, type=click.Path(dir_okay=False))
@click.option("--workbook", type=click.Path(dir_okay=False),
              help="Fill this existing scm-xl workbook, keeping its other sheets and hand-set cells "
                   "(updating it in place needs --force; or give -o).")
@click.option("-o", "--output", type=click.Path(dir_okay=False),
              help="Output workbook (default: the first RESULTS name with .xlsx, or the --workbook itself).")
@click.option("--engine", type=ENGINE_CHOICE, default="auto", show_default=True, help=ENGINE_HELP)
@click.option("--json", "json_path", type=click.Path(dir_okay=False), help="Write the JSON report here.")
@click.option("--html", "html_path", type=click.Path(dir_okay=False),
              help="Also write the HTML report here (as `scm-xl report` does).")
@lang_option("Language of a new workbook. ")
@FORCE_OPTION
@click.option("--rename-duplicates", is_flag=True,
              help="Several RESULTS: keep an exp_id used in two files, renaming the later one "
                   "EXP@FILE (otherwise refused).")
@click.option("--strict-physics/--physics-warnings", default=None,
              help="Exclude rows with physics warnings (sets the workbook switch); default: keep the workbook's.")
@click.option("--method", type=click.Choice(["chain", "lsq"]), default=None,
              help="The workbook's method cell: which coefficients its forward and inverse answers use "
                   "(default: keep the workbook's; chain in a new one).")
@click.option("--slo", help="The Summary's per-request SLO inputs, e.g. ttft=0.5,tpot=0.05,e2el=10 (seconds; "
              "500ms for milliseconds; default: keep the workbook's, none in a new one).")
@click.option("--attainment", type=click.FloatRange(0, 1, min_open=True, max_open=True), default=None,
              help="The Summary's attainment target (default: keep the workbook's; 0.95 in a new one).")
@capacity_options("The Summary's ", "keep the workbook's; in a new one the {header} the provider sent")
@minimise_option("The Summary's plan: ", None, "keep the workbook's; concurrency in a new one")
@PROGRESS_OPTION
@handle_errors
@ends_cleanly_on_sigterm
def fill(results: tuple[str, ...], workbook: str | None, output: str | None, engine: str, json_path: str | None,
         html_path: str | None, lang: str | None, force: bool, rename_duplicates: bool, strict_physics: bool | None,
         method: str | None, slo: str | None, attainment: float | None, rpm: float | None, tpm: float | None,
         price_in: float | None, price_out: float | None, gpu_hour_price: float | None, gpus: int | None,
         minimise: str | None, no_progress: bool) -> None:
    """Write RESULTS (one or more results CSVs, merged) into the workbook,
    recalculate it with a real engine, and compare every formula cell with the
    Python reference. Exits 1 if any cell disagrees; that workbook then replaces
    nothing and is left beside the output as NAME.failed.xlsx. With no RESULTS,
    --workbook is rebuilt around the rows typed into it."""
    from scm_xl.outputs import HTML_SUFFIXES, JSON_SUFFIXES, WORKBOOK_SUFFIXES, Output, check_outputs, write_target
    from scm_xl.results import refuse_spreadsheet_file
    from scm_xl.workbook.fill import fill as run_fill

    if not results and workbook is None:
        from scm_xl.errors import UsageError

        raise UsageError("give a results CSV (or several), or --workbook X to rebuild X around the rows typed into it")
    parsed_slo = None
    if slo is not None:
        from scm_xl.goodput import DEFAULT_ATTAINMENT, parse_slo

        parsed_slo = parse_slo(slo, attainment if attainment is not None else DEFAULT_ATTAINMENT)
    from scm_xl.workbook.slo_sheet import capacity_inputs

    pricing = pricing_of(price_in, price_out, gpu_hour_price, gpus)
    if minimise == "cost" and pricing is None and workbook is None:  # a new workbook has no price to keep
        from scm_xl.errors import UsageError

        raise UsageError(COST_NEEDS_PRICE)
    typed_capacity = capacity_inputs(rpm=rpm, tpm=tpm, pricing=pricing, minimise=minimise)
    for path in results:
        refuse_spreadsheet_file(path)
    workbook_suffixes = WORKBOOK_SUFFIXES
    if workbook is not None:
        _check_workbook_input(workbook)
        if Path(workbook).suffix.lower() == ".xlsm":
            workbook_suffixes = (".xlsm",)
    # -o naming the --workbook itself is the same request as leaving -o out: update it in place.
    in_place = workbook is not None and (output is None or write_target(output) == write_target(workbook))
    target = output or workbook or Path(results[0]).stem + ".xlsx"
    if in_place and not force:
        from scm_xl.errors import UsageError

        raise UsageError(f"--workbook {workbook} would be updated in place: pass --force to replace it, "
                         "or -o NEW.xlsx to write the result elsewhere")
    check_outputs([Output("-o", target, workbook_suffixes, "workbook"),
                   Output("--json", json_path, JSON_SUFFIXES, "JSON report"),
                   Output("--html", html_path, HTML_SUFFIXES, "HTML report")],
                  inputs=[*results, None if in_place else workbook], force=force)

    existed = write_target(target).exists()
    language = resolve_lang(lang)
    t = _words(language)
    first = t["step_read"].format(path=t["list_sep"].join(results)) if results \
        else t["step_rebuild"].format(path=workbook)
    with step_lines(not no_progress, first, language) as progress:
        # The policy is applied above; without --force the output is also created exclusively at
        # the end (another run may write it meanwhile).
        options: dict[str, Any] = dict(workbook=workbook, output=write_target(target), engine=engine,
                                       lang=language,
                                       strict_physics=strict_physics, method=method, progress=progress,
                                       force=force, slo=parsed_slo, attainment=attainment)
        if typed_capacity:
            options["capacity"] = typed_capacity
        report = run_fill(list(results) if len(results) != 1 else results[0], rename_duplicates=rename_duplicates,
                          **options)
    set_aside = report.set_aside
    failed = ""
    if set_aside is None:
        click.echo(t["wrote"].format(path=target))
    else:
        beside = Path(target).with_name(Path(set_aside).name)  # as the user named the folder, where it is the same
        shown = beside if write_target(beside) == Path(set_aside) else set_aside
        failed = t["failed_verification"].format(
            target=target, what=t["left_as_it_was" if existed else "not_written"], shown=shown)
    if html_path is not None:
        _write_html(html_path, report)
        click.echo(t["wrote"].format(path=html_path))
    _print_report(report, report.holdout, json_path, failed, language)


def _write_html(path: str, report: WorkbookReport) -> None:
    from scm_xl.htmlreport import write_report
    from scm_xl.outputs import write_target

    write_report(report, write_target(path))


@click.command()
@click.argument("workbook", type=click.Path(dir_okay=False))
@click.option("--engine", type=ENGINE_CHOICE, default="auto", show_default=True, help=ENGINE_HELP)
@click.option("--json", "json_path", type=click.Path(dir_okay=False), help="Write the JSON report here.")
@FORCE_OPTION
@PROGRESS_OPTION
@lang_option()
@handle_errors
@ends_cleanly_on_sigterm
def verify(workbook: str, engine: str, json_path: str | None, force: bool, no_progress: bool,
           lang: str | None) -> None:
    """Recalculate WORKBOOK as it stands (hand edits included) and compare every
    formula cell with the Python reference. Exits 1 on any disagreement."""
    from scm_xl.outputs import JSON_SUFFIXES, Output, check_outputs
    from scm_xl.workbook.fill import verify as run_verify

    check_outputs([Output("--json", json_path, JSON_SUFFIXES, "JSON report")], inputs=[workbook], force=force)
    _check_workbook_input(workbook)
    language = resolve_lang(lang)
    t = _words(language)
    with step_lines(not no_progress, t["step_read"].format(path=workbook), language) as progress:
        report = run_verify(workbook, engine=engine, progress=progress)
    _print_report(report, report.holdout, json_path, lang=language)


# Why the method that answers without --method does (the workbook's method cell; chain for a CSV).
DEFAULT_METHOD_WHY = _words("en")["why_default"]
SEARCH_DEFAULT_WHY = _words("en")["why_search_default"]  # solve's search without --method
METHOD_CHOICE = click.Choice(["chain", "lsq"])
METHOD_ANY_CHOICE = click.Choice(["auto", "chain", "lsq", "latency"])
STRICT_OPTION = click.option(
    "--strict-physics/--physics-warnings", default=None,
    help="Exclude rows with physics warnings (default: the workbook's switch; off for a CSV).")


def _method_why(choice: MethodChoice, requested: str, lang: Lang) -> str:
    """Why the method answered, as printed (the JSON keeps choice.why, in English): the default or
    --method in `lang`; auto's reasons (scm_xl.methods) as the library words them."""
    if lang == "en":
        return str(choice.why)
    if choice.why == DEFAULT_METHOD_WHY:
        return _words(lang)["why_default"]
    if choice.why == SEARCH_DEFAULT_WHY:
        return _words(lang)["why_search_default"]
    if requested != "auto":
        return _words(lang)["why_asked"]
    from scm_xl.htmlreport.latency_section import choice_words
    from scm_xl.htmlreport.texts import PAGE

    if choice.why == choice_words(choice, PAGE["en"]):  # the hold-out ranking, in the report page's words
        return choice_words(choice, PAGE[lang])
    if choice.why == PAGE["en"]["js"]["why_no_latency"]:
        return str(PAGE[lang]["js"]["why_no_latency"])
    return str(choice.why)


def _knee_words(latency: LatencyModel, lang: Lang, model: str | None = None) -> str | None:
    """The latency model's knee (of `model`, else of every model, as `LatencyModel.knee_text`) in
    `lang`: the report page's words (htmlreport.latency_section.knee_words) where not English."""
    if lang == "en" and model is None:
        return str(latency.knee_text()) if latency.knee_text() else None
    from scm_xl.htmlreport.latency_section import knee_words
    from scm_xl.htmlreport.texts import PAGE

    fits = [latency.fit_for(model)] if model is not None else list(latency.fits.values())
    texts = [knee_words(fit.knee, PAGE[lang]) for fit in fits if fit is not None]
    if model is None and len(fits) > 1:
        texts = [f"{fit.model}{': ' if lang == 'en' else '：'}{text}"
                 for fit, text in zip(latency.fits.values(), texts)]  # model None: fits are these
    return ("; " if lang == "en" else "；").join(texts) or None


def _marks(data: dict[str, Any], t: dict[str, str]) -> list[str]:
    """An answer's interpolated / extrapolated marks in words."""
    marks = [t["interpolated"]] if data.get("interpolated") else []
    if data.get("extrapolated"):
        marks.append(t["extrapolated_at"].format(what=", ".join(data["extrapolated"]))
                     if isinstance(data["extrapolated"], list) else t["extrapolated"])
    return marks


def _analysis_of(source: str, strict_physics: bool | None) -> tuple[Analysis, list[ResultRow]]:
    from scm_xl.workbook.fill import analysis_from_source

    if Path(source).suffix.lower() in WORKBOOK_INPUT_SUFFIXES:
        _check_workbook_input(source)
    return analysis_from_source(source, strict_physics=strict_physics)


def _holdout_for_answers(analysis: Analysis) -> dict[str, Any]:
    from scm_xl.lsq import least_squares_analysis

    return least_squares_analysis(analysis.statuses, analysis.settings).report()


def _latency_caveats(caveats: dict[str, Any], latency: LatencyModel) -> None:
    """An answer of the latency model rests on its own hold-out (over every prompt level), not on
    the chain's measured rows."""
    holdout = latency.holdout.as_dict()
    caveats.update(holdout_method="latency", holdout_mape_pct=holdout["loo_mape_pct"],
                   holdout_max_pct=holdout["loo_max_pct"], holdout_rows=holdout["loo_rows"],
                   holdout_verdict=holdout["verdict"], measured_rows=[])


def _choose(analysis: Analysis, rows: Sequence[ResultRow], method: str,
            prompt_tokens: float | None) -> tuple[dict[str, Any], LatencyModel | None, MethodChoice]:
    """(the least-squares report, the latency model, the method choice) for a forward or inverse
    question (`scm_xl.methods.choose_method`)."""
    from scm_xl.latency import latency_model
    from scm_xl.methods import base_prompt, choose_method

    lsq_report = _holdout_for_answers(analysis)
    latency = latency_model(rows) if method in ("auto", "latency") else None
    choice = choose_method(method, analysis, lsq_report, latency, prompt_tokens=prompt_tokens,
                           base=base_prompt(analysis, rows))
    return lsq_report, latency, choice


@click.command()
@click.argument("source", type=click.Path(dir_okay=False))
@click.option("--concurrency", type=FiniteFloat(0), required=True, help="Concurrent requests (slots) to predict at.")
@click.option("--max-tokens", type=click.IntRange(min=1), required=True, help="Output length (max_tokens).")
@click.option("--prompt-tokens", type=FiniteFloat(0),
              help="The workload's prompt length in tokens (default: the base prompt level).")
@click.option("--model", help="Model (default: the base model).")
@click.option("--method", type=METHOD_ANY_CHOICE, default=None,
              help="chain: the article's one-row-per-coefficient chain; lsq: least squares on all rows, "
                   "with a 90% interval, interpolating between measured concurrency levels; latency: "
                   "TTFT + (L - 1) x ITL and Little's law, over prompt length too, up to the knee; "
                   "auto: the one with the lowest leave-one-out error that can answer (default: the workbook's "
                   "method cell, chain for a CSV, as every surface answers; auto with --prompt-tokens).")
@click.option("--extrapolate", is_flag=True, help="lsq: allow concurrency outside the measured range.")
@click.option("--slo", help="Per-request SLO, e.g. ttft=0.5,e2el=10 (seconds): the attainment at this "
              "configuration from the per-request CSV beside SOURCE, measured there, or between measured "
              "concurrency levels predicted from the nearest level's requests by the latency model.")
@click.option("--attainment", type=click.FloatRange(0, 1, min_open=True, max_open=True), default=0.95,
              show_default=True, help="With --slo: the attainment target.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@STRICT_OPTION
@lang_option()
@handle_errors
def predict(source: str, concurrency: float, max_tokens: int, prompt_tokens: float | None, model: str | None,
            method: str | None, extrapolate: bool, slo: str | None, attainment: float, as_json: bool,
            strict_physics: bool | None, lang: str | None) -> None:
    """Forward: the predicted TPS at a configuration, with what it rests on (a
    measured row there, the verdict, the hold-out error) and which method answered
    and why. SOURCE is a results CSV or a filled workbook. Exits 1 when the data
    cannot identify the answer."""
    from scm_xl.errors import CheckFailed
    from scm_xl.methods import base_prompt, other_prompt_level
    from scm_xl.report import (
        caveats_to_dict, forecast_to_dict, prediction_to_dict, render_caveats, to_json, unidentified_hints,
    )
    from scm_xl.terminal import wrapped

    parsed_slo = None
    if slo is not None:
        from scm_xl.goodput import parse_slo

        parsed_slo = parse_slo(slo, attainment)
    analysis, rows = _analysis_of(source, strict_physics)
    # unasked, the method every surface answers with (the workbook's method cell; chain for a CSV)
    asked = method or ("auto" if prompt_tokens is not None else analysis.settings.method)
    requested, language = asked, resolve_lang(lang)
    t = _words(language)
    shown_missing: list[str] | None = None  # data["missing"] in the language printed (the JSON's is English)
    lsq_report, latency, choice = _choose(analysis, rows, asked, prompt_tokens)
    if method is None and asked != "auto":
        from dataclasses import replace

        choice = replace(choice, why=DEFAULT_METHOD_WHY)
    method = choice.method
    model_name = model or analysis.calibration.base_model
    if method == "latency":
        assert latency is not None  # _choose fits it for "auto" and "latency", the only ways to the latency method
        result = latency.forecast(concurrency, max_tokens, model_name, prompt_tokens)
        fit = latency.fit_for(model_name)
        data = {"tps": result.tps, "missing": list(result.missing), "method": "latency", **result.as_dict(),
                "prompt_tokens": result.prompt_tokens, "knee": fit.knee.as_dict() if fit else None}
    elif analysis.base_prompt_level is None and other_prompt_level(prompt_tokens, base := base_prompt(analysis, rows)):
        data = {"tps": None, "method": method, "missing": [
            _words("en")["other_prompt"].format(prompt=f"{prompt_tokens:g}", base=f"{base:g}")]}
        shown_missing = [t["other_prompt"].format(prompt=f"{prompt_tokens:g}", base=f"{base:g}")]
    else:
        # without prompt levels every row has the one prompt: a length within 5% of it is that prompt
        # (an unrecorded prompt proves nothing: K_in stays unidentified)
        known = analysis.base_prompt_level is None and base_prompt(analysis, rows) is not None
        asked_prompt = None if known else prompt_tokens
        if method == "chain":
            from scm_xl.model import predict as chain_predict

            data = prediction_to_dict(chain_predict(analysis.calibration, concurrency, max_tokens, model,
                                                    prompt_tokens=asked_prompt))
        else:
            from scm_xl.lsq import fit as lsq_fit

            data = forecast_to_dict(lsq_fit(analysis.statuses, analysis.settings).forecast(
                concurrency, max_tokens, model, extrapolate=extrapolate, prompt_tokens=asked_prompt))
    caveat_method = method if method != "latency" else "chain"
    caveats = caveats_to_dict(analysis, lsq_report, concurrency=concurrency,
                              max_tokens=max_tokens, model=model_name, method=caveat_method)
    if method == "latency":
        assert latency is not None
        _latency_caveats(caveats, latency)
    hints = unidentified_hints(analysis, data["missing"], concurrency=concurrency, max_tokens=max_tokens,
                               model=model_name, method=caveat_method) if data["tps"] is None else []
    data.update(caveats=caveats, hints=hints, method_choice=choice.as_dict())
    if parsed_slo is not None:
        from scm_xl.slo_answer import measured_slo

        data["slo"] = measured_slo(source, rows, parsed_slo, concurrency, max_tokens, model_name, prompt_tokens,
                                   latency)
    if as_json:
        click.echo(to_json(data))
        if data["tps"] is None:
            raise CheckFailed("")
        return
    if data["tps"] is None:
        if language != "en":
            hints = unidentified_hints(analysis, data["missing"], concurrency=concurrency, max_tokens=max_tokens,
                                       model=model_name, method=caveat_method, lang=language)
        raise CheckFailed(t["cannot_predict"].format(missing=", ".join(shown_missing or data["missing"]))
                          + "".join(f"\n  {hint}" for hint in hints))
    interval = data.get("tps_interval")
    extra = t["predicted_interval"].format(low=f"{interval[0]:.2f}", high=f"{interval[1]:.2f}") if interval else ""
    marks = _marks(data, t)
    answer = t["predicted"].format(tps=f"{data['tps']:.2f}", interval=extra,
                                   marks=t["marks"].format(marks=t["marks_sep"].join(marks)) if marks else "")
    click.echo(answer if language == "en" else wrapped(answer))
    if method == "latency":
        assert latency is not None
        p95 = t["latency_p95"].format(p95=f"{data['latency_p95_s']:.3g}") if data.get("latency_p95_s") else ""
        click.echo(wrapped(t["latency_answer"].format(ttft=f"{data['ttft_s']:.3g}", latency=f"{data['latency_s']:.3g}",
                                                      p95=p95, prompt=f"{data['prompt_tokens']:g}"), indent="    "))
        if data.get("knee"):
            knee = data["knee"]["text"] if language == "en" else _knee_words(latency, language, model_name)
            click.echo(wrapped("  " + t["knee"].format(knee=knee)
                               + (t["knee_beyond"] if data.get("beyond_knee") else ""), indent="    "))
    for line in render_caveats(caveats, data["tps"], lang=language):
        click.echo(wrapped(f"  {line}", indent="    "))
    why = _method_why(choice, requested, language)
    click.echo(wrapped("  " + t["method_line"].format(method=choice.method, why=why), indent="    "))
    if parsed_slo is not None:
        from scm_xl.slo_answer import measured_slo_line

        click.echo(wrapped("  " + measured_slo_line(data["slo"], language), indent="    "))


@click.command()
@click.argument("source", type=click.Path(dir_okay=False))
@click.option("--target-tps", type=FiniteFloat(0),
              help="The throughput to reach (tokens/s) (default: a workbook's target cell, else the template's, "
                   "as every surface asks).")
@click.option("--max-tokens", type=click.IntRange(min=1),
              help="Output length (default: a workbook's inverse max_tokens cell, else the base max_tokens).")
@click.option("--prompt-tokens", type=FiniteFloat(0),
              help="The workload's prompt length in tokens (searches every knob; default method auto).")
@click.option("--model", help="Model (default: the base model).")
@click.option("--method", type=METHOD_ANY_CHOICE, default=None,
              help="Search every knob with this method's model (auto: the lowest leave-one-out error; "
                   "default: the article's inverse, smallest measured concurrency at one max_tokens and model).")
@click.option("--max-latency-p95", type=FiniteFloat(0),
              help="Limit on the measured P95 latency (s) of the chosen configuration.")
@click.option("--max-ttft-p95", type=FiniteFloat(0),
              help="Limit on the measured P95 time to first token (s).")
@click.option("--max-concurrency", type=click.IntRange(min=1), help="Highest concurrency allowed.")
@click.option("--allowed-max-tokens", callback=int_list, help="Comma-separated max_tokens values allowed.")
@click.option("--allowed-models", help="Comma-separated models allowed.")
@click.option("--rate-limit", type=click.IntRange(min=1),
              help="Concurrency at which the provider starts answering 429 (default: where the data saw 429s).")
@click.option("--extrapolate", is_flag=True, help="Allow concurrency beyond the measured range (marked).")
@click.option("--conservative", is_flag=True, help="lsq: judge on the lower end of the 90% interval.")
@click.option("--slo", help="Per-request SLO, e.g. ttft=0.5,tpot=0.05,e2el=10 (seconds; 500ms for milliseconds): "
              "a request is good when every threshold holds; judged on the per-request CSV beside SOURCE.")
@click.option("--attainment", type=click.FloatRange(0, 1, min_open=True, max_open=True), default=0.95,
              show_default=True, help="With --slo: the share of good requests the lower end of the 95% Wilson "
              "interval must reach.")
@capacity_options("With --slo: ", "the {header} the provider sent")
@minimise_option("With --slo: ", "concurrency")
@click.option("--between-levels", is_flag=True,
              help="With --slo: also consider the concurrency levels between the measured ones, each predicted "
                   "from the nearest measured level's requests by the latency model (labelled as predicted).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@STRICT_OPTION
@lang_option()
@handle_errors
def solve(source: str, target_tps: float | None, max_tokens: int | None, prompt_tokens: float | None, model: str | None,
          method: str | None,
          max_latency_p95: float | None, max_ttft_p95: float | None, max_concurrency: int | None,
          allowed_max_tokens: tuple[int, ...] | None, allowed_models: str | None, rate_limit: int | None,
          extrapolate: bool, conservative: bool, slo: str | None, attainment: float, rpm: float | None,
          tpm: float | None, price_in: float | None, price_out: float | None, gpu_hour_price: float | None,
          gpus: int | None, minimise: str, between_levels: bool, as_json: bool,
          strict_physics: bool | None, lang: str | None) -> None:
    """Inverse: the configuration that reaches a target TPS.

    Plain, it is the article's inverse: the smallest measured concurrency whose predicted
    TPS meets the target at one max_tokens and model. With --method or any constraint it
    searches every knob (concurrency, max_tokens, model) for the cheapest configuration
    that meets the target under the constraints, names the binding constraint, and gives
    the dual answer: the best TPS under the constraints. Each answer says what it rests
    on; exits 1 when the data cannot identify any answer.

    With --slo it answers from the measured experiments' requests (the per-request CSV beside
    SOURCE): the replicas and configuration per replica that serve the target with the SLO's
    attainment, the cost with a price, and whether the provider's rate limits or the server
    bind; without that CSV it says so and answers with the per-experiment P95s."""
    from dataclasses import replace

    from scm_xl.constrained import SolveRequest
    from scm_xl.errors import UsageError

    priced = [name for name, value in (("--price-in", price_in), ("--price-out", price_out),
                                       ("--gpu-hour-price", gpu_hour_price), ("--gpus", gpus),
                                       ("--rpm", rpm), ("--tpm", tpm)) if value is not None]
    if minimise != "concurrency":
        priced.append("--minimise")
    if between_levels:
        priced.append("--between-levels")
    if priced and slo is None:
        raise UsageError(f"{', '.join(priced)} need --slo: replicas, cost and rate limits are planned under a "
                         "per-request SLO (e.g. --slo e2el=10)")
    from scm_xl.workbook.fill import questions_from_source

    analysis, rows = _analysis_of(source, strict_physics)
    # unasked, the question every surface asks: a workbook's own input cells, else the defaults
    asked = questions_from_source(source, rows).get("inverse", {}) if target_tps is None or max_tokens is None \
        else {}
    if target_tps is None:
        if not asked.get("target_tps"):
            raise UsageError("no target TPS: pass --target-tps")
        target_tps = float(asked["target_tps"])
    if slo is not None:
        from scm_xl.goodput import parse_slo

        parsed = parse_slo(slo, attainment)
        if _solve_slo(source, rows, parsed, target_tps, model, prompt_tokens, price_in, price_out,
                      gpu_hour_price, gpus, rpm, tpm, minimise, as_json, between_levels, lang=resolve_lang(lang)):
            return
        # no per-request CSV: the per-experiment P95s answer (ttft and e2el; tpot has none), and
        # nothing that needs the requests is silently dropped
        if priced:
            raise UsageError(f"{', '.join(priced)} need the per-request CSV (replicas and cost are sized on "
                             "the requests that met the SLO); collect writes it beside the results CSV")
        if parsed.ttft_s is None and parsed.e2el_s is None:
            raise UsageError("--slo tpot=... can only be judged per request, and there is no per-request CSV")
        max_ttft_p95 = min(v for v in (max_ttft_p95, parsed.ttft_s, float("inf")) if v is not None)
        max_latency_p95 = min(v for v in (max_latency_p95, parsed.e2el_s, float("inf")) if v is not None)
        max_ttft_p95 = None if max_ttft_p95 == float("inf") else max_ttft_p95
        max_latency_p95 = None if max_latency_p95 == float("inf") else max_latency_p95

    request = SolveRequest(
        method=method, max_tokens=max_tokens, model=model, prompt_tokens=prompt_tokens,
        allowed_max_tokens=allowed_max_tokens,
        allowed_models=parse_text_list(allowed_models), max_latency_p95_s=max_latency_p95,
        max_ttft_p95_s=max_ttft_p95, max_concurrency=max_concurrency, rate_limit_concurrency=rate_limit,
        extrapolate=extrapolate, conservative=conservative)
    if request.searches_every_knob:
        # Searching without --method keeps the chain (the workbook's inverse), unless the question is
        # about a prompt length; then auto.
        lsq_report, latency, choice = _choose(analysis, rows, method or ("auto" if prompt_tokens else "chain"),
                                              prompt_tokens)
        if method is None and not prompt_tokens:  # chain by default, not asked for
            choice = replace(choice, why=SEARCH_DEFAULT_WHY)
        if latency is None and choice.method == "latency":
            from scm_xl.latency import latency_model

            latency = latency_model(rows)
        _solve_across(analysis, rows, replace(request, method=choice.method), target_tps, as_json,
                      latency=latency, choice=choice, lsq_report=lsq_report,
                      requested=method or ("auto" if prompt_tokens else "chain"), lang=resolve_lang(lang))
    else:
        _solve_plain(analysis, replace(request, max_tokens=request.max_tokens or asked.get("max_tokens")),
                     target_tps, as_json, lang=resolve_lang(lang))


def _solve_slo(source: str, rows: Sequence[ResultRow], slo: Slo, target_tps: float, model: str | None,
               prompt_tokens: float | None, price_in: float | None, price_out: float | None,
               gpu_hour_price: float | None, gpus: int | None, rpm: float | None, tpm: float | None, minimise: str,
               as_json: bool, between: bool = False, lang: Lang = "en") -> bool:
    """solve --slo on the per-request CSV; False (after saying why) when it is not there, so the
    per-experiment percentiles answer instead."""
    import json

    from scm_xl.terminal import wrapped
    from scm_xl.slo_answer import slo_answer

    from scm_xl.errors import UsageError

    pricing = pricing_of(price_in, price_out, gpu_hour_price, gpus)
    if minimise == "cost" and pricing is None:
        raise UsageError(COST_NEEDS_PRICE)
    level = None if prompt_tokens is None else int(round(prompt_tokens))
    answer = slo_answer(source, list(rows), target_tps=target_tps, slo=slo, model=model, prompt_level=level,
                        pricing=pricing, rpm=rpm, tpm=tpm, minimise=minimise, between=between)
    if answer.fallback is not None:
        click.echo(wrapped(answer.lines(lang)[0], indent="  "), err=True)
        return False
    if as_json:
        click.echo(json.dumps(answer.report(), indent=2, default=str))
    else:
        for line in answer.lines(lang):
            click.echo(wrapped(line, indent="    "))
    if not answer.reachable:
        raise SystemExit(1)
    return True


def _solve_plain(analysis: Analysis, request: SolveRequest, target_tps: float, as_json: bool, *,
                 lang: Lang = "en") -> None:
    from scm_xl.errors import UsageError
    from scm_xl.model import solve as chain_solve
    from scm_xl.report import caveats_to_dict, excluded_here, render_caveats, solution_to_dict, unidentified_hints
    from scm_xl.terminal import wrapped
    from scm_xl.rules import TEXTS

    t = _words(lang)

    length = request.max_tokens or analysis.calibration.base_max_tokens
    if length is None:
        raise UsageError("no base max_tokens could be calibrated; pass --max-tokens")
    solution = chain_solve(analysis.calibration, target_tps, length, request.model)
    data = solution_to_dict(solution)
    identified = any(tps is not None for _, tps in solution.table)
    missing: list[str] = []
    if not identified:
        from scm_xl.model import predict as chain_predict

        probe = analysis.calibration.concurrency_levels
        missing = list(chain_predict(analysis.calibration, probe[0].concurrency if probe else 1, length,
                                     request.model).missing) or [_words("en")["every_level"]]
    caveats = caveats_to_dict(analysis, _holdout_for_answers(analysis), concurrency=solution.concurrency,
                              max_tokens=length, model=solution.model, method="chain")
    hints = unidentified_hints(analysis, missing, concurrency=None, max_tokens=length, model=solution.model,
                               method="chain") if not identified else []
    data.update(caveats=caveats, hints=hints, identified=identified, missing=missing)
    if lang != "en" and not identified:  # the JSON keeps the English
        hints = unidentified_hints(analysis, missing, concurrency=None, max_tokens=length, model=solution.model,
                                   method="chain", lang=lang)
        missing = [t["every_level"] if m == _words("en")["every_level"] else m for m in missing]
    if _answered_as_json_or_refused(data, as_json, identified, hints,
                                    t["not_identified_at"].format(length=length, missing=", ".join(missing)), lang):
        return
    if solution.reachable:
        answer = t["solve_reached"].format(c=solution.concurrency, tps=f"{solution.tps:.2f}",
                                           target=f"{target_tps:g}", length=length)
    else:
        best = t["solve_best"].format(tps=f"{solution.best_tps:.2f}", c=solution.best_concurrency) \
            if solution.best_tps is not None else ""
        answer = t["solve_unreachable"].format(unreachable=TEXTS[lang]["unreachable"], target=f"{target_tps:g}",
                                               length=length, best=best)
    click.echo(answer if lang == "en" else wrapped(answer))
    if not solution.reachable:
        for line in excluded_here(analysis, solution.best_concurrency, length, solution.model,
                                  t["what_best_reachable"], lang=lang):
            click.echo(wrapped(f"  {line}", indent="    "))
    for line in render_caveats(caveats, solution.tps, lang=lang):
        click.echo(wrapped(f"  {line}", indent="    "))


def _answered_as_json_or_refused(data: dict[str, Any], as_json: bool, identified: bool, hints: list[str],
                                 why: str, lang: Lang = "en") -> bool:
    """solve's JSON answer (exit 1 when not identified), or its refusal with the way forward (`why`
    and `hints` in `lang`); True when the answer is printed and nothing more is to be said."""
    from scm_xl.errors import CheckFailed
    from scm_xl.report import to_json

    if as_json:
        click.echo(to_json(data))
        if not identified:
            raise CheckFailed("")
        return True
    if not identified:
        raise CheckFailed(_words(lang)["cannot_solve"].format(why=why) + "".join(f"\n  {hint}" for hint in hints))
    return False


def _solve_across(analysis: Analysis, rows: Sequence[ResultRow], request: SolveRequest, target_tps: float,
                  as_json: bool, *, latency: LatencyModel | None, choice: MethodChoice, lsq_report: dict[str, Any],
                  requested: str = "auto", lang: Lang = "en") -> None:
    from scm_xl.constrained import describe_reasons, solve_request
    from scm_xl.report import caveats_to_dict, constrained_to_dict, excluded_here, render_caveats, unidentified_hints
    from scm_xl.report_texts import say
    from scm_xl.terminal import wrapped

    t = _words(lang)

    result = solve_request(request, target_tps, calibration=analysis.calibration, statuses=analysis.statuses,
                           settings=analysis.settings, rows=rows, latency=latency)
    method = request.method or "chain"
    best = result.cheapest
    data = constrained_to_dict(result)
    caveat_method = method if method != "latency" else "chain"
    caveats = caveats_to_dict(analysis, lsq_report,
                              concurrency=best.concurrency if best else None,
                              max_tokens=best.max_tokens if best else None, model=best.model if best else None,
                              method=caveat_method)
    if method == "latency":
        assert latency is not None  # solve fits it whenever the latency method was chosen
        _latency_caveats(caveats, latency)
        data["knee"] = latency.knee_text()
        data["prompt_tokens"] = request.prompt_tokens
    data["method_choice"] = choice.as_dict()
    identified = bool(result.candidates)
    hints = [] if identified else unidentified_hints(
        analysis, ["f(", "K_len(", "C_model("], concurrency=None, max_tokens=request.max_tokens,
        model=request.model, method=caveat_method)
    data.update(caveats=caveats, hints=hints, identified=identified)
    if lang != "en" and not identified:  # the JSON keeps the English
        hints = unidentified_hints(analysis, ["f(", "K_len(", "C_model("], concurrency=None,
                                   max_tokens=request.max_tokens, model=request.model, method=caveat_method, lang=lang)
    if _answered_as_json_or_refused(data, as_json, identified, hints, t["no_configuration"], lang):
        return
    if best:
        marks = t["marks_sep"].join(t[m] for m, flag in (("interpolated", best.interpolated),
                                                         ("extrapolated", best.extrapolated)) if flag)
        interval = t["cheapest_interval"].format(low=f"{best.mean_interval[0]:.2f}",
                                                 high=f"{best.mean_interval[1]:.2f}") if best.mean_interval else ""
        click.echo(wrapped(t["cheapest"].format(c=best.concurrency, length=best.max_tokens, model=best.model,
                                                tps=f"{best.tps:.2f}", interval=interval,
                                                marks=t["marks"].format(marks=marks) if marks else "")))
    else:
        answer = t["unreachable_under"].format(target=f"{target_tps:g}")
        click.echo(answer if lang == "en" else wrapped(answer))
    click.echo(wrapped(t["stops_cheaper"].format(reasons=describe_reasons(result.binding, lang))))
    if result.best:
        bound = describe_reasons(result.best_binding, lang) or t["nothing_higher"]
        click.echo(wrapped(t["best_under"].format(tps=f"{result.best.tps:.2f}", c=result.best.concurrency,
                                                  length=result.best.max_tokens, model=result.best.model,
                                                  bound=bound)))
        for line in excluded_here(analysis, result.best.concurrency, result.best.max_tokens, result.best.model,
                                  t["what_best"], lang=lang):
            click.echo(wrapped(f"  {line}", indent="    "))
    for note in result.notes:  # scm_xl.constrained's notes: English, and say(note, lang) another language
        click.echo(wrapped(t["note"].format(text=say(note, lang))))
    click.echo(wrapped(t["method_line"].format(method=choice.method, why=_method_why(choice, requested, lang))))
    if method == "latency":
        assert latency is not None
        if latency.knee_text():
            click.echo(wrapped(t["knee"].format(knee=_knee_words(latency, lang))))
    for line in render_caveats(caveats, best.tps if best else None, lang=lang):
        click.echo(wrapped(f"  {line}", indent="    "))


commands = [build, fill, verify, predict, solve]
