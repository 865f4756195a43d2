"""C2SP signed notes (c2sp.org/signed-note) with Ed25519 keys, and the timestamped Ed25519
cosignatures of c2sp.org/tlog-cosignature (cosignature/v1). Pure: no Django, no clock, no
randomness (the caller passes a seed or a timestamp). Byte for byte what Go's
``golang.org/x/mod/sumdb/note`` reads and writes; the refusals carry its messages.

A note is text ending in a newline, a blank line, then signature lines
``— <key name> base64(key id || signature)``. A key is named and identified by

    key id = SHA-256(key name || 0x0A || signature type || public key)[:4]

with signature type 0x01 for Ed25519 over the note text, 0x04 for a cosignature/v1 (an
Ed25519 signature over ``cosignature/v1\\ntime <t>\\n`` + the note text, sent as the 8-byte
big-endian ``t`` followed by the 64-byte signature). A verifier key ("vkey") is
``<name>+<hex key id>+base64(type || 32-byte public key)``; a signer key in Go's format is
``PRIVATE+KEY+<name>+<hex key id>+base64(0x01 || 32-byte seed)``.

Opening a note (:func:`open_note`) ignores signatures from unknown keys (a name or an id that
does not match a known key); a signature line of a known key that fails to verify refuses the
whole note; a note with no verified signature is refused.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Final

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

ALG_ED25519: Final = 0x01
ALG_COSIGNATURE_V1: Final = 0x04
ALGORITHMS: Final = (ALG_ED25519, ALG_COSIGNATURE_V1)
SIG_PREFIX: Final = "— ".encode()
COSIGNATURE_HEADER: Final = b"cosignature/v1\n"
#: Go refuses more; the spec asks for at least 16
MAX_SIGNATURES: Final = 100
_MAX_TIMESTAMP: Final = 2**63 - 1


class NoteError(ValueError):
    """A note, a key or a signature refused; ``str(error)`` is the message Go's package gives."""


class MalformedNote(NoteError):
    def __init__(self, message: str = "malformed note") -> None:
        super().__init__(message)


class UnverifiedNote(NoteError):
    """No signature from a known key: ``note`` holds what was read, every signature unverified."""

    def __init__(self, note: Note) -> None:
        super().__init__("note has no verifiable signatures")
        self.note = note


class InvalidNoteSignature(NoteError):
    def __init__(self, name: str, key_id: int) -> None:
        super().__init__(f"invalid signature for key {name}+{key_id:08x}")
        self.name = name
        self.key_id = key_id


class AmbiguousKey(NoteError):
    def __init__(self, name: str, key_id: int) -> None:
        super().__init__(f"ambiguous key {name}+{key_id:08x}")


class KeyFormatError(NoteError):
    """A verifier or signer key string refused: ``malformed verifier id``, ``unknown verifier
    algorithm`` or ``invalid verifier hash`` (Go's three messages)."""


# --- names and key ids -----------------------------------------------------------------------


def is_valid_name(name: str) -> bool:
    """Non-empty, no Unicode space, no ``+``, no control character."""
    return name != "" and "+" not in name and not any(ch.isspace() or ch < " " for ch in name)


def key_id(name: str, alg: int, public_key: bytes) -> int:
    digest = hashlib.sha256(name.encode() + b"\n" + bytes([alg]) + public_key).digest()
    return int.from_bytes(digest[:4], "big")


def _b64decode(text: str) -> bytes:
    """Standard base64, canonical only: bits past the data must be zero, so no two texts
    decode to the same bytes (Go accepts such texts; a note we refuse for it, Go never made)."""
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ValueError("not base64") from exc
    if base64.b64encode(raw).decode() != text:
        raise ValueError("not canonical base64")
    return raw


def _hex_id(text: str) -> int:
    if len(text) != 8 or any(ch not in "0123456789abcdef" for ch in text):
        raise KeyFormatError("malformed verifier id")
    return int(text, 16)


# --- verifiers and signers -------------------------------------------------------------------


