"""A workbook printed to PDF by LibreOffice, as a person's LibreOffice prints it.

`soffice --convert-to pdf` with a profile of its own, through the soffice scm-xl's LibreOffice
engine runs (`engines.libreoffice.soffice_path`): in the suite, conftest's running LibreOffice
(tests/support/soffice_forward.py), which loads the file as a fresh profile would (never
recalculated: what prints is the values the file holds), instead of a LibreOffice started for
each printout: its start cost more than the printing (0.15 CPU-seconds in the running one); the
suite's six printouts this way took 10 CPU-seconds less of the processes it waits for."""

from __future__ import annotations

import subprocess
from pathlib import Path

from scm_xl.engines.libreoffice import soffice_path


def to_pdf(xlsx: Path, folder: Path) -> Path:
    """`xlsx` printed into `folder` (a profile of its own there too); the PDF's path."""
    soffice = soffice_path()
    assert soffice is not None, "LibreOffice (soffice) is needed to print"
    subprocess.run([soffice, f"-env:UserInstallation={(folder / 'profile').as_uri()}", "--headless", "--norestore",
                    "--convert-to", "pdf", "--outdir", str(folder), str(xlsx)],
                   check=True, capture_output=True, timeout=180)
    pdf = folder / f"{xlsx.stem}.pdf"
    assert pdf.exists(), f"LibreOffice printed nothing for {xlsx}"
    return pdf
