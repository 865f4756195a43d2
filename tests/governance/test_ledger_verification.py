"""Ledger verification from a signed "verified through seq N" mark, in the background: only
the events after the mark are checked, a mark that does not verify is not believed, one run
at a time, a full re-verification with progress."""

from __future__ import annotations

import pytest
from django.db import DatabaseError, IntegrityError, connection, transaction

from core.canonical import jcs
from core.ledger import chain, codes, signing
from governance import ledger, verification
from governance.models import GovernanceEvent, LedgerVerification, VerificationMark
from replay.dbguards import drop_append_only_sql
from tests.governance.factories import person

pytestmark = pytest.mark.django_db


@pytest.fixture
def run_now(django_capture_on_commit_callbacks):
    """Start a verification and run its task (eager) as the commit would."""

    def start(scope: str, actor=None) -> LedgerVerification:
        with django_capture_on_commit_callbacks(execute=True):
            run, created = verification.ledger_verification_start(actor=actor, scope=scope)
        assert created
        run.refresh_from_db()
        return run

    return start


def _rewrite(table: str, sql: str, params: list) -> None:
    with connection.cursor() as cur:
        for statement in drop_append_only_sql(connection.vendor, table):
            cur.execute(statement)
        cur.execute(sql, params)


def _head() -> int:
    return GovernanceEvent.objects.order_by("-seq").values_list("seq", flat=True).first()


class TestMarks:
    def test_a_verification_that_finds_the_chain_whole_appends_a_signed_mark(self, run_now):
        person("bob"), person("grace")
        head = GovernanceEvent.objects.get(seq=_head())

        run = run_now("full")

        assert run.state == "done"
        assert (run.from_seq, run.checked, run.total) == (0, head.seq, head.seq)
        assert run.result["ok"] is True
        assert run.result["mark_through_seq"] == head.seq
        mark = VerificationMark.objects.get()
        assert (mark.through_seq, mark.head_hash) == (head.seq, head.hash)
        assert mark.genesis_hash == GovernanceEvent.objects.get(seq=1).hash
        body = signing.verification_mark_body(
            through_seq=head.seq,
            head_hash=head.hash,
            genesis_hash=mark.genesis_hash,
            verified_at=signing.format_time(mark.verified_at),
            key_id=mark.key_id,
        )
        assert body["type"] == "replay-audit-console/ledger-verified-through/v1"
        key = ledger.server_key_current()
        assert signing.verify(bytes.fromhex(key.public_key), jcs(body), mark.signature)

    def test_it_checks_only_the_events_after_the_mark(self, run_now):
        person("bob")
        first = run_now("new")
        marked = first.result["mark_through_seq"]
        person("grace"), person("alice")
        # an event before the mark rewritten after it was verified: a "new" verification
        # does not read it again (that is the point); a full one does
        earlier = GovernanceEvent.objects.get(seq=marked - 1)
        _rewrite(
            "governance_governanceevent",
            "UPDATE governance_governanceevent SET actor_label = %s WHERE seq = %s",
            ["mallory", earlier.seq],
        )

        new = run_now("new")

        assert new.from_seq == marked
        assert new.checked == _head() - marked
        assert new.result["ok"] is True
        assert VerificationMark.objects.order_by("-id").first().through_seq == _head()
        full = run_now("full")
        assert full.result["broke_at"] == earlier.seq
        assert full.result["code"] == codes.CHAIN_HASH
        # once found, the break is not hidden by a mark made before it was found
        state = verification.ledger_verification_state()
        assert state.mark is None
        assert {p.code for p in state.problems} == {codes.MARK_SUPERSEDED}
        assert run_now("new").result["broke_at"] == earlier.seq

    def test_it_finds_a_break_among_the_new_events_at_its_seq(self, run_now):
        person("bob")
        marked = run_now("new").result["mark_through_seq"]
        person("grace")
        bad = marked + 1
        _rewrite(
            "governance_governanceevent",
            "UPDATE governance_governanceevent SET payload = %s WHERE seq = %s",
            ['{"forged": true}', bad],
        )

        run = run_now("new")

        assert run.result["broke_at"] == bad
        assert run.result["code"] == codes.CHAIN_HASH
        assert run.result["reason"] == f"event {bad}'s hash does not recompute"
        assert VerificationMark.objects.count() == 1

    def test_it_keeps_checking_key_announcements_after_the_mark(self, run_now):
        person("bob")
        marked = run_now("new").result["mark_through_seq"]
        person("grace")
        # the new event claims a server key no key event before the mark announced
        _rewrite(
            "governance_governanceevent",
            "UPDATE governance_governanceevent SET server_key_id = %s WHERE seq = %s",
            ["server-unannounced", marked + 1],
        )

        run = run_now("new")

        assert run.result["broke_at"] == marked + 1
        assert run.result["code"] in (codes.CHAIN_KEY_UNANNOUNCED, codes.CHAIN_HASH)

    def test_it_does_not_believe_a_mark_whose_row_was_edited(self, run_now):
        person("bob")
        run_now("new")
        mark = VerificationMark.objects.get()
        person("grace")
        _rewrite(
            "governance_verificationmark",
            "UPDATE governance_verificationmark SET through_seq = %s WHERE id = %s",
            [_head(), mark.pk],
        )

        state = verification.ledger_verification_state()

        assert state.mark is None
        assert state.unverified == _head()
        assert [p.code for p in state.problems] == [codes.MARK_SIGNATURE]
        assert state.problems[0].message == (
            f"verification mark {mark.pk} (through seq {_head()}) does not verify with server "
            f"key {mark.key_id}; it is ignored"
        )

    def test_it_does_not_believe_a_mark_over_an_event_that_was_rewritten(self, run_now):
        person("bob")
        run_now("new")
        mark = VerificationMark.objects.get()
        _rewrite(
            "governance_governanceevent",
            "UPDATE governance_governanceevent SET hash = %s WHERE seq = %s",
            ["sha256:" + "0" * 64, mark.through_seq],
        )

        state = verification.ledger_verification_state()

        assert state.mark is None
        assert [(p.code, p.message) for p in state.problems] == [
            (
                codes.MARK_FORKED,
                f"event {mark.through_seq} has hash sha256:{'0' * 64}, verification mark "
                f"{mark.pk} says {mark.head_hash}",
            )
        ]

    def test_it_refuses_to_rewrite_or_delete_a_mark(self, run_now):
        person("bob")
        run_now("new")
        with pytest.raises(DatabaseError), transaction.atomic(), connection.cursor() as cur:
            cur.execute("DELETE FROM governance_verificationmark")
        assert VerificationMark.objects.count() == 1


