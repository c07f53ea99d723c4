"""The replicates sheet: live formulas equal scm_xl.replicates on every engine."""

from __future__ import annotations

from pathlib import Path

import pytest
from data.gen import MODELS, experiment, full_factorial, replicated_factorial, sparse_design
from openpyxl import Workbook
from openpyxl.utils import get_column_letter
from openpyxl.utils.cell import range_boundaries
from openpyxl.workbook.defined_name import DefinedName
from openpyxl.worksheet.worksheet import Worksheet

from scm_xl import replicates
from scm_xl.engines import get_engine
from scm_xl.model import Settings, analyze, cell_order
from scm_xl.results import ResultRow, read_results
from scm_xl.verify import compare
from scm_xl.workbook import replicates_sheet as rs
from scm_xl.workbook.registry import build_workbook
from scm_xl.workbook.stamp import PendingFills
from scm_xl.workbook.io import write_rows
from scm_xl.workbook.layout import Layout
from support.engines import ENGINES
from support.paths import ARTICLE

ROOT = Path(__file__).parent.parent
NAMES_SHEET = "names"


def noisy_factorial(seed: int = 7, repeats: int = 3, sigma: float = 0.08) -> list[ResultRow]:
    return replicated_factorial(seed, repeats, sigma, "R")


def odd_cells() -> list[ResultRow]:
    """Spellings that differ in case, a run with no output, a cell with a wide spread, one with 4 runs."""
    rows = [experiment("A1", "Qwen", 1, 50, 40.0), experiment("A2", "qwen", 1, 50, 44.0),
            experiment("A3", "Qwen", 2, 50, 80.0), experiment("A4", "Qwen", 1, 50, 41.0),
            experiment("A5", "Qwen", 2, 50, 120.0), experiment("A6", "Qwen", 4, 100, 10.0),
            experiment("A7", "Qwen", 4, 100, 30.0), experiment("A8", "Qwen", 4, 100, 20.0),
            experiment("A9", "Qwen", 4, 100, 40.0), experiment("A10", "Qwen", 8, 200, 50.0)]
    zero = ResultRow(exp_id="Z1", model="Qwen", concurrency=8, requests_per_slot=8, total_requests=64,
                     max_tokens=200, total_time_s=3.0, total_output_tokens=0)
    return rows + [zero]


def _layout(rows: int, lang: str = "zh") -> Layout:
    return Layout(lang=lang, rows=rows)  # type: ignore[arg-type]


def _build(path: Path, layout: Layout, rows: list[ResultRow], *, slots: int = rs.DEFAULT_SLOTS,
           threshold: object = rs.DEFAULT_CV_THRESHOLD) -> dict:
    """The whole workbook with the replicates sheet added; the expected value of its formula cells."""
    built = build_workbook(layout)
    wb = built.wb
    wb.remove(wb[rs.SHEET_TITLES[layout.lang]])  # the builder makes it too; rebuild it here as the test says
    ws = wb.create_sheet(rs.SHEET_TITLES[layout.lang])
    names = rs.write_sheet(ws, layout, built.fills, slots=slots)
    ws[f"B{rs.THRESHOLD_ROW}"] = threshold
    check = wb.create_sheet(NAMES_SHEET)
    for row, (name, address) in enumerate(sorted(names.items()), start=1):
        col, num = address.rstrip("0123456789"), address[len(address.rstrip("0123456789")):]
        wb.defined_names[name] = DefinedName(name, attr_text=f"'{ws.title}'!${col}${num}")
        check[f"A{row}"] = f"={name}"
    write_rows(wb, layout, rows)
    built.save(path)
    settings = Settings(concurrency_slots=layout.c_slots, length_slots=layout.l_slots, model_slots=layout.m_slots)
    expected = rs.expected_sheet(layout, analyze(rows, settings), slots=slots, threshold=rs.read_threshold(ws))
    for row, (_, address) in enumerate(sorted(names.items()), start=1):
        expected[(NAMES_SHEET, f"A{row}")] = expected[(ws.title, address)]
    return expected


