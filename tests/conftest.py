"""Shared test plumbing.

Tests marked `libreoffice` need a real `soffice`. Where it is missing they are
skipped, unless SCM_XL_REQUIRE_LIBREOFFICE=1 (set by .ci/run), which turns the
skip into a failure so CI can never pass without having run them.
"""

from __future__ import annotations

import os
import shutil

import pytest


def soffice_path() -> str | None:
    return shutil.which("soffice") or shutil.which("libreoffice")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if soffice_path():
        return
    required = os.environ.get("SCM_XL_REQUIRE_LIBREOFFICE") == "1"
    if required:
        return  # pytest_runtest_setup fails them instead
    for item in items:
        if "libreoffice" in item.keywords:
            item.add_marker(pytest.mark.skip(reason="LibreOffice (soffice) not installed"))


def pytest_runtest_setup(item: pytest.Item) -> None:
    if "libreoffice" in item.keywords and not soffice_path():
        if os.environ.get("SCM_XL_REQUIRE_LIBREOFFICE") == "1":
            pytest.fail("LibreOffice is required (SCM_XL_REQUIRE_LIBREOFFICE=1) but soffice was not found")
