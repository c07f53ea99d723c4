"""The latency-model sheet: scm_xl.latency's fit of one model as live formulas.

    latency = TTFT + (L_out - 1) x ITL,   TPS = efficiency x n x L_out / latency,   n = min(c, K)

Long because the sheet's layout, its formulas and its expected values are one unit (as on the
least-squares sheet): each formula sits next to the reference value it must equal.

The knee K is the one cell that is not a formula of the data: `scm-xl fill` profiles it
(`latency.fit_model`) and writes it into the "fitted" cell; a person may type another K (or 0
for none) into the hand-set cell and every coefficient, forecast and ratio follows. The fitted
model is the base model unless another is typed.

Per raw row, one ordinary formula per column reads the workings sheet by position: `used`
(fault-free output, not excluded by hand, TTFT, latency and ITL recorded, the sheet's model),
the served batch n, the prompt P and output L_out, the ITL weight w = 1/ITL, the context columns
zd, ze (divided by ITL and by their scales) and their products with w, the fitted ITL, the TTFT
design's four columns (rows at or below the knee), the fitted served TTFT and latency, Little's
ratio, the queue share above the knee and the P95 ratios. The ITL's decode step is one
coefficient per knot: the served batches measured, listed by a MINIFS recurrence (one slot per
concurrency slot of the layout); a row's step column is the indicator of its knot, so the
normal-equation entries are SUMIFS over the rows at that knot. A = z'z (+1 on the diagonal of a
term the data leave out, or an unused knot slot: its coefficient is then exactly 0), b = z'1,
M = MINVERSE(A) and beta = M b / scale sit beside the coefficients, one block for ITL
(knot slots + 2) and one for TTFT (4 x 4). Medians are single-cell MEDIAN(IF(...)) array formulas.
With fewer than latency.MIN_ROWS used rows (one experiment), or fewer TTFT rows than TTFT terms
(a typed knee below most rows), neither fit is solved, as `latency.fit_model` fits none: the
coefficients, fitted columns and forecast stay blank.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np
from openpyxl.utils import get_column_letter
from openpyxl.worksheet.formula import ArrayFormula
from openpyxl.worksheet.worksheet import Worksheet

from scm_xl import latency
from scm_xl.engines.base import CellValue
from scm_xl.model import Analysis, same_model
from scm_xl.workbook.layout import Layout
from scm_xl.workbook.sheet import Building, Checking, SheetSpec

if TYPE_CHECKING:
    from scm_xl.workbook.stamp import PendingFills

SHEET_TITLES: dict[str, str] = {"zh": "延迟模型", "en": "LatencyModel"}

SETTING_ROWS = {"model": 5, "knee": 6}
SUMMARY_KEYS = ("used", "prompt_varied", "output_varied", "knots", "busy", "n_max", "p_min", "p_max", "l_min", "l_max",
                "c_min", "c_max", "step_max", "itl_ok", "ttft_ok", "efficiency", "output_ratio", "queue_share",
                "ttft_p95_ratio", "latency_p95_ratio")
SUMMARY_FIRST = 9
SUMMARY_ROWS = {key: SUMMARY_FIRST + i for i, key in enumerate(SUMMARY_KEYS)}
COEF_HEADER = SUMMARY_FIRST + len(SUMMARY_KEYS) + 2
TTFT_TERMS = latency.TTFT_TERMS
FORWARD_INPUTS = ("concurrency", "max_tokens", "prompt_tokens")
FORWARD_OUTPUTS = ("n", "output", "itl", "ttft_served", "latency_served", "wait", "ttft", "latency", "tps",
                   "ttft_p95", "latency_p95", "beyond_knee")
ROW_KEYS = ("exp_id", "used", "n", "prompt", "output", "w", "w2", "zd", "ze", "wzd", "wze", "itl_hat", "ttft_row",
            *(f"y{j}" for j in range(1, len(TTFT_TERMS) + 1)), "ttft_hat", "latency_hat", "little", "queue", "share",
            "ttft_ratio", "latency_ratio")
ROW_COLS = {key: get_column_letter(1 + i) for i, key in enumerate(ROW_KEYS)}
KNOT_COL = "E"  # the knot (served batch) of each step row
A_COL = 7  # the normal equations start in G: A (p x p), its index 1..p, b, M (p x p)

TEXTS: dict[str, dict[str, str]] = {
    "en": {
        "title": "Latency model: latency = TTFT + (L_out − 1) × ITL; TPS = efficiency × n × L_out ÷ latency, n = min(c, K)",
        "note": ("ITL = step(n) + d·n·(P + L_out/2) + e·n·P/L_out, step(n) one per measured batch, linear between;  TTFT = t0 + s·ITL + b·ITL·min(1, n − 1) + p·P + q·n·P;  each a "
                 "least-squares fit weighted to relative error (normal equations, MINVERSE). Above the knee K "
                 "requests wait: wait = queue share × latency_K × W, W = c/K − 1 in a steady state, less over a run of N "
                 "requests (the per-row column W)."),
        "knee_note": ("K: typed in B (0 = no knee), else the knee scm-xl fill fitted (D; a profile over whole "
                      "slot counts with an F test; run fill --workbook again after editing the data)."),
        "model": "model fitted (blank: the base model)", "knee": "knee K (slots)", "fitted": "fitted by scm-xl fill",
        "input": "hand-set", "effective": "effective",
        "used": "rows used", "prompt_varied": "prompt length varied (1/0)", "output_varied": "output length varied (1/0)",
        "knots": "measured batches (knots)", "knot": "batch n",
        "busy": "waited-out step identified (1/0: rows at c = 1 and two batches from 2)",
        "n_max": "largest served batch", "p_min": "shortest prompt (tokens)", "p_max": "longest prompt (tokens)",
        "l_min": "shortest output (tokens)", "l_max": "longest output (tokens)", "c_min": "lowest concurrency",
        "c_max": "highest concurrency", "step_max": "largest fitted ITL (s)",
        "itl_ok": f"ITL fit solved (1/0; 0 below {latency.MIN_ROWS} rows or too few TTFT rows)",
        "ttft_ok": "TTFT fit solved (1/0)", "efficiency": "efficiency (median measured TPS / Little's law)",
        "output_ratio": "output ratio (median L_out / max_tokens)",
        "queue_share": "queue share (measured / the run's expected wait above K)",
        "ttft_p95_ratio": "P95 / mean TTFT (median)", "latency_p95_ratio": "P95 / mean latency (median)",
        "term": "term", "value": "value", "meaning": "meaning", "scale": "scale",
        "concurrency": "forward: concurrency", "max_tokens": "forward: max_tokens",
        "prompt_tokens": "forward: prompt tokens (blank: the shortest measured)",
        "n": "served batch n", "output": "mean output tokens L_out", "itl": "ITL (s)",
        "ttft_served": "TTFT when served at once (s)", "latency_served": "latency when served at once (s)",
        "wait": "wait for a slot (s)", "ttft": "TTFT (s)", "latency": "latency (s)", "tps": "TPS (tok/s)",
        "ttft_p95": "P95 TTFT (s)", "latency_p95": "P95 latency (s)", "beyond_knee": "beyond the knee (1/0)",
        "rows_title": "Per row (the raw-data sheet's rows, by position)",
        "a_title": "normal equations: A = z'z, b = z'1, M = A^-1 (ITL rows, then TTFT rows)",
    },
    "zh": {
        "title": "延迟模型：延迟 = 首字时间 + (L_out − 1) × 字间隔；TPS = 效率 × n × L_out ÷ 延迟，n = min(c, K)",
        "note": ("字间隔 ITL = step(n) + d·n·(P + L_out/2) + e·n·P/L_out（step 按实测批量各一个，之间线性）；首字 TTFT = t0 + s·ITL + b·ITL·min(1, n − 1) + p·P + q·n·P；"
                 "各为按相对误差加权的最小二乘（正规方程，MINVERSE）。拐点 K 以上请求排队：等待 = 排队比例 × 延迟_K × W，稳态 W = c/K − 1，N 个请求的实测运行更少（逐行 W 列）。"),
        "knee_note": "K：B列手填（0 = 无拐点），否则为 scm-xl fill 拟合的拐点（D列；按整数槽位剖面并做F检验；改动数据后请再运行 fill --workbook）。",
        "model": "拟合的模型（留空 = 基准模型）", "knee": "拐点 K（槽位）", "fitted": "scm-xl fill 拟合值",
        "input": "手工输入", "effective": "生效值",
        "used": "使用的行数", "prompt_varied": "提示长度有变化（1/0）", "output_varied": "输出长度有变化（1/0）",
        "knots": "实测批量档位数", "knot": "批量 n",
        "busy": "可识别等待中的步（1/0：有 c = 1 且有两个 ≥2 的批量）",
        "n_max": "最大服务批量", "p_min": "最短提示（Token）", "p_max": "最长提示（Token）",
        "l_min": "最短输出（Token）", "l_max": "最长输出（Token）", "c_min": "最低并发", "c_max": "最高并发",
        "step_max": "最大拟合字间隔（秒）", "itl_ok": f"字间隔拟合可解（1/0；少于 {latency.MIN_ROWS} 行或首字行不足时为 0）",
        "ttft_ok": "首字拟合可解（1/0）",
        "efficiency": "效率（实测TPS / 利特尔定律，中位数）", "output_ratio": "输出比例（L_out / max_tokens 中位数）",
        "queue_share": "排队比例（K以上实测等待 / 该次运行的预期等待）",
        "ttft_p95_ratio": "首字 P95 / 均值（中位数）", "latency_p95_ratio": "延迟 P95 / 均值（中位数）",
        "term": "项", "value": "值", "meaning": "含义", "scale": "尺度",
        "concurrency": "正向：并发", "max_tokens": "正向：max_tokens", "prompt_tokens": "正向：提示Token（留空 = 最短实测）",
        "n": "服务批量 n", "output": "平均输出Token L_out", "itl": "字间隔（秒）",
        "ttft_served": "立即服务的首字时间（秒）", "latency_served": "立即服务的延迟（秒）",
        "wait": "等待槽位（秒）", "ttft": "首字时间（秒）", "latency": "延迟（秒）", "tps": "TPS（tok/s）",
        "ttft_p95": "首字 P95（秒）", "latency_p95": "延迟 P95（秒）", "beyond_knee": "超过拐点（1/0）",
        "rows_title": "逐行（按位置对应原始数据表的行）",
        "a_title": "正规方程：A = z'z，b = z'1，M = A^-1（先字间隔，后首字）",
    },
}
ROW_HEADERS = {"exp_id": "exp_id", "used": "used", "n": "n", "prompt": "P", "output": "L_out",
               "w": "w = 1/ITL", "w2": "w²", "zd": "zd (ITL)", "ze": "ze", "wzd": "w·zd", "wze": "w·ze",
               "itl_hat": "ITL fitted",
               "ttft_row": "TTFT row", "y1": "y1 (TTFT)", "y2": "y2", "y3": "y3", "y4": "y4", "y5": "y5",
               "ttft_hat": "TTFT served", "latency_hat": "latency served", "little": "Little ratio",
               "queue": "W (wait, service times)", "share": "queue share", "ttft_ratio": "P95/TTFT", "latency_ratio": "P95/latency"}


@functools.lru_cache(maxsize=32)
def _coef_rows(ll: LatencyLayout) -> Mapping[str, int]:
    """The coefficient rows by name, worked out once per layout (every formula that reads a
    coefficient asks), read-only."""
    names = ll.itl_names() + list(TTFT_TERMS)
    return MappingProxyType({name: COEF_HEADER + 1 + i for i, name in enumerate(names)})


@dataclass(frozen=True)
class LatencyLayout:
    """Where things are: the ITL block has one step row per knot slot (the layout's concurrency
    slots) and the terms d and e; the TTFT block four rows; then the forward block and the rows."""

    layout: Layout

    @property
    def title(self) -> str:
        return SHEET_TITLES[self.layout.lang]

    @property
    def knot_slots(self) -> int:
        return self.layout.c_slots

    def itl_names(self) -> list[str]:
        return [f"step{k + 1}" for k in range(self.knot_slots)] + ["d", "e"]

    @property
    def coef_rows(self) -> Mapping[str, int]:
        return _coef_rows(self)

    def block(self, block: str) -> tuple[int, int]:
        """(first row, size) of the ITL or TTFT block."""
        rows = self.coef_rows
        return (rows["step1"], self.knot_slots + 2) if block == "itl" else (rows["t0"], len(TTFT_TERMS))

    @property
    def forward_rows(self) -> dict[str, int]:
        first = self.coef_rows["q"] + 3
        return {key: first + i for i, key in enumerate(FORWARD_INPUTS + FORWARD_OUTPUTS)}

    @property
    def row_header(self) -> int:
        return self.forward_rows["beyond_knee"] + 3

    @property
    def row_first(self) -> int:
        return self.row_header + 1

    @property
    def row_last(self) -> int:
        return self.row_first + self.layout.rows - 1

    @property
    def offset(self) -> int:
        return self.layout.raw_first - self.row_first  # the workings row of each per-row row

    def rows(self, key: str) -> str:
        col = ROW_COLS[key]
        return f"${col}${self.row_first}:${col}${self.row_last}"

    def calc(self, key: str) -> str:
        return self.layout.raw_range(key)

    def coef(self, name: str) -> str:
        return f"$B${self.coef_rows[name]}"

    def scale(self, name: str) -> str:
        return f"$D${self.coef_rows[name]}"

    def knot(self, k: int) -> str:
        return f"${KNOT_COL}${self.coef_rows[f'step{k + 1}']}"

    @property
    def knots(self) -> str:
        first = self.coef_rows["step1"]
        return f"${KNOT_COL}${first}:${KNOT_COL}${first + self.knot_slots - 1}"

    @property
    def steps(self) -> str:
        first = self.coef_rows["step1"]
        return f"$B${first}:$B${first + self.knot_slots - 1}"

    def a(self, block: str) -> str:
        first, size = self.block(block)
        return f"${get_column_letter(A_COL)}${first}:${get_column_letter(A_COL + size - 1)}${first + size - 1}"

    def index_col(self, block: str) -> str:
        return get_column_letter(A_COL + self.block(block)[1])

    def b_col(self, block: str) -> str:
        return get_column_letter(A_COL + self.block(block)[1] + 1)

    def m_first_col(self, block: str) -> int:
        return A_COL + self.block(block)[1] + 3

    def m(self, block: str) -> str:
        first, size = self.block(block)
        col = self.m_first_col(block)
        return f"${get_column_letter(col)}${first}:${get_column_letter(col + size - 1)}${first + size - 1}"

    def b(self, block: str) -> str:
        first, size = self.block(block)
        col = self.b_col(block)
        return f"${col}${first}:${col}${first + size - 1}"

    def index(self, block: str) -> str:
        first, size = self.block(block)
        col = self.index_col(block)
        return f"${col}${first}:${col}${first + size - 1}"

    def defined_names(self) -> dict[str, str]:
        f = self.forward_rows
        return {"LatencyKnee": f"C{SETTING_ROWS['knee']}", "LatencyForwardTPS": f"B{f['tps']}",
                "LatencyForwardTTFT": f"B{f['ttft']}"}


def _s(key: str) -> str:
    return f"$B${SUMMARY_ROWS[key]}"


KNEE = f"$C${SETTING_ROWS['knee']}"
MODEL = f"$C${SETTING_ROWS['model']}"
HAS_KNEE = f"ISNUMBER({KNEE})"


def _served(c: str) -> str:
    return f"IF({HAS_KNEE},MIN({c},{KNEE}),{c})"


def _context(ll: LatencyLayout, n: str, p: str, out: str) -> str:
    """The ITL's context terms at (n, P, L_out): d and e are 0 where the data leave them out."""
    return f"{ll.coef('d')}*{n}*({p}+{out}/2)+{ll.coef('e')}*{n}*{p}/{out}"


