"""The workbook's formulas, written from the layout.

Per-row quantities are CSE array formulas over whole (bounded) columns: one
formula per column instead of one per cell. Every engine computes them as a
vector, which keeps recalculation fast, and a person typing a new row inside
the table sees it flow through. Only functions that the embedded engine
(`formulas`) and LibreOffice compute identically are used: no TRIM (they
differ on inner spaces), no number-to-text of non-integers, MINIFS/MAXIFS
written with their `_xlfn.` prefix.
"""

from __future__ import annotations

from scm_xl.model import MONOTONIC_EPSILON, PREFERRED_BASE_MAX_TOKENS
from scm_xl.workbook.catalog_tables import CatalogLayout, physics_catalog
from scm_xl.workbook.lsq_sheet import LsqLayout
from scm_xl.workbook.layout import (
    CONCURRENCY_TABLE, DEFAULT_PHYSICS_PRECISION, DEFAULT_SHORT_OUTPUT_RATIO, EXCELLENT_MAPE, EXCELLENT_MAX,
    GOOD_MAPE, GOOD_MAX, LENGTH_TABLE, MODEL_TABLE, SUPERLINEAR_TOLERANCE, Layout,
)


def q(text: str) -> str:
    """A string literal for a formula."""
    return '"' + text.replace('"', '""') + '"'


def text_with(template: str, **values: str) -> str:
    """A formula expression rendering a TEXTS template, splicing in expressions."""
    parts: list[str] = []
    rest = template
    while "{" in rest:
        before, _, tail = rest.partition("{")
        name, _, rest = tail.partition("}")
        if before:
            parts.append(q(before))
        parts.append(values[name])
    if rest:
        parts.append(q(rest))
    return "&".join(parts) if parts else q("")


