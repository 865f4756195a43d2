"""`manage.py demo`: one user per role with printed passwords, and demo traces of every verdict."""

from __future__ import annotations

import re
from io import StringIO

import pytest
from django.contrib.auth import authenticate
from django.core.management import CommandError, call_command
from django_otp.plugins.otp_totp.models import TOTPDevice

from console.demo import DEMO_USERS
from replay.models import Trace

pytestmark = pytest.mark.django_db


def run(*args: str) -> str:
    out = StringIO()
    call_command("demo", *args, stdout=out)
    return out.getvalue()


def test_it_prints_a_working_password_for_each_role_and_totp_secrets(settings):
    settings.DEBUG = True
    output = run("--no-traces")
    for username, roles in DEMO_USERS.items():
        line = re.search(rf"^  {username}\s+.*password: (\S+)$", output, re.MULTILINE)
        assert line, username
        assert authenticate(username=username, password=line[1]) is not None
        assert set(roles) == set(
            authenticate(username=username, password=line[1]).groups.values_list("name", flat=True)
        )
    assert output.count("TOTP secret: ") == 4  # adam, sam, cora, colin
    assert TOTPDevice.objects.filter(confirmed=True).count() == 4


def test_it_is_idempotent(settings):
    settings.DEBUG = True
    first = run("--no-traces")
    second = run("--no-traces")
    assert first == second
    assert TOTPDevice.objects.count() == 4


def test_it_ingests_and_replays_demo_traces_covering_every_verdict(settings):
    settings.DEBUG = True
    output = run()
    verdicts = set(Trace.objects.values_list("last_status", flat=True))
    assert {"ok", "diverged", "tamper_detected"} <= verdicts
    assert "REPLAY_DIVERGENCE" in output
    assert "INTEGRITY_FAILURE" in output
    assert "RESULT_MISMATCH" in output
    assert "FORCE_HALT_ACTIVE" not in output  # no demo replay is halted by another
    stored = Trace.objects.count()
    assert run() == output
    assert Trace.objects.count() == stored


def test_it_refuses_with_debug_off(settings):
    settings.DEBUG = False
    with pytest.raises(CommandError, match="refusing to create demo users with DEBUG off"):
        run("--no-traces")


def test_it_writes_the_files_of_the_auditors_first_upload(settings, tmp_path):
    """journeys.md, auditor step 2, on the demo: a native trace and an AHD sidecar get
    verdicts, the corrupt file a refusal naming where."""
    import io
    from pathlib import Path

    from console.demo import UPLOAD_SAMPLES
    from core.errors import ReplayError
    from replay.services import trace_upload

    settings.DEBUG = True
    settings.VAR_DIR = tmp_path
    settings.REPLAY_AHD_ROOT = str(Path(settings.BASE_DIR) / "replay" / "demo_ahd")
    output = run("--no-replays")
    directory = tmp_path / "demo-uploads"
    assert f"(drag them together): {directory}/" in output
    assert sorted(p.name for p in directory.iterdir()) == sorted(UPLOAD_SAMPLES)
    native, sidecar, corrupt = (directory / name for name in UPLOAD_SAMPLES)
    statuses = [
        trace_upload(source=io.BytesIO(p.read_bytes()), filename=p.name).report["status"]
        for p in (native, sidecar)
    ]
    assert statuses == ["diverged", "ok"]
    with pytest.raises(ReplayError) as caught:
        trace_upload(source=io.BytesIO(corrupt.read_bytes()), filename=corrupt.name)
    assert caught.value.code == "MALFORMED_TRACE"
    assert caught.value.message.startswith("trace: malformed JSON at line 9 column 15: ")


def test_it_records_every_demo_role_in_the_ledger_once(settings):
    from django.contrib.auth.models import User

    from governance import membership
    from governance.models import GovernanceEvent

    settings.DEBUG = True
    run("--no-traces")
    installed = GovernanceEvent.objects.filter(type="ROLES_INSTALLED")
    assert sorted(e.payload["username"] for e in installed) == ["adam", "colin", "cora", "sam"]
    assert {e.actor_label for e in installed} == {"system:installation"}
    changed = GovernanceEvent.objects.filter(type="ROLES_CHANGED")
    assert {(e.payload["username"], e.actor_label) for e in changed} == {
        ("vera", "adam"),
        ("alice", "adam"),
        ("oscar", "adam"),
        ("sam", "adam"),
        ("lena", "adam"),
    }
    for username, roles in DEMO_USERS.items():
        assert membership.roles_held(User.objects.get(username=username)) == set(roles)
    count = GovernanceEvent.objects.count()
    run("--no-traces")
    assert GovernanceEvent.objects.count() == count


def test_it_writes_the_credentials_to_an_owner_only_file_when_asked(settings, tmp_path):
    import json
    import stat

    settings.DEBUG = True
    path = tmp_path / "demo-users.json"
    output = run("--no-traces", "--credentials", str(path))
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    written = json.loads(path.read_text())
    assert sorted(written) == sorted(DEMO_USERS)
    for username, entry in written.items():
        assert f"password: {entry['password']}" in output
        assert authenticate(username=username, password=entry["password"]) is not None
    assert written["alice"]["totp_secret"] == ""
    assert f"TOTP secret: {written['cora']['totp_secret']} " in output


def test_a_trace_line_gives_the_code_its_verdict_rests_on_not_a_halted_replays(settings):
    from governance.services import replay_request, replay_run_govern, security_incident_declare
    from tests.console.personas import persona

    settings.DEBUG = True
    run()
    ok = Trace.objects.get(filename="demo-ok.trace.json")
    security_incident_declare(actor=persona("adam"), reason="drill", trace=ok.trace_id)
    refused = replay_request(trace=ok, mode="audit", actor=None, actor_label="demo", enqueue=False)
    replay_run_govern(run_id=refused.id)
    refused.refresh_from_db()
    assert refused.error_code == "FORCE_HALT_ACTIVE"
    line = re.search(r"^  demo-ok\.trace\.json\s+(.*)$", run(), re.MULTILINE)
    assert line
    assert line[1] == f"{ok.trace_id} ok"


def test_it_sends_two_agent_runs_through_the_otlp_receiver_and_seals_them(settings):
    from core.ledger import codes
    from governance.models import GovernanceEvent
    from otel.models import OtlpBody

    settings.DEBUG = True
    output = run()
    lines = re.findall(
        r"^  (weather-agent\S*\.otlp\.bin)\s+([0-9a-f]{32}) (\w+)( \w+)?$", output, re.MULTILINE
    )
    assert [(name, verdict, code.strip()) for name, _id, verdict, code in lines] == [
        ("weather-agent.otlp.bin", "ok", ""),
        ("weather-agent-divergent.otlp.bin", "diverged", "REPLAY_DIVERGENCE"),
    ]
    assert OtlpBody.objects.count() == 2
    for event_type in (codes.OTLP_RECEIVED, codes.OTEL_TRACE_SEALED):
        assert GovernanceEvent.objects.filter(code=codes.code_of(event_type)).count() == 2
    assert Trace.objects.filter(format="otel-genai").count() == 2
    assert run() == output  # idempotent: nothing received or sealed twice
    assert OtlpBody.objects.count() == 2
