"""Read and write the workbook's input cells (raw rows and hand-set settings)."""

from __future__ import annotations

import functools
import re
import tempfile
import zipfile
import zlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Literal, cast

import openpyxl
from openpyxl import Workbook
from openpyxl.cell.cell import Cell
from openpyxl.utils import column_index_from_string
from openpyxl.worksheet.worksheet import Worksheet

from scm_xl.errors import InputError
from scm_xl.model import Settings
from scm_xl.results import FLOAT_COLUMNS, ResultRow, normalise_override
from scm_xl.report_texts import Text
from scm_xl.rules import Lang
from scm_xl.workbook.stamp import PendingFills, is_formula
from scm_xl.xlsx import package
from scm_xl.workbook.styles import write_value
from scm_xl.workbook import charts, latency_sheet, replicates_sheet, slo_sheet, summary_sheet
from scm_xl.workbook.first_principles import read_calculator_inputs, set_calculator_inputs
from scm_xl.workbook.replicates_sheet import DEFAULT_CV_THRESHOLD, read_threshold
from scm_xl.workbook.layout import (
    DEFAULT_CELL_SLOTS, DEFAULT_CONCURRENCY_SLOTS, DEFAULT_LENGTH_SLOTS, DEFAULT_PHYSICS_PRECISION, DEFAULT_SHORT_OUTPUT_RATIO, DEFAULT_MODEL_SLOTS, DEFAULT_PROMPT_SLOTS, DEFAULT_ROWS, LAYOUT_VERSION,
    DISPLAY_KEYS, ENTRY_COLUMNS, META_SHEET, NUMERIC_INPUT_KEYS, RAW_INPUT_KEYS,
    MAX_MODELS, Layout, fitted_layout, unusable_tests,
)

_RESULT_FIELDS = {f.name for f in fields(ResultRow)}
_NUMERIC_INPUTS = set(NUMERIC_INPUT_KEYS)
_FLOAT_INPUTS = set(FLOAT_COLUMNS) - {"tps"}  # one home: the results-CSV schema
# Inputs the per-row workings copy (the rest, notes and source, are for people only).
_COMPUTED_INPUTS = tuple(c.key for c in ENTRY_COLUMNS if c.kind == "input" and c.key not in ("notes", "source"))
_RANGE = re.compile(r"\$?[A-Z]+\$?(\d+):\$?[A-Z]+\$?(\d+)")


@dataclass
class Inputs:
    """Everything a person can type into the workbook."""

    rows: list[tuple[int, ResultRow]] = field(default_factory=list)  # (sheet row, row)
    settings: Settings = field(default_factory=Settings)
    base_model_input: Any = None
    forward: dict[str, Any] = field(default_factory=dict)  # concurrency, max_tokens, model
    inverse: dict[str, Any] = field(default_factory=dict)  # target_tps, max_tokens, model
    first_principles: dict[str, Any] = field(default_factory=dict)  # the calculator's hand-set cells
    cv_threshold: Any = DEFAULT_CV_THRESHOLD  # the replicates sheet's hand-set CV threshold, as typed
    latency: dict[str, Any] = field(default_factory=dict)  # the latency sheet's hand-set cells and fitted knee
    slo_typed: dict[str, Any] = field(default_factory=dict)  # the Summary's SLO inputs, as typed
    slo_data: slo_sheet.SloData = field(default_factory=slo_sheet.SloData)  # the per-request records and keys
    slo_capacity: dict[str, Any] = field(default_factory=dict)  # the Summary's rate limits and prices, as typed
    method_typed: Any = None  # the Summary's method cell, as typed (settings.method is what it takes effect as)
    # What the raw-data sheet holds, by position (1 = the first row under the header).
    entry: dict[int, dict[str, Any]] = field(default_factory=dict)
    unusable: list[tuple[int, str]] = field(default_factory=list)  # (sheet row, reason in words)
    uncovered: list[tuple[int, str]] = field(default_factory=list)  # (sheet row, exp_id) beyond the formulas
    beyond: list[dict[str, Any]] = field(default_factory=list)  # what those rows hold
    display_rows: list[int] = field(default_factory=list)  # sheet rows whose display cells hold formulas
    notes: list[str] = field(default_factory=list)  # things a person should know (not errors)
    covered: int = 0  # raw-data rows the formulas cover
    chart_groups: list[tuple[Any, Any]] = field(default_factory=list)  # (model, max_tokens) of each chart line


