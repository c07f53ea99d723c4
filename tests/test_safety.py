"""Zip bombs are refused before any parser opens the workbook (scm_xl/safety.py)."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from scm_xl.cli import main
from scm_xl.errors import InputError
from scm_xl.safety import XlsxLimits, check_xlsx

SHEET_HEAD = b'<?xml version="1.0"?><worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><sheetData>'
SHEET_TAIL = b"</sheetData></worksheet>"


def xlsx_with(path: Path, sheet: bytes) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("[Content_Types].xml", b"<Types/>")
        archive.writestr("xl/workbook.xml", b"<workbook/>")
        archive.writestr("xl/worksheets/sheet1.xml", sheet)
    return path


def cells(count: int) -> bytes:
    return SHEET_HEAD + b'<row r="1">' + b'<c r="A1" t="n"><v>1</v></c>' * count + b"</row>" + SHEET_TAIL


def test_an_ordinary_workbook_passes(tmp_path: Path) -> None:
    out = tmp_path / "t.xlsx"
    assert CliRunner().invoke(main, ["build", "template", "-o", str(out), "--rows", "20"]).exit_code == 0
    check_xlsx(out)


def test_a_compression_bomb_is_refused(tmp_path: Path) -> None:
    bomb = xlsx_with(tmp_path / "bomb.xlsx", SHEET_HEAD + b" " * (20 * 1024 * 1024) + SHEET_TAIL)
    assert bomb.stat().st_size < 100_000
    with pytest.raises(InputError, match=r"bomb.xlsx: refused: part xl/worksheets/sheet1.xml is compressed "
                                         r"[\d,]+ to 1 \(limit 200\); is it a zip bomb\?"):
        check_xlsx(bomb)


def test_declared_sizes_are_checked_before_reading(tmp_path: Path) -> None:
    book = xlsx_with(tmp_path / "big.xlsx", b"x" * 5000)
    with pytest.raises(InputError, match="unpacks to 5,"):
        check_xlsx(book, XlsxLimits(max_total_bytes=4000))
    with pytest.raises(InputError, match="part xl/worksheets/sheet1.xml unpacks to 5,000 bytes"):
        check_xlsx(book, XlsxLimits(max_part_bytes=4000))


def test_a_cell_bomb_is_refused(tmp_path: Path) -> None:
    book = xlsx_with(tmp_path / "cells.xlsx", cells(3000))
    check_xlsx(book, XlsxLimits(max_cells=3000))
    with pytest.raises(InputError, match="more than 2,999 cells; is it a cell bomb"):
        check_xlsx(book, XlsxLimits(max_cells=2999))


def test_cells_split_across_chunks_are_counted_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import scm_xl.safety as safety

    monkeypatch.setattr(safety, "_CHUNK", 7)  # every cell straddles a chunk boundary somewhere
    book = xlsx_with(tmp_path / "cells.xlsx", cells(500))
    check_xlsx(book, XlsxLimits(max_cells=500))
    with pytest.raises(InputError):
        check_xlsx(book, XlsxLimits(max_cells=499))


def test_a_damaged_part_is_an_input_error(tmp_path: Path) -> None:
    book = xlsx_with(tmp_path / "bad.xlsx", cells(100))
    data = bytearray(book.read_bytes())
    start = data.index(b"xl/worksheets/sheet1.xml") + len(b"xl/worksheets/sheet1.xml")
    data[start + 10:start + 30] = b"\xff" * 20  # corrupt the deflate stream
    book.write_bytes(bytes(data))
    with pytest.raises(InputError, match="damaged|not a readable"):
        check_xlsx(book)


@pytest.mark.parametrize("command", [["verify"], ["predict", "--concurrency", "1", "--max-tokens", "50"],
                                     ["solve", "--target-tps", "10"]])
def test_the_cli_refuses_a_bomb_with_exit_2(tmp_path: Path, command: list[str]) -> None:
    bomb = xlsx_with(tmp_path / "bomb.xlsx", SHEET_HEAD + b" " * (20 * 1024 * 1024) + SHEET_TAIL)
    result = CliRunner().invoke(main, [command[0], str(bomb), *command[1:]])
    assert result.exit_code == 2, result.output
    assert "is it a zip bomb?" in result.stderr
    assert "Traceback" not in result.output


def test_fill_into_a_bomb_is_refused(tmp_path: Path) -> None:
    bomb = xlsx_with(tmp_path / "bomb.xlsx", SHEET_HEAD + b" " * (20 * 1024 * 1024) + SHEET_TAIL)
    csv = Path(__file__).parent.parent / "examples" / "article_qwen2.5-7b.csv"
    result = CliRunner().invoke(main, ["fill", str(csv), "--workbook", str(bomb), "-o", str(tmp_path / "o.xlsx")])
    assert result.exit_code == 2 and "is it a zip bomb?" in result.stderr
    assert not (tmp_path / "o.xlsx").exists()