def _busy(n: str) -> str:
    """latency.busy_share: 0 at n = 1, 1 from n = 2."""
    return f"MIN(1,MAX(0,{n}-1))"


def _ttft_value(ll: LatencyLayout, n: str, p: str, step: str) -> str:
    return (f"({ll.coef('t0')}+{ll.coef('s')}*{step}+{ll.coef('b')}*{step}*{_busy(n)}+{ll.coef('p')}*{p}"
            f"+{ll.coef('q')}*{n}*{p})")


def _finite_wait(c: str, requests: str) -> str:
    """latency.finite_wait: W(c, K, N) over a run of N requests (the steady state c/K - 1 where N is
    not a positive number), 0 at or below the knee; F(M) = k a (a - 1)/2 + b a, M = a k + b, k = INT(K)."""
    k = f"MAX(1,INT({KNEE}))"

    def rounds(m: str) -> str:
        a = f"INT(({m})/{k})"
        return f"({k}*{a}*({a}-1)/2+MOD({m},{k})*{a})"

    finite = (f"IF({requests}<=ROUND({c},0),{rounds(requests)}/{requests},"
              f"({rounds(requests)}-{rounds(f'{requests}-ROUND({c},0)')}-({requests}-ROUND({c},0)))/{requests})")
    return (f"IF(AND({HAS_KNEE},{c}>{KNEE}),IF(ISNUMBER({requests}),IF({requests}>0,{finite},{c}/{KNEE}-1),"
            f"{c}/{KNEE}-1),0)")


