"""`scm-xl report`: one self-contained HTML page, opened in a real headless Chromium with the
network blocked; its live calculator agrees with `scm-xl predict` / `scm-xl solve --json`."""

from __future__ import annotations

import base64
import dataclasses
import json
import math
import random
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from scm_xl.cli import main
from data.gen import MODELS, replicated_factorial, write_csv
from support.browser import browser, open_page, requests_made  # noqa: F401  (the fixture)
from support.reports import calculator_rows, chart_elements

REL = 1e-9


# ---------------------------------------------------------------------------
# Data: two models, four concurrency levels, three lengths, two repeats, with
# measured P95 latency and TTFT (except one cell) and HTTP 429s at one level
# (support.reports.calculator_rows).
# ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_csv(tmp_path_factory.mktemp("report") / "results.csv", calculator_rows())


def invoke(*args: object) -> str:
    result = CliRunner().invoke(main, [str(a) for a in args])
    assert result.exit_code == 0, result.output
    return result.output


@pytest.fixture(scope="module")
def pages(source: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("pages")
    out = {}
    for lang in ("en", "zh"):
        out[lang] = folder / f"report_{lang}.html"
        invoke("report", source, "-o", out[lang], "--lang", lang)
    return out


# ---------------------------------------------------------------------------
# The browser
# ---------------------------------------------------------------------------



@pytest.mark.browser
@pytest.mark.slow
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_page_works_offline_with_every_chart(browser: Any, pages: dict[str, Path], lang: str,
                                                   tmp_path: Path) -> None:
    page = pages[lang]
    html = page.read_text(encoding="utf-8")
    for outside in ("http://", "https://", "//cdn", "src=\"", "<link"):
        assert outside not in html.replace("http://www.w3.org/", ""), outside  # SVG namespaces are names, not requests
    open_page(browser, page)
    assert browser.execute_script("return document.readyState") == "complete"

    # No request except the page itself.
    urls = requests_made(browser)
    assert urls and all(u == page.resolve().as_uri() for u in urls), urls
    # No console error (a script error, a blocked resource, a CSP violation).
    errors = [e for e in browser.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]
    assert errors == []

    # Every chart drew marks into a visible SVG.
    charts = browser.execute_script("""
        return Array.from(document.querySelectorAll('figure.chart')).map(f => {
            const svg = f.querySelector('svg');
            if (!svg) return {id: f.id, svg: false};
            const box = svg.getBoundingClientRect();
            return {id: f.id, svg: true, width: box.width, height: box.height,
                    marks: svg.querySelectorAll('.mark-symbol path, .mark-line path, .mark-rule line').length};
        });""")
    assert {c["id"] for c in charts} == {"chart-measured-predicted", "chart-tps-concurrency", "chart-latency",
                                         "chart-roofline"}
    for chart in charts:
        assert chart["svg"] and chart["width"] > 100 and chart["height"] > 100 and chart["marks"] > 0, chart

    # The answer first, in the page's language.
    verdict = browser.find_element("id", "verdict")
    assert verdict.get_attribute("data-verdict") in ("excellent", "good", "fail", "insufficient")
    words = {"en": "The answer", "zh": "结论"}[lang]
    assert browser.find_element("css selector", "#answer h2").text == words

    # Readable on a phone: nothing but the tables' own scroll boxes is wider than the screen.
    browser.set_window_size(390, 844)
    overflow = browser.execute_script("return document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 1
    shot = tmp_path / f"report_{lang}_phone.png"
    browser.save_screenshot(str(shot))
    browser.set_window_size(1200, 900)
    height = browser.execute_script("return document.body.scrollHeight")
    browser.set_window_size(1200, min(height, 8000))
    full = tmp_path / f"report_{lang}.png"
    browser.save_screenshot(str(full))
    browser.set_window_size(1200, 900)
    for png in (shot, full):
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    # Printable: Chromium prints it to a PDF.
    pdf = base64.b64decode(browser.execute_cdp_cmd("Page.printToPDF", {"printBackground": True})["data"])
    assert pdf[:5] == b"%PDF-" and len(pdf) > 10_000
    assert requests_made(browser) == []


# ---------------------------------------------------------------------------
# The calculator against the CLI
# ---------------------------------------------------------------------------

# The answer's fields; the CLI's JSON may say more around them (caveats, hints, prose notes).
FORWARD_KEYS = {"tps", "missing", "method"}
LSQ_FORWARD_KEYS = FORWARD_KEYS | {"tps_interval", "tps_prediction_interval", "interpolated", "extrapolated"}
INVERSE_KEYS = {"concurrency", "tps", "reachable", "max_tokens", "model", "method", "target_tps", "cheapest",
                "binding", "blocked", "best", "best_binding"}
CANDIDATE_KEYS = {"model", "concurrency", "max_tokens", "tps", "tps_interval", "tps_prediction_interval",
                  "interpolated", "extrapolated", "latency_p95_s", "ttft_p95_s", "rejected_by"}


def _close(a: Any, b: Any, where: str) -> None:
    """`a` (the page) equals `b` (the CLI) on every field `a` has, numbers to 1e-9 relative."""
    if isinstance(a, float) or isinstance(b, float):
        assert a is not None and b is not None, f"{where}: {a!r} vs {b!r}"
        assert math.isclose(float(a), float(b), rel_tol=REL, abs_tol=0.0), f"{where}: {a!r} vs {b!r}"
    elif isinstance(a, dict) and isinstance(b, dict):
        assert set(a) <= set(b), f"{where}: keys {sorted(a)} vs {sorted(b)}"
        for key in a:
            _close(a[key], b[key], f"{where}.{key}")
    elif isinstance(a, list) and isinstance(b, list):
        assert len(a) == len(b), f"{where}: {a!r} vs {b!r}"
        for i, (x, y) in enumerate(zip(a, b)):
            _close(x, y, f"{where}[{i}]")
    else:
        assert a == b, f"{where}: {a!r} vs {b!r}"


SET_FIELDS = """
const [form, fields, boxes] = arguments;
for (const [id, value] of Object.entries(fields)) {
    const el = document.getElementById(id);
    if (el.type === 'checkbox') el.checked = value; else el.value = value;
}
for (const [name, allowed] of Object.entries(boxes)) {
    document.querySelectorAll(`input[name='${name}']`).forEach(b => { b.checked = allowed.includes(b.value); });
}
document.getElementById(form === 'forward' ? 'fwd-method' : 'inv-method').dispatchEvent(new Event('change'));
return document.getElementById(form + '-result').getAttribute('data-result');
"""


def _forward_queries(rng: random.Random, count: int) -> list[dict[str, Any]]:
    queries = []
    for i in range(count):
        method = ("chain", "lsq")[i % 2]
        pick = rng.random()
        if pick < 0.5:
            concurrency: float = rng.choice([1, 2, 4, 8])
        elif pick < 0.8:
            concurrency = round(rng.uniform(1.0, 8.0), 3)  # between measured levels
        else:
            concurrency = round(rng.uniform(0.5, 16.0), 2)  # often outside them
        queries.append({"method": method, "concurrency": concurrency, "max_tokens": rng.choice([50, 100, 200]),
                        "model": rng.choice(MODELS), "extrapolate": method == "lsq" and rng.random() < 0.4})
    return queries


def _inverse_queries(rng: random.Random, count: int) -> list[dict[str, Any]]:
    queries = []
    for i in range(count):
        lengths = sorted(rng.sample([50, 100, 200], rng.randint(1, 3)))
        models = rng.sample(list(MODELS), rng.randint(1, 2))
        queries.append({
            "method": ("chain", "lsq")[i % 2],
            "target": round(rng.uniform(5.0, 200.0), 2),
            # every other pair of queries has a latency limit
            "latency": round(rng.uniform(1.0, 12.0), 3) if (i // 2) % 2 == 0 else None,
            "ttft": round(rng.uniform(0.05, 0.2), 3) if rng.random() < 0.15 else None,
            "max_concurrency": rng.choice([None, None, 4, 6, 16]),
            "rate_limit": rng.choice([None, None, None, 3, 8]),
            "lengths": lengths, "models": models,
            "extrapolate": rng.random() < 0.3, "conservative": rng.random() < 0.3,
        })
    return queries


def cli_json(*args: object) -> dict[str, Any]:
    """The CLI's JSON answer; exit 1 is its word for "not identified by the data"."""
    result = CliRunner().invoke(main, [str(a) for a in args])
    assert result.exit_code in (0, 1), result.output
    data = json.loads(result.stdout)
    assert result.exit_code == 0 or data["tps"] is None or data.get("identified") is False, result.output
    return data


def _cli_forward(source: Path, q: dict[str, Any]) -> dict[str, Any]:
    args = ["predict", source, "--concurrency", repr(q["concurrency"]), "--max-tokens", q["max_tokens"],
            "--model", q["model"], "--method", q["method"], "--json"]
    if q["extrapolate"]:
        args.append("--extrapolate")
    return cli_json(*args)


def _cli_inverse(source: Path, q: dict[str, Any]) -> dict[str, Any]:
    args: list[object] = ["solve", source, "--target-tps", repr(q["target"]), "--method", q["method"], "--json"]
    for option, key in (("--max-latency-p95", "latency"), ("--max-ttft-p95", "ttft"),
                        ("--max-concurrency", "max_concurrency"), ("--rate-limit", "rate_limit")):
        if q[key] is not None:
            args += [option, repr(q[key])]
    if q["lengths"] != [50, 100, 200]:
        args += ["--allowed-max-tokens", ",".join(map(str, q["lengths"]))]
    if len(q["models"]) < len(MODELS):
        args += ["--allowed-models", ",".join(q["models"])]
    if q["extrapolate"]:
        args.append("--extrapolate")
    if q["conservative"]:
        args.append("--conservative")
    return cli_json(*args)


def _blank(value: Any) -> str:
    return "" if value is None else repr(value)


@pytest.mark.browser
@pytest.mark.slow
def test_the_calculator_agrees_with_predict_and_solve(browser: Any, pages: dict[str, Path], source: Path) -> None:
    open_page(browser, pages["en"])
    rng = random.Random(2026)
    forward, inverse = _forward_queries(rng, 30), _inverse_queries(rng, 40)
    answered = {"forward": 0, "inverse": 0, "unreachable": 0, "latency": 0, "missing": 0}
    for q in forward:
        page = json.loads(browser.execute_script(SET_FIELDS, "forward", {
            "fwd-method": q["method"], "fwd-concurrency": repr(q["concurrency"]),
            "fwd-max-tokens": str(q["max_tokens"]), "fwd-model": q["model"], "fwd-extrapolate": q["extrapolate"],
        }, {}))
        assert set(page) == (LSQ_FORWARD_KEYS if q["method"] == "lsq" else FORWARD_KEYS)
        _close(page, _cli_forward(source, q), f"forward {q}")
        answered["forward"] += 1
        answered["missing"] += page["tps"] is None
    for q in inverse:
        page = json.loads(browser.execute_script(SET_FIELDS, "inverse", {
            "inv-method": q["method"], "inv-target": repr(q["target"]), "inv-latency": _blank(q["latency"]),
            "inv-ttft": _blank(q["ttft"]), "inv-max-concurrency": _blank(q["max_concurrency"]),
            "inv-rate-limit": _blank(q["rate_limit"]), "inv-extrapolate": q["extrapolate"],
            "inv-conservative": q["conservative"],
            "inv-search": True,  # every concurrency, as `solve --method` does (the page opens on the measured levels)
        }, {"inv-length": [str(v) for v in q["lengths"]], "inv-model": q["models"]}))
        cli = _cli_inverse(source, q)
        page.pop("notes")  # prose, in the page's own language
        assert set(page) == INVERSE_KEYS
        for key in ("cheapest", "blocked", "best"):
            assert page[key] is None or set(page[key]) == CANDIDATE_KEYS
        _close(page, cli, f"inverse {q}")
        answered["inverse"] += 1
        answered["unreachable"] += not page["reachable"]
        answered["latency"] += q["latency"] is not None
    # The queries covered what they should: both methods, answers and non-answers, limits on and off.
    assert answered["forward"] + answered["inverse"] >= 50
    assert 0 < answered["missing"] < answered["forward"]
    assert 0 < answered["unreachable"] < answered["inverse"]
    assert 0 < answered["latency"] < answered["inverse"]
    assert browser.get_log("browser") == [] or all(e["level"] not in ("SEVERE", "ERROR")
                                                  for e in browser.get_log("browser"))


@pytest.mark.browser
@pytest.mark.slow
def test_the_calculator_at_a_prompt_length_without_prompt_levels_equals_the_cli(  # noqa: F811
        browser: Any, pages: dict[str, Path], source: Path) -> None:
    """Data without prompt levels: K_in(P) is not identified, so chain and least squares refuse a
    prompt length (in predict's words), and auto ranks as at the base prompt."""
    open_page(browser, pages["en"])
    for method in ("chain", "lsq", "auto"):
        page = json.loads(browser.execute_script(SET_FIELDS, "forward", {
            "fwd-method": method, "fwd-concurrency": "2", "fwd-max-tokens": "100", "fwd-model": MODELS[0],
            "fwd-prompt-tokens": "100", "fwd-extrapolate": False}, {}))
        cli = cli_json("predict", source, "--concurrency", "2", "--max-tokens", 100, "--model", MODELS[0],
                       "--method", method, "--prompt-tokens", "100", "--json")
        assert page["method"] == cli["method_choice"]["method"], method
        assert page["tps"] is None and page["missing"], method
        _close(page, cli, f"forward {method} P=100")
        inverse = json.loads(browser.execute_script(SET_FIELDS, "inverse", {
            "inv-method": method, "inv-target": "50", "inv-prompt-tokens": "100", "inv-latency": "",
            "inv-ttft": "", "inv-max-concurrency": "", "inv-rate-limit": "", "inv-extrapolate": False,
            "inv-conservative": False, "inv-search": True}, {"inv-length": ["50", "100", "200"], "inv-model": list(MODELS)}))
        cli = cli_json("solve", source, "--target-tps", "50", "--method", method, "--prompt-tokens", "100", "--json")
        inverse.pop("notes")
        assert inverse["cheapest"] is None and cli["identified"] is False, method
        _close(inverse, cli, f"inverse {method} P=100")
    assert all(e["level"] not in ("SEVERE", "ERROR") for e in browser.get_log("browser"))


# ---------------------------------------------------------------------------
# Without a browser: the file itself
# ---------------------------------------------------------------------------

def test_report_escapes_text_and_embeds_the_calibration(tmp_path: Path) -> None:
    rows = replicated_factorial(seed=3, repeats=1, sigma=0.03, prefix="E")
    rows[0] = dataclasses.replace(rows[0], exp_id="</script><b>x", notes="=1+1")
    source = write_csv(tmp_path / "r.csv", rows)
    out = tmp_path / "r.html"
    invoke("report", source, "-o", out, "--lang", "en")
    html = out.read_text(encoding="utf-8")
    assert "</script><b>x" not in html and "&lt;/script&gt;&lt;b&gt;x" in html
    start = html.index('<script type="application/json" id="scm-calibration">') + len(
        '<script type="application/json" id="scm-calibration">')
    payload = json.loads(html[start:html.index("</script>", start)])
    from scm_xl.model import analyze
    from scm_xl.results import read_results

    assert payload["chain"]["base_tps"] == analyze(read_results(source).rows).calibration.base_tps


def test_report_bad_input_is_an_error_and_writes_nothing(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["report", str(tmp_path / "missing.csv"), "-o", str(tmp_path / "r.html")])
    assert result.exit_code == 2 and result.output.startswith("Error: ")
    good = write_csv(tmp_path / "r.csv", replicated_factorial(seed=3, repeats=1, sigma=0.03, prefix="E"))
    result = CliRunner().invoke(main, ["report", str(good), "-o", str(tmp_path / "no" / "r.html")])
    assert result.exit_code == 2 and "folder does not exist" in result.output
    assert not (tmp_path / "r.html").exists() and list(tmp_path.iterdir()) == [good]
    # The house's overwrite policy: an existing page is replaced only with --force; the name says HTML.
    page = tmp_path / "page.html"
    invoke("report", good, "-o", page)
    result = CliRunner().invoke(main, ["report", str(good), "-o", str(page)])
    assert result.exit_code == 2 and "already exists" in result.output
    invoke("report", good, "-o", page, "--force")
    result = CliRunner().invoke(main, ["report", str(good), "-o", str(tmp_path / "page.txt")])
    assert result.exit_code == 2 and ".html" in result.output


def test_write_report_takes_an_analysis_and_its_rows(tmp_path: Path) -> None:
    from scm_xl.htmlreport import write_report
    from scm_xl.model import analyze

    rows = replicated_factorial(seed=3, repeats=1, sigma=0.03, prefix="E")
    path = write_report(analyze(rows), tmp_path / "r.html", "zh", rows=rows)
    html = path.read_text(encoding="utf-8")
    assert html.startswith("<!DOCTYPE html>") and 'lang="zh-CN"' in html and "结论" in html


@pytest.mark.parametrize("repeats", [1, 13])
def test_every_chart_is_well_formed_svg_per_row_and_as_cell_medians(repeats: int) -> None:
    """Every chart draws its marks as well-formed inline SVG with no outside reference, per row
    and (beyond the point limit) as cell medians."""
    from scm_xl.htmlreport import charts
    from scm_xl.htmlreport.texts import PAGE
    from scm_xl.lsq import fit
    from scm_xl.model import analyze

    rows = [dataclasses.replace(r, latency_p95_s=1.0 + r.concurrency / 10, ttft_p95_s=0.1, gpu="a100-80gb",
                                model="qwen2.5-7b" if r.model == MODELS[0] else "llama-3.1-8b")
            for r in replicated_factorial(seed=4, repeats=repeats, sigma=0.03, prefix="V")]
    analysis = analyze(rows)
    drawn = charts.all_charts(analysis, fit(analysis.statuses, analysis.settings), rows, PAGE["zh"])
    svg = "{http://www.w3.org/2000/svg}"
    for chart in drawn:
        assert chart.markup and chart.markup.startswith('<div class="panels"><svg'), chart.key
        tree = chart_elements(chart.markup)
        panels = tree.findall(f"./div[@class='panels']/{svg}svg")
        assert len(panels) == chart.panels and all(p.get("viewBox") for p in panels), chart.key
        assert tree.findall(f".//{svg}g[@class='mark-symbol']/{svg}path"), chart.key
        assert "url(" not in chart.markup and "href" not in chart.markup, chart.key
    aggregated = len(rows) > charts.POINT_LIMIT
    assert (drawn[0].note is not None) == aggregated  # "N rows shown as M points"
    assert "屋顶线上限" in (drawn[3].markup or "")  # the catalog knows both: the ceiling is drawn


@pytest.mark.slow
def test_a_filled_workbook_is_a_source_too(tmp_path: Path) -> None:
    """The same page from the workbook `fill` wrote as from its results CSV (and `fill --html`'s entry point)."""
    from scm_xl.htmlreport import write_report
    from scm_xl.workbook.fill import fill

    rows = replicated_factorial(seed=3, repeats=1, sigma=0.03, prefix="E")
    csv = write_csv(tmp_path / "r.csv", rows)
    workbook = tmp_path / "r.xlsx"
    report = fill(csv, output=workbook, engine="ironcalc", lang="en")
    pages = {}
    for name, source in (("csv", csv), ("xlsx", workbook)):
        pages[name] = tmp_path / f"{name}.html"
        invoke("report", source, "-o", pages[name], "--lang", "en")

    def payload(page: Path) -> Any:
        html = page.read_text(encoding="utf-8")
        start = html.index('id="scm-calibration">') + len('id="scm-calibration">')
        return json.loads(html[start:html.index("</script>", start)])

    assert payload(pages["csv"]) == payload(pages["xlsx"])
    from_fill = write_report(report, tmp_path / "fill.html")  # as `fill --html` calls it
    assert payload(from_fill) == payload(pages["csv"])
    assert 'lang="en"' in from_fill.read_text(encoding="utf-8")  # the workbook's language


@pytest.mark.browser
@pytest.mark.slow
def test_compare_page_and_an_uncalibrated_report_work_offline(browser: Any, tmp_path: Path) -> None:
    baseline = write_csv(tmp_path / "a.csv", replicated_factorial(seed=1, repeats=2, sigma=0.03, prefix="A"))
    slower = [dataclasses.replace(r, total_time_s=round(r.total_time_s / 0.9, 6))
              for r in replicated_factorial(seed=2, repeats=2, sigma=0.03, prefix="B")]
    new = write_csv(tmp_path / "b.csv", slower)
    page = tmp_path / "compare.html"
    invoke("compare", baseline, new, "--html", page, "--lang", "zh")
    open_page(browser, page)
    assert requests_made(browser) == [page.resolve().as_uri()]
    assert [e for e in browser.get_log("browser") if e["level"] in ("SEVERE", "ERROR")] == []
    assert browser.find_element("id", "verdict").get_attribute("data-verdict") == "drift"
    marks = browser.execute_script(
        "return document.querySelectorAll('#chart-coefficients svg .mark-symbol path').length")
    assert marks > 0

    # Every row excluded: the page still opens cleanly and says there is nothing to compute from.
    failed = [dataclasses.replace(r, ok_requests=r.total_requests - 1, failed_requests=1)
              for r in replicated_factorial(seed=1, repeats=1, sigma=0.03, prefix="F")]
    report = tmp_path / "failed.html"
    invoke("report", write_csv(tmp_path / "failed.csv", failed), "-o", report, "--lang", "en")
    open_page(browser, report)
    assert [e for e in browser.get_log("browser") if e["level"] in ("SEVERE", "ERROR")] == []
    for form in ("forward", "inverse"):
        result = browser.find_element("id", f"{form}-result").get_attribute("data-result")
        assert json.loads(result) == {"error": "no_calibration"}
    assert browser.find_element("id", "verdict").get_attribute("data-verdict") == "insufficient"
