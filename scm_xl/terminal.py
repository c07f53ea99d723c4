"""Text for a terminal: widths in display columns (a CJK character is two), lines wrapped at
spaces and between CJK characters (never before closing punctuation, never after opening), and
tables fitted to the terminal. The layout every command's printed text shares; what the text says
lives with its command (scm_xl.report, scm_xl.report_texts)."""

from __future__ import annotations

import re
import shutil
import textwrap
import unicodedata

WIDTH = 80  # terminal tables and lines fit this
MIN_TEXT_WIDTH = 24  # a wrapped text column narrower than this goes under its row instead
MIN_SHRUNK = 12  # a column a table may shorten to fit (a model name) keeps at least this many columns


def display_width(text: str) -> int:
    """Columns `text` takes on a terminal: East Asian wide and fullwidth characters two, combining
    marks and zero-width characters none, the rest one."""
    width = 0
    for ch in text:
        if unicodedata.combining(ch) or unicodedata.category(ch) in ("Mn", "Me", "Cf"):
            continue
        width += 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1
    return width


def _pad(text: str, width: int) -> str:
    return text + " " * max(width - display_width(text), 0)


def _take(text: str, width: int, *, from_end: bool = False) -> str:
    """The longest start (or end) of `text` at most `width` columns wide."""
    out, used = [], 0
    for ch in (reversed(text) if from_end else text):
        w = display_width(ch)
        if used + w > width:
            break
        out.append(ch)
        used += w
    return "".join(reversed(out) if from_end else out)


def shorten(text: str, width: int) -> str:
    """`text` in at most `width` columns, marked with an ellipsis where shortened: a model's
    organisation goes first ("Qwen/Qwen2.5-7B-Instruct" -> "…/Qwen2.5-7B-Instruct"), then its
    end ("Qwen2.5-7B-Ins…"): the family and the size lead a model's name."""
    if display_width(text) <= width:
        return text
    if width <= 1:
        return "…"[:width]
    short = re.sub(r"[^/\s(]+/", "…/", text, count=1)
    if display_width(short) <= width:
        return short
    short = short.replace("…/", "", 1)
    return _take(short, width - 1) + "…"


# Closing punctuation a line should not start with: it is carried down with what it follows; and
# opening punctuation a line should not end with: it goes down with what it opens.
_NO_LINE_START = frozenset("，。、；：！？）》」』】”’…,.;:!?)")
_NO_LINE_END = frozenset("（《「『【“‘")
_LAST_WORD = re.compile(r"(?:[\u2e80-\u9fff\uf900-\ufaff\uff00-\uffef]|[^\s\u2e80-\u9fff\uf900-\ufaff\uff00-\uffef]+)$")


def _wrap(text: str, width: int, later: int | None = None) -> list[str]:
    """`text` in lines of at most `width` columns (`later` for the lines after the first): broken at
    spaces, and between two CJK characters (which need no space), never before closing punctuation;
    a word is cut only when it is wider than a whole line."""
    tokens = re.findall(r"\s+|[\u2e80-\u9fff\uf900-\ufaff\uff00-\uffef]|[^\s\u2e80-\u9fff\uf900-\ufaff\uff00-\uffef]+",
                        text.strip())
    lines: list[str] = []
    line = ""

    def room() -> int:
        return width if not lines or later is None else later

    def cut(token: str) -> str:
        """What is left of `token` once each piece wider than the line it would start is cut off
        onto a line of its own."""
        nonlocal line
        while display_width(token) > room():
            if line.strip():
                lines.append(line.rstrip())
            piece = _take(token, room())
            lines.append(piece)
            token, line = token[len(piece):], ""
        return token

    for token in tokens:
        if token.isspace():
            if line:
                line += token
            continue
        token = cut(token)  # wider than a line: cut it
        if display_width(line + token) > room() and line.strip():
            carried = ""
            if token[0] in _NO_LINE_START and not line[-1].isspace():  # take what it follows along
                while True:  # closing punctuation after closing punctuation: back to a word
                    before = _LAST_WORD.search(line[:len(line) - len(carried)])
                    if not (before and line[:before.start()].strip()):
                        break
                    carried = line[before.start():]
                    if carried[0] not in _NO_LINE_START or line[before.start() - 1:before.start()].isspace():
                        break
            while line[:len(line) - len(carried)].rstrip()[-1:] in _NO_LINE_END \
                    and line[:len(line) - len(carried)].rstrip()[:-1].strip():
                kept = line[:len(line) - len(carried)].rstrip()
                carried = line[len(kept) - 1:]
            lines.append(line[:len(line) - len(carried)].rstrip())
            line = carried
            token = cut(token)  # it fit the first line, not the narrower ones after it
        line += token
    if line.strip():
        lines.append(line.rstrip())
    return lines or [""]


