"""Sorting the trace list in Chromium, with and without JavaScript, at 1440 and 390 px: a
column header sorts, a second click turns it round, aria-sort says which, the filters stay."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from tests.browser.test_journeys import no_console_errors, sign_in

pytestmark = pytest.mark.usefixtures("flushable_transactional_db")


@pytest.fixture
def rows():
    from tests.console.factories import trace_row

    now = timezone.now()
    return [
        trace_row(format="paxman", job_id="job-c", created_at=now - timedelta(days=1)),
        trace_row(format="paxman", job_id="job-a", created_at=now),
        trace_row(format="paxman", job_id="job-b", created_at=now - timedelta(days=2)),
        trace_row(format="mace", job_id="job-0", created_at=now - timedelta(days=3)),
    ]


def _jobs(page) -> list[str]:
    return page.locator("table.traces tbody tr td:nth-child(3)").all_inner_texts()


@pytest.mark.parametrize("width", [1440, 390])
def test_a_header_sorts_and_a_second_click_turns_it_round(new_context, shots, rows, width):
    page = sign_in(new_context, "vera")
    page.set_viewport_size({"width": width, "height": 900})
    page.goto("/traces/?format=paxman")
    assert _jobs(page) == ["job-a", "job-c", "job-b"]  # newest first
    uploaded = page.locator("th", has_text="Uploaded")
    assert uploaded.get_attribute("aria-sort") == "descending"
    page.click("th >> text=Job")
    page.wait_for_url("**sort=job")
    assert _jobs(page) == ["job-a", "job-b", "job-c"]
    assert page.locator("th", has_text="Job").get_attribute("aria-sort") == "ascending"
    assert uploaded.get_attribute("aria-sort") == "none"
    shots(page, f"job-ascending-{width}")
    page.click("th >> text=Job")
    page.wait_for_url("**sort=-job")
    assert _jobs(page) == ["job-c", "job-b", "job-a"]
    assert page.locator("th", has_text="Job").get_attribute("aria-sort") == "descending"
    assert "format=paxman" in page.url
    no_console_errors(page)


def test_sorting_works_without_javascript(new_context, rows):
    from tests.console.personas import PASSWORD, persona

    persona("vera")
    page = new_context(java_script_enabled=False).new_page()
    page.goto("/accounts/login/")
    page.fill("#id_username", "vera")
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.goto("/traces/?format=paxman")
    page.click("th >> text=Job")
    assert _jobs(page) == ["job-a", "job-b", "job-c"]
    page.select_option("select[name=format]", "")  # the filter form keeps the sort
    page.click("form.filters button[type=submit]")
    assert _jobs(page) == ["job-0", "job-a", "job-b", "job-c"]
    assert "sort=job" in page.url
