"""Every sheet of the article and demo workbooks, printed: rendered to PDF by LibreOffice and
read back with pdftotext. No page blank or nearly blank, no header broken or cut, nothing past
the right margin, no line printed over another, the first-principles figures with SI prefixes
as `scm-xl roofline` prints them, and a bounded page count. One conversion per workbook; every
check runs on it."""

from __future__ import annotations

import csv
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Callable
from typing import Any, cast

import openpyxl
import pytest

from data.gen import full_factorial, write_csv
from scm_xl import goodput
from scm_xl.collect.records import REQUEST_COLUMNS
from scm_xl.results import ResultRow
from scm_xl.roofline import SI_PREFIXES, si
from scm_xl.workbook import first_principles, printing, slo_sheet, summary_sheet
from scm_xl.workbook.fill import fill
from scm_xl.workbook.layout import (
    CONCURRENCY_TABLE, CONSISTENCY_COLUMNS, ENTRY_COLUMNS, INVERSE_TABLE, LENGTH_TABLE, MODEL_TABLE, Column, Lang, Layout,
)
from scm_xl.workbook.registry import build_workbook
from scm_xl.workbook.styles import row_height, wrapped_lines
from support import books
from support.engines import ERROR_STRINGS
from support.paths import ARTICLE
from support.printing import to_pdf

pytestmark = pytest.mark.libreoffice

# The printout of a whole workbook, a few pages a sheet at most. 23: the SLO sheet of a workbook
# with per-request records (as `scm-xl demo` makes) prints its two settings pages and its two
# tables, 48 columns at MIN_PRINT_SCALE or larger, on four more (it printed on one page at about
# a fifth of its size, unreadable); `scm-xl demo`'s workbook prints 23 pages (the demo fixture 22).
MAX_PAGES = 23
MIN_LETTERS = 40  # a page with fewer letters than this (row numbers or zeros only) is nearly blank
MARGIN_PT = 20  # the right margin is 0.4 in (28.8 pt): no word may end closer than this to the edge
HIDDEN_CONSISTENCY = {"f_known", "k_known", "c_known", "p_known", "anchor", "p_anchor"}
_WORD_BOX = re.compile(r'<word xMin="([\d.]+)" yMin="([\d.]+)" xMax="([\d.]+)" yMax="([\d.]+)">([^<]*)</word>')


@dataclass
class Printout:
    lang: Lang
    xlsx: Path
    pages: list[str]  # pdftotext -layout, one string per page
    words: list[list[tuple[float, float, float, float, str]]]  # (xMin, yMin, xMax, yMax, word), per page
    page_width: float
    layout: Layout | None = None
    rows: int = 0  # the raw rows filled in

    def page_with(self, text: str) -> str:
        found = [page for page in self.pages if text in page]
        assert found, f"no page shows {text!r}"
        return found[0]


def _render(xlsx: Path, out: Path) -> Printout:
    pdf = to_pdf(xlsx, out)
    text = subprocess.run(["pdftotext", "-layout", str(pdf), "-"], capture_output=True, text=True,
                          check=True).stdout
    pages = text.split("\f")
    if pages and not pages[-1].strip():
        pages = pages[:-1]  # pdftotext ends the last page with a form feed too
    bbox = subprocess.run(["pdftotext", "-bbox", str(pdf), "-"], capture_output=True, text=True,
                          check=True).stdout
    width = float(re.search(r'<page width="([\d.]+)"', bbox).group(1))  # type: ignore[union-attr]
    words = [[(float(x0), float(y0), float(x1), float(y1), w) for x0, y0, x1, y1, w in _WORD_BOX.findall(page)]
             for page in bbox.split("<page ")[1:]]
    assert any(words), "pdftotext -bbox gave no word boxes"
    return Printout(lang="en", xlsx=xlsx, pages=pages, words=words, page_width=width)


