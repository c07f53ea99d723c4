"""The SLO answers in Chinese (scm_xl.slo_texts): `solve --slo`'s lines, `predict --slo`'s line, the
capacity plan's and the constrained search's notes, every reason, and the report page's calculator.

Each is said in Chinese from the same facts as its English: no English sentence is left (a run of
three English words, once the model names and the SLO's and rate limits' own names are taken
out), the numbers are the English's, and the English stays what it always was (the other tests
compare it to the character)."""

from __future__ import annotations

import csv
import html
import json
import math
import re
import shutil
import string
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any, Iterator

import pytest
from click.testing import CliRunner

from scm_xl import capacity, constrained, goodput, lsq, slo_between, slo_texts
from scm_xl.cli import main
from scm_xl.htmlreport.texts import PAGE
from scm_xl.latency import latency_model
from scm_xl.model import calibrate, filter_rows
from scm_xl.results import read_results
from scm_xl.slo_answer import measured_slo, measured_slo_line, slo_answer
from scm_xl.slo_texts import REASONS, WORDS, say
from support.browser import SET_SLO, offline_chromium, open_page
from support.rows import make_row
from support.slo import collect_fixed_delays

ENGLISH_RUN = re.compile(r"[A-Za-z]{3,}(?: [A-Za-z]{2,}){2,}")
NAMES = re.compile(r"\b(?:ttft|tpot|e2el|TPS|RPM|TPM|Wilson|P95)\b")
NUMBER = re.compile(r"\d+(?:\.\d+)?")
SLO_TEXT, ATTAINMENT = "ttft=0.5,e2el=0.03", 0.4  # 3 tokens take ~18 ms (good), 12 tokens ~54 ms (a miss)


def english_left(text: str, models: Iterable[str] = ()) -> list[str]:
    """The runs of English words in `text`, once model names, paths and the SLO's names are out."""
    for model in models:
        text = text.replace(model, " ")
    text = re.sub(r"\S*/\S*", " ", text)  # a path (and tok/s)
    return ENGLISH_RUN.findall(NAMES.sub(" ", text))


def same_facts(english: str, chinese: str, models: Iterable[str] = ()) -> None:
    """`chinese` is Chinese and says the numbers `english` says."""
    assert english_left(chinese, models) == [], chinese
    assert chinese != english
    assert set(NUMBER.findall(chinese)) == set(NUMBER.findall(english)), (english, chinese)


