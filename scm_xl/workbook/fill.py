"""Fill, recalculate and verify: the workbook pipeline behind `fill` and `verify`.

A filled workbook is written to a uniquely named temporary file beside the output,
recalculated and verified there, given the engine's values as cached values, and only
then renamed onto the output: an interrupted or failed run never replaces a good file.
One that fails verification is set aside as NAME.failed.xlsx beside the output, which
stays as it was (`WorkbookReport.set_aside` names it).

Filling a person's own workbook rebuilds scm-xl's sheets; what the person added to them
that the rebuild would lose is carried over: their comments (a raw row's move with its
exp_id) and where their own sheets sit among scm-xl's (`person_work.PersonWork`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from scm_xl.engines import choose_engine
from scm_xl.engines.base import FormulaCells, Pending, Recalculated
from scm_xl.lsq import LsqAnalysis, least_squares_analysis
from scm_xl.errors import InputError, UsageError
from scm_xl.model import Analysis, Settings, analyze
from scm_xl.report_texts import Text
from scm_xl.results import ResultRow, read_results, read_results_many
from scm_xl.verify import Verification, compare
from scm_xl import goodput
from scm_xl.slo_answer import provider_limits
from scm_xl.workbook import charts, latency_sheet, slo_sheet, summary_sheet
from scm_xl.workbook.person_work import PersonWork
from scm_xl.workbook.printing import trim_print_areas
from scm_xl.outputs import staging, write_target
from scm_xl.workbook.registry import (
    build_workbook, expected_cells, load_inputs, own_sheet_titles, read_layout, remove_own_sheets,
)
from scm_xl.workbook.io import (
    MAX_DATA_ROWS, Inputs, check_model_names, load, over_capacity, read_inputs, set_method,
    set_strict_physics, write_hand_set, write_rows, write_typed,
)
from scm_xl.xlsx import cached_values
from scm_xl.xlsx.cached_values import SheetValues
from scm_xl.xlsx.values import CellGrid
from scm_xl.workbook.stamp import BuiltWorkbook, FilledColumn, TypedSince
from scm_xl.workbook.styles import as_saved
from scm_xl.workbook.layout import (
    MAX_MODELS, META_SHEET, Lang, Layout, fitted_layout,
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
    # The least-squares analysis of the rows (fit, hold-out of both methods, interactions), run
    # once per fill or verify: the text, the JSON, the HTML page and the demo all read this one.
    lsq: LsqAnalysis
    notes: list[str] = field(default_factory=list)
    # Verification failed: the workbook was left here instead (the output was not touched).
    set_aside: Path | None = None

    @property
    def holdout(self) -> dict[str, Any]:
        """The least-squares analysis as the JSON report's fields (`LsqAnalysis.report`)."""
        return self.lsq.report()


def _quiet(_: str) -> None:
    return None


def _distinct_cells(rows: Sequence[ResultRow]) -> int:
    """How many (model, max_tokens, concurrency, prompt level) cells the rows measure."""
    return len({(r.model.casefold(), r.max_tokens, r.concurrency, r.prompt_level) for r in rows})


def _layout_for(rows: list[ResultRow], lang: Lang, at_least: Layout | None = None, *,
                where: str | None = None) -> Layout:
    models = len({r.model.casefold() for r in rows})
    if models > MAX_MODELS:
        raise InputError(f"{models} models: one workbook holds at most {MAX_MODELS}; split the results by model",
                         path=where)
    _refuse_too_many_rows(len(rows), where)
    layout = fitted_layout(
        lang, len(rows),
        len({r.concurrency for r in rows}), len({r.max_tokens for r in rows}),
        len({r.model.casefold() for r in rows}),
        _distinct_cells(rows),
        n_prompts=len({r.prompt_level for r in rows} - {None}) + 1,  # and the base level of blank ones
    )
    if at_least is not None:
        layout = Layout(lang=lang, rows=max(layout.rows, at_least.rows), c_slots=max(layout.c_slots, at_least.c_slots),
                        l_slots=max(layout.l_slots, at_least.l_slots), m_slots=max(layout.m_slots, at_least.m_slots),
                        cell_slots=max(layout.cell_slots, at_least.cell_slots),
                        p_slots=max(layout.p_slots, at_least.p_slots))
    _refuse_beyond_capacity(layout, where)
    return layout


