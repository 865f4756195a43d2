"""The evidence bundle of a Data Subject Request: build it, and check it offline.

Pure: no Django, no clock, no I/O, no randomness. The caller (the ``dsr`` app) gathers what
goes in, already redacted or released, and a ``sign`` function for the server key; anyone
with the file alone (and, to trust it, the server's public key or a ledger checkpoint) can
check it with :func:`verify_bundle` or ``python -m dsr.bundle_cli FILE``.

The file
--------

One JSON text in RFC 8785 canonical form (``core.canonical.jcs``, the canonicalisation the
ledger, checkpoints and approvals already use)::

    {"format": "replay-audit-console/evidence-bundle/v1",
     "manifest": {"type": MANIFEST_TYPE, "request_ref": str, "subject_refs": [str],
                  "created_at": str, "nothing_held": bool,
                  "server_key": {"alg": "ed25519", "key_id": str, "public_key": hex},
                  "members": [{"name": str, "sha256": hex, "size": int}, ...]},
     "members": {"<name>": <JSON value>, ...},
     "signature": "<128 hex: Ed25519 by server_key over jcs(manifest)>"}

A member's ``sha256`` and ``size`` are those of ``jcs(value)``; the manifest lists them in a
fixed order (``summary.json``, then per trace ``traces/<file sha256>/data.json`` and
``report.json``, then ``ledger/keys.json``, ``ledger/events.json`` and, when given,
``ledger/checkpoint.json``, then, from bundles with proofs on, ``ledger/tlog.json``).
Subjects are named by opaque refs only, never by identifier.

Why canonical JSON rather than a zip: the bytes are a function of the content alone, so a
build is reproducible with nothing to pin (a zip carries timestamps, attributes, extra fields,
a comment and a central directory that readers ignore, so bytes could change unnoticed), and
the verifier insists the file *is* ``jcs`` of what it parsed: every byte is then either
structure, a signed manifest value or a hashed member value, and changing any single byte
fails (tested for every position). There is no decompression (no zip bomb) and no path
written to disk (no traversal); the size, nesting and key count are bounded before and while
parsing. A person reads it with any JSON viewer; the PDF (``core.bundle.pdf``) is the printable
summary.

Ledger events are stored as the ledger stores them (each event's body fields, ``prev_hash``,
``hash``, ``server_signature``) with the server keys' public halves and effective windows and
the member keys' public keys, so each event is checked exactly as ``governance verify``
checks it (``core.ledger.chain.check_row``). A bundle holds the events concerning its traces,
not the whole ledger, so links are checked where two events are consecutive, and against the
ledger checkpoint when one is included (its genesis and head hashes); that events *between*
them were not removed is what ``governance check-checkpoint`` proves on the server.

Transparency log (``ledger/tlog.json``, versioned by its ``type`` :data:`TLOG_TYPE`; bundles
made before it have no such member and verify as before)::

    {"type": TLOG_TYPE,
     "checkpoint": "<C2SP signed note: origin, size, base64 root; one or more signature lines>",
     "vkeys": ["<name>+<hex id>+<base64 key>", ...],
     "inclusion": [{"seq": int, "proof": [base64 hash, ...]}, ...],
     "consistency": [{"old_size": int, "proof": [base64 hash, ...]}, ...]}

The leaf of event ``seq`` is its ``hash`` string (``docs/transparency.md``), recomputed from
its body and ``prev_hash`` by the event check above, so each event is proven in the
checkpoint's RFC 9162 tree with O(log n) hashes. The note is checked with the verifier keys
the auditor gives (``--vkey``; without one, with the ``vkeys`` the bundle carries, which says
only that it is intact). Signature lines of keys not given (a witness's cosignature) are
ignored by the check and kept in the note: that is where cosignatures go. ``consistency``
holds proofs that the checkpoint extends earlier ones (``--older-checkpoint``).

Checks run in this order and the first failure is named (codes in ``core.ledger.codes``):
size and JSON (``BUNDLE_MALFORMED``), canonical form, the envelope and the manifest, the
signature over the manifest (``BUNDLE_SIGNATURE``), trust (``BUNDLE_UNTRUSTED_KEY``, only when
a trusted key or checkpoint is given), each listed member present (``BUNDLE_MEMBER_MISSING``)
with its hash and size (``BUNDLE_MEMBER_HASH``), no unlisted member
(``BUNDLE_MEMBER_EXTRA``), the members' shapes, each ledger event's hash
(``BUNDLE_EVENT_HASH``) and signatures (``BUNDLE_EVENT_SIGNATURE``), their order and links
(``BUNDLE_CHAIN``), then the transparency log: the checkpoint's signature
(``BUNDLE_CHECKPOINT``), each event's inclusion proof (``BUNDLE_INCLUSION``), and that it
extends an older checkpoint (``BUNDLE_CONSISTENCY``).

The package, by concern: :mod:`core.bundle.format` (names, limits, the canonical envelope),
:mod:`core.bundle.writer` (:func:`build_bundle`), :mod:`core.bundle.verifier`
(:func:`verify_bundle`) and :mod:`core.bundle.tlogsection` (``ledger/tlog.json``: written and
checked). The names callers use are importable from ``core.bundle``.
"""

from core.bundle.format import (
    BUNDLE_FORMAT,
    CHECKPOINT,
    DEFAULT_MAX_BYTES,
    EVENTS,
    KEY_PROBE,
    KEYS,
    MANIFEST_TYPE,
    MAX_DEPTH,
    MAX_KEYS,
    MAX_MEMBERS,
    MAX_PROOF_HASHES,
    SUMMARY,
    TLOG,
    TLOG_TYPE,
    Sign,
)
from core.bundle.tlogsection import tlog_section
from core.bundle.verifier import BundleCheck, pdf_summary, read_members, verify_bundle
from core.bundle.writer import (
    BundleInputs,
    TraceEvidence,
    build_bundle,
    event_record,
    server_key_record,
)

__all__ = [
    "BUNDLE_FORMAT",
    "CHECKPOINT",
    "DEFAULT_MAX_BYTES",
    "EVENTS",
    "KEYS",
    "KEY_PROBE",
    "MANIFEST_TYPE",
    "MAX_DEPTH",
    "MAX_KEYS",
    "MAX_MEMBERS",
    "MAX_PROOF_HASHES",
    "SUMMARY",
    "TLOG",
    "TLOG_TYPE",
    "BundleCheck",
    "BundleInputs",
    "Sign",
    "TraceEvidence",
    "build_bundle",
    "event_record",
    "pdf_summary",
    "read_members",
    "server_key_record",
    "tlog_section",
    "verify_bundle",
]
