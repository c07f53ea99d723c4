"""The workbook's sheets, one registry: building, removing scm-xl's own sheets from a person's
workbook, reading a workbook's layout and verification all loop over `SHEETS`, and nothing else
lists the sheets (tests/test_house.py checks).

Each entry is a `sheet.SheetSpec`: the sheet's titles, its writer and its reference, with the
sheets its reference reads. A sheet module that owns its sheet declares its spec (`SHEET`:
raw_sheet, calibration_sheet, consistency_sheet, derivation_sheet, replicates_sheet, lsq_sheet,
latency_sheet, slo_sheet); the other core sheets (workings, cells), whose geometry is `layout.py`'s and
whose formulas and references are `formulas.py`'s and `expected.py`'s, and the summary and
chart-data sheets (written with other sheets' blocks) have theirs here.

Tab order is the order of `SHEETS`: the sheets a person reads, then the hidden workings. The
reference values are computed in `EXPECTED_ORDER`: that order, each sheet moved after the sheets
it reads.
"""

from __future__ import annotations

import graphlib
from collections.abc import Callable
from pathlib import Path
from typing import cast

from openpyxl import Workbook
from openpyxl.workbook.defined_name import DefinedName
from openpyxl.worksheet.worksheet import Worksheet

from scm_xl.errors import InputError
from scm_xl.model import Analysis, analyze
from scm_xl.workbook import (
    build, calibration_sheet, charts, consistency_sheet, derivation_sheet, expected, io, latency_sheet, lsq_sheet,
    printing, protection, raw_sheet, replicates_sheet, slo_sheet, summary_sheet,
)
from scm_xl.workbook.catalog_tables import CatalogLayout, physics_catalog
from scm_xl.workbook.formulas import Formulas
from scm_xl.workbook.io import Inputs
from scm_xl.workbook.layout import META_SHEET, SHEET_TITLES, WORKINGS_KEYS, Lang, Layout
from scm_xl.workbook.sheet import Building, Checking, SheetSpec, names_on, no_reference
from scm_xl.workbook.stamp import BuiltWorkbook, PendingFills
from scm_xl.workbook.styles import WORKINGS_TAB


def _core(key: str) -> dict[str, str]:
    return {lang: SHEET_TITLES[lang][key] for lang in SHEET_TITLES}


# -- the core sheets' writers and references, each with the one signature of sheet.SheetSpec --

def _write_summary(ws: Worksheet, b: Building) -> dict[str, str]:
    summary_sheet.write_sheet(ws, b.layout, b.fx)
    slo_sheet.write_summary_block(ws, b.layout)
    charts.add_fit_chart(ws, b.wb[b.layout.title("chart_data")], b.layout, summary_sheet.CHART_ANCHOR_COL)
    return names_on(b.layout, "summary")


def _summary(c: Checking) -> None:
    expected.summary(c.exp, c.layout, c.inputs, c.analysis)


def _write_first_principles(ws: Worksheet, b: Building) -> dict[str, str]:
    return build.write_first_principles(ws, b.layout, b.catalog)


def _first_principles(c: Checking) -> None:
    expected.first_principles(c.exp, c.layout, c.inputs, c.analysis)


def _write_readme(ws: Worksheet, b: Building) -> dict[str, str]:
    build.write_readme(ws, b.layout.lang)
    return names_on(b.layout, "readme")


def _workings_writer(key: str) -> Callable[[Worksheet, Building], dict[str, str]]:
    def write(ws: Worksheet, b: Building) -> dict[str, str]:
        build.write_workings_rows(ws, b.layout, b.fx, key, b.fills)
        return names_on(b.layout, key)
    return write


def _workings(c: Checking) -> None:
    """Every workings sheet's cells, in one pass over the rows (on the first sheet's spec)."""
    expected.workings_rows(c.exp, c.layout, c.inputs, c.analysis)


def _write_cells(ws: Worksheet, b: Building) -> dict[str, str]:
    build.write_cells(ws, b.layout, b.fx, b.fills)
    return names_on(b.layout, "cells")


