"""Edit xlsx files as a person does in LibreOffice, through its own scripting bridge (UNO).

Run with the system Python that has python3-uno (`/usr/bin/python3`), not the project's venv:

    /usr/bin/python3 tests/uno_edit.py JOBS.json

JOBS.json is a list of {"in": path, "out": path, "sheet": title, "edits": [...]}; each edit is
  {"delete_row": N}                      delete sheet row N (1-based), as Delete Rows does
  {"insert_row": N}                      insert an empty row before sheet row N
  {"set": "B7", "value": 3}              type a number (or {"text": "8"} for text) into a cell
  {"sort": "A2:AA40", "column": 2, "ascending": false}   Data > Sort on a range by its k-th column (0-based)
  {"type": "B27", "value": 130}          type as a person does: refused (left as it is) when the sheet is
                                         protected and the cell locked, as LibreOffice's own protection
                                         says (XProtectable.isProtected, CellProtection.IsLocked); else set.
                                         What happened goes to the job's "report" file (a JSON list of
                                         {"cell", "protected", "locked", "refused", "before", "after"})
Each file is opened, edited, recalculated (calculateAll, as on load) and saved as xlsx, in
one LibreOffice process with a private profile.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import uno  # type: ignore[import-not-found]
from com.sun.star.beans import PropertyValue  # type: ignore[import-not-found]
from com.sun.star.connection import NoConnectException  # type: ignore[import-not-found]


def _prop(name: str, value: object) -> PropertyValue:
    p = PropertyValue()
    p.Name = name
    p.Value = value
    return p


def _connect(pipe: str, deadline: float):  # type: ignore[no-untyped-def]
    local = uno.getComponentContext()
    resolver = local.ServiceManager.createInstanceWithContext("com.sun.star.bridge.UnoUrlResolver", local)
    while True:
        try:
            return resolver.resolve(f"uno:pipe,name={pipe};urp;StarOffice.ComponentContext")
        except NoConnectException:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def _sort(sheet, address: str, column: int, ascending: bool) -> None:  # type: ignore[no-untyped-def]
    from com.sun.star.table import TableSortField  # type: ignore[import-not-found]

    cells = sheet.getCellRangeByName(address)
    field = TableSortField()
    field.Field = column
    field.IsAscending = ascending
    descriptor = cells.createSortDescriptor()
    for prop in descriptor:
        if prop.Name == "SortFields":
            prop.Value = uno.Any("[]com.sun.star.table.TableSortField", (field,))
        if prop.Name == "ContainsHeader":
            prop.Value = False
    cells.sort(descriptor)


def _type(sheet, edit: dict) -> dict:  # type: ignore[no-untyped-def]
    """Type into a cell unless LibreOffice's sheet protection locks it; what happened."""
    cell = sheet.getCellRangeByName(edit["type"])
    protected, locked = bool(sheet.isProtected()), bool(cell.CellProtection.IsLocked)
    before = cell.getFormula()
    refused = protected and locked
    if not refused:
        if "text" in edit:
            cell.setString(edit["text"])
        else:
            cell.setValue(edit["value"])
    return {"cell": edit["type"], "protected": protected, "locked": locked, "refused": refused,
            "before": before, "after": cell.getFormula()}


def _edit(doc, job: dict) -> None:  # type: ignore[no-untyped-def]
    sheet = doc.Sheets.getByName(job["sheet"])
    report = []
    for edit in job["edits"]:
        if "delete_row" in edit:
            sheet.Rows.removeByIndex(edit["delete_row"] - 1, 1)
        elif "insert_row" in edit:
            sheet.Rows.insertByIndex(edit["insert_row"] - 1, 1)
        elif "set" in edit:
            cell = sheet.getCellRangeByName(edit["set"])
            if "text" in edit:
                cell.setString(edit["text"])
            else:
                cell.setValue(edit["value"])
        elif "sort" in edit:
            _sort(sheet, edit["sort"], edit["column"], edit.get("ascending", True))
        elif "type" in edit:
            report.append(_type(sheet, edit))
        else:
            raise ValueError(f"unknown edit {edit!r}")
    doc.calculateAll()
    if "report" in job:
        Path(job["report"]).write_text(json.dumps(report))


def main(jobs_path: str) -> int:
    jobs = json.loads(Path(jobs_path).read_text())
    soffice = os.environ.get("SOFFICE", "soffice")
    with tempfile.TemporaryDirectory(prefix="scm-xl-uno-") as folder:
        pipe = f"scmxl{os.getpid()}"
        profile = Path(folder, "profile").as_uri()
        process = subprocess.Popen(
            [soffice, f"-env:UserInstallation={profile}", "--headless", "--invisible", "--norestore",
             "--nologo", "--nodefault", f"--accept=pipe,name={pipe};urp;"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            ctx = _connect(pipe, time.monotonic() + 60)
            desktop = ctx.ServiceManager.createInstanceWithContext("com.sun.star.frame.Desktop", ctx)
            for job in jobs:
                doc = desktop.loadComponentFromURL(Path(job["in"]).resolve().as_uri(), "_blank", 0,
                                                   (_prop("Hidden", True),))
                try:
                    _edit(doc, job)
                    doc.storeToURL(Path(job["out"]).resolve().as_uri(),
                                   (_prop("FilterName", "Calc MS Excel 2007 XML"),))
                finally:
                    doc.close(True)
            try:
                desktop.terminate()
            except Exception:  # the bridge drops as soffice exits
                pass
        finally:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