# the names openpyxl opens (it refuses any other suffix, whatever the bytes)
WORKBOOK_SUFFIXES = (".xlsx", ".xlsm", ".xltx", ".xltm")


# What the input readers (`read_inputs`, `read_meta_layout`) read of a sheet, as each sheet's spec
# declares it (`sheet.SheetSpec.inputs`): "whole" to its last row (the raw data, the SLO sheets'
# experiments and per-request records), "top" its cells above INPUT_ROWS (every cell a person
# types on such a sheet lies well above it) or above the row its spec gives for the workbook's
# layout (`SheetSpec.input_rows`: the latency sheet's forward inputs move down with the
# concurrency slots), "none" not one cell (the per-row workings and the sheets computed from
# them: formulas only).
SheetRead = Literal["whole", "top", "none"]
INPUT_ROWS = 200
# What `load(inputs=...)` is given: what is read of each sheet (by title; a number: its formula
# cells down to that row), from the layout the workbook's meta sheet declares (None where it
# declares none that `read_meta_layout` would take).
InputReads = Callable[[Layout | None], Mapping[str, SheetRead | int]]


def load(path: str | Path, *, data_only: bool = False, inputs: InputReads | None = None) -> Workbook:
    """The workbook at `path`, as openpyxl reads it. `inputs` (what the input readers read of each
    sheet; `registry.load_inputs` gives every sheet's): for reading its inputs and nothing else
    (`verify`, and `predict`, `solve` and `report` of a workbook), openpyxl reads a copy without
    the formula cells they never read: those of a "none" sheet (or one not named), and those
    below the input rows on a "top" one. openpyxl builds an object a cell: a 10,000-row
    workbook's 1.4 million formula cells took 46 s and 900 MB, and a small one's 14,000 formula
    cells are half the time `verify` takes."""
    path = Path(path)
    if not path.exists():
        raise InputError("file not found", path=str(path))
    if path.suffix.lower() not in WORKBOOK_SUFFIXES:
        hint = " (a results CSV is filled into a workbook by `scm-xl fill`)" if path.suffix.lower() in (
            ".csv", ".tsv", ".txt") else ""
        raise InputError(f"not an .xlsx workbook: its name ends in {path.suffix or 'no suffix'!r}, and only "
                         f"{', '.join(WORKBOOK_SUFFIXES)} are read{hint}", path=str(path))
    try:
        if inputs is not None:
            return _inputs_only(path, data_only, inputs)
        # A macro-enabled workbook keeps its macros (vbaProject.bin) through a fill.
        return openpyxl.load_workbook(path, data_only=data_only, keep_vba=path.suffix.lower() == ".xlsm")
    except (zipfile.BadZipFile, KeyError, ValueError, OSError, SyntaxError) as exc:  # SyntaxError: broken XML
        raise InputError(f"not a readable .xlsx workbook ({type(exc).__name__})", path=str(path)) from exc


def _inputs_only(path: Path, data_only: bool, inputs: InputReads) -> Workbook:
    """`load(inputs=...)`: openpyxl reads a copy (in a temporary folder, stored, not compressed)
    without the formula cells the input readers never read."""
    with zipfile.ZipFile(path) as book:
        parts = package.sheet_parts(book)
        reads = inputs(_declared_layout(book, parts.get(META_SHEET), path))
        below = {part: read if isinstance(read, int) else {"top": INPUT_ROWS, "none": 0}[read]
                 for title, part in parts.items() if (read := reads.get(title, "none")) != "whole"}

    def rewrite(name: str) -> package.SheetRewrite | None:
        if name not in below:
            return None
        return lambda blocks: (package.formula_cells_dropped(block, below[name]) for block in blocks)

    with tempfile.TemporaryDirectory(prefix="scm-xl-inputs-") as folder:
        copy = Path(folder) / "inputs.xlsx"
        package.copy_package(path, copy, rewrite)
        return openpyxl.load_workbook(copy, data_only=data_only)


