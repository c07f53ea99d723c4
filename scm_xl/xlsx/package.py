"""The cells of an xlsx sheet, read straight from its XML: fast enough for 10,000-row sheets.

openpyxl builds a Python object per cell, which costs seconds on a sheet of a million
cells; the engines only need to know which cells hold formulas, and (for a file that
LibreOffice saved) the values stored in them. Both are a scan of the <c> elements.
The sheet XML is streamed row by row.
"""

from __future__ import annotations

import contextlib
import math
import os
import posixpath
import queue
import re
import shutil
import tempfile
import threading
import zipfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO

from defusedxml import ElementTree

from scm_xl.outputs import signals_held

_MAIN_NS = "http://schemas.openxmlformats.org/spreadsheetml/2006/main"
_REL_NS = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
_PKG_REL_NS = "http://schemas.openxmlformats.org/package/2006/relationships"
CHUNK = 1 << 20  # bytes read or deflated at a time
# zlib's level for every member `copy_package` deflates. A 10,000-row workbook's 83 MB of XML:
# level 6 (zlib's default) 0.93 s and 8.2 MB, level 3 0.36 s and 9.1 MB, level 1 0.25 s and 10.3 MB;
# `fill` deflates the final file while the engine's last sheets come back, so the level shows on
# the command's end (about half a second at 10,000 rows; benchmarks/results/fill_speed.md).
DEFLATE_LEVEL = 3

# "Anything up to </c>" written as runs of bytes other than "<": several times faster than .*?
# A <row> element, whole: group 1 its attributes, group 2 its cells.
ROW_ELEMENT = re.compile(rb"<row\b([^>]*?)(?:/>|>([^<]*(?:<(?!/row>)[^<]*)*)</row>)")
_CELL = re.compile(rb"<c\b([^>]*?)(?:/>|>([^<]*(?:<(?!/c>)[^<]*)*)</c>)")
_CELL_WITH_R = re.compile(rb'<c r="([A-Z]+)([0-9]+)"([^>]*?)(?:/>|>([^<]*(?:<(?!/c>)[^<]*)*)</c>)')
_R = re.compile(rb'\sr\s*=\s*["\']([A-Z]*)([0-9]+)["\']')
_T = re.compile(rb'\st\s*=\s*["\']([a-zA-Z]+)["\']')
_F = re.compile(rb"<f\b([^>]*?)(?:/>|>(.*?)</f>)", re.DOTALL)
_ARRAY_REF = re.compile(rb'\sref\s*=\s*["\']([A-Z]+[0-9]+(?::[A-Z]+[0-9]+)?)["\']')
_FORMULA_CELL = re.compile(rb'<c\b[^>]*?\sr="([A-Z]+[0-9]+)"[^>]*>\s*<f\b([^>]*)')
_V = re.compile(rb"<v>(.*?)</v>", re.DOTALL)
_IS_TEXT = re.compile(rb"<t\b[^>]*>(.*?)</t>", re.DOTALL)
_ENTITY = re.compile(rb"&(amp|lt|gt|quot|apos|#[0-9]+|#x[0-9a-fA-F]+);")
_ENTITIES = {b"amp": "&", b"lt": "<", b"gt": ">", b"quot": '"', b"apos": "'"}

CellXml = tuple[int, int, bytes, bytes]  # row, column (from 1), the <c> attributes, its content


def sheet_parts(book: zipfile.ZipFile) -> dict[str, str]:
    """Sheet title -> the zip member that holds its XML, in workbook order."""
    workbook = ElementTree.fromstring(book.read("xl/workbook.xml"))
    rels = ElementTree.fromstring(book.read("xl/_rels/workbook.xml.rels"))
    targets = {rel.get("Id"): rel.get("Target", "") for rel in rels.iter(f"{{{_PKG_REL_NS}}}Relationship")}
    parts = {}
    for sheet in workbook.iter(f"{{{_MAIN_NS}}}sheet"):
        target = targets.get(sheet.get(f"{{{_REL_NS}}}id"), "")
        # relative to xl/, or absolute from the package root
        parts[sheet.get("name", "")] = (target[1:] if target.startswith("/")
                                        else posixpath.normpath(posixpath.join("xl", target)))
    return parts


