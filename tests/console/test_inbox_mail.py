"""The people a new governed request waits for are told by e-mail (Django's e-mail backend;
the test backend keeps the mails in ``django.core.mail.outbox``), once its transaction has
committed; exactly those the inbox would list it for."""

from __future__ import annotations

import pytest
from django.core import mail

from dsr import services as dsr_services
from governance import services as gov
from tests.console.personas import persona

pytestmark = pytest.mark.django_db


@pytest.fixture
def people(signers):
    """adam and sam (admins), cora and colin (council), alice and lena hold their roles."""
    return {name: persona(name) for name in ("alice", "lena", "vera")}


def test_a_production_request_mails_each_council_member_once_it_is_committed(
    people, ingest, django_capture_on_commit_callbacks, settings
):
    settings.REPLAY_BASE_URL = "https://console.example"
    trace = ingest("ok")
    with django_capture_on_commit_callbacks(execute=False) as pending:
        request = gov.production_replay_request_file(
            trace=trace, actor=persona("alice"), reason="recovery drill"
        )
    assert mail.outbox == []  # nothing is sent before the request is committed
    for callback in pending:
        callback()
    assert sorted(m.to[0] for m in mail.outbox) == ["colin@example.com", "cora@example.com"]
    sent = mail.outbox[0]
    assert sent.subject == (
        f"Production replay waits for your signature: production replay of trace {trace.trace_id}"
    )
    assert sent.body == (
        f"Production replay: production replay of trace {trace.trace_id}\n"
        "Filed by alice. It needs 2 more council signatures; you may sign it as council.\n\n"
        "Read exactly what you would sign, and sign it, at:\n"
        f"https://console.example/requests/production-replay/{request.id}/\n\n"
        "Everything waiting for you: https://console.example/inbox/\n"
    )


def test_a_legal_request_is_announced_once_its_identity_is_verified(
    people, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        legal = dsr_services.legal_request_open(
            actor=persona("lena"),
            identifiers=["Jane.Doe@Example.com"],
            kind="erasure",
            legal_basis="GDPR Art. 17",
        )
    assert mail.outbox == []  # no approval can be signed before the identity check
    with django_capture_on_commit_callbacks(execute=True):
        dsr_services.legal_request_identity_verify(
            request=legal, actor=persona("lena"), method="passport checked by video call"
        )
    assert sorted(m.to[0] for m in mail.outbox) == ["adam@example.com", "sam@example.com"]
    assert mail.outbox[0].subject == (
        f"Legal request erasure waits for your signature: erasure for legal request "
        f"{legal.id} (erasure, 1 subject(s))"
    )


def test_a_failed_mail_is_logged_and_never_undoes_the_request(
    people, ingest, django_capture_on_commit_callbacks, settings, caplog
):
    settings.EMAIL_BACKEND = "tests.console.test_inbox_mail.BrokenBackend"
    with django_capture_on_commit_callbacks(execute=True):
        grant = gov.user_roles_change(
            actor=persona("adam"), user=persona("lena"), roles=["legal", "council"], reason="x"
        ).grant
    from governance.models import RoleGrantRequest

    assert grant is not None
    assert RoleGrantRequest.objects.get(pk=grant.pk).state == "pending"
    assert mail.outbox == []
    assert "could not tell the signers of the request announced at seq" in caplog.text


class BrokenBackend:
    def __init__(self, *args, **kwargs):
        pass

    def send_messages(self, messages):
        raise ConnectionRefusedError("no mail server")
