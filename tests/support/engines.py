"""The engines a workbook is recalculated on in the tests, as pytest parameters (LibreOffice's
marked `libreoffice`: conftest.py skips it, or fails it in CI, where soffice is missing)."""

from __future__ import annotations

import pytest

LIBREOFFICE = pytest.param("libreoffice", marks=pytest.mark.libreoffice)
# IronCalc (the default) and LibreOffice: what each sheet's own tests recalculate on.
ENGINES = ["ironcalc", LIBREOFFICE]
# The Python `formulas` engine too, slow on large sheets: the engines' own tests (tests/test_engines.py)
# and the article in tests/test_workbook.py.
ALL_ENGINES = ["formulas", "ironcalc", LIBREOFFICE]