def _step_between(ll: LatencyLayout, n: str) -> str:
    """step(n) blended between the knots around n (along the end segment outside them), as
    latency.Terms.weights: lower knot L = the number of knots below n, clamped to 1..m-1."""
    m = f"COUNT({ll.knots})"
    lower = f"MAX(1,MIN({m}-1,COUNTIFS({ll.knots},\"<\"&{n})))"
    lo, hi = f"INDEX({ll.knots},{lower})", f"INDEX({ll.knots},{lower}+1)"
    w = f"(({n}-{lo})/({hi}-{lo}))"
    return (f"IF({m}=1,INDEX({ll.steps},1),(1-{w})*INDEX({ll.steps},{lower})+{w}*INDEX({ll.steps},{lower}+1))")



def _positive(value: str) -> str:
    """1 when `value` is a number above 0, else 0 (an ITL, TTFT or latency of 0 is a row the fit
    cannot use: every token came in one chunk, and the fit divides by them)."""
    return f"IF(ISNUMBER({value}),({value}>0)*1,0)"

def row_formulas(ll: LatencyLayout, row: int) -> dict[str, str]:
    lo = ll.layout
    calc = row + ll.offset

    def raw(key: str) -> str:
        return lo.raw_cell(key, calc)

    def me(key: str) -> str:
        return f"${ROW_COLS[key]}{row}"

    used, n, p, out, w = me("used"), me("n"), me("prompt"), me("output"), me("w")
    ttft_in = f"IF(ISNUMBER({raw('ttft_mean_s')}),{raw('ttft_mean_s')},{raw('ttft_p50_s')})"
    latency_in = f"IF(ISNUMBER({raw('latency_mean_s')}),{raw('latency_mean_s')},{raw('latency_p50_s')})"
    itl_in = raw("mean_itl_s")
    good = (f"IF(ISNUMBER({raw('ok_requests')}),IF({raw('ok_requests')}>0,{raw('ok_requests')},"
            f"{raw('total_requests')}),{raw('total_requests')})")
    prompt = (f"IF(ISNUMBER({raw('prompt_tokens')}),{raw('prompt_tokens')},"
              f"IF(ISNUMBER({raw('prompt_level')}),{raw('prompt_level')},0))")
    used_text = (f"=IF({raw('present')},(({raw('fault')}=0)*({raw('total_output_tokens')}>0)"
                 f"*({raw('override')}<>\"exclude\")*{_positive(itl_in)}*{_positive(ttft_in)}*{_positive(latency_in)}"
                 f"*({raw('model')}&\"\"={MODEL}))*1,0)")
    pv, batch = _s("prompt_varied"), f"({_s('knots')}>=2)"
    ttft_features = ("1", f"{batch}*{me('itl_hat')}", f"{_s('busy')}*{me('itl_hat')}*{_busy(n)}", f"{pv}*{p}",
                     f"{batch}*{pv}*{raw('concurrency')}*{p}")
    itl_hat, ttft_hat, lat_hat, queue = me("itl_hat"), me("ttft_hat"), me("latency_hat"), me("queue")
    wait = f"IF(ISNUMBER({queue}),{_s('queue_share')}*{lat_hat}*{queue},0)"
    out_map = {
        "exp_id": f"=IF({raw('present')},{raw('exp_id')}&\"\",\"\")",
        "used": used_text,
        "n": f"=IF({used}=1,{_served(raw('concurrency'))},\"\")",
        "prompt": f"=IF({used}=1,{prompt},\"\")",
        "output": f"=IF({used}=1,{raw('total_output_tokens')}/{good},\"\")",
        "w": f"=IF({used}=1,1/{itl_in},0)",
        "w2": f"={w}*{w}",
        "zd": f"=IF({used}=1,{n}*({p}+{out}/2)/{ll.scale('d')}*{w},0)",
        "ze": f"=IF({used}=1,{n}*{p}/{out}/{ll.scale('e')}*{w},0)",
        "wzd": f"={w}*{me('zd')}",
        "wze": f"={w}*{me('ze')}",
        "itl_hat": (f"=IF(AND({used}=1,{_s('itl_ok')}=1),IFERROR(INDEX({ll.steps},MATCH({n},{ll.knots},0))"
                    f"+{_context(ll, n, p, out)},\"\"),\"\")"),
        "ttft_row": (f"=IF({used}=1,IF({HAS_KNEE},({raw('concurrency')}<={KNEE})*1,1),0)"),
        "ttft_hat": f"=IF(ISNUMBER({itl_hat}),{_ttft_value(ll, n, p, itl_hat)},\"\")",
        "latency_hat": f"=IF(ISNUMBER({ttft_hat}),{ttft_hat}+({out}-1)*{itl_hat},\"\")",
        "little": f"=IF({used}=1,{raw('tps')}*{latency_in}/({raw('concurrency')}*{out}),\"\")",
        "queue": f"=IF({used}=1,{_finite_wait(raw('concurrency'), raw('total_requests'))},\"\")",
        "share": (f"=IF(AND({used}=1,{HAS_KNEE}),IF(ISNUMBER({lat_hat}),IF(AND({raw('concurrency')}>{KNEE},"
                  f"{lat_hat}>0,{queue}>0),({ttft_in}-{ttft_hat})/({lat_hat}*{queue}),\"\"),\"\"),\"\")"),
        "ttft_ratio": (f"=IF(AND(ISNUMBER({ttft_hat}),ISNUMBER({raw('ttft_p95_s')})),IF({ttft_hat}+{wait}>0,"
                       f"{raw('ttft_p95_s')}/({ttft_hat}+{wait}),\"\"),\"\")"),
        "latency_ratio": (f"=IF(AND(ISNUMBER({lat_hat}),ISNUMBER({raw('latency_p95_s')})),IF({lat_hat}+{wait}>0,"
                          f"{raw('latency_p95_s')}/({lat_hat}+{wait}),\"\"),\"\")"),
    }
    for j, (text, name) in enumerate(zip(ttft_features, TTFT_TERMS), start=1):
        out_map[f"y{j}"] = (f"=IF({me('ttft_row')}=1,IF(ISNUMBER({itl_hat}),{text}/{ll.scale(name)}/{ttft_in},0),0)")
    return out_map


