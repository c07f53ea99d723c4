"""Goodput under a per-request SLO, live in the workbook: the per-request records on a workings
sheet of their own, the SLO's attainment, Wilson interval and goodput per experiment and per
configuration as formulas over them, and the cheapest configuration that meets the SLO.

The definitions are scm_xl.goodput's (DistServe's): a request is good when it succeeded and
every threshold set holds (`<=`; TPOT with one output token holds vacuously; an unmeasured value
misses); attainment = good / measured requests, with the Wilson score interval at
goodput.WILSON_CONFIDENCE; goodput = output tokens of good requests / the results row's
total_time_s. A results row is judged only when the records of its experiment are the requests
its totals count (as goodput.evaluate). Configurations (model x concurrency x max_tokens x prompt
level) pool their judged experiments; the answer is the first, in goodput's cost order (fewest
slots, then the shorter max_tokens, then the model name), whose attainment's lower bound reaches
the target and whose TPS reaches the derivation sheet's target TPS: what goodput.solve_slo and
`scm-xl solve --slo` pick with one replica.

Replicas, cost and rate limits (scm_xl.capacity) follow on the same sheet: the Summary's inputs
(RPM and TPM limits, a deployment target TPS, blank = the Derivation's, token prices or a GPU-hour
price and GPUs per replica, the order: minimise concurrency or cost) as effective values; per
configuration, its mean latency, prompt and output tokens per request, replicas = ceil(target / TPS
per replica), requests and tokens per minute of the deployment at full load, each against
RATE_LIMIT_HEADROOM of its limit, and the cost per million output tokens and per hour
(capacity.option); and the plan's answer (capacity.plan in capacity._order's order), limit-bound
when the rate limits rule out the configuration chosen without them, else server-bound.

The order is taken in stages, per candidate set (without the limits: `free`, within them: `fits`),
each a column of ordinary formulas: by cost, the candidates with the lowest cost per hour, then
among them the lowest cost per million output tokens (a missing cost ranks last, as capacity's
inf: such a candidate stays in only when none has a cost); by concurrency every candidate passes
both stages. Of those left, the fewest replicas, the first in the configurations table's order
(goodput's cost order, which is capacity's tie-break). Minimise cost with no price answers nothing
and says so, as capacity.plan refuses it (UsageError).

The SLO's inputs (ttft, tpot, e2el thresholds in seconds, blank = not used; the attainment
target) are typed on the Summary (summary_sheet.SLO_INPUT_ROWS); this sheet holds their
effective values. The records are written by `fill` from the per-request CSV beside the results
CSV (goodput.requests_path_for), in the experiments' order; their keys (experiment number, exp_id,
configuration number) are data, as the raw rows are, and every other cell a formula. Each
formula is an ordinary per-cell formula (COUNTIF(S)/SUMIF(S) with numeric criteria, INDEX/MATCH):
no array idiom, so IronCalc, LibreOffice and Gnumeric compute them alike.

`expected_sheets` is the reference: it reads only the inputs (the records, the keys, the typed
SLO and capacity inputs and the raw rows) and counts with goodput.tally / goodput.wilson_interval,
then plans with capacity.option / capacity.plan on the pooled tallies.

On screen and paper the tables' headers are words a person reads (the keys stay the formulas'
and the JSON's), the helper columns (running sums, lookup positions, 1/0 flags, the order's
stages) are grouped and hidden, and the sheet prints its settings and each table on pages of
their own at a readable scale (`_print_setup`).

Long because it holds two sheets and the Summary's SLO block, each in two languages, with their
formulas, writer, reader and reference, all over the same addresses (one home for them).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from openpyxl.styles import Alignment, Protection
from openpyxl.utils import column_index_from_string, get_column_letter
from openpyxl.worksheet.datavalidation import DataValidation
from openpyxl.worksheet.worksheet import Worksheet

from scm_xl import capacity, goodput
from scm_xl.capacity import RATE_LIMIT_HEADROOM, REASON_WORDS, RPM_LIMIT, TPM_LIMIT, TPM_UNMEASURED
from scm_xl.engines.base import CellValue
from scm_xl.errors import InputError, UsageError
from scm_xl.goodput import DEFAULT_ATTAINMENT, RequestSample, RequestSamples, Slo, Tally
from scm_xl.rules import RATE_LIMIT_WINDOW_S
from scm_xl.safety import DEFAULT_LIMITS
from scm_xl.workbook import summary_sheet
from scm_xl.workbook.layout import Layout
from scm_xl.workbook.literals import q as _q
from scm_xl.workbook.sheet import Building, Checking, SheetSpec, no_reference

if TYPE_CHECKING:
    from scm_xl.workbook.stamp import BuiltWorkbook, PendingFills

SHEET_TITLES: dict[str, str] = {"zh": "SLO达成", "en": "SLO"}
REQUESTS_TITLES: dict[str, str] = {"zh": "计算_逐请求", "en": "Work_Requests"}

# The most per-request records a workbook holds: a sheet of that many rows stays inside
# safety.XlsxLimits (rows, cells per sheet) next to the largest raw-data workbook, so every
# reader of the workbook accepts it, and the per-experiment counts (one pass over the records
# each) stay seconds in an engine.
MAX_REQUEST_ROWS = 200_000
assert MAX_REQUEST_ROWS + 1 < DEFAULT_LIMITS.max_rows
WILDCARDS = ("*", "?", "~")  # what spreadsheet lookups (MATCH) read as a pattern in an exp_id

# ---- the requests sheet: one header row, then one row per measured request -------------------
REQ_HEADER_ROW, REQ_FIRST = 1, 2
REQ_INPUT_KEYS = ("exp_no", "exp_id", "ok", "ttft_s", "latency_s", "output_tokens", "prompt_tokens", "line")
REQ_FORMULA_KEYS = ("tpot_s", "good")
REQ_COLS = {key: get_column_letter(i + 1) for i, key in enumerate(REQ_INPUT_KEYS + REQ_FORMULA_KEYS)}

# ---- the SLO sheet ------------------------------------------------------------------------------
TITLE_ROW, NOTE_ROW, SOURCE_ROW = 1, 2, 3
SETTING_KEYS = ("ttft", "tpot", "e2el", "attainment", "thresholds", "target_tps", "levels", "requests")
SETTING_ROWS = {key: 5 + i for i, key in enumerate(SETTING_KEYS)}
ANSWER_KEYS = ("slot", "model", "concurrency", "max_tokens", "attainment", "low", "high", "tps", "goodput", "status")
ANSWER_ROWS = {key: SETTING_ROWS["requests"] + 2 + i for i, key in enumerate(ANSWER_KEYS)}
# Replicas, cost and rate limits (scm_xl.capacity): the effective inputs, then the plan's answer.
CAP_SETTING_KEYS = ("rpm", "tpm", "rpm_allowed", "tpm_allowed", "target_tps", "price_in", "price_out",
                    "gpu_hour_price", "gpus", "pricing", "minimise")
CAP_SETTING_ROWS = {key: ANSWER_ROWS["status"] + 2 + i for i, key in enumerate(CAP_SETTING_KEYS)}
CAP_ANSWER_KEYS = ("status", "slot_free", "slot", "replicas", "model", "concurrency", "max_tokens", "tps",
                   "capacity_tps", "rpm", "tpm", "cost_million", "cost_hour", "bound", "binding")
CAP_ANSWER_ROWS = {key: CAP_SETTING_ROWS[CAP_SETTING_KEYS[-1]] + 2 + i for i, key in enumerate(CAP_ANSWER_KEYS)}
HEADER_ROW = CAP_ANSWER_ROWS["binding"] + 2
FIRST = HEADER_ROW + 1
EXP_INPUT_KEYS = ("no", "exp_id", "cell_no")
EXP_KEYS = EXP_INPUT_KEYS + ("position", "model", "concurrency", "max_tokens", "prompt_level", "requests",
                             "output_tokens", "results_requests", "results_tokens", "wall_s", "judged", "good",
                             "good_tokens", "attainment", "low", "high", "tps", "goodput",
                             "lat_sum", "lat_n", "prompt_sum", "prompt_n")
EXP_COLS = {key: get_column_letter(i + 1) for i, key in enumerate(EXP_KEYS)}
# A candidate's cost per hour; its replicas if that is the lowest (every candidate's when minimising
# concurrency); its cost per million output tokens; its replicas if that is the lowest among those.
ORDER_STAGES = ("hour", "cheap", "million", "cheapest")
CELL_INPUT_KEYS = ("no", "model", "concurrency", "max_tokens", "prompt_level")
CELL_KEYS = CELL_INPUT_KEYS + ("level_code", "new_level", "experiments", "requests", "good", "output_tokens",
                               "good_tokens", "wall_s", "attainment", "low", "high", "tps", "goodput", "meets",
                               "qualifies",
                               # capacity: one replica's traffic and cost, scaled to the deployment's target
                               "lat_sum", "lat_n", "prompt_sum", "prompt_n", "mean_latency", "mean_prompt",
                               "mean_output", "replicas", "rpm", "tpm", "rpm_ok", "tpm_ok", "input_per_output",
                               "cost_million", "cost_hour", "free", "fits",
                               # the plan's order in stages, per candidate set (ORDER_STAGES)
                               *(f"{s}_{stage}" for s in ("free", "fits") for stage in ORDER_STAGES))
CELL_COLS = {key: get_column_letter(len(EXP_KEYS) + 2 + i) for i, key in enumerate(CELL_KEYS)}

# The raw row's figures an experiment looks up on the per-row workings (by its exp_id).
LOOKUPS = {"model": "model", "concurrency": "concurrency", "max_tokens": "max_tokens",
           "prompt_level": "prompt_level", "results_requests": "total_requests",
           "results_tokens": "total_output_tokens", "wall_s": "total_time_s"}
SLO_INPUTS = tuple(summary_sheet.SLO_INPUT_ROWS)  # ttft, tpot, e2el, attainment
SUMMARY_OUTPUTS = tuple(summary_sheet.SLO_OUTPUT_ROWS)  # each one of ANSWER_KEYS
CAPACITY_INPUTS = tuple(summary_sheet.SLO_CAPACITY_INPUT_ROWS)  # rpm, tpm, target_tps, prices, gpus
CAPACITY_OUTPUTS = tuple(summary_sheet.SLO_CAPACITY_OUTPUT_ROWS)  # each one of CAP_ANSWER_KEYS
assert set(CAPACITY_OUTPUTS) <= set(CAP_ANSWER_KEYS) and set(SUMMARY_OUTPUTS) <= set(ANSWER_KEYS)
# tpm_ok's values: within the limit, over it, not measured (no prompt tokens: cannot be proven under it)
TPM_WITHIN, TPM_OVER, TPM_NOT_MEASURED = 1, 0, -1

TEXTS: dict[str, dict[str, str]] = {
    "zh": {
        "title": "逐请求 SLO：达成率（Wilson 95% 区间）与 goodput（DistServe 定义）",
        "note": "一个请求在成功且满足每个已设阈值（≤）时为好请求；失败请求算未达成。达成率 = 好请求数 / 请求数；"
                "goodput = 好请求的输出 token / 该实验的总时长。阈值与达成目标在总览表输入。",
        "source_none": "没有逐请求记录（scm-xl collect 在结果 CSV 旁写的 requests CSV）：达成率与 goodput 无法计算。",
        "source": "逐请求记录：{requests} 个请求，来自 {path}（不含预热请求）",
        "ttft": "TTFT 阈值 (s)（生效值）", "tpot": "TPOT 阈值 (s)（生效值）", "e2el": "端到端延迟阈值 (s)（生效值）",
        "attainment": "达成率目标（生效值）", "thresholds": "已设阈值个数", "target_tps": "目标 TPS（双向推导表）",
        "levels": "提示长度档位数", "requests": "逐请求记录数",
        "slot": "答案：配置表中的序号", "model": "模型", "concurrency": "并发数", "max_tokens": "max_tokens",
        "attainment_a": "达成率", "low": "达成率下限 (Wilson 95%)", "high": "达成率上限 (Wilson 95%)",
        "tps": "TPS", "goodput": "goodput (tok/s)", "status": "结论",
        "no_slo": "未设 SLO 阈值：在总览表输入 ttft、tpot 或 e2el",
        "no_requests": "没有逐请求记录：用 scm-xl fill 填入带 requests CSV 的结果",
        "no_target": "双向推导表没有目标 TPS",
        "levels_many": "实验跨多个提示长度档位：用 scm-xl solve --slo --prompt-tokens 选择一个",
        "found": "满足 SLO 且达到目标 TPS 的最便宜实测配置",
        "none": "没有实测配置在目标 TPS 下满足 SLO",
        "exp_table": "每个实验", "cell_table": "每个配置（重复实验合并，按成本排序）",
        "no": "#", "exp_id": "exp_id", "cell_no": "配置序号", "position": "原始数据位置",
        "prompt_level": "提示长度档位", "requests_c": "请求数", "output_tokens": "输出 token",
        "results_requests": "结果行请求数", "results_tokens": "结果行输出 token", "wall_s": "总时长 (s)",
        "judged": "可判定", "good": "好请求数", "good_tokens": "好请求输出 token", "experiments": "实验数",
        "level_code": "档位代码", "new_level": "新档位", "meets": "满足 SLO", "qualifies": "满足且达到目标",
        "r_exp_no": "实验序号", "r_ok": "成功 (1/0)", "r_ttft_s": "ttft_s", "r_latency_s": "latency_s",
        "r_output_tokens": "输出 token", "r_prompt_tokens": "提示 token", "r_line": "CSV 行号",
        "r_tpot_s": "tpot_s", "r_good": "好请求 (1/0)",
        "s_heading": "逐请求 SLO（DistServe goodput；阈值空 = 不用）",
        "s_ttft": "TTFT 阈值 (s)", "s_tpot": "TPOT 阈值 (s)", "s_e2el": "端到端延迟阈值 (s)",
        "s_attainment": "达成率目标", "s_status": "SLO 结论", "s_concurrency": "该配置并发数",
        "s_max_tokens": "该配置 max_tokens", "s_model": "该配置模型", "s_attainment_o": "该配置达成率",
        "s_low": "达成率下限 (Wilson 95%)", "s_tps": "该配置 TPS", "s_goodput": "该配置 goodput (tok/s)",
    },
    "en": {
        "title": "Per-request SLO: attainment (Wilson 95% interval) and goodput (the DistServe definition)",
        "note": "A request is good when it succeeded and every threshold set holds (<=); a failed request is a "
                "miss. Attainment = good / requests; goodput = good requests' output tokens / the experiment's "
                "total time. The thresholds and the attainment target are typed on the Summary.",
        "source_none": "No per-request records (the requests CSV scm-xl collect writes beside the results CSV): "
                       "attainment and goodput cannot be computed.",
        "source": "Per-request records: {requests} requests from {path} (warm-up requests left out)",
        "ttft": "TTFT threshold (s) (effective)", "tpot": "TPOT threshold (s) (effective)",
        "e2el": "end-to-end latency threshold (s) (effective)", "attainment": "attainment target (effective)",
        "thresholds": "thresholds set", "target_tps": "target TPS (Derivation sheet)",
        "levels": "prompt levels", "requests": "per-request records",
        "slot": "answer: # in the configurations table", "model": "model", "concurrency": "concurrency",
        "max_tokens": "max_tokens", "attainment_a": "attainment", "low": "attainment lower bound (Wilson 95%)",
        "high": "attainment upper bound (Wilson 95%)", "tps": "TPS", "goodput": "goodput (tok/s)",
        "status": "answer",
        "no_slo": "no SLO threshold set: type ttft, tpot or e2el on the Summary",
        "no_requests": "no per-request records: fill results that have their requests CSV beside them",
        "no_target": "no target TPS on the Derivation sheet",
        "levels_many": "the experiments span several prompt levels: choose one with scm-xl solve --slo --prompt-tokens",
        "found": "the cheapest measured configuration that meets the SLO at the target TPS",
        "none": "no measured configuration meets the SLO at the target TPS",
        "exp_table": "Per experiment", "cell_table": "Per configuration (repeats pooled, in cost order)",
        "no": "#", "exp_id": "exp_id", "cell_no": "configuration #", "position": "raw-data position",
        "prompt_level": "prompt level", "requests_c": "requests", "output_tokens": "output tokens",
        "results_requests": "results row's requests", "results_tokens": "results row's tokens",
        "wall_s": "total time (s)", "judged": "judged", "good": "good requests", "good_tokens": "good output tokens",
        "experiments": "experiments", "level_code": "level code", "new_level": "new level",
        "meets": "meets the SLO", "qualifies": "meets it at the target",
        "r_exp_no": "experiment #", "r_ok": "succeeded (1/0)", "r_ttft_s": "ttft_s", "r_latency_s": "latency_s",
        "r_output_tokens": "output tokens", "r_prompt_tokens": "prompt tokens", "r_line": "CSV line",
        "r_tpot_s": "tpot_s", "r_good": "good (1/0)",
        "s_heading": "Under a per-request SLO (DistServe goodput; a blank threshold is not used)",
        "s_ttft": "TTFT threshold (s)", "s_tpot": "TPOT threshold (s)", "s_e2el": "end-to-end latency threshold (s)",
        "s_attainment": "attainment target", "s_status": "SLO answer", "s_concurrency": "its concurrency",
        "s_max_tokens": "its max_tokens", "s_model": "its model", "s_attainment_o": "its attainment",
        "s_low": "its attainment lower bound (Wilson 95%)", "s_tps": "its TPS", "s_goodput": "its goodput (tok/s)",
    },
}

_HEADROOM = f"{RATE_LIMIT_HEADROOM:.0%}"
# Replicas, cost and rate limits: the SLO sheet's capacity rows, its column headers and the Summary's block.
CAPACITY_TEXTS: dict[str, dict[str, str]] = {
    "zh": {
        "cap_heading": "副本、成本与限流（scm_xl.capacity；输入在总览表）",
        "c_rpm": "每分钟请求数限额 RPM（生效值）", "c_tpm": "每分钟 token 限额 TPM（生效值）",
        "c_rpm_allowed": f"可用 RPM（限额 × {_HEADROOM}）", "c_tpm_allowed": f"可用 TPM（限额 × {_HEADROOM}）",
        "c_target_tps": "部署目标 TPS（空 = 双向推导表的目标 TPS）", "c_price_in": "输入价格 / 百万 token（生效值）",
        "c_price_out": "输出价格 / 百万 token（生效值）", "c_gpu_hour_price": "GPU 每小时价格（生效值）",
        "c_gpus": "每副本 GPU 数（生效值）", "c_pricing": "计价方式",
        "p_tokens": "按 token 计价", "p_gpu": "按 GPU 小时计价", "p_none": "未给价格",
        "p_both": "两种价格都给了：不计成本（只留一种）",
        "c_minimise": "选择依据（生效值）",
        "no_price": "按成本选择（cost）需要价格：请填写输入与输出 token 的价格，或 GPU 每小时价格与每副本 GPU 数",
        "a_status": "方案提示",
        "a_slot_free": "不计限流时的答案：配置表序号", "a_slot": "答案：配置表序号（满足 SLO 与限流）",
        "a_replicas": "副本数", "a_model": "每副本：模型", "a_concurrency": "每副本：并发数",
        "a_max_tokens": "每副本：max_tokens", "a_tps": "每副本 TPS", "a_capacity_tps": "部署总 TPS",
        "a_rpm": "满载 RPM（整个部署）", "a_tpm": "满载 TPM（整个部署）", "a_cost_million": "每百万输出 token 成本",
        "a_cost_hour": "部署每小时成本", "a_bound": "受限于", "a_binding": "起约束的限流",
        "why_rpm_limit": "每分钟请求数超过限额（含余量）", "why_tpm_limit": "每分钟 token 数超过限额（含余量）",
        "why_tpm_unmeasured": "没有实测提示 token，无法证明每分钟 token 数在限额内",
        "lat_sum": "延迟合计 (s)", "lat_n": "有延迟的请求", "prompt_sum": "提示 token 合计",
        "prompt_n": "有提示 token 的成功请求", "mean_latency": "平均延迟 (s)", "mean_prompt": "平均提示 token",
        "mean_output": "平均输出 token", "replicas": "副本数", "rpm": "满载 RPM", "tpm": "满载 TPM",
        "rpm_ok": "RPM 在限额内", "tpm_ok": "TPM 在限额内（-1 = 未测）", "input_per_output": "每输出 token 的输入 token",
        "cost_million": "每百万输出 token 成本", "cost_hour": "每小时成本", "free": "候选（不计限流）",
        "fits": "候选（限流内）",
        "sc_heading": f"副本、成本与限流（空 = 不用；限额用 {_HEADROOM}）",
        "sc_rpm": "RPM 限额（每分钟请求）", "sc_tpm": "TPM 限额（每分钟 token）",
        "sc_target_tps": "部署目标 TPS（空 = 反向推导的目标）", "sc_price_in": "输入价格 / 百万 token",
        "sc_price_out": "输出价格 / 百万 token", "sc_gpu_hour_price": "GPU 每小时价格", "sc_gpus": "每副本 GPU 数",
        "sc_bound": "受限于（limit-bound / server-bound）", "sc_binding": "起约束的限流", "sc_replicas": "副本数",
        "sc_concurrency": "每副本并发数", "sc_max_tokens": "每副本 max_tokens", "sc_model": "每副本模型",
        "sc_cost_million": "每百万输出 token 成本", "sc_cost_hour": "部署每小时成本",
        "sc_minimise": "选择依据（concurrency = 最少副本与并发；cost = 最低成本，需要价格）", "sc_status": "方案提示",
        "o_hour": "每小时成本", "o_cheap": "每小时成本最低者的副本数", "o_million": "其每百万输出 token 成本",
        "o_cheapest": "再按每百万成本最低者的副本数", "o_free": "（不计限流）", "o_fits": "（限流内）",
    },
    "en": {
        "cap_heading": "Replicas, cost and rate limits (scm_xl.capacity; typed on the Summary)",
        "c_rpm": "requests-per-minute limit (effective)", "c_tpm": "tokens-per-minute limit (effective)",
        "c_rpm_allowed": f"RPM allowed (limit x {_HEADROOM})", "c_tpm_allowed": f"TPM allowed (limit x {_HEADROOM})",
        "c_target_tps": "deployment target TPS (blank on the Summary: the Derivation's)",
        "c_price_in": "price per million input tokens (effective)",
        "c_price_out": "price per million output tokens (effective)",
        "c_gpu_hour_price": "price per GPU-hour (effective)", "c_gpus": "GPUs per replica (effective)",
        "c_pricing": "pricing",
        "p_tokens": "per token", "p_gpu": "per GPU-hour", "p_none": "no price",
        "p_both": "both prices given: no cost (keep one)",
        "c_minimise": "choose by (effective)",
        "no_price": "minimise cost needs a price: type the prices per million input and output tokens, or a "
                    "GPU-hour price and GPUs per replica",
        "a_status": "note",
        "a_slot_free": "answer without the rate limits: # in the configurations table",
        "a_slot": "answer: # in the configurations table (SLO and rate limits)", "a_replicas": "replicas",
        "a_model": "per replica: model", "a_concurrency": "per replica: concurrency",
        "a_max_tokens": "per replica: max_tokens", "a_tps": "TPS per replica", "a_capacity_tps": "TPS of the deployment",
        "a_rpm": "requests per minute at full load (deployment)", "a_tpm": "tokens per minute at full load (deployment)",
        "a_cost_million": "cost per million output tokens", "a_cost_hour": "cost per hour of the deployment",
        "a_bound": "bound", "a_binding": "binding rate limit",
        "why_rpm_limit": REASON_WORDS[RPM_LIMIT], "why_tpm_limit": REASON_WORDS[TPM_LIMIT],
        "why_tpm_unmeasured": REASON_WORDS[TPM_UNMEASURED],
        "lat_sum": "latency sum (s)", "lat_n": "requests with a latency", "prompt_sum": "prompt tokens",
        "prompt_n": "succeeded requests with prompt tokens", "mean_latency": "mean latency (s)",
        "mean_prompt": "mean prompt tokens", "mean_output": "mean output tokens", "replicas": "replicas",
        "rpm": "RPM at full load", "tpm": "TPM at full load", "rpm_ok": "RPM within the limit",
        "tpm_ok": "TPM within the limit (-1 = unmeasured)", "input_per_output": "input per output token",
        "cost_million": "cost per 1M output tokens", "cost_hour": "cost per hour",
        "free": "candidate (no limits)", "fits": "candidate (within the limits)",
        "sc_heading": f"Replicas, cost and rate limits (blank = not used; {_HEADROOM} of a limit is used)",
        "sc_rpm": "RPM limit (requests per minute)", "sc_tpm": "TPM limit (tokens per minute)",
        "sc_target_tps": "deployment target TPS (blank = the inverse's)",
        "sc_price_in": "price per million input tokens", "sc_price_out": "price per million output tokens",
        "sc_gpu_hour_price": "price per GPU-hour", "sc_gpus": "GPUs per replica",
        "sc_bound": "limit-bound or server-bound", "sc_binding": "its binding rate limit", "sc_replicas": "replicas",
        "sc_concurrency": "concurrency per replica", "sc_max_tokens": "max_tokens per replica",
        "sc_model": "model per replica", "sc_cost_million": "cost per million output tokens",
        "sc_cost_hour": "cost per hour of the deployment",
        "sc_minimise": "choose by (concurrency: fewest replicas and slots; cost: lowest cost, needs a price)",
        "sc_status": "plan note",
        "o_hour": "cost per hour", "o_cheap": "replicas if the lowest cost per hour",
        "o_million": "its cost per 1M output tokens", "o_cheapest": "replicas if then the lowest per 1M",
        "o_free": " (no limits)", "o_fits": " (within the limits)",
    },
}
for _lang, _texts in CAPACITY_TEXTS.items():
    assert not set(_texts) & set(TEXTS[_lang]), set(_texts) & set(TEXTS[_lang])
    TEXTS[_lang].update(_texts)
    # the order's stage columns: "cost per hour (no limits)", ...
    TEXTS[_lang].update({f"{s}_{stage}": _texts[f"o_{stage}"] + _texts[f"o_{s}"]
                         for s in ("free", "fits") for stage in ORDER_STAGES})

# The two tables' column headers ("h_" + the key of EXP_KEYS or CELL_KEYS): words a person reads,
# short enough that a column is as narrow as its figures (header_cells wraps them and widens a
# column to its longest word; a Chinese header is spaced where it may wrap). The JSON and the
# formulas keep the keys.
HEADER_TEXTS: dict[str, dict[str, str]] = {
    "zh": {  # a Chinese word after another on a line may wrap inside it: each starts a line of its own
        "no": "#", "exp_id": "实验编号", "cell_no": "配置序号", "position": "原始数据\n位置", "model": "模型",
        "concurrency": "并发数", "max_tokens": "max_tokens", "prompt_level": "提示档位", "requests": "请求数",
        "output_tokens": "输出 token", "results_requests": "结果行\n请求数", "results_tokens": "结果行\n输出 token",
        "wall_s": "总时长 (s)", "judged": "可判定 (1/0)", "good": "好请求数", "good_tokens": "好请求\n输出 token",
        "attainment": "达成率", "low": "下限 (95%)", "high": "上限 (95%)", "tps": "TPS",
        "goodput": "goodput (tok/s)", "lat_sum": "延迟合计 (s)", "lat_n": "有延迟的\n请求数",
        "prompt_sum": "提示 token\n合计", "prompt_n": "有提示 token 的\n成功请求", "level_code": "档位代码",
        "new_level": "新档位 (1/0)", "experiments": "实验数", "meets": "满足 SLO (1/0)",
        "qualifies": "满足且\n达到目标 (1/0)", "mean_latency": "平均延迟 (s)", "mean_prompt": "平均提示 token",
        "mean_output": "平均输出 token", "replicas": "副本数", "rpm": "满载 RPM", "tpm": "满载 TPM",
        "rpm_ok": "RPM\n在限额内 (1/0)", "tpm_ok": "TPM\n在限额内\n(1/0; -1 = 未测)",
        "input_per_output": "输入/输出 token", "cost_million": "百万输出 token\n成本", "cost_hour": "每小时成本",
        "free": "候选副本数\n不计限流", "fits": "候选副本数\n限流内",
    },
    "en": {
        "no": "#", "exp_id": "exp_id", "cell_no": "config #", "position": "raw-data position", "model": "model",
        "concurrency": "concurrency", "max_tokens": "max_tokens", "prompt_level": "prompt level",
        "requests": "requests", "output_tokens": "output tokens", "results_requests": "results row's requests",
        "results_tokens": "results row's tokens", "wall_s": "total time (s)", "judged": "judged (1/0)",
        "good": "good requests", "good_tokens": "good output tokens", "attainment": "attainment",
        "low": "lower bound (95%)", "high": "upper bound (95%)", "tps": "TPS",
        "goodput": "goodput (tok/s)", "lat_sum": "latency sum (s)", "lat_n": "requests with a latency",
        "prompt_sum": "prompt tokens sum", "prompt_n": "succeeded requests with prompt tokens",
        "level_code": "prompt level code", "new_level": "first of its level (1/0)", "experiments": "experiments",
        "meets": "meets the SLO (1/0)", "qualifies": "meets it at the target TPS (1/0)",
        "mean_latency": "mean latency (s)", "mean_prompt": "mean prompt tokens", "mean_output": "mean output tokens",
        "replicas": "replicas", "rpm": "RPM at full load", "tpm": "TPM at full load",
        "rpm_ok": "RPM within the limit (1/0)", "tpm_ok": "TPM within the limit (1/0, -1 = unmeasured)",
        "input_per_output": "input / output tokens", "cost_million": "cost per 1M output tokens",
        "cost_hour": "cost per hour", "free": "candidate: replicas (no limits)",
        "fits": "candidate: replicas (within limits)",
    },
}
for _lang, _headers in HEADER_TEXTS.items():
    # the order's stage columns: "cost per hour (no limits)", ...
    _headers.update({key: TEXTS[_lang][key] for key in CELL_KEYS if key not in _headers})
    assert set(_headers) == set(EXP_KEYS) | set(CELL_KEYS), set(_headers) ^ (set(EXP_KEYS) | set(CELL_KEYS))
    TEXTS[_lang].update({f"h_{key}": text for key, text in _headers.items()})
# The columns a person does not need to read (running sums and counts, lookup positions, the 1/0
# flags and the order's stages the answers are taken from): grouped and hidden, so they neither
# crowd the screen nor print; they compute as every other column does.
EXP_HELPER_KEYS = ("position", "lat_sum", "lat_n", "prompt_sum", "prompt_n")
CELL_HELPER_KEYS = ("level_code", "new_level", "qualifies", "lat_sum", "lat_n", "prompt_sum", "prompt_n", "rpm_ok",
                    "tpm_ok", *(f"{s}_{stage}" for s in ("free", "fits") for stage in ORDER_STAGES))
TABLE_TEXT_KEYS = ("exp_id", "model")  # the tables' text columns: their headers sit left, the numbers' right
# The least width of a table column (its header may widen it): text columns, the row numbers,
# the widest figures (tokens a minute of a deployment), every other figure.
TABLE_WIDTHS = {"exp_id": 10.0, "model": 24.0, "no": 5.0, "tpm": 11.0, "rpm": 9.0, "cost_million": 10.0, "free": 13.0,
                "fits": 15.0}
FIGURE_WIDTH = 8.0
LABEL_WIDTH, VALUE_WIDTH, SPACER_WIDTH = 44.0, 12.0, 3.0  # columns A and B, the column between the tables
TEXT_CELL = Alignment(horizontal="left", indent=1, shrink_to_fit=True)  # a long model name shrinks into its cell

_Z = goodput._z(goodput.WILSON_CONFIDENCE)
_Z2 = _Z ** 2


# ---------------------------------------------------------------------------
# The data fill writes (and the reference reads back)
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Record:
    """One measured request as the requests sheet holds it."""

    exp_no: int
    exp_id: str
    ok: int  # 1: succeeded (goodput.RequestSample.succeeded)
    ttft_s: float | None
    latency_s: float | None
    output_tokens: int
    prompt_tokens: int | None
    line: int

    def sample(self) -> RequestSample:
        return RequestSample(exp_id=self.exp_id, succeeded=self.ok == 1, ttft_s=self.ttft_s,
                             latency_s=self.latency_s, output_tokens=self.output_tokens,
                             prompt_tokens=self.prompt_tokens, line=self.line)


CellKey = tuple[str, int, int, "int | None"]


@dataclass(frozen=True)
class SloData:
    """The keys and records of the two sheets: experiments (exp_id, configuration number) in table
    order, configurations (model, concurrency, max_tokens, prompt level) in cost order, and the
    records (experiment number = place in `experiments`, from 1)."""

    experiments: tuple[tuple[str, int], ...] = ()
    cells: tuple[CellKey, ...] = ()
    records: tuple[Record, ...] = ()
    source: str = ""  # the per-request CSV the records came from, as fill named it

    @property
    def empty(self) -> bool:
        return not self.records


def cost_key(cell: CellKey) -> tuple[int, int, str, int]:
    """goodput.SloCell.cost, with the prompt level last (one level per search)."""
    model, concurrency, max_tokens, level = cell
    return (concurrency, max_tokens, model.casefold(), -1 if level is None else level)


def from_samples(rows: Sequence[Any], samples: RequestSamples) -> SloData:
    """The sheets' data for the results rows and the requests CSV read for them: every results row
    an experiment (in the rows' order), its configuration, and its measured requests. InputError
    (exit 2) when the records are more than a workbook holds."""
    experiments_of: dict[str, int] = {}
    keys: dict[tuple[str, int, int, int | None], CellKey] = {}
    for row in rows:
        experiments_of.setdefault(row.exp_id, len(experiments_of) + 1)
        key = (row.model.casefold(), row.concurrency, row.max_tokens, row.prompt_level)
        keys.setdefault(key, (row.model, row.concurrency, row.max_tokens, row.prompt_level))
    cells = sorted(keys.values(), key=cost_key)
    number = {(m.casefold(), c, t, p): i for i, (m, c, t, p) in enumerate(cells, start=1)}
    experiments = tuple((row.exp_id, number[(row.model.casefold(), row.concurrency, row.max_tokens,
                                             row.prompt_level)]) for row in rows)
    count = sum(len(samples.by_exp.get(exp_id, ())) for exp_id in experiments_of)
    if count > MAX_REQUEST_ROWS:
        raise InputError(f"{count:,} measured requests: a workbook holds at most {MAX_REQUEST_ROWS:,} per-request "
                         "records; split the results, or move the requests CSV away to fill without per-request "
                         "SLOs", path=str(samples.path))
    records = []
    for exp_id, exp_no in experiments_of.items():
        for s in samples.by_exp.get(exp_id, ()):
            records.append(Record(exp_no, exp_id, 1 if s.succeeded else 0, s.ttft_s, s.latency_s, s.output_tokens,
                                  s.prompt_tokens, s.line))
    return SloData(experiments, tuple(cells), tuple(records), source=str(samples.path) if records else "")


def wildcard_exp_id(rows: Sequence[Any]) -> str | None:
    """The first exp_id a spreadsheet lookup would read as a pattern, if any."""
    return next((row.exp_id for row in rows if any(ch in row.exp_id for ch in WILDCARDS)), None)


# ---------------------------------------------------------------------------
# Where things are
# ---------------------------------------------------------------------------

def _last(count: int) -> int:
    """The last row of a table of `count` rows from FIRST (a one-row range when empty)."""
    return FIRST + max(count, 1) - 1


def _range(col: str, first: int, last: int, sheet: str = "") -> str:
    return f"{sheet}${col}${first}:${col}${last}"


def req_range(layout: Layout, key: str, count: int) -> str:
    title = f"'{REQUESTS_TITLES[layout.lang]}'!"
    return _range(REQ_COLS[key], REQ_FIRST, REQ_FIRST + max(count, 1) - 1, title)


def setting(key: str) -> str:
    return f"$B${SETTING_ROWS[key]}"


def answer_cell(key: str) -> str:
    return f"B{ANSWER_ROWS[key]}"


def cap_setting(key: str) -> str:
    return f"$B${CAP_SETTING_ROWS[key]}"


def cap_answer_cell(key: str) -> str:
    return f"B{CAP_ANSWER_ROWS[key]}"


def capacity_input(key: str) -> str:
    """The Summary's input cell of a capacity input (rpm, tpm, target_tps, prices, gpus)."""
    return summary_sheet.slo_cell("capacity_in", key)


def capacity_output(key: str) -> str:
    return summary_sheet.slo_cell("capacity_out", key)


def summary_input(key: str) -> str:
    """The Summary's input cell of an SLO input (ttft, tpot, e2el, attainment)."""
    return summary_sheet.slo_cell("slo_in", key)


def summary_output(key: str) -> str:
    return summary_sheet.slo_cell("slo_out", key)


# ---------------------------------------------------------------------------
# Formulas
# ---------------------------------------------------------------------------

def _wilson(p: str, n: str, sign: str) -> str:
    """The Wilson bound of share `p` over `n` requests (goodput.wilson_interval)."""
    centre = f"({p}+{_Z2!r}/(2*{n}))/(1+{_Z2!r}/{n})"
    half = f"SQRT({p}*(1-{p})/{n}+{_Z2!r}/(4*{n}*{n}))*{_Z!r}/(1+{_Z2!r}/{n})"
    return f"MAX(0,{centre}-{half})" if sign == "-" else f"MIN(1,{centre}+{half})"


def request_formulas(layout: Layout, row: int) -> dict[str, str]:
    c = {key: f"${col}{row}" for key, col in REQ_COLS.items()}
    slo = f"'{SHEET_TITLES[layout.lang]}'!"
    ttft, tpot, e2el, count = (slo + setting(key) for key in ("ttft", "tpot", "e2el", "thresholds"))
    ok_ttft = f"IF(ISNUMBER({ttft}),IF(ISNUMBER({c['ttft_s']}),{c['ttft_s']}<={ttft},FALSE),TRUE)"
    ok_tpot = (f"IF(ISNUMBER({tpot}),IF({c['output_tokens']}<=1,TRUE,IF(ISNUMBER({c['tpot_s']}),"
               f"{c['tpot_s']}<={tpot},FALSE)),TRUE)")
    ok_e2el = f"IF(ISNUMBER({e2el}),IF(ISNUMBER({c['latency_s']}),{c['latency_s']}<={e2el},FALSE),TRUE)"
    return {
        "tpot_s": (f"=IF(AND({c['output_tokens']}>1,ISNUMBER({c['ttft_s']}),ISNUMBER({c['latency_s']})),"
                   f"({c['latency_s']}-{c['ttft_s']})/({c['output_tokens']}-1),\"\")"),
        "good": f"=IF({count}>0,IF(AND({c['ok']}=1,{ok_ttft},{ok_tpot},{ok_e2el}),1,0),\"\")",
    }


def experiment_formulas(layout: Layout, row: int, data_sizes: tuple[int, int, int]) -> dict[str, str]:
    _, _, n_req = data_sizes
    c = {key: f"${col}{row}" for key, col in EXP_COLS.items()}
    req = {key: req_range(layout, key, n_req) for key in ("exp_no", "output_tokens", "good", "ok", "latency_s",
                                                          "prompt_tokens")}
    count = setting("thresholds")
    match = f"MATCH({c['exp_id']},{layout.raw_range('exp_id')},0)"
    pos = c["position"]
    out = {"position": f"=IFERROR(IF(INDEX({layout.raw_range('present')},{match})=1,{match},\"\"),\"\")"}
    for key, source in LOOKUPS.items():
        value = f"INDEX({layout.raw_range(source)},{pos})"
        out[key] = (f"=IF(ISNUMBER({pos}),IF({value}&\"\"=\"\",\"\",{value}),\"\")" if key == "prompt_level"
                    else f"=IF(ISNUMBER({pos}),{value},\"\")")
    n, att, judged = c["requests"], c["attainment"], c["judged"]
    out.update({
        "requests": f"=COUNTIF({req['exp_no']},{c['no']})",
        "output_tokens": f"=SUMIF({req['exp_no']},{c['no']},{req['output_tokens']})",
        "judged": (f"=IF(ISNUMBER({pos}),IF(AND({n}>0,{n}={c['results_requests']},"
                   f"{c['output_tokens']}={c['results_tokens']}),1,0),0)"),
        "good": f"=IF(AND({judged}=1,{count}>0),COUNTIFS({req['exp_no']},{c['no']},{req['good']},1),\"\")",
        "good_tokens": (f"=IF(AND({judged}=1,{count}>0),SUMIFS({req['output_tokens']},{req['exp_no']},{c['no']},"
                        f"{req['good']},1),\"\")"),
        "attainment": f"=IF(ISNUMBER({c['good']}),{c['good']}/{n},\"\")",
        "low": f"=IF(ISNUMBER({att}),{_wilson(att, n, '-')},\"\")",
        "high": f"=IF(ISNUMBER({att}),{_wilson(att, n, '+')},\"\")",
        "tps": f"=IF(AND({judged}=1,{c['wall_s']}>0),{c['output_tokens']}/{c['wall_s']},\"\")",
        "goodput": f"=IF(AND(ISNUMBER({c['good_tokens']}),{c['wall_s']}>0),{c['good_tokens']}/{c['wall_s']},\"\")",
        # what capacity's traffic needs: every latency measured, the succeeded requests' prompts
        "lat_sum": f"=SUMIFS({req['latency_s']},{req['exp_no']},{c['no']},{req['latency_s']},\">=0\")",
        "lat_n": f"=COUNTIFS({req['exp_no']},{c['no']},{req['latency_s']},\">=0\")",
        "prompt_sum": (f"=SUMIFS({req['prompt_tokens']},{req['exp_no']},{c['no']},{req['ok']},1,"
                       f"{req['prompt_tokens']},\">=0\")"),
        "prompt_n": f"=COUNTIFS({req['exp_no']},{c['no']},{req['ok']},1,{req['prompt_tokens']},\">=0\")",
    })
    return out


def cell_formulas(layout: Layout, row: int, data_sizes: tuple[int, int, int]) -> dict[str, str]:
    n_exp, n_cells, _ = data_sizes
    c = {key: f"${col}{row}" for key, col in CELL_COLS.items()}
    last = _last(n_exp)
    exp = {key: _range(EXP_COLS[key], FIRST, last) for key in EXP_KEYS}
    count = setting("thresholds")
    pooled = f"{exp['cell_no']},{c['no']},{exp['judged']},1"
    n, att, low, tps = c["requests"], c["attainment"], c["low"], c["tps"]
    code_col = CELL_COLS["level_code"]
    target, target_tps = setting("attainment"), setting("target_tps")
    return {
        "level_code": f"=IF(ISNUMBER({c['prompt_level']}),{c['prompt_level']},-1)",
        "new_level": f"=IF(COUNTIF(${code_col}${FIRST}:{c['level_code']},{c['level_code']})=1,1,0)",
        "experiments": f"=COUNTIFS({pooled})",
        "requests": f"=SUMIFS({exp['requests']},{pooled})",
        "good": f"=IF({count}>0,SUMIFS({exp['good']},{pooled}),\"\")",
        "output_tokens": f"=SUMIFS({exp['output_tokens']},{pooled})",
        "good_tokens": f"=IF({count}>0,SUMIFS({exp['good_tokens']},{pooled}),\"\")",
        "wall_s": f"=SUMIFS({exp['wall_s']},{pooled})",
        "attainment": f"=IF(AND({count}>0,{n}>0),{c['good']}/{n},\"\")",
        "low": f"=IF(ISNUMBER({att}),{_wilson(att, n, '-')},\"\")",
        "high": f"=IF(ISNUMBER({att}),{_wilson(att, n, '+')},\"\")",
        "tps": f"=IF(AND({c['experiments']}>0,{c['wall_s']}>0),{c['output_tokens']}/{c['wall_s']},\"\")",
        "goodput": f"=IF(AND(ISNUMBER({att}),{c['wall_s']}>0),{c['good_tokens']}/{c['wall_s']},\"\")",
        "meets": f"=IF(ISNUMBER({low}),IF({low}>={target},1,0),\"\")",
        "qualifies": (f"=IF(AND({c['meets']}=1,ISNUMBER({tps}),ISNUMBER({target_tps})),"
                      f"IF({tps}>={target_tps},1,0),0)"),
        **_capacity_cell_formulas(c, exp, pooled),
        **_order_formulas(c, {key: _range(CELL_COLS[key], FIRST, _last(n_cells)) for key in CELL_KEYS}),
    }


def _capacity_cell_formulas(c: Mapping[str, str], exp: Mapping[str, str], pooled: str) -> dict[str, str]:
    """One configuration scaled to the deployment's target (capacity.option): replicas, traffic at
    full load against the limits, cost; and whether it is a candidate without and within the limits."""
    target = cap_setting("target_tps")
    allowed_rpm, allowed_tpm = cap_setting("rpm_allowed"), cap_setting("tpm_allowed")
    price_in, price_out = cap_setting("price_in"), cap_setting("price_out")
    gpu_price, gpus = cap_setting("gpu_hour_price"), cap_setting("gpus")
    att, tps, rep, lat = c["attainment"], c["tps"], c["replicas"], c["mean_latency"]
    rpm, tpm, ipo, cost = c["rpm"], c["tpm"], c["input_per_output"], c["cost_million"]
    ceil = f"-INT(-{target}/{tps})"  # capacity.replicas_for, float noise included
    replicas = f"{ceil}-IF(AND({ceil}>1,({ceil}-1)*{tps}>={target}*(1-1E-12)),1,0)"
    hour, million = repr(capacity._SECONDS_PER_HOUR), repr(capacity._PER_MILLION)
    return {
        **{key: f"=SUMIFS({exp[key]},{pooled})" for key in ("lat_sum", "lat_n", "prompt_sum", "prompt_n")},
        "mean_latency": f"=IF({c['lat_n']}>0,{c['lat_sum']}/{c['lat_n']},\"\")",
        "mean_prompt": f"=IF({c['prompt_n']}>0,{c['prompt_sum']}/{c['prompt_n']},\"\")",
        "mean_output": f"=IF({c['requests']}>0,{c['output_tokens']}/{c['requests']},\"\")",
        "replicas": (f"=IF(AND(ISNUMBER({att}),ISNUMBER({tps}),ISNUMBER({target})),"
                     f"IF({tps}>0,{replicas},\"\"),\"\")"),
        "rpm": (f"=IF(AND(ISNUMBER({rep}),ISNUMBER({lat})),IF({lat}>0,"
                f"{rep}*{RATE_LIMIT_WINDOW_S!r}*{c['concurrency']}/{lat},\"\"),\"\")"),
        "tpm": f"=IF(AND(ISNUMBER({rpm}),ISNUMBER({c['mean_prompt']})),{rpm}*({c['mean_prompt']}+{c['mean_output']}),\"\")",
        "rpm_ok": (f"=IF(ISNUMBER({rep}),IF(ISNUMBER({allowed_rpm}),IF(ISNUMBER({rpm}),"
                   f"IF({rpm}<={allowed_rpm},1,0),0),1),\"\")"),
        "tpm_ok": (f"=IF(ISNUMBER({rep}),IF(ISNUMBER({allowed_tpm}),IF(ISNUMBER({tpm}),"
                   f"IF({tpm}<={allowed_tpm},{TPM_WITHIN},{TPM_OVER}),{TPM_NOT_MEASURED}),{TPM_WITHIN}),\"\")"),
        "input_per_output": (f"=IF(AND(ISNUMBER({c['mean_prompt']}),ISNUMBER({c['mean_output']})),"
                             f"IF({c['mean_output']}>0,{c['mean_prompt']}/{c['mean_output']},\"\"),\"\")"),
        "cost_million": (f"=IF(ISNUMBER({rep}),IF(ISNUMBER({price_out}),IF(ISNUMBER({ipo}),"
                         f"{price_in}*{ipo}+{price_out},\"\"),IF(ISNUMBER({gpus}),"
                         f"{gpus}*{gpu_price}/({tps}*{hour})*{million},\"\")),\"\")"),
        "cost_hour": (f"=IF(ISNUMBER({rep}),IF(ISNUMBER({gpus}),{rep}*{gpus}*{gpu_price},"
                      f"IF(ISNUMBER({cost}),{target}*{hour}/{million}*{cost},\"\")),\"\")"),
        # a candidate meets the SLO and can be costed (token pricing needs the prompt tokens)
        "free": (f"=IF(AND(ISNUMBER({rep}),{c['meets']}=1),IF(OR(NOT(ISNUMBER({price_out})),ISNUMBER({cost})),"
                 f"{rep},\"\"),\"\")"),
        "fits": f"=IF(ISNUMBER({c['free']}),IF(AND({c['rpm_ok']}=1,{c['tpm_ok']}={TPM_WITHIN}),{c['free']},\"\"),\"\")",
    }


def _by_concurrency() -> str:
    """The plan's order is minimise concurrency (its cost stages let every candidate through)."""
    return f"{cap_setting('minimise')}={_q(capacity.MINIMISE_CONCURRENCY)}"


def _lowest(mine: str, column: str) -> str:
    """`mine` is the lowest of `column`'s numbers; a blank (no cost: capacity._order's inf) is
    the lowest only where the column has no number."""
    return f"IF(ISNUMBER({mine}),{mine}=MIN({column}),COUNT({column})=0)"


def _order_formulas(c: Mapping[str, str], cells: Mapping[str, str]) -> dict[str, str]:
    """capacity._order's cost stages, for the candidates without the limits (free) and within
    them (fits): the cost per hour, the candidate's replicas if it is the lowest, its cost per
    million output tokens, its replicas if that is the lowest too. The answer is the fewest
    replicas of the last stage, the first in table order."""
    out = {}
    for s in ("free", "fits"):
        hour, cheap, million, cheapest = (f"{s}_{stage}" for stage in ORDER_STAGES)
        out.update({
            hour: f"=IF(ISNUMBER({c[s]}),{c['cost_hour']},\"\")",
            cheap: (f"=IF(ISNUMBER({c[s]}),IF(OR({_by_concurrency()},{_lowest(c[hour], cells[hour])}),"
                    f"{c[s]},\"\"),\"\")"),
            million: f"=IF(ISNUMBER({c[cheap]}),{c['cost_million']},\"\")",
            cheapest: (f"=IF(ISNUMBER({c[cheap]}),IF(OR({_by_concurrency()},{_lowest(c[million], cells[million])}),"
                       f"{c[s]},\"\"),\"\")"),
        })
    return out


def top_formulas(layout: Layout, data_sizes: tuple[int, int, int]) -> dict[str, str]:
    """address -> formula of the settings and the answer."""
    _, n_cells, n_req = data_sizes
    t = TEXTS[layout.lang]
    summary = f"{layout.qtitle('summary')}!"
    out: dict[str, str] = {}
    for key in ("ttft", "tpot", "e2el"):
        typed = f"{summary}$B${summary_sheet.SLO_INPUT_ROWS[key]}"
        out[f"B{SETTING_ROWS[key]}"] = f"=IF(AND(ISNUMBER({typed}),{typed}>0),{typed},\"\")"
    typed = f"{summary}$B${summary_sheet.SLO_INPUT_ROWS['attainment']}"
    out[f"B{SETTING_ROWS['attainment']}"] = (f"=IF(AND(ISNUMBER({typed}),{typed}>0,{typed}<1),{typed},"
                                             f"{DEFAULT_ATTAINMENT!r})")
    out[f"B{SETTING_ROWS['thresholds']}"] = f"=COUNT({setting('ttft')}:{setting('e2el')})"
    target = layout.name_ref("TargetTPS")
    out[f"B{SETTING_ROWS['target_tps']}"] = f"=IF(AND(ISNUMBER({target}),{target}>0),{target},\"\")"
    last = _last(n_cells)
    cells = {key: _range(CELL_COLS[key], FIRST, last) for key in CELL_KEYS}
    out[f"B{SETTING_ROWS['levels']}"] = f"=SUM({cells['new_level']})"
    out[f"B{SETTING_ROWS['requests']}"] = f"=COUNT({req_range(layout, 'exp_no', n_req)})"
    slot = f"$B${ANSWER_ROWS['slot']}"
    out[answer_cell("slot")] = (f"=IF(AND({setting('thresholds')}>0,{setting('levels')}<=1),"
                                f"IFERROR(MATCH(1,{cells['qualifies']},0),\"\"),\"\")")
    for key in ANSWER_KEYS[1:-1]:
        value = f"INDEX({cells[key]},{slot})" + ('&""' if key == "model" else "")
        out[answer_cell(key)] = f"=IF(ISNUMBER({slot}),{value},\"\")"
    out[answer_cell("status")] = (
        f"=IF({setting('thresholds')}=0,{_q(t['no_slo'])},IF({setting('requests')}=0,{_q(t['no_requests'])},"
        f"IF(NOT(ISNUMBER({setting('target_tps')})),{_q(t['no_target'])},IF({setting('levels')}>1,"
        f"{_q(t['levels_many'])},IF(ISNUMBER({slot}),{_q(t['found'])},{_q(t['none'])})))))")
    out.update(_capacity_top_formulas(layout, cells))
    return out


def _nonnegative(ref: str) -> str:
    return f"IF(ISNUMBER({ref}),{ref}>=0,FALSE)"


def _capacity_top_formulas(layout: Layout, cells: Mapping[str, str]) -> dict[str, str]:
    """The effective capacity inputs and the plan's answer (capacity.plan in the order chosen:
    the fewest replicas of the order's last stage, then the configurations table's order)."""
    t = TEXTS[layout.lang]
    summary = f"{layout.qtitle('summary')}!"
    typed = {key: f"{summary}$B${row}" for key, row in summary_sheet.SLO_CAPACITY_INPUT_ROWS.items()}
    out: dict[str, str] = {}
    for key in ("rpm", "tpm"):
        out[f"B{CAP_SETTING_ROWS[key]}"] = f"=IF(AND(ISNUMBER({typed[key]}),{typed[key]}>0),{typed[key]},\"\")"
        out[f"B{CAP_SETTING_ROWS[key + '_allowed']}"] = (
            f"=IF(ISNUMBER({cap_setting(key)}),{RATE_LIMIT_HEADROOM!r}*{cap_setting(key)},\"\")")
    deploy = typed["target_tps"]
    out[f"B{CAP_SETTING_ROWS['target_tps']}"] = (f"=IF(AND(ISNUMBER({deploy}),{deploy}>0),{deploy},"
                                                 f"{setting('target_tps')})")
    gpus = typed["gpus"]
    tokens = f"AND({_nonnegative(typed['price_in'])},{_nonnegative(typed['price_out'])})"
    gpu = f"AND({_nonnegative(typed['gpu_hour_price'])},IF(ISNUMBER({gpus}),AND({gpus}>=1,{gpus}=INT({gpus})),FALSE))"
    for key, mine, other in (("price_in", tokens, gpu), ("price_out", tokens, gpu),
                             ("gpu_hour_price", gpu, tokens), ("gpus", gpu, tokens)):
        out[f"B{CAP_SETTING_ROWS[key]}"] = f"=IF(AND({mine},NOT({other})),{typed[key]},\"\")"
    out[f"B{CAP_SETTING_ROWS['pricing']}"] = (f"=IF(AND({tokens},{gpu}),{_q(t['p_both'])},IF({tokens},"
                                              f"{_q(t['p_tokens'])},IF({gpu},{_q(t['p_gpu'])},{_q(t['p_none'])})))")
    minimise = typed["minimise"]
    cost, concurrency = _q(capacity.MINIMISE_COST), _q(capacity.MINIMISE_CONCURRENCY)
    out[f"B{CAP_SETTING_ROWS['minimise']}"] = f"=IF({minimise}&\"\"={cost},{cost},{concurrency})"
    # capacity.plan refuses minimise cost without a price: no answer, and the note says why
    priced = f"OR(ISNUMBER({cap_setting('price_out')}),ISNUMBER({cap_setting('gpus')}))"
    out[cap_answer_cell("status")] = (f"=IF(AND({cap_setting('minimise')}={cost},NOT({priced})),"
                                      f"{_q(t['no_price'])},\"\")")
    ready = (f"AND({setting('thresholds')}>0,{setting('requests')}>0,ISNUMBER({cap_setting('target_tps')}),"
             f"{setting('levels')}<=1,OR({_by_concurrency()},{priced}))")
    for key, column in (("slot_free", cells["free_cheapest"]), ("slot", cells["fits_cheapest"])):
        out[cap_answer_cell(key)] = f"=IF(AND({ready},COUNT({column})>0),MATCH(MIN({column}),{column},0),\"\")"
    slot, free = f"$B${CAP_ANSWER_ROWS['slot']}", f"$B${CAP_ANSWER_ROWS['slot_free']}"
    for key in ("replicas", "model", "concurrency", "max_tokens", "tps", "rpm", "tpm", "cost_million", "cost_hour"):
        value = f"INDEX({cells[key]},{slot})" + ('&""' if key == "model" else "")
        out[cap_answer_cell(key)] = f"=IF(ISNUMBER({slot}),{value},\"\")"
    out[cap_answer_cell("capacity_tps")] = (f"=IF(ISNUMBER({slot}),INDEX({cells['replicas']},{slot})*"
                                            f"INDEX({cells['tps']},{slot}),\"\")")
    limit, server = _q(capacity.LIMIT_BOUND), _q(capacity.SERVER_BOUND)
    out[cap_answer_cell("bound")] = (f"=IF({ready},IF(ISNUMBER({free}),IF(ISNUMBER({slot}),IF({slot}={free},"
                                     f"{server},{limit}),{limit}),{server}),\"\")")
    rpm_ok, tpm_ok = f"INDEX({cells['rpm_ok']},{free})", f"INDEX({cells['tpm_ok']},{free})"
    words = (f"IF({rpm_ok}=0,{_q(t['why_rpm_limit'])},\"\")&IF(AND({rpm_ok}=0,{tpm_ok}<>{TPM_WITHIN}),\"; \",\"\")"
             f"&IF({tpm_ok}={TPM_OVER},{_q(t['why_tpm_limit'])},IF({tpm_ok}={TPM_NOT_MEASURED},"
             f"{_q(t['why_tpm_unmeasured'])},\"\"))")
    out[cap_answer_cell("binding")] = f"=IF($B${CAP_ANSWER_ROWS['bound']}={limit},{words},\"\")"
    return out


def summary_formulas(layout: Layout) -> dict[str, str]:
    """The Summary's SLO answer cells: each a reference to the SLO sheet's answer."""
    sheet = f"'{SHEET_TITLES[layout.lang]}'!"
    out = {}
    for key in SUMMARY_OUTPUTS:
        ref = sheet + "$B$" + str(ANSWER_ROWS[key])
        out[summary_output(key)] = f"=IF({ref}&\"\"=\"\",\"\",{ref})"
    return out


def capacity_summary_formulas(layout: Layout) -> dict[str, str]:
    """The Summary's capacity answer cells: each a reference to the SLO sheet's capacity answer."""
    sheet = f"'{SHEET_TITLES[layout.lang]}'!"
    out = {}
    for key in CAPACITY_OUTPUTS:
        ref = sheet + "$B$" + str(CAP_ANSWER_ROWS[key])
        out[capacity_output(key)] = f"=IF({ref}&\"\"=\"\",\"\",{ref})"
    return out


# ---------------------------------------------------------------------------
# Writing
# ---------------------------------------------------------------------------

def _sizes(data: SloData) -> tuple[int, int, int]:
    return (len(data.experiments), len(data.cells), len(data.records))


def write_requests_sheet(ws: Worksheet, layout: Layout, fills: PendingFills,
                         data: SloData | None = None) -> dict[str, str]:
    """The per-request workings: the records and two formulas a row (TPOT, good)."""
    from scm_xl.workbook.stamp import write_filled
    from scm_xl.workbook.styles import HEADER_FILL, HEADER_FONT

    data = data or SloData()
    t = TEXTS[layout.lang]
    for key, col in REQ_COLS.items():
        cell = ws[f"{col}{REQ_HEADER_ROW}"]
        cell.value = t.get(f"r_{key}", key)
        cell.font = HEADER_FONT
        cell.fill = HEADER_FILL
        ws.column_dimensions[col].width = 12
    for i, record in enumerate(data.records):
        row = REQ_FIRST + i
        for j, key in enumerate(REQ_INPUT_KEYS, start=1):
            value = getattr(record, key)
            if value is not None:
                cell = ws.cell(row=row, column=j, value=value)
                if key == "exp_id":
                    cell.data_type = "s"
    if data.records:
        rows = range(REQ_FIRST, REQ_FIRST + len(data.records))
        write_filled(ws, fills, {key: REQ_COLS[key] for key in REQ_FORMULA_KEYS}, lambda r: request_formulas(layout, r),
                     rows, number_formats={"tpot_s": "0.0000"})
    ws.freeze_panes = f"A{REQ_FIRST}"
    return {}


def write_sheet(ws: Worksheet, layout: Layout, data: SloData | None = None) -> dict[str, str]:
    """The SLO sheet: effective SLO, the answer, the per-experiment and per-configuration tables."""
    from scm_xl.workbook.styles import BOLD, FORMULA_FILL, KEY_FILL, NOTE_FONT, TITLE_FONT, _formula

    data = data or SloData()
    sizes = _sizes(data)
    t = TEXTS[layout.lang]
    ws[f"A{TITLE_ROW}"] = t["title"]
    ws[f"A{TITLE_ROW}"].font = TITLE_FONT
    ws[f"A{NOTE_ROW}"] = t["note"]
    ws[f"A{NOTE_ROW}"].font = NOTE_FONT
    ws[f"A{SOURCE_ROW}"] = (t["source"].replace("{requests}", f"{len(data.records):,}").replace("{path}", data.source)
                            if data.records else t["source_none"])
    ws[f"A{SOURCE_ROW}"].font = NOTE_FONT
    for key, row in SETTING_ROWS.items():
        ws[f"A{row}"] = t[key]
    for key, row in ANSWER_ROWS.items():
        ws[f"A{row}"] = t["attainment_a"] if key == "attainment" else t[key]
    ws[f"A{ANSWER_ROWS['status']}"].font = BOLD
    formats = {"attainment": "0.0%", "low": "0.0%", "high": "0.0%", "tps": "0.00", "goodput": "0.00",
               "wall_s": "0.000", "lat_sum": "0.000", "mean_latency": "0.000", "mean_prompt": "0.0",
               "mean_output": "0.0", "rpm": "0", "tpm": "0", "input_per_output": "0.000", "cost_million": "0.00",
               "cost_hour": "0.00", **{f"{s}_{stage}": "0.00" for s in ("free", "fits") for stage in ("hour", "million")}}
    for address, text in top_formulas(layout, sizes).items():
        key = next((k for k, r in ANSWER_ROWS.items() if address == f"B{r}"), "")
        _formula(ws, address, text, formats.get(key) if key != "attainment" else "0.0%")
    ws[f"B{SETTING_ROWS['attainment']}"].number_format = "0.0%"
    for key in ("status", "concurrency", "max_tokens"):
        ws[answer_cell(key)].fill = KEY_FILL
    ws[f"A{CAP_SETTING_ROWS['rpm'] - 1}"] = t["cap_heading"]
    ws[f"A{CAP_SETTING_ROWS['rpm'] - 1}"].font = BOLD
    for key, row in CAP_SETTING_ROWS.items():
        ws[f"A{row}"] = t[f"c_{key}"]
    for key, row in CAP_ANSWER_ROWS.items():
        ws[f"A{row}"] = t[f"a_{key}"]
    ws[f"A{CAP_ANSWER_ROWS['bound']}"].font = BOLD
    for key in ("tps", "capacity_tps", "cost_million", "cost_hour"):
        ws[cap_answer_cell(key)].number_format = "0.00"
    for key in ("rpm", "tpm"):
        ws[cap_answer_cell(key)].number_format = "0"
    for key in ("bound", "replicas"):
        ws[cap_answer_cell(key)].fill = KEY_FILL

    _write_headers(ws, t)
    ws[f"A{HEADER_ROW - 1}"] = t["exp_table"]
    ws[f"A{HEADER_ROW - 1}"].font = BOLD
    ws[f"{CELL_COLS['no']}{HEADER_ROW - 1}"] = t["cell_table"]
    ws[f"{CELL_COLS['no']}{HEADER_ROW - 1}"].font = BOLD

    for i, (exp_id, cell_no) in enumerate(data.experiments):
        row = FIRST + i
        ws[f"{EXP_COLS['no']}{row}"] = i + 1
        ws[f"{EXP_COLS['exp_id']}{row}"] = exp_id
        ws[f"{EXP_COLS['exp_id']}{row}"].data_type = "s"
        ws[f"{EXP_COLS['exp_id']}{row}"].alignment = TEXT_CELL
        ws[f"{EXP_COLS['cell_no']}{row}"] = cell_no
        for key, text in experiment_formulas(layout, row, sizes).items():
            _formula(ws, f"{EXP_COLS[key]}{row}", text, formats.get(key), fill=FORMULA_FILL)
        ws[f"{EXP_COLS['model']}{row}"].alignment = TEXT_CELL
    for i, (model, concurrency, max_tokens, level) in enumerate(data.cells):
        row = FIRST + i
        ws[f"{CELL_COLS['no']}{row}"] = i + 1
        ws[f"{CELL_COLS['model']}{row}"] = model
        ws[f"{CELL_COLS['model']}{row}"].data_type = "s"
        ws[f"{CELL_COLS['model']}{row}"].alignment = TEXT_CELL
        ws[f"{CELL_COLS['concurrency']}{row}"] = concurrency
        ws[f"{CELL_COLS['max_tokens']}{row}"] = max_tokens
        ws[f"{CELL_COLS['prompt_level']}{row}"] = level
        for key, text in cell_formulas(layout, row, sizes).items():
            _formula(ws, f"{CELL_COLS[key]}{row}", text, formats.get(key), fill=FORMULA_FILL)
    ws.freeze_panes = f"A{FIRST}"
    _print_setup(ws, t, data)
    return {}


def _write_headers(ws: Worksheet, t: Mapping[str, str]) -> None:
    """Columns A and B (the settings' labels and values, above the per-experiment table's # and
    exp_id), the helper columns grouped and hidden, the two tables' headers wrapped and their
    columns widened to them (styles.header_cells), and a narrow column between the tables."""
    from scm_xl.workbook.styles import header_cells

    ws.column_dimensions["A"].width = LABEL_WIDTH
    ws.column_dimensions["B"].width = VALUE_WIDTH
    ws.column_dimensions[get_column_letter(len(EXP_KEYS) + 1)].width = SPACER_WIDTH
    for letter in hidden_columns():
        ws.column_dimensions[letter].hidden = True
        ws.column_dimensions[letter].outlineLevel = 1
    header_cells(ws, HEADER_ROW, [(key, col, t[f"h_{key}"], TABLE_WIDTHS.get(key, FIGURE_WIDTH))
                                  for cols in (EXP_COLS, CELL_COLS) for key, col in cols.items()],
                 text_keys=TABLE_TEXT_KEYS)
    for key in TABLE_TEXT_KEYS:  # a text column's header and cells stand clear of the number left of them
        for cols in (EXP_COLS, CELL_COLS):
            if key in cols:
                ws[f"{cols[key]}{HEADER_ROW}"].alignment = Alignment(wrap_text=True, vertical="center",
                                                                      horizontal="left", indent=1)


def hidden_columns() -> list[str]:
    """The letters of the helper columns (EXP_HELPER_KEYS, CELL_HELPER_KEYS)."""
    return [EXP_COLS[key] for key in EXP_HELPER_KEYS] + [CELL_COLS[key] for key in CELL_HELPER_KEYS]


def print_rows(data: SloData) -> int:
    """The last row the sheet prints: the plan's answer, or below it the longer table's last row."""
    rows = max(len(data.experiments), len(data.cells))
    return FIRST + rows - 1 if rows else CAP_ANSWER_ROWS[CAP_ANSWER_KEYS[-1]]


def _print_setup(ws: Worksheet, t: Mapping[str, str], data: SloData) -> None:
    """What prints, each on pages of its own: the SLO's settings and answer; the replicas, cost
    and rate-limit settings and plan; and (when there are experiments) each table down to its
    last row, never the slots below, its header row on every page. The helper columns stay out
    (hidden). A table goes over as many pages side by side as keep it at MIN_PRINT_SCALE or
    larger (RawData's measure), each page whole columns, at the largest scale that needs no
    more pages; without tables the settings print as wide as that first page. The title and
    notes wrap within the first page, a label longer than column A within A, and an answer's
    text that could run past the first page within it."""
    from openpyxl.worksheet.pagebreak import Break, ColBreak, RowBreak

    from scm_xl.workbook.printing import print_setup
    from scm_xl.workbook.styles import DEFAULT_FONT_SIZE, fit_row, text_width, wrapped_lines, wrapped_note

    tables = bool(data.experiments or data.cells)
    hidden = set(hidden_columns())

    def shown(first: int, last: int) -> dict[str, float]:
        return {letter: float(ws.column_dimensions[letter].width or 0)
                for letter in map(get_column_letter, range(first, last + 1)) if letter not in hidden}

    # the per-experiment table (with the spacer after it), then the per-configuration table
    parts = [shown(1, len(EXP_KEYS) + 1), shown(len(EXP_KEYS) + 2, len(EXP_KEYS) + 1 + len(CELL_KEYS))]
    scale, pages = print_scale(parts)
    first_page = pages[0]
    if not tables:
        scale, pages = print_scale([{letter: parts[0][letter] for letter in first_page}])
    width = sum(parts[0][letter] for letter in first_page)
    last = first_page[-1]

    def unmerged(address: str) -> None:
        cell = ws[address]
        for merged in [r for r in ws.merged_cells.ranges if r.min_row == cell.row and r.min_col == cell.column]:
            ws.unmerge_cells(str(merged))  # written again (fill writes the data into a built sheet)

    for row in (TITLE_ROW, NOTE_ROW, SOURCE_ROW):
        unmerged(f"A{row}")
        ws.row_dimensions[row].height = None  # the source note's text may differ
        wrapped_note(ws, f"A{row}", last, width)
    for row in (*SETTING_ROWS.values(), *ANSWER_ROWS.values(), *CAP_SETTING_ROWS.values(), *CAP_ANSWER_ROWS.values()):
        label = str(ws[f"A{row}"].value or "")
        if wrapped_lines(label, LABEL_WIDTH) > 1:
            ws[f"A{row}"].alignment = Alignment(wrap_text=True, vertical="top")
            fit_row(ws, row, [(label, LABEL_WIDTH, DEFAULT_FONT_SIZE)])
    room = width - LABEL_WIDTH
    for row, texts in _long_answers(t).items():
        unmerged(f"B{row}")
        if max(map(text_width, texts)) > room - 1:
            ws.merge_cells(f"B{row}:{last}{row}")
            ws[f"B{row}"].alignment = Alignment(wrap_text=True, vertical="top")
            fit_row(ws, row, [(text, room, DEFAULT_FONT_SIZE) for text in texts])
    last_col = get_column_letter(len(EXP_KEYS) + 1 + len(CELL_KEYS)) if tables else last
    ws.print_area = f"A1:{last_col}{print_rows(data)}"
    ws.row_breaks = RowBreak()
    ws.col_breaks = ColBreak()
    for row in (ANSWER_ROWS[ANSWER_KEYS[-1]], CAP_ANSWER_ROWS[CAP_ANSWER_KEYS[-1]])[:2 if tables else 1]:
        ws.row_breaks.append(Break(id=row))  # a page ends after it
    for page in pages[:-1]:
        ws.col_breaks.append(Break(id=column_index_from_string(page[-1]), max=1_048_575))  # every row, as Excel writes it
    print_setup(ws, repeat_rows=f"{HEADER_ROW}:{HEADER_ROW}" if tables else None, scale=scale)


def _long_answers(t: Mapping[str, str]) -> dict[int, list[str]]:
    """The answer cells that hold a text, each with the longest texts its formula gives."""
    return {ANSWER_ROWS["status"]: [t[key] for key in ("no_slo", "no_requests", "no_target", "levels_many", "found",
                                                       "none")],
            CAP_SETTING_ROWS["pricing"]: [t[key] for key in ("p_both", "p_tokens", "p_gpu", "p_none")],
            CAP_ANSWER_ROWS["status"]: [t["no_price"]],
            CAP_ANSWER_ROWS["binding"]: [f"{t['why_rpm_limit']}; {t[key]}" for key in ("why_tpm_limit",
                                                                                        "why_tpm_unmeasured")]}


def print_scale(parts: Sequence[Mapping[str, float]]) -> tuple[int, list[list[str]]]:
    """The scale (percent) and the pages side by side (each its column letters, in order) that
    print `parts` (each letter -> width, in order; each part starts a page): as few pages as at
    printing.MIN_PRINT_SCALE, at the largest scale (up to 100) that needs no more."""
    from scm_xl.workbook.printing import MIN_PRINT_SCALE, PAGE_WIDTH_CHARS

    def pack(percent: int) -> list[list[str]]:
        room = PAGE_WIDTH_CHARS * 100 / percent
        pages: list[list[str]] = []
        for part in parts:
            used = room  # each part starts a page
            for letter, width in part.items():
                if used + width > room and used > 0:  # a column wider than a page keeps one of its own
                    pages.append([])
                    used = 0.0
                pages[-1].append(letter)
                used += width
        return pages

    least = round(MIN_PRINT_SCALE * 100)
    fewest = len(pack(least))
    scale = max(percent for percent in range(least, 101) if len(pack(percent)) == fewest)
    return scale, pack(scale)


def write_summary_block(ws: Worksheet, layout: Layout, typed: Mapping[str, Any] | None = None,
                        capacity_typed: Mapping[str, Any] | None = None) -> None:
    """The Summary's SLO block: the inputs (styled as inputs, unlocked) and the answer's
    references; under it the same for replicas, cost and rate limits."""
    from scm_xl.workbook.styles import (
        BOLD, DEFAULT_FONT_SIZE, FORMULA_FILL, INPUT_FILL, KEY_FILL, fit_row, wrapped_lines, write_value,
    )

    t = TEXTS[layout.lang]
    ws[summary_sheet.slo_heading_cell("slo")] = t["s_heading"]
    ws[summary_sheet.slo_heading_cell("slo")].font = BOLD
    values = {"attainment": DEFAULT_ATTAINMENT, **(typed or {})}
    for key in SLO_INPUTS:
        ws[summary_sheet.slo_label_cell("slo_in", key)] = t[f"s_{key}"]
        cell = ws[summary_input(key)]
        write_value(cell, values.get(key))
        cell.fill = INPUT_FILL
    ws[summary_input("attainment")].number_format = "0.0%"
    formats = {"attainment": "0.0%", "low": "0.0%", "tps": "0.00", "goodput": "0.00"}
    for key in SUMMARY_OUTPUTS:
        ws[summary_sheet.slo_label_cell("slo_out", key)] = t["s_attainment_o"] if key == "attainment" else t[f"s_{key}"]
    for key, (address, text) in zip(SUMMARY_OUTPUTS, summary_formulas(layout).items()):
        ws[address] = text
        ws[address].fill = KEY_FILL if key in ("status", "concurrency") else FORMULA_FILL
        if key in formats:
            ws[address].number_format = formats[key]
    # replicas, cost and rate limits
    ws[summary_sheet.slo_heading_cell("capacity")] = t["sc_heading"]
    ws[summary_sheet.slo_heading_cell("capacity")].font = BOLD
    cap_values = {"minimise": capacity.MINIMISE_CONCURRENCY, **(capacity_typed or {})}
    for key in CAPACITY_INPUTS:
        ws[summary_sheet.slo_label_cell("capacity_in", key)] = t[f"sc_{key}"]
        cell = ws[capacity_input(key)]
        write_value(cell, cap_values.get(key))
        cell.fill = INPUT_FILL
    choices = DataValidation(type="list", formula1=_q(",".join(capacity.MINIMISE)), allow_blank=True,
                             showErrorMessage=True, error=" or ".join(capacity.MINIMISE))
    ws.add_data_validation(choices)
    choices.add(capacity_input("minimise"))
    cap_formats = {"cost_million": "0.00", "cost_hour": "0.00"}
    for key, (address, text) in zip(CAPACITY_OUTPUTS, capacity_summary_formulas(layout).items()):
        ws[summary_sheet.slo_label_cell("capacity_out", key)] = t[f"sc_{key}"]
        ws[address] = text
        ws[address].fill = KEY_FILL if key in ("bound", "replicas") else FORMULA_FILL
        if key in cap_formats:
            ws[address].number_format = cap_formats[key]
    # a label longer than column A (as summary_sheet.write_sheet made it) wraps within it, not cut off
    width = float(ws.column_dimensions["A"].width)
    for row in (*summary_sheet.SLO_INPUT_ROWS.values(), *summary_sheet.SLO_OUTPUT_ROWS.values(),
                *summary_sheet.SLO_CAPACITY_INPUT_ROWS.values(), *summary_sheet.SLO_CAPACITY_OUTPUT_ROWS.values()):
        label = str(ws[f"A{row}"].value or "")
        if wrapped_lines(label, width) > 1:
            ws[f"A{row}"].alignment = Alignment(wrap_text=True)
            fit_row(ws, row, [(label, width, DEFAULT_FONT_SIZE)])
    # typeable when the sheet is protected
    for address in [summary_input(key) for key in SLO_INPUTS] + [capacity_input(key) for key in CAPACITY_INPUTS]:
        ws[address].protection = Protection(locked=False)


def set_inputs(wb: Any, layout: Layout, typed: Mapping[str, Any]) -> None:
    """Type the SLO inputs on the Summary (keys of SLO_INPUTS; a None threshold leaves it blank)."""
    from scm_xl.workbook.styles import write_value

    ws = wb[layout.title("summary")]
    for key in SLO_INPUTS:
        if key in typed:
            write_value(ws[summary_input(key)], typed[key])


def set_capacity_inputs(wb: Any, layout: Layout, typed: Mapping[str, Any]) -> None:
    """Type the capacity inputs on the Summary (keys of CAPACITY_INPUTS; None leaves a cell blank)."""
    from scm_xl.workbook.styles import write_value

    ws = wb[layout.title("summary")]
    for key in CAPACITY_INPUTS:
        if key in typed:
            write_value(ws[capacity_input(key)], typed[key])


def capacity_inputs(*, rpm: float | None = None, tpm: float | None = None,
                    pricing: capacity.Pricing | None = None, target_tps: float | None = None,
                    minimise: str | None = None) -> dict[str, Any]:
    """What `fill --rpm --tpm --price-in --price-out --gpu-hour-price --gpus --minimise` types on
    the Summary: each limit given; a pricing replaces both modes' cells (the other mode's left
    blank); the order (one of capacity.MINIMISE, else UsageError)."""
    out: dict[str, Any] = {}
    if minimise is not None:
        if minimise not in capacity.MINIMISE:
            raise UsageError(f"minimise must be one of {', '.join(capacity.MINIMISE)}, got {minimise!r}")
        out["minimise"] = minimise
    if rpm is not None:
        out["rpm"] = rpm
    if tpm is not None:
        out["tpm"] = tpm
    if target_tps is not None:
        out["target_tps"] = target_tps
    if pricing is not None:
        out.update(price_in=pricing.price_in, price_out=pricing.price_out, gpu_hour_price=pricing.gpu_hour_price,
                   gpus=pricing.gpus)
    return out


def slo_inputs(slo: Slo) -> dict[str, Any]:
    """What `fill --slo ... --attainment ...` types on the Summary."""
    return {"ttft": slo.ttft_s, "tpot": slo.tpot_s, "e2el": slo.e2el_s, "attainment": slo.attainment}


def write_data(built: BuiltWorkbook, layout: Layout, data: SloData) -> None:
    """Write the records and the keys into a freshly built workbook's two SLO sheets."""
    write_requests_sheet(built.wb[REQUESTS_TITLES[layout.lang]], layout, built.fills, data)
    write_sheet(built.wb[SHEET_TITLES[layout.lang]], layout, data)


# ---------------------------------------------------------------------------
# Reading
# ---------------------------------------------------------------------------

def present(wb: Any, layout: Layout) -> bool:
    return SHEET_TITLES[layout.lang] in wb.sheetnames and REQUESTS_TITLES[layout.lang] in wb.sheetnames


def read_typed(wb: Any, layout: Layout) -> dict[str, Any]:
    """The Summary's SLO inputs as typed (a workbook without the SLO sheets: the defaults)."""
    if not present(wb, layout):
        return {"ttft": None, "tpot": None, "e2el": None, "attainment": DEFAULT_ATTAINMENT}
    ws = wb[layout.title("summary")]
    return {key: _blank_none(ws[summary_input(key)].value) for key in SLO_INPUTS}


def read_capacity(wb: Any, layout: Layout) -> dict[str, Any]:
    """The Summary's capacity inputs as typed (a workbook without the SLO sheets: none)."""
    if not present(wb, layout):
        return {}
    ws = wb[layout.title("summary")]
    return {key: _blank_none(ws[capacity_input(key)].value) for key in CAPACITY_INPUTS}


def _blank_none(value: Any) -> Any:
    return None if isinstance(value, str) and value == "" else value


def _int(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return int(value) if float(value).is_integer() else None


def _float(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def read_data(wb: Any, layout: Layout) -> SloData:
    """The keys and records the two sheets hold (an empty SloData where they are absent)."""
    if not present(wb, layout):
        return SloData()
    req = wb[REQUESTS_TITLES[layout.lang]]
    records = []
    width = len(REQ_INPUT_KEYS)
    for cells in req.iter_rows(min_row=REQ_FIRST, max_col=width, values_only=True):
        values = dict(zip(REQ_INPUT_KEYS, cells))
        exp_no = _int(values["exp_no"])
        if exp_no is None:
            continue
        records.append(Record(exp_no, str(values["exp_id"] or ""), 1 if values["ok"] == 1 else 0,
                              _float(values["ttft_s"]), _float(values["latency_s"]),
                              _int(values["output_tokens"]) or 0, _int(values["prompt_tokens"]),
                              _int(values["line"]) or 0))
    ws = wb[SHEET_TITLES[layout.lang]]
    experiments, cells = [], []
    for r in range(FIRST, ws.max_row + 1):
        no = _int(ws[f"{EXP_COLS['no']}{r}"].value)
        if no is not None:
            experiments.append((str(ws[f"{EXP_COLS['exp_id']}{r}"].value or ""),
                                _int(ws[f"{EXP_COLS['cell_no']}{r}"].value) or 0))
        cell_no = _int(ws[f"{CELL_COLS['no']}{r}"].value)
        if cell_no is not None:
            cells.append((str(ws[f"{CELL_COLS['model']}{r}"].value or ""),
                          _int(ws[f"{CELL_COLS['concurrency']}{r}"].value) or 0,
                          _int(ws[f"{CELL_COLS['max_tokens']}{r}"].value) or 0,
                          _int(ws[f"{CELL_COLS['prompt_level']}{r}"].value)))
    text = ws[f"A{SOURCE_ROW}"].value
    source = _source_of(text, layout) if records and isinstance(text, str) else ""
    return SloData(tuple(experiments), tuple(cells), tuple(records), source=source)


def _source_of(text: str, layout: Layout) -> str:
    """The path in the source note (so a rebuilt workbook says the same)."""
    before, _, after = TEXTS[layout.lang]["source"].partition("{path}")
    start = text.find(before.split("{requests}")[-1])
    if start < 0:
        return ""
    rest = text[start + len(before.split("{requests}")[-1]):]
    return rest[:len(rest) - len(after)] if after and rest.endswith(after) else rest


# ---------------------------------------------------------------------------
# The reference
# ---------------------------------------------------------------------------

def effective(typed: Mapping[str, Any]) -> tuple[dict[str, float | None], float]:
    """The effective thresholds (a positive number, else not used) and attainment target."""
    thresholds = {}
    for key in ("ttft", "tpot", "e2el"):
        value = _float(typed.get(key))
        thresholds[key] = value if value is not None and value > 0 else None
    attainment = _float(typed.get("attainment"))
    return thresholds, attainment if attainment is not None and 0 < attainment < 1 else DEFAULT_ATTAINMENT


def expected_sheets(layout: Layout, typed: Mapping[str, Any], data: SloData,
                    rows: Sequence[tuple[int, Any]], target_tps: Any,
                    capacity_typed: Mapping[str, Any] | None = None) -> dict[tuple[str, str], CellValue]:
    """Every formula cell of the SLO sheet, the requests sheet and the Summary's SLO block, from
    goodput's counts over the records, the raw rows ((sheet row, ResultRow)) and the typed inputs;
    replicas, cost and rate limits from scm_xl.capacity (option and plan) on the pooled tallies."""
    out: dict[tuple[str, str], CellValue] = {}
    title, req_title = SHEET_TITLES[layout.lang], REQUESTS_TITLES[layout.lang]
    t = TEXTS[layout.lang]
    thresholds, attainment = effective(typed)
    count = sum(1 for v in thresholds.values() if v is not None)
    slo = Slo(ttft_s=thresholds["ttft"], tpot_s=thresholds["tpot"], e2el_s=thresholds["e2el"],
              attainment=attainment) if count else None
    target = _float(target_tps)
    target = target if target is not None and target > 0 else None

    # the requests sheet
    by_exp: dict[int, list[RequestSample]] = {}
    for i, record in enumerate(data.records):
        row = REQ_FIRST + i
        sample = record.sample()
        by_exp.setdefault(record.exp_no, []).append(sample)
        out[(req_title, f"{REQ_COLS['tpot_s']}{row}")] = sample.tpot_s
        out[(req_title, f"{REQ_COLS['good']}{row}")] = (
            None if slo is None else (0.0 if goodput.misses(sample, slo) else 1.0))

    # per experiment
    found: dict[str, tuple[int, Any]] = {}
    for sheet_row, result in rows:
        found.setdefault(result.exp_id.casefold(), (sheet_row - layout.raw_first + 1, result))
    pooled: dict[int, Tally] = {}
    counted: dict[int, tuple[int, int, int, float]] = {}  # cell -> experiments, requests, output tokens, wall
    traffic: dict[int, tuple[float, float, float, float]] = {}  # cell -> latency sum and count, prompt sum, count
    for i, (exp_id, cell_no) in enumerate(data.experiments):
        row, no = FIRST + i, i + 1
        mine = by_exp.get(no, [])
        values: dict[str, CellValue] = {key: None for key in EXP_KEYS if key not in EXP_INPUT_KEYS}
        tokens = sum(s.output_tokens for s in mine)
        values.update(requests=float(len(mine)), output_tokens=float(tokens), judged=0.0)
        sums = _traffic_sums(mine)
        values.update(zip(("lat_sum", "lat_n", "prompt_sum", "prompt_n"), sums))
        hit = found.get(exp_id.casefold())
        if hit is not None:
            position, result = hit
            values.update(position=float(position), model=result.model, concurrency=float(result.concurrency),
                          max_tokens=float(result.max_tokens),
                          prompt_level=None if result.prompt_level is None else float(result.prompt_level),
                          results_requests=float(result.total_requests),
                          results_tokens=float(result.total_output_tokens), wall_s=float(result.total_time_s))
            judged = bool(mine) and len(mine) == result.total_requests and tokens == result.total_output_tokens
            if judged:
                wall = float(result.total_time_s)
                values["judged"] = 1.0
                values["tps"] = tokens / wall if wall > 0 else None
                experiments, requests, out_tokens, walls = counted.get(cell_no, (0, 0, 0, 0.0))
                counted[cell_no] = (experiments + 1, requests + len(mine), out_tokens + tokens, walls + wall)
                before = traffic.get(cell_no, (0.0, 0.0, 0.0, 0.0))
                traffic[cell_no] = tuple(a + b for a, b in zip(before, sums))  # type: ignore[assignment]
                if slo is not None:
                    tally = goodput.tally(mine, slo, wall)
                    pooled[cell_no] = pooled[cell_no] + tally if cell_no in pooled else tally
                    low, high = tally.interval
                    values.update(good=float(tally.good), good_tokens=float(tally.good_output_tokens),
                                  attainment=tally.attainment, low=low, high=high,
                                  goodput=tally.goodput_tps if wall > 0 else None)
        for key, value in values.items():
            out[(title, f"{EXP_COLS[key]}{row}")] = value

    # per configuration
    codes: list[int] = []
    qualifying: list[int] = []
    slo_cells: dict[int, goodput.SloCell] = {}  # configuration -> its pooled tally, for capacity
    for i, cell in enumerate(data.cells):
        row, no = FIRST + i, i + 1
        code = cell[3] if cell[3] is not None else -1
        experiments, requests, out_tokens, walls = counted.get(no, (0, 0, 0, 0.0))
        pooled_tally = pooled.get(no)
        values = {key: None for key in CELL_KEYS if key not in CELL_INPUT_KEYS}
        values.update(level_code=float(code), new_level=0.0 if code in codes else 1.0,
                      experiments=float(experiments), requests=float(requests),
                      output_tokens=float(out_tokens), wall_s=walls, qualifies=0.0)
        codes.append(code)
        if experiments and walls > 0:
            values["tps"] = out_tokens / walls
        lat_sum, lat_n, prompt_sum, prompt_n = traffic.get(no, (0.0, 0.0, 0.0, 0.0))
        values.update(lat_sum=lat_sum, lat_n=lat_n, prompt_sum=prompt_sum, prompt_n=prompt_n,
                      mean_latency=lat_sum / lat_n if lat_n > 0 else None,
                      mean_prompt=prompt_sum / prompt_n if prompt_n > 0 else None,
                      mean_output=out_tokens / requests if requests > 0 else None)
        if slo is not None:
            values.update(good=float(pooled_tally.good if pooled_tally else 0),
                          good_tokens=float(pooled_tally.good_output_tokens if pooled_tally else 0))
            if pooled_tally is not None and pooled_tally.requests > 0:
                low, high = pooled_tally.interval
                meets = low >= slo.attainment
                if walls > 0:
                    slo_cells[no] = goodput.SloCell(
                        model=cell[0], concurrency=cell[1], max_tokens=cell[2], prompt_level=cell[3], exp_ids=(),
                        tally=pooled_tally, meets=meets, rejected_by=() if meets else (
                            (pooled_tally.binding,) if pooled_tally.binding else (goodput.SAMPLE_SIZE,)))
                values.update(attainment=pooled_tally.attainment, low=low, high=high, meets=1.0 if meets else 0.0,
                              goodput=pooled_tally.goodput_tps if walls > 0 else None)
                tps = values["tps"]
                if meets and isinstance(tps, float) and target is not None and tps >= target:
                    values["qualifies"] = 1.0
                    qualifying.append(no)
        for key, value in values.items():
            out[(title, f"{CELL_COLS[key]}{row}")] = value

    # replicas, cost and rate limits, per configuration
    levels = len(set(codes))
    plan_in = capacity_settings(capacity_typed or {}, target)
    cap_target, pricing, limits = plan_in.target_tps, plan_in.pricing, plan_in.limits
    candidates: dict[int, goodput.SloCell] = {}
    candidate_sets: dict[str, dict[int, CellValue]] = {"free": {}, "fits": {}}  # configuration -> replicas
    for i in range(len(data.cells)):
        no, row = i + 1, FIRST + i
        cap: dict[str, CellValue] = dict.fromkeys(CAP_CELL_KEYS)
        slo_cell = slo_cells.get(no)
        if slo_cell is not None and cap_target is not None and slo_cell.tally.tps > 0:
            candidates[no] = slo_cell
            free = capacity.option(slo_cell, cap_target, pricing)
            limited = capacity.option(slo_cell, cap_target, pricing, limits)
            why = limited.rejected_by
            cap.update(replicas=float(limited.replicas), rpm=limited.rpm, tpm=limited.tpm,
                       input_per_output=limited.input_per_output, cost_million=limited.cost_per_million_output,
                       cost_hour=limited.cost_per_hour, rpm_ok=0.0 if RPM_LIMIT in why else 1.0,
                       tpm_ok=float(TPM_OVER if TPM_LIMIT in why else TPM_NOT_MEASURED if TPM_UNMEASURED in why
                                    else TPM_WITHIN),
                       free=None if free.rejected_by else float(free.replicas),
                       fits=None if why else float(limited.replicas))
            for s in candidate_sets:
                candidate_sets[s][no] = cap[s]
        else:
            # input tokens per output token are the traffic's, SLO or not (the sheet shows them for every
            # configuration with requests)
            prompt, output = (out.get((title, f"{CELL_COLS[key]}{row}")) for key in ("mean_prompt", "mean_output"))
            if isinstance(prompt, float) and isinstance(output, float) and output > 0:
                cap["input_per_output"] = prompt / output
        for key, value in cap.items():
            out[(title, f"{CELL_COLS[key]}{row}")] = value
    # the order's stage columns (the answer below is capacity.plan's own, not read from them)
    by_cost = plan_in.minimise == capacity.MINIMISE_COST

    def cost(key: str, no: int) -> float | None:
        return _float(out[(title, f"{CELL_COLS[key]}{FIRST + no - 1}")])

    for s, replicas in candidate_sets.items():
        costs = {no: (cost("cost_hour", no), cost("cost_million", no)) for no in replicas}
        stages = _order_stages(replicas, costs, by_cost)
        for i in range(len(data.cells)):
            for stage, value in zip(ORDER_STAGES, stages.get(i + 1, (None,) * len(ORDER_STAGES))):
                out[(title, f"{CELL_COLS[f'{s}_{stage}']}{FIRST + i}")] = value

    # settings and the answer
    for key in ("ttft", "tpot", "e2el"):
        out[(title, f"B{SETTING_ROWS[key]}")] = thresholds[key]
    out[(title, f"B{SETTING_ROWS['attainment']}")] = attainment
    out[(title, f"B{SETTING_ROWS['thresholds']}")] = float(count)
    out[(title, f"B{SETTING_ROWS['target_tps']}")] = target
    out[(title, f"B{SETTING_ROWS['levels']}")] = float(levels)
    out[(title, f"B{SETTING_ROWS['requests']}")] = float(len(data.records))
    slot = qualifying[0] if qualifying and count and levels <= 1 else None
    answer: dict[str, CellValue] = dict.fromkeys(ANSWER_KEYS)
    if slot is not None:
        row = FIRST + slot - 1
        answer.update({key: out[(title, f"{CELL_COLS[key]}{row}")] for key in ANSWER_KEYS[4:-1]})
        model, concurrency, max_tokens, _ = data.cells[slot - 1]
        answer.update(slot=float(slot), model=model, concurrency=float(concurrency), max_tokens=float(max_tokens))
    answer["status"] = t["no_slo"] if not count else t["no_requests"] if not data.records else t["no_target"] \
        if target is None else t["levels_many"] if levels > 1 else t["found"] if slot is not None else t["none"]
    for key in ANSWER_KEYS:
        out[(title, answer_cell(key))] = answer[key]
    summary = layout.title("summary")
    for key in SUMMARY_OUTPUTS:
        value = answer[key]
        out[(summary, summary_output(key))] = None if value is None or value == "" else value

    # the capacity settings and the plan's answer
    for key, value in plan_in.cells(t).items():
        out[(title, f"B{CAP_SETTING_ROWS[key]}")] = value
    plan_answer: dict[str, CellValue] = dict.fromkeys(CAP_ANSWER_KEYS)
    refused = by_cost and pricing is None  # what capacity.plan refuses (UsageError): said, and no answer
    plan_answer["status"] = t["no_price"] if refused else None
    if count and data.records and cap_target is not None and levels <= 1 and not refused:
        assert slo is not None
        plan = capacity.plan(list(candidates.values()), cap_target, slo, pricing=pricing, limits=limits,
                             minimise=plan_in.minimise)
        slot_of = {id(cell): no for no, cell in candidates.items()}
        plan_answer["bound"] = plan.bound
        if plan.unlimited is not None:
            plan_answer["slot_free"] = float(slot_of[id(plan.unlimited.cell)])
        if plan.chosen is not None:
            chosen, row = plan.chosen, FIRST + slot_of[id(plan.chosen.cell)] - 1
            c = chosen.cell
            plan_answer.update(slot=float(slot_of[id(c)]), replicas=float(chosen.replicas), model=c.model,
                               concurrency=float(c.concurrency), max_tokens=float(c.max_tokens),
                               tps=out[(title, f"{CELL_COLS['tps']}{row}")], capacity_tps=chosen.capacity_tps,
                               rpm=chosen.rpm, tpm=chosen.tpm, cost_million=chosen.cost_per_million_output,
                               cost_hour=chosen.cost_per_hour)
        if plan.bound == capacity.LIMIT_BOUND:
            plan_answer["binding"] = "; ".join(t[f"why_{reason}"] for reason in plan.binding)
    for key in CAP_ANSWER_KEYS:
        out[(title, cap_answer_cell(key))] = plan_answer[key]
    for key in CAPACITY_OUTPUTS:
        value = plan_answer[key]
        out[(summary, capacity_output(key))] = None if value is None or value == "" else value
    return out


def _order_stages(replicas: Mapping[int, CellValue], costs: Mapping[int, tuple[float | None, float | None]],
                  by_cost: bool) -> dict[int, tuple[CellValue, ...]]:
    """The ORDER_STAGES columns of one candidate set: configuration -> (its cost per hour, its
    replicas if the lowest, its cost per million, its replicas if the lowest of those); replicas
    None: not a candidate. A missing cost ranks after every cost (capacity._order's inf)."""
    def lowest(values: Mapping[int, float | None]) -> set[int]:
        numbers = [v for v in values.values() if v is not None]
        return {no for no, v in values.items() if not numbers or v == min(numbers)}

    candidates = {no for no, count in replicas.items() if count is not None}
    cheap = lowest({no: costs[no][0] for no in candidates}) if by_cost else candidates
    cheapest = lowest({no: costs[no][1] for no in cheap}) if by_cost else cheap
    return {no: (None,) * len(ORDER_STAGES) if no not in candidates else
            (costs[no][0], replicas[no] if no in cheap else None, costs[no][1] if no in cheap else None,
             replicas[no] if no in cheapest else None) for no in replicas}


CAP_CELL_KEYS = ("replicas", "rpm", "tpm", "rpm_ok", "tpm_ok", "input_per_output", "cost_million", "cost_hour",
                 "free", "fits")


def _traffic_sums(samples: Sequence[RequestSample]) -> tuple[float, float, float, float]:
    """(latency sum, requests with a latency, prompt tokens, succeeded requests with prompt tokens)."""
    latencies = [s.latency_s for s in samples if s.latency_s is not None and s.latency_s >= 0]
    prompts = [s.prompt_tokens for s in samples if s.succeeded and s.prompt_tokens is not None and s.prompt_tokens >= 0]
    return float(sum(latencies)), float(len(latencies)), float(sum(prompts)), float(len(prompts))


@dataclass(frozen=True)
class CapacitySettings:
    """The capacity inputs as the SLO sheet takes them (its effective-value cells)."""

    rpm: float | None
    tpm: float | None
    target_tps: float | None
    tokens: bool  # both token prices are numbers >= 0
    gpu: bool  # a GPU-hour price >= 0 and a whole number of GPUs >= 1
    typed: Mapping[str, Any]
    minimise: str = capacity.MINIMISE_CONCURRENCY  # one of capacity.MINIMISE

    @property
    def pricing(self) -> capacity.Pricing | None:
        """The one pricing given (both given: none, as the sheet says)."""
        if self.tokens and not self.gpu:
            return capacity.Pricing(price_in=_float(self.typed["price_in"]), price_out=_float(self.typed["price_out"]))
        if self.gpu and not self.tokens:
            gpus = _float(self.typed["gpus"])
            assert gpus is not None
            return capacity.Pricing(gpu_hour_price=_float(self.typed["gpu_hour_price"]), gpus=int(gpus))
        return None

    @property
    def limits(self) -> capacity.RateLimits | None:
        return capacity.RateLimits(rpm=self.rpm, tpm=self.tpm) if self.rpm or self.tpm else None

    def cells(self, t: Mapping[str, str]) -> dict[str, CellValue]:
        """The effective-value cells (CAP_SETTING_KEYS)."""
        limits = self.limits
        pricing = self.pricing
        label = t["p_both"] if self.tokens and self.gpu else t["p_tokens"] if self.tokens else \
            t["p_gpu"] if self.gpu else t["p_none"]
        return {"rpm": self.rpm, "tpm": self.tpm,
                "rpm_allowed": None if limits is None or limits.rpm is None else limits.headroom * limits.rpm,
                "tpm_allowed": None if limits is None or limits.tpm is None else limits.headroom * limits.tpm,
                "target_tps": self.target_tps,
                "price_in": pricing.price_in if pricing else None, "price_out": pricing.price_out if pricing else None,
                "gpu_hour_price": pricing.gpu_hour_price if pricing else None,
                "gpus": float(pricing.gpus) if pricing and pricing.gpus is not None else None, "pricing": label,
                "minimise": self.minimise}


def capacity_settings(typed: Mapping[str, Any], derivation_target: float | None) -> CapacitySettings:
    """The effective capacity inputs: a limit is a positive number (else none), the deployment's
    target a positive number (else the Derivation's target TPS), a price a number >= 0, the order
    cost where the text is capacity.MINIMISE_COST (in any case, as a spreadsheet's = compares
    text), else concurrency."""
    def positive(key: str) -> float | None:
        value = _float(typed.get(key))
        return value if value is not None and value > 0 else None

    def nonnegative(key: str) -> bool:
        value = _float(typed.get(key))
        return value is not None and value >= 0

    gpus = _float(typed.get("gpus"))
    minimise = typed.get("minimise")
    full = {key: typed.get(key) for key in CAPACITY_INPUTS}
    return CapacitySettings(
        rpm=positive("rpm"), tpm=positive("tpm"), target_tps=positive("target_tps") or derivation_target,
        tokens=nonnegative("price_in") and nonnegative("price_out"),
        gpu=nonnegative("gpu_hour_price") and gpus is not None and gpus >= 1 and gpus.is_integer(), typed=full,
        minimise=capacity.MINIMISE_COST if isinstance(minimise, str) and minimise.casefold() == capacity.MINIMISE_COST
        else capacity.MINIMISE_CONCURRENCY)



def _write(ws: Worksheet, b: Building) -> dict[str, str]:
    return write_sheet(ws, b.layout)


def _write_requests(ws: Worksheet, b: Building) -> dict[str, str]:
    return write_requests_sheet(ws, b.layout, b.fills)


def _reference(c: Checking) -> None:
    """Both sheets' formula cells (the per-request sheet's with them, in one pass)."""
    c.exp.update(expected_sheets(c.layout, c.inputs.slo_typed, c.inputs.slo_data, c.inputs.rows,
                                 c.inputs.inverse.get("target_tps"), c.inputs.slo_capacity))


SHEET = SheetSpec("slo", SHEET_TITLES, _write, _reference, inputs="whole")
REQUESTS_SHEET = SheetSpec("requests", REQUESTS_TITLES, _write_requests, no_reference, working=True, inputs="whole")


__all__ = [
    "REQUESTS_SHEET", "SHEET", "MAX_REQUEST_ROWS", "REQUESTS_TITLES", "SHEET_TITLES", "SLO_INPUTS", "SloData", "expected_sheets",
    "from_samples", "read_data", "read_typed", "set_inputs", "slo_inputs", "write_data", "write_requests_sheet",
    "write_sheet", "write_summary_block",
]