def terminal_width() -> int:
    """The width tables are fitted to: the terminal's (COLUMNS, else the terminal itself), at most
    WIDTH so what a test or a log records does not depend on the window it ran in."""
    return max(min(shutil.get_terminal_size((WIDTH, 24)).columns, WIDTH), 40)


def table(headers: list[str], rows: list[list[str]], *, width: int | None = None, shrink: int | None = None) -> str:
    """Columns padded to their widest cell, in terminal columns (a CJK character is two); values
    are never cut except the `shrink` column's.

    A header may hold a line break (a unit under its name). With `width`, no line is wider: the
    `shrink` column (a model name) is shortened with an ellipsis as far as needed, not below
    MIN_SHRUNK columns or its header; then the last column (free text) wraps to what the others
    leave of it, or goes under its row, indented, when less than `MIN_TEXT_WIDTH` is left.
    """
    head = [h.split("\n") for h in headers]
    depth = max(len(h) for h in head)
    head = [h + [""] * (depth - len(h)) for h in head]
    wrap = width is not None
    sized = len(headers) - 1 if wrap else len(headers)
    widths = [max([display_width(x) for x in head[i]] + [display_width(r[i]) for r in rows]) for i in range(sized)]
    if width is not None and shrink is not None and shrink < sized:
        over = sum(widths) + 2 * (sized - 1) - width  # the columns before the text must fit on one line
        floor = max(MIN_SHRUNK, *(display_width(x) for x in head[shrink]))
        if over > 0 and widths[shrink] > floor:
            widths[shrink] = max(widths[shrink] - over, floor)
            rows = [[shorten(cell, widths[shrink]) if i == shrink else cell for i, cell in enumerate(r)] for r in rows]
    indent = sum(widths) + 2 * len(widths)
    room = (width - indent) if width is not None else 0
    beside = wrap and room >= MIN_TEXT_WIDTH
    if wrap:
        longest = max((display_width(r[-1]) for r in rows), default=0)
        widths.append(max([display_width(x) for x in head[-1]] + [min(room, longest)]) if beside
                      else max(display_width(x) for x in head[-1]))
    if wrap and not beside:  # the text goes under each row, and its header under the others
        lines = ["  ".join(_pad(h[k], w) for h, w in zip(head[:-1], widths)).rstrip() for k in range(depth)]
        lines += ["    " + x for x in head[-1] if x]
        lines.append("  ".join("-" * w for w in widths[:-1]))
    else:
        lines = ["  ".join(_pad(h[k], w) for h, w in zip(head, widths)).rstrip() for k in range(depth)]
        lines.append("  ".join("-" * w for w in widths))
    for r in rows:
        if not wrap:
            lines.append("  ".join(_pad(cell, w) for cell, w in zip(r, widths)).rstrip())
            continue
        first = "  ".join(_pad(cell, w) for cell, w in zip(r[:-1], widths))
        if beside:
            chunks = _wrap(r[-1], room)
            lines.append(f"{first}  {chunks[0]}".rstrip())
            lines += [" " * indent + chunk for chunk in chunks[1:]]
        else:
            lines.append(first.rstrip())
            assert width is not None
            if r[-1].strip():
                lines += ["    " + chunk for chunk in _wrap(r[-1], width - 4)]
    return "\n".join(lines)


def wrapped(text: str, width: int = WIDTH, indent: str = "  ") -> str:
    """A long line wrapped to `width` terminal columns, continuation lines indented; words are never
    cut. Text with wide (CJK) characters is measured in columns and may break between them."""
    if display_width(text) == len(text):
        return "\n".join(textwrap.wrap(text, width, subsequent_indent=indent, break_long_words=False,
                                       break_on_hyphens=False)) or text
    lead = text[:len(text) - len(text.lstrip())]
    lines = _wrap(text, width - display_width(lead), later=width - display_width(indent))
    return "\n".join([lead + lines[0], *(indent + line for line in lines[1:])])
