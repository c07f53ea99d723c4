"""CLI: report (the self-contained HTML page) and compare (baseline drift)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from scm_xl.cli._common import handle_errors, lang_option, remark, resolve_lang

if TYPE_CHECKING:
    from scm_xl.rules import Lang

STRICT_OPTION = click.option(
    "--strict-physics/--physics-warnings", default=None,
    help="Exclude rows with physics warnings (default: the workbook's switch; off for a CSV).")


@click.command()
@click.argument("source", type=click.Path(dir_okay=False))
@click.option("-o", "--output", type=click.Path(dir_okay=False), required=True, help="Where to write the HTML page.")
@lang_option("Language of the page. ")
@click.option("--force", is_flag=True, help="Replace an output file that already exists (otherwise refused).")
@click.option("--slo", help="Per-request SLO for the section \"Under an SLO\", e.g. ttft=0.5,tpot=0.05,e2el=10 "
              "(seconds; 500ms for milliseconds): judged on the per-request CSV beside SOURCE.")
@click.option("--attainment", type=click.FloatRange(0, 1, min_open=True, max_open=True), default=0.95,
              show_default=True, help="With --slo: the share of good requests the lower end of the 95% Wilson "
              "interval must reach.")
@STRICT_OPTION
@handle_errors
def report(source: str, output: str, lang: Lang | None, force: bool, slo: str | None, attainment: float,
           strict_physics: bool | None) -> None:
    """One self-contained HTML page of SOURCE (a results CSV or a filled workbook): the
    verdict first, coefficient tables with intervals, every row with its role and reasons,
    the latency model (when TTFT, latency and ITL were recorded: its coefficients, the knee,
    Little's law, TPS and TTFT against prompt length), charts, and a live forward/inverse
    calculator for chain, lsq, latency and auto, with the workload's prompt length. With the
    per-request CSV beside SOURCE and --slo, a section "Under an SLO": each configuration's
    attainment with its Wilson interval, goodput, the answer `solve --slo` gives and what binds,
    and a calculator of replicas and cost from prices typed on the page. No network request of
    any kind: mail it, open it from disk."""
    from scm_xl.htmlreport import write_report
    from scm_xl.input_files import refuse_non_regular
    from scm_xl.outputs import HTML_SUFFIXES, Output, check_outputs

    parsed = None
    if slo is not None:
        from scm_xl.goodput import parse_slo

        parsed = parse_slo(slo, attainment)
    refuse_non_regular(source)  # /dev/urandom, a FIFO: refused before anything reads it
    check_outputs([Output("-o", output, HTML_SUFFIXES, "HTML report")], inputs=[source], force=force)
    warned: list[str] = []  # what reading a results CSV warned of (a missing shard, say)
    path = write_report(source, output, resolve_lang(lang), strict_physics=strict_physics, slo=parsed,
                        warnings=warned)
    for warning in warned:
        click.echo(remark("warning", warning, resolve_lang(lang)), err=True)
    click.echo(f"wrote {path} ({path.stat().st_size / 1e6:.2f} MB)")


@click.command()
@click.argument("baseline", type=click.Path(dir_okay=False))
@click.argument("new", type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--html", "html_path", type=click.Path(dir_okay=False), help="Also write the comparison as an HTML page.")
@lang_option()
@click.option("--force", is_flag=True,
              help="Replace an output that already exists: the --html page, or BASELINE with --save-baseline "
                   "(otherwise refused).")
@click.option("--fail-on-drift", is_flag=True,
              help="Exit 1 unless the verdict is stable: on drift, and on insufficient (nothing shown), for CI.")
@click.option("--save-baseline", is_flag=True,
              help="Make NEW the baseline: write its rows to BASELINE (a .csv, never NEW itself) when BASELINE "
                   "does not exist yet or, with --force, when the verdict is stable. A baseline that drifted or "
                   "could not be compared is kept.")
@click.option("--slo", help="Per-request SLO, e.g. ttft=0.5,tpot=0.05,e2el=10 (seconds; 500ms for milliseconds): "
              "each configuration's attainment, baseline and new, from the per-request CSV beside each; "
              "a configuration that met it and no longer does is flagged (the verdict stays the coefficients').")
@click.option("--attainment", type=click.FloatRange(0, 1, min_open=True, max_open=True), default=0.95,
              show_default=True, help="With --slo: the share of good requests the lower end of the 95% Wilson "
              "interval must reach.")
@STRICT_OPTION
@handle_errors
def compare(baseline: str, new: str, as_json: bool, html_path: str | None, lang: Lang | None, force: bool,
            fail_on_drift: bool, save_baseline: bool, slo: str | None, attainment: float,
            strict_physics: bool | None) -> None:
    """Has the endpoint changed since the baseline? BASELINE and NEW are results CSVs or
    filled workbooks. Both are fitted by least squares on the baseline's base point; each
    coefficient is tested for a move beyond its noise (Welch t on the log, Bonferroni, and
    at least 5%); the baseline's model predicts the new rows. Verdict: stable, drift or
    insufficient; when NEW lacks the baseline's base point, the level is tested on the new
    rows the baseline's model predicts and is stable only if shown within 5% (else
    insufficient). When both sides recorded TTFT, latency and ITL, the baseline's latency
    model predicts the new rows too (matched by model, concurrency, max_tokens and prompt
    level; differing prompt levels are named, not compared) and each model's knee is
    compared; this does not change the verdict."""
    from scm_xl.compare import compare_sources, render_comparison
    from scm_xl.compare_texts import verdict_word, words
    from scm_xl.outputs import CSV_SUFFIXES, HTML_SUFFIXES, Output, check_outputs
    from scm_xl.report_texts import words as report_words
    from scm_xl.results import write_results

    language = resolve_lang(lang)
    w = words(language)
    parsed = None
    if slo is not None:
        from scm_xl.goodput import parse_slo

        parsed = parse_slo(slo, attainment)  # a bad SLO is refused before anything is read

    # With --save-baseline, BASELINE is an output too: the one overwrite rule applies to it (never NEW, an
    # existing file only with --force), and the --html page may not be it.
    saved = Output("BASELINE (--save-baseline)", baseline if save_baseline else None, CSV_SUFFIXES, "results CSV")
    check_outputs([Output("--html", html_path, HTML_SUFFIXES, "HTML page"), saved],
                  inputs=[new] if save_baseline else [baseline, new], force=force)
    if save_baseline and not Path(baseline).exists():
        from scm_xl.workbook.fill import analysis_from_source

        _, rows = analysis_from_source(new, strict_physics=strict_physics)
        write_results(baseline, rows)
        click.echo(w["saved_first"].format(n=len(rows), new=new, baseline=baseline))
        return
    comparison, old_rows, new_rows = compare_sources(baseline, new, strict_physics=strict_physics)
    slo_comparison = None
    if parsed is not None:
        from scm_xl.slo_compare import compare_slo

        slo_comparison = compare_slo(baseline, old_rows, new, new_rows, parsed)
    if html_path:
        from scm_xl.htmlreport.compare_page import write_comparison_html

        write_comparison_html(comparison, html_path, language)
    if as_json:
        data = comparison.as_dict()
        if slo_comparison is not None:
            data["slo"] = slo_comparison.as_dict()
        click.echo(json.dumps(data))
    else:
        click.echo(render_comparison(comparison, language))
        if slo_comparison is not None:
            from scm_xl.slo_compare import render_slo_comparison

            click.echo("\n".join(render_slo_comparison(slo_comparison, language)))
        if html_path:
            click.echo(report_words(language)["wrote"].format(path=html_path))
    if save_baseline:
        if comparison.verdict != "stable":
            click.echo(w["kept"].format(verdict=verdict_word(comparison.verdict, language), baseline=baseline),
                       err=True)
        else:
            write_results(baseline, new_rows)
            click.echo(w["saved"].format(n=len(new_rows), new=new, baseline=baseline), err=True)
    if fail_on_drift and comparison.verdict != "stable":
        sys.exit(1)


commands = [report, compare]
