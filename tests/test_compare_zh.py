"""`scm-xl compare --lang zh` (or a Chinese locale) prints every line in Chinese: the head, the test,
the coefficient table, the baseline's model on the new rows, the rule without the base point, the
latency comparison and the knee, the verdict and its reasons, the SLO lines, --save-baseline's lines.
English stays what it was, and the JSON does not depend on the language (the library returns data;
only the rendering speaks a language)."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from data.gen import replicated_factorial, write_csv
from scm_xl.cli import main
from scm_xl.compare import knee_shift, render_latency_comparison
from scm_xl.compare_texts import WORDS, say
from scm_xl.latency import Knee
from scm_xl.results import ResultRow, read_results, write_results
from support.paths import ARTICLE, TEST_DATA
from support.slo import collect_fixed_delays
from support.text import cell_starts

SIM_PROMPT_LEVELS = TEST_DATA / "sim_prompt_levels.csv"  # TTFT, latency and ITL at prompt levels 32, 256, 640
MODELS = ("model-a-v2", "model-b-v2", "model-a", "model-b", "Qwen2.5-7B", "sim", "m")
# Names a Chinese line may carry: coefficients, metrics, the statistics' names, options and columns.
ALLOWED = re.compile(r"BaseTPS|f\(\d+\)|K_len\(\d+\)|K_in\(\d+\)|C_model\([^)]*\)|MAPE|TPS|TTFT|ITL|P95|SLO|Welch|"
                     r"Bonferroni|Wilson|max_tokens|e2el|ln|CSV|scm-xl collect|requests")
ENGLISH_RUN = re.compile(r"[A-Za-z]{3,}(?: [A-Za-z]{2,}){2,}")
# English words compare's sentences use, any one of which in a Chinese line is an untranslated word.
ENGLISH_WORDS = re.compile(r"\b(?:baseline|new|rows?|verdict|stable|drift|DRIFT|insufficient|interval|moved|MOVED|"
                           r"knee|note|concurrency|level|prompt|predict\w*|compared?|coefficients?|test|change|"
                           r"noise|unidentified|only|none|configuration|attainment|target|DROPPED|saved|kept|"
                           r"wrote|max|over|of|the|and|no|not|at|on|in)\b"
                           r"|\b[a-z]+_[a-z_]+\b")  # or a machine name (no_noise, new_only)
CJK = re.compile(r"[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef]")


def run(*args: object, env: dict[str, str] | None = None) -> Any:
    return CliRunner().invoke(main, [str(a) for a in args], env=env)


def english_in(text: str, names: list[str]) -> list[str]:
    """Every line of `text` that still holds English once file names, paths, model names and the
    allowed names are taken out."""
    bad = []
    for line in text.splitlines():
        rest = line
        for name in sorted(names, key=len, reverse=True):
            rest = rest.replace(name, " ")
        rest = ALLOWED.sub(" ", rest)
        for model in MODELS:
            rest = re.sub(rf"(?<![\w-]){re.escape(model)}(?![\w-])", " ", rest)
        if ENGLISH_RUN.search(rest) or ENGLISH_WORDS.search(rest):
            bad.append(line)
    return bad


def slower(rows: list[ResultRow], factor: float) -> list[ResultRow]:
    return [dataclasses.replace(r, total_time_s=round(r.total_time_s / factor, 6)) for r in rows]


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("compare_zh")
    first = replicated_factorial(seed=1, repeats=2, sigma=0.03, prefix="A")
    second = replicated_factorial(seed=2, repeats=2, sigma=0.03, prefix="B")
    renamed = [dataclasses.replace(r, model="model-a-v2") if r.model == "model-a" else r for r in second]
    sim = read_results(SIM_PROMPT_LEVELS).rows
    paths = {"a": write_csv(folder / "a.csv", first), "b": write_csv(folder / "b.csv", second),
             "b_slow": write_csv(folder / "b_slow.csv", slower(second, 0.9)),
             "b_little": write_csv(folder / "b_little.csv", slower(second, 0.96)),  # beyond its noise, under 5%
             "renamed": write_csv(folder / "renamed.csv", renamed),
             "renamed_half": write_csv(folder / "renamed_half.csv", slower(renamed, 0.5)),
             "all_renamed": write_csv(folder / "all_renamed.csv",
                                      [dataclasses.replace(r, model=r.model + "-v2") for r in second]),
             "no_c1": write_csv(folder / "no_c1.csv", [r for r in second if r.concurrency != 1]),
             "s": SIM_PROMPT_LEVELS, "article": ARTICLE}
    for name, keep in (("s_no32", lambda r: r.prompt_level != 32), ("s_640", lambda r: r.prompt_level == 640)):
        paths[name] = folder / f"{name}.csv"
        write_results(paths[name], [r for r in sim if keep(r)])
    paths["s_no32_half"] = folder / "s_no32_half.csv"  # half the speed: the level drifts and the knee moves
    write_results(paths["s_no32_half"], slower([r for r in sim if r.prompt_level != 32], 0.5))
    return paths


def names_of(paths: dict[str, Path]) -> list[str]:
    return [str(p) for p in paths.values()] + [p.name for p in paths.values()]


def both(*args: object) -> tuple[str, str, dict[str, Any]]:
    """compare's text in Chinese and in English, and its JSON (which must be one for both languages)."""
    zh, en = run("compare", *args, "--lang", "zh"), run("compare", *args, "--lang", "en")
    assert zh.exit_code == en.exit_code == 0, zh.output + en.output
    data_zh = json.loads(run("compare", *args, "--lang", "zh", "--json").stdout)
    data_en = json.loads(run("compare", *args, "--lang", "en", "--json").stdout)
    assert data_zh == data_en
    return zh.output, en.output, data_en


