"""Where the tests' example data lie."""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent
ROOT = TESTS.parent
EXAMPLES = ROOT / "examples"
ARTICLE = EXAMPLES / "article_qwen2.5-7b.csv"  # the article's seven experiments (Qwen2.5-7B)
TEST_DATA = TESTS / "data"
# The system Python with LibreOffice's scripting bridge (Debian's python3-uno): tests/uno_edit.py
# and tests/support/soffice_forward.py run under it, not under the project's venv.
UNO_PYTHON = "/usr/bin/python3"
