"""The charts follow a person's edits with no `fill`: their series read fixed-size ranges of formulas
on the chart-data sheet (#N/A where there is no point, which charts skip). Edited in real LibreOffice
(tests/uno_edit.py), saved, and read back from the saved file."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from data.gen import experiment, full_factorial

from scm_xl.results import ResultRow, write_results
from scm_xl.workbook import charts
from scm_xl.workbook.fill import fill
from scm_xl.workbook.layout import Layout
from scm_xl.workbook.registry import build_template
from support import books, engines
from support.paths import UNO_PYTHON

LANG = "en"
LAYOUT = Layout(lang=LANG)
RAW = LAYOUT.title("raw")
DATA = LAYOUT.title("chart_data")
SUMMARY = LAYOUT.title("summary")


def typed(row: int, new: ResultRow) -> list[dict]:
    """The cells of experiment `new` typed into raw-data row `row`."""
    col = LAYOUT.entry_col
    edits: list[dict] = [{"set": f"{col('exp_id')}{row}", "text": new.exp_id},
                         {"set": f"{col('model')}{row}", "text": new.model}]
    for key in ("concurrency", "requests_per_slot", "total_requests", "max_tokens", "total_time_s",
                "total_output_tokens"):
        edits.append({"set": f"{col(key)}{row}", "value": getattr(new, key)})
    return edits


def fit_points(path: Path) -> dict[str, set[tuple[float, float]]]:
    """(measured, predicted) of each role's plotted points, from the saved file's values."""
    ws = books.sheet(path, DATA)
    out: dict[str, set[tuple[float, float]]] = {role: set() for role in charts.ROLE_COLOURS}
    for row in range(charts.FIRST_ROW, charts.fit_last_row(LAYOUT) + 1):
        for role in charts.ROLE_COLOURS:
            x = ws[f"{charts.FIT_COLUMNS[(role, 'measured')]}{row}"].value
            y = ws[f"{charts.FIT_COLUMNS[(role, 'predicted')]}{row}"].value
            if isinstance(x, (int, float)) and isinstance(y, (int, float)):
                out[role].add((round(x, 6), round(y, 6)))
            else:
                assert x in (None, "#N/A") and y in (None, "#N/A"), (row, x, y)  # no point: #N/A, skipped
    return out


def consistency_points(path: Path) -> dict[str, set[tuple[float, float]]]:
    """The same, from the consistency sheet's rows as the saved file has them."""
    ws = books.sheet(path, LAYOUT.title("consistency"))
    out: dict[str, set[tuple[float, float]]] = {role: set() for role in charts.ROLE_COLOURS}
    for row in range(LAYOUT.cons_first, LAYOUT.cons_last + 1):
        role = ws[f"{LAYOUT.cons_col('role')}{row}"].value
        measured = ws[f"{LAYOUT.cons_col('measured')}{row}"].value
        predicted = ws[f"{LAYOUT.cons_col('predicted')}{row}"].value
        if role in out and isinstance(predicted, (int, float)):
            out[role].add((round(measured, 6), round(predicted, 6)))
    return out


def series_refs(path: Path) -> list[list[str]]:
    """Each chart's series' y references, as the saved file has them."""
    ws = books.worksheet(path, SUMMARY)
    return [[series.yVal.numRef.f.replace("'", "") for series in chart.series] for chart in ws._charts]


def tps_line(path: Path, model: str, max_tokens: int) -> dict[float, float]:
    """concurrency -> TPS of one line of the TPS chart, from the saved file's values."""
    ws = books.sheet(path, DATA)
    groups = charts.read_groups(ws, LAYOUT)  # it reads cells only
    g = groups.index((model, max_tokens))
    out = {}
    for slot in range(LAYOUT.c_slots):
        row = charts.block_row(LAYOUT, g, slot)
        c, tps = ws[f"C{row}"].value, ws[f"D{row}"].value
        if isinstance(c, (int, float)) and isinstance(tps, (int, float)):
            out[float(c)] = tps
    return out


