"""The registry is the one list of the workbook's sheets: every sheet a module declares is in it,
nothing else lists the sheets, and each sheet's reference reads only the sheets it says it reads
(so the order the registry computes them in is right)."""

from __future__ import annotations

import ast
import importlib
from collections.abc import Iterator, MutableMapping
from pathlib import Path
from typing import Any

import pytest

from scm_xl.workbook import registry
from scm_xl.workbook.sheet import Checking, SheetSpec
from support import books
from support.paths import ARTICLE
from support.source import parsed

WORKBOOK = Path(registry.__file__).parent
KEYS = {spec.key for spec in registry.SHEETS}


def _declared_specs() -> Iterator[tuple[str, str, SheetSpec]]:
    """(module, attribute, spec) for every SheetSpec a workbook module holds at its top level."""
    for path in sorted(WORKBOOK.glob("*.py")):
        module = importlib.import_module(f"scm_xl.workbook.{path.stem}")
        for name, value in vars(module).items():
            if isinstance(value, SheetSpec):
                yield path.stem, name, value
            elif isinstance(value, tuple) and value and all(isinstance(v, SheetSpec) for v in value):
                for spec in value:
                    yield path.stem, name, spec


def test_every_sheet_a_module_declares_is_in_the_registry() -> None:
    listed = {id(spec) for spec in registry.SHEETS}
    missing = [f"{module}.{name} ({spec.key})" for module, name, spec in _declared_specs() if id(spec) not in listed]
    assert not missing, f"sheets not in registry.SHEETS: {missing}"
    assert len(KEYS) == len(registry.SHEETS), "two sheets share a key"
    for lang in ("zh", "en"):
        titles = [spec.title(lang) for spec in registry.SHEETS]
        assert len(set(titles)) == len(titles), f"two sheets share a {lang} title"


def sheet_key_lists(source: str, keys: set[str], at_least: int = 3) -> list[int]:
    """The lines of `source` where a tuple, list or set literal spells `at_least` sheet keys or more."""
    lines = []
    for node in ast.walk(parsed(source)):
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            spelled = {e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)}
            if len(spelled & keys) >= at_least:
                lines.append(node.lineno)
    return lines


def test_nothing_but_the_registry_lists_the_sheets() -> None:
    found = {}
    for path in sorted(WORKBOOK.parent.rglob("*.py")):
        if path.name == "registry.py" and path.parent == WORKBOOK:
            continue
        lines = sheet_key_lists(path.read_text(encoding="utf-8"), KEYS)
        if lines:
            found[str(path.relative_to(WORKBOOK.parent.parent))] = lines
    assert not found, f"sheets listed outside scm_xl/workbook/registry.py (file: lines): {found}"


def test_the_listing_check_finds_a_listing() -> None:
    assert sheet_key_lists('ORDER = ("summary", "raw", "lsq")\n', KEYS) == [1]
    assert sheet_key_lists('PAIR = ("summary", "raw")\n', KEYS) == []


def test_a_workbook_without_one_of_its_sheets_is_refused(tmp_path: Path) -> None:
    """Every registered sheet is required, the least-squares sheet too."""
    from scm_xl.errors import InputError
    from scm_xl.workbook.io import load
    from scm_xl.workbook.layout import Layout

    path = tmp_path / "t.xlsx"
    registry.build_template(path, lang="en", rows=30)
    wb = load(path)
    registry.read_layout(wb, path)
    title = registry.BY_KEY["lsq"].title("en")
    wb.remove(wb[title])
    with pytest.raises(InputError, match=f"sheet '{title}' is missing"):
        registry.read_layout(wb, path)
    assert Layout(lang="en").title("summary") in wb.sheetnames


class _Recording(MutableMapping[Any, Any]):
    """A reference-value grid that notes the sheets read and written through it."""

    def __init__(self) -> None:
        self.data: dict[Any, Any] = {}
        self.read: set[str] = set()
        self.written: set[str] = set()

    def __getitem__(self, key: Any) -> Any:
        self.read.add(key[0])
        return self.data[key]

    def __contains__(self, key: object) -> bool:
        if isinstance(key, tuple):
            self.read.add(key[0])
        return key in self.data

    def __setitem__(self, key: Any, value: Any) -> None:
        self.written.add(key[0])
        self.data[key] = value

    def __delitem__(self, key: Any) -> None:
        del self.data[key]

    def __iter__(self) -> Iterator[Any]:
        return iter(self.data)

    def __len__(self) -> int:
        return len(self.data)