@pytest.fixture(scope="module")
def collected(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real run on the simulator: concurrency 1, 2 and 4 (3 is predicted between them), max_tokens
    3 (good under SLO_TEXT) and 12 (misses), the per-request CSV beside the results CSV."""
    return collect_fixed_delays(tmp_path_factory.mktemp("slo-zh"))


# ---------------------------------------------------------------------------
# The table itself
# ---------------------------------------------------------------------------

def _fields(template: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(template) if name}


class _Any(dict[str, float]):
    def __missing__(self, key: str) -> float:
        return 1.5


def test_every_template_and_reason_is_said_in_chinese() -> None:
    assert WORDS["en"].keys() == WORDS["zh"].keys() and REASONS["en"].keys() == REASONS["zh"].keys()
    for key, template in WORDS["zh"].items():
        assert _fields(template) == _fields(WORDS["en"][key]), key  # the same facts, every one
        assert english_left(template.format_map(_Any())) == [], key
    for name, words in REASONS["zh"].items():
        assert english_left(words) == [] and words != REASONS["en"][name], name
    # the English tables the rest of scm-xl reads are the same words
    assert goodput.REASON_WORDS == {k: REASONS["en"][k] for k in goodput.REASON_WORDS}
    assert capacity.REASON_WORDS == {k: REASONS["en"][k] for k in capacity.REASON_WORDS}
    assert set(goodput.REASON_WORDS) | set(capacity.REASON_WORDS) == set(REASONS["en"])
    assert slo_texts.reason_words(goodput.REASON_WORDS, "zh") == {k: REASONS["zh"][k] for k in goodput.REASON_WORDS}


def test_a_text_is_its_english_and_survives_a_copy() -> None:
    import copy
    import pickle

    note = slo_texts.Text("limits_rule_out", option=slo_texts.Text("plan_option", replicas=2, model="m", c=4,
                                                                     length=64, rpm=12.4, tpm=""),
                          reasons=slo_texts.Reasons(("rpm_limit", "sample_size")))
    assert note == ("the rate limits rule out 2 x m at concurrency 4, max_tokens 64 (12 RPM): requests per minute "
                    "over the rate limit (with headroom); too few requests to prove the attainment target, even "
                    "with none missed")
    assert json.loads(json.dumps({"note": note})) == {"note": str(note)}
    for twin in (copy.deepcopy(note), pickle.loads(pickle.dumps(note))):
        assert twin == note and say(twin, "zh") == say(note, "zh")
    assert say(note, "zh") == ("限流排除了 2 个副本 × m，并发 4，max_tokens 64（12 RPM）：每分钟请求数超过限额（含余量）；"
                               "请求太少：即使没有一个未达成，也无法证明达到达成率目标")
    assert say("plain", "zh") == "plain"


# ---------------------------------------------------------------------------
# solve --slo
# ---------------------------------------------------------------------------

# The simulator answers fast: one replica at concurrency 4 sends about 13,000 requests a minute.
QUESTIONS: list[dict[str, Any]] = [
    {},
    {"between": True},
    {"rpm": 60.0},
    {"rpm": 1e6, "tpm": 2e4, "pricing": capacity.Pricing(price_in=0.5, price_out=2.0)},
    {"rpm": 1e7, "pricing": capacity.Pricing(price_in=0.5, price_out=2.0), "minimise": "cost"},
    {"pricing": capacity.Pricing(gpu_hour_price=2.5, gpus=2), "minimise": "cost", "between": True},
    {"tpm": 1e9},
]


def _answers(results: Path, rows: list[Any]) -> Iterator[Any]:
    slo = goodput.parse_slo(SLO_TEXT, ATTAINMENT)
    best = max(c.tally.tps for c in goodput.cells(goodput.evaluate(rows, goodput.read_samples(results), slo)
                                                    .experiments, slo) if c.meets)
    for target in (best * 0.4, best * 0.6, best * 0.9, best * 2.5):
        for question in QUESTIONS:
            yield slo_answer(results, rows, target_tps=target, slo=slo, **question)
    yield slo_answer(results, rows, target_tps=best, slo=goodput.parse_slo("ttft=0.5,tpot=0.001", 0.99),
                     between=True)


def test_solve_slo_says_every_line_in_chinese(collected: Path) -> None:
    rows = list(read_results(collected).rows)
    shown: list[str] = []
    for answer in _answers(collected, rows):
        english, chinese = answer.lines(), answer.lines("zh")
        assert english == answer.lines("en") and len(chinese) == len(english)
        for en, zh in zip(english, chinese):
            same_facts(en, zh, ["m"])
        shown += chinese
        json.dumps(answer.report())  # the JSON keeps the English: still plain JSON
    text = "\n".join(shown)
    # every kind of line was said (the questions reach each one)
    for words in ("个副本 × m，并发", "达成率", "在 SLO", "成本：每百万输出 token", "，每小时", "满载流量",
                  "受服务端限制", "受限流限制", "限流最多放行", "起约束的：", "SLO 下 goodput 最高", "注意：",
                  "（由延迟模型从并发 ", "重新缩放的请求", "已测档位之间的并发档位是预测的",
                  "限流排除了", "个配置的请求数少于"):
        assert words in text, words


def test_solve_slo_without_its_requests_says_so_in_chinese(collected: Path, tmp_path: Path) -> None:
    alone = tmp_path / "results.csv"
    shutil.copy(collected, alone)
    rows = list(read_results(alone).rows)
    answer = slo_answer(alone, rows, target_tps=10.0, slo=goodput.parse_slo("ttft=0.5,tpot=0.01"))
    assert answer.fallback is not None
    (english,), (chinese,) = answer.lines(), answer.lines("zh")
    same_facts(english, chinese)
    assert "没有逐请求 CSV" in chinese and "改用每个实验的 P95 作答" in chinese and "tpot 没有" in chinese


def test_experiments_not_judged_are_said_in_chinese(collected: Path, tmp_path: Path) -> None:
    """One experiment's requests gone, another's one short: each is not judged, and says why."""
    results = tmp_path / "results.csv"
    requests = goodput.requests_path_for(results)
    shutil.copy(collected, results)
    with goodput.requests_path_for(collected).open(newline="") as handle:
        reader = csv.DictReader(handle)
        kept, fields = list(reader), reader.fieldnames
    assert fields is not None
    ids = sorted({r["exp_id"] for r in kept})
    gone, short = ids[0], ids[1]
    kept = [r for r in kept if r["exp_id"] != gone]
    kept.remove(next(r for r in kept if r["exp_id"] == short and r["warmup"] == "false"))
    with requests.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=fields)
        writer.writeheader()
        writer.writerows(kept)
    rows = list(read_results(results).rows)
    slo = goodput.parse_slo(SLO_TEXT, ATTAINMENT)
    answer = slo_answer(results, rows, target_tps=1.0, slo=slo)
    assert set(answer.unjudged) == {gone, short}
    for reason in answer.unjudged.values():
        same_facts(reason, say(reason, "zh"))
    english, chinese = answer.lines()[-1], answer.lines("zh")[-1]
    assert english.startswith("  2 experiment(s) not judged: ")
    same_facts(english, chinese)
    assert chinese.startswith("  2 个实验未判定：") and "中没有" in chinese and "不是同一批请求" in chinese


def test_the_per_request_csvs_reasons_are_said_in_chinese(tmp_path: Path) -> None:
    results = tmp_path / "r.csv"
    requests = goodput.requests_path_for(results)
    reasons = [goodput.read_samples(results).reason]
    requests.write_text("", encoding="utf-8")
    reasons.append(goodput.read_samples(results).reason)
    requests.write_text("exp_id,status\nE1,ok\n", encoding="utf-8")
    reasons.append(goodput.read_samples(results).reason)
    requests.write_text(",".join(goodput.NEEDED_COLUMNS) + "\n", encoding="utf-8")
    reasons.append(goodput.read_samples(results).reason)
    assert all(reasons) and len(set(reasons)) == 4
    for reason in reasons:
        assert reason is not None
        same_facts(reason, say(reason, "zh"))


# ---------------------------------------------------------------------------
# predict --slo
# ---------------------------------------------------------------------------

def test_predict_slo_says_its_line_in_chinese(collected: Path, tmp_path: Path) -> None:
    rows = list(read_results(collected).rows)
    slo = goodput.parse_slo(SLO_TEXT, ATTAINMENT)
    alone = tmp_path / "results.csv"
    shutil.copy(collected, alone)
    answers = [measured_slo(collected, rows, slo, 1, 3, "m", None),  # measured
               measured_slo(collected, rows, slo, 3, 12, "m", None),  # predicted between 2 and 4
               measured_slo(collected, rows, slo, 8, 3, "m", None),  # beyond the measured levels
               measured_slo(alone, rows, slo, 2, 3, "m", None),  # the per-experiment P95s
               measured_slo(alone, rows, slo, 8, 3, "m", None)]  # not even those
    assert [a["source"] for a in answers] == ["requests", "predicted_between_levels", None, "per_experiment_p95",
                                              None]
    for answer in answers:
        english, chinese = measured_slo_line(answer), measured_slo_line(answer, "zh")
        assert english == f"SLO: {answer['text']}"  # what predict always printed
        same_facts(english, chinese, ["m"])
        assert chinese.startswith("SLO：")
    said = [say(a["text"], "zh") for a in answers]
    assert said[0].startswith("此处实测：达成率") and "由延迟模型从并发" in said[1] and "重新缩放的请求" in said[1]
    assert said[2].startswith("该配置没有实测请求") and "退而采用此处实测的每实验 P95" in said[3]
    assert "该配置没有实测的每实验 P95" in said[4]


# ---------------------------------------------------------------------------
# The capacity plan, the SLO between levels, the constrained search
# ---------------------------------------------------------------------------

def test_the_plans_reasons_and_notes_are_said_in_chinese(collected: Path) -> None:
    every = tuple(REASONS["en"])
    same_facts(capacity.describe_reasons(every), capacity.describe_reasons(every, "zh"))
    assert capacity.describe_reasons(every, "zh") == "；".join(REASONS["zh"][name] for name in every)
    rows = list(read_results(collected).rows)
    slo = goodput.parse_slo(SLO_TEXT, ATTAINMENT)
    cells = goodput.cells(goodput.evaluate(rows, goodput.read_samples(collected), slo).experiments, slo)
    limited = capacity.plan(cells, 10.0, slo, limits=capacity.RateLimits(rpm=1.0))
    impossible = goodput.parse_slo("ttft=1e-9")
    unmet = capacity.plan(goodput.cells(goodput.evaluate(rows, goodput.read_samples(collected), impossible)
                                        .experiments, impossible), 10.0, impossible)
    assert limited.bound == capacity.LIMIT_BOUND and unmet.chosen is None
    notes = limited.notes + unmet.notes
    assert [getattr(note, "key", None) for note in notes] == ["limits_rule_out", "none_meets"]
    for note in notes:
        same_facts(note, say(note, "zh"), ["m"])


def test_what_cannot_be_predicted_between_levels_is_said_in_chinese(collected: Path) -> None:
    rows = list(read_results(collected).rows)
    slo = goodput.parse_slo(SLO_TEXT, ATTAINMENT)
    samples = goodput.read_samples(collected)
    cells = [replace(c, model="unfitted") for c in
             goodput.cells(goodput.evaluate(rows, samples, slo).experiments, slo)]
    predicted, reasons = slo_between.between_cells(cells, samples.by_exp, latency_model(rows), slo)
    assert predicted == [] and reasons == ["unfitted: the latency model has no fit for it"]
    assert say(reasons[0], "zh") == "unfitted：延迟模型没有它的拟合"
    same_facts(slo_between.PREDICTED_NOTE, say(slo_between.PREDICTED_NOTE, "zh"))
    cell = replace(cells[0], predicted_from=2)
    assert slo_between.predicted_from_words(cell) == "predicted from the requests of concurrency 2 by the latency model"
    assert slo_between.predicted_from_words(cell, "zh") == "由延迟模型从并发 2 的请求预测"
    assert (slo_between.requests_word(cell), slo_between.requests_word(cell, "zh")) == ("rescaled requests",
                                                                                        "重新缩放的请求")


F = {1: 1.0, 2: 1.9, 4: 3.5, 8: 6.0}
K = {50: 1.0, 100: 0.9}


def _search_rows(extra: Iterable[Any] = ()) -> list[Any]:
    rows = [make_row(f"A-{c}-{length}-{r}", "Alpha", c, length, 50.0 * F[c] * K[length] * wobble,
                     latency_p95_s=0.02 * length * (1 + c / 8), ttft_p95_s=0.05 * c)
            for c in F for length in K for r, wobble in enumerate((1.01, 0.99))]
    return rows + list(extra)


def _knee_surface() -> constrained.Surface:
    """A latency-model surface measured at 1, 2 and 4 with its knee at 2 (TPS flat beyond)."""
    def forecast(c: int, length: int, model: str, extrapolate: bool) -> lsq.Forecast:
        return lsq.Forecast(c, length, model, 40.0 * min(c, 2) + c, interpolated=c == 3, extrapolated=c > 4,
                            latency_p95_s=0.1 * c, ttft_p95_s=0.01 * c)

    return constrained.Surface(method="latency", forecast=forecast, concurrency_levels=(1, 2, 4),
                               max_tokens_levels=(50,), models=(("Alpha", 1.0),), predicts_percentiles=True,
                               knee=2.0)


def test_the_searchs_notes_and_reasons_are_said_in_chinese() -> None:
    rows = _search_rows()
    fit = lsq.fit(filter_rows(rows))
    surface = constrained.lsq_surface(fit)
    f4, f8 = (fit.forecast(c, 50, "Alpha").tps for c in (4, 8))
    assert f4 is not None and f8 is not None
    limited = _search_rows([make_row("RL", "Alpha", 8, 100, 100.0, rate_limited_requests=3)])
    chain = constrained.chain_surface(calibrate(filter_rows(rows[::2])))  # one run a cell: no residual dof
    solutions = [
        constrained.solve(surface, math.sqrt(f4 * f8), rows=rows),  # interpolated
        constrained.solve(surface, math.sqrt(f4 * f8), rows=rows,
                          constraints=constrained.Constraints(max_latency_p95_s=0.02 * 50 * 2.01)),  # unproven
        constrained.solve(surface, f8 * 1.1, rows=rows),  # needs extrapolation
        constrained.solve(surface, f8 * 1.1, rows=rows, extrapolate=True),  # extrapolated
        constrained.solve(surface, 1.0, rows=rows, constraints=constrained.Constraints(max_tokens=(100, 300))),
        constrained.solve(surface, 1.0, rows=rows, constraints=constrained.Constraints(rate_limit_concurrency=4)),
        constrained.solve(constrained.lsq_surface(lsq.fit(filter_rows(limited))), 1.0, rows=limited),  # 429
        constrained.solve(chain, 60.0, rows=rows, conservative=True),  # no intervals
        constrained.solve(surface, 1e6, rows=rows),  # unreachable
        constrained.solve(_knee_surface(), 85.0, rows=rows),  # beyond the knee, between levels
    ]
    keys = set()
    for solution in solutions:
        for note in solution.notes:
            keys.add(getattr(note, "key", None))
            same_facts(note, say(note, "zh"), ["Alpha"])
        for names in (solution.binding, solution.best_binding):
            if names:
                same_facts(constrained.describe_reasons(names), constrained.describe_reasons(names, "zh"))
    assert keys == {"c_not_calibrated", "c_rate_given", "c_429", "c_no_intervals", "c_knee", "c_between",
                    "c_outside", "c_needs_extrapolation", "c_unproven", "c_none"}
    every = tuple(constrained.REASON_WORDS)
    assert english_left(constrained.describe_reasons(every, "zh")) == []
    assert constrained.describe_reasons(every) == "; ".join(constrained.REASON_WORDS.values())


# ---------------------------------------------------------------------------
# The report page's calculator
# ---------------------------------------------------------------------------

def test_the_pages_texts_carry_the_reasons_in_its_language() -> None:
    for lang in ("zh", "en"):
        words = PAGE[lang]["js"]["slo"]
        assert words["reasons"] == REASONS[lang] and words["reasons_sep"] == WORDS[lang]["reasons_sep"]


@pytest.mark.browser
@pytest.mark.slow
def test_the_chinese_pages_calculator_gives_its_reasons_in_chinese(collected: Path, tmp_path: Path) -> None:
    page = tmp_path / "page.html"
    outcome = CliRunner().invoke(main, ["report", str(collected), "-o", str(page), "--lang", "zh", "--slo", SLO_TEXT,
                                        "--attainment", str(ATTAINMENT)])
    assert outcome.exit_code == 0, outcome.output
    blank = {"slo-price-in": "", "slo-price-out": "", "slo-gpu-hour-price": "", "slo-gpus": "", "slo-tpm": "",
             "slo-minimise": "concurrency"}
    seen: set[str] = set()
    with offline_chromium() as browser:
        open_page(browser, page)
        for fields in ({"slo-rpm": "1", "slo-target": "10"}, {"slo-rpm": "", "slo-tpm": "1", "slo-target": "10"},
                       {"slo-rpm": "", "slo-target": "1e9"}):
            data, shown = browser.execute_script(SET_SLO, blank | fields, "slo-result")
            binding = json.loads(data)["binding"]
            assert binding, fields
            seen |= set(binding)
            for name in binding:
                assert REASONS["zh"][name] in shown, (name, shown)
            assert "起约束作用的：" in shown
            assert english_left(shown, ["m"]) == [], shown
    assert {"rpm_limit", "tpm_limit"} <= seen


def test_the_chinese_pages_slo_section_says_its_answer_and_reasons_in_chinese(collected: Path,
                                                                             tmp_path: Path) -> None:
    """The page's static "Under an SLO" section (its answer lines, what binds, the reasons of each
    configuration) in the page's language, with the numbers of the English page."""
    pages = {}
    for lang in ("en", "zh"):
        pages[lang] = tmp_path / f"{lang}.html"
        outcome = CliRunner().invoke(main, ["report", str(collected), "-o", str(pages[lang]), "--lang", lang,
                                            "--slo", SLO_TEXT, "--attainment", str(ATTAINMENT)])
        assert outcome.exit_code == 0, outcome.output

    def section(page: Path) -> str:
        text = page.read_text(encoding="utf-8")
        start = text.index('<section id="slo"')
        body = text[start:text.index("</section>", start)]
        body = re.sub(r"<(code|script)\b.*?</\1>", " ", body, flags=re.S)
        return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", body)))

    chinese, english = section(pages["zh"]), section(pages["en"])
    assert english_left(chinese, ["m"]) == [], english_left(chinese, ["m"])
    assert english_left(english, ["m"])  # the check can see English where there is some
    assert set(NUMBER.findall(chinese)) >= set(NUMBER.findall(english)) - {"1"}
