"""How scm-xl's sheets print: landscape A4, fitted to the page width or over pages side by side at
a readable size, header rows repeated, and print areas that end at the last filled row. The
one home of the page's size in column widths and of the smallest scale a sheet prints at; each
sheet's writer calls `print_setup` with what its table needs, and the registry calls it once
more for every visible sheet (keeping what the sheet set).
"""

from __future__ import annotations

import math
from typing import cast

from openpyxl import Workbook
from openpyxl.styles import Alignment
from openpyxl.utils import get_column_letter, range_boundaries
from openpyxl.worksheet.properties import PageSetupProperties
from openpyxl.worksheet.worksheet import Worksheet

from scm_xl.workbook.layout import ENTRY_COLUMNS, Layout


# The printable width of a landscape A4 page between print_setup's margins (784 pt), in
# column-width units as LibreOffice prints them (6.3 to 7 pt each): the README's one column
# must fit in it, as fitting to the page width never shrinks a sheet that is one column wide.
PAGE_WIDTH_CHARS = 110
MIN_PRINT_SCALE = 0.7  # a sheet too wide to print this large goes over more pages side by side
ROWS_PER_PAGE = 50  # rows of a landscape A4 page at about MIN_PRINT_SCALE


def pages_for(rows: int) -> int:
    """Pages down for a print area of `rows` rows, so the last page is not one of empty slots."""
    return max(1, math.ceil(rows / ROWS_PER_PAGE))


def print_setup(ws: Worksheet, *, repeat_rows: str | None = None, pages_wide: int | None = None,
                pages_tall: int | None = None, repeat_cols: str | None = None, scale: int | None = None) -> None:
    """Landscape, fitted to the page width (or to `pages_wide` pages side by side, with the
    `repeat_cols` columns on each) and, given `pages_tall`, to that many pages down (a sheet
    whose empty slots would otherwise spill onto a page of their own), header rows repeated,
    an explicit print area. Given `scale` (percent) instead: printed at that size, over the
    pages the sheet's own page breaks make (fitting to pages ignores them). Called again
    (registry does, for every visible sheet) it keeps what the sheet's own call set."""
    ws.page_setup.orientation = "landscape"
    ws.page_setup.paperSize = ws.PAPERSIZE_A4
    if pages_wide is not None or not ws.page_setup.fitToWidth:
        ws.page_setup.fitToWidth = pages_wide or 1
    if pages_tall is not None or ws.page_setup.fitToHeight is None:
        ws.page_setup.fitToHeight = pages_tall or 0  # 0: as many as it takes
    if scale is not None:
        ws.page_setup.scale = scale
    # openpyxl always makes pageSetUpPr; its stubs allow None
    cast(PageSetupProperties, ws.sheet_properties.pageSetUpPr).fitToPage = ws.page_setup.scale is None
    ws.print_options.gridLines = False
    ws.page_margins.left = ws.page_margins.right = 0.4
    ws.page_margins.top = ws.page_margins.bottom = 0.5
    if repeat_rows:
        ws.print_title_rows = repeat_rows
    if repeat_cols:
        ws.print_title_cols = repeat_cols


def trim_print_areas(wb: Workbook, layout: Layout, rows: int, cells: int) -> None:
    """Print what is there: the per-row tables (raw data, consistency, least squares) stop at
    the last of the `rows` filled rows and the replicates table at its last of `cells` cells,
    instead of running on through the empty slots kept for rows typed later (a printed
    block of blank yellow or grey rows, and pages with nothing on them). Called by `fill`,
    which knows the rows; the template keeps every slot. A row typed after the fill prints
    once `scm-xl fill --workbook` has run again (the README says so)."""
    from scm_xl.workbook import lsq_sheet, replicates_sheet

    raw = wb[layout.title("raw")]
    raw.print_area = f"A1:{get_column_letter(len(ENTRY_COLUMNS))}{layout.raw_header_row + max(rows, 1)}"
    # the last printed column (a file path, often long) shrinks into its cell, not past the margin
    path_col = layout.entry_col(ENTRY_COLUMNS[-1].key)
    shrink = Alignment(shrink_to_fit=True)  # one, not one a row (10,000 rows: a tenth of a second each)
    for row in range(layout.raw_first, layout.raw_header_row + rows + 1):
        cell = raw[f"{path_col}{row}"]
        if cell.value is not None:
            cell.alignment = shrink
    for title, slots, used in ((layout.title("consistency"), layout.rows, rows),
                               (lsq_sheet.SHEET_TITLES[layout.lang], layout.rows, rows),
                               (replicates_sheet.SHEET_TITLES[layout.lang], layout.cell_slots, cells)):
        if title not in wb.sheetnames or not wb[title].print_area:
            continue
        ws = wb[title]
        area = str(ws.print_area).split(",")[0].rpartition("!")[2].replace("$", "")
        min_col, min_row, max_col, max_row = (bound or 1 for bound in range_boundaries(area))
        last = max(min_row, max_row - (slots - min(max(used, 1), slots)))
        ws.print_area = f"{get_column_letter(min_col)}{min_row}:{get_column_letter(max_col)}{last}"