def _refuse_too_many_rows(n_rows: int, where: str | None) -> None:
    if n_rows > MAX_DATA_ROWS:
        raise InputError(f"{n_rows:,} raw rows: one workbook holds at most {MAX_DATA_ROWS:,}; split the results "
                         "(by model or by date)", path=where)


def _refuse_beyond_capacity(layout: Layout, where: str | None) -> None:
    """Refuse, before building anything, a workbook larger than one can hold (`io.over_capacity`)."""
    beyond = over_capacity(layout)
    if beyond is not None:
        raise InputError(f"the data need a workbook with {beyond[1]}; split the results", path=where)


def _read_all(paths: Sequence[Path], rename_duplicates: bool) -> tuple[list[ResultRow], list[str]]:
    """Rows of one or several results CSVs (each row keeps its source file when there are several)."""
    table = read_results_many(paths, rename_duplicates=rename_duplicates) if len(paths) > 1 \
        else read_results(paths[0])
    return list(table.rows), list(table.warnings)


def fill(results_path: str | Path | Sequence[str | Path] | None, *, workbook: str | Path | None = None,
         output: str | Path | None = None, engine: str = "auto", lang: Lang = "zh",
         strict_physics: bool | None = None, method: str | None = None,
         derivation: dict[str, dict[str, object]] | None = None, progress: Progress | None = None,
         rename_duplicates: bool = False, force: bool = True, slo: goodput.Slo | None = None,
         attainment: float | None = None, capacity: dict[str, Any] | None = None) -> WorkbookReport:
    """Write results CSVs into a fresh or existing workbook, recalculate and verify it, then
    put it in place. With no CSV (results_path None or empty) and a workbook, rebuild that
    workbook around the rows typed into it, every one of them, sized to cover them all.

    strict_physics sets the workbook's switch and method its method cell ("chain" or "lsq");
    None keeps what the workbook has. derivation sets the forward/inverse input cells:
    {"forward": {...}, "inverse": {...}}. The overwrite policy is the caller's: an existing
    output is replaced (atomically, after verification); force=False refuses (UsageError) an
    output that exists when the workbook is put in place (another run wrote it meanwhile). A
    workbook that fails verification replaces nothing: see `WorkbookReport.set_aside`.

    The per-request CSV beside a (single) results CSV (goodput.requests_path_for) goes into the
    workbook's per-request sheet; slo types the Summary's SLO inputs (its thresholds and target),
    attainment only the target; None keeps what the workbook has (a new one: no threshold).
    capacity types the Summary's replicas, cost and rate-limit inputs (slo_sheet.capacity_inputs:
    rpm, tpm, target_tps, the prices, gpus); a limit not given keeps the workbook's, and a new
    workbook takes the limits the provider's headers announced (the results CSV's ratelimit_limit_*).
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
        return _regrow(Path(workbook), output=output, engine=engine, progress=say, force=force)
    rows, warnings = _read_all(paths, rename_duplicates)
    # the per-request records, refused (too many for a workbook) before anything is built
    slo_data, slo_notes = _requests_data(rows, goodput.read_samples(paths[0]) if len(paths) == 1 else None)
    chosen, note = choose_engine(engine, len(rows))
    chosen.require()  # refuse an engine that cannot run here before anything is written
    check_model_names(rows, where=str(paths[0]))

    person: PersonWork | None = None
    if workbook is not None:
        workbook = Path(workbook)
        say(Text("step_read", path=workbook))
        user_wb = load(workbook)
        old_layout = read_layout(user_wb, workbook)
        old_inputs = read_inputs(user_wb, old_layout, workbook)
        rows = _keep_manual_cells(rows, old_inputs)
        layout = _layout_for(rows, old_layout.lang, at_least=old_layout, where=str(paths[0]))
        say(Text("step_build"))
        person = PersonWork.take(user_wb, old_layout)
        remove_own_sheets(user_wb, old_layout)
        built = build_workbook(layout, into=user_wb)
        write_hand_set(built.wb, layout, old_inputs)
        target = Path(output) if output else workbook
    else:
        layout = _layout_for(rows, lang, where=str(paths[0]))
        say(Text("step_build"))
        built = build_workbook(layout)
        target = Path(output) if output else Path(paths[0].stem + ".xlsx")
        derivation = derivation or _measured_defaults(rows)
    if target.is_dir():
        raise UsageError(f"{target} is a folder; give a file name with -o")
    wb = built.wb
    if workbook is not None:  # a person's workbook: its rows cleared and these typed now
        write_rows(wb, layout, rows, clear=True)
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
    if slo_data is not None:
        slo_sheet.write_data(built, layout, slo_data)
    if slo is not None or attainment is not None:
        slo_sheet.set_inputs(wb, layout, slo_sheet.slo_inputs(slo) if slo is not None else {"attainment": attainment})
    typed_capacity = dict(capacity or {})
    if workbook is None:  # a new workbook: the limits the provider sent, unless given
        for key, sent in zip(("rpm", "tpm"), provider_limits(rows)):
            if typed_capacity.get(key) is None and sent is not None:
                typed_capacity[key] = int(sent) if float(sent).is_integer() else sent
    if typed_capacity:
        slo_sheet.set_capacity_inputs(wb, layout, typed_capacity)
    return _finish(built, layout, target, chosen, note, say, warnings, force=force, person=person, notes=slo_notes,
                   rows=rows if workbook is None else None)


def _requests_data(rows: list[ResultRow],
                   samples: goodput.RequestSamples | None) -> tuple[slo_sheet.SloData | None, list[str]]:
    """The per-request records of `rows` for the workbook's per-request sheet (None: none), and
    what to tell; InputError when they are more than a workbook holds."""
    if samples is None:
        return None, [Text("requests_several")]
    if not samples.by_exp:
        return None, [Text("requests_none", reason=samples.reason)]
    bad = slo_sheet.wildcard_exp_id(rows)
    if bad is not None:
        return None, [Text("requests_wildcard", exp_id=bad)]
    data = slo_sheet.from_samples(rows, samples)
    notes: list[str] = [Text("requests_read", n=len(data.records), path=samples.path)]
    if samples.dropped_line is not None:
        notes.append(Text("requests_half_line", path=samples.path, line=samples.dropped_line))
    return data, notes


def _regrow(workbook: Path, *, output: str | Path | None, engine: str, progress: Progress,
            force: bool = True) -> WorkbookReport:
    """Rebuild a workbook around every row typed into it (rows below what its formulas covered
    included), keeping its other sheets and hand-set cells."""
    progress(Text("step_read", path=workbook))
    user_wb = load(workbook)
    old_layout = read_layout(user_wb, workbook)
    old = read_inputs(user_wb, old_layout, workbook)
    typed = [old.entry[position] for position in sorted(old.entry)] + old.beyond
    rows = [row for _, row in old.rows]
    where = str(workbook)
    _refuse_too_many_rows(len(typed), where)
    fitted = _layout_for(rows, old_layout.lang, where=where)
    layout = Layout(lang=old_layout.lang, rows=max(old_layout.rows, fitted_layout(old_layout.lang, len(typed), 0, 0, 0).rows),
                    c_slots=old_layout.c_slots, l_slots=old_layout.l_slots, m_slots=old_layout.m_slots,
                    cell_slots=max(old_layout.cell_slots, fitted.cell_slots),
                    p_slots=max(old_layout.p_slots, fitted.p_slots))
    _refuse_beyond_capacity(layout, where)
    chosen, note = choose_engine(engine, len(typed))
    chosen.require()
    progress(Text("step_build"))
    person = PersonWork.take(user_wb, old_layout)
    remove_own_sheets(user_wb, old_layout)
    built = build_workbook(layout, into=user_wb)
    write_hand_set(built.wb, layout, old)
    write_typed(built.wb, layout, typed)
    if not old.slo_data.empty:  # the records the workbook held stay with it
        slo_sheet.write_data(built, layout, old.slo_data)
    return _finish(built, layout, Path(output) if output else workbook, chosen, note, progress, [], force=force,
                   person=person)


def _finish(built: BuiltWorkbook, layout: Layout, target: Path, chosen: Any, note: str | None, say: Progress,
            warnings: list[str], *, force: bool = True, person: PersonWork | None = None,
            notes: list[str] | None = None, rows: list[ResultRow] | None = None) -> WorkbookReport:
    """Type `rows` into a new workbook's raw-data sheet, charts from the reference, then save
    beside the target, recalculate, verify, store the values, and rename into place (exclusively
    without `force`); a workbook that fails verification is set aside instead and the target left
    alone.

    An engine that loads the file in a process of its own (`Engine.start_then`: IronCalc on a
    large workbook) is started on the workbook as built, before the rows are typed and analysed:
    it loads while this process types and analyses them, and is then given what was typed (the
    rows, the latency sheet's fitted knee, the charts' groups and their formulas:
    `stamp.TypedSince`). Where more than typed cells changed, that start is given up and the
    engine starts on the file as it ends up, as any other engine does."""
    wb = built.wb
    # Written, recalculated, verified and given its values beside the target; renamed onto it last.
    if not write_target(target).parent.is_dir():
        raise InputError(f"folder does not exist: {write_target(target).parent}", path=str(target))
    with staging(target, suffix=".xlsx") as staged:
        # openpyxl's own file is kept beside: the values go in on the way from it, with the
        # pending cells, in one pass (not a second pass over every cell of the saved file).
        sparse = staged.temp.with_name(staged.temp.name + ".sparse")
        early: _Early | None = None
        try:
            if person is not None:  # their sheets where the file will have them, in the engine's input too
                person.restore_order(wb, layout)
            early = _start_early(built, staged.temp, sparse, chosen, say)
            if rows is not None:
                write_rows(wb, layout, rows, clear=False)
            inputs = read_inputs(wb, layout, target, pending=built.fills)
            analysis = analyze([row for _, row in inputs.rows], inputs.settings)
            # The latency sheet's knee is profiled here (not a formula) and stored as a value.
            latency_ws = wb[latency_sheet.SHEET_TITLES[layout.lang]]
            knee = latency_sheet.fitted_knee([row for _, row in inputs.rows],
                                             latency_sheet.sheet_model(inputs.latency, analysis))
            inputs.latency["fitted_knee"] = as_saved(knee) if knee is not None else None  # as its cell will hold it
            latency_sheet.write_cells(latency_ws, layout, inputs.latency, hand_set_only=False)
            points = charts.chart_points([row for _, row in inputs.rows], analysis.statuses,
                                         analysis.calibration.base_prompt_level)
            charts.add_line_charts(wb, layout, points, summary_sheet.CHART_ANCHOR_COL)
            # the last raw-data position holding an experiment (a row left blank between them prints too)
            trim_print_areas(wb, layout, max(inputs.entry, default=0),
                             _distinct_cells([row for _, row in inputs.rows]))
            inputs.chart_groups = [(model, float(length)) for model, length in points.groups]
            person_notes = person.restore(wb, layout) if person is not None else []

            started = False
            typed = early.since.typed() if early is not None else None
            if early is not None and typed is not None:
                # its formula cells now: openpyxl's, and the pending columns as saved then
                cells = built.formula_cells(early.fills)
                early.pending.type_in(typed, cells)
                fills = built.save(None, sparse=sparse)
                started = built.formula_cells(fills) == cells  # no pending column added since
            if not started:  # more than typed values changed: the engine starts on the file as it ends up
                if early is not None:
                    early.pending.cancel()
                else:
                    say(Text("step_save"))
                fills = built.save(staged.temp, sparse=sparse, engine_input=chosen.prepare)
                cells = built.formula_cells(fills)
            built.release()  # saved: its memory serves the reference and the engine's values
            # each sheet's values stored as the engine gives them, while it reads the next back
            report = _check(staged.temp, write_target(target), layout, inputs, chosen, note, say,
                            analysis=analysis, cells=cells, prepared=True,
                            started=early.pending if early is not None and started else None,
                            announced=early is not None,
                            store=lambda sheet, ahead: _store_values(staged.temp, cells, sheet, say,
                                                                     sparse=sparse, fills=fills, ahead=ahead))
        finally:
            if early is not None:  # given up, failed, or done (then this ends nothing)
                early.pending.cancel()
            sparse.unlink(missing_ok=True)
        if report.verification.ok:
            say(Text("step_write", path=target))
            staged.put_in_place(exclusive=not force)
        else:  # a workbook that disagrees with the reference replaces nothing
            report.set_aside = staged.set_aside("failed")
    report.path = target
    report.warnings = warnings + report.warnings
    report.notes = person_notes + (notes or []) + report.notes
    return report


@dataclass(frozen=True)
class _Early:
    """An engine started on the workbook before it was final (`_start_early`): its work, what the
    workbook held when its input was saved, and the pending columns saved then."""

    pending: Pending
    since: TypedSince
    fills: dict[str, list[FilledColumn]]


def _start_early(built: BuiltWorkbook, path: Path, sparse: Path, engine: Any, say: Progress) -> _Early | None:
    """The engine started on the workbook as typed so far (`Engine.start_then`), saved at `path`
    through its `prepare` (openpyxl's own file at `sparse`, rewritten later). None where the
    engine does not load it in a process of its own: nothing is saved yet."""
    if not engine.loads_apart(built.formula_cell_count()):
        return None
    say(Text("step_save"))
    fills = built.save(path, sparse=sparse, engine_input=engine.prepare)
    since = built.typed_since()
    say(Text("step_recalculate", engine=engine.name))
    return _Early(engine.start_then(path, built.formula_cells(fills), prepared=True), since, fills)


def _store_values(path: Path, cells: FormulaCells, sheet: Callable[[str], SheetValues], say: Progress, *,
                  sparse: Path, fills: dict[str, list[FilledColumn]], ahead: _Ahead | None = None) -> None:
    """Give every formula cell the value the verifying engine computed, so readers that do
    not recalculate (openpyxl data_only, pandas, previews) see the numbers: `path` is written
    anew from `sparse` (openpyxl's file) with the pending cells `fills`, each with its value.
    `sheet(title)` gives a sheet's values, waiting for them if the engine has not yet.

    With `ahead` (the reference's values, and whether the engine is still at work), the sheets
    are first rendered with the reference's values while the engine works: each sheet whose
    engine values are identical to the reference's (most are, to the bit) is then copied as
    rendered, and only the others are rendered once the engine's values are in
    (`cached_values.render_ahead`). The file is the same either way."""
    titles = [title for title, refs in cells.items() if refs]
    if not titles:
        return
    stored = path.with_name(path.name + ".values")
    rendered = None
    try:
        if ahead is not None and ahead.working():
            rendered = cached_values.render_ahead(
                sparse, {title: ahead.reference.sheet_view(title) for title in titles}, folder=path.parent,
                fills=fills, go_on=ahead.working)
        cached_values.write_cached_values(sparse, stored, _Arriving(titles, sheet, lambda: say(Text("step_store"))),
                                          fills=fills, ahead=rendered)
        os.replace(stored, path)
    finally:
        if rendered is not None:
            rendered.close()
        if stored.exists():
            stored.unlink()


@dataclass(frozen=True)
class _Ahead:
    """The reference's values, for `_store_values` to render the sheets with while the engine
    is still `working()`."""

    reference: CellGrid
    working: Callable[[], bool]


class _Arriving(Mapping[str, SheetValues]):
    """Sheets' values by title, each asked for only when it is looked up; `first` is called
    when the first is in (the step is said once there is something to store)."""

    def __init__(self, titles: list[str], sheet: Callable[[str], SheetValues], first: Callable[[], None]) -> None:
        self.titles, self.sheet, self.first = titles, sheet, first
        self.started = False

    def __getitem__(self, title: str) -> SheetValues:
        if title not in self.titles:
            raise KeyError(title)
        values = self.sheet(title)
        if not self.started:
            self.started = True
            self.first()
        return values

    def __iter__(self) -> Iterator[str]:
        return iter(self.titles)

    def __len__(self) -> int:
        return len(self.titles)


def _measured_defaults(rows: list[ResultRow]) -> dict[str, dict[str, object]] | None:
    """Forward and inverse inputs for a new workbook: the questions every surface asks by default
    (`methods.default_questions`; the target TPS is the template's)."""
    from scm_xl.methods import default_questions

    questions = default_questions(rows)
    if not questions:
        return None
    return {"forward": dict(questions["forward"]), "inverse": {"max_tokens": questions["inverse"]["max_tokens"]}}


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


def _check(path: Path, shown_as: Path, layout: Layout, inputs: Inputs, engine: Any, note: str | None,
           say: Progress, analysis: Analysis | None = None, cells: FormulaCells | None = None,
           store: Callable[[Callable[[str], SheetValues], _Ahead | None], None] | None = None,
           prepared: bool = False, started: Pending | None = None, announced: bool = False) -> WorkbookReport:
    """Recalculate `path` with `engine` and compare every formula cell with the reference
    (`prepared`: `path` was written through the engine's `prepare`).

    The engine is started first and the reference computed while it works: an engine that works
    in a process of its own (IronCalc on a large workbook) then runs beside this one. `store`,
    when given, is handed the engine's values sheet by sheet (`Pending.sheet`) before they are
    compared: an engine that reads its values back sheet by sheet is storing one while it reads
    the next. It is handed the reference's values too (`_Ahead`), to render the sheets with
    while the engine is still at work. `started`: the engine's work on `path`, begun already
    (`_start_early`); `announced`: the recalculation's step was said already."""
    if not announced:
        say(Text("step_recalculate", engine=engine.name))
    pending = started if started is not None else engine.start(path, cells, prepared=prepared)
    try:
        if pending.alone:  # a very large workbook: the engine's values first, then the reference, never both
            _return_freed_memory()
            pending.result()
            say(Text("step_reference"))
        analysis, expected = expected_cells(layout, inputs, analysis=analysis)
        lsq = least_squares_analysis(analysis.statuses, analysis.settings)
        if store is not None:
            store(pending.sheet, _Ahead(expected, pending.working) if isinstance(expected, CellGrid) else None)
        recalculated: Recalculated = pending.result()
    except BaseException:  # interrupted, or the reference failed: the engine's work is given up
        pending.cancel()
        raise
    say(Text("step_compare", cells=len(recalculated.values)))
    verification = compare(expected, recalculated, set(own_sheet_titles(layout)) - {META_SHEET})
    # a formula typed over that reads (or answers for) an input: where to type instead
    verification.mismatches = [replace(m, hint=summary_sheet.typed_over_hint(layout, m.sheet, m.cell))
                               if m.typed_over else m for m in verification.mismatches]
    verification.note = note
    verification.uncovered = [Text("uncovered_row", row=row, exp_id=exp_id) if exp_id
                              else Text("uncovered_no_id", row=row) for row, exp_id in inputs.uncovered]
    verification.rows_covered = inputs.covered
    warnings = [note] if note else []
    if verification.cells_compared == 0:
        raise InputError("the engine returned no formula cells to compare", path=str(shown_as))
    notes = list(inputs.notes) + [Text("row_unusable", row=row, reason=reason) for row, reason in inputs.unusable]
    return WorkbookReport(path=shown_as, layout=layout, inputs=inputs, analysis=analysis,
                          verification=verification, warnings=warnings, lsq=lsq, notes=notes)


def _return_freed_memory() -> None:
    """Give the memory this process has freed (the built workbook's cells, released once saved)
    back to the system, where an engine's process can use it: Python's allocator keeps freed
    blocks, and glibc's malloc keeps freed pages until `malloc_trim` (elsewhere: nothing to do)."""
    import ctypes
    import gc

    gc.collect()
    try:
        trim = ctypes.CDLL(None).malloc_trim  # the C library the interpreter runs on
    except (OSError, AttributeError):  # not glibc
        return
    trim(0)


def verify(path: str | Path, *, engine: str = "auto", progress: Progress | None = None) -> WorkbookReport:
    """Recalculate a workbook as it stands and compare every formula cell with the reference."""
    say = progress or _quiet
    path = Path(path)
    wb = load_inputs(path)
    layout = read_layout(wb, path)
    inputs = read_inputs(wb, layout, path)
    del wb  # what the engine and the reference need is in `inputs`
    chosen, note = choose_engine(engine, len(inputs.rows))
    return _check(path, path, layout, inputs, chosen, note, say)


def analysis_from_source(source: str | Path, *, strict_physics: bool | None = None,
                         warnings: list[str] | None = None) -> tuple[Analysis, list[ResultRow]]:
    """The reference analysis of a results CSV or of a filled workbook's inputs.

    strict_physics overrides the workbook's switch (None keeps it; a CSV defaults to warnings only).
    `warnings`, when given, gets what reading a CSV warned of (a missing shard, a renamed exp_id,
    the encoding it guessed), for the command to print.
    """
    source = Path(source)
    if source.suffix.lower() in (".xlsx", ".xlsm"):
        from scm_xl.safety import check_xlsx

        check_xlsx(source)  # report, compare, predict, solve: every reader of a workbook refuses a bomb first
        wb = load_inputs(source)
        layout = read_layout(wb, source)
        inputs = read_inputs(wb, layout, source)
        settings = inputs.settings
        if strict_physics is not None:
            settings = replace(settings, strict_physics=strict_physics)
        rows = [row for _, row in inputs.rows]
        return analyze(rows, settings), rows
    table = read_results(source)
    if warnings is not None:
        warnings.extend(table.warnings)
    check_model_names(table.rows, where=str(source))
    return analyze(table.rows, Settings(strict_physics=bool(strict_physics))), table.rows


def questions_from_inputs(inputs: Inputs, rows: Sequence[ResultRow]) -> dict[str, Any]:
    """The forward and inverse questions a workbook asks (its input cells, and its method cell),
    each blank or non-number cell taking the default question of `rows`."""
    from scm_xl.methods import default_questions

    questions = default_questions(rows)
    if not questions:
        return {}
    for part, keys in (("forward", ("concurrency", "max_tokens", "model")),
                       ("inverse", ("target_tps", "max_tokens", "model"))):
        typed = getattr(inputs, part)
        for key in keys:
            value = typed.get(key)
            if key == "model":
                if isinstance(value, str) and value.strip():
                    questions[part][key] = value.strip()
            elif isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
                questions[part][key] = int(value) if key != "target_tps" and float(value).is_integer() else value
    questions["method"] = inputs.settings.method
    return questions


def questions_from_source(source: str | Path, rows: Sequence[ResultRow]) -> dict[str, Any]:
    """The questions `solve`, `predict` and the report's calculator ask of SOURCE by default: a
    filled workbook's own input cells, else (a results CSV) `methods.default_questions`."""
    source = Path(source)
    if source.suffix.lower() in (".xlsx", ".xlsm"):
        wb = load_inputs(source)
        return questions_from_inputs(read_inputs(wb, read_layout(wb, source), source), rows)
    from scm_xl.methods import default_questions

    return default_questions(rows)


__all__ = ["WorkbookReport", "analysis_from_source", "fill", "questions_from_inputs", "questions_from_source",
           "verify"]
