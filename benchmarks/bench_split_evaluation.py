"""Would IronCalc's evaluation, split in two halves that run at once, make `fill` faster? Measured,
and not kept in scm-xl: the evaluation alone gets faster (benchmarks/results/split_evaluation.md),
but on this 2-core machine `fill` as a command, with the split built into its IronCalc worker (a
patch measured and not kept), was no faster: 5 rounds alternating, median 12.16 s with the split
against 11.77 s without. The Python reference takes the second core while IronCalc evaluates, and
each half computes the per-row workings every sheet reads.

The idea: a spreadsheet engine evaluates a workbook on one core. Two copies of IronCalc can
evaluate one workbook at once, each with the formulas it need not compute cleared: a half holds
the formulas of the sheets it answers for and every formula those read, directly or through
others (their closure), so each value it answers for is computed from the same cells as in the
whole workbook. The per-row workings every sheet reads are computed twice, the rest once. The
worker loads the workbook once and forks: the halves share the loaded model's memory.

Which formula reads which comes from the formula texts (`package_formulas`, `references`): a
reference is followed to the formula elements whose cells it overlaps, a shared formula's
relative references over the whole range it covers; INDIRECT, OFFSET, external or structured
references and unknown names give no split. The sheets are put in two groups, a sheet moved at a
time while the larger group's closure costs less (`split`; the cost: each formula cell's cells
read, INDEX's range counted as one cell).

The benchmark fills a workbook of N rows, checks that the halves give every formula cell the
value the whole evaluation gives, then times the evaluation whole and in halves, alternating:
alone, and beside the Python reference's computation, as `fill` runs it (the command computes
the reference in its own process while IronCalc evaluates in the worker's).

    python benchmarks/bench_split_evaluation.py --rows 10000 --rounds 3
"""

from __future__ import annotations

import argparse
import bisect
import functools
import os
import pickle
import re
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))

from defusedxml import ElementTree  # noqa: E402

from bench_workbook import filled_workbook, head_commit  # noqa: E402  (the benchmark's one data generator)
from scm_xl.xlsx.package import column_name, column_number, sheet_parts  # noqa: E402
from scm_xl.xlsx.values import MAX_COLUMN, FormulaCells, cell_position  # noqa: E402

MAX_ROW = 1_048_576
# A split is kept only when its larger half costs at most this share of the whole (above it,
# computing the shared cells twice and the second process cost more than they save).
WORTH_SPLITTING = 0.8

Rect = tuple[int, int, int, int]  # top row, left column, bottom row, right column (from 1)


@dataclass(frozen=True)
class Formula:
    """One formula element of a sheet: its text, and the cells it covers (a shared formula's
    range, an array formula's range, or its one cell)."""

    sheet: str
    rect: Rect
    text: str
    shared: bool = False  # relative references move with the cell over `rect`


@dataclass
class Split:
    """Two halves of one workbook's evaluation. `clear[i]`: the ranges half i empties before it
    evaluates, by sheet; `read[i]`: the formula cells half i answers for (together, every
    formula cell, each once); `cost`: the estimated cost of the whole and of each half."""

    clear: tuple[dict[str, list[Rect]], dict[str, list[Rect]]]
    read: tuple[dict[str, list[str]], dict[str, list[str]]]
    cost: tuple[float, float, float] = (0.0, 0.0, 0.0)
    sheets: tuple[list[str], list[str]] = field(default_factory=lambda: ([], []))


class Unfollowable(ValueError):
    """A formula whose references cannot be followed for certain."""


# -- reading the formulas of a package --------------------------------------------------------

_F_END = b"</f>"
_CELL_OPEN = re.compile(rb'<c\b[^>]*?\sr="([A-Z]+)([0-9]+)"[^>]*>\s*<f\b([^>]*)>')
_ATTR_T = re.compile(rb'\st="([a-z]+)"')
_ATTR_REF = re.compile(rb'\sref="([A-Z]+[0-9]+)(?::([A-Z]+[0-9]+))?"')
_ENTITY = {"&amp;": "&", "&lt;": "<", "&gt;": ">", "&quot;": '"', "&apos;": "'"}
_ENTITY_RE = re.compile(r"&(?:amp|lt|gt|quot|apos);")