def english_lines(data: dict[str, Any]) -> list[str]:
    """Lines the English text has always printed, built from the JSON as compare always built them."""
    base = data["base_point"]
    reasons = f" ({'; '.join(data['reasons'])})" if data["reasons"] else ""
    return [f"baseline: {data['baseline']} ({data['baseline_rows']} rows, {data['baseline_dof']} residual dof)   "
            f"new: {data['new']} ({data['new_rows']} rows, {data['new_dof']} residual dof)",
            f"base point of both fits: {base['model']}, max_tokens {base['max_tokens']}, "
            f"concurrency {base['concurrency']}",
            f"test: {data['test']}", f"verdict: {data['verdict']}{reasons}"]


ZH_VERDICT = {"stable": "稳定", "drift": "漂移", "insufficient": "数据不足"}
CASES = {  # name: (baseline, new, verdict)
    "stable": ("a", "b", "stable"), "drift": ("a", "b_slow", "drift"),
    "insufficient": ("article", "article", "insufficient"), "moved a little": ("a", "b_little", "stable"),
    "stable without the base point": ("a", "renamed", "stable"),
    "drift without the base point": ("a", "renamed_half", "drift"),
    "nothing predicted": ("a", "all_renamed", "insufficient"),
    "no base concurrency": ("a", "no_c1", "stable"),
    "latency, same": ("s", "s", "stable"),
    "latency, base prompt level missing": ("s", "s_no32", "insufficient"),
    "latency, one prompt level": ("s", "s_640", "drift"),
    "latency, half the speed": ("s", "s_no32_half", "drift"),
    "latency on one side only": ("s", "article", "insufficient"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_every_line_is_chinese_and_english_is_unchanged(data: dict[str, Path], case: str) -> None:
    old, new, verdict = CASES[case]
    zh, en, result = both(data[old], data[new])
    assert result["verdict"] == verdict, result["reasons"]
    assert english_in(zh, names_of(data)) == []
    assert f"判定：{ZH_VERDICT[verdict]}" in zh and f"verdict: {verdict}" not in zh
    little = [c for c in result["coefficients"] if c["significant"] and not c["drifted"]]
    assert bool(little) == (case == "moved a little")
    assert zh.count("超出噪声但幅度小") == en.count("noise+") == len(little)
    assert zh.count("超出其噪声，但不到 5%") == len(little) * (verdict == "stable")
    latency = result["latency"]
    moved = sum(k["moved"] for k in latency["knees"]) if latency else 0
    assert zh.count("（已移动）") == en.count("(MOVED)") == moved and moved == (case == "latency, half the speed")
    # English: as it always was, and not a Chinese character in it
    assert not CJK.search(en)
    for line in english_lines(result):
        assert line in en.splitlines()
    assert en == run("compare", data[old], data[new]).output  # the suite's locale is English
    # The same facts in both: every number of the coefficient table, row by row.
    def numbers(text: str) -> list[list[str]]:
        table = text.split("\n\n")[1].splitlines()[2:]
        return [re.findall(r"-?\d+(?:\.\d+)?(?:e[-+]\d+)?", line.split("  ", 1)[-1]) for line in table]
    assert numbers(zh) == numbers(en) and len(numbers(zh)) == len(result["coefficients"])


def test_the_chinese_table_aligns_by_display_width(data: dict[str, Path]) -> None:
    zh, _, _ = both(data["s"], data["s_no32"])  # holds the level's row: its label is Chinese
    table = zh.split("\n\n")[1].splitlines()
    assert "整体水平（基线预测新数据）" in table[-1]
    header, rule, rows = table[0], table[1], table[2:]
    assert cell_starts(header) == cell_starts(rule)
    for row in rows:
        assert cell_starts(row) == cell_starts(header), row


def test_the_locale_chooses_chinese_too(data: dict[str, Path]) -> None:
    by_option = run("compare", data["a"], data["b_slow"], "--lang", "zh").output
    by_locale = run("compare", data["a"], data["b_slow"], env={"LC_ALL": "zh_CN.UTF-8"}).output
    assert by_locale == by_option and "判定：漂移" in by_locale and "BaseTPS" in by_locale
    assert "漂移" in by_option.split("\n\n")[1]  # the table marks the coefficient that drifted


def test_every_knee_sentence_in_both_languages() -> None:
    """Each way a knee can move (scm_xl.compare.knee_shift), said in Chinese with the same numbers."""
    limit = lambda c, top, interval=None: Knee("limit", c, interval, top)  # noqa: E731
    none = lambda top: Knee("none", None, None, top)  # noqa: E731
    cases = {"moved": (limit(8, 16, (8, 8)), limit(4, 16, (4, 4))), "same": (limit(8, 16, (6, 10)), limit(7, 16)),
             "gone": (limit(4, 8), none(16)), "untested": (limit(8, 16), none(4)),
             "appeared": (none(16), limit(4, 16)), "none": (none(8), none(8))}
    for status, (old, new) in cases.items():
        shift = knee_shift("sim", old, new)
        assert shift.status == status
        zh = say(shift.text, "zh")
        assert english_in(zh, []) == [] and CJK.search(zh), zh
        assert re.findall(r"\d+", zh) == re.findall(r"\d+", shift.text), (zh, shift.text)
        assert not CJK.search(shift.text) and shift.as_dict()["text"] == shift.text
    # the untested knee on the new side, beyond what the baseline measured
    shift = knee_shift("sim", none(4), limit(8, 16))
    assert shift.status == "untested" and english_in(say(shift.text, "zh"), []) == []


def test_the_latency_lines_in_chinese(data: dict[str, Path]) -> None:
    from scm_xl.compare import compare
    from scm_xl.model import analyze

    old_rows, new_rows = read_results(data["s"]).rows, read_results(data["s_640"]).rows
    old_rows_apart = [r for r in old_rows if r.prompt_level != 640]
    comparison = compare(analyze(old_rows_apart), analyze(new_rows), baseline_rows=old_rows_apart,
                         new_rows=new_rows, baseline_name="s.csv", new_name="s_640.csv")
    assert comparison.latency is not None and comparison.latency.status == "prompt_levels_differ"
    lines = render_latency_comparison(comparison.latency, "zh")
    text = "\n".join(lines)
    assert "未比较（提示长度档位不同）" in text and "没有共同的档位" in text
    assert english_in(text, ["s.csv", "s_640.csv"]) == []
    assert "no level in common" in "\n".join(render_latency_comparison(comparison.latency))


@pytest.fixture(scope="module")
def slo_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Real runs on the simulator on 127.0.0.1: the second decodes ten times slower; the third
    measures one configuration more; the fourth has no per-request CSV beside it."""
    folders = {name: tmp_path_factory.mktemp(name) for name in ("fast", "slow", "more", "alone")}
    runs = {"fast": collect_fixed_delays(folders["fast"], itl_s=0.004, concurrency="1,2", max_tokens="3"),
            "slow": collect_fixed_delays(folders["slow"], itl_s=0.04, concurrency="1,2", max_tokens="3"),
            "more": collect_fixed_delays(folders["more"], itl_s=0.004, concurrency="1,2,4", max_tokens="3")}
    runs["alone"] = folders["alone"] / "results.csv"
    runs["alone"].write_bytes(runs["slow"].read_bytes())
    return runs


@pytest.mark.parametrize("pair", [("fast", "slow"), ("fast", "more"), ("more", "fast"), ("fast", "alone"),
                                  ("alone", "fast")])
def test_the_slo_lines_in_chinese(slo_runs: dict[str, Path], pair: tuple[str, str]) -> None:
    old, new = (slo_runs[name] for name in pair)
    slo = ["--slo", "e2el=0.05", "--attainment", "0.4"]
    zh = run("compare", old, new, *slo, "--lang", "zh")
    en = run("compare", old, new, *slo, "--lang", "en")
    assert zh.exit_code == en.exit_code == 0, zh.output
    names = [str(p.parent) for p in slo_runs.values()] + ["results.csv"]
    assert english_in(zh.output, names) == []
    data = json.loads(run("compare", old, new, *slo, "--json").stdout)["slo"]
    head = zh.output[zh.output.index("按 SLO e2el=0.05 @ 40%（达成率目标 40%，Wilson 95% 区间）："):]
    english = en.output[en.output.index("Under the SLO e2el=0.05 @ 40%"):]
    assert len(head.splitlines()) == len(english.splitlines())
    if data["baseline_reason"] or data["new_reason"]:
        side = "基线" if data["baseline_reason"] else "新数据"
        assert f"  {side}：没有逐请求 CSV" in head and "未比较达成率" in head
        return
    assert head.count("已跌破目标") == data["dropped_below_target"] == english.count("DROPPED below the target")
    assert f"  {data['dropped_below_target']} 个配置在基线中满足 SLO，现在不再满足" in head
    if data["only_baseline"] or data["only_new"]:
        assert "未比较：仅在" in head


def test_save_baseline_speaks_chinese(data: dict[str, Path], tmp_path: Path) -> None:
    kept = tmp_path / "kept.csv"
    result = run("compare", kept, data["a"], "--save-baseline", "--lang", "zh")
    assert result.exit_code == 0 and result.output.startswith("还没有基线：已把") and kept.exists()
    result = run("compare", kept, data["b"], "--save-baseline", "--force", "--lang", "zh")
    assert result.exit_code == 0 and f"已把 {data['b']} 的 48 行保存为基线 {kept}" in result.output
    result = run("compare", kept, data["b_slow"], "--save-baseline", "--force", "--lang", "zh")
    assert result.exit_code == 0 and f"漂移：保留基线 {kept}" in result.output
    page = tmp_path / "drift.html"
    result = run("compare", kept, data["b_slow"], "--html", page, "--lang", "zh")
    assert result.exit_code == 0 and f"已写入 {page}" in result.output and page.exists()
    assert english_in(result.output, names_of(data) + [str(kept), kept.name, str(page)]) == []


def test_the_two_languages_have_the_same_sentences() -> None:
    assert WORDS["en"].keys() == WORDS["zh"].keys()
    for key, english in WORDS["en"].items():
        fields = lambda text: sorted(set(re.findall(r"\{(\w+)", text)))  # noqa: E731
        assert fields(WORDS["zh"][key]) == fields(english), key