@dataclass(frozen=True)
class Verifier:
    name: str
    key_id: int
    alg: int
    public_key: bytes
    _key: Ed25519PublicKey = field(repr=False, compare=False)

    @classmethod
    def from_public_key(cls, name: str, public_key: bytes, alg: int = ALG_ED25519) -> Verifier:
        if not is_valid_name(name):
            raise KeyFormatError("malformed verifier id")
        if alg not in ALGORITHMS:
            raise KeyFormatError("unknown verifier algorithm")
        if len(public_key) != 32:
            raise KeyFormatError("malformed verifier id")
        key = Ed25519PublicKey.from_public_bytes(public_key)
        return cls(name, key_id(name, alg, public_key), alg, public_key, key)

    @property
    def vkey(self) -> str:
        encoded = base64.b64encode(bytes([self.alg]) + self.public_key).decode()
        return f"{self.name}+{self.key_id:08x}+{encoded}"

    def verify(self, text: bytes, signature: bytes) -> bool:
        if self.alg == ALG_COSIGNATURE_V1:
            if len(signature) != 8 + 64:
                return False
            timestamp = int.from_bytes(signature[:8], "big")
            if timestamp > _MAX_TIMESTAMP:
                return False
            text = cosigned_message(timestamp, text)
            signature = signature[8:]
        try:
            self._key.verify(signature, text)
        except InvalidSignature:
            return False
        return True

    def as_cosigner(self) -> Verifier:
        """The same Ed25519 key as a cosignature/v1 verifier (type 0x04, its own key id)."""
        return Verifier.from_public_key(self.name, self.public_key, ALG_COSIGNATURE_V1)


def parse_verifier(vkey: str) -> Verifier:
    """``<name>+<hex id>+base64(type || key)``, refused unless the id is the one the name, the
    type and the key give."""
    name, _, rest = vkey.partition("+")
    hex_id, _, key64 = rest.partition("+")
    ident = _hex_id(hex_id)
    try:
        raw = _b64decode(key64)
    except ValueError:
        raise KeyFormatError("malformed verifier id") from None
    if not is_valid_name(name) or not raw:
        raise KeyFormatError("malformed verifier id")
    if ident != int.from_bytes(hashlib.sha256(name.encode() + b"\n" + raw).digest()[:4], "big"):
        raise KeyFormatError("invalid verifier hash")
    alg, public_key = raw[0], raw[1:]
    if alg not in ALGORITHMS:
        raise KeyFormatError("unknown verifier algorithm")
    if len(public_key) != 32:
        raise KeyFormatError("malformed verifier id")
    return Verifier.from_public_key(name, public_key, alg)


@dataclass(frozen=True)
class Signer:
    name: str
    key_id: int
    alg: int
    seed: bytes = field(repr=False)

    @classmethod
    def from_seed(cls, name: str, seed: bytes, alg: int = ALG_ED25519) -> Signer:
        if not is_valid_name(name):
            raise KeyFormatError("malformed verifier id")
        if alg not in ALGORITHMS:
            raise KeyFormatError("unknown verifier algorithm")
        if len(seed) != 32:
            raise KeyFormatError("malformed verifier id")
        public = _public_of(seed)
        return cls(name, key_id(name, alg, public), alg, seed)

    @property
    def public_key(self) -> bytes:
        return _public_of(self.seed)

    @property
    def verifier(self) -> Verifier:
        return Verifier.from_public_key(self.name, self.public_key, self.alg)

    @property
    def skey(self) -> str:
        """Go's signer key text (for the Ed25519 key behind either signature type)."""
        ed_id = key_id(self.name, ALG_ED25519, self.public_key)
        encoded = base64.b64encode(bytes([ALG_ED25519]) + self.seed).decode()
        return f"PRIVATE+KEY+{self.name}+{ed_id:08x}+{encoded}"

    def as_cosigner(self) -> Signer:
        return Signer.from_seed(self.name, self.seed, ALG_COSIGNATURE_V1)

    def sign(self, text: bytes, *, timestamp: int | None = None) -> bytes:
        """The signature bytes (without the key id). A cosignature needs ``timestamp`` (POSIX
        seconds, not zero); a plain Ed25519 signature takes none."""
        key = Ed25519PrivateKey.from_private_bytes(self.seed)
        if self.alg == ALG_COSIGNATURE_V1:
            if timestamp is None or not 0 < timestamp <= _MAX_TIMESTAMP:
                raise ValueError("a cosignature needs a timestamp in 1..2**63-1")
            return timestamp.to_bytes(8, "big") + key.sign(cosigned_message(timestamp, text))
        if timestamp is not None:
            raise ValueError("an Ed25519 note signature takes no timestamp")
        return key.sign(text)


def _public_of(seed: bytes) -> bytes:
    return (
        Ed25519PrivateKey.from_private_bytes(seed)
        .public_key()
        .public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    )


def parse_signer(skey: str) -> Signer:
    """Go's ``PRIVATE+KEY+<name>+<hex id>+base64(0x01 || seed)``."""
    parts = skey.split("+", 4)
    if len(parts) != 5 or parts[0] != "PRIVATE" or parts[1] != "KEY":
        raise KeyFormatError("malformed verifier id")
    _, _, name, hex_id, key64 = parts
    ident = _hex_id(hex_id)
    try:
        raw = _b64decode(key64)
    except ValueError:
        raise KeyFormatError("malformed verifier id") from None
    if not is_valid_name(name) or not raw:
        raise KeyFormatError("malformed verifier id")
    if raw[0] != ALG_ED25519:
        raise KeyFormatError("unknown verifier algorithm")
    if len(raw) != 33:
        raise KeyFormatError("malformed verifier id")
    signer = Signer.from_seed(name, raw[1:])
    if signer.key_id != ident:
        raise KeyFormatError("invalid verifier hash")
    return signer


