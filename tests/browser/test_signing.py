"""Signing in the browser works whatever the signer does first: typing a reason, choosing
"deny", asking for the payload again. Each of those replaces the payload region over htmx;
the sign button must stay there and sign the payload shown at that moment."""

from __future__ import annotations

import io

import pytest

from governance.models import GovernanceEvent, Vote
from tests.browser.test_journeys import no_console_errors, sign_in
from tests.console.conftest import LONG_AGO, TRACE_KEY_ID, TRACE_SECRET, trace_bytes
from tests.console.personas import persona

pytestmark = pytest.mark.usefixtures("flushable_transactional_db")


@pytest.fixture
def trace_key():
    from replay.keys import key_add_hmac

    return key_add_hmac(key_id=TRACE_KEY_ID, secret=TRACE_SECRET, valid_from=LONG_AGO)


def replayed(name: str):
    from governance.services import replay_request, replay_run_govern
    from replay.services import trace_ingest

    trace = trace_ingest(source=io.BytesIO(trace_bytes(name)), filename=f"{name}.trace.json").trace
    run = replay_request(trace=trace, mode="audit", actor=persona("alice"), enqueue=False)
    return replay_run_govern(run_id=run.id)


def browser_key_for(new_context, name: str):
    """A page signed in as `name` whose browser holds a key registered and confirmed for her."""
    from governance.models import MemberKey
    from governance.services import member_key_confirm

    page = sign_in(new_context, name)
    page.goto("/governance/keys/")
    page.click("#generate-key")
    page.wait_for_selector("text=Key registered. An admin must confirm it before you sign.")
    key = MemberKey.objects.get(user__username=name)
    member_key_confirm(key=key, admin=persona("adam"))
    return page


REASON = "The divergence is not explained; deny."


@pytest.fixture(autouse=True)
def signers(flushable_transactional_db):
    """cora and adam hold their roles per the ledger before anything is filed: an approval
    counts only in a role held before its request was filed."""
    return persona("cora"), persona("adam")


def test_a_council_member_denies_in_the_browser_after_typing_a_reason_and_asking_for_the_payload(
    new_context, shots, trace_key
):
    from governance.services import force_continue_request_file

    fc = force_continue_request_file(
        run=replayed("diverged"), actor=persona("alice"), reason="continue the audit"
    )
    cora = browser_key_for(new_context, "cora")
    cora.goto(f"/requests/force-continue/{fc.id}/")
    cora.wait_for_selector("#sign-button:visible")
    cora.fill("#payload-choices input[name=reason]", REASON)
    cora.check("#payload-choices input[name=decision][value=deny]")
    cora.click("#payload-choices button[type=submit]")
    cora.wait_for_selector('#payload-text:has-text(\'"decision":"deny"\')')
    assert f'"reason":"{REASON}"' in cora.inner_text("#payload-text")
    assert cora.is_visible("#sign-button")
    shots(cora, "deny-payload-shown")

    cora.click("#sign-button")
    cora.wait_for_selector("text=Your signed decision is recorded in the ledger.")
    shots(cora, "deny-recorded")
    no_console_errors(cora)
    vote = Vote.objects.get(request=fc)
    assert (vote.approver.username, vote.decision, vote.reason) == ("cora", "deny", REASON)
    event = GovernanceEvent.objects.get(type="FORCE_CONTINUE_APPROVAL")
    assert event.payload["decision"] == "deny"


def test_a_council_member_signs_a_halt_clear_in_the_browser_after_typing_a_reason(
    new_context, shots, trace_key
):
    from governance.models import Halt

    replayed("broken_chain")  # a tampered file: its replay halts that file
    halt = Halt.objects.active().get(payload__target_kind="blob")
    reason = "The copy was restored from the archive."
    cora = browser_key_for(new_context, "cora")
    cora.goto(f"/governance/halts/{halt.seq}/")
    cora.wait_for_selector("#sign-button:visible")
    cora.fill("#sign input[name=reason]", reason)
    cora.click("#sign form[method=get] button[type=submit]")
    cora.wait_for_selector(f'#payload-text:has-text(\'"reason":"{reason}"\')')
    assert cora.is_visible("#sign-button")
    shots(cora, "halt-payload-shown")

    cora.click("#sign-button")
    cora.wait_for_selector("text=Your signature toward clearing this halt is recorded.")
    no_console_errors(cora)
    vote = Vote.objects.get(request__kind="halt-clear", request__subject=str(halt.seq))
    assert (vote.approver.username, vote.reason) == ("cora", reason)
    assert GovernanceEvent.objects.filter(type="HALT_CLEAR_APPROVAL").count() == 1


