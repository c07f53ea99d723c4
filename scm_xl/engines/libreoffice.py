"""LibreOffice run headless: starts in about a second and stays fast on large sheets."""

from __future__ import annotations

import contextlib
import functools
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, cast

from scm_xl.xlsx import package
from scm_xl.engines.base import (
    CellError, CellValue, Engine, FormulaCells, Recalculated, absolute_cells, formula_refs, normalise,
)
from scm_xl.errors import EngineError

GUARD = Path(__file__).with_name("soffice_guard.py")
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

    def recalculate(self, path: Path, cells: FormulaCells | None = None) -> Recalculated:
        path = Path(path)
        start = time.perf_counter()
        refs = cells if cells is not None else formula_refs(path)  # the original knows which cells hold formulas
        soffice = self._soffice_for(path)
        with _Session(soffice, self.timeout) as session:
            # read inside the session: its folder goes away with soffice, on every exit path
            values = saved_values(session.convert(path, unhide_columns=True), refs)
        return Recalculated(self.name, values, time.perf_counter() - start)

    def convert(self, path: Path, out_path: Path) -> Path:
        """Save LibreOffice's recalculated copy of `path`, formulas and cached values, to `out_path`."""
        path, out_path = Path(path), Path(out_path)
        soffice = self._soffice_for(path)
        with _Session(soffice, self.timeout) as session:
            produced = session.convert(path)
            out_path.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(produced, out_path)
        return out_path

    def _soffice_for(self, path: Path) -> str:
        soffice = soffice_path()
        if soffice is None:
            raise EngineError(NOT_FOUND)
        if not path.is_file():
            raise EngineError(f"no such workbook: {path}")
        return soffice


class _Session:
    """One soffice run in a private folder (profile, output, log) that nothing outlives.

    On POSIX soffice runs under soffice_guard.py, which kills soffice's process group and
    removes the folder when this session ends, however it ends: normally, by an exception
    (a timeout, Ctrl-C's KeyboardInterrupt, SIGTERM turned into SystemExit), or by this
    process dying outright, kill -9 included.
    """

    def __init__(self, soffice: str, timeout: float) -> None:
        self.soffice = soffice
        self.timeout = timeout
        self.workdir = Path(tempfile.mkdtemp(prefix="scm-xl-soffice-"))
        self.guard: subprocess.Popen[bytes] | None = None
        self._signals = contextlib.ExitStack()

    def __enter__(self) -> _Session:
        self._signals.enter_context(_sigterm_as_exit())
        return self

    def __exit__(self, *exc_info: object) -> None:
        try:
            if self.guard is not None:
                # the pipes exist: Popen(stdin=PIPE, stdout=PIPE); end of input: the guard cleans up
                cast(IO[bytes], self.guard.stdin).close()
                try:
                    self.guard.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    self.guard.kill()
                    self.guard.wait()
                cast(IO[bytes], self.guard.stdout).close()
        finally:
            shutil.rmtree(self.workdir, ignore_errors=True)
            self._signals.close()

    def convert(self, path: Path, *, unhide_columns: bool = False) -> Path:
        """Recalculate `path` into this session's folder; the copy's path."""
        profile, out_dir = self.workdir / "profile", self.workdir / "out"  # never the input's folder
        if unhide_columns:
            path = _with_columns_shown(path, self.workdir / "in")
        (profile / "user").mkdir(parents=True)
        (profile / "user" / "registrymodifications.xcu").write_text(PROFILE_SETTINGS, encoding="utf-8")
        command = [self.soffice, f"-env:UserInstallation={profile.as_uri()}", "--headless", "--norestore",
                   "--convert-to", "xlsx", "--outdir", str(out_dir), str(path.resolve())]
        code, output = self._run(command, path) if os.name == "posix" else _run_unguarded(command, self.timeout, path)
        if code != 0:
            raise EngineError(f"LibreOffice failed on {path} (exit {code}): {output.strip()}")
        produced = out_dir / f"{path.stem}.xlsx"
        if not produced.is_file():  # soffice exits 0 even when it could not load the file
            detail = output.strip() or "it said nothing"
            raise EngineError(f"LibreOffice could not recalculate {path}: {detail}")
        return produced

    def _run(self, command: list[str], path: Path) -> tuple[int, str]:
        with open(self.workdir / "guard.log", "wb") as guard_log:
            # A session of its own: Ctrl-C in the terminal reaches this process only, which cleans up.
            self.guard = subprocess.Popen([sys.executable, "-I", str(GUARD), str(self.workdir), "--", *command],
                                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=guard_log,
                                          start_new_session=True, env=self._environment())
        status = _read_line(cast(IO[bytes], self.guard.stdout).fileno(), time.monotonic() + self.timeout)
        if status is None:
            raise EngineError(f"LibreOffice took more than {self.timeout:g} s on {path}")
        if not status.startswith("exit "):
            detail = (self.workdir / "guard.log").read_text(errors="replace").strip()
            raise EngineError(f"LibreOffice could not be run on {path}: {detail or 'its guard said nothing'}")
        return int(status.split()[1]), (self.workdir / "soffice.log").read_text(errors="replace")


    def _environment(self) -> dict[str, str]:
        # soffice's own temporary files (lu*.tmp) go in the session's folder, so they go with it
        temp = self.workdir / "tmp"
        temp.mkdir()
        return {**os.environ, "TMPDIR": str(temp)}


