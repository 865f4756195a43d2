"""Auditors' notes on a trace (TRACE_NOTE): appended to the ledger by an auditor or an admin,
listed oldest first on the trace page and over the API, never edited or removed, carried by
the trace's ledger evidence, and refused when empty, too long or quoting personal data."""

from __future__ import annotations

import pytest
from django.db import DatabaseError, connection, transaction

from core.canonical import jcs
from core.ledger import codes
from dsr import evidence
from governance import ledger
from governance.models import GovernanceEvent
from governance.services import (
    NOTE_EMPTY_MESSAGE,
    NOTE_PERSONAL_DATA_MESSAGE,
    NOTE_TOO_LONG_MESSAGE,
    trace_note_add,
)
from governance.services.notes import NOTE_MAX_CHARS
from tests.console.personas import EVERYONE, persona

pytestmark = pytest.mark.django_db

MAY_NOTE = {"alice", "adam", "sam"}
ADA = "ada.lovelace@example.org"  # the subject of the demo's "ok" trace


@pytest.fixture
def trace(ingest):
    return ingest("ok")


def _notes():
    return list(GovernanceEvent.objects.filter(type=codes.TRACE_NOTE).order_by("seq"))


class TestTheService:
    def test_it_appends_one_event_naming_the_trace_and_the_chain_verifies(self, trace):
        event = trace_note_add(trace=trace, actor=persona("alice"), text="  checked by hand \n")

        assert (event.type, event.code, event.actor_label) == ("TRACE_NOTE", 110, "alice")
        assert jcs(event.payload) == (
            b'{"file_sha256":"' + trace.blob.sha256.encode() + b'","text":"checked by hand",'
            b'"trace_id":"' + trace.trace_id.encode() + b'"}'
        )
        assert ledger.verify().ok

    def test_the_code_is_the_next_free_one_of_the_replay_range(self):
        assert codes.code_of(codes.TRACE_NOTE) == 110
        assert codes.BY_CODE[110].name == "TRACE_NOTE"

    @pytest.mark.parametrize(
        ("text", "message"),
        [
            ("", NOTE_EMPTY_MESSAGE),
            (" \n\t ", NOTE_EMPTY_MESSAGE),
            (
                "x" * (NOTE_MAX_CHARS + 1),
                "a note holds at most 2000 characters; this one has 2001",
            ),
        ],
    )
    def test_it_refuses_an_empty_or_too_long_note(self, trace, text, message):
        with pytest.raises(codes.GovernanceError) as caught:
            trace_note_add(trace=trace, actor=persona("alice"), text=text)
        assert (caught.value.code, caught.value.message) == ("NOTE_INVALID", message)
        assert _notes() == []

    def test_the_too_long_message_is_its_constant(self):
        assert NOTE_TOO_LONG_MESSAGE.format(limit=2000, length=2001) == (
            "a note holds at most 2000 characters; this one has 2001"
        )

    def test_a_note_of_exactly_the_limit_is_kept(self, trace):
        event = trace_note_add(trace=trace, actor=persona("alice"), text="y" * NOTE_MAX_CHARS)
        assert len(event.payload["text"]) == NOTE_MAX_CHARS

    @pytest.mark.parametrize("quoted", [ADA, ADA.upper()])
    def test_it_refuses_a_note_quoting_a_personal_value_of_the_trace(self, trace, quoted):
        with pytest.raises(codes.GovernanceError) as caught:
            trace_note_add(trace=trace, actor=persona("alice"), text=f"asked {quoted} to confirm")
        assert (caught.value.code, caught.value.message) == (
            "NOTE_PERSONAL_DATA",
            NOTE_PERSONAL_DATA_MESSAGE,
        )
        assert _notes() == []

    def test_a_note_naming_the_subject_by_their_ref_is_kept(self, trace):
        from privacy import subjects

        ref = subjects.lookup(ADA)
        assert ref is not None
        assert ref.startswith("subj_")
        event = trace_note_add(trace=trace, actor=persona("alice"), text=f"asked {ref}")
        assert event.payload["text"] == f"asked {ref}"

    def test_the_database_refuses_to_edit_or_delete_a_note(self, trace):
        seq = trace_note_add(trace=trace, actor=persona("alice"), text="first").seq
        for sql in (
            "UPDATE governance_governanceevent SET payload = '{}' WHERE seq = %s",
            "DELETE FROM governance_governanceevent WHERE seq = %s",
        ):
            with (
                pytest.raises(DatabaseError, match="append-only"),
                transaction.atomic(),
                connection.cursor() as cur,
            ):
                cur.execute(sql, [seq])
        assert GovernanceEvent.objects.get(seq=seq).payload["text"] == "first"

    def test_the_traces_evidence_carries_its_notes(self, trace, ingest):
        other = ingest("missing_snapshot")  # another trace id
        note = trace_note_add(trace=trace, actor=persona("alice"), text="seen")
        trace_note_add(trace=other, actor=persona("alice"), text="elsewhere")

        found = evidence.ledger_evidence([trace], checkpoint=False)
        notes = [e for e in found["events"] if e["type"] == "TRACE_NOTE"]
        assert [(e["seq"], e["payload"]["text"]) for e in notes] == [(note.seq, "seen")]


