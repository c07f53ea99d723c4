"""The calibration sheet: the settings (typed in column B, effective in C), the base point, and
one table per factor (f(c), K_len, K_in, C_model), each a slot per level with its rows and value.

This module owns the sheet's writer, its formula text and its reference values (from
`scm_xl.model`'s calibration), side by side and independent: that independence is what
`verify` checks. The factor tables are `TABLES`, one `FactorTable` each: its columns, where the
layout puts it, the formulas of one slot and the reference of one level. A new factor's table
is an entry here with its layout rows (`layout.py`: its columns and its header row). The
geometry is the layout's, because the workings, the consistency sheet and the derivation read
the tables (`Formulas.ctab`... and the defined names BaseModel, BaseTPS...).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from openpyxl.styles import Alignment
from openpyxl.worksheet.datavalidation import DataValidation
from openpyxl.worksheet.worksheet import Worksheet

from scm_xl.engines.base import CellValue
from scm_xl.model import (
    PREFERRED_BASE_MAX_TOKENS, Calibration, ConcurrencyLevel, LengthLevel, ModelLevel, PromptLevel, physics_bytes,
)
from scm_xl.workbook import summary_sheet
from scm_xl.workbook.expected import number_value, text_value, typed_value
from scm_xl.workbook.formulas import Formulas
from scm_xl.workbook.layout import (
    CONCURRENCY_TABLE, DEFAULT_PHYSICS_PRECISION, DEFAULT_SHORT_OUTPUT_RATIO, LENGTH_TABLE, MODEL_TABLE, PROMPT_TABLE,
    SHEET_TITLES, Column, Layout,
)
from scm_xl.workbook.literals import q
from scm_xl.workbook.printing import pages_for, print_setup
from scm_xl.workbook.sheet import Building, Checking, SheetSpec, names_on
from scm_xl.workbook.styles import (
    DEFAULT_FONT_SIZE, INPUT_FILL, KEY_FILL, TITLE_FONT, _formula, _header, _label, fit_row, wrapped_note,
)

LABEL_WIDTH = 50  # column A: the settings' labels wrap within it


# -- the formulas ----------------------------------------------------------------


def _base_criteria(fx: Formulas) -> str:
    """COUNTIFS/AVERAGEIFS criteria: included at the base prompt level, base model. The model, a
    text, comes last in every criteria list over the rows: IronCalc 0.9.1 tests a row's criteria in
    order and stops at the first that fails, and a text costs it twice a number."""
    return f"{fx.raw('p0_included')},1,{fx.raw('model')},{fx.name('BaseModel')}"


def _base_count(fx: Formulas, criteria: str) -> str:
    """How many rows meet `criteria`, which hold _base_criteria (included at the base prompt level)."""
    return fx.count_flagged(fx.raw("p0_included"), criteria)


def settings_formulas(fx: Formulas) -> dict[str, str]:
    """The settings' effective values (column C: the typed value, else the automatic one) and the base point."""
    lo = fx.lo
    raw = fx.raw
    bl = fx.name("BaseMaxTokens")
    inp = {k: lo.keyed_cell("settings", k, absolute=True) for k in lo.keyed_rows("settings")}
    at_preferred = f"{raw('max_tokens')},{PREFERRED_BASE_MAX_TOKENS},{_base_criteria(fx)}"
    at_base_length = f"{raw('max_tokens')},{bl},{_base_criteria(fx)}"
    with_level = f"{raw('prompt_level')},\">0\",{raw('present')},1"
    return {
        "base_model": (
            f"=IF({inp['base_model']}&\"\"<>\"\",{inp['base_model']},"
            f"IFERROR(INDEX({raw('model')},MATCH(1,{raw('p0_included')},0)),\"\"))"
        ),
        "base_max_tokens": (
            f"=IF(ISNUMBER({inp['base_max_tokens']}),{inp['base_max_tokens']},"
            f"IF({_base_count(fx, at_preferred)}>0,"
            f"{PREFERRED_BASE_MAX_TOKENS},"
            f"IF({_base_count(fx, _base_criteria(fx))}>0,"
            f"_xlfn.MINIFS({raw('max_tokens')},{_base_criteria(fx)}),\"\")))"
        ),
        "base_concurrency": (
            f"=IF(ISNUMBER({inp['base_concurrency']}),{inp['base_concurrency']},"
            f"IF({_base_count(fx, at_base_length)}>0,"
            f"_xlfn.MINIFS({raw('concurrency')},{at_base_length}),\"\"))"
        ),
        "monotonic_tolerance_pct": (
            f"=IF(ISNUMBER({inp['monotonic_tolerance_pct']}),{inp['monotonic_tolerance_pct']},0)"
        ),
        "strict_physics": (
            f"=IF(ISNUMBER({inp['strict_physics']}),IF({inp['strict_physics']}<>0,1,0),0)"
        ),
        "short_output_ratio": (
            f"=IF(ISNUMBER({inp['short_output_ratio']}),{inp['short_output_ratio']},"
            f"{DEFAULT_SHORT_OUTPUT_RATIO!r})"
        ),
        "physics_precision": (
            f"=IF({inp['physics_precision']}&\"\"<>\"\",{inp['physics_precision']}&\"\",{q(DEFAULT_PHYSICS_PRECISION)})"
        ),
        "method": f"=IF({inp['method']}=\"lsq\",\"lsq\",\"chain\")",
        "base_prompt_level": (
            f"=IF(ISNUMBER({inp['base_prompt_level']}),{inp['base_prompt_level']},"
            f"IF({fx.count_flagged(raw('present'), with_level)}>0,"
            f"_xlfn.MINIFS({raw('prompt_level')},{with_level}),\"\"))"
        ),
        "physics_bytes": (
            f"=IF(COUNTIF({fx.cat.precision('precision')},{fx.name('PhysicsPrecision')})>0,"
            f"SUMIFS({fx.cat.precision('bytes')},{fx.cat.precision('precision')},"
            f"{fx.name('PhysicsPrecision')}),2)"
        ),
        "base_rows": f"={_base_count(fx, _at_base_point(fx, fx.name('BaseConcurrency')))}",
        "base_tps": (
            f"=IF({fx.name('BaseRows')}>0,EXP(AVERAGEIFS({raw('ln_tps')},"
            f"{_at_base_point(fx, fx.name('BaseConcurrency'))})),\"\")"
        ),
    }


