"""Limits checked on a workbook file before any parser opens it (zip, cell and entity bombs).

An .xlsx is a zip of XML parts. A small file can declare, or simply hold, a huge part (a
1.2 MB file with a 1.15 GB sheet), millions of cells, or a few bytes that make a reader build
billions of objects: openpyxl makes one object per cell of a merged range or a hyperlink's
range (`<mergeCell ref="A1:XFD1048576"/>`: 17 billion), scm-xl reads its sheets down to their
last used row, and the engines walk every cell of an array formula's range. So the limits
bound the work, not only the bytes: `check_xlsx` reads the zip directory, refuses what it
declares beyond a limit, then streams every part through the decompressor (bounded memory)
and stops at the first limit passed:

- the file's size, the number of parts, their declared sizes each and in sum, and the
  compression ratio of large parts and of the whole (XML compresses 5-50x; a bomb 200-1000x);
- each part's actual size, which must not exceed what it declared (a lying header);
- cells (`<c>` elements) per sheet and in sum; the cells covered by merged ranges, hyperlink
  ranges and array formulas, in sum; sheets;
- the last row and column each sheet reaches: its cells and rows, its `<dimension ref>` and
  those ranges;
- XML that declares a DTD before its root element, the one place a parser takes one
  (`<!DOCTYPE`, `<!ENTITY`: entity expansion, external entities), or is in an encoding other
  than UTF-8 or UTF-16 (where such a declaration could hide from the scan).

The limits (`XlsxLimits`, one home; the README's "Limits" section lists them) sit well above
the largest workbook scm-xl writes: 100,000 raw rows, estimated from a measured 10,000-row fill
(1.51 million cells, 84 MiB unpacked, rows to 10,574, 2,571 cells in merged ranges and array
formulas), and hold it with its 200,000 per-request records too (tests/test_safety.py builds
small ones and checks the figures on their lines to those sizes). The scan counts the
XML as text, in pieces cut before a `<` so no tag is ever split; it reads 70-100 MiB of XML a
second (a 10,000-row workbook: 1 s), so a bomb at any limit is refused in a few seconds. A
file that passes is remembered (by inode, size and times, once they are two seconds old), so
a command that checks it twice (the CLI, then the library) pays once.
"""

from __future__ import annotations

import codecs
import functools
import os
import re
import time
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from scm_xl.errors import InputError
from scm_xl.input_files import refuse_non_regular

MIB = 1024 * 1024
EXCEL_ROWS = 1_048_576  # a spreadsheet's own bounds: what a range without rows or columns spans
EXCEL_COLUMNS = 16_384


@dataclass(frozen=True)
class XlsxLimits:
    """What a workbook may hold. The defaults, against scm-xl's own 100,000-row workbook
    (estimated from 10,000 rows measured, x10): 15M cells, 2.6M in its largest sheet, rows to
    about 100,600, 98 columns, 0.85 GiB unpacked, 0.14 GiB its largest part, 36 parts, 20 sheets,
    2,571 cells in merged ranges and array formulas, compressed 10 to 1; each at least 1.5 times
    inside its limit. With 200,000 per-request records beside (slo_sheet.MAX_REQUEST_ROWS): 22.4M
    cells, rows to 200,001, 1.4 GiB unpacked, still inside."""

    max_file_bytes: int = 512 * MIB  # the .xlsx on disk (100,000 rows: about 90 MB)
    max_parts: int = 10_000
    max_total_bytes: int = 2048 * MIB  # all parts, uncompressed
    max_part_bytes: int = 1024 * MIB
    max_ratio: float = 200.0  # uncompressed / compressed, for parts above ratio_floor_bytes
    ratio_floor_bytes: int = 8 * MIB
    max_total_ratio: float = 100.0  # the same over all parts, when they unpack to more than the floor
    total_ratio_floor_bytes: int = 64 * MIB
    max_sheets: int = 1_000
    max_cells: int = 25_000_000  # in sum
    max_sheet_cells: int = 12_000_000
    max_rows: int = 250_000  # the last row a sheet reaches
    max_columns: int = EXCEL_COLUMNS  # columns cost nothing until a reader walks them; rows do
    max_range_cells: int = 1_000_000  # cells covered by merged ranges, hyperlink ranges, array formulas
    max_text_run: int = 4 * MIB  # bytes of a part without a `<` (a text node or tag this long is no workbook's)


