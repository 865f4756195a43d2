"""After an admin releases a field, the request page no longer offers the earlier bundle as
the current one: it says the bundle lacks the release and offers to build the new one."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from core.ledger import signing
from dsr import access
from tests.console.personas import client_for
from tests.console.test_dsr_flow import approve, built, opened

pytestmark = pytest.mark.django_db


@pytest.fixture
def held(ingest, signers):
    return [ingest("ok"), ingest("diverged")]


def release_one(legal) -> None:
    hit = next(h for h, _v in access.subjects_port.subject_values(legal.subject_refs, reveal=False))
    form = {
        "subject_ref": hit.subject_ref,
        "trace_pk": hit.trace_pk,
        "location": hit.location,
        "path": hit.path,
        "reason": "the subject asked for their name as recorded",
    }
    assert client_for("adam").post(reverse("dsr-release", args=[legal.id]), form).status_code == 303


def bundle_section(legal) -> str:
    page = client_for("lena").get(reverse("dsr-detail", args=[legal.id])).content.decode()
    start = page.index('id="dsr-bundle"')
    return page[start : page.index("</section>", start)]


def test_a_release_after_the_build_marks_the_bundle_out_of_date(
    held, django_capture_on_commit_callbacks, member_key
):
    legal = built(opened(), django_capture_on_commit_callbacks)
    current = bundle_section(legal)
    assert 'id="bundle-outdated"' not in current
    assert re.search(r'<button type="submit" id="bundle-submit">Build again</button>', current)

    release_one(legal)
    legal.refresh_from_db()
    section = bundle_section(legal)
    notice = re.search(r'<p class="notice" role="status" id="bundle-outdated">(.*?)</p>', section)
    assert notice is not None
    assert notice.group(1) == (
        "<strong>This bundle is out of date:</strong> 1 field was released after it was "
        "built, and it does not contain that value. Build the new bundle to include it."
    )
    assert '<button type="submit" id="bundle-submit">Build the new bundle</button>' in section
    # once the release is approved, the earlier file is still there, named for what it is
    approve(legal, signing.DSR_RELEASE, member_key)
    section = bundle_section(legal)
    assert re.search(
        r'id="bundle-download">Download the earlier bundle \(without the later release\)</a>',
        section,
    )
    assert "Download the bundle<" not in section

    rebuilt = built(legal, django_capture_on_commit_callbacks)
    again = bundle_section(rebuilt)
    assert 'id="bundle-outdated"' not in again
    assert '<button type="submit" id="bundle-submit">Build again</button>' in again
    assert 'id="bundle-download">Download the bundle</a>' in again