def _declared_layout(book: zipfile.ZipFile, part: str | None, path: Path) -> Layout | None:
    """The layout the meta sheet (its XML `part`) declares, read from the XML (`package.cells`),
    where `read_meta_layout` would take it; None where it would refuse it (it then says why, once
    openpyxl has read the copy)."""
    if part is None:
        return None
    shared = functools.cache(lambda: package.shared_strings(book))  # read only if a cell needs it
    values: dict[tuple[int, int], object] = {}
    try:
        with book.open(part) as stream:
            for row, column, attrs, content in package.cells(stream):
                if row > META_MAX_ROWS:
                    break
                if column <= 2:
                    values[row, column] = package.stored_value(attrs, content, shared)
        last = max((row for row, _ in values), default=0)
        return _meta_layout([(values.get((row, 1)), values.get((row, 2))) for row in range(1, last + 1)], path)
    except (InputError, KeyError, ValueError, IndexError, SyntaxError, OSError, EOFError, zipfile.BadZipFile,
            zlib.error):  # a broken part: the copy and openpyxl's read of it then say so
        return None


def read_meta_layout(wb: Workbook, path: str | Path) -> Layout:
    if META_SHEET not in wb.sheetnames:
        raise InputError(f"not an scm-xl workbook: it has no {META_SHEET} sheet "
                         "(build one with `scm-xl build template`)", path=str(path))
    ws = wb[META_SHEET]
    return _meta_layout([(ws.cell(row=r, column=1).value, ws.cell(row=r, column=2).value)
                         for r in range(1, min(ws.max_row, META_MAX_ROWS) + 1)], path)


def _meta_layout(rows: list[tuple[Any, Any]], path: str | Path) -> Layout:
    """The layout the meta sheet's rows (key, value), from its first, declare; refused with the
    cell to look at where it is not one scm-xl wrote."""
    meta: dict[str, Any] = {}  # checked below
    meta_rows: dict[str, int] = {}  # where each key sits, for messages
    for r, (key, value) in enumerate(rows, start=1):
        meta.setdefault(str(key), value)
        meta_rows.setdefault(str(key), r)
    if meta.get("layout_version") != LAYOUT_VERSION:
        raise InputError(f"workbook layout version {meta.get('layout_version')!r} is not {LAYOUT_VERSION}: it was "
                         "built by another scm-xl version; fill your results CSV into a new workbook "
                         "(scm-xl fill RESULTS.csv)", path=str(path))
    lang = meta.get("lang")
    if lang not in ("zh", "en"):
        raise InputError(f"unknown workbook language {lang!r}", path=str(path))
    sizes = {key: _meta_size(meta, key, default, path, meta_rows) for key, default in (
        ("rows", DEFAULT_ROWS), ("c_slots", DEFAULT_CONCURRENCY_SLOTS), ("l_slots", DEFAULT_LENGTH_SLOTS),
        ("m_slots", DEFAULT_MODEL_SLOTS), ("cell_slots", DEFAULT_CELL_SLOTS), ("p_slots", DEFAULT_PROMPT_SLOTS))}
    layout = Layout(lang=lang, **sizes)
    beyond = over_capacity(layout)
    if beyond is not None:  # refused here, before anything is built or computed at these sizes
        key, why = beyond
        where = f" ('{META_SHEET}'!B{meta_rows[key]})" if key in meta_rows else ""
        raise InputError(f"the {META_SHEET} sheet's sizes{where}: {why}: the workbook was changed by hand or is "
                         "not one scm-xl wrote",
                         path=str(path))
    return layout


# What a filled workbook can hold, one home for fill (sizing a workbook to the data) and for
# reading a workbook's meta sheet (sizes typed there). Each bound is where the work stops being
# minutes and a few GB: 100,000 raw rows fill in about 8 minutes; the least-squares sheet holds
# two p x p matrices (p = 1 + c_slots + l_slots + m_slots + p_slots), whose cost grows with p
# squared (p = 330: 50 s), so p = 1,000 costs about as much as the rows at their bound. Within
# these every sheet stays inside a spreadsheet's 1,048,576 rows and 16,384 columns.
MAX_DATA_ROWS = 100_000
MAX_LAYOUT_ROWS = fitted_layout("en", MAX_DATA_ROWS, 0, 0, 0).rows  # those rows and their headroom
MAX_PARAMETERS = 1_000
PARAMETER_KEYS = ("c_slots", "l_slots", "m_slots", "p_slots")