@dataclass
class Formulas:
    """A workbook's formula elements, its defined names ((sheet title, or None for the
    workbook's; the name upper-cased) -> text) and its sheets' titles."""

    formulas: list[Formula]
    names: dict[tuple[str | None, str], str]
    titles: list[str]


def package_formulas(path: str | Path) -> Formulas:
    """Every formula element with its text in the package at `path`, and its defined names."""
    with zipfile.ZipFile(path) as book:
        parts = sheet_parts(book)
        formulas: list[Formula] = []
        for title, part in parts.items():
            formulas += sheet_formulas(title, book.read(part))
        names = defined_names(book.read("xl/workbook.xml"), list(parts))
    return Formulas(formulas, names, list(parts))


def sheet_formulas(title: str, xml: bytes) -> list[Formula]:
    """The formula elements with a text in one sheet's XML (a shared formula's later cells,
    `<f t="shared" si=".."/>`, have none: their first cell's range covers them)."""
    out: list[Formula] = []
    at = xml.find(_F_END)
    while at >= 0:
        start = xml.rfind(b"<c ", 0, at)
        opened = _CELL_OPEN.match(xml, start) if start >= 0 else None
        if opened is None:
            raise Unfollowable(f"a formula of sheet {title!r} is not in a <c r=...> element")
        letters, digits, attrs = opened.groups()
        row, col = int(digits), column_number(letters)
        kind = _ATTR_T.search(attrs)
        ref = _ATTR_REF.search(attrs)
        rect: Rect = (row, col, row, col)
        shared = False
        if kind is not None and kind.group(1) in (b"shared", b"array") and ref is not None:
            top, left = cell_position(ref.group(1).decode())
            bottom, right = cell_position(ref.group(2).decode()) if ref.group(2) else (top, left)
            rect = (top, left, bottom, right)
            shared = kind.group(1) == b"shared"
        text = xml[opened.end():at].decode("utf-8")
        out.append(Formula(title, rect, _ENTITY_RE.sub(lambda m: _ENTITY[m.group(0)], text), shared))
        at = xml.find(_F_END, at + 4)
    return out


def defined_names(workbook_xml: bytes, titles: Sequence[str]) -> dict[tuple[str | None, str], str]:
    main = "{http://schemas.openxmlformats.org/spreadsheetml/2006/main}"
    names: dict[tuple[str | None, str], str] = {}
    for element in ElementTree.fromstring(workbook_xml).iter(f"{main}definedName"):
        local = element.get("localSheetId")
        scope = titles[int(local)] if local is not None and local.isdigit() and int(local) < len(titles) else None
        names[(scope, (element.get("name") or "").upper())] = element.text or ""
    return names


# -- following references ---------------------------------------------------------------------

_PART = r"\$?[A-Z]{1,3}\$?[0-9]+"
_TOKEN = re.compile(
    r'(?P<string>"(?:[^"]|"")*")'
    r"|(?P<ref>(?<![\w.$])(?:(?:'(?P<quoted>(?:[^']|'')+)'|(?P<plain>[^\W\d][\w.]*))!)?"
    rf"(?P<cells>{_PART}(?::{_PART})?|\$?[A-Z]{{1,3}}:\$?[A-Z]{{1,3}}|\$?[0-9]+:\$?[0-9]+)(?![\w(!.\[]))"
    r"|(?P<word>(?<![\w.$])[^\W\d][\w.]*)(?P<call>\s*\()?"
    r"|(?P<open>\()|(?P<close>\))|(?P<comma>,)"
    r"|(?P<odd>[\[!#])",
    re.UNICODE)
_DYNAMIC = {"INDIRECT", "OFFSET"}
# Functions that read only a reference's shape, never its cells: a reference passed to one
# straight is no dependency.
_SHAPE_ONLY = {"ROWS", "COLUMNS", "ROW", "COLUMN"}
_ERRORS = re.compile(r"#(?:NULL!|DIV/0!|VALUE!|REF!|NAME\?|NUM!|N/A|GETTING_DATA|SPILL!|CALC!)")


@dataclass(frozen=True)
class _Ref:
    sheet: str
    rect: Rect
    relative: tuple[bool, bool, bool, bool]  # which of top, left, bottom, right move with the cell
    picked: bool = False  # INDEX's range: one cell of it is read, not all (for the cost, not the dependency)