def _at_base_point(fx: Formulas, concurrency: str, model: str | None = None) -> str:
    raw = fx.raw
    model = model or fx.name("BaseModel")
    return (
        f"{raw('concurrency')},{concurrency},{raw('max_tokens')},{fx.name('BaseMaxTokens')},"
        f"{raw('p0_included')},1,{raw('model')},{model}"
    )


def level_value(source: str, slot: int, previous: str) -> str:
    """k-th smallest distinct value of an included-only helper column, linear in rows."""
    if slot == 1:
        return f"=IF(COUNT({source})=0,\"\",MIN({source}))"
    # the smallest value above the slot before (MINIFS, not SMALL of a COUNTIF's rank: IronCalc
    # 0.9.1 measures the whole sheet of a COUNTIF's range at every call); MAX guards MINIFS
    return (
        f"=IF(ISNUMBER({previous}),IF(MAX({source})>{previous},"
        f"_xlfn.MINIFS({source},{source},\">\"&{previous}),\"\"),\"\")"
    )


def concurrency_row(fx: Formulas, row: int) -> dict[str, str]:
    lo = fx.lo
    col = {c.key: lo.table_col(CONCURRENCY_TABLE, c.key) for c in CONCURRENCY_TABLE}
    level = f"${col['level']}{row}"
    slot = row - lo.c_table_first + 1
    raw = fx.raw
    base = fx.name("BaseTPS")
    crit = (f"{raw('concurrency')},{level},{raw('max_tokens')},{fx.name('BaseMaxTokens')},"
            f"{_base_criteria(fx)}")
    return {
        "level": level_value(raw("c_included"), slot, f"${col['level']}{row - 1}"),
        "rows": f"=IF(ISNUMBER({level}),{_base_count(fx, crit)},\"\")",
        "f": (
            f"=IF(ISNUMBER({level}),IF(AND(${col['rows']}{row}>0,ISNUMBER({base})),"
            f"EXP(AVERAGEIFS({raw('ln_tps')},{crit}))/{base},\"\"),\"\")"
        ),
        "known": f"=IF(ISNUMBER(${col['f']}{row}),1,0)",
    }


def length_row(fx: Formulas, row: int) -> dict[str, str]:
    lo = fx.lo
    col = {c.key: lo.table_col(LENGTH_TABLE, c.key) for c in LENGTH_TABLE}
    level, anchor = f"${col['level']}{row}", f"${col['anchor']}{row}"
    slot = row - lo.l_table_first + 1
    raw = fx.raw
    anchor_crit = f"{raw('max_tokens')},{level},{raw('f_known')},1,{_base_criteria(fx)}"
    crit = f"{raw('concurrency')},{anchor},{raw('max_tokens')},{level},{_base_criteria(fx)}"
    return _anchored(fx, col, row, level_value(raw("l_included"), slot, f"${col['level']}{row - 1}"),
                          anchor_crit, crit, raw("p0_included"))


