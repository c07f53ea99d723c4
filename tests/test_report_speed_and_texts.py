"""The report's charts and words (issue 17): no chart engine to start, legends that tell every
model and max_tokens apart and collide with nothing, charts across the page's width and readable
on a phone, units on every axis, and "n/a" (zh "无") where the data give no value.

The CPU figure itself is a benchmark (benchmarks/bench_report_cpu.py), not a timed test; what
is tested here is what made it slow: the report must not load Altair or vl-convert."""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from scm_xl.cli import main
from data.gen import MODELS, replicated_factorial, write_csv
from support.browser import SET_INVERSE, browser, open_page  # noqa: F401  (the fixture)
from support.reports import calculator_rows, chart_elements
from support.paths import ARTICLE

ROOT = Path(__file__).resolve().parent.parent
SVG = "{http://www.w3.org/2000/svg}"


def _report(source: Path, out: Path, lang: str) -> Path:
    result = CliRunner().invoke(main, ["report", str(source), "-o", str(out), "--lang", lang])
    assert result.exit_code == 0, result.output
    return out


@pytest.fixture(scope="module")
def two_models(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two models x concurrency 1-8 x max_tokens 50, 100, 200, with P95 latency and TTFT."""
    return write_csv(tmp_path_factory.mktemp("two") / "results.csv", calculator_rows())


@pytest.fixture(scope="module")
def on_a100(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two catalogued models on a catalogued GPU: the roofline chart draws two ceilings 8 TPS apart."""
    rows = [dataclasses.replace(r, gpu="a100-80gb", model="qwen2.5-7b" if r.model == MODELS[0] else "llama-3.1-8b")
            for r in replicated_factorial(seed=4, repeats=1, sigma=0.03, prefix="V")]
    return write_csv(tmp_path_factory.mktemp("a100") / "results.csv", rows)


@pytest.fixture(scope="module")
def pages(two_models: Path, on_a100: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("pages")
    made = {f"{name}_{lang}": _report(source, folder / f"{name}_{lang}.html", lang)
            for name, source in (("two", two_models), ("article", ARTICLE)) for lang in ("en", "zh")}
    made["a100_zh"] = _report(on_a100, folder / "a100_zh.html", "zh")
    return made


# ---------------------------------------------------------------------------
# Speed: nothing to start
# ---------------------------------------------------------------------------

def test_the_report_command_loads_no_chart_engine(tmp_path: Path, two_models: Path) -> None:
    """Starting vl-convert's JavaScript engine (and importing Altair) was most of the command's
    2-3 CPU seconds; the charts are now written as SVG text."""
    out = tmp_path / "r.html"
    code = ("import sys\nfrom scm_xl.cli import main\n"
            f"try:\n    main(['report', {str(two_models)!r}, '-o', {str(out)!r}])\n"
            "except SystemExit as stop:\n    assert not stop.code, stop.code\n"
            "loaded = sorted(m for m in sys.modules if m.split('.')[0] in ('altair', 'vl_convert', 'vegafusion'))\n"
            "print(loaded)\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "[]"
    html = out.read_text(encoding="utf-8")
    assert html.count('<svg class="panel"') >= 6  # every chart drawn: 1 + 2 models + 2 metrics + 1


# ---------------------------------------------------------------------------
# Legends and units, in the file
# ---------------------------------------------------------------------------

def _figure(html: str, key: str) -> Any:
    start = html.index(f'id="chart-{key}"')
    body = html[html.index(">", start) + 1:html.index("</figure>", start)]
    body = body[body.index('<div class="panels">'):body.rindex("</div>") + len("</div>")]
    return chart_elements(body)


def _legend(tree: Any) -> dict[str | None, list[tuple[str, str]]]:
    """The legend's groups: title -> [(label, key signature)]."""
    groups: dict[str | None, list[tuple[str, str]]] = {}
    for group in tree.iter("div"):
        if group.get("class") != "legend-group":
            continue
        title = next((s.text for s in group if s.get("class") == "legend-title"), None)
        groups[title] = [("".join(item.itertext()).strip(), item.get("data-key"))
                         for item in group if item.get("class") == "legend-item"]
    return groups


def test_the_latency_legend_tells_every_model_and_max_tokens_apart(pages: dict[str, Path]) -> None:
    """The P95 chart had one black dot for both models: now each model its own marker and dash,
    each max_tokens its own colour, and every line drawn is a distinct (colour, marker, dash)."""
    tree = _figure(pages["two_en"].read_text(encoding="utf-8"), "latency")
    legend = _legend(tree)
    assert [label for label, _ in legend["model"]] == list(MODELS)
    assert [label for label, _ in legend["max_tokens"]] == ["max_tokens 50", "max_tokens 100", "max_tokens 200"]
    for entries in legend.values():
        assert len({key for _, key in entries}) == len(entries), entries  # no two keys alike
    model_keys = [key.split("|")[1:] for _, key in legend["model"]]  # marker, fill, dash
    assert len({k[0] for k in model_keys}) == len(MODELS) and len({k[2] for k in model_keys}) == len(MODELS)
    assert len({key.split("|")[0] for _, key in legend["max_tokens"]}) == 3  # colours
    for panel in tree.iter(f"{SVG}svg"):
        if panel.get("class") != "panel":
            continue
        lines = [(p.get("stroke"), p.get("stroke-dasharray")) for g in panel.iter(f"{SVG}g")
                 if g.get("class") == "mark-line" for p in g]
        assert len(lines) == len(set(lines)) == len(MODELS) * 3, lines


@pytest.mark.parametrize("page", ["two_en", "two_zh", "article_en", "article_zh"])
def test_every_axis_has_its_unit_and_every_legend_entry_names_its_factor(pages: dict[str, Path], page: str) -> None:
    from scm_xl.htmlreport.texts import PAGE

    html = pages[page].read_text(encoding="utf-8")
    titles = re.findall(r'<text class="axis-title [xy]"[^>]*>([^<]*)</text>', html)
    assert len(titles) >= 6  # two a chart, three charts or more
    for title in titles:
        assert re.search(r"[(（][^)）]+[)）]$", title), title  # "TPS (tok/s)", "时间（秒）"
    assert PAGE["en"]["axis_tps"] == "TPS (tok/s)" and PAGE["zh"]["axis_tps"] == "TPS（tok/s）"
    assert PAGE["en" if page.endswith("en") else "zh"]["axis_tps"] in titles
    items = re.findall(r'<span class="legend-item"[^>]*>(?:<svg.*?</svg>)([^<]*)</span>', html)
    assert items
    for label in items:
        assert not re.fullmatch(r"[\d.\s·]+", label), label  # "max_tokens 50", never a bare "50"
    assert "max_tokens 50" in items and "· 50" not in html


# ---------------------------------------------------------------------------
# Missing values
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("lang, word", [("en", "n/a"), ("zh", "无")])
def test_a_missing_value_reads_n_a_never_a_dash(pages: dict[str, Path], lang: str, word: str) -> None:
    """The article's seven rows test nothing: no MAPE, no hold-out; the page said "-%"."""
    html = pages[f"article_{lang}"].read_text(encoding="utf-8")
    assert "-%" not in html and ">-<" not in html and "> - <" not in html
    cards = re.findall(r'<div class="label">[^<]*</div><div class="value">([^<]*)</div>', html)
    assert cards[1:3] == [word, word]  # MAPE, max deviation
    holdout = html[html.index('<table id="holdout">'):html.index("</table>", html.index('<table id="holdout">'))]
    assert f'<td class="num">{word}</td><td class="num">{word}</td>' in holdout
    texts = json.loads(html[html.index('id="scm-texts">') + len('id="scm-texts">'):html.index(
        "</script>", html.index('id="scm-texts">'))])
    assert texts["missing"] == word  # the calculator's word too


# ---------------------------------------------------------------------------
# In the browser: layout at 1280 and 390 px, the calculator's words
# ---------------------------------------------------------------------------

GEOMETRY = """
function box(el) { const b = el.getBoundingClientRect(); return [b.left, b.top, b.right, b.bottom]; }
return Array.from(document.querySelectorAll('figure.chart')).filter(f => f.querySelector('svg.panel')).map(f => ({
    id: f.id, figure: box(f), main: box(document.querySelector('main')),
    panels: Array.from(f.querySelectorAll('svg.panel')).map(box),
    legend: Array.from(f.querySelectorAll('.legend-item')).map(box),
    texts: Array.from(f.querySelectorAll('svg.panel')).map(svg =>
        Array.from(svg.querySelectorAll('.axis text, .axis-title, .panel-title, .mark-rule text')).map(box)),
    tick: Math.min(...Array.from(f.querySelectorAll('svg.panel .axis text')).map(t => t.getBoundingClientRect().height)),
}));
"""


def _overlap(a: list[float], b: list[float], slack: float = 0.5) -> bool:
    return a[0] < b[2] - slack and b[0] < a[2] - slack and a[1] < b[3] - slack and b[1] < a[3] - slack


@pytest.mark.browser
@pytest.mark.slow
@pytest.mark.parametrize("width", [1280, 390])
def test_the_charts_fill_the_width_and_nothing_collides(browser: Any, pages: dict[str, Path],  # noqa: F811
                                                       width: int, tmp_path: Path) -> None:
    for name in ("two_en", "article_zh", "a100_zh"):
        browser.set_window_size(width, 900)
        open_page(browser, pages[name])
        charts = browser.execute_script(GEOMETRY)
        assert len(charts) >= 3, name
        for chart in charts:
            where = f"{name} {chart['id']} at {width}"
            main_width = chart["main"][2] - chart["main"][0]
            figure_width = chart["figure"][2] - chart["figure"][0]
            panels_width = max(p[2] for p in chart["panels"]) - min(p[0] for p in chart["panels"])
            # the panels use their figure's width, and a figure at least half the page's
            assert panels_width >= 0.95 * figure_width and figure_width >= 0.45 * main_width, where
            legend = chart["legend"]
            assert legend, where
            for i, item in enumerate(legend):
                assert not any(_overlap(item, panel) for panel in chart["panels"]), where
                assert not any(_overlap(item, other) for other in legend[i + 1:]), (where, item)
            for texts in chart["texts"]:  # tick labels, axis titles and the ceilings' labels clear of each other
                for i, text in enumerate(texts):
                    assert not any(_overlap(text, other) for other in texts[i + 1:]), (where, text)
            assert chart["tick"] >= 10, where  # tick labels 10 px or more, on a phone too
        assert browser.execute_script("return document.documentElement.scrollWidth - window.innerWidth") <= 1
        shot = tmp_path / f"{name}_{width}.png"
        browser.save_screenshot(str(shot))
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    browser.set_window_size(1200, 900)


INVERSE = SET_INVERSE + """
const out = document.getElementById('inverse-result');
return [out.getAttribute('data-result'), out.innerText];
"""


@pytest.mark.browser
@pytest.mark.slow
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_bound_by_only_when_something_binds(browser: Any, pages: dict[str, Path], lang: str) -> None:  # noqa: F811
    """An unreachable target with extrapolation allowed: the best reachable is the highest TPS
    there is, nothing binds it, and the page said "(bound by -)"."""
    from scm_xl.htmlreport.texts import PAGE

    bound_by = PAGE[lang]["js"]["bound_by"]
    open_page(browser, pages[f"article_{lang}"])
    free = {"inv-method": "chain", "inv-target": "100000", "inv-prompt-tokens": "", "inv-latency": "", "inv-ttft": "",
            "inv-max-concurrency": "", "inv-rate-limit": "", "inv-extrapolate": True, "inv-conservative": False,
            "inv-search": True}  # every concurrency, as `solve --method` (the page opens on the measured levels)
    raw, text = browser.execute_script(INVERSE, free)
    result = json.loads(raw)
    assert result["best"] is not None and result["best_binding"] == []
    assert bound_by not in text and "-)" not in text and "-）" not in text, text
    # Without extrapolation the measured range stops a higher TPS: then it is said.
    raw, text = browser.execute_script(INVERSE, {**free, "inv-extrapolate": False})
    result = json.loads(raw)
    assert result["best_binding"] == ["extrapolation"] and bound_by in text, text
