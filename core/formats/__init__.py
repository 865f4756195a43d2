"""Trace formats, one package each (`core/formats/<name>/`, its format object in
`<name>/adapter.py`), all behind one interface (`protocol.TraceFormat`) and one registry
(`formats()`): the native "replay-trace" (`native/`), a ContextOS trace (`contextos/`), a
Paxman ExecutionArtifact (`paxman/`), an AHD replay sidecar (`ahd/`), a Verist snapshot
(`verist/`) and a MACE reflective log (`mace/`); what they share is `common.py`; installed
packages add formats through the entry-point group `replay_console.formats`.

Every registered format is detected (`detect_format`), verified (`manage.py verify`, the
upload page, `POST /api/traces/verify/`), stored (`ingest`, the upload page,
`POST /api/traces/upload/`), listed (`?format=`) and re-verified by a governed replay the same
way; see CONTRIBUTING.md "Add a trace format".

The adapters import this package, so the registry is built where it is first used, never at
the top of this module; and it imports no format package, so that none of them imports
another through it (the import-linter contract ``formats``).
"""

from __future__ import annotations

import io
import re
from collections.abc import Mapping, Sequence
from dataclasses import fields, replace
from typing import IO, Any

from core.formats.common import top_level_keys
from core.formats.protocol import (
    DEFAULT_INPUT_LIMITS,
    CompanionRule,
    InputLimits,
    Setting,
    TraceFormat,
)
from core.replay import registry as step_functions
from core.replay import runtime

PAXMAN = "paxman-artifact"  # paxman.FORMAT
AHD = "ahd-replay"  # ahd.FORMAT
VERIST = "verist-snapshot"  # verist.FORMAT
#: the native format (``native.FORMAT``), what a file nothing else claims is read as: its
#: parser names what is wrong with it
NATIVE = "replay-trace"

#: How much of a file detection reads: enough for the first top-level keys of any format.
SNIFF_BYTES = 1024**2


def formats():
    """The one registry of formats (built-in plus entry points): `protocol.FormatRegistry`."""
    from core.formats.protocol import default_formats

    return default_formats()


_registry: step_functions.Registry | None = None


def default_registry() -> step_functions.Registry:
    """The step functions a replay re-executes, built once per process: the reference
    runtime's (``core.replay.runtime``), each registered format's own (its optional
    ``functions(registry)``: Verist's reference step), then what installed packages register
    through ``replay_console.functions`` (``core.replay.registry.load_entry_points``)."""
    global _registry  # noqa: PLW0603 - built once per process, then read-only
    if _registry is None:
        registry = step_functions.Registry()
        runtime.register(registry)
        for fmt in formats():
            functions = getattr(fmt, "functions", None)
            if functions is not None:
                functions(registry)
        step_functions.load_entry_points(registry)
        _registry = registry
    return _registry


def snapshot_tampered(kind: str, body: object, snapshot_id: str) -> bool:
    """Whether a stored snapshot of ``kind`` no longer is what its id says, as the format
    that owns that kind checks it (``snapshot_tampered``): the one whose ``snapshot_prefix``
    is the longest that ``kind`` starts with."""
    owners = [
        fmt
        for fmt in formats()
        if getattr(fmt, "snapshot_tampered", None) is not None
        and kind.startswith(getattr(fmt, "snapshot_prefix", ""))
    ]
    if not owners:
        return False
    owner = max(owners, key=lambda fmt: len(getattr(fmt, "snapshot_prefix", "")))
    return bool(owner.snapshot_tampered(body, snapshot_id))  # type: ignore[attr-defined]


def failed_snapshot(report: Mapping[str, object]) -> str | None:
    """The snapshot id an integrity failure of ``report`` is about, as its format reads its
    failed ``snapshots`` check (``failed_snapshot``); None for a format without one."""
    fmt = formats().get(str(report.get("format")))
    find = getattr(fmt, "failed_snapshot", None)
    return find(report) if find is not None else None