def _anchored(fx: Formulas, col: dict[str, str], row: int, level_formula: str, anchor_crit: str,
              crit: str, flag: str) -> dict[str, str]:
    """A factor anchored at the lowest concurrency whose f is known (K_len, K_in): the level,
    its anchor, the rows there and the factor TPS / (BaseTPS x f(anchor)). `crit` holds `flag` = 1
    (the rows' 0/1 column that selects them), `anchor_crit` f_known = 1."""
    level, anchor = f"${col['level']}{row}", f"${col['anchor']}{row}"
    base = fx.name("BaseTPS")
    return {
        "level": level_formula,
        "anchor": (
            f"=IF(ISNUMBER({level}),IF({fx.count_flagged(fx.raw('f_known'), anchor_crit)}>0,"
            f"_xlfn.MINIFS({fx.raw('concurrency')},{anchor_crit}),\"\"),\"\")"
        ),
        "rows": f"=IF(ISNUMBER({anchor}),{fx.count_flagged(flag, crit)},\"\")",
        "k": (
            f"=IF(ISNUMBER({anchor}),IF(ISNUMBER({base}),EXP(AVERAGEIFS({fx.raw('ln_tps')},{crit}))"
            f"/({base}*SUMIFS({fx.ctab('f')},{fx.ctab('level')},{anchor})),\"\"),\"\")"
        ),
        "known": f"=IF(ISNUMBER(${col['k']}{row}),1,0)",
    }


def prompt_row(fx: Formulas, row: int) -> dict[str, str]:
    """One slot of the K_in table: the k-th smallest prompt level of the rows (a blank level
    counted as the base one), anchored like K_len at the lowest concurrency of the base model
    at the base max_tokens and this level whose f is known."""
    lo = fx.lo
    col = {c.key: lo.table_col(PROMPT_TABLE, c.key) for c in PROMPT_TABLE}
    level, anchor = f"${col['level']}{row}", f"${col['anchor']}{row}"
    slot = row - lo.p_table_first + 1
    raw = fx.raw
    at_level = (f"{raw('p_level')},{level},{raw('max_tokens')},{fx.name('BaseMaxTokens')},"
                f"{raw('included')},1,{raw('model')},{fx.name('BaseModel')}")
    anchor_crit = f"{raw('f_known')},1,{at_level}"
    crit = f"{raw('concurrency')},{anchor},{at_level}"
    return _anchored(fx, col, row, level_value(raw("p_level"), slot, f"${col['level']}{row - 1}"),
                          anchor_crit, crit, raw("included"))


def model_row(fx: Formulas, row: int) -> dict[str, str]:
    """Formulas of one model slot: the j-th model in order of its first included row."""
    lo = fx.lo
    col = {c.key: lo.table_col(MODEL_TABLE, c.key) for c in MODEL_TABLE}
    name = f"${col['name']}{row}"
    raw = fx.raw
    base = fx.name("BaseTPS")
    crit = _at_base_point(fx, fx.name("BaseConcurrency"), model=name)
    new = fx.new_model_criteria(raw("included"), lo.m_table_first, row, col["name"])
    return {
        # MINIFS only where a row matches (every row has a position): a number on every engine
        "name": (f"=IF({fx.count_flagged(raw('included'), new)}>0,INDEX({raw('model')},_xlfn.MINIFS({raw('position')},{new}))&\"\","
                 f"\"\")"),
        "rows": f"=IF({name}<>\"\",{_base_count(fx, crit)},\"\")",
        "tps": (
            f"=IF({name}<>\"\",IF(${col['rows']}{row}>0,"
            f"EXP(AVERAGEIFS({raw('ln_tps')},{crit})),\"\"),\"\")"
        ),
        "c": (
            f"=IF(AND(ISNUMBER(${col['tps']}{row}),ISNUMBER({base})),{base}/${col['tps']}{row},\"\")"
        ),
        "known": f"=IF(ISNUMBER(${col['c']}{row}),1,0)",
    }


# -- the factor tables -------------------------------------------------------------


def _known(value: float | None) -> float:
    return 1.0 if value is not None else 0.0


def _concurrency(level: Any) -> dict[str, CellValue]:
    lv: ConcurrencyLevel | None = level
    concurrency, rows, f = (lv.concurrency, lv.rows, lv.f) if lv else (None, None, None)
    return {"level": number_value(concurrency), "rows": number_value(rows), "f": f, "known": _known(f)}


