"""Latency in the workbook: the raw-data sheet carries the percentiles, and the inverse on the
derivation sheet takes a P95-latency limit, agreeing with `scm-xl solve --max-latency-p95`."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner
from data.gen import full_factorial

from scm_xl.cli import main
from scm_xl.results import write_results
from scm_xl.workbook import summary_sheet
from scm_xl.workbook.fill import fill, verify
from scm_xl.workbook.layout import Layout
from support import books
from support.engines import computed

LAYOUT = Layout(lang="en")


def with_latency(rows):  # type: ignore[no-untyped-def]
    """P95 latency grows with concurrency and length; one fault-free replicate differs, so the
    workbook has to take the median as solve does."""
    out = []
    for row in rows:
        latency = 0.02 * row.max_tokens * (1 + 0.4 * row.concurrency) + (0.3 if row.repeat == 2 else 0.0)
        out.append(replace(row, latency_p95_s=round(latency, 4), ttft_p95_s=round(0.05 * row.concurrency, 4)))
    return out


@pytest.fixture(scope="module")
def csv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("latency") / "latency.csv"
    write_results(path, with_latency(full_factorial(seed=5)))
    return path


@pytest.fixture(scope="module")
def filled(csv: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`csv` filled once (IronCalc, English); each test works on a copy of its own."""
    out = tmp_path_factory.mktemp("latency-filled") / "latency.xlsx"
    fill(csv, output=out, engine="ironcalc", lang="en")
    return out


def _solve(csv: Path, target: float, limit: float | None) -> dict:
    args = ["solve", str(csv), "--target-tps", str(target), "--max-tokens", "50", "--model", "model-a", "--json"]
    if limit is not None:
        args += ["--max-latency-p95", str(limit)]
    result = CliRunner().invoke(main, args)
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.output)


@pytest.mark.parametrize("limit", [None, 2.0, 3.5, 0.5])
def test_the_inverse_with_a_latency_limit_matches_solve(csv: Path, filled: Path, limit: float | None,
                                                       tmp_path: Path) -> None:
    target = 60.0
    out = tmp_path / "latency.xlsx"
    inv = LAYOUT.inverse_rows
    books.retyped(filled, out, LAYOUT.title("summary"), {  # the inputs are typed on the Summary
        summary_sheet.INPUTS["inverse.target_tps"]: target,
        summary_sheet.INPUTS["inverse.max_tokens"]: 50,
        summary_sheet.INPUTS["inverse.model"]: "model-a",
        summary_sheet.INPUTS["inverse.max_latency"]: limit})
    report = verify(out, engine="ironcalc")
    assert report.verification.ok
    values = computed(report)  # IronCalc's values of every formula cell, from verify's recalculation
    title = LAYOUT.title("derivation")
    recommended = values.get(title, f"B{inv['concurrency']}")
    answer = _solve(csv, target, limit)
    if answer.get("concurrency") is None:
        assert recommended == "unreachable"
    else:
        assert recommended == answer["concurrency"]
        assert values.get(title, f"B{inv['tps']}") == pytest.approx(answer["tps"], rel=1e-9)


def test_the_raw_data_sheet_carries_the_percentiles(filled: Path) -> None:
    raw = books.sheet(filled, LAYOUT.title("raw"), formulas=True)
    assert raw[f"{LAYOUT.entry_col('latency_p95_s')}1"].value == "latency_p95_s"
    assert isinstance(raw[f"{LAYOUT.entry_col('latency_p95_s')}2"].value, float)
    assert isinstance(raw[f"{LAYOUT.entry_col('ttft_p95_s')}2"].value, float)
    summary = books.worksheet(filled, LAYOUT.title("summary"))
    assert len(summary._charts) == 4  # TPS, measured vs predicted, P95 latency, P95 TTFT


# ---------------------------------------------------------------------------
# Too few rows for the latency model: the sheet is unsolved, as latency.fit_model fits nothing
# ---------------------------------------------------------------------------