class TestOneAtATime:
    def test_a_second_request_joins_the_active_run(self):
        person("bob")
        first, created = verification.ledger_verification_start(actor=None, scope="full")
        second, again = verification.ledger_verification_start(actor=None, scope="new")

        assert (created, again) == (True, False)
        assert second.pk == first.pk
        assert LedgerVerification.objects.count() == 1

    def test_the_database_refuses_a_second_unfinished_run(self):
        LedgerVerification.objects.create(scope="full")
        with pytest.raises(IntegrityError), transaction.atomic():
            LedgerVerification.objects.create(scope="new")

    def test_a_redelivered_task_leaves_a_finished_run_as_it_is(self, run_now):
        person("bob")
        run = run_now("full")
        again = verification.ledger_verification_execute(verification_id=run.pk)
        assert (again.state, again.finished_at) == ("done", run.finished_at)
        assert VerificationMark.objects.count() == 1

    def test_a_run_left_running_by_a_dead_worker_is_run_again_when_redelivered(self):
        person("bob")
        run, _ = verification.ledger_verification_start(actor=None, scope="full")
        LedgerVerification.objects.filter(pk=run.pk).update(state="running", checked=2)

        again = verification.ledger_verification_execute(verification_id=run.pk)

        assert (again.state, again.checked) == ("done", _head())
        assert verification.ledger_verification_active() is None


def test_a_full_verification_reports_its_progress_as_it_goes():
    person("bob"), person("grace")
    seen: list[int] = []

    result = ledger.verify(workers=1, chunk_size=2, progress=seen.append)

    assert result.ok
    assert seen == list(range(2, _head() + 1, 2))


def test_a_resumed_linker_starts_at_the_marked_hash():
    keys = ledger.server_keys()
    linker = chain.resume_linker(
        [], server_keys=keys, through_seq=5, head_hash="sha256:ab", genesis_hash="sha256:g"
    )
    assert (linker.next_seq, linker.prev_hash, linker.genesis_hash) == (6, "sha256:ab", "sha256:g")