DEFAULT_LIMITS = XlsxLimits()
_CHUNK = 1 * MIB
_XML_NAMES = (".xml", ".rels", ".vml")
_CELL = re.compile(rb"<c[\s>/]")
_PREFIXED_CELL = re.compile(rb"<[A-Za-z_][\w.-]*:c[\s>/]")
_ROW = re.compile(rb"<row[\s>/]")
_PREFIXED_ROW = re.compile(rb"<[A-Za-z_][\w.-]*:row[\s>/]")
_SHEET_DATA = re.compile(rb"<(?:[A-Za-z_][\w.-]*:)?sheetData[\s>/]")
_RANGE_TAGS = {name: re.compile(name + rb"\s([^<]*)") for name in (b"mergeCell", b"hyperlink", b"dimension")}
_TAG_START = re.compile(rb"<(?:[A-Za-z_][\w.-]*:)?f\s")
_REF_ATTR = re.compile(rb"""(?:^|\s)ref\s*=\s*["']([^"']*)["']""")
_ARRAY_ATTR = re.compile(rb"""\st\s*=\s*["']array["']""")
_CORNER = re.compile(rb"\$?([A-Za-z]*)\$?([0-9]*)")
# Each byte as its kind: a digit as 0, a capital letter as A, a quote as ", and no $. A reference
# that can pass a limit ("A250001", '$ABC$1') then shows as a fixed string ('000000"', '"AAA'),
# found far faster than a pattern; the few pieces that hold one are then read exactly.
_SHAPES = bytes.maketrans(b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ'", b"0" * 10 + b"A" * 26 + b'"')
_DECLARED_ENCODING = re.compile(rb"""^\s*<\?xml[^>]*?encoding\s*=\s*["']([^"']*)["']""")
_ENCODINGS = {"utf-8", "utf8", "utf-16", "utf16", "us-ascii", "ascii"}
_RANGE_WORDS = {b"mergeCell": "a merged range", b"hyperlink": "a hyperlink's range", b"f": "an array formula"}


def check_xlsx(path: str | Path, limits: XlsxLimits = DEFAULT_LIMITS) -> None:
    """Raise InputError (exit 2) when the workbook at `path` passes a limit, is not a regular
    file, or holds XML that declares a DTD.

    A missing file, or a file that is not a zip, is left to the workbook reader, which names the problem.
    """
    where = str(path)
    refuse_non_regular(where)  # /dev/zero, a FIFO: never opened
    try:
        stat = os.stat(where)
    except OSError:
        return
    key = (stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns, limits)
    if key in _PASSED:
        return
    if stat.st_size > limits.max_file_bytes:
        raise InputError.worded("workbook_too_big", path=where, size=_size(stat.st_size),
                                limit=_size(limits.max_file_bytes))
    try:
        archive = zipfile.ZipFile(where)
    except (zipfile.BadZipFile, OSError, ValueError):
        return
    with archive:
        infos = archive.infolist()
        _check_directory(where, infos, limits)
        totals = _Totals()
        for info in infos:
            _scan_part(archive, info, limits, totals, where)
    if time.time_ns() - max(stat.st_mtime_ns, stat.st_ctime_ns) > _SETTLED_NS:  # a timestamp's tick is coarse
        if len(_PASSED) > 64:
            _PASSED.clear()
        _PASSED.add(key)


_PASSED: set[tuple[int, int, int, int, int, XlsxLimits]] = set()
_SETTLED_NS = 2_000_000_000


def _check_directory(where: str, infos: list[zipfile.ZipInfo], limits: XlsxLimits) -> None:
    """What the zip directory declares, before a byte is decompressed."""
    if len(infos) > limits.max_parts:
        raise InputError(f"refused: the workbook holds {len(infos):,} parts (limit {limits.max_parts:,})", path=where)
    declared = sum(info.file_size for info in infos)
    if declared > limits.max_total_bytes:
        raise InputError(f"refused: the workbook unpacks to {_size(declared)} "
                         f"(limit {_size(limits.max_total_bytes)}); is it a zip bomb?", path=where)
    compressed = max(sum(info.compress_size for info in infos), 1)
    if declared > limits.total_ratio_floor_bytes and declared > limits.max_total_ratio * compressed:
        raise InputError(f"refused: the workbook unpacks to {_size(declared)} from {_size(compressed)}, "
                         f"{declared / compressed:,.0f} to 1 (limit {limits.max_total_ratio:,.0f}); "
                         "is it a zip bomb?", path=where)
    for info in infos:
        if info.file_size > limits.max_part_bytes:
            raise InputError(f"refused: part {info.filename} unpacks to {_size(info.file_size)} "
                             f"(limit {_size(limits.max_part_bytes)}); is it a zip bomb?", path=where)
        ratio = info.file_size / max(info.compress_size, 1)
        if info.file_size > limits.ratio_floor_bytes and ratio > limits.max_ratio:
            raise InputError(f"refused: part {info.filename} is compressed {ratio:,.0f}"
                             f" to 1 (limit {limits.max_ratio:,.0f}); is it a zip bomb?", path=where)


@dataclass
class _Totals:
    """What the parts scanned so far hold, in sum."""

    bytes: int = 0
    cells: int = 0
    range_cells: int = 0
    sheets: int = 0


@dataclass
class _Part:
    """What one part holds: its cells, rows, the last row and column it reaches."""

    name: str
    where: str
    limits: XlsxLimits
    totals: _Totals
    cells: int = 0
    rows: int = 0
    sheet: bool = False
    first: bool = True
    prolog: bytes | None = b""  # the part's text before its root element; None once that has begun
    prefixed: bool = False  # a namespace prefix was declared: elements may be written x:c, x:row
    pending: bytes = b""
    refs: re.Pattern[bytes] = field(init=False)
    needles: tuple[bytes, ...] = field(init=False)

    def __post_init__(self) -> None:
        letters, digits = len(_column_name(self.limits.max_columns)), len(str(self.limits.max_rows))
        self.refs = _big_refs(letters, digits)
        self.needles = (b"0" * digits + b'"', b'"' + b"A" * letters)

    def refuse(self, problem: str) -> InputError:
        return InputError(f"refused: part {self.name} {problem}", path=self.where)

    def feed(self, text: bytes, final: bool = False) -> None:
        """More of the part's XML (UTF-8): scanned up to its last `<`, the rest kept for the next piece."""
        buffer = self.pending + text
        cut = len(buffer) if final else buffer.rfind(b"<")
        if cut <= 0:
            if len(buffer) > self.limits.max_text_run:
                raise self.refuse(f"holds more than {_size(self.limits.max_text_run)} without a tag")
            self.pending = buffer
            return
        self.pending = buffer[cut:]
        self.scan(buffer[:cut])

    def scan(self, block: bytes) -> None:
        if self.first:
            self.first = False
            declared = _DECLARED_ENCODING.match(block)
            if declared and declared.group(1).decode("ascii", "replace").lower() not in _ENCODINGS:
                raise self.refuse(f"declares the encoding {declared.group(1).decode('ascii', 'replace')!r}: "
                                  "an .xlsx part is UTF-8 or UTF-16")
        if self.prolog is not None:  # a parser takes a DTD only before the root element
            if b"<!DOCTYPE" in block or b"<!ENTITY" in block:
                raise self.refuse("declares a DTD (<!DOCTYPE or <!ENTITY): no workbook part has one, and its "
                                  "entities can read other files or expand without end")
            self.prolog += block
            if _root_started(self.prolog):
                self.prolog = None
            elif len(self.prolog) > self.limits.max_text_run:
                self.prolog = b""  # comments without end: keep looking at every piece
        self.prefixed = self.prefixed or b"xmlns:" in block  # no prefixed element without its declaration
        cells = len(_CELL.findall(block))
        self.rows += len(_ROW.findall(block))
        if self.prefixed:
            cells += len(_PREFIXED_CELL.findall(block)) if b":c" in block else 0
            self.rows += len(_PREFIXED_ROW.findall(block)) if b":row" in block else 0
        if not self.sheet and b"sheetData" in block and _SHEET_DATA.search(block):
            self.sheet = True
            self.totals.sheets += 1
            if self.totals.sheets > self.limits.max_sheets:
                raise InputError(f"refused: the workbook holds more than {self.limits.max_sheets:,} sheets",
                                 path=self.where)
        self.add_cells(cells)
        self.reach(self.rows, 0, "counting its <row> elements")
        shapes = block.translate(_SHAPES, b"$")
        if any(needle in shapes for needle in self.needles):  # rare: most blocks end here
            for match in self.refs.finditer(block):
                self.reach(int(match.group(2) or 0), _column_number(match.group(1)), "with a cell")
        for name, pattern in _RANGE_TAGS.items():
            if name in block:
                for match in pattern.finditer(block):
                    ref = _REF_ATTR.search(match.group(1))
                    if ref is not None and block[match.start() - 1:match.start()] in (b"<", b":"):
                        self.add_range(name, ref.group(1))
        if b"array" in block:
            for match in _ARRAY_ATTR.finditer(block):
                start = block.rfind(b"<", 0, match.start())
                end = block.find(b"<", match.end())
                tag = block[start:end if end >= 0 else len(block)]
                ref = _REF_ATTR.search(tag)
                if ref is not None and _TAG_START.match(tag):
                    self.add_range(b"f", ref.group(1))

    def add_cells(self, cells: int) -> None:
        self.cells += cells
        self.totals.cells += cells
        if self.cells > self.limits.max_sheet_cells:
            raise self.refuse(f"holds more than {self.limits.max_sheet_cells:,} cells (the limit a sheet); "
                              "is it a cell bomb?")
        if self.totals.cells > self.limits.max_cells:
            raise InputError(f"refused: the workbook holds more than {self.limits.max_cells:,} cells; "
                             "is it a cell bomb?", path=self.where)

    def add_range(self, kind: bytes, ref: bytes) -> None:
        for piece in ref.split():
            bounds = _bounds(piece)
            if bounds is None:
                continue  # not a reference: the readers name that
            first_row, first_col, last_row, last_col = bounds
            what = "its <dimension>" if kind == b"dimension" else _RANGE_WORDS[kind]
            self.reach(max(first_row, last_row), max(first_col, last_col), f"with {what} ({piece.decode()})")
            if kind == b"dimension" or (kind == b"hyperlink" and b":" not in piece):
                continue  # a dimension is only declared; a one-cell hyperlink is one cell
            self.totals.range_cells += (abs(last_row - first_row) + 1) * (abs(last_col - first_col) + 1)
            if self.totals.range_cells > self.limits.max_range_cells:
                raise InputError(f"refused: merged ranges, hyperlink ranges and array formulas cover more than "
                                 f"{self.limits.max_range_cells:,} cells (a reader makes an object for each); "
                                 f"part {self.name} has {what} {piece.decode()}; is it a cell bomb?",
                                 path=self.where)

    def reach(self, row: int, column: int, how: str) -> None:
        if row > self.limits.max_rows:
            raise self.refuse(f"reaches row {row:,} {how} (limit {self.limits.max_rows:,}); is it a cell bomb?")
        if column > self.limits.max_columns:
            raise self.refuse(f"reaches column {column:,} {how} (limit {self.limits.max_columns:,}); "
                              "is it a cell bomb?")


_PROLOG_ITEM = re.compile(rb"\s*(?:<\?.*?\?>|<!--.*?-->)", re.DOTALL)


def _root_started(text: bytes) -> bool:
    """Whether the root element begins in `text`, the start of a part: past the XML declaration,
    processing instructions and comments. An unfinished comment is not the root."""
    position = len(codecs.BOM_UTF8) if text.startswith(codecs.BOM_UTF8) else 0
    while (item := _PROLOG_ITEM.match(text, position)) is not None and item.end() > position:
        position = item.end()
    rest = text[position:].lstrip()
    return bool(rest) and not rest.startswith((b"<!", b"<?"))


@functools.lru_cache(maxsize=8)
def _big_refs(letters: int, digits: int) -> re.Pattern[bytes]:
    """An `r` attribute ("A1", or a row's "12") with at least `letters` letters or a row number of at
    least `digits` digits: the only ones that can pass the limits, so the scan looks at few."""
    return re.compile(rb"""\sr\s*=\s*["']\$?(?=[A-Za-z]{%d}|[A-Za-z]*\$?0*[1-9][0-9]{%d})([A-Za-z]*)\$?([0-9]*)["']"""
                      % (letters, digits - 1))


def _scan_part(archive: zipfile.ZipFile, info: zipfile.ZipInfo, limits: XlsxLimits, totals: _Totals,
               where: str) -> None:
    """Decompress one part in chunks: its actual size, and when it is XML what it holds."""
    allowed = min(info.file_size, limits.max_part_bytes)
    size = 0
    part: _Part | None = None
    decoder: codecs.IncrementalDecoder | None = None
    try:
        with archive.open(info) as handle:
            while chunk := handle.read(_CHUNK):
                size += len(chunk)
                totals.bytes += len(chunk)
                if size > allowed:
                    raise InputError(f"refused: part {info.filename} unpacks to more than the "
                                     f"{_size(allowed)} it declares or the limit allows", path=where)
                if totals.bytes > limits.max_total_bytes:
                    raise InputError(f"refused: the workbook unpacks to more than {_size(limits.max_total_bytes)}",
                                     path=where)
                if size == len(chunk):  # the first chunk says whether the part is XML, and in what encoding
                    encoding = _xml_encoding(chunk, info.filename.lower().endswith(_XML_NAMES), info.filename,
                                             where)
                    if encoding is None:
                        continue
                    part = _Part(info.filename, where, limits, totals)
                    if encoding != "utf-8":
                        decoder = codecs.getincrementaldecoder(encoding)("replace")
                if part is not None:
                    part.feed(decoder.decode(chunk).encode("utf-8") if decoder is not None else chunk)
            if part is not None:
                part.feed(decoder.decode(b"", final=True).encode("utf-8") if decoder is not None else b"",
                          final=True)
    except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, RuntimeError, ValueError) as exc:
        raise InputError.worded("damaged_part", path=where, name=info.filename, reason=str(exc)) from exc