def cells(stream: IO[bytes]) -> Iterator[CellXml]:
    """Every <c> element of a sheet's XML, row by row."""
    for block in row_blocks(stream):
        found = list(_CELL_WITH_R.finditer(block))
        if len(found) == block.count(b"<c ") + block.count(b"<c>") + block.count(b"<c/"):
            for match in found:
                yield int(match.group(2)), column_number(match.group(1)), match.group(3), match.group(4) or b""
        else:  # a writer that leaves out r="A1" or writes it otherwise: count rows and columns
            yield from _cells_counted(block)


def _cells_counted(block: bytes) -> Iterator[CellXml]:
    last_row = 0
    for row_match in ROW_ELEMENT.finditer(block):
        number = _R.search(b" " + row_match.group(1))
        last_row = int(number.group(2)) if number else last_row + 1
        column = 0
        for cell in _CELL.finditer(row_match.group(2) or b""):
            ref = _R.search(cell.group(1))
            column = column_number(ref.group(1)) if ref else column + 1
            yield last_row, column, cell.group(1), cell.group(2) or b""


class Unreadable(ValueError):
    """A file that is not an xlsx package this module can read."""


def workbook_formula_refs(path: str | Path) -> dict[str, list[str]]:
    """Each sheet's formulas (`formula_refs`), by sheet title; Unreadable for a file that is not
    an xlsx package (missing, not a zip, a broken part)."""
    try:
        with zipfile.ZipFile(path) as book:
            members = set(book.namelist())
            return {title: formula_refs(book, part) for title, part in sheet_parts(book).items() if part in members}
    except (OSError, KeyError, ValueError, zipfile.BadZipFile, ElementTree.ParseError) as exc:
        raise Unreadable(f"cannot read workbook {path}: {exc}") from exc


def formula_refs(book: zipfile.ZipFile, part: str) -> list[str]:
    """A sheet's formulas: "A1" for a plain formula, "C2:C12" for a run of plain formulas down a
    column, the whole range "C2:C12" for an array formula. The runs keep the list short: a
    100,000-row workbook has 13 million formula cells, a gigabyte as one string each."""
    refs: list[str] = []
    runs: dict[str, list[int]] = {}  # column letters -> [first, last] row of the run open in it
    with book.open(part) as stream:
        for block in row_blocks(stream):
            for ref in _formula_refs_in(block):
                if ":" in ref:  # an array formula's range
                    refs.append(ref)
                    continue
                letters = ref.rstrip("0123456789")
                row = int(ref[len(letters):])
                run = runs.get(letters)
                if run is not None and row == run[1] + 1:
                    run[1] = row
                    continue
                if run is not None:
                    refs.append(_run(letters, run))
                runs[letters] = [row, row]
    refs.extend(_run(letters, run) for letters, run in runs.items())
    return refs


def _run(letters: str, run: list[int]) -> str:
    first, last = run
    return f"{letters}{first}" if first == last else f"{letters}{first}:{letters}{last}"


def row_blocks(stream: IO[bytes]) -> Iterator[bytes]:
    """The sheet XML in pieces that end at a row's end, so no cell is split between two."""
    buffer = b""
    while chunk := stream.read(CHUNK):
        buffer += chunk
        cut = buffer.rfind(b"</row>")
        if cut >= 0:
            yield buffer[:cut + len(b"</row>")]
            buffer = buffer[cut + len(b"</row>"):]
    yield buffer


# A formula cell, whole (<f> is always a <c>'s first child); a self-closing <c .../> never matches.
_FORMULA_CELL_WHOLE = re.compile(rb"<c\b[^>]*>[^<]*<f\b[^<]*(?:<(?!/c>)[^<]*)*</c>")
_ROW_NUMBER = re.compile(rb'<row\b[^>]*?\sr\s*=\s*["\']([0-9]+)["\']')


