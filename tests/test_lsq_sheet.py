"""The least-squares sheet: live formulas equal scm_xl.lsq (and numpy) on every engine."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from data.gen import MODELS, experiment, replicated_factorial, sparse_design
from openpyxl import Workbook
from openpyxl.utils import get_column_letter
from openpyxl.utils.cell import range_boundaries
from openpyxl.workbook.defined_name import DefinedName

from scm_xl import lsq
from scm_xl.engines import get_engine
from scm_xl.model import Analysis, Settings, analyze
from scm_xl.results import ResultRow, read_results
from scm_xl.verify import compare
from scm_xl.workbook import lsq_sheet as ls
from scm_xl.workbook.registry import build_workbook
from scm_xl.workbook.stamp import PendingFills
from scm_xl.workbook.io import write_rows
from scm_xl.workbook.layout import Layout
from support.engines import ENGINES
from support.paths import ARTICLE

ROOT = Path(__file__).parent.parent
NAMES_SHEET = "names"


def noisy_factorial(seed: int = 5, repeats: int = 3, sigma: float = 0.05) -> list[ResultRow]:
    return replicated_factorial(seed, repeats, sigma, "N")


def aliased() -> list[ResultRow]:
    """model-b only at max_tokens 100, which model-a never ran: K_len(100) and C_model(model-b) are confounded."""
    a, b = MODELS
    return [experiment("A1", a, 1, 50, 40.0), experiment("A2", a, 2, 50, 75.0), experiment("A3", a, 4, 50, 120.0),
            experiment("A4", a, 2, 50, 73.0), experiment("B1", b, 2, 100, 30.0), experiment("B2", b, 4, 100, 50.0)]


DATASETS = {
    "article": lambda: read_results(ARTICLE).rows,
    "factorial": noisy_factorial,
    "sparse": sparse_design,
    "aliased": aliased,
}


def _settings(layout: Layout) -> Settings:
    return Settings(concurrency_slots=layout.c_slots, length_slots=layout.l_slots, model_slots=layout.m_slots)


def _build(path: Path, layout: Layout, rows: list[ResultRow]) -> tuple[dict, Analysis]:
    """The whole workbook with the least-squares sheet added; the expected value of its formula cells."""
    built = build_workbook(layout)
    wb = built.wb
    wb.remove(wb[ls.SHEET_TITLES[layout.lang]])  # the builder makes it too; rebuild it here as the test says
    ws = wb.create_sheet(ls.SHEET_TITLES[layout.lang])
    names = ls.write_sheet(ws, layout, built.fills)
    check = wb.create_sheet(NAMES_SHEET)
    for row, (name, address) in enumerate(sorted(names.items()), start=1):
        col, num = address.rstrip("0123456789"), address[len(address.rstrip("0123456789")):]
        wb.defined_names[name] = DefinedName(name, attr_text=f"'{ws.title}'!${col}${num}")
        check[f"A{row}"] = f"={name}"
    write_rows(wb, layout, rows)
    built.save(path)
    analysis = analyze(rows, _settings(layout))
    expected = ls.expected_sheet(layout, analysis)
    for row, (_, address) in enumerate(sorted(names.items()), start=1):
        expected[(NAMES_SHEET, f"A{row}")] = expected[(ws.title, address)]
    return expected, analysis


def _check(engine: str, path: Path, expected: dict) -> dict:
    result = get_engine(engine).recalculate(path)
    sheets = {sheet for sheet, _ in expected}
    verification = compare(expected, result, sheets)
    assert verification.ok, "\n".join(map(str, verification.mismatches[:20])) + "\n".join(verification.unexpected)
    assert verification.cells_compared == len(expected)
    return result.values


def _summary(values: dict, layout: Layout, key: str) -> object:
    return values[(ls.SHEET_TITLES[layout.lang], ls.LsqLayout(layout).summary_cell(key))]


def _coefficients(values: dict, layout: Layout) -> dict[str, float]:
    """Identified coefficients read back from the sheet, by lsq label."""
    ll = ls.LsqLayout(layout)
    title = ll.title
    out = {}
    for j in range(ll.p):
        row = ll.coef_first + j
        kind = "BaseTPS" if j == 0 else next(k for k, (first, size) in ll.blocks.items() if first <= j < first + size)
        role = values[(title, f"{ls.COEF_COLS['role']}{row}")]
        if role != "identified":
            continue
        value = values[(title, f"{ls.COEF_COLS['value']}{row}")]
        level = values.get((title, f"{ls.COEF_COLS['level']}{row}"))
        if isinstance(level, float):
            level = int(level)
        out["BaseTPS" if kind == "BaseTPS" else f"{kind}({level})"] = value
    return out


# ---------------------------------------------------------------------------
# On the engines
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("engine", ENGINES)
def test_noisy_factorial_equals_numpy_ols(engine: str, tmp_path: Path) -> None:
    layout = Layout(lang="zh", rows=80)
    expected, analysis = _build(tmp_path / "f.xlsx", layout, noisy_factorial())
    values = _check(engine, tmp_path / "f.xlsx", expected)
    assert _summary(values, layout, "status") == "ok"
    assert _summary(values, layout, "dof") == 72 - 7
    assert _summary(values, layout, "loo_rows") == 72
    assert _summary(values, layout, "loo_verdict") in ("excellent", "good")

    # numpy on its own: the same design, lstsq, the hat matrix, and brute-force refits without each row
    used = lsq.fitted_rows(analysis.statuses, _settings(layout))
    cal = analysis.calibration
    design, labels = lsq.design_matrix([(s.model, s.concurrency, s.max_tokens) for s in used],
                                       base_model=cal.base_model, base_concurrency=cal.base_concurrency,
                                       base_max_tokens=cal.base_max_tokens)
    response = np.log([s.tps for s in used])
    beta, *_ = np.linalg.lstsq(design, response, rcond=None)
    sheet = _coefficients(values, layout)
    assert set(sheet) == set(labels)
    for label, b in zip(labels, beta):
        assert sheet[label] == pytest.approx(math.exp(b), rel=1e-9), label
    residuals = response - design @ beta
    assert _summary(values, layout, "sigma") == pytest.approx(
        math.sqrt(residuals @ residuals / (len(used) - design.shape[1])), rel=1e-9)
    hat = design @ np.linalg.inv(design.T @ design) @ design.T
    ll = ls.LsqLayout(layout)
    errors = []
    for i, s in enumerate(used):
        row = ll.row_first + i  # rows are written consecutively and all are fitted here
        assert values[(ll.title, f"{ls.ROW_COLS['leverage']}{row}")] == pytest.approx(hat[i, i], rel=1e-9)
        keep = np.arange(len(used)) != i
        refit, *_ = np.linalg.lstsq(design[keep], response[keep], rcond=None)
        predicted = math.exp(design[i] @ refit)
        assert values[(ll.title, f"{ls.ROW_COLS['loo_tps']}{row}")] == pytest.approx(predicted, rel=1e-9)
        errors.append(abs(s.tps - predicted) / s.tps * 100)
    assert _summary(values, layout, "loo_mape") == pytest.approx(sum(errors) / len(errors), rel=1e-9)
    assert _summary(values, layout, "loo_max") == pytest.approx(max(errors), rel=1e-9)


@pytest.mark.parametrize("engine", ENGINES)
def test_article_is_exactly_identified(engine: str, tmp_path: Path) -> None:
    layout = Layout(lang="en", rows=12)
    expected, analysis = _build(tmp_path / "a.xlsx", layout, DATASETS["article"]())
    values = _check(engine, tmp_path / "a.xlsx", expected)
    assert _summary(values, layout, "status") == "ok"
    assert _summary(values, layout, "dof") == 0
    assert _summary(values, layout, "sigma") is None
    assert _summary(values, layout, "loo_rows") == 0
    assert _summary(values, layout, "loo_verdict") == "insufficient"
    assert _summary(values, layout, "base_tps") == pytest.approx(analysis.calibration.base_tps, rel=1e-9)
    # the chain leaves f(8) unidentified; least squares identifies it through K_len(200)
    assert analysis.calibration.f(8) is None
    assert _coefficients(values, layout)["f(8)"] == pytest.approx(127.39 / (45.45 * 1.358), rel=1e-2)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("dataset", ["sparse", "aliased"])
def test_sparse_and_aliased(dataset: str, engine: str, tmp_path: Path) -> None:
    layout = Layout(lang="zh", rows=12, c_slots=6, l_slots=4, m_slots=3)
    expected, _ = _build(tmp_path / "s.xlsx", layout, DATASETS[dataset]())
    values = _check(engine, tmp_path / "s.xlsx", expected)
    if dataset == "sparse":
        assert _summary(values, layout, "status") == "ok"
        assert _summary(values, layout, "loo_rows") == 11  # off-axis rows leave no row alone in its direction
    else:
        assert _summary(values, layout, "status") == "aliased"
        assert _summary(values, layout, "loo_verdict") == "insufficient"


@pytest.mark.parametrize("engine", ENGINES)
def test_hand_set_base_levels_are_the_reference(engine: str, tmp_path: Path) -> None:
    """Base model-b at max_tokens 100 and concurrency 2, typed on the calibration sheet."""
    layout = Layout(lang="en", rows=30, c_slots=6, l_slots=4, m_slots=3)
    hand_set = {"base_model": MODELS[1], "base_max_tokens": 100, "base_concurrency": 2}
    rows = noisy_factorial(repeats=1)
    built = build_workbook(layout)
    wb = built.wb
    wb.remove(wb[ls.SHEET_TITLES["en"]])
    ws = wb.create_sheet(ls.SHEET_TITLES["en"])
    ls.write_sheet(ws, layout, built.fills)
    for key, value in hand_set.items():
        wb[layout.title("calibration")][f"B{layout.settings_rows[key]}"] = value
    write_rows(wb, layout, rows)
    built.save(tmp_path / "h.xlsx")
    analysis = analyze(rows, Settings(**hand_set, concurrency_slots=6, length_slots=4, model_slots=3))
    values = _check(engine, tmp_path / "h.xlsx", ls.expected_sheet(layout, analysis))
    ll = ls.LsqLayout(layout)
    roles = {(values.get((ll.title, f"C{row}")), values[(ll.title, f"G{row}")])
             for row in range(ll.coef_first, ll.coef_last + 1)}
    assert {(2.0, "base"), (100.0, "base"), (MODELS[1], "base"), (MODELS[0], "identified")} <= roles
    assert _summary(values, layout, "dof") == 24 - 7


# ---------------------------------------------------------------------------
# The reference alone
# ---------------------------------------------------------------------------


def _formula_cells(layout: Layout) -> set[str]:
    ws = Workbook().active
    ls.write_sheet(ws, layout, PendingFills())
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


@pytest.mark.parametrize("dataset", sorted(DATASETS))
def test_every_formula_cell_has_an_expected_value(dataset: str) -> None:
    layout = Layout(lang="en", rows=80)
    analysis = analyze(DATASETS[dataset](), _settings(layout))
    expected = ls.expected_sheet(layout, analysis)
    assert {address for _, address in expected} == _formula_cells(layout)


def test_no_rows_means_no_data() -> None:
    layout = Layout(lang="en", rows=10)
    expected = ls.expected_sheet(layout, analyze([], _settings(layout)))
    title = ls.SHEET_TITLES["en"]
    ll = ls.LsqLayout(layout)
    assert expected[(title, ll.summary_cell("status"))] == "no data"
    assert expected[(title, ll.summary_cell("loo_verdict"))] == "insufficient"