def _anchored_values(level: float | None, anchor: float | None, rows: int | None,
                     k: float | None) -> dict[str, CellValue]:
    """The reference of one slot of a factor anchored like K_len and K_in (`_anchored`'s formulas)."""
    return {"level": number_value(level), "anchor": number_value(anchor), "rows": number_value(rows), "k": k,
            "known": _known(k)}


def _length(level: Any) -> dict[str, CellValue]:
    lv: LengthLevel | None = level
    return _anchored_values(*((lv.max_tokens, lv.anchor_concurrency, lv.rows, lv.k_len) if lv else (None,) * 4))


def _prompt(level: Any) -> dict[str, CellValue]:
    lv: PromptLevel | None = level
    return _anchored_values(*((lv.prompt_level, lv.anchor_concurrency, lv.rows, lv.k_in) if lv else (None,) * 4))


def _model(level: Any) -> dict[str, CellValue]:
    lv: ModelLevel | None = level
    name, rows, tps, c = (lv.model, lv.rows, lv.base_point_tps, lv.c_model) if lv else (None, None, None, None)
    return {"name": name, "rows": number_value(rows), "tps": tps, "c": c, "known": _known(c)}


@dataclass(frozen=True)
class FactorTable:
    """One factor's table on the sheet: a slot per level."""

    label: str  # the heading's text (`build.LABELS` key)
    columns: tuple[Column, ...]
    rows: Callable[[Layout], tuple[int, int, int]]  # (header row, first slot's row, slots)
    formulas: Callable[[Formulas, int], dict[str, str]]  # one slot's formulas, by column key
    levels: Callable[[Calibration], Sequence[Any]]  # the model's levels, slot by slot
    values: Callable[[Any], dict[str, CellValue]]  # one slot's reference (None: an empty slot)
    formats: Mapping[str, str] = field(default_factory=dict)  # column key -> number format
    text_keys: tuple[str, ...] = ()  # columns of text (their headers sit left)


TABLES: tuple[FactorTable, ...] = (
    FactorTable("c_table", CONCURRENCY_TABLE, lambda lo: (lo.c_table_header, lo.c_table_first, lo.c_slots),
                concurrency_row, lambda cal: cal.concurrency_levels, _concurrency, {"f": "0.00"}),
    FactorTable("l_table", LENGTH_TABLE, lambda lo: (lo.l_table_header, lo.l_table_first, lo.l_slots),
                length_row, lambda cal: cal.length_levels, _length, {"k": "0.00"}),
    FactorTable("p_table", PROMPT_TABLE, lambda lo: (lo.p_table_header, lo.p_table_first, lo.p_slots),
                prompt_row, lambda cal: cal.prompt_levels, _prompt, {"k": "0.00"}),
    FactorTable("m_table", MODEL_TABLE, lambda lo: (lo.m_table_header, lo.m_table_first, lo.m_slots),
                model_row, lambda cal: cal.models, _model, {"c": "0.00", "tps": "0.00"}, text_keys=("name",)),
)


# -- the writer ------------------------------------------------------------------


