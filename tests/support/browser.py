"""Headless Chromium with every scheme that could leave the machine blocked (the report pages' tests)."""

from __future__ import annotations

import contextlib
import json
import shutil
import tempfile
from pathlib import Path
from typing import Any, Iterator

import pytest

BROWSER_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


@contextlib.contextmanager
def offline_chromium() -> Iterator[Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="scm-xl-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or "chromium"
    for flag in [*BROWSER_FLAGS, f"--user-data-dir={profile}", "--window-size=1200,900"]:
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver") or "chromedriver"), options=options)
    try:
        driver.execute_cdp_cmd("Network.enable", {})
        driver.execute_cdp_cmd("Network.setBlockedURLs", {"urls": ["http://*", "https://*", "ws://*", "wss://*",
                                                                    "ftp://*"]})
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


# The calculator's inverse form, every max_tokens and model allowed, set to `fields` (element id ->
# value) and recomputed; a test appends what it returns.
SET_INVERSE = """
const [fields] = arguments;
// every max_tokens and model allowed (the page opens on the default question's alone)
document.querySelectorAll("input[name='inv-length'], input[name='inv-model']").forEach(b => { b.checked = true; });
for (const [id, value] of Object.entries(fields)) {
    const el = document.getElementById(id);
    if (el.type === 'checkbox') el.checked = value; else el.value = value;
}
document.getElementById('inv-method').dispatchEvent(new Event('change'));
"""


# The SLO calculator's fields (element id -> value) set, each with its change event; returns
# [data-result, text] of the element whose id is the second argument.
SET_SLO = """
const values = arguments[0];
for (const [id, value] of Object.entries(values)) {
  const el = document.getElementById(id);
  el.value = value;
  el.dispatchEvent(new Event('change'));
}
const out = document.getElementById(arguments[1]);
return [out.getAttribute('data-result'), out.innerText];
"""


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """The offline browser as a fixture, one per test module."""
    with offline_chromium() as driver:
        yield driver


def open_page(driver: Any, path: Path) -> None:
    driver.get_log("performance")  # drop what came before
    driver.get_log("browser")
    driver.get(path.resolve().as_uri())


def requests_made(driver: Any) -> list[str]:
    urls = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            urls.append(message["params"]["request"]["url"])
    return urls
