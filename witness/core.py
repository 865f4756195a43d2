"""The witness's decisions: read an ``add-checkpoint`` request, check it against the latest
checkpoint held for its log, and cosign it or refuse it with the status c2sp.org/tlog-witness
gives. No HTTP here (``witness.server``) and no files (``witness.state``).

Refusals, in the order the spec lists them:

* 400 malformed request (old size line, proof lines, the note or its checkpoint text), or an
  old size bigger than the checkpoint's size;
* 404 a checkpoint origin the witness is not configured for;
* 403 no signature of the log's key, or a signature of it that does not verify;
* 409 the old size is not the size of the latest checkpoint the witness cosigned for that log
  (0 if none): the body is that size and a newline, type ``text/x.tlog.size``;
* 422 a size-0 checkpoint whose root is not the empty tree's, a proof from size 0, a
  consistency proof that does not verify, or the same size with another root.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Final, Protocol

from tlog import checkpoint as checkpoints
from tlog import merkle
from tlog import note as notes

MAX_PROOF_LINES: Final = 63
MAX_BODY: Final = 64 * 1024
SIZE_TYPE: Final = "text/x.tlog.size"
TEXT_TYPE: Final = "text/plain; charset=utf-8"


@dataclass(frozen=True)
class Response:
    status: int
    body: bytes
    content_type: str = TEXT_TYPE


@dataclass(frozen=True)
class Held:
    """The latest checkpoint cosigned for a log: its size and root and the signed note kept
    (the log's verified signatures and this witness's cosignature)."""

    size: int
    root_hash: bytes
    note: bytes


class Store(Protocol):
    def locked(self, origin: str) -> StoreTransaction: ...

    def latest(self, origin: str) -> Held | None: ...

    def refused(self, origin: str, status: int, reason: str, request: bytes) -> None: ...


class StoreTransaction(Protocol):
    """Reading and replacing one log's held checkpoint as one step (no other request for the
    same log in between: the spec's rollback race)."""

    def __enter__(self) -> StoreTransaction: ...

    def __exit__(self, *exc: object) -> None: ...

    def read(self) -> Held | None: ...

    def write(self, held: Held) -> None: ...


class Refusal(Exception):
    def __init__(self, status: int, reason: str, content_type: str = TEXT_TYPE) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason
        self.content_type = content_type

    def response(self) -> Response:
        body = self.reason if self.reason.endswith("\n") else self.reason + "\n"
        return Response(self.status, body.encode(), self.content_type)


@dataclass(frozen=True)
class Request:
    old_size: int
    proof: list[bytes]
    note: bytes


def _decimal(text: str, what: str) -> int:
    if not text.isascii() or not text.isdigit() or (text != "0" and text.startswith("0")):
        raise Refusal(400, f"malformed request: {what} {text!r}")
    return int(text)


def parse_request(body: bytes) -> Request:
    """``old <size>\\n``, up to 63 base64 hash lines, an empty line, then the checkpoint."""
    if len(body) > MAX_BODY:
        raise Refusal(400, f"malformed request: more than {MAX_BODY} bytes")
    head_end = body.find(b"\n\n")
    if head_end < 0:
        raise Refusal(400, "malformed request: no empty line before the checkpoint")
    try:
        head = body[:head_end].decode("ascii").split("\n")
    except UnicodeDecodeError:
        raise Refusal(400, "malformed request: the old size or proof lines are not ASCII") from None
    first = head[0]
    if not first.startswith("old "):
        raise Refusal(400, "malformed request: the first line is not 'old <size>'")
    old_size = _decimal(first[4:], "old size")
    proof_lines = head[1:]
    if len(proof_lines) > MAX_PROOF_LINES:
        raise Refusal(400, f"malformed request: more than {MAX_PROOF_LINES} proof lines")
    proof = []
    for line in proof_lines:
        try:
            raw = base64.b64decode(line, validate=True)
        except (binascii.Error, ValueError):
            raw = b""
        if len(raw) != merkle.HASH_SIZE or base64.b64encode(raw).decode() != line:
            raise Refusal(400, f"malformed request: proof line {line!r} is not a base64 hash")
        proof.append(raw)
    return Request(old_size, proof, body[head_end + 2 :])