def input_limits(fmt: object, setting: Setting) -> InputLimits:
    """A format's companion limits (its ``input_limits(setting)``, else
    ``protocol.DEFAULT_INPUT_LIMITS``), its archive limits filled in
    (``archive.DEFAULT_LIMITS`` where it gives none)."""
    from core.formats import archive

    own = getattr(fmt, "input_limits", None)
    found = own(setting) if own is not None else DEFAULT_INPUT_LIMITS
    if found.archive is None:
        found = replace(found, archive=archive.DEFAULT_LIMITS)
    return found


def largest_input_limits(setting: Setting) -> InputLimits:
    """The largest companion limits any registered format allows, each limit on its own:
    what a companion is read up to before the format it belongs to is known (a multipart
    upload's parts, a command's ``--inputs`` and ``--contract``); that format then refuses
    what is beyond its own."""
    every = [input_limits(fmt, setting) for fmt in formats()] or [input_limits(None, setting)]
    archives = [limits.archive for limits in every]
    widest = {
        name: max(getattr(limits, name) for limits in archives)
        for name in (f.name for f in fields(archives[0]))
    }
    return InputLimits(
        max_input_bytes=max(limits.max_input_bytes for limits in every),
        archive=replace(archives[0], **widest),
    )


def rooted_format(filename: str) -> TraceFormat[Any] | None:
    """The registered format that verifies a file of this name against a root on disk its
    inputs come from (``rooted``: an AHD sidecar and its checkout), or None."""
    for fmt in formats():
        rooted = getattr(fmt, "rooted", None)
        if rooted is not None and rooted(filename):
            return fmt
    return None


def format_names() -> list[str]:
    """Every format this console reads and stores, by name."""
    return formats().names()


def companion_rules() -> list[dict[str, object]]:
    """Every registered format's companion rules as data (``CompanionRule.as_json`` with the
    format's name), in registration order: what the upload page groups a drop by."""
    return [
        {"format": fmt.name, **rule.as_json()}
        for fmt in formats()
        for rule in getattr(fmt, "companions", ())
    ]


#: what a format's companions are, in words, by their role (the upload page's drop zone)
COMPANION_WORDS = {"input": "its input files", "contract": "its contract"}


def drop_formats() -> list[dict[str, str]]:
    """Every registered format as the upload page's drop zone names it, from the registry:
    its ``label`` and, in words, what may be dropped with it (its companion rules' roles, and
    the files it names when it has ``input_names``), in registration order."""
    found = []
    for fmt in formats():
        roles = [rule.role for rule in getattr(fmt, "companions", ())]
        if getattr(fmt, "input_names", None) is not None:
            roles.append("input")
        words = [COMPANION_WORDS.get(role, role) for role in dict.fromkeys(roles)]
        found.append({"name": fmt.name, "label": fmt.label, "with": " or ".join(words)})
    return found


def named_input_words(name: str) -> str:
    """What a file a file of format ``name`` names (``input_names``) is, in words: the
    ``describes`` of the format's rule by content (``named_by``: a MACE log's snapshots), else
    of its first input rule (an AHD sidecar's inputs); "" when it has none."""
    fmt = formats().get(name)
    rules = [rule for rule in getattr(fmt, "companions", ()) if rule.role == "input"]
    rules.sort(key=lambda rule: not rule.named_by)
    return rules[0].describes if rules else ""


def name_rules(fmt: object) -> list[CompanionRule]:
    """A format's companion rules by name (not ``named_by``: those read the file)."""
    return [rule for rule in getattr(fmt, "companions", ()) if not rule.named_by]


def companion_pattern(rule: CompanionRule, stem: str | None) -> re.Pattern[str]:
    """A rule's companion pattern for the trace whose name less its ``trace`` match is
    ``stem`` (None: for any trace)."""
    filled = rule.companion.replace("{stem}", ".+" if stem is None else re.escape(stem))
    return re.compile(filled, re.IGNORECASE)


