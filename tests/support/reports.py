"""Reports and verifications the tests share."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from scm_xl.cli import main


def report_pages(source: Path, folder: Path) -> dict[str, Path]:
    """`scm-xl report SOURCE` in each language, into `folder`: lang -> page."""
    out = {}
    for lang in ("en", "zh"):
        out[lang] = folder / f"report_{lang}.html"
        result = CliRunner().invoke(main, ["report", str(source), "-o", str(out[lang]), "--lang", lang])
        assert result.exit_code == 0, result.output
    return out


def one_wrong_cell(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every fill's verification finds one cell the engine got wrong (as 1e308 in total_time_s did on
    IronCalc), whatever the engines and the reference do about it."""
    from scm_xl.verify import Mismatch
    from scm_xl.workbook import fill as filling

    compare = filling.compare

    def one_wrong(*args: object, **kwargs: object) -> object:
        verification = compare(*args, **kwargs)  # type: ignore[arg-type]
        verification.mismatches.append(Mismatch("Summary", "B2", 1.0, 2.0))
        return verification

    monkeypatch.setattr(filling, "compare", one_wrong)
