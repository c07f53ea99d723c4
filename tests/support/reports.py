"""Reports and verifications the tests share."""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from data.gen import MODELS, replicated_factorial
from scm_xl.cli import main


def report_pages(source: Path, folder: Path) -> dict[str, Path]:
    """`scm-xl report SOURCE` in each language, into `folder`: lang -> page."""
    out = {}
    for lang in ("en", "zh"):
        out[lang] = folder / f"report_{lang}.html"
        result = CliRunner().invoke(main, ["report", str(source), "-o", str(out[lang]), "--lang", lang])
        assert result.exit_code == 0, result.output
    return out


def one_wrong_cell(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every fill's verification finds one cell the engine got wrong (as 1e308 in total_time_s did on
    IronCalc), whatever the engines and the reference do about it."""
    from scm_xl.verify import Mismatch
    from scm_xl.workbook import fill as filling

    compare = filling.compare

    def one_wrong(*args: object, **kwargs: object) -> object:
        verification = compare(*args, **kwargs)  # type: ignore[arg-type]
        verification.mismatches.append(Mismatch("Summary", "B2", 1.0, 2.0))
        return verification

    monkeypatch.setattr(filling, "compare", one_wrong)


def calculator_rows() -> list[Any]:
    """Two models, four concurrency levels, three lengths, two repeats, with measured P95 latency
    and TTFT (except one cell) and HTTP 429s at one level (tests/test_report_html.py and
    tests/test_report_speed_and_texts.py build their report pages on it)."""
    rng = random.Random(11)
    rows = []
    for row in replicated_factorial(seed=5, repeats=2, sigma=0.04, prefix="R"):
        per_stream = row.total_output_tokens / row.total_time_s / row.concurrency
        latency = row.max_tokens / per_stream * (1 + 0.1 * rng.random())
        ttft = 0.05 * row.concurrency ** 0.5 * (1 + 0.1 * rng.random())
        if (row.concurrency, row.max_tokens) == (4, 200):
            latency = ttft = None  # a measured cell without percentiles
        rows.append(dataclasses.replace(row, latency_p95_s=latency, ttft_p95_s=ttft))
    # The provider answered 429 at concurrency 8 for the second model once.
    i = next(i for i, r in enumerate(rows) if r.model == MODELS[1] and r.concurrency == 8)
    rows[i] = dataclasses.replace(rows[i], ok_requests=rows[i].total_requests - 2, rate_limited_requests=2)
    return rows


def chart_elements(markup: str) -> Any:
    """A chart's markup (panels of SVG, the legend's HTML) as an XML tree: it must be well formed."""
    import xml.etree.ElementTree as ET

    return ET.fromstring(f"<div>{markup}</div>")