def formula_cells_dropped(block: bytes, below: int) -> bytes:
    """A block of whole rows (`row_blocks`) without the formula cells of the rows after row
    `below`. Rows ascend: a row without its number (no r attribute) is the one after the row
    before it, and is kept whole where that cannot be told (first in the block, or after a row kept)."""
    start = block.find(b"<row")
    if start < 0:
        return block
    first = _ROW_NUMBER.match(block, start)
    if first is not None and int(first.group(1)) > below:  # most blocks of a large sheet: one sweep
        return _FORMULA_CELL_WHOLE.sub(b"", block)

    def row(match: re.Match[bytes]) -> bytes:
        number = _ROW_NUMBER.match(match.group(0))
        if number is None or int(number.group(1)) <= below:
            return match.group(0)
        return _FORMULA_CELL_WHOLE.sub(b"", match.group(0))

    return ROW_ELEMENT.sub(row, block)


# An empty cell that carries only a style, as openpyxl writes it: <c r="B4" s="11"/> (with
# ElementTree) or <c r="B4" s="11"></c> (with lxml), possibly with t="n".
STYLED_EMPTY_CELL = re.compile(rb'<c r="[A-Z]+[0-9]+"(?: s="[0-9]+")?(?: t="n")?\s*(?:/>|></c>)')

SheetRewrite = Callable[[Iterator[bytes]], Iterable[bytes]]

_CELL_COLUMN = re.compile(rb'<c\b[^>]*?\sr="([A-Z]+)[0-9]+"[^>]*?(?:/>|>[^<]*(?:<(?!/c>)[^<]*)*</c>)')


_CELL_START = re.compile(rb'<c r="([A-Z]+)')
_CELL_TAG = re.compile(rb"<c[\s/>]")


def with_cells(row_xml: bytes, extra: list[tuple[int, bytes]]) -> bytes:
    """A <row> element's XML with the cells `extra` ((column, <c> XML), in column order) put in
    among its own in column order; an empty styled cell already at one of their columns (a number
    format set on it) gives way to it. Any other cell there is an error: two values for one cell."""
    if row_xml.endswith(b"/>"):
        return row_xml[:-2].rstrip() + b">" + b"".join(xml for _, xml in extra) + b"</row>"
    open_end = row_xml.index(b">") + 1
    body = row_xml[open_end:-len(b"</row>")]
    starts = list(_CELL_START.finditer(body))
    if len(starts) != len(_CELL_TAG.findall(body)):  # a cell whose r is not its first attribute (or no r)
        return row_xml[:open_end] + _among_whole_cells(body, extra) + b"</row>"
    # Each cell's start and column only (openpyxl writes r first): a whole cell is read only where
    # one of `extra` falls on its column (the raw-data sheet's rows: its three display cells among
    # the inputs).
    out: list[bytes] = []
    at = 0
    i = 0
    for match in starts:
        if i == len(extra):
            break
        column = column_number(match.group(1))
        if column < extra[i][0]:
            continue
        out.append(body[at:match.start()])
        at = match.start()
        while i < len(extra) and extra[i][0] < column:
            out.append(extra[i][1])
            i += 1
        if i < len(extra) and extra[i][0] == column:
            empty = STYLED_EMPTY_CELL.match(body, match.start())
            if empty is None:
                raise _taken(match.group(1))
            out.append(extra[i][1])
            i += 1
            at = empty.end()
    out.append(body[at:])
    out.extend(xml for _, xml in extra[i:])
    return row_xml[:open_end] + b"".join(out) + b"</row>"