def references(text: str, sheet: str, names: Mapping[tuple[str | None, str], str],
               titles: Iterable[str] | _Titles, _depth: int = 0) -> list[_Ref]:
    """The ranges formula `text` (on `sheet`) reads, its names followed; raises Unfollowable."""
    known = titles if isinstance(titles, _Titles) else _Titles(titles)
    out: list[_Ref] = []
    calls: list[list[object]] = []  # the calls the token is in: [function or None, argument number]

    def context() -> str | None:
        """How a reference here is read: "shape" (not at all), "picked" (INDEX's range), else None."""
        if not calls:
            return None
        function, argument = calls[-1]
        if function in _SHAPE_ONLY:
            return "shape"
        return "picked" if function == "INDEX" and argument == 0 else None

    text = _ERRORS.sub("0", text)
    for match in _TOKEN.finditer(text):
        kind = match.lastgroup
        if kind == "string":
            continue
        if kind == "open":
            calls.append([None, 0])
            continue
        if kind == "close":
            if calls:
                calls.pop()
            continue
        if kind == "comma":
            if calls:
                calls[-1][1] = int(calls[-1][1]) + 1  # type: ignore[call-overload]
            continue
        if kind == "odd":
            raise Unfollowable(f"cannot follow {match.group('odd')!r} in {text!r}")
        how = context()
        if match.group("ref") is not None:
            named = match.group("quoted")
            named = named.replace("''", "'") if named is not None else match.group("plain")
            target = sheet if named is None else known.upper.get(named.upper())
            if target is None:
                raise Unfollowable(f"a reference to an unknown sheet in {text!r}")
            if how != "shape":
                ref = _range(target, match.group("cells"))
                out.append(_Ref(ref.sheet, ref.rect, ref.relative, True) if how == "picked" else ref)
            continue
        word = match.group("word").upper()
        if match.group("call") is not None:
            function = word.rsplit(".", 1)[-1]  # _xlfn.MINIFS
            if function in _DYNAMIC:
                raise Unfollowable(f"{word} reads cells chosen as it computes: {text!r}")
            calls.append([function, 0])
            continue
        if word in ("TRUE", "FALSE"):
            continue
        name = names.get((sheet, word), names.get((None, word)))
        if name is None:
            raise Unfollowable(f"an unknown name {word!r} in {text!r}")
        if _depth > 20:
            raise Unfollowable(f"names nested too deep in {text!r}")
        if how != "shape":  # a name's cells do not move with the cell
            out += [_Ref(ref.sheet, ref.rect, (False,) * 4, ref.picked or how == "picked")
                    for ref in references(name, sheet, names, known, _depth + 1)]
    return out


class _Titles:
    """Sheet titles by their upper-cased spelling (a reference names a sheet in any case)."""

    def __init__(self, titles: Iterable[str]) -> None:
        self.upper = {title.upper(): title for title in titles}


@functools.lru_cache(maxsize=65536)
def _range(sheet: str, cells: str) -> _Ref:
    first, _, last = cells.partition(":")
    if not last:
        last = first
    (top, left, top_rel, left_rel), (bottom, right, bottom_rel, right_rel) = _part(first, True), _part(last, False)
    if top > bottom:
        top, bottom, top_rel, bottom_rel = bottom, top, bottom_rel, top_rel
    if left > right:
        left, right, left_rel, right_rel = right, left, right_rel, left_rel
    return _Ref(sheet, (top, left, bottom, right), (top_rel, left_rel, bottom_rel, right_rel))


def _part(part: str, first: bool) -> tuple[int, int, bool, bool]:
    """(row, column, row moves, column moves) of one end of a range: "A1", "$A$1", "A" or "7"."""
    letters = re.match(r"\$?([A-Z]*)", part)
    assert letters is not None
    col_abs = part.startswith("$") and bool(letters.group(1))
    rest = part[letters.end():]
    row_abs = rest.startswith("$")
    digits = rest.lstrip("$")
    col = column_number(letters.group(1).encode()) if letters.group(1) else (1 if first else MAX_COLUMN)
    row = int(digits) if digits else (1 if first else MAX_ROW)
    if not letters.group(1):  # a whole row: "7" ($ before it is the row's)
        row_abs, col_abs = part.startswith("$"), True
    if not digits:
        row_abs = True
    return row, col, not row_abs, not col_abs


