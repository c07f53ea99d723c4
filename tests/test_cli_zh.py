"""fill, verify, solve and predict speak the language of --lang (else the locale), CLI output
included (issue 17, item 9: "Chinese users get mostly English"): in Chinese every table header,
role, verdict, summary line, answer and caveat is Chinese, carries the same numbers as the
English, lines up by display width within 80 columns; English stays as it was, and the JSON
keeps its English whatever the language."""

from __future__ import annotations

import os
import re
import string
import subprocess
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner

from scm_xl.cli import main
from scm_xl.report_texts import REASON_NAMES_ZH, WORDS
from scm_xl.terminal import WIDTH, display_width, wrapped
from support.cli import CLI
from support.paths import ARTICLE
from support.text import cell_starts

NUMBER = re.compile(r"\d+(?:\.\d+)?")


def _run(*args: object) -> tuple[int, str]:
    result = CliRunner().invoke(main, [str(a) for a in args])
    return result.exit_code, result.output


def _lines(text: str) -> set[str]:
    return {line.strip() for line in text.splitlines() if line.strip()}


def _without_notes(text: str) -> str:
    """`text` less its "note:" paragraphs (a library's note is English in both languages)."""
    kept: list[str] = []
    in_note = False
    for line in text.splitlines():
        in_note = line.startswith(("note: ", "注意：")) or (in_note and line.startswith("  "))
        if not in_note:
            kept.append(line)
    return "\n".join(kept)


def _same_facts(en: str, zh: str) -> None:
    """The Chinese says what the English says: the same numbers, as often; and no line of it is
    an English one (a data row included: its role is Chinese, its columns as wide as the headers)."""
    en, zh = _without_notes(en), _without_notes(zh)
    assert Counter(NUMBER.findall(zh)) == Counter(NUMBER.findall(en)), (en, zh)
    assert not _lines(en) & _lines(zh), _lines(en) & _lines(zh)


def _tables(text: str) -> list[list[str]]:
    """Each table of the output: its lines from the header to the last row."""
    blocks = [block.splitlines() for block in text.split("\n\n")]
    return [block for block in blocks if any(line and set(line) <= {"-", " "} for line in block)]


def _assert_aligned(table: list[str]) -> str:
    """Every header and row cell of a table starts at its column (in display columns); its header line."""
    separator = next(i for i, line in enumerate(table) if line and set(line) <= {"-", " "})
    columns = cell_starts(table[separator])
    header = separator - 1
    while table[header].startswith(" "):  # a unit under its name, the note's header under the others
        header -= 1
    assert cell_starts(table[header]) == columns, table[header]  # each header over its column
    rows = [line for line in table[separator + 1:] if not line.startswith(" ")]  # not a wrapped note
    assert rows
    for line in rows:
        assert cell_starts(line) == columns[:len(cell_starts(line))], line
    return table[header]


