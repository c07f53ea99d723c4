"""The words of the SLO answers, in English and Chinese: one home for both.

What scm_xl.goodput, scm_xl.capacity, scm_xl.slo_between, scm_xl.slo_answer and scm_xl.constrained
say to a person (the reasons a configuration is ruled out, the notes of a search or a plan, the
lines `solve --slo` prints, `predict --slo`'s line) are templates here, keyed by name. The Chinese
uses the workbook's SLO sheet's words for the same things (scm_xl/workbook/slo_sheet.py: 达成率,
好请求, goodput, 副本, 限额, 逐请求 CSV) and the command line's (scm_xl/report_texts.py: 并发,
首字延迟 TTFT, 注意).

The library returns data: a sentence it builds is a `Text`, a str whose value is the English
sentence (so the JSON reports, every English caller and the tests that compare English to the
character see exactly what they always did) that also keeps its template's name and values, so
`say(text, "zh")` words the same facts in Chinese. A plain str says itself in any language.

"{x}" marks a value spliced in with str.format (format specs included: "{tps:.1f}"); a value
may itself be a Text, a `Joined` list or `Reasons`, each said in the same language.
"""

from __future__ import annotations

from dataclasses import dataclass
from collections.abc import Iterable
from typing import Any

from scm_xl.rules import Lang
from scm_xl.words import Joined as _Joined
from scm_xl.words import Text as _Text
from scm_xl.words import render, say

# Why a configuration is ruled out under an SLO: scm_xl.goodput's names (its thresholds, failed
# requests, the sample size, the target) and scm_xl.capacity's (the rate limits and the price).
REASONS: dict[Lang, dict[str, str]] = {
    "en": {
        "ttft": "time to first token over its threshold",
        "tpot": "time per output token over its threshold",
        "e2el": "end-to-end latency over its threshold",
        "failed": "failed requests (each counts as a miss)",
        "sample_size": "too few requests to prove the attainment target, even with none missed",
        "target_tps": "the target itself: every cheaper configuration that meets the SLO falls short",
        "rpm_limit": "requests per minute over the rate limit (with headroom)",
        "tpm_limit": "tokens per minute over the rate limit (with headroom)",
        "tpm_unmeasured": "no measured prompt tokens, so tokens per minute cannot be proven under the limit",
        "cost_unknown": "no measured prompt tokens, so the token price cannot be applied",
    },
    "zh": {
        "ttft": "首字延迟 TTFT 超过阈值",
        "tpot": "每输出 token 时间 TPOT 超过阈值",
        "e2el": "端到端延迟超过阈值",
        "failed": "失败的请求（每个都算未达成）",
        "sample_size": "请求太少：即使没有一个未达成，也无法证明达到达成率目标",
        "target_tps": "目标本身：每个满足 SLO 的更省配置都达不到目标 TPS",
        "rpm_limit": "每分钟请求数超过限额（含余量）",
        "tpm_limit": "每分钟 token 数超过限额（含余量）",
        "tpm_unmeasured": "没有实测提示 token，无法证明每分钟 token 数在限额内",
        "cost_unknown": "没有实测提示 token，无法按 token 价格计算成本",
    },
}

