"""The workbook's sheets, one registry: building, removing scm-xl's own sheets from a person's
workbook, and verification all loop over `SHEETS`.

Each entry names the sheet (title in both languages, where the sheet's own module keeps it),
how to write it (returning the defined names that live on it) and how to compute what its
formula cells must hold. A new sheet is one module and one entry here.

Tab order is the order of `SHEETS`: the sheets a person reads, then the hidden workings. The
reference values are computed in `EXPECTED_ORDER`, each sheet after the sheets it reads.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

from openpyxl import Workbook
from openpyxl.workbook.defined_name import DefinedName
from openpyxl.worksheet.worksheet import Worksheet

from scm_xl.engines.values import CellGrid
from scm_xl.model import Analysis, Calibration, analyze
from scm_xl.workbook import (
    build, charts, expected, latency_sheet, lsq_sheet, printing, protection, replicates_sheet, slo_sheet,
    summary_sheet,
)
from scm_xl.workbook.catalog_tables import CatalogLayout, physics_catalog
from scm_xl.workbook.formulas import Formulas
from scm_xl.workbook.io import Inputs
from scm_xl.workbook.layout import META_SHEET, SHEET_TITLES, WORKINGS_KEYS, Lang, Layout
from scm_xl.workbook.stamp import defer_fills
from scm_xl.workbook.styles import WORKINGS_TAB


@dataclass
class Building:
    """What every sheet writer may need."""

    wb: Workbook
    layout: Layout
    fx: Formulas
    catalog: CatalogLayout
    labels: Mapping[str, str]


@dataclass
class Checking:
    """What every sheet's reference needs, and what the sheets computed before it left."""

    layout: Layout
    inputs: Inputs
    analysis: Analysis
    exp: expected.Expected = field(default_factory=CellGrid)
    chosen: Calibration | None = None  # the calibration the method cell chose (after the lsq sheet)


Writer = Callable[[Worksheet, Building], Mapping[str, str]]  # -> defined name: "A1" on the sheet
Reference = Callable[[Checking], None]


@dataclass(frozen=True)
class SheetSpec:
    key: str
    titles: Mapping[str, str]  # language -> title
    write: Writer
    expected: Reference
    working: bool = False  # hidden workings at the end of the tabs

    def title(self, lang: Lang) -> str:
        return self.titles[lang]


def _core(key: str) -> dict[str, str]:
    return {lang: SHEET_TITLES[lang][key] for lang in SHEET_TITLES}


def _names_on(key: str) -> Callable[[Building], dict[str, str]]:
    """The layout's defined names that live on sheet `key`."""
    def names(b: Building) -> dict[str, str]:
        return {name: cell.address for name, cell in b.layout.defined_names().items() if cell.sheet == key}
    return names


def _core_writer(key: str, write: Callable[[Worksheet, Building], None]) -> Writer:
    def writer(ws: Worksheet, b: Building) -> dict[str, str]:
        write(ws, b)
        return _names_on(key)(b)
    return writer


def _lsq_reference(c: Checking) -> None:
    rows = [sheet_row for sheet_row, _ in c.inputs.rows]
    cells = lsq_sheet.expected_sheet(c.layout, c.analysis, sheet_rows=rows)
    c.exp.update(cells)
    c.chosen = expected.lsq_calibration(c.layout, c.analysis.calibration, cells) \
        if c.analysis.settings.method == "lsq" else c.analysis.calibration


def _latency_reference(c: Checking) -> None:
    c.exp.update(latency_sheet.expected_sheet(c.layout, c.analysis, [row for _, row in c.inputs.rows],
                                              c.inputs.latency, sheet_rows=[r for r, _ in c.inputs.rows]))


def _replicates_reference(c: Checking) -> None:
    rows = [sheet_row for sheet_row, _ in c.inputs.rows]
    c.exp.update(replicates_sheet.expected_sheet(c.layout, c.analysis, slots=c.layout.cell_slots,
                                                 threshold=c.inputs.cv_threshold, sheet_rows=rows))


def _slo_reference(c: Checking) -> None:
    c.exp.update(slo_sheet.expected_sheets(c.layout, c.inputs.slo_typed, c.inputs.slo_data, c.inputs.rows,
                                           c.inputs.inverse.get("target_tps"), c.inputs.slo_capacity))


def _summary_writer(ws: Worksheet, b: Building) -> dict[str, str]:
    summary_sheet.write_sheet(ws, b.layout, b.fx)
    slo_sheet.write_summary_block(ws, b.layout)
    charts.add_fit_chart(ws, b.wb[b.layout.title("chart_data")], b.layout, summary_sheet.CHART_ANCHOR_COL)
    return _names_on("summary")(b)


def _raw_writer(ws: Worksheet, b: Building) -> dict[str, str]:
    """The raw-data sheet, and a defined name for each input column's range."""
    build.write_raw_entry(ws, b.layout, b.fx)
    return {**_names_on("raw")(b), **b.layout.entry_names()}


def _workings_writer(key: str) -> Callable[[Worksheet, Building], None]:
    return lambda ws, b: build.write_workings_rows(ws, b.layout, b.fx, key)


def _first_principles_writer(ws: Worksheet, b: Building) -> dict[str, str]:
    return build.write_first_principles(ws, b.layout, b.catalog)


