"""Zip bombs are refused before any parser opens the workbook (scm_xl/safety.py)."""

from __future__ import annotations

import csv
import importlib.util
import re
import zipfile
from pathlib import Path

import pytest
from click.testing import CliRunner
from openpyxl.utils import column_index_from_string, range_boundaries

from scm_xl.cli import main
from scm_xl.collect.records import REQUEST_COLUMNS
from scm_xl.errors import InputError
from scm_xl.results import write_results
from scm_xl.safety import DEFAULT_LIMITS, XlsxLimits, check_xlsx
from scm_xl.workbook.io import MAX_DATA_ROWS
from scm_xl.workbook.layout import fitted_layout
from scm_xl.workbook.slo_sheet import MAX_REQUEST_ROWS
from support.paths import ARTICLE

ROOT = Path(__file__).resolve().parent.parent

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
    csv = ARTICLE
    result = CliRunner().invoke(main, ["fill", str(csv), "--workbook", str(bomb), "-o", str(tmp_path / "o.xlsx")])
    assert result.exit_code == 2 and "is it a zip bomb?" in result.stderr
    assert not (tmp_path / "o.xlsx").exists()


# --- the limits hold scm-xl's own largest workbook -----------------------------------------------

# What the README's "Limits" section claims: every limit leaves this much room above the 100,000-row
# workbook, and the per-request sheet at its most fits inside the limits beside it.
HEADROOM = 1.5
REQUESTS_PER_ROW = MAX_REQUEST_ROWS // MAX_DATA_ROWS  # 2: the largest workbook holds both at their most
_CELL = re.compile(rb"<c[\s>/]")
_CELL_REF = re.compile(rb'<c\s[^>]*?r="([A-Z]+)(\d+)"')
_ROW_REF = re.compile(rb'<row\s[^>]*?r="(\d+)"')
_RANGE = re.compile(rb'<(?:mergeCell|hyperlink)\s[^>]*?ref="([^"]+)"')
_ARRAY = re.compile(rb'<f\s[^>]*?t="array"[^>]*>')
_REF = re.compile(rb'\sref="([^"]+)"')


