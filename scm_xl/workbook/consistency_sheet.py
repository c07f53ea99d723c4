"""The consistency sheet: every raw-data row's role (identify, check, unidentified, excluded),
its prediction, its deviation and why, and above them the verdict over the check rows.

This module owns the sheet's writer, its formula text (`row_formulas`, `summary_formulas`) and
its reference values (`reference`, from `scm_xl.model`'s checks), side by side and independent:
that independence is what `verify` checks. Its geometry (column letters, first row, the keyed
summary block) is the layout's, because the raw-data sheet, the chart data and the summary read
it (by `Layout.cons_col` and the defined names CheckRows, MAPE, Verdict...).
"""

from __future__ import annotations

from openpyxl.utils import column_index_from_string, get_column_letter
from openpyxl.worksheet.worksheet import Worksheet

from scm_xl.engines.base import CellValue
from scm_xl.model import RowCheck, RowStatus
from scm_xl.results import ResultRow
from scm_xl.rules import EXCELLENT_MIN_ROWS
from scm_xl.workbook import summary_sheet
from scm_xl.workbook.expected import number_value, text_value
from scm_xl.workbook.formulas import Formulas, factor_label
from scm_xl.workbook.layout import (
    CONSISTENCY_COLUMNS, EXCELLENT_MAPE, EXCELLENT_MAX, GOOD_MAPE, GOOD_MAX, SHEET_TITLES,
)
from scm_xl.workbook.literals import q
from scm_xl.workbook.printing import print_setup
from scm_xl.workbook.sheet import Building, Checking, RowTable, SheetSpec, names_on
from scm_xl.workbook.stamp import write_filled
from scm_xl.workbook.styles import KEY_FILL, TITLE_FONT, _formula, _header, _label, wrap_column

# The table's texts: they wrap within their columns (the physics checks are the last printed one).
WRAPPED_KEYS = ("note", "physics_text")


# -- the formulas ----------------------------------------------------------------

def row_formulas(fx: Formulas, row: int) -> dict[str, str]:
    """The formulas of one row (a raw-data row's check: its role, prediction and deviation)."""
    lo = fx.lo
    t = lo.text
    calc_row = row - lo.cons_first + lo.raw_first

    def raw(key: str) -> str:
        return lo.raw_cell(key, calc_row)

    def c(key: str) -> str:
        return f"${lo.cons_col(key)}{row}"

    present = raw("present")
    inc = raw("included")
    bm, bl, bc = fx.name("BaseModel"), fx.name("BaseMaxTokens"), fx.name("BaseConcurrency")
    base = fx.name("BaseTPS")
    conc, length, model = raw("concurrency"), raw("max_tokens"), raw("model")
    level = raw("p_level")
    f_known, k_known, c_known, p_known = c("f_known"), c("k_known"), c("c_known"), c("p_known")
    f_lab, k_lab = factor_label("f", conc), factor_label("K_len", length)
    c_lab, p_lab = factor_label("C_model", model), factor_label("K_in", level)
    is_bm = f"({model}={bm})"
    at_bl = f"({length}={bl})"
    at_p0 = f"({raw('at_p0')}=1)"
    fid = f"{is_bm}*{at_bl}*{at_p0}"
    kid = f"{is_bm}*({conc}={c('anchor')})*{at_p0}"
    cid = f"(1-{is_bm})*({conc}={bc})*{at_bl}*{at_p0}"
    pid = f"{is_bm}*{at_bl}*({conc}={c('p_anchor')})*(1-{at_p0})"
    base_point = f"{is_bm}*{at_bl}*({conc}={bc})*{at_p0}"
    identify = f"(({fid})+({kid})+({cid})+({pid}))>0"
    # A row identifies K_in(P) only away from the base prompt level, where it identifies nothing else.
    identifies = (
        f"{q(t('identifies') + ' ')}&IF({base_point}=1,\"BaseTPS\",IF({pid}=1,{p_lab},"
        f"IF({fid}=1,{f_lab},\"\")&IF(({fid})*({kid})=1,\", \",\"\")&IF({kid}=1,{k_lab},\"\")"
        f"&IF((({fid})+({kid}))*({cid})>0,\", \",\"\")&IF({cid}=1,{c_lab},\"\")))"
    )
    fm, km, cm, pm = f"({f_known}=0)", f"({k_known}=0)", f"({c_known}=0)", f"({p_known}=0)"
    missing = (
        f"{q(t('missing') + ' ')}&IF({fm},{f_lab},\"\")&IF({fm}*{km},\", \",\"\")&IF({km},{k_lab},\"\")"
        f"&IF(({fm}+{km})*{cm}>0,\", \",\"\")&IF({cm},{c_lab},\"\")"
        f"&IF(({fm}+{km}+{cm})*{pm}>0,\", \",\"\")&IF({pm},{p_lab},\"\")"
    )
    return {
        "exp_id": f"=IF({present},{raw('exp_id')}&\"\",\"\")",
        "model": f"=IF({present},{model}&\"\",\"\")",
        "concurrency": f"=IF({present},{conc},\"\")",
        "max_tokens": f"=IF({present},{length},\"\")",
        "prompt_level": f"=IF({present},{level},\"\")",
        "included": f"=IF({present},{inc},\"\")",
        "measured": f"=IF({present},{raw('tps')},\"\")",
        "f_known": f"=IF({inc}=1,SUMIFS({fx.ctab('known')},{fx.ctab('level')},{conc}),\"\")",
        "k_known": f"=IF({inc}=1,SUMIFS({fx.ltab('known')},{fx.ltab('level')},{length}),\"\")",
        "c_known": f"=IF({inc}=1,SUMIFS({fx.mtab('known')},{fx.mtab('name')},{model}),\"\")",
        # without prompt levels K_in is 1, known
        "p_known": (f"=IF({inc}=1,IF(ISNUMBER({level}),SUMIFS({fx.ptab('known')},{fx.ptab('level')},"
                    f"{level}),1),\"\")"),
        "anchor": f"=IF({inc}=1,SUMIFS({fx.ltab('anchor')},{fx.ltab('level')},{length}),\"\")",
        "p_anchor": (f"=IF({inc}=1,IF(ISNUMBER({level}),SUMIFS({fx.ptab('anchor')},{fx.ptab('level')},"
                     f"{level}),0),\"\")"),
        "physics_text": f"=IF({present},{raw('physics_text')}&\"\",\"\")",
        "f": f"=IF({f_known}=1,SUMIFS({fx.ctab('f')},{fx.ctab('level')},{conc}),\"\")",
        "k": f"=IF({k_known}=1,SUMIFS({fx.ltab('k')},{fx.ltab('level')},{length}),\"\")",
        "c": f"=IF({c_known}=1,SUMIFS({fx.mtab('c')},{fx.mtab('name')},{model}),\"\")",
        "k_in": (f"=IF({p_known}=1,IF(ISNUMBER({level}),SUMIFS({fx.ptab('k')},{fx.ptab('level')},{level}),1),"
                 f"\"\")"),
        "predicted": (
            f"=IF({inc}=1,IF({f_known}*{k_known}*{c_known}*{p_known}=1,"
            f"{base}*{c('f')}*{c('k')}*{c('k_in')}/{c('c')},\"\"),\"\")"
        ),
        "deviation": f"=IF(ISNUMBER({c('predicted')}),{c('measured')}-{c('predicted')},\"\")",
        "deviation_pct": (
            f"=IF(ISNUMBER({c('predicted')}),({c('measured')}-{c('predicted')})/{c('measured')}*100,\"\")"
        ),
        "role": (
            f"=IF({present},IF({inc}=0,\"excluded\",IF({identify},\"identify\","
            f"IF(ISNUMBER({c('predicted')}),\"check\",\"unidentified\"))),\"\")"
        ),
        "note": (
            f"=IF({c('role')}=\"excluded\",{raw('reason')},IF({c('role')}=\"identify\",{identifies},"
            f"IF({c('role')}=\"unidentified\",{missing},\"\")))"
        ),
        "check_abs_pct": f"=IF({c('role')}=\"check\",ABS({c('deviation_pct')}),\"\")",
    }

