"""Seed 003 §5's memory ids: ``wm_id = sha256(job_seed + ":" + wm_counter)`` and
``episodic_id = sha256(job_seed + ":" + episodic_counter)``. Wherever a native trace (an
event's payload) or a MACE log (``memory_writes``, ``event_refs``) records a memory write,
each id recomputes from the job seed and its counter, or the check fails naming the id as
the event-id check does.

The ids are made here with the seed's rule written out literally (``hashlib``), never with
the console's code; the native traces are recorded by the reference recorder and edited the
way a runtime writing memory would, then re-chained and re-sealed with the golden key; the
MACE logs by ``tests/replay/mace_reference.py``.
"""

from __future__ import annotations

import copy
import hashlib
import io
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

from core.errors import INTEGRITY_FAILURE
from core.formats import default_registry, mace, native
from core.formats.mace.reader import parse_log
from core.formats.memory_ids import episodic_id_of, memory_id_problem, wm_id_of
from core.formats.native import engine
from core.formats.native.recorder import rechain, record, reseal
from core.replay.runtime import RecordOptions
from core.replay.signatures import HMAC_SHA256, KeyMaterial, StaticKeyRing
from replay.keys import key_add_hmac
from tests.replay import mace_reference as ref
from tests.replay.helpers import golden_key_ring, golden_signer

SEED = "truth"
#: sha256("truth:1") and sha256("truth:2"), as seed 003 §5 writes the rule
TRUTH_1 = "490a92cd09a78fd020c16bfa2a0837d6135745d51bb6f22eed7af637cf2c5f89"
TRUTH_2 = "10251d6a359f977a6b9e72e22872f28aa9f4e8330914feb9e55e46357c553e3c"
REGISTRY = default_registry()