def summary_formulas(ll: LatencyLayout) -> dict[str, str]:
    used, n, p, out = ll.rows("used"), ll.rows("n"), ll.rows("prompt"), ll.rows("output")
    conc = ll.calc("concurrency")
    any_used = f"{_s('used')}>0"
    ratio = repr(latency.PROMPT_LEVEL_RATIO)

    def over(fn: str, rng: str) -> str:
        return f"=IF({any_used},_xlfn.{fn}({rng},{used},1),\"\")"

    def median(rng: str) -> str:  # IronCalc: no ISNUMBER over a range inside an array formula
        return f"=IF(COUNT({rng})>0,MEDIAN(IF({rng}<>\"\",{rng},\"\")),\"\")"

    return {
        "used": f"=COUNTIFS({used},1)",
        "prompt_varied": f"=IF({any_used},({_s('p_max')}>{_s('p_min')}*{ratio})*1,0)",
        "output_varied": f"=IF({any_used},({_s('l_max')}>{_s('l_min')}*{ratio})*1,0)",
        "knots": f"=COUNT({ll.knots})",
        "busy": _busy_identified(ll),
        "n_max": over("MAXIFS", n),
        "p_min": over("MINIFS", p), "p_max": over("MAXIFS", p),
        "l_min": over("MINIFS", out), "l_max": over("MAXIFS", out),
        "c_min": over("MINIFS", conc), "c_max": over("MAXIFS", conc),
        "step_max": f"=IF(COUNT({ll.rows('itl_hat')})>0,_xlfn.MAXIFS({ll.rows('itl_hat')},{used},1),\"\")",
        "itl_ok": _solved(ll, "itl"),
        "ttft_ok": _solved(ll, "ttft"),
        "efficiency": median(ll.rows("little")),
        "output_ratio": (f"=IF({any_used},MIN(1,MEDIAN(IF({used}=1,{out}/{ll.calc('max_tokens')},\"\"))),\"\")"),
        "queue_share": (f"=IF(COUNT({ll.rows('share')})>0,MAX(0,MEDIAN(IF({ll.rows('share')}<>\"\","
                        f"{ll.rows('share')},\"\"))),1)"),
        "ttft_p95_ratio": median(ll.rows("ttft_ratio")),
        "latency_p95_ratio": median(ll.rows("latency_ratio")),
    }


def _busy_identified(ll: LatencyLayout) -> str:
    """latency.busy_identified over the TTFT rows, with two knots or more: a row at batch 1 and two
    different batches from 2 up (nested IFs: MINIFS over no match is an error in some engines)."""
    used, n, row = ll.rows("used"), ll.rows("n"), ll.rows("ttft_row")
    two_up = f"{used},1,{row},1,{n},\">=2\""
    return (f"=IF({_s('knots')}>=2,IF(COUNTIFS({used},1,{row},1,{n},1)>0,IF(COUNTIFS({two_up})>0,"
            f"IF(_xlfn.MINIFS({n},{two_up})<_xlfn.MAXIFS({n},{two_up}),1,0),0),0),0)")


ARRAY_SUMMARY = ("itl_ok", "ttft_ok", "efficiency", "output_ratio", "queue_share", "ttft_p95_ratio",
                 "latency_p95_ratio")


def _solved(ll: LatencyLayout, block: str) -> str:
    """1 when A is invertible: max |A A^-1 - I| < 1e-6 on the engine's own inverse (one single-cell
    array formula, as on the least-squares sheet; I from the index column), and the rows are
    `_enough` for a fit."""
    a, index = ll.a(block), ll.index(block)
    enough = _enough(ll)
    guard = enough if block == "itl" else f"AND({enough},{_s('itl_ok')}=1)"
    return (f"=IF({guard},IFERROR(IF(MAX(ABS(MMULT({a},MINVERSE({a}))-({index}=TRANSPOSE({index}))))"
            f"<1E-6,1,0),0),0)")


