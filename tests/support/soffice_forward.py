#!/usr/bin/python3
"""`soffice` for the test suite: a conversion done by one LibreOffice that stays running.

The suite recalculates with LibreOffice about seventy times (`--engine libreoffice`), and each
`soffice --convert-to` starts LibreOffice anew: about 2.5 CPU-seconds of a start for a small
workbook's tenth of a second of work. conftest's `libreoffice_server` starts one LibreOffice per
pytest worker, listening on a pipe (its profile recalculates every xlsx on load, as the engine's
does), points $SCM_XL_SOFFICE here, and scm-xl's LibreOffice engine runs this program as it
runs soffice: `soffice -env:UserInstallation=... --headless --norestore --convert-to xlsx
--outdir DIR FILE`. This program, run by the system Python that has LibreOffice's bridge (uno),
has the running LibreOffice load FILE hidden, recalculate it and store it as DIR/<stem>.xlsx,
as soffice would, and prints what soffice prints. `--convert-to pdf` (the printouts,
tests/support/printing.py) is done the same way, the file loaded as a fresh profile loads it.
Anything else, or no LibreOffice on the pipe (not started, or gone; one still starting is
waited for), runs the real soffice with the same arguments.

Real LibreOffice computes every value either way; what the engine's own start costs (a private
profile, the guard that ends soffice's process group) is tested with the real soffice
(tests marked `soffice_per_run`).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

FILTERS = {"xlsx": "Calc MS Excel 2007 XML", "pdf": "calc_pdf_Export"}
# How the running LibreOffice loads an xlsx for each target: "xlsx" (the engine's conversion)
# recalculated on load, as the server's profile says (OOXMLRecalcMode 0, the engine's); "pdf" (a
# printout, `support.printing`) as a person's LibreOffice opens it, its default profile
# (OOXMLRecalcMode 1, "never recalculate": the values the file holds are what prints).
RECALC_MODE = {"xlsx": 0, "pdf": 1}
RECALC_SETTING = ("/org.openoffice.Office.Calc/Formula/Load", "OOXMLRecalcMode")
PIPE_VARIABLE = "SCM_XL_TEST_SOFFICE_PIPE"
PID_VARIABLE = "SCM_XL_TEST_SOFFICE_PID"  # its process: while alive and not answering, it is starting
REAL_VARIABLE = "SCM_XL_TEST_SOFFICE_REAL"
STARTING_S = 60  # the longest a LibreOffice just started is waited for


def _job(args: list[str]) -> tuple[str, Path, Path] | None:
    """(format, input file, output folder) of a plain `--convert-to` of one file, else None."""
    target = outdir = None
    files = []
    rest = iter(args)
    for arg in rest:
        if arg == "--convert-to":
            target = next(rest, None)
        elif arg == "--outdir":
            outdir = next(rest, None)
        elif arg.startswith("-env:") or arg in ("--headless", "--norestore", "--invisible", "--nologo"):
            continue
        elif arg.startswith("-"):
            return None
        else:
            files.append(arg)
    if target not in FILTERS or outdir is None or len(files) != 1:
        return None
    return target, Path(files[0]), Path(outdir)


def prop(name: str, value: object) -> object:
    """A UNO PropertyValue (a load or store argument)."""
    from com.sun.star.beans import PropertyValue  # type: ignore[import-not-found]

    p = PropertyValue()
    p.Name, p.Value = name, value
    return p


def connect(pipe: str, deadline: float | None = None) -> Any:
    """The component context of the LibreOffice listening on `pipe`; None when none answers
    (by `deadline`, a time.monotonic(), when given: a LibreOffice still starting)."""
    import uno  # type: ignore[import-not-found]
    from com.sun.star.connection import NoConnectException  # type: ignore[import-not-found]

    local = uno.getComponentContext()
    resolver = local.ServiceManager.createInstanceWithContext("com.sun.star.bridge.UnoUrlResolver", local)
    while True:
        try:
            return resolver.resolve(f"uno:pipe,name={pipe};urp;StarOffice.ComponentContext")
        except NoConnectException:
            if deadline is None or time.monotonic() > deadline:
                return None
            time.sleep(0.2)


def desktop(ctx: Any) -> Any:
    """The Desktop of the LibreOffice whose component context is `ctx`: what loads documents."""
    return ctx.ServiceManager.createInstanceWithContext("com.sun.star.frame.Desktop", ctx)


def running() -> Any:
    """The component context of the suite's running LibreOffice, waited for while it is still
    starting (its process alive, at most STARTING_S): a conversion asked for at once after the
    start would otherwise start a LibreOffice of its own. None when there is none, or it is gone."""
    pipe = os.environ.get(PIPE_VARIABLE)
    if not pipe:
        return None
    deadline = time.monotonic() + STARTING_S
    while True:
        ctx = connect(pipe)
        if ctx is not None or not _alive(os.environ.get(PID_VARIABLE)) or time.monotonic() > deadline:
            return ctx
        time.sleep(0.2)


def _alive(pid: str | None) -> bool:
    """Whether process `pid` runs (not ended, nor a zombie waiting to be reaped)."""
    try:
        with open(f"/proc/{int(pid or 0)}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, ValueError, IndexError):
        return False


def _recalc_mode(ctx: Any, mode: int) -> int:
    """Set the running LibreOffice's OOXMLRecalcMode (read as each xlsx loads); the mode it had.
    One pytest worker's LibreOffice does one conversion or edit at a time."""
    provider = ctx.ServiceManager.createInstanceWithContext("com.sun.star.configuration.ConfigurationProvider", ctx)
    node, name = RECALC_SETTING
    access = provider.createInstanceWithArguments("com.sun.star.configuration.ConfigurationUpdateAccess",
                                                  (prop("nodepath", node),))
    before = int(access.getPropertyValue(name))
    if before != mode:
        access.setPropertyValue(name, mode)
        access.commitChanges()
    return before


def _convert(target: str, source: Path, outdir: Path) -> bool:
    """Whether the running LibreOffice converted `source`; False when there is none."""
    ctx = running()
    if ctx is None:
        return False
    out = outdir / f"{source.stem}.{target}"
    outdir.mkdir(parents=True, exist_ok=True)
    before = _recalc_mode(ctx, RECALC_MODE[target])
    try:
        doc = desktop(ctx).loadComponentFromURL(source.resolve().as_uri(), "_blank", 0,
                                                (prop("Hidden", True), prop("ReadOnly", True)))
    finally:
        _recalc_mode(ctx, before)
    if doc is None:  # soffice's own way with a file it cannot load: exit 0, nothing written
        print("Error: source file could not be loaded", file=sys.stderr)
        return True
    try:
        doc.storeToURL(out.resolve().as_uri(), (prop("FilterName", FILTERS[target]),))
    finally:
        doc.close(True)
    print(f"convert {source.resolve()} -> {out.resolve()} using filter : {FILTERS[target]}")
    return True


def exit_now(code: int = 0) -> None:
    """Leave at once, output flushed: the UNO bridge's teardown at the interpreter's exit can
    crash (SIGSEGV) after the work is done, and the exit status is what the caller reads."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def main(args: list[str]) -> int:
    job = _job(args)
    if job is not None:
        try:
            if _convert(*job):
                exit_now(0)
        except Exception as exc:  # a LibreOffice gone half-way: the real soffice does it
            print(f"soffice_forward: {type(exc).__name__}: {exc}; running soffice", file=sys.stderr)
    real = os.environ.get(REAL_VARIABLE, "soffice")
    os.execvp(real, [real, *args])
    return 127  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
