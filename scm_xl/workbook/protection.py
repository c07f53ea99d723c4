"""Sheet protection: typing over a formula is refused by the spreadsheet program itself.

Every scm-xl sheet but the raw-data sheet is protected without a password (Review > Unprotect
Sheet lifts it, no question asked). A cell styled as an input (`styles.INPUT_FILL`: the Summary's
questions, the calibration overrides, the calculator's and the latency sheet's hand-set cells,
the replicates threshold, the SLO inputs) is unlocked, so a person types there as before; every
other cell stays locked, a spreadsheet's default. The raw-data sheet is never protected: people
insert, delete, sort and type rows there. Column widths and row heights may still be changed.
"""

from __future__ import annotations

from collections.abc import Iterable

from openpyxl import Workbook
from openpyxl.styles import Protection
from openpyxl.worksheet.worksheet import Worksheet

from scm_xl.workbook.styles import INPUT_FILL

UNPROTECTED = ("raw",)  # sheet keys a person edits freely (rows inserted, deleted, sorted, typed)
UNLOCKED = Protection(locked=False)


def is_input(cell: object) -> bool:
    """A cell styled as an input (the pale yellow fill)."""
    fill = getattr(cell, "fill", None)
    return fill is not None and fill.fill_type == "solid" and fill.fgColor.rgb == INPUT_FILL.fgColor.rgb


def protect_sheet(ws: Worksheet) -> None:
    """Protect `ws` without a password, its input cells unlocked."""
    for cell in list(ws._cells.values()):  # the cells the sheet holds, not every address in range
        if is_input(cell):
            cell.protection = UNLOCKED
    ws.protection.sheet = True
    ws.protection.formatColumns = False  # allowed: widen a column,
    ws.protection.formatRows = False  # or a row


def protect(wb: Workbook, titles: Iterable[str]) -> None:
    for title in titles:
        protect_sheet(wb[title])


__all__ = ["UNPROTECTED", "is_input", "protect", "protect_sheet"]
