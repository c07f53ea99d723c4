"""Per-row formulas are stored as xlsx shared formulas, and that loses nothing.

A filled-down column is written as Excel writes one: the first cell holds the formula and
its range, the others only its index. These tests read the file back (openpyxl translates
each shared cell into its own formula, as Excel and LibreOffice do) and compare every cell
with the formula the sheet's template gives that row; and they check that the cells sheet
orders its slots the way the Python reference does, on a second model that appears first
in a later row.
"""

from __future__ import annotations

import copy
import re
import zipfile
from collections.abc import Callable
from pathlib import Path

import openpyxl
import pytest
from openpyxl.worksheet.formula import ArrayFormula
from click.testing import CliRunner
from data.gen import experiment, write_csv

from scm_xl.cli import main
from scm_xl.xlsx.package import sheet_parts
from scm_xl.workbook import consistency_sheet
from scm_xl.workbook.fill import fill
from scm_xl.workbook.formulas import Formulas
from scm_xl.workbook.layout import (
    CELLS_TABLE, CONSISTENCY_COLUMNS, MAX_MODELS, RAW_COLUMNS, WORKINGS_KEYS, WORKINGS_WIDTH, Layout, workings_columns,
)
from scm_xl.workbook.registry import build_workbook
from scm_xl.workbook.io import write_rows
from scm_xl.workbook.stamp import BuiltWorkbook, PendingFills, SharedFormula, shares, write_filled
from scm_xl.workbook.styles import fonts_in_schema_order
from support import books


def _formulas_by_cell(path: Path, title: str) -> dict[str, str]:
    ws = books.sheet(path, title, formulas=True)
    return {cell.coordinate: cell.value for cell in ws.values()
            if isinstance(cell.value, str) and cell.value.startswith("=")}


def test_every_per_row_cell_reads_back_as_its_own_formula(tmp_path: Path) -> None:
    layout = Layout(lang="en", rows=40)
    path = tmp_path / "t.xlsx"
    build_workbook(layout).save(path)
    fx = Formulas(layout)
    checked = 0
    for titles, template, first, letters in (
        ({c.key: layout.title(layout.raw_sheet(c.key)) for c in RAW_COLUMNS}, fx.raw_row, layout.raw_first,
         {c.key: layout.raw_col(c.key) for c in RAW_COLUMNS}),
        ({c.key: layout.title("consistency") for c in CONSISTENCY_COLUMNS},
         lambda row: consistency_sheet.row_formulas(fx, row), layout.cons_first,
         {c.key: layout.cons_col(c.key) for c in CONSISTENCY_COLUMNS}),
    ):
        stored = {title: _formulas_by_cell(path, title) for title in set(titles.values())}
        for row in range(first, first + layout.rows):  # each row's formulas, built for that row
            formulas = template(row)
            for key, text in formulas.items():
                assert stored[titles[key]][f"{letters[key]}{row}"] == text, (titles[key], key, row)
                checked += 1
    assert checked == layout.rows * (len(RAW_COLUMNS) + len(CONSISTENCY_COLUMNS))


def test_the_workings_are_shared_formulas_in_the_file(tmp_path: Path) -> None:
    layout = Layout(lang="en", rows=40)
    path = tmp_path / "t.xlsx"
    build_workbook(layout).save(path)
    with zipfile.ZipFile(path) as book:
        xml = b"".join(book.read(sheet_parts(book)[layout.title(key)]) for key in WORKINGS_KEYS)
    anchors = re.findall(rb'<f t="shared" ref="[A-Z]+2:[A-Z]+41" si="[0-9]+"', xml)
    followers = re.findall(rb'<f t="shared" si="[0-9]+"\s*(?:/>|></f>)', xml)
    plain = re.findall(rb"<f>", xml)
    assert len(anchors) == len(RAW_COLUMNS) and plain == []
    assert len(followers) == len(RAW_COLUMNS) * (layout.rows - 1)


