"""What every formula cell of the core sheets should hold, computed by the Python reference.

This maps the reference's results onto the layout's addresses, cell by cell, so the
verifier can compare an engine's recalculation with it; `registry.expected_cells` calls
one function here per sheet.
"""

from __future__ import annotations

from collections.abc import MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any

from scm_xl.engines.base import CellError, CellValue
from scm_xl.model import (
    Analysis, at_base_prompt, cells_of, effective_prompt_level, model_numbers, physics_bytes, prompt_index,
)
from scm_xl.results import ResultRow
from scm_xl.workbook.catalog_tables import CatalogLayout, physics_catalog, physics_column_values
from scm_xl.workbook import charts, latency_sheet, lsq_sheet, summary_sheet
from scm_xl.workbook.first_principles import expected_calculator
from scm_xl.workbook.formulas import MIRRORED_KEYS
from scm_xl.workbook.io import Inputs
from scm_xl.workbook.sheet import RowTable
from scm_xl.workbook.layout import (
    CELLS_TABLE, CONCURRENCY_TABLE, RAW_FORMULA_KEYS, Layout, unusable_tests,
)
from openpyxl.utils import get_column_letter

Expected = MutableMapping[tuple[str, str], CellValue]  # a CellGrid when the registry computes them
NA = CellError("#N/A")


def number_value(value: float | int | bool | None) -> CellValue:
    if value is None:
        return None
    return float(value)


def text_value(value: str | None) -> CellValue:
    return value if value else None


def coerce_key(value: Any) -> float | str | None:
    """A typed lookup key as spreadsheet criteria see it: numbers, numeric text as numbers."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    text = str(value).strip()
    if not text:
        return None
    try:
        return float(text)
    except ValueError:
        return text


def fmt_key(value: Any) -> str:
    """How `"f("&A1&")"` renders a typed value."""
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def summary(exp: Expected, layout: Layout, inputs: Inputs, analysis: Analysis) -> None:
    defined = {name: (layout.title(cell.sheet), cell.address) for name, cell in layout.defined_names().items()}
    ll = lsq_sheet.LsqLayout(layout)
    for name, address in ll.defined_names().items():
        defined[name] = (ll.title, address)
    lat = latency_sheet.LatencyLayout(layout)
    for name, address in lat.defined_names().items():
        defined[name] = (lat.title, address)
    extra: dict[str, CellValue] = {
        "unusable_rows": float(len(inputs.unusable)),
        "physics_rows": float(sum(1 for s in analysis.statuses if s.physics.count > 0)),
    }
    exp.update(summary_sheet.expected_sheet(layout, exp, defined, extra))


def chart_data(exp: Expected, layout: Layout, inputs: Inputs, analysis: Analysis) -> None:
    base_level = analysis.calibration.base_prompt_level  # the charts draw the base prompt level's rows
    included = [(row.model, float(row.max_tokens), float(row.concurrency), s.tps, row.latency_p95_s,
                 row.ttft_p95_s) for (_, row), s in zip(inputs.rows, analysis.statuses)
                if s.included and at_base_prompt(s, base_level)]
    title = layout.title("consistency")
    consistency = [tuple(exp.get((title, f"{layout.cons_col(key)}{layout.cons_first + position}"))
                         for key in ("role", "measured", "predicted")) for position in range(layout.rows)]
    calibration = layout.title("calibration")
    level = layout.table_col(CONCURRENCY_TABLE, "level")
    levels = [exp.get((calibration, f"{level}{layout.c_table_first + slot}")) for slot in range(layout.c_slots)]
    exp.update(charts.expected_chart_data(layout, inputs.chart_groups, included, levels,
                                          consistency))  # type: ignore[arg-type]


def first_principles(exp: Expected, layout: Layout, inputs: Inputs, analysis: Analysis) -> None:
    """The catalog's computed columns and the calculator."""
    _catalog(exp, layout, analysis)
    first_principles_only(exp, layout, inputs, analysis)


def _catalog(exp: Expected, layout: Layout, analysis: Analysis) -> None:
    settings = analysis.settings
    pc = settings.catalog or physics_catalog()
    cl = CatalogLayout(layout.lang, pc)
    nbytes = physics_bytes(settings.physics_precision)
    for i, (_, spec) in enumerate(pc.models):
        for field, value in physics_column_values(spec, nbytes).items():
            exp[(cl.title, f"{get_column_letter(cl.model_col(field))}{cl.model_first + i}")] = value


