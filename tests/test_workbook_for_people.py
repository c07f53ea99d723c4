"""The workbook as a person meets it: values any reader sees without recalculating, the answer
on the first sheet, charts, a printout that fits, and no helper columns in the way."""

from __future__ import annotations

import math
import shutil
import subprocess
from pathlib import Path

import pytest

from scm_xl.model import analyze
from scm_xl.results import read_results
from scm_xl.workbook import summary_sheet
from scm_xl.workbook.fill import fill
from scm_xl.workbook.layout import Layout
from scm_xl.workbook.registry import SHEETS
from support import books
from support.engines import ERROR_STRINGS
from support.paths import ARTICLE
from support.printing import to_pdf

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module", params=["en", "zh"])
def article(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Layout]:
    out = tmp_path_factory.mktemp(f"article-{request.param}") / "article.xlsx"
    report = fill(ARTICLE, output=out, engine="ironcalc", lang=request.param)
    assert report.verification.ok
    return out, report.layout


def test_values_are_stored_for_readers_that_do_not_recalculate(article: tuple[Path, Layout]) -> None:
    path, layout = article
    rows = read_results(ARTICLE).rows
    reference = analyze(rows)
    names = layout.defined_names()
    base = names["BaseTPS"]
    verdict = names["Verdict"]
    wb = books.sheets(path, *{layout.title(base.sheet), layout.title(verdict.sheet), layout.title("raw")})
    assert math.isclose(wb[layout.title(base.sheet)][base.address].value, reference.calibration.base_tps,
                        rel_tol=1e-9)
    assert wb[layout.title(verdict.sheet)][verdict.address].value == reference.consistency.verdict
    raw = wb[layout.title("raw")]
    shown = [raw[f"{layout.entry_col('show_tps')}{layout.raw_first + i}"].value for i in range(len(rows))]
    assert shown == pytest.approx([s.tps for s in reference.statuses], rel=1e-9)
    # pandas reads the same numbers
    import pandas as pd  # here: a worker that never runs this test never imports pandas

    frame = pd.read_excel(path, sheet_name=layout.title("raw"))
    assert list(frame.iloc[: len(rows), 8]) == pytest.approx([s.tps for s in reference.statuses], rel=1e-9)


def test_formulas_are_kept_beside_the_values(article: tuple[Path, Layout]) -> None:
    path, layout = article
    base = layout.defined_names()["BaseTPS"]
    assert str(books.sheet(path, layout.title(base.sheet), formulas=True)[base.address].value).startswith("=")


def test_the_workbook_opens_on_the_summary_with_the_verdict(article: tuple[Path, Layout]) -> None:
    path, layout = article
    summary = books.worksheet(path, layout.title("summary"), data_only=True)
    wb = summary.parent
    assert wb.active.title == layout.title("summary")
    assert wb.sheetnames[0] == layout.title("summary")
    assert summary[f"B{summary_sheet.ROWS['verdict']}"].value == "insufficient"
    assert summary[f"B{summary_sheet.ROWS['mape']}"].value == "n/a"
    # the verdict is coloured by value
    rules = [rule for rng in summary.conditional_formatting for rule in rng.rules]
    assert {rule.formula[0] for rule in rules} >= {'"excellent"', '"good"', '"fail"', '"insufficient"'}


def test_charts_have_no_phantom_series_and_no_error_cells(article: tuple[Path, Layout]) -> None:
    path, layout = article
    charts = books.worksheet(path, layout.title("summary"))._charts
    assert len(charts) >= 2
    data = books.sheet(path, layout.title("chart_data"))
    for cell in data.values():  # the one error is #N/A: a point that is not there, which charts skip
        if cell.row >= 2:
            assert not (isinstance(cell.value, str) and cell.value.startswith("#") and cell.value != "#N/A"), \
                cell.coordinate
    for chart in charts:
        for series in chart.series:
            assert series.tx is not None  # every series is named: no "Column L"


def test_workings_are_hidden_and_at_the_end(article: tuple[Path, Layout]) -> None:
    path, layout = article
    outline = books.outline(path)
    sheets = books.sheets(path, layout.title("readme"), layout.title("raw"), formulas=True)
    working = [spec.title(layout.lang) for spec in SHEETS if spec.working]
    for title in working:
        assert outline.sheet_states[title] == "hidden"
    visible = [title for title in outline.sheetnames if outline.sheet_states[title] == "visible"]
    assert all(outline.sheetnames.index(t) > outline.sheetnames.index(visible[-1]) for t in working)
    readme = "\n".join(str(c.value) for c in sheets[layout.title("readme")].values() if c.column == 1 and c.value)
    for title in visible:
        assert title in readme, f"the README does not explain {title}"
    # the raw-data sheet holds inputs and three display columns: no column of helper zeros
    raw = sheets[layout.title("raw")]
    formula_columns = {cell.coordinate.rstrip("0123456789") for cell in raw.values() if 2 <= cell.row <= 3
                       and isinstance(cell.value, str) and cell.value.startswith("=")}
    assert formula_columns == {layout.entry_col(k) for k in ("show_tps", "show_role", "show_status")}


@pytest.mark.libreoffice
def test_the_article_prints_in_at_most_20_pages_with_no_error_strings(article: tuple[Path, Layout],
                                                                      tmp_path: Path) -> None:
    if not shutil.which("pdftotext"):
        pytest.skip("pdftotext (poppler-utils) not installed")
    path, _ = article
    pdf = to_pdf(path, tmp_path)
    info = subprocess.run(["pdfinfo", str(pdf)], capture_output=True, text=True, check=True).stdout
    pages = int(next(line.split()[-1] for line in info.splitlines() if line.startswith("Pages:")))
    assert pages <= 20
    text = subprocess.run(["pdftotext", "-layout", str(pdf), "-"], capture_output=True, text=True,
                          check=True).stdout
    found = [s for s in ERROR_STRINGS if s in text]
    assert not found, found