def _cells(c: Checking) -> None:
    expected.cells(c.exp, c.layout, c.inputs, c.analysis)


def _write_chart_data(ws: Worksheet, b: Building) -> dict[str, str]:
    charts.write_sheet(ws, b.layout, b.fills)
    return names_on(b.layout, "chart_data")


def _chart_data(c: Checking) -> None:
    expected.chart_data(c.exp, c.layout, c.inputs, c.analysis)


SHEETS: tuple[SheetSpec, ...] = (
    SheetSpec("summary", _core("summary"), _write_summary, _summary,
              reads=("calibration", "consistency", "derivation", "lsq", "latency")),
    raw_sheet.SHEET,
    calibration_sheet.SHEET,
    consistency_sheet.SHEET,
    derivation_sheet.SHEET,
    replicates_sheet.SHEET,
    lsq_sheet.SHEET,
    latency_sheet.SHEET,
    slo_sheet.SHEET,
    SheetSpec("first_principles", _core("first_principles"), _write_first_principles, _first_principles),
    SheetSpec("readme", _core("readme"), _write_readme, no_reference, inputs="none"),
    # the per-row workings, wrapped onto WORKINGS_SHEETS sheets; the first's reference fills them all
    *(SheetSpec(key, _core(key), _workings_writer(key), _workings if key == WORKINGS_KEYS[0] else no_reference,
                reads=() if key == WORKINGS_KEYS[0] else (WORKINGS_KEYS[0],), working=True, inputs="none")
      for key in WORKINGS_KEYS),
    SheetSpec("cells", _core("cells"), _write_cells, _cells, working=True, inputs="none"),
    SheetSpec("chart_data", _core("chart_data"), _write_chart_data, _chart_data,
              reads=("consistency", "calibration"), working=True),
    slo_sheet.REQUESTS_SHEET,  # its formula cells' reference: the slo sheet's (one pass)
)
BY_KEY = {spec.key: spec for spec in SHEETS}


def _reference_order(sheets: tuple[SheetSpec, ...]) -> tuple[str, ...]:
    """The sheets' keys in tab order, each moved after the sheets its reference reads."""
    sorter: graphlib.TopologicalSorter[str] = graphlib.TopologicalSorter()
    position = {spec.key: i for i, spec in enumerate(sheets)}
    for spec in sheets:
        sorter.add(spec.key, *spec.reads)
    sorter.prepare()
    order: list[str] = []
    while sorter.is_active():
        ready = sorted(sorter.get_ready(), key=position.__getitem__)
        order += ready
        sorter.done(*ready)
    return tuple(order)


EXPECTED_ORDER = _reference_order(SHEETS)


def _absolute(address: str) -> str:
    """"C7" -> "$C$7", "A1:A81" -> "$A$1:$A$81"."""
    def one(cell: str) -> str:
        column = "".join(ch for ch in cell if ch.isalpha())
        return f"${column}${cell[len(column):]}"
    return ":".join(one(part) for part in address.split(":"))


def read_layout(wb: Workbook, path: str | Path) -> Layout:
    """The layout a workbook was built with (its meta sheet: `io.read_meta_layout`), refused where one of
    scm-xl's sheets is missing from it."""
    layout = io.read_meta_layout(wb, path)
    for spec in SHEETS:
        if spec.title(layout.lang) not in wb.sheetnames:
            raise InputError(f"sheet {spec.title(layout.lang)!r} is missing", path=str(path))
    return layout


def load_inputs(path: str | Path) -> Workbook:
    """The workbook at `path` for reading its layout and inputs and nothing else (`io.load` of a
    copy without the formula cells the input readers never read, as each sheet's spec says for
    the layout the workbook declares)."""
    return io.load(path, inputs=input_reads)


def input_reads(layout: Layout | None) -> dict[str, io.SheetRead | int]:
    """What the input readers read of each sheet, by title (`io.InputReads`)."""
    return {title: spec.input_read(layout) for spec in SHEETS for title in spec.titles.values()} | {META_SHEET: "top"}


def own_sheet_titles(layout: Layout) -> list[str]:
    return [spec.title(layout.lang) for spec in SHEETS] + [META_SHEET]


