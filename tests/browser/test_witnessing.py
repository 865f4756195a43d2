"""In a real browser: an admin pushes the ledger's checkpoint to a real witness process from
the ledger page and reads "Witnessed by"; after a simulated rollback the witness refuses the
ledger and the alert banner is on every page until the admin acknowledges it."""

from __future__ import annotations

import pytest

from governance import transparency
from tests.browser.test_journeys import no_console_errors, sign_in
from tests.console.personas import persona
from tests.console.test_witnessing import Witness, _roll_back_to, append

pytestmark = pytest.mark.usefixtures("flushable_transactional_db")

# (flushable_transactional_db lifts the append-only triggers for the test and puts them back)


def test_an_admin_reads_witnessed_by_and_sees_the_alert_after_a_rollback(
    new_context, settings, tmp_path
):
    transparency._edge.clear()
    persona("adam")
    witness = Witness(tmp_path, "witness.test/browser")
    witness.start()
    try:
        settings.GOVERNANCE_WITNESSES = [witness.config]
        adam = sign_in(new_context, "adam")
        append(3)
        adam.goto("/governance/")
        assert adam.inner_text("#tlog-witnessed") == "Not yet witnessed by 1 of 1."
        adam.click("#witness-push")
        adam.wait_for_selector("#tlog-witnessed >> text=Witnessed by 1 of 1 through seq")
        size = transparency.tree_size()
        assert adam.inner_text("#tlog-witnessed") == f"Witnessed by 1 of 1 through seq {size}."
        assert adam.locator("#witness-alert").count() == 0

        _roll_back_to(size - 2)  # the three events gone: an old backup restored
        adam.goto("/governance/")
        adam.click("#witness-push")
        adam.wait_for_selector("#witness-alert")
        assert "A witness refused the ledger's history." in adam.inner_text("#witness-alert")
        adam.goto("/traces/")
        assert f"it holds a checkpoint of size {size}" in adam.inner_text("#witness-alert")
        adam.click("#witness-alert button")
        adam.wait_for_url("**/governance/")
        assert adam.locator("#witness-alert").count() == 0
        no_console_errors(adam)
    finally:
        witness.stop()
        transparency._edge.clear()
