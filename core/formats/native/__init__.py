"""The native trace format, "replay-trace" v1 (contracts.md §2).

Two spellings of one trace: a JSON document (`*.trace.json`) or JSON Lines (`*.trace.jsonl`:
the document without `events`, `steps` and `outputs` on the first line, then one record a
line), either optionally gzipped. JSON Lines are streamed so memory stays bounded whatever
the trace's size; both spellings verify identically.

Hashing rules (all with the `mace-v1` canonical profile):

- `snapshot_id = "sha256:" + hex(sha256(mace_v1(body)))`; its signature is over those bytes;
- `event_id = hex(sha256(job_seed + ":" + seq + ":" + type))`;
- an event recording a memory write (its payload has `wm_id` and `wm_counter`, or
  `episodic_id` and `episodic_counter`): `hex(sha256(job_seed + ":" + counter))` each
  (seed 003 §5, :mod:`core.formats.memory_ids`), checked with the event ids;
- `hash_i = "sha256:" + hex(sha256(prev + mace_v1({seq, type, event_id, payload})))`,
  `prev` = "" for the first event, else the previous event's `hash` string;
- output `hash = "sha256:" + hex(sha256(mace_v1(content)))`;
- the seal signs `mace_v1` of the whole document without `seal`, `meta`, `job.started_at`,
  snapshot `body`s and output `content`s. Fields the seal does not protect: `meta` and
  `job.started_at` (informational only); snapshot bodies and output contents are protected
  through `snapshot_id` and the output `hash`.

One module per concern, each importing only those before it:

- :mod:`.schema`: the format's names and key sets, the checks of the header and of each
  record (:func:`validate_header`, :func:`validate_event`, ...);
- :mod:`.hashing`: the hashing rules above (:func:`snapshot_id_of`, :func:`event_id_of`,
  :func:`event_hash`, :func:`output_hash_of`, ...);
- :mod:`.seal`: the sealed message (:class:`SealMessage`, :func:`seal_message_of`);
- :mod:`.trace`: the :class:`Limits` of an upload and the :class:`NativeTrace` a read gives,
  its records and rows;
- :mod:`.lines`: JSON Lines records read one at a time, in this process;
- :mod:`.parallel`: JSON Lines records read in chunks, by worker processes;
- :mod:`.reader`: :func:`open_native` (gzip, the spelling, the document, the JSONL header);
- :mod:`.writer`: the two spellings written (:func:`dumps_document`, :func:`iter_jsonl`).

This package re-exports the names the rest of the console, the bench and the tests use.

Pure: no Django.
"""

from __future__ import annotations

from core.formats.native.hashing import (
    canonical,
    event_body_bytes,
    event_hash,
    event_id_deriver,
    event_id_of,
    output_hash_of,
    sealed_event_bytes,
    snapshot_id_of,
)
from core.formats.native.reader import GZIP_MAGIC, _Prefixed, open_native
from core.formats.native.schema import FORMAT, SCHEMA_VERSION
from core.formats.native.seal import SealMessage, seal_message_of
from core.formats.native.trace import (
    DEFAULT_LIMITS,
    Limits,
    NativeTrace,
    Row,
    expand_events,
    orjson_loads,
)
from core.formats.native.writer import dumps_document, iter_jsonl

__all__ = [
    "DEFAULT_LIMITS",
    "FORMAT",
    "GZIP_MAGIC",
    "SCHEMA_VERSION",
    "Limits",
    "NativeTrace",
    "Row",
    "SealMessage",
    "_Prefixed",
    "canonical",
    "dumps_document",
    "event_body_bytes",
    "event_hash",
    "event_id_deriver",
    "event_id_of",
    "expand_events",
    "iter_jsonl",
    "open_native",
    "orjson_loads",
    "output_hash_of",
    "seal_message_of",
    "sealed_event_bytes",
    "snapshot_id_of",
]
