"""The workbook: filled with real data, recalculated by each engine, compared with the reference.

Each (data set, engine) pair is filled once per module; the other tests copy
those files, edit them as a person would with openpyxl, and verify again.
"""

from __future__ import annotations

import shutil
import zipfile
from collections.abc import Callable
from pathlib import Path

import openpyxl
import pytest
from click.testing import CliRunner
from data.gen import full_factorial, sparse_design, with_exclusions, write_csv
from openpyxl.utils import range_boundaries
from openpyxl.worksheet.formula import ArrayFormula
from openpyxl.worksheet.worksheet import Worksheet

from scm_xl.cli import main
from scm_xl.report_texts import words
from scm_xl.report import render_verification
from scm_xl.verify import Verification
from scm_xl.workbook import summary_sheet
from scm_xl.workbook.fill import WorkbookReport, fill, verify
from scm_xl.workbook.registry import read_layout
from scm_xl.workbook.layout import (
    CONCURRENCY_TABLE, CONSISTENCY_COLUMNS, INVERSE_TABLE, LENGTH_TABLE, META_SHEET, MODEL_TABLE,
    RAW_FORMULA_KEYS, Layout,
)
from support import books
from support.engines import computed
from support.paths import ARTICLE

ROOT = Path(__file__).parent.parent
TEMPLATE = ROOT / "templates" / "SCM_系数标定_模板.xlsx"
ENGINES = ["ironcalc", pytest.param("libreoffice", marks=pytest.mark.libreoffice)]
# The pure-Python formulas engine compiles every formula on its own: minutes on a per-row layout,
# so it verifies the article (every sheet, every formula idiom) rather than every data set, and
# that in .ci/run's second step (the `minutes` marker: some 100 CPU-seconds), not the quick suite.
SLOW_ENGINE = "formulas"
DATASETS = ["article", "factorial", "sparse", "exclusions"]
KEY_NAMES = ("BaseTPS", "MAPE", "Verdict", "CheckRows", "ForwardTPS", "RecommendedConcurrency", "RecommendedTPS")
# Defined names of the inputs (name -> its key in summary_sheet.INPUTS): typed on the Summary, the
# named derivation cells are formulas that read the Summary's input cell. Every defined name is a formula.
INPUT_NAMES = {"ForwardConcurrency": "forward.concurrency", "ForwardMaxTokens": "forward.max_tokens",
               "ForwardModel": "forward.model", "ForwardPromptTokens": "forward.prompt_tokens",
               "TargetTPS": "inverse.target_tps", "TargetMaxTokens": "inverse.max_tokens", "TargetModel": "inverse.model",
               "MaxLatencyP95": "inverse.max_latency", "TargetPromptTokens": "inverse.prompt_tokens"}

Filled = Callable[[str, str], WorkbookReport]


@pytest.fixture(scope="module")
def csvs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("csv")
    return {
        "article": ARTICLE,
        "factorial": write_csv(folder / "factorial.csv", full_factorial()),
        "sparse": write_csv(folder / "sparse.csv", sparse_design()),
        "exclusions": write_csv(folder / "exclusions.csv", with_exclusions()),
    }


@pytest.fixture(scope="module")
def filled(tmp_path_factory: pytest.TempPathFactory, csvs: dict[str, Path]) -> Filled:
    """fill(data set, engine), done once per module: fill recalculates and verifies with the engine."""
    done: dict[tuple[str, str], WorkbookReport] = {}

    def get(dataset: str, engine: str) -> WorkbookReport:
        if (dataset, engine) not in done:
            out = tmp_path_factory.mktemp(f"{dataset}-{engine}") / f"{dataset}.xlsx"
            done[(dataset, engine)] = fill(csvs[dataset], output=out, engine=engine)
        return done[(dataset, engine)]

    return get


def copy_of(report: WorkbookReport, tmp_path: Path) -> Path:
    path = tmp_path / "edited.xlsx"
    shutil.copy(report.path, path)
    return path