# The sizes a workbook may declare on its meta sheet, each alone (beyond these it is not one
# scm-xl wrote); `over_capacity` then checks them together.
META_LIMITS = {"rows": MAX_LAYOUT_ROWS, "c_slots": MAX_PARAMETERS, "l_slots": MAX_PARAMETERS, "m_slots": MAX_MODELS,
               "cell_slots": fitted_layout("en", 0, 0, 0, 0, n_cells=MAX_LAYOUT_ROWS).cell_slots,
               "p_slots": MAX_PARAMETERS}
META_MAX_ROWS = 100  # the meta sheet holds a dozen keys; a longer one is not read to its end


def parameters(layout: Layout) -> int:
    """The least-squares sheet's parameter count: the intercept and one per table slot."""
    return 1 + sum(getattr(layout, key) for key in PARAMETER_KEYS)


def over_capacity(layout: Layout) -> tuple[str, str] | None:
    """The first size of `layout` beyond what a filled workbook can hold, taken together:
    (the size's key, why in words), or None. A cell slot is a distinct (model, max_tokens,
    concurrency, prompt level) of the raw rows, so there are never more than the rows allow."""
    if layout.rows > MAX_LAYOUT_ROWS:
        return "rows", (f"rows {layout.rows:,}: a workbook's formulas cover at most {MAX_LAYOUT_ROWS:,} raw rows "
                        f"({MAX_DATA_ROWS:,} and their headroom)")
    p = parameters(layout)
    if p > MAX_PARAMETERS:
        largest = max(PARAMETER_KEYS, key=lambda key: getattr(layout, key))
        sizes = " + ".join(f"{key} {getattr(layout, key):,}" for key in PARAMETER_KEYS)
        return largest, f"{p:,} least-squares parameters (1 + {sizes}): a workbook holds at most {MAX_PARAMETERS:,}"
    cells = fitted_layout(layout.lang, 0, 0, 0, 0, n_cells=layout.rows).cell_slots  # one per row, headroom
    if layout.cell_slots > cells:
        return "cell_slots", (f"cell_slots {layout.cell_slots:,} with rows {layout.rows:,}: {layout.rows:,} raw rows "
                              f"have at most {cells:,} cell slots")
    return None


def _meta_size(meta: dict[str, Any], key: str, default: int, path: str | Path, rows: dict[str, int]) -> int:
    """A size from the hidden meta sheet, validated like any input."""
    value = meta.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not float(value).is_integer() \
            or not 1 <= value <= META_LIMITS[key]:
        raise InputError(f"the {META_SHEET} sheet's {key} ('{META_SHEET}'!B{rows[key]}) is {str(value)[:40]!r}, "
                         f"not a whole number from 1 to "
                         f"{META_LIMITS[key]:,}: the workbook was changed by hand or is not one scm-xl wrote",
                         path=str(path))
    return int(value)


def _where(path: str | Path, layout: Layout, sheet_key: str, address: str) -> str:
    return f"{path}: '{layout.title(sheet_key)}'!{address}"


def _blank(value: Any) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


def covered_rows(wb: Workbook, layout: Layout) -> int:
    """Raw-data rows the formulas cover: the workings' capacity, or fewer when rows were
    deleted from the raw-data sheet (its referenced range shrinks with them)."""
    name = layout.entry_name("exp_id")
    text = wb.defined_names[name].attr_text if name in wb.defined_names else None
    match = _RANGE.search(text) if isinstance(text, str) else None
    if match is None:
        return layout.rows
    return max(0, min(layout.rows, int(match.group(2)) - int(match.group(1))))


def _entry_blank(value: Any) -> bool:
    """Blank as the workings see it: `cell&""=""`."""
    return value is None or (isinstance(value, str) and value == "")


def unusable_reason(values: dict[str, Any], lang: Lang) -> tuple[int, str] | None:
    """Why a typed row cannot be used: (code, words), as the workings compute it (None: usable)."""
    for code, (key, kind, message) in enumerate(unusable_tests(lang), start=1):
        value = values.get(key)
        if kind == "blank" and _entry_blank(value):
            return code, message
        if kind == "text" and isinstance(value, str) and value != "":
            return code, message
    return None


def _row_values(ws: Worksheet, first: int, last: int, width: int) -> Iterator[tuple[int, list[Any]]]:
    """Each row's values in columns 1..width, rows first..last (None where a cell is empty), as
    iter_rows(values_only=True) gives them, without the empty cell object iter_rows creates in the
    sheet for every empty position it passes (200,000 of them on a 10,000-row raw-data sheet)."""
    held = ws._cells
    for row in range(first, last + 1):
        values: list[Any] = [None] * width
        for col in range(width):
            cell = held.get((row, col + 1))
            if cell is not None:
                values[col] = cell.value
        yield row, values


