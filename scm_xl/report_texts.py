"""The words scm-xl prints on a terminal, in English and Chinese: one home for both.

scm_xl.report's tables and lines (coefficients, rows, verdicts, leave-one-out, physics,
verification, the workbook's answers, the caveats of an answer) and the commands fill, verify,
solve and predict (scm_xl/cli/workbook.py) take their sentences from `words(lang)`. It sits
beside report.py, not under cli/, because report.py renders most of them and imports only
downward. What already has its words elsewhere is taken from there: the roles and verdicts
(scm_xl.rules.ROLE_NAMES, VERDICT_NAMES), a row's exclusion reason, note and physics warnings
(scm_xl.rules.TEXTS, through RowStatus.reason, RowCheck.note, PhysicsChecks.text), the
"unreachable" of an inverse answer (TEXTS), the sheet a workbook opens on (its layout's title).

"{x}" marks a value spliced in with str.format (format specs included: "{cells:,}"). The English
sentences are the ones the commands always printed; tests compare them to the character.

Where the library makes a sentence (fill's progress steps and notes, verify's cells that
disagree, the least-squares check of the separable model in scm_xl.lsq) it returns data: a
`Text`, a str whose value is the English sentence (so the JSON, every English caller and the
tests that compare English see what they always did) that keeps its template's name and values,
so `say(text, "zh")` words the same facts in Chinese. A plain str says itself in any language;
anything else with a `say(lang)` (scm_xl.slo_texts' Texts) says itself through it.
"""

from __future__ import annotations


from scm_xl.rules import Lang
from scm_xl.words import Joined as _Joined
from scm_xl.words import Text as _Text
from scm_xl.words import say