SHEETS: tuple[SheetSpec, ...] = (
    SheetSpec("summary", _core("summary"), _summary_writer,
              lambda c: expected.summary(c.exp, c.layout, c.inputs, c.analysis)),
    SheetSpec("raw", _core("raw"), _raw_writer,
              lambda c: expected.display(c.exp, c.layout, c.inputs)),
    SheetSpec("calibration", _core("calibration"),
              _core_writer("calibration", lambda ws, b: build.write_calibration(ws, b.layout, b.fx, b.labels)),
              lambda c: expected.calibration(c.exp, c.layout, c.analysis, c.inputs)),
    SheetSpec("consistency", _core("consistency"),
              _core_writer("consistency", lambda ws, b: build.write_consistency(ws, b.layout, b.fx, b.labels)),
              lambda c: expected.consistency(c.exp, c.layout, c.inputs, c.analysis)),
    SheetSpec("derivation", _core("derivation"),
              _core_writer("derivation", lambda ws, b: build.write_derivation(ws, b.layout, b.fx, b.labels)),
              lambda c: expected.derivation(c.exp, c.layout, c.inputs, c.analysis,
                                            c.chosen or c.analysis.calibration)),
    SheetSpec("replicates", replicates_sheet.SHEET_TITLES,
              lambda ws, b: replicates_sheet.write_sheet(ws, b.layout, slots=b.layout.cell_slots),
              _replicates_reference),
    SheetSpec("lsq", lsq_sheet.SHEET_TITLES, lambda ws, b: lsq_sheet.write_sheet(ws, b.layout), _lsq_reference),
    SheetSpec("latency", latency_sheet.SHEET_TITLES, lambda ws, b: latency_sheet.write_sheet(ws, b.layout),
              _latency_reference),
    SheetSpec("slo", slo_sheet.SHEET_TITLES, lambda ws, b: slo_sheet.write_sheet(ws, b.layout), _slo_reference),
    SheetSpec("first_principles", _core("first_principles"), _first_principles_writer,
              lambda c: expected.first_principles(c.exp, c.layout, c.inputs, c.analysis)),
    SheetSpec("readme", _core("readme"), _core_writer("readme", lambda ws, b: build.write_readme(ws, b.layout.lang)),
              lambda c: None),
    # the per-row workings, wrapped onto WORKINGS_SHEETS sheets; the first's reference fills them all
    *(SheetSpec(key, _core(key), _core_writer(key, _workings_writer(key)),
                (lambda c: expected.workings_rows(c.exp, c.layout, c.inputs, c.analysis)) if key == "calc"
                else lambda c: None, working=True)
      for key in WORKINGS_KEYS),
    SheetSpec("cells", _core("cells"), _core_writer("cells", lambda ws, b: build.write_cells(ws, b.layout, b.fx)),
              lambda c: expected.cells(c.exp, c.layout, c.inputs, c.analysis), working=True),
    SheetSpec("chart_data", _core("chart_data"), _core_writer("chart_data", lambda ws, b: charts.write_sheet(ws, b.layout)),
              lambda c: expected.chart_data(c.exp, c.layout, c.inputs, c.analysis), working=True),
    SheetSpec("requests", slo_sheet.REQUESTS_TITLES,
              lambda ws, b: slo_sheet.write_requests_sheet(ws, b.layout),
              lambda c: None, working=True),  # its formula cells' reference: the slo sheet's (one pass)
)
BY_KEY = {spec.key: spec for spec in SHEETS}
EXPECTED_ORDER = (*WORKINGS_KEYS, "cells", "calibration", "consistency", "lsq", "latency", "replicates", "derivation",
                  "first_principles", "raw", "summary", "chart_data", "readme", "slo", "requests")
assert sorted(EXPECTED_ORDER) == sorted(BY_KEY)


def _absolute(address: str) -> str:
    """"C7" -> "$C$7", "A1:A81" -> "$A$1:$A$81"."""
    def one(cell: str) -> str:
        column = "".join(ch for ch in cell if ch.isalpha())
        return f"${column}${cell[len(column):]}"
    return ":".join(one(part) for part in address.split(":"))


def own_sheet_titles(layout: Layout) -> list[str]:
    return [spec.title(layout.lang) for spec in SHEETS] + [META_SHEET]


def build_workbook(layout: Layout, into: Workbook | None = None, *, deferred: bool = False) -> Workbook:
    """A fresh calibration workbook, or scm-xl's sheets built at the front of `into`.

    `into` must not hold scm-xl's sheets any more (see `remove_own_sheets`); its other sheets,
    styles and names stay as they are (after scm-xl's visible sheets, before its workings).
    deferred: the per-row columns' middle cells are written by `stamp.save_workbook`, which
    must then save the workbook (`stamp.defer_fills`)."""
    fresh = into is None
    wb = Workbook() if into is None else into
    if deferred:
        defer_fills(wb)
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
    context = Building(wb, layout, Formulas(layout, catalog), catalog, build.LABELS[layout.lang])
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
    return wb


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
        BY_KEY[key].expected(checking)
    return analysis, checking.exp


def build_template(path: str | Path, *, lang: Lang = "zh", rows: int | None = None) -> Path:
    layout = Layout(lang=lang, rows=rows) if rows else Layout(lang=lang)
    build.save_atomic(build_workbook(layout, deferred=True), path, reproducible=True)
    return Path(path)


__all__ = ["BY_KEY", "SHEETS", "SheetSpec", "build_template", "build_workbook", "expected_cells",
           "own_sheet_titles", "remove_own_sheets"]
