"""Every verdict error code, in one place. The strings are a public contract (contracts.md §3).

Tests, alerts, the API and the CLI compare against these exact strings; never spell one
anywhere else.
"""

from __future__ import annotations

from typing import Any

MISSING_SNAPSHOT = "MISSING_SNAPSHOT"
INTEGRITY_FAILURE = "INTEGRITY_FAILURE"
MISSING_PERSISTED_AGENT_OUTPUT = "MISSING_PERSISTED_AGENT_OUTPUT"
RESULT_MISMATCH = "RESULT_MISMATCH"
REPLAY_DIVERGENCE = "REPLAY_DIVERGENCE"
FORCE_CONTINUE_REQUIRED = "FORCE_CONTINUE_REQUIRED"
REPLAY_TIMEOUT = "REPLAY_TIMEOUT"
UNSUPPORTED_SCHEMA_VERSION = "UNSUPPORTED_SCHEMA_VERSION"
MALFORMED_TRACE = "MALFORMED_TRACE"
HASH_MISMATCH = "HASH_MISMATCH"
VERSION_MISMATCH = "VERSION_MISMATCH"
CAPABILITY_NOT_FOUND = "CAPABILITY_NOT_FOUND"
INVALID_CONTRACT = "INVALID_CONTRACT"
INPUT_HASH_MISMATCH = "INPUT_HASH_MISMATCH"
FORCE_HALT_ACTIVE = "FORCE_HALT_ACTIVE"
UNKNOWN_KEY = "UNKNOWN_KEY"
TRACE_EXPIRED = "TRACE_EXPIRED"
AMBIGUOUS_TRACE_ID = "AMBIGUOUS_TRACE_ID"
INCOMPLETE_TRACE = "INCOMPLETE_TRACE"

#: The codes that say a file's recorded hashes no longer bind its content (a chain, a
#: signature, an AHD input's hash, a Paxman replay_hash, a Verist inputHash or artifact hash): a
#: governed replay that ends with one appends INTEGRITY_FAILURE and halts the file
#: (governance.services).
INTEGRITY_CODES = frozenset({INTEGRITY_FAILURE, HASH_MISMATCH, INPUT_HASH_MISMATCH})

#: code -> when it is raised (rendered in docs and the API schema; a convention test
#: checks every code here is documented and used).
ERROR_CODES: dict[str, str] = {
    MISSING_SNAPSHOT: "a required snapshot is absent or no longer retained",
    INTEGRITY_FAILURE: "a signature, snapshot id, event id or chain hash does not verify",
    MISSING_PERSISTED_AGENT_OUTPUT: (
        "production replay needs an external output that was not persisted"
    ),
    RESULT_MISMATCH: "the recomputed final answer differs from the stored one",
    REPLAY_DIVERGENCE: "a recomputed intermediate output differs from the recorded one",
    FORCE_CONTINUE_REQUIRED: (
        "continuing past a divergence was asked for without an approved force-continue"
    ),
    REPLAY_TIMEOUT: "the replay exceeded its time or iteration cap",
    UNSUPPORTED_SCHEMA_VERSION: "a format's schema version is newer than the console supports",
    MALFORMED_TRACE: "the input is not a well-formed trace of the detected/declared format",
    HASH_MISMATCH: (
        "a Paxman artifact's replay_hash, or a Verist artifact's hash, does not recompute"
    ),
    VERSION_MISMATCH: "a Paxman artifact's version is not supported by this console",
    CAPABILITY_NOT_FOUND: (
        "a pinned capability is not registered (a Paxman capability, or a native step's "
        "function or runtime, or a ContextOS pack's canonical loop)"
    ),
    INVALID_CONTRACT: "the contract supplied for a Paxman replay is invalid",
    INPUT_HASH_MISMATCH: "a Verist snapshot's input does not hash to its inputHash",
    FORCE_HALT_ACTIVE: (
        "the stored file, its trace id or one of its snapshots is halted until a council "
        "FORCE_HALT_CLEAR (the message names each halt: seq, target, reason)"
    ),
    UNKNOWN_KEY: (
        "the key a signature names (a native trace's snapshot or seal, a ContextOS pack or KG "
        "snapshot, a MACE log or snapshot) is not in the verification-key registry: nothing "
        "was verified, nothing is stored or halted (register it with `manage.py keys add-hmac` "
        "or `add-ed25519`)"
    ),
    TRACE_EXPIRED: (
        "retention expired the stored file: its content is gone, its hashes stay (the message "
        "says when and by which rule)"
    ),
    INCOMPLETE_TRACE: (
        "an OpenTelemetry trace's span tree is not whole: a span names a parent the trace "
        "does not hold (the exporter lost it, or the root never arrived); the audit reached "
        "no verdict on what is missing"
    ),
    AMBIGUOUS_TRACE_ID: (
        "a replay was asked for by a trace id several stored files carry; nothing ran (the "
        "message names each copy: upload id, sha256, format, uploaded at; pick one by "
        "upload:ID or its sha256)"
    ),
}


class ReplayError(Exception):
    """A refusal with one exact code, a message a person can act on, and where it broke."""

    def __init__(
        self,
        code: str,
        message: str,
        *,
        broke_at: int | str | None = None,
        expected: str | None = None,
        observed: str | None = None,
        detail: dict[str, Any] | None = None,
    ) -> None:
        if code not in ERROR_CODES:
            raise ValueError(f"unknown error code {code!r}")
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.broke_at = broke_at
        self.expected = expected
        self.observed = observed
        self.detail = detail or {}