def sheet_and_cell(layout: Layout, name: str) -> tuple[str, str]:
    cell = layout.defined_names()[name]
    return layout.title(cell.sheet), cell.address


def is_formula(value: object) -> bool:
    return isinstance(value, ArrayFormula) or (isinstance(value, str) and value.startswith("="))


def raw_row_of(ws: Worksheet, layout: Layout, exp_id: str) -> int:
    col = layout.entry_col("exp_id")
    return next(r for r in range(layout.raw_first, layout.raw_last + 1) if ws[f"{col}{r}"].value == exp_id)


# --- every data set, every engine ---------------------------------------------------

FILL_CASES = ([(d, "ironcalc") for d in DATASETS]
              + [pytest.param("article", SLOW_ENGINE, marks=pytest.mark.minutes)]
              + [pytest.param(d, "libreoffice", marks=pytest.mark.libreoffice) for d in DATASETS])


@pytest.mark.parametrize("dataset,engine", FILL_CASES)
def test_fill_verifies(dataset: str, engine: str, filled: Filled) -> None:
    report = filled(dataset, engine)
    v = report.verification
    assert v.engine == engine
    assert v.ok, render_verification(v)
    assert v.cells_compared > 1000
    assert report.analysis.statuses  # the reference saw the rows
    assert len(report.inputs.rows) == len(report.analysis.checks)


def test_generated_data_sets_exercise_what_they_are_for(filled: Filled) -> None:
    factorial = filled("factorial", "ironcalc").analysis
    assert factorial.consistency.check_rows > 10
    assert len(factorial.calibration.models) == 2
    assert factorial.calibration.base_rows == 2  # replicated base point
    sparse = filled("sparse", "ironcalc").analysis
    assert sparse.consistency.check_rows == 4
    exclusions = filled("exclusions", "ironcalc").analysis
    codes = {s.exp_id: s.reason_code for s in exclusions.statuses if s.reason_code}
    assert sorted(codes.values()) == ["fault", "fault", "manual_exclude", "manual_include", "mono"]
    article = filled("article", "ironcalc").analysis
    assert article.consistency.verdict == "insufficient"


@pytest.mark.parametrize("dataset", DATASETS)
def test_key_cells_are_defined_names_holding_formulas(dataset: str, filled: Filled) -> None:
    path = filled(dataset, "ironcalc").path
    names = books.outline(path).defined_names
    layout = books.layout(path)
    sheets = books.sheets(path, *{sheet_and_cell(layout, name)[0] for name in layout.defined_names()},
                          formulas=True)
    for name in KEY_NAMES:
        assert name in names, name
        assert names[name] == layout.name_ref(name)
    for name in layout.defined_names():
        assert name in names, name
        sheet, address = sheet_and_cell(layout, name)
        value = sheets[sheet][address].value
        assert is_formula(value), f"{name} ({sheet}!{address}) holds {value!r}, not a formula"
        if name in INPUT_NAMES:
            assert summary_sheet.input_ref(layout, INPUT_NAMES[name]) in value, name


