"""The replay services and commands: atomic ingest, the key registry, Ed25519 traces, key
revocation, replay caps, offline verification and deterministic recording."""

from __future__ import annotations

import gzip
import io
import itertools
import json
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command

from core.errors import INTEGRITY_FAILURE, MALFORMED_TRACE, REPLAY_TIMEOUT, ReplayError
from core.formats import default_registry, native
from core.formats.native import engine
from core.formats.native.recorder import record
from core.replay.runtime import RecordOptions
from replay.models import ReplayRun, Snapshot, Trace, VerificationKey
from replay.services import replay_run_create, replay_run_execute, trace_ingest
from tests.replay.helpers import (
    files_under,
    golden,
    golden_key_ring,
    golden_signer,
    stored_counts,
)

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("var_dirs", "golden_key")]

OK_TRACE_ID = "986a1bbd37d30cfb04e427c642b6aea4"


def ingest_path(path: Path, **kwargs) -> Trace:
    with path.open("rb") as fh:
        return trace_ingest(source=fh, filename=path.name, **kwargs).trace


def run(command: str, *args: str) -> tuple[int, str, str]:
    """call_command: (exit code, stdout, stderr); CommandError and sys.exit become codes."""
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command(command, *args, stdout=out, stderr=err)
    except CommandError as exc:
        err.write(str(exc))
        return exc.returncode, out.getvalue(), err.getvalue()
    except SystemExit as exc:
        return int(exc.code), out.getvalue(), err.getvalue()
    return 0, out.getvalue(), err.getvalue()


def replay_stored(trace: Trace, mode: str = engine.AUDIT) -> ReplayRun:
    return replay_run_execute(run_id=replay_run_create(trace=trace, mode=mode).id)


# --- ingest ----------------------------------------------------------------------------------


def test_it_ingests_a_trace_and_prints_one_line_per_file():
    code, out, err = run(
        "ingest", str(golden("ok.trace.json")), str(golden("missing_output.trace.json"))
    )

    assert (code, err) == (0, "")
    assert out == (
        f"{OK_TRACE_ID} replay-trace replayable ok\n{OK_TRACE_ID} replay-trace not-replayable ok\n"
    )
    assert stored_counts() == {"traces": 2, "blobs": 2, "snapshots": 5}


def test_it_stores_the_good_files_and_refuses_the_bad_one_alone(tmp_path, var_dirs):
    bad = tmp_path / "bad.trace.json"
    bad.write_bytes(b'{"format": "replay-trace"')

    code, out, err = run("ingest", str(golden("ok.trace.json")), str(bad))

    assert code == 1
    assert out == f"{OK_TRACE_ID} replay-trace replayable ok\n"
    assert err.splitlines() == [
        f"{bad}: refused MALFORMED_TRACE: trace: truncated JSON at line 1 column 26: "
        "Expecting ',' delimiter",
        "1 of 2 files refused",
    ]
    assert stored_counts() == {"traces": 1, "blobs": 1, "snapshots": 5}
    assert len(files_under(var_dirs.blobs)) == 1
    assert files_under(var_dirs.tmp) == []


def test_it_stores_nothing_when_storing_fails_halfway(monkeypatch, var_dirs):
    def broken_storage(_spooled):
        raise OSError("disk full")

    monkeypatch.setattr("replay.services.blob_put", broken_storage)

    with pytest.raises(OSError, match="disk full"):
        ingest_path(golden("ok.trace.json"))

    # the snapshots written before the failure were rolled back with the rest
    assert stored_counts() == {"traces": 0, "blobs": 0, "snapshots": 0}
    assert files_under(var_dirs.tmp) == []


def test_it_returns_the_same_trace_for_a_second_identical_upload():
    oscar = User.objects.create_user("oscar")
    with golden("ok.trace.json").open("rb") as fh:
        first = trace_ingest(source=fh, filename="ok.trace.json", uploaded_by=oscar)
    with golden("ok.trace.json").open("rb") as fh:
        second = trace_ingest(source=fh, filename="renamed.trace.json")

    assert first.created is True
    assert second.created is False
    assert second.trace.id == first.trace.id
    assert second.trace.uploaded_by == oscar
    assert second.report == first.report
    assert stored_counts() == {"traces": 1, "blobs": 1, "snapshots": 5}
    code, out, _ = run("ingest", str(golden("ok.trace.json")))
    assert (code, out) == (0, f"{OK_TRACE_ID} replay-trace replayable ok (already stored)\n")


