"""The DSR's replays run in audit mode only; a replay in any other mode is refused."""

from __future__ import annotations

import pytest

from core.ledger import codes
from dsr import access
from governance.models import GovernanceEvent
from replay.models import ReplayRun

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("mode", ["sandbox", "production", "", "AUDIT"])
def test_a_dsr_replay_in_any_mode_but_audit_is_refused(mode, ingest):
    trace = ingest("ok")
    with pytest.raises(codes.GovernanceError) as refused:
        access.dsr_replay(trace=trace, mode=mode)
    assert refused.value.code == codes.DSR_REPLAY_MODE
    assert refused.value.message == access.REPLAY_MODE_MESSAGE.format(mode=mode)
    assert not ReplayRun.objects.exists()
    assert not GovernanceEvent.objects.filter(type=codes.REPLAY_REQUEST).exists()


def test_a_dsr_replay_is_a_governed_audit_replay_requested_for_the_dsr(ingest):
    trace = ingest("ok")
    run = access.dsr_replay(trace=trace, mode="audit")
    assert (run.mode, run.status, run.report["mode"]) == ("audit", "ok", "audit")
    asked = GovernanceEvent.objects.get(type=codes.REPLAY_REQUEST)
    assert asked.payload["mode"] == "audit"
    assert asked.actor_label == access.DSR_ACTOR
    assert GovernanceEvent.objects.filter(type=codes.REPLAY_RESULT).count() == 1
