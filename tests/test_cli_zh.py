"""fill, verify, solve and predict speak the language of --lang (else the locale), CLI output
included (issue 17, item 9: "Chinese users get mostly English"): in Chinese every table header,
role, verdict, summary line, answer and caveat is Chinese, carries the same numbers as the
English, lines up by display width within 80 columns; English stays as it was, and the JSON
keeps its English whatever the language. On a sweep like the demo's (prompt levels, latencies, a
per-request CSV) nothing fill, verify, predict and solve print in Chinese, stderr included (the
progress steps, fill's notes, the separable model's cells, the cells verify finds wrong), is a
run of English words."""

from __future__ import annotations

import os
import re
import string
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from scm_xl.cli import main
from scm_xl.report_texts import REASON_NAMES_ZH, WORDS
from scm_xl.terminal import WIDTH, display_width, wrapped
from support import books
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
    # a word as wide as the first line but wider than the indented ones after it (a checkout's path
    # in a note): cut on the line it moves to, as a word wider than a line is
    for extra in range(-3, 4):
        path = "/" + "p" * (WIDTH - 1 + extra)
        lines = wrapped(f"注意：没有逐请求 CSV {path}（逐请求 SLO 需要它）").splitlines()
        assert all(display_width(line) <= WIDTH for line in lines), (extra, lines)
        assert "".join(line.strip() for line in lines).count("p") == WIDTH - 1 + extra
    english = "the answer repeats that measurement and tests nothing " * 4
    import textwrap

    assert wrapped(english) == "\n".join(textwrap.wrap(english, WIDTH, subsequent_indent="  ",
                                                       break_long_words=False, break_on_hyphens=False))


# ---------------------------------------------------------------------------
# Every sentence a person reads, stderr included, on a sweep like the demo's
# ---------------------------------------------------------------------------

SWEEP = Path(__file__).with_name("data") / "sim_prompt_levels.csv"  # two prompt levels and more; latencies
# A run of three or more English words; what the Chinese keeps as it is (names of coefficients,
# metrics, engines, options) is taken out first, with model names, paths and cell values.
ENGLISH_RUN = re.compile(r"[A-Za-z]{3,}(?: [A-Za-z]{2,}){2,}")
KEPT_TERMS = ("BaseTPS", "K_len", "K_in", "C_model", "MAPE", "TPS", "TTFT", "ITL", "P95", "max_tokens", "ironcalc",
              "libreoffice", "tok/s", "scm-xl report", "HTML", "JSON", "CSV", "exp_id", "lsq", "chain", "latency")
STEP = re.compile(r"^scm-xl \[ *\d+\.\d s\] (.+)$", re.M)


def english_runs(text: str, *names: object) -> list[str]:
    """The runs of English words in `text` (a wrapped line read joined to the next), less `names`
    (paths, models) and what is not a sentence: a cell's address and value as Python writes them
    ('Sheet'!A1, 'text'), the KEPT_TERMS."""
    text = re.sub(r"\n +", " ", text)
    for name in sorted(map(str, names), key=len, reverse=True):
        text = text.replace(name, " ")
    text = re.sub(r"'[^'\n]*'", " ", text)
    for term in KEPT_TERMS:
        text = text.replace(term, " ")
    return [run.group(0) for run in ENGLISH_RUN.finditer(text)]


