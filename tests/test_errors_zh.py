"""Errors speak the command's language (issue 17, item 9: "every text a person reads in their
language, CLI output included"): under --lang zh, or a zh locale with no --lang, click's own usage
errors (invalid value, not a number, not in range, invalid choice, no such option, missing argument
or option, an extra argument, an unknown command) and the first input errors a person meets (file
not found, not a regular file, empty, unreadable encoding, missing required columns, a cell that
is not a number) are Chinese after "错误：", exit 2, no traceback; in English they are what they
always were: click's, untouched, and scm-xl's sentences to the character."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from scm_xl.cli import main
from scm_xl.cli._common import lang_in_argv
from scm_xl.error_texts import CLICK_MESSAGES, WORDS, click_message
from scm_xl.errors import InputError
from scm_xl.results import read_results

HEADER = ("exp_id,model,concurrency,requests_per_slot,total_requests,max_tokens,"
          "total_time_s,total_output_tokens")
ZH_LOCALE = "zh_CN.UTF-8"
# click's English frames: none may be left in a Chinese usage error
CLICK_ENGLISH = ("Usage:", "Try '", "Error:", "Invalid value", "No such", "Missing", "Got unexpected",
                 "is not", "Did you mean", "does not exist", "is a directory", "requires")


def _invoke(group: click.Group, args: list[str], env: dict[str, str] | None = None) -> tuple[int, str]:
    result = CliRunner().invoke(group, [str(a) for a in args], prog_name="scm-xl", env=env)
    return result.exit_code, result.output


def _run(*args: object, env: dict[str, str] | None = None) -> tuple[int, str]:
    return _invoke(main, [str(a) for a in args], env)


def _process(*args: object, locale: str) -> tuple[int, str]:
    """scm-xl in a process of its own (python -m scm_xl, named scm-xl) under `locale` (LC_ALL)."""
    env = {k: v for k, v in os.environ.items() if k not in ("LC_ALL", "LC_MESSAGES", "LANG")}
    done = subprocess.run([sys.executable, "-m", "scm_xl", *map(str, args)], capture_output=True, text=True,
                          timeout=120, stdin=subprocess.DEVNULL, env={**env, "LC_ALL": locale})
    return done.returncode, done.stdout + done.stderr


def _plain_click(args: list[str]) -> tuple[int, str]:
    """What click itself prints for `args`: the same commands under a plain click group."""
    plain = click.Group(main.name, commands=main.commands, context_settings=main.context_settings)
    return _invoke(plain, args)


def _assert_refused_in_chinese(code: int, output: str) -> None:
    assert code == 2, output
    assert "Traceback" not in output, output
    assert "错误：" in output, output
    for english in CLICK_ENGLISH:
        assert english not in output, (english, output)


# (arguments, what the Chinese says) for click's common usage errors; --lang zh is added after the
# command's own arguments or before them (then it is parsed after the bad value, or not at all)
USAGE_ERRORS = [
    (["solve", "x.xlsx", "--target-tps", "abc"], ["'--target-tps' 的值无效：'abc' 不是数字"]),
    (["solve", "x.xlsx", "--target-tps", "-5"], ["'--target-tps' 的值无效：'-5' 必须大于 0"]),
    (["solve", "x.xlsx", "--target-tps", "5", "--max-tokens", "0"], ["'--max-tokens' 的值无效：0 不在范围 x>=1 内。"]),
    (["solve", "x.xlsx", "--target-tps", "5", "--max-tokens", "many"], ["'--max-tokens' 的值无效：'many' 不是有效的整数。"]),
    (["solve", "x.xlsx", "--method", "bogus"], ["'--method' 的值无效：'bogus' 不是 'auto', 'chain', 'lsq', 'latency' 之一。"]),
    (["solve", "x.xlsx", "--nosuch"], ["没有选项 '--nosuch'。"]),
    (["solve", "x.xlsx", "--target-tp", "5"], ["没有选项 '--target-tp'。是不是要用 '--target-tps'？"]),
    (["solve"], ["缺少参数 'SOURCE'。"]),
    (["report", "x.csv"], ["缺少选项 '-o' / '--output'。"]),
    (["solve", "x.xlsx", "y.xlsx"], ["多余的参数（y.xlsx）"]),
    (["build", "template", "-o", "."], ["'-o' / '--output' 的值无效：文件 '.' 是文件夹。"]),
]


@pytest.mark.parametrize("lang_first", [False, True], ids=["lang-after", "lang-before"])
@pytest.mark.parametrize(("args", "said"), USAGE_ERRORS, ids=[" ".join(args) for args, _ in USAGE_ERRORS])
def test_click_usage_errors_under_lang_zh(args: list[str], said: list[str], lang_first: bool) -> None:
    command = args[:2] if args[0] == "build" else args[:1]
    rest = args[len(command):]
    code, output = _run(*command, *(["--lang", "zh", *rest] if lang_first else [*rest, "--lang", "zh"]))
    _assert_refused_in_chinese(code, output)
    for words in said:
        assert f"错误：{words}" in output, output
    name = " ".join(command)
    assert f"用法：scm-xl {name} [OPTIONS]" in output, output
    assert f"运行 'scm-xl {name} --help' 查看帮助。" in output, output


@pytest.mark.parametrize(("args", "said"), USAGE_ERRORS[:8:3], ids=[" ".join(a) for a, _ in USAGE_ERRORS[:8:3]])
def test_click_usage_errors_under_a_chinese_locale(args: list[str], said: list[str]) -> None:
    """No --lang: the locale says zh (a process of its own, as a person runs it)."""
    code, output = _process(*args, locale=ZH_LOCALE)
    _assert_refused_in_chinese(code, output)
    assert f"错误：{said[0]}" in output, output
    assert f"用法：scm-xl {args[0]} [OPTIONS]" in output, output


def test_an_unknown_command_under_a_chinese_locale() -> None:
    code, output = _run("nosuch", env={"LC_ALL": ZH_LOCALE})
    _assert_refused_in_chinese(code, output)
    assert "错误：没有命令 'nosuch'。" in output, output
    assert "用法：scm-xl [OPTIONS] COMMAND [ARGS]..." in output, output


def test_lang_en_beats_a_chinese_locale() -> None:
    args = ["solve", "x.xlsx", "--target-tps", "abc"]
    code, output = _run(*args, "--lang", "en", env={"LC_ALL": ZH_LOCALE})
    assert (code, output) == _plain_click([*args, "--lang", "en"])
    assert "Error: Invalid value for '--target-tps': 'abc' is not a number" in output


@pytest.mark.parametrize(("args", "_said"), USAGE_ERRORS, ids=[" ".join(args) for args, _ in USAGE_ERRORS])
def test_click_usage_errors_in_english_are_clicks_own(args: list[str], _said: list[str]) -> None:
    """In English (the suite's C locale, and --lang en) the error is what click itself prints."""
    expected = _plain_click(args)
    assert expected[0] == 2 and "Error: " in expected[1], expected
    assert _run(*args) == expected
    assert _run(*args, "--lang", "en") == _plain_click([*args, "--lang", "en"])


def test_a_command_without_lang_keeps_english_under_a_chinese_locale() -> None:
    """plan, collect, roofline and serve-sim print English whatever the locale; so do their errors."""
    code, output = _run("plan", "--bogus", env={"LC_ALL": ZH_LOCALE})
    assert (code, output) == _plain_click(["plan", "--bogus"])
    assert "Error: No such option '--bogus'" in output


def test_an_invalid_lang_falls_back_to_the_locale() -> None:
    code, output = _run("solve", "x.xlsx", "--lang", "fr", env={"LC_ALL": ZH_LOCALE})
    _assert_refused_in_chinese(code, output)
    assert "错误：'--lang' 的值无效：'fr' 不是 'zh', 'en' 之一。" in output, output


def test_lang_in_argv() -> None:
    assert lang_in_argv(["solve", "--lang", "zh"]) == "zh"
    assert lang_in_argv(["solve", "--lang=zh", "x"]) == "zh"
    assert lang_in_argv(["--lang", "zh", "--lang", "en"]) == "en"
    assert lang_in_argv(["--lang", "fr"]) is None
    assert lang_in_argv(["--lang"]) is None
    assert lang_in_argv(["x", "--", "--lang", "zh"]) is None


# ---- input errors: the problem in Chinese, the place (path:line: column: ) as it was


def _csv(tmp_path: Path, name: str, text: str | bytes) -> Path:
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def _input_cases(tmp_path: Path) -> list[tuple[str, str, str]]:
    """(path, the English error line, the Chinese error line) of the first input errors a person meets."""
    missing = tmp_path / "nosuch.csv"
    empty = _csv(tmp_path, "empty.csv", "")
    columns = _csv(tmp_path, "columns.csv", "exp_id,model,concurrency,requests_per_slot,total_requests,max_tokens,"
                                            "total_output_tokens\nE01,m,1,10,10,50,25\n")
    number = _csv(tmp_path, "number.csv", f"{HEADER}\nE01,m,abc,10,10,50,0.55,25\n")
    thousands = _csv(tmp_path, "thousands.csv", f'{HEADER}\nE01,m,"1,000",10,10,50,0.55,25\n')
    encoding = _csv(tmp_path, "encoding.csv", bytes(range(128, 256)) * 4)
    blank = _csv(tmp_path, "blank.csv", f"{HEADER}\nE01,m,,10,10,50,0.55,25\n")
    return [
        (str(missing), f"Error: {missing}: file not found", f"错误：{missing}: 找不到文件"),
        ("/dev/null",
         "Error: /dev/null: not a regular file (a character device): give the path of a file saved on disk",
         "错误：/dev/null: 不是普通文件（是字符设备）：请给出保存在磁盘上的文件的路径"),
        (str(empty), f"Error: {empty}:1: empty file: no header row", f"错误：{empty}:1: 空文件：没有表头行"),
        (str(columns), f"Error: {columns}:1: missing required column total_time_s "
                       "(accepted headers: total_time_s or 总耗时(s) or 总耗时（s）)",
         f"错误：{columns}:1: 缺少必需的列 total_time_s（可用的表头：total_time_s 或 总耗时(s) 或 总耗时（s））"),
        (str(number), f'Error: {number}:2: concurrency: not a number: "abc"',
         f'错误：{number}:2: concurrency: 不是数字："abc"'),
        (str(thousands), f'Error: {thousands}:2: concurrency: not a number: "1,000" (the comma looks like a thousands '
                         "separator: write 1000 without it; if it is a decimal comma, use '.')",
         f'错误：{thousands}:2: concurrency: 不是数字："1,000"（逗号像是千位分隔符：请去掉它，写成 1000；'
         "如果它是小数点，请改用 '.'）"),
        (str(encoding), f"Error: {encoding}:1: not a CSV in UTF-8, UTF-16, GB18030/GBK or Windows-1252 (its bytes do "
                        'not show clearly which, if any): save it from the spreadsheet as "CSV UTF-8"',
         f"错误：{encoding}:1: 不是 UTF-8、UTF-16、GB18030/GBK 或 Windows-1252 编码的 CSV"),
        (str(blank), f"Error: {blank}:2: concurrency: required value is blank", f"错误：{blank}:2: concurrency: 必填的值为空"),
    ]


def _error_lines(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith(("Error:", "错误："))]


def test_input_errors_under_lang_zh_and_en(tmp_path: Path) -> None:
    for path, english, chinese in _input_cases(tmp_path):
        out = tmp_path / "out.xlsx"
        code, output = _run("fill", path, "-o", out, "--no-progress", "--lang", "zh")
        assert code == 2 and "Traceback" not in output, output
        assert len(_error_lines(output)) == 1 and _error_lines(output)[0].startswith(chinese), (chinese, output)
        code, output = _run("fill", path, "-o", out, "--no-progress", "--lang", "en")
        assert code == 2 and "Traceback" not in output, output
        assert _error_lines(output) == [english], output
        assert not out.exists()


def test_input_errors_under_a_chinese_locale(tmp_path: Path) -> None:
    for path, _english, chinese in _input_cases(tmp_path)[:5:2]:
        code, output = _process("fill", path, "-o", tmp_path / "out.xlsx", "--no-progress", locale=ZH_LOCALE)
        assert code == 2 and "Traceback" not in output, output
        assert _error_lines(output) == [chinese], output


def test_an_input_error_keeps_its_english_problem(tmp_path: Path) -> None:
    """The library's InputError: `problem` and str() English, as callers and tests read them; the
    Chinese only where asked (text("zh")), with the same place."""
    path = _csv(tmp_path, "number.csv", f"{HEADER}\nE01,m,abc,10,10,50,0.55,25\n")
    with pytest.raises(InputError) as caught:
        read_results(path)
    error = caught.value
    assert error.problem == 'not a number: "abc"'
    assert str(error) == f'{path}:2: concurrency: not a number: "abc"'
    assert error.text("en") == str(error)
    assert error.text("zh") == f'{path}:2: concurrency: 不是数字："abc"'
    plain = InputError("something English", path="x.csv", line=3)
    assert plain.text("zh") == str(plain) == "x.csv:3: something English"


# ---- the table


def _slots(text: str) -> set[str]:
    return set(re.findall(r"\{(\w+)\}", text))


def test_every_sentence_has_both_languages_and_the_same_slots() -> None:
    assert WORDS["en"].keys() == WORDS["zh"].keys()
    for key, english in WORDS["en"].items():
        assert _slots(WORDS["zh"][key]) == _slots(english), key
    assert set(CLICK_MESSAGES) <= WORDS["en"].keys()
    assert len(set(CLICK_MESSAGES)) == len(CLICK_MESSAGES)


def test_a_click_message_no_pattern_knows_stays_as_it_is() -> None:
    assert click_message("zh", "Something click has never said.") == "Something click has never said."
    assert click_message("en", "No such option '--x'.") == "No such option '--x'."
    assert click_message("zh", "No such option '--x'.") == "没有选项 '--x'。"