def _among_whole_cells(body: bytes, extra: list[tuple[int, bytes]]) -> bytes:
    """`with_cells`' row body, each cell read whole."""
    pending = dict(extra)
    out: list[bytes] = []
    at = 0
    for match in _CELL_COLUMN.finditer(body):
        column = column_number(match.group(1))
        out.append(body[at:match.start()])
        at = match.end()
        for col in sorted(c for c in pending if c < column):
            out.append(pending.pop(col))
        if column in pending:
            if STYLED_EMPTY_CELL.fullmatch(match.group(0)) is None:
                raise _taken(match.group(1))
            out.append(pending.pop(column))
        else:
            out.append(match.group(0))
    out.append(body[at:])
    out.extend(pending[col] for col in sorted(pending))
    return b"".join(out)


def _taken(letters: bytes) -> ValueError:
    return ValueError(f"cell {letters.decode()} of a shared formula's range already holds something")


def copy_package(source: str | Path, target: str | Path, rewrite: Callable[[str], SheetRewrite | None], *,
                 compression: int | None = zipfile.ZIP_STORED) -> None:
    """Copy the xlsx package `source` to `target` member by member: the one package copy of
    scm-xl. A member for which `rewrite(member name)` gives a function is streamed through it in
    whole-row blocks (`row_blocks`), deflated from a thread of its own (`DeflatingWriter`);
    every other member is copied as it is. `compression` is the copy's (stored by default: a
    copy made for an engine is read once); None keeps each member's own.

    The copy is written beside `target` under a temporary name and renamed onto it when
    complete (`target` may be `source`); on an error `target` is untouched."""
    target = Path(target)
    handle, temp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(handle)
    try:
        with zipfile.ZipFile(source) as book, \
                zipfile.ZipFile(temp_name, "w", compression or zipfile.ZIP_STORED) as copy:
            for info in book.infolist():
                out = zipfile.ZipInfo(info.filename, date_time=info.date_time)
                out.compress_type = info.compress_type if compression is None else compression
                out.external_attr = info.external_attr
                out.create_system = info.create_system
                out._compresslevel = DEFLATE_LEVEL  # type: ignore[attr-defined]  # zipfile's own per-member level
                change = rewrite(info.filename)
                with book.open(info) as reader, _member_writer(copy, out) as writer:
                    if change is None:
                        shutil.copyfileobj(reader, writer, CHUNK)
                    elif out.compress_type == zipfile.ZIP_DEFLATED:
                        with DeflatingWriter(writer) as deflating:
                            for piece in change(row_blocks(reader)):
                                deflating.write(piece)
                    else:
                        for piece in change(row_blocks(reader)):
                            writer.write(piece)
        os.replace(temp_name, target)
    except BaseException:
        os.unlink(temp_name)
        raise


@contextlib.contextmanager
def _member_writer(copy: zipfile.ZipFile, info: zipfile.ZipInfo) -> Iterator[IO[bytes]]:
    """`copy.open(info, "w")`, entered with a signal's exit held: an exit that landed between the
    open and its `with` would leave the member's writer open, and `ZipFile.close` would then
    raise its own ValueError in place of the exit (the CLI's SIGTERM handler raises one)."""
    with contextlib.ExitStack() as stack:
        with signals_held():
            writer = stack.enter_context(copy.open(info, "w", force_zip64=True))
        yield writer


class DeflatingWriter:
    """Writes a zip member's pieces (`writer`: `ZipFile.open(..., "w")`) from a thread of its
    own, in blocks of CHUNK: zlib lets go of Python's lock while it deflates a block, so deflating
    one block overlaps making the next (about a third of the time `cached_values` takes to store
    a 10,000-row workbook's values)."""

    def __init__(self, writer: IO[bytes]) -> None:
        self.writer = writer
        self.pending: list[bytes] = []
        self.size = 0
        self.blocks: queue.Queue[bytes | None] = queue.Queue(maxsize=4)
        self.failed: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="scm-xl-deflate", daemon=True)

    def __enter__(self) -> DeflatingWriter:
        self.thread.start()
        return self

    def write(self, piece: bytes) -> None:
        self.pending.append(piece)
        self.size += len(piece)
        if self.size >= CHUNK:
            self._send()

    def _send(self) -> None:
        if self.failed is not None:
            raise self.failed
        self.blocks.put(b"".join(self.pending))
        self.pending, self.size = [], 0

    def _run(self) -> None:
        while (block := self.blocks.get()) is not None:
            if self.failed is None:
                try:
                    self.writer.write(block)
                except BaseException as exc:  # raised in the writing thread by the next write or the close
                    self.failed = exc

    def __exit__(self, kind: object, error: object, trace: object) -> None:
        if kind is None and self.pending:
            self._send()
        self.blocks.put(None)
        self.thread.join()
        if kind is None and self.failed is not None:
            raise self.failed