def _enough(ll: LatencyLayout) -> str:
    """`latency.fit_model`'s preconditions (no fit without them): latency.MIN_ROWS used rows or
    more, and at least as many TTFT rows (at or below the knee) as TTFT terms the data identify
    (t0, s and q with two knots, b, p and q with varied prompts): with fewer, neither block is
    solved, though the ITL one alone could be."""
    pv, batch = _s("prompt_varied"), f"({_s('knots')}>=2)"
    terms = f"1+{batch}+{_s('busy')}+{pv}+{batch}*{pv}"
    return (f"AND({_s('used')}>={latency.MIN_ROWS},"
            f"COUNTIFS({ll.rows('used')},1,{ll.rows('ttft_row')},1)>={terms})")


def _present(ll: LatencyLayout, name: str) -> str:
    """1 when the data identify term `name`: a step where its knot is measured, d when the prompt
    or output length varied, e when both did, s and q with two knots or more, p and q when the
    prompt length varied."""
    pv, ov, batch = _s("prompt_varied"), _s("output_varied"), f"({_s('knots')}>=2)"
    if name.startswith("step"):
        return f"ISNUMBER({ll.knot(int(name[4:]) - 1)})*1"
    return {"d": f"MAX({pv},{ov})", "e": f"{pv}*{ov}", "t0": "1", "s": f"{batch}*1", "b": _s("busy"), "p": pv,
            "q": f"{batch}*{pv}"}[name]


def block_formulas(ll: LatencyLayout, block: str) -> dict[str, str]:
    """A, b and the coefficients of one block ("itl" or "ttft"), keyed by address."""
    first, size = ll.block(block)
    names = ll.itl_names() if block == "itl" else list(TTFT_TERMS)
    out: dict[str, str] = {}
    n = ll.rows("n")

    def entry(i: int, j: int) -> str:
        """A[i][j] (an ITL step column is the indicator of its knot)."""
        a, b = names[i], names[j]
        both = f"({_present(ll, a)})*({_present(ll, b)})=1"
        if block == "ttft":
            y = [ll.rows(f"y{k}") for k in range(1, len(TTFT_TERMS) + 1)]
            return f"=IF({both},SUMPRODUCT({y[i]},{y[j]}),{1 if i == j else 0})"
        if a.startswith("step") and b.startswith("step"):
            if i != j:
                return "=0"
            return f"=IF({both},SUMIFS({ll.rows('w2')},{n},{ll.knot(i)}),1)"
        if a.startswith("step") or b.startswith("step"):
            step, other = (i, b) if a.startswith("step") else (j, a)
            return f"=IF({both},SUMIFS({ll.rows('w' + ('zd' if other == 'd' else 'ze'))},{n},{ll.knot(step)}),0)"
        za, zb = ll.rows("zd" if a == "d" else "ze"), ll.rows("zd" if b == "d" else "ze")
        return f"=IF({both},SUMPRODUCT({za},{zb}),{1 if i == j else 0})"

    for i in range(size):
        for j in range(size):
            out[f"{get_column_letter(A_COL + j)}{first + i}"] = entry(i, j)
        name = names[i]
        if block == "ttft":
            total = f"SUM({ll.rows(f'y{i + 1}')})"
        elif name.startswith("step"):
            total = f"SUMIFS({ll.rows('w')},{n},{ll.knot(i)})"
        else:
            total = f"SUM({ll.rows('zd' if name == 'd' else 'ze')})"
        out[f"{ll.b_col(block)}{first + i}"] = f"=IF({_present(ll, name)}=1,{total},0)"
    m, b = ll.m(block), ll.b(block)
    ok = _s("itl_ok" if block == "itl" else "ttft_ok")
    for i, name in enumerate(names):
        terms = "+".join(f"INDEX({m},{i + 1},{k + 1})*INDEX({b},{k + 1})" for k in range(size))
        value = f"({terms})/{ll.scale(name)}"
        if name.startswith("step"):  # an unused knot slot stays blank
            value = f"IF({_present(ll, name)}=1,{value},\"\")"
        out[f"B{first + i}"] = f"=IF({ok}=1,{value},\"\")"
    return out


def scale_formulas(ll: LatencyLayout) -> dict[str, str]:
    nmax, pmax, lmax, lmin, step = (_s(k) for k in ("n_max", "p_max", "l_max", "l_min", "step_max"))

    def positive(text: str) -> str:  # blank maxima (no rows) give 1, as a text "" would compare > 0
        return f"=IFERROR(IF(ISNUMBER({text}),IF(({text})>0,{text},1),1),1)"

    scales = {name: "=1" for name in ll.itl_names() if name.startswith("step")}
    scales.update({
        "d": positive(f"{nmax}*({pmax}+{lmax}/2)"), "e": positive(f"{nmax}*{pmax}/{lmin}"),
        "t0": "=1", "s": positive(step), "b": positive(step), "p": positive(pmax), "q": positive(f"{nmax}*{pmax}"),
    })
    return scales


def knot_formulas(ll: LatencyLayout) -> dict[str, str]:
    """The k-th smallest served batch among the used rows (one scan per slot)."""
    used, n = ll.rows("used"), ll.rows("n")
    out = {ll.knot(0).replace("$", ""): f"=IF({_s('used')}>0,_xlfn.MINIFS({n},{used},1),\"\")"}
    for k in range(1, ll.knot_slots):
        prev = ll.knot(k - 1)
        out[ll.knot(k).replace("$", "")] = (f"=IF(ISNUMBER({prev}),IF(COUNTIFS({used},1,{n},\">\"&{prev})>0,"
                                            f"_xlfn.MINIFS({n},{used},1,{n},\">\"&{prev}),\"\"),\"\")")
    return out


def forward_formulas(ll: LatencyLayout) -> dict[str, str]:
    r = {key: f"$B${row}" for key, row in ll.forward_rows.items()}
    c, length = r["concurrency"], r["max_tokens"]
    p = f"IF(ISNUMBER({r['prompt_tokens']}),{r['prompt_tokens']},{_s('p_min')})"
    # nested IFs: LibreOffice evaluates every argument of AND, and p_min is blank without rows
    ok = (f"IF(AND(ISNUMBER({c}),ISNUMBER({length}),{_s('itl_ok')}=1,{_s('ttft_ok')}=1),"
          f"AND(OR({_s('prompt_varied')}=1,ABS({p}-{_s('p_min')})<={_s('p_min')}*{latency.PROMPT_LEVEL_RATIO - 1!r}+1),"
          f"OR({_s('knots')}>=2,{c}={_s('c_min')})),FALSE)")
    n, out, itl, ts, ls, wait = (r[k] for k in ("n", "output", "itl", "ttft_served", "latency_served", "wait"))
    positive = f"AND({ts}>0,{itl}>0,{ls}>0)"
    return {
        "n": f"=IF({ok},{_served(c)},\"\")",
        "output": f"=IF({ok},MAX(1,{length}*{_s('output_ratio')}),\"\")",
        "itl": f"=IF({ok},{_step_between(ll, n)}+{_context(ll, n, p, out)},\"\")",
        "ttft_served": f"=IF({ok},{_ttft_value(ll, n, p, itl)},\"\")",
        "latency_served": f"=IF({ok},{ts}+({out}-1)*{itl},\"\")",
        "wait": (f"=IF({ok},IF({positive},IF(AND({HAS_KNEE},{c}>{KNEE}),"
                 f"{_s('queue_share')}*{ls}*({c}/{KNEE}-1),0),\"\"),\"\")"),
        "ttft": f"=IF(ISNUMBER({wait}),{ts}+{wait},\"\")",
        "latency": f"=IF(ISNUMBER({wait}),{ls}+{wait},\"\")",
        "tps": f"=IF(ISNUMBER({wait}),{_s('efficiency')}*{n}*{out}/{ls},\"\")",
        "ttft_p95": f"=IF(AND(ISNUMBER({wait}),ISNUMBER({_s('ttft_p95_ratio')})),{r['ttft']}*{_s('ttft_p95_ratio')},\"\")",
        "latency_p95": (f"=IF(AND(ISNUMBER({wait}),ISNUMBER({_s('latency_p95_ratio')})),"
                        f"{r['latency']}*{_s('latency_p95_ratio')},\"\")"),
        "beyond_knee": f"=IF(ISNUMBER({wait}),IF(AND({HAS_KNEE},{c}>{KNEE}),1,0),\"\")",
    }


