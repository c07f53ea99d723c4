"""The prompt-length factor K_in(P) in the chain, in least squares and live in the workbook.

    TPS = BaseTPS x f(c) x K_len(L) x K_in(P) / C_model(m)

By hand on a small CSV (the K_in value, its anchor, the roles, the monotonic filter within a
prompt level, interpolation between levels); least squares' K_in dummies and its concurrency x
prompt interaction in words on simulator data with a slot limit; the simulator CSV filled and
verified cell by cell on IronCalc and LibreOffice; a row at a new prompt level typed in
LibreOffice; and the article's coefficients, exactly as before.

tests/data/sim_prompt_levels.csv was measured on the built-in simulator (a recording, so the
interaction the tests read is the same on every run):

    SimConfig(model_name="sim", max_seqs=4, step_per_ctx_token_s=2e-6, prefill_s_per_token=2e-5, seed=1)
    CollectConfig(models=("sim",), concurrency=(1, 2, 4, 8), max_tokens=(16, 32),
                  prompt_tokens=(32, 256, 640), requests_per_slot=3, ignore_eos=True)
"""

from __future__ import annotations

import json
import math
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from data.gen import experiment
from scm_xl import lsq
from scm_xl.cli import main
from scm_xl.model import Settings, analyze, calibrate, check_rows, predict, solve
from scm_xl.results import read_results, write_results
from scm_xl.workbook.fill import fill, verify
from scm_xl.workbook.layout import CONSISTENCY_COLUMNS, PROMPT_TABLE, Layout
from support import books, engines
from support.paths import ARTICLE, UNO_PYTHON

SIM_CSV = Path(__file__).with_name("data") / "sim_prompt_levels.csv"


def hand_rows() -> list:
    """Base prompt level 100 (the smallest; E02's blank level counts as it), levels 400 and 1600."""
    return [
        experiment("E01", "m", 1, 50, 100.0, prompt_level=100),  # BaseTPS
        experiment("E02", "m", 2, 50, 180.0),  # f(2) = 1.8, a blank level: the base level
        experiment("E03", "m", 4, 50, 300.0, prompt_level=100),  # f(4) = 3
        experiment("E04", "m", 2, 50, 144.0, prompt_level=400),  # K_in(400) = 144 / (100 x 1.8), anchor 2
        experiment("E05", "m", 4, 50, 240.0, prompt_level=400),  # check: 100 x 3 x 0.8 = 240
        experiment("E06", "m", 1, 50, 50.0, prompt_level=1600),  # K_in(1600) = 0.5, anchor 1
        experiment("E07", "m", 4, 50, 120.0, prompt_level=1600),  # check: predicted 150
        experiment("E08", "m", 8, 50, 150.0, prompt_level=1600),  # below E03's 300 at c=4, but another level
        experiment("E09", "m", 1, 100, 60.0, prompt_level=100),  # K_len(100) = 0.6
        experiment("E10", "m", 1, 100, 50.0, prompt_level=400),  # check: 100 x 0.6 x 0.8 = 48
        experiment("E11", "m", 2, 50, 100.0, prompt_level=1600),  # c=2 at 1600, above E06's 50
        experiment("E12", "m", 4, 50, 110.0, prompt_level=400),  # below E04's 144 at c=2, the same level
    ]


def by_id(analysis) -> dict:
    return {check.status.exp_id: check for check in analysis.checks}


# ---------------------------------------------------------------------------
# The chain, by hand
# ---------------------------------------------------------------------------