def _check(engine: str, path: Path, expected: dict) -> dict:
    result = get_engine(engine).recalculate(path)
    sheets = {sheet for sheet, _ in expected}
    verification = compare(expected, result, sheets)
    assert verification.ok, "\n".join(map(str, verification.mismatches[:20])) + "\n".join(verification.unexpected)
    assert verification.cells_compared == len(expected)
    return result.values


@pytest.mark.parametrize("engine", ENGINES)
def test_noisy_factorial_with_replicates(engine: str, tmp_path: Path) -> None:
    layout = _layout(80)
    rows = noisy_factorial()
    values = _check(engine, tmp_path / "r.xlsx", _build(tmp_path / "r.xlsx", layout, rows, threshold=0.05))
    title = rs.SHEET_TITLES["zh"]
    assert values[(title, rs.ReplicatesLayout(layout).summary_cell("cells"))] == 24
    first = rs.TABLE_FIRST_ROW
    assert values[(title, f"F{first}")] == 3  # three runs of the first cell
    assert values[(title, f"C{first}")] == MODELS[0]
    assert values[(title, rs.ReplicatesLayout(layout).threshold_cell)] == 0.05
    assert values[(title, rs.ReplicatesLayout(layout).summary_cell("flagged"))] > 0  # sigma 0.08 vs 5%


@pytest.mark.parametrize("engine", ENGINES)
def test_article_and_sparse_have_one_run_per_cell(engine: str, tmp_path: Path) -> None:
    layout = _layout(30, "en")
    rows = read_results(ARTICLE).rows + sparse_design()
    values = _check(engine, tmp_path / "a.xlsx", _build(tmp_path / "a.xlsx", layout, rows))
    title = rs.SHEET_TITLES["en"]
    assert values[(title, f"I{rs.TABLE_FIRST_ROW}")] is None  # one run: no CV
    assert values[(title, rs.ReplicatesLayout(layout).summary_cell("flagged"))] == 0


@pytest.mark.parametrize("engine", ENGINES)
def test_case_zero_output_even_counts_and_more_cells_than_slots(engine: str, tmp_path: Path) -> None:
    layout = _layout(40)
    rows = odd_cells() + full_factorial(replicates=False)[:12]
    expected = _build(tmp_path / "o.xlsx", layout, rows, slots=5, threshold="bad")
    values = _check(engine, tmp_path / "o.xlsx", expected)
    title = rs.SHEET_TITLES["zh"]
    rl = rs.ReplicatesLayout(layout, 5)
    first = rs.TABLE_FIRST_ROW
    assert values[(title, rl.threshold_cell)] == rs.DEFAULT_CV_THRESHOLD  # text typed: the default applies
    assert values[(title, f"F{first}")] == 3 and values[(title, f"G{first}")] == pytest.approx(41.0)
    assert values[(title, f"G{first + 2}")] == pytest.approx(25.0)  # 10, 30, 20, 40: the two middle values averaged
    assert values[(title, rl.summary_cell("cells"))] == 4 + 12
    assert values[(title, rl.summary_cell("hidden_note"))] == "还有 11 个组合未显示：表格只有 5 行"


def test_reference_alone_mirrors_summarize() -> None:
    layout = _layout(80)
    rows = noisy_factorial(repeats=4, sigma=0.2)
    analysis = analyze(rows)
    expected = rs.expected_sheet(layout, analysis, threshold=0.1)
    summaries = {(c.model.casefold(), c.max_tokens, c.concurrency): c
                 for c in replicates.summarize(analysis.statuses, cv_threshold=0.1)}
    # in the cells sheet's order: model number, then max_tokens, then (no) prompt level, then concurrency
    cells = [summaries[key] for key in sorted(summaries, key=lambda k: (k[0] != "model-a", k[1], k[2]))]
    assert [key for key in cell_order(analysis.statuses)] == [
        (c.model.casefold(), c.max_tokens, 0, c.concurrency) for c in cells]
    title = rs.SHEET_TITLES["zh"]
    for i, cell in enumerate(cells):
        row = rs.TABLE_FIRST_ROW + i
        assert expected[(title, f"G{row}")] == cell.median_tps
        assert expected[(title, f"K{row}")] == cell.repeats_needed
        assert expected[(title, f"L{row}")] == cell.more_repeats
    assert expected[(title, f"B{rs.TABLE_FIRST_ROW + len(cells)}")] is None
    # every formula cell of the sheet has a value, and nothing else does
    ws = Workbook().active
    rs.write_sheet(ws, layout, PendingFills())
    assert {address for _, address in expected} == formula_cells(ws)


