"""The report's charts with the demo's shape of data (issue 17, item 5): two models x three
max_tokens x concurrency 1-8, and one model again at a long prompt, with P95 latency and TTFT.

What is asserted: a run at another prompt length is never merged into the base level's series
(the latency chart's cell medians mixed a 1,024-token prompt into the 32-token line); every
line of a panel is a distinct (colour, dash) and every legend entry is unique and names its
factor; and, in headless Chromium at 1280 and 390 px, legend texts clear of each other and of
the plot, panel titles inside their drawing, and charts that fill their place on the page."""

from __future__ import annotations

import dataclasses
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from data.gen import MODELS, experiment, true_tps, write_csv
from support.reports import report_pages
from support.browser import browser, open_page, requests_made  # noqa: F401  (the browser fixture)

SVG = "{http://www.w3.org/2000/svg}"
# Long names as the demo's, one of them Chinese: titles and legend entries that must wrap, not collide.
NAMES = {MODELS[0]: "Qwen/Qwen2.5-7B-Instruct", MODELS[1]: "通义千问/Qwen2.5-72B-Instruct-长上下文版"}
BASE_PROMPT, LONG_PROMPT = 32, 1024


def _latency(concurrency: int, max_tokens: int, prompt: int) -> dict[str, float]:
    """P95 and mean latency and TTFT, and the ITL: a long prompt's prefill grows with the batch."""
    ttft = 0.015 * (1 + concurrency / 4) * (prompt / BASE_PROMPT) ** 0.5
    itl = 0.0115 * (1 + 0.02 * concurrency)
    latency = ttft + max_tokens * itl
    return {"latency_p95_s": latency * 1.05, "ttft_p95_s": ttft * 1.1, "latency_mean_s": latency,
            "ttft_mean_s": ttft, "mean_itl_s": itl}


def demo_like_rows() -> list[Any]:
    rows: list[Any] = []
    for model in MODELS:
        for c in (1, 2, 4, 8):
            for length in (50, 100, 200):
                rows.append(experiment(f"E{len(rows) + 1:03d}", NAMES[model], c, length, true_tps(c, length, model),
                                       prompt_level=BASE_PROMPT, prompt_tokens=BASE_PROMPT + 1,
                                       **_latency(c, length, BASE_PROMPT)))
    for c in (1, 2, 4, 8):  # the first model again at a long prompt, max_tokens 50 only
        rows.append(experiment(f"E{len(rows) + 1:03d}", NAMES[MODELS[0]], c, 50, true_tps(c, 50, MODELS[0]) * 0.7
                               / (1 + c / 8), prompt_level=LONG_PROMPT, prompt_tokens=LONG_PROMPT - 3,
                               **_latency(c, 50, LONG_PROMPT)))
    return rows


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_csv(tmp_path_factory.mktemp("demo-like") / "results.csv", demo_like_rows())


