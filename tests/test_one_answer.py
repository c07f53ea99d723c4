"""One question, one answer on every surface (issue 17, item 7): the filled workbook as its own
engine recalculates it, `scm-xl solve`, `scm-xl predict` at the answer, the HTML report's
calculator as it opens in a real headless Chromium, and `scm-xl demo` ask the same default
question (the same method, target TPS, max_tokens and model) and give the same concurrency and
predicted TPS. And one language rule for fill, report, demo, compare and build template; and
the caveats an answer carries are true (an excluded measurement is never a silent "best")."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from scm_xl.cli import main
from scm_xl.rules import DEFAULT_METHOD, DEFAULT_TARGET
from support import books
from support.browser import browser, open_page  # noqa: F401  (the fixture)
from support.cli import Started
from support.paths import ARTICLE

REL = 1e-9


@pytest.fixture(scope="module", autouse=True)
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Started]]:
    """`scm-xl demo`, started as the module starts (a process of its own, nearly all of it waiting on
    its simulators) and read by the module's last test: the other tests run meanwhile. Its output
    folder and its run."""
    out = tmp_path_factory.mktemp("demo") / "demo"
    started = Started("demo", "--out", out, "--lang", "en", "--no-progress")
    try:
        yield out, started
    finally:
        started.stop()


def run(*args: object, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(main, [str(a) for a in args], env=env)


def ok(*args: object) -> str:
    result = run(*args)
    assert result.exit_code == 0, result.output
    return result.stdout


def cli_json(*args: object) -> dict[str, Any]:
    return json.loads(ok(*args, "--json"))


def workbook_answers(path: Path) -> dict[str, Any]:
    """The workbook's question (its input cells) and its answers as IronCalc recalculates the file."""
    from scm_xl.engines import get_engine
    from scm_xl.workbook.io import read_inputs
    from scm_xl.workbook.registry import load_inputs, read_layout

    wb = load_inputs(path)  # as verify reads them
    layout = read_layout(wb, path)
    inputs = read_inputs(wb, layout, path)
    values = get_engine("ironcalc").recalculate(path).values

    def value(name: str) -> Any:
        cell = layout.defined_names()[name]
        return values[(layout.title(cell.sheet), cell.address)]

    return {"target": inputs.inverse["target_tps"], "max_tokens": inputs.inverse["max_tokens"],
            "method": inputs.settings.method, "concurrency": value("RecommendedConcurrency"),
            "tps": value("RecommendedTPS"), "forward": inputs.forward, "forward_tps": value("ForwardTPS")}


def calculator_as_it_opens(driver: Any, page: Path) -> dict[str, Any]:
    """The report's calculator as it opens: no field touched."""
    open_page(driver, page)
    inverse = json.loads(driver.find_element("id", "inverse-result").get_attribute("data-result"))
    forward = json.loads(driver.find_element("id", "forward-result").get_attribute("data-result"))
    fields = driver.execute_script("""
        const boxes = name => Array.from(document.querySelectorAll(`input[name='${name}']`))
            .filter(b => b.checked).map(b => b.value);
        return {target: document.getElementById('inv-target').value,
                inv_method: document.getElementById('inv-method').value,
                fwd_method: document.getElementById('fwd-method').value,
                lengths: boxes('inv-length'), text: document.body.innerText};""")
    errors = [e for e in driver.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]
    assert errors == []
    return {"inverse": inverse, "forward": forward, **fields}


def close(a: float, b: float) -> bool:
    return abs(a - b) <= REL * max(abs(a), abs(b))


