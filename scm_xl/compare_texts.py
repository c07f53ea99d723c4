"""The words `scm-xl compare` prints, in English and Chinese: one home for both.

scm_xl.compare and scm_xl.slo_compare return data; what of it is a sentence (a verdict's reasons,
what of the base point the new data lack, a knee's move, a latency note, the test) is a `Text`,
in the manner of scm_xl.slo_texts: a str whose value is the English sentence (what the JSON
report, the HTML page and the tests that compare English to the character see, as always) that
keeps its template's name and values, so `say(text, "zh")` words the same facts in Chinese. The
text rendering (compare.render_comparison, render_latency_comparison,
slo_compare.render_slo_comparison) and the compare command take `lang`.

The same concept has the same Chinese word as in scm_xl.report_texts, scm_xl.rules and
scm_xl.slo_texts (基线, 基准点, 剩余自由度, 拐点, 提示长度档位, 预测区间, 达成率, 逐请求 CSV, the
verdict 数据不足); "{x}" marks a value spliced in with str.format, format specs included.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from scm_xl.rules import VERDICT_NAMES, Lang
from scm_xl.words import Text as _Text
from scm_xl.words import say

LEVEL_LABEL = "level (old on new)"  # the absolute level's label in the data (scm_xl.compare.LEVEL_LABEL)

WORDS: dict[Lang, dict[str, str]] = {
    "en": {
        "list_sep": ", ", "reasons_sep": "; ",
        "level_label": LEVEL_LABEL,
        # the head of the comparison
        "head": "baseline: {name} ({rows} rows, {dof} residual dof)   new: {new} ({new_rows} rows, {new_dof} "
                "residual dof)",
        "base_point": "base point of both fits: {model}, max_tokens {length}, concurrency {c}",
        "test_line": "test: {test}",
        "test": "two-sided Welch t test on ln(coefficient), {conf:.0%} family-wise (Bonferroni over {tests} "
                "{what}: {bonferroni}), and a change of at least {effect:.0%}",
        "test_what_level": "tests, the level included", "test_what": "coefficients",
        "bonferroni": "p < {alpha:.4g} each", "bonferroni_none": "no coefficient compared",
        # the coefficient table
        "h_coefficient": "coefficient", "h_baseline": "baseline", "h_interval": "90% interval", "h_new": "new",
        "h_change": "change %", "h_p": "p", "h_moved": "moved",
        "interval": "{low:.2f} to {high:.2f}",
        "mark_drift": "DRIFT", "mark_noise": "noise+",
        "status_baseline_only": "baseline_only", "status_new_only": "new_only",
        "status_unidentified": "unidentified", "status_no_noise": "no_noise",
        # the baseline's model on the new rows, and the level without the base point
        "old_on_new": "baseline's model on the new rows (old on new): MAPE {mape}% max {max}% over {rows} rows "
                      "({missing} not predictable); {inside} of {with_interval} inside the baseline's 90% "
                      "prediction interval",
        "without_base_point": "without the base point: {rule}",
        "level_rule": "BaseTPS is not compared, so the level is tested on the new rows the baseline's model "
                      "predicts ({label}); stable then needs its {conf:.0%} interval of change within "
                      "±{effect:.0%} and no more rows outside the baseline's prediction interval than chance "
                      "allows, else insufficient",
        "verdict": "verdict: {verdict}", "verdict_reasons": " ({reasons})",
        # the verdict's reasons
        "no_rows": "{name}: no included rows to fit",
        "no_dof": "{name}: no residual degrees of freedom ({rows} rows fit {rank} coefficients), so its noise is "
                  "unknown; add replicates",
        "moved_small": "{label} moved {change:+.1f}%: beyond its noise but under {effect:.0%}",
        "moved": "{label} moved {change:+.1f}% (p = {p:.2g})",
        "drift_without_base": "{missing}, so BaseTPS is not compared and the level was tested on the {rows} new "
                              "rows the baseline's model predicts",
        "nothing_on_both": "no coefficient is identified on both sides",
        "stable": "no coefficient moved by {effect:.0%} beyond its noise",
        "none_predicted": "{missing}; BaseTPS is not compared, and the baseline's model predicts none of the new "
                          "rows, so the level cannot be compared",
        "rows_predicted": "the {n} new rows the baseline's model predicts",
        "facts": "lie {change:+.1f}% from its predictions ({conf:.0%} interval {low:+.1f}% to {high:+.1f}%), "
                 "{inside} of {with_interval} inside its {pi:.0%} prediction interval",
        "stable_evidence": "{missing}; BaseTPS is not compared; stable on the evidence of {rows}: they {facts}",
        "why_level": "the level is not shown within ±{effect:.0%}",
        "why_outside": "more rows fall outside than chance allows (p = {p:.2g})",
        "why_both": "{first} and {second}",
        "insufficient_evidence": "{missing}; BaseTPS is not compared, and {rows} {facts}: {why}",
        # what of the base point the new data lack
        "miss_model": "no row of the model {model} (renamed?)",
        "miss_length": "no row of {model} at max_tokens {length}",
        "miss_concurrency": "no row of {model} at max_tokens {length} and concurrency {c}",
        "miss_prompt": "no row of {model} at max_tokens {length}, concurrency {c} and prompt level {prompt}",
        "point": "{model}, max_tokens {length}, concurrency {c}{prompt}",
        "point_prompt": ", prompt level {prompt}",
        "base_unidentified": "BaseTPS is not identified in the new data at the baseline's base point ({point})",
        "base_lacking": "the new data lack the baseline's base point ({point}): {what}",
        # the latency model and the knee
        "lat_compared": "baseline's latency model on the new rows (matched by model, concurrency, max_tokens, "
                        "prompt level): MAPE {mape}% max {max}% over {rows} rows ({unmatched} unmatched); {inside} "
                        "of {with_interval} inside its 90% prediction interval",
        "lat_levels_differ": "baseline's latency model on the new rows: not compared (the prompt levels differ)",
        "lat_none": "latency model: not compared",
        "knee_line": "knee, {model}: {text}", "knee_moved_mark": " (MOVED)",
        "note": "note: {note}",
        "knee_moved": "the knee moved from near concurrency {old} to near {new}",
        "knee_same": "the knee stays near concurrency {new} (baseline {old})",
        "knee_gone": "the baseline's knee near concurrency {old} is gone: no knee in the new data up to "
                     "concurrency {measured}",
        "knee_untested_old": "the baseline's knee near concurrency {old} is not tested: the new data stop at "
                             "concurrency {measured}",
        "knee_appeared": "a knee appeared near concurrency {new}: the baseline had none up to concurrency "
                         "{measured}",
        "knee_untested_new": "the new data have a knee near concurrency {new}, beyond the baseline's measured "
                             "{measured}",
        "knee_none": "no slot limit on either side",
        "no_latency_data": "{name}: no experiment has TTFT, latency and ITL recorded, so there is no latency "
                           "model to compare",
        "no_latency_model": "{model}: no latency model in {baseline}",
        "levels_apart": "prompt levels differ: {old_name} {old}, {new_name} {new}; no level in common, so the "
                        "baseline's latency model is not compared with the new rows",
        "levels_some": "prompt levels differ: {old_name} {old}, {new_name} {new}; only the rows at {shared} are "
                       "compared",
        "unmatched": "{n} new experiment(s) have no baseline experiment of the same model, concurrency, "
                     "max_tokens and prompt level: not compared",
        "none_recorded": "none recorded", "no_levels": "-",
        # compare --slo
        "slo_head": "Under the SLO {slo} (attainment target {target:.0%}, Wilson 95% interval):",
        "slo_side_reason": "  {side}: {reason}; attainment not compared",
        "side_baseline": "baseline", "side_new": "new",
        "slo_none_shared": "  no configuration was judged on both sides",
        "slo_row": "  {model} c={c} max_tokens={length}{level}: {old} -> {new}{flag}",
        "slo_row_prompt": ", prompt {prompt}",
        "slo_dropped_mark": "  DROPPED below the target",
        "slo_only": "{n} in the {side} only", "only_baseline": "baseline", "only_new": "new run",
        "slo_not_compared": "  not compared: {others} (configuration(s) measured on one side)",
        "slo_dropped": "  {n} configuration(s) met the SLO in the baseline and no longer do",
        # the command's own lines (--save-baseline)
        "saved_first": "no baseline yet: saved the {n} rows of {new} as the baseline {baseline}",
        "kept": "{verdict}: the baseline {baseline} is kept",
        "saved": "saved the {n} rows of {new} as the baseline {baseline}",
    },
    "zh": {
        "list_sep": "、", "reasons_sep": "；",
        "level_label": "整体水平（基线预测新数据）",
        "head": "基线：{name}（{rows} 行，剩余自由度 {dof}）   新数据：{new}（{new_rows} 行，剩余自由度 {new_dof}）",
        "base_point": "两次拟合的基准点：{model}，max_tokens {length}，并发 {c}",
        "test_line": "检验：{test}",
        "test": "对 ln(系数) 做双侧 Welch t 检验，总体置信度 {conf:.0%}（Bonferroni 校正，共 {tests} {what}："
                "{bonferroni}），且变化至少 {effect:.0%}",
        "test_what_level": "项检验，含整体水平", "test_what": "个系数",
        "bonferroni": "每项 p < {alpha:.4g}", "bonferroni_none": "没有可比较的系数",
        "h_coefficient": "系数", "h_baseline": "基线", "h_interval": "90% 区间", "h_new": "新数据",
        "h_change": "变化 %", "h_p": "p", "h_moved": "是否漂移",
        "interval": "{low:.2f} 至 {high:.2f}",
        "mark_drift": "漂移", "mark_noise": "超出噪声但幅度小",
        "status_baseline_only": "仅基线", "status_new_only": "仅新数据",
        "status_unidentified": "无法确定", "status_no_noise": "无噪声估计",
        "old_on_new": "基线模型预测新数据：MAPE {mape}%，最大 {max}%，共 {rows} 行（{missing} 行无法预测）；"
                      "{with_interval} 行中 {inside} 行落在基线的 90% 预测区间内",
        "without_base_point": "缺少基准点：{rule}",
        "level_rule": "BaseTPS 不参与比较，因此用基线模型能预测的新数据行检验{label}；"
                      "判为稳定需要其变化的 {conf:.0%} 区间在 ±{effect:.0%} 以内，且落在基线预测区间外的行"
                      "不多于偶然所致，否则为数据不足",
        "verdict": "判定：{verdict}", "verdict_reasons": "（{reasons}）",
        "no_rows": "{name}：没有可拟合的纳入行",
        "no_dof": "{name}：没有剩余自由度（{rows} 行拟合 {rank} 个系数），噪声未知；请增加重复实验",
        "moved_small": "{label} 变化 {change:+.1f}%：超出其噪声，但不到 {effect:.0%}",
        "moved": "{label} 变化 {change:+.1f}%（p = {p:.2g}）",
        "drift_without_base": "{missing}，因此 BaseTPS 不参与比较，改用基线模型能预测的 {rows} 行新数据检验整体水平",
        "nothing_on_both": "没有在两边都能确定的系数",
        "stable": "没有系数发生超出其噪声且达 {effect:.0%} 的变化",
        "none_predicted": "{missing}；BaseTPS 不参与比较，而基线模型预测不了任何新数据行，因此无法比较整体水平",
        "rows_predicted": "基线模型能预测的 {n} 行新数据",
        "facts": "与其预测相差 {change:+.1f}%（{conf:.0%} 区间 {low:+.1f}% 至 {high:+.1f}%），"
                 "{with_interval} 行中 {inside} 行落在其 {pi:.0%} 预测区间内",
        "stable_evidence": "{missing}；BaseTPS 不参与比较；依据{rows}判为稳定：它们{facts}",
        "why_level": "未能证明整体水平的变化在 ±{effect:.0%} 以内",
        "why_outside": "落在预测区间外的行多于偶然所致（p = {p:.2g}）",
        "why_both": "{first}，且{second}",
        "insufficient_evidence": "{missing}；BaseTPS 不参与比较，而{rows}{facts}：{why}",
        "miss_model": "没有模型 {model} 的行（改名了？）",
        "miss_length": "没有 {model} 在 max_tokens {length} 下的行",
        "miss_concurrency": "没有 {model} 在 max_tokens {length}、并发 {c} 下的行",
        "miss_prompt": "没有 {model} 在 max_tokens {length}、并发 {c}、提示长度档位 {prompt} 下的行",
        "point": "{model}，max_tokens {length}，并发 {c}{prompt}",
        "point_prompt": "，提示长度档位 {prompt}",
        "base_unidentified": "新数据在基线的基准点（{point}）无法确定 BaseTPS",
        "base_lacking": "新数据缺少基线的基准点（{point}）：{what}",
        "lat_compared": "基线的延迟模型预测新数据（按模型、并发、max_tokens、提示长度档位匹配）：MAPE {mape}%，"
                        "最大 {max}%，共 {rows} 行（{unmatched} 行未匹配）；{with_interval} 行中 {inside} 行落在其 "
                        "90% 预测区间内",
        "lat_levels_differ": "基线的延迟模型预测新数据：未比较（提示长度档位不同）",
        "lat_none": "延迟模型：未比较",
        "knee_line": "拐点，{model}：{text}", "knee_moved_mark": "（已移动）",
        "note": "注意：{note}",
        "knee_moved": "拐点从并发约 {old} 移到了约 {new}",
        "knee_same": "拐点仍在并发约 {new}（基线 {old}）",
        "knee_gone": "基线在并发约 {old} 处的拐点消失了：新数据直到并发 {measured} 都没有拐点",
        "knee_untested_old": "基线在并发约 {old} 处的拐点未被检验：新数据只测到并发 {measured}",
        "knee_appeared": "在并发约 {new} 处出现了拐点：基线直到并发 {measured} 都没有拐点",
        "knee_untested_new": "新数据在并发约 {new} 处有拐点，超出了基线实测的最高并发 {measured}",
        "knee_none": "两边都没有槽位上限",
        "no_latency_data": "{name}：没有实验记录了 TTFT、延迟和 ITL，因此没有可比较的延迟模型",
        "no_latency_model": "{model}：{baseline} 中没有延迟模型",
        "levels_apart": "提示长度档位不同：{old_name} 为 {old}，{new_name} 为 {new}；没有共同的档位，因此不用基线的"
                        "延迟模型预测新数据",
        "levels_some": "提示长度档位不同：{old_name} 为 {old}，{new_name} 为 {new}；只比较 {shared} 档的行",
        "unmatched": "{n} 个新实验没有模型、并发、max_tokens 和提示长度档位都相同的基线实验：未比较",
        "none_recorded": "未记录", "no_levels": "-",
        "slo_head": "按 SLO {slo}（达成率目标 {target:.0%}，Wilson 95% 区间）：",
        "slo_side_reason": "  {side}：{reason}；未比较达成率",
        "side_baseline": "基线", "side_new": "新数据",
        "slo_none_shared": "  没有在两边都判定过的配置",
        "slo_row": "  {model} c={c} max_tokens={length}{level}：{old} -> {new}{flag}",
        "slo_row_prompt": "，提示 {prompt}",
        "slo_dropped_mark": "  已跌破目标",
        "slo_only": "仅在{side}中 {n} 个", "only_baseline": "基线", "only_new": "新数据",
        "slo_not_compared": "  未比较：{others}（只在一边实测的配置）",
        "slo_dropped": "  {n} 个配置在基线中满足 SLO，现在不再满足",
        "saved_first": "还没有基线：已把 {new} 的 {n} 行保存为基线 {baseline}",
        "kept": "{verdict}：保留基线 {baseline}",
        "saved": "已把 {new} 的 {n} 行保存为基线 {baseline}",
    },
}

# compare's verdicts in words (the JSON keeps the machine names, scm_xl.compare.VERDICTS); the
# Chinese "insufficient" is the one of the consistency verdicts (scm_xl.rules.VERDICT_NAMES).
VERDICT_WORDS: dict[Lang, dict[str, str]] = {
    "en": {"stable": "stable", "drift": "drift", "insufficient": "insufficient"},
    "zh": {"stable": "稳定", "drift": "漂移", "insufficient": VERDICT_NAMES["zh"]["insufficient"]},
}
assert WORDS["en"].keys() == WORDS["zh"].keys()


def words(lang: Lang) -> dict[str, str]:
    """compare's templates in `lang` (English for anything else)."""
    return WORDS.get(lang, WORDS["en"])


class Text(_Text):
    """A sentence of compare's WORDS (see scm_xl.words): its English as a str, `say(lang)` in either
    language."""

    table = WORDS


@dataclass(frozen=True)
class Levels:
    """Prompt levels as a list ("none recorded" for rows without one, "-" for none at all)."""

    levels: tuple[int | None, ...]

    def __str__(self) -> str:
        return self.say()

    def say(self, lang: Lang = "en") -> str:
        w = words(lang)
        return w["list_sep"].join(w["none_recorded"] if level is None else str(level)
                                  for level in self.levels) or w["no_levels"]


def levels(values: Sequence[int | None]) -> Levels:
    return Levels(tuple(values))


def label_text(name: str) -> str:
    """A coefficient's label as a sentence's value: the level's is a Text (said in words), BaseTPS, f(2),
    K_len(100), ... are their own names in any language."""
    return Text("level_label") if name == LEVEL_LABEL else name


def verdict_word(verdict: str, lang: Lang) -> str:
    return VERDICT_WORDS.get(lang, VERDICT_WORDS["en"]).get(verdict, verdict)
