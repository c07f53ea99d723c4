"""The workbook's formulas, written from the layout.

Every per-row quantity is an ordinary formula in its own row (no multi-cell array
formula anywhere a person edits): row k of the workings sheet copies the k-th row
under the raw-data sheet's header by position (INDEX), and computes from its own
cells. Aggregates (COUNTIFS, SUMIFS, AVERAGEIFS, MINIFS/MAXIFS with scalar criteria,
SMALL, MATCH on a scalar) read whole bounded columns of the workings sheet. Only
functions that every supported engine computes identically are used: no TRIM
(engines differ on inner spaces), no number-to-text of non-integers, MINIFS/MAXIFS
written with their `_xlfn.` prefix and guarded wherever no number may meet their criteria
(`ifs_or_zero`: Excel documents 0 there, Gnumeric gives #DIV/0!).

The formula text of three core sheets (workings, cells, summary links), mirroring model.py rule
by rule; the calibration, consistency and derivation sheets' is in their own modules, which
call the helpers here (`raw`, `name`, `ctab`...).
"""

from __future__ import annotations

from typing import Callable

from scm_xl.model import MONOTONIC_EPSILON
from scm_xl.workbook.catalog_tables import CatalogLayout, physics_catalog
from scm_xl.workbook.literals import q, text_with
from scm_xl.workbook.layout import (
    CELLS_TABLE as CELLS_TABLE_REF, ENTRY_COLUMNS, RAW_COLUMNS, REQUIRED_INPUT_KEYS, SUPERLINEAR_TOLERANCE, Layout,
    unusable_tests,
)

MIRRORED_KEYS = tuple(c.key for c in RAW_COLUMNS if c.key in {e.key for e in ENTRY_COLUMNS})  # the copied inputs
# A COUNTIFS criterion every number the workbook holds meets and no text or empty cell does.
ANY_NUMBER = '">-1E+300"'


def ifs_or_zero(fn: str, values: str, criteria: str, numbers: str | None = None) -> str:
    """_xlfn.MINIFS or _xlfn.MAXIFS (`fn`) of `values` where `criteria` hold, and 0 where no
    number of `values` meets them: Excel's documented result, which LibreOffice, IronCalc and
    `formulas` also give, while Gnumeric gives #DIV/0!. `numbers` counts the numbers that meet
    the criteria, where the caller has that count already (or knows every value meeting them is
    a number); by default a COUNTIFS that scans the rows once more. An error in the criteria or
    the values still shows, as it does in Excel."""
    count = numbers if numbers is not None else f"COUNTIFS({values},{ANY_NUMBER},{criteria})"
    return f"IF({count}=0,0,_xlfn.{fn}({values},{criteria}))"


def factor_label(factor: str, level: str) -> str:
    """Formula text naming a factor at a row's or a question's level, `"f("&A1&")"`: how the
    consistency notes and the derivation's missing list name K_len(100), C_model(m)..."""
    return f"\"{factor}(\"&{level}&\")\""