def write_sheet(ws: Worksheet, layout: Layout, fills: PendingFills) -> dict[str, str]:
    """Write the latency sheet; return defined name -> "A1" on it."""
    from scm_xl.workbook.stamp import write_filled
    from scm_xl.workbook.styles import BOLD, FORMULA_FILL, HEADER_FILL, HEADER_FONT, INPUT_FILL, KEY_FILL, TITLE_FONT
    from scm_xl.workbook.styles import formula as put_formula

    from openpyxl.styles import Alignment

    ll = LatencyLayout(layout)
    t = TEXTS[layout.lang]
    ws["A1"], ws["A1"].font = t["title"], TITLE_FONT
    for row, key in ((2, "note"), (3, "knee_note")):  # long notes wrap across the printed width
        ws[f"A{row}"] = t[key]
        ws.merge_cells(f"A{row}:E{row}")
        ws[f"A{row}"].alignment = Alignment(wrap_text=True, vertical="top")
        ws.row_dimensions[row].height = 44
    ws["B4"], ws["C4"], ws["D4"] = t["input"], t["effective"], t["fitted"]
    for cell in ("B4", "C4", "D4"):
        ws[cell].font = BOLD
    ws[f"A{SETTING_ROWS['model']}"] = t["model"]
    ws[f"B{SETTING_ROWS['model']}"].fill = INPUT_FILL
    put_formula(ws, f"C{SETTING_ROWS['model']}",
                f"=IF($B${SETTING_ROWS['model']}&\"\"<>\"\",$B${SETTING_ROWS['model']}&\"\",BaseModel&\"\")")
    ws[f"A{SETTING_ROWS['knee']}"] = t["knee"]
    ws[f"B{SETTING_ROWS['knee']}"].fill = INPUT_FILL
    knee_in, fitted = f"$B${SETTING_ROWS['knee']}", f"$D${SETTING_ROWS['knee']}"
    put_formula(ws, f"C{SETTING_ROWS['knee']}",
                f"=IF(ISNUMBER({knee_in}),IF({knee_in}>0,{knee_in},\"\"),IF(ISNUMBER({fitted}),{fitted},\"\"))",
                fill=KEY_FILL)

    summary = summary_formulas(ll)
    for key, row in SUMMARY_ROWS.items():
        ws[f"A{row}"] = t[key]
        put_formula(ws, f"B{row}", summary[key], "0.0000" if key in ARRAY_SUMMARY[2:] or key == "step_max" else None,
                    array=key in ARRAY_SUMMARY)

    for col, key in (("A", "term"), ("B", "value"), ("C", "meaning"), ("D", "scale"), (KNOT_COL, "knot")):
        cell = ws[f"{col}{COEF_HEADER}"]
        cell.value, cell.font, cell.fill = t[key], HEADER_FONT, HEADER_FILL
    ws[f"{get_column_letter(A_COL)}{COEF_HEADER}"] = t["a_title"]
    scales = scale_formulas(ll)
    for name, row in ll.coef_rows.items():
        ws[f"A{row}"] = name
        ws[f"C{row}"] = latency.TERM_WORDS["step" if name.startswith("step") else name]
        put_formula(ws, f"D{row}", scales[name], "0.000E+00")
    for address, text in knot_formulas(ll).items():
        put_formula(ws, address, text)
    for block in ("itl", "ttft"):
        for address, text in block_formulas(ll, block).items():
            put_formula(ws, address, text, "0.0000000" if address.startswith("B") else None,
                        fill=KEY_FILL if address.startswith("B") else FORMULA_FILL)
        first, size = ll.block(block)
        for i in range(size):
            ws[f"{ll.index_col(block)}{first + i}"] = i + 1
        m = ll.m(block).replace("$", "")
        ok = _s("itl_ok" if block == "itl" else "ttft_ok")
        ws[m.split(":")[0]] = ArrayFormula(m, f"=IF({ok}=1,MINVERSE({ll.a(block)}),\"\")")
        ws[m.split(":")[0]].fill = FORMULA_FILL

    forward = forward_formulas(ll)
    for key, row in ll.forward_rows.items():
        ws[f"A{row}"] = t[key]
        if key in FORWARD_INPUTS:
            ws[f"B{row}"].fill = INPUT_FILL
        else:
            put_formula(ws, f"B{row}", forward[key], "0.0000" if key not in ("beyond_knee",) else None,
                        fill=KEY_FILL if key in ("tps", "ttft", "latency_p95") else FORMULA_FILL)

    ws[f"A{ll.row_header - 1}"], ws[f"A{ll.row_header - 1}"].font = t["rows_title"], BOLD
    for key, col in ROW_COLS.items():
        cell = ws[f"{col}{ll.row_header}"]
        cell.value, cell.font, cell.fill = ROW_HEADERS[key], HEADER_FONT, HEADER_FILL
    write_filled(ws, fills, ROW_COLS, lambda r: row_formulas(ll, r), range(ll.row_first, ll.row_last + 1), ll.offset)
    ws.column_dimensions["A"].width = 44
    for col in "BDE":
        ws.column_dimensions[col].width = 14
    ws.column_dimensions["C"].width = 58
    ws.print_area = f"A1:E{ll.forward_rows['beyond_knee']}"
    return ll.defined_names()


# ---------------------------------------------------------------------------
# Hand-set cells and the fitted knee
# ---------------------------------------------------------------------------

def read_cells(ws: Worksheet, layout: Layout) -> dict[str, Any]:
    """The sheet's hand-set cells (model, knee, forward inputs) and the fitted knee, as typed."""
    rows = LatencyLayout(layout).forward_rows
    cells = {"model": ws[f"B{SETTING_ROWS['model']}"].value, "knee": ws[f"B{SETTING_ROWS['knee']}"].value,
             "fitted_knee": ws[f"D{SETTING_ROWS['knee']}"].value}
    cells.update({key: ws[f"B{rows[key]}"].value for key in FORWARD_INPUTS})
    return cells