@pytest.fixture(scope="module")
def filled(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    """The article filled twice, in English and in Chinese: (the Chinese workbook, en output, zh output)."""
    folder = tmp_path_factory.mktemp("zh")
    code_en, en = _run("fill", ARTICLE, "--lang", "en", "-o", folder / "en.xlsx", "-q")
    code_zh, zh = _run("fill", ARTICLE, "--lang", "zh", "-o", folder / "zh.xlsx", "-q")
    assert code_en == code_zh == 0, (en, zh)
    return folder / "zh.xlsx", en, zh


def test_fill_prints_chinese_with_the_english_facts(filled: tuple[Path, str, str]) -> None:
    workbook, en, zh = filled
    assert zh.startswith(f"已写入 {workbook}\n")
    for phrase in ("系数", "来源", "实验编号", "角色", "说明", "无法确定", "锚定并发 1", "第一性原理 1.000",
                   "剔除：并发升高而TPS下降", "缺少 f(8)", "标定 BaseTPS", "检验行：0   标定行：5   无法预测：1   剔除：1",
                   "判定：数据不足", "留一法，最小二乘：", "留一法，链式：", "可分离模型：无法检验",
                   "物理检查警告：7 行中 7 行", "输出过短：25 / 请求的 500 Token", "仅警告：这些行仍被使用",
                   "已验证：", "工作簿的反推：", "工作簿的正向预测：", "下一步：打开", "“总览”"):
        # a long line may wrap inside a phrase (the workbook's path decides where): read it joined
        assert phrase in zh or phrase in re.sub(r"\n +", "", zh), phrase
    rows = [line for line in zh.splitlines() if re.match(r"E0\d ", line)]
    assert [line.split()[-1] for line in rows] == ["标定"] * 5 + ["剔除", "无法预测"]  # the roles in words
    english = [line for line in zh.splitlines() if line.startswith(("coefficient", "exp_id", "check rows", "MAPE (",
                                                                    "leave-one-out", "separable", "physics", "warnings",
                                                                    "verified", "the workbook", "next:", "wrote"))]
    assert not english, english
    _same_facts(en, zh)


def test_the_chinese_tables_line_up_by_display_width_in_80_columns(filled: tuple[Path, str, str]) -> None:
    _, _, zh = filled
    assert max(display_width(line) for line in zh.splitlines()) <= WIDTH
    tables = _tables(zh)
    assert len(tables) == 2  # the coefficients, the rows
    for table in tables:
        header = _assert_aligned(table)
        assert display_width(header) > len(header)  # Chinese headers: two columns a character


def test_verify_speaks_chinese_on_a_pass_and_on_a_typed_over_formula(filled: tuple[Path, str, str],
                                                                     tmp_path: Path) -> None:
    import openpyxl

    workbook, _, _ = filled
    code, passed = _run("verify", workbook, "--lang", "zh", "-q")
    assert code == 0, passed
    assert "已验证：" in passed and "verified" not in passed and "判定：数据不足" in passed
    broken = tmp_path / "broken.xlsx"
    book = openpyxl.load_workbook(workbook)
    sheet = book["双向推导"]
    cell = next(c for row in sheet.iter_rows() for c in row if isinstance(c.value, str) and c.value.startswith("="))
    cell.value = 12345
    book.save(broken)
    code, failed = _run("verify", broken, "--lang", "zh", "-q")
    assert code == 1, failed
    assert "不一致：" in failed and "个公式单元格被手工覆盖（请恢复其公式，或重新填充工作簿）：" in failed
    assert f"'双向推导'!{cell.coordinate}" in failed
    assert "MISMATCH" not in failed and "typed over (restore" not in failed


@pytest.mark.parametrize(("args", "phrases"), [
    ((), ["并发 2：预测 TPS 119.05（max_tokens 50 下目标 100）", "这是实测的行 E02", "它确定了 f(2)",
          "一致性判定：数据不足（0 个检验行，MAPE 无）", "留一法误差（chain）"]),
    (("--target-tps", 250), ["在已测并发档位内无法达到（max_tokens 50 下目标 250）；可达最高"]),
    (("--method", "lsq", "--target-tps", 150), ["最省配置：并发", "更省的配置受限于：目标本身", "约束下最高：",
                                               "最高的配置已实测：行 E06", "方法：lsq（按 --method 指定）"]),
    (("--max-latency-p95", 5), ["无法达到：在约束下没有配置能达到 100 TPS", "该配置没有实测 P95 延迟", "注意："]),
])
def test_solve_answers_in_chinese(args: tuple[object, ...], phrases: list[str]) -> None:
    code_en, en = _run("solve", ARTICLE, *args, "--lang", "en")
    code, zh = _run("solve", ARTICLE, *args, "--lang", "zh")
    assert code == code_en == 0, zh
    for phrase in phrases:
        assert phrase in zh, (phrase, zh)
    _same_facts(en, zh)  # scm_xl.constrained's notes aside: they are English in both
    assert max(display_width(line) for line in zh.splitlines()) <= WIDTH


@pytest.mark.parametrize(("args", "phrases"), [
    (("--concurrency", 2, "--max-tokens", 100), ["预测 TPS：59.52", "这是实测的行 E04", "确定了 K_len(100)",
                                                 "方法：chain（默认：工作簿的方法单元格"]),
    (("--concurrency", 3, "--max-tokens", 100, "--method", "lsq"), ["（插值）", "方法：lsq（按 --method 指定）"]),
    (("--concurrency", 4, "--max-tokens", 200), ["此处有实测：行 E06，45.87 TPS，剔除：", "答案来自模型，不是那次实测"]),
])
def test_predict_answers_in_chinese(args: tuple[object, ...], phrases: list[str]) -> None:
    code_en, en = _run("predict", ARTICLE, *args, "--lang", "en")
    code, zh = _run("predict", ARTICLE, *args, "--lang", "zh")
    assert code == code_en == 0, zh
    for phrase in phrases:
        assert phrase in zh, (phrase, zh)
    _same_facts(en, zh)
    assert max(display_width(line) for line in zh.splitlines()) <= WIDTH


@pytest.mark.parametrize(("command", "args", "phrases"), [
    ("predict", ("--concurrency", 8, "--max-tokens", 50), ["错误：无法预测：数据无法确定：f(8)", "f 已知的并发档位：1, 2, 4",
                                                            "--method lsq --extrapolate 可外推"]),
    ("solve", ("--max-tokens", 300), ["错误：无法求解：数据在 max_tokens 300 下无法确定：K_len(300)",
                                      "K_len 已知的 max_tokens：50, 100, 200"]),
])
def test_what_the_data_cannot_answer_is_said_in_chinese(command: str, args: tuple[object, ...],
                                                        phrases: list[str]) -> None:
    code, zh = _run(command, ARTICLE, *args, "--lang", "zh")
    assert code == 1
    for phrase in phrases:
        assert phrase in zh, (phrase, zh)
    assert "Error" not in zh and "cannot" not in zh and "known" not in zh


@pytest.mark.parametrize("args", [("predict", "--concurrency", 2, "--max-tokens", 100),
                                  ("predict", "--concurrency", 8, "--max-tokens", 50),
                                  ("solve", "--method", "lsq", "--target-tps", 150), ("solve", "--max-tokens", 300)])
def test_the_json_is_the_same_in_every_language(args: tuple[object, ...]) -> None:
    """The JSON is for machines: its keys and texts (hints, why) stay English under --lang zh."""
    command, *rest = args
    en = CliRunner().invoke(main, [command, str(ARTICLE), *map(str, rest), "--json", "--lang", "en"])
    zh = CliRunner().invoke(main, [command, str(ARTICLE), *map(str, rest), "--json", "--lang", "zh"])
    assert en.exit_code == zh.exit_code and zh.stdout.startswith("{") and en.stdout == zh.stdout


def test_the_locale_chooses_chinese_where_lang_is_not_given() -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("LC_ALL", "LC_MESSAGES", "LANG")}
    done = subprocess.run([*CLI, "predict", str(ARTICLE), "--concurrency", "2", "--max-tokens", "100"],
                          capture_output=True, text=True, env={**env, "LANG": "zh_CN.UTF-8"}, timeout=120)
    assert done.returncode == 0 and done.stdout.startswith("预测 TPS："), done.stdout + done.stderr
    code, en = _run("predict", ARTICLE, "--concurrency", 2, "--max-tokens", 100)  # the suite's C.UTF-8
    assert code == 0 and en.startswith("predicted TPS: ")


