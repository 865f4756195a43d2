"""The sealed message, ``mace_v1`` of the document without its unsealed parts, built in a
stream (:class:`SealMessage`) or from a whole document (:func:`seal_message_of`).

Pure: no Django.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator
from typing import IO, Any

from core.formats.native.hashing import _EVENT_ID_PREFIX, canonical


class SealMessage:
    """Builds the sealed message, `mace_v1(document without the unsealed parts)`, in a stream.

    Events come first in the message's key order, so they go straight out: to `sink` when
    one is given (e.g. an HMAC's `update`: the message is then never stored), otherwise into
    a spooled buffer. Steps are spooled apart because a JSON Lines trace may interleave them
    with events; outputs keep only their hashes. Writes are batched. Memory stays bounded:
    the spools move to disk past `_SPOOL` bytes.
    """

    _SPOOL = 32 * 1024**2
    _BATCH = 256 * 1024

    def __init__(self, sink: Callable[[bytes], object] | None = None) -> None:
        self._sink = sink
        self._events = (
            None if sink is not None else tempfile.SpooledTemporaryFile(max_size=self._SPOOL)  # noqa: SIM115
        )
        self._steps = tempfile.SpooledTemporaryFile(max_size=self._SPOOL)  # noqa: SIM115
        self._pending: list[bytes] = []
        self._pending_bytes = 0
        self._n_events = 0
        self._n_steps = 0
        self.outputs: dict[str, str] = {}
        if sink is not None:
            sink(b'{"events":[')

    def add_event(self, event: dict[str, Any], where: str) -> None:
        self.add_event_bytes(canonical(event, where))

    def add_event_bytes(self, canonical_event: bytes) -> None:
        self._pending.append(canonical_event)
        self._pending_bytes += len(canonical_event)
        if self._pending_bytes >= self._BATCH:
            self._flush_events()

    def add_event_blob(self, blob: bytes, count: int) -> None:
        """`count` events' canonical bytes at once, already joined with commas."""
        self._flush_events()
        if self._n_events:
            blob = b"," + blob
        if self._sink is not None:
            self._sink(blob)
        else:
            assert self._events is not None
            self._events.write(blob)
        self._n_events += count

    def add_hashed_event(self, body: bytes, event_hash_value: str) -> None:
        """`add_event_bytes(sealed_event_bytes(body, event_hash_value))`, in one call.

        A large body is written in place, in pieces, rather than copied into a new event.
        """
        if len(body) >= self._BATCH:
            self._flush_events()
            out: Callable[[Any], object] = (
                self._sink if self._sink is not None else self._events.write  # type: ignore[union-attr]
            )
            if self._n_events:
                out(b",")
            view = memoryview(body)
            out(view[:_EVENT_ID_PREFIX])
            out(b'"hash":"%s",' % event_hash_value.encode())
            out(view[_EVENT_ID_PREFIX:])
            self._n_events += 1
            return
        event = b'%s"hash":"%s",%s' % (
            body[:_EVENT_ID_PREFIX],
            event_hash_value.encode(),
            body[_EVENT_ID_PREFIX:],
        )
        self._pending.append(event)
        self._pending_bytes += len(event)
        if self._pending_bytes >= self._BATCH:
            self._flush_events()

    def _flush_events(self) -> None:
        if not self._pending:
            return
        chunk = b",".join(self._pending)
        if self._n_events:
            chunk = b"," + chunk
        self._n_events += len(self._pending)
        self._pending = []
        self._pending_bytes = 0
        if self._sink is not None:
            self._sink(chunk)
        else:
            assert self._events is not None
            self._events.write(chunk)

    def add_step(self, step: dict[str, Any], where: str) -> None:
        if self._n_steps:
            self._steps.write(b",")
        self._steps.write(canonical(step, where))
        self._n_steps += 1

    def add_output(self, ref: str, digest: str) -> None:
        self.outputs[ref] = digest

    def _tail(self, header: dict[str, Any]) -> Iterator[bytes]:
        """Everything after the events, in pieces."""
        job = {k: v for k, v in header["job"].items() if k != "started_at"}
        snapshots = [{k: v for k, v in s.items() if k != "body"} for s in header["snapshots"]]
        tail = {
            "final_answer": header["final_answer"],
            "format": header["format"],
            "job": job,
            "outputs": {ref: {"hash": h} for ref, h in self.outputs.items()},
            "required_snapshots": header["required_snapshots"],
            "schema_version": header["schema_version"],
            "snapshots": snapshots,
        }
        # mace_v1 sorts keys: events < final_answer < ... < snapshots < steps < trace_id
        yield b"],"
        yield canonical(tail, "trace header")[1:-1]
        yield b',"steps":['
        self._steps.seek(0)
        while chunk := self._steps.read(1 << 20):
            yield chunk
        yield b'],"trace_id":'
        yield canonical(header["trace_id"], "trace_id")
        yield b"}"

    def send_rest(self, header: dict[str, Any]) -> None:
        """With a sink: send it the rest of the message (after the last event)."""
        assert self._sink is not None, "send_rest() is for a SealMessage with a sink"
        self._flush_events()
        for chunk in self._tail(header):
            self._sink(chunk)

    def close(self) -> None:
        """Drop the spools (a message returned by `finish` stays readable until closed)."""
        if self._events is not None:
            self._events.close()
        self._steps.close()

    def __enter__(self) -> SealMessage:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def finish(self, header: dict[str, Any]) -> IO[bytes]:
        """The whole sealed message as a readable file positioned at its start."""
        assert self._events is not None, "a SealMessage with a sink has no stored message"
        self._flush_events()
        out = tempfile.SpooledTemporaryFile(max_size=self._SPOOL)  # noqa: SIM115
        try:
            out.write(b'{"events":[')
            _copy(self._events, out)
            for chunk in self._tail(header):  # refuses a header mace-v1 cannot write
                out.write(chunk)
        except BaseException:
            out.close()  # the caller never gets it to close
            raise
        out.seek(0)
        return out


def _copy(src: IO[bytes], dst: IO[bytes]) -> None:
    src.seek(0)
    while chunk := src.read(1 << 20):
        dst.write(chunk)


def seal_message_of(document: dict[str, Any]) -> bytes:
    """The sealed message of a whole in-memory document (the recorder and tests use it)."""
    with SealMessage() as seal:
        for i, event in enumerate(document["events"]):
            seal.add_event(event, f"events[{i}]")
        for i, step in enumerate(document["steps"]):
            seal.add_step(step, f"steps[{i}]")
        for ref in sorted(document["outputs"]):
            seal.add_output(ref, document["outputs"][ref]["hash"])
        with seal.finish(document) as message:
            return message.read()
