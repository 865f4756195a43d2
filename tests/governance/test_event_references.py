"""The events naming stored traces (``governance.evidence.events_naming``), which retention
(a named trace never expires) and evidence bundles read: the same answers as a scan of the
whole ledger in Python, on SQLite and PostgreSQL, for every reference key and every name a
trace goes by; and each key's lookup goes through its expression index
(``governance/0012_event_reference_indexes``)."""

from __future__ import annotations

import pytest
from django.db import connection, transaction

from governance import evidence, ledger
from governance.models import GovernanceEvent
from governance.services import replay_request, replay_run_govern
from tests.governance.conftest import ingest, recorded_bytes


def _append(payload: dict, event_type: str = "TRACE_NOTE") -> int:
    with transaction.atomic():
        return ledger.append(event_type=event_type, payload=payload, actor_label="test").seq


@pytest.fixture
def named(stored_traces):
    """Two traces and a third never named; events naming them under each key, by each name,
    and events that look close but name nothing."""
    alpha = ingest("alpha", data=recorded_bytes("alpha"))
    beta = ingest("beta", data=recorded_bytes("beta"))
    gamma = ingest("gamma", data=recorded_bytes("gamma"))
    run = replay_request(trace=alpha, mode="audit", enqueue=False)
    replay_run_govern(run_id=run.id)  # REPLAY_REQUEST, REPLAY_RESULT: trace_id and run_id
    own_snapshot = next(
        r["snapshot_id"] for r in alpha.required_snapshot_ids if r["kind"] == "selfrep"
    )
    shared_snapshot = next(
        r["snapshot_id"] for r in alpha.required_snapshot_ids if r["kind"] == "privacy"
    )
    seqs = {
        "trace_id": _append({"trace_id": beta.trace_id}),
        "trace_sha256": _append({"trace_sha256": alpha.blob.sha256}),
        "file_sha256": _append({"file_sha256": f"sha256:{beta.blob.sha256}"}),
        "target_id": _append({"target_id": alpha.trace_id, "target_kind": "trace"}),
        "snapshot_id": _append({"snapshot_id": own_snapshot}),
        "shared": _append({"snapshot_id": shared_snapshot}),  # every trace needs it
        "run_id": _append({"run_id": str(run.id)}),
        "two": _append({"trace_id": alpha.trace_id, "file_sha256": beta.blob.sha256}),
        # not a reference key, a number, an object, a name's prefix: none names a trace
        "other_key": _append({"subject": gamma.trace_id}),
        "number": _append({"trace_id": 12345}),
        "object": _append({"trace_id": {"trace_id": gamma.trace_id}}),
        "prefix": _append({"trace_sha256": gamma.blob.sha256[:12]}),
    }
    return alpha, beta, gamma, seqs


def _ledger_scan(traces, *, after_seq: int = 0) -> list[tuple[int, str, list[int]]]:
    """What the events naming ``traces`` are, read the slow way: every event's payload."""
    names = evidence.trace_names(traces)
    found = []
    for event in GovernanceEvent.objects.filter(seq__gt=after_seq).order_by("seq"):
        pks: set[int] = set()
        for key in evidence.REFERENCE_KEYS:
            value = event.payload.get(key)
            if isinstance(value, str) and value in names:
                pks |= names[value]
        if pks:
            found.append((event.seq, event.type, sorted(pks)))
    return found


def _naming(traces, **kwargs) -> list[tuple[int, str, list[int]]]:
    seq, kind = (evidence.chain.FIELDS.index(f) for f in ("seq", "type"))
    return [
        (row[seq], row[kind], sorted(pks)) for row, pks in evidence.events_naming(traces, **kwargs)
    ]