class Formulas:
    """Formula text for every formula cell, keyed the way the builder places them."""

    def __init__(self, layout: Layout, catalog: CatalogLayout | None = None) -> None:
        self.lo = layout
        self.cat = catalog or CatalogLayout(layout.lang, physics_catalog())

    # -- references --------------------------------------------------------
    def raw(self, key: str) -> str:
        return self.lo.raw_range(key)

    def raw_local(self, key: str) -> str:
        return self.lo.raw_range(key, sheet=False)

    def name(self, name: str) -> str:
        return self.lo.name_ref(name)

    def ctab(self, key: str) -> str:
        return self.lo.c_table_range(key)

    def ltab(self, key: str) -> str:
        return self.lo.l_table_range(key)

    def mtab(self, key: str) -> str:
        return self.lo.m_table_range(key)

    def _base_criteria(self) -> str:
        """COUNTIFS/AVERAGEIFS criteria: base model, included."""
        return f"{self.raw('model')},{self.name('BaseModel')},{self.raw('included')},1"

    # -- raw-data sheet: one array formula per helper column -----------------
    def raw_columns(self) -> dict[str, str]:
        r = self.raw_local
        lo = self.lo
        t = lo.text
        present = r("present")
        tol = self.name("MonotonicTolerancePct")
        mono_text = q(t("mono"))
        strict = self.name("StrictPhysics")
        rowidx = f"(ROW({r('present')})-{self.lo.raw_first - 1})"

        def count(key: str) -> str:
            return f"IF(ISNUMBER({r(key)}),{r(key)},0)"

        return {
            "present": (
                f"=ISNUMBER({r('concurrency')})*ISNUMBER({r('max_tokens')})*ISNUMBER({r('total_time_s')})"
                f"*ISNUMBER({r('total_output_tokens')})*({r('total_time_s')}>0)"
            ),
            "tps": f"=IF({present}=1,{r('total_output_tokens')}/{r('total_time_s')},\"\")",
            "ln_tps": f"=IF({present}=1,IF({r('tps')}>0,LN({r('tps')}),\"\"),\"\")",
            "fault": f"=IF({present}=1,(({count('failed_requests')}+{count('rate_limited_requests')})>0)*1,\"\")",
            "eligible": (
                f"=IF({present}=1,({r('fault')}=0)*({r('tps')}>0)*({r('override')}<>\"exclude\"),0)"
            ),
            "cell_key": f"=IF({present}=1,{r('model')}&\"|\"&{r('max_tokens')}&\"|\"&{r('concurrency')},\"\")",
            "cell_first": (
                f"=IF({present}=1,IF(MATCH({r('cell_key')},{r('cell_key')},0)={rowidx},{rowidx},\"\"),\"\")"
            ),
            "lower_max": f"=IF({present}=1,{self.cell_lookup('lower_max')},\"\")",
            "mono": (
                f"=IF({present}=1,({r('lower_max')}>{r('tps')}*(1+{tol}/100+{MONOTONIC_EPSILON!r}))*1,\"\")"
            ),
            "included": (
                f"=IF({present}=1,({r('tps')}>0)*IF({r('override')}=\"include\",1,"
                f"IF({r('override')}=\"exclude\",0,({r('fault')}=0)*({r('mono')}=0)"
                f"*IF({strict}=1,({r('physics')}=0)*1,1))),\"\")"
            ),
            "reason": (
                f"=IF({present}=1,IF({r('tps')}<=0,{q(t('no_output'))},"
                f"IF({r('override')}=\"exclude\",{q(t('manual_exclude'))},"
                f"IF({r('override')}=\"include\",{q(t('manual_include'))},"
                f"IF({r('fault')}=1,{q(t('fault'))},"
                f"IF({r('mono')}=1,{mono_text},"
                f"IF(({strict}=1)*({r('physics')}>0)=1,{q(t('physics'))},\"\")))))),\"\")"
            ),
            "c_included": f"=IF({r('included')}=1,{r('concurrency')},\"\")",
            "l_included": f"=IF({r('included')}=1,{r('max_tokens')},\"\")",
            "f_known": (
                f"=IF({present}=1,SUMIFS({self.ctab('known')},{self.ctab('level')},{r('concurrency')}),\"\")"
            ),
            **self.physics_columns(),
        }

    def physics_columns(self) -> dict[str, str]:
        r = self.raw_local
        t = self.lo.text
        cat = self.cat
        present = r("present")
        eps = repr(MONOTONIC_EPSILON)
        conc, length, model = r("concurrency"), r("max_tokens"), r("model")

        def mfield(name: str) -> str:
            return f"SUMIFS({cat.model(name)},{cat.model('id')},{r('model_id')})"

        def gfield(name: str) -> str:
            return f"SUMIFS({cat.gpu(name)},{cat.gpu('id')},{r('gpu_id')})"

        both = f"({r('model_id')}>0)*({r('gpu_id')}>0)"
        prompt = f"IF(ISNUMBER({r('prompt_tokens')}),{r('prompt_tokens')},0)"
        flags = [r("short_output"), r("superlinear"), r("over_ceiling"), r("kv_over")]
        pieces = [
            text_with(t("short_output"), tokens=r("total_output_tokens"),
                      expected=f"({length}*{r('total_requests')})"),
            text_with(t("superlinear"), c0=r("group_low_c")),
            text_with(t("over_ceiling"), ceiling=f"ROUND(IF(ISNUMBER({r('ceiling')}),{r('ceiling')},0),0)"),
            text_with(t("kv_over"), c=conc),
        ]
        # Each warning's text is its own column, joined below by plain references: LibreOffice
        # returns #VALUE! when array IFs that build text are concatenated in one formula.
        text_keys = ["short_text", "superlinear_text", "ceiling_text", "kv_text"]
        text = []
        for i, (flag, key) in enumerate(zip(flags, text_keys)):
            if i:
                earlier = "+".join(flags[:i])
                text.append(f"IF(({earlier})*{flag}>0,\"; \",\"\")")
            text.append(r(key))
        piece_columns = {
            key: f"=IF({present}=1,IF({flag}=1,{piece},\"\"),\"\")"
            for key, flag, piece in zip(text_keys, flags, pieces)
        }
        return {
            "model_id": f"=IF({present}=1,SUMIFS({cat.model_alias('id')},{cat.model_alias('alias')},{model}),\"\")",
            "gpu_id": (
                f"=IF({present}=1,IF({r('gpu')}=\"\",0,SUMIFS({cat.gpu_alias('id')},{cat.gpu_alias('alias')},"
                f"{r('gpu')})),\"\")"
            ),
            "short_output": (
                f"=IF({present}=1,({r('total_output_tokens')}<{self.name('ShortOutputRatio')}*{length}"
                f"*{r('total_requests')})*1,0)"
            ),
            "group_low_c": f"=IF({present}=1,{self.cell_lookup('group_low_c')},\"\")",
            "superlinear": (
                f"=IF({present}=1,IF({r('group_low_c')}>0,IF({conc}>{r('group_low_c')},"
                f"({r('tps')}/{self.cell_lookup('group_base')}>{conc}/{r('group_low_c')}"
                f"*(1+{SUPERLINEAR_TOLERANCE!r}))*1,0),0),0)"
            ),
            "ceiling": (
                f"=IF({present}=1,IF({both}=1,{gfield('memory_bandwidth')}/{mfield('phys_read_bytes')},"
                f"\"\"),\"\")"
            ),
            "over_ceiling": (
                f"=IF({present}=1,IF(ISNUMBER({r('ceiling')}),({r('tps')}/{conc}>{r('ceiling')}*(1+{eps}))*1,0),0)"
            ),
            "kv_over": (
                f"=IF({present}=1,IF({both}=1,(({mfield('phys_weight_bytes')}+{conc}*{mfield('phys_kv_bytes_per_token')}"
                f"*({prompt}+{length}))>{gfield('memory_bytes')})*1,0),0)"
            ),
            "physics": f"=IF({present}=1,{'+'.join(flags)},\"\")",
            **piece_columns,
            # No outer IF(present): the pieces are already "" and the flags 0 on blank rows.
            "physics_text": "=" + "&".join(text),
        }

    def cell_lookup(self, key: str) -> str:
        """A cells-sheet figure for each raw row's cell (0 when the cell has no slot)."""
        return f"SUMIFS({self.lo.cells_range(key)},{self.lo.cells_range('key')},{self.raw_local('cell_key')})"

    # -- cells sheet -----------------------------------------------------------
    def cells_columns(self) -> dict[str, str]:
        lo = self.lo
        raw = self.raw

        def c(key: str) -> str:
            return lo.cells_range(key, sheet=False)

        slot = c("slot")
        has = f"{c('key')}<>\"\""
        rowidx = f"(ROW({raw('present')})-{lo.raw_first - 1})"
        eligible = f"{raw('cell_key')},{c('key')},{raw('eligible')},1"
        group = f"{c('model')},{c('model')},{c('max_tokens')},{c('max_tokens')},{c('eligible')},\">0\""
        return {
            "first_row": f"=IFERROR(SMALL({raw('cell_first')},{slot}),\"\")",
            "key": f"=IF(ISNUMBER({c('first_row')}),LOOKUP({c('first_row')},{rowidx},{raw('cell_key')}),\"\")",
            "model": f"=IF(ISNUMBER({c('first_row')}),LOOKUP({c('first_row')},{rowidx},{raw('model')})&\"\",\"\")",
            "max_tokens": f"=IF(ISNUMBER({c('first_row')}),LOOKUP({c('first_row')},{rowidx},{raw('max_tokens')}),\"\")",
            "concurrency": f"=IF(ISNUMBER({c('first_row')}),LOOKUP({c('first_row')},{rowidx},{raw('concurrency')}),\"\")",
            "rows": f"=IF({has},COUNTIF({raw('cell_key')},{c('key')}),\"\")",
            "eligible": f"=IF({has},COUNTIFS({eligible}),\"\")",
            "max_tps": f"=IF({has},_xlfn.MAXIFS({raw('tps')},{eligible}),\"\")",
            "mean_ln": f"=IF({has},IF({c('eligible')}>0,AVERAGEIFS({raw('ln_tps')},{eligible}),\"\"),\"\")",
            "lower_max": (
                f"=IF({has},_xlfn.MAXIFS({c('max_tps')},{group},{c('concurrency')},\"<\"&{c('concurrency')}),\"\")"
            ),
            "group_low_c": f"=IF({has},_xlfn.MINIFS({c('concurrency')},{group}),\"\")",
            "group_base": (
                f"=IF({has},IF({c('group_low_c')}>0,EXP(SUMIFS({c('mean_ln')},{c('model')},{c('model')},"
                f"{c('max_tokens')},{c('max_tokens')},{c('concurrency')},{c('group_low_c')})),\"\"),\"\")"
            ),
        }

    # -- calibration sheet ---------------------------------------------------
    def settings(self) -> dict[str, str]:
        lo = self.lo
        s = lo.settings_rows
        raw = self.raw
        bl = self.name("BaseMaxTokens")
        inp = {k: f"$B${row}" for k, row in s.items()}
        return {
            "base_model": (
                f"=IF({inp['base_model']}<>\"\",{inp['base_model']},"
                f"IFERROR(INDEX({raw('model')},MATCH(1,{raw('included')},0)),\"\"))"
            ),
            "base_max_tokens": (
                f"=IF(ISNUMBER({inp['base_max_tokens']}),{inp['base_max_tokens']},"
                f"IF(COUNTIFS({raw('max_tokens')},{PREFERRED_BASE_MAX_TOKENS},{self._base_criteria()})>0,"
                f"{PREFERRED_BASE_MAX_TOKENS},"
                f"IF(COUNTIFS({self._base_criteria()})>0,"
                f"_xlfn.MINIFS({raw('max_tokens')},{self._base_criteria()}),\"\")))"
            ),
            "base_concurrency": (
                f"=IF(ISNUMBER({inp['base_concurrency']}),{inp['base_concurrency']},"
                f"IF(COUNTIFS({raw('max_tokens')},{bl},{self._base_criteria()})>0,"
                f"_xlfn.MINIFS({raw('concurrency')},{raw('max_tokens')},{bl},{self._base_criteria()}),\"\"))"
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
                f"=IF({inp['physics_precision']}<>\"\",{inp['physics_precision']}&\"\",{q(DEFAULT_PHYSICS_PRECISION)})"
            ),
            "method": f"=IF({inp['method']}=\"lsq\",\"lsq\",\"chain\")",
            "physics_bytes": (
                f"=IF(COUNTIF({self.cat.precision('precision')},{self.name('PhysicsPrecision')})>0,"
                f"SUMIFS({self.cat.precision('bytes')},{self.cat.precision('precision')},"
                f"{self.name('PhysicsPrecision')}),2)"
            ),
            "base_rows": f"=COUNTIFS({self._at_base_point(self.name('BaseConcurrency'))})",
            "base_tps": (
                f"=IF({self.name('BaseRows')}>0,EXP(AVERAGEIFS({raw('ln_tps')},"
                f"{self._at_base_point(self.name('BaseConcurrency'))})),\"\")"
            ),
        }

    def _at_base_point(self, concurrency: str, model: str | None = None) -> str:
        raw = self.raw
        model = model or self.name("BaseModel")
        return (
            f"{raw('concurrency')},{concurrency},{raw('max_tokens')},{self.name('BaseMaxTokens')},"
            f"{raw('model')},{model},{raw('included')},1"
        )

    def level_value(self, source: str, slot: int, previous: str) -> str:
        """k-th smallest distinct value of an included-only helper column, linear in rows."""
        if slot == 1:
            return f"=IF(COUNT({source})=0,\"\",MIN({source}))"
        return (
            f"=IF(ISNUMBER({previous}),IF(COUNTIF({source},\">\"&{previous})>0,"
            f"SMALL({source},COUNTIF({source},\"<=\"&{previous})+1),\"\"),\"\")"
        )

    def concurrency_row(self, row: int) -> dict[str, str]:
        lo = self.lo
        col = {c.key: lo.table_col(CONCURRENCY_TABLE, c.key) for c in CONCURRENCY_TABLE}
        level = f"${col['level']}{row}"
        slot = row - lo.c_table_first + 1
        raw = self.raw
        base = self.name("BaseTPS")
        crit = (f"{raw('concurrency')},{level},{raw('max_tokens')},{self.name('BaseMaxTokens')},"
                f"{self._base_criteria()}")
        return {
            "level": self.level_value(raw("c_included"), slot, f"${col['level']}{row - 1}"),
            "rows": f"=IF(ISNUMBER({level}),COUNTIFS({crit}),\"\")",
            "f": (
                f"=IF(ISNUMBER({level}),IF(AND(${col['rows']}{row}>0,ISNUMBER({base})),"
                f"EXP(AVERAGEIFS({raw('ln_tps')},{crit}))/{base},\"\"),\"\")"
            ),
            "known": f"=IF(ISNUMBER(${col['f']}{row}),1,0)",
        }

    def length_row(self, row: int) -> dict[str, str]:
        lo = self.lo
        col = {c.key: lo.table_col(LENGTH_TABLE, c.key) for c in LENGTH_TABLE}
        level, anchor = f"${col['level']}{row}", f"${col['anchor']}{row}"
        slot = row - lo.l_table_first + 1
        raw = self.raw
        base = self.name("BaseTPS")
        anchor_crit = f"{raw('max_tokens')},{level},{self._base_criteria()},{raw('f_known')},1"
        crit = f"{raw('concurrency')},{anchor},{raw('max_tokens')},{level},{self._base_criteria()}"
        return {
            "level": self.level_value(raw("l_included"), slot, f"${col['level']}{row - 1}"),
            "anchor": (
                f"=IF(ISNUMBER({level}),IF(COUNTIFS({anchor_crit})>0,"
                f"_xlfn.MINIFS({raw('concurrency')},{anchor_crit}),\"\"),\"\")"
            ),
            "rows": f"=IF(ISNUMBER({anchor}),COUNTIFS({crit}),\"\")",
            "k": (
                f"=IF(ISNUMBER({anchor}),IF(ISNUMBER({base}),EXP(AVERAGEIFS({raw('ln_tps')},{crit}))"
                f"/({base}*SUMIFS({self.ctab('f')},{self.ctab('level')},{anchor})),\"\"),\"\")"
            ),
            "known": f"=IF(ISNUMBER(${col['k']}{row}),1,0)",
        }

    def model_row(self, row: int) -> tuple[dict[str, str], bool]:
        """Formulas of one model slot; the bool says the name cell is an array formula."""
        lo = self.lo
        col = {c.key: lo.table_col(MODEL_TABLE, c.key) for c in MODEL_TABLE}
        name = f"${col['name']}{row}"
        raw = self.raw
        base = self.name("BaseTPS")
        first = lo.m_table_first
        if row == first:
            name_formula = f"=IFERROR(INDEX({raw('model')},MATCH(1,{raw('included')},0)),\"\")"
        else:
            previous = f"${col['name']}${first}:${col['name']}${row - 1}"
            name_formula = (
                f"=IFERROR(INDEX({raw('model')},MATCH(1,({raw('included')}=1)"
                f"*(COUNTIF({previous},{raw('model')})=0),0)),\"\")"
            )
        crit = self._at_base_point(self.name("BaseConcurrency"), model=name)
        return {
            "name": name_formula,
            "rows": f"=IF({name}<>\"\",COUNTIFS({crit}),\"\")",
            "tps": (
                f"=IF({name}<>\"\",IF(${col['rows']}{row}>0,"
                f"EXP(AVERAGEIFS({raw('ln_tps')},{crit})),\"\"),\"\")"
            ),
            "c": (
                f"=IF(AND(ISNUMBER(${col['tps']}{row}),ISNUMBER({base})),{base}/${col['tps']}{row},\"\")"
            ),
            "known": f"=IF(ISNUMBER(${col['c']}{row}),1,0)",
        }, row != first

    def chart_column(self, slot: int) -> tuple[str, str]:
        """Header (a max_tokens level) and the array formula of TPS by concurrency level for it."""
        lo = self.lo
        header_cell = f"{self._chart_col(slot)}${lo.chart_header_row}"
        header = f"=IF(ROWS({self.ltab('level')})>={slot},INDEX({self.ltab('level')},{slot}),\"\")"
        raw = self.raw
        levels = self.ctab("level")
        crit = (f"{raw('concurrency')},{levels},{raw('max_tokens')},{header_cell},"
                f"{self._base_criteria()}")
        body = (
            f"=IF(ISNUMBER({levels})*ISNUMBER({header_cell}),"
            f"IF(COUNTIFS({crit})>0,EXP(AVERAGEIFS({raw('ln_tps')},{crit})),NA()),NA())"
        )
        return header, body

    def _chart_col(self, slot: int) -> str:
        from openpyxl.utils import get_column_letter
        return "$" + get_column_letter(self.lo.chart_grid_col + slot)

    # -- consistency sheet ---------------------------------------------------
    def consistency_columns(self) -> dict[str, str]:
        lo = self.lo
        t = lo.text
        raw = self.raw
        c = lo.cons_range
        present = raw("present")
        inc = raw("included")
        bm, bl, bc = self.name("BaseModel"), self.name("BaseMaxTokens"), self.name("BaseConcurrency")
        base = self.name("BaseTPS")
        conc, length, model = raw("concurrency"), raw("max_tokens"), raw("model")
        f_known, k_known, c_known = c("f_known"), c("k_known"), c("c_known")
        f_lab = f"\"f(\"&{conc}&\")\""
        k_lab = f"\"K_len(\"&{length}&\")\""
        c_lab = f"\"C_model(\"&{model}&\")\""
        is_bm = f"({model}={bm})"
        at_bl = f"({length}={bl})"
        fid = f"{is_bm}*{at_bl}"
        kid = f"{is_bm}*({conc}={c('anchor')})"
        cid = f"(1-{is_bm})*({conc}={bc})*{at_bl}"
        base_point = f"{is_bm}*{at_bl}*({conc}={bc})"
        identify = f"(({fid})+({kid})+({cid}))>0"
        identifies = (
            f"{q(t('identifies') + ' ')}&IF({base_point}=1,\"BaseTPS\","
            f"IF({fid}=1,{f_lab},\"\")&IF(({fid})*({kid})=1,\", \",\"\")&IF({kid}=1,{k_lab},\"\")"
            f"&IF((({fid})+({kid}))*({cid})>0,\", \",\"\")&IF({cid}=1,{c_lab},\"\"))"
        )
        fm, km, cm = f"({f_known}=0)", f"({k_known}=0)", f"({c_known}=0)"
        missing = (
            f"{q(t('missing') + ' ')}&IF({fm},{f_lab},\"\")&IF({fm}*{km},\", \",\"\")&IF({km},{k_lab},\"\")"
            f"&IF(({fm}+{km})*{cm}>0,\", \",\"\")&IF({cm},{c_lab},\"\")"
        )
        return {
            "exp_id": f"=IF({present}=1,{raw('exp_id')}&\"\",\"\")",
            "model": f"=IF({present}=1,{model}&\"\",\"\")",
            "concurrency": f"=IF({present}=1,{conc},\"\")",
            "max_tokens": f"=IF({present}=1,{length},\"\")",
            "included": f"=IF({present}=1,{inc},\"\")",
            "measured": f"=IF({present}=1,{raw('tps')},\"\")",
            "f_known": f"=IF({inc}=1,SUMIFS({self.ctab('known')},{self.ctab('level')},{conc}),\"\")",
            "k_known": f"=IF({inc}=1,SUMIFS({self.ltab('known')},{self.ltab('level')},{length}),\"\")",
            "c_known": f"=IF({inc}=1,SUMIFS({self.mtab('known')},{self.mtab('name')},{model}),\"\")",
            "anchor": f"=IF({inc}=1,SUMIFS({self.ltab('anchor')},{self.ltab('level')},{length}),\"\")",
            "physics_text": f"=IF({present}=1,{raw('physics_text')}&\"\",\"\")",
            "f": f"=IF({f_known}=1,SUMIFS({self.ctab('f')},{self.ctab('level')},{conc}),\"\")",
            "k": f"=IF({k_known}=1,SUMIFS({self.ltab('k')},{self.ltab('level')},{length}),\"\")",
            "c": f"=IF({c_known}=1,SUMIFS({self.mtab('c')},{self.mtab('name')},{model}),\"\")",
            "predicted": (
                f"=IF({inc}=1,IF({f_known}*{k_known}*{c_known}=1,{base}*{c('f')}*{c('k')}/{c('c')},\"\"),\"\")"
            ),
            "deviation": f"=IF(ISNUMBER({c('predicted')}),{c('measured')}-{c('predicted')},\"\")",
            "deviation_pct": (
                f"=IF(ISNUMBER({c('predicted')}),({c('measured')}-{c('predicted')})/{c('measured')}*100,\"\")"
            ),
            "role": (
                f"=IF({present}=1,IF({inc}=0,\"excluded\",IF({identify},\"identify\","
                f"IF(ISNUMBER({c('predicted')}),\"check\",\"unidentified\"))),\"\")"
            ),
            "note": (
                f"=IF({c('role')}=\"excluded\",{raw('reason')},IF({c('role')}=\"identify\",{identifies},"
                f"IF({c('role')}=\"unidentified\",{missing},\"\")))"
            ),
            "check_abs_pct": f"=IF({c('role')}=\"check\",ABS({c('deviation_pct')}),\"\")",
        }

    def summary(self) -> dict[str, str]:
        c = self.lo.cons_range
        n = self.name
        return {
            "check_rows": f"=COUNTIF({c('role')},\"check\")",
            "identify_rows": f"=COUNTIF({c('role')},\"identify\")",
            "unidentified_rows": f"=COUNTIF({c('role')},\"unidentified\")",
            "excluded_rows": f"=COUNTIF({c('role')},\"excluded\")",
            "mape": f"=IF({n('CheckRows')}>0,AVERAGE({c('check_abs_pct')}),\"\")",
            "max_deviation": f"=IF({n('CheckRows')}>0,MAX({c('check_abs_pct')}),\"\")",
            "verdict": (
                f"=IF({n('CheckRows')}=0,\"insufficient\","
                f"IF(AND({n('MAPE')}<={EXCELLENT_MAPE:g},{n('MaxDeviation')}<={EXCELLENT_MAX:g}),\"excellent\","
                f"IF(AND({n('MAPE')}<={GOOD_MAPE:g},{n('MaxDeviation')}<={GOOD_MAX:g}),\"good\",\"fail\")))"
            ),
        }

    # -- derivation sheet ----------------------------------------------------
    def lsq_block(self, kind: str, column: str) -> str:
        """A column of the least-squares coefficient table, over one parameter block."""
        ll = LsqLayout(self.lo)
        first, size = ll.blocks[{"f": "f", "k": "K_len", "c": "C_model"}[kind]]
        return f"'{ll.title}'!{ll.coef(column, first, size)}"

    def base(self) -> str:
        """BaseTPS of the method the method cell chose."""
        ll = LsqLayout(self.lo)
        return (f"IF({self.name('Method')}=\"lsq\",'{ll.title}'!{ll.summary_ref('base_tps')},"
                f"{self.name('BaseTPS')})")

    def coefficient_lookup(self, kind: str, key_cell: str) -> str:
        """f, K_len or C_model for a typed level, from the chosen method; "" when not calibrated."""
        table = {"f": (self.ctab("level"), self.ctab("f"), self.ctab("known")),
                 "k": (self.ltab("level"), self.ltab("k"), self.ltab("known")),
                 "c": (self.mtab("name"), self.mtab("c"), self.mtab("known"))}[kind]
        level, value, known = table
        chain = f"IF(COUNTIFS({level},{key_cell},{known},1)>0,SUMIFS({value},{level},{key_cell}),\"\")"
        lsq_level, lsq_value = self.lsq_block(kind, "level"), self.lsq_block(kind, "value")
        lsq = (f"IF(COUNTIFS({lsq_level},{key_cell},{lsq_value},\">0\")>0,"
               f"SUMIFS({lsq_value},{lsq_level},{key_cell}),\"\")")
        return f"=IF({self.name('Method')}=\"lsq\",{lsq},{chain})"

    def effective_model(self, input_cell: str) -> str:
        return f"=IF({input_cell}<>\"\",{input_cell},{self.name('BaseModel')})"

    def forward(self) -> dict[str, str]:
        rows = self.lo.forward_rows
        f, k, cm = f"$C${rows['concurrency']}", f"$C${rows['max_tokens']}", f"$C${rows['model']}"
        t = self.lo.text
        fm, km, cmm = f"NOT(ISNUMBER({f}))", f"NOT(ISNUMBER({k}))", f"NOT(ISNUMBER({cm}))"
        conc, length, model = f"$B${rows['concurrency']}", f"$B${rows['max_tokens']}", f"$D${rows['model']}"
        return {
            "f": self.coefficient_lookup("f", conc),
            "k": self.coefficient_lookup("k", length),
            "model": self.effective_model(f"$B${rows['model']}"),
            "c": self.coefficient_lookup("c", model),
            "tps": (
                f"=IF(AND(ISNUMBER({f}),ISNUMBER({k}),ISNUMBER({cm}),ISNUMBER({self.base()})),"
                f"{self.base()}*{f}*{k}/{cm},{q(t('unidentified'))})"
            ),
            "missing": (
                f"=IF(ISNUMBER($B${rows['tps']}),\"\",{q(t('missing') + ' ')}&IF({fm},\"f(\"&{conc}&\")\",\"\")"
                f"&IF(AND({fm},{km}),\", \",\"\")&IF({km},\"K_len(\"&{length}&\")\",\"\")"
                f"&IF(AND(OR({fm},{km}),{cmm}),\", \",\"\")&IF({cmm},\"C_model(\"&{model}&\")\",\"\"))"
            ),
        }

    def inverse(self) -> dict[str, str]:
        lo = self.lo
        rows = lo.inverse_rows
        k, cm = f"$C${rows['max_tokens']}", f"$C${rows['model']}"
        level = lo.inverse_range("level")
        pred = lo.inverse_range("predicted")
        meets = lo.inverse_range("meets")
        rc = f"$B${rows['concurrency']}"
        best = f"$B${rows['best_tps']}"
        base = self.base()
        lsq_f = self.lsq_block("f", "value")
        f_values = f"IF({self.name('Method')}=\"lsq\",{lsq_f},{self.ctab('f')})"
        return {
            "k": self.coefficient_lookup("k", f"$B${rows['max_tokens']}"),
            "model": self.effective_model(f"$B${rows['model']}"),
            "c": self.coefficient_lookup("c", f"$D${rows['model']}"),
            "level": f"={self.ctab('level')}",
            "predicted": (
                f"=IF(ISNUMBER({level})*ISNUMBER({k})*ISNUMBER({cm})*ISNUMBER({base}),"
                f"IF(ISNUMBER({f_values}),{base}*{f_values}*{k}/{cm},\"\"),\"\")"
            ),
            "meets": f"=IF(ISNUMBER({pred}),IF({pred}>=$B${rows['target_tps']},{level},\"\"),\"\")",
            "concurrency": f"=IF(COUNT({meets})=0,{q(lo.text('unreachable_short'))},MIN({meets}))",
            "tps": f"=IF(ISNUMBER({rc}),SUMIFS({pred},{level},{rc}),\"\")",
            "best_tps": f"=IF(COUNT({pred})=0,\"\",MAX({pred}))",
            "best_concurrency": f"=IF(ISNUMBER({best}),INDEX({level},MATCH({best},{pred},0)),\"\")",
        }


__all__ = ["Formulas", "q", "text_with"]
