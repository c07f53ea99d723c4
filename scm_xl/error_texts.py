"""The words of scm-xl's error messages, in English and Chinese: one home for both.

Two kinds of sentence live here:

* the problem of an `InputError` that a person meets first (a file not found, not a regular
  file, empty, not readable in its encoding, missing a required column, a cell that is not a
  number...): the modules that raise them (scm_xl.input_files, scm_xl.results, scm_xl.safety)
  raise `InputError.worded(key, ..., **values)`, whose English is `problem` as always and whose
  other language the CLI asks for with `InputError.text(lang)`;
* click's own usage errors (an invalid value, no such option, a missing argument...), which the
  CLI's group renders in Chinese (scm_xl.cli._common.ScmXlGroup) by matching click's English
  against the templates of CLICK_MESSAGES: the English template is click's own sentence, and its
  `{name}` slots become the parts of the pattern that are carried over into the Chinese.

"{x}" marks a value spliced in with str.format. The English sentences are the ones scm-xl (and
click) always printed; tests compare them to the character. A value may be a `Phrase` (a
sentence of this table, rendered in the same language) or `Joined` (items joined by a
separator of this table). Whatever is not here stays English in both languages.
"""

from __future__ import annotations

import functools
import re
from typing import TYPE_CHECKING, Any, Mapping

from scm_xl.words import Joined as _Joined
from scm_xl.words import Text as _Text
from scm_xl.words import render

if TYPE_CHECKING:
    from scm_xl.rules import Lang