@pytest.mark.parametrize("dataset", ["article", "exclusions"])
def test_every_computed_cell_of_the_layout_holds_a_formula(dataset: str, filled: Filled) -> None:
    path = filled(dataset, "ironcalc").path
    wb = openpyxl.load_workbook(path)
    lo = read_layout(wb, path)

    def plain(sheet_key: str, address: str) -> None:
        value = wb[lo.title(sheet_key)][address].value
        assert is_formula(value), f"{lo.title(sheet_key)}!{address} holds {value!r}"

    def per_row(sheet_key: str, col: str, first: int, last: int) -> None:
        """One ordinary formula in every row: nothing a person could not insert a row through."""
        ws = wb[lo.title(sheet_key)]
        for r in range(first, last + 1):
            value = ws[f"{col}{r}"].value
            assert isinstance(value, str) and value.startswith("="), f"{ws.title}!{col}{r} holds {value!r}"

    for key in RAW_FORMULA_KEYS:
        per_row("calc", lo.raw_col(key), lo.raw_first, lo.raw_last)
    for key in ("show_tps", "show_role", "show_status"):
        per_row("raw", lo.entry_col(key), lo.raw_first, lo.raw_last)
    for row in lo.settings_rows.values():
        plain("calibration", f"C{row}")
    plain("calibration", f"C{lo.base_tps_row}")
    plain("calibration", f"C{lo.base_rows_row}")
    for table, first, slots in ((CONCURRENCY_TABLE, lo.c_table_first, lo.c_slots),
                                (LENGTH_TABLE, lo.l_table_first, lo.l_slots),
                                (MODEL_TABLE, lo.m_table_first, lo.m_slots)):
        for column in table:
            for row in range(first, first + slots):
                plain("calibration", f"{lo.table_col(table, column.key)}{row}")
    for row in lo.summary_rows.values():
        plain("consistency", f"B{row}")
    for column in CONSISTENCY_COLUMNS:
        per_row("consistency", lo.cons_col(column.key), lo.cons_first, lo.cons_last)
    fw, inv = lo.forward_rows, lo.inverse_rows
    for address in (f"C{fw['concurrency']}", f"C{fw['max_tokens']}", f"C{fw['model']}", f"D{fw['model']}",
                    f"B{fw['tps']}", f"B{fw['missing']}", f"C{inv['max_tokens']}", f"C{inv['model']}",
                    f"D{inv['model']}", f"B{inv['concurrency']}", f"B{inv['tps']}", f"B{inv['best_tps']}",
                    f"B{inv['best_concurrency']}"):
        plain("derivation", address)
    for column in INVERSE_TABLE:
        for row in range(lo.inverse_table_first, lo.inverse_table_first + lo.c_slots):
            # the measured-latency median is a one-cell array formula: MEDIAN(IF(...))
            value = wb[lo.title("derivation")][f"{lo.table_col(INVERSE_TABLE, column.key)}{row}"].value
            assert is_formula(value)
    # no multi-cell array formula anywhere a person edits
    for ws in wb.worksheets:
        for row in ws.iter_rows():
            for cell in row:
                if isinstance(cell.value, ArrayFormula):
                    assert range_boundaries(cell.value.ref)[1] == range_boundaries(cell.value.ref)[3] \
                        or ws.title not in (lo.title("raw"), lo.title("consistency"), lo.title("calc")), \
                        f"{ws.title}!{cell.value.ref}"


# --- a person edits the workbook ----------------------------------------------------

@pytest.mark.parametrize("engine", ENGINES)
def test_hand_edits_flow_through(engine: str, filled: Filled, tmp_path: Path) -> None:
    path = copy_of(filled("article", "ironcalc"), tmp_path)
    wb = openpyxl.load_workbook(path)
    lo = read_layout(wb, path)
    raw = wb[lo.title("raw")]
    e01 = raw_row_of(raw, lo, "E01")
    assert raw[f"{lo.entry_col('total_time_s')}{e01}"].value == 0.55
    raw[f"{lo.entry_col('total_time_s')}{e01}"] = 0.5  # the base point: BaseTPS becomes 25 / 0.5
    new = lo.raw_first + 7  # the next empty row after E01..E07
    assert raw[f"{lo.entry_col('exp_id')}{new}"].value is None
    typed = {"exp_id": "E08", "concurrency": 8, "requests_per_slot": 10, "total_requests": 80,
             "max_tokens": 50, "model": "Qwen2.5-7B", "total_time_s": 1.25, "total_output_tokens": 400}
    for key, value in typed.items():
        raw[f"{lo.entry_col(key)}{new}"] = value
    wb.save(path)

    report = verify(path, engine=engine)
    assert report.verification.ok, render_verification(report.verification)
    assert report.verification.engine == engine

    values = computed(report)  # the engine's values of every formula cell, from verify's recalculation
    assert values.get(*sheet_and_cell(lo, "BaseTPS")) == pytest.approx(50.0)
    assert values.get(lo.title("raw"), f"{lo.entry_col('show_tps')}{e01}") == pytest.approx(50.0)
    assert values.get(lo.title("raw"), f"{lo.entry_col('show_tps')}{new}") == pytest.approx(320.0)
    # E08 identifies f(8) = 320 / 50, so E07 (concurrency 8, max_tokens 200) becomes a check row
    assert values.get(*sheet_and_cell(lo, "CheckRows")) == 1.0
    cons_e07 = lo.cons_first + (raw_row_of(raw, lo, "E07") - lo.raw_first)
    assert values.get(lo.title("consistency"), f"{lo.cons_col('role')}{cons_e07}") == "check"
    assert values.get(lo.title("consistency"), f"{lo.cons_col('exp_id')}{new - lo.raw_first + lo.cons_first}") \
        == "E08"
    assert report.analysis.consistency.check_rows == 1


