"""What a native trace is: the format's name, schema version and key sets, and the checks
of its header, events, steps and outputs (:func:`validate_header`, :func:`validate_event`,
:func:`validate_step`, :func:`validate_output`), each refusal a ``MALFORMED_TRACE`` that names
where (or ``UNSUPPORTED_SCHEMA_VERSION`` for a newer trace).

Pure: no Django.
"""

from __future__ import annotations

import binascii
import re
from typing import Any

from core.errors import MALFORMED_TRACE, UNSUPPORTED_SCHEMA_VERSION, ReplayError

FORMAT = "replay-trace"
SCHEMA_VERSION = 1
SIGNATURE_ALGS = ("hmac-sha256", "ed25519")

_HEX32 = re.compile(r"[0-9a-f]{32}\Z")
_HEX64 = re.compile(r"[0-9a-f]{64}\Z")
_SHA = re.compile(r"sha256:[0-9a-f]{64}\Z")
_SEMVER = re.compile(
    r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-[0-9A-Za-z.-]+)?(?:\+[0-9A-Za-z.-]+)?\Z"
)
_ISO = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})\Z")

HEADER_KEYS = {
    "format",
    "schema_version",
    "trace_id",
    "job",
    "required_snapshots",
    "snapshots",
    "final_answer",
    "seal",
    "meta",
}
DOCUMENT_KEYS = HEADER_KEYS | {"events", "steps", "outputs"}


def _malformed(message: str) -> ReplayError:
    return ReplayError(MALFORMED_TRACE, message)


def _type_name(value: Any) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}.get(
        type(value), "number"
    )


def _kind_name(kind: type) -> str:
    # an int field given 1.5 must not read "expected number, got number"
    if kind is int:
        return "integer"
    return "null" if kind is type(None) else _type_name(kind())


def _expect(obj: dict[str, Any], key: str, kinds: tuple[type, ...], where: str) -> Any:
    if key not in obj:
        raise _malformed(f"{where}: missing required field {key!r}")
    value = obj[key]
    # bool is an int subclass in Python; JSON keeps them apart
    ok = isinstance(value, kinds) and not (isinstance(value, bool) and bool not in kinds)
    if not ok:
        wanted = " or ".join(_kind_name(k) for k in kinds)
        raise _malformed(f"{where}.{key}: expected {wanted}, got {_type_name(value)}")
    return value


def _no_extra(obj: dict[str, Any], allowed: set[str], where: str) -> None:
    extra = sorted(set(obj) - allowed)
    if extra:
        raise _malformed(f"{where}: unknown field {extra[0]!r}")


def _signature(sig: Any, where: str) -> None:
    if not isinstance(sig, dict):
        raise _malformed(f"{where}: expected object, got {_type_name(sig)}")
    _no_extra(sig, {"alg", "key_id", "value"}, where)
    alg = _expect(sig, "alg", (str,), where)
    if alg not in SIGNATURE_ALGS:
        raise _malformed(f"{where}.alg: {alg!r} is not one of {', '.join(SIGNATURE_ALGS)}")
    _expect(sig, "key_id", (str,), where)
    value = _expect(sig, "value", (str,), where)
    if not re.fullmatch(r"[0-9a-f]+", value):
        raise _malformed(f"{where}.value: expected lower-case hex")


def validate_header(header: Any, where: str = "trace") -> dict[str, Any]:
    """Check the format, schema version and every header field; returns the header."""
    if not isinstance(header, dict):
        raise _malformed(f"{where}: expected a JSON object, got {_type_name(header)}")
    fmt = header.get("format")
    if fmt != FORMAT:
        raise _malformed(f"{where}.format: expected {FORMAT!r}, got {fmt!r}")
    version = _expect(header, "schema_version", (int,), where)
    if version > SCHEMA_VERSION:
        raise ReplayError(
            UNSUPPORTED_SCHEMA_VERSION,
            f"{where}.schema_version: {version} is newer than the {SCHEMA_VERSION} this console "
            "supports; upgrade the console to replay it",
        )
    if version < 1:
        raise _malformed(f"{where}.schema_version: {version} is not a schema version")
    trace_id = _expect(header, "trace_id", (str,), where)
    if not _HEX32.match(trace_id):
        raise _malformed(f"{where}.trace_id: expected 32 lower-case hex characters")
    job = _expect(header, "job", (dict,), where)
    _no_extra(job, {"job_id", "job_seed", "runtime", "replayable", "started_at"}, f"{where}.job")
    _expect(job, "job_id", (str,), f"{where}.job")
    _expect(job, "job_seed", (str,), f"{where}.job")
    runtime = _expect(job, "runtime", (dict,), f"{where}.job")
    _no_extra(runtime, {"name", "version"}, f"{where}.job.runtime")
    _expect(runtime, "name", (str,), f"{where}.job.runtime")
    semver = _expect(runtime, "version", (str,), f"{where}.job.runtime")
    if not _SEMVER.match(semver):
        raise _malformed(f"{where}.job.runtime.version: {semver!r} is not a semantic version")
    _expect(job, "replayable", (bool,), f"{where}.job")
    if "started_at" in job:
        started = _expect(job, "started_at", (str,), f"{where}.job")
        if not _ISO.match(started):
            raise _malformed(f"{where}.job.started_at: {started!r} is not an ISO-8601 date-time")
    required = _expect(header, "required_snapshots", (list,), where)
    for i, kind in enumerate(required):
        if not isinstance(kind, str):
            raise _malformed(f"{where}.required_snapshots[{i}]: expected string")
    if len(set(required)) != len(required):
        raise _malformed(f"{where}.required_snapshots: lists a kind twice")
    snapshots = _expect(header, "snapshots", (list,), where)
    kinds = set()
    for i, snap in enumerate(snapshots):
        w = f"{where}.snapshots[{i}]"
        if not isinstance(snap, dict):
            raise _malformed(f"{w}: expected object, got {_type_name(snap)}")
        _no_extra(snap, {"kind", "snapshot_id", "schema_version", "body", "signature"}, w)
        kind = _expect(snap, "kind", (str,), w)
        if kind in kinds:
            raise _malformed(f"{w}.kind: a second {kind!r} snapshot")
        kinds.add(kind)
        sid = _expect(snap, "snapshot_id", (str,), w)
        if not _SHA.match(sid):
            raise _malformed(f"{w}.snapshot_id: expected 'sha256:' and 64 lower-case hex")
        _expect(snap, "schema_version", (int,), w)
        if "body" in snap and not isinstance(snap["body"], dict):
            raise _malformed(f"{w}.body: expected object, got {_type_name(snap['body'])}")
        _signature(_expect(snap, "signature", (dict,), w), f"{w}.signature")
    if "final_answer" not in header:
        raise _malformed(f"{where}: missing required field 'final_answer'")
    _signature(_expect(header, "seal", (dict,), where), f"{where}.seal")
    return header