WORDS: dict[Lang, dict[str, str]] = {
    "en": {
        # separators of Joined values
        "list_sep": ", ", "or_sep": " or ", "alt_sep": "; ",
        # opening a file (scm_xl.input_files)
        "file_not_found": "file not found",
        "cannot_read": "cannot read file: {reason}",
        "not_regular": "not a regular file ({kind}): give the path of a file saved on disk",
        "kind_folder": "a folder", "kind_fifo": "a FIFO (named pipe)", "kind_char": "a character device",
        "kind_block": "a block device", "kind_socket": "a socket", "kind_other": "not a regular file",
        # a results CSV (scm_xl.results)
        "no_results_given": "no results file given",
        "given_twice": "given twice (also as {other})",
        "is_workbook": "this is a workbook (.xlsx), not a results CSV: to check it run `scm-xl verify {where}`; "
                       "to add a CSV's rows to it run `scm-xl fill RESULTS.csv --workbook {where}`",
        "is_xls": "this is an old Excel .xls file, not a CSV: in Excel use File > Save As > CSV UTF-8",
        "not_valid_text": "not valid {encoding} text",
        "unknown_encoding": "not a CSV in UTF-8, UTF-16, GB18030/GBK or Windows-1252 (its bytes do not show "
                            "clearly which, if any): save it from the spreadsheet as \"CSV UTF-8\"",
        "nul_bytes": "not a CSV text file (it contains NUL bytes)",
        "bad_csv": "bad CSV: {reason}",
        "empty_file": "empty file: no header row",
        "no_data_rows": "no data rows",
        "missing_column": "missing required column {names} (accepted headers: {accepted})",
        "missing_columns": "missing required columns {names} (accepted headers: {accepted})",
        "duplicate_column": "duplicate column: {name} (column {index}) is also {canonical}",
        "field_count": "expected {expected} fields (as in the header) but found {found}",
        "duplicate_exp_id": "duplicate exp_id {exp_id} (first used on line {first})",
        "blank": "required value is blank",
        "not_a_number": "not a number: {text}{hint}",
        "hint_thousands": " (the comma looks like a thousands separator: write {plain} without it; if it is a "
                          "decimal comma, use '.')",
        "hint_decimal_comma": " (use '.' as the decimal separator)",
        "not_finite": "not a finite number: {text}",
        "whole_number": "must be a whole number, got {text}",
        "positive": "must be positive, got {value}",
        "non_negative": "must not be negative, got {value}",
        "override": "unrecognised override {value}: use include or exclude (also accepted: in/ex, 1/0, yes/no, "
                    "纳入/剔除)",
        # a workbook's zip (scm_xl.safety)
        "workbook_too_big": "refused: the workbook is {size} (limit {limit})",
        "damaged_part": "not a readable .xlsx workbook: part {name} is damaged ({reason})",
        "xml_other_encoding": "refused: part {name} is XML in an encoding other than UTF-8 or UTF-16",
        "xml_not_utf": "refused: part {name} is not UTF-8 or UTF-16 XML (the encodings an .xlsx part may use)",
        # click's usage errors: its own English (the CLICK_MESSAGES patterns) and what frames them
        "click_usage": "Usage:",
        "click_try": "Try '{command} {option}' for help.",
        "click_invalid_for": "Invalid value for {hint}: {message}",
        "click_invalid": "Invalid value: {message}",
        "click_missing_argument_more": "Missing argument {hint}. {message}",
        "click_missing_option_more": "Missing option {hint}. {message}",
        "click_missing_argument": "Missing argument {hint}.",
        "click_missing_option": "Missing option {hint}.",
        "click_missing_parameter": "Missing parameter {hint}.",
        "click_missing_command": "Missing command.",
        "click_choose_from": "Choose from:{choices}",
        "click_did_you_mean": "{message} Did you mean {possibility}?",
        "click_did_you_mean_any": "{message} (Did you mean one of: {possibilities}?)",
        "click_no_such_option": "No such option {name}.",
        "click_no_such_command": "No such command {name}.",
        "click_extra_argument": "Got unexpected extra argument ({args})",
        "click_extra_arguments": "Got unexpected extra arguments ({args})",
        "click_requires_argument": "Option {name} requires an argument.",
        "click_requires_arguments": "Option {name} requires {nargs} arguments.",
        "click_takes_no_value": "Option {name} does not take a value.",
        "click_argument_takes": "Argument {name} takes {nargs} values.",
        "click_not_number": "{value} is not a number",
        "click_not_finite": "{value} is not a finite number",
        "click_above": "{value} must be above {limit}",
        "click_at_least": "{value} must be at least {limit}",
        "click_not_integer": "{value} is not a valid integer.",
        "click_not_integer_range": "{value} is not a valid integer range.",
        "click_not_float": "{value} is not a valid float.",
        "click_not_float_range": "{value} is not a valid float range.",
        "click_not_in_range": "{value} is not in the range {range}.",
        "click_not_one_of": "{value} is not one of {choices}.",
        "click_not_choice": "{value} is not '{choice}'.",
        "click_file_missing": "File {name} does not exist.",
        "click_path_missing": "Path {name} does not exist.",
        "click_folder_missing": "Directory {name} does not exist.",
        "click_file_is_folder": "File {name} is a directory.",
        "click_folder_is_file": "Directory {name} is a file.",
        "click_not_readable": "File {name} is not readable.",
        "click_not_writable": "File {name} is not writable.",
    },
    "zh": {
        "list_sep": ", ", "or_sep": " 或 ", "alt_sep": "；",
        "file_not_found": "找不到文件",
        "cannot_read": "无法读取文件：{reason}",
        "not_regular": "不是普通文件（{kind}）：请给出保存在磁盘上的文件的路径",
        "kind_folder": "是文件夹", "kind_fifo": "是 FIFO（命名管道）", "kind_char": "是字符设备",
        "kind_block": "是块设备", "kind_socket": "是套接字", "kind_other": "不是普通文件",
        "no_results_given": "没有给出结果文件",
        "given_twice": "给出了两次（也作为 {other}）",
        "is_workbook": "这是工作簿（.xlsx），不是结果 CSV：检查它请运行 `scm-xl verify {where}`；"
                       "把 CSV 的行加进去请运行 `scm-xl fill RESULTS.csv --workbook {where}`",
        "is_xls": "这是旧版 Excel 的 .xls 文件，不是 CSV：请在 Excel 中用“文件 > 另存为 > CSV UTF-8”",
        "not_valid_text": "不是有效的 {encoding} 文本",
        "unknown_encoding": "不是 UTF-8、UTF-16、GB18030/GBK 或 Windows-1252 编码的 CSV（从字节看不出是哪一种，"
                            "也可能都不是）：请在电子表格中另存为“CSV UTF-8”",
        "nul_bytes": "不是 CSV 文本文件（含有 NUL 字节）",
        "bad_csv": "CSV 格式错误：{reason}",
        "empty_file": "空文件：没有表头行",
        "no_data_rows": "没有数据行",
        "missing_column": "缺少必需的列 {names}（可用的表头：{accepted}）",
        "missing_columns": "缺少必需的列 {names}（可用的表头：{accepted}）",
        "duplicate_column": "重复的列：{name}（第 {index} 列）也是 {canonical}",
        "field_count": "应有 {expected} 个字段（与表头相同），实有 {found} 个",
        "duplicate_exp_id": "重复的 exp_id {exp_id}（第 {first} 行已用过）",
        "blank": "必填的值为空",
        "not_a_number": "不是数字：{text}{hint}",
        "hint_thousands": "（逗号像是千位分隔符：请去掉它，写成 {plain}；如果它是小数点，请改用 '.'）",
        "hint_decimal_comma": "（请用 '.' 作小数点）",
        "not_finite": "不是有限的数：{text}",
        "whole_number": "必须是整数，实为 {text}",
        "positive": "必须为正数，实为 {value}",
        "non_negative": "不能为负数，实为 {value}",
        "override": "无法识别的 override {value}：请用 include 或 exclude（也可用 in/ex、1/0、yes/no、纳入/剔除）",
        "workbook_too_big": "拒绝读取：工作簿大小为 {size}（上限 {limit}）",
        "damaged_part": "不是可读的 .xlsx 工作簿：部件 {name} 已损坏（{reason}）",
        "xml_other_encoding": "拒绝读取：部件 {name} 是 UTF-8 和 UTF-16 以外编码的 XML",
        "xml_not_utf": "拒绝读取：部件 {name} 不是 UTF-8 或 UTF-16 的 XML（.xlsx 的部件只能用这两种编码）",
        "click_usage": "用法：",
        "click_try": "运行 '{command} {option}' 查看帮助。",
        "click_invalid_for": "{hint} 的值无效：{message}",
        "click_invalid": "值无效：{message}",
        "click_missing_argument_more": "缺少参数 {hint}。{message}",
        "click_missing_option_more": "缺少选项 {hint}。{message}",
        "click_missing_argument": "缺少参数 {hint}。",
        "click_missing_option": "缺少选项 {hint}。",
        "click_missing_parameter": "缺少参数 {hint}。",
        "click_missing_command": "缺少命令。",
        "click_choose_from": "可选：{choices}",
        "click_did_you_mean": "{message}是不是要用 {possibility}？",
        "click_did_you_mean_any": "{message}（是不是要用其中之一：{possibilities}？）",
        "click_no_such_option": "没有选项 {name}。",
        "click_no_such_command": "没有命令 {name}。",
        "click_extra_argument": "多余的参数（{args}）",
        "click_extra_arguments": "多余的参数（{args}）",
        "click_requires_argument": "选项 {name} 需要一个值。",
        "click_requires_arguments": "选项 {name} 需要 {nargs} 个值。",
        "click_takes_no_value": "选项 {name} 不接受值。",
        "click_argument_takes": "参数 {name} 需要 {nargs} 个值。",
        "click_not_number": "{value} 不是数字",
        "click_not_finite": "{value} 不是有限的数",
        "click_above": "{value} 必须大于 {limit}",
        "click_at_least": "{value} 必须不小于 {limit}",
        "click_not_integer": "{value} 不是有效的整数。",
        "click_not_integer_range": "{value} 不是有效的整数。",
        "click_not_float": "{value} 不是有效的数。",
        "click_not_float_range": "{value} 不是有效的数。",
        "click_not_in_range": "{value} 不在范围 {range} 内。",
        "click_not_one_of": "{value} 不是 {choices} 之一。",
        "click_not_choice": "{value} 不是 '{choice}'。",
        "click_file_missing": "文件 {name} 不存在。",
        "click_path_missing": "路径 {name} 不存在。",
        "click_folder_missing": "文件夹 {name} 不存在。",
        "click_file_is_folder": "文件 {name} 是文件夹。",
        "click_folder_is_file": "文件夹 {name} 是文件。",
        "click_not_readable": "文件 {name} 不可读。",
        "click_not_writable": "文件 {name} 不可写。",
    },
}