def test_signing_right_after_typing_a_reason_never_signs_the_payload_without_it(
    new_context, shots, trace_key
):
    from governance.services import force_continue_request_file

    fc = force_continue_request_file(
        run=replayed("diverged"), actor=persona("alice"), reason="continue the audit"
    )
    cora = browser_key_for(new_context, "cora")
    cora.goto(f"/requests/force-continue/{fc.id}/")
    cora.wait_for_selector("#sign-button:visible")
    cora.check("#payload-choices input[name=decision][value=deny]")
    cora.wait_for_selector('#payload-text:has-text(\'"decision":"deny"\')')
    cora.fill("#payload-choices input[name=reason]", REASON)
    cora.click("#sign-button")  # the reason is typed but not yet in the payload shown
    cora.wait_for_selector(f'#payload-text:has-text(\'"reason":"{REASON}"\')')
    assert not Vote.objects.exists()
    shots(cora, "payload-caught-up-with-the-reason")

    cora.click("#sign-button")
    cora.wait_for_selector("text=Your signed decision is recorded in the ledger.")
    no_console_errors(cora)
    vote = Vote.objects.get(request=fc)
    assert (vote.decision, vote.reason) == ("deny", REASON)


def test_a_council_member_signs_a_role_grant_on_the_shared_request_page(
    new_context, shots, trace_key
):
    """The role grant's page is the one every council kind shares (issue 19): its reason is
    in the payload before the browser signs it."""
    from governance.models import RoleGrantRequest
    from governance.services import user_roles_change

    grant = user_roles_change(
        actor=persona("adam"), user=persona("lena"), roles=["council"], reason="elected"
    ).grant
    cora = browser_key_for(new_context, "cora")
    cora.goto(f"/governance/role-grants/{grant.id}/")  # the old URL moves to the new one
    cora.wait_for_url(f"**/requests/role-grant/{grant.id}/")
    cora.wait_for_selector("#sign-button:visible")
    cora.fill("#payload-choices input[name=reason]", "Elected at the meeting")
    cora.click("#payload-choices button[type=submit]")
    cora.wait_for_selector('#payload-text:has-text(\'"reason":"Elected at the meeting"\')')
    cora.click("#sign-button")
    # the recorded decision, or the refusal that says why not (a failure then names it)
    done = cora.get_by_text("Your signed decision is recorded in the ledger.")
    outcome = done.or_(cora.locator("main [role=alert]")).first
    outcome_or_what_the_page_says(cora, outcome)
    assert outcome.inner_text().strip() == "Your signed decision is recorded in the ledger."
    shots(cora, "role-grant-signed")
    no_console_errors(cora)
    event = GovernanceEvent.objects.get(type="ROLE_GRANT_APPROVAL")
    assert (event.payload["request_id"], event.payload["decision"]) == (str(grant.id), "approve")
    assert event.payload["reason"] == "Elected at the meeting"
    assert RoleGrantRequest.objects.get(id=grant.id).state == "pending"  # one of two