def test_chain_coefficients_by_hand() -> None:
    analysis = analyze(hand_rows()[:11])
    cal = analysis.calibration
    assert cal.base_prompt_level == 100 and analysis.base_prompt_level == 100
    assert (cal.base_model, cal.base_max_tokens, cal.base_concurrency) == ("m", 50, 1)
    assert cal.base_tps == pytest.approx(100.0)
    assert cal.f(2) == pytest.approx(1.8) and cal.f(4) == pytest.approx(3.0)
    assert cal.k_len(100) == pytest.approx(0.6)
    levels = {level.prompt_level: level for level in cal.prompt_levels}
    assert list(levels) == [100, 400, 1600]
    assert levels[100].k_in == pytest.approx(1.0) and levels[100].anchor_concurrency == 1
    assert levels[400].k_in == pytest.approx(0.8) and levels[400].anchor_concurrency == 2  # no c=1 row at 400
    assert levels[400].rows == 1
    assert levels[1600].k_in == pytest.approx(0.5) and levels[1600].anchor_concurrency == 1
    checks = by_id(analysis)
    assert checks["E01"].identifies == ("BaseTPS",)
    assert checks["E02"].identifies == ("f(2)",) and checks["E02"].status.prompt_level == 100
    assert checks["E04"].identifies == ("K_in(400)",)
    assert checks["E06"].identifies == ("K_in(1600)",)
    assert checks["E09"].identifies == ("K_len(100)",)
    # away from the base level a row identifies K_in only: E11 (c=2 at 1600) tests f(2) and K_in(1600)
    assert checks["E11"].role == "check" and checks["E11"].predicted_tps == pytest.approx(90.0)
    assert checks["E05"].role == "check" and checks["E05"].predicted_tps == pytest.approx(240.0)
    assert checks["E07"].role == "check" and checks["E07"].deviation_pct == pytest.approx(-25.0)
    assert checks["E10"].role == "check" and checks["E10"].predicted_tps == pytest.approx(48.0)
    assert checks["E10"].k_in == pytest.approx(0.8)
    # the monotonic filter compares within a prompt level: E08 (150 at c=8, level 1600) is below
    # E03's 300 at c=4 (level 100) and still included (f(8) is not identified at the base level)
    assert checks["E08"].status.included and checks["E08"].missing == ("f(8)",)
    assert analysis.consistency.identify_rows == 6


def test_monotonic_filter_within_a_prompt_level() -> None:
    rows = hand_rows()
    checks = by_id(analyze(rows))
    assert checks["E12"].status.reason_code == "mono"  # 110 at c=4 below E04's 144 at c=2, both at level 400
    assert checks["E12"].status.faster_lower_tps == pytest.approx(144.0)


def test_no_prompt_levels_is_the_chain_of_before() -> None:
    rows = [experiment(r.exp_id, r.model, r.concurrency, r.max_tokens, r.tps) for r in hand_rows()[:3]]
    cal = analyze(rows).calibration
    assert cal.base_prompt_level is None and cal.prompt_levels == []
    assert predict(cal, 2, 50).tps == pytest.approx(180.0)
    assert predict(cal, 2, 50, prompt_tokens=300).missing == ("K_in(300)",)


def test_a_hand_set_base_prompt_level() -> None:
    analysis = analyze(hand_rows()[:11], Settings(base_prompt_level=400))
    cal = analysis.calibration
    # E02's blank level is 400 now: the base point (c=2 at 50 tokens) is E02 and E04, their geometric mean
    assert by_id(analysis)["E02"].status.prompt_level == 400
    assert cal.base_prompt_level == 400 and cal.base_concurrency == 2
    assert cal.base_tps == pytest.approx(math.sqrt(180.0 * 144.0))
    assert cal.k_in(400) == pytest.approx(1.0)
    # at 100 the lowest concurrency with a known f is 4 (f(1) is not measured at 400): 300 / (BaseTPS f(4))
    assert cal.prompt_anchor(100) == 4 and cal.k_in(100) == pytest.approx(300.0 / 240.0)


def test_predict_interpolates_k_in_between_levels_in_log_log() -> None:
    cal = analyze(hand_rows()[:11]).calibration
    at_200 = 0.8 ** 0.5  # ln K_in linear in ln P: halfway from 100 to 400 in ln P
    assert cal.k_in_at(200) == pytest.approx(at_200)
    assert predict(cal, 4, 50, prompt_tokens=200).tps == pytest.approx(300.0 * at_200)
    between = math.exp(math.log(0.8) + (math.log(800) - math.log(400)) / (math.log(1600) - math.log(400))
                       * (math.log(0.5) - math.log(0.8)))
    assert predict(cal, 1, 50, prompt_tokens=800).tps == pytest.approx(100.0 * between)
    assert predict(cal, 4, 50, prompt_tokens=400).tps == pytest.approx(240.0)  # a measured level is itself
    assert predict(cal, 4, 50).tps == pytest.approx(300.0)  # no prompt length: the base level
    for outside in (50, 5000):
        result = predict(cal, 4, 50, prompt_tokens=outside)
        assert result.tps is None and result.missing == (f"K_in({outside})",)
    table = solve(cal, 200.0, 50, prompt_tokens=400).table
    assert dict(table)[4] == pytest.approx(240.0)
    assert solve(cal, 200.0, 50, prompt_tokens=400).concurrency == 4