class Witness:
    def __init__(
        self,
        signer: notes.Signer,
        logs: Mapping[str, Iterable[notes.Verifier]],
        store: Store,
        clock: Callable[[], float],
    ) -> None:
        if signer.alg != notes.ALG_COSIGNATURE_V1:
            signer = signer.as_cosigner()
        self.signer = signer
        self.logs = {origin: list(keys) for origin, keys in logs.items()}
        self.store = store
        self.clock = clock

    @property
    def vkey(self) -> str:
        return self.signer.verifier.vkey

    def add_checkpoint(self, body: bytes) -> Response:
        try:
            return self._add(body)
        except Refusal as refusal:
            return refusal.response()

    def _add(self, body: bytes) -> Response:
        request = parse_request(body)
        split = request.note.rfind(b"\n\n")
        if split < 0:
            raise Refusal(400, "malformed checkpoint: not a signed note")
        try:
            cp = checkpoints.parse_checkpoint(request.note[: split + 1])
        except checkpoints.CheckpointError as exc:
            raise Refusal(400, str(exc)) from None
        keys = self.logs.get(cp.origin)
        if keys is None:
            raise Refusal(404, f"unknown log {cp.origin!r}")
        try:
            opened = notes.open_note(request.note, keys)
        except (notes.UnverifiedNote, notes.InvalidNoteSignature) as exc:
            raise Refusal(403, f"checkpoint signature: {exc}") from None
        except notes.NoteError as exc:
            raise Refusal(400, f"checkpoint note: {exc}") from None
        if request.old_size > cp.size:
            raise Refusal(
                400, f"old size {request.old_size} is bigger than the checkpoint's {cp.size}"
            )
        with self.store.locked(cp.origin) as tx:
            held = tx.read()
            held_size = held.size if held else 0
            if request.old_size != held_size:
                raise Refusal(409, f"{held_size}\n", SIZE_TYPE)
            try:
                self._check_consistency(request, cp, held)
            except Refusal as refusal:
                self.store.refused(cp.origin, refusal.status, refusal.reason, body)
                raise
            timestamp = int(self.clock())
            line = notes.signature_line(self.signer, opened.text, timestamp=timestamp)
            kept = b"".join(sig.line.encode() for sig in opened.sigs)
            tx.write(Held(cp.size, cp.root_hash, opened.text + b"\n" + kept + line.encode()))
        return Response(200, line.encode())

    @staticmethod
    def _check_consistency(request: Request, cp: checkpoints.Checkpoint, held: Held | None) -> None:
        if cp.size == 0 and cp.root_hash != merkle.EMPTY_ROOT:
            raise Refusal(422, "a checkpoint of size 0 must have the empty tree's root")
        if request.old_size == 0:
            if request.proof:
                raise Refusal(422, "a consistency proof from size 0 must be empty")
            return
        assert held is not None
        if request.old_size == cp.size:
            if request.proof:
                raise Refusal(422, "a consistency proof between equal sizes must be empty")
            if cp.root_hash != held.root_hash:
                raise Refusal(422, f"another root hash at size {cp.size}")
            return
        if not merkle.verify_consistency(
            held.size, cp.size, held.root_hash, cp.root_hash, request.proof
        ):
            raise Refusal(
                422, f"the consistency proof from size {held.size} to {cp.size} does not verify"
            )

    def latest(self, origin_hash: str) -> Response:
        for origin in self.logs:
            if hashlib.sha256(origin.encode()).hexdigest() == origin_hash:
                held = self.store.latest(origin)
                if held is not None:
                    return Response(200, held.note)
        return Response(404, b"no checkpoint cosigned for this log\n")