@pytest.fixture(scope="module")
def edited(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A filled workbook and the template, edited in one LibreOffice session."""
    if not shutil.which("soffice"):
        pytest.skip("LibreOffice (soffice) not installed")
    if not Path(UNO_PYTHON).exists():
        pytest.fail("python3-uno is needed for the LibreOffice edit tests (apt-get install python3-uno)")
    folder = tmp_path_factory.mktemp("charts")
    csv = folder / "results.csv"
    write_results(csv, full_factorial(seed=3))  # 26 rows on sheet rows 2..27
    filled = folder / "filled.xlsx"
    assert fill(csv, output=filled, engine="ironcalc", lang=LANG).verification.ok
    template = build_template(folder / "template.xlsx", lang=LANG)
    first = full_factorial(seed=3)
    # 2 models x concurrency 1, 2 x max_tokens 50, 100: every factor identified, and check rows
    for_template = [row for row in first if row.concurrency in (1, 2) and row.max_tokens in (50, 100)]
    jobs = {
        # delete the 4th experiment, type a new concurrency level (3) for model-a at max_tokens 100
        "edited": (filled, [{"delete_row": 5},
                            *typed(27, experiment("NEW3", first[0].model, 3, 100, 60.0))]),
        "inserted": (filled, [{"insert_row": 8}, *typed(8, experiment("INS1", first[0].model, 2, 100, 50.0))]),
        "template_typed": (template, [edit for i, row in enumerate(for_template) for edit in typed(2 + i, row)]),
    }
    spec, outputs = [], {}
    for name, (source, edits) in jobs.items():
        outputs[name] = folder / f"{name}.xlsx"
        spec.append({"in": str(source), "out": str(outputs[name]), "sheet": RAW, "edits": edits})
    (folder / "jobs.json").write_text(json.dumps(spec))
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    result = subprocess.run([UNO_PYTHON, str(Path(__file__).with_name("uno_edit.py")), str(folder / "jobs.json")],
                            capture_output=True, text=True, timeout=240, env=env)
    assert result.returncode == 0, result.stderr[-2000:]
    return {"filled": filled, **outputs}


pytestmark = pytest.mark.libreoffice


def test_after_a_delete_and_a_typed_row_the_fit_chart_shows_exactly_the_rows_there(edited: dict[str, Path]) -> None:
    before, after = fit_points(edited["filled"]), fit_points(edited["edited"])
    assert after == consistency_points(edited["edited"])  # every check and identify row there, nothing else
    assert after != before and sum(map(len, after.values())) > 0
    engines.verified_as_saved(edited["edited"])
    # the series still read the whole fixed-size ranges LibreOffice saved
    assert series_refs(edited["edited"]) == series_refs(edited["filled"])


def test_a_concurrency_level_typed_in_joins_its_line_at_once(edited: dict[str, Path]) -> None:
    model = full_factorial(seed=3)[0].model
    before, after = tps_line(edited["filled"], model, 100), tps_line(edited["edited"], model, 100)
    assert 3.0 not in before
    assert after[3.0] == pytest.approx(60.0, rel=1e-6)  # the one row typed at concurrency 3
    assert {c: v for c, v in after.items() if c != 3.0}.keys() == before.keys()


def test_the_template_has_the_fit_chart_and_it_fills_as_rows_are_typed(edited: dict[str, Path]) -> None:
    empty = fit_points(edited["filled"].with_name("template.xlsx"))
    assert empty == {role: set() for role in charts.ROLE_COLOURS}
    assert len(series_refs(edited["filled"].with_name("template.xlsx"))) == 1  # the fit chart; no lines yet
    typed_in = fit_points(edited["template_typed"])
    assert typed_in == consistency_points(edited["template_typed"])
    assert typed_in["identify"] and typed_in["check"]
    engines.verified_as_saved(edited["template_typed"])


def test_no_smoothing_a_legend_beside_the_plot_and_units_on_every_axis(edited: dict[str, Path]) -> None:
    ws = books.worksheet(edited["filled"], SUMMARY)
    assert len(ws._charts) == 2  # TPS, measured vs predicted (these rows measured no latency)
    for chart in ws._charts:
        assert chart.legend.position == "r"
        for axis in (chart.x_axis, chart.y_axis):
            title = "".join(run.t for p in axis.title.tx.rich.p for run in (p.r or []))
            assert title and (axis is chart.x_axis or "(" in title or title == "s"), title
        for series in chart.series:
            assert series.smooth is False
            assert series.tx is not None
    (tps,) = [chart for chart in ws._charts if chart.anchor._from.row == 3]  # anchored at row 4
    names = [series.tx.strRef.f if series.tx.strRef else series.tx.v for series in tps.series]
    assert names and all("max_tokens" in str(name) for name in names), names


def test_a_row_inserted_by_hand_is_marked_and_the_header_says_what_to_do(edited: dict[str, Path]) -> None:
    """LibreOffice copies no formula into an inserted row, so its TPS, role and status show blank; the
    sheet colours such a row (conditional formatting over the rows, as LibreOffice saved it) and the TPS
    header's comment says what to do."""
    from scm_xl.workbook.raw_sheet import INSERTED_ROW_FILL, INSERTED_ROW_HINT

    ws = books.worksheet(edited["inserted"], RAW)
    tps = LAYOUT.entry_col("show_tps")
    rules = [(str(rng.sqref), rule) for rng in ws.conditional_formatting for rule in rng.rules]
    (sqref, rule), = [(s, r) for s, r in rules if "ISFORMULA" in (r.formula or [""])[0]]
    assert sqref.startswith(f"A{LAYOUT.raw_first}:")
    assert rule.dxf.fill.fgColor.rgb.endswith(INSERTED_ROW_FILL) or rule.dxf.fill.bgColor.rgb.endswith(INSERTED_ROW_FILL)
    # the rule's condition: an exp_id and no formula in the TPS cell; true on the inserted row only
    marked = [row for row in range(LAYOUT.raw_first, ws.max_row + 1)
              if ws[f"{LAYOUT.entry_col('exp_id')}{row}"].value not in (None, "")
              and not str(ws[f"{tps}{row}"].value or "").startswith("=")]
    assert marked == [8]
    assert ws[f"A8"].value == "INS1"
    assert ws[f"{tps}{LAYOUT.raw_header_row}"].comment.text.startswith(INSERTED_ROW_HINT[LANG][:40])
    engines.verified_as_saved(edited["inserted"])  # the workings count it


def test_a_row_inserted_by_hand_shows_its_tps_role_and_reason_on_the_consistency_sheet(
        edited: dict[str, Path]) -> None:
    """What the inserted row's header comment promises, as LibreOffice recalculated and saved it: the
    Consistency sheet's row of the same exp_id has its TPS, its role and, where it has one, its reason."""
    shown = books.sheets(edited["inserted"], RAW, LAYOUT.title("consistency"))
    raw = shown[RAW]
    col = LAYOUT.entry_col
    tokens, seconds = raw[f"{col('total_output_tokens')}8"].value, raw[f"{col('total_time_s')}8"].value
    ws = shown[LAYOUT.title("consistency")]
    rows = [row for row in range(LAYOUT.cons_first, LAYOUT.cons_last + 1)
            if ws[f"{LAYOUT.cons_col('exp_id')}{row}"].value == "INS1"]
    assert len(rows) == 1
    row = rows[0]
    assert ws[f"{LAYOUT.cons_col('measured')}{row}"].value == pytest.approx(tokens / seconds)
    role = ws[f"{LAYOUT.cons_col('role')}{row}"].value
    assert role in charts.ROLE_COLOURS or role in ("excluded", "unidentified")
    if role in ("excluded", "unidentified", "identify"):
        assert ws[f"{LAYOUT.cons_col('note')}{row}"].value  # its reason, or what it identifies
    # the raw sheet's own display cells of that row stay blank: no formula was copied in
    assert raw[f"{LAYOUT.entry_col('show_tps')}8"].value in (None, "")
