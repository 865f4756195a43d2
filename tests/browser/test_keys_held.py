"""The key this browser holds: named by the person, marked on the keys page, and chosen by
default in the signing form even when it is not the person's first key."""

from __future__ import annotations

import io

import pytest

from tests.browser.test_journeys import no_console_errors, sign_in
from tests.console.conftest import LONG_AGO, TRACE_KEY_ID, TRACE_SECRET, trace_bytes
from tests.console.personas import persona

pytestmark = pytest.mark.usefixtures("flushable_transactional_db")


def test_the_browsers_key_is_marked_and_the_signing_form_defaults_to_it(new_context, shots):
    from core.ledger.signing import public_key_of
    from governance import keystore
    from governance import services as gov_services
    from governance.models import MemberKey
    from governance.services import replay_request, replay_run_govern
    from replay.keys import key_add_hmac
    from replay.services import trace_ingest

    key_add_hmac(key_id=TRACE_KEY_ID, secret=TRACE_SECRET, valid_from=LONG_AGO)
    for name in ("alice", "adam", "sam", "cora", "colin"):
        persona(name)
    offline = gov_services.member_key_register(
        user=persona("cora"),
        public_key=public_key_of(keystore.generate_private_key()).hex(),
        label="offline, in the safe",
    )
    gov_services.member_key_confirm(key=offline, admin=persona("adam"))

    cora = sign_in(new_context, "cora")
    cora.goto("/governance/keys/")
    cora.fill("#id_label", "Cora's laptop")
    cora.click("#generate-key")
    cora.wait_for_selector("text=Key registered. An admin must confirm it before you sign.")
    made_here = MemberKey.objects.get(label="Cora's laptop")
    gov_services.member_key_confirm(key=made_here, admin=persona("adam"))

    cora.goto("/governance/keys/")
    cora.wait_for_selector(".badge.held")
    held = cora.locator("#member-keys tr.held-here")
    assert held.count() == 1
    assert held.get_attribute("id") == f"key-{made_here.key_id}"
    assert "held by this browser" in held.inner_text()
    assert "Cora's laptop" in held.inner_text()
    assert cora.locator(f"#key-{offline.key_id} .badge.held").count() == 0
    shots(cora, "keys-page-marks-the-browsers-key")

    trace = trace_ingest(
        source=io.BytesIO(trace_bytes("diverged")), filename="diverged.trace.json"
    ).trace
    run = replay_run_govern(
        run_id=replay_request(trace=trace, mode="audit", actor=persona("alice"), enqueue=False).id
    )
    fc = gov_services.force_continue_request_file(
        run=run, actor=persona("alice"), reason="the router change is intended"
    )
    cora.goto(f"/force-continue/{fc.id}/")
    cora.wait_for_selector("#sign-key option[data-held]", state="attached")
    options = cora.locator("#sign-key option")
    assert options.nth(0).get_attribute("value") == offline.key_id  # first, yet not chosen
    assert cora.locator("#sign-key").input_value() == made_here.key_id
    assert "Cora's laptop" in cora.locator("#sign-key option[data-held]").inner_text()
    assert "held by this browser" in cora.locator("#sign-key option[data-held]").inner_text()
    shots(cora, "signing-form-defaults-to-it")
    no_console_errors(cora)