def _moved(ref: _Ref, origin: Rect) -> Rect:
    """The cells `ref` reads from any cell of `origin`, its relative ends moving with the cell."""
    top, left, bottom, right = ref.rect
    down, across = origin[2] - origin[0], origin[3] - origin[1]
    t_rel, l_rel, b_rel, r_rel = ref.relative
    return (top, left, min(MAX_ROW, bottom + down * (t_rel or b_rel)),
            min(MAX_COLUMN, right + across * (l_rel or r_rel)))


# -- the split ----------------------------------------------------------------------------------

def split(book: Formulas, cells: FormulaCells, *, second: Iterable[str] | None = None) -> Split | None:
    """Two halves for `cells` (every formula cell of the workbook, as engines are told them), or
    None where the formulas cannot be followed for certain or two halves would save little."""
    formulas, names, titles = book.formulas, book.names, _Titles(book.titles)
    try:
        refs_of = [references(f.text, f.sheet, names, titles) for f in formulas]
    except Unfollowable:
        return None
    index = _Index(formulas)
    deps: list[set[int]] = []
    costs: list[float] = []
    for at, (f, refs) in enumerate(zip(formulas, refs_of)):
        found: set[int] = set()
        scanned = 0.0
        for ref in refs:
            rect = _moved(ref, f.rect) if f.shared else ref.rect
            found |= index.overlapping(ref.sheet, rect)
            scanned += 1.0 if ref.picked else index.area(ref.sheet, ref.rect)
        found.discard(at)
        deps.append(found)
        top, left, bottom, right = f.rect
        cells_covered = (bottom - top + 1) * (right - left + 1)
        costs.append(cells_covered * (1.0 + scanned))  # each cell visits what one cell's references cover
    need = _closures(deps)
    by_sheet: dict[str, int] = {}
    for at, f in enumerate(formulas):
        by_sheet[f.sheet] = by_sheet.get(f.sheet, 0) | need[at]
    chosen = _partition(by_sheet, costs, None if second is None else set(second))
    if chosen is None:
        return None
    (first, second), (whole, cost_a, cost_b) = chosen
    halves = (_union(by_sheet, first), _union(by_sheet, second))
    clear: tuple[dict[str, list[Rect]], dict[str, list[Rect]]] = ({}, {})
    for at, f in enumerate(formulas):
        for half in (0, 1):
            if not halves[half] >> at & 1:
                clear[half].setdefault(f.sheet, []).append(f.rect)
    read: tuple[dict[str, list[str]], dict[str, list[str]]] = ({}, {})
    for sheet, sheet_refs in cells.items():
        for cell_ref in sheet_refs:
            pieces = index.pieces(sheet, cell_ref)
            if pieces is None:
                return None  # a formula cell no formula element covers: evaluate the whole
            for piece, which in pieces:
                read[0 if halves[0] >> which & 1 else 1].setdefault(sheet, []).append(piece)
    return Split(clear, read, (whole, cost_a, cost_b), (sorted(first), sorted(second)))


