"""The derivation sheet: the forward question (TPS at a concurrency, max_tokens, model and prompt
length) and the inverse (the least concurrency that reaches a target TPS, within a latency limit),
each answered from the coefficients of the method the method cell chose.

This module owns the sheet's writer, its formula text and its reference values (from the chosen
calibration), side by side and independent: that independence is what `verify` checks. The
inputs are typed on the Summary and mirrored here; the keyed blocks' geometry ("forward",
"inverse": B the value, C the effective coefficient, D the extra, E..H the prompt bracket) is
`layout.py`'s, which the Summary reads too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from openpyxl.worksheet.worksheet import Worksheet

from scm_xl.constrained import measured_percentiles
from scm_xl.results import has_fault
from scm_xl.model import Analysis, Calibration, effective_prompt_level, interpolate_k_in, k_in_bracket
from scm_xl.workbook import lsq_sheet, summary_sheet
from scm_xl.workbook.expected import Expected, coerce_key, fmt_key, number_value, text_value, typed_value
from scm_xl.workbook.formulas import Formulas, factor_label
from scm_xl.workbook.io import Inputs
from scm_xl.workbook.layout import CONCURRENCY_TABLE, INVERSE_TABLE, PROMPT_BRACKET, SHEET_TITLES, Layout
from scm_xl.workbook.literals import q
from scm_xl.workbook.lsq_sheet import COEF_COLS, LsqLayout
from scm_xl.workbook.printing import pages_for, print_setup
from scm_xl.workbook.sheet import Building, Checking, SheetSpec, names_on
from scm_xl.workbook.stamp import write_filled
from scm_xl.workbook.styles import KEY_FILL, NOTE_FONT, TITLE_FONT, _formula, _header, _label, wrapped_note


# -- the formulas ----------------------------------------------------------------


def _lsq_block(fx: Formulas, kind: str, column: str) -> str:
    """A column of the least-squares coefficient table, over one parameter block."""
    ll = LsqLayout(fx.lo)
    first, size = ll.blocks[{"f": "f", "k": "K_len", "c": "C_model", "p": "K_in"}[kind]]
    return f"'{ll.title}'!{ll.coef(column, first, size)}"


def _base_tps(fx: Formulas) -> str:
    """BaseTPS of the method the method cell chose."""
    ll = LsqLayout(fx.lo)
    return (f"IF({fx.name('Method')}=\"lsq\",'{ll.title}'!{ll.summary_ref('base_tps')},"
            f"{fx.name('BaseTPS')})")


def _coefficient_lookup(fx: Formulas, kind: str, key_cell: str) -> str:
    """f, K_len or C_model for a typed level, from the chosen method; "" when not calibrated."""
    table = {"f": (fx.ctab("level"), fx.ctab("f"), fx.ctab("known")),
             "k": (fx.ltab("level"), fx.ltab("k"), fx.ltab("known")),
             "c": (fx.mtab("name"), fx.mtab("c"), fx.mtab("known"))}[kind]
    level, value, known = table
    chain = f"IF(COUNTIFS({level},{key_cell},{known},1)>0,SUMIFS({value},{level},{key_cell}),\"\")"
    lsq_level, lsq_value = _lsq_block(fx, kind, "level"), _lsq_block(fx, kind, "value")
    lsq = (f"IF(COUNTIFS({lsq_level},{key_cell},{lsq_value},\">0\")>0,"
           f"SUMIFS({lsq_value},{lsq_level},{key_cell}),\"\")")
    return f"=IF({fx.name('Method')}=\"lsq\",{lsq},{chain})"


def _prompt_lookup(fx: Formulas, block: str) -> dict[str, str]:
    """K_in ("effective") for the prompt length typed in a derivation block's row (blank: the
    base level, K_in = 1), from the chosen method: a level's own K_in, between the nearest
    known levels below and above (PROMPT_BRACKET: the levels, then their K_in) ln K_in linear
    in ln P, outside them "" (not identified). Keys "prompt.<role>"."""
    p = fx.lo.keyed_cell(block, "prompt_tokens", absolute=True)
    low, high, k_low, k_high = (fx.lo.keyed_cell(block, "prompt_tokens", role, absolute=True)
                                for role in PROMPT_BRACKET)
    lsq = f"{fx.name('Method')}=\"lsq\""
    tables = {"lsq": (_lsq_block(fx, "p", "level"), _lsq_block(fx, "p", "value")),
              "chain": (fx.ptab("level"), fx.ptab("k"))}

    def bracket(op: str, fn: str) -> str:
        def one(level: str, value: str) -> str:
            return (f"IF(COUNTIFS({level},\"{op}\"&{p},{value},\">0\")>0,"
                    f"_xlfn.{fn}({level},{level},\"{op}\"&{p},{value},\">0\"),\"\")")
        return f"=IF(ISNUMBER({p}),IF({lsq},{one(*tables['lsq'])},{one(*tables['chain'])}),\"\")"

    def k_at(level_cell: str) -> str:
        chain = f"SUMIFS({tables['chain'][1]},{tables['chain'][0]},{level_cell})"
        lsq_value = f"SUMIFS({tables['lsq'][1]},{tables['lsq'][0]},{level_cell})"
        return f"=IF(ISNUMBER({level_cell}),IF({lsq},{lsq_value},{chain}),\"\")"

    return {
        "prompt.prompt_low": bracket("<=", "MAXIFS"), "prompt.prompt_high": bracket(">=", "MINIFS"),
        "prompt.prompt_k_low": k_at(low), "prompt.prompt_k_high": k_at(high),
        "prompt.effective": (f"=IF(NOT(ISNUMBER({p})),1,IF(AND(ISNUMBER({low}),ISNUMBER({high})),IF({low}={high},{k_low},"
              f"EXP(LN({k_low})+(LN({p})-LN({low}))/(LN({high})-LN({low}))*(LN({k_high})-LN({k_low})))),\"\"))"),
    }


def _effective_model(fx: Formulas, input_cell: str) -> str:
    # `cell&""` and not `cell<>""`: IronCalc takes an empty cell as unequal to "".
    return f"=IF({input_cell}&\"\"<>\"\",{input_cell},{fx.name('BaseModel')})"


def _keyed(fx: Formulas, block: str, key: str, role: str = "value") -> str:
    """An absolute reference to a keyed block's cell (Layout.keyed_cell), "$C$7"."""
    return fx.lo.keyed_cell(block, key, role, absolute=True)


