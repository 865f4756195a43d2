"""MACE reflective logs as MACE writes them, with their snapshot files (seed 003).

A reflective log is one JSON object: the ReflectiveLogEntry MACE's writer persists
(``log_id``, ``timestamp``, ``percept``, ``router_decision``, ``council_votes``,
``agent_outputs``, ``claims``, ``evidence_items``, ``memory_reads``, ``memory_writes``,
``brainstate_before``, ``brainstate_after``, ``final_output``, ``immutable_subpayload``,
``signature``, ``signature_key_id``) and, optionally, what seed 003 adds to it for replay
(§3, §9): ``job_id``, ``job_seed``, the full
``iteration_trace``, the five snapshot ids (``selfrep_snapshot_id``,
``brainstate_snapshot_id``, ``router_snapshot_id``, ``privacy_snapshot_id``,
``governance_snapshot_id``), the ``REPLAYABLE`` flag, and optionally ``event_refs`` (the
ordered events it used) and ``agent_outputs`` (outputs persisted for production replay).

The writer signs an *immutable sub-payload* only::

    immutable_subpayload = {"log_id", "percept_text", "final_output_text", "router_decision_id"}
    signature = hex(HMAC-SHA256(secret(signature_key_id), mace-v1(immutable_subpayload)))

so the console checks (1) that the recorded sub-payload is the one the log's own fields give,
and (2) the HMAC, with the key looked up in the verification-key registry by
``signature_key_id``. Every other field of the log is outside the signature: the report lists
them in ``unprotected_fields``.

A snapshot file (MACE's own; content-addressed, named ``<snapshot_id>.json``)::

    {"snapshot_id": hex, "kind": "selfrep"|"brainstate"|"router"|"privacy"|"governance",
     "schema_version": 1, "seed_namespace": str, "config_hash": hex,
     "generator": "sha256(config_hash:schema_version:seed_namespace)", "body": {...},
     "signature": hex, "signature_key_id": str}

    config_hash = hex(sha256(mace-v1(body)))
    snapshot_id = hex(sha256(config_hash + ":" + schema_version + ":" + seed_namespace))  (§5)
    signature   = hex(HMAC-SHA256(secret, mace-v1(the file without signature, signature_key_id)))

An event reference is ``{"sequence_index", "event_type", "event_id"}`` with
``event_id = hex(sha256(job_seed + ":" + sequence_index + ":" + event_type))`` (§5), in
strictly increasing ``sequence_index`` order (§4).

A log with none of these replay fields (:data:`REPLAY_FIELDS`) is one exactly as MACE's
writer persists it: it is verified by its signed part alone (``format``, ``halts``,
``immutable_subpayload``, ``signature``) and is not replayable, saying why (no job seed, no
snapshots: :data:`NOT_REPLAYABLE`); production replay refuses it with ``MISSING_SNAPSHOT``.
A log with any of them must carry them all.

Checks of a log with its replay fields, in order; the first failure ends the report with its
exact code: ``format``
(version refusals: ``UNSUPPORTED_SCHEMA_VERSION``), ``halts``, ``required_snapshots``
(``MISSING_SNAPSHOT``), ``snapshots`` (id provenance and signatures: ``INTEGRITY_FAILURE``;
an unregistered key: ``UNKNOWN_KEY``), ``event_ids``, ``immutable_subpayload``,
``signature``, ``replayable`` (a ``REPLAYABLE: true`` log whose outputs were not persisted:
``MISSING_PERSISTED_AGENT_OUTPUT``), ``persisted_outputs`` (production mode: a missing one is
``MISSING_PERSISTED_AGENT_OUTPUT``, one that differs from the iteration's ``REPLAY_DIVERGENCE``).

MACE's router and agents are not part of the log, so nothing is re-executed: re-verifying a
stored log re-checks all of the above against the snapshots stored with it.

One module per concern, each importing only those before it:

- :mod:`.reader`: the strict, bounded read of a log and of its snapshot files
  (:func:`parse_log`, :func:`parse_snapshot`, :func:`check_snapshot`);
- :mod:`.ids`: snapshot ids and their provenance, event ids (:func:`config_hash_of`,
  :func:`snapshot_id_of`, :func:`event_id_of`, :func:`stored_snapshot_tampered`);
- :mod:`.signing`: the HMAC signatures over the immutable sub-payload and the snapshot files,
  and the key registry's answer (:func:`hmac_hex`, :func:`snapshot_signed_bytes`,
  :func:`unprotected_fields`, :func:`sign_log`, :func:`make_snapshot`);
- :mod:`.report`: :func:`verify` and :func:`refused`, as reports;
- :mod:`.stored`: what a stored row records of a log (:func:`stored_facts`);
- :mod:`.display`: the trace page's panel (:func:`panel`).

This package re-exports the names the rest of the console, the bench and the tests use.

Pure: no Django.
"""

from __future__ import annotations

from core.formats.mace.display import panel
from core.formats.mace.ids import (
    config_hash_of,
    failed_snapshot_id,
    snapshot_id_of,
    stored_snapshot_tampered,
)
from core.formats.mace.reader import (
    FORMAT,
    MAX_LOG_BYTES,
    REPLAY_FIELDS,
    SCHEMA_VERSION,
    SNAPSHOT_FIELDS,
    Log,
    parse_log,
)
from core.formats.mace.report import NOT_REPLAYABLE, refused, verify
from core.formats.mace.signing import hmac_hex, snapshot_signed_bytes
from core.formats.mace.stored import SNAPSHOT_KIND, stored_facts

__all__ = [
    "FORMAT",
    "MAX_LOG_BYTES",
    "NOT_REPLAYABLE",
    "REPLAY_FIELDS",
    "SCHEMA_VERSION",
    "SNAPSHOT_FIELDS",
    "SNAPSHOT_KIND",
    "Log",
    "config_hash_of",
    "failed_snapshot_id",
    "hmac_hex",
    "panel",
    "parse_log",
    "refused",
    "snapshot_id_of",
    "snapshot_signed_bytes",
    "stored_facts",
    "stored_snapshot_tampered",
    "verify",
]