def write_cells(ws: Worksheet, layout: Layout, cells: dict[str, Any], *, hand_set_only: bool = True) -> None:
    from scm_xl.workbook.styles import write_value

    rows = {**SETTING_ROWS, **LatencyLayout(layout).forward_rows}
    for key in ("model", "knee", *FORWARD_INPUTS):
        if key in cells and cells[key] is not None:
            write_value(ws[f"B{rows[key]}"], cells[key])
    if not hand_set_only:
        ws[f"D{SETTING_ROWS['knee']}"].value = cells.get("fitted_knee")


def sheet_model(cells: dict[str, Any], analysis: Analysis) -> str:
    typed = cells.get("model")
    if typed is not None and str(typed) != "":
        return str(typed)
    return analysis.calibration.base_model or ""


def fitted_knee(rows: Sequence[Any], model: str) -> float | None:
    """The knee `latency.fit_model` profiles for `model`'s rows (None: no knee, or no fit)."""
    used = [o for o in latency.observations(rows)[0] if same_model(o.model, model)]
    fit = latency.fit_model(used, model) if used else None
    return fit.knee_limit if fit is not None else None


def effective_knee(cells: dict[str, Any]) -> float | None:
    typed = cells.get("knee")
    if isinstance(typed, (int, float)) and not isinstance(typed, bool):
        return float(typed) if typed > 0 else None
    fitted = cells.get("fitted_knee")
    return float(fitted) if isinstance(fitted, (int, float)) and not isinstance(fitted, bool) else None


# ---------------------------------------------------------------------------
# The reference
# ---------------------------------------------------------------------------