# click's usage-error sentences, in the order they are tried (a more specific one before one whose
# pattern would also take it: "not one of" before "not {choice}", the "Did you mean" tails before the
# sentences they end). A slot named `message` holds a sentence of its own, rendered in turn.
CLICK_MESSAGES: tuple[str, ...] = (
    "click_did_you_mean_any", "click_did_you_mean",
    "click_invalid_for", "click_invalid",
    "click_missing_argument_more", "click_missing_option_more",
    "click_missing_argument", "click_missing_option", "click_missing_parameter", "click_missing_command",
    "click_choose_from",
    "click_no_such_option", "click_no_such_command",
    "click_extra_argument", "click_extra_arguments",
    "click_requires_argument", "click_requires_arguments", "click_takes_no_value", "click_argument_takes",
    "click_not_number", "click_not_finite", "click_above", "click_at_least",
    "click_not_integer", "click_not_integer_range", "click_not_float", "click_not_float_range",
    "click_not_in_range",
    "click_file_missing", "click_path_missing", "click_folder_missing", "click_file_is_folder",
    "click_folder_is_file", "click_not_readable", "click_not_writable",
    "click_not_one_of", "click_not_choice",
)


class Phrase(_Text):
    """A value that is itself a sentence of WORDS (with its own values), in the message's language."""

    table = WORDS