def test_it_stores_a_tampered_copy_with_status_tamper_detected():
    original = ingest_path(golden("ok.trace.json"))

    code, out, err = run("ingest", str(golden("tampered_snapshot.trace.json")))

    # stored as evidence: exit 0 as contracts.md §4 says (nothing was refused), and stderr
    # counts it; --strict makes the exit code say it (3)
    assert (code, out) == (0, f"{OK_TRACE_ID} replay-trace replayable tamper_detected\n")
    assert err.strip() == "1 of 1 files stored with a verdict other than ok"
    tampered = Trace.objects.exclude(id=original.id).get()
    assert tampered.trace_id == original.trace_id
    assert tampered.last_status == "tamper_detected"
    assert tampered.ingest_report["error_code"] == INTEGRITY_FAILURE
    # the store is content-addressed: the edited body hashes to nothing it could be filed under
    assert Snapshot.objects.count() == 5
    assert original.last_status == "ok"


def test_ingest_strict_exits_3_when_every_file_is_stored_but_one_is_not_ok():
    code, out, err = run(
        "ingest",
        "--strict",
        str(golden("ok.trace.json")),
        str(golden("tampered_snapshot.trace.json")),
    )

    assert code == 3
    assert out.splitlines() == [
        f"{OK_TRACE_ID} replay-trace replayable ok",
        f"{OK_TRACE_ID} replay-trace replayable tamper_detected",
    ]
    assert err == "1 of 2 files stored with a verdict other than ok"
    assert stored_counts()["traces"] == 2


def test_ingest_strict_exits_3_for_a_non_ok_file_already_stored():
    run("ingest", str(golden("tampered_snapshot.trace.json")))

    code, out, err = run("ingest", "--strict", str(golden("tampered_snapshot.trace.json")))

    assert (code, out) == (
        3,
        f"{OK_TRACE_ID} replay-trace replayable tamper_detected (already stored)\n",
    )
    assert err == "1 of 1 files stored with a verdict other than ok"


def test_ingest_exits_1_when_a_file_is_refused_whatever_the_others_verdicts(tmp_path):
    bad = tmp_path / "bad.trace.json"
    bad.write_bytes(b'{"format": "replay-trace"')

    code, out, err = run(
        "ingest",
        str(golden("ok.trace.json")),
        str(golden("tampered_snapshot.trace.json")),
        str(bad),
    )

    assert code == 1
    assert out.splitlines() == [
        f"{OK_TRACE_ID} replay-trace replayable ok",
        f"{OK_TRACE_ID} replay-trace replayable tamper_detected",
    ]
    assert err.splitlines() == [
        f"{bad}: refused MALFORMED_TRACE: trace: truncated JSON at line 1 column 26: "
        "Expecting ',' delimiter",
        "1 of 3 files refused; 1 of 3 files stored with a verdict other than ok",
    ]


def test_it_stores_both_spellings_of_one_trace_sharing_their_snapshots():
    as_json = ingest_path(golden("ok.trace.json"))
    as_jsonl = ingest_path(golden("ok.trace.jsonl"))

    assert as_json.trace_id == as_jsonl.trace_id
    assert (as_json.encoding, as_jsonl.encoding) == ("json", "jsonl")
    assert stored_counts() == {"traces": 2, "blobs": 2, "snapshots": 5}


# --- keys ------------------------------------------------------------------------------------