def cosigned_message(timestamp: int, text: bytes) -> bytes:
    return COSIGNATURE_HEADER + b"time %d\n" % timestamp + text


# --- notes -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Signature:
    name: str
    key_id: int
    base64: str

    @property
    def line(self) -> str:
        return f"— {self.name} {self.base64}\n"

    @property
    def signature(self) -> bytes:
        """The signature bytes after the key id."""
        return base64.b64decode(self.base64)[4:]


@dataclass
class Note:
    text: bytes
    sigs: list[Signature] = field(default_factory=list)
    unverified: list[Signature] = field(default_factory=list)


def _check_chars(msg: bytes) -> str:
    try:
        decoded = msg.decode("utf-8")
    except UnicodeDecodeError:
        raise MalformedNote() from None
    if any(ord(ch) < 0x20 and ch != "\n" for ch in decoded):
        raise MalformedNote()
    return decoded


def _parse_signature_line(line: bytes) -> tuple[Signature, bytes]:
    if not line.startswith(SIG_PREFIX):
        raise MalformedNote()
    name, _, b64 = line[len(SIG_PREFIX) :].decode().partition(" ")
    try:
        raw = _b64decode(b64)
    except ValueError:
        raise MalformedNote() from None
    if not is_valid_name(name) or not b64 or len(raw) < 5:
        raise MalformedNote()
    return Signature(name, int.from_bytes(raw[:4], "big"), b64), raw[4:]


def open_note(msg: bytes, verifiers: Iterable[Verifier]) -> Note:
    """Read a signed note and verify the signatures of the keys given; see the module text for
    what is ignored and what refuses the note."""
    _check_chars(msg)
    split = msg.rfind(b"\n\n")
    if split < 0:
        raise MalformedNote()
    text, sigs = msg[: split + 1], msg[split + 2 :]
    if not sigs or not sigs.endswith(b"\n"):
        raise MalformedNote()
    known: dict[tuple[str, int], list[Verifier]] = {}
    for verifier in verifiers:
        known.setdefault((verifier.name, verifier.key_id), []).append(verifier)
    note = Note(text)
    seen: set[tuple[str, int]] = set()
    seen_unverified: set[bytes] = set()
    lines = sigs[:-1].split(b"\n")
    if len(lines) > MAX_SIGNATURES:
        raise MalformedNote()
    for line in lines:
        signature, raw = _parse_signature_line(line)
        ident = (signature.name, signature.key_id)
        candidates = known.get(ident)
        if not candidates:
            if line not in seen_unverified:
                seen_unverified.add(line)
                note.unverified.append(signature)
            continue
        if len(candidates) > 1:
            raise AmbiguousKey(*ident)
        if ident in seen:
            continue
        seen.add(ident)
        if not candidates[0].verify(text, raw):
            raise InvalidNoteSignature(*ident)
        note.sigs.append(signature)
    if not note.sigs:
        raise UnverifiedNote(note)
    return note


def sign_note(
    text: bytes,
    signers: Sequence[Signer],
    *,
    keep: Sequence[Signature] = (),
    timestamp: int | None = None,
) -> bytes:
    """The signed note: ``text``, a blank line, the signatures in ``keep`` (those of a key not
    signing now), then one line per signer. ``timestamp`` is for cosigners."""
    _check_chars(text)
    if not text.endswith(b"\n"):
        raise MalformedNote()
    signing = {(s.name, s.key_id) for s in signers}
    out = [text, b"\n"]
    for sig in keep:
        if (sig.name, sig.key_id) in signing:
            continue
        if not is_valid_name(sig.name):
            raise MalformedNote()
        out.append(sig.line.encode())
    for signer in signers:
        if not is_valid_name(signer.name):
            raise NoteError("invalid signer")
        line = signature_line(signer, text, timestamp=timestamp)
        out.append(line.encode())
    return b"".join(out)


def signature_line(signer: Signer, text: bytes, *, timestamp: int | None = None) -> str:
    raw = signer.sign(text, timestamp=timestamp if signer.alg == ALG_COSIGNATURE_V1 else None)
    encoded = base64.b64encode(signer.key_id.to_bytes(4, "big") + raw).decode()
    return f"— {signer.name} {encoded}\n"


def cosignature_timestamp(signature: Signature) -> int:
    """The time a cosignature/v1 line says it was made (POSIX seconds)."""
    raw = signature.signature
    if len(raw) != 8 + 64:
        raise MalformedNote("malformed cosignature")
    return int.from_bytes(raw[:8], "big")
