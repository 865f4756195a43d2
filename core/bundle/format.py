"""The bundle's format, shared by the writer, the verifier and the tlog section: the format
and member names, limits, the canonical envelope, and the failure the checks raise.

Pure: no Django (see the package docstring).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any, Final

from core.canonical import jcs
from core.ledger import chain, codes

BUNDLE_FORMAT: Final = "replay-audit-console/evidence-bundle/v1"
MANIFEST_TYPE: Final = "replay-audit-console/evidence-bundle-manifest/v1"
#: what ``build_bundle`` has ``sign`` sign first, to learn the key id and public key that the
#: manifest then names (a fixed text that is neither JSON nor a ledger hash, so it can never
#: be mistaken for anything else the server signs)
KEY_PROBE: Final = b"replay-audit-console/evidence-bundle/v1 signer probe"

SUMMARY: Final = "summary.json"
KEYS: Final = "ledger/keys.json"
EVENTS: Final = "ledger/events.json"
CHECKPOINT: Final = "ledger/checkpoint.json"
TLOG: Final = "ledger/tlog.json"
TLOG_TYPE: Final = "replay-audit-console/bundle-tlog/v1"
MAX_PROOF_HASHES: Final = 64

DEFAULT_MAX_BYTES: Final = 256 * 1024 * 1024
MAX_DEPTH: Final = 200
MAX_MEMBERS: Final = 200_000
MAX_KEYS: Final = 5_000_000

Sign = Callable[[bytes], tuple[str, str, str]]

_HEX64 = re.compile(r"[0-9a-f]{64}")
_HEX128 = re.compile(r"[0-9a-f]{128}")
_NAME = re.compile(r"(summary\.json|traces/[0-9a-f]{64}/(data|report)\.json|ledger/[a-z]+\.json)")
_SHA = re.compile(r"(sha256:)?([0-9a-f]{64})")
_EVENT_FIELDS: Final = frozenset(
    ("actor" if f == "actor_label" else f) for f in chain.FIELDS
)  # the stored row's fields, ``actor_label`` spelled ``actor`` as in the hashed body
_VALUE_FIELDS: Final = ("subject_ref", "location", "path", "value", "released")
_CHAIN_TO_BUNDLE: Final = {
    codes.CHAIN_HASH: codes.BUNDLE_EVENT_HASH,
    codes.CHAIN_MALFORMED: codes.BUNDLE_EVENT_HASH,
    codes.CHAIN_KEY_UNKNOWN: codes.BUNDLE_EVENT_SIGNATURE,
    codes.CHAIN_KEY_WINDOW: codes.BUNDLE_EVENT_SIGNATURE,
    codes.CHAIN_SIGNATURE: codes.BUNDLE_EVENT_SIGNATURE,
    codes.CHAIN_ACTOR_SIGNATURE: codes.BUNDLE_EVENT_SIGNATURE,
}


_ENVELOPE_KEYS: Final = frozenset(("format", "manifest", "members", "signature"))


def _envelope(format_: Any, manifest: Any, members: Mapping[str, bytes], signature: Any) -> bytes:
    """``jcs`` of a bundle's value, from its members' canonical bytes (each written once).

    The envelope's keys are ASCII and so are member names (the caller checks), so ``sorted``
    is RFC 8785's order (UTF-16 code units).
    """
    body = b",".join(jcs(name) + b":" + members[name] for name in sorted(members))
    return b"".join(
        (
            b'{"format":',
            jcs(format_),
            b',"manifest":',
            jcs(manifest),
            b',"members":{',
            body,
            b'},"signature":',
            jcs(signature),
            b"}",
        )
    )


def _canonical(doc: Any) -> tuple[bytes, dict[str, bytes] | None]:
    """``jcs(doc)``, and each member's canonical bytes when ``doc`` has a bundle's shape."""
    if (
        isinstance(doc, dict)
        and set(doc) == _ENVELOPE_KEYS
        and isinstance(doc["members"], dict)
        and all(name.isascii() for name in doc["members"])
    ):
        members = {name: jcs(value) for name, value in doc["members"].items()}
        return _envelope(doc["format"], doc["manifest"], members, doc["signature"]), members
    return jcs(doc), None


class _Fail(Exception):
    def __init__(self, code: str, where: str, message: str) -> None:
        super().__init__(f"{code} at {where}: {message}")
        self.code, self.where, self.message = code, where, message


def _malformed(where: str, message: str) -> _Fail:
    return _Fail(codes.BUNDLE_MALFORMED, where, message)


def _need(cond: bool, where: str, message: str) -> None:
    if not cond:
        raise _malformed(where, message)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