@pytest.mark.parametrize("slots", [None, 2])
def test_chain_holdout_fast_path_is_a_recalibration(slots: int | None) -> None:
    """The hold-out's per-cell shortcut gives what recalibrating without each row gives (also with
    more prompt levels than the K_in table's slots, where a level's only row falls back to it)."""
    for rows in (hand_rows(), read_results(SIM_CSV).rows):
        settings = Settings(prompt_slots=slots)
        analysis = analyze(rows, settings)
        full = calibrate(analysis.statuses, settings)
        pinned = Settings(base_model=full.base_model, base_max_tokens=full.base_max_tokens,
                          base_concurrency=full.base_concurrency, base_prompt_level=full.base_prompt_level,
                          prompt_slots=slots)
        holdout = {row.exp_id: row.predicted_tps for row in lsq.chain_holdout(analysis.statuses, settings).rows}
        for i, status in enumerate(analysis.statuses):
            if not status.included:
                continue
            without = [s for j, s in enumerate(analysis.statuses) if j != i]
            again = check_rows([status], calibrate(without, pinned))[0].predicted_tps
            if again is None:
                assert holdout[status.exp_id] is None, status.exp_id
            else:
                assert holdout[status.exp_id] == pytest.approx(again, rel=1e-12), status.exp_id


# ---------------------------------------------------------------------------
# Least squares on the simulator's data
# ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def simulated() -> list:
    return read_results(SIM_CSV).rows


def test_lsq_has_a_dummy_per_non_base_prompt_level(simulated: list) -> None:
    analysis = analyze(simulated)
    result = lsq.fit(analysis.statuses)
    labels = [c.label for c in result.coefficients]
    assert labels[-2:] == ["K_in(256)", "K_in(640)"] and "K_in(32)" not in labels
    kin = [c for c in result.coefficients if c.kind == "k_in"]
    assert [c.level for c in kin] == [256, 640] and all(c.rows == 8 for c in kin)
    assert all(c.value is not None and c.interval is not None and c.value < 1 for c in kin)
    assert result.parameters == 7 and result.rank == 7 and result.dof == 24 - 7
    low, high = kin[0].value, kin[1].value
    assert high < low  # a longer prompt, a lower TPS
    assert result.calibration.k_in(32) == 1.0
    # the forecast takes a prompt length: a level is its own dummy, between two ln K_in is interpolated
    at_256 = result.forecast(4, 16, "sim", prompt_tokens=256)
    base = result.forecast(4, 16, "sim")
    assert at_256.tps == pytest.approx(base.tps * low) and at_256.prompt_tokens == 256
    middle = result.forecast(4, 16, "sim", prompt_tokens=400)
    weight = (math.log(400) - math.log(256)) / (math.log(640) - math.log(256))
    assert middle.tps == pytest.approx(base.tps * math.exp((1 - weight) * math.log(low) + weight * math.log(high)))
    assert middle.interpolated and middle.mean_interval is not None
    beyond = result.forecast(4, 16, "sim", prompt_tokens=2000)
    assert beyond.tps is None and "K_in(2000) is outside the measured prompt levels" in beyond.missing[0]
    holdout = lsq.lsq_holdout(result)
    assert holdout.predicted_rows == 24