def test_the_workings_sheets_are_narrow() -> None:
    """IronCalc's range scans cost in proportion to the width of the rows they visit: every
    workings sheet holds at most WORKINGS_WIDTH columns, and every workings column has one."""
    widths = [len(workings_columns(key)) for key in WORKINGS_KEYS]
    assert max(widths) <= WORKINGS_WIDTH and sum(widths) == len(RAW_COLUMNS)


def test_a_column_that_is_not_one_relative_formula_is_written_cell_by_cell() -> None:
    ws = openpyxl.Workbook().active
    fills = PendingFills()
    plain = write_filled(ws, fills, {"same": "A", "counted": "B"},
                         lambda row: {"same": f"=C{row}*2", "counted": f"=C{row}+{row}"}, range(2, 6))
    assert plain == ["counted"]
    assert isinstance(ws["A2"].value, SharedFormula) and ws["A2"].value.ref == "A2:A5"
    assert [ws[f"B{row}"].value for row in range(2, 6)] == ["=C2+2", "=C3+3", "=C4+4", "=C5+5"]
    assert shares("=$C2*2", "A2", "A9", "=$C9*2") and not shares("=C$2", "A2", "A3", "=C3")
    # the shared column's middle cells are pending, its last cell holds the sheet's extent
    assert fills.rows(ws, 1) == range(3, 5) and fills.rows(ws, 2) == range(0)
    assert ws["A3"].value is None and isinstance(ws["A5"].value, SharedFormula)


def test_a_built_workbook_is_saved_through_its_builder_only(tmp_path: Path) -> None:
    """openpyxl's own save would leave the pending cells out without a word: it refuses."""
    built = build_workbook(Layout(lang="en", rows=10))
    with pytest.raises(TypeError, match="BuiltWorkbook.save"):
        built.wb.save(tmp_path / "plain.xlsx")
    assert not (tmp_path / "plain.xlsx").exists()


@pytest.mark.parametrize("engine", ["ironcalc", pytest.param("libreoffice", marks=pytest.mark.libreoffice)])
def test_cells_are_listed_by_model_number_then_max_tokens_then_concurrency(engine: str, tmp_path: Path) -> None:
    # model-b appears first, and its cells arrive in no particular order
    rows = [experiment("B1", "model-b", 4, 100, 50.0), experiment("A1", "model-a", 2, 50, 70.0),
            experiment("B2", "model-b", 1, 100, 20.0), experiment("B3", "model-b", 2, 50, 30.0),
            experiment("A2", "model-a", 1, 50, 40.0), experiment("B4", "model-b", 1, 100, 21.0)]
    report = fill(write_csv(tmp_path / "r.csv", rows), output=tmp_path / "r.xlsx", engine=engine, lang="en")
    assert report.verification.ok, report.verification.mismatches[:5]
    layout, values = report.layout, report.verification.values
    cols = [layout.table_col(CELLS_TABLE, key) for key in ("model", "max_tokens", "concurrency")]
    listed = [tuple(values[(layout.title("cells"), f"{col}{row}")] for col in cols)
              for row in range(layout.cells_first, layout.cells_first + 5)]
    assert listed == [("model-b", 50, 2), ("model-b", 100, 1), ("model-b", 100, 4), ("model-a", 50, 1),
                      ("model-a", 50, 2)]


def test_more_models_than_a_workbook_holds_is_a_clear_error(tmp_path: Path) -> None:
    rows = [experiment(f"E{i}", f"model-{i}", 1, 50, 40.0) for i in range(MAX_MODELS + 1)]
    csv = write_csv(tmp_path / "many.csv", rows)
    result = CliRunner().invoke(main, ["fill", str(csv), "-o", str(tmp_path / "many.xlsx")])
    assert result.exit_code == 2, result.output
    assert f"at most {MAX_MODELS}" in result.output and "Traceback" not in result.output
    assert not (tmp_path / "many.xlsx").exists()


def _plain(value: object) -> object:
    return (value.ref, value.text) if isinstance(value, ArrayFormula) else value


