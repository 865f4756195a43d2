"""``manage.py verify FILE`` tells the truth about halts: it reads the active halts from the
ledger, and a halted trace is refused with FORCE_HALT_ACTIVE naming the halt, exactly as a
replay would be; where there is no ledger to read, it says the halts were not checked."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command
from django.db import connection

from governance import services
from governance.models import Halt
from tests.governance.conftest import ingest, trace_file
from tests.governance.factories import person

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("stored_traces")]


def verify(path) -> tuple[int, dict]:
    out = io.StringIO()
    try:
        call_command("verify", str(path), "--json", stdout=out)
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    return code, json.loads(out.getvalue())


def halts_check(report: dict) -> dict:
    (check,) = [c for c in report["checks"] if c["name"] == "halts"]
    return check


def halt_the_trace():
    """An admin's security incident against the trace id halts every copy of the trace."""
    trace = ingest("ok")
    services.security_incident_declare(
        actor=person("bob"), reason="key leaked", trace=trace.trace_id
    )
    return Halt.objects.active().get(payload__target_kind="trace")


def test_it_refuses_a_halted_trace_naming_the_halt_as_a_replay_would(stored_traces):
    halt = halt_the_trace()
    code, report = verify(trace_file(stored_traces, "ok"))
    assert code == 1
    assert (report["status"], report["error_code"]) == ("refused", "FORCE_HALT_ACTIVE")
    named = f"halt {halt.seq} on trace {halt.target_id}: {halt.reason}"
    assert report["message"] == (f"replay is halted until a council FORCE_HALT_CLEAR: {named}")
    assert halts_check(report) == {"name": "halts", "ok": False, "detail": named}


def test_it_prints_the_halt_in_the_summary(stored_traces):
    halt = halt_the_trace()
    out = io.StringIO()
    with pytest.raises(SystemExit):
        call_command("verify", str(trace_file(stored_traces, "ok")), stdout=out)
    text = out.getvalue()
    assert "no active halt" not in text
    assert f"halt {halt.seq}" in text
    assert "FORCE_HALT_ACTIVE" in text


def test_it_says_no_active_halt_only_after_reading_the_ledger(stored_traces):
    code, report = verify(trace_file(stored_traces, "ok"))
    assert (code, report["status"]) == (0, "ok")
    assert halts_check(report) == {
        "name": "halts",
        "ok": True,
        "detail": "no active halt on the trace or its snapshots",
    }


def test_it_says_the_halts_were_not_checked_without_a_ledger(stored_traces):
    path = trace_file(stored_traces, "ok")
    with connection.cursor() as cursor:  # a database the governance app was never migrated in
        cursor.execute("ALTER TABLE governance_governanceevent RENAME TO governance_not_migrated")
    code, report = verify(path)
    assert (code, report["status"]) == (0, "ok")
    assert halts_check(report) == {
        "name": "halts",
        "ok": True,
        "detail": "not checked (offline, no ledger)",
    }