WORDS: dict[Lang, dict[str, str]] = {
    "en": {
        "na": "n/a",
        "none": "none",
        "list_sep": ", ",
        # the coefficient table
        "h_coefficient": "coefficient", "h_value": "value", "h_from": "from",
        "base_point": "tok/s at the base point: {model}, max_tokens {length}, concurrency {c}",
        "row_count": "{n} row(s)",
        "not_identified": "not identified",
        "anchor": "anchor concurrency {c}",
        "base_prompt": "base prompt level; ",
        "first_principles": "; first principles {value}",
        # the rows table and its summary
        "h_exp_id": "exp_id", "h_c": "c", "h_max_tokens": "max\ntokens", "h_prompt": "prompt", "h_model": "model",
        "h_measured": "measured\ntok/s", "h_predicted": "predicted\ntok/s", "h_dev": "dev\n%", "h_role": "role",
        "h_note": "note",
        "physics_checks": " ({checks})",
        "rows_shown": "{shown} of {total} rows shown: every excluded or unidentified one (up to {limit}) and "
                      "the {worst} check rows furthest off; every row is in the workbook and in the JSON report "
                      "(--json)",
        "rows_summary": "check rows: {check}   identify: {identify}   unidentified: {unidentified}   "
                        "excluded: {excluded}",
        "mape_summary": "MAPE (check rows): {mape}   max: {max}   verdict: {verdict}",
        # leave-one-out and the separable model
        "loo_lsq": "leave-one-out, lsq:   MAPE {mape}, max {max} over {rows} rows, verdict {verdict}",
        "loo_chain": "leave-one-out, chain: MAPE {mape}, max {max} over {rows} rows, verdict {verdict}",
        "separable": "separable model: {summary}",
        "separable_untestable": "not testable: no residual degrees of freedom (exactly identified design; "
                                "add replicates or cells)",
        "separable_ok": "no cell breaks the separable model",
        "separable_broken": "the separable model does not hold at: ",
        "separable_summary": "{prompt}{broken}{parts}",
        "separable_prompt": "{prompt}. ",
        # the cells and plateaus that break it (scm_xl.lsq's InteractionCell, Plateau, InteractionCheck)
        "above": "above", "below": "below",
        "parts_sep": "; ",
        "with_rows": "{what} ({rows} rows)",
        "cell_prompt": "at concurrency {c} and {prompt} prompt tokens TPS is {pct:.0f}% {direction} what the "
                       "separable model says",
        "cell_measured": "{where}: measured {pct:.1f}% {direction} the separable model",
        "cell_c_length": "c={c}, max_tokens={length}",
        "cell_model_c": "model={model}, c={c}",
        "plateau": "model={model}, max_tokens={length}{prompt}: TPS flat from c={low} to c={high} "
                   "({tps_low:.1f} -> {tps_high:.1f}) while f predicts +{growth:.0f}%{faults}",
        "plateau_prompt": ", prompt level {level}",
        "plateau_faults": "; requests failed or were rate limited there",
        "prompt_interaction": "{lead}: {where}",
        "lead_more_high": "a longer prompt costs more at higher concurrency",
        "lead_less_high": "a longer prompt costs less at higher concurrency than the separable model says",
        "lead_more_low": "a longer prompt costs more at low concurrency",
        "lead_less_low": "a longer prompt costs less at low concurrency than the separable model says",
        "lead_depends": "the prompt length's cost depends on the concurrency",
        "loo_latency": "leave-one-out, latency: MAPE {mape}, max {max} over {rows} rows, verdict {verdict} "
                       "(TTFT + (L - 1) x ITL, every prompt level)",
        "knee": "knee: {knee}",
        "little_law": "Little's law off by more than 15% (c x L / TPS against the mean latency) on {n} rows: "
                      "{shown}{more}: the client did not keep its slots busy there",
        "little_more": " and {n} more",
        # physics warnings
        "physics_head": "physics warnings on {rows} of {of} rows: {counts}",
        "physics_count": "{check} {count}",
        "physics_row": "  {exp_id}: {text}",
        "physics_more": "  ... and {n} more (every row: the JSON report, or the workbook's consistency sheet)",
        "physics_strict": "strict physics: {n} of these rows excluded",
        "physics_kept": "warnings only: these rows are still used (--strict-physics excludes them)",
        # the verification
        "verified": "verified: {cells} cells recalculated by {engine} match the Python reference",
        "not_covered": "NOT COVERED: {n} typed row(s) lie below the {rows} rows the formulas cover; the workbook "
                       "ignores them (refill with `scm-xl fill --workbook` to grow it):",
        "mismatch": "MISMATCH: {n} of {cells} formula cells ({engine}) disagree with the Python reference",
        "typed_over_one": "  {n} formula cell typed over (restore its formula, or refill the workbook):",
        "typed_over_many": "  {n} formula cells typed over (restore their formulas, or refill the workbook):",
        "others_after_one": "  {n} other {verb} (they may follow from the cell above):",
        "others_after_many": "  {n} other {verb} (they may follow from the cells above):",
        "disagrees_one": "cell disagrees", "disagrees_many": "cells disagree",
        "no_reference": "  {ref}: no reference value",
        # a cell that disagrees (scm_xl.verify.Mismatch), a typed row the formulas do not cover
        "not_a_formula": "(not a formula: the cell was typed over)",
        "cell_typed_over": "{ref} {not_a_formula}, reference {expected}{hint}",
        "cell_hint": "; {hint}",
        "cell_differs": "{ref}: workbook {actual}, reference {expected}",
        "cell_empty": "None",
        "uncovered_row": "row {row} ({exp_id})",
        "uncovered_no_id": "row {row} (no exp_id)",
        "more_row": "  ... and {n} more (every row: the JSON report, --json)",
        "more_cell": "  ... and {n} more (every cell: the JSON report, --json)",
        # the workbook's own answers, and what fill and verify end with
        "wb_inverse": "the workbook's inverse: {target} TPS{at} -> concurrency {c} (predicted {tps} TPS)",
        "wb_inverse_at": " at max_tokens {length}",
        "wb_forward": "the workbook's forward: concurrency {c}, max_tokens {length} -> {tps} TPS",
        "wrote": "wrote {path}",
        "warning": "warning: {text}",
        "note": "note: {text}",
        "error": "Error: {text}",
        "next_open": "next: open {path} (it opens on its {sheet} sheet), or make the HTML page with scm-xl report",
        "failed_verification": "the workbook failed verification: {target} was {what}; the workbook that failed is "
                               "{shown}",
        "left_as_it_was": "left as it was", "not_written": "not written",
        # fill's and verify's steps on stderr (after "scm-xl [   0.0 s] ")
        "step_read": "read {path}",
        "step_rebuild": "rebuild {path}",
        "step_build": "build the workbook",
        "step_save": "save the workbook",
        "step_recalculate": "recalculate with {engine}",
        "step_compare": "compare {cells:,} formula cells with the reference",
        "step_reference": "compute the reference (after the engine, to save memory)",
        "step_store": "store the computed values in the file",
        "step_write": "write {path}",
        # fill's notes: the per-request records, a person's comments, rows the workbook cannot use
        "requests_several": "per-request records are read beside one results CSV: with several, the workbook has "
                            "none (its SLO attainment and goodput stay empty)",
        "requests_none": "{reason}: the workbook has no per-request records (its SLO attainment and goodput stay "
                         "empty)",
        "requests_wildcard": "exp_id {exp_id!r} holds *, ? or ~, which spreadsheet lookups read as a pattern: the "
                             "per-request records are not put in the workbook",
        "requests_read": "per-request records: {n:,} measured requests from {path} (the workbook's SLO sheet judges "
                         "them)",
        "requests_half_line": "{path}:{line}: a half-written last line is left out",
        "comment_lost": "the comment on {where} (row of {exp_id}) is not kept: {exp_id} is not in the new data; it "
                        "read: {text}",
        "comment_rewritten": "the comment on {where} is kept on {now}, but scm-xl rewrote that cell: {before} is now "
                             "{after}",
        "comment_moved": "{where} (moved with {exp_id})",
        "row_unusable": "row {row}: {reason}",
        "row_only_notes": "row {row} holds only notes or a source and no experiment: it is not used",
        "row_no_display": "row {row}'s TPS/role/status cells hold no formula (an inserted row?): they stay blank "
                          "until `scm-xl fill --workbook` rebuilds them; the calculation is not affected",
        # the caveats of an answer
        "verdict_line": "consistency verdict: {verdict} ({rows}, MAPE {mape}{short})",
        "check_rows_one": "{n} check row", "check_rows_many": "{n} check rows",
        "excellent_needs": "; excellent needs at least {n}",
        "label_row": "row {ids}", "label_rows": "rows {ids} (replicates, mean {tps} TPS)",
        "label_tps": " ({tps} TPS)",
        "repeats": "this is measured {label}{tps}, which defines {names}: the answer repeats that measurement "
                   "and tests nothing",
        "measured_defines": "measured here: {label}{tps}, which defines {names} in the chain; this answer is "
                            "{off} from it",
        "measured_check": "measured here: row {row} at {tps} TPS (a check row{off})",
        "model_off": ", the model is {pct} off",
        "measured_excluded": "measured here: row {row} at {tps} TPS, {why}; the answer is the model's, not that "
                             "measurement",
        "measured_unused": "measured here: row {row} at {tps} TPS ({role}: not used)",
        "excluded_lead": "excluded", "excluded_why": "excluded: {reason}", "not_used": "not used",
        "holdout_line": "hold-out error ({method}, leave-one-out): MAPE {mape}, max {max} over {rows} rows, "
                        "verdict {verdict}",
        "excluded_here": "{what} configuration was measured: row {row} at {tps} TPS, and {why}; the TPS above is "
                         "the model's, not that measurement",
        "what_this": "this", "what_best_reachable": "the best reachable", "what_best": "the best",
        # the way forward when the data cannot answer
        "hint_known_f": "concurrency levels with a known f: {levels}",
        "hint_interpolate": "--method lsq interpolates between measured levels",
        "hint_extrapolate": "--method lsq --extrapolate extends beyond the measured levels (marked)",
        "hint_known_len": "max_tokens with a known K_len: {levels}",
        "hint_not_base": "{model} was measured, but not at the base point (concurrency {c}, max_tokens {length}); "
                         "measure it there",
        "hint_known_models": "models with a known C_model: {models}",
        "hint_known_prompt": "prompt levels with a known K_in (between two, it is interpolated): {levels}",
        "hint_no_prompt": "no prompt levels were measured (results column prompt_level)",
        "hint_lsq": "--method lsq uses every row and may identify it",
        # solve and predict
        "solve_reached": "concurrency {c}: predicted TPS {tps} (target {target} at max_tokens {length})",
        "solve_unreachable": "{unreachable} (target {target} at max_tokens {length}){best}",
        "solve_best": "; best reachable {tps} at concurrency {c}",
        "cheapest": "cheapest: concurrency {c}, max_tokens {length}, model {model}: predicted TPS {tps}{interval}"
                    "{marks}",
        "cheapest_interval": ", 90% interval {low} to {high}",
        "marks": " ({marks})", "marks_sep": ", ",
        "interpolated": "interpolated", "extrapolated": "extrapolated", "extrapolated_at": "extrapolated: {what}",
        "unreachable_under": "unreachable: no configuration reaches {target} TPS under the constraints",
        "stops_cheaper": "what stops a cheaper configuration: {reasons}",
        "best_under": "best under the constraints: {tps} TPS at concurrency {c}, max_tokens {length}, model {model}"
                      " (what stops a higher TPS: {bound})",
        "nothing_higher": "nothing: no configuration is predicted higher",
        "reasons_sep": "; ",
        "method_line": "method: {method} ({why})",
        "predicted": "predicted TPS: {tps}{interval}{marks}",
        "predicted_interval": " (90% interval {low} to {high})",
        "latency_answer": "  TTFT {ttft} s, latency {latency} s{p95} at a prompt of {prompt} tokens",
        "latency_p95": ", P95 latency {p95} s",
        "knee_beyond": "; this concurrency is beyond it: the extra requests only wait",
        "cannot_predict": "cannot predict: not identified by the data: {missing}",
        "cannot_solve": "cannot solve: {why}",
        "not_identified_at": "not identified by the data at max_tokens {length}: {missing}",
        "no_configuration": "no configuration is identified by the data",
        "every_level": "every concurrency level",
        "other_prompt": "prompt length {prompt}: the data have one prompt ({base} tokens) and no prompt levels "
                        "(collect --prompt-tokens), so K_in is not identified; use --method latency",
        "why_default": "the default: the workbook's method cell, chain for a CSV; --method to choose",
        "why_search_default": "the default for a search: chain, the workbook's inverse; --method to choose",
        "why_asked": "asked for (--method)",
    },
    "zh": {
        "na": "无",
        "none": "无",
        "list_sep": "、",
        "h_coefficient": "系数", "h_value": "数值", "h_from": "来源",
        "base_point": "tok/s，基准点：{model}，max_tokens {length}，并发 {c}",
        "row_count": "{n} 行",
        "not_identified": "无法确定",
        "anchor": "锚定并发 {c}",
        "base_prompt": "基准提示长度档位；",
        "first_principles": "；第一性原理 {value}",
        "h_exp_id": "实验编号", "h_c": "并发", "h_max_tokens": "max\ntokens", "h_prompt": "提示", "h_model": "模型",
        "h_measured": "实测\ntok/s", "h_predicted": "预测\ntok/s", "h_dev": "偏差\n%", "h_role": "角色",
        "h_note": "说明",
        "physics_checks": "（{checks}）",
        "rows_shown": "显示 {total} 行中的 {shown} 行：全部剔除与无法预测的行（最多 {limit} 行），以及偏差最大的 "
                      "{worst} 个检验行；每一行都在工作簿和 JSON 报告（--json）里",
        "rows_summary": "检验行：{check}   标定行：{identify}   无法预测：{unidentified}   剔除：{excluded}",
        "mape_summary": "MAPE（检验行）：{mape}   最大偏差：{max}   判定：{verdict}",
        "loo_lsq": "留一法，最小二乘：MAPE {mape}，最大 {max}，共 {rows} 行，判定 {verdict}",
        "loo_chain": "留一法，链式：    MAPE {mape}，最大 {max}，共 {rows} 行，判定 {verdict}",
        "separable": "可分离模型：{summary}",
        "separable_untestable": "无法检验：没有剩余自由度（设计恰好识别；请增加重复实验或单元）",
        "separable_ok": "没有单元破坏可分离模型",
        "separable_broken": "可分离模型在以下位置不成立：",
        "separable_summary": "{prompt}{broken}{parts}",
        "separable_prompt": "{prompt}。",
        "above": "高", "below": "低",
        "parts_sep": "；",
        "with_rows": "{what}（{rows} 行）",
        "cell_prompt": "在并发 {c}、提示 {prompt} token 处，TPS 比可分离模型的预测{direction} {pct:.0f}%",
        "cell_measured": "{where}：实测比可分离模型{direction} {pct:.1f}%",
        "cell_c_length": "并发 {c}、max_tokens {length}",
        "cell_model_c": "模型 {model}、并发 {c}",
        "plateau": "模型 {model}，max_tokens {length}{prompt}：TPS 从并发 {low} 到并发 {high} 持平"
                   "（{tps_low:.1f} -> {tps_high:.1f}），而 f 预测增长 +{growth:.0f}%{faults}",
        "plateau_prompt": "，提示长度档位 {level}",
        "plateau_faults": "；这些并发下有请求失败或被限流",
        "prompt_interaction": "{lead}：{where}",
        "lead_more_high": "较长的提示在较高并发下代价更大",
        "lead_less_high": "较长的提示在较高并发下的代价比可分离模型所说的小",
        "lead_more_low": "较长的提示在低并发下代价更大",
        "lead_less_low": "较长的提示在低并发下的代价比可分离模型所说的小",
        "lead_depends": "提示长度的代价随并发而变",
        "loo_latency": "留一法，延迟模型：MAPE {mape}，最大 {max}，共 {rows} 行，判定 {verdict}"
                       "（TTFT + (L - 1) x ITL，所有提示长度档位）",
        "knee": "拐点：{knee}",
        "little_law": "{n} 行偏离利特尔定律超过 15%（c x L / TPS 对比平均延迟）：{shown}{more}：客户端在这些实验中"
                      "没有让槽位保持繁忙",
        "little_more": " 等，另有 {n} 行",
        "physics_head": "物理检查警告：{of} 行中 {rows} 行：{counts}",
        "physics_count": "{check} {count} 行",
        "physics_row": "  {exp_id}：{text}",
        "physics_more": "  ……另有 {n} 行（每一行：见 JSON 报告，或工作簿的自洽检验工作表）",
        "physics_strict": "严格物理检查：其中 {n} 行被剔除",
        "physics_kept": "仅警告：这些行仍被使用（--strict-physics 会剔除它们）",
        "verified": "已验证：{engine} 重算的 {cells} 个单元格与 Python 参考值一致",
        "not_covered": "未覆盖：{n} 个手填行位于公式覆盖的 {rows} 行之下，工作簿忽略了它们（用 "
                       "`scm-xl fill --workbook` 重新填充以扩展）：",
        "mismatch": "不一致：{cells} 个公式单元格中有 {n} 个（{engine}）与 Python 参考值不符",
        "typed_over_one": "  {n} 个公式单元格被手工覆盖（请恢复其公式，或重新填充工作簿）：",
        "typed_over_many": "  {n} 个公式单元格被手工覆盖（请恢复它们的公式，或重新填充工作簿）：",
        "others_after_one": "  另有 {n} 个{verb}（可能源于上面的单元格）：",
        "others_after_many": "  另有 {n} 个{verb}（可能源于上面的单元格）：",
        "disagrees_one": "单元格不一致", "disagrees_many": "单元格不一致",
        "no_reference": "  {ref}：没有参考值",
        "not_a_formula": "（不是公式：该单元格被手工覆盖）",
        "cell_typed_over": "{ref}{not_a_formula}，参考值 {expected}{hint}",
        "cell_hint": "；{hint}",
        "cell_differs": "{ref}：工作簿 {actual}，参考值 {expected}",
        "cell_empty": "空白",
        "uncovered_row": "第 {row} 行（{exp_id}）",
        "uncovered_no_id": "第 {row} 行（没有 exp_id）",
        "more_row": "  ……另有 {n} 行（全部见 JSON 报告，--json）",
        "more_cell": "  ……另有 {n} 个单元格（全部见 JSON 报告，--json）",
        "wb_inverse": "工作簿的反推：{at}目标 {target} TPS -> 并发 {c}（预测 {tps} TPS）",
        "wb_inverse_at": "max_tokens {length} 下",
        "wb_forward": "工作簿的正向预测：并发 {c}，max_tokens {length} -> {tps} TPS",
        "wrote": "已写入 {path}",
        "warning": "警告：{text}",
        "note": "注意：{text}",
        "error": "错误：{text}",
        "next_open": "下一步：打开 {path}（打开即是“{sheet}”工作表），或用 scm-xl report 生成 HTML 页面",
        "failed_verification": "工作簿未通过验证：{target} {what}；未通过验证的工作簿是 {shown}",
        "left_as_it_was": "保持原样", "not_written": "未写入",
        "step_read": "读取 {path}",
        "step_rebuild": "重建 {path}",
        "step_build": "生成工作簿",
        "step_save": "保存工作簿",
        "step_recalculate": "用 {engine} 重算",
        "step_compare": "将 {cells:,} 个公式单元格与参考值比较",
        "step_reference": "计算参考值（在引擎之后，以节省内存）",
        "step_store": "把计算出的值存入文件",
        "step_write": "写入 {path}",
        "requests_several": "逐请求记录只从单个结果 CSV 旁读取：给了多个结果 CSV 时，工作簿里没有逐请求记录（其 SLO "
                            "达成率和 goodput 留空）",
        "requests_none": "{reason}：工作簿里没有逐请求记录（其 SLO 达成率和 goodput 留空）",
        "requests_wildcard": "exp_id {exp_id!r} 含有 *、? 或 ~，电子表格的查找会把它当作通配模式：逐请求记录没有写入"
                             "工作簿",
        "requests_read": "逐请求记录：{path} 中的 {n:,} 个实测请求（由工作簿的 SLO 工作表评判）",
        "requests_half_line": "{path}:{line}：最后一行只写了一半，已略去",
        "comment_lost": "{where} 上的批注（{exp_id} 所在行）未保留：新数据中没有 {exp_id}；批注原文：{text}",
        "comment_rewritten": "{where} 上的批注保留在 {now}，但 scm-xl 改写了该单元格：{before} 现在是 {after}",
        "comment_moved": "{where}（随 {exp_id} 移动）",
        "row_unusable": "第 {row} 行：{reason}",
        "row_only_notes": "第 {row} 行只有备注或来源，没有实验：不使用",
        "row_no_display": "第 {row} 行的 TPS、角色和状态三格没有公式（是插入的行吗？）：在 `scm-xl fill --workbook` "
                          "重建它们之前保持空白；计算不受影响",
        "verdict_line": "一致性判定：{verdict}（{rows}，MAPE {mape}{short}）",
        "check_rows_one": "{n} 个检验行", "check_rows_many": "{n} 个检验行",
        "excellent_needs": "；优秀需要至少 {n} 个",
        "label_row": "行 {ids}", "label_rows": "行 {ids}（重复实验，均值 {tps} TPS）",
        "label_tps": "（{tps} TPS）",
        "repeats": "这是实测的{label}{tps}，它确定了 {names}：答案只是重复这次实测，什么也没有检验",
        "measured_defines": "此处有实测：{label}{tps}，它在链式方法中确定了 {names}；本答案与之相差 {off}",
        "measured_check": "此处有实测：行 {row}，{tps} TPS（检验行{off}）",
        "model_off": "，模型偏差 {pct}",
        "measured_excluded": "此处有实测：行 {row}，{tps} TPS，{why}；答案来自模型，不是那次实测",
        "measured_unused": "此处有实测：行 {row}，{tps} TPS（{role}：未使用）",
        "excluded_lead": "剔除", "excluded_why": "剔除：{reason}", "not_used": "未使用",
        "holdout_line": "留一法误差（{method}）：MAPE {mape}，最大 {max}，共 {rows} 行，判定 {verdict}",
        "excluded_here": "{what}配置已实测：行 {row}，{tps} TPS，{why}；上面的 TPS 来自模型，不是那次实测",
        "what_this": "该", "what_best_reachable": "可达最高的", "what_best": "最高的",
        "hint_known_f": "f 已知的并发档位：{levels}",
        "hint_interpolate": "--method lsq 可在已测档位之间插值",
        "hint_extrapolate": "--method lsq --extrapolate 可外推到已测档位之外（会标注）",
        "hint_known_len": "K_len 已知的 max_tokens：{levels}",
        "hint_not_base": "{model} 已实测，但不在基准点（并发 {c}，max_tokens {length}）；请在基准点实测它",
        "hint_known_models": "C_model 已知的模型：{models}",
        "hint_known_prompt": "K_in 已知的提示长度档位（两档之间插值）：{levels}",
        "hint_no_prompt": "没有实测提示长度档位（结果列 prompt_level）",
        "hint_lsq": "--method lsq 使用全部行，可能可以确定它",
        "solve_reached": "并发 {c}：预测 TPS {tps}（max_tokens {length} 下目标 {target}）",
        "solve_unreachable": "{unreachable}（max_tokens {length} 下目标 {target}）{best}",
        "solve_best": "；可达最高 {tps}（并发 {c}）",
        "cheapest": "最省配置：并发 {c}，max_tokens {length}，模型 {model}：预测 TPS {tps}{interval}{marks}",
        "cheapest_interval": "，90% 区间 {low} 至 {high}",
        "marks": "（{marks}）", "marks_sep": "，",
        "interpolated": "插值", "extrapolated": "外推", "extrapolated_at": "外推：{what}",
        "unreachable_under": "无法达到：在约束下没有配置能达到 {target} TPS",
        "stops_cheaper": "更省的配置受限于：{reasons}",
        "best_under": "约束下最高：{tps} TPS，并发 {c}，max_tokens {length}，模型 {model}（更高的 TPS 受限于：{bound}）",
        "nothing_higher": "无：没有配置的预测更高",
        "reasons_sep": "；",
        "method_line": "方法：{method}（{why}）",
        "predicted": "预测 TPS：{tps}{interval}{marks}",
        "predicted_interval": "（90% 区间 {low} 至 {high}）",
        "latency_answer": "  提示 {prompt} token 时：首字延迟 TTFT {ttft} 秒，延迟 {latency} 秒{p95}",
        "latency_p95": "，P95 延迟 {p95} 秒",
        "knee_beyond": "；该并发已超过拐点：多出的请求只是在排队等待",
        "cannot_predict": "无法预测：数据无法确定：{missing}",
        "cannot_solve": "无法求解：{why}",
        "not_identified_at": "数据在 max_tokens {length} 下无法确定：{missing}",
        "no_configuration": "数据无法确定任何配置",
        "every_level": "所有并发档位",
        "other_prompt": "提示长度 {prompt}：数据只有一种提示（{base} 个 token），没有提示长度档位（collect "
                        "--prompt-tokens），所以 K_in 无法确定；请用 --method latency",
        "why_default": "默认：工作簿的方法单元格，CSV 则为 chain；用 --method 选择",
        "why_search_default": "搜索的默认：chain，即工作簿的反推；用 --method 选择",
        "why_asked": "按 --method 指定",
    },
}