def _formula_refs_in(block: bytes) -> list[str]:
    # One regular expression with a literal start: per-row formulas make a 10,000-row sheet
    # hundreds of megabytes of XML, and <f> is always a cell's first child.
    refs = []
    for match in _FORMULA_CELL.finditer(block):
        array = _ARRAY_REF.search(match.group(2)) if b"array" in match.group(2) else None
        refs.append((array or match).group(1).decode("ascii"))
    if len(refs) == block.count(b"<f>") + block.count(b"<f ") + block.count(b"<f/"):
        return refs
    # A writer that leaves out r="A1" or quotes it differently: read cell by cell instead.
    refs = []
    for row, column, _, content in _cells_counted(block):
        formula = _F.search(content)
        if formula is not None:
            array = _ARRAY_REF.search(formula.group(1)) if b"array" in formula.group(1) else None
            refs.append(array.group(1).decode("ascii") if array else f"{column_name(column)}{row}")
    return refs


def stored_value(attrs: bytes, content: bytes, shared: Callable[[], list[str]]) -> object:
    """The value stored in one cell, as openpyxl's data_only reader gives it: float, str, bool,
    ("error", code) for an error, or None."""
    kind = _T.search(attrs)
    kind_name = kind.group(1) if kind else b"n"
    if kind_name == b"inlineStr":
        return _text(b"".join(_IS_TEXT.findall(content))) or None
    value = _V.search(content)
    if value is None or not value.group(1):
        return None
    text = value.group(1)
    if kind_name == b"n":
        number = float(text)
        return number if math.isfinite(number) else None
    if kind_name == b"b":
        return text.strip() == b"1"
    if kind_name == b"e":
        return ("error", _text(text))
    if kind_name == b"s":
        return shared()[int(text)]
    return _text(text)  # "str": a formula's text result


def shared_strings(book: zipfile.ZipFile) -> list[str]:
    """The shared-string table, plain text of each entry (rich-text runs joined)."""
    try:
        xml = book.read("xl/sharedStrings.xml")
    except KeyError:
        return []
    table = ElementTree.fromstring(xml)
    return ["".join(t.text or "" for t in item.iter(f"{{{_MAIN_NS}}}t")) for item in table.iter(f"{{{_MAIN_NS}}}si")]


def _text(raw: bytes) -> str:
    return _ENTITY.sub(_entity, raw).decode("utf-8")


def _entity(match: re.Match[bytes]) -> bytes:
    name = match.group(1)
    if name.startswith(b"#x"):
        char = chr(int(name[2:], 16))
    elif name.startswith(b"#"):
        char = chr(int(name[1:]))
    else:
        char = _ENTITIES[name]
    return char.encode("utf-8")


_COLUMN_NUMBERS: dict[bytes, int] = {}
_COLUMN_NAMES: dict[int, str] = {}


def column_number(letters: bytes) -> int:
    number = _COLUMN_NUMBERS.get(letters)
    if number is None:
        number = 0
        for ch in letters:
            number = number * 26 + ch - 64
        _COLUMN_NUMBERS[letters] = number
    return number


def column_name(number: int) -> str:
    name = _COLUMN_NAMES.get(number)
    if name is None:
        name, n = "", number
        while n:
            n, rem = divmod(n - 1, 26)
            name = chr(65 + rem) + name
        _COLUMN_NAMES[number] = name
    return name
