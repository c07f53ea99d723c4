"""What a person added to their own workbook that rebuilding scm-xl's sheets would lose, carried
over by `fill --workbook` and a rebuild around the rows typed (`fill._regrow`): their comments on
scm-xl's sheets (a comment on a raw row moves with that row's exp_id) and where their own sheets
sit among scm-xl's."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from openpyxl.comments import Comment
from openpyxl.utils.cell import column_index_from_string, coordinate_from_string

from scm_xl.report_texts import Text
from scm_xl.workbook.layout import Layout
from scm_xl.workbook.raw_sheet import OWN_COMMENTS
from scm_xl.workbook.registry import own_sheet_titles
from scm_xl.workbook.stamp import is_formula


@dataclass(frozen=True)
class _KeptComment:
    """A comment a person put on one of scm-xl's sheets, and what its cell held then."""

    sheet: str
    address: str
    text: str
    author: str | None
    width: int
    height: int
    value: Any
    exp_id: str | None  # on a raw-data row: that row's experiment, which the comment follows


@dataclass
class PersonWork:
    """What a person added to a workbook that rebuilding scm-xl's sheets would otherwise lose:
    comments on scm-xl's sheets, and the order of the sheets (a sheet of theirs put first stays
    first). `take` reads it before scm-xl's sheets are removed, `restore` puts it back and says
    what it could not keep as it was."""

    order: list[str]
    active: str | None
    comments: list[_KeptComment]

    @classmethod
    def take(cls, wb: Any, layout: Layout) -> PersonWork:
        raw_title = layout.title("raw")
        exp_col = column_index_from_string(layout.entry_col("exp_id"))
        comments = []
        for title in own_sheet_titles(layout):
            if title not in wb.sheetnames:
                continue
            ws = wb[title]
            for cell in list(ws._cells.values()):  # the cells the file holds, not every address in range
                comment = cell.comment
                if comment is None or comment.text in OWN_COMMENTS:
                    continue  # none, or scm-xl's own (the rebuild writes it again)
                exp_id = None
                if title == raw_title and cell.row >= layout.raw_first:
                    held = ws._cells.get((cell.row, exp_col))
                    exp_id = _exp_id_text(held.value if held is not None else None)
                comments.append(_KeptComment(title, cell.coordinate, comment.text, comment.author, int(comment.width),
                                             int(comment.height), cell.value, exp_id))
        active = wb.active.title if wb.active is not None else None
        return cls(list(wb.sheetnames), active, comments)

    def restore_order(self, wb: Any, layout: Layout) -> None:
        """Put the sheet order back alone (`fill` does so before it saves the engine's input, which
        then has the sheets where the file will; `restore` puts it back again, the same)."""
        self._restore_order(wb, layout)

    def restore(self, wb: Any, layout: Layout) -> list[str]:
        """Put the comments and the sheet order back into the rebuilt `wb`; notes on what changed."""
        self._restore_order(wb, layout)
        notes: list[str] = []
        rows_of: dict[str, int] = {}  # exp_id -> its raw-data row now
        if any(kept.exp_id is not None for kept in self.comments):
            exp_col = column_index_from_string(layout.entry_col("exp_id"))
            for (row, col), cell in wb[layout.title("raw")]._cells.items():
                exp_id = _exp_id_text(cell.value) if col == exp_col and row >= layout.raw_first else None
                if exp_id is not None:
                    rows_of.setdefault(exp_id, row)
        for kept in self.comments:
            where = f"'{kept.sheet}'!{kept.address}"
            address = kept.address
            if kept.exp_id is not None:
                row = rows_of.get(kept.exp_id)
                if row is None:
                    notes.append(Text("comment_lost", where=where, exp_id=kept.exp_id, text=_short(kept.text)))
                    continue
                address = f"{coordinate_from_string(kept.address)[0]}{row}"
            cell = wb[kept.sheet][address]
            cell.comment = Comment(kept.text, kept.author, height=kept.height, width=kept.width)
            if not is_formula(kept.value) and cell.value != kept.value:
                now: str = f"'{kept.sheet}'!{address}"
                if address != kept.address:
                    now = Text("comment_moved", where=now, exp_id=kept.exp_id)
                notes.append(Text("comment_rewritten", where=where, now=now, before=_short(kept.value),
                                  after=_short(cell.value)))
        return notes

    def _restore_order(self, wb: Any, layout: Layout) -> None:
        """Each sheet of the person's goes back after the scm-xl sheet it followed (first, if
        it was first); scm-xl's sheets keep their own order."""
        own = set(own_sheet_titles(layout))
        after: dict[str | None, list[str]] = {}
        anchor: str | None = None
        for title in self.order:
            if title in own:
                anchor = title
            else:
                after.setdefault(anchor, []).append(title)
        present = {sheet.title: sheet for sheet in wb._sheets}
        ordered = [present[title] for title in after.get(None, []) if title in present]
        for sheet in wb._sheets:
            if sheet.title in own:
                ordered.append(sheet)
                ordered += [present[title] for title in after.get(sheet.title, []) if title in present]
        ordered += [sheet for sheet in wb._sheets if sheet not in ordered]
        wb._sheets = ordered
        active = present.get(self.active) if self.active is not None else None
        if active is None or active.sheet_state != "visible":
            active = next(sheet for sheet in ordered if sheet.sheet_state == "visible")
        wb.active = active
        for sheet in wb.worksheets:
            sheet.sheet_view.tabSelected = sheet is active


def _exp_id_text(value: Any) -> str | None:
    """A raw row's exp_id as the workbook's rows are matched by it (None: blank)."""
    if value is None or is_formula(value):
        return None
    text = str(value).strip()
    return text or None


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


__all__ = ["PersonWork"]