@pytest.mark.parametrize("method", ["chain", "lsq"])
def test_each_reference_reads_only_the_sheets_it_declares(tmp_path: Path, method: str) -> None:
    """Run every sheet's reference in the registry's order on the article's workbook, noting which
    sheets' values each reads: each reads its own, the sheets it wrote, and those in its `reads`;
    and those come before it in EXPECTED_ORDER."""
    import dataclasses

    from scm_xl.model import analyze
    from scm_xl.workbook.fill import fill
    from scm_xl.workbook.io import read_inputs

    path = tmp_path / "article.xlsx"
    fill(ARTICLE, output=path, lang="en", method=method)
    wb = registry.load_inputs(path)  # as verify reads them
    layout = registry.read_layout(wb, path)
    inputs = read_inputs(wb, layout, path)
    analysis = analyze([row for _, row in inputs.rows], dataclasses.replace(inputs.settings, method=method))
    grid = _Recording()
    checking = Checking(layout, inputs, analysis, grid)  # type: ignore[arg-type]
    done: set[str] = set()
    wrong, reads = {}, {}
    for key in registry.EXPECTED_ORDER:
        spec = registry.BY_KEY[key]
        assert set(spec.reads) <= done, f"{key} is computed before {set(spec.reads) - done}, which it reads"
        grid.read, grid.written = set(), set()
        spec.reference(checking)
        allowed = {spec.title("en"), *grid.written, *(registry.BY_KEY[k].title("en") for k in spec.reads)}
        reads[key] = grid.read - {spec.title("en"), *grid.written}
        if grid.read - allowed:
            wrong[key] = sorted(grid.read - allowed)
        done.add(key)
    assert not wrong, f"references that read sheets they do not declare: {wrong}"
    # the recording sees the reads that make the order matter
    assert registry.BY_KEY["derivation"].title("en") in reads["summary"]
    assert (registry.BY_KEY["lsq"].title("en") in reads["derivation"]) == (method == "lsq")


# The modules that own a sheet's geometry: those that declare their sheet's spec, and the summary,
# first-principles and chart-data sheets' modules (whose specs are the registry's: their writers also
# place other sheets' blocks). The six core sheets' geometry is layout.py's; build.py, formulas.py,
# expected.py and io.py still spell some of those sheets' columns by letter (the house issue's
# one-shape restructure is where that ends), which this test does not yet hold them to.
OWNERS = {module for module, _, _ in _declared_specs()} | {"summary_sheet", "first_principles", "charts"}


def foreign_addresses(source: str, me: str, owners: set[str]) -> list[tuple[int, str]]:
    """(line, text) of each address `source` (module `me`) spells with another owner module's row or
    column constants: an f-string that starts with a column ("B{...}", "$C${...}") and reads a name
    imported from, or an attribute of, one of `owners` other than `me`."""
    tree = parsed(source)
    owner_of: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "scm_xl.workbook":
            owner_of |= {a.asname or a.name: a.name for a in node.names if a.name in owners}
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("scm_xl.workbook."):
            stem = node.module.rsplit(".", 1)[1]
            if stem in owners:
                owner_of |= {a.asname or a.name: stem for a in node.names}
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.JoinedStr) and len(node.values) > 1):
            continue
        head = node.values[0]
        if not (isinstance(head, ast.Constant) and isinstance(head.value, str)
                and head.value.strip("$").isupper() and head.value.strip("$").isalpha() and len(head.value) <= 4):
            continue
        used = {owner_of[n.id] for n in ast.walk(node) if isinstance(n, ast.Name) and n.id in owner_of}
        if used - {me}:
            found.append((node.lineno, ast.unparse(node)))
    return found


def test_no_module_spells_another_sheets_cell_addresses() -> None:
    """A sheet's addresses are spelled in its own module; others ask it (summary_sheet.slo_cell,
    replicates_sheet.threshold_cell, LsqLayout.coef, ...)."""
    found = {}
    for path in sorted(WORKBOOK.parent.rglob("*.py")):
        hits = foreign_addresses(path.read_text(encoding="utf-8"), path.stem, OWNERS)
        if hits:
            found[str(path.relative_to(WORKBOOK.parent.parent))] = hits
    assert not found, f"addresses of another module's sheet spelled here: {found}"


def test_the_address_check_finds_a_foreign_address() -> None:
    source = "from scm_xl.workbook import replicates_sheet\nX = f'B{replicates_sheet.THRESHOLD_ROW}'\n"
    assert foreign_addresses(source, "io", OWNERS) == [(2, "f'B{replicates_sheet.THRESHOLD_ROW}'")]
    assert foreign_addresses(source, "replicates_sheet", OWNERS) == []
    source = "from scm_xl.workbook.summary_sheet import SLO_FIRST\nX = f'$A${SLO_FIRST}'\n"
    assert foreign_addresses(source, "slo_sheet", OWNERS) == [(2, "f'$A${SLO_FIRST}'")]