class Formulas:
    """Formula text for every formula cell, keyed the way the builder places them."""

    def __init__(self, layout: Layout, catalog: CatalogLayout | None = None) -> None:
        self.lo = layout
        self.cat = catalog or CatalogLayout(layout.lang, physics_catalog())

    # -- references --------------------------------------------------------
    def raw(self, key: str) -> str:
        """A whole workings column, with its sheet."""
        return self.lo.raw_range(key)

    def name(self, name: str) -> str:
        return self.lo.name_ref(name)

    def ctab(self, key: str) -> str:
        return self.lo.c_table_range(key)

    def ltab(self, key: str) -> str:
        return self.lo.l_table_range(key)

    def mtab(self, key: str) -> str:
        return self.lo.m_table_range(key)

    def ptab(self, key: str) -> str:
        return self.lo.p_table_range(key)

    # -- workings sheet: one row per raw-data row ------------------------------
    def raw_row(self, row: int) -> dict[str, str]:
        """Every formula of workings row `row` (raw_first..raw_last)."""
        lo = self.lo
        t = lo.text
        # The k-th row under the raw-data header, written with ROW() so that every row holds the
        # same relative formula (one shared formula per column in the file).
        position = _row_minus(lo.raw_first - 1)

        def me(key: str) -> str:  # the row's own cell of a workings column, on whichever sheet holds it
            return lo.raw_cell(key, row)

        # present is 0 or 1 in every row, so it is IF's condition itself: IF(present, ...), not
        # IF(present=1, ...), for IronCalc 0.9.1 compares two numbers by printing both to 15 digits
        present = me("present")
        base_level = self.name("BasePromptLevel")
        p_index = me("p_index")
        tol = self.name("MonotonicTolerancePct")
        strict = self.name("StrictPhysics")
        out: dict[str, str] = {}
        # The input columns as ranges, not through their defined names (SCM_In_<key>, the same
        # ranges): IronCalc 0.9.1 looks a defined name up by comparing it, upper-cased, with every
        # name the workbook has, at every use; 25 uses a row cost it more than the copies themselves.
        first_input = lo.entry_range(MIRRORED_KEYS[0])
        at = _row_minus(lo.raw_first - 2)  # the ranges start at the header row
        out["in_range"] = f"=ROWS({first_input})>{position}"
        for key in MIRRORED_KEYS:
            entry = lo.entry_range(key)
            out[key] = (f"=IF({me('in_range')},IF(INDEX({entry},{at})&\"\"=\"\",\"\",INDEX({entry},{at})),"
                        f"\"\")")
        out["has_input"] = "=((" + "&".join(me(key) for key in MIRRORED_KEYS) + ")<>\"\")*1"
        out["unusable_code"] = f"=IF({me('has_input')},{self._unusable_chain(me)},0)"
        messages = (f"{lo.qtitle(lo.raw_sheet('unusable'))}!${lo.messages_col}$2:${lo.messages_col}"
                    f"${1 + len(unusable_tests(lo.lang))}")
        out["unusable"] = f"=IF({me('unusable_code')}>0,INDEX({messages},{me('unusable_code')}),\"\")"
        out.update({
            "present": f"=IF({me('has_input')},IF({me('unusable_code')}=0,({me('total_time_s')}>0)*1,0),0)",
            "tps": f"=IF({present},{me('total_output_tokens')}/{me('total_time_s')},\"\")",
            "ln_tps": f"=IF({present},IF({me('tps')}>0,LN({me('tps')}),\"\"),\"\")",
            "fault": (f"=IF({present},((IF(ISNUMBER({me('failed_requests')}),{me('failed_requests')},0)"
                      f"+IF(ISNUMBER({me('rate_limited_requests')}),{me('rate_limited_requests')},0))>0)*1,\"\")"),
            "eligible": f"=IF({present},({me('fault')}=0)*({me('tps')}>0)*({me('override')}<>\"exclude\"),0)",
            # model|max_tokens|concurrency, and |P<slot> of the prompt level when there are levels
            "cell_key": (f"=IF({present},{me('model')}&\"|\"&{me('max_tokens')}&\"|\"&{me('concurrency')}"
                         f"&IF(ISNUMBER({p_index}),IF({p_index}>0,\"|P\"&{p_index},\"\"),\"\"),\"\")"),
            # The row's model number: its model's place among the models in order of first
            # appearance (the seen-models table beside the cells), so cells sort by number.
            "model_no": (f"=IF({present},IFERROR(MATCH({me('model')},{lo.seen_models_range('name')},0),\"\"),"
                         f"\"\")"),
            "cell_code": (f"=IF(AND(ISNUMBER({me('model_no')}),ISNUMBER({p_index})),(({me('model_no')}"
                          f"*{lo.scale_cell('l_scale')}+{me('max_tokens')})*{lo.scale_cell('p_scale')}+{p_index})"
                          f"*{lo.scale_cell('c_scale')}+{me('concurrency')},\"\")"),
            "lower_max": f"=IF({present},{self.cell_lookup('lower_max', me('cell_code'))},\"\")",
            "mono": (f"=IF({present},({me('lower_max')}>{me('tps')}*(1+{tol}/100+{MONOTONIC_EPSILON!r}))*1,"
                     f"\"\")"),
            "included": (
                f"=IF({present},({me('tps')}>0)*IF({me('override')}=\"include\",1,"
                f"IF({me('override')}=\"exclude\",0,({me('fault')}=0)*({me('mono')}=0)"
                f"*IF({strict}=1,({me('physics')}=0)*1,1))),\"\")"
            ),
            "reason": (
                f"=IF({present},IF({me('tps')}<=0,{q(t('no_output'))},"
                f"IF({me('override')}=\"exclude\",{q(t('manual_exclude'))},"
                f"IF({me('override')}=\"include\",{q(t('manual_include'))},"
                f"IF({me('fault')}=1,{q(t('fault'))},"
                f"IF({me('mono')}=1,{q(t('mono'))},"
                f"IF(({strict}=1)*({me('physics')}>0)=1,{q(t('physics'))},\"\")))))),\"\")"
            ),
            "c_included": f"=IF({me('included')}=1,{me('concurrency')},\"\")",
            "l_included": f"=IF({me('included')}=1,{me('max_tokens')},\"\")",
            "m_included": f"=IF({me('included')}=1,{me('model')}&\"\",\"\")",
            "position": f"={position}",
            "f_known": (f"=IF({present},SUMIFS({self.ctab('known')},{self.ctab('level')},{me('concurrency')}),"
                        f"\"\")"),
            # the prompt level (a blank one is the base level), its slot in the K_in table
            "p_level": (f"=IF({present},IF(ISNUMBER({me('prompt_level')}),{me('prompt_level')},"
                        f"IF(ISNUMBER({base_level}),{base_level},\"\")),\"\")"),
            "p_index": (f"=IF({present},IF(ISNUMBER({me('p_level')}),IFERROR(MATCH({me('p_level')},"
                        f"{self.ptab('level')},0),\"\"),0),\"\")"),
            "at_p0": (f"=IF({present},IF(ISNUMBER({me('p_level')}),({me('p_level')}={base_level})*1,1),"
                      f"\"\")"),
            "p0_included": f"=IF({present},({me('included')}=1)*({me('at_p0')}=1),0)",
        })
        out.update(self._physics_row(me))
        return out

    def _unusable_chain(self, me: Callable[[str], str]) -> str:
        """The number of the first failing `unusable_tests` test of a typed row (0: usable)."""
        chain = "0"
        tests = unusable_tests(self.lo.lang)
        for code in range(len(tests), 0, -1):
            key, kind, _ = tests[code - 1]
            cell = me(key)
            condition = f"{cell}=\"\"" if kind == "blank" else f"ISTEXT({cell})"
            if kind == "text" and key not in REQUIRED_INPUT_KEYS:
                condition = f"AND({cell}<>\"\",ISTEXT({cell}))"
            chain = f"IF({condition},{code},{chain})"
        return chain

    def _physics_row(self, me: Callable[[str], str]) -> dict[str, str]:
        t = self.lo.text
        cat = self.cat
        present = me("present")
        eps = repr(MONOTONIC_EPSILON)
        conc, length, model = me("concurrency"), me("max_tokens"), me("model")

        def mfield(name: str) -> str:
            return f"SUMIFS({cat.model(name)},{cat.model('id')},{me('model_id')})"

        def gfield(name: str) -> str:
            return f"SUMIFS({cat.gpu(name)},{cat.gpu('id')},{me('gpu_id')})"

        both = f"({me('model_id')}>0)*({me('gpu_id')}>0)"
        prompt = f"IF(ISNUMBER({me('prompt_tokens')}),{me('prompt_tokens')},0)"
        flags = [me("short_output"), me("superlinear"), me("over_ceiling"), me("kv_over")]
        pieces = [
            text_with(t("short_output"), tokens=me("total_output_tokens"),
                      expected=f"({length}*{me('total_requests')})"),
            text_with(t("superlinear"), c0=me("group_low_c")),
            text_with(t("over_ceiling"), ceiling=f"ROUND(IF(ISNUMBER({me('ceiling')}),{me('ceiling')},0),0)"),
            text_with(t("kv_over"), c=conc),
        ]
        # one cell: each warning's sentence where its flag is up, joined by "; " (a column per
        # sentence would be 11,000 more text cells per 10,000 rows in every save and recalculation)
        text = []
        for i, (flag, piece) in enumerate(zip(flags, pieces)):
            if i:
                earlier = "+".join(flags[:i])
                text.append(f"IF(({earlier})*{flag}>0,\"; \",\"\")")
            text.append(f"IF({flag}=1,{piece},\"\")")
        return {
            "model_id": (f"=IF({present},SUMIFS({cat.model_alias('id')},{cat.model_alias('alias')},{model}),"
                         f"\"\")"),
            "gpu_id": (
                f"=IF({present},IF({me('gpu')}=\"\",0,SUMIFS({cat.gpu_alias('id')},{cat.gpu_alias('alias')},"
                f"{me('gpu')})),\"\")"
            ),
            "short_output": (
                f"=IF({present},({me('total_output_tokens')}<{self.name('ShortOutputRatio')}*{length}"
                f"*{me('total_requests')})*1,0)"
            ),
            "group_low_c": f"=IF({present},{self.cell_lookup('group_low_c', me('cell_code'))},\"\")",
            "superlinear": (
                f"=IF({present},IF({me('group_low_c')}>0,IF({conc}>{me('group_low_c')},"
                f"({me('tps')}/{self.cell_lookup('group_base', me('cell_code'))}>{conc}/{me('group_low_c')}"
                f"*(1+{SUPERLINEAR_TOLERANCE!r}))*1,0),0),0)"
            ),
            "ceiling": (
                f"=IF({present},IF({both}=1,{gfield('memory_bandwidth')}/{mfield('phys_read_bytes')},"
                f"\"\"),\"\")"
            ),
            "over_ceiling": (
                f"=IF({present},IF(ISNUMBER({me('ceiling')}),({me('tps')}/{conc}>{me('ceiling')}*(1+{eps}))*1,0),0)"
            ),
            "kv_over": (
                f"=IF({present},IF({both}=1,(({mfield('phys_weight_bytes')}+{conc}"
                f"*{mfield('phys_kv_bytes_per_token')}*({prompt}+{length}))>{gfield('memory_bytes')})*1,0),0)"
            ),
            "physics": f"=IF({present},{'+'.join(flags)},\"\")",
            "physics_text": f"=IF({present}," + "&".join(text) + ",\"\")",
        }

    @staticmethod
    def count_flagged(flag: str, criteria: str) -> str:
        """How many rows meet `criteria`, which hold `flag` = 1 (`flag`: a range of 0/1, such as
        `raw("included")`): the sum of `flag` over them. Not COUNTIFS, which IronCalc 0.9.1 makes
        measure the whole sheet its ranges lie on at every call (a millisecond a call on a
        10,000-row workings sheet)."""
        if f"{flag},1" not in criteria:
            raise ValueError(f"the criteria must hold {flag} = 1 to be counted by its sum")
        return f"SUMIFS({flag},{criteria})"

    def cell_lookup(self, key: str, cell_code: str) -> str:
        """A cells-sheet figure for a row's cell, found by its numeric code (0 when the row has no
        code or its cell no slot)."""
        found = f"SUMIFS({self.lo.cells_range(key)},{self.lo.cells_range('code')},{cell_code})"
        return f"IF(ISNUMBER({cell_code}),{found},0)"

    # -- cells sheet: one row per (model, max_tokens, concurrency) slot ---------
    def cells_row(self, row: int) -> dict[str, str]:
        lo = self.lo
        raw = self.raw

        def me(key: str) -> str:
            return f"${lo.table_col(CELLS_TABLE_REF, key)}{row}"

        def c(key: str) -> str:
            return lo.cells_range(key, sheet=False)

        def before(key: str) -> str:
            return f"${lo.table_col(CELLS_TABLE_REF, key)}{row - 1}"

        has = f"{me('key')}<>\"\""
        number = me("model_no")
        # rows are matched to their slot by the numeric cell code, not the text key: the same rows
        # (the code is the key, numbered), and a number criterion costs an engine a fraction of a
        # text one (which it reads case-blind, with wildcards)
        codes, code = raw("cell_code"), me("code")
        eligible = f"{codes},{code},{raw('eligible')},1"
        group = (f"{c('model')},{me('model')},{c('max_tokens')},{me('max_tokens')},{c('p_index')},{me('p_index')},"
                 f"{c('eligible')},\">0\"")
        lower = f"{group},{c('concurrency')},\"<\"&{me('concurrency')}"  # the same group's lower levels
        if row == lo.cells_first:  # the smallest code
            order = {"code": f"=IF(COUNT({codes})>0,MIN({codes}),\"\")"}
        else:  # the smallest code above the slot before
            above = before("code")
            order = {"code": (f"=IF(ISNUMBER({above}),IF(MAX({codes})>{above},"
                              f"_xlfn.MINIFS({codes},{codes},\">\"&{above}),\"\"),\"\")")}
        l_scale, c_scale = lo.scale_cell("l_scale"), lo.scale_cell("c_scale")
        p_scale = lo.scale_cell("p_scale")
        p_index = me("p_index")
        order.update({
            "model_no": f"=IF(ISNUMBER({code}),INT({code}/({l_scale}*{p_scale}*{c_scale})),\"\")",
            "max_tokens": f"=IF(ISNUMBER({code}),MOD(INT({code}/({p_scale}*{c_scale})),{l_scale}),\"\")",
            "p_index": f"=IF(ISNUMBER({code}),MOD(INT({code}/{c_scale}),{p_scale}),\"\")",
            "concurrency": f"=IF(ISNUMBER({code}),MOD({code},{c_scale}),\"\")",
        })
        return {
            **order,
            "model": f"=IF(ISNUMBER({number}),INDEX({lo.seen_models_range('name')},{number})&\"\",\"\")",
            "prompt_level": (f"=IF(ISNUMBER({p_index}),IF({p_index}>0,INDEX({self.ptab('level')},{p_index}),\"\"),"
                             f"\"\")"),
            "key": (f"=IF(ISNUMBER({number}),{me('model')}&\"|\"&{me('max_tokens')}&\"|\"&{me('concurrency')}"
                    f"&IF({p_index}>0,\"|P\"&{p_index},\"\"),\"\")"),
            "first_row": f"=IF(ISNUMBER({number}),MATCH({code},{codes},0),\"\")",
            # counted as sums of 0/1 columns (a row with a code is present; eligible is 0 or 1), not
            # by COUNTIF(S): IronCalc 0.9.1 measures the whole sheet of a COUNTIF's range at every call
            "rows": f"=IF({has},SUMIFS({raw('present')},{codes},{code}),\"\")",
            "eligible": f"=IF({has},SUMIFS({raw('eligible')},{codes},{code}),\"\")",
            # an eligible row's tps is a number (eligible means tps > 0): the eligible count guards
            "max_tps": f"=IF({has},{ifs_or_zero('MAXIFS', raw('tps'), eligible, me('eligible'))},\"\")",
            "mean_ln": f"=IF({has},IF({me('eligible')}>0,AVERAGEIFS({raw('ln_tps')},{eligible}),\"\"),\"\")",
            "lower_max": f"=IF({has},{ifs_or_zero('MAXIFS', c('max_tps'), lower)},\"\")",
            "group_low_c": f"=IF({has},{ifs_or_zero('MINIFS', c('concurrency'), group)},\"\")",
            "group_base": (
                f"=IF({has},IF({me('group_low_c')}>0,EXP(SUMIFS({c('mean_ln')},{c('model')},{me('model')},"
                f"{c('max_tokens')},{me('max_tokens')},{c('p_index')},{me('p_index')},{c('concurrency')},"
                f"{me('group_low_c')})),\"\"),\"\")"
            ),
        }

    # -- the calibration and cells sheets' model lists -------------------------
    def new_model_criteria(self, flag: str, first: int, row: int, name_col: str) -> str:
        """The criteria of the rows with `flag` = 1 whose model is none of the names above `row` in
        column `name_col`. Model names cannot hold wildcards or start with an operator (results.py
        refuses them), so "<>"&name is literal."""
        others = "".join(f",{self.raw('model')},\"<>\"&${name_col}${above}" for above in range(first, row))
        return f"{flag},1{others}"

    def first_row_of_new_model(self, flag: str, first: int, row: int, name_col: str) -> str:
        """The position of the first row meeting `new_model_criteria` (0 when there is none).
        Every row has a position, so counting the matches guards MINIFS (`ifs_or_zero`); no pair is
        added to the criteria, which may already be MINIFS's 127."""
        criteria = self.new_model_criteria(flag, first, row, name_col)
        return ifs_or_zero("MINIFS", self.raw("position"), criteria, self.count_flagged(flag, criteria))

    def scales(self) -> dict[str, str]:
        """The cell code's scales: one more than the largest max_tokens and concurrency of the rows,
        and one more than the number of prompt levels (1 with none)."""
        present = f"{self.raw('present')},1"
        return {"l_scale": f"={ifs_or_zero('MAXIFS', self.raw('max_tokens'), present)}+1",
                "c_scale": f"={ifs_or_zero('MAXIFS', self.raw('concurrency'), present)}+1",
                "p_scale": f"=COUNT({self.ptab('level')})+1"}

    def seen_model_row(self, row: int) -> dict[str, str]:
        """One slot of the seen-models table: the k-th model in order of first appearance."""
        lo = self.lo
        first = lo.seen_models_col("first")
        return {
            "first": "=" + self.first_row_of_new_model(self.raw("present"), lo.cells_first, row,
                                                        lo.seen_models_col("name")),
            "name": f"=IF(${first}{row}>0,INDEX({self.raw('model')},${first}{row})&\"\",\"\")",
        }


def _row_minus(offset: int) -> str:
    """ROW() less `offset`, as formula text: the same text in every row of a filled-down column."""
    return "ROW()" if offset == 0 else f"(ROW()-{offset})" if offset > 0 else f"(ROW()+{-offset})"


__all__ = ["Formulas", "q", "text_with"]