def ed25519_files(tmp_path: Path, name: str) -> tuple[Path, Path]:
    """A fresh Ed25519 key pair: (private key as 64 hex, public key as PEM)."""
    private = Ed25519PrivateKey.generate()
    raw = private.private_bytes(
        serialization.Encoding.Raw,
        serialization.PrivateFormat.Raw,
        serialization.NoEncryption(),
    )
    private_file = tmp_path / f"{name}.key"
    private_file.write_text(raw.hex() + "\n")
    public_file = tmp_path / f"{name}.pub.pem"
    public_file.write_bytes(
        private.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return private_file, public_file


def key_line(key: VerificationKey) -> str:
    state = f"revoked {key.revoked_at.isoformat()}" if key.revoked_at else "active"
    return f"{key.key_id}\t{key.alg}\tfrom {key.valid_from.isoformat()}\tuntil -\t{state}"


def test_it_adds_lists_and_revokes_keys(tmp_path):
    secret = tmp_path / "alice.secret"
    secret.write_text("alice's hmac secret, 32 bytes...\n")
    _private, public = ed25519_files(tmp_path, "bob")

    assert run("keys", "add-hmac", "alice-hmac", "--secret-file", str(secret)) == (
        0,
        "added hmac-sha256 key alice-hmac\n",
        "",
    )
    assert run("keys", "add-ed25519", "bob-ed25519", "--public-key-file", str(public)) == (
        0,
        "added ed25519 key bob-ed25519\n",
        "",
    )
    keys = {k.key_id: k for k in VerificationKey.objects.all()}
    code, out, _ = run("keys", "list")
    assert code == 0
    assert out.splitlines() == [
        key_line(keys["alice-hmac"]),
        key_line(keys["bob-ed25519"]),
        key_line(keys["golden"]),
    ]

    code, out, _ = run("keys", "revoke", "bob-ed25519")
    revoked = VerificationKey.objects.get(key_id="bob-ed25519")
    assert (code, out) == (0, f"revoked bob-ed25519 at {revoked.revoked_at.isoformat()}\n")
    assert run("keys", "list")[1].splitlines()[1] == (
        f"bob-ed25519\ted25519\tfrom {revoked.valid_from.isoformat()}\tuntil -\t"
        f"revoked {revoked.revoked_at.isoformat()}"
    )
    # the stored HMAC secret is encrypted at rest
    assert b"alice's hmac secret" not in bytes(keys["alice-hmac"].encrypted_secret)


def test_it_refuses_bad_key_commands_with_a_reason(tmp_path):
    short = tmp_path / "short.secret"
    short.write_text("too short")
    junk = tmp_path / "junk.pem"
    junk.write_text("not a key")

    assert run("keys", "add-hmac", "golden", "--secret-file", str(short))[::2] == (
        1,
        "an HMAC secret needs at least 16 bytes",
    )
    assert run("keys", "add-ed25519", "golden", "--public-key-file", str(junk))[::2] == (
        1,
        "not an Ed25519 public key (expected PEM, 64 hex characters or 32 raw bytes)",
    )
    long_enough = tmp_path / "long.secret"
    long_enough.write_text("x" * 32)
    assert run("keys", "add-hmac", "golden", "--secret-file", str(long_enough))[::2] == (
        1,
        "a key with id 'golden' already exists; key ids are never reused",
    )
    assert run("keys", "revoke", "mallory")[::2] == (1, "no key with id 'mallory'")
    missing = tmp_path / "nowhere.secret"
    assert run("keys", "add-hmac", "carol", "--secret-file", str(missing))[::2] == (
        2,
        f"{missing}: No such file or directory",
    )
    assert VerificationKey.objects.count() == 1


def test_it_verifies_an_ed25519_signed_trace(tmp_path):
    private, public = ed25519_files(tmp_path, "carol")
    run("keys", "add-ed25519", "carol-ed25519", "--public-key-file", str(public))
    out_file = tmp_path / "carol.trace.json"

    code, out, _ = run(
        "record",
        "--seed",
        "carol-1",
        "--key-id",
        "carol-ed25519",
        "--private-key-file",
        str(private),
        "--out",
        str(out_file),
    )
    assert code == 0
    document = json.loads(out_file.read_bytes())
    assert out == f"{document['trace_id']} -> {out_file}\n"
    assert {s["signature"]["alg"] for s in document["snapshots"]} == {"ed25519"}
    assert document["seal"]["alg"] == "ed25519"

    code, out, _ = run("verify", str(out_file), "--json")
    report = json.loads(out)
    assert code == 0
    assert report["status"] == "ok"
    assert report["checks"][5] == {
        "name": "seal",
        "ok": True,
        "detail": "Ed25519 signature by carol-ed25519 verifies; not covered: meta, job.started_at",
    }


def test_it_signs_with_a_raw_32_byte_ed25519_private_key_file(tmp_path):
    # raw key bytes may begin or end with what looks like whitespace
    raw = b"\n" + bytes(range(1, 30)) + b" \t"
    private = Ed25519PrivateKey.from_private_bytes(raw)
    public = tmp_path / "dan.pub"
    public.write_bytes(
        private.public_key().public_bytes(
            serialization.Encoding.Raw, serialization.PublicFormat.Raw
        )
    )
    key_file = tmp_path / "dan.key"
    key_file.write_bytes(raw)
    run("keys", "add-ed25519", "dan-ed25519", "--public-key-file", str(public))
    out_file = tmp_path / "dan.trace.json"

    code, _out, err = run(
        "record",
        "--seed",
        "dan",
        "--key-id",
        "dan-ed25519",
        "--private-key-file",
        str(key_file),
        "--out",
        str(out_file),
    )

    assert (code, err) == (0, "")
    assert run("verify", str(out_file), "--json")[0] == 0


def test_it_refuses_a_private_key_file_that_is_not_a_key(tmp_path):
    key_file = tmp_path / "short.key"
    key_file.write_text("abcd\n")
    out_file = tmp_path / "never.trace.json"

    code, out, err = run(
        "record",
        "--seed",
        "x",
        "--key-id",
        "k",
        "--private-key-file",
        str(key_file),
        "--out",
        str(out_file),
    )

    assert (code, out) == (2, "")
    assert err == "An Ed25519 private key is 32 bytes long"
    assert not out_file.exists()


def test_it_fails_new_verification_after_revocation_but_keeps_what_it_witnessed(tmp_path):
    secret = tmp_path / "erin.secret"
    secret.write_text("erin's signing secret for traces")
    run("keys", "add-hmac", "erin", "--secret-file", str(secret))
    trace_file = tmp_path / "erin.trace.json"
    run("record", "--seed", "erin-1", "--key-id", "erin", "--out", str(trace_file))
    witnessed = ingest_path(trace_file)
    assert witnessed.last_status == "ok"

    code, out, _ = run("keys", "revoke", "erin")
    assert code == 0
    revoked_at = VerificationKey.objects.get(key_id="erin").revoked_at.isoformat()

    code, out, _ = run("verify", str(trace_file), "--json")
    report = json.loads(out)
    assert code == 1
    assert report["error_code"] == INTEGRITY_FAILURE
    assert report["message"] == f"snapshot selfrep: key erin was revoked at {revoked_at}"
    assert report["status"] == "tamper_detected"

    # the console verified the trace while the key was good: it still replays
    assert replay_stored(witnessed).status == "ok"
    # a new upload of the same run (another spelling) is verified now, and fails
    jsonl = tmp_path / "erin.trace.jsonl"
    jsonl.write_bytes(b"".join(native.iter_jsonl(json.loads(trace_file.read_bytes()))))
    late = ingest_path(jsonl)
    assert late.last_status == "tamper_detected"
    assert (
        late.ingest_report["message"] == f"snapshot selfrep: key erin was revoked at {revoked_at}"
    )


# --- caps ------------------------------------------------------------------------------------


def test_it_stops_at_the_iteration_cap(settings):
    settings.REPLAY_MAX_ITERATIONS = 4
    trace = ingest_path(golden("ok.trace.json"))

    replayed = replay_stored(trace, engine.PRODUCTION)

    assert (replayed.status, replayed.error_code) == ("refused", REPLAY_TIMEOUT)
    assert replayed.report["message"] == "more than the iteration cap of 4 steps"
    assert replayed.report["broke_at"] == 4
    assert replayed.report["checks"][-1] == {
        "name": "steps",
        "ok": False,
        "detail": "more than the iteration cap of 4 steps",
    }


def test_it_stops_at_the_time_cap_with_an_injected_clock():
    document = record(
        RecordOptions(seed="slow", filler_events=5000), default_registry(), golden_signer()
    )
    data = native.dumps_document(document)
    ticks = itertools.count(0.0, 100.0)  # every look at the clock is 100 s later

    report = engine.replay(
        native.open_native(io.BytesIO(data), "slow.trace.json"),
        mode=engine.AUDIT,
        registry=default_registry(),
        keys=golden_key_ring(),
        limits=engine.ReplayLimits(max_seconds=60.0),
        clock=lambda: next(ticks),
    )

    assert (report.status, report.error_code) == ("refused", REPLAY_TIMEOUT)
    assert report.message == "the replay ran longer than its cap of 60.0 s"
    # the same trace with a clock that stands still replays ok
    still = engine.replay(
        native.open_native(io.BytesIO(data), "slow.trace.json"),
        mode=engine.AUDIT,
        registry=default_registry(),
        keys=golden_key_ring(),
        limits=engine.ReplayLimits(max_seconds=60.0),
        clock=lambda: 0.0,
    )
    assert still.status == "ok"


# --- verify and record -----------------------------------------------------------------------


def test_it_verifies_a_file_without_storing_anything(var_dirs):
    code, out, _ = run("verify", str(golden("ok.trace.json")), "--json")
    assert code == 0
    assert json.loads(out)["status"] == "ok"

    code, out, _ = run("verify", str(golden("diverged.trace.json")), "--json")
    assert code == 1
    assert json.loads(out)["error_code"] == "REPLAY_DIVERGENCE"

    code, out, _ = run("verify", str(golden("diverged.trace.json")))
    assert code == 1
    assert out.splitlines()[0] == (
        "diverged REPLAY_DIVERGENCE: step 3 (route-1, router.decide@1): the recomputed output "
        "differs from the recorded one"
    )

    assert stored_counts() == {"traces": 0, "blobs": 0, "snapshots": 0}
    assert files_under(var_dirs.blobs) == []
    assert files_under(var_dirs.tmp) == []
    assert ReplayRun.objects.count() == 0


def test_it_refuses_to_verify_a_file_that_does_not_exist(tmp_path):
    code, out, err = run("verify", str(tmp_path / "nowhere.trace.json"))

    assert (code, out) == (2, "")
    assert err == f"{tmp_path / 'nowhere.trace.json'}: no such file"


@pytest.mark.parametrize("suffix", [".trace.json", ".trace.jsonl"])
def test_it_records_byte_identical_traces_for_the_same_seed(tmp_path, suffix):
    first, second = tmp_path / f"a{suffix}", tmp_path / f"b{suffix}"

    for path in (first, second):
        code, _out, _err = run("record", "--seed", "same", "--key-id", "golden", "--out", str(path))
        assert code == 0

    assert first.read_bytes() == second.read_bytes()
    expected = record(RecordOptions(seed="same"), default_registry(), golden_signer())
    if suffix == ".trace.json":
        assert first.read_bytes() == native.dumps_document(expected)
    else:
        assert first.read_bytes() == b"".join(native.iter_jsonl(expected))


def test_it_records_the_same_content_when_gzipped(tmp_path):
    plain, packed = tmp_path / "t.trace.jsonl", tmp_path / "t.trace.jsonl.gz"
    run("record", "--seed", "same", "--key-id", "golden", "--out", str(plain))
    run("record", "--seed", "same", "--key-id", "golden", "--out", str(packed))

    assert gzip.decompress(packed.read_bytes()) == plain.read_bytes()


def test_it_records_to_stdout_deterministically(capsys):
    outputs = []
    for _ in range(2):
        run("record", "--seed", "stdout", "--key-id", "golden", "--iterations", "2")
        outputs.append(capsys.readouterr().out)

    assert outputs[0] == outputs[1]
    document = json.loads(outputs[0])
    assert document["trace_id"] == "cea91a8507f2e276f052999ce8469ab9"
    assert len(document["steps"]) == 6


def test_it_refuses_an_unknown_format_at_ingest():
    with golden("ok.trace.json").open("rb") as fh, pytest.raises(ReplayError) as refused:
        trace_ingest(source=fh, filename="ok.trace.json", declared_format="paxman")

    assert refused.value.code == MALFORMED_TRACE
    assert refused.value.message == (
        "unknown format 'paxman'; supported: ahd-replay, contextos-trace, mace-reflective-log, "
        "otel-genai, paxman-artifact, replay-trace, verist-snapshot"
    )


def test_a_stored_report_reads_back_exactly_as_the_engine_wrote_it():
    """PostgreSQL's jsonb would read the float 2.678192983196815e+16 back as the integer
    26781929831968150, another value in Python: reports are kept as their exact JSON text."""
    big = 2.678192983196815e16
    report = {"divergences": [{"before": big, "after": None, "absent": "after"}], "x": 0.1}
    trace = ingest_path(golden("ok.trace.json"))
    run = ReplayRun.objects.create(trace=trace, mode="audit", report=report)
    stored = ReplayRun.objects.get(pk=run.pk).report
    assert stored == report
    assert type(stored["divergences"][0]["before"]) is float
    assert ReplayRun.objects.filter(pk=run.pk).values_list("report", flat=True).get() == report
