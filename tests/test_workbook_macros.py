"""A macro-enabled workbook keeps its macros through `fill --workbook`."""

from __future__ import annotations

import zipfile
from pathlib import Path

from scm_xl.workbook.fill import fill
from support.paths import ARTICLE

PAYLOAD = b"VBA-PROJECT-BYTES-0123456789"


def as_xlsm(xlsx: Path, xlsm: Path) -> None:
    """The bytes Excel writes for a macro-enabled workbook: a vbaProject part, its relation and type."""
    with zipfile.ZipFile(xlsx) as source, zipfile.ZipFile(xlsm, "w", zipfile.ZIP_DEFLATED) as target:
        for info in source.infolist():
            data = source.read(info.filename)
            if info.filename == "[Content_Types].xml":
                data = data.replace(b"application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml",
                                    b"application/vnd.ms-excel.sheet.macroEnabled.main+xml")
                data = data.replace(b"</Types>", b'<Default Extension="bin" '
                                    b'ContentType="application/vnd.ms-office.vbaProject"/></Types>')
            if info.filename == "xl/_rels/workbook.xml.rels":
                data = data.replace(b"</Relationships>", b'<Relationship Id="rIdVBA" Type="http://schemas.'
                                    b'microsoft.com/office/2006/relationships/vbaProject" Target="vbaProject.bin"/>'
                                    b"</Relationships>")
            target.writestr(info, data)
        target.writestr("xl/vbaProject.bin", PAYLOAD)


def test_fill_into_an_xlsm_keeps_its_macros(tmp_path: Path) -> None:
    plain = tmp_path / "book.xlsx"
    fill(ARTICLE, output=plain, engine="ironcalc", lang="en")
    book = tmp_path / "book.xlsm"
    as_xlsm(plain, book)
    report = fill(ARTICLE, workbook=book, engine="ironcalc")
    assert report.verification.ok
    with zipfile.ZipFile(book) as zf:
        assert zf.read("xl/vbaProject.bin") == PAYLOAD
        assert b"macroEnabled" in zf.read("[Content_Types].xml")
