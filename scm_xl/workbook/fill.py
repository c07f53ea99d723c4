"""Fill, recalculate and verify: the workbook pipeline behind `fill` and `verify`."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from openpyxl import Workbook

from scm_xl.engines import choose_engine
from scm_xl.errors import InputError, UsageError
from scm_xl.model import Analysis
from scm_xl.results import ResultRow, read_results
from scm_xl.verify import Verification, compare
from scm_xl.workbook.build import build_workbook, own_sheet_titles, remove_own_sheets, save_atomic
from scm_xl.workbook.expected import expected_cells
from scm_xl.workbook.io import (
    Inputs, check_model_names, load, read_inputs, read_layout, set_method, set_strict_physics, write_hand_set,
    write_rows,
)
from scm_xl.workbook.layout import META_SHEET, Lang, Layout, fitted_layout


@dataclass
class WorkbookReport:
    path: Path
    layout: Layout
    inputs: Inputs
    analysis: Analysis
    verification: Verification
    warnings: list[str]
    backup: Path | None = None


def _layout_for(rows: list[ResultRow], lang: Lang, at_least: Layout | None = None) -> Layout:
    layout = fitted_layout(
        lang, len(rows),
        len({r.concurrency for r in rows}), len({r.max_tokens for r in rows}),
        len({r.model.casefold() for r in rows}),
        len({(r.model.casefold(), r.max_tokens, r.concurrency) for r in rows}),
    )
    if at_least is not None:
        layout = Layout(lang=lang, rows=max(layout.rows, at_least.rows), c_slots=max(layout.c_slots, at_least.c_slots),
                        l_slots=max(layout.l_slots, at_least.l_slots), m_slots=max(layout.m_slots, at_least.m_slots),
                        cell_slots=max(layout.cell_slots, at_least.cell_slots))
    return layout


def _rebuild_into(user_wb: Workbook, old_layout: Layout, layout: Layout) -> Workbook:
    """Rebuild scm-xl's sheets inside a user's workbook, keeping every other sheet as it is."""
    remove_own_sheets(user_wb, old_layout)
    return build_workbook(layout, into=user_wb)


def fill(results_path: str | Path, *, workbook: str | Path | None = None, output: str | Path | None = None,
         engine: str = "formulas", lang: Lang = "zh", force: bool = False,
         strict_physics: bool | None = None, method: str | None = None,
         derivation: dict[str, dict[str, object]] | None = None) -> WorkbookReport:
    """Write a results CSV into a fresh or existing workbook, save it, then verify it.

    strict_physics sets the workbook's switch and method its method cell ("chain" or "lsq");
    None keeps what the workbook has.
    derivation sets the forward/inverse input cells: {"forward": {...}, "inverse": {...}}.
    """
    table = read_results(results_path)
    rows = table.rows
    # Refuse an engine that cannot run here before anything is written.
    choose_engine(engine, len(rows))[0].require()
    check_model_names(rows, where=str(results_path))
    warnings = list(table.warnings)

    if workbook is not None:
        workbook = Path(workbook)
        user_wb = load(workbook)
        old_layout = read_layout(user_wb, workbook)
        old_inputs = read_inputs(user_wb, old_layout, workbook)
        rows = _keep_manual_cells(rows, old_inputs)
        layout = _layout_for(rows, old_layout.lang, at_least=old_layout)
        wb = _rebuild_into(user_wb, old_layout, layout)
        write_hand_set(wb, layout, old_inputs)
        target = Path(output) if output else workbook
    else:
        layout = _layout_for(rows, lang)
        wb = build_workbook(layout)
        target = Path(output) if output else Path(Path(results_path).stem + ".xlsx")
        derivation = derivation or _measured_defaults(rows)
    write_rows(wb, layout, rows)
    if strict_physics is not None:
        set_strict_physics(wb, layout, strict_physics)
    if method is not None:
        set_method(wb, layout, method)
    if derivation:
        write_hand_set(wb, layout, Inputs(forward=derivation.get("forward", {}),
                                          inverse=derivation.get("inverse", {})), settings=False)

    backup = None
    if target.exists():
        if target.is_dir():
            raise UsageError(f"{target} is a folder; give a file name with -o")
        if not force:
            backup = target.with_name(target.stem + ".bak" + target.suffix)
            shutil.copy2(target, backup)
    save_atomic(wb, target)
    report = verify(target, engine=engine)
    report.warnings = warnings + report.warnings
    report.backup = backup
    return report


def _measured_defaults(rows: list[ResultRow]) -> dict[str, dict[str, object]] | None:
    """Forward and inverse inputs for a new workbook: the template's defaults (the article's
    questions) where the data measured them, else the nearest measured levels."""
    from scm_xl.model import PREFERRED_BASE_MAX_TOKENS
    from scm_xl.workbook.layout import DEFAULT_FORWARD, DEFAULT_TARGET

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
    from dataclasses import replace

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


def verify(path: str | Path, *, engine: str = "formulas") -> WorkbookReport:
    """Recalculate a workbook as it stands and compare every formula cell with the reference."""
    path = Path(path)
    wb = load(path)
    layout = read_layout(wb, path)
    inputs = read_inputs(wb, layout, path)
    chosen, note = choose_engine(engine, len(inputs.rows))
    recalculated = chosen.recalculate(path)
    analysis, expected = expected_cells(layout, inputs)
    verification = compare(expected, recalculated, set(own_sheet_titles(layout)) - {META_SHEET})
    verification.note = note
    warnings = [note] if note else []
    if verification.cells_compared == 0:
        raise InputError("the engine returned no formula cells to compare", path=str(path))
    return WorkbookReport(path=path, layout=layout, inputs=inputs, analysis=analysis,
                          verification=verification, warnings=warnings)


def analysis_from_source(source: str | Path, *,
                         strict_physics: bool | None = None) -> tuple[Analysis, list[ResultRow]]:
    """The reference analysis of a results CSV or of a filled workbook's inputs.

    strict_physics overrides the workbook's switch (None keeps it; a CSV defaults to warnings only).
    """
    from dataclasses import replace

    from scm_xl.model import Settings, analyze

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
