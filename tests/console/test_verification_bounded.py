"""A request never walks the ledger's chain: the verification API and the checkpoint export
read the newest signed verification mark and check at most GOVERNANCE_VERIFY_INLINE_MAX
events after it; beyond that they say how many are not yet verified and queue the background
run. A background run whose worker died (queued or running without progress past
GOVERNANCE_VERIFICATION_STALE_SECONDS) is marked abandoned, shown, and a new one may start.

The 100,000-event ledger is made cheaply: the real events that sign in a persona (the server
key's KEY_ADDED, the roles), then the rows after them up to 100,000 inserted in bulk (their
hashes are not a chain: a request that read them would find the chain broken), and a real
signed mark over seq 100,000. Real events appended after it chain from its hash.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from core.canonical import jcs
from core.ledger import chain, codes, signing
from governance import ledger, selectors, services, verification
from governance.models import GovernanceEvent, LedgerVerification, VerificationMark
from tests.console.personas import persona

pytestmark = pytest.mark.django_db

SIZE = 100_000
PAST = datetime(2026, 1, 1, tzinfo=UTC)


def _pii(n: int, start: int = 0) -> None:
    for i in range(start, start + n):
        services.pii_access_record(actor=None, trace_id=f"t{i}", fields=["email"], reason="DSR")


def _bulk_ledger(size: int) -> str:
    """A ledger of ``size`` events made cheaply (see the module docstring); its head hash."""
    persona("vera")  # the key's KEY_ADDED, the persona's roles: real events first
    key = ledger.server_key_current()
    first = GovernanceEvent.objects.order_by("-seq").values_list("seq", flat=True)[0] + 1
    columns = ", ".join(chain.FIELDS)
    marks = ", ".join(["%s"] * len(chain.FIELDS))
    sql = f"INSERT INTO governance_governanceevent ({columns}) VALUES ({marks})"  # noqa: S608
    code = codes.code_of(codes.PII_REVEALED)

    def row(seq: int) -> tuple:
        digest = f"sha256:{seq:064x}"
        return (
            seq,
            code,
            codes.PII_REVEALED,
            PAST,
            None,
            "system",
            json.dumps({"trace_id": f"bulk{seq}"}),
            None,
            key.key_id,
            None,
            None,
            f"sha256:{seq - 1:064x}",
            digest,
            "00",
        )

    with connection.cursor() as cur:
        for start in range(first, size + 1, 10_000):
            cur.executemany(sql, [row(s) for s in range(start, min(start + 10_000, size + 1))])
    return f"sha256:{size:064x}"


def _mark(through_seq: int, head_hash: str) -> VerificationMark:
    genesis = GovernanceEvent.objects.get(seq=1).hash
    result = chain.ChainResult(True, through_seq, head_hash, genesis)
    return verification._mark_append(result)


@pytest.fixture
def big_ledger(settings):
    """100,000 events, a signed mark through the last one."""
    settings.GOVERNANCE_VERIFY_INLINE_MAX = 1000
    head_hash = _bulk_ledger(SIZE)
    mark = _mark(SIZE, head_hash)
    assert GovernanceEvent.objects.count() == SIZE
    return mark


def _api(as_persona) -> dict:
    response = as_persona("vera").get("/api/governance/verification/")
    assert response.status_code == 200
    return response.json()


class TestTheApiReadsTheMark:
    def test_a_marked_ledger_of_100k_events_is_answered_without_reading_one(
        self, as_persona, big_ledger, django_assert_max_num_queries
    ):
        # 46: the table checks read governance_request once more (the halt-clear and legal
        # approval rows, issue 19), once for the filed kinds' rows with no detail row, once
        # for votes whose request row is gone, and once for event types no installed kind
        # declares (on the code index); the sign-in reads axes' attempts twice (django-axes):
        # whatever the ledger's size
        with django_assert_max_num_queries(46), CaptureQueriesContext(connection) as queries:
            body = _api(as_persona)

        assert body["ok"] is True
        assert (body["head_seq"], body["verified_through"], body["size"]) == (SIZE, SIZE, SIZE)
        assert (body["checked_now"], body["unverified"], body["verification_id"]) == (0, 0, None)
        assert body["head_hash"] == f"sha256:{SIZE:064x}"
        assert body["message"] == f"verified through seq {SIZE}: every event"
        # no query reads the events in seq order (the chain walk's shape)
        walks = [
            q["sql"]
            for q in queries.captured_queries
            if "governance_governanceevent" in q["sql"]
            and 'ORDER BY "governance_governanceevent"."seq" ASC' in q["sql"]
            and "code" not in q["sql"].split("WHERE", 1)[-1]
            and "LIMIT" not in q["sql"]
        ]
        assert walks == []
        assert LedgerVerification.objects.count() == 0

    def test_events_after_the_mark_within_the_bound_are_checked_in_the_request(
        self, as_persona, big_ledger
    ):
        _pii(3, start=10)

        body = _api(as_persona)

        head = GovernanceEvent.objects.order_by("-seq").first()
        assert body["ok"] is True
        assert (body["checked_now"], body["unverified"]) == (3, 0)
        assert (body["verified_through"], body["mark_through_seq"]) == (head.seq, SIZE)
        assert body["head_hash"] == head.hash

    def test_a_break_after_the_mark_is_named_at_its_seq(self, as_persona, big_ledger):
        _pii(3, start=10)
        from replay.dbguards import drop_append_only_sql

        with connection.cursor() as cur:
            for statement in drop_append_only_sql(connection.vendor, "governance_governanceevent"):
                cur.execute(statement)
            cur.execute(
                "UPDATE governance_governanceevent SET actor_label = 'mallory' WHERE seq = %s",
                [SIZE + 2],
            )

        body = _api(as_persona)

        assert (body["ok"], body["broke_at"], body["code"]) == (False, SIZE + 2, "CHAIN_HASH")
        assert body["verified_through"] is None

    def test_beyond_the_bound_it_says_how_many_and_queues_the_background_run(
        self, as_persona, big_ledger, settings
    ):
        settings.GOVERNANCE_VERIFY_INLINE_MAX = 2
        _pii(3, start=10)

        body = _api(as_persona)

        run = LedgerVerification.objects.get()
        assert (body["ok"], body["broke_at"], body["code"]) == (False, None, None)
        assert (body["checked_now"], body["unverified"]) == (0, 3)
        assert (body["verified_through"], body["size"]) == (SIZE, SIZE)
        assert (body["verification_id"], body["verification_state"]) == (run.id, "queued")
        assert body["message"] == (
            f"verified through seq {SIZE}; 3 event(s) not yet verified "
            f"(verification {run.id} is queued)"
        )
        assert (run.scope, run.from_seq, run.total) == ("new", SIZE, 3)
        # asking again joins it
        assert _api(as_persona)["verification_id"] == run.id
        assert LedgerVerification.objects.count() == 1

    def test_an_unmarked_100k_ledger_is_not_walked(self, as_persona, settings):
        settings.GOVERNANCE_VERIFY_INLINE_MAX = 1000
        _bulk_ledger(SIZE)

        body = _api(as_persona)

        run = LedgerVerification.objects.get()
        assert (body["ok"], body["broke_at"], body["checked_now"]) == (False, None, 0)
        assert (body["unverified"], body["verified_through"], body["size"]) == (SIZE, 0, 0)
        assert (run.scope, run.from_seq, run.total, run.state) == ("new", 0, SIZE, "queued")


class TestTheCheckpointExportReadsTheMark:
    def test_it_signs_the_marked_head_without_walking_the_chain(
        self, as_persona, big_ledger, django_assert_max_num_queries
    ):
        client = as_persona("vera")
        with django_assert_max_num_queries(40):
            response = client.get("/governance/checkpoint.json")

        assert response.status_code == 200
        assert response["Content-Disposition"] == (
            f'attachment; filename="ledger-checkpoint-{SIZE}.json"'
        )
        document = response.json()
        body = document["checkpoint"]
        assert (body["size"], body["head_hash"]) == (SIZE, f"sha256:{SIZE:064x}")
        assert body["genesis_hash"] == GovernanceEvent.objects.get(seq=1).hash
        key = ledger.server_key_current()
        assert signing.verify(bytes.fromhex(key.public_key), jcs(body), document["signature"])

    def test_beyond_the_bound_it_signs_the_verified_prefix_and_queues_the_rest(
        self, as_persona, big_ledger, settings
    ):
        settings.GOVERNANCE_VERIFY_INLINE_MAX = 2
        _pii(3, start=10)

        document = as_persona("vera").get("/governance/checkpoint.json").json()

        assert document["checkpoint"]["size"] == SIZE
        assert LedgerVerification.objects.get().state == "queued"

    def test_within_the_bound_it_signs_the_head(self, as_persona, big_ledger):
        _pii(3, start=10)
        head = GovernanceEvent.objects.order_by("-seq").first()

        document = as_persona("vera").get("/governance/checkpoint.json").json()

        assert (document["checkpoint"]["size"], document["checkpoint"]["head_hash"]) == (
            head.seq,
            head.hash,
        )

    def test_an_unverified_ledger_beyond_the_bound_gets_no_checkpoint(self, as_persona, settings):
        settings.GOVERNANCE_VERIFY_INLINE_MAX = 3
        user = persona("vera")
        _pii(4)

        with pytest.raises(codes.GovernanceError) as refused:
            selectors.checkpoint_export_verified(actor=user)

        run = LedgerVerification.objects.get()
        assert refused.value.code == "LEDGER_UNVERIFIED"
        assert refused.value.message == (
            "none of the ledger's 6 events is verified yet and that is more than a request "
            f"checks itself (3): verification {run.id} is queued; export again when it has "
            "finished"
        )
        page = as_persona("vera").get("/governance/checkpoint.json")
        assert page.status_code == 409
        assert "LEDGER_UNVERIFIED" in page.content.decode()


def _check(client, document: dict):
    from django.core.files.uploadedfile import SimpleUploadedFile

    upload = SimpleUploadedFile("c.json", json.dumps(document).encode())
    return client.post("/governance/checkpoint/check/", {"checkpoint": upload})


class TestTheCheckpointCheckReadsTheMark:
    def test_a_grown_ledger_extends_the_checkpoint_without_walking_the_chain(
        self, as_persona, big_ledger, settings, django_assert_max_num_queries
    ):
        client = as_persona("vera")
        document = client.get("/governance/checkpoint.json").json()
        settings.GOVERNANCE_VERIFY_INLINE_MAX = 2
        _pii(3, start=10)

        with django_assert_max_num_queries(45):
            response = _check(client, document)

        run = LedgerVerification.objects.get()
        assert response.status_code == 200
        assert (
            f"the ledger ({SIZE + 3} events) extends the checkpoint ({SIZE} events); the ledger "
            f"is verified through seq {SIZE}, 3 newer event(s) not yet (verification {run.id} "
            "is queued)"
        ) in response.content.decode()

    def test_within_the_bound_the_new_events_are_checked_and_a_break_named(
        self, as_persona, big_ledger
    ):
        from replay.dbguards import drop_append_only_sql

        client = as_persona("vera")
        document = client.get("/governance/checkpoint.json").json()
        _pii(3, start=10)
        assert _check(client, document).status_code == 200
        with connection.cursor() as cur:
            for statement in drop_append_only_sql(connection.vendor, "governance_governanceevent"):
                cur.execute(statement)
            cur.execute(
                "UPDATE governance_governanceevent SET actor_label = 'mallory' WHERE seq = %s",
                [SIZE + 2],
            )

        response = _check(client, document)

        assert response.status_code == 409
        body = response.content.decode()
        assert "CHECKPOINT_LEDGER_BROKEN" in body
        assert f"the ledger is broken at seq {SIZE + 2}: " in body


class TestStaleRuns:
    def _age(self, run: LedgerVerification, **fields) -> None:
        LedgerVerification.objects.filter(pk=run.pk).update(**fields)

    def test_a_queued_run_that_never_started_is_abandoned_and_a_new_one_starts(self, settings):
        settings.GOVERNANCE_VERIFICATION_STALE_SECONDS = 600
        _pii(1)
        stuck, _ = verification.ledger_verification_start(actor=None, scope="full")
        created_at = timezone.now() - timedelta(seconds=601)
        self._age(stuck, created_at=created_at)

        fresh, created = verification.ledger_verification_start(actor=None, scope="new")

        stuck.refresh_from_db()
        assert created is True
        assert fresh.pk != stuck.pk
        assert (stuck.state, stuck.finished_at is not None) == ("abandoned", True)
        assert stuck.result == {
            "abandoned": (
                f"queued without progress since {signing.format_time(created_at)} (more than "
                "600 s): its worker is gone; it is abandoned and a new verification may start"
            ),
            "state_was": "queued",
            "checked": 0,
        }
        assert verification.ledger_verification_active().pk == fresh.pk

    def test_a_running_run_without_progress_is_abandoned(self, settings):
        settings.GOVERNANCE_VERIFICATION_STALE_SECONDS = 60
        _pii(1)
        stuck, _ = verification.ledger_verification_start(actor=None, scope="full")
        last = timezone.now() - timedelta(seconds=61)
        self._age(stuck, state="running", started_at=last, progress_at=last, checked=2)

        _fresh, created = verification.ledger_verification_start(actor=None, scope="full")

        stuck.refresh_from_db()
        assert created is True
        assert stuck.state == "abandoned"
        assert stuck.result["state_was"] == "running"
        assert stuck.result["abandoned"].startswith(
            f"running without progress since {signing.format_time(last)} (more than 60 s)"
        )

    def test_a_run_making_progress_is_joined_not_abandoned(self, settings):
        settings.GOVERNANCE_VERIFICATION_STALE_SECONDS = 60
        _pii(1)
        run, _ = verification.ledger_verification_start(actor=None, scope="full")
        long_ago = timezone.now() - timedelta(hours=2)
        self._age(
            run,
            state="running",
            created_at=long_ago,
            started_at=long_ago,
            progress_at=timezone.now() - timedelta(seconds=30),
        )

        joined, created = verification.ledger_verification_start(actor=None, scope="new")

        assert (created, joined.pk, joined.state) == (False, run.pk, "running")

    def test_progress_moves_the_sign_of_life(self, django_capture_on_commit_callbacks):
        _pii(3)
        with django_capture_on_commit_callbacks(execute=True):
            run, _ = verification.ledger_verification_start(actor=None, scope="full")
        run.refresh_from_db()
        assert run.state == "done"
        assert run.progress_at is not None
        assert run.progress_at >= run.started_at

    def test_a_redelivered_task_of_an_abandoned_run_leaves_it_abandoned(self, settings):
        settings.GOVERNANCE_VERIFICATION_STALE_SECONDS = 60
        _pii(1)
        stuck, _ = verification.ledger_verification_start(actor=None, scope="full")
        self._age(stuck, created_at=timezone.now() - timedelta(seconds=61))
        assert verification.ledger_verification_abandon_stale().state == "abandoned"

        again = verification.ledger_verification_execute(verification_id=stuck.pk)

        assert again.state == "abandoned"
        assert VerificationMark.objects.count() == 0

    def test_the_ledger_page_shows_the_abandoned_run(self, as_persona, settings):
        settings.GOVERNANCE_VERIFICATION_STALE_SECONDS = 60
        _pii(1)
        stuck, _ = verification.ledger_verification_start(actor=None, scope="new")
        created_at = timezone.now() - timedelta(seconds=61)
        self._age(stuck, created_at=created_at)

        body = as_persona("vera").get("/governance/").content.decode()

        assert (
            '<p class="banner bad" id="verification-run" role="alert">The last verification '
            f"was abandoned: queued without progress since {signing.format_time(created_at)} "
            "(more than 60 s): its worker is gone; it is abandoned and a new verification may "
            "start.</p>"
        ) in body
        assert 'id="verify-new"' in body  # a new one may be asked for


class TestAtScaleOnAWorker:
    def test_a_large_ledger_verifies_in_a_daemonic_process_without_children(self):
        """A Celery prefork child is daemonic: the parallel verification of a ledger of
        PARALLEL_MIN_EVENTS or more must not start processes there (it failed with
        "daemonic processes are not allowed to have children" on bench_scale's ledger)."""
        import multiprocessing

        _pii(3)
        process = multiprocessing.current_process()
        process.daemon = True
        try:
            result = ledger.verify(workers=2)
        finally:
            process.daemon = False

        assert result.ok
        assert result.size == GovernanceEvent.objects.order_by("-seq").first().seq

    def test_a_failed_run_is_not_queued_again_by_every_request(self, as_persona, settings):
        settings.GOVERNANCE_VERIFY_INLINE_MAX = 1
        settings.GOVERNANCE_VERIFICATION_STALE_SECONDS = 600
        _pii(3)
        first = _api(as_persona)
        failed = LedgerVerification.objects.get(pk=first["verification_id"])
        LedgerVerification.objects.filter(pk=failed.pk).update(
            state="failed", finished_at=timezone.now(), result={"error": "OSError: disk"}
        )

        again = _api(as_persona)

        assert (again["verification_id"], again["verification_state"]) == (failed.pk, "failed")
        assert LedgerVerification.objects.count() == 1
        LedgerVerification.objects.filter(pk=failed.pk).update(
            finished_at=timezone.now() - timedelta(seconds=601)
        )
        later = _api(as_persona)
        assert later["verification_id"] != failed.pk
        assert later["verification_state"] == "queued"