def _every_cell_held(built: BuiltWorkbook) -> None:
    """Make every pending cell an openpyxl cell (a shared formula's follower, in its anchor's
    style), as a build did before cells were left pending: what a plain openpyxl save writes."""
    for fill in built.fills._fills:
        ws = fill.anchor.parent
        for row in range(fill.first, fill.last + 1):
            cell = ws.cell(row=row, column=fill.column)
            cell.value = SharedFormula(fill.index)
            cell._style = copy.copy(fill.anchor._style)


def test_the_pending_cells_are_saved_as_openpyxl_would_save_them(tmp_path: Path) -> None:
    """The pending cells written into the XML by BuiltWorkbook.save read back cell for cell as the
    same workbook with every cell an openpyxl cell saved by openpyxl: values, formulas and number
    formats, with typed rows in the same rows as the display formulas."""
    layout = Layout(lang="zh", rows=60)
    rows = [experiment(f"E{i}", "model-a", 2 ** (i % 4), 50 * (1 + i % 3), 40.0 + i) for i in range(25)]
    full, pending = build_workbook(layout), build_workbook(layout)
    for built in (full, pending):
        write_rows(built.wb, layout, rows, clear=False)
    assert pending.fills.rows(pending.wb[layout.title("calc")], 1) == range(layout.raw_first + 1, layout.raw_last)
    _every_cell_held(full)
    fonts_in_schema_order(full.wb)
    openpyxl.Workbook.save(full.wb, tmp_path / "full.xlsx")
    pending.save(tmp_path / "pending.xlsx")
    a, b = openpyxl.load_workbook(tmp_path / "full.xlsx"), openpyxl.load_workbook(tmp_path / "pending.xlsx")
    assert a.sheetnames == b.sheetnames
    compared = 0
    for title in a.sheetnames:
        left, right = a[title], b[title]
        assert (left.max_row, left.max_column) == (right.max_row, right.max_column), title
        for row_a, row_b in zip(left.iter_rows(), right.iter_rows()):
            for x, y in zip(row_a, row_b):
                assert (_plain(x.value), x.number_format, x.fill.fgColor.rgb, x.alignment.wrap_text) == \
                    (_plain(y.value), y.number_format, y.fill.fgColor.rgb, y.alignment.wrap_text), (title, x.coordinate)
                compared += 1
    assert compared > 60 * (len(RAW_COLUMNS) + len(CONSISTENCY_COLUMNS))


def test_values_written_with_the_pending_cells_equal_values_written_over_the_saved_file(tmp_path: Path) -> None:
    """`fill` writes its final file from openpyxl's (sparse) one, the pending cells with their
    values in the same pass; that file is byte for byte the one a second pass over the saved file
    writes: numbers, texts long enough to wrap (their rows' heights), booleans, errors, empty
    results, and cells with no value at all."""
    from scm_xl.engines.base import CellError, cell_position, formula_refs
    from scm_xl.xlsx.cached_values import write_cached_values

    layout = Layout(lang="en", rows=60)
    rows = [experiment(f"E{i}", "model-a", 2 ** (i % 4), 50 * (1 + i % 3), 40.0 + i) for i in range(25)]
    built = build_workbook(layout)
    write_rows(built.wb, layout, rows, clear=False)
    full, sparse = tmp_path / "full.xlsx", tmp_path / "sparse.xlsx"
    fills = built.save(full, sparse=sparse)
    assert sum(fill.last - fill.first + 1 for columns in fills.values() for fill in columns) > 60 * 20
    kinds = [1.5, 0.1 + 0.2, "a note long enough to need more than one line in any column of the sheet " * 2,
             True, CellError("#N/A"), None, 3.0, float("inf"), "short", 7]
    values: dict[str, dict[tuple[int, int], object]] = {}
    for n, (title, refs) in enumerate(formula_refs(full).items()):
        for i, ref in enumerate(refs):
            if ":" not in ref and (i + n) % 11:  # every eleventh cell has no value
                values.setdefault(title, {})[cell_position(ref)] = kinds[(i + n) % len(kinds)]
    one, two = tmp_path / "one_pass.xlsx", tmp_path / "two_passes.xlsx"
    assert write_cached_values(sparse, one, values, fills=fills) == write_cached_values(full, two, values)
    with zipfile.ZipFile(one) as a, zipfile.ZipFile(two) as b:
        assert a.namelist() == b.namelist()
        for name in a.namelist():
            assert a.read(name) == b.read(name), name


