"""The engines a workbook is recalculated on in the tests, as pytest parameters (LibreOffice's
marked `libreoffice`: conftest.py skips it, or fails it in CI, where soffice is missing); the
small workbook every engine is tested on (`write_workbook`) with what it must compute
(`EXPECTED`); the error values a spreadsheet shows in a cell (`ERROR_STRINGS`); what the
engine of a verify computed, read as a recalculation (`computed`); and a verify's reference
against the values a person's LibreOffice session computed and saved (`saved_disagreements`,
`verified_as_saved`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import openpyxl
import pytest
from openpyxl.styles import PatternFill
from openpyxl.workbook.defined_name import DefinedName
from openpyxl.worksheet.formula import ArrayFormula

from scm_xl.engines import CellError
from scm_xl.engines.base import Recalculated

LIBREOFFICE = pytest.param("libreoffice", marks=pytest.mark.libreoffice)
# IronCalc (the default) and LibreOffice: what each sheet's own tests recalculate on.
ENGINES = ["ironcalc", LIBREOFFICE]
# The Python `formulas` engine too, slow on large sheets: the engines' own tests (tests/test_engines.py)
# and the article in tests/test_workbook.py.
ALL_ENGINES = ["formulas", "ironcalc", LIBREOFFICE]

# What a spreadsheet shows in a cell it could not compute (LibreOffice's "Err:" and "###" too).
ERROR_STRINGS = ("#N/A", "#VALUE!", "###", "Err:", "#REF!", "#DIV/0!", "#NAME?", "#NUM!")


def computed(report: Any) -> Recalculated:
    """What the engine computed for every formula cell of the workbook a `verify` (or `fill`)
    checked (`Verification.values`), read as a recalculation is: `.get(sheet, cell)`. The same
    values a second recalculation of that file by that engine gives, without running it again."""
    verification = report.verification
    return Recalculated(verification.engine, verification.values, 0.0)  # type: ignore[arg-type]


def saved_disagreements(report: Any) -> list[str]:
    """A `verify`'s reference against the values saved in the workbook it checked, every formula
    cell compared as verify compares them (`scm_xl.verify.compare`): what disagrees, [] when
    nothing does. A workbook a person's LibreOffice session saved (tests/uno_edit.py: edited,
    recalculated with calculateAll, stored) holds LibreOffice's values, the values
    `verify --engine libreoffice` computes from it again (tests/test_person_edits.py checks that
    once): checked here without a second LibreOffice recalculation. The verify itself (the
    default engine: IronCalc) checks the formulas as the session saved them."""
    from scm_xl.engines.libreoffice import saved_values
    from scm_xl.verify import compare
    from scm_xl.workbook.layout import META_SHEET
    from scm_xl.workbook.registry import expected_cells, own_sheet_titles
    from scm_xl.xlsx.package import workbook_formula_refs

    values = saved_values(report.path, workbook_formula_refs(report.path))
    _, expected = expected_cells(report.layout, report.inputs, analysis=report.analysis)
    found = compare(expected, Recalculated("libreoffice", values, 0.0),
                    set(own_sheet_titles(report.layout)) - {META_SHEET})
    return [str(m) for m in found.mismatches] + [f"unexpected {cell}" for cell in found.unexpected]


def verified_as_saved(path: Path) -> Any:
    """`verify` of a workbook a person's LibreOffice session saved, passed (the default engine
    recalculating the formulas as saved), and LibreOffice's values as saved agreeing with its
    reference (`saved_disagreements`): the report."""
    from scm_xl.workbook.fill import verify

    report = verify(path)
    assert report.verification.ok, [str(m) for m in report.verification.mismatches[:10]]
    assert saved_disagreements(report) == []
    return report


# The workbook every engine is tested on (tests/test_engines.py, tests/test_gnumeric.py).
RAW = "原始数据"
KINDS = ["a", "b", "a", "a", "b", "a", "b", "a", "b", "a", "b"]  # rows 2..12
NUMBERS = [1, 2, None, 4, 5, None, 7, 8, 9, None, 11]  # blank rows on purpose
DOUBLED = [None if n is None else 2.0 * n for n in NUMBERS]
COUNTS = [6.0 if kind == "a" else 5.0 for kind in KINDS]
EXPECTED = {
    **{(RAW, f"C{row}"): value for row, value in enumerate(DOUBLED, start=2)},
    **{(RAW, f"D{row}"): value for row, value in enumerate(COUNTS, start=2)},
    # the same two columns as ordinary per-row formulas, filled down
    **{(RAW, f"E{row}"): value for row, value in enumerate(DOUBLED, start=2)},
    **{(RAW, f"F{row}"): value for row, value in enumerate(COUNTS, start=2)},
    ("Calc", "A1"): 47.0,
    ("Calc", "A2"): 2.0,
    ("Calc", "A3"): -1.0,
    ("Calc", "A4"): CellError("#DIV/0!"),
    ("Calc", "A5"): True,
    ("Calc", "A6"): "total=47",
    ("Calc", "A7"): 8.0,
    ("Calc", "A8"): 1.0,
    ("Calc", "A9"): 94.0,
    ("Calc", "A10"): 11.0,
    ("Calc", "A11"): None,
    ("Calc", "A12"): 45293.0,
    ("Calc", "B1"): False,
    ("Calc", "B2"): True,  # D1 is empty but styled, as openpyxl writes an input cell nobody typed into
    ("Calc", "B3"): False,
}


def write_workbook(path: Path) -> Path:
    book = openpyxl.Workbook()
    raw = book.active
    raw.title = RAW
    raw.append(["kind", "number"])
    for kind, number in zip(KINDS, NUMBERS):
        raw.append([kind, number])
    raw["C2"] = ArrayFormula("C2:C12", '=IF(ISNUMBER(B2:B12),B2:B12*2,"")')
    raw["D2"] = ArrayFormula("D2:D12", "=COUNTIFS(A2:A12,A2:A12)")
    for row in range(2, 13):
        raw[f"E{row}"] = f'=IF(ISNUMBER(B{row}),B{row}*2,"")'
        raw[f"F{row}"] = f"=COUNTIFS($A$2:$A$12,A{row})"
    calc = book.create_sheet("Calc")
    calc["A1"] = f"=SUM('{RAW}'!B2:B12)"
    calc["A2"] = f"={RAW}!B2+1"  # unquoted reference to the Chinese-named sheet
    calc["A3"] = "=IFERROR(1/0,-1)"
    calc["A4"] = "=1/0"
    calc["A5"] = "=A1>10"
    calc["A6"] = '="total="&A1'
    calc["A7"] = f"=_xlfn.MAXIFS('{RAW}'!B2:B12,'{RAW}'!A2:A12,\"a\")"
    calc["A8"] = f"=_xlfn.MINIFS('{RAW}'!B2:B12,'{RAW}'!A2:A12,\"a\")"
    calc["A9"] = "=Total*2"
    calc["A10"] = ArrayFormula("A10", f'=SUM(COUNTIFS(\'{RAW}\'!A2:A12,{{"a","b"}}))')
    calc["A11"] = '=IF(A1>0,"",1)'
    calc["A12"] = "=DATE(2024,1,2)"
    calc["A12"].number_format = "yyyy-mm-dd"  # read back as a datetime, reported as its serial
    calc["B1"] = "=ISBLANK(A1)"
    calc["D1"].fill = PatternFill("solid", fgColor="FFFF00")
    calc["B2"] = "=ISBLANK(D1)"
    calc["B3"] = '=D1<>""'
    calc["C1"] = "not a formula"
    book.defined_names["Total"] = DefinedName("Total", attr_text="Calc!$A$1")
    book.save(path)
    return path
