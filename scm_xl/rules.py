"""The rules of the method, one home each: texts, roles, verdict bands, thresholds, defaults.

The Python reference (model.py), the workbook's formulas and every message read them
from here; nothing below this module knows a workbook exists.
"""

from __future__ import annotations

from typing import Literal

Lang = Literal["zh", "en"]

# Text that formulas emit. The reference renders the same templates, so the
# workbook and Python agree to the character. "{x}" marks a value spliced in.
TEXTS: dict[Lang, dict[str, str]] = {
    "en": {
        "no_output": "excluded: no output tokens",
        "manual_exclude": "excluded: manual override",
        "manual_include": "included: manual override",
        "fault": "excluded: failed or rate-limited requests",
        "physics": "excluded: strict physics",
        "short_output": "short output: {tokens} of {expected} requested tokens",
        "superlinear": "superlinear gain from c={c0} (f(c) > c: batching cannot do that; suspect caching, rate limits or noise)",
        "over_ceiling": "per-stream TPS above the roofline ceiling of {ceiling} tok/s",
        "kv_over": "KV cache of {c} sequences exceeds GPU memory",
        "mono": "excluded: TPS falls as concurrency rises (a lower-concurrency row of the same model and max_tokens is faster)",
        "identifies": "identifies",
        "missing": "missing",
        "unidentified": "unidentified",
        "unreachable": "unreachable with the measured levels",
        "unreachable_short": "unreachable",
        "unusable_text": "unusable: {column} is text, not a number",
        "unusable_blank": "unusable: {column} is blank",
    },
    "zh": {
        "no_output": "剔除：无输出Token",
        "manual_exclude": "剔除：人工指定",
        "manual_include": "纳入：人工指定",
        "fault": "剔除：存在失败或限流请求",
        "physics": "剔除：严格物理检查",
        "short_output": "输出过短：{tokens} / 请求的 {expected} Token",
        "superlinear": "相对 c={c0} 超线性增益（f(c) > c：批处理做不到，疑为缓存、限流或噪声）",
        "over_ceiling": "单流TPS超过屋顶线上限 {ceiling} tok/s",
        "kv_over": "{c} 个序列的KV缓存超出显存",
        "mono": "剔除：并发升高而TPS下降（同模型同max_tokens下有更低并发的行更快）",
        "identifies": "标定",
        "missing": "缺少",
        "unidentified": "无法预测",
        "unreachable": "在已测并发档位内无法达到",
        "unreachable_short": "unreachable",
        "unusable_text": "无法使用：{column} 是文本而不是数字",
        "unusable_blank": "无法使用：{column} 为空",
    },
}

ROLES = ("identify", "check", "unidentified", "excluded")
VERDICTS = ("excellent", "good", "fail", "insufficient")
# The roles and verdicts in words, for people (the HTML page, the command line); the workbook's
# formulas and the JSON keep the machine names above.
ROLE_NAMES: dict[Lang, dict[str, str]] = {
    "en": {role: role for role in ROLES},
    "zh": {"identify": "标定", "check": "检验", "unidentified": "无法预测", "excluded": "剔除"},
}
VERDICT_NAMES: dict[Lang, dict[str, str]] = {
    "en": {verdict: verdict for verdict in VERDICTS},
    "zh": {"excellent": "优秀", "good": "良好", "fail": "不通过", "insufficient": "数据不足"},
}
OVERRIDE_VALUES = ("include", "exclude")

# Verdict thresholds (percent): MAPE and max absolute deviation of check rows.
EXCELLENT_MAPE, EXCELLENT_MAX = 5.0, 10.0
GOOD_MAPE, GOOD_MAX = 10.0, 20.0
# "excellent" needs at least this many rows behind it (check rows, or hold-out rows): one or two
# lucky rows within 5% are "good" at best.
EXCELLENT_MIN_ROWS = 3

# Defaults of the hand-set cells.
DEFAULT_FORWARD = {"concurrency": 2, "max_tokens": 100}
DEFAULT_TARGET = {"tps": 100, "max_tokens": 50}
DEFAULT_SHORT_OUTPUT_RATIO = 0.5
# A gain above c/c0 by more than this is superlinear; within it, timing noise on a
# nearly linear deployment would raise false alarms.
SUPERLINEAR_TOLERANCE = 0.05
DEFAULT_PHYSICS_PRECISION = "bf16"
DEFAULT_MODEL = "Qwen/Qwen2.5-7B-Instruct"  # the model collect, plan and the simulator name by default
# A provider's rate limits (x-ratelimit-limit-requests/-tokens, --rpm, --tpm) are per minute.
RATE_LIMIT_WINDOW_S = 60.0
METHODS = ("chain", "lsq")  # the method cell: which coefficients the forward and inverse answers use
# The method every surface answers with when none is asked (the workbook's method cell in a new
# workbook, `predict`, `solve`, the report's calculator, `demo`).
DEFAULT_METHOD = METHODS[0]
LANGS: tuple[Lang, ...] = ("zh", "en")
# The sizes of a matrix collect runs and plan writes, one home (scm_xl.collect.matrix.check_matrix_size
# applies them before any traffic and before any file). Concurrency: each slot holds its own
# connection, and one client reaches one server through at most 65,535 ports. Requests of one
# experiment, warm-up included: each is recorded in memory before the experiment starts (10^8
# took 18 GB before it was stopped). Experiments: as many as one workbook holds
# (scm_xl.workbook.io.MAX_DATA_ROWS).
MAX_CONCURRENCY = 65_535
MAX_EXPERIMENT_REQUESTS = 1_000_000
MAX_EXPERIMENTS = 100_000




def verdict_for(mape: float | None, max_deviation: float | None, rows: int) -> str:
    """The verdict band of a set of deviations (percent); no rows is never a pass."""
    if rows == 0 or mape is None or max_deviation is None:
        return "insufficient"
    if mape <= EXCELLENT_MAPE and max_deviation <= EXCELLENT_MAX and rows >= EXCELLENT_MIN_ROWS:
        return "excellent"
    if mape <= GOOD_MAPE and max_deviation <= GOOD_MAX:
        return "good"
    return "fail"


def verdict_rule(lang: Lang, what: str) -> str:
    """The verdict bands in words, for sheets and messages (what: the rows it is over)."""
    if lang == "zh":
        return (f"excellent: MAPE≤{EXCELLENT_MAPE:g}% 且 最大≤{EXCELLENT_MAX:g}% 且至少 {EXCELLENT_MIN_ROWS} 行；"
                f"good: MAPE≤{GOOD_MAPE:g}% 且 "
                f"最大≤{GOOD_MAX:g}%；fail: 更差；insufficient: 没有{what}（不算通过）")
    return (f"excellent: MAPE≤{EXCELLENT_MAPE:g}% and max≤{EXCELLENT_MAX:g}% on at least {EXCELLENT_MIN_ROWS} rows; "
            f"good: MAPE≤{GOOD_MAPE:g}% and "
            f"max≤{GOOD_MAX:g}%; fail: worse; insufficient: no {what} (never a pass)")
