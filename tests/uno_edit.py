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
one LibreOffice: the suite's running one when $SCM_XL_TEST_SOFFICE_PIPE names it
(tests/support/soffice_forward.py; conftest's `libreoffice_server`), else a LibreOffice started
here with a private profile.
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

from support.soffice_forward import connect, desktop, exit_now, prop, running


def _sort(sheet, address: str, column: int, ascending: bool) -> None:  # type: ignore[no-untyped-def]
    from com.sun.star.table import TableSortField  # type: ignore[import-not-found]

    cells = sheet.getCellRangeByName(address)
    field = TableSortField()
    field.Field = column
    field.IsAscending = ascending
    descriptor = cells.createSortDescriptor()
    for setting in descriptor:
        if setting.Name == "SortFields":
            setting.Value = uno.Any("[]com.sun.star.table.TableSortField", (field,))
        if setting.Name == "ContainsHeader":
            setting.Value = False
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


def _run(office, jobs: list[dict]) -> None:  # type: ignore[no-untyped-def]
    for job in jobs:
        doc = office.loadComponentFromURL(Path(job["in"]).resolve().as_uri(), "_blank", 0,
                                          (prop("Hidden", True),))
        try:
            _edit(doc, job)
            doc.storeToURL(Path(job["out"]).resolve().as_uri(),
                           (prop("FilterName", "Calc MS Excel 2007 XML"),))
        finally:
            doc.close(True)


def main(jobs_path: str) -> int:
    jobs = json.loads(Path(jobs_path).read_text())
    ctx = running()
    if ctx is not None:  # the suite's LibreOffice: used, and left running
        _run(desktop(ctx), jobs)
        exit_now(0)
    soffice = os.environ.get("SOFFICE", "soffice")
    with tempfile.TemporaryDirectory(prefix="scm-xl-uno-") as folder:
        pipe = f"scmxl{os.getpid()}"
        profile = Path(folder, "profile").as_uri()
        process = subprocess.Popen(
            [soffice, f"-env:UserInstallation={profile}", "--headless", "--invisible", "--norestore",
             "--nologo", "--nodefault", f"--accept=pipe,name={pipe};urp;"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            ctx = connect(pipe, time.monotonic() + 60)
            if ctx is None:
                raise RuntimeError(f"LibreOffice ({soffice}) did not answer on pipe {pipe} within 60 s")
            office = desktop(ctx)
            _run(office, jobs)
            try:
                office.terminate()
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
