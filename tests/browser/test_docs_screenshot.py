"""The README's screenshot: the demo auditor on the trace list of `make run`'s demo.

The test always signs in as the demo's auditor (alice, with the password `manage.py demo`
prints) and checks the list shows the demo traces of every verdict; with
REPLAY_DOCS_SCREENSHOTS=1 it also writes docs/screenshot-traces.png (1280x800), which the
README shows. Re-take it after a change to the list page:

    REPLAY_DOCS_SCREENSHOTS=1 .venv/bin/python -m pytest -q tests/browser/test_docs_screenshot.py
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.usefixtures("flushable_transactional_db")

SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "screenshot-traces.png"


def test_the_demo_auditor_sees_the_demo_traces(new_context, shots, settings):
    from console.demo import demo_password, demo_traces_ensure, demo_users_ensure

    demo_users_ensure()
    demo = demo_traces_ensure(replay=True)
    verdicts = {trace.verdict for trace in demo}
    assert {"ok", "diverged", "tamper_detected"} <= verdicts

    page = new_context().new_page()
    page.set_viewport_size({"width": 1280, "height": 800})
    page.goto("/accounts/login/")
    page.fill("#id_username", "alice")
    page.fill("#id_password", demo_password("alice"))
    page.click("main button[type=submit]")
    page.wait_for_url(re.compile(r"/traces/$"))

    listed = page.inner_text("main")
    for trace in demo:
        assert trace.trace_id in listed, trace.filename
    shots(page, "demo-auditor-trace-list")
    if os.environ.get("REPLAY_DOCS_SCREENSHOTS") == "1":
        _save_small(page.screenshot(full_page=False), SCREENSHOT)


def _save_small(png: bytes, path: Path) -> None:
    """64 colours are enough for the page's flat colours: a third of the bytes, text intact
    (Pillow comes with fpdf2, which the PDF summaries use)."""
    import io

    from PIL import Image

    image = Image.open(io.BytesIO(png)).convert("RGB")
    assert image.size == (1280, 800)
    image.quantize(colors=64, method=Image.Quantize.MEDIANCUT).save(path, optimize=True)
