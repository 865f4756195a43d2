"""One interface every trace format implements, and the one registry of formats.

A format is an object with:

- ``name`` (what ``Trace.format`` stores and ``?format=`` filters on) and ``label`` (the
  format in words, for messages);
- ``keys``: top-level JSON keys only this format has (detection: the first one met decides);
  optionally ``shared_keys``, keys it shares with another format, which then decide nothing;
- ``sniff(head, filename) -> bool``: a definite claim from the name or the first bytes alone
  (``*.replay.json`` is AHD, gzip is native) -- checked before any key is scanned;
- ``parse(source, filename, ctx)``: the strict, bounded parse; raises ``ReplayError``;
  ``refused(exc, filename, ctx)`` is the report of a file that did not parse;
- ``codes``: every error code (``core/errors.py``) a report of this format can carry
  besides the console's own (:data:`CONSOLE_CODES`): what it refuses with, each documented in
  ``docs/error-codes.md`` ("Codes by format"); registering a format that declares a code
  ``core/errors.py`` does not define, or an unstorable code it does not declare, is refused,
  and the tests fail any report of a format carrying a code it did not declare
  (``tests/conftest.py``);
- ``unstorable_codes``: the report codes that refuse storing the file (nothing is stored);
  any other report is stored with its verdict, a tampered file included (as evidence); a
  format may decide itself with ``storable(report) -> bool`` (Verist's recompute refuses an
  input its step's schema refuses with MALFORMED_TRACE, a verdict on a well-formed file);
- ``verify(parsed, filename, ctx) -> ReplayReport``: the report of contracts §3, in the
  format's own check vocabulary; never raises ``ReplayError``;
- ``replay(parsed, filename, ctx) -> ReplayReport | None``: a replay where the format allows
  one; ``None`` when it does not, and ``replay_note`` says what re-verifying does instead;
- ``facts(parsed, report, ctx) -> StoredFacts``: what a stored row records of the file;
- ``panel(parsed) -> dict[str, str]``: the header facts its trace page panel shows;
- ``native_code(report) -> NativeCode | None``: a stored report's code in the system's own
  words, which the panel shows beside the console's (Verist's ``input_hash_mismatch``), None
  for a format that keeps none;
- ``templates``: the directory of the format's own templates in its package, or None; the
  console serves a file ``<templates>/<path>`` as the template ``formats/<name>/<path>``
  (``console.template_loaders``), so a format's partials never shadow the console's;
  ``report_template``: the file there of its own part of a run's report page (included with
  the run's ``report``: ContextOS's status, rule and record hash), or None;
  optionally ``page_template`` (a file there) and ``page(parsed) -> dict``: its own section
  of the trace page, included in the format panel with ``page`` (personal values masked):
  an OpenTelemetry trace's span waterfall and conversation;
  optionally ``counts``: what its ``StoredFacts.event_count`` and ``step_count`` count, in
  words (``("span", "model or tool call")``; events and steps when absent);
- ``records(parsed) -> Iterable[ViewRecord]`` (every format but the native one, whose page
  pages its events and steps by seq): the file as the trace page's records
  (:mod:`core.replay.recordview`), in the order the page lists them, each with a kind, a
  label, its location in the file (a JSON pointer), its JSON value, the position of its
  parent record (None at the top; children follow their parent) and a few short facts for
  its row (``summary``: never a content value, since the page's index keeps it). The page's
  index, its windows, the record viewer and the overview read nothing else of the file;
  optionally ``index_facts(parsed) -> dict[str, str]``: the panel's facts, none of them
  personal, that the page's index keeps, so that a page of a file too large to parse in a
  request (``REPLAY_PAGE_PARSE_BYTES``) still shows them;
- ``compare(a, b) -> list[Difference]``: two runs of the same job, field by field (JSON
  pointers);
- optionally ``input_names(source, filename) -> list[str]``: the files a file names that are
  uploaded beside it (a MACE log's ``<snapshot_id>.json``): the upload batch keeps them as
  its inputs (``VerifyContext.inputs``), and ``ingest`` / ``verify`` read them from its
  directory;
- optionally ``options(sources: OptionSources)``: the format's own options for one file, built
  from its settings accessors and what the request gave; the services put them in
  ``VerifyContext.format_options`` (a malformed setting: :class:`SettingError`);
- optionally ``verify_path(path, filename, ctx) -> ReplayReport | None``: a file verified where
  it lies on disk, without inputs given (an AHD sidecar against its checkout), None to verify
  it as any other file;
- optionally ``unpacks(filename) -> bool`` and ``unpack(data, filename, inputs, sources)``: a
  file that is the whole run with its inputs (an AHD ``run.tar.gz``), read into the trace's
  bytes, its name and its inputs (a refusal is ``ReplayError``, the format's ``refused``);
- optionally ``replay_options``: the options a replay of it takes (:class:`ReplayOption`,
  Verist's recompute options), chosen per request (CLI ``--option``, the API's ``options``,
  the trace page's form); :func:`replay_options` checks what a request gives and fills in
  the defaults, the run stores the result, and ``verify``/``replay`` read it from
  ``VerifyContext.options``. A format without them refuses any option.

- optionally ``versions`` (:class:`ArtifactVersions`, data): stored files of this format
  that carry one trace id are versions of one artifact (a Paxman artifact issued again
  under its ``id``); a trace page lists the others to compare with, in the format's words.
  A format without it has no versions (its files with one trace id are copies).

- optionally ``snapshot_prefix``, ``snapshot_tampered(body, snapshot_id) -> bool`` and
  ``failed_snapshot(report) -> str | None``: the stored snapshots it owns (the kinds that
  start with its prefix; the longest prefix wins: native's ``""``, MACE's ``mace-``), whether
  one no longer is what its id says (rewritten in the store: a halt then stops every trace
  that needs it), and the snapshot a report's failed ``snapshots`` check names;
- optionally ``functions(registry)``: the deterministic step functions its replays
  re-execute, registered into the step registry (``core.replay.registry.Registry``) that
  ``core.formats.default_registry()`` builds (Verist's reference step); the kernel
  (``core.replay``) knows no format, so a format brings its own.

- optionally ``input_limits(setting) -> InputLimits``: how large one of its companion files
  (an input, a contract) and one archive of them may be, from its settings accessors
  (AHD's ``REPLAY_AHD_MAX_INPUT_BYTES`` and ``REPLAY_AHD_*`` archive limits); a format
  without it takes :data:`DEFAULT_INPUT_LIMITS`. A companion is read with the limits of the
  format it belongs to; where that format is not known yet (a multipart upload's parts, a
  command's ``--inputs`` and ``--contract``), up to the largest any registered format allows
  (``core.formats.largest_input_limits``), and the format refuses what is beyond its own;
- optionally ``verdict_line(report) -> str``: a last line the ``verify`` command prints
  under the summary of a report of this format (AHD's ``verdict: replay inputs intact``);
- optionally ``rooted(filename) -> bool`` and ``root_of(path, given_root) -> Path | None``:
  a file of this name is verified against a root on disk its inputs come from (an AHD
  sidecar and its checkout): for it alone ``ingest`` reads ``--inputs`` (or the archive
  beside it), else the root given or found above it (``root_of``: None when there is
  none); a format that needs a root and finds none raises :class:`RootNotFound` from
  ``verify_path`` (the commands' usage error, exit 2).

- ``companions``: the rules (:class:`CompanionRule`, data) saying which other files of one
  upload belong with a file of this format, by name or by the fields that name them
  (``named_by``); the upload page receives them as JSON and groups a drop by them, the
  server the same way.

Each format is one package ``core/formats/<name>/`` whose ``adapter`` module holds the
format object and a ``register(registry)``; the built-in ones are listed, one line each, in
:data:`BUILTIN` (the order detection asks them). Installed packages add formats through the
entry-point group ``replay_console.formats``: each entry point names a callable that takes
the registry and registers what it brings, as step functions do
(``replay_console.functions``)::

    [project.entry-points."replay_console.formats"]
    my_format = "my_package.trace_format:register"

Pure: no Django, no I/O beyond reading installed package metadata.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import IO, Any, Protocol, TypeVar

from core import errors

ENTRY_POINT_GROUP = "replay_console.formats"

#: The codes the console itself gives a report of any format, whatever the format declares:
#: a halted file (``common.halt_refusal``, asked by every format first), a file retention
#: expired, a trace id several stored files carry, a force-continue without its approvals.
CONSOLE_CODES = frozenset(
    {
        errors.FORCE_HALT_ACTIVE,
        errors.TRACE_EXPIRED,
        errors.AMBIGUOUS_TRACE_ID,
        errors.FORCE_CONTINUE_REQUIRED,
    }
)


@dataclass
class VerifyContext:
    """What verifying one file may use; the services build it from settings and the DB.

    ``inputs``: files uploaded together with this one, by name (an AHD sidecar's token and
    brief); ``stored_inputs``: for a stored file, the inputs stored with it
    (``{"kind", "path", "snapshot_id"}``), read back through ``stored_snapshot``;
    ``format_options``: what the format's own ``options(sources)`` built for this file from its
    settings and what the request gave (:class:`OptionSources`: AHD's checkout and input
    limits, Paxman's contract and capabilities), None for a format without ``options`` (each
    format then reads its defaults).
    """

    mode: str = "audit"
    at: Any = None
    halted: Mapping[str, str] | None = None
    file_id: str | None = None
    continue_past: Sequence[int] = ()
    progress: Callable[[int], None] | None = None
    workers: int = 1
    retained_only: bool = False
    keys: Any = None
    registry: Any = None
    stored_snapshot: Callable[[str], Any] = lambda _sid: None
    limits: Any = None
    replay_limits: Any = None
    clock: Callable[[], float] | None = None
    inputs: Mapping[str, bytes] = field(default_factory=dict)
    stored_inputs: Sequence[Mapping[str, Any]] = ()
    #: fields of a stored file whose values were erased (``{"location", "path"}``)
    erased: Sequence[Mapping[str, str]] = ()
    #: the format's own options for this file (its ``options(sources)``), or None
    format_options: Any = None
    #: the replay options of the run, every one the format declares (:func:`replay_options`)
    options: Mapping[str, Any] = field(default_factory=dict)


#: a setting by its name, or the default given: what a format's settings accessors read (the
#: services pass ``lambda name, default: getattr(django.conf.settings, name, default)``)
Setting = Callable[[str, Any], Any]


class SettingError(ValueError):
    """A deployment setting a format reads is malformed (the services' ImproperlyConfigured);
    the message names the setting."""


@dataclass(frozen=True)
class OptionSources:
    """What a format builds its options for one file from (``options(sources)``):
    ``setting``, the deployment's settings by name; ``server_dirs``, the directories no input
    may be read from (the server's own data: its database, blobs, spooled uploads);
    ``given``, what the request brought for the format besides the file and its companions,
    by the name the CLI and the API give it (``contract``: a contract file as
    ``(name, bytes)``; ``input_root``: a directory of inputs the CLI names)."""

    setting: Setting = lambda _name, default: default
    server_dirs: tuple[str, ...] = ()
    given: Mapping[str, Any] = field(default_factory=dict)


class RootNotFound(Exception):
    """A file verified where it lies (``verify_path``) whose root on disk was neither given
    nor found (an AHD sidecar outside any checkout): a usage error; the message says how to
    name one."""


#: one companion file of a format that declares no ``input_limits``
DEFAULT_MAX_INPUT_BYTES = 64 * 1024**2


@dataclass(frozen=True)
class InputLimits:
    """How large a format's companion files may be (``input_limits(setting)``):
    ``max_input_bytes``, one file (an input, a contract); ``archive``, one archive of them
    (``core.formats.archive.ArchiveLimits``; None: that module's ``DEFAULT_LIMITS``)."""

    max_input_bytes: int = DEFAULT_MAX_INPUT_BYTES
    archive: Any = None


#: the limits of a format without ``input_limits``
DEFAULT_INPUT_LIMITS = InputLimits()


@dataclass
class StoredSnapshot:
    """A body stored with a file, by its content address (``native.snapshot_id_of``)."""

    snapshot_id: str
    kind: str
    body: Any
    schema_version: int = 1
    signature: Any = field(default_factory=dict)


@dataclass
class StoredFacts:
    """What the Trace row records of a stored file of any format."""

    trace_id: str
    schema_version: int
    encoding: str = "json"
    job_id: str = ""
    job_seed: str = ""
    runtime_name: str = ""
    runtime_version: str = ""
    started_at: str | None = None
    event_count: int = 0
    step_count: int = 0
    required_snapshot_ids: list[dict[str, Any]] = field(default_factory=list)
    missing_outputs: list[str] = field(default_factory=list)
    snapshots: list[StoredSnapshot] = field(default_factory=list)


@dataclass(frozen=True)
class NativeCode:
    """A report's code in the words of the system that wrote the file, beside the console's:
    ``label`` names the system (``"Verist"``), ``code`` is its word (``input_hash_mismatch``)."""

    label: str
    code: str


@dataclass(frozen=True)
class CompanionRule:
    """Which other files of one upload belong with a file of this format, by name alone.

    ``trace`` and ``companion`` are regular expressions that mean the same in Python and in
    JavaScript (matched case-insensitively): a file whose name matches ``companion`` goes with
    a file whose name matches ``trace``; in ``companion``, ``{stem}`` stands for the trace's
    name with its ``trace`` match removed, escaped (``x.json`` -> ``x``). ``role`` is
    ``"input"`` (stored with the trace as its snapshots) or ``"contract"`` (a Paxman contract);
    ``needs_owner`` says whether a companion dropped without its trace is refused (a contract)
    rather than treated as a file of its own. ``beside``: whether, for a file on disk
    (``ingest``, ``verify``, ``replay PATH``), its companions are the files of its directory
    (and of the command line) that match (False for AHD, whose inputs come from a checkout).

    ``named_by``: a rule by content rather than by name (a MACE log names its snapshot
    files): a file whose name matches ``trace``, of at most ``max_bytes``, that is a JSON
    object takes the files named exactly ``companion`` with ``{named}`` replaced by the
    value of each of these top-level fields that is a non-empty string (:meth:`named`); the
    name rules (``companion`` as a pattern) do not apply to it. The server reads the same
    fields of a file it detected as the format (whatever its name); the upload page reads
    them from the files of a drop before it sends them.

    ``describes``: what a companion it groups is, in a few words the upload page shows beside
    a file stored as another's input ("a Paxman artifact's contract"); for a format that names
    its inputs (``input_names``), its ``named_by`` rule's, else its first input rule's, words
    say what a named file is.
    """

    trace: str
    companion: str
    role: str = "input"
    needs_owner: bool = False
    beside: bool = True
    named_by: tuple[str, ...] = ()
    max_bytes: int = 0
    describes: str = ""

    def as_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "trace": self.trace,
            "companion": self.companion,
            "role": self.role,
            "needs_owner": self.needs_owner,
            "beside": self.beside,
        }
        if self.named_by:
            data.update(named_by=list(self.named_by), max_bytes=self.max_bytes)
        return data

    def named(self, document: Any) -> list[str]:
        """The companion files ``document`` names by ``named_by``, in the fields' order."""
        if not isinstance(document, Mapping):
            return []
        values = (document.get(name) for name in self.named_by)
        return [self.companion.replace("{named}", v) for v in values if isinstance(v, str) and v]


@dataclass(frozen=True)
class ArtifactVersions:
    """A format whose stored files with one trace id are versions of one artifact: the words
    its trace page's table of the other versions uses (its own fields' names)."""

    #: the table's heading
    title: str
    #: the header of the column of each version's recorded start (``Trace.started_at``)
    started: str
    #: the header of the column of each version's runtime version (``Trace.runtime_version``)
    version: str


@dataclass(frozen=True)
class Difference:
    """One field that differs between two runs: a JSON pointer, before and after."""

    path: str
    kind: str  # "added" | "removed" | "changed"
    before: Any
    after: Any


#: what a format's ``parse`` gives and its other methods take (``native.NativeTrace``,
#: ``paxman.Artifact``, ``AhdRun``, ...): each adapter names its own
Parsed = TypeVar("Parsed")


class TraceFormat(Protocol[Parsed]):
    name: str
    label: str
    keys: frozenset[str]
    companions: tuple[CompanionRule, ...]
    replay_note: str
    codes: frozenset[str]
    unstorable_codes: frozenset[str]
    templates: str | None
    report_template: str | None

    def sniff(self, head: bytes, filename: str) -> bool: ...

    def parse(self, source: IO[bytes], filename: str, ctx: VerifyContext) -> Parsed: ...

    def refused(self, exc: Any, filename: str, ctx: VerifyContext) -> Any: ...

    def verify(self, parsed: Parsed, filename: str, ctx: VerifyContext) -> Any: ...

    def replay(self, parsed: Parsed, filename: str, ctx: VerifyContext) -> Any | None: ...

    def facts(self, parsed: Parsed, report: Any, ctx: VerifyContext) -> StoredFacts: ...

    def panel(self, parsed: Parsed) -> dict[str, str]: ...

    def native_code(self, report: Mapping[str, Any]) -> NativeCode | None: ...

    def compare(self, a: Parsed, b: Parsed) -> list[Difference]: ...


OPTIONS_NOT_AN_OBJECT = "options must be a JSON object of option names to values, got {observed}"
OPTIONS_NONE = "{label} ({format}) takes no replay options; got {names}"
OPTION_UNKNOWN = "{name!r} is not a replay option of {label} ({format}); its options: {names}"
OPTION_BAD_VALUE = "{name} must be {expects}, got {observed}"


class OptionError(ValueError):
    """A replay option a format does not take, or a value it does not accept: a usage error
    (the API's INVALID_INPUT, the CLI's exit 2), refused before any run is created."""

    def __init__(self, message: str, option: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.option = option


@dataclass(frozen=True)
class ReplayOption:
    """One option a format's replay takes, spelt as the format spells it."""

    name: str
    default: Any
    #: the values it accepts, in words ("a boolean")
    expects: str
    #: what it does, one line (the form's label, the API schema's description)
    help: str
    #: whether a value is one it accepts
    accepts: Callable[[Any], bool]
    #: the API schema of its value (JSON Schema)
    schema: Mapping[str, Any] = field(default_factory=lambda: {"type": "boolean"})


def is_boolean(value: Any) -> bool:
    return isinstance(value, bool)


def json_words(value: Any) -> str:
    """A JSON value in words, for a refusal: its type and, when short, itself."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        kind = "a boolean"
    elif isinstance(value, int | float):
        kind = "a number"
    elif isinstance(value, str):
        kind = "a string"
    elif isinstance(value, list):
        kind = "an array"
    else:
        kind = "an object"
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return kind
    return kind if len(text) > 60 else f"{kind} ({text})"


def replay_options(fmt: Any, given: Any) -> dict[str, Any]:
    """The options a replay of ``fmt`` runs with: each option the format declares, the given
    value or its default; ``{}`` for a format that declares none. ``given`` is what a request
    sent (None or ``{}``: the defaults). Raises :class:`OptionError` for anything that is not
    an object of the format's own option names to values it accepts; and a format's
    ``check_options(resolved)``, if it has one, refuses combinations."""
    if given is None:
        given = {}
    if not isinstance(given, Mapping):
        raise OptionError(OPTIONS_NOT_AN_OBJECT.format(observed=json_words(given)))
    declared: Sequence[ReplayOption] = getattr(fmt, "replay_options", ()) if fmt else ()
    if not declared:
        if given:
            label = getattr(fmt, "label", "this format")
            raise OptionError(
                OPTIONS_NONE.format(
                    label=label[:1].upper() + label[1:],
                    format=getattr(fmt, "name", "unregistered"),
                    names=", ".join(sorted(str(k) for k in given)),
                ),
                option=str(next(iter(sorted(given, key=str)))),
            )
        return {}
    by_name = {option.name: option for option in declared}
    for name in given:
        if name not in by_name:
            raise OptionError(
                OPTION_UNKNOWN.format(
                    name=name, label=fmt.label, format=fmt.name, names=", ".join(by_name)
                ),
                option=str(name),
            )
    resolved = {}
    for option in declared:
        value = given.get(option.name, option.default)
        if not option.accepts(value):
            raise OptionError(
                OPTION_BAD_VALUE.format(
                    name=option.name, expects=option.expects, observed=json_words(value)
                ),
                option=option.name,
            )
        resolved[option.name] = value
    check = getattr(fmt, "check_options", None)
    if check is not None:
        check(resolved)
    return resolved


def codes_problem(fmt: Any) -> str | None:
    """What is wrong with a format's declared ``codes``, or None: it must declare them, each
    one a code of ``core/errors.py``, none of the console's own, and every code it refuses
    storing with among them."""
    codes = getattr(fmt, "codes", None)
    if not isinstance(codes, frozenset) or not codes:
        return "declares no error codes (codes: a frozenset of core.errors codes)"
    unknown = sorted(c for c in codes if c not in errors.ERROR_CODES)
    if unknown:
        return f"declares codes core/errors.py does not define: {', '.join(unknown)}"
    console = sorted(codes & CONSOLE_CODES)
    if console:
        return f"declares the console's own codes (CONSOLE_CODES): {', '.join(console)}"
    undeclared = sorted(set(getattr(fmt, "unstorable_codes", ())) - codes)
    if undeclared:
        return f"refuses storing with codes it does not declare: {', '.join(undeclared)}"
    return None


def declares(fmt: Any, code: str) -> bool:
    """Whether a report of ``fmt`` may carry ``code``: one it declares, or the console's."""
    return code in CONSOLE_CODES or code in getattr(fmt, "codes", frozenset())


class FormatRegistry:
    """The formats this console reads, in the order detection asks them."""

    def __init__(self) -> None:
        self._formats: dict[str, TraceFormat[Any]] = {}

    def register(self, fmt: TraceFormat[Any]) -> None:
        if fmt.name in self._formats:
            raise ValueError(f"format {fmt.name!r} is already registered")
        problem = codes_problem(fmt)
        if problem is not None:
            raise ValueError(f"format {fmt.name!r}: {problem}")
        self._formats[fmt.name] = fmt

    def get(self, name: str) -> TraceFormat[Any] | None:
        return self._formats.get(name)

    def names(self) -> list[str]:
        return list(self._formats)

    def __iter__(self):
        return iter(self._formats.values())

    def detect(self, head: bytes, filename: str, *, top_keys: Iterable[str]) -> str | None:
        """The format a file is: a definite claim first, then the first top-level key only
        one format has (a key some format declares in ``shared_keys`` decides nothing);
        None when nothing tells."""
        for fmt in self._formats.values():
            if fmt.sniff(head, filename):
                return fmt.name
        shared = {k for fmt in self._formats.values() for k in getattr(fmt, "shared_keys", ())}
        for key in top_keys:
            if key in shared:
                continue
            for fmt in self._formats.values():
                if key in fmt.keys:
                    return fmt.name
        return None


def load_entry_points(registry: FormatRegistry, eps: Iterable[Any] | None = None) -> list[str]:
    """Let installed packages register their formats; returns the entry points loaded."""
    loaded = []
    for ep in eps if eps is not None else entry_points(group=ENTRY_POINT_GROUP):
        ep.load()(registry)
        loaded.append(ep.name)
    return loaded


#: The built-in formats, one registration line each, in the order detection asks them (a
#: sidecar's name first; a ContextOS trace's keys before the native format's, since both have
#: a ``trace_id``; an OpenTelemetry GenAI trace before the native format, whose name claim on
#: ``*.jsonl`` would take an ``*.otlp.jsonl`` export): ``module:callable`` as an entry point
#: names it.
BUILTIN = (
    "core.formats.ahd.adapter:register",
    "core.formats.contextos.adapter:register",
    "core.formats.otel.adapter:register",
    "core.formats.native.adapter:register",
    "core.formats.paxman.adapter:register",
    "core.formats.verist.adapter:register",
    "core.formats.mace.adapter:register",
)


def register_builtin(registry: FormatRegistry) -> None:
    """Register the built-in formats (:data:`BUILTIN`)."""
    from importlib import import_module

    for spec in BUILTIN:
        module, _, attr = spec.partition(":")
        getattr(import_module(module), attr)(registry)


_default: FormatRegistry | None = None


def default_formats() -> FormatRegistry:
    """The built-in formats plus everything installed packages register."""
    global _default  # noqa: PLW0603 - built once per process, then read-only
    if _default is None:
        registry = FormatRegistry()
        register_builtin(registry)
        load_entry_points(registry)
        _default = registry
    return _default