def outcome_or_what_the_page_says(page, outcome) -> None:
    """Wait for `outcome`; if it never shows, fail naming what the page shows instead."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    try:
        outcome.wait_for(timeout=30_000)
    except PlaywrightTimeout:
        status = page.locator("[id=sign-status]").inner_text()
        votes = GovernanceEvent.objects.filter(type="ROLE_GRANT_APPROVAL").count()
        pytest.fail(
            f"no decision shown at {page.url}; #sign-status {status!r}; {votes} vote event(s); "
            f"page errors {page.errors!r}"
        )


# The browser's signing held once, after the signature is made and before sign.js goes on, until
# the test calls window.releaseSigning(): what a slow IndexedDB or WebCrypto does by chance. And
# <html data-htmx-in-flight> counts htmx's requests not yet answered and swapped in (htmx sends a
# queued request in the same task as it finishes the one before, so 0 means all are done).
HOLD_SIGNING = """
(() => {
  let inFlight = 0;
  const count = (step) => () => {
    inFlight += step;
    document.documentElement.dataset.htmxInFlight = String(inFlight);
  };
  document.addEventListener("htmx:beforeRequest", count(1));
  document.addEventListener("htmx:afterRequest", count(-1));
  const subtle = window.crypto && window.crypto.subtle;
  if (!subtle) return;
  const sign = subtle.sign.bind(subtle);
  let held = false;
  subtle.sign = async function (...args) {
    const signature = await sign(...args);
    if (held) return signature;
    held = true;
    await new Promise((resolve) => {
      window.releaseSigning = resolve;
      document.documentElement.dataset.signingHeld = "1";
    });
    return signature;
  };
})();
"""


def htmx_answered(page) -> None:
    page.wait_for_selector("html[data-htmx-in-flight='0']", state="attached")


def role_grant_page_signing_held(new_context):
    """cora on a role grant's page, her reason in the payload shown, her click on the sign
    button held while signing; the payload region she clicked in is marked `data-clicked`."""
    from governance.services import user_roles_change

    grant = user_roles_change(
        actor=persona("adam"), user=persona("lena"), roles=["council"], reason="elected"
    ).grant
    cora = browser_key_for(new_context, "cora")
    cora.add_init_script(HOLD_SIGNING)
    cora.goto(f"/requests/role-grant/{grant.id}/")
    cora.wait_for_selector("#sign-button:visible")
    cora.fill("#payload-choices input[name=reason]", "Elected at the meeting")
    cora.click("#payload-choices button[type=submit]")
    cora.wait_for_selector('#payload-text:has-text(\'"reason":"Elected at the meeting"\')')
    htmx_answered(cora)  # the click's two answers (blur's change, then submit) are both in
    cora.evaluate("document.getElementById('signing-payload').dataset.clicked = '1'")
    cora.click("#sign-button")
    cora.wait_for_selector("html[data-signing-held='1']", state="attached")
    return cora, grant


def test_a_payload_shown_again_while_the_browser_signs_is_still_submitted(new_context, trace_key):
    """The CI failure of the role-grant journey (issue 19): the second answer to "Show the
    payload" replaced the payload region while the browser was signing; sign.js submitted the
    detached form, which does nothing, and wrote its status there: the signer saw nothing."""
    cora, grant = role_grant_page_signing_held(new_context)
    cora.click("#payload-choices button[type=submit]")  # the same payload, swapped in again
    cora.wait_for_selector("#signing-payload:not([data-clicked])", state="attached")
    cora.evaluate("window.releaseSigning()")
    done = cora.get_by_text("Your signed decision is recorded in the ledger.")
    outcome_or_what_the_page_says(cora, done.or_(cora.locator("main [role=alert]")).first)
    assert done.is_visible()
    no_console_errors(cora)
    event = GovernanceEvent.objects.get(type="ROLE_GRANT_APPROVAL")
    assert (event.payload["request_id"], event.payload["reason"]) == (
        str(grant.id),
        "Elected at the meeting",
    )


def test_a_payload_changed_while_the_browser_signs_is_not_submitted_and_the_page_says_so(
    new_context, shots, trace_key
):
    cora, grant = role_grant_page_signing_held(new_context)
    cora.fill("#payload-choices input[name=reason]", "Elected by the members")
    cora.click("#payload-choices button[type=submit]")
    cora.wait_for_selector('#payload-text:has-text(\'"reason":"Elected by the members"\')')
    htmx_answered(cora)
    cora.evaluate("window.releaseSigning()")
    status = cora.locator("#sign-status")
    status.filter(has_text="changed").wait_for()
    assert status.inner_text() == (
        "The payload shown changed while this browser was signing it; nothing was submitted: "
        "read it and sign again."
    )
    shots(cora, "payload-changed-while-signing")
    assert not GovernanceEvent.objects.filter(type="ROLE_GRANT_APPROVAL").exists()

    cora.click("#sign-button")  # signing again signs what is shown now
    cora.wait_for_selector("text=Your signed decision is recorded in the ledger.")
    no_console_errors(cora)
    event = GovernanceEvent.objects.get(type="ROLE_GRANT_APPROVAL")
    assert (event.payload["request_id"], event.payload["reason"]) == (
        str(grant.id),
        "Elected by the members",
    )
