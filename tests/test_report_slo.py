"""`scm-xl report --slo`: the section "Under an SLO" from the per-request CSV beside the results CSV
(a real run on the simulator on 127.0.0.1), its fallback lines, and the page's replicas-and-cost
calculator against `scm-xl solve --slo --json` in headless Chromium with the network blocked."""

from __future__ import annotations

import csv
import html
import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from scm_xl import goodput
from scm_xl.cli import main
from support.browser import SET_SLO, browser, open_page, requests_made  # noqa: F401  (browser: the fixture)
from support.slo import collect_fixed_delays

SLO_TEXT, ATTAINMENT = "ttft=0.5,e2el=0.03", 0.4  # 3 tokens take ~18 ms (good), 12 tokens ~54 ms (a miss)
REL = 1e-9


def run(*args: object, codes: tuple[int, ...] = (0,)) -> str:
    result = CliRunner().invoke(main, [str(a) for a in args])
    assert result.exit_code in codes, result.output
    return result.output


@pytest.fixture(scope="module")
def collected(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The simulator with fixed delays (first token 10 ms, then 4 ms a token), its results CSV and
    the per-request CSV beside it."""
    return collect_fixed_delays(tmp_path_factory.mktemp("report-slo"))


def _payload(page: Path) -> dict[str, Any]:
    text = page.read_text(encoding="utf-8")
    found = re.search(r'<script type="application/json" id="scm-calibration">(.*?)</script>', text, re.S)
    assert found
    return json.loads(found.group(1))


def _section(page: Path) -> str:
    text = page.read_text(encoding="utf-8")
    start = text.index('<section id="slo"')
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", text[start:text.index("</section>", start)])))


def _hand_count(results: Path) -> dict[tuple[int, int], tuple[int, int]]:
    """(concurrency, max_tokens) -> (measured requests, good ones), from the two CSVs' cells."""
    with open(results, encoding="utf-8", newline="") as handle:
        cell_of = {r["exp_id"]: (int(r["concurrency"]), int(r["max_tokens"])) for r in csv.DictReader(handle)}
    counts: dict[tuple[int, int], list[int]] = {}
    with open(goodput.requests_path_for(results), encoding="utf-8", newline="") as handle:
        for r in csv.DictReader(handle):
            if r["warmup"] == "true":
                continue
            tally = counts.setdefault(cell_of[r["exp_id"]], [0, 0])
            tally[0] += 1
            good = (r["status"] == "ok" and r["ttft_s"] != "" and float(r["ttft_s"]) <= 0.5
                    and r["latency_s"] != "" and float(r["latency_s"]) <= 0.03)
            tally[1] += good
    return {key: (n, good) for key, (n, good) in counts.items()}


def test_the_section_shows_each_configurations_attainment_and_the_solve_answer(collected: Path,
                                                                                tmp_path: Path) -> None:
    page = tmp_path / "page.html"
    run("report", collected, "-o", page, "--lang", "en", "--slo", SLO_TEXT, "--attainment", ATTAINMENT)
    cells = _payload(page)["slo"]["cells"]
    hand = _hand_count(collected)
    assert {(c["concurrency"], c["max_tokens"]): (c["requests"], c["good"]) for c in cells} == hand
    assert any(good == 0 for _, good in hand.values()) and any(n == good for n, good in hand.values())
    section = _section(page)
    for c in cells:
        low, high = goodput.wilson_interval(c["good"], c["requests"])
        assert c["interval"] == pytest.approx([low, high], rel=REL)
        assert f"{c['good'] / c['requests']:.1%}" in section
        assert f"{low:.1%} – {high:.1%}" in section
    # the answer is `solve --slo`'s, line for line, at the page's target
    target = _payload(page)["slo"]["target"]
    solve = run("solve", collected, "--slo", SLO_TEXT, "--attainment", ATTAINMENT, "--target-tps", target)
    first = re.sub(r"\s+", " ", solve.splitlines()[0] + " " + solve.splitlines()[1])
    assert re.sub(r"\s+", " ", first).split(" (")[0] in section
    assert "What binds:" in section and "server-bound" in section


def test_without_a_requests_csv_one_line_says_so(collected: Path, tmp_path: Path) -> None:
    alone = tmp_path / "results.csv"
    shutil.copy(collected, alone)
    page = tmp_path / "page.html"
    run("report", alone, "-o", page, "--lang", "en", "--slo", SLO_TEXT)
    section = _section(page)
    assert "No per-request records" in section and "per-experiment P95s" in section
    assert str(goodput.requests_path_for(alone)) in section
    assert _payload(page)["slo"] is None


def test_without_an_slo_the_section_says_none_was_given(collected: Path, tmp_path: Path) -> None:
    page = tmp_path / "page.html"
    run("report", collected, "-o", page, "--lang", "en")
    assert "No SLO was given" in _section(page)
    zh = tmp_path / "zh.html"
    run("report", collected, "-o", zh, "--lang", "zh", "--slo", SLO_TEXT, "--attainment", ATTAINMENT)
    assert "达标率" in _section(zh)


def test_a_bad_slo_is_refused_and_writes_nothing(collected: Path, tmp_path: Path) -> None:
    page = tmp_path / "page.html"
    result = CliRunner().invoke(main, ["report", str(collected), "-o", str(page), "--slo", "ttft=fast"])
    assert result.exit_code == 2 and "ttft=fast" in result.output and "Traceback" not in result.output
    assert not page.exists()


# ---------------------------------------------------------------------------
# The calculator in the browser
# ---------------------------------------------------------------------------

PRICES = [
    {"slo-price-in": "0.5", "slo-price-out": "2"},
    {"slo-gpu-hour-price": "2.5", "slo-gpus": "2"},
    {"slo-gpu-hour-price": "2.5", "slo-gpus": "2", "slo-minimise": "cost"},
    {"slo-price-in": "0.5", "slo-price-out": "2", "slo-rpm": "5000"},
]
OPTION = {"slo-price-in": "--price-in", "slo-price-out": "--price-out", "slo-gpu-hour-price": "--gpu-hour-price",
          "slo-gpus": "--gpus", "slo-rpm": "--rpm", "slo-tpm": "--tpm", "slo-minimise": "--minimise"}


@pytest.mark.browser
@pytest.mark.slow
def test_the_pages_replicas_and_cost_equal_solve_json(browser: Any, collected: Path, tmp_path: Path) -> None:
    page = tmp_path / "page.html"
    run("report", collected, "-o", page, "--lang", "en", "--slo", SLO_TEXT, "--attainment", ATTAINMENT)
    open_page(browser, page)
    assert browser.execute_script("return document.readyState") == "complete"
    assert not [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    best = max(c["tps"] for c in _payload(page)["slo"]["cells"] if c["meets"])
    blank = {key: "" for key in OPTION if key != "slo-minimise"} | {"slo-minimise": "concurrency"}
    verdicts = []
    for target in (best * 0.9, best * 2.5):
        for prices in PRICES:
            fields = blank | prices | {"slo-target": repr(target)}
            shown = json.loads(browser.execute_script(SET_SLO, fields, "slo-result")[0])
            args = [a for key, value in prices.items() for a in (OPTION[key], value)]
            answer = json.loads(run("solve", collected, "--slo", SLO_TEXT, "--attainment", ATTAINMENT,
                                    "--target-tps", repr(target), "--json", *args, codes=(0, 1)))
            chosen = answer["capacity"]["chosen"]
            assert shown["bound"] == answer["capacity"]["bound"], (prices, target)
            assert shown["binding"] == answer["capacity"]["binding"], (prices, target)
            verdicts.append(answer["capacity"]["bound"])
            if chosen is None:  # a rate limit rules every option out: the page says none too
                assert shown["chosen"] is None
                continue
            assert shown["chosen"] is not None
            for key in ("model", "concurrency", "max_tokens", "replicas"):
                assert shown["chosen"][key] == chosen[key], (key, prices, target)
            for key in ("attainment", "capacity_tps", "cost_per_million_output", "cost_per_hour", "rpm", "tpm"):
                assert shown["chosen"][key] == pytest.approx(chosen[key], rel=REL), (key, prices, target)
            assert shown["chosen"]["attainment_interval"] == pytest.approx(chosen["attainment_interval"], rel=REL)
    assert {"server-bound", "limit-bound"} <= set(verdicts)
    scaled = json.loads(browser.execute_script(SET_SLO, blank | PRICES[0] | {"slo-target": repr(best * 2.5)},
                                               "slo-result")[0])
    assert scaled["chosen"]["replicas"] > 1
    # the forward answer at a measured configuration shows its attainment
    cell = next(c for c in _payload(page)["slo"]["cells"] if c["meets"])
    browser.execute_script(SET_SLO, {"fwd-method": "chain", "fwd-concurrency": str(cell["concurrency"]),
                                     "fwd-max-tokens": str(cell["max_tokens"])}, "forward-result")
    here = browser.find_element("css selector", "#forward-result .slo-here")
    assert float(here.get_attribute("data-attainment")) == pytest.approx(cell["attainment"], rel=REL)
    assert not [u for u in requests_made(browser) if not u.startswith("file:")]


def test_predict_says_where_its_attainment_was_measured(collected: Path, tmp_path: Path) -> None:
    hand = _hand_count(collected)
    (c, length), (n, good) = next(iter(sorted(hand.items())))
    data = json.loads(run("predict", collected, "--concurrency", c, "--max-tokens", length, "--slo", SLO_TEXT,
                          "--attainment", ATTAINMENT, "--json"))["slo"]
    assert data["predicted"] is False and data["source"] == "requests"
    assert (data["requests"], data["good"]) == (n, good)
    assert data["text"].startswith("measured here: ")
    alone = tmp_path / "results.csv"
    shutil.copy(collected, alone)
    fallback = json.loads(run("predict", alone, "--concurrency", c, "--max-tokens", length, "--slo", SLO_TEXT,
                              "--json"))["slo"]
    assert fallback["source"] == "per_experiment_p95" and "fallback" in fallback["text"]
    assert "not a per-request attainment" in fallback["text"]