def read_inputs(wb: Workbook, layout: Layout, path: str | Path, *, pending: PendingFills | None = None) -> Inputs:
    """Read raw rows and hand-set cells, validating them as the CSV reader would; `pending`: the
    cells a workbook just built holds only once saved (`BuiltWorkbook.fills`).

    A row with a blank required cell or text in a number column is not an error: the
    workbook shows why it cannot be used, and so does the reference (`unusable`)."""
    raw = wb[layout.title("raw")]
    rows: list[tuple[int, ResultRow]] = []
    seen: dict[str, int] = {}
    entry: dict[int, dict[str, Any]] = {}
    unusable: list[tuple[int, str]] = []
    uncovered: list[tuple[int, str]] = []
    beyond: list[dict[str, Any]] = []
    notes: list[str] = []
    covered = covered_rows(wb, layout)
    # Column indexes (0-based) in the rows iter_rows gives: far faster than a lookup per cell.
    indexes = {key: column_index_from_string(layout.entry_col(key)) - 1 for key in RAW_INPUT_KEYS}
    display_index = column_index_from_string(layout.entry_col(DISPLAY_KEYS[0])) - 1
    display_rows = set()
    last = max(raw.max_row, layout.raw_last)
    width = max(*indexes.values(), display_index) + 1
    held_back = pending.rows(raw, display_index + 1) if pending is not None else range(0)
    for sheet_row, cells in _row_values(raw, layout.raw_first, last, width):
        if is_formula(cells[display_index]) or sheet_row in held_back:
            display_rows.add(sheet_row)
        values = {key: cells[index] for key, index in indexes.items()}
        position = sheet_row - layout.raw_header_row
        if all(_entry_blank(values[key]) for key in _COMPUTED_INPUTS):
            if any(not _blank(values[key]) for key in RAW_INPUT_KEYS):
                notes.append(Text("row_only_notes", row=sheet_row))
            continue
        if position > covered:
            uncovered.append((sheet_row, str(values.get("exp_id") or "")))
            beyond.append(values)
            continue
        entry[position] = values
        reason = unusable_reason(values, layout.lang)
        if reason is not None:
            unusable.append((sheet_row, reason[1]))
            continue
        row = _row_from_cells(values, layout, path, sheet_row)
        if row.exp_id in seen:
            raise InputError(f"duplicate exp_id {row.exp_id!r} (first on row {seen[row.exp_id]})",
                             path=_where(path, layout, "raw", f"{layout.entry_col('exp_id')}{sheet_row}"))
        seen[row.exp_id] = sheet_row
        rows.append((sheet_row, row))
    for sheet_row in range(layout.raw_first, min(last, layout.raw_header_row + layout.rows) + 1):
        if sheet_row not in display_rows and (sheet_row - layout.raw_header_row) in entry:
            notes.append(Text("row_no_display", row=sheet_row))
    check_model_names([r for _, r in rows], where=str(path))

    cal = wb[layout.title("calibration")]
    typed = {key: cal[layout.keyed_cell("settings", key)].value for key in layout.keyed_rows("settings")}
    # the forward and inverse questions and the method are typed on the Summary
    typed_inputs = summary_sheet.read_inputs(wb[layout.title("summary")])
    base_model = typed["base_model"]
    short_output_ratio = _number_or_none(typed["short_output_ratio"])
    settings = Settings(
        base_model=str(base_model) if not _blank(base_model) else None,
        # a non-whole number typed in these two is passed on as typed (a float)
        base_max_tokens=_number_or_none(typed["base_max_tokens"]),  # type: ignore[arg-type]
        base_concurrency=_number_or_none(typed["base_concurrency"]),  # type: ignore[arg-type]
        monotonic_tolerance_pct=_number_or_none(typed["monotonic_tolerance_pct"]) or 0.0,
        strict_physics=bool(_number_or_none(typed["strict_physics"])),
        short_output_ratio=short_output_ratio if short_output_ratio is not None else DEFAULT_SHORT_OUTPUT_RATIO,
        physics_precision=_text_or_default(typed["physics_precision"], DEFAULT_PHYSICS_PRECISION),
        method="lsq" if str(typed_inputs["method"] or "").casefold() == "lsq" else "chain",
        base_prompt_level=_number_or_none(typed["base_prompt_level"]),  # type: ignore[arg-type]
        concurrency_slots=layout.c_slots, length_slots=layout.l_slots, model_slots=layout.m_slots,
        cell_slots=layout.cell_slots, prompt_slots=layout.p_slots,
    )
    chart_groups = [(model, _number_or_none(length))
                    for model, length in charts.read_groups(wb[layout.title("chart_data")], layout)]
    return Inputs(
        rows=rows, settings=settings, base_model_input=base_model,
        forward={k: typed_inputs[f"forward.{k}"] for k in summary_sheet.FORWARD_INPUTS},
        inverse={k: typed_inputs[f"inverse.{k}"] for k in summary_sheet.INVERSE_INPUTS},
        method_typed=typed_inputs["method"],
        entry=entry, unusable=unusable, uncovered=uncovered, beyond=beyond, display_rows=sorted(display_rows), notes=notes,
        covered=covered, chart_groups=chart_groups,
        first_principles=read_calculator_inputs(wb[layout.title("first_principles")]),
        cv_threshold=read_threshold(wb[replicates_sheet.SHEET_TITLES[layout.lang]])
        if replicates_sheet.SHEET_TITLES[layout.lang] in wb.sheetnames else DEFAULT_CV_THRESHOLD,
        latency=latency_sheet.read_cells(wb[latency_sheet.SHEET_TITLES[layout.lang]], layout)
        if latency_sheet.SHEET_TITLES[layout.lang] in wb.sheetnames else {},
        slo_typed=slo_sheet.read_typed(wb, layout), slo_data=slo_sheet.read_data(wb, layout),
        slo_capacity=slo_sheet.read_capacity(wb, layout),
    )