def group_companions(
    names: Sequence[str], detected: Mapping[str, str] | None = None
) -> dict[str, list[tuple[str, CompanionRule]]]:
    """Which files of one upload go with which, by the formats' companion rules: owner ->
    [(companion, rule)], in the order of ``names``. What ``upload.js`` does with the same rules
    (a file whose name matches a rule's ``trace`` takes the others matching its ``companion``);
    the server also takes a file ``detected`` as the rule's format as an owner whatever its
    name (it has read the file's first bytes, the page has not). A companion is never an owner."""
    detected = detected or {}
    groups: dict[str, list[tuple[str, CompanionRule]]] = {}
    for fmt in formats():
        for rule in name_rules(fmt):
            trace = re.compile(rule.trace, re.IGNORECASE)
            for owner in names:
                found = trace.search(owner)
                if found is None and detected.get(owner) != fmt.name:
                    continue
                stem = owner[: found.start()] + owner[found.end() :] if found else owner
                pattern = companion_pattern(rule, stem)
                for other in names:
                    if other != owner and pattern.search(other):
                        mine = groups.setdefault(owner, [])
                        if all(other != c for c, _ in mine):
                            mine.append((other, rule))
    taken = {c for group in groups.values() for c, _ in group}
    return {owner: group for owner, group in groups.items() if owner not in taken}


def companion_alone(name: str) -> tuple[str, CompanionRule] | None:
    """The format and rule of a file that is only ever a companion (``needs_owner``), by its
    name: dropped without its trace, it is refused (``TraceFormat.companion_alone``)."""
    for fmt in formats():
        for rule in name_rules(fmt):
            if rule.needs_owner and companion_pattern(rule, None).search(name):
                return fmt.name, rule
    return None


def companion_on_disk(name: str) -> str | None:
    """The format a file given on a command line is a companion of, by its name alone (a
    rule read ``beside`` a file on disk, e.g. a ContextOS trace's ``*.pack.json``), or
    None."""
    for fmt in formats():
        for rule in name_rules(fmt):
            if rule.beside and rule.role == "input" and companion_pattern(rule, None).search(name):
                return fmt.name
    return None


def detect_format(head: bytes, filename: str) -> str:
    """Which registered format a file is, from its name and its first bytes.

    - a format's own definite claim (`sniff`), asked in registration order: `*.replay.json`
      or `*.md` is an AHD sidecar or report; gzip, or `*.jsonl`, a native trace;
    - otherwise the first top-level key that only one format has decides (each format's
      `keys`): `format`, `job`, `events`... native; `contract_id`, `paxman_version`,
      `replay_hash`... Paxman; `ahd_version`, `token`, `invoked_at`... AHD;
    - nothing telling (not JSON, an empty object): native, whose parser names the problem.
    """
    found = formats().detect(head, filename, top_keys=top_level_keys(head))
    return found if found is not None else NATIVE


class _Replayed(io.RawIOBase):
    """A stream that gives back the sniffed bytes before the rest of the source."""

    def __init__(self, head: bytes, rest: IO[bytes]) -> None:
        self._head = head
        self._rest = rest

    def readable(self) -> bool:
        return True

    def readinto(self, b: bytearray | memoryview) -> int:  # type: ignore[override]
        if self._head:
            n = min(len(b), len(self._head))
            b[:n] = self._head[:n]
            self._head = self._head[n:]
            return n
        data = self._rest.read(len(b))
        b[: len(data)] = data
        return len(data)


def sniff(source: IO[bytes], filename: str) -> tuple[str, IO[bytes]]:
    """Detect the format of `source`; returns it with a stream positioned where it started."""
    try:
        seekable = source.seekable()
    except (AttributeError, ValueError):
        seekable = False
    if seekable:
        start = source.tell()
        head = _read_up_to(source, SNIFF_BYTES)
        source.seek(start)
        return detect_format(head, filename), source
    head = _read_up_to(source, SNIFF_BYTES)
    stream = io.BufferedReader(_Replayed(head, source), buffer_size=1 << 20)
    return detect_format(head, filename), stream


def _read_up_to(source: IO[bytes], size: int) -> bytes:
    """`size` bytes, or fewer at the end: a raw stream may return short reads."""
    chunks: list[bytes] = []
    left = size
    while left > 0:
        chunk = source.read(left)
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)