class Joined(_Joined):
    """A value that is a list: its items (each a value) joined by the separator `sep` of WORDS."""

    table = WORDS


def words(lang: Lang) -> dict[str, str]:
    """The sentences of `lang` (English for a language it does not know)."""
    return WORDS.get(lang, WORDS["en"])


def problem_text(lang: Lang, key: str, values: Mapping[str, Any]) -> str:
    """The sentence `key` in `lang`, `values` spliced in (Phrase and Joined said in `lang` too)."""
    return render(WORDS, key, values, lang)


@functools.lru_cache(maxsize=None)
def _pattern(key: str) -> re.Pattern[str]:
    """The English template of `key` as a pattern: its text literal, each {slot} a named group."""
    parts = re.split(r"\{(\w+)\}", WORDS["en"][key])
    pattern = "".join(re.escape(part) if index % 2 == 0 else f"(?P<{part}>.+?)"
                      for index, part in enumerate(parts))
    return re.compile(pattern, re.DOTALL)


def click_message(lang: Lang, message: str) -> str:
    """One of click's English usage-error messages in `lang`: the first template of CLICK_MESSAGES
    that matches it whole, with its slots carried over (a `message` slot rendered the same way);
    a message no template matches is returned as it is (and English always is)."""
    if lang == "en":
        return message
    for key in CLICK_MESSAGES:
        found = _pattern(key).fullmatch(message)
        if found is not None:
            values = found.groupdict()
            if "message" in values:
                values["message"] = click_message(lang, values["message"])
            return words(lang)[key].format(**values)
    return message


def click_usage(lang: Lang, text: str) -> str:
    """The lines click prints above a usage error (its usage line, then "Try '... --help' for help.")
    in `lang`; other lines (a usage line's wrapped tail) as they are."""
    if lang == "en":
        return text
    table, english = words(lang), WORDS["en"]
    lines = []
    for line in text.split("\n"):
        if line.startswith(english["click_usage"]):
            line = table["click_usage"] + line[len(english["click_usage"]):].lstrip(" ")
        else:
            found = _pattern("click_try").fullmatch(line)
            if found is not None:
                line = table["click_try"].format(**found.groupdict())
        lines.append(line)
    return "\n".join(lines)