def write_sheet(ws: Worksheet, b: Building) -> dict[str, str]:
    """The settings and the base point above, the factor tables below; the defined names on it."""
    layout, fx, labels = b.layout, b.fx, b.labels
    _label(ws, "A1", labels["calibration_title"])
    ws["A1"].font = TITLE_FONT
    _label(ws, "A3", labels["settings"], bold=True)
    _label(ws, "B3", labels["input"], bold=True)
    _label(ws, "C3", labels["effective"], bold=True)
    settings = settings_formulas(fx)
    for key, row in layout.keyed_rows("settings").items():
        _label(ws, layout.keyed_cell("settings", key, "label"), labels[key])
        ws[layout.keyed_cell("settings", key, "label")].alignment = Alignment(wrap_text=True, vertical="top")
        fit_row(ws, row, [(labels[key], LABEL_WIDTH, DEFAULT_FONT_SIZE)])
        ws[layout.keyed_cell("settings", key)].fill = INPUT_FILL
        _formula(ws, layout.keyed_cell("settings", key, "effective"), settings[key])
    _formula(ws, layout.keyed_cell("settings", "physics_precision", "extra"), settings["physics_bytes"])
    ws[layout.keyed_cell("settings", "monotonic_tolerance_pct")] = 0
    ws[layout.keyed_cell("settings", "strict_physics")] = 0
    ws[layout.keyed_cell("settings", "short_output_ratio")] = DEFAULT_SHORT_OUTPUT_RATIO
    ws[layout.keyed_cell("settings", "physics_precision")] = DEFAULT_PHYSICS_PRECISION
    strict = DataValidation(type="list", formula1='"0,1"', allow_blank=True)
    ws.add_data_validation(strict)
    strict.add(layout.keyed_cell("settings", "strict_physics"))
    _formula(ws, layout.keyed_cell("settings", "method"), summary_sheet.mirror(layout, "method"))  # typed on the Summary
    _label(ws, layout.keyed_cell("base", "tps", "label"), labels["base_tps"], bold=True)
    _formula(ws, layout.keyed_cell("base", "tps", "effective"), settings["base_tps"], "0.00")
    ws[layout.keyed_cell("base", "tps", "effective")].fill = KEY_FILL
    _label(ws, layout.keyed_cell("base", "rows", "label"), labels["base_rows"])
    _formula(ws, layout.keyed_cell("base", "rows", "effective"), settings["base_rows"])
    ws.column_dimensions["A"].width = LABEL_WIDTH
    ws.column_dimensions["B"].width = 14
    ws.column_dimensions["C"].width = 26

    for table in TABLES:
        header, first, slots = table.rows(layout)
        _label(ws, f"A{header - 1}", labels[table.label], bold=True)
        _header(ws, header, 1, table.columns, layout.lang, text_keys=table.text_keys)
        for row in range(first, first + slots):
            for key, text in table.formulas(fx, row).items():
                _formula(ws, f"{layout.table_col(table.columns, key)}{row}", text, table.formats.get(key))

    # the long title wraps within the printed columns A..E instead of running past the margin
    wrapped_note(ws, "A1", "E", sum(ws.column_dimensions[col].width for col in "ABCDE"), TITLE_FONT)
    last = max(first + slots - 1 for _, first, slots in (table.rows(layout) for table in TABLES))
    ws.print_area = f"A1:E{last}"
    # the tables' empty slots print squeezed onto the pages with figures, not onto pages of their own
    print_setup(ws, pages_tall=pages_for(last))
    return names_on(layout, "calibration")


# -- the reference ---------------------------------------------------------------


def reference(c: Checking) -> None:
    """What every formula cell of the sheet must hold, from `scm_xl.model`'s calibration."""
    exp, layout, analysis, inputs = c.exp, c.layout, c.analysis, c.inputs
    title = layout.title("calibration")
    cal = analysis.calibration
    exp[(title, layout.keyed_cell("settings", "method"))] = typed_value(inputs.method_typed)  # read from the Summary
    exp[(title, layout.keyed_cell("settings", "base_model", "effective"))] = text_value(cal.base_model)
    exp[(title, layout.keyed_cell("settings", "base_max_tokens", "effective"))] = number_value(cal.base_max_tokens)
    exp[(title, layout.keyed_cell("settings", "base_concurrency", "effective"))] = number_value(cal.base_concurrency)
    st = analysis.settings
    exp[(title, layout.keyed_cell("settings", "monotonic_tolerance_pct", "effective"))] = float(st.monotonic_tolerance_pct)
    exp[(title, layout.keyed_cell("settings", "strict_physics", "effective"))] = 1.0 if st.strict_physics else 0.0
    exp[(title, layout.keyed_cell("settings", "short_output_ratio", "effective"))] = float(st.short_output_ratio)
    exp[(title, layout.keyed_cell("settings", "physics_precision", "effective"))] = st.physics_precision
    exp[(title, layout.keyed_cell("settings", "method", "effective"))] = st.method
    exp[(title, layout.keyed_cell("settings", "base_prompt_level", "effective"))] = number_value(analysis.base_prompt_level)
    exp[(title, layout.keyed_cell("settings", "physics_precision", "extra"))] = physics_bytes(st.physics_precision)
    exp[(title, layout.keyed_cell("base", "tps", "effective"))] = cal.base_tps
    exp[(title, layout.keyed_cell("base", "rows", "effective"))] = float(cal.base_rows)

    for table in TABLES:
        _, first, slots = table.rows(layout)
        levels = table.levels(cal)
        for i in range(slots):
            values = table.values(levels[i] if i < len(levels) else None)
            for key, value in values.items():
                exp[(title, f"{layout.table_col(table.columns, key)}{first + i}")] = value


SHEET = SheetSpec("calibration", {lang: SHEET_TITLES[lang]["calibration"] for lang in SHEET_TITLES},
                  write_sheet, reference)

__all__ = ["LABEL_WIDTH", "SHEET", "TABLES", "FactorTable", "concurrency_row", "length_row", "level_value", "model_row",
           "prompt_row", "reference", "settings_formulas", "write_sheet"]
