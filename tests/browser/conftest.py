"""Browser fixtures: one real egs-hub on SQLite, Debian's Chromium, and where screenshots go.

Chromium is Debian's (``apt-get install chromium``), not Playwright's download,
which does not work here; ``$EGS_CHROMIUM`` names another binary. Screenshots go
to ``$EGS_ARTIFACTS``, else ``tests/artifacts/`` of the checkout (git-ignored).
If Chromium or configurable-http-proxy is missing, the tests fail saying so.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, BrowserContext, Page, Playwright, expect, sync_playwright

from ..service.hub import ROOT, Hub, chp_on_path, sqlite_hub

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
# A zone with a half-hour offset, so a time shown in UTC (or the server's zone) cannot pass for local.
BROWSER_TIMEZONE = "Asia/Kolkata"
BROWSER_LOCALE = "en-GB"


@pytest.fixture(scope="module")
def hub(tmp_path_factory) -> Iterator[Hub]:
    if shutil.which("configurable-http-proxy", path=chp_on_path()) is None:
        pytest.fail("configurable-http-proxy is not on PATH (npm install configurable-http-proxy)")
    with sqlite_hub(tmp_path_factory.mktemp("browser-hub")) as running:
        yield running


# Module scope, not session: Playwright's sync API runs an asyncio loop in the main thread for as
# long as it lives, and every later test that starts its own loop (asyncio.run) would fail.
@pytest.fixture(scope="module")
def playwright() -> Iterator[Playwright]:
    with sync_playwright() as p:
        yield p


@pytest.fixture(scope="module")
def browser(playwright: Playwright) -> Iterator[Browser]:
    executable = os.environ.get("EGS_CHROMIUM", "/usr/bin/chromium")
    if not os.path.exists(executable):
        pytest.fail(f"no Chromium at {executable}: apt-get install -y chromium, or set EGS_CHROMIUM")
    launched = playwright.chromium.launch(executable_path=executable, headless=True, args=CHROMIUM_ARGS)
    expect.set_options(timeout=15_000)
    yield launched
    launched.close()


@pytest.fixture(scope="session")
def artifacts() -> Path:
    directory = Path(os.environ.get("EGS_ARTIFACTS") or os.path.join(ROOT, "tests", "artifacts"))
    directory.mkdir(parents=True, exist_ok=True)
    return directory


@pytest.fixture
def new_page(browser: Browser) -> Iterator[Callable[[], Page]]:
    """``new_page()``: a page in a fresh browser context (its own cookies: one person)."""
    contexts: list[BrowserContext] = []

    def make() -> Page:
        context = browser.new_context(
            timezone_id=BROWSER_TIMEZONE, locale=BROWSER_LOCALE, viewport={"width": 1280, "height": 900}
        )
        context.set_default_timeout(15_000)
        contexts.append(context)
        return context.new_page()

    yield make
    for context in contexts:
        context.close()
