"""Data Subject Requests in real Chromium: legal opens a request, the bundle is built with its
progress shown, an admin releases one field, the erasure is approved in the browser and
executed, and its receipt is shown; an approval before the identity check is refused; a legal
user cannot approve, and an admin cannot approve the erasure they requested."""

from __future__ import annotations

import pytest

from core.ledger import codes
from dsr.models import DsrRelease, LegalRequest
from governance.models import Vote
from tests.browser.test_background_progress import thread_runner, trace_key  # noqa: F401
from tests.browser.test_journeys import no_console_errors, sign_in
from tests.console.personas import persona

pytestmark = pytest.mark.usefixtures("flushable_transactional_db")


@pytest.fixture(autouse=True)
def people(flushable_transactional_db):
    """adam (admin), sam and lena (legal) exist with their roles before anything is filed."""
    return persona("adam"), persona("sam"), persona("lena")


def browser_key_for(new_context, name: str):
    """A page signed in as `name` whose browser holds a key registered for them and confirmed
    by another admin (sam)."""
    from governance.models import MemberKey
    from governance.services import member_key_confirm

    page = sign_in(new_context, name)
    page.goto("/governance/keys/")
    page.click("#generate-key")
    page.wait_for_selector("text=Key registered. An admin must confirm it before you sign.")
    key = MemberKey.objects.get(user__username=name)
    member_key_confirm(key=key, admin=persona("sam"))
    return page


def open_request(page, kind: str = "both") -> LegalRequest:
    page.goto("/dsr/")
    page.click("#dsr-open-link")
    page.fill("#id_identifiers", "jane.doe@example.com")
    page.select_option("#id_kind", kind)
    page.fill("#id_legal_basis", "GDPR Art. 15 and 17")
    page.click("#dsr-open-submit")
    page.wait_for_selector("text=Legal request opened; it is in the ledger.")
    return LegalRequest.objects.get()


def test_legal_opens_a_request_and_an_admin_approves_its_erasure_after_the_identity_check(
    new_context, shots
):
    lena = sign_in(new_context, "lena")
    legal = open_request(lena)
    assert "jane" not in lena.content().lower()
    assert lena.inner_text("#dsr-state").lower() == "open"
    assert "day(s) left" in lena.inner_text("#dsr-countdown")
    shots(lena, "opened")

    # a legal user may not approve at all: the approval page is forbidden
    response = lena.context.request.get(f"/dsr/{legal.id}/approve/erasure/")
    assert response.status == 403

    adam = browser_key_for(new_context, "adam")
    adam.goto(f"/dsr/{legal.id}/approve/erasure/")
    assert codes.DSR_IDENTITY_UNVERIFIED in adam.inner_text("#sign-blocker")
    shots(adam, "refused-before-identity")

    lena.goto(f"/dsr/{legal.id}/")
    lena.fill("#id_method", "passport seen on a video call")
    lena.click("#identity-submit")
    lena.wait_for_selector("#identity-verified")
    assert "lena" in lena.inner_text("#identity-verified")

    adam.goto(f"/dsr/{legal.id}/approve/erasure/")
    adam.wait_for_selector("#sign-button:visible")
    assert legal.subject_refs[0] in adam.inner_text("#payload-text")
    shots(adam, "erasure-payload")
    adam.click("#sign-button")
    adam.wait_for_selector("text=Your signed approval is recorded in the ledger.")
    assert "approved" in adam.inner_text("#approval-erasure")
    shots(adam, "erasure-approved")
    approval = Vote.objects.get()
    assert (approval.approver.username, approval.payload["purpose"]) == ("adam", "erasure")
    no_console_errors(lena)
    no_console_errors(adam)


def test_an_admin_cannot_approve_the_erasure_they_requested(new_context, shots):
    adam = browser_key_for(new_context, "adam")
    legal = open_request(adam, kind="erasure")
    adam.fill("#id_method", "in person, with an ID card")
    adam.click("#identity-submit")
    adam.wait_for_selector("#identity-verified")
    adam.goto(f"/dsr/{legal.id}/approve/erasure/")
    assert codes.DSR_SELF_APPROVAL in adam.inner_text("#sign-blocker")
    shots(adam, "own-request")
    assert not Vote.objects.exists()
    no_console_errors(adam)


def test_bundle_with_progress_a_released_field_and_an_erasure_with_its_receipt(
    new_context,
    shots,
    trace_key,  # noqa: F811
    thread_runner,  # noqa: F811
):
    import io
    import threading

    from replay.services import trace_ingest
    from tests.console.conftest import trace_bytes

    trace = trace_ingest(source=io.BytesIO(trace_bytes("ok")), filename="ok.trace.json").trace
    lena = sign_in(new_context, "lena")
    lena.goto("/dsr/")
    lena.click("#dsr-open-link")
    lena.fill("#id_identifiers", "ada.lovelace@example.org")
    lena.select_option("#id_kind", "both")
    lena.fill("#id_legal_basis", "GDPR Art. 15 and 17")
    lena.click("#dsr-open-submit")
    lena.wait_for_selector("text=Legal request opened; it is in the ledger.")
    legal = LegalRequest.objects.get()
    lena.fill("#id_method", "passport seen on a video call")
    lena.click("#identity-submit")
    lena.wait_for_selector("#identity-verified")
    assert "[redacted]" in lena.inner_text("#dsr-fields")
    assert "Ada" not in lena.inner_text("main")

    gate = threading.Event()
    thread_runner.submit(gate.wait, 60)  # the pool's one thread is busy until released
    try:
        lena.click("#bundle-submit")
        lena.wait_for_selector("#bundle-progress")
        assert "Building" in lena.inner_text("#bundle-progress")
        shots(lena, "bundle-progress")
    finally:
        gate.set()
    lena.wait_for_selector("#bundle-ready", timeout=30_000)  # htmx polled the section
    assert trace.trace_id[:10] in lena.inner_text("#dsr-fields")
    shots(lena, "bundle-built")

    adam = browser_key_for(new_context, "adam")
    adam.goto(f"/dsr/{legal.id}/")
    adam.fill(".release-form input[name=reason] >> nth=0", "the subject asked for their name")
    adam.click(".release-form button >> nth=0")
    adam.wait_for_selector("text=The field is released into the bundle")
    assert DsrRelease.objects.count() == 1
    assert "released" in adam.inner_text("#dsr-fields")
    shots(adam, "field-released")
    # the bundle built before the release lacks the value: the page says so, offers the new one
    lena.goto(f"/dsr/{legal.id}/")
    assert lena.inner_text("#bundle-outdated") == (
        "This bundle is out of date: 1 field was released after it was built, and it does not "
        "contain that value. Build the new bundle to include it."
    )
    assert lena.inner_text("#bundle-submit") == "Build the new bundle"
    shots(lena, "bundle-outdated")

    adam.goto(f"/dsr/{legal.id}/approve/erasure/")
    assert trace.blob.sha256 in adam.inner_text("#erasure-plan")
    adam.wait_for_selector("#sign-button:visible")
    adam.click("#sign-button")
    adam.wait_for_selector("text=Your signed approval is recorded in the ledger.")

    lena.goto(f"/dsr/{legal.id}/")
    lena.click("#erase-submit")
    lena.wait_for_selector("#erasure-receipt")
    receipt = lena.inner_text("#erasure-receipt")
    assert legal.subject_refs[0] in receipt
    assert "Ada" not in lena.inner_text("main")
    assert "[erased]" in lena.inner_text("#dsr-fields")
    shots(lena, "erasure-receipt")
    no_console_errors(lena)
    no_console_errors(adam)