def forward_formulas(fx: Formulas) -> dict[str, str]:
    f, k, cm, p = (_keyed(fx, "forward", key, "effective")
                   for key in ("concurrency", "max_tokens", "model", "prompt_tokens"))
    t = fx.lo.text
    fm, km, cmm = f"NOT(ISNUMBER({f}))", f"NOT(ISNUMBER({k}))", f"NOT(ISNUMBER({cm}))"
    pm = f"NOT(ISNUMBER({p}))"
    conc, length, prompt = (_keyed(fx, "forward", key) for key in ("concurrency", "max_tokens", "prompt_tokens"))
    model = _keyed(fx, "forward", "model", "extra")
    return {
        "f": _coefficient_lookup(fx, "f", conc),
        "k": _coefficient_lookup(fx, "k", length),
        "model": _effective_model(fx, _keyed(fx, "forward", "model")),
        "c": _coefficient_lookup(fx, "c", model),
        "tps": (
            f"=IF(AND(ISNUMBER({f}),ISNUMBER({k}),ISNUMBER({cm}),ISNUMBER({p}),ISNUMBER({_base_tps(fx)})),"
            f"{_base_tps(fx)}*{f}*{k}*{p}/{cm},{q(t('unidentified'))})"
        ),
        "missing": (
            f"=IF(ISNUMBER({_keyed(fx, 'forward', 'tps')}),\"\",{q(t('missing') + ' ')}"
            f"&IF({fm},{factor_label('f', conc)},\"\")"
            f"&IF(AND({fm},{km}),\", \",\"\")&IF({km},{factor_label('K_len', length)},\"\")"
            f"&IF(AND(OR({fm},{km}),{cmm}),\", \",\"\")&IF({cmm},{factor_label('C_model', model)},\"\")"
            f"&IF(AND(OR({fm},{km},{cmm}),{pm}),\", \",\"\")&IF({pm},{factor_label('K_in', prompt)},\"\"))"
        ),
        **_prompt_lookup(fx, "forward"),
    }


