"""The admin's navigation (the most links of any role) at a laptop's 1280 px, a desktop's
1440 px and a phone's 390 px: every link, the brand and the signed-in person's box lie inside
the window and overlap nothing, and on a desktop the links stand on one line (at 1280 px they
wrapped to three rows)."""

from __future__ import annotations

import pytest

from tests.browser.test_journeys import no_console_errors, sign_in

pytestmark = pytest.mark.usefixtures("flushable_transactional_db")

#: the header's boxes a person reads: the brand, each link, the name, the roles, sign-out
HEADER = (
    "header .brand, header nav[aria-label=Main] a, header .who .user, header .who .roles, "
    "header .who button"
)
LINKS = "header nav[aria-label=Main] a"
BOXES = """(selector) => Array.from(document.querySelectorAll(selector))
  .map((e) => { const r = e.getBoundingClientRect();
    return {name: (e.textContent || "").trim(), left: r.left, right: r.right, top: r.top,
            bottom: r.bottom, width: r.width, height: r.height}; })"""


def overlaps(boxes: list[dict]) -> list[tuple[str, str]]:
    found = []
    for i, a in enumerate(boxes):
        for b in boxes[i + 1 :]:
            if (
                a["left"] < b["right"] - 0.5
                and b["left"] < a["right"] - 0.5
                and a["top"] < b["bottom"] - 0.5
                and b["top"] < a["bottom"] - 0.5
            ):
                found.append((a["name"], b["name"]))
    return found


def header_boxes(page) -> list[dict]:
    boxes = page.evaluate(BOXES, HEADER)
    assert all(b["width"] > 0 and b["height"] > 0 for b in boxes), boxes  # all shown
    return boxes


@pytest.mark.parametrize("width", [1280, 1440])
def test_the_admin_navigation_is_one_line_inside_the_window(new_context, shots, width):
    page = sign_in(new_context, "adam")
    page.set_viewport_size({"width": width, "height": 900})
    page.goto("/ops/")
    shots(page, f"nav-{width}")
    boxes = header_boxes(page)
    links = page.locator(LINKS)
    assert links.count() >= 13  # the admin's links, from Inbox to Role grants
    assert overlaps(boxes) == []
    assert max(b["right"] for b in boxes) <= width
    assert page.evaluate("() => document.documentElement.scrollWidth") <= width
    tops = {round(b["top"]) for b in page.evaluate(BOXES, LINKS)}
    assert len(tops) == 1, tops  # every link on one line
    no_console_errors(page)


def test_the_admin_navigation_on_a_phone_stacks_inside_the_window(new_context, shots):
    page = sign_in(new_context, "adam")
    page.set_viewport_size({"width": 390, "height": 900})
    page.goto("/ops/")
    page.click("header label[for=nav-toggle]")
    shots(page, "nav-390-open")
    boxes = header_boxes(page)
    assert overlaps(boxes) == []
    assert max(b["right"] for b in boxes) <= 390
    assert page.evaluate("() => document.documentElement.scrollWidth") <= 390
    no_console_errors(page)