def _xml_encoding(head: bytes, named_xml: bool, name: str, where: str) -> str | None:
    """The encoding of a part that is XML (by its name, or because it starts with a tag), None for
    one that is not (an image, vbaProject.bin). UTF-32 and EBCDIC, which an XML parser would
    read, are refused: their bytes would slip past the scan."""
    if head.startswith((b"\x00\x00\xfe\xff", b"\xff\xfe\x00\x00", b"<\x00\x00\x00", b"\x00\x00\x00<",
                        b"\x4c\x6f\xa7\x94")):
        raise InputError.worded("xml_other_encoding", path=where, name=name)
    if head.startswith((b"\xff\xfe", b"<\x00")):
        return "utf-16-le"
    if head.startswith((b"\xfe\xff", b"\x00<")):
        return "utf-16-be"
    if head.startswith(codecs.BOM_UTF8):
        head = head[len(codecs.BOM_UTF8):]
    if head.lstrip(b" \t\r\n").startswith(b"<"):
        return "utf-8"
    if named_xml and head.strip(b" \t\r\n"):
        raise InputError.worded("xml_not_utf", path=where, name=name)
    return None


def _bounds(piece: bytes) -> tuple[int, int, int, int] | None:
    """(first row, first column, last row, last column) of "A1", "A1:C3", "A:A" or "1:1"; a side
    left out spans the sheet, as a spreadsheet reads it. None when it is no reference."""
    corners = []
    for corner in piece.split(b":"):
        match = _CORNER.fullmatch(corner)
        if match is None or not (match.group(1) or match.group(2)):
            return None
        corners.append((int(match.group(2)) if match.group(2) else None, _column_number(match.group(1)) or None))
    if len(corners) == 1:
        corners.append(corners[0])
    if len(corners) != 2:
        return None
    (row1, col1), (row2, col2) = corners
    if row1 is None or row2 is None:
        row1, row2 = 1, EXCEL_ROWS
    if col1 is None or col2 is None:
        col1, col2 = 1, EXCEL_COLUMNS
    return row1, col1, row2, col2


def _column_number(letters: bytes) -> int:
    number = 0
    for ch in letters.upper():
        number = number * 26 + ch - 64
    return number


def _column_name(number: int) -> str:
    name = ""
    while number:
        number, rem = divmod(number - 1, 26)
        name = chr(65 + rem) + name
    return name


def _size(count: int) -> str:
    return f"{count / MIB:,.0f} MiB" if count >= MIB else f"{count:,} bytes"
