"""Every sheet of the article and demo workbooks, printed: rendered to PDF by LibreOffice and
read back with pdftotext. No page blank or nearly blank, no header broken or cut, nothing past
the right margin, the first-principles figures with SI prefixes as `scm-xl roofline` prints
them, and a bounded page count. One conversion per workbook; every check runs on it."""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import openpyxl
import pytest

from data.gen import full_factorial, write_csv
from scm_xl.roofline import SI_PREFIXES, si
from scm_xl.workbook import build, first_principles, summary_sheet
from scm_xl.workbook.fill import fill
from scm_xl.workbook.layout import (
    CONCURRENCY_TABLE, CONSISTENCY_COLUMNS, ENTRY_COLUMNS, INVERSE_TABLE, LENGTH_TABLE, MODEL_TABLE, Column,
)
from test_workbook_for_people import ARTICLE, ERROR_STRINGS

pytestmark = pytest.mark.libreoffice

MAX_PAGES = 20  # the printout of a whole workbook, a few pages a sheet at most
MIN_LETTERS = 40  # a page with fewer letters than this (row numbers or zeros only) is nearly blank
MARGIN_PT = 20  # the right margin is 0.4 in (28.8 pt): no word may end closer than this to the edge
HIDDEN_CONSISTENCY = {"f_known", "k_known", "c_known", "p_known", "anchor", "p_anchor"}


@dataclass
class Printout:
    lang: str
    xlsx: Path
    pages: list[str]  # pdftotext -layout, one string per page
    words: list[list[tuple[float, str]]]  # (xMax, word) of every word, per page
    page_width: float

    def page_with(self, text: str) -> str:
        found = [page for page in self.pages if text in page]
        assert found, f"no page shows {text!r}"
        return found[0]


def _render(xlsx: Path, out: Path) -> Printout:
    profile = (out / "profile").as_uri()
    subprocess.run(["soffice", f"-env:UserInstallation={profile}", "--headless", "--norestore",
                    "--convert-to", "pdf", "--outdir", str(out), str(xlsx)],
                   check=True, capture_output=True, timeout=180)
    pdf = out / (xlsx.stem + ".pdf")
    text = subprocess.run(["pdftotext", "-layout", str(pdf), "-"], capture_output=True, text=True,
                          check=True).stdout
    pages = text.split("\f")
    if pages and not pages[-1].strip():
        pages = pages[:-1]  # pdftotext ends the last page with a form feed too
    bbox = subprocess.run(["pdftotext", "-bbox", str(pdf), "-"], capture_output=True, text=True,
                          check=True).stdout
    width = float(re.search(r'<page width="([\d.]+)"', bbox).group(1))  # type: ignore[union-attr]
    words = [[(float(x), w) for x, w in re.findall(r'<word [^>]*xMax="([\d.]+)"[^>]*>([^<]*)</word>', page)]
             for page in bbox.split("<page ")[1:]]
    return Printout(lang="", xlsx=xlsx, pages=pages, words=words, page_width=width)


@pytest.fixture(scope="module", params=["article-en", "article-zh", "demo-en", "demo-zh"])
def printout(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Printout:
    if not (shutil.which("pdftotext") and shutil.which("soffice")):
        pytest.skip("soffice and pdftotext (poppler-utils) are needed")
    data, lang = request.param.split("-")
    out = tmp_path_factory.mktemp(request.param)
    # the demo's design: two models x four concurrency levels x three max_tokens
    source = ARTICLE if data == "article" else write_csv(out / "demo.csv", full_factorial(replicates=False))
    xlsx = out / f"{data}.xlsx"
    report = fill(source, output=xlsx, engine="ironcalc", lang=lang)
    assert report.verification.ok
    result = _render(xlsx, out)
    result.lang = lang
    return result


def _header_words(columns: tuple[Column, ...], lang: str, skip: set[str] = set()) -> set[str]:
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
    """On every page but those of the two per-row tables (raw data and consistency): their status and
    physics texts are formula results whose length only the engine knows, and LibreOffice does not
    grow a row to fit wrapped text when it opens a file, so they overflow their last column instead."""
    lang = printout.lang
    per_row = (ENTRY_COLUMNS[0].header(lang), CONSISTENCY_COLUMNS[-1].header(lang))
    limit = printout.page_width - MARGIN_PT
    checked = 0
    for number, (page, words) in enumerate(zip(printout.pages, printout.words), start=1):
        lines = page.splitlines()
        heads = [line for line in lines if line.strip()][:3]
        if any(line.split()[:1] == [per_row[0]] for line in heads) or per_row[1] in page:
            continue
        checked += 1
        beyond = [word for x, word in words if x > limit]
        assert not beyond, f"page {number}: {beyond[:5]} past the right margin"
    visible = [ws for ws in openpyxl.load_workbook(printout.xlsx, read_only=True).worksheets
               if ws.sheet_state == "visible"]
    assert checked >= len(visible) - 2  # a page at least of every sheet but the two per-row tables


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
    wb = openpyxl.load_workbook(printout.xlsx, data_only=True)
    ws = wb[[ws.title for ws in wb.worksheets if ws[f"A{first_principles.TITLE_ROW}"].value
             == first_principles.TEXTS[printout.lang]["title"]][0]]
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