class TestThePage:
    def url(self, trace):
        return f"/traces/{trace.blob.sha256}/notes/"

    def test_alice_adds_a_note_and_the_trace_page_lists_it(self, as_persona, trace):
        client = as_persona("alice")
        response = client.post(self.url(trace), {"text": "the seal matches the archive"})
        [note] = _notes()
        assert response.status_code == 303
        assert response["Location"] == f"/traces/{trace.blob.sha256}/#notes"

        page = client.get(f"/traces/{trace.blob.sha256}/").content.decode()
        assert f'<li id="note-{note.seq}">' in page
        assert "<strong>alice</strong>" in page
        assert f'ledger seq <a href="/governance/?before={note.seq + 1}">{note.seq}</a>' in page
        assert "the seal matches the archive" in page
        assert f"Note added to the ledger as event {note.seq}." in page

    def test_the_notes_are_listed_oldest_first(self, as_persona, trace):
        trace_note_add(trace=trace, actor=persona("alice"), text="note one")
        trace_note_add(trace=trace, actor=persona("adam"), text="note two")
        page = as_persona("vera").get(f"/traces/{trace.blob.sha256}/").content.decode()
        assert page.index("note one") < page.index("note two")

    @pytest.mark.parametrize(
        ("text", "message"),
        [
            ("   ", NOTE_EMPTY_MESSAGE),
            ("z" * 2001, "a note holds at most 2000 characters; this one has 2001"),
            (f"mailed {ADA}", NOTE_PERSONAL_DATA_MESSAGE),
        ],
    )
    def test_a_refused_note_says_why_and_keeps_the_text(self, as_persona, trace, text, message):
        response = as_persona("alice").post(self.url(trace), {"text": text})
        body = response.content.decode()
        assert response.status_code == 400
        assert message.replace("'", "&#x27;") in body
        assert (
            f'<textarea id="note-text" name="text" rows="4" maxlength="2000" required>{text}'
            "</textarea>"
        ) in body
        assert _notes() == []

    @pytest.mark.parametrize("name", EVERYONE)
    def test_each_role_may_add_or_is_refused(self, as_persona, trace, name):
        response = as_persona(name).post(self.url(trace), {"text": "a note"})
        if name in MAY_NOTE:
            assert response.status_code == 303
            assert len(_notes()) == 1
        else:
            assert response.status_code == 403
            assert _notes() == []

    @pytest.mark.parametrize("name", EVERYONE)
    def test_the_form_is_offered_only_to_who_may_add(self, as_persona, trace, name):
        trace_note_add(trace=trace, actor=persona("alice"), text="visible to all")
        response = as_persona(name).get(f"/traces/{trace.blob.sha256}/")
        if name == "nora":  # no role: no trace page at all
            assert response.status_code == 403
            return
        page = response.content.decode()
        assert "visible to all" in page
        assert ('id="note-form"' in page) is (name in MAY_NOTE)

    @pytest.mark.parametrize("name", EVERYONE)
    def test_the_notes_page_is_read_by_everyone_who_browses(self, as_persona, trace, name):
        trace_note_add(trace=trace, actor=persona("alice"), text="read me")
        response = as_persona(name).get(self.url(trace))
        assert response.status_code == (403 if name == "nora" else 200)
        if name != "nora":
            assert "read me" in response.content.decode()

    def test_there_is_no_edit_or_delete(self, as_persona, trace):
        client = as_persona("adam")
        trace_note_add(trace=trace, actor=persona("alice"), text="kept")
        assert client.delete(self.url(trace)).status_code == 405
        assert client.put(self.url(trace), {"text": "x"}).status_code == 405


class TestTheApi:
    def url(self, trace):
        return f"/api/traces/{trace.trace_id}/notes/"

    def test_alice_posts_one_and_everyone_lists_it(self, as_persona, trace):
        response = as_persona("alice").post(
            self.url(trace), {"text": "from the API"}, content_type="application/json"
        )
        [note] = _notes()
        expected = {
            "seq": note.seq,
            "author": "alice",
            "created_at": response.json()["created_at"],
            "text": "from the API",
            "trace_id": trace.trace_id,
            "file_sha256": trace.blob.sha256,
            "hash": note.hash,
        }
        assert response.status_code == 201
        assert response.json() == expected
        listed = as_persona("vera").get(self.url(trace))
        assert (listed.status_code, listed.json()) == (200, [expected])

    @pytest.mark.parametrize("name", EVERYONE)
    def test_each_role_may_post_or_is_refused(self, as_persona, trace, name):
        response = as_persona(name).post(
            self.url(trace), {"text": "n"}, content_type="application/json"
        )
        if name in MAY_NOTE:
            assert response.status_code == 201
        else:
            assert response.status_code == 403
            assert response.json()["error_code"] == "PERMISSION_DENIED"
            assert _notes() == []

    @pytest.mark.parametrize("name", EVERYONE)
    def test_everyone_who_browses_lists_them(self, as_persona, trace, name):
        trace_note_add(trace=trace, actor=persona("alice"), text="listed")
        response = as_persona(name).get(self.url(trace))
        assert response.status_code == (403 if name == "nora" else 200)
        if name != "nora":
            assert [n["text"] for n in response.json()] == ["listed"]

    def test_an_empty_note_is_a_400_with_the_services_message(self, as_persona, trace):
        response = as_persona("alice").post(
            self.url(trace), {"text": ""}, content_type="application/json"
        )
        assert (response.status_code, response.json()) == (
            400,
            {"error_code": "NOTE_INVALID", "message": NOTE_EMPTY_MESSAGE},
        )

    def test_a_note_quoting_personal_data_is_a_400(self, as_persona, trace):
        response = as_persona("alice").post(
            self.url(trace), {"text": ADA}, content_type="application/json"
        )
        assert (response.status_code, response.json()["error_code"]) == (400, "NOTE_PERSONAL_DATA")

    @pytest.mark.parametrize("method", ["put", "patch", "delete"])
    def test_there_is_no_edit_or_delete(self, as_persona, trace, method):
        response = getattr(as_persona("adam"), method)(self.url(trace))
        assert response.status_code == 405