def test_the_engine_input_written_by_save_is_the_copy_the_engine_would_make(tmp_path: Path) -> None:
    """`fill` saves IronCalc's input through its `prepare` (no styled empty cells, no conditional
    formats or validations, relative relationship targets), so the worker loads it as it is: member
    for member, the bytes of the copy IronCalc makes of a plain save (`for_ironcalc`)."""
    from scm_xl.engines import ironcalc_worker
    from scm_xl.xlsx.package import STYLED_EMPTY_CELL

    layout = Layout(lang="en", rows=60)
    rows = [experiment(f"E{i}", "model-a", 2 ** (i % 4), 50 * (1 + i % 3), 40.0 + i) for i in range(25)]
    plain, prepared = tmp_path / "plain.xlsx", tmp_path / "prepared.xlsx"
    for path, engine_input in ((plain, None), (prepared, ironcalc_worker.prepare)):
        built = build_workbook(layout)  # one each: openpyxl's save changes what it saves
        write_rows(built.wb, layout, rows, clear=False)
        built.wb[layout.title("raw")]["L5"].comment = openpyxl.comments.Comment("a note", "a person")  # an absolute target
        built.save(path, sparse=path.with_suffix(".sparse"), engine_input=engine_input)
    (tmp_path / "copy").mkdir()
    copy = ironcalc_worker.for_ironcalc(plain, tmp_path / "copy")
    with zipfile.ZipFile(copy) as a, zipfile.ZipFile(prepared) as b, zipfile.ZipFile(plain) as c:
        assert a.namelist() == b.namelist()
        for name in a.namelist():
            if name != "docProps/core.xml":  # the two saves' times
                assert a.read(name) == b.read(name), name
        # and the plain file had what the copy leaves out
        sheets = b"".join(c.read(name) for name in c.namelist() if name.startswith("xl/worksheets/sheet"))
        assert STYLED_EMPTY_CELL.search(sheets) and b"<conditionalFormatting" in sheets
        rels = b"".join(c.read(name) for name in c.namelist() if name.endswith(".rels"))
        assert b'Target="/xl/comments' in rels
    # the final file (no sparse one beside) is never an engine's rewrite: asked so, save refuses
    final = tmp_path / "final.xlsx"
    with pytest.raises(ValueError, match="engine_input"):
        build_workbook(layout).save(final, engine_input=ironcalc_worker.prepare)
    assert not final.exists()


def test_cells_put_in_a_row_land_where_reading_every_cell_whole_puts_them() -> None:
    """`with_cells` reads only each cell's start and column (openpyxl writes r first) and a whole
    cell only where a pending one falls on its column: on rows of every mix (styled empty cells
    both ways, numbers, inline strings that quote a cell's start, formulas, no cells, a cell whose r
    comes second or after a tab), the same row, or the same error, as reading each cell whole."""
    import random

    from scm_xl.xlsx.package import _among_whole_cells, column_name, with_cells

    def cell(col: int, kind: str) -> bytes:
        ref = f"{column_name(col)}5"
        return {"empty": f'<c r="{ref}" s="3"/>', "empty2": f'<c r="{ref}" s="4"></c>',
                "number": f'<c r="{ref}" s="2"><v>1.5</v></c>',
                "text": f'<c r="{ref}" t="inlineStr"><is><t>a &lt;c r="Z9" b</t></is></c>',
                "formula": f'<c r="{ref}"><f>A1*2</f><v></v></c>',
                "r_second": f'<c s="2" r="{ref}"><v>2</v></c>',
                "r_after_a_tab": f'<c\tr="{ref}" s="2"><v>3</v></c>'}[kind].encode()

    def outcome(make: Callable[[], bytes]) -> object:
        try:
            return make()
        except ValueError as exc:
            return ("refused", str(exc))

    rng = random.Random(7)
    kinds = ["empty", "empty2", "number", "text", "formula"]
    for trial in range(600):
        columns = sorted(rng.sample(range(1, 40), rng.randint(0, 12)))
        own = {col: rng.choice(kinds + (["r_second", "r_after_a_tab"] if trial % 10 == 0 else [])) for col in columns}
        extra = [(col, f'<c r="{column_name(col)}5"><f>X</f><v>9</v></c>'.encode())
                 for col in sorted(rng.sample(range(1, 40), rng.randint(1, 5)))]
        body = b"".join(cell(col, kind) for col, kind in own.items())
        row = b'<row r="5" spans="1:40">' + body + b"</row>"
        whole = outcome(lambda: b'<row r="5" spans="1:40">' + _among_whole_cells(body, extra) + b"</row>")
        assert outcome(lambda: with_cells(row, extra)) == whole, (row, extra)