def _text_or_default(value: Any, default: str) -> str:
    if value is None or (isinstance(value, str) and value == ""):
        return default
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _number_or_none(value: Any) -> float | int | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return int(value) if float(value).is_integer() else value


def _row_from_cells(values: dict[str, Any], layout: Layout, path: str | Path, sheet_row: int) -> ResultRow:
    kwargs: dict[str, Any] = {}
    for key, value in values.items():
        if _blank(value):
            if key in ("exp_id", "model", "concurrency", "requests_per_slot", "total_requests", "max_tokens",
                       "total_time_s", "total_output_tokens"):
                raise InputError("required cell is blank",
                                 path=_where(path, layout, "raw", f"{layout.entry_col(key)}{sheet_row}"), column=key)
            continue
        if key in _NUMERIC_INPUTS:
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise InputError(f"{str(value)[:40]!r} is not a number (type a number, not text)",
                                 path=_where(path, layout, "raw", f"{layout.entry_col(key)}{sheet_row}"),
                                 column=key)
            if key not in _FLOAT_INPUTS:
                if not float(value).is_integer():
                    raise InputError(f"{value!r} is not a whole number",
                                     path=_where(path, layout, "raw", f"{layout.entry_col(key)}{sheet_row}"),
                                     column=key)
                value = int(value)
            else:
                value = float(value)
        elif key == "override":
            try:
                value = normalise_override(str(value))
            except InputError as exc:
                raise InputError(exc.problem, path=_where(path, layout, "raw", f"{layout.entry_col(key)}{sheet_row}"),
                                 column=key) from None
        else:
            value = str(value).strip() if key in ("exp_id", "model") else str(value)
        if key in _RESULT_FIELDS:
            kwargs[key] = value
    try:
        return ResultRow(**kwargs)
    except InputError as exc:
        column = exc.column or ""
        address = f"{layout.entry_col(column)}{sheet_row}" if column in RAW_INPUT_KEYS else f"row {sheet_row}"
        raise InputError(exc.problem, path=_where(path, layout, "raw", address), column=exc.column) from None


def check_model_names(rows: list[ResultRow], *, where: str) -> None:
    """Spreadsheet criteria compare text case-insensitively: two spellings would merge."""
    seen: dict[str, str] = {}
    for row in rows:
        key = row.model.casefold()
        if key in seen and seen[key] != row.model:
            raise InputError(f"model names {seen[key]!r} and {row.model!r} differ only in case; "
                             "spreadsheets treat them as one model: spell them the same", path=where,
                             line=row.line or None, column="model")
        seen.setdefault(key, row.model)