def formula_cells(ws: Worksheet) -> set[str]:
    cells = set()
    for row in ws.iter_rows():
        for cell in row:
            ref = getattr(cell.value, "ref", None)
            if ref:
                c1, r1, c2, r2 = range_boundaries(ref)
                cells |= {f"{get_column_letter(c)}{r}" for c in range(c1, c2 + 1) for r in range(r1, r2 + 1)}
            elif cell.data_type == "f":
                cells.add(cell.coordinate)
    return cells


# ---------------------------------------------------------------------------
# Through fill and verify, as a person gets the workbook
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("engine", ["ironcalc", pytest.param("libreoffice", marks=pytest.mark.libreoffice)])
def test_filled_replicated_factorial_agrees_on_every_engine(engine: str, tmp_path: Path) -> None:
    """A replicated factorial through `fill` (on IronCalc) and `verify` on each engine: the replicates
    and least-squares sheets equal the reference cell by cell."""
    from data.gen import write_csv

    from scm_xl.workbook import lsq_sheet as ls
    from scm_xl.workbook.fill import fill, verify

    csv = write_csv(tmp_path / "r.csv", replicated_factorial(11, 3, 0.06, "P"))
    out = tmp_path / "r.xlsx"
    filled = fill(csv, output=out, engine="ironcalc", lang="en")
    report = filled if engine == "ironcalc" else verify(out, engine=engine)
    ours = {rs.SHEET_TITLES["en"], ls.SHEET_TITLES["en"]}
    mine = [m for m in report.verification.mismatches if m.sheet in ours]
    assert not mine, "\n".join(map(str, mine[:20]))
    assert not [ref for ref in report.verification.unexpected if ref.split("!")[0].strip("'") in ours]
    values = report.verification.values
    layout = report.layout
    compared = [key for key in values if key[0] in ours]
    assert len(compared) > 2 * layout.rows  # the per-row cells of both sheets were recalculated
    rl = rs.ReplicatesLayout(layout, layout.cell_slots)
    assert values[(rl.title, rl.summary_cell("cells"))] == 24
    assert values[(rl.title, f"{rs.TABLE_COLS['n']}{rs.TABLE_FIRST_ROW}")] == 3
    ll = ls.LsqLayout(layout)
    assert values[(ll.title, ll.summary_cell("status"))] == "ok"
    assert values[(ll.title, ll.summary_cell("dof"))] == 72 - 7
    assert values[(ll.title, ll.summary_cell("loo_rows"))] == 72


@pytest.mark.parametrize("engine", ENGINES)
def test_identical_replicates_have_a_spread_of_zero(engine: str, tmp_path: Path) -> None:
    """40 runs that measured the same TPS: CV 0 on every engine. IronCalc's one-pass STDEV of 40 copies of
    177.78 is 4.7e-6, or #NUM! (the root of a negative variance); the sheet takes the STDEV of the deviations."""
    layout = _layout(100)
    rows = [experiment(f"I{i:02d}", "m", c, 50, tps) for i, (c, tps) in
            enumerate((c, tps) for _ in range(40) for c, tps in ((1, 36.36363636363637), (8, 177.77777777777777)))]
    values = _check(engine, tmp_path / "i.xlsx", _build(tmp_path / "i.xlsx", layout, rows))
    title = rs.SHEET_TITLES["zh"]
    first = rs.TABLE_FIRST_ROW
    cv_col = rs.TABLE_COLS["cv"]
    assert [values[(title, f"F{first + k}")] for k in (0, 1)] == [40, 40]
    assert [values[(title, f"{cv_col}{first + k}")] for k in (0, 1)] == [0.0, 0.0]