def test_it_finds_each_key_and_each_name_of_a_trace(named):
    alpha, beta, gamma, seqs = named
    both = sorted([alpha.pk, beta.pk])

    found = _naming([alpha, beta, gamma])

    by_seq = {seq: pks for seq, _type, pks in found}
    assert {key: by_seq.get(seq) for key, seq in seqs.items()} == {
        "trace_id": [beta.pk],
        "trace_sha256": [alpha.pk],
        "file_sha256": [beta.pk],
        "target_id": [alpha.pk],
        "snapshot_id": [alpha.pk],
        "shared": sorted([alpha.pk, beta.pk, gamma.pk]),
        "run_id": [alpha.pk],
        "two": both,
        "other_key": None,
        "number": None,
        "object": None,
        "prefix": None,
    }
    # the replay's two events name alpha by trace id and run id
    assert [(t, pks) for _s, t, pks in found[:2]] == [
        ("REPLAY_REQUEST", [alpha.pk]),
        ("REPLAY_RESULT", [alpha.pk]),
    ]
    assert len(found) == 10
    assert [s for s, _t, _p in found] == sorted(s for s, _t, _p in found)


@pytest.mark.parametrize("which", ["all", "alpha", "beta", "gamma"])
@pytest.mark.parametrize("after", ["start", "middle", "head"])
def test_it_answers_as_a_scan_of_the_whole_ledger(named, which, after):
    alpha, beta, gamma, seqs = named
    traces = {"all": [alpha, beta, gamma], "alpha": [alpha], "beta": [beta], "gamma": [gamma]}
    after_seq = {"start": 0, "middle": seqs["snapshot_id"], "head": ledger.head().seq}[after]

    assert _naming(traces[which], after_seq=after_seq) == _ledger_scan(
        traces[which], after_seq=after_seq
    )


def test_names_in_several_chunks_find_each_event_once(named, monkeypatch):
    alpha, beta, gamma, _seqs = named
    monkeypatch.setattr(evidence, "CHUNK", 2)

    found = _naming([alpha, beta, gamma])

    assert found == _ledger_scan([alpha, beta, gamma])
    assert len({s for s, _t, _p in found}) == len(found) == 10


def test_no_traces_no_events(named):
    assert _naming([]) == []


# --- the indexes ------------------------------------------------------------------------------

INDEXES = {f"gov_event_ref_{key}": key for key in evidence.REFERENCE_KEYS}


def _indexes() -> dict[str, str]:
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "SELECT indexname, indexdef FROM pg_indexes "
                "WHERE tablename = 'governance_governanceevent' "
                "AND indexname LIKE 'gov_event_ref_%%'"
            )
        else:
            cursor.execute(
                "SELECT name, sql FROM sqlite_master WHERE type = 'index' "
                "AND tbl_name = 'governance_governanceevent' AND name LIKE 'gov_event_ref_%'"
            )
        return dict(cursor.fetchall())


def _expected_definition(name: str, key: str) -> str:
    """Each index is on the whole table, not partial: PostgreSQL's planner reads the
    statistics of an expression index (most events have no such key) only when it is not
    partial, and without them it guesses a scan is cheaper."""
    if connection.vendor == "postgresql":
        return (
            f"CREATE INDEX {name} ON public.governance_governanceevent "
            f"USING btree (((payload ->> '{key}'::text)))"
        )
    return (
        f'CREATE INDEX "{name}" ON "governance_governanceevent" '
        f"""((JSON_EXTRACT("payload", '$."{key}"')))"""
    )


def test_each_reference_key_has_its_expression_index(db):
    assert evidence.REFERENCE_KEYS == (
        "trace_id",
        "trace_sha256",
        "file_sha256",
        "target_id",
        "snapshot_id",
        "run_id",
    )
    assert _indexes() == {name: _expected_definition(name, key) for name, key in INDEXES.items()}


def test_the_lookup_reads_every_key_through_its_index(named):
    """The query's condition on each key is its index's expression, so the planner can
    answer it from the six indexes (one SELECT per key): on PostgreSQL with the table
    analyzed and sequential scans priced out (inside this test's transaction), whatever it
    would choose on a table this small; on SQLite without statistics (which, on a table of
    twenty rows, rightly prefer a scan), where it names the index of each SELECT."""
    alpha, *_ = named
    query = evidence.matching_query([alpha.trace_id, alpha.blob.sha256], after_seq=0)
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE governance_governanceevent")
            cursor.execute("SET LOCAL enable_seqscan = off")
    plan = query.explain()
    used = {name for name in INDEXES if name in plan}
    assert used == set(INDEXES), plan
    if connection.vendor == "postgresql":
        assert "Seq Scan" not in plan, plan
    else:
        assert "SCAN governance_governanceevent" not in plan, plan