def _bench_rows(count: int) -> list:
    """The rows the README's figures are of: benchmarks/bench_cli_rows.py's (2 models x 8 concurrency
    levels x 6 max_tokens, repeated)."""
    spec = importlib.util.spec_from_file_location("bench_cli_rows", ROOT / "benchmarks" / "bench_cli_rows.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.rows_of(count)


def _filled(folder: Path, rows: int, requests_per_row: int) -> Path:
    """`scm-xl fill` of `rows` results rows, with `requests_per_row` measured requests each in the
    requests CSV beside them (none: no requests CSV)."""
    folder.mkdir()
    results = _bench_rows(rows)
    write_results(folder / "results.csv", results)
    if requests_per_row:
        with open(folder / "requests.csv", "w", encoding="utf-8", newline="") as handle:
            writer = csv.writer(handle, lineterminator="\n")
            writer.writerow(REQUEST_COLUMNS)
            for row in results:
                for slot in range(requests_per_row):
                    record = dict.fromkeys(REQUEST_COLUMNS, "") | {
                        "exp_id": row.exp_id, "model": row.model, "concurrency": row.concurrency,
                        "max_tokens": row.max_tokens, "repeat": 1, "slot": slot, "seq": 0, "warmup": "false",
                        "ttft_s": 0.05, "latency_s": 1.5, "prompt_tokens": 20, "completion_tokens": row.max_tokens,
                        "status": "ok", "tokens_counted": "false"}
                    writer.writerow([record[column] for column in REQUEST_COLUMNS])
    out = folder / "out.xlsx"
    result = CliRunner().invoke(main, ["fill", str(folder / "results.csv"), "-o", str(out), "-q", "--lang", "en"])
    assert result.exit_code == 0, result.output
    check_xlsx(out)  # the check itself passes it
    return out


def _range_cells(ref: bytes) -> int:
    low_col, low_row, high_col, high_row = range_boundaries(ref.decode())
    return (high_col - low_col + 1) * (high_row - low_row + 1)


def _figures(book: Path) -> dict[str, dict[str, int]]:
    """Each part's size, packed and unpacked; each sheet's cells, last row and column, and cells covered
    by merged ranges, hyperlink ranges and array formulas; the file's size."""
    figures: dict[str, dict[str, int]] = {"file": {"bytes": book.stat().st_size}}
    with zipfile.ZipFile(book) as archive:
        for info in archive.infolist():
            part = {"bytes": info.file_size, "packed": info.compress_size}
            if info.filename.startswith("xl/worksheets/") and info.filename.endswith(".xml"):
                data = archive.read(info)
                refs = _CELL_REF.findall(data)
                part |= {"cells": len(_CELL.findall(data)),
                         "last_row": max([int(r) for r in _ROW_REF.findall(data)] + [int(r) for _, r in refs] + [0]),
                         "last_column": max([column_index_from_string(c.decode()) for c, _ in refs] + [0]),
                         "range_cells": sum(_range_cells(ref) for ref in _RANGE.findall(data))
                         + sum(_range_cells(_REF.search(tag)[1]) for tag in _ARRAY.findall(data) if _REF.search(tag))}
            figures[info.filename] = part
    return figures


def _template(folder: Path, rows: int) -> Path:
    """`scm-xl build template` whose formulas cover `rows` raw rows (what a fill sizes its workbook to)."""
    out = folder / f"template-{rows}.xlsx"
    result = CliRunner().invoke(main, ["build", "template", "--rows", str(rows), "--lang", "en", "-o", str(out)])
    assert result.exit_code == 0, result.output
    return out


def _combine(*terms: tuple[float, dict]) -> dict[str, dict[str, float]]:
    """The sum of weight x figures, part by part and figure by figure (a part a term lacks counts 0 there)."""
    total: dict[str, dict[str, float]] = {}
    for weight, figures in terms:
        for name, part in figures.items():
            into = total.setdefault(name, {})
            for key, value in part.items():
                into[key] = into.get(key, 0) + weight * value
    return total


def _line(x: float, x0: float, y0: dict, x1: float, y1: dict) -> dict[str, dict[str, float]]:
    """Each figure at `x`, on the line through its values y0 at x0 and y1 at x1."""
    share = (x - x0) / (x1 - x0)
    return _combine((1 - share, y0), (share, y1))


def _totals(parts: dict[str, dict[str, float]]) -> dict[str, float]:
    """A workbook's figures as the limits count them."""
    sheets = [part for part in parts.values() if "cells" in part]
    inside = {name: part for name, part in parts.items() if name != "file"}
    return {
        "max_file_bytes": parts["file"]["bytes"],
        "max_parts": len(inside),
        "max_total_bytes": sum(part["bytes"] for part in inside.values()),
        "max_part_bytes": max(part["bytes"] for part in inside.values()),
        "max_sheets": len(sheets),
        "max_cells": sum(part["cells"] for part in sheets),
        "max_sheet_cells": max(part["cells"] for part in sheets),
        "max_rows": max(part["last_row"] for part in sheets),
        "max_columns": max(part["last_column"] for part in sheets),
        "max_range_cells": sum(part["range_cells"] for part in sheets),
    }


def test_the_limits_hold_scm_xls_own_largest_workbook(tmp_path: Path) -> None:
    """The largest workbook scm-xl writes, 100,000 rows (MAX_DATA_ROWS) and 200,000 per-request records
    (MAX_REQUEST_ROWS), from small ones measured part by part: a workbook is its template, whose
    formulas cover the rows it is sized to (`fitted_layout`), plus the data filled in, each growing
    linearly with its rows; the records add their sheet's rows and the SLO sheet's counts. Held
    against the limits: HEADROOM times inside them without the records (the README's claim for
    the 100,000-row workbook), and inside them with the records at their most."""
    small, large = 200, 1000
    sized = {n: fitted_layout("en", n, 0, 0, 0).rows for n in (small, large, MAX_DATA_ROWS)}
    templates = {n: _figures(_template(tmp_path, sized[n])) for n in (small, large)}
    fills = {n: _figures(_filled(tmp_path / f"fill-{n}", n, 0)) for n in (small, large)}
    with_records = _figures(_filled(tmp_path / "records", small, REQUESTS_PER_ROW))

    data = {n: _combine((1, fills[n]), (-1, templates[n])) for n in (small, large)}
    template = _line(sized[MAX_DATA_ROWS], sized[small], templates[small], sized[large], templates[large])
    largest = _combine((1, template), (1, _line(MAX_DATA_ROWS, small, data[small], large, data[large])))
    records = _combine((1, with_records), (-1, fills[small]))  # what the records add at `small` rows
    largest_with_records = _combine((1, largest), (MAX_DATA_ROWS / small, records))

    limits = DEFAULT_LIMITS
    figures, figures_with_records = _totals(largest), _totals(largest_with_records)
    for name, figure in figures.items():
        assert HEADROOM * figure <= getattr(limits, name), (name, figure, getattr(limits, name))
    for name, figure in figures_with_records.items():
        assert figure <= getattr(limits, name), (name, figure, getattr(limits, name))
    # the lines land where a workbook's rows are: the sheet that reaches furthest ends 74 rows below
    # the rows it is sized to (1,174 at 1,000 rows, 11,074 at 10,000), the records' sheet at its last record
    assert figures["max_rows"] == pytest.approx(sized[MAX_DATA_ROWS] + 74, abs=1)
    assert figures_with_records["max_rows"] == pytest.approx(MAX_REQUEST_ROWS + 1, abs=1)  # a header, the records

    # Compressed at most so (a ratio does not grow with rows): the parts that pass the floor at the most rows,
    # and the whole.
    measured = fills[large]
    for name, part in largest_with_records.items():
        if name != "file" and part["bytes"] > limits.ratio_floor_bytes:
            ratio = measured[name]["bytes"] / max(measured[name]["packed"], 1)
            assert HEADROOM * ratio <= limits.max_ratio, (name, ratio)
    inside = [part for name, part in measured.items() if name != "file"]
    assert HEADROOM * sum(p["bytes"] for p in inside) / sum(p["packed"] for p in inside) <= limits.max_total_ratio