def inverse_formulas(fx: Formulas) -> dict[str, str]:
    """The inverse's single cells (the table's rows are `inverse_row`)."""
    lo = fx.lo
    level = lo.inverse_range("level")
    pred = lo.inverse_range("predicted")
    meets = lo.inverse_range("meets")
    allowed = lo.inverse_range("allowed")
    rc = _keyed(fx, "inverse", "concurrency")
    best = _keyed(fx, "inverse", "best_tps")
    typed = _keyed(fx, "inverse", "prompt_tokens")
    base_level = fx.name("BasePromptLevel")
    return {
        "k": _coefficient_lookup(fx, "k", _keyed(fx, "inverse", "max_tokens")),
        "model": _effective_model(fx, _keyed(fx, "inverse", "model")),
        "c": _coefficient_lookup(fx, "c", _keyed(fx, "inverse", "model", "extra")),
        # the prompt level whose measured latencies the limit is judged on (blank: the base level)
        "prompt_level": f"=IF(ISNUMBER({typed}),{typed},IF(ISNUMBER({base_level}),{base_level},\"\"))",
        **_prompt_lookup(fx, "inverse"),
        "concurrency": f"=IF(COUNT({meets})=0,{q(lo.text('unreachable_short'))},MIN({meets}))",
        "tps": f"=IF(ISNUMBER({rc}),SUMIFS({pred},{level},{rc}),\"\")",
        "best_tps": (f"=IF(COUNTIFS({pred},\">=0\",{allowed},1)=0,\"\","
                     f"_xlfn.MAXIFS({pred},{allowed},1))"),
        "best_concurrency": (f"=IF(ISNUMBER({best}),_xlfn.MINIFS({level},{pred},{best},{allowed},1),\"\")"),
    }


# The inverse's runs: beside the printed columns (grouped and collapsed), one cell per workings row,
# the row's concurrency where it is a fault-free run with output of the inverse's model, max_tokens
# and prompt level, else "". The inverse table's measured latencies select their runs from it with
# one comparison each (MEDIAN(IF(runs=level, ...))), not seven products over every row: at 10,000
# rows those cost IronCalc 0.39 s (benchmarks/results/formula_costs_alone_derivation.md).
RUNS_COL = "J"
RUNS_HEADER_ROW = 1
RUNS_FIRST_ROW = 2
RUNS_HEADER = {"zh": "逆向问题的运行：并发数（计算过程）",
               "en": "the inverse's runs: concurrency (workings)"}


def _runs_range(lo: Layout) -> str:
    return f"${RUNS_COL}${RUNS_FIRST_ROW}:${RUNS_COL}${RUNS_FIRST_ROW + lo.rows - 1}"


def runs_formula(fx: Formulas, row: int) -> dict[str, str]:
    """The inverse's runs on sheet row `row` (the workings row `row - RUNS_FIRST_ROW + raw_first`)."""
    lo = fx.lo
    calc = row - RUNS_FIRST_ROW + lo.raw_first
    level_at = _keyed(fx, "inverse", "prompt_tokens", "extra")
    length, model = _keyed(fx, "inverse", "max_tokens"), _keyed(fx, "inverse", "model", "extra")

    def me(key: str) -> str:
        return lo.raw_cell(key, calc)

    member = (f"({me('model')}={model})*({me('max_tokens')}={length})*({me('present')}=1)*({me('fault')}=0)"
              f"*({me('total_output_tokens')}>0)*({me('p_level')}={level_at})")  # "" = "" with no levels
    return {"runs": f"=IF({member}=1,{me('concurrency')},\"\")"}