class _Index:
    """The formula elements of each sheet, by column, sorted by row (they do not overlap)."""

    def __init__(self, formulas: Sequence[Formula]) -> None:
        columns: dict[str, dict[int, list[tuple[int, int, int]]]] = {}
        self.rows: dict[str, int] = {}
        for at, f in enumerate(formulas):
            top, left, bottom, right = f.rect
            sheet = columns.setdefault(f.sheet, {})
            for col in range(left, right + 1):
                sheet.setdefault(col, []).append((top, bottom, at))
            self.rows[f.sheet] = max(self.rows.get(f.sheet, 0), bottom)
        self.columns = {sheet: {col: sorted(spans) for col, spans in cols.items()} for sheet, cols in columns.items()}
        self.tops = {sheet: {col: [s[0] for s in spans] for col, spans in cols.items()}
                     for sheet, cols in self.columns.items()}

    def overlapping(self, sheet: str, rect: Rect) -> set[int]:
        top, left, bottom, right = rect
        found: set[int] = set()
        for col, spans in self.columns.get(sheet, {}).items():
            if not left <= col <= right:
                continue
            tops = self.tops[sheet][col]
            stop = bisect.bisect_right(tops, bottom)
            at = max(0, bisect.bisect_right(tops, top) - 1)
            for span_top, span_bottom, which in spans[at:stop]:
                if span_bottom >= top and span_top <= bottom:
                    found.add(which)
        return found

    def covering(self, sheet: str, cell: tuple[int, int]) -> int | None:
        row, col = cell
        spans = self.columns.get(sheet, {}).get(col)
        if not spans:
            return None
        at = bisect.bisect_right(self.tops[sheet][col], row) - 1
        if at >= 0 and spans[at][0] <= row <= spans[at][1]:
            return spans[at][2]
        return None

    def pieces(self, sheet: str, ref: str) -> list[tuple[str, int]] | None:
        """Formula cells `ref` ("A1" or "A1:C9") cut at the formula elements that cover them:
        (a column's run of rows, the element), or None where a cell is covered by none."""
        first, _, last = ref.partition(":")
        (top, left), (bottom, right) = cell_position(first), cell_position(last or first)
        out = []
        for col in range(left, right + 1):
            name = column_name(col)
            row = top
            while row <= bottom:
                which = self.covering(sheet, (row, col))
                if which is None:
                    return None
                end = min(bottom, self.columns[sheet][col][bisect.bisect_right(self.tops[sheet][col], row) - 1][1])
                out.append((f"{name}{row}" if end == row else f"{name}{row}:{name}{end}", which))
                row = end + 1
        return out

    def area(self, sheet: str, rect: Rect) -> float:
        """The cells of `rect` a scan visits: whole columns and rows cut to what the sheet's
        formulas cover (a range of stored values costs as many visits as one of formulas)."""
        top, left, bottom, right = rect
        bottom = min(bottom, max(self.rows.get(sheet, 0), top))
        right = min(right, left + 255)
        return float((bottom - top + 1) * (right - left + 1))


def _closures(deps: Sequence[set[int]]) -> list[int]:
    """Each formula element with every element it reads, directly or not, as a bit mask."""
    need = [1 << at for at in range(len(deps))]
    order: list[int] = []  # depth first, what a formula reads before it
    seen = [False] * len(deps)
    for root in range(len(deps)):
        if seen[root]:
            continue
        seen[root] = True
        stack = [(root, iter(deps[root]))]
        while stack:
            node, children = stack[-1]
            for child in children:
                if not seen[child]:
                    seen[child] = True
                    stack.append((child, iter(deps[child])))
                    break
            else:
                stack.pop()
                order.append(node)
    changed = True
    while changed:  # once in that order, again while a cycle of elements still adds
        changed = False
        for node in order:
            mask = need[node]
            for child in deps[node]:
                mask |= need[child]
            if mask != need[node]:
                need[node] = mask
                changed = True
    return need


def _union(by_sheet: Mapping[str, int], sheets: Iterable[str]) -> int:
    mask = 0
    for sheet in sheets:
        mask |= by_sheet[sheet]
    return mask


def _partition(by_sheet: Mapping[str, int], costs: Sequence[float], chosen: set[str] | None = None
               ) -> tuple[tuple[set[str], set[str]], tuple[float, float, float]] | None:
    """The sheets in two groups whose closures cost least at the larger one (a sheet moved at a
    time while that helps), or None where the larger would cost more than WORTH_SPLITTING of the
    whole."""
    def cost(mask: int) -> float:
        total, at = 0.0, 0
        while mask:
            chunk = mask & 0xFFFFFFFF
            while chunk:
                low = chunk & -chunk
                total += costs[at + low.bit_length() - 1]
                chunk ^= low
            mask >>= 32
            at += 32
        return total

    sheets = sorted(by_sheet, key=lambda s: -cost(by_sheet[s]))
    whole = cost(_union(by_sheet, sheets))
    if whole <= 0 or len(sheets) < 2:
        return None
    second: set[str] = set()
    best = whole
    while chosen is None:
        move = None
        for sheet in sheets:
            trial = second ^ {sheet}
            if not trial or len(trial) == len(sheets):
                continue
            larger = max(cost(_union(by_sheet, set(sheets) - trial)), cost(_union(by_sheet, trial)))
            if larger < best - 1e-9:
                best, move = larger, sheet
        if move is None:
            break
        second ^= {move}
    if chosen is not None:
        second = chosen & set(sheets)
    elif not second or best > WORTH_SPLITTING * whole:
        return None
    first = set(sheets) - second
    return (first, second), (whole, cost(_union(by_sheet, first)), cost(_union(by_sheet, second)))