HEADER = ("exp_id,model,concurrency,requests_per_slot,total_requests,max_tokens,total_time_s,total_output_tokens,"
          "latency_p50_s,ttft_p50_s,mean_itl_s,prompt_level")
# What a one-experiment `collect --shard` writes: one row, its latency columns recorded.
ONE_ROW = f"{HEADER}\nE01,m,1,10,10,50,5.0,500,0.5,0.05,0.009,\n"


def _row(i: int, c: int, *, latency: bool = True, prompt: int | None = None, model: str = "m") -> str:
    """One experiment of 10 requests per slot, max_tokens 50: ITL and TTFT grow with c and the prompt."""
    itl = 0.009 * (1 + 0.2 * (c - 1)) * (1 + (prompt or 0) / 2000)
    ttft = 0.05 * (1 + 0.1 * c) * (1 + (prompt or 0) / 500)
    mean = ttft + 49 * itl
    times = f"{mean:.5f},{ttft:.5f},{itl:.6f}" if latency else ",,"
    return f"E{i:02d},{model},{c},10,{10 * c},50,{10 * mean:.4f},{500 * c},{times},{'' if prompt is None else prompt}"


def _csv(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / f"{name}.csv"
    path.write_text(text, encoding="utf-8")
    return path


def _latency_sheet(path: Path):  # type: ignore[no-untyped-def]
    from scm_xl.workbook.latency_sheet import LatencyLayout

    ll = LatencyLayout(books.layout(path))
    return ll, books.sheet(path, ll.title)


def _assert_unsolved(path: Path) -> None:
    """The latency sheet says "no fit": both fits unsolved, no coefficient, no forecast."""
    from scm_xl.workbook.latency_sheet import SUMMARY_ROWS

    ll, ws = _latency_sheet(path)
    assert ws[f"B{SUMMARY_ROWS['itl_ok']}"].value == 0
    assert ws[f"B{SUMMARY_ROWS['ttft_ok']}"].value == 0
    assert [ws[f"B{row}"].value for row in ll.coef_rows.values()] == [None] * len(ll.coef_rows)
    assert ws[f"B{ll.forward_rows['tps']}"].value is None
    assert ws[f"B{ll.forward_rows['ttft']}"].value is None


@pytest.mark.parametrize("engine", ["ironcalc", pytest.param("libreoffice", marks=pytest.mark.libreoffice)])
def test_a_one_row_results_csv_with_latency_verifies(tmp_path: Path, engine: str) -> None:
    """One experiment identifies no latency model (latency.fit_model needs MIN_ROWS rows): the
    sheet leaves it unsolved as the reference does, so fill verifies and writes the workbook."""
    from scm_xl import latency
    from scm_xl.results import read_results
    from scm_xl.workbook.latency_sheet import SUMMARY_ROWS

    csv = _csv(tmp_path, "one", ONE_ROW)
    out = tmp_path / "one.xlsx"
    result = CliRunner().invoke(main, ["fill", str(csv), "-o", str(out), "--engine", engine, "--lang", "en"])
    assert result.exit_code == 0, result.output
    assert "verified:" in result.output and "MISMATCH" not in result.output
    assert out.exists() and not (tmp_path / "one.failed.xlsx").exists()
    assert latency.MIN_ROWS > 1 and not latency.latency_model(read_results(csv).rows).available
    _assert_unsolved(out)
    _, ws = _latency_sheet(out)
    assert ws[f"B{SUMMARY_ROWS['used']}"].value == 1  # the row is read, just not enough for a fit


CASES = {
    "one row, a prompt level": [_row(1, 1, prompt=512)],
    "one row at concurrency 4": [_row(1, 4)],
    "two rows": [_row(1, 1), _row(2, 2)],
    "two rows, two prompt levels (too few for the terms they vary)": [_row(1, 1, prompt=32), _row(2, 2, prompt=512)],
    "two rows at one concurrency, two prompt levels": [_row(1, 1, prompt=32), _row(2, 1, prompt=512)],
    "three rows": [_row(1, 1), _row(2, 2), _row(3, 4)],
    "three rows, one with latency": [_row(1, 1, latency=False), _row(2, 2), _row(3, 4, latency=False)],
    "three rows, two with latency": [_row(1, 1), _row(2, 2, latency=False), _row(3, 4)],
    "two prompt levels, one with latency": [_row(1, 1, prompt=32), _row(2, 1, prompt=512, latency=False)],
    "one row per model": [_row(1, 1), _row(2, 1, model="x")],
    "base model one latency row, another two": [_row(1, 1), _row(2, 2, latency=False), _row(3, 1, model="x"),
                                                 _row(4, 2, model="x")],
}
UNSOLVED = {"one row, a prompt level", "one row at concurrency 4",
            "two rows, two prompt levels (too few for the terms they vary)", "three rows, one with latency",
            "two prompt levels, one with latency", "one row per model", "base model one latency row, another two"}


@pytest.mark.parametrize("case", list(CASES))
def test_few_latency_rows_verify(case: str, tmp_path: Path) -> None:
    from scm_xl.latency import latency_model
    from scm_xl.results import read_results

    csv = _csv(tmp_path, "few", "\n".join([HEADER, *CASES[case]]) + "\n")
    out = tmp_path / "few.xlsx"
    report = fill(csv, output=out, engine="ironcalc", lang="en")
    assert report.verification.ok, [str(m) for m in report.verification.mismatches[:5]]
    fitted = latency_model(read_results(csv).rows).fit_for("m") is not None
    assert fitted == (case not in UNSOLVED)
    if not fitted:
        _assert_unsolved(out)


def test_a_typed_knee_that_leaves_too_few_ttft_rows_verifies(tmp_path: Path) -> None:
    """A knee typed below most rows: its TTFT fit has one row for two terms, so fit_model fits
    nothing, and the sheet solves neither block (its ITL one alone could be)."""
    from scm_xl.workbook.latency_sheet import SETTING_ROWS

    csv = _csv(tmp_path, "knee", "\n".join([HEADER, _row(1, 1), _row(2, 4), _row(3, 8)]) + "\n")
    filled = tmp_path / "knee.xlsx"
    assert fill(csv, output=filled, engine="ironcalc", lang="en").verification.ok
    ll, _ = _latency_sheet(filled)
    books.retyped(filled, filled, ll.title, {f"B{SETTING_ROWS['knee']}": 2})
    out = tmp_path / "typed.xlsx"
    report = fill(None, workbook=filled, output=out, engine="ironcalc")
    assert report.verification.ok, [str(m) for m in report.verification.mismatches[:5]]
    _assert_unsolved(out)


def test_a_row_with_an_itl_of_zero_is_left_out_of_the_latency_fit(tmp_path: Path) -> None:
    """A server that streams every token in one chunk records a mean ITL of 0: the latency model
    (which divides by it) leaves that row out, on the sheet as in Python, instead of dividing by zero."""
    import warnings

    from scm_xl import latency
    from scm_xl.results import read_results

    rows = [_row(1, 1), _row(2, 2).replace(",0.010800,", ",0,"), _row(3, 4)]
    assert ",0," in rows[1]
    csv = _csv(tmp_path, "itl0", HEADER + "\n" + "\n".join(rows) + "\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy's divide-by-zero warning fails the test
        model = latency.latency_model(read_results(csv).rows)
        result = CliRunner().invoke(main, ["fill", str(csv), "-o", str(tmp_path / "itl0.xlsx"), "--lang", "en"])
    assert result.exit_code == 0, result.output
    assert "verified:" in result.output and "MISMATCH" not in result.output
    assert any(reason.startswith("E02:") for reason in model.skipped)
    _, ws = _latency_sheet(tmp_path / "itl0.xlsx")
    from scm_xl.workbook.latency_sheet import SUMMARY_ROWS

    assert ws[f"B{SUMMARY_ROWS['used']}"].value == 2