def build_workbook(layout: Layout, into: Workbook | None = None) -> BuiltWorkbook:
    """A fresh calibration workbook, or scm-xl's sheets built at the front of `into`.

    `into` must not hold scm-xl's sheets any more (see `remove_own_sheets`); its other sheets,
    styles and names stay as they are (after scm-xl's visible sheets, before its workings).
    The per-row columns' middle cells are pending (`stamp.PendingFills`): the returned
    `BuiltWorkbook` writes them when it saves, and is the only way to save the workbook."""
    fresh = into is None
    wb = Workbook() if into is None else into
    fills = PendingFills()
    sheets: dict[str, Worksheet] = {}
    for index, spec in enumerate(SHEETS):
        if fresh and index == 0:
            ws = cast(Worksheet, wb.active)  # a fresh Workbook's one worksheet
            assert ws is not None
            ws.title = spec.title(layout.lang)
        else:
            position = index if not spec.working else None  # workings after everything else
            ws = wb.create_sheet(spec.title(layout.lang), index=position)
        sheets[spec.key] = ws
    catalog = CatalogLayout(layout.lang, physics_catalog())
    context = Building(wb, layout, Formulas(layout, catalog), catalog, build.LABELS[layout.lang], fills)
    for spec in SHEETS:
        ws = sheets[spec.key]
        for name, address in spec.write(ws, context).items():
            wb.defined_names[name] = DefinedName(name, attr_text=f"'{ws.title}'!{_absolute(address)}")
        if spec.working:
            ws.sheet_state = "hidden"
            ws.sheet_properties.tabColor = WORKINGS_TAB
        else:
            printing.print_setup(ws)
    protection.protect(wb, [sheets[spec.key].title for spec in SHEETS if spec.key not in protection.UNPROTECTED])
    meta = wb.create_sheet(META_SHEET)
    for i, (key, value) in enumerate(layout.meta().items(), start=1):
        meta.cell(row=i, column=1, value=key)
        meta.cell(row=i, column=2, value=value)
    meta.sheet_state = "hidden"
    first = sheets[SHEETS[0].key].title
    wb.active = wb.sheetnames.index(first)
    for sheet in wb.worksheets:
        sheet.sheet_view.tabSelected = sheet.title == first
    if fresh:
        # Fixed document properties, so the same command builds the same workbook.
        wb.properties.creator = "scm-xl"
        wb.properties.created = build.BUILD_TIMESTAMP
        wb.properties.modified = build.BUILD_TIMESTAMP
    return BuiltWorkbook(wb, fills)


def remove_own_sheets(wb: Workbook, layout: Layout) -> None:
    """Remove scm-xl's sheets and the defined names on them, keeping everything else."""
    titles = set(own_sheet_titles(layout))
    for title in titles:
        if title in wb.sheetnames:
            wb.remove(wb[title])
    for name in list(wb.defined_names):
        text = wb.defined_names[name].attr_text or ""
        sheet = text.split("!")[0].strip("'") if "!" in text else ""
        if sheet in titles:
            del wb.defined_names[name]


def expected_cells(layout: Layout, inputs: Inputs,
                   analysis: Analysis | None = None) -> tuple[Analysis, expected.Expected]:
    """What every formula cell of every sheet should hold (analysis: the reference's, when already run)."""
    analysis = analysis or analyze([row for _, row in inputs.rows], inputs.settings)
    checking = Checking(layout, inputs, analysis)
    for key in EXPECTED_ORDER:
        BY_KEY[key].reference(checking)
    return analysis, checking.exp


def build_template(path: str | Path, *, lang: Lang = "zh", rows: int | None = None) -> Path:
    layout = Layout(lang=lang, rows=rows) if rows else Layout(lang=lang)
    build.save_atomic(build_workbook(layout), path, reproducible=True)
    return Path(path)


__all__ = ["BY_KEY", "EXPECTED_ORDER", "SHEETS", "SheetSpec", "build_template", "build_workbook", "expected_cells",
           "own_sheet_titles", "read_layout", "remove_own_sheets"]