# -- the measurement ----------------------------------------------------------------------------

def read_values(model: object, index: Mapping[str, int], refs: Mapping[str, Sequence[str]]
                ) -> dict[str, dict[str, object]]:
    """The values of formula cells `refs` (sheet -> "A1" or ranges) of an evaluated model."""
    out: dict[str, dict[str, object]] = {}
    for sheet, sheet_refs in refs.items():
        cells = out.setdefault(sheet, {})
        for ref in sheet_refs:
            first, _, last = ref.partition(":")
            (top, left), (bottom, right) = cell_position(first), cell_position(last or first)
            for col in range(left, right + 1):
                for row in range(top, bottom + 1):
                    cells[f"{column_name(col)}{row}"] = model.get_cell_value(index[sheet], row, col)  # type: ignore[attr-defined]
    return out


def evaluate(prepared: Path, plan: Split | None, plan_all: FormulaCells | None = None
             ) -> tuple[float, float, dict[str, dict[str, object]]]:
    """IronCalc's evaluation of `prepared` (a copy as `fill` writes IronCalc's input), whole or
    in the two halves of `plan`: (wall seconds of the evaluation, of the load, and with
    SPLIT_VALUES set every formula cell's value by sheet and "A1"; whole: those of `plan_all`)."""
    import ironcalc

    start = time.perf_counter()
    model = ironcalc.load_from_xlsx(str(prepared), "en", "UTC")
    loaded = time.perf_counter()
    index = {props["name"]: i for i, props in enumerate(model.get_worksheets_properties())}

    def read(refs: Mapping[str, Sequence[str]]) -> dict[str, dict[str, object]]:
        return read_values(model, index, refs)

    if plan is None:
        model.evaluate()
        wall = time.perf_counter() - loaded
        return wall, loaded - start, read(plan_all) if plan_all is not None else {}
    spool = tempfile.TemporaryFile()
    sys.stdout.flush()
    child = os.fork()
    half = 1 if child == 0 else 0
    for sheet, rects in plan.clear[half].items():
        for top, left, bottom, right in rects:
            model.range_clear_contents(index[sheet], top, left, bottom, right)
    model.evaluate()
    if child == 0:
        pickle.dump(read(plan.read[1]) if os.environ.get("SPLIT_VALUES") else {}, spool)
        spool.flush()
        os._exit(0)
    os.waitpid(child, 0)
    wall = time.perf_counter() - loaded
    values: dict[str, dict[str, object]] = {}
    if os.environ.get("SPLIT_VALUES"):
        spool.seek(0)
        values = read(plan.read[0])
        for sheet, cells in pickle.load(spool).items():
            values.setdefault(sheet, {}).update(cells)
    return wall, loaded - start, values