def test_the_concurrency_x_prompt_interaction_in_words(simulated: list) -> None:
    analysis = analyze(simulated)
    check = lsq.interaction_check(lsq.fit(analysis.statuses), analysis.statuses)
    cells = {(c.concurrency, c.prompt_level): c for c in check.cells if c.kind == lsq.PROMPT_KIND}
    # the slot limit (4) makes requests queue behind long prefills: the longest prompt at the
    # highest concurrency is far below what the separable model says
    worst = cells[(8, 640)]
    assert worst.breaks_model and worst.effect_pct < -20
    assert not cells[(2, 256)].breaks_model  # below the slot limit, a short step: separable
    words = check.prompt_interaction()
    assert words is not None and words.startswith(
        "a longer prompt costs more at higher concurrency: at concurrency 8 and 640 prompt tokens TPS is ")
    assert words.endswith("% below what the separable model says")
    assert f"{abs(worst.effect_pct):.0f}% below" in words
    assert not check.separable and words in check.summary()
    report = lsq.least_squares_analysis(analysis.statuses).report()
    assert report["prompt_interaction"] == words and report["coefficients"]["K_in(640)"] < 1


def test_no_interaction_without_replication_of_the_prompt_cells() -> None:
    rows = [r for r in read_results(SIM_CSV).rows if r.max_tokens == 16]  # one row per (c, P): nothing to test it on
    analysis = analyze(rows)
    check = lsq.interaction_check(lsq.fit(analysis.statuses), analysis.statuses)
    assert [c for c in check.cells if c.kind == lsq.PROMPT_KIND] == []


# ---------------------------------------------------------------------------
# The workbook, live, verified cell by cell
# ---------------------------------------------------------------------------

DERIVATION = {"forward": {"concurrency": 4, "max_tokens": 32, "prompt_tokens": 400},
              "inverse": {"target_tps": 200, "max_tokens": 16, "prompt_tokens": 640, "max_latency": 1.0}}


