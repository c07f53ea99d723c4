"""Every workbook scm-xl writes passes an OOXML schema validation: Excel opens it without repair.

The validator is openxml-audit (pure Python, the Open XML SDK's schemas and Excel's observed
repair rules). Checked: the empty template, the article's fill and a demo-sized fill with a
prompt axis and latency columns, each in both languages. Before the fixes it found two things
Excel repairs: scatter charts without their required `c:scatterStyle`, and the default font's
children in openpyxl's order (`name` before `sz` and `color`; `styles.fonts_in_schema_order`).

One finding is allowed, as a warning: openpyxl 3.1 writes every string cell inline
(`t="inlineStr"`), which the schema allows and Excel reads, moving the strings to a
shared-strings table when it next saves the file (a rewrite on save, not a repair on open).
"""

from __future__ import annotations

import re
import zipfile
from pathlib import Path

import pytest
from click.testing import CliRunner
from openxml_audit import FileFormat, OpenXmlValidator, ValidationResult, ValidationSeverity

from scm_xl.cli import main
from scm_xl.workbook.fill import fill
from support.paths import ARTICLE

ROOT = Path(__file__).resolve().parents[1]
SIM = Path(__file__).parent / "data" / "sim_prompt_levels.csv"
KINDS = ["template", "article", "prompt_levels"]
LANGS = ["zh", "en"]
# Warnings that are no repair: Excel rewrites the strings into a shared table on its next save.
ALLOWED_WARNINGS = {"Excel_InlineStrCells"}


@pytest.fixture(scope="module")
def validator() -> OpenXmlValidator:
    return OpenXmlValidator(file_format=FileFormat.OFFICE_2019, max_errors=0)  # 0: every finding


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], Path]:
    """Each kind of workbook in each language, written once for the module (IronCalc fills)."""
    folder = tmp_path_factory.mktemp("ooxml")
    out: dict[tuple[str, str], Path] = {}
    for lang in LANGS:
        template = folder / f"template-{lang}.xlsx"
        result = CliRunner().invoke(main, ["build", "template", "--lang", lang, "-o", str(template)])
        assert result.exit_code == 0, result.output
        out[("template", lang)] = template
        for kind, csv in (("article", ARTICLE), ("prompt_levels", SIM)):
            report = fill(csv, output=folder / f"{kind}-{lang}.xlsx", engine="ironcalc", lang=lang)
            assert report.verification.ok
            out[(kind, lang)] = report.path
    return out


def _findings(result: ValidationResult) -> list[str]:
    return [f"{e.severity.value} {e.id or e.error_type.value} {e.part_uri} {e.path}: {e.description}"
            for e in result.errors
            if e.severity is not ValidationSeverity.WARNING or e.id not in ALLOWED_WARNINGS]


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("kind", KINDS)
def test_schema_valid(kind: str, lang: str, written: dict[tuple[str, str], Path],
                      validator: OpenXmlValidator) -> None:
    result = validator.validate(written[(kind, lang)])
    assert _findings(result) == []
    assert result.is_valid


def test_every_scatter_series_is_drawn_straight(written: dict[tuple[str, str], Path]) -> None:
    """`<c:smooth val="0"/>` on every series: LibreOffice draws a series without it smoothed,
    bending the line between measured points. And each chart has its scatterStyle."""
    with zipfile.ZipFile(written[("prompt_levels", "en")]) as book:
        charts = [book.read(name) for name in book.namelist() if name.startswith("xl/charts/chart")]
    assert len(charts) >= 3  # TPS, latency and the fit
    for xml in charts:
        series = re.findall(rb"<(?:c:)?ser>.*?</(?:c:)?ser>", xml, re.DOTALL)
        assert series
        assert all(re.search(rb'<(?:c:)?smooth val="0"/>', one) for one in series)
        assert re.search(rb'<(?:c:)?scatterStyle val="lineMarker"/>', xml)