def test_plain_value_cells_are_written_as_openpyxl_writes_them(tmp_path: Path) -> None:
    """A sheet's plain value cells (numbers, text: a large raw sheet's typed inputs) are written
    by `stamp` itself, not openpyxl: the file holds the very bytes openpyxl would have written,
    for text that needs escaping or keeps its spaces, rows with a height of their own, cells
    among styled ones, and the sheet's extent; and the cells are in the workbook again after."""
    from openpyxl.styles import Font

    from scm_xl.workbook.stamp import PLAIN_CELLS_AT_LEAST

    texts = ["plain", " lead", "trail ", "a & b < c > d", "line\nbreak\ttab", "cr\rhere", "=SUM(A1)", "   ",
             "\u4e2d\u6587 text", "quote \" ' ]]>", "emoji \U0001F600"]
    numbers = [0, -0.0, 1, -17, 12.126047822328516, 1e-300, 3.5e20, 123456789012345678, 2.5]
    wb = openpyxl.Workbook()
    ws = wb.active
    ws.title = "Raw"
    other = wb.create_sheet("Other")
    other["B2"] = "few plain cells stay openpyxl's"
    row = 1
    while row * 4 < PLAIN_CELLS_AT_LEAST + 400:
        ws.cell(row=row, column=1, value=texts[row % len(texts)])
        ws.cell(row=row, column=3, value=numbers[row % len(numbers)])
        ws.cell(row=row, column=4 + row % 3, value=float(row) / 7)
        ws.cell(row=row, column=30, value=f"E{row:05d}")
        row += 1
    ws["B5"].font = Font(bold=True)  # a styled cell among them
    ws["B6"] = "styled"
    ws["B6"].font = Font(italic=True)
    ws["A7"].value = "=not a formula"
    ws["A7"].data_type = "s"
    ws["C8"] = True  # a logical: openpyxl's
    ws["C9"] = ""  # empty text: openpyxl's
    ws.row_dimensions[10].height = 30  # a row with a height of its own
    ws.row_dimensions[row + 5].height = 20  # and one with no cell
    expected, written = tmp_path / "openpyxl.xlsx", tmp_path / "stamp.xlsx"
    fonts_in_schema_order(wb)  # as BuiltWorkbook.save orders them
    openpyxl.Workbook.save(wb, expected)
    before = {title: dict(wb[title]._cells) for title in wb.sheetnames}
    BuiltWorkbook(wb, PendingFills()).save(written)
    assert {title: dict(wb[title]._cells) for title in wb.sheetnames} == before
    with zipfile.ZipFile(expected) as a, zipfile.ZipFile(written) as b:
        assert a.namelist() == b.namelist()
        for name in a.namelist():
            if name != "docProps/core.xml":  # its time of saving
                assert a.read(name) == b.read(name), name
    assert openpyxl.load_workbook(written)["Raw"]["A7"].value == "=not a formula"
