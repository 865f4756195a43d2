"""One rule for every format that verifies a signature under a key id of the verification-key
registry: a key the registry does not have is `UNKNOWN_KEY`, status `refused` (nothing was
verified), the file is not stored, and the message names the key id and how to register it.
A registered key whose signature does not verify stays `INTEGRITY_FAILURE`.

The formats: native traces (each snapshot's signature and the seal name a `key_id`), ContextOS
traces (their pinned pack's and KG snapshot's signatures) and MACE logs (their HMACs, tested
with MACE in test_format_mace*.py). Governed replays of stored files (nothing halted) are in
tests/console/test_unknown_key.py.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from core.errors import INTEGRITY_FAILURE, UNKNOWN_KEY
from core.formats import contextos as cx
from core.formats import default_registry, formats, native
from core.formats.native import engine
from core.formats.native.recorder import reseal, signer_for
from core.replay.signatures import ED25519, HMAC_SHA256, KeyMaterial, StaticKeyRing
from replay.keys import key_add_ed25519
from replay.models import VerificationKey
from tests.replay.helpers import (
    GOLDEN_KEY_ID,
    golden,
    golden_key_ring,
    register_golden_key,
    stored_counts,
)

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("var_dirs")]

CONTEXTOS = Path(__file__).resolve().parent / "fixtures" / "contextos"
PACK = CONTEXTOS / "refund-triage@1.4.0.pack.json"
KG = CONTEXTOS / "kg-snapshot.kg.json"
KG_ID = json.loads(KG.read_text())["snapshot_id"]
STRANGER = "stranger"
#: a test vector, not a secret
STRANGER_SECRET = b"a key the console was never told about"
ED25519_PRIVATE = bytes(range(32))  # a test vector


def unknown(key_id: str, command: str) -> str:
    """The words of the refusal: the key id and how to register it."""
    return (
        f"no key {key_id!r} in the verification-key registry, so nothing was verified: "
        f"register it with `{command}`"
    )


GOLDEN_UNKNOWN = unknown(GOLDEN_KEY_ID, f"manage.py keys add-hmac {GOLDEN_KEY_ID} --secret-file F")
STRANGER_UNKNOWN = unknown(STRANGER, f"manage.py keys add-hmac {STRANGER} --secret-file F")


def run(command: str, *args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command(command, *args, stdout=out, stderr=err)
    except CommandError as exc:
        err.write(str(exc))
        return exc.returncode, out.getvalue(), err.getvalue()
    except SystemExit as exc:
        return int(exc.code), out.getvalue(), err.getvalue()
    return 0, out.getvalue(), err.getvalue()


def ok_document() -> dict:
    return json.loads(golden("ok.trace.json").read_bytes())


def resealed(tmp_path: Path, signer) -> Path:
    """The golden ok trace, its snapshots signed by the golden key, sealed by `signer`."""
    path = tmp_path / "resealed.trace.json"
    path.write_bytes(native.dumps_document(reseal(ok_document(), signer)))
    return path


def verified(path: Path, keys) -> dict:
    trace = native.open_native(io.BytesIO(path.read_bytes()), path.name, native.DEFAULT_LIMITS)
    report = engine.replay(trace, mode=engine.AUDIT, registry=default_registry(), keys=keys)
    return report.to_json()


# --- every format that verifies under a registry key refuses an unknown one unstored ----------


@pytest.mark.parametrize("name", ["replay-trace", "contextos-trace", "mace-reflective-log"])
def test_each_format_signed_under_a_registry_key_declares_unknown_key_unstorable(name):
    fmt = formats().get(name)
    assert UNKNOWN_KEY in fmt.codes
    assert UNKNOWN_KEY in fmt.unstorable_codes


# --- native traces --------------------------------------------------------------------------


def test_a_native_snapshot_signed_by_an_unknown_key_is_unknown_key_not_tamper():
    report = verified(golden("ok.trace.json"), StaticKeyRing())

    message = f"snapshot selfrep: {GOLDEN_UNKNOWN}"
    assert (report["status"], report["error_code"], report["message"]) == (
        "refused",
        UNKNOWN_KEY,
        message,
    )
    assert report["broke_at"] == 0
    assert report["authoritative"] is False
    assert report["checks"][-1] == {"name": "snapshots", "ok": False, "detail": message}


def test_a_native_seal_by_an_unknown_key_is_unknown_key(tmp_path):
    path = resealed(tmp_path, signer_for(STRANGER, HMAC_SHA256, STRANGER_SECRET))

    report = verified(path, golden_key_ring())

    assert (report["status"], report["error_code"], report["broke_at"]) == (
        "refused",
        UNKNOWN_KEY,
        "seal",
    )
    assert report["message"] == f"seal: {STRANGER_UNKNOWN}"
    assert [c["name"] for c in report["checks"] if c["ok"]][-1] == "events"


def test_an_ed25519_seal_by_an_unknown_key_says_how_to_register_a_public_key(tmp_path):
    path = resealed(tmp_path, signer_for("edwin", ED25519, ED25519_PRIVATE))

    report = verified(path, golden_key_ring())

    assert (report["error_code"], report["message"]) == (
        UNKNOWN_KEY,
        "seal: " + unknown("edwin", "manage.py keys add-ed25519 edwin --public-key-file F"),
    )


def test_a_registered_key_whose_seal_does_not_verify_stays_integrity_failure(tmp_path):
    # sealed by another secret under the registered key id: the key is known, the MAC wrong
    path = resealed(tmp_path, signer_for(GOLDEN_KEY_ID, HMAC_SHA256, STRANGER_SECRET))

    report = verified(path, golden_key_ring())

    assert (report["status"], report["error_code"], report["broke_at"]) == (
        "tamper_detected",
        INTEGRITY_FAILURE,
        "seal",
    )
    assert report["message"] == f"seal: HMAC-SHA256 by {GOLDEN_KEY_ID} does not verify"


def test_a_registered_key_of_another_algorithm_stays_integrity_failure(tmp_path):
    path = resealed(tmp_path, signer_for(STRANGER, HMAC_SHA256, STRANGER_SECRET))
    keys = golden_key_ring()
    keys.add(KeyMaterial(STRANGER, ED25519, public_key=bytes(32)))

    report = verified(path, keys)

    assert (report["error_code"], report["message"]) == (
        INTEGRITY_FAILURE,
        f"seal: key {STRANGER} is ed25519, the signature claims hmac-sha256",
    )


def test_ingest_refuses_a_native_trace_whose_key_is_unknown_and_stores_nothing():
    code, out, err = run("ingest", str(golden("ok.trace.json")))

    assert (code, out) == (1, "")
    assert err.splitlines() == [
        f"{golden('ok.trace.json')}: refused UNKNOWN_KEY: snapshot selfrep: {GOLDEN_UNKNOWN}",
        "1 of 1 files refused",
    ]
    assert stored_counts() == {"traces": 0, "blobs": 0, "snapshots": 0}

    # registered, the same file is stored: nothing of the refusal stays behind
    register_golden_key()
    code, out, _ = run("ingest", str(golden("ok.trace.json")))
    assert (code, out.split()[-1]) == (0, "ok")


def test_verify_says_unknown_key_and_exits_1(tmp_path):
    path = resealed(tmp_path, signer_for(STRANGER, HMAC_SHA256, STRANGER_SECRET))
    register_golden_key()

    code, out, _ = run("verify", str(path), "--json")

    report = json.loads(out)
    assert (code, report["status"], report["error_code"]) == (1, "refused", UNKNOWN_KEY)
    assert report["message"] == f"seal: {STRANGER_UNKNOWN}"


def test_an_ed25519_key_registered_afterwards_verifies_the_seal(tmp_path):
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    path = resealed(tmp_path, signer_for("edwin", ED25519, ED25519_PRIVATE))
    register_golden_key()
    assert run("ingest", str(path))[0] == 1

    public = Ed25519PrivateKey.from_private_bytes(ED25519_PRIVATE).public_key()
    key_add_ed25519(key_id="edwin", public_key=public.public_bytes(Encoding.Raw, PublicFormat.Raw))
    code, out, err = run("ingest", str(path))
    assert (code, out.split()[-1]) == (0, "ok"), err


# --- ContextOS traces: the pinned pack and KG snapshot --------------------------------------


def contextos_inputs(trace: cx.ContextosTrace, pack: Path = PACK, kg: Path = KG) -> cx.Inputs:
    return cx.find_inputs(trace, {pack.name: pack.read_bytes(), kg.name: kg.read_bytes()})


def test_a_contextos_replay_with_an_unknown_pack_key_is_unknown_key_not_tamper():
    trace = cx.loads((CONTEXTOS / "pass.trace.json").read_bytes(), "pass.trace.json")

    report = cx.replay(trace, contextos_inputs(trace), keys=StaticKeyRing()).to_json()

    message = (
        "refusing to replay: the pack refund-triage@1.4.0 is signed by a key the console does "
        f"not know: {GOLDEN_UNKNOWN}"
    )
    assert (report["status"], report["error_code"], report["broke_at"]) == (
        "refused",
        UNKNOWN_KEY,
        "pack",
    )
    assert report["message"] == message
    assert report["contextos"]["status"] is None  # not ContextOS's tamper_detected
    assert report["checks"][-1] == {"name": "pack", "ok": False, "detail": message}


def test_a_contextos_replay_with_an_unknown_kg_key_names_the_snapshot():
    trace = cx.loads((CONTEXTOS / "pass.trace.json").read_bytes(), "pass.trace.json")
    doc = json.loads(KG.read_text())
    doc["signature"]["key_id"] = STRANGER
    inputs = cx.find_inputs(
        trace, {PACK.name: PACK.read_bytes(), KG.name: json.dumps(doc).encode()}
    )

    report = cx.replay(trace, inputs, keys=golden_key_ring()).to_json()

    assert (report["error_code"], report["broke_at"], report["message"]) == (
        UNKNOWN_KEY,
        "kg_snapshot",
        f"refusing to replay: the KG snapshot {KG_ID} is signed by a key the console does not "
        f"know: {STRANGER_UNKNOWN}",
    )


def test_a_contextos_verify_given_its_inputs_refuses_an_unknown_key_first():
    trace = cx.loads((CONTEXTOS / "pass.trace.json").read_bytes(), "pass.trace.json")

    report = cx.verify(trace, inputs=contextos_inputs(trace), keys=StaticKeyRing()).to_json()

    message = (
        "the pack refund-triage@1.4.0 is signed by a key the console does not know: "
        + GOLDEN_UNKNOWN
    )
    assert (report["status"], report["error_code"], report["broke_at"]) == (
        "refused",
        UNKNOWN_KEY,
        "pack",
    )
    assert report["message"] == message
    assert [c["name"] for c in report["checks"]] == ["format", "pack"]
    # with the key, verify is what it was: the chain and the record, no input check
    known = cx.verify(trace, inputs=contextos_inputs(trace), keys=golden_key_ring()).to_json()
    assert [c["name"] for c in known["checks"]] == ["format", "chain", "record"]
    assert known["status"] == "ok"


def test_ingest_refuses_a_contextos_trace_whose_pack_key_is_unknown_and_stores_nothing(tmp_path):
    for path in (CONTEXTOS / "pass.trace.json", PACK, KG):
        (tmp_path / path.name).write_bytes(path.read_bytes())
    trace = tmp_path / "pass.trace.json"

    code, out, err = run("ingest", str(trace))

    assert (code, out) == (1, "")
    assert err.splitlines() == [
        f"{trace}: refused UNKNOWN_KEY: the pack refund-triage@1.4.0 is signed by a key the "
        f"console does not know: {GOLDEN_UNKNOWN}",
        "1 of 1 files refused",
    ]
    assert stored_counts() == {"traces": 0, "blobs": 0, "snapshots": 0}

    register_golden_key()
    code, out, _ = run("ingest", str(trace))
    assert (code, out) == (0, "4bf92f3577b34da6a3ce929d0e0e4736 contextos-trace replayable ok\n")
    assert stored_counts() == {"traces": 1, "blobs": 1, "snapshots": 2}


def test_a_contextos_trace_uploaded_without_its_inputs_is_stored_whatever_the_keys(tmp_path):
    # no pinned input came with it: no key to look up, stored as not replayable
    trace = tmp_path / "pass.trace.json"
    trace.write_bytes((CONTEXTOS / "pass.trace.json").read_bytes())
    code, out, _ = run("ingest", str(trace))
    assert (code, out) == (
        0,
        "4bf92f3577b34da6a3ce929d0e0e4736 contextos-trace not-replayable ok\n",
    )
    assert not VerificationKey.objects.exists()
