"""Runs of plain events: consecutive events a reader checked among themselves (each id
derived from its seq and type, seqs counting up, each hash the chain hash after the one
before) and hands to the engine as one ``"events"`` row (see `trace.Row`). The JSON Lines
reader gathers them from each chunk of lines (`parallel._event_run`), the document reader
from its ``events`` list (`reader._open_document`).

Pure: no Django.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from core.canonical import CanonicalError, mace_v1
from core.formats.native.hashing import (
    _TYPE_BYTES,
    EVENT_BODY,
    SEALED_EVENT,
    _sha256,
    type_bytes_of,
)
from core.formats.native.schema import _plain_event


class EventRun:
    """Plain events gathered from `objs` (parsed events, without a ``record`` key), up to
    the first one that does not continue the run plainly (taken from the iterator, left
    out of the run: its own row then words or passes it, exactly as if there were no
    runs); and what the engine needs of them (`summary`).

    A plain event is valid, records no memory write (whose ``wm_id`` / ``episodic_id`` the
    engine checks event by event), carries the id its seq and type derive, a seq one more
    than the last one's and, after the first, the chain hash after the last one:
    everything the engine would check of it but the first one's link to what comes
    before, which the engine checks when it takes the run. One loop, with everything it
    uses in locals: it runs once per event of every trace read.
    """

    __slots__ = ("_first_body", "_first_seq", "_last", "_sealed", "events")

    def __init__(self, objs: Iterable[Any], derive_id: Callable[[int, str], str]) -> None:
        events: list[dict[str, Any]] = []
        sealed: list[bytes] = []
        append_event, append_sealed = events.append, sealed.append
        sha256 = _sha256
        canonical = mace_v1
        body_bytes, sealed_bytes = EVENT_BODY, SEALED_EVENT
        types = _TYPE_BYTES  # an event type's mace-v1 bytes (`hashing.type_bytes_of`)
        first_seq, first_body, prev, last = 0, b"", b"", ""
        for index, obj in enumerate(objs):
            if not (
                # the first event gets every check of validate_event; a later one skips the
                # spelling of its event_id and hash, which are compared below with the id
                # its seq and type derive and with the chain hash, both lower-case hex:
                # equal to them, it passes _plain_event; else the run ends
                _plain_event(obj)
                if index == 0
                else (
                    type(obj) is dict
                    and len(obj) == 5
                    and type(obj.get("seq")) is int
                    and type(obj.get("type")) is str
                    and type(obj.get("payload")) is dict
                    and type(obj.get("event_id")) is str
                    and type(obj.get("hash")) is str
                )
            ):
                break
            payload = obj["payload"]
            if "wm_id" in payload or "episodic_id" in payload:
                break
            seq, recorded, type_, event_id = obj["seq"], obj["hash"], obj["type"], obj["event_id"]
            # the derived id is 64 lower-case hex: equal to it, event_id is what
            # validate_event requires
            if derive_id(seq, type_) != event_id:
                break
            # the body (`event_body_bytes`) and the sealed event (`sealed_event_bytes`) are
            # written from the same parts: the payload canonicalised once, no slicing. A
            # part mace-v1 cannot write ends the run: its own row words the refusal
            try:
                type_bytes = types.get(type_) or type_bytes_of(type_)
                payload_bytes = canonical(payload)
            except (CanonicalError, RecursionError, ValueError):
                break
            id_bytes = event_id.encode()
            body = body_bytes % (id_bytes, payload_bytes, seq, type_bytes)
            if index == 0:
                first_seq, first_body = seq, body
            elif (
                seq != first_seq + index or "sha256:" + sha256(prev + body).hexdigest() != recorded
            ):
                break
            prev = recorded.encode()
            append_sealed(sealed_bytes % (id_bytes, prev, payload_bytes, seq, type_bytes))
            append_event(obj)
            last = recorded
        self.events = events
        self._sealed = sealed
        self._first_seq, self._first_body, self._last = first_seq, first_body, last

    def summary(self, keep: bool) -> tuple[Any, ...]:
        """The ``pre`` of the run's row (see `trace.Row`); the events themselves only if
        `keep` (else the engine parses their lines again)."""
        events = self.events
        return (
            self._first_seq,
            self._first_body,
            events[0]["hash"],
            b",".join(self._sealed),
            self._last,
            len(events),
            events if keep else None,
        )