KEYED_TABLES = {"settings_rows", "summary_rows", "forward_rows", "inverse_rows", "base_tps_row", "base_rows_row"}


def keyed_table_reads(source: str) -> list[tuple[int, str]]:
    """(line, text) where `source` reads a core Layout's keyed-row tables (`layout.settings_rows`,
    `self.lo.forward_rows`, ...) instead of asking `Layout.keyed_cell` / `keyed_rows`."""
    found = []
    for node in ast.walk(parsed(source)):
        if isinstance(node, ast.Attribute) and node.attr in KEYED_TABLES:
            owner = node.value
            name = owner.id if isinstance(owner, ast.Name) else owner.attr if isinstance(owner, ast.Attribute) else ""
            if name in ("layout", "lo"):
                found.append((node.lineno, ast.unparse(node)))
    return found


def test_the_core_sheets_keyed_cells_are_spelled_by_the_layout_alone() -> None:
    """The calibration's settings, the consistency's summary and the derivation's questions share one
    column contract (layout.KEYED_COLUMNS: B typed or answered, C effective, D extra): every other
    module asks Layout.keyed_cell for their cells rather than pairing a letter with their rows."""
    found = {}
    for path in sorted(WORKBOOK.parent.rglob("*.py")):
        if path == WORKBOOK / "layout.py":
            continue
        hits = keyed_table_reads(path.read_text(encoding="utf-8"))
        if hits:
            found[str(path.relative_to(WORKBOOK.parent.parent))] = hits
    assert not found, f"keyed rows read outside layout.py: {found}"
    assert keyed_table_reads("x = f\"B{layout.settings_rows['method']}\"\n") == [(1, "layout.settings_rows")]
    assert keyed_table_reads("x = self.lo.inverse_rows\n") == [(1, "self.lo.inverse_rows")]


def test_a_factor_table_is_one_entry_in_the_calibration_sheets_module(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The issue's measure of the shape: a new factor's table on the calibration sheet is one
    `FactorTable` (its columns, where it lies, one slot's formulas, one level's reference), written
    and checked with no other change. Here a table of each concurrency level and twice it, below
    the model table: the engine's values meet the reference's, cell for cell."""
    from scm_xl.workbook import calibration_sheet
    from scm_xl.workbook.fill import fill
    from scm_xl.workbook.layout import CONCURRENCY_TABLE, Column, Layout

    twice = (Column("level", "并发档位", "concurrency", "formula"), Column("double", "两倍", "twice", "formula"))

    def rows(lo: Layout) -> tuple[int, int, int]:
        return lo.m_table_first + lo.m_slots + 2, lo.m_table_first + lo.m_slots + 3, lo.c_slots

    def formulas(fx: Any, row: int) -> dict[str, str]:
        lo = fx.lo
        source = f"${lo.table_col(CONCURRENCY_TABLE, 'level')}${row - rows(lo)[1] + lo.c_table_first}"
        level = f"${lo.table_col(twice, 'level')}{row}"
        return {"level": f"=IF(ISNUMBER({source}),{source},\"\")", "double": f"=IF(ISNUMBER({level}),{level}*2,\"\")"}

    def values(level: Any) -> dict[str, Any]:
        return {"level": float(level.concurrency) if level else None,
                "double": 2.0 * level.concurrency if level else None}

    table = calibration_sheet.FactorTable("c_table", twice, rows, formulas, lambda cal: cal.concurrency_levels, values)
    monkeypatch.setattr(calibration_sheet, "TABLES", (*calibration_sheet.TABLES, table))
    report = fill(ARTICLE, output=tmp_path / "twice.xlsx", lang="en", engine="ironcalc")
    assert report.verification.ok, [str(m) for m in report.verification.mismatches[:5]]
    layout, got = report.layout, report.verification.values
    _, first, _ = rows(layout)
    title = layout.title("calibration")
    doubled = [got.get((title, f"{layout.table_col(twice, 'double')}{first + i}")) for i in range(3)]
    assert doubled == [2.0, 4.0, 8.0]  # the article's concurrency levels 1, 2, 4
    printed = books.worksheet(tmp_path / "twice.xlsx", title).print_area
    assert printed.endswith(f"$E${first + layout.c_slots - 1}"), printed  # it prints with the others