def write_rows(wb: Workbook, layout: Layout, rows: list[ResultRow], *, clear: bool = True) -> None:
    """Clear the raw input cells (a freshly built workbook has none: clear=False) and write the
    rows; text that looks like a formula stays text."""
    ws = wb[layout.title("raw")]
    letters = {key: layout.entry_col(key) for key in RAW_INPUT_KEYS}
    for sheet_row in range(layout.raw_first, max(ws.max_row, layout.raw_last) + 1) if clear else ():
        for key in RAW_INPUT_KEYS:
            ws[f"{letters[key]}{sheet_row}"].value = None
    write_typed(wb, layout, [{key: getattr(row, key, None) for key in RAW_INPUT_KEYS} for row in rows])


def write_typed(wb: Workbook, layout: Layout, typed: list[dict[str, Any]]) -> None:
    """Write rows exactly as a person typed them (text stays text, even a number typed as text)."""
    ws = cast(Worksheet, wb[layout.title("raw")])
    columns = {key: column_index_from_string(layout.entry_col(key)) for key in RAW_INPUT_KEYS}
    # the sheet's cells looked up and added here, not through `ws.cell` (its checks and
    # bookkeeping are a third of typing 100,000 values): an input cell is never merged
    cells = ws._cells
    for i, values in enumerate(typed):
        sheet_row = layout.raw_first + i
        for key, value in values.items():
            if value is None:
                continue
            cell = cells.get((sheet_row, columns[key]))
            if cell is None:
                cell = cells[(sheet_row, columns[key])] = Cell(ws, row=sheet_row, column=columns[key])
            write_value(cast(Cell, cell), value)
    if typed:  # the last row written, as `ws.cell` keeps it (`ws.append` writes below it)
        ws._current_row = max(ws._current_row, layout.raw_first + len(typed) - 1)  # type: ignore[attr-defined]


def write_hand_set(wb: Workbook, layout: Layout, inputs: Inputs, *, settings: bool = True) -> None:
    """Restore hand-set settings and forward/inverse inputs read from an earlier workbook."""
    if settings:
        _write_settings(wb, layout, inputs)
    if inputs.first_principles:
        set_calculator_inputs(wb[layout.title("first_principles")], inputs.first_principles)
    if settings:
        replicates_sheet.write_threshold(wb[replicates_sheet.SHEET_TITLES[layout.lang]], inputs.cv_threshold)
        if inputs.latency:
            latency_sheet.write_cells(wb[latency_sheet.SHEET_TITLES[layout.lang]], layout, inputs.latency)
        if inputs.slo_typed:
            slo_sheet.set_inputs(wb, layout, inputs.slo_typed)
        if inputs.slo_capacity:
            slo_sheet.set_capacity_inputs(wb, layout, inputs.slo_capacity)
    summary_sheet.set_inputs(wb[layout.title("summary")], {
        **{f"forward.{key}": value for key, value in inputs.forward.items()},
        **{f"inverse.{key}": value for key, value in inputs.inverse.items()}})


def _write_settings(wb: Workbook, layout: Layout, inputs: Inputs) -> None:
    cal = wb[layout.title("calibration")]
    settings = inputs.settings
    for key, value in (("base_model", inputs.base_model_input), ("base_max_tokens", settings.base_max_tokens),
                       ("base_concurrency", settings.base_concurrency),
                       ("monotonic_tolerance_pct", settings.monotonic_tolerance_pct),
                       ("strict_physics", int(settings.strict_physics)),
                       ("short_output_ratio", settings.short_output_ratio),
                       ("physics_precision", settings.physics_precision),
                       ("base_prompt_level", settings.base_prompt_level)):
        cell = cal[layout.keyed_cell("settings", key)]
        write_value(cell, value)
    set_method(wb, layout, inputs.method_typed)  # as typed (a blank stays blank), on the Summary


def set_strict_physics(wb: Workbook, layout: Layout, strict: bool) -> None:
    wb[layout.title("calibration")][layout.keyed_cell("settings", "strict_physics")].value = 1 if strict else 0


def set_method(wb: Workbook, layout: Layout, method: Any) -> None:
    summary_sheet.set_inputs(wb[layout.title("summary")], {"method": method})