def inverse_row(fx: Formulas, row: int) -> dict[str, str]:
    """One measured concurrency level of the inverse: its prediction, its measured P95
    latency (median over fault-free runs, as `solve` takes it: the inverse's runs at this
    level) and whether it meets both the target and the latency limit."""
    lo = fx.lo
    slot = row - lo.inverse_table_first
    k, cm = _keyed(fx, "inverse", "max_tokens", "effective"), _keyed(fx, "inverse", "model", "effective")
    p = _keyed(fx, "inverse", "prompt_tokens", "effective")
    limit = _keyed(fx, "inverse", "max_latency")
    col = {c.key: lo.table_col(INVERSE_TABLE, c.key) for c in INVERSE_TABLE}
    level, pred, latency = (f"${col['level']}{row}", f"${col['predicted']}{row}", f"${col['latency']}{row}")
    base = _base_tps(fx)
    c_level = f"{fx.lo.qtitle('calibration')}!${lo.table_col(CONCURRENCY_TABLE, 'level')}${lo.c_table_first + slot}"
    c_f = f"{fx.lo.qtitle('calibration')}!${lo.table_col(CONCURRENCY_TABLE, 'f')}${lo.c_table_first + slot}"
    ll = LsqLayout(lo)
    first, _ = ll.blocks["f"]
    lsq_f = f"'{ll.title}'!${COEF_COLS['value']}${ll.coef_first + first + slot}"
    f_value = f"IF({fx.name('Method')}=\"lsq\",{lsq_f},{c_f})"
    # No ISNUMBER(range) here: IronCalc 0.9.1 gives FALSE for every element of it inside an
    # array formula. A blank latency is copied as "", which MEDIAN skips like any text.
    return {
        "level": f"=IF(ISNUMBER({c_level}),{c_level},\"\")",
        "predicted": (
            f"=IF(ISNUMBER({level})*ISNUMBER({k})*ISNUMBER({cm})*ISNUMBER({p})*ISNUMBER({base}),"
            f"IF(ISNUMBER({f_value}),{base}*{f_value}*{k}*{p}/{cm},\"\"),\"\")"
        ),
        "latency": (f"=IF(ISNUMBER({level}),IFERROR(MEDIAN(IF({_runs_range(lo)}={level},{fx.raw('latency_p95_s')},"
                    f"\"\")),\"\"),\"\")"),
        "allowed": (f"=IF(ISNUMBER({level}),IF(ISNUMBER({pred}),IF(ISNUMBER({limit}),"
                    f"IF(ISNUMBER({latency}),({latency}<={limit})*1,0),1),0),\"\")"),  # blank: no level here
        "meets": (f"=IF(ISNUMBER({pred}),IF(AND({pred}>={_keyed(fx, 'inverse', 'target_tps')},${col['allowed']}{row}=1),"
                  f"{level},\"\"),\"\")"),
    }


# -- the reference ---------------------------------------------------------------


def _lookup(cal: Calibration, kind: str, key: Any) -> float | None:
    key = coerce_key(key)
    if key is None:
        return None
    if kind == "c":
        return cal.c_model(str(key) if not isinstance(key, float) else fmt_key(key))
    if not isinstance(key, float):
        return None
    return cal.f(key) if kind == "f" else cal.k_len(key)


def _typed_number(value: Any) -> float | None:
    """A typed cell as ISNUMBER sees it."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _prompt_cells(exp: Expected, layout: Layout, block: str, typed: Any, cal: Calibration) -> float | None:
    """The K_in cells of a block's typed prompt length ("effective", and PROMPT_BRACKET); returns K_in."""
    title = layout.title("derivation")
    prompt = _typed_number(typed)
    levels = [(level.prompt_level, level.k_in) for level in cal.prompt_levels]
    low = high = k_low = k_high = None
    k_in: float | None = 1.0
    if prompt is not None:
        low, high, k_low, k_high = k_in_bracket(prompt, levels)
        k_in = interpolate_k_in(prompt, levels)
    for role, value in zip(("effective", *PROMPT_BRACKET), (k_in, number_value(low), number_value(high), k_low, k_high)):
        exp[(title, layout.keyed_cell(block, "prompt_tokens", role))] = value
    return k_in


