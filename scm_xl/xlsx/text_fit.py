"""How much room text takes in a cell: its width in column units, the lines it wraps to and
the row height those lines need.

The byte layer needs it to size the rows of wrapped values it stores (`cached_values`), and the
sheet writers to size their labels (`workbook.styles.fit_row`); both estimate with these
functions, so a row written by either is as tall as the other would make it.
"""

from __future__ import annotations

import unicodedata

DEFAULT_FONT_SIZE = 11.0  # openpyxl's default font (Calibri 11)
LINE_SPACING = 1.3  # a line's height over its font size (CJK fallback fonts are the tallest)
# Width of a character of text against the column-width unit (the width of "0"), bold included:
# Latin text averages narrower than "0"; a CJK character is a square about twice as wide.
NARROW_WIDTH, WIDE_WIDTH = 0.9, 2.1


def text_width(text: str) -> float:
    """Column-width units `text` takes when printed (see NARROW_WIDTH, WIDE_WIDTH)."""
    if text.isascii():  # no wide character: the same sum, without a lookup a character
        return sum([NARROW_WIDTH] * len(text))
    return sum(WIDE_WIDTH if unicodedata.east_asian_width(ch) in "WF" else NARROW_WIDTH for ch in text)


def wrapped_lines(text: str, width: float) -> int:
    """Lines `text` wraps to in a column `width` characters wide (words kept whole where they
    fit, longer ones broken), a little pessimistic so the row height never clips it."""
    room = max(1.0, width - 0.5)  # the cell's padding
    lines = 0
    for paragraph in text.split("\n"):
        used = 0.0
        lines += 1
        for word in paragraph.split(" "):
            size = text_width(word)
            if used and used + 1 + size > room:
                lines += 1
                used = 0.0
            while size > room:  # a word longer than the column breaks inside it
                lines += 1
                size -= room
            used += (1 if used else 0) + size
    return lines


def row_height(lines: int, font_size: float = DEFAULT_FONT_SIZE) -> float:
    """Points for `lines` lines of a font of `font_size` points."""
    return round(lines * font_size * LINE_SPACING + 2, 1)