def _requests_beside(results: Path) -> int:
    """A requests CSV beside `results` (as collect writes it: NAME.requests.csv), one line per
    request of each experiment at its mean latencies; how many requests."""
    import csv

    from scm_xl.goodput import NEEDED_COLUMNS

    with results.open(encoding="utf-8", newline="") as handle:
        experiments = list(csv.DictReader(handle))
    lines = [",".join(NEEDED_COLUMNS)]
    for row in experiments:
        for _ in range(int(row["total_requests"])):
            lines.append(",".join([row["exp_id"], "false", "ok", "", row["ttft_mean_s"], row["latency_mean_s"],
                                   row["prompt_tokens"], row["max_tokens"]]))
    results.with_name(results.stem + ".requests.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return len(lines) - 1


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The sweep filled in English and in Chinese, progress on (stderr is no terminal here: plain
    lines): its folder, CSV, request count, the Chinese workbook and both outputs."""
    folder = tmp_path_factory.mktemp("sweep")
    results = folder / "r.csv"
    results.write_bytes(SWEEP.read_bytes())
    requests = _requests_beside(results)
    code_en, en = _run("fill", results, "--lang", "en", "-o", folder / "en.xlsx")
    code_zh, zh = _run("fill", results, "--lang", "zh", "-o", folder / "zh.xlsx")
    assert code_en == code_zh == 0, (en, zh)
    return {"folder": folder, "csv": results, "requests": requests, "workbook": folder / "zh.xlsx", "en": en,
            "zh": zh}


def test_the_checker_finds_english(sweep: dict[str, Any]) -> None:
    """The check below can fail: the English fill is full of runs, each sentence of this issue's among them."""
    runs = english_runs(sweep["en"], sweep["folder"], "sim")
    for phrase in ("build the workbook", "store the computed values in the file", "measured requests from",
                   "the separable model says", "longer prompt costs more at higher concurrency"):
        assert any(phrase in run for run in runs), (phrase, runs)
    assert english_runs("'Sheet'!A1: workbook 'not a formula here', reference 2") == []  # values are no sentence


def test_fill_names_its_steps_and_says_its_notes_in_chinese(sweep: dict[str, Any]) -> None:
    zh, en = sweep["zh"], sweep["en"]
    steps, english_steps = STEP.findall(zh), STEP.findall(en)
    assert len(steps) == len(english_steps) >= 7  # the same steps, each with its "scm-xl [  t s]"
    assert steps[:4] == [f"读取 {sweep['csv']}", "生成工作簿", "保存工作簿", "用 ironcalc 重算"]
    cells = re.search(r"compare ([\d,]+) formula cells with the reference", en)
    assert cells and f"将 {cells.group(1)} 个公式单元格与参考值比较" in steps
    assert "把计算出的值存入文件" in steps and steps[-1] == f"写入 {sweep['workbook']}"
    joined = re.sub(r"\s+", "", zh)  # read across its wrapping
    assert f"注意：逐请求记录：{sweep['csv'].with_name('r.requests.csv')}中的{sweep['requests']}个实测请求" in joined
    assert f"per-request records: {sweep['requests']} measured requests from" in re.sub(r"\n +", " ", en)


def test_the_separable_model_is_said_in_chinese_with_the_english_numbers(sweep: dict[str, Any]) -> None:
    def separable(text: str, lead: str) -> str:
        line = re.sub(r"\n +", " ", text).split("\n")
        return next(part for part in line if part.startswith(lead))

    en, zh = separable(sweep["en"], "separable model: "), separable(sweep["zh"], "可分离模型：")
    assert en.startswith("separable model: a longer prompt costs more at higher concurrency: at concurrency 8 and "
                         "640 prompt tokens TPS is ")  # the English as it always was
    assert zh.replace(" ", "").startswith("可分离模型：较长的提示在较高并发下代价更大：在并发8、提示640token处，TPS比可分离模型的"
                                          "预测低")
    assert "可分离模型在以下位置不成立：" in zh.replace(" ", "") and "（2 行）" in zh
    assert NUMBER.findall(zh) == NUMBER.findall(en)
    assert english_runs(zh) == []


def test_fill_and_verify_in_chinese_have_no_english_sentence(sweep: dict[str, Any]) -> None:
    assert english_runs(sweep["zh"], sweep["folder"], "sim") == []
    code, verified = _run("verify", sweep["workbook"], "--lang", "zh")
    assert code == 0 and STEP.findall(verified)[:2] == [f"读取 {sweep['workbook']}", "用 ironcalc 重算"], verified
    assert english_runs(verified, sweep["folder"], "sim") == []


def test_verify_names_the_cells_that_disagree_in_chinese(sweep: dict[str, Any], tmp_path: Path) -> None:
    broken = tmp_path / "broken.xlsx"
    sheet = books.sheet(sweep["workbook"], "系数标定", formulas=True)
    cell = next(c for c in sheet.values() if isinstance(c.value, str) and c.value.startswith("="))
    books.retyped(sweep["workbook"], broken, "系数标定", {cell.coordinate: 12345})
    code, zh = _run("verify", broken, "--lang", "zh")
    code_en, en = _run("verify", broken, "--lang", "en")
    assert code == code_en == 1, zh
    assert f"'系数标定'!{cell.coordinate}（不是公式：该单元格被手工覆盖），参考值 " in zh
    assert f"'系数标定'!{cell.coordinate} (not a formula: the cell was typed over), reference " in en
    differs = [line for line in zh.splitlines() if re.match(r"  '[^']+'![A-Z]+\d+：工作簿 .+，参考值 ", line)]
    assert differs, zh
    assert len(differs) == len([line for line in en.splitlines() if ": workbook " in line])
    assert english_runs(zh, tmp_path, sweep["folder"], "sim") == []


def test_the_rows_the_formulas_do_not_cover_and_an_empty_reference_in_chinese() -> None:
    from scm_xl.report import render_verification
    from scm_xl.report_texts import Text
    from scm_xl.verify import Mismatch, Verification

    rows = [Text("uncovered_row", row=412, exp_id="E411"), Text("uncovered_no_id", row=413)]
    assert rows == ["row 412 (E411)", "row 413 (no exp_id)"]  # the English (and the JSON's) as before
    v = Verification(engine="ironcalc", cells_compared=10, uncovered=rows, rows_covered=200,
                     mismatches=[Mismatch("S", "B2", None, 1.5)])
    zh = render_verification(v, lang="zh")
    assert "  第 412 行（E411）" in zh and "  第 413 行（没有 exp_id）" in zh and "'S'!B2：工作簿 1.5，参考值 空白" in zh
    assert "'S'!B2: workbook 1.5, reference None" in render_verification(v, lang="en")
    assert english_runs(zh) == []
    assert v.to_dict()["uncovered_rows"] == ["row 412 (E411)", "row 413 (no exp_id)"]


@pytest.mark.parametrize("args", [
    ("predict", "--concurrency", 3, "--max-tokens", 16, "--prompt-tokens", 32),
    ("predict", "--concurrency", 4, "--max-tokens", 32),
    ("predict", "--concurrency", 3, "--max-tokens", 16, "--method", "lsq"),
    ("solve", "--prompt-tokens", 32),
    ("solve",),
    ("solve", "--target-tps", 100000),
    ("solve", "--method", "lsq", "--target-tps", 300, "--max-concurrency", 4),
])
def test_predict_and_solve_on_the_sweep_have_no_english_sentence(sweep: dict[str, Any],
                                                                  args: tuple[object, ...]) -> None:
    command, *rest = args
    code, zh = _run(command, sweep["csv"], *rest, "--lang", "zh")
    code_en, en = _run(command, sweep["csv"], *rest, "--lang", "en")
    assert code == code_en == 0, zh
    assert english_runs(zh, sweep["folder"], "sim") == [], zh
    assert english_runs(en, sweep["folder"], "sim")  # the same answer in English is English


def test_a_sentence_of_the_library_is_data() -> None:
    """A Text is the English as a str (the JSON's), and keeps its template and values to say it in
    Chinese; a copy or a pickle keeps them too."""
    import copy
    import json
    import pickle

    from scm_xl.report_texts import Text, say

    text = Text("comment_rewritten", where="'Raw'!A3", now=Text("comment_moved", where="'Raw'!A5", exp_id="E1"),
                before="'x'", after="'y'")
    assert text == "the comment on 'Raw'!A3 is kept on 'Raw'!A5 (moved with E1), but scm-xl rewrote that cell: 'x' is now 'y'"
    assert json.dumps({"note": text}) == json.dumps({"note": str(text)})
    said = say(text, "zh")
    assert said == "'Raw'!A3 上的批注保留在 'Raw'!A5（随 E1 移动），但 scm-xl 改写了该单元格：'x' 现在是 'y'"
    assert say(copy.deepcopy(text), "zh") == say(pickle.loads(pickle.dumps(text)), "zh") == said
    assert say("plain", "zh") == "plain"