_unhexlify = binascii.unhexlify


def _plain_event(event: Any) -> bool:
    """True for an event every check of `validate_event` passes (decided quickly).

    `unhexlify(s)` succeeds exactly for hex of even length (no spaces, signs or prefixes)
    and `s.lower() == s` rules out capitals: together, a fraction of a regular expression's
    cost. Five keys that are all the expected ones leave no room for an unknown one.
    """
    try:
        return (
            type(event) is dict
            and len(event) == 5
            and type(event["seq"]) is int
            and type(event["type"]) is str
            and type(event["payload"]) is dict
            and type(event_id := event["event_id"]) is str
            and len(event_id) == 64
            and _unhexlify(event_id) is not None
            and event_id.lower() == event_id
            and type(digest := event["hash"]) is str
            and len(digest) == 71
            and digest.startswith("sha256:")
            and _unhexlify(digest[7:]) is not None
            and digest.lower() == digest
        )
    except (KeyError, ValueError):  # a key missing, or not hex at all (binascii.Error)
        return False


def validate_event(event: Any, where: str) -> dict[str, Any]:
    if _plain_event(event):  # the common case; anything else gets the worded checks below
        return event
    if not isinstance(event, dict):
        raise _malformed(f"{where}: expected object, got {_type_name(event)}")
    _no_extra(event, {"seq", "type", "event_id", "payload", "hash"}, where)
    _expect(event, "seq", (int,), where)
    _expect(event, "type", (str,), where)
    if not _HEX64.match(_expect(event, "event_id", (str,), where)):
        raise _malformed(f"{where}.event_id: expected 64 lower-case hex characters")
    _expect(event, "payload", (dict,), where)
    if not _SHA.match(_expect(event, "hash", (str,), where)):
        raise _malformed(f"{where}.hash: expected 'sha256:' and 64 lower-case hex")
    return event


def validate_step(step: Any, where: str) -> dict[str, Any]:
    if not isinstance(step, dict):
        raise _malformed(f"{where}: expected object, got {_type_name(step)}")
    kind = _expect(step, "kind", (str,), where)
    _expect(step, "seq", (int,), where)
    _expect(step, "step_id", (str,), where)
    _expect(step, "input", (dict,), where)
    if kind == "deterministic":
        _no_extra(step, {"seq", "step_id", "kind", "fn", "input", "output"}, where)
        fn = _expect(step, "fn", (str,), where)
        if "@" not in fn:
            raise _malformed(f"{where}.fn: {fn!r} must name its version as 'name@version'")
        if "output" not in step:
            raise _malformed(f"{where}: missing required field 'output'")
    elif kind == "external":
        _no_extra(step, {"seq", "step_id", "kind", "name", "input", "output_ref"}, where)
        _expect(step, "name", (str,), where)
        _expect(step, "output_ref", (str,), where)
    else:
        raise _malformed(f"{where}.kind: expected 'deterministic' or 'external', got {kind!r}")
    return step


def validate_output(ref: str, output: Any, where: str) -> dict[str, Any]:
    if not isinstance(output, dict):
        raise _malformed(f"{where}: expected object, got {_type_name(output)}")
    _no_extra(output, {"content", "hash"}, where)
    if not _SHA.match(_expect(output, "hash", (str,), where)):
        raise _malformed(f"{where}.hash: expected 'sha256:' and 64 lower-case hex")
    return output
