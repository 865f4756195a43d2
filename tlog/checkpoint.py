"""C2SP tlog-checkpoint (c2sp.org/tlog-checkpoint): the note text of a transparency log's
signed tree head. Pure: no Django, no I/O.

    <origin>\\n
    <tree size, decimal, no leading zero>\\n
    <base64 of the 32-byte RFC 6962 root hash>\\n
    [<extension line>\\n ...]

:func:`open_checkpoint` opens the signed note with the log's verifier(s) and parses the text,
refusing a checkpoint whose origin is not the expected one.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from tlog import note as notes

ROOT_HASH_SIZE: Final = 32


class CheckpointError(ValueError):
    """``malformed checkpoint: <what>`` or ``checkpoint origin is <got>, not <expected>``."""


@dataclass(frozen=True)
class Checkpoint:
    origin: str
    size: int
    root_hash: bytes
    extensions: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.origin or "\n" in self.origin:
            raise CheckpointError("malformed checkpoint: the origin line is empty")
        if self.size < 0:
            raise CheckpointError("malformed checkpoint: the tree size is negative")
        if len(self.root_hash) != ROOT_HASH_SIZE:
            raise CheckpointError("malformed checkpoint: the root hash is not 32 bytes")
        if any(not line or "\n" in line for line in self.extensions):
            raise CheckpointError("malformed checkpoint: an extension line is empty")

    def body(self) -> bytes:
        lines = [
            self.origin,
            str(self.size),
            base64.b64encode(self.root_hash).decode(),
            *self.extensions,
        ]
        return "".join(f"{line}\n" for line in lines).encode()


def parse_checkpoint(text: bytes) -> Checkpoint:
    """The checkpoint in a note's text (the text only, signatures already split off)."""
    try:
        decoded = text.decode("utf-8")
    except UnicodeDecodeError:
        raise CheckpointError("malformed checkpoint: not UTF-8") from None
    if not decoded.endswith("\n"):
        raise CheckpointError("malformed checkpoint: the text does not end in a newline")
    lines = decoded[:-1].split("\n")
    if len(lines) < 3:
        raise CheckpointError("malformed checkpoint: fewer than three lines")
    origin, size_text, root_text, *extensions = lines
    if not origin:
        raise CheckpointError("malformed checkpoint: the origin line is empty")
    if (
        not size_text.isascii()
        or not size_text.isdigit()
        or (size_text != "0" and size_text.startswith("0"))
    ):
        raise CheckpointError(f"malformed checkpoint: tree size {size_text!r}")
    try:
        root_hash = base64.b64decode(root_text, validate=True)
    except ValueError:
        raise CheckpointError(f"malformed checkpoint: root hash {root_text!r}") from None
    if len(root_hash) != ROOT_HASH_SIZE or base64.b64encode(root_hash).decode() != root_text:
        raise CheckpointError(f"malformed checkpoint: root hash {root_text!r}")
    return Checkpoint(origin, int(size_text), root_hash, tuple(extensions))


def open_checkpoint(
    msg: bytes, verifiers: Iterable[notes.Verifier], *, origin: str | None = None
) -> tuple[Checkpoint, notes.Note]:
    """Verify the signed note (see :func:`tlog.note.open_note`) and parse its text."""
    note = notes.open_note(msg, verifiers)
    checkpoint = parse_checkpoint(note.text)
    if origin is not None and checkpoint.origin != origin:
        raise CheckpointError(f"checkpoint origin is {checkpoint.origin!r}, not {origin!r}")
    return checkpoint, note
