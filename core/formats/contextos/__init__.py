"""ContextOS traces ("contextos-trace"): seed 004's replay harness, byte for byte.

A ContextOS trace is what the seed's ``readTrace(trace_id)`` returns, as one JSON document::

    {"trace_id": str, "schema_version": 1 (optional),
     "pack_version": "<name>@<version>", "kg_snapshot_id": "sha256:<64 hex>",
     "invoke": {"run_context": {...}, "request": {...}, "envelope_hash": "sha256:.."},
     "tool_envelopes": [{"call": {"call_id": str, ..., "payload_hash": "sha256:.."},
                         "result": {..., "payload_hash": "sha256:.."}}, ...],
     "decision_record": {"decision_key", "evidence_refs", "policy_decisions", "approvals",
                         "lineage", "outputs", "status"},
     "audit": {"chain_root_hash": str, "signed_by": str, "chain_prev_hash": "sha256:.."}}

**The chain** (``verify-chain.ts``): entries in this order, each hashed as
``"sha256:" + hex(sha256(prev + canonical(payload)))`` with ``prev`` the previous computed
hash (``""`` first) and compared with the hash recorded for it:

- ``idx 0``: ``{kind: "invoke", ctx: run_context, req: request}``, recorded
  ``invoke.envelope_hash``;
- ``idx i + 1``: ``{kind: "tool_call", call}``, recorded ``call.payload_hash ?? ""``;
- ``idx i + 1.5``: ``{kind: "tool_result", result}``, recorded ``result.payload_hash ?? ""``;
- ``idx 2n + 1``: ``{kind: "decision_record", dr: decision_record}``, recorded
  ``audit.chain_prev_hash``

(the last index is ``entries.length`` when it is pushed, so with two envelopes the indices are
0, 1, 1.5, 2, 2.5, 5). ``canonical`` is ``JSON.stringify(obj, Object.keys(obj).sort())``
(:func:`core.canonical.contextos`): the array replacer is an allow-list applied at every
depth, so inside ``ctx``, ``req``, ``call``, ``result`` and ``dr`` only keys spelt like one
of the payload's own top-level keys are hashed. The report lists those unprotected fields
(:func:`unprotected_paths`), as JSON pointers with ``*`` for array indices.

**The alternative rule** (contracts.md §1): the same entries hashed with a full recursive key
sort (``js-sorted``), each tool envelope without its own ``payload_hash``. The report says
which rule matched (``contextos.rule``); when neither does, the rule that verified the longer
prefix, with its ``broke_at``, ``expected`` (computed) and ``observed`` (recorded).

**Verify** checks the chain and the record (its chain entry, and ``record_hash`` =
``"sha256:" + sha256(canonical(decision_record))``) without the pinned inputs; given the
inputs found and a key ring, an input signed by a key the ring does not have is refused
first, ``UNKNOWN_KEY`` (nothing is stored: one rule for every format).

**Replay** (``index.ts``) needs the pinned Context Pack and Knowledge-Graph snapshot, retained
beside the trace; it refuses, naming which, when one was not retained, is unpinned or
unsigned, its envelope hash differs, it is signed by a key the registry does not have
(``UNKNOWN_KEY``: nothing was verified, nothing is halted) or its signature does not verify
(``INTEGRITY_FAILURE``). Then the chain; then the canonical loop the pack names
(a registered ``name@version``, :func:`register_loop`) runs over a lookup of the recorded
transcripts that fails on a missing call; then ``diffRecords`` over the seven fields gives
``byte_equal`` or ``diverged`` with ``diverged_at`` and every diverged field. ContextOS's own
status (``contextos.status``: ``byte_equal``, ``diverged``, ``tamper_detected``) stands beside
the console's.

Bounded (a 100 000-entry trace verifies in bounded memory) and fast where it is proven, exact
everywhere: ``orjson`` reads and writes only where writing back proves the same text or bytes,
else the strict decoder and the exact writers decide; hypothesis tests hold every fast path to
the exact one.

One module per concern, each importing only those before it:

- :mod:`.reader`: the strict, streaming, bounded read (:func:`parse`, :func:`loads`);
- :mod:`.chain`: the chain's entries, their canonical bytes, :func:`verify_chain`,
  :func:`record_hash`;
- :mod:`.differ`: ``diffRecords`` (``diff_records``);
- :mod:`.inputs`: the pinned pack and KG snapshot (:func:`parse_input`, :func:`find_inputs`);
- :mod:`.loop`: the registered canonical loops (:func:`register_loop`, :func:`run_loop`);
- :mod:`.report`: :func:`verify` and :func:`replay`, as reports: one list of named checks
  run by ``core.replay.pipeline``.

This package re-exports the names the rest of the console, the bench and the tests use.

Pure: no Django.
"""

from __future__ import annotations

from core.errors import ReplayError
from core.formats.contextos.chain import (
    _PLISTS,
    ALTERNATIVE,
    NEVER_HASHED,
    REFERENCE,
    RULES,
    Entry,
    _exact_reference_bytes,
    _parsed_record_hash,
    entries,
    record_hash,
    reference_bytes,
    unprotected_paths,
    verify_chain,
)
from core.formats.contextos.inputs import (
    INPUT_SUFFIXES,
    KG_KIND,
    MAX_INPUT_BYTES,
    PACK_KIND,
    Inputs,
    KgSnapshot,
    Pack,
    find_inputs,
    kg_snapshot_id,
    pack_envelope_hash,
    parse_input,
)
from core.formats.contextos.loop import LOOPS, refund_triage_v1, register_loop, run_loop
from core.formats.contextos.reader import (
    _BATCH_TRIES,
    FORMAT,
    RECORD_FIELDS,
    SCHEMA_VERSION,
    ContextosTrace,
    _parse_indented,
    _read_first,
    _Reader,
    loads,
    parse,
)
from core.formats.contextos.report import ContextosReport, refused_report, replay, verify
from core.formats.jsonstrict import NOT_PROVEN

__all__ = [
    "ALTERNATIVE",
    "FORMAT",
    "INPUT_SUFFIXES",
    "KG_KIND",
    "LOOPS",
    "MAX_INPUT_BYTES",
    "NEVER_HASHED",
    "NOT_PROVEN",
    "PACK_KIND",
    "RECORD_FIELDS",
    "REFERENCE",
    "RULES",
    "SCHEMA_VERSION",
    "_BATCH_TRIES",
    "_PLISTS",
    "ContextosReport",
    "ContextosTrace",
    "Entry",
    "Inputs",
    "KgSnapshot",
    "Pack",
    "ReplayError",
    "_Reader",
    "_exact_reference_bytes",
    "_parse_indented",
    "_parsed_record_hash",
    "_read_first",
    "entries",
    "find_inputs",
    "kg_snapshot_id",
    "loads",
    "pack_envelope_hash",
    "parse",
    "parse_input",
    "record_hash",
    "reference_bytes",
    "refund_triage_v1",
    "refused_report",
    "register_loop",
    "replay",
    "run_loop",
    "unprotected_paths",
    "verify",
    "verify_chain",
]
