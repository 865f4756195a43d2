"""Real headless Chromium (Debian's, never a downloaded one) driven by Playwright.

Without /usr/bin/chromium the browser tests skip and say how to install it; with
REPLAY_REQUIRE_BROWSER=1 (CI) a missing browser is a failure instead.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

CHROMIUM = Path(os.environ.get("REPLAY_CHROMIUM", "/usr/bin/chromium"))
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "browser"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def pytest_collection_modifyitems(config, items):
    browser_items = [i for i in items if "tests/browser/" in str(i.fspath)]
    for item in browser_items:
        item.add_marker(pytest.mark.browser)
    if CHROMIUM.exists() or not browser_items:
        return
    if os.environ.get("REPLAY_REQUIRE_BROWSER") == "1":
        return  # the `chromium` fixture fails each browser test instead
    for item in browser_items:
        item.add_marker(pytest.mark.skip(reason=MISSING))


MISSING = f"no Chromium at {CHROMIUM}: install it with `apt-get install chromium`"


@pytest.fixture(scope="module")
def chromium():
    """The browser, for one test module at a time.

    Playwright's sync API keeps an event loop running in this thread while it is open, and
    Django then refuses database calls from this thread; the test bodies' calls are plain
    synchronous ones, so DJANGO_ALLOW_ASYNC_UNSAFE is set exactly while the loop runs (never
    outside the browser tests: a deployment must not set it).
    """
    from playwright.sync_api import sync_playwright

    if not CHROMIUM.exists():
        pytest.fail(f"REPLAY_REQUIRE_BROWSER=1 but {MISSING}")
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
            )
            yield browser
            browser.close()
    finally:
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


@pytest.fixture
def new_context(chromium, live_server):
    """`new_context(**options)`: a fresh browser context on the live server (its own
    cookies and IndexedDB); all are closed when the test ends, before the server stops
    sharing its database connection, so no request is left in flight."""
    opened = []

    def make(**options):
        context = chromium.new_context(
            base_url=live_server.url, viewport={"width": 1280, "height": 900}, **options
        )
        opened.append(context)
        return context

    yield make
    for context in opened:
        context.close()


@pytest.fixture(autouse=True)
def _private_storage(settings, tmp_path):
    """The live server runs in this process: a private blob store per test."""
    settings.VAR_DIR = tmp_path / "var"
    settings.VAR_DIR.mkdir()
    settings.STORAGES = {
        **settings.STORAGES,
        "blobs": {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": str(tmp_path / "blobs")},
        },
    }


@pytest.fixture(autouse=True)
def _fresh_server_key_cache():
    from governance import ledger

    ledger._private_keys.clear()
    yield
    ledger._private_keys.clear()


class Shots:
    """Numbered screenshots of one test under test-artifacts/browser/<test>/."""

    def __init__(self, name: str) -> None:
        self.directory = ARTIFACTS / name
        self.directory.mkdir(parents=True, exist_ok=True)
        for old in self.directory.glob("*.png"):
            old.unlink()
        self.count = 0

    def __call__(self, page, label: str) -> Path:
        self.count += 1
        path = self.directory / f"{self.count:02d}-{label}.png"
        page.screenshot(path=str(path), full_page=True)
        return path


@pytest.fixture
def shots(request) -> Shots:
    return Shots(request.node.name)
