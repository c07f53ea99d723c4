"""Reading what a command printed: where a table's cells begin, in display columns."""

from __future__ import annotations

import re

from scm_xl.terminal import display_width


def cell_starts(line: str) -> list[int]:
    """The display column where each cell of a table line begins (cells are two or more spaces apart)."""
    starts, column = [], 0
    for piece in re.split(r"( {2,})", line):
        if piece and not piece.startswith("  "):
            starts.append(column)
        column += display_width(piece)
    return starts
