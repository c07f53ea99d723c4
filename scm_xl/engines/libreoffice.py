"""LibreOffice run headless: starts in about a second and stays fast on large sheets."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
import warnings
from pathlib import Path

import openpyxl

from scm_xl.engines.base import (
    CellError, CellValue, Engine, Recalculated, absolute_cells, formula_refs, normalise,
)
from scm_xl.errors import EngineError

NOT_FOUND = "LibreOffice not found: install it, e.g. apt-get install -y libreoffice-calc-nogui"
# OOXMLRecalcMode 0 = always recalculate on load; the default keeps the file's stale cached values
PROFILE_SETTINGS = """<?xml version="1.0" encoding="UTF-8"?>
<oor:items xmlns:oor="http://openoffice.org/2001/registry" xmlns:xs="http://www.w3.org/2001/XMLSchema" \
xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">
<item oor:path="/org.openoffice.Office.Calc/Formula/Load"><prop oor:name="OOXMLRecalcMode" oor:op="fuse">\
<value>0</value></prop></item>
</oor:items>
"""


def soffice_path() -> str | None:
    """The soffice program: $SCM_XL_SOFFICE if set, else soffice or libreoffice on PATH."""
    override = os.environ.get("SCM_XL_SOFFICE")
    if override:
        return shutil.which(override)
    return shutil.which("soffice") or shutil.which("libreoffice")


class LibreOfficeEngine(Engine):
    name = "libreoffice"

    def __init__(self, *, timeout: float = 300.0) -> None:
        self.timeout = timeout

    def __repr__(self) -> str:
        return f"LibreOfficeEngine(timeout={self.timeout})"

    unavailable_message = NOT_FOUND

    def available(self) -> bool:
        return soffice_path() is not None

    def recalculate(self, path: Path) -> Recalculated:
        path = Path(path)
        start = time.perf_counter()
        refs = formula_refs(path)  # the original knows which cells hold formulas
        with tempfile.TemporaryDirectory(prefix="scm-xl-lo-") as tmp:
            converted = Path(tmp) / path.name
            self.convert(path, converted)
            values = _read_values(converted, refs)
        return Recalculated(self.name, values, time.perf_counter() - start)

    def convert(self, path: Path, out_path: Path) -> Path:
        """Save LibreOffice's recalculated copy of `path`, formulas and cached values, to `out_path`."""
        path, out_path = Path(path), Path(out_path)
        soffice = soffice_path()
        if soffice is None:
            raise EngineError(NOT_FOUND)
        if not path.is_file():
            raise EngineError(f"no such workbook: {path}")
        with tempfile.TemporaryDirectory(prefix="scm-xl-soffice-") as tmp:
            profile, out_dir = Path(tmp) / "profile", Path(tmp) / "out"  # never the input's folder
            (profile / "user").mkdir(parents=True)
            (profile / "user" / "registrymodifications.xcu").write_text(PROFILE_SETTINGS, encoding="utf-8")
            command = [soffice, f"-env:UserInstallation={profile.as_uri()}", "--headless", "--norestore",
                       "--convert-to", "xlsx", "--outdir", str(out_dir), str(path.resolve())]
            output = self._run(command, path)
            produced = out_dir / f"{path.stem}.xlsx"
            if not produced.is_file():  # soffice exits 0 even when it could not load the file
                detail = output.strip() or "it said nothing"
                raise EngineError(f"LibreOffice could not recalculate {path}: {detail}")
            out_path.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(produced, out_path)
        return out_path

    def _run(self, command: list[str], path: Path) -> str:
        # its own session, so a timeout can end soffice.bin too, not just the launcher
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                   start_new_session=True)
        try:
            output, _ = process.communicate(timeout=self.timeout)
        except subprocess.TimeoutExpired as exc:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
            raise EngineError(f"LibreOffice took more than {self.timeout:g} s on {path}") from exc
        if process.returncode != 0:
            raise EngineError(f"LibreOffice failed on {path} (exit {process.returncode}): {output.strip()}")
        return output


def _read_values(converted: Path, refs: dict[str, list[str]]) -> dict[tuple[str, str], CellValue]:
    wanted = {sheet: [(row, col, cell) for ref in sheet_refs for row, col, cell in absolute_cells(ref)]
              for sheet, sheet_refs in refs.items()}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        book = openpyxl.load_workbook(converted, read_only=True, data_only=True)
    try:
        values: dict[tuple[str, str], CellValue] = {}
        for sheet, cells in wanted.items():
            if not cells:
                continue
            # Keyed by (row, column) numbers: building "A1" strings for every cell of a large
            # sheet costs more than reading it.
            found = {
                (cell.row, cell.column): CellError(cell.value) if cell.data_type == "e" else cell.value
                for row in book[sheet].iter_rows()
                for cell in row
                if cell.value is not None
            }
            for row, col, cell in cells:
                values[(sheet, cell)] = normalise(found.get((row, col)))
        return values
    finally:
        book.close()
