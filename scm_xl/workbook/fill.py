"""Fill, recalculate and verify: the workbook pipeline behind `fill` and `verify`.

A filled workbook is written to a uniquely named temporary file beside the output,
recalculated and verified there, given the engine's values as cached values, and only
then renamed onto the output: an interrupted or failed run never replaces a good file.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from scm_xl.engines import choose_engine
from scm_xl.engines.base import Recalculated
from scm_xl.errors import InputError, UsageError
from scm_xl.model import Analysis, Settings, analyze
from scm_xl.results import ResultRow, read_results, read_results_many
from scm_xl.verify import Verification, compare
from scm_xl.workbook import latency_sheet, summary_sheet
from scm_xl.outputs import replacing, write_target
from scm_xl.workbook.registry import build_workbook, expected_cells, own_sheet_titles, remove_own_sheets
from scm_xl.workbook.io import (
    Inputs, check_model_names, load, read_inputs, read_layout, set_method, set_strict_physics, write_hand_set,
    write_rows, write_typed,
)
from scm_xl.workbook.stamp import save_workbook
from scm_xl.workbook.layout import (
    DEFAULT_FORWARD, DEFAULT_TARGET, MAX_MODELS, META_SHEET, Lang, Layout, fitted_layout,
)

Progress = Callable[[str], None]


@dataclass
class WorkbookReport:
    path: Path
    layout: Layout
    inputs: Inputs
    analysis: Analysis
    verification: Verification
    warnings: list[str]
    holdout: Any = None  # lsq hold-out report (leave-one-out of both methods)
    notes: list[str] = field(default_factory=list)


def _quiet(_: str) -> None:
    return None


def _layout_for(rows: list[ResultRow], lang: Lang, at_least: Layout | None = None) -> Layout:
    models = len({r.model.casefold() for r in rows})
    if models > MAX_MODELS:
        raise InputError(f"{models} models: one workbook holds at most {MAX_MODELS}; split the results by model")
    layout = fitted_layout(
        lang, len(rows),
        len({r.concurrency for r in rows}), len({r.max_tokens for r in rows}),
        len({r.model.casefold() for r in rows}),
        len({(r.model.casefold(), r.max_tokens, r.concurrency, r.prompt_level) for r in rows}),
        n_prompts=len({r.prompt_level for r in rows} - {None}) + 1,  # and the base level of blank ones
    )
    if at_least is not None:
        layout = Layout(lang=lang, rows=max(layout.rows, at_least.rows), c_slots=max(layout.c_slots, at_least.c_slots),
                        l_slots=max(layout.l_slots, at_least.l_slots), m_slots=max(layout.m_slots, at_least.m_slots),
                        cell_slots=max(layout.cell_slots, at_least.cell_slots),
                        p_slots=max(layout.p_slots, at_least.p_slots))
    return layout


def _read_all(paths: Sequence[Path], rename_duplicates: bool) -> tuple[list[ResultRow], list[str]]:
    """Rows of one or several results CSVs (each row keeps its source file when there are several)."""
    table = read_results_many(paths, rename_duplicates=rename_duplicates) if len(paths) > 1 \
        else read_results(paths[0])
    return list(table.rows), list(table.warnings)


def fill(results_path: str | Path | Sequence[str | Path] | None, *, workbook: str | Path | None = None,
         output: str | Path | None = None, engine: str = "auto", lang: Lang = "zh",
         strict_physics: bool | None = None, method: str | None = None,
         derivation: dict[str, dict[str, object]] | None = None, progress: Progress | None = None,
         rename_duplicates: bool = False) -> WorkbookReport:
    """Write results CSVs into a fresh or existing workbook, recalculate and verify it, then
    put it in place. With no CSV (results_path None or empty) and a workbook, rebuild that
    workbook around the rows typed into it, every one of them, sized to cover them all.

    strict_physics sets the workbook's switch and method its method cell ("chain" or "lsq");
    None keeps what the workbook has. derivation sets the forward/inverse input cells:
    {"forward": {...}, "inverse": {...}}. The overwrite policy is the caller's: an existing
    output is replaced (atomically, after verification).
    """
    say = progress or _quiet
    if results_path is None:
        paths: list[Path] = []
    elif isinstance(results_path, (str, Path)):
        paths = [Path(results_path)]
    else:
        paths = [Path(p) for p in results_path]
    if not paths:
        if workbook is None:
            raise UsageError("no results CSV given")
        return _regrow(Path(workbook), output=output, engine=engine, progress=say)
    rows, warnings = _read_all(paths, rename_duplicates)
    chosen, note = choose_engine(engine, len(rows))
    chosen.require()  # refuse an engine that cannot run here before anything is written
    check_model_names(rows, where=str(paths[0]))

    say("build the workbook")
    if workbook is not None:
        workbook = Path(workbook)
        user_wb = load(workbook)
        old_layout = read_layout(user_wb, workbook)
        old_inputs = read_inputs(user_wb, old_layout, workbook)
        rows = _keep_manual_cells(rows, old_inputs)
        layout = _layout_for(rows, old_layout.lang, at_least=old_layout)
        remove_own_sheets(user_wb, old_layout)
        wb = build_workbook(layout, into=user_wb, deferred=True)
        write_hand_set(wb, layout, old_inputs)
        target = Path(output) if output else workbook
    else:
        layout = _layout_for(rows, lang)
        wb = build_workbook(layout, deferred=True)
        target = Path(output) if output else Path(paths[0].stem + ".xlsx")
        derivation = derivation or _measured_defaults(rows)
    if target.is_dir():
        raise UsageError(f"{target} is a folder; give a file name with -o")
    write_rows(wb, layout, rows, clear=workbook is not None)
    if strict_physics is not None:
        set_strict_physics(wb, layout, strict_physics)
    if method is not None:
        set_method(wb, layout, method)
    if derivation:
        write_hand_set(wb, layout, Inputs(forward=derivation.get("forward", {}),
                                          inverse=derivation.get("inverse", {})), settings=False)
        forward = derivation.get("forward", {})
        latency_sheet.write_cells(wb[latency_sheet.SHEET_TITLES[layout.lang]], layout,
                                  {key: forward.get(key) for key in ("concurrency", "max_tokens")})
    return _finish(wb, layout, target, chosen, note, say, warnings)


def _regrow(workbook: Path, *, output: str | Path | None, engine: str, progress: Progress) -> WorkbookReport:
    """Rebuild a workbook around every row typed into it (rows below what its formulas covered
    included), keeping its other sheets and hand-set cells."""
    progress("build the workbook")
    user_wb = load(workbook)
    old_layout = read_layout(user_wb, workbook)
    old = read_inputs(user_wb, old_layout, workbook)
    typed = [old.entry[position] for position in sorted(old.entry)] + old.beyond
    rows = [row for _, row in old.rows]
    layout = Layout(lang=old_layout.lang, rows=max(old_layout.rows, fitted_layout(old_layout.lang, len(typed), 0, 0, 0).rows),
                    c_slots=old_layout.c_slots, l_slots=old_layout.l_slots, m_slots=old_layout.m_slots,
                    cell_slots=max(old_layout.cell_slots, _layout_for(rows, old_layout.lang).cell_slots),
                    p_slots=max(old_layout.p_slots, _layout_for(rows, old_layout.lang).p_slots))
    chosen, note = choose_engine(engine, len(typed))
    chosen.require()
    remove_own_sheets(user_wb, old_layout)
    wb = build_workbook(layout, into=user_wb, deferred=True)
    write_hand_set(wb, layout, old)
    write_typed(wb, layout, typed)
    return _finish(wb, layout, Path(output) if output else workbook, chosen, note, progress, [])


def _finish(wb: Any, layout: Layout, target: Path, chosen: Any, note: str | None, say: Progress,
            warnings: list[str]) -> WorkbookReport:
    """Charts from the reference, then save beside the target, recalculate, verify, store the
    values, and rename into place."""
    inputs = read_inputs(wb, layout, target)
    analysis = analyze([row for _, row in inputs.rows], inputs.settings)
    # The latency sheet's knee is profiled here (not a formula) and stored as a value.
    latency_ws = wb[latency_sheet.SHEET_TITLES[layout.lang]]
    inputs.latency["fitted_knee"] = latency_sheet.fitted_knee(
        [row for _, row in inputs.rows], latency_sheet.sheet_model(inputs.latency, analysis))
    latency_sheet.write_cells(latency_ws, layout, inputs.latency, hand_set_only=False)
    points = summary_sheet.chart_points([row for _, row in inputs.rows], analysis.checks,
                                        analysis.calibration.base_prompt_level)
    summary_sheet.add_charts(wb, layout, points)
    inputs.chart_keys = [(m, float(length), float(c), (m, length, c) in points.latency)
                         for m, length, c in points.cells]
    inputs.chart_fit = [(role, float(position)) for role, position in points.fit]

    # Written, recalculated, verified and given its values beside the target; renamed onto it last.
    if not write_target(target).parent.is_dir():
        raise InputError(f"folder does not exist: {write_target(target).parent}", path=str(target))
    with replacing(target, suffix=".xlsx") as tmp:
        save_workbook(wb, tmp)
        report = _check(tmp, write_target(target), layout, inputs, chosen, note, say, analysis=analysis)
        _store_values(tmp, report.verification, say)
    report.path = target
    report.warnings = warnings + report.warnings
    return report


def _store_values(path: Path, verification: Verification, say: Progress) -> None:
    """Give every formula cell the value the verifying engine computed, so readers that do
    not recalculate (openpyxl data_only, pandas, previews) see the numbers."""
    try:
        from scm_xl.workbook import cached_values
    except ImportError:  # pragma: no cover - the module ships with the package
        return
    values = verification.values
    if not values:
        return
    say("store the computed values in the file")
    by_sheet: dict[str, dict[tuple[int, int], Any]] = {}
    from openpyxl.utils.cell import coordinate_to_tuple

    for (sheet, cell), value in values.items():
        by_sheet.setdefault(sheet, {})[coordinate_to_tuple(cell)] = value
    stored = path.with_name(path.name + ".values")
    try:
        cached_values.write_cached_values(path, stored, by_sheet)
        os.replace(stored, path)
    finally:
        if stored.exists():
            stored.unlink()


def _measured_defaults(rows: list[ResultRow]) -> dict[str, dict[str, object]] | None:
    """Forward and inverse inputs for a new workbook: the template's defaults (the article's
    questions) where the data measured them, else the nearest measured levels."""
    from scm_xl.model import PREFERRED_BASE_MAX_TOKENS

    if not rows:
        return None
    lengths = sorted({r.max_tokens for r in rows})
    levels = sorted({r.concurrency for r in rows})
    base_length = PREFERRED_BASE_MAX_TOKENS if PREFERRED_BASE_MAX_TOKENS in lengths else lengths[0]

    def pick(value: int, measured: list[int], fallback: int) -> int:
        return value if value in measured else fallback

    return {
        "forward": {"concurrency": pick(DEFAULT_FORWARD["concurrency"], levels, levels[min(1, len(levels) - 1)]),
                    "max_tokens": pick(DEFAULT_FORWARD["max_tokens"], lengths, lengths[-1])},
        "inverse": {"max_tokens": pick(DEFAULT_TARGET["max_tokens"], lengths, base_length)},
    }


def _keep_manual_cells(rows: list[ResultRow], old: Inputs) -> list[ResultRow]:
    """An override or note typed into the workbook survives when the CSV has none for that exp_id."""
    by_id = {row.exp_id: row for _, row in old.rows}
    kept = []
    for row in rows:
        previous = by_id.get(row.exp_id)
        if previous is not None:
            if row.override is None and previous.override is not None:
                row = replace(row, override=previous.override)
            if row.notes is None and previous.notes is not None:
                row = replace(row, notes=previous.notes)
        kept.append(row)
    return kept


def _holdout(analysis: Analysis) -> Any:
    from scm_xl import lsq

    return lsq.least_squares_analysis(analysis.statuses, analysis.settings).report()


def _check(path: Path, shown_as: Path, layout: Layout, inputs: Inputs, engine: Any, note: str | None,
           say: Progress, analysis: Analysis | None = None) -> WorkbookReport:
    """Recalculate `path` with `engine` and compare every formula cell with the reference."""
    say(f"recalculate with {engine.name}")
    recalculated: Recalculated = engine.recalculate(path)
    analysis, expected = expected_cells(layout, inputs, analysis=analysis)
    say(f"compare {len(recalculated.values):,} formula cells with the reference")
    verification = compare(expected, recalculated, set(own_sheet_titles(layout)) - {META_SHEET})
    verification.note = note
    verification.uncovered = [f"row {row} ({exp_id or 'no exp_id'})" for row, exp_id in inputs.uncovered]
    verification.rows_covered = inputs.covered
    warnings = [note] if note else []
    if verification.cells_compared == 0:
        raise InputError("the engine returned no formula cells to compare", path=str(shown_as))
    notes = list(inputs.notes) + [f"row {row}: {reason}" for row, reason in inputs.unusable]
    return WorkbookReport(path=shown_as, layout=layout, inputs=inputs, analysis=analysis,
                          verification=verification, warnings=warnings, holdout=_holdout(analysis), notes=notes)


def verify(path: str | Path, *, engine: str = "auto", progress: Progress | None = None) -> WorkbookReport:
    """Recalculate a workbook as it stands and compare every formula cell with the reference."""
    say = progress or _quiet
    path = Path(path)
    wb = load(path)
    layout = read_layout(wb, path)
    inputs = read_inputs(wb, layout, path)
    chosen, note = choose_engine(engine, len(inputs.rows))
    return _check(path, path, layout, inputs, chosen, note, say)


def analysis_from_source(source: str | Path, *,
                         strict_physics: bool | None = None) -> tuple[Analysis, list[ResultRow]]:
    """The reference analysis of a results CSV or of a filled workbook's inputs.

    strict_physics overrides the workbook's switch (None keeps it; a CSV defaults to warnings only).
    """
    source = Path(source)
    if source.suffix.lower() in (".xlsx", ".xlsm"):
        wb = load(source)
        layout = read_layout(wb, source)
        inputs = read_inputs(wb, layout, source)
        settings = inputs.settings
        if strict_physics is not None:
            settings = replace(settings, strict_physics=strict_physics)
        rows = [row for _, row in inputs.rows]
        return analyze(rows, settings), rows
    table = read_results(source)
    check_model_names(table.rows, where=str(source))
    return analyze(table.rows, Settings(strict_physics=bool(strict_physics))), table.rows


__all__ = ["WorkbookReport", "analysis_from_source", "fill", "verify"]