def derivation_values(exp: Expected, layout: Layout, inputs: Inputs, analysis: Analysis, cal: Calibration) -> None:
    title = layout.title("derivation")
    t = layout.text
    # the input cells read from the Summary (where they are typed)
    for block, typed in (("forward", inputs.forward), ("inverse", inputs.inverse)):
        for key in layout.keyed_rows(block).keys() & typed.keys():
            value = typed_value(typed[key])
            exp[(title, layout.keyed_cell(block, key))] = summary_sheet.BLANK_AS.get(f"{block}.{key}") if value is None else value

    fwd = inputs.forward
    model_in = fwd.get("model")
    model = model_in if coerce_key(model_in) is not None else cal.base_model
    f = _lookup(cal, "f", fwd.get("concurrency"))
    k = _lookup(cal, "k", fwd.get("max_tokens"))
    c = _lookup(cal, "c", model)
    p = _prompt_cells(exp, layout, "forward", fwd.get("prompt_tokens"), cal)
    exp[(title, layout.keyed_cell("forward", "concurrency", "effective"))] = f
    exp[(title, layout.keyed_cell("forward", "max_tokens", "effective"))] = k
    exp[(title, layout.keyed_cell("forward", "model", "extra"))] = text_value(fmt_key(model) if model is not None else None)
    exp[(title, layout.keyed_cell("forward", "model", "effective"))] = c
    tps = (cal.base_tps * f * k * p / c
           if f is not None and k is not None and c is not None and p is not None and cal.base_tps is not None
           else None)
    known = tps is not None
    exp[(title, layout.keyed_cell("forward", "tps"))] = tps if tps is not None else t("unidentified")
    if known:
        exp[(title, layout.keyed_cell("forward", "missing"))] = None
    else:
        parts = []
        if f is None:
            parts.append(f"f({fmt_key(fwd.get('concurrency'))})")
        if k is None:
            parts.append(f"K_len({fmt_key(fwd.get('max_tokens'))})")
        if c is None:
            parts.append(f"C_model({fmt_key(model)})")
        if p is None:
            parts.append(f"K_in({fmt_key(fwd.get('prompt_tokens'))})")
        exp[(title, layout.keyed_cell("forward", "missing"))] = f"{t('missing')} " + ", ".join(parts)

    target_in = inputs.inverse
    model_in = target_in.get("model")
    model = model_in if coerce_key(model_in) is not None else cal.base_model
    k = _lookup(cal, "k", target_in.get("max_tokens"))
    c = _lookup(cal, "c", model)
    p = _prompt_cells(exp, layout, "inverse", target_in.get("prompt_tokens"), cal)
    typed_level = _typed_number(target_in.get("prompt_tokens"))
    latency_level = typed_level if typed_level is not None else analysis.calibration.base_prompt_level
    exp[(title, layout.keyed_cell("inverse", "prompt_tokens", "extra"))] = number_value(latency_level)
    exp[(title, layout.keyed_cell("inverse", "max_tokens", "effective"))] = k
    exp[(title, layout.keyed_cell("inverse", "model", "extra"))] = text_value(fmt_key(model) if model is not None else None)
    exp[(title, layout.keyed_cell("inverse", "model", "effective"))] = c
    target = target_in.get("target_tps")
    limit = target_in.get("max_latency")
    limit = float(limit) if isinstance(limit, (int, float)) and not isinstance(limit, bool) else None
    # the measured latencies at the prompt level asked for (blank: the base level; every row without levels)
    base_level = analysis.calibration.base_prompt_level
    at_level = [(sheet_row, row) for sheet_row, row in inputs.rows
                if effective_prompt_level(row, base_level) == latency_level]
    percentiles = measured_percentiles([row for _, row in at_level])
    length = coerce_key(target_in.get("max_tokens"))
    _runs_values(exp, layout, at_level, model, length)
    table: list[tuple[float | None, float | None, float | None, float]] = []
    for i in range(layout.c_slots):
        level = cal.concurrency_levels[i] if i < len(cal.concurrency_levels) else None
        pred = None
        if (level is not None and k is not None and c is not None and p is not None and cal.base_tps is not None
                and level.f is not None):
            pred = cal.base_tps * level.f * k * p / c
        latency = None
        if level is not None and model is not None and isinstance(length, float):
            cell = percentiles.get((fmt_key(model).casefold(), level.concurrency, int(length)))
            latency = cell.latency_p95_s if cell is not None and length.is_integer() else None
        allowed = 0.0
        if pred is not None:
            allowed = 1.0 if limit is None else (1.0 if latency is not None and latency <= limit else 0.0)
        table.append((float(level.concurrency) if level else None, pred, latency, allowed))
    meets: list[tuple[float, float]] = []
    col = {column.key: layout.table_col(INVERSE_TABLE, column.key) for column in INVERSE_TABLE}
    for i, (level_value, pred, latency, allowed) in enumerate(table):
        row = layout.inverse_table_first + i
        hit = None
        if pred is not None and level_value is not None and _meets(pred, target) and allowed == 1.0:
            hit = level_value
            meets.append((level_value, pred))
        exp[(title, f"{col['level']}{row}")] = level_value
        exp[(title, f"{col['predicted']}{row}")] = pred
        exp[(title, f"{col['latency']}{row}")] = latency
        exp[(title, f"{col['allowed']}{row}")] = allowed if level_value is not None else None
        exp[(title, f"{col['meets']}{row}")] = hit
    if meets:
        best_meet = min(meets, key=lambda item: item[0])
        exp[(title, layout.keyed_cell("inverse", "concurrency"))] = best_meet[0]
        exp[(title, layout.keyed_cell("inverse", "tps"))] = best_meet[1]
    else:
        exp[(title, layout.keyed_cell("inverse", "concurrency"))] = t("unreachable_short")
        exp[(title, layout.keyed_cell("inverse", "tps"))] = None
    allowed_preds = [(lv, p) for lv, p, _, ok in table if lv is not None and p is not None and ok == 1.0 and p >= 0]
    if allowed_preds:
        best = max(p for _, p in allowed_preds)
        exp[(title, layout.keyed_cell("inverse", "best_tps"))] = best
        exp[(title, layout.keyed_cell("inverse", "best_concurrency"))] = min(lv for lv, p in allowed_preds if p == best)
    else:
        exp[(title, layout.keyed_cell("inverse", "best_tps"))] = None
        exp[(title, layout.keyed_cell("inverse", "best_concurrency"))] = None