def expected_sheet(layout: Layout, analysis: Analysis, rows: Sequence[Any], cells: dict[str, Any], *,
                   sheet_rows: Sequence[int]) -> dict[tuple[str, str], CellValue]:
    """Every formula cell of the sheet, from `latency.fit_model` at the sheet's knee; the normal
    equations mirrored with numpy from their definitions."""
    ll = LatencyLayout(layout)
    title = ll.title
    out: dict[tuple[str, str], CellValue] = {}

    def put(address: str, value: Any) -> None:
        if isinstance(value, (bool, np.bool_, int, np.integer, np.floating)):
            value = float(value)
        out[(title, address)] = value

    model = sheet_model(cells, analysis)
    knee = effective_knee(cells)
    put(f"C{SETTING_ROWS['model']}", model)
    put(f"C{SETTING_ROWS['knee']}", knee)
    observed, _ = latency.observations(rows)
    used = [o for o in observed if same_model(o.model, model)]
    by_row = {o.exp_id: o for o in used}
    fit = latency.fit_model(used, model, knee_given=knee) if used else None
    terms = latency.terms_of(used, knee) if used else latency.Terms(knots=(), prompt=False, context=False,
                                                                     joining=False, busy=False)
    knots = list(terms.knots)[:ll.knot_slots]

    def served(c: float) -> float:
        return min(c, knee) if knee is not None else c

    summary: dict[str, Any] = {key: None for key in SUMMARY_KEYS}
    summary.update(used=len(used), prompt_varied=terms.prompt, output_varied=False, knots=len(knots),
                   busy=terms.busy, itl_ok=0,
                   ttft_ok=0, queue_share=1.0)
    if used:  # statistics of the data, with or without a fit (the fit's own when it has one)
        summary.update(efficiency=latency.efficiency_of(used), output_ratio=latency.output_ratio_of(used))
        summary.update(n_max=max(served(o.concurrency) for o in used), p_min=min(o.prompt for o in used),
                       p_max=max(o.prompt for o in used), l_min=min(o.output for o in used),
                       l_max=max(o.output for o in used), c_min=min(o.concurrency for o in used),
                       c_max=max(o.concurrency for o in used))
        summary["output_varied"] = latency.varied([o.output for o in used])
    steps: dict[str, float] = {}
    if fit is not None:
        summary.update(itl_ok=1, ttft_ok=1, efficiency=fit.efficiency, output_ratio=fit.output_ratio,
                       queue_share=fit.queue_share, ttft_p95_ratio=fit.ttft_p95_ratio,
                       latency_p95_ratio=fit.latency_p95_ratio)
        steps = {o.exp_id: fit.itl.value(terms.itl(served(o.concurrency), o.prompt, o.output)) for o in used}
        summary["step_max"] = max(steps.values())
    for key, row in SUMMARY_ROWS.items():
        put(f"B{row}", summary[key])

    itl_scale = latency.itl_scales(used, knee) if used else {}
    ttft_scale = latency.ttft_scales(used, knee, summary["step_max"] or 0.0) if used else {}
    present = {f"step{k + 1}": k < len(knots) for k in range(ll.knot_slots)}
    present.update(d=terms.context, e=terms.joining, t0=True, s=terms.batch, b=terms.busy, p=terms.prompt,
                   q=terms.batch and terms.prompt)
    itl_values = fit.itl.coefficients() if fit else {}
    ttft_values = fit.ttft.coefficients() if fit else {}
    for k in range(ll.knot_slots):
        row = ll.coef_rows[f"step{k + 1}"]
        put(f"{KNOT_COL}{row}", knots[k] if k < len(knots) else None)
        put(f"D{row}", 1.0)
        put(f"B{row}", itl_values.get(latency.step_name(knots[k]), 0.0) if fit and k < len(knots) else None)
    for name in ("d", "e"):
        put(f"D{ll.coef_rows[name]}", itl_scale.get(name, 1.0))
        put(f"B{ll.coef_rows[name]}", (itl_values.get(name, 0.0) if present[name] else 0.0) if fit else None)
    for name in TTFT_TERMS:
        put(f"D{ll.coef_rows[name]}", ttft_scale.get(name, 1.0))
        put(f"B{ll.coef_rows[name]}", (ttft_values.get(name, 0.0) if present[name] else 0.0) if fit else None)

    # per-row values
    size = len(ll.itl_names())
    w = np.zeros(layout.rows)
    zd, ze = np.zeros(layout.rows), np.zeros(layout.rows)
    ns: list[float | None] = [None] * layout.rows
    y = np.zeros((layout.rows, len(TTFT_TERMS)))
    exp_ids = {sheet_row - layout.raw_first: status.exp_id for status, sheet_row in zip(analysis.statuses, sheet_rows)}
    blank = ("n", "prompt", "output", "itl_hat", "ttft_hat", "latency_hat", "little", "queue", "share",
             "ttft_ratio", "latency_ratio")
    y_keys = [f"y{j}" for j in range(1, len(TTFT_TERMS) + 1)]
    for i in range(layout.rows):
        row = ll.row_first + i

        def cell(key: str, value: Any) -> None:
            put(f"{ROW_COLS[key]}{row}", value)

        cell("exp_id", exp_ids.get(i))
        o = by_row.get(exp_ids[i]) if i in exp_ids else None
        if o is None:
            cell("used", 0)
            cell("ttft_row", 0)
            for key in blank:
                cell(key, None)
            for key in ("w", "w2", "zd", "ze", "wzd", "wze", *y_keys):
                cell(key, 0)
            continue
        n = served(o.concurrency)
        ns[i] = n
        w[i] = 1 / o.itl
        zd[i] = n * (o.prompt + o.output / 2) / itl_scale["d"] * w[i]
        ze[i] = n * o.prompt / o.output / itl_scale["e"] * w[i]
        for key, value in (("used", 1), ("n", n), ("prompt", o.prompt), ("output", o.output), ("w", w[i]),
                           ("w2", w[i] * w[i]), ("zd", zd[i]), ("ze", ze[i]), ("wzd", w[i] * zd[i]),
                           ("wze", w[i] * ze[i]), ("little", o.tps * o.latency / (o.concurrency * o.output)),
                           ("queue", latency.finite_wait(o.concurrency, knee, o.requests) if knee is not None else 0.0)):
            cell(key, value)
        ttft_row = knee is None or o.concurrency <= knee
        cell("ttft_row", 1 if ttft_row else 0)
        step = steps.get(o.exp_id)
        if fit is None or step is None:
            for key in ("itl_hat", "ttft_hat", "latency_hat", "share", "ttft_ratio", "latency_ratio"):
                cell(key, None)
            for key in y_keys:
                cell(key, 0)
            continue
        cell("itl_hat", step)
        t_features = [1.0, terms.batch * step, terms.busy * step * latency.busy_share(n), terms.prompt * o.prompt,
                      terms.batch * terms.prompt * o.concurrency * o.prompt]
        for j, (value, name) in enumerate(zip(t_features, TTFT_TERMS)):
            y[i, j] = value / ttft_scale[name] / o.ttft if ttft_row else 0.0
            cell(f"y{j + 1}", y[i, j])
        first = fit.ttft.value(terms.ttft(n, o.prompt, step))
        served_latency = first + (o.output - 1) * step
        cell("ttft_hat", first)
        cell("latency_hat", served_latency)
        queue = latency.finite_wait(o.concurrency, knee, o.requests) if knee is not None else 0.0
        beyond = knee is not None and o.concurrency > knee
        cell("share", (o.ttft - first) / (served_latency * queue) if beyond and served_latency > 0 and queue > 0
             else None)
        wait = fit.queue_share * served_latency * queue
        cell("ttft_ratio", o.ttft_p95 / (first + wait) if o.ttft_p95 is not None and first + wait > 0 else None)
        cell("latency_ratio", o.latency_p95 / (served_latency + wait)
             if o.latency_p95 is not None and served_latency + wait > 0 else None)

    # the normal equations, from their definitions
    at = [np.array([1.0 if ns[i] == knot else 0.0 for i in range(layout.rows)]) for knot in knots]
    itl_a, itl_b = np.zeros((size, size)), np.zeros(size)
    names = ll.itl_names()
    columns: list[np.ndarray] = []
    for k in range(ll.knot_slots):
        columns.append(w * at[k] if k < len(knots) else np.zeros(layout.rows))
    columns += [zd, ze]
    for i in range(size):
        for j in range(size):
            itl_a[i, j] = float(columns[i] @ columns[j]) if present[names[i]] and present[names[j]] \
                else (1.0 if i == j else 0.0)
        itl_b[i] = float(columns[i].sum()) if present[names[i]] else 0.0
    mask = np.array([present[name] for name in TTFT_TERMS], dtype=float)
    ttft_a = (y.T @ y) * np.outer(mask, mask) + np.diag(1 - mask)
    ttft_b = y.sum(axis=0) * mask
    # the sheet's guard of itl_ok / ttft_ok (_enough): fit_model's preconditions
    ttft_rows = sum(1 for o in used if knee is None or o.concurrency <= knee)
    enough = len(used) >= latency.MIN_ROWS and ttft_rows >= len(terms.ttft_names())
    solved = {"itl": enough, "ttft": enough}
    for block, a, b in (("itl", itl_a, itl_b), ("ttft", ttft_a, ttft_b)):
        first, n_terms = ll.block(block)
        for i in range(n_terms):
            for j in range(n_terms):
                put(f"{get_column_letter(A_COL + j)}{first + i}", a[i, j])
            put(f"{ll.b_col(block)}{first + i}", b[i])
        inverse = None
        if solved[block] and (block == "itl" or fit is not None):
            try:
                inverse = np.linalg.inv(a)
            except np.linalg.LinAlgError:
                inverse = None
        m_col = ll.m_first_col(block)
        for i in range(n_terms):
            for j in range(n_terms):
                put(f"{get_column_letter(m_col + j)}{first + i}", inverse[i, j] if inverse is not None else None)

    # forward
    forward = {key: cells.get(key) for key in FORWARD_INPUTS}
    values: dict[str, Any] = {key: None for key in FORWARD_OUTPUTS}
    c, length = forward["concurrency"], forward["max_tokens"]
    numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (c, length))
    if fit is not None and numeric:
        prompt = forward["prompt_tokens"] if isinstance(forward["prompt_tokens"], (int, float)) else None
        result = fit.forecast(float(c), int(length) if float(length).is_integer() else length,  # type: ignore[arg-type]
                              prompt)
        if result.tps is not None and result.itl_s is not None and result.latency_s is not None:
            n = served(float(c))  # type: ignore[arg-type]
            output = max(1.0, float(length) * fit.output_ratio)  # type: ignore[arg-type]
            step = result.itl_s
            p = float(summary["p_min"] if prompt is None else prompt)
            first = fit.ttft.value(terms.ttft(n, p, step))
            served_latency = first + (output - 1) * step
            beyond = knee is not None and float(c) > knee  # type: ignore[arg-type]
            wait = fit.queue_share * served_latency * (float(c) / knee - 1) if beyond and knee else 0.0  # type: ignore[arg-type]
            values.update(n=n, output=output, itl=step, ttft_served=first, latency_served=served_latency,
                          wait=wait, ttft=result.ttft_s, latency=result.latency_s,
                          tps=result.tps, ttft_p95=result.ttft_p95_s, latency_p95=result.latency_p95_s,
                          beyond_knee=1 if result.beyond_knee else 0)
    for key in FORWARD_OUTPUTS:
        put(f"B{ll.forward_rows[key]}", values[key])
    return out



def _write(ws: Worksheet, b: Building) -> dict[str, str]:
    return write_sheet(ws, b.layout, b.fills)


def _reference(c: Checking) -> None:
    c.exp.update(expected_sheet(c.layout, c.analysis, [row for _, row in c.inputs.rows], c.inputs.latency,
                                sheet_rows=[sheet_row for sheet_row, _ in c.inputs.rows]))


def input_rows(layout: Layout) -> int:
    """The last row `read_cells` reads: the forward block's last input (it moves down with the
    layout's concurrency slots)."""
    forward = LatencyLayout(layout).forward_rows
    return max(*SETTING_ROWS.values(), *(forward[key] for key in FORWARD_INPUTS))


SHEET = SheetSpec("latency", SHEET_TITLES, _write, _reference, input_rows=input_rows)