def sha256_hex(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# --- the rule --------------------------------------------------------------------------------


def test_the_ids_are_the_seeds_rule():
    assert sha256_hex(f"{SEED}:1") == TRUTH_1
    assert sha256_hex(f"{SEED}:2") == TRUTH_2
    assert wm_id_of(SEED, 1) == TRUTH_1
    assert episodic_id_of(SEED, 2) == TRUTH_2


def test_a_record_without_memory_ids_has_no_problem():
    assert memory_id_problem({"value": 1}, SEED) is None
    assert memory_id_problem({"wm_id": TRUTH_1, "wm_counter": 1}, SEED) is None


# --- native traces -------------------------------------------------------------------------


def with_memory_writes(wm: dict[str, Any], episodic: dict[str, Any]) -> dict[str, Any]:
    """A recorded trace whose observation events 5 and 8 record a working-memory write and
    an episodic write (observations do not feed the materialised state)."""
    document = copy.deepcopy(record(RecordOptions(seed=SEED), REGISTRY, golden_signer()))
    assert [document["events"][i]["type"] for i in (5, 8)] == ["observation", "observation"]
    document["events"][5]["payload"].update(wm)
    document["events"][8]["payload"].update(episodic)
    rechain(document)
    return reseal(document, golden_signer())


GOOD_WM = {"wm_id": TRUTH_1, "wm_counter": 1}
GOOD_EPISODIC = {"episodic_id": TRUTH_2, "episodic_counter": 2}


def replay_native(document: dict[str, Any], name: str = "t.trace.json", **kw: Any) -> dict:
    data = native.dumps_document(document)
    if name.endswith(".jsonl"):
        data = b"".join(native.iter_jsonl(document))
    trace = native.open_native(io.BytesIO(data), name)
    return engine.replay(
        trace, mode=engine.AUDIT, registry=REGISTRY, keys=golden_key_ring(), **kw
    ).to_json()


def test_a_native_trace_whose_memory_ids_derive_verifies_and_says_so():
    report = replay_native(with_memory_writes(GOOD_WM, GOOD_EPISODIC))

    assert (report["status"], report["error_code"]) == ("ok", None)
    events = next(c for c in report["checks"] if c["name"] == "events")
    assert events["detail"] == (
        "11 event ids and chain hashes verify; the wm_id and episodic_id of 2 memory writes "
        "derive from job_seed and their counters"
    )


@pytest.mark.parametrize(
    "case",
    [
        (
            {"wm_id": TRUTH_2, "wm_counter": 1},
            GOOD_EPISODIC,
            5,
            f"event 5: payload.wm_id {TRUTH_2} does not derive from job_seed and wm_counter",
            TRUTH_1,
            TRUTH_2,
        ),
        (
            GOOD_WM,
            {"episodic_id": TRUTH_2, "episodic_counter": 3},
            8,
            f"event 8: payload.episodic_id {TRUTH_2} does not derive from job_seed and "
            "episodic_counter",
            sha256_hex(f"{SEED}:3"),
            TRUTH_2,
        ),
        (
            {"wm_id": TRUTH_1},
            GOOD_EPISODIC,
            5,
            f"event 5: payload.wm_id {TRUTH_1} does not derive from job_seed and wm_counter "
            "(no integer wm_counter recorded)",
            None,
            TRUTH_1,
        ),
        (
            {"wm_id": TRUTH_1, "wm_counter": "1"},
            GOOD_EPISODIC,
            5,
            f"event 5: payload.wm_id {TRUTH_1} does not derive from job_seed and wm_counter "
            "(no integer wm_counter recorded)",
            None,
            TRUTH_1,
        ),
    ],
    ids=["wrong-wm-id", "wrong-episodic-counter", "no-counter", "string-counter"],
)
@pytest.mark.parametrize(
    ("name", "workers"),
    [("t.trace.json", 1), ("t.trace.jsonl", 1), ("t.trace.jsonl", 2)],
    ids=["json", "jsonl", "jsonl-2-workers"],
)
def test_a_memory_id_that_does_not_derive_is_an_integrity_failure_at_its_event(case, name, workers):
    wm, episodic, seq, message, expected, observed = case
    report = replay_native(with_memory_writes(wm, episodic), name, workers=workers)

    assert (report["status"], report["error_code"]) == ("tamper_detected", INTEGRITY_FAILURE)
    assert report["message"] == message
    assert (report["broke_at"], report["expected"], report["observed"]) == (
        seq,
        expected,
        observed,
    )
    assert report["checks"][-1] == {"name": "events", "ok": False, "detail": message}


@pytest.mark.django_db
@pytest.mark.usefixtures("var_dirs", "golden_key")
def test_verify_names_the_memory_id_of_a_native_trace(tmp_path: Path, capsys):
    path = tmp_path / "memory.trace.json"
    wrong = {"wm_id": TRUTH_2, "wm_counter": 1}
    path.write_bytes(native.dumps_document(with_memory_writes(wrong, GOOD_EPISODIC)))

    with pytest.raises(SystemExit) as exited:
        call_command("verify", str(path), "--json")

    assert exited.value.code == 1
    report = json.loads(capsys.readouterr().out)
    assert (report["error_code"], report["message"], report["broke_at"]) == (
        INTEGRITY_FAILURE,
        f"event 5: payload.wm_id {TRUTH_2} does not derive from job_seed and wm_counter",
        5,
    )


# --- MACE logs -------------------------------------------------------------------------------

MACE_SEED = "s1"


def mace_job(memory_writes: list[Any]) -> dict[str, Any]:
    """A reference MACE job whose log records these memory writes (outside the signed
    sub-payload, as every field but four is)."""
    made = ref.job(MACE_SEED)
    made["log"]["memory_writes"] = memory_writes
    return made


MACE_WM = {"wm_id": ref.sha256_hex(f"{MACE_SEED}:1"), "wm_counter": 1, "value": "hint"}
MACE_EPISODIC = {"episodic_id": ref.sha256_hex(f"{MACE_SEED}:1"), "episodic_counter": 1}


def verify_mace(made: dict[str, Any]) -> dict[str, Any]:
    log = parse_log(ref.dumps(made["log"]))
    snaps = {s["snapshot_id"]: ref.dumps(s) for s in made["snapshots"].values()}
    keys = StaticKeyRing([KeyMaterial(ref.KEY_ID, HMAC_SHA256, secret=ref.SECRET)])
    return mace.verify(log, snapshot_source=lambda _k, sid: snaps.get(sid), keys=keys).to_json()


def test_a_mace_log_whose_memory_ids_recompute_verifies_and_says_so():
    report = verify_mace(mace_job(["sem:user.name", MACE_WM, MACE_EPISODIC]))

    assert (report["status"], report["error_code"]) == ("ok", None)
    event_ids = next(c for c in report["checks"] if c["name"] == "event_ids")
    assert event_ids["detail"] == (
        "3 event ids recompute as sha256(job_seed:sequence_index:event_type); the wm_id and "
        "episodic_id of 2 memory writes recompute as sha256(job_seed:counter)"
    )


def test_mace_logs_memory_writes_as_strings_are_sem_keys_and_not_checked():
    assert verify_mace(mace_job(["sem:user.name", "sem:user.email"]))["status"] == "ok"


WRONG = ref.sha256_hex(f"{MACE_SEED}:2")


@pytest.mark.parametrize(
    ("writes", "message", "broke_at", "expected", "observed"),
    [
        (
            [MACE_WM, {**MACE_EPISODIC, "episodic_id": WRONG}],
            f"memory_writes[1].episodic_id: {WRONG} does not recompute as "
            "sha256(job_seed:episodic_counter) (episodic_counter 1)",
            "memory_writes[1].episodic_id",
            ref.sha256_hex(f"{MACE_SEED}:1"),
            WRONG,
        ),
        (
            [{"wm_id": WRONG}],
            f"memory_writes[0].wm_id: {WRONG} does not recompute as "
            "sha256(job_seed:wm_counter) (no integer wm_counter recorded)",
            "memory_writes[0].wm_id",
            None,
            WRONG,
        ),
    ],
    ids=["wrong-episodic-id", "no-counter"],
)
def test_a_mace_memory_id_that_does_not_recompute_is_an_integrity_failure(
    writes, message, broke_at, expected, observed
):
    report = verify_mace(mace_job(writes))

    assert (report["status"], report["error_code"]) == ("tamper_detected", INTEGRITY_FAILURE)
    assert report["message"] == message
    assert (report["broke_at"], report["expected"], report["observed"]) == (
        broke_at,
        expected,
        observed,
    )
    assert report["checks"][-1] == {"name": "event_ids", "ok": False, "detail": message}


def test_an_event_ref_recording_an_episodic_id_is_checked_too():
    made = mace_job([])
    made["log"]["event_refs"][2]["episodic_id"] = WRONG
    made["log"]["event_refs"][2]["episodic_counter"] = 1

    report = verify_mace(made)

    assert (report["error_code"], report["broke_at"]) == (
        INTEGRITY_FAILURE,
        "event_refs[2].episodic_id",
    )


@pytest.mark.django_db
def test_verify_names_the_memory_id_of_a_mace_log(tmp_path: Path, capsys):
    key_add_hmac(key_id=ref.KEY_ID, secret=ref.SECRET, valid_from=datetime(2000, 1, 1, tzinfo=UTC))
    path = ref.write(tmp_path, mace_job([{**MACE_WM, "wm_id": WRONG}]))

    with pytest.raises(SystemExit) as exited:
        call_command("verify", str(path), "--json")

    assert exited.value.code == 1
    report = json.loads(capsys.readouterr().out)
    assert (report["error_code"], report["broke_at"], report["message"]) == (
        INTEGRITY_FAILURE,
        "memory_writes[0].wm_id",
        f"memory_writes[0].wm_id: {WRONG} does not recompute as sha256(job_seed:wm_counter) "
        "(wm_counter 1)",
    )