def _runs_values(exp: Expected, layout: Layout, at_level: list[tuple[int, Any]], model: Any, length: Any) -> None:
    """The inverse's runs (`runs_formula`): each row's concurrency where it is a fault-free run
    with output of the model and max_tokens (the rows given are those at the prompt level)."""
    title = layout.title("derivation")
    wanted = fmt_key(model).casefold() if model is not None else None
    runs: dict[int, float] = {}
    if wanted is not None and isinstance(length, float):
        runs = {sheet_row: float(row.concurrency) for sheet_row, row in at_level
                if row.model.casefold() == wanted and row.max_tokens == length and row.total_output_tokens > 0
                and not has_fault(row)}
    for i in range(layout.rows):
        exp[(title, f"{RUNS_COL}{RUNS_FIRST_ROW + i}")] = runs.get(layout.raw_first + i)


def _meets(pred: float, target: Any) -> bool:
    """`pred >= target` as a spreadsheet compares a number with a typed cell."""
    if target is None:
        return pred >= 0  # a blank cell compares as 0
    if isinstance(target, bool):
        return False  # numbers sort before booleans
    if isinstance(target, str):
        return False  # numbers sort before text
    return pred >= target


# -- the writer ------------------------------------------------------------------


def write_sheet(ws: Worksheet, b: Building) -> dict[str, str]:
    layout, fx, labels = b.layout, b.fx, b.labels
    _label(ws, "A1", labels["derivation_title"])
    ws["A1"].font = TITLE_FONT
    _label(ws, "A2", labels["inputs_note"])
    ws["A2"].font = NOTE_FONT
    _label(ws, layout.keyed_heading("forward"), labels["forward"], bold=True)
    _label(ws, layout.keyed_heading("forward", "effective"), labels["coefficient"], bold=True)
    forward = forward_formulas(fx)
    for key, text in (("concurrency", labels["concurrency"]), ("max_tokens", labels["max_tokens"]),
                      ("model", labels["model"]), ("prompt_tokens", labels["prompt_tokens"])):
        _label(ws, layout.keyed_cell("forward", key, "label"), text)
        _formula(ws, layout.keyed_cell("forward", key), summary_sheet.mirror(layout, f"forward.{key}"))  # typed on the Summary
    for role in PROMPT_BRACKET:
        _label(ws, layout.keyed_heading("forward", role), labels[role], bold=True)
    _write_prompt_lookup(ws, layout, "forward", forward)
    _formula(ws, layout.keyed_cell("forward", "concurrency", "effective"), forward["f"], "0.000")
    _formula(ws, layout.keyed_cell("forward", "max_tokens", "effective"), forward["k"], "0.000")
    _formula(ws, layout.keyed_cell("forward", "model", "extra"), forward["model"])
    _formula(ws, layout.keyed_cell("forward", "model", "effective"), forward["c"], "0.000")
    _label(ws, layout.keyed_cell("forward", "tps", "label"), labels["forward_tps"], bold=True)
    _formula(ws, layout.keyed_cell("forward", "tps"), forward["tps"], "0.00")
    ws[layout.keyed_cell("forward", "tps")].fill = KEY_FILL
    _label(ws, layout.keyed_cell("forward", "missing", "label"), labels["forward_missing"])
    _formula(ws, layout.keyed_cell("forward", "missing"), forward["missing"])

    inverse = inverse_formulas(fx)
    _label(ws, layout.keyed_heading("inverse"), labels["inverse"], bold=True)
    for key, text in (("target_tps", labels["target_tps"]), ("max_tokens", labels["max_tokens"]),
                      ("model", labels["model"]), ("max_latency", labels["max_latency"]),
                      ("prompt_tokens", labels["prompt_tokens"])):
        _label(ws, layout.keyed_cell("inverse", key, "label"), text)
        _formula(ws, layout.keyed_cell("inverse", key), summary_sheet.mirror(layout, f"inverse.{key}"))  # typed on the Summary
    _write_prompt_lookup(ws, layout, "inverse", inverse)
    _formula(ws, layout.keyed_cell("inverse", "prompt_tokens", "extra"), inverse["prompt_level"])
    _formula(ws, layout.keyed_cell("inverse", "max_tokens", "effective"), inverse["k"], "0.000")
    _formula(ws, layout.keyed_cell("inverse", "model", "extra"), inverse["model"])
    _formula(ws, layout.keyed_cell("inverse", "model", "effective"), inverse["c"], "0.000")
    for key in ("concurrency", "tps", "best_tps", "best_concurrency"):
        label_key = {"concurrency": "recommended_concurrency", "tps": "recommended_tps"}.get(key, key)
        _label(ws, layout.keyed_cell("inverse", key, "label"), labels[label_key], bold=key in ("concurrency", "tps"))
        _formula(ws, layout.keyed_cell("inverse", key), inverse[key], "0.00" if key in ("tps", "best_tps") else None)
    ws[layout.keyed_cell("inverse", "concurrency")].fill = KEY_FILL
    ws[layout.keyed_cell("inverse", "tps")].fill = KEY_FILL
    _label(ws, f"A{layout.inverse_table_header - 2}", labels["inverse_note"])
    _label(ws, f"A{layout.inverse_table_header - 1}", labels["inverse_table"], bold=True)
    _header(ws, layout.inverse_table_header, 1, INVERSE_TABLE, layout.lang)
    first = layout.inverse_table_first
    for row in range(first, first + layout.c_slots):
        for key, text in inverse_row(fx, row).items():
            _formula(ws, f"{layout.table_col(INVERSE_TABLE, key)}{row}", text,
                     {"predicted": "0.00", "latency": "0.000"}.get(key), array=(key == "latency"))
    ws[f"{RUNS_COL}{RUNS_HEADER_ROW}"] = RUNS_HEADER[layout.lang]
    write_filled(ws, b.fills, {"runs": RUNS_COL}, lambda row: runs_formula(fx, row),
                 range(RUNS_FIRST_ROW, RUNS_FIRST_ROW + layout.rows), layout.raw_first - RUNS_FIRST_ROW)
    ws.column_dimensions.group(RUNS_COL, RUNS_COL, outline_level=1, hidden=True)
    ws.column_dimensions[RUNS_COL].width = 14
    ws.column_dimensions["A"].width = 36
    ws.column_dimensions["B"].width = 16
    ws.column_dimensions["C"].width = 14
    ws.column_dimensions["D"].width = 22
    ws.column_dimensions["E"].width = 12
    for col in "FGH":
        ws.column_dimensions[col].width = 12
    # the note wraps within the printed columns A..H instead of running past the margin
    wrapped_note(ws, f"A{layout.inverse_table_header - 2}", "H",
                 sum(ws.column_dimensions[col].width for col in "ABCDEFGH"), NOTE_FONT)
    ws.print_area = f"A1:H{first + layout.c_slots - 1}"
    print_setup(ws, pages_tall=pages_for(first + layout.c_slots - 1))  # not a page of empty slots
    return names_on(layout, "derivation")


def _write_prompt_lookup(ws: Worksheet, layout: Layout, block: str, formulas: Mapping[str, str]) -> None:
    """K_in for the block's typed prompt length ("effective") and the known levels it is
    interpolated between (PROMPT_BRACKET)."""
    for role in ("effective", *PROMPT_BRACKET):
        _formula(ws, layout.keyed_cell(block, "prompt_tokens", role), formulas[f"prompt.{role}"],
                 None if role in ("prompt_low", "prompt_high") else "0.000")


def reference(c: Checking) -> None:
    derivation_values(c.exp, c.layout, c.inputs, c.analysis, lsq_sheet.chosen_calibration(c))


SHEET = SheetSpec("derivation", {lang: SHEET_TITLES[lang]["derivation"] for lang in SHEET_TITLES}, write_sheet,
                  reference, reads=("lsq",), inputs="none")