WORDS: dict[Lang, dict[str, str]] = {
    "en": {
        "list_sep": ", ", "reasons_sep": "; ", "joined": "{items}",
        # scm_xl.goodput: the per-request CSV, the judging, the inverse's notes
        "no_requests_csv": "no per-request CSV {path} (per-request SLOs need the requests CSV that scm-xl collect "
                           "writes)",
        "requests_empty": "the per-request CSV {path} is empty",
        "not_requests_csv": "{path} is not a requests CSV written by scm-xl collect (no {columns} column)",
        "no_measured_requests": "the per-request CSV {path} has no measured requests",
        "no_request_rows": "no request rows for {exp_id} in {path}",
        "not_same_requests": "{path} has {requests} measured request(s) of {exp_id} with {tokens} output tokens, "
                             "its results row {row_requests} with {row_tokens}: not the same requests",
        "none_judged": "no results row has its requests in the requests CSV",
        "few_requests": "{few} configuration(s) have fewer than {need} requests, the fewest whose {conf:.0%} Wilson "
                        "lower bound can reach {attainment:.0%} attainment even if every request is good: measure "
                        "more requests per experiment",
        "none_reaches": "no measured configuration reaches {target:g} TPS",
        # scm_xl.capacity: the plan's notes
        "limits_rule_out": "the rate limits rule out {option}: {reasons}",
        "none_meets": "no measured configuration meets the SLO {slo}",
        "plan_option": "{replicas} x {model} at concurrency {c}, max_tokens {length} ({rpm:.0f} RPM{tpm})",
        "plan_option_tpm": ", {tpm:.0f} TPM",
        # scm_xl.slo_between: a configuration predicted between measured levels
        "predicted_note": "concurrency levels between the measured ones are predicted: each borrows the requests of "
                          "the nearest measured level and the latency model rescales their TTFT, decode time and "
                          "TPS; its attainment interval counts those requests, not the model's error",
        "predicted_from": "predicted from the requests of concurrency {c} by the latency model",
        "requests": "requests", "rescaled_requests": "rescaled requests",
        "no_fit": "{model}: the latency model has no fit for it",
        "not_predicted_at": "{model}, max_tokens {length}: {why}",
        "not_positive": "the forecast times are not positive",
        # scm_xl.slo_answer: what `solve --slo` prints
        "fallback_line": "SLO {slo}: {fallback}",
        "fallback": "{reason}; answering with the per-experiment P95s instead{tpot}",
        "fallback_tpot": " (tpot has no per-experiment figure and is left out)",
        "none_judgeable": "no experiment could be judged per request",
        "no_latency_model": "no experiment has TTFT, latency and ITL recorded, so there is no latency model",
        "source_given": "given", "source_headers": "the provider's headers",
        "source_one_given": "{name} given", "source_one_sent": "{name} from the provider",
        "no_serves": "no measured configuration serves {target:g} TPS under the SLO {slo}",
        "serves": "{target:g} TPS under the SLO {slo}: {replicas} x {model} at concurrency {c}, max_tokens {length} "
                  "({predicted}{tps:.1f} TPS and {goodput:.1f} goodput per replica; attainment {attainment:.1%}, "
                  "{conf:.0%} interval {low:.1%}-{high:.1%}, {good} of {requests} {counted})",
        "predicted_label": "{words}: ",
        "cost": "  cost: {million:.2f} per million output tokens{hour}",
        "cost_hour": ", {hour:.2f} per hour",
        "traffic": "  traffic at full load: {rpm:.0f} requests/min{tpm}",
        "traffic_tpm": ", {tpm:.0f} tokens/min",
        "limit_given": "{name} {value:g}",
        "bound_limits": "  {bound}: rate limits {given} ({source}; {headroom:.0%} of each used)",
        "bound_none": "  {bound}: no rate limit given or sent by the provider",
        "server-bound": "server-bound", "limit-bound": "limit-bound",
        "ceiling": "  the rate limits let at most {cap:.1f} output tok/s through, whatever the deployment (at the "
                   "measured mix of prompt and output tokens of max_tokens {length}, the most of any configuration)",
        "binding": "  binding: {reasons}",
        "most_goodput": "  most goodput under the SLO: {goodput:.1f} tok/s at concurrency {c}, max_tokens {length} "
                        "({model}{predicted})",
        "predicted_tail": "; {words}",
        "not_predicted": "not predicted between levels: {why}",
        "note": "  note: {text}",
        "unjudged": "  {n} experiment(s) not judged: {reasons}",
        # predict --slo: the attainment at one configuration
        "slo_line": "SLO: {text}",
        "no_requests_here": "this configuration has no measured requests, and attainment is predicted only at whole "
                            "concurrency levels between measured ones{why}",
        "why_not": " ({why})",
        "no_latency_model_short": "no latency model (no experiment has TTFT, latency and ITL recorded)",
        "measured_here": "measured here",
        "attainment_here": "{where}: attainment {attainment:.1%} ({conf:.0%} Wilson interval {low:.1%}-{high:.1%}, "
                           "{good} of {requests} {counted}), goodput {goodput:.1f} tok/s; {meets} {slo}",
        "meets": "meets", "does_not_meet": "does not meet",
        "no_p95_here": "{why}, and no per-experiment P95 was measured at this configuration",
        "p95_here": "{why}: fallback, the per-experiment P95s measured here (not a per-request attainment): {parts}",
        "p95_part": "{name} {value:.3g} s (limit {limit:g} s)",
        "p95_ttft": "P95 TTFT", "p95_latency": "P95 latency",
        "p95_none": "none under this SLO's thresholds",
        # scm_xl.constrained: the search's notes
        "c_not_calibrated": "max_tokens {lengths} not calibrated: not considered",
        "c_rate_given": "rate limit given: concurrency {c} and above excluded",
        "c_429": "HTTP 429 seen from concurrency {c} for {model}: that concurrency and above excluded",
        "c_no_intervals": "no intervals (chain method or no residual degrees of freedom): judged on the point "
                          "estimate",
        "c_knee": "{label} is beyond the knee near concurrency {knee:g}, where throughput stops growing: more "
                  "concurrency there only adds waiting",
        "c_the_answer": "the answer", "c_the_best_answer": "the best answer",
        "c_between": "concurrency {c} lies between measured levels: {how}",
        "c_how_latency": "the latency model's TTFT and ITL fits", "c_how_chain": "f interpolated in log-log space",
        "c_outside": "concurrency {c} is outside the measured range: extrapolated",
        "c_needs_extrapolation": "{option} would reach the target only by extrapolating beyond the measured "
                                 "concurrency range; allow extrapolation to consider it",
        "c_unproven": "{n} configurations have no measured P95 (interpolated or unmeasured cells) and cannot be "
                      "proven to meet the latency limit: rejected",
        "c_none": "no configuration is predicted to reach {target:g} TPS",
        "c_option": "{model} at concurrency {c}, max_tokens {length} ({tps:.1f} TPS)",
    },
    "zh": {
        "list_sep": "、", "reasons_sep": "；", "joined": "{items}",
        "no_requests_csv": "没有逐请求 CSV {path}（逐请求 SLO 需要 scm-xl collect 写出的 requests CSV）",
        "requests_empty": "逐请求 CSV {path} 是空的",
        "not_requests_csv": "{path} 不是 scm-xl collect 写出的 requests CSV（缺少 {columns} 列）",
        "no_measured_requests": "逐请求 CSV {path} 没有实测请求",
        "no_request_rows": "{path} 中没有 {exp_id} 的请求行",
        "not_same_requests": "{path} 中 {exp_id} 有 {requests} 个实测请求、{tokens} 个输出 token，其结果行是 "
                             "{row_requests} 个、{row_tokens} 个：不是同一批请求",
        "none_judged": "没有结果行的请求在 requests CSV 中",
        "few_requests": "{few} 个配置的请求数少于 {need}：即使每个请求都是好请求，{conf:.0%} Wilson 下限要达到 "
                        "{attainment:.0%} 达成率也至少需要 {need} 个请求；请为每个实验测量更多请求",
        "none_reaches": "没有实测配置能达到 {target:g} TPS",
        "limits_rule_out": "限流排除了 {option}：{reasons}",
        "none_meets": "没有实测配置满足 SLO {slo}",
        "plan_option": "{replicas} 个副本 × {model}，并发 {c}，max_tokens {length}（{rpm:.0f} RPM{tpm}）",
        "plan_option_tpm": "，{tpm:.0f} TPM",
        "predicted_note": "已测档位之间的并发档位是预测的：每个档位借用最近的已测档位的请求，由延迟模型重新缩放其 "
                          "TTFT、解码时间与 TPS；其达成率区间统计的是这些借来的请求，不含模型本身的误差",
        "predicted_from": "由延迟模型从并发 {c} 的请求预测",
        "requests": "请求", "rescaled_requests": "重新缩放的请求",
        "no_fit": "{model}：延迟模型没有它的拟合",
        "not_predicted_at": "{model}，max_tokens {length}：{why}",
        "not_positive": "预测的时间不是正数",
        "fallback_line": "SLO {slo}：{fallback}",
        "fallback": "{reason}；改用每个实验的 P95 作答{tpot}",
        "fallback_tpot": "（tpot 没有每个实验的数字，不计入）",
        "none_judgeable": "没有实验能逐请求判定",
        "no_latency_model": "没有实验记录了 TTFT、延迟与 ITL，所以没有延迟模型",
        "source_given": "给定", "source_headers": "服务商的响应头",
        "source_one_given": "{name} 给定", "source_one_sent": "{name} 来自服务商",
        "no_serves": "在 SLO {slo} 下没有实测配置能提供 {target:g} TPS",
        "serves": "SLO {slo} 下提供 {target:g} TPS：{replicas} 个副本 × {model}，并发 {c}，max_tokens {length}"
                  "（{predicted}每副本 {tps:.1f} TPS、goodput {goodput:.1f}；达成率 {attainment:.1%}，{conf:.0%} 区间 "
                  "{low:.1%}-{high:.1%}，{requests} 个{counted}中 {good} 个好请求）",
        "predicted_label": "{words}：",
        "cost": "  成本：每百万输出 token {million:.2f}{hour}",
        "cost_hour": "，每小时 {hour:.2f}",
        "traffic": "  满载流量：每分钟 {rpm:.0f} 个请求{tpm}",
        "traffic_tpm": "，{tpm:.0f} 个 token",
        "limit_given": "{name} {value:g}",
        "bound_limits": "  {bound}：限流 {given}（{source}；每项限额用 {headroom:.0%}）",
        "bound_none": "  {bound}：没有给出限流，服务商也没有发送",
        "server-bound": "受服务端限制（server-bound）", "limit-bound": "受限流限制（limit-bound）",
        "ceiling": "  无论怎样部署，限流最多放行每秒 {cap:.1f} 个输出 token（按 max_tokens {length} 实测的提示与输出 "
                   "token 比例，是所有配置中最多的）",
        "binding": "  起约束的：{reasons}",
        "most_goodput": "  SLO 下 goodput 最高：{goodput:.1f} tok/s，并发 {c}，max_tokens {length}（{model}{predicted}）",
        "predicted_tail": "；{words}",
        "not_predicted": "未能在档位之间预测：{why}",
        "note": "  注意：{text}",
        "unjudged": "  {n} 个实验未判定：{reasons}",
        "slo_line": "SLO：{text}",
        "no_requests_here": "该配置没有实测请求，而达成率只在已测档位之间的整数并发档位上预测{why}",
        "why_not": "（{why}）",
        "no_latency_model_short": "没有延迟模型（没有实验记录了 TTFT、延迟与 ITL）",
        "measured_here": "此处实测",
        "attainment_here": "{where}：达成率 {attainment:.1%}（{conf:.0%} Wilson 区间 {low:.1%}-{high:.1%}，"
                           "{requests} 个{counted}中 {good} 个好请求），goodput {goodput:.1f} tok/s；{meets} SLO {slo}",
        "meets": "满足", "does_not_meet": "不满足",
        "no_p95_here": "{why}，且该配置没有实测的每实验 P95",
        "p95_here": "{why}：退而采用此处实测的每实验 P95（不是逐请求达成率）：{parts}",
        "p95_part": "{name} {value:.3g} 秒（上限 {limit:g} 秒）",
        "p95_ttft": "P95 首字延迟 TTFT", "p95_latency": "P95 延迟",
        "p95_none": "该 SLO 的阈值下没有可比的数字",
        "c_not_calibrated": "max_tokens {lengths} 未标定：不考虑",
        "c_rate_given": "给定限流：排除并发 {c} 及以上",
        "c_429": "{model} 从并发 {c} 起出现 HTTP 429：排除该并发及以上",
        "c_no_intervals": "没有区间（链式方法或没有剩余自由度）：按点估计判断",
        "c_knee": "{label}超过了并发 {knee:g} 附近的拐点，吞吐量在那里停止增长：再增加并发只会增加等待",
        "c_the_answer": "答案", "c_the_best_answer": "约束下最高的答案",
        "c_between": "并发 {c} 位于已测档位之间：{how}",
        "c_how_latency": "由延迟模型的 TTFT 与 ITL 拟合给出", "c_how_chain": "f 在对数坐标中插值",
        "c_outside": "并发 {c} 超出已测范围：外推",
        "c_needs_extrapolation": "{option}只有外推到已测并发范围之外才能达到目标；允许外推后才会考虑它",
        "c_unproven": "{n} 个配置没有实测 P95（插值或未实测的单元），无法证明满足延迟上限：已排除",
        "c_none": "没有配置的预测能达到 {target:g} TPS",
        "c_option": "{model}，并发 {c}，max_tokens {length}（{tps:.1f} TPS）",
    },
}
assert WORDS["en"].keys() == WORDS["zh"].keys() and REASONS["en"].keys() == REASONS["zh"].keys()