def test_verify_solve_and_predict_take_lang() -> None:
    for command in ("fill", "verify", "solve", "predict"):
        code, text = _run(command, "--help")
        assert code == 0 and "--lang [zh|en]" in text, command


def test_both_languages_have_every_sentence_with_the_same_values() -> None:
    def fields(text: str) -> set[str]:
        return {name for _, name, _, _ in string.Formatter().parse(text) if name}

    assert WORDS["en"].keys() == WORDS["zh"].keys()
    for key, text in WORDS["en"].items():
        assert fields(WORDS["zh"][key]) == fields(text), key
    from scm_xl.constrained import REASON_WORDS

    assert REASON_NAMES_ZH.keys() == REASON_WORDS.keys()


def test_chinese_lines_wrap_by_display_width_and_never_start_with_punctuation() -> None:
    text = "  " + "这是实测的行 E02（119.05 TPS），它确定了 f(2)：答案只是重复这次实测，什么也没有检验，" * 3
    lines = wrapped(text, indent="    ").splitlines()
    assert len(lines) > 2 and lines[0].startswith("  这是")
    assert all(display_width(line) <= WIDTH for line in lines)
    assert all(line.startswith("    ") and line[4] not in "，。：；）" for line in lines[1:])
    assert "".join(line.strip() for line in lines).replace(" ", "") == text.strip().replace(" ", "")
    quoted = "下一步：打开 " + "x" * 40 + "（打开即是“总览”工作表），或用 scm-xl report 生成 HTML 页面"
    for width in range(50, 81):  # wherever the line breaks, no quote is left alone at an edge
        quoted_lines = [line.strip() for line in wrapped(quoted, width=width, indent="  ").splitlines()]
        assert all(line[-1] not in "（“" and line[0] not in "）”，" for line in quoted_lines), (width, quoted_lines)
    english = "the answer repeats that measurement and tests nothing " * 4
    import textwrap

    assert wrapped(english) == "\n".join(textwrap.wrap(english, WIDTH, subsequent_indent="  ",
                                                       break_long_words=False, break_on_hyphens=False))