def engine_process(prepared: Path, plan_file: Path | None) -> dict[str, float]:
    """`evaluate` in a process of its own, as `fill`'s worker runs it."""
    command = [sys.executable, __file__, "--engine", str(prepared)] + (
        ["--plan", str(plan_file)] if plan_file is not None else [])
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    wall, load = (float(x) for x in done.stdout.split())
    return {"evaluate": wall, "load": load}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=10000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--engine", help=argparse.SUPPRESS)
    parser.add_argument("--plan", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.engine:
        plan = pickle.loads(Path(args.plan).read_bytes()) if args.plan else None
        wall, load, _ = evaluate(Path(args.engine), plan)
        print(f"{wall:.3f} {load:.3f}")
        return

    import threading

    from scm_xl.engines.ironcalc_worker import for_ironcalc
    from scm_xl.workbook.io import read_inputs
    from scm_xl.workbook.registry import expected_cells, load_inputs, read_layout
    from scm_xl.xlsx.package import workbook_formula_refs

    commit = head_commit()
    with tempfile.TemporaryDirectory(prefix="scm-split-") as tmp:
        folder = Path(tmp)
        book = filled_workbook(folder, args.rows)
        (folder / "prepared").mkdir()
        prepared = for_ironcalc(book, folder / "prepared")
        cells = workbook_formula_refs(prepared)  # `fill` knows them without reading the file
        started = time.perf_counter()
        formulas = package_formulas(prepared)
        plan = split(formulas, cells)
        planned = time.perf_counter() - started
        if plan is None:
            raise SystemExit("no split for this workbook")
        plan_file = folder / "plan.pickle"
        plan_file.write_bytes(pickle.dumps(plan))
        count = sum(_area(ref) for refs in cells.values() for ref in refs)

        os.environ["SPLIT_VALUES"] = "1"
        _, _, whole_values = evaluate(prepared, None, cells)
        _, _, halves_values = evaluate(prepared, plan)
        del os.environ["SPLIT_VALUES"]
        differ = sum(1 for sheet, values in whole_values.items() for ref, value in values.items()
                     if halves_values.get(sheet, {}).get(ref, object()) != value
                     and not (value != value and halves_values[sheet][ref] != halves_values[sheet][ref]))
        compared = sum(len(values) for values in whole_values.values())

        wb = load_inputs(book)
        layout = read_layout(wb, book)
        inputs = read_inputs(wb, layout, book)
        del wb

        runs: dict[tuple[str, str], list[float]] = {}
        reference_seconds: list[float] = []
        for round_ in range(args.rounds):
            for beside in (False, True):
                for mode in ("whole", "halves"):
                    result: dict[str, float] = {}
                    thread = threading.Thread(target=lambda: result.update(
                        engine_process(prepared, plan_file if mode == "halves" else None)))
                    thread.start()
                    if beside:
                        start = time.perf_counter()
                        expected_cells(layout, inputs)
                        reference_seconds.append(time.perf_counter() - start)
                    thread.join()
                    where = "beside the reference" if beside else "alone"
                    runs.setdefault((mode, where), []).append(result["evaluate"])
                    print(f"round {round_ + 1} {where}: {mode} {result['evaluate']:.2f} s "
                          f"(load {result['load']:.2f} s)", flush=True)

    lines = [f"# IronCalc's evaluation whole and in two halves at once, {args.rows:,} rows ({commit})", "",
             f"`python benchmarks/bench_split_evaluation.py --rows {args.rows} --rounds {args.rounds}` on a "
             f"{os.cpu_count()}-core machine: each evaluation in a process of its own (load, then evaluate; "
             "the halves: load once, fork, each clears what it need not compute and evaluates). "
             "\"Beside the reference\": this process computes the Python reference (`expected_cells`) while "
             "the engine's process evaluates, as `fill` does.", "",
             f"- the split: {', '.join(plan.sheets[1])} and their closure in one half; the other sheets and "
             f"theirs in the other (estimated cost {plan.cost[1] / plan.cost[0]:.2f} and "
             f"{plan.cost[2] / plan.cost[0]:.2f} of the whole); worked out in {planned:.2f} s (the "
             f"{len(formulas.formulas):,} formula texts read from the file, followed, and the sheets grouped)",
             f"- the halves' values against the whole's: {compared:,} formula cells compared "
             f"({count:,} formula cells), {differ} differ",
             f"- the reference beside it: median {statistics.median(reference_seconds):.2f} s", "",
             "| evaluation | alone, s (median) | beside the reference, s (median) | rounds |",
             "|---|---:|---:|---|"]
    for mode in ("whole", "halves"):
        alone, beside_ = runs[(mode, "alone")], runs[(mode, "beside the reference")]
        lines.append(f"| {mode} | {statistics.median(alone):.2f} | {statistics.median(beside_):.2f} | "
                     f"{', '.join(f'{a:.2f}/{b:.2f}' for a, b in zip(alone, beside_))} |")
    text = "\n".join(lines) + "\n"
    (HERE / "results" / "split_evaluation.md").write_text(text)
    print(text)


def _area(ref: str) -> int:
    first, _, last = ref.partition(":")
    (top, left), (bottom, right) = cell_position(first), cell_position(last or first)
    return (bottom - top + 1) * (right - left + 1)


if __name__ == "__main__":
    main()