@pytest.fixture(scope="module")
def pages(source: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return report_pages(source, tmp_path_factory.mktemp("demo-like-pages"))


def _figure(html: str, key: str) -> ET.Element:
    start = html.index(f'id="chart-{key}"')
    body = html[html.index(">", start) + 1:html.index("</figure>", start)]
    body = body[body.index('<div class="panels">'):body.rindex("</div>") + len("</div>")]
    return ET.fromstring(f"<div>{body}</div>")


def _panels(tree: ET.Element) -> list[ET.Element]:
    return [svg for svg in tree.iter(f"{SVG}svg") if svg.get("class") == "panel"]


def _title(panel: ET.Element) -> str:
    return " ".join("".join(t.itertext()) for t in panel.iter(f"{SVG}text") if t.get("class") == "panel-title")


def _tips(panel: ET.Element) -> list[str]:
    return [t.text or "" for g in panel.iter(f"{SVG}g") if g.get("class") == "mark-symbol"
            for t in g.iter(f"{SVG}title")]


# ---------------------------------------------------------------------------
# In the file
# ---------------------------------------------------------------------------

def test_a_long_prompt_is_a_series_of_its_own_never_a_median_with_the_base_level(pages: dict[str, Path]) -> None:
    """The P95 latency at max_tokens 50 was the mean of the 32- and 1,024-token runs: a line
    that no measurement made. Now each prompt level has its panels, on its metric's scale."""
    rows = demo_like_rows()
    html = pages["en"].read_text(encoding="utf-8")
    panels = _panels(_figure(html, "latency"))
    titles = [_title(p) for p in panels]
    assert titles == [f"{metric}, at a prompt of {prompt} tokens" for prompt in (BASE_PROMPT, LONG_PROMPT)
                      for metric in ("P95 latency", "P95 TTFT")], titles
    for panel, title in zip(panels, titles):
        prompt = LONG_PROMPT if str(LONG_PROMPT) in title else BASE_PROMPT
        field = "latency_p95_s" if "latency" in title else "ttft_p95_s"
        measured = {(r.model, r.concurrency, r.max_tokens): getattr(r, field) for r in rows if r.prompt_level == prompt}
        tips = _tips(panel)
        assert len(tips) == len(measured), title
        for tip in tips:  # "<model>, concurrency 4, max_tokens 50: 0.6195 s"
            model, c, length, seconds = re.fullmatch(r"(.+), concurrency (\d+), max_tokens (\d+): ([\d.e-]+) s",
                                                     tip).groups()  # type: ignore[union-attr]
            assert float(seconds) == pytest.approx(measured[(model, int(c), int(length))], rel=1e-3), (title, tip)
    # The TPS and per-stream charts split the same way: the long prompt's points are nowhere else.
    for key, per_panel in (("tps-concurrency", [12, 12, 4]), ("roofline", [24, 4])):
        drawn = [len(_tips(p)) for p in _panels(_figure(html, key))]
        assert drawn == per_panel, (key, drawn)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_every_series_is_told_apart_and_every_legend_entry_is_unique(pages: dict[str, Path], lang: str) -> None:
    html = pages[lang].read_text(encoding="utf-8")
    for key in ("measured-predicted", "tps-concurrency", "latency", "roofline", "latency-tps-prompt",
                "latency-ttft-prompt"):
        tree = _figure(html, key)
        for panel in _panels(tree):
            lines = [(p.get("stroke"), p.get("stroke-dasharray")) for g in panel.iter(f"{SVG}g")
                     if g.get("class") == "mark-line" for p in g]
            assert len(lines) == len(set(lines)), (key, lines)
            if key == "measured-predicted":
                continue  # its series are the roles, each its own look (ROLE_STYLES)
            # a point's look (shape, colour, fill) is one series' only, and a series has one look; a
            # series is what the hover text names but the point's x (concurrency; on the prompt
            # charts the prompt length, after the "@")
            looks: dict[tuple[str | None, ...], set[str]] = {}
            xs: dict[tuple[str | None, ...], list[str]] = {}
            for g in panel.iter(f"{SVG}g"):
                if g.get("class") == "mark-symbol":
                    for p in g:
                        look = (re.sub(r"[-\d.]+", "#", p.get("d") or ""), p.get("fill"), p.get("stroke"))
                        tip = next(iter(p.iter(f"{SVG}title"))).text or ""
                        head = tip.split(":")[0]
                        series = head if key.endswith("-prompt") else re.sub(r", (concurrency|并发) \d+", "", head)
                        looks.setdefault(look, set()).add(series)
                        xs.setdefault(look, []).append(tip.split(" @ ")[1] if key.endswith("-prompt")
                                                       else re.findall(r"(?:concurrency|并发) (\d+)", head)[0])
            named = [name for names in looks.values() for name in names]
            assert all(len(names) == 1 for names in looks.values()) and len(named) == len(set(named)), (key, looks)
            # one point per x and look: two runs at one concurrency (two prompt lengths) are two series
            assert all(len(v) == len(set(v)) for v in xs.values()), (key, xs)
        entries = []
        for group in tree.iter("div"):
            if group.get("class") == "legend-group":
                title = next((s.text for s in group if s.get("class") == "legend-title"), None)
                items = [("".join(i.itertext()).strip(), i.get("data-key")) for i in group
                         if i.get("class") == "legend-item"]
                assert len({k for _, k in items}) == len(items), (key, items)  # no two keys alike in a group
                entries += [(title, label) for label, _ in items]
        assert entries and len(set(entries)) == len(entries), (key, entries)
        for _, label in entries:
            assert not re.fullmatch(r"[\d.\s·]+", label), label  # "max_tokens 50", never a bare "50"
        assert {label for _, label in entries} >= ({"max_tokens 50", "max_tokens 100", "max_tokens 200"}
                                                   if key in ("tps-concurrency", "latency", "roofline") else set())


# ---------------------------------------------------------------------------
# In the browser
# ---------------------------------------------------------------------------

GEOMETRY = """
function box(el) { const b = el.getBoundingClientRect(); return [b.left, b.top, b.right, b.bottom]; }
return Array.from(document.querySelectorAll('figure.chart')).filter(f => f.querySelector('svg.panel')).map(f => {
    const grid = f.parentElement;
    const tracks = getComputedStyle(grid).gridTemplateColumns.split(' ').map(parseFloat);
    return {
        id: f.id, wide: f.classList.contains('wide'), figure: box(f), grid: box(grid),
        track: Math.max(...tracks), tracks: tracks.length,
        panels: Array.from(f.querySelectorAll('svg.panel')).map(box),
        legend: Array.from(f.querySelectorAll('.legend-item, .legend-title')).map(box),
        legendBox: box(f.querySelector('.legend')),
        titles: Array.from(f.querySelectorAll('svg.panel')).map(svg =>
            [box(svg), Array.from(svg.querySelectorAll('.panel-title, .axis-title, .axis text')).map(box)]),
    };
});
"""


def _overlap(a: list[float], b: list[float], slack: float = 0.5) -> bool:
    return a[0] < b[2] - slack and b[0] < a[2] - slack and a[1] < b[3] - slack and b[1] < a[3] - slack


def _inside(inner: list[float], outer: list[float], slack: float = 1.0) -> bool:
    return (inner[0] >= outer[0] - slack and inner[1] >= outer[1] - slack and inner[2] <= outer[2] + slack
            and inner[3] <= outer[3] + slack)


@pytest.mark.browser
@pytest.mark.slow
@pytest.mark.parametrize("width", [1280, 390])
def test_legends_and_titles_collide_with_nothing_and_charts_fill_their_place(
        browser: Any, pages: dict[str, Path], width: int, tmp_path: Path) -> None:  # noqa: F811
    for lang, page in pages.items():
        browser.set_window_size(width, 900)
        open_page(browser, page)
        charts = browser.execute_script(GEOMETRY)
        assert len(charts) == 6, [c["id"] for c in charts]
        for chart in charts:
            where = f"{lang} {chart['id']} at {width}"
            figure_width = chart["figure"][2] - chart["figure"][0]
            panels_width = max(p[2] for p in chart["panels"]) - min(p[0] for p in chart["panels"])
            # the panels fill their figure; the figure its grid track, or the whole grid when wide
            assert panels_width >= 0.9 * figure_width, where
            place = chart["grid"][2] - chart["grid"][0] if chart["wide"] else chart["track"]
            assert figure_width >= 0.9 * place, where
            if width == 1280:
                assert chart["tracks"] == 2, where  # two columns on a desktop
            legend = chart["legend"]
            assert legend, where
            assert _inside(chart["legendBox"], chart["figure"]), where  # nothing out past the figure
            for i, item in enumerate(legend):
                assert not any(_overlap(item, panel) for panel in chart["panels"]), (where, item)
                assert not any(_overlap(item, other) for other in legend[i + 1:]), (where, item)
            for svg, texts in chart["titles"]:  # titles, axis titles and ticks inside their drawing
                for text in texts:
                    assert _inside(text, svg), (where, text, svg)
        assert browser.execute_script("return document.documentElement.scrollWidth - window.innerWidth") <= 1
        urls = requests_made(browser)
        assert urls and all(u == page.resolve().as_uri() for u in urls), urls  # nothing but the page itself
        shot = tmp_path / f"charts_{lang}_{width}.png"
        browser.save_screenshot(str(shot))
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    browser.set_window_size(1200, 900)