# LibreOffice 7.4 headless leaves out the cells of a hidden column past its first thousand
# rows or so when they hold formulas that read another sheet: `=Data!A1*2` filled down
# 2,000 rows of a hidden column B comes back for rows 1-1001 only (rows 1002-2000 absent
# from its saved copy). Hidden rows are not affected. The copy recalculated for reading
# values has every column shown; the values do not depend on it.
_HIDDEN = re.compile(rb'\shidden\s*=\s*["\'](?:1|true)["\']')
_COL = re.compile(rb"<col\b[^>]*>")


def _with_columns_shown(path: Path, folder: Path) -> Path:
    folder.mkdir()
    copy = folder / path.name

    def show(blocks: Iterator[bytes]) -> Iterator[bytes]:
        for i, block in enumerate(blocks):
            # <cols> comes before the first row, so it lies in the first block
            yield _COL.sub(lambda m: _HIDDEN.sub(b"", m.group(0)), block) if i == 0 else block

    package.copy_package(path, copy, lambda name: show if name.startswith("xl/worksheets/")
                         and name.endswith(".xml") else None)
    return copy


def _read_line(fd: int, deadline: float) -> str | None:
    """One line from `fd`, "" at end of file, None if `deadline` passes first."""
    data = b""
    while not data.endswith(b"\n"):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return None
        ready, _, _ = select.select([fd], [], [], remaining)
        if ready:
            chunk = os.read(fd, 1)
            if not chunk:
                break
            data += chunk
    return data.decode(errors="replace").strip()


def _run_unguarded(command: list[str], timeout: float, path: Path) -> tuple[int, str]:
    """Where there is no POSIX process control (Windows): a timeout still ends soffice."""
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        output, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        process.kill()
        process.communicate()
        raise EngineError(f"LibreOffice took more than {timeout:g} s on {path}") from exc
    return process.returncode, output


@contextlib.contextmanager
def _sigterm_as_exit() -> Iterator[None]:
    """While soffice runs, SIGTERM raises SystemExit(143), so cleanup runs before the exit that
    SIGTERM would have made anyway. Only where SIGTERM still has its default action and only in
    the main thread: a program that handles SIGTERM itself keeps its handler."""
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        yield
        return

    def terminate(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def saved_values(converted: Path, refs: FormulaCells) -> dict[tuple[str, str], CellValue]:
    """The values stored in the formula cells (and array ranges) named by `refs`, as the program
    that saved the file computed them: LibreOffice's in its converted copy (Gnumeric's in its)."""
    values: dict[tuple[str, str], CellValue] = {}
    with zipfile.ZipFile(converted) as book:
        parts = package.sheet_parts(book)
        shared = functools.cache(lambda: package.shared_strings(book))  # read only if a cell needs it
        for sheet, sheet_refs in refs.items():
            cells = [cell for ref in sheet_refs for cell in absolute_cells(ref)]
            if not cells:
                continue
            wanted = {(row, col) for row, col, _ in cells}
            with book.open(parts[sheet]) as stream:
                # Keyed by (row, column) numbers: building "A1" strings for every cell of a large
                # sheet costs more than reading it.
                found = {(row, col): (attrs, content) for row, col, attrs, content in package.cells(stream)
                         if (row, col) in wanted}
            for row, col, name in cells:
                raw = found.get((row, col))
                value = None if raw is None else package.stored_value(raw[0], raw[1], shared)
                values[(sheet, name)] = CellError(value[1]) if isinstance(value, tuple) else normalise(value)
    return values