@pytest.fixture(scope="module")
def filled_sim(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("kin")
    out = {}
    for method in ("chain", "lsq"):
        path = folder / f"sim_{method}.xlsx"
        report = fill(SIM_CSV, output=path, engine="ironcalc", lang="en", method=method, derivation=DERIVATION)
        assert report.verification.ok, [str(m) for m in report.verification.mismatches[:10]]
        out[method] = path
    return out


def _values(path: Path, sheet: str) -> Any:
    return books.sheet(path, sheet)


def test_fill_shows_k_in_on_the_calibration_and_consistency_sheets(filled_sim: dict[str, Path]) -> None:
    path = filled_sim["chain"]
    lo = Layout(lang="en")
    cal = analyze(read_results(SIM_CSV).rows).calibration
    ws = _values(path, lo.title("calibration"))
    assert ws[f"C{lo.settings_rows['base_prompt_level']}"].value == 32
    col = {c.key: lo.table_col(PROMPT_TABLE, c.key) for c in PROMPT_TABLE}
    shown = [(ws[f"{col['level']}{r}"].value, ws[f"{col['anchor']}{r}"].value, ws[f"{col['k']}{r}"].value)
             for r in range(lo.p_table_first, lo.p_table_first + 3)]
    assert shown == [(level.prompt_level, level.anchor_concurrency, pytest.approx(level.k_in, rel=1e-12))
                     for level in cal.prompt_levels]
    assert ws[f"{col['level']}{lo.p_table_first + 3}"].value is None
    cons = _values(path, lo.title("consistency"))
    cols = {c.key: lo.cons_col(c.key) for c in CONSISTENCY_COLUMNS}
    first = lo.cons_first
    assert cons[f"{cols['note']}{first + 1}"].value == "identifies K_in(256)"
    assert cons[f"{cols['prompt_level']}{first + 2}"].value == 640
    assert cons[f"{cols['k_in']}{first + 2}"].value == pytest.approx(cal.k_in(640))


def test_the_derivation_sheet_answers_for_a_prompt_length(filled_sim: dict[str, Path]) -> None:
    lo = Layout(lang="en")
    fw, inv = lo.forward_rows, lo.inverse_rows
    analysis = analyze(read_results(SIM_CSV).rows)
    ws = _values(filled_sim["chain"], lo.title("derivation"))
    expected = predict(analysis.calibration, 4, 32, prompt_tokens=400).tps
    assert ws[f"B{fw['tps']}"].value == pytest.approx(expected, rel=1e-12)
    assert [ws[f"{c}{fw['prompt_tokens']}"].value for c in "EF"] == [256, 640]  # interpolated between them
    assert ws[f"C{inv['prompt_tokens']}"].value == pytest.approx(analysis.calibration.k_in(640))
    assert ws[f"D{inv['prompt_tokens']}"].value == 640  # latencies judged at that level
    chain_tps = ws[f"B{fw['tps']}"].value
    lsq_ws = _values(filled_sim["lsq"], lo.title("derivation"))
    forecast = lsq.fit(analysis.statuses).forecast(4, 32, "sim", prompt_tokens=400)
    assert lsq_ws[f"B{fw['tps']}"].value == pytest.approx(forecast.tps, rel=1e-9) != chain_tps


@pytest.mark.libreoffice
@pytest.mark.parametrize("method", ["chain", "lsq"])
def test_libreoffice_recalculates_the_prompt_factor_cell_by_cell(filled_sim: dict[str, Path], method: str) -> None:
    report = verify(filled_sim[method], engine="libreoffice")
    assert report.verification.ok, [str(m) for m in report.verification.mismatches[:10]]
    assert report.verification.cells_compared > 10_000


@pytest.mark.libreoffice
def test_libreoffice_fill_of_the_simulator_csv(tmp_path: Path) -> None:
    """`scm-xl fill --engine libreoffice` of the simulator CSV: every formula cell verified."""
    result = CliRunner().invoke(main, ["fill", str(SIM_CSV), "-o", str(tmp_path / "lo.xlsx"), "--engine",
                                       "libreoffice", "--lang", "en"])
    assert result.exit_code == 0, result.output
    assert "recalculated by libreoffice match the Python reference" in result.output
    assert "K_in(640)" in result.output and "a longer prompt costs more at higher concurrency" in result.output



def test_a_csv_without_levels_has_an_empty_k_in_table_and_k_in_1(tmp_path: Path) -> None:
    csv = tmp_path / "plain.csv"
    write_results(csv, [experiment(r.exp_id, r.model, r.concurrency, r.max_tokens, r.tps) for r in hand_rows()[:3]])
    report = fill(csv, output=tmp_path / "plain.xlsx", engine="ironcalc", lang="en")
    assert report.verification.ok
    lo = report.layout
    ws = _values(tmp_path / "plain.xlsx", lo.title("calibration"))
    assert ws[f"C{lo.settings_rows['base_prompt_level']}"].value is None
    assert ws[f"A{lo.p_table_first}"].value is None
    cons = _values(tmp_path / "plain.xlsx", lo.title("consistency"))
    assert cons[f"{lo.cons_col('k_in')}{lo.cons_first}"].value == 1


def test_a_prompt_level_beyond_the_k_in_slots_is_unidentified(tmp_path: Path) -> None:
    """Three levels in a workbook with two K_in slots (a person typed a third): the rows at the third
    have no cell (no monotonic filter, as for a model beyond the slots) and say what they miss."""
    from scm_xl.engines import choose_engine
    from scm_xl.workbook import fill as filling
    from scm_xl.workbook.io import write_rows
    from scm_xl.workbook.registry import build_workbook

    layout = Layout(lang="en", rows=40, p_slots=2)
    built = build_workbook(layout)
    write_rows(built.wb, layout, list(read_results(SIM_CSV).rows), clear=False)
    engine, note = choose_engine("ironcalc", 24)
    report = filling._finish(built, layout, tmp_path / "slots.xlsx", engine, note, lambda _: None, [])
    assert report.verification.ok, [str(m) for m in report.verification.mismatches[:10]]
    assert [level.prompt_level for level in report.analysis.calibration.prompt_levels] == [32, 256]
    beyond = [c for c in report.analysis.checks if c.status.prompt_level == 640]
    assert beyond and all(c.role == "unidentified" and c.missing == ("K_in(640)",) for c in beyond)
    assert beyond[0].note("en") == "missing K_in(640)"


def test_the_hand_made_csv_verifies(tmp_path: Path) -> None:
    csv = tmp_path / "hand.csv"
    write_results(csv, hand_rows())
    report = fill(csv, output=tmp_path / "hand.xlsx", engine="ironcalc", lang="zh",
                  derivation={"forward": {"concurrency": 4, "max_tokens": 50, "prompt_tokens": 200},
                              "inverse": {"target_tps": 100, "max_tokens": 50, "prompt_tokens": 1600}})
    assert report.verification.ok, [str(m) for m in report.verification.mismatches[:10]]
    lo = report.layout
    ws = _values(tmp_path / "hand.xlsx", lo.title("derivation"))
    assert ws[f"B{lo.forward_rows['tps']}"].value == pytest.approx(300 * 0.8 ** 0.5)
    # at 1600 prompt tokens K_in = 0.5: c=1 50, c=2 90, c=4 150 TPS (f(8) is not identified at the base level)
    assert ws[f"B{lo.inverse_rows['concurrency']}"].value == 4
    raw = _values(tmp_path / "hand.xlsx", lo.title("raw"))
    assert raw[f"{lo.entry_col('show_role')}{lo.raw_first + 11}"].value == "excluded"  # E12, by the monotonic filter


# ---------------------------------------------------------------------------
# A person types a row at a new prompt level in LibreOffice
# ---------------------------------------------------------------------------


@pytest.mark.libreoffice
def test_a_row_at_a_new_prompt_level_typed_in_libreoffice(filled_sim: dict[str, Path], tmp_path: Path) -> None:
    if not Path(UNO_PYTHON).exists():
        pytest.fail("python3-uno is needed for the LibreOffice edit tests (apt-get install python3-uno)")
    lo = Layout(lang="en")
    row = lo.raw_first + 24  # under the 24 rows
    new = experiment("NEW1", "sim", 1, 16, 80.0, prompt_level=1024)
    edits = [{"set": f"{lo.entry_col('exp_id')}{row}", "text": new.exp_id},
             {"set": f"{lo.entry_col('model')}{row}", "text": new.model}]
    for key in ("concurrency", "requests_per_slot", "total_requests", "max_tokens", "total_time_s",
                "total_output_tokens", "prompt_level"):
        edits.append({"set": f"{lo.entry_col(key)}{row}", "value": getattr(new, key)})
    out = tmp_path / "typed.xlsx"
    spec = tmp_path / "jobs.json"
    spec.write_text(json.dumps([{"in": str(filled_sim["chain"]), "out": str(out), "sheet": lo.title("raw"),
                                 "edits": edits}]))
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    result = subprocess.run([UNO_PYTHON, str(Path(__file__).with_name("uno_edit.py")), str(spec)],
                            capture_output=True, text=True, timeout=240, env=env)
    assert result.returncode == 0, result.stderr[-2000:]
    report = engines.verified_as_saved(out)  # LibreOffice's values as saved, and IronCalc's
    assert [r.exp_id for _, r in report.inputs.rows][-1] == "NEW1"
    cal = report.analysis.calibration
    assert [level.prompt_level for level in cal.prompt_levels] == [32, 256, 640, 1024]
    assert cal.k_in(1024) == pytest.approx(80.0 / cal.base_tps)  # anchored at c=1, f(1) = 1
    ws = _values(out, lo.title("calibration"))
    kin = lo.table_col(PROMPT_TABLE, "k")
    assert ws[f"{kin}{lo.p_table_first + 3}"].value == pytest.approx(cal.k_in(1024), rel=1e-9)
    assert report.analysis.checks[-1].identifies == ("K_in(1024)",)


# ---------------------------------------------------------------------------
# The article, exactly as before
# ---------------------------------------------------------------------------

ARTICLE_COEFFICIENTS = """\
coefficient          value  from
-------------------  -----  ----------------------------------------------------
BaseTPS              45.45  tok/s at the base point: Qwen2.5-7B, max_tokens 50,
                            concurrency 1
f(1)                 1.00   1 row(s)
f(2)                 2.62   1 row(s)
f(4)                 3.10   1 row(s)
f(8)                 n/a    not identified
K_len(50)            1.00   anchor concurrency 1
K_len(100)           0.50   anchor concurrency 2
K_len(200)           1.36   anchor concurrency 1
C_model(Qwen2.5-7B)  1.00   1 row(s); first principles 1.000
"""


def test_the_article_prints_todays_coefficients(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["fill", str(ARTICLE), "-o", str(tmp_path / "article.xlsx")])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    start = lines.index("coefficient          value  from")
    assert "\n".join(lines[start:start + 12]) + "\n" == ARTICLE_COEFFICIENTS
    assert "K_in" not in result.output and "prompt" not in lines[start + 13]