@pytest.fixture(scope="module", params=["article-en", "article-zh", "demo-en", "demo-zh"])
def printout(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Printout:
    if not (shutil.which("pdftotext") and shutil.which("soffice")):
        pytest.skip("soffice and pdftotext (poppler-utils) are needed")
    data, language = request.param.split("-")
    lang = cast(Lang, language)
    out = tmp_path_factory.mktemp(request.param)
    # the demo's design: two models x four concurrency levels x three max_tokens, with the
    # per-request CSV beside the results that `scm-xl demo` collects (so the SLO sheet has its tables)
    slo = None
    if data == "article":
        source = ARTICLE
    else:
        rows = full_factorial(replicates=False)
        source = write_csv(out / "demo.csv", rows)
        _write_requests(source, rows)
        slo = goodput.parse_slo("e2el=20", 0.5)
    xlsx = out / f"{data}.xlsx"
    report = fill(source, output=xlsx, engine="ironcalc", lang=lang, slo=slo)
    assert report.verification.ok
    result = _render(xlsx, out)
    result.lang, result.layout, result.rows = lang, report.layout, len(report.inputs.rows)
    return result


def _write_requests(results: Path, rows: list[ResultRow]) -> None:
    """The per-request CSV beside `results`: each row's requests, as many as it counts and of
    the tokens it counts (so every experiment is judged), latencies spread around the mean."""
    with open(goodput.requests_path_for(results), "w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=REQUEST_COLUMNS, lineterminator="\n")
        writer.writeheader()
        for row in rows:
            mean = row.concurrency * row.total_time_s / row.total_requests
            for i in range(row.total_requests):
                record = dict.fromkeys(REQUEST_COLUMNS, "")
                record.update(exp_id=row.exp_id, model=row.model, concurrency=str(row.concurrency),
                              max_tokens=str(row.max_tokens), repeat="1", slot=str(i % row.concurrency), seq=str(i),
                              warmup="false", ttft_s=f"{mean / 10:.6f}", latency_s=f"{mean * (0.8 + 0.1 * (i % 5)):.6f}",
                              prompt_tokens="100", completion_tokens=str(row.max_tokens), status="ok")
                writer.writerow(record)


def _header_words(columns: tuple[Column, ...], lang: Lang, skip: set[str] = set()) -> set[str]:
    return {word for column in columns if column.key not in skip for word in column.header(lang).split()
            if len(word) > 2}


def test_no_page_is_blank_or_nearly_blank(printout: Printout) -> None:
    for number, page in enumerate(printout.pages, start=1):
        letters = len(re.findall(r"[A-Za-z\u4e00-\u9fff]", page))
        assert letters >= MIN_LETTERS, f"page {number} is nearly blank: {page.strip()[:120]!r}"


def test_the_page_count_is_bounded(printout: Printout) -> None:
    wb = openpyxl.load_workbook(printout.xlsx, read_only=True)
    visible = [ws.title for ws in wb.worksheets if ws.sheet_state == "visible"]
    assert len(visible) <= len(printout.pages) <= MAX_PAGES
    text = "\n".join(printout.pages)
    assert not [s for s in ERROR_STRINGS if s in text]


def test_no_header_is_broken_or_cut(printout: Printout) -> None:
    """Every word of the tables' headers prints whole (a header broken inside a word, or cut at
    its cell's edge, prints as two fragments)."""
    text = "\n".join(printout.pages)
    words = (_header_words(ENTRY_COLUMNS, printout.lang) | _header_words(CONSISTENCY_COLUMNS, printout.lang,
                                                                          HIDDEN_CONSISTENCY)
             | _header_words(CONCURRENCY_TABLE + LENGTH_TABLE + MODEL_TABLE + INVERSE_TABLE, printout.lang))
    missing = sorted(word for word in words if word not in text)
    assert not missing, missing


def test_nothing_runs_past_the_right_margin(printout: Printout) -> None:
    """On every page of every visible sheet, the per-row tables' included: their status, note and
    physics texts wrap within their columns instead of overflowing the last one."""
    limit = printout.page_width - MARGIN_PT
    for number, words in enumerate(printout.words, start=1):
        beyond = [word for _, _, x, _, word in words if x > limit]
        assert not beyond, f"page {number}: {beyond[:5]} past the right margin"
    lang = printout.lang
    for text in (ENTRY_COLUMNS[0].header(lang), _header(ENTRY_COLUMNS, "show_status", lang),
                 CONSISTENCY_COLUMNS[-1].header(lang)):
        printout.page_with(text)  # the per-row tables printed, so checked above


def test_no_line_prints_over_another(printout: Printout) -> None:
    """No word overlaps a word of another line: a wrapped cell whose row is too short for its
    lines prints them over the rows below. (Words of one line that touch are a column-width
    matter, which the header test covers.)"""
    for number, words in enumerate(printout.words, start=1):
        ordered = sorted(words, key=lambda box: box[1])
        for i, (x0, y0, x1, y1, word) in enumerate(ordered):
            for u0, v0, u1, v1, other in ordered[i + 1:]:
                if v0 >= y1:
                    break  # this and every later word start below `word`
                across = min(x1, u1) - max(x0, u0)
                down = min(y1, v1) - max(y0, v0)
                if abs(v0 - y0) > 0.5 and across > 1 and down > 0.3 * min(y1 - y0, v1 - v0):
                    raise AssertionError(f"page {number}: {word!r} and {other!r} print over each other")


def test_wrapped_rows_are_as_tall_as_their_lines(printout: Printout) -> None:
    """The per-row tables' texts wrap within their columns, and a row whose text takes more than
    one line there (the value stored in the file) is that many lines tall; every other row keeps
    the default height."""
    layout = printout.layout
    assert layout is not None and printout.rows
    tall = 0
    for ws, first, letters in _wrapped_columns(lambda title: books.worksheet(printout.xlsx, title, data_only=True),
                                               layout):
        for row in range(first, first + printout.rows):
            assert all(ws[f"{col}{row}"].alignment.wrap_text for col in letters), (ws.title, row)
            lines = max(wrapped_lines(str(ws[f"{col}{row}"].value or ""), ws.column_dimensions[col].width)
                        for col in letters)
            height = ws.row_dimensions[row].height
            if lines > 1:
                tall += 1
                assert height is not None and height >= row_height(lines), (ws.title, row, lines, height)
            else:
                assert height is None, (ws.title, row, height)
    if printout.xlsx.stem == "article":  # its short outputs and superlinear gain take lines
        assert tall


def test_the_templates_rows_keep_the_default_height(tmp_path: Path) -> None:
    """With no values (the template), the wrapped columns' rows keep the default height."""
    layout = Layout(lang="en", rows=30)
    path = tmp_path / "template.xlsx"
    build_workbook(layout).save(path)
    for ws, first, letters in _wrapped_columns(lambda title: books.worksheet(path, title), layout):
        for row in range(first, first + layout.rows):
            assert ws.row_dimensions[row].height is None, (ws.title, row)
            assert all(ws[f"{col}{row}"].alignment.wrap_text for col in letters), (ws.title, row)


def _wrapped_columns(sheet: Callable[[str], Any], layout: Layout) -> list[tuple[Any, int, list[str]]]:
    """(sheet, first data row, the letters of its wrapped text columns) of the two per-row tables;
    `sheet(title)` loads a sheet."""
    return [(sheet(layout.title("raw")), layout.raw_first, [layout.entry_col("show_status")]),
            (sheet(layout.title("consistency")), layout.cons_first,
             [layout.cons_col(key) for key in ("note", "physics_text")])]


def _header(columns: tuple[Column, ...], key: str, lang: Lang) -> str:
    return next(column.header(lang) for column in columns if column.key == key)


def test_each_table_fits_the_page_width(printout: Printout) -> None:
    """The consistency table's first and last printed columns on one page; the first-principles
    calculator's last column (the unit notes) beside its first."""
    lang = printout.lang
    consistency = printout.page_with(CONSISTENCY_COLUMNS[-1].header(lang))
    assert CONSISTENCY_COLUMNS[1].header(lang) in consistency
    calculator = printout.page_with(first_principles.TEXTS[lang]["title"])
    assert first_principles.TEXTS[lang]["unit"] in calculator
    assert first_principles.TEXTS[lang]["results"] in calculator


def test_first_principles_prints_si_prefixes_as_roofline_does(printout: Printout) -> None:
    ws = books.sheet(printout.xlsx, books.layout(printout.xlsx).title("first_principles"))
    assert ws[f"A{first_principles.TITLE_ROW}"].value == first_principles.TEXTS[printout.lang]["title"]
    page = printout.page_with(first_principles.TEXTS[printout.lang]["title"])
    for key, unit in (("flops_per_token", "FLOP"), ("weight_bytes", "B"), ("bandwidth", "B/s"),
                      ("peak_flops", "FLOP/s")):
        value = ws[first_principles.output_cell(key)].value
        assert isinstance(value, (int, float))
        prefixed = si(value, unit).split()[1]  # roofline's choice of prefix, "GFLOP" for 14.14e9 FLOP
        factor = dict((p, f) for f, p in SI_PREFIXES)[prefixed[0]]
        # the same figure to the workbook's two decimals (roofline prints four significant digits)
        expected = f"{value / factor:.2f} {prefixed}"
        assert re.search(rf"(?<![\d.]){re.escape(expected)}(?![\w/])", page), (key, expected)
    assert not re.search(r"\d\.\d{3}E\+\d\d", page), "a figure in scientific notation"


def _slo_pages(printout: Printout) -> list[int]:
    """The indexes of the SLO sheet's pages: from its settings' first page to the page before
    the first-principles sheet's."""
    t = slo_sheet.TEXTS[printout.lang]
    first = next(i for i, page in enumerate(printout.pages) if t["thresholds"] in page and t["levels"] in page)
    title = first_principles.TEXTS[printout.lang]["title"]
    end = next(i for i, page in enumerate(printout.pages) if title in page)
    assert first < end
    return list(range(first, end))


def _printed_scale(words: list[tuple[float, float, float, float, str]], row_pt: float) -> float:
    """The scale a page printed at: the most common distance between the tops of successive
    lines (rows of the default height, `row_pt` points at 100 %) over that height."""
    tops = sorted({round(y0, 1) for _, y0, _, _, _ in words})
    steps = [round(b - a, 1) for a, b in zip(tops, tops[1:]) if b - a > 2]
    assert steps, "no rows on the page"
    return max(set(steps), key=steps.count) / row_pt


def test_the_slo_sheet_prints_readable_and_whole(printout: Printout) -> None:
    """The SLO sheet: without per-request records its settings on two pages at most; with them
    each table on pages of its own at MIN_PRINT_SCALE or larger (the measure RawData's pages
    are sized by), every word of every visible column's header whole on them (TEXTS' h_ keys),
    no helper column printed, and the tables' last experiment printed while no row below it is."""
    pages = _slo_pages(printout)
    ws = books.worksheet(printout.xlsx, slo_sheet.SHEET_TITLES[printout.lang])
    t = slo_sheet.TEXTS[printout.lang]
    if printout.xlsx.stem == "article":  # no per-request CSV: no tables
        assert len(pages) <= 2
        assert t["exp_table"] not in "\n".join(printout.pages[i] for i in pages)
        return
    tables = [i for i in pages if i >= next(i for i in pages if t["exp_table"] in printout.pages[i])]
    assert len(pages) - len(tables) == 2, "the settings on two pages"
    text = "\n".join(printout.pages[i] for i in tables)
    hidden = set(slo_sheet.EXP_HELPER_KEYS) | set(slo_sheet.CELL_HELPER_KEYS)
    shown = {key for key in (*slo_sheet.EXP_KEYS, *slo_sheet.CELL_KEYS)} - hidden
    assert not (set(slo_sheet.hidden_columns()) - {letter for letter, dim in ws.column_dimensions.items()
                                                   if dim.hidden and dim.outlineLevel == 1})

    def words(keys: set[str]) -> set[str]:
        return {word for key in keys for word in t[f"h_{key}"].split() if len(word) > 2}

    missing = sorted(word for word in words(shown) if word not in text)
    assert not missing, missing
    printed = sorted((words(hidden) - words(shown)) & set(text.split()))
    assert not printed, f"helper columns printed: {printed}"
    experiments = [row.exp_id for row in full_factorial(replicates=False)]
    assert experiments[-1] in text and t["cell_table"] in text
    assert str(ws.print_area).endswith(f"${slo_sheet.FIRST + len(experiments) - 1}"), ws.print_area
    row_pt = float(ws.sheet_format.defaultRowHeight)
    for i in tables:
        scale = _printed_scale(printout.words[i], row_pt)
        assert scale >= printing.MIN_PRINT_SCALE - 0.01, f"page {i + 1} printed at {scale:.0%}"