def summary_formulas(fx: Formulas) -> dict[str, str]:
    """The summary block's formulas: the rows by role, MAPE, the largest deviation, the verdict."""
    c = fx.lo.cons_range
    n = fx.name
    return {
        "check_rows": f"=COUNTIF({c('role')},\"check\")",
        "identify_rows": f"=COUNTIF({c('role')},\"identify\")",
        "unidentified_rows": f"=COUNTIF({c('role')},\"unidentified\")",
        "excluded_rows": f"=COUNTIF({c('role')},\"excluded\")",
        "mape": f"=IF({n('CheckRows')}>0,AVERAGE({c('check_abs_pct')}),\"\")",
        "max_deviation": f"=IF({n('CheckRows')}>0,MAX({c('check_abs_pct')}),\"\")",
        "verdict": (
            f"=IF({n('CheckRows')}=0,\"insufficient\","
            f"IF(AND({n('MAPE')}<={EXCELLENT_MAPE:g},{n('MaxDeviation')}<={EXCELLENT_MAX:g},"
            f"{n('CheckRows')}>={EXCELLENT_MIN_ROWS}),\"excellent\","
            f"IF(AND({n('MAPE')}<={GOOD_MAPE:g},{n('MaxDeviation')}<={GOOD_MAX:g}),\"good\",\"fail\")))"
        ),
    }


# -- the writer ------------------------------------------------------------------

