"""The one protocol every sheet of the workbook is built and checked through.

A sheet is a `SheetSpec`: its key, its titles, a writer that lays out its cells and formulas
(returning the defined names that live on it) and a reference that computes, independently of
those formulas, what each of its formula cells must hold. Every writer takes the same
`Building`, every reference the same `Checking`; a reference names the sheets whose reference
values it reads (`reads`), and the registry computes them in an order that respects that.

The registry (`scm_xl.workbook.registry.SHEETS`) lists the sheets, in tab order; nothing else
lists them (tests/test_house.py checks).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, MutableMapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from openpyxl.utils import get_column_letter

from scm_xl.xlsx.values import ABSENT, CellGrid, CellValue
from scm_xl.model import Analysis

if TYPE_CHECKING:  # types only: the sheet modules that import this are imported by these
    from openpyxl import Workbook
    from openpyxl.worksheet.worksheet import Worksheet

    from scm_xl.workbook.catalog_tables import CatalogLayout
    from scm_xl.workbook.formulas import Formulas
    from scm_xl.workbook.io import Inputs, SheetRead
    from scm_xl.workbook.layout import Lang, Layout
    from scm_xl.workbook.stamp import PendingFills


@dataclass
class Building:
    """What every sheet writer may need."""

    wb: Workbook
    layout: Layout
    fx: Formulas
    catalog: CatalogLayout
    labels: Mapping[str, str]
    fills: PendingFills  # the shared columns' middle cells, written when the workbook is saved


@dataclass
class Checking:
    """What every sheet's reference needs, and the reference values of the sheets computed before
    it (`exp`: (sheet title, "A1") -> value)."""

    layout: Layout
    inputs: Inputs
    analysis: Analysis
    exp: CellGrid = field(default_factory=CellGrid)


Writer = Callable[["Worksheet", Building], Mapping[str, str]]  # -> defined name: "A1" on the sheet
Reference = Callable[[Checking], None]


def no_reference(c: Checking) -> None:
    """For a sheet without formula cells of its own to check (or checked with another sheet's)."""


@dataclass(frozen=True)
class SheetSpec:
    key: str
    titles: Mapping[str, str]  # language -> title
    write: Writer
    reference: Reference
    reads: tuple[str, ...] = ()  # the sheets whose reference values `reference` reads
    working: bool = False  # hidden workings at the end of the tabs
    inputs: SheetRead = "top"  # what the input readers read of it (`io.SheetRead`; tests/test_inputs_only.py checks)
    # "top": the last row the input readers read of it in a layout (None: io.INPUT_ROWS)
    input_rows: Callable[[Layout], int] | None = None

    def title(self, lang: Lang) -> str:
        return self.titles[lang]

    def input_read(self, layout: Layout | None) -> SheetRead | int:
        """What the input readers read of the sheet in `layout` (None: not known), for
        `io.load(inputs=...)`: a number for the rows a "top" sheet's inputs end at."""
        if self.inputs == "top" and self.input_rows is not None and layout is not None:
            return self.input_rows(layout)
        return self.inputs


class RowTable:
    """A per-row table's reference values, gathered a row at a time and placed a column at a
    time: a 10,000-row workbook's per-row sheets are a million cells, and an "A1" address
    spelled and parsed back for each was more than a quarter of the reference's time (3.2 s,
    now 2.3 s)."""

    def __init__(self, keys: Iterable[str]) -> None:
        self.columns: dict[str, list[CellValue]] = {key: [] for key in keys}

    def add(self, values: Mapping[str, CellValue]) -> None:
        """The next row's values by key (a key left out: no formula cell there)."""
        unknown = values.keys() - self.columns.keys()
        if unknown:
            raise KeyError(f"no column for {sorted(unknown)}")
        for key, column in self.columns.items():
            column.append(values.get(key, ABSENT))

    def place(self, exp: MutableMapping[tuple[str, str], CellValue], place: Callable[[str], tuple[str, int]],
              first: int) -> None:
        """Each column from row `first` on, where `place(key)` says ((sheet title, column number)):
        whole into a CellGrid, else cell by cell."""
        for key, values in self.columns.items():
            title, col = place(key)
            if isinstance(exp, CellGrid):
                exp.put_column(title, col, first, values)
                continue
            letter = get_column_letter(col)
            for row, value in enumerate(values, start=first):
                if value is not ABSENT:
                    exp[(title, f"{letter}{row}")] = value


def names_on(layout: Layout, key: str) -> dict[str, str]:
    """The layout's defined names that live on sheet `key` (name -> "A1")."""
    return {name: cell.address for name, cell in layout.defined_names().items() if cell.sheet == key}


__all__ = ["Building", "Checking", "Reference", "RowTable", "SheetSpec", "Writer", "names_on", "no_reference"]
