"""Limits checked on a workbook file before any parser opens it (zip bombs).

An .xlsx is a zip of XML parts. A small file can declare, or simply hold, a huge
part: a 1.2 MB file with a 1.15 GB sheet, or millions of empty cells. openpyxl and
the recalculation engines would spend minutes and gigabytes on it. `check_xlsx`
reads only the zip directory and then streams each XML part through the
decompressor, counting bytes and cells, and stops at the first limit passed:

- the total declared uncompressed size and each part's declared size;
- each part's actual size, which must not exceed what it declared (a lying header);
- the compression ratio of large parts (XML compresses about 5-50x; a bomb 1000x);
- the number of cells (`<c` elements) over all sheets.

The limits sit well above the largest workbook scm-xl builds (100,000 raw rows).
"""

from __future__ import annotations

import re
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path

from scm_xl.errors import InputError

MIB = 1024 * 1024


@dataclass(frozen=True)
class XlsxLimits:
    max_parts: int = 10_000
    max_total_bytes: int = 2048 * MIB  # all parts, uncompressed
    max_part_bytes: int = 1024 * MIB
    max_ratio: float = 200.0  # uncompressed / compressed, for parts above ratio_floor_bytes
    ratio_floor_bytes: int = 8 * MIB
    max_cells: int = 30_000_000


DEFAULT_LIMITS = XlsxLimits()
_CELL = re.compile(rb"<(?:\w+:)?c[\s>/]")
_CHUNK = 1 * MIB


def check_xlsx(path: str | Path, limits: XlsxLimits = DEFAULT_LIMITS) -> None:
    """Raise InputError (exit 2) when the workbook at `path` passes a size or cell limit.

    A file that is not a zip is left to the workbook reader, which names the problem.
    """
    where = str(path)
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError, ValueError):
        return
    with archive:
        infos = archive.infolist()
        if len(infos) > limits.max_parts:
            raise InputError(f"refused: the workbook holds {len(infos):,} parts (limit {limits.max_parts:,})",
                             path=where)
        declared = sum(info.file_size for info in infos)
        if declared > limits.max_total_bytes:
            raise InputError(f"refused: the workbook unpacks to {_size(declared)} "
                             f"(limit {_size(limits.max_total_bytes)}); is it a zip bomb?", path=where)
        cells = 0
        total = 0
        for info in infos:
            _check_declared(where, info, limits)
            if not info.filename.endswith((".xml", ".rels", ".vml")):
                total += info.file_size
                continue
            count_cells = info.filename.startswith("xl/worksheets/")
            size, found = _stream(archive, info, limits, count_cells, limits.max_cells - cells, where)
            cells += found
            total += size
            if total > limits.max_total_bytes:
                raise InputError(f"refused: the workbook unpacks to more than {_size(limits.max_total_bytes)}",
                                 path=where)


def _check_declared(where: str, info: zipfile.ZipInfo, limits: XlsxLimits) -> None:
    if info.file_size > limits.max_part_bytes:
        raise InputError(f"refused: part {info.filename} unpacks to {_size(info.file_size)} "
                         f"(limit {_size(limits.max_part_bytes)}); is it a zip bomb?", path=where)
    if info.file_size > limits.ratio_floor_bytes and info.file_size > limits.max_ratio * max(info.compress_size, 1):
        raise InputError(f"refused: part {info.filename} is compressed {info.file_size / max(info.compress_size, 1):,.0f}"
                         f" to 1 (limit {limits.max_ratio:,.0f}); is it a zip bomb?", path=where)


def _stream(archive: zipfile.ZipFile, info: zipfile.ZipInfo, limits: XlsxLimits, count_cells: bool,
            cells_left: int, where: str) -> tuple[int, int]:
    """Decompress one part in chunks: its actual size, and its cells when asked."""
    size = 0
    cells = 0
    tail = b""
    allowed = min(info.file_size, limits.max_part_bytes)
    try:
        with archive.open(info) as handle:
            while chunk := handle.read(_CHUNK):
                size += len(chunk)
                if size > allowed:
                    raise InputError(f"refused: part {info.filename} unpacks to more than the "
                                     f"{_size(allowed)} it declares or the limit allows", path=where)
                if count_cells:
                    window = tail + chunk
                    cells += len(_CELL.findall(window)) - len(_CELL.findall(tail))
                    tail = window[-16:]
                    if cells > cells_left:
                        raise InputError(f"refused: the workbook holds more than {limits.max_cells:,} "
                                         "cells; is it a cell bomb?", path=where)
    except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError) as exc:
        raise InputError(f"not a readable .xlsx workbook: part {info.filename} is damaged ({exc})",
                         path=where) from exc
    return size, cells


def _size(count: int) -> str:
    return f"{count / MIB:,.0f} MiB" if count >= MIB else f"{count:,} bytes"