def write_sheet(ws: Worksheet, b: Building) -> dict[str, str]:
    """The summary block above, one row per raw-data row below; the defined names on it."""
    layout, fx, labels, fills = b.layout, b.fx, b.labels, b.fills
    _label(ws, "A1", labels["consistency_title"])
    ws["A1"].font = TITLE_FONT
    _label(ws, "A2", labels["verdict_rule"])
    summary = summary_formulas(fx)
    for key in layout.keyed_rows("summary"):
        _label(ws, layout.keyed_cell("summary", key, "label"), labels[key], bold=key in ("mape", "max_deviation", "verdict"))
        _formula(ws, layout.keyed_cell("summary", key), summary[key], "0.00" if key in ("mape", "max_deviation") else None)
        if key in ("mape", "max_deviation", "verdict", "check_rows"):
            ws[layout.keyed_cell("summary", key)].fill = KEY_FILL
    summary_sheet.colour_verdict(ws, layout.keyed_cell("summary", "verdict"))
    ws.column_dimensions["A"].width = 34
    _header(ws, layout.cons_header_row, 1, CONSISTENCY_COLUMNS, layout.lang,
            text_keys=("exp_id", "model", "role", "note", "physics_text"))
    ws.freeze_panes = f"B{layout.cons_first}"
    formats = {"measured": "0.00", "f": "0.000", "k": "0.000", "k_in": "0.000", "c": "0.000", "predicted": "0.00",
               "deviation": "0.00", "deviation_pct": "0.0", "check_abs_pct": "0.0"}
    letters = {column.key: layout.cons_col(column.key) for column in CONSISTENCY_COLUMNS}
    for key, number_format in formats.items():
        ws.column_dimensions[letters[key]].number_format = number_format
    rows = range(layout.cons_first, layout.cons_last + 1)
    write_filled(ws, fills, letters, lambda row: row_formulas(fx, row), rows, layout.raw_first - layout.cons_first)
    for key in WRAPPED_KEYS:
        wrap_column(ws, letters[key], rows, fills)
    # The helper columns (known flags, anchor) are grouped and collapsed.
    for key in ("f_known", "k_known", "c_known", "p_known", "anchor", "p_anchor"):
        ws.column_dimensions[letters[key]].hidden = True
        ws.column_dimensions[letters[key]].outlineLevel = 1
    last = get_column_letter(len(CONSISTENCY_COLUMNS))
    ws.print_area = f"A1:{last}{layout.cons_last}"
    print_setup(ws, repeat_rows=f"{layout.cons_header_row}:{layout.cons_header_row}")
    return names_on(layout, "consistency")


# -- the reference ---------------------------------------------------------------

def reference(c: Checking) -> None:
    """What every formula cell of the sheet must hold, from `scm_xl.model`'s checks."""
    exp, layout, inputs, analysis = c.exp, c.layout, c.inputs, c.analysis
    title = layout.title("consistency")
    by_row: dict[int, tuple[ResultRow, RowCheck]] = {
        sheet_row: (row, check) for (sheet_row, row), check in zip(inputs.rows, analysis.checks)}
    table = RowTable(column.key for column in CONSISTENCY_COLUMNS)
    for i in range(layout.rows):
        sheet_row = layout.raw_first + i
        pair = by_row.get(sheet_row)
        values: dict[str, CellValue]
        if pair is None:
            values = {column.key: None for column in CONSISTENCY_COLUMNS}
        else:
            row, check = pair
            s: RowStatus = check.status
            inc = s.included
            values = {
                "exp_id": row.exp_id or None, "model": row.model or None,
                "concurrency": float(s.concurrency), "max_tokens": float(s.max_tokens),
                "prompt_level": number_value(s.prompt_level),
                "included": number_value(inc), "measured": s.tps,
                "f_known": (1.0 if check.f is not None else 0.0) if inc else None,
                "k_known": (1.0 if check.k_len is not None else 0.0) if inc else None,
                "c_known": (1.0 if check.c_model is not None else 0.0) if inc else None,
                "p_known": (1.0 if check.k_in is not None else 0.0) if inc else None,
                "anchor": float(check.anchor_concurrency) if inc else None,
                "p_anchor": float(check.prompt_anchor) if inc else None,
                "f": check.f, "k": check.k_len, "k_in": check.k_in, "c": check.c_model,
                "predicted": check.predicted_tps, "deviation": check.deviation,
                "deviation_pct": check.deviation_pct, "role": check.role,
                "note": text_value(check.note(layout.lang)),
                "check_abs_pct": abs(check.deviation_pct) if check.role == "check" and check.deviation_pct is not None
                else None,
                "physics_text": text_value(s.physics.text(layout.lang)),
            }
        table.add(values)
    table.place(exp, lambda key: (title, column_index_from_string(layout.cons_col(key))), layout.cons_first)
    cons = analysis.consistency
    summary = {
        "check_rows": float(cons.check_rows), "identify_rows": float(cons.identify_rows),
        "unidentified_rows": float(cons.unidentified_rows), "excluded_rows": float(cons.excluded_rows),
        "mape": cons.mape_pct, "max_deviation": cons.max_deviation_pct, "verdict": cons.verdict,
    }
    for key in layout.keyed_rows("summary"):
        exp[(title, layout.keyed_cell("summary", key))] = summary[key]


SHEET = SheetSpec("consistency", {lang: SHEET_TITLES[lang]["consistency"] for lang in SHEET_TITLES},
                  write_sheet, reference, inputs="none")

__all__ = ["SHEET", "WRAPPED_KEYS", "reference", "row_formulas", "summary_formulas", "write_sheet"]
