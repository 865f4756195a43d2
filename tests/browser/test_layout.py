"""Every main page fits the window, at a desktop's 1440 px, a tablet's 800 px and a phone's
390 px: nothing wider than the viewport (tables scroll inside their card), the navigation
collapses on a phone, the current page is marked in it, and a skip link leads to the content."""

from __future__ import annotations

import io

import pytest

from tests.browser.test_journeys import no_console_errors, sign_in
from tests.console.conftest import LONG_AGO, TRACE_KEY_ID, TRACE_SECRET, trace_bytes
from tests.console.personas import persona

pytestmark = pytest.mark.usefixtures("flushable_transactional_db")

#: the elements that stick out of the window, for the failure message
OVERFLOWING = """() => Array.from(document.querySelectorAll("body *"))
  .filter((e) => e.getBoundingClientRect().right > window.innerWidth + 0.5)
  .filter((e) => !e.closest(".table-scroll, table"))
  .slice(0, 8)
  .map((e) => e.tagName.toLowerCase() + (e.id ? "#" + e.id : "") +
    (e.className && typeof e.className === "string" ? "." + e.className.split(" ").join(".") : "") +
    " right=" + Math.round(e.getBoundingClientRect().right))"""


@pytest.fixture
def world(db):
    from governance import services as gov_services
    from governance.services import replay_request, replay_run_govern
    from replay.keys import key_add_hmac
    from replay.services import trace_ingest

    key_add_hmac(key_id=TRACE_KEY_ID, secret=TRACE_SECRET, valid_from=LONG_AGO)
    for name in ("alice", "adam", "sam", "cora", "colin"):
        persona(name)
    runs = {}
    for name in ("diverged", "broken_chain", "ok"):
        trace = trace_ingest(
            source=io.BytesIO(trace_bytes(name)), filename=f"{name}.trace.json"
        ).trace
        run = replay_request(trace=trace, mode="audit", actor=persona("alice"), enqueue=False)
        runs[name] = replay_run_govern(run_id=run.id)
    # one stored file of each other format, as its own system writes it
    from tests.published import AHD_CHECKOUT, PAXMAN

    swiss = AHD_CHECKOUT / "docs" / "evals" / "2026-04-21-swiss.replay.json"
    token = AHD_CHECKOUT / "tokens" / "swiss-editorial.yml"
    brief = AHD_CHECKOUT / "briefs" / "landing.yml"
    from replay.services import trace_upload_batch

    batch = trace_upload_batch(
        files=[(p.name, io.BytesIO(p.read_bytes())) for p in (swiss, token, brief)]
    )
    runs["ahd"] = next(o.result.trace for o in batch if o.result is not None)
    money = PAXMAN / "money_unresolved.json"
    runs["paxman"] = trace_ingest(source=io.BytesIO(money.read_bytes()), filename=money.name).trace
    runs["request"] = gov_services.force_continue_request_file(
        run=runs["diverged"], actor=persona("alice"), reason="the router change is intended"
    )
    return runs


def main_pages(world) -> list[tuple[str, str]]:
    from governance.models import Halt

    run = world["diverged"]
    halt = Halt.objects.order_by("seq").first()
    return [
        ("traces", "/traces/"),
        ("trace", f"/traces/{run.trace.blob.sha256}/"),
        ("run", f"/runs/{run.id}/"),
        ("upload", "/traces/upload/"),
        ("ledger", "/governance/"),
        ("halts", "/governance/halts/"),
        ("keys", "/governance/keys/"),
        ("users", "/governance/users/"),
        ("ops", "/ops/"),
        ("force-continue", "/force-continue/"),
        ("production", "/production/"),
        ("force-continue-request", f"/force-continue/{world['request'].id}/"),
        ("halt", f"/governance/halts/{halt.seq}/"),
        ("role-grants", "/governance/role-grants/"),
        ("api-tokens", "/tokens/"),
        ("api-docs", "/api/docs/"),
        ("trace-ahd", f"/traces/{world['ahd'].blob.sha256}/"),
        ("trace-paxman", f"/traces/{world['paxman'].blob.sha256}/"),
    ]


@pytest.mark.parametrize("width", [1440, 800, 390])
def test_no_main_page_is_wider_than_the_window(new_context, shots, world, width):
    page = sign_in(new_context, "adam")
    page.set_viewport_size({"width": width, "height": 900})
    too_wide = {}
    for name, url in main_pages(world):
        page.goto(url)
        page.wait_for_load_state("networkidle")
        scroll_width = page.evaluate("() => document.documentElement.scrollWidth")
        inner_width = page.evaluate("() => window.innerWidth")
        shots(page, f"{name}-{width}")
        if scroll_width > inner_width:
            too_wide[name] = (scroll_width, page.evaluate(OVERFLOWING))
    assert too_wide == {}
    no_console_errors(page)


def test_the_phone_navigation_collapses_and_marks_the_current_page(new_context, shots, world):
    page = sign_in(new_context, "adam")
    page.set_viewport_size({"width": 390, "height": 800})
    page.goto("/governance/keys/")
    nav = page.locator("header nav[aria-label=Main]")
    assert not nav.is_visible()
    shots(page, "menu-closed")
    page.click("header label[for=nav-toggle]")
    assert nav.is_visible()
    shots(page, "menu-open")
    current = nav.locator("a[aria-current=page]")
    assert current.count() == 1
    assert current.inner_text() == "Keys"

    page.set_viewport_size({"width": 1440, "height": 900})
    page.goto("/governance/halts/")
    assert nav.is_visible()
    assert nav.locator("a[aria-current=page]").inner_text() == "Halts"
    page.keyboard.press("Tab")
    skip = page.locator("a.skip-link")
    assert skip.evaluate("e => e === document.activeElement")
    assert skip.get_attribute("href") == "#content"
    assert page.locator("main#content").count() == 1
    no_console_errors(page)