# The physics checks' codes (the JSON's) in a word or two, for the rows table and the physics summary.
PHYSICS_NAMES: dict[Lang, dict[str, str]] = {
    "en": {"short_output": "short output", "superlinear": "superlinear gain",
           "over_ceiling": "above the roofline ceiling", "kv_over": "KV cache over GPU memory"},
    "zh": {"short_output": "输出过短", "superlinear": "超线性增益", "over_ceiling": "超过屋顶线上限",
           "kv_over": "KV 缓存超出显存"},
}

# What stops a configuration in solve's search (scm_xl.constrained's names; its REASON_WORDS are
# the English), in Chinese.
REASON_NAMES_ZH: dict[str, str] = {
    "model": "模型不在允许的范围内",
    "max_tokens": "max_tokens 不在允许的取值中",
    "max_concurrency": "超过允许的最高并发",
    "rate_limit": "达到或超过服务商返回 HTTP 429 的并发",
    "extrapolation": "超出已测并发范围（未允许外推）",
    "latency_p95": "P95 延迟（实测，或延迟模型预测）超过上限",
    "latency_p95_unmeasured": "该配置没有实测 P95 延迟，无法证明满足上限",
    "ttft_p95": "P95 首字延迟（实测，或延迟模型预测）超过上限",
    "ttft_p95_unmeasured": "该配置没有实测 P95 首字延迟，无法证明满足上限",
    "target_tps": "目标本身：每个更省的配置的预测都达不到",
}


def words(lang: Lang) -> dict[str, str]:
    """The sentences in `lang` (English for anything else)."""
    return WORDS.get(lang, WORDS["en"])


class Text(_Text):
    """A sentence of WORDS (see scm_xl.words): its English as a str, `say(lang)` in either language."""

    table = WORDS


class Joined(_Joined):
    """Items joined by a separator of WORDS (`sep`, a key: list_sep, parts_sep, ...)."""

    table = WORDS


def describe_reasons(names: list[str] | tuple[str, ...], lang: Lang) -> str:
    """solve's binding constraints (scm_xl.constrained's names) in Chinese; "" for none. The English
    are scm_xl.constrained's (REASON_WORDS): `constrained.describe_reasons(names, lang)` words them
    in either language, through this one for Chinese. (No import of scm_xl.constrained here: it
    imports scm_xl.lsq, which takes its words from this module.)"""
    table = REASON_NAMES_ZH if lang == "zh" else {}
    return words(lang)["reasons_sep"].join(table.get(name, name) for name in names)