def first_principles_only(exp: Expected, layout: Layout, inputs: Inputs, analysis: Analysis) -> None:
    pc = analysis.settings.catalog or physics_catalog()
    cl = CatalogLayout(layout.lang, pc)
    for key, value in expected_calculator(layout.lang, cl, inputs.first_principles).items():
        exp[key] = value


@dataclass(frozen=True)
class CodeScales:
    """The cell code's scales, as the cells sheet computes them: one more than the largest
    max_tokens and concurrency of the rows, and one more than the number of prompt levels."""

    length: int
    concurrency: int
    prompt: int = 1

    @classmethod
    def of(cls, rows: Sequence[ResultRow], prompt_levels: int = 0) -> CodeScales:
        return cls(max((r.max_tokens for r in rows), default=0) + 1, max((r.concurrency for r in rows), default=0) + 1,
                   prompt_levels + 1)

    def code(self, model_number: int, max_tokens: int, concurrency: int, prompt_slot: int = 0) -> int:
        return ((model_number * self.length + max_tokens) * self.prompt + prompt_slot) * self.concurrency + concurrency


def cell_key(model: str, max_tokens: int, concurrency: int, prompt_slot: int = 0) -> str:
    return f"{model}|{max_tokens}|{concurrency}" + (f"|P{prompt_slot}" if prompt_slot > 0 else "")


def _prompt_table(analysis: Analysis) -> tuple[int | None, list[int]]:
    """(the base prompt level, the K_in table's levels)."""
    cal = analysis.calibration
    return cal.base_prompt_level, [level.prompt_level for level in cal.prompt_levels]


def cells(exp: Expected, layout: Layout, inputs: Inputs, analysis: Analysis) -> None:
    title = layout.title("cells")
    rows = [row for _, row in inputs.rows]
    positions = [sheet_row - layout.raw_first + 1 for sheet_row, _ in inputs.rows]
    base_level, levels = _prompt_table(analysis)
    cells = cells_of(rows, [s.tps for s in analysis.statuses], [s.eligible for s in analysis.statuses],
                     layout.cell_slots, layout.m_slots, base_level=base_level, prompt_levels=levels)
    numbers = model_numbers(rows, layout.m_slots)
    scales = CodeScales.of(rows, len(levels))
    for i in range(layout.cell_slots):
        row = layout.cells_first + i
        c = cells[i] if i < len(cells) else None
        values: dict[str, CellValue] = {key: None for key in (
            "key", "first_row", "model", "max_tokens", "concurrency", "model_no", "code", "rows", "eligible",
            "max_tps", "mean_ln", "lower_max", "group_low_c", "group_base", "p_index", "prompt_level")}
        if c is not None:
            slot = c.key[2]
            values.update({
                "key": cell_key(c.model, c.max_tokens, c.concurrency, slot),
                "first_row": float(positions[c.first_row - 1]),
                "model": c.model, "max_tokens": float(c.max_tokens), "concurrency": float(c.concurrency),
                "model_no": float(numbers[c.key[0]]),
                "code": float(scales.code(numbers[c.key[0]], c.max_tokens, c.concurrency, slot)),
                "rows": float(c.rows), "eligible": float(c.eligible), "max_tps": c.max_tps, "mean_ln": c.mean_ln,
                "lower_max": c.lower_max, "group_low_c": float(c.group_low_c), "group_base": c.group_base,
                "p_index": float(slot), "prompt_level": number_value(c.prompt_level),
            })
        for key, value in values.items():
            exp[(title, f"{layout.table_col(CELLS_TABLE, key)}{row}")] = value
    for key, value in (("l_scale", scales.length), ("c_scale", scales.concurrency), ("p_scale", scales.prompt)):
        exp[(title, f"{layout.scale_col(key)}{layout.cells_first}")] = float(value)
    firsts: dict[str, tuple[int, str]] = {}
    for position, typed in zip(positions, rows):
        firsts.setdefault(typed.model.casefold(), (position, typed.model))
    seen = list(firsts.values())
    for i in range(layout.m_slots):
        first, name = seen[i] if i < len(seen) else (0, None)
        exp[(title, f"{layout.seen_models_col('first')}{layout.cells_first + i}")] = float(first)
        exp[(title, f"{layout.seen_models_col('name')}{layout.cells_first + i}")] = _model_text(name)


