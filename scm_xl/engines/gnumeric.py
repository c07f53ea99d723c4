"""Gnumeric's `ssconvert --recalc`: a spreadsheet engine that shares no code with LibreOffice,
IronCalc or `formulas`, so a fourth opinion on every formula cell.

ssconvert loads the xlsx, recalculates every cell and saves an xlsx with the computed values
cached; the values are read back from that copy as LibreOffice's are. It starts in well under a
second (Debian 12 ships 1.12.55: `apt-get install gnumeric`). It drops chart drawings it cannot
read (it says `Unexpected element 'a:graphic'`) and the workbook protection; neither changes a
value. Its known difference from Excel, MINIFS/MAXIFS over no match (#DIV/0! where Excel
documents 0), the workbook's formulas guard against; what it still computes differently is
listed in benchmarks/results/engines.md.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
import zipfile
from pathlib import Path
from xml.etree.ElementTree import ParseError

from scm_xl.engines.base import Engine, FormulaCells, Recalculated, engine_failed, formula_refs
# One reader of an engine's saved copy: ssconvert's xlsx is read exactly as soffice's is.
from scm_xl.engines.libreoffice import saved_values
from scm_xl.errors import EngineError

NOT_FOUND = "Gnumeric's ssconvert not found: install it, e.g. apt-get install -y gnumeric"
EXPORT_TYPE = "Gnumeric_Excel:xlsx2"  # ISO/IEC 29500 (ECMA-376 2nd edition), Excel 2010's dialect


def ssconvert_path() -> str | None:
    """The ssconvert program: $SCM_XL_SSCONVERT if set, else ssconvert on PATH."""
    override = os.environ.get("SCM_XL_SSCONVERT")
    if override:
        return shutil.which(override)
    return shutil.which("ssconvert")


class GnumericEngine(Engine):
    name = "gnumeric"
    unavailable_message = NOT_FOUND

    def __init__(self, *, timeout: float = 300.0) -> None:
        self.timeout = timeout

    def __repr__(self) -> str:
        return f"GnumericEngine(timeout={self.timeout})"

    def available(self) -> bool:
        return ssconvert_path() is not None

    def recalculate(self, path: Path, cells: FormulaCells | None = None) -> Recalculated:
        path = Path(path)
        ssconvert = ssconvert_path()
        if ssconvert is None:
            raise EngineError(NOT_FOUND)
        if not path.is_file():
            raise EngineError(f"no such workbook: {path}")
        start = time.perf_counter()
        refs = cells if cells is not None else formula_refs(path)  # the original knows which cells hold formulas
        with tempfile.TemporaryDirectory(prefix="scm-xl-gnumeric-") as folder:
            converted = self._convert(ssconvert, path, Path(folder))
            try:
                values = saved_values(converted, refs)
            except (OSError, KeyError, ValueError, zipfile.BadZipFile, ParseError) as exc:
                raise engine_failed(self.name, path, f"cannot read its recalculated copy: {exc}") from exc
        return Recalculated(self.name, values, time.perf_counter() - start)

    def _convert(self, ssconvert: str, path: Path, folder: Path) -> Path:
        """ssconvert's recalculated copy of `path`, in `folder` (never the input's folder)."""
        out = folder / "recalculated.xlsx"
        home = folder / "home"  # its settings and caches go with the folder, not into ~
        home.mkdir()
        env = {**os.environ, "HOME": str(home), "XDG_CONFIG_HOME": str(home), "XDG_CACHE_HOME": str(home),
               "GSETTINGS_BACKEND": "memory", "TMPDIR": str(folder)}
        command = [ssconvert, "--recalc", f"--export-type={EXPORT_TYPE}", str(path.resolve()), str(out)]
        try:
            # run() kills ssconvert (a single process) on a timeout and on any exception, Ctrl-C included
            done = subprocess.run(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, timeout=self.timeout, env=env, check=False)
        except subprocess.TimeoutExpired as exc:
            raise EngineError(f"Gnumeric took more than {self.timeout:g} s on {path}") from exc
        except OSError as exc:
            raise EngineError(f"Gnumeric could not be run on {path}: {exc}") from exc
        said = done.stdout.decode("utf-8", errors="replace").strip()
        if done.returncode != 0 or not out.is_file():
            raise engine_failed(self.name, path, f"ssconvert exit {done.returncode}: {said or 'it said nothing'}")
        return out