@pytest.fixture(scope="module", params=ENGINES)
def corrupted(request: pytest.FixtureRequest, filled: Filled,
              tmp_path_factory: pytest.TempPathFactory) -> tuple[Layout, Verification]:
    """The article's workbook with formula cells broken by hand, verified once per engine.

    Verdict: a wrong formula. The predicted-TPS column: a wrong formula filled down.
    MAPE: typed over with a constant (nothing depends on it once Verdict is broken).
    """
    path = copy_of(filled("article", "ironcalc"), tmp_path_factory.mktemp("corrupted"))
    wb = openpyxl.load_workbook(path)
    lo = read_layout(wb, path)
    sheet, address = sheet_and_cell(lo, "Verdict")
    assert is_formula(wb[sheet][address].value)
    wb[sheet][address] = '="excellent"'  # the article data has no check rows: insufficient
    ws = wb[lo.title("consistency")]
    col = lo.cons_col("predicted")
    for row in range(lo.cons_first, lo.cons_last + 1):
        ws[f"{col}{row}"] = ws[f"{col}{row}"].value.replace("/", "*1.01/", 1)
    sheet, address = sheet_and_cell(lo, "MAPE")
    wb[sheet][address] = 0
    wb.save(path)
    return lo, verify(path, engine=request.param).verification


def test_a_wrong_formula_is_a_mismatch_naming_the_cell(corrupted: tuple[Layout, Verification]) -> None:
    lo, v = corrupted
    assert not v.ok
    sheet, address = sheet_and_cell(lo, "Verdict")
    assert [(m.expected, m.actual) for m in v.mismatches if (m.sheet, m.cell) == (sheet, address)] == \
        [("insufficient", "excellent")]
    assert f"'{sheet}'!{address}: workbook 'excellent', reference 'insufficient'" in render_verification(v)


def test_a_wrong_formula_filled_down_names_each_of_its_cells(corrupted: tuple[Layout, Verification]) -> None:
    lo, v = corrupted
    col = lo.cons_col("predicted")
    wrong = sorted(int(m.cell[len(col):]) for m in v.mismatches
                   if m.sheet == lo.title("consistency") and m.cell.rstrip("0123456789") == col)
    assert wrong == [lo.cons_first + i for i in range(5)]  # E01..E05 have predictions; E06, E07 do not


def test_a_formula_typed_over_with_a_constant_is_reported(corrupted: tuple[Layout, Verification]) -> None:
    lo, v = corrupted
    sheet, address = sheet_and_cell(lo, "MAPE")
    assert f"'{sheet}'!{address}" in render_verification(v)


# --- the template -----------------------------------------------------------------------

