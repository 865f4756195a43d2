"""The native format's hashing rules, all over the ``mace-v1`` canonical profile: a snapshot's
id (:func:`snapshot_id_of`), an event's id (:func:`event_id_of`, :func:`event_id_deriver`),
the event chain (:func:`event_hash`, :func:`event_body_bytes`, :func:`sealed_event_bytes`)
and an output's hash (:func:`output_hash_of`). A value ``mace-v1`` cannot write is a
malformed trace (:func:`canonical`).

Pure: no Django.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

from core.canonical import CanonicalError, mace_v1

# the content address every format shares, defined with them in common.py
from core.formats.common import snapshot_id_of  # noqa: F401
from core.formats.native.schema import _malformed


def canonical(value: Any, where: str) -> bytes:
    """mace-v1 bytes of a hashed value; a value it cannot write is a malformed trace."""
    try:
        return mace_v1(value)
    except CanonicalError as exc:
        raise _malformed(f"{where}: {exc}") from None
    except RecursionError:
        raise _malformed(f"{where}: nesting is deeper than the canonicaliser allows") from None


_sha256 = hashlib.sha256


def event_id_of(job_seed: str, seq: int, type_: str) -> str:
    return _sha256(f"{job_seed}:{seq}:{type_}".encode()).hexdigest()


def event_id_deriver(job_seed: str) -> Callable[[int, str], str]:
    """`event_id_of` with `job_seed` fixed: the same ids, for a fraction of the cost.

    The seed's bytes are encoded once and each event type's once (a trace has a handful).
    """
    try:
        prefix = job_seed.encode() + b":"
    except UnicodeEncodeError:  # let event_id_of fail as it does, event by event
        return lambda seq, type_: event_id_of(job_seed, seq, type_)
    types: dict[str, bytes] = {}

    def derive(seq: int, type_: str) -> str:
        type_bytes = types.get(type_)
        if type_bytes is None:
            type_bytes = type_.encode()
            if len(types) < _TYPE_CACHE_MAX:
                types[type_] = type_bytes
        if type(seq) is not int:  # "%d" would not write what f"{seq}" writes
            return event_id_of(job_seed, seq, type_)
        return _sha256(b"%s%d:%s" % (prefix, seq, type_bytes)).hexdigest()

    return derive


def event_hash(prev: str, event: dict[str, Any], where: str = "event") -> tuple[str, bytes]:
    """The chain hash of `event` after `prev`, and the hashed body's canonical bytes.

    The body's bytes start with `{"event_id":"<64 hex>",` (79 bytes, keys sorted), which
    `sealed_event_bytes` uses to write the whole event without canonicalising it twice.
    """
    body = event_body_bytes(event, where)
    return "sha256:" + _sha256(prev.encode() + body).hexdigest(), body


_TYPE_BYTES: dict[str, bytes] = {}  # mace_v1 of event types seen (a trace uses a handful)
_TYPE_CACHE_MAX = 4096

#: an event's hashed body and its sealed bytes (with its `hash`), from their parts: the keys
#: sort as event_id < hash < payload < seq < type (`event_body_bytes`, `runs.EventRun`)
EVENT_BODY = b'{"event_id":"%s","payload":%s,"seq":%d,"type":%s}'
SEALED_EVENT = b'{"event_id":"%s","hash":"%s","payload":%s,"seq":%d,"type":%s}'


def type_bytes_of(type_: str) -> bytes:
    """`mace_v1(type_)`, kept for the types seen (raises as `mace_v1` does)."""
    found = _TYPE_BYTES.get(type_)
    if found is None:
        found = mace_v1(type_)
        if len(_TYPE_BYTES) < _TYPE_CACHE_MAX:
            _TYPE_BYTES[type_] = found
    return found


def event_body_bytes(
    event: dict[str, Any], where: str = "event", *, id_is_hex: bool = False
) -> bytes:
    """`mace_v1({seq, type, event_id, payload})`: the bytes an event's chain hash covers.

    Written from its parts: the four keys sort as event_id < payload < seq < type, and a
    canonical object is its members' canonical values in that order, so only the payload
    needs the canonicaliser (an event type's bytes are cached). Whenever a part is not the
    plain kind this shortcut covers (an int `seq`, an alphanumeric ASCII `event_id`, a
    `type` and `payload` mace_v1 can write), the whole body goes through `canonical`, which
    gives the same bytes or words the refusal as it always has. `id_is_hex`: the caller
    has checked that `event_id` is lower-case hex (the engine compares it with the id it
    derives), which spares the check here.
    """
    seq = event["seq"]
    event_id = event["event_id"]
    type_ = event["type"]
    if (
        type(seq) is int
        and type(event_id) is str
        and (id_is_hex or (event_id.isascii() and event_id.isalnum()))
        and type(type_) is str
    ):
        try:
            return EVENT_BODY % (
                event_id.encode(),
                mace_v1(event["payload"]),
                seq,
                _TYPE_BYTES.get(type_) or type_bytes_of(type_),
            )
        except (CanonicalError, RecursionError, ValueError):
            pass  # canonical() below raises the refusal, worded for the whole body
    return canonical(
        {"seq": seq, "type": type_, "event_id": event_id, "payload": event["payload"]}, where
    )


_EVENT_ID_PREFIX = 79  # len('{"event_id":"') + 64 + len('",')


def sealed_event_bytes(body: bytes, event_hash_value: str) -> bytes:
    """mace_v1 of the whole event (with its `hash`), from the hashed body's bytes."""
    return b"".join(  # one join: a tenth faster than four concatenations
        (
            body[:_EVENT_ID_PREFIX],
            b'"hash":"',
            event_hash_value.encode(),
            b'",',
            body[_EVENT_ID_PREFIX:],
        )
    )


def output_hash_of(content: Any, where: str = "output") -> str:
    return "sha256:" + hashlib.sha256(canonical(content, where)).hexdigest()