def workings_rows(exp: Expected, layout: Layout, inputs: Inputs, analysis: Analysis) -> None:
    """The per-row workings: row k holds the k-th row under the raw-data header."""
    by_row = {sheet_row: (row, status) for (sheet_row, row), status in zip(inputs.rows, analysis.statuses)}
    unusable = dict(inputs.unusable)
    numbers = model_numbers([row for _, row in inputs.rows], layout.m_slots)
    base_level, levels = _prompt_table(analysis)
    scales = CodeScales.of([row for _, row in inputs.rows], len(levels))
    blank: dict[str, CellValue] = {key: None for key in RAW_FORMULA_KEYS}
    for flag in ("short_output", "superlinear", "over_ceiling", "kv_over", "present", "eligible", "has_input",
                 "unusable_code", "p0_included"):
        blank[flag] = 0.0
    codes = {message: float(code) for code, (_, _, message) in enumerate(unusable_tests(layout.lang), start=1)}
    table = RowTable(blank)
    for sheet_row in range(layout.raw_first, layout.raw_last + 1):
        position = sheet_row - layout.raw_first + 1
        typed = inputs.entry.get(position, {})
        values: dict[str, CellValue] = dict(blank)
        values["in_range"] = position <= inputs.covered
        values["position"] = float(position)
        for key in MIRRORED_KEYS:
            values[key] = typed_value(typed.get(key))
        if any(values[key] is not None for key in MIRRORED_KEYS):
            values["has_input"] = 1.0
        pair = by_row.get(sheet_row)
        if sheet_row in unusable:
            values["unusable"] = unusable[sheet_row]
            values["unusable_code"] = codes[unusable[sheet_row]]
        elif pair is not None:
            row, s = pair
            slot = prompt_index(row, base_level, levels)
            at_p0 = at_base_prompt(s, base_level)
            values.update({
                "present": 1.0, "tps": s.tps, "ln_tps": s.ln_tps, "fault": number_value(s.fault),
                "eligible": number_value(s.eligible), "mono": number_value(s.monotonic_violation),
                "cell_key": cell_key(s.model, s.max_tokens, s.concurrency, slot or 0),
                "model_no": number_value(numbers.get(s.model.casefold())),
                "cell_code": (float(scales.code(numbers[s.model.casefold()], s.max_tokens, s.concurrency, slot))
                              if s.model.casefold() in numbers and slot is not None else None),
                "p_level": number_value(effective_prompt_level(row, base_level)), "p_index": number_value(slot),
                "at_p0": number_value(at_p0), "p0_included": number_value(s.included and at_p0),
                "lower_max": s.faster_lower_tps,
                "included": number_value(s.included), "reason": text_value(s.reason(layout.lang)),
                "c_included": number_value(s.concurrency) if s.included else None,
                "l_included": number_value(s.max_tokens) if s.included else None,
                "m_included": _model_text(typed.get("model")) if s.included else None,
                "f_known": 1.0 if analysis.calibration.f(s.concurrency) is not None else 0.0,
                "model_id": float(s.physics.model_id), "gpu_id": float(s.physics.gpu_id),
                "short_output": number_value(s.physics.short_output),
                "group_low_c": float(s.physics.group_lowest_concurrency),
                "superlinear": number_value(s.physics.superlinear), "ceiling": s.physics.ceiling_tps,
                "over_ceiling": number_value(s.physics.above_ceiling), "kv_over": number_value(s.physics.kv_over_memory),
                "physics": float(s.physics.count), "physics_text": text_value(s.physics.text(layout.lang)),
            })
        table.add(values)
    table.place(exp, layout.raw_place, layout.raw_first)


def typed_value(value: Any) -> CellValue:
    """What INDEX of a typed cell returns: numbers as floats, text as typed, blank as nothing."""
    if value is None or (isinstance(value, str) and value == ""):
        return None
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return float(value)
    return str(value)


def _model_text(value: Any) -> str | None:
    """`model&""`: a number typed as a model name renders without a trailing .0 when whole."""
    if value is None:
        return None
    return fmt_key(value)