def build(tmp_path: Path, *args: str) -> Path:
    out = tmp_path / "built.xlsx"
    result = CliRunner().invoke(main, ["build", "template", "-o", str(out), *args])
    assert result.exit_code == 0, result.output
    lang = args[args.index("--lang") + 1] if "--lang" in args else "en"
    assert words(lang)["wrote"].format(path=out) in result.output  # in the workbook's language
    return out


def parts(path: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(path) as zf:
        return {name: zf.read(name) for name in zf.namelist()}


def test_committed_template_is_what_build_template_builds(tmp_path: Path) -> None:
    built, committed = parts(build(tmp_path, "--lang", "zh")), parts(TEMPLATE)
    assert sorted(built) == sorted(committed)
    assert [name for name in built if built[name] != committed[name]] == []


def test_template_english_sheet_names(tmp_path: Path) -> None:
    path = build(tmp_path, "--lang", "en")
    outline = books.outline(path)
    assert outline.sheetnames[:5] == ["Summary", "RawData", "Calibration", "Consistency", "Derivation"]
    assert outline.sheet_states[META_SHEET] == "hidden"
    assert outline.defined_names["BaseTPS"] == Layout(lang="en").name_ref("BaseTPS")
    assert books.sheet(path, "RawData", formulas=True)["A1"].value == "exp_id"


def test_template_default_follows_a_chinese_locale(tmp_path: Path) -> None:
    out = tmp_path / "built.xlsx"
    result = CliRunner().invoke(main, ["build", "template", "-o", str(out)],
                                env={"LC_ALL": "", "LC_MESSAGES": "", "LANG": "zh_CN.UTF-8"})
    assert result.exit_code == 0, result.output
    outline = books.outline(out)
    assert outline.sheetnames[:5] == ["总览", "原始数据", "系数标定", "自洽检验", "双向推导"]
    assert outline.sheet_states[META_SHEET] == "hidden"


@pytest.mark.parametrize("rows", [25, 300])
def test_template_rows_resizes_every_column_formula(rows: int, tmp_path: Path) -> None:
    path = build(tmp_path, "--rows", str(rows), "--lang", "en")
    lo = books.layout(path)
    assert lo.rows == rows
    wb = books.sheets(path, lo.title("calc"), "Consistency", formulas=True)
    calc = wb[lo.title("calc")]
    for key in RAW_FORMULA_KEYS:
        col = lo.raw_col(key)
        assert str(calc[f"{col}{rows + 1}"].value).startswith("=")  # the last covered row
        assert calc[f"{col}{rows + 2}"].value is None
    col = lo.cons_col("role")
    last = lo.cons_first + rows - 1
    assert str(wb["Consistency"][f"{col}{last}"].value).startswith("=")
    assert wb["Consistency"][f"{col}{last + 1}"].value is None
    count_checks = wb["Consistency"][f"B{lo.summary_rows['check_rows']}"].value
    assert f"${col}${lo.cons_first}:${col}${last}" in count_checks


@pytest.mark.parametrize("engine", [*ENGINES, pytest.param(SLOW_ENGINE, marks=pytest.mark.minutes)])
def test_article_answers_are_live_in_the_workbook(engine: str, filled: Filled) -> None:
    """The article's table, forward and inverse answers, read from the named cells as the
    engine recalculated them during fill."""
    report = filled("article", engine)
    assert report.verification.ok
    values = report.verification.values
    names = books.outline(report.path).defined_names

    def named(name: str) -> object:
        sheet, cell = names[name].split("!")
        return values[(sheet.strip("'"), cell.replace("$", ""))]

    assert round(named("BaseTPS"), 2) == 45.45
    assert round(named("ForwardTPS"), 2) == 59.52  # concurrency 2, max_tokens 100
    assert named("RecommendedConcurrency") == 2  # 100 TPS at max_tokens 50
    assert round(named("RecommendedTPS"), 2) == 119.05
    assert named("CheckRows") == 0 and named("Verdict") == "insufficient"
