"""The CLI's tables (scm_xl.terminal.table) in terminal columns (issue 17, item 9): a CJK character
takes two columns, so Chinese headers and model names stay over their numbers; and at 80
columns (or a narrower terminal) no line is wider: the model column is shortened with an
ellipsis and the note goes under its row, instead of the terminal wrapping the row."""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import pytest

from scm_xl.model import analyze
from scm_xl.report import render_coefficients, render_consistency
from scm_xl.terminal import WIDTH, display_width, shorten, table
from data.gen import MODELS, experiment, true_tps
from support.text import cell_starts

ZH_MODEL = "通义千问/Qwen2.5-72B-Instruct-长上下文版"
NAMES = {MODELS[0]: ZH_MODEL, MODELS[1]: "meta-llama/Llama-3.1-8B-Instruct"}


def _separator(lines: list[str]) -> str:
    return next(line for line in lines if line and set(line) <= {"-", " "})


def test_display_width_counts_wide_characters_twice() -> None:
    assert display_width("model") == 5
    assert display_width("模型") == 4 and display_width("ＴＰＳ") == 6  # CJK and fullwidth
    assert display_width("é") == 1 and display_width("e\u0301") == 1  # a combining accent takes no column


def test_chinese_headers_and_model_names_stay_over_their_columns() -> None:
    headers = ["模型", "并发", "实测\ntok/s", "说明"]
    rows = [[ZH_MODEL, "1", "85.16", "识别 BaseTPS"],
            ["meta-llama/Llama-3.1-8B-Instruct", "16", "1234.50", "检验行"],
            ["千问", "128", "9.00", "剔除：单调性"]]
    lines = table(headers, rows).splitlines()
    separator = _separator(lines)
    columns = cell_starts(separator)
    assert len(columns) == len(headers)
    body = lines[lines.index(separator) + 1:]
    for line in [lines[0], *body]:
        assert cell_starts(line) == columns, line
        assert display_width(line) <= display_width(separator), line
    # Every line padded to its last column is as wide as the header line padded the same way.
    widest = display_width(separator)
    assert all(display_width(line.ljust(len(line) + widest - display_width(line))) == widest for line in body)


def _rows() -> list[Any]:
    rows: list[Any] = []
    for model in MODELS:
        for c in (1, 2, 4, 8):
            for length in (50, 100, 200):
                rows.append(experiment(f"E{len(rows) + 1:03d}", NAMES[model], c, length, true_tps(c, length, model),
                                       prompt_level=32))
    for c in (1, 2, 4, 8):  # a long prompt for one model: the table has its prompt column
        rows.append(experiment(f"E{len(rows) + 1:03d}", ZH_MODEL, c, 50, true_tps(c, 50, MODELS[0]) * 0.6,
                               prompt_level=1024))
    return rows


def test_the_experiment_table_fits_80_columns_with_the_model_shortened() -> None:
    text = render_consistency(analyze(_rows()))
    lines = text.split("\n\n")[0].splitlines()
    assert max(display_width(line) for line in lines) <= WIDTH, max(lines, key=display_width)
    separator = _separator(lines)
    columns = cell_starts(separator)
    rows = [line for line in lines if re.match(r"E\d{3} ", line)]
    assert len(rows) == 28  # every experiment on a line of its own: nothing wrapped by the terminal
    for line in rows:
        assert cell_starts(line)[:len(columns)] == columns, line
    models = {line[columns[4]:].split("  ")[0] for line in rows}  # exp_id, c, max tokens, prompt, model
    assert all("…" in m for m in models) and len(models) == 2, models  # shortened, still two names
    notes = [line for line in lines if line.startswith("    ")]
    assert notes and all(display_width(n) <= WIDTH for n in notes)


def test_the_coefficient_table_fits_80_columns() -> None:
    lines = render_coefficients(analyze(_rows())).splitlines()
    assert max(display_width(line) for line in lines) <= WIDTH, max(lines, key=display_width)
    columns = cell_starts(_separator(lines))
    for line in lines:
        if line.startswith(("BaseTPS", "f(", "K_len(", "K_in(", "C_model(")):
            assert cell_starts(line)[:2] == columns[:2], line


def test_a_narrower_terminal_gets_a_narrower_table(monkeypatch: pytest.MonkeyPatch) -> None:
    analysis = analyze(_rows())
    # the experiment table's eight number and word columns and a model shortened to 12 take 78
    for columns, text in ((78, lambda: render_consistency(analysis).split("\n\n")[0]),
                          (60, lambda: render_coefficients(analysis))):
        monkeypatch.setenv("COLUMNS", str(columns))
        assert max(display_width(line) for line in text().splitlines()) <= columns, columns
    monkeypatch.setenv("COLUMNS", "200")  # a wider one: the 80 columns tests and logs see
    assert max(display_width(line) for line in render_coefficients(analysis).splitlines()) <= WIDTH


def test_shorten_keeps_the_family_and_size_of_a_model() -> None:
    assert shorten("Qwen/Qwen2.5-7B-Instruct", 30) == "Qwen/Qwen2.5-7B-Instruct"
    assert shorten("Qwen/Qwen2.5-7B-Instruct", 21) == "…/Qwen2.5-7B-Instruct"
    assert shorten("Qwen/Qwen2.5-7B-Instruct", 14) == "Qwen2.5-7B-In…"
    for width in range(2, 40):
        short = shorten(ZH_MODEL, width)
        assert display_width(short) <= width and (short == ZH_MODEL or "…" in short), (width, short)


def test_a_long_rows_table_prints_the_rows_that_need_a_look_and_says_how_many_it_left_out() -> None:
    from data.gen import full_factorial

    from scm_xl.report import MAX_PRINTED_ROWS, WORST_CHECK_ROWS

    rows = full_factorial(replicates=False, seed=7, sigma=0.05)
    rows = rows * (MAX_PRINTED_ROWS // len(rows) + 2)
    excluded = (5, len(rows) - 3)
    rows = [dataclasses.replace(r, exp_id=f"R{i:03d}", override="exclude" if i in excluded else r.override)
            for i, r in enumerate(rows)]
    analysis = analyze(rows)
    assert len(analysis.checks) > MAX_PRINTED_ROWS
    printed = {line.split()[0] for line in render_consistency(analysis).splitlines() if re.match(r"R\d{3} ", line)}
    worst = sorted((ch for ch in analysis.checks if ch.role == "check"), key=lambda ch: -abs(ch.deviation_pct))
    assert {f"R{i:03d}" for i in excluded} <= printed  # every excluded row
    assert {ch.status.exp_id for ch in worst[:WORST_CHECK_ROWS]} <= printed  # the check rows furthest off
    assert len(printed) == 2 + WORST_CHECK_ROWS
    text = " ".join(render_consistency(analysis).split())
    assert f"{len(printed)} of {len(analysis.checks)} rows shown" in text
    # a table that fits is printed whole, with no such line
    short = analyze(rows[:MAX_PRINTED_ROWS])
    assert "rows shown" not in render_consistency(short)
    assert sum(bool(re.match(r"R\d{3} ", line)) for line in render_consistency(short).splitlines()) == MAX_PRINTED_ROWS