@pytest.mark.browser
@pytest.mark.slow
def test_the_article_default_question_has_one_answer(browser: Any, tmp_path: Path) -> None:  # noqa: F811
    """The article data, nothing asked: every surface asks the workbook's question (chain, the
    template's target TPS, the base max_tokens) and answers it alike."""
    workbook = tmp_path / "article.xlsx"
    ok("fill", ARTICLE, "-o", workbook, "--lang", "en")
    book = workbook_answers(workbook)
    assert (book["target"], book["method"]) == (DEFAULT_TARGET["tps"], DEFAULT_METHOD)
    assert book["max_tokens"] == DEFAULT_TARGET["max_tokens"]  # measured in the article
    assert isinstance(book["concurrency"], (int, float)) and isinstance(book["tps"], float)

    # solve with no option, of the CSV and of the workbook: the workbook's question and answer
    for source in (ARTICLE, workbook):
        solved = cli_json("solve", source)
        assert (solved["target_tps"], solved["max_tokens"]) == (book["target"], book["max_tokens"]), source
        assert solved["concurrency"] == book["concurrency"] and close(solved["tps"], book["tps"]), source
    # predict at the answer, with the default method
    predicted = cli_json("predict", ARTICLE, "--concurrency", book["concurrency"], "--max-tokens",
                         book["max_tokens"])
    assert predicted["method"] == DEFAULT_METHOD and close(predicted["tps"], book["tps"])
    # and at the workbook's forward question
    forward = cli_json("predict", ARTICLE, "--concurrency", book["forward"]["concurrency"], "--max-tokens",
                       book["forward"]["max_tokens"])
    assert close(forward["tps"], book["forward_tps"])

    # the report's calculator opens on the same question, of the CSV and of the workbook
    for source in (ARTICLE, workbook):
        page = tmp_path / f"{source.stem}.html"
        ok("report", source, "-o", page, "--lang", "en")
        calc = calculator_as_it_opens(browser, page)
        assert (calc["inv_method"], calc["fwd_method"]) == (DEFAULT_METHOD, DEFAULT_METHOD), source
        assert float(calc["target"]) == book["target"] and calc["lengths"] == [str(book["max_tokens"])], source
        inverse = calc["inverse"]
        assert inverse["method"] == DEFAULT_METHOD and inverse["max_tokens"] == book["max_tokens"], source
        assert inverse["concurrency"] == book["concurrency"] and close(inverse["tps"], book["tps"]), source
        assert close(calc["forward"]["tps"], book["forward_tps"]), source
        # a value the data do not give is "n/a", never "-%" or "(bound by -)"
        assert "-%" not in calc["text"] and "bound by -" not in calc["text"], source


# ---------------------------------------------------------------------------
# One language rule
# ---------------------------------------------------------------------------

@pytest.mark.parametrize(("env", "lang"), [
    ({"LC_ALL": "", "LC_MESSAGES": "", "LANG": "zh_CN.UTF-8"}, "zh"),
    ({"LC_ALL": "", "LC_MESSAGES": "", "LANG": "en_GB.UTF-8"}, "en"),
    ({"LC_ALL": "", "LC_MESSAGES": "", "LANG": ""}, "en"),
    ({"LC_ALL": "zh_TW.UTF-8", "LC_MESSAGES": "", "LANG": "en_US.UTF-8"}, "zh"),
    ({"LC_ALL": "", "LC_MESSAGES": "C", "LANG": "zh_CN.UTF-8"}, "en"),
])
def test_the_language_follows_the_locale(monkeypatch: pytest.MonkeyPatch, env: dict[str, str], lang: str) -> None:
    from scm_xl.cli._common import resolve_lang

    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert resolve_lang(None) == lang
    assert resolve_lang("en") == "en" and resolve_lang("zh") == "zh"  # --lang wins


@pytest.mark.parametrize("lang", ["zh", "en"])
def test_fill_report_and_template_speak_the_locale(tmp_path: Path, lang: str) -> None:
    env = {"LC_ALL": "", "LC_MESSAGES": "", "LANG": {"zh": "zh_CN.UTF-8", "en": "en_US.UTF-8"}[lang]}
    book, page, template = tmp_path / "a.xlsx", tmp_path / "a.html", tmp_path / "t.xlsx"
    for args in (("fill", ARTICLE, "-o", book), ("report", ARTICLE, "-o", page),
                 ("build", "template", "-o", template)):
        result = run(*args, env=env)
        assert result.exit_code == 0, result.output
    for path in (book, template):
        assert books.layout(path).lang == lang
    assert f'<html lang="{ {"zh": "zh-CN", "en": "en"}[lang] }">' in page.read_text(encoding="utf-8")
    # --lang wins over the locale
    other = "en" if lang == "zh" else "zh"
    result = run("fill", ARTICLE, "-o", tmp_path / "b.xlsx", "--lang", other, env=env)
    assert result.exit_code == 0, result.output
    assert books.layout(tmp_path / "b.xlsx").lang == other


# ---------------------------------------------------------------------------
# True caveats
# ---------------------------------------------------------------------------