def reason_words(names: Iterable[str], lang: Lang = "en") -> dict[str, str]:
    """The reasons `names` (goodput.REASON_WORDS', capacity.REASON_WORDS' names) in words in `lang`."""
    table = REASONS.get(lang, REASONS["en"])
    return {name: table[name] for name in names}


def words(lang: Lang) -> dict[str, str]:
    """The templates in `lang` (English for anything else)."""
    return WORDS.get(lang, WORDS["en"])


class Text(_Text):
    """A sentence of WORDS (see scm_xl.words): its English as a str, `say(lang)` in either language."""

    table = WORDS


class Joined(_Joined):
    """Items joined by a separator of WORDS (`sep`, a key: list_sep, reasons_sep, ...)."""

    table = WORDS


@dataclass(frozen=True)
class Reasons:
    """Why a configuration is ruled out under an SLO (REASONS' names), in words; "" for none."""

    names: tuple[str, ...]

    def __str__(self) -> str:
        return self.say("en")

    def say(self, lang: Lang = "en") -> str:
        table = REASONS.get(lang, REASONS["en"])
        return words(lang)["reasons_sep"].join(table.get(name, name) for name in self.names)


def text(key: str, lang: Lang = "en", /, **values: Any) -> str:
    """One template said at once in `lang`."""
    return render(WORDS, key, values, lang)
