"""`sheet.RowTable`: a per-row table's reference values, gathered by row and placed by column."""

from __future__ import annotations

import pytest

from scm_xl.workbook.sheet import RowTable
from scm_xl.xlsx.values import CellGrid

PLACES = {"a": ("S", 1), "b": ("S", 3), "c": ("T", 2)}


def _table() -> RowTable:
    table = RowTable(PLACES)
    table.add({"a": 1.0, "b": "x", "c": None})
    table.add({"a": 2.0, "c": True})  # no "b" here: no formula cell there
    table.add({"a": 3.0, "b": 0.5, "c": 7.0})
    return table


def test_a_grid_and_a_dict_get_the_same_cells() -> None:
    grid = CellGrid()
    plain: dict[tuple[str, str], object] = {}
    _table().place(grid, PLACES.__getitem__, 5)
    _table().place(plain, PLACES.__getitem__, 5)  # type: ignore[arg-type]
    expected = {("S", "A5"): 1.0, ("S", "A6"): 2.0, ("S", "A7"): 3.0, ("S", "C5"): "x", ("S", "C7"): 0.5,
                ("T", "B5"): None, ("T", "B6"): True, ("T", "B7"): 7.0}
    assert plain == expected
    assert dict(grid.items()) == expected and len(grid) == len(expected)


def test_a_key_without_a_column_is_refused() -> None:
    table = RowTable(PLACES)
    with pytest.raises(KeyError, match="no column for"):
        table.add({"a": 1.0, "d": 2.0})