def test_an_excluded_measurement_is_never_a_silent_best_reachable() -> None:
    """The article's E06 (concurrency 4, max_tokens 200) measured 45.87 TPS and was excluded; the
    chain's best reachable there is 191.27: said with the measurement and why it was excluded."""
    said = ok("solve", ARTICLE, "--target-tps", 250, "--max-tokens", 200)
    assert "best reachable 191.27 at concurrency 4" in said
    flat = " ".join(said.split())
    assert ("the best reachable configuration was measured: row E06 at 45.87 TPS, and excluded: TPS falls as "
            "concurrency rises") in flat
    flat = " ".join(ok("predict", ARTICLE, "--concurrency", 4, "--max-tokens", 200).split())
    assert "measured here: row E06 at 45.87 TPS, excluded: TPS falls" in flat
    assert "the answer is the model's, not that measurement" in flat
    # the searching solve names it for its best too
    flat = " ".join(ok("solve", ARTICLE, "--target-tps", 250, "--method", "chain").split())
    assert "best under the constraints: 191.27 TPS at concurrency 4, max_tokens 200" in flat
    assert "the best configuration was measured: row E06 at 45.87 TPS, and excluded" in flat


@pytest.mark.browser
@pytest.mark.slow
def test_the_calculator_says_the_best_was_measured_and_excluded(browser: Any, tmp_path: Path) -> None:  # noqa: F811
    page = tmp_path / "article.html"
    ok("report", ARTICLE, "-o", page, "--lang", "en")
    open_page(browser, page)
    text = browser.execute_script("""
        document.querySelectorAll("input[name='inv-length']").forEach(b => { b.checked = b.value === '200'; });
        const target = document.getElementById('inv-target');
        target.value = '250';
        target.dispatchEvent(new Event('input'));
        const out = document.getElementById('inverse-result');
        return [out.getAttribute('data-result'), out.innerText];""")
    result, words = json.loads(text[0]), text[1]
    assert result["best"]["concurrency"] == 4 and result["best"]["max_tokens"] == 200
    assert "This configuration was measured: row E06 at 45.87 TPS, and excluded" in words, words


def test_the_verdict_names_its_check_rows_and_excellent_needs_enough() -> None:
    from scm_xl.report import verdict_line
    from scm_xl.rules import EXCELLENT_MIN_ROWS, verdict_for, verdict_rule

    assert verdict_for(0.0, 0.0, EXCELLENT_MIN_ROWS - 1) == "good"
    assert verdict_for(0.0, 0.0, EXCELLENT_MIN_ROWS) == "excellent"
    assert f"at least {EXCELLENT_MIN_ROWS} rows" in verdict_rule("en", "check rows")
    assert verdict_line("good", 1, 1.0) == ("consistency verdict: good (1 check row, MAPE 1.00%; excellent needs "
                                            f"at least {EXCELLENT_MIN_ROWS})")


# The demo the module started as it began (`demo`), read last: the tests above ran beside it.
@pytest.mark.browser
@pytest.mark.slow
def test_the_demo_question_has_one_answer(browser: Any, demo: tuple[Path, Started],  # noqa: F811
                                          tmp_path: Path) -> None:
    """`scm-xl demo` (the real command: the simulator over loopback, about 15 s) asks its target at
    the default max_tokens; its workbook, solve, predict and the report's calculator agree."""
    out, started = demo
    ran = started.result()
    assert ran.exit_code == 0, ran.output
    said = ran.stdout
    line = next(x for x in said.splitlines() if x.startswith("Inverse: "))
    match = re.match(r"Inverse: ([\d.]+) TPS at max_tokens (\d+) needs concurrency (\d+) \(predicted ([\d.]+) TPS\)",
                     line)
    assert match, line
    target, length, concurrency, shown = float(match[1]), int(match[2]), int(match[3]), float(match[4])

    book = workbook_answers(out / "workbook.xlsx")
    assert (book["target"], book["max_tokens"], book["method"]) == (target, length, DEFAULT_METHOD)
    assert book["concurrency"] == concurrency and round(book["tps"], 1) == shown

    results = out / "results.csv"
    plain = cli_json("solve", results, "--target-tps", target)  # the default max_tokens
    assert plain["max_tokens"] == length
    own = cli_json("solve", out / "workbook.xlsx")  # nothing asked: the workbook's question
    for solved in (plain, own):
        assert solved["concurrency"] == concurrency and close(solved["tps"], book["tps"])
    predicted = cli_json("predict", results, "--concurrency", concurrency, "--max-tokens", length)
    assert predicted["method"] == DEFAULT_METHOD and close(predicted["tps"], book["tps"])

    page = tmp_path / "demo.html"
    ok("report", out / "workbook.xlsx", "-o", page, "--lang", "en")
    calc = calculator_as_it_opens(browser, page)
    assert float(calc["target"]) == target and calc["lengths"] == [str(length)]
    inverse = calc["inverse"]
    assert (inverse["method"], inverse["max_tokens"], inverse["concurrency"]) == (DEFAULT_METHOD, length, concurrency)
    assert close(inverse["tps"], book["tps"])
