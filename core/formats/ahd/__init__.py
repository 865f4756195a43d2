"""AHD replay sidecars ("ahd-replay"): what ``ahd verify-replay`` checks, offline.

An AHD eval report ``<name>.md`` ships a sidecar ``<name>.replay.json`` (schema_version 1)
recording the token and brief the run consumed, each as ``{"path", "hash"}`` with the path
relative to the AHD checkout root. Verifying re-hashes those files as they are on disk now,
exactly as AHD's ``src/eval/verify-replay.ts`` does (seed 000):

- the checkout root is found by walking up from the report's directory (at most 8 levels) to
  the ``package.json`` whose ``name`` is ``@adastracomputing/ahd``, or given (``--root``);
  with neither, verification is a usage error (AHD falls back to the working directory,
  which would silently verify whatever files happen to be there);
- token: read as UTF-8, parsed as YAML 1.2 (:mod:`core.formats.yaml12`, npm ``yaml`` v2
  semantics), hashed ``"sha256:" + hex(sha256(js-sorted(value)))``;
- brief (``null`` on critique runs, then not checked): the raw-bytes hash first (markdown
  briefs), then the canonical-JSON hash of the parsed YAML;
- a recorded absolute path that is not inside the checkout (sidecars written on a CI runner)
  is looked up under the checkout root by its longest trailing part that exists there, and the
  check says the recorded path was not portable (AHD itself would report the file missing);
- nothing outside the checkout is ever read, links resolved: a relative path leading out is
  refused (``MALFORMED_TRACE``) and the report says nothing about what it names; only a
  regular file is read (never a FIFO or device: the open cannot block), at most
  ``max_input_bytes``; the server's data directories (``excluded``) are never opened even
  when the checkout holds them.

Verdicts. AHD prints a per-field ok / FAIL list and exits 1 on drift. Here each field is a
check (the checks are one list run by ``core.replay.pipeline``, :func:`run_checks`); every
field is listed, then the first failing one names the report's error code:

- the file hashes to something else, or no longer parses: ``INTEGRITY_FAILURE``
  (``tamper_detected``). The recorded hash binds the input's content exactly as a chain hash
  binds an event; a mismatch means the content changed since the run. ``diverged`` is kept
  for recomputed outputs that differ (nothing is recomputed here), and ``HASH_MISMATCH`` /
  ``INPUT_HASH_MISMATCH`` are spelt for Paxman and Verist only (contracts.md §3);
- the file is gone: ``MISSING_SNAPSHOT`` (``refused``): the input the run recorded is no
  longer retained where the sidecar says, which is what that code means for native traces;
- ``schema_version`` greater than 1: ``UNSUPPORTED_SCHEMA_VERSION``; a sidecar that does not
  match the schema (or a report ``.md`` without its sidecar): ``MALFORMED_TRACE``.

Unknown fields are ignored (seed 000: "consumers should ignore unknown fields"; AHD's own zod
schema is ``.strict()`` and would refuse them) and listed in the format check. Nothing in the
sidecar itself is hashed: the hashes bind the token and brief files, so every other field
(``argv``, ``models``, ``invoked_at``, the recorded paths ...) is reported as unprotected.

Pure apart from reading files: no Django.
"""

from __future__ import annotations

import hashlib
import json
import math
import ntpath
import os
import posixpath
import re
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any

from core import errors
from core.canonical import CanonicalError, js_sorted
from core.errors import ReplayError
from core.formats.jsonstrict import loads_strict
from core.formats.protocol import RootNotFound
from core.formats.yaml12 import YAML12Error, load
from core.replay import pipeline
from core.replay.pipeline import Refusal
from core.replay.report import AUDIT, Check, ReplayReport

FORMAT = "ahd-replay"
SCHEMA_VERSION = 1
PACKAGE_NAME = "@adastracomputing/ahd"
ROOT_SEARCH_DIRS = 8  # verify-replay.ts findAhdRepoRoot: the report's directory + 7 parents
SIDECAR_SUFFIX = ".replay.json"
MAX_SIDECAR_BYTES = 16 * 1024**2
MAX_INPUT_BYTES = 64 * 1024**2
KINDS = ("eval-live", "critique", "eval-image")
KNOWN_FIELDS = (
    "schema_version",
    "kind",
    "ahd_version",
    "ahd_commit",
    "git_dirty",
    "node_version",
    "platform",
    "invoked_at",
    "argv",
    "token",
    "brief",
    "sampling",
    "models",
    "conditions",
    "backfilled",
)
#: Recorded but bound by no hash: the hashes cover only the token and brief files.
UNPROTECTED_FIELDS = (
    "kind",
    "ahd_version",
    "ahd_commit",
    "git_dirty",
    "node_version",
    "platform",
    "invoked_at",
    "argv",
    "token.path",
    "brief.path",
    "sampling",
    "models",
    "conditions",
    "backfilled",
)

#: The hash contract (seed 000): ``sha256:<lower-hex 64>``. AHD writes nothing else and its
#: verifier compares a lower-case re-hash, so an upper-case or short hash can never verify:
#: it is refused as malformed instead of reported as drift.
_HASH = re.compile(r"sha256:[a-f0-9]{64}\Z")
#: ``git rev-parse HEAD``: a full 40-hex SHA (``readGitState``), written lower-case.
_COMMIT = re.compile(r"[a-f0-9]{40}\Z")
_DATETIME = re.compile(r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(\.\d+)?Z\Z", re.ASCII)
_WINDOWS_ABS = re.compile(r"(?:[A-Za-z]:[\\/]|\\\\)")


class AhdRootNotFound(RootNotFound):
    """No AHD checkout root: a usage error (the command exits 2 and says to pass --root);
    the format's ``protocol.RootNotFound``, which the commands catch."""


@dataclass(frozen=True)
class Input:
    field: str
    path: str
    hash: str


@dataclass(frozen=True)
class Sidecar:
    """A validated schema_version 1 sidecar (the fields verification needs)."""

    kind: str
    ahd_version: str
    ahd_commit: str | None
    git_dirty: bool | None
    invoked_at: str
    backfilled: bool
    token: Input
    brief: Input | None
    ignored: tuple[str, ...]
    document: dict[str, Any]


def sidecar_path_for(path: Path) -> Path:
    """The sidecar of a report: ``x.md`` -> ``x.replay.json`` (AHD: ``/(\\.md)?$/``)."""
    name = str(path)
    if name.endswith(SIDECAR_SUFFIX):
        return path
    return Path(re.sub(r"(\.md)?\Z", SIDECAR_SUFFIX, name, count=1))


def find_root(start_dir: Path) -> Path | None:
    """Walk up from ``start_dir`` to the directory whose package.json names AHD."""
    directory = Path(os.path.abspath(start_dir))
    for _ in range(ROOT_SEARCH_DIRS):
        try:
            pkg = json.loads((directory / "package.json").read_text("utf-8"))
        except (OSError, ValueError):
            pkg = None
        if isinstance(pkg, dict) and pkg.get("name") == PACKAGE_NAME:
            return directory
        if directory.parent == directory:
            break
        directory = directory.parent
    return None


# --- the sidecar -------------------------------------------------------------------------


def _malformed(message: str) -> ReplayError:
    return ReplayError(errors.MALFORMED_TRACE, message)


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_int(value: Any) -> bool:
    return _is_number(value) and math.isfinite(value) and float(value).is_integer()


def _get(obj: dict[str, Any], key: str, where: str) -> Any:
    if key not in obj:
        raise _malformed(f"{where}.{key}: required")
    return obj[key]


def _check(
    obj: dict[str, Any], key: str, where: str, ok: Callable[[Any], bool], expected: str
) -> Any:
    value = _get(obj, key, where)
    if not ok(value):
        raise _malformed(f"{where}.{key}: expected {expected}, got {_type_name(value)}")
    return value


def _nonempty(value: Any) -> bool:
    return isinstance(value, str) and value != ""


def _str_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _datetime_ok(value: Any) -> bool:
    """zod ``.datetime()``: ``YYYY-MM-DDTHH:MM:SS[.fff]Z``, a real date and time."""
    m = _DATETIME.fullmatch(value) if isinstance(value, str) else None
    if m is None:
        return False
    year, month, day, hour, minute, second = (int(g) for g in m.groups()[:6])
    leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
    days = (31, 29 if leap else 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)
    return (
        1 <= month <= 12
        and 1 <= day <= days[month - 1]
        and hour < 24
        and minute < 60
        and (second < 60)
    )


def _object(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _malformed(f"{where}: expected an object, got {_type_name(value)}")
    return value


def _input(doc: dict[str, Any], key: str, where: str, ignored: list[str]) -> Input | None:
    value = _get(doc, key, where)
    if value is None and key == "brief":
        return None
    obj = _object(value, f"{where}.{key}")
    w = f"{where}.{key}"
    path = _check(obj, "path", w, _nonempty, "a non-empty string")
    digest = _check(obj, "hash", w, lambda v: isinstance(v, str), "a string")
    if not _HASH.fullmatch(digest):
        raise _malformed(f"{w}.hash: expected sha256:<64 lower-case hex>, got {digest[:80]!r}")
    ignored.extend(f"{key}.{k}" for k in obj if k not in ("path", "hash"))
    return Input(key, path, digest)


def parse_sidecar(data: bytes, *, where: str = "sidecar") -> Sidecar:
    """Strict JSON, then ReplaySchema (AHD ``src/eval/types.ts``) minus its strictness.

    ``schema_version`` is checked first: a newer one may have changed what the other fields
    mean, so it is refused with ``UNSUPPORTED_SCHEMA_VERSION`` before anything else is read.
    """
    doc = _object(loads_strict(data, where=where), where)
    version = _get(doc, "schema_version", where)
    if _is_int(version) and version > SCHEMA_VERSION:
        raise ReplayError(
            errors.UNSUPPORTED_SCHEMA_VERSION,
            f"{where}.schema_version: {int(version)} is newer than this verifier supports "
            f"({SCHEMA_VERSION}); a newer AHD may have changed semantics it cannot apply "
            "correctly",
            expected=str(SCHEMA_VERSION),
            observed=str(int(version)),
        )
    if not (_is_number(version) and version == SCHEMA_VERSION):
        raise _malformed(f"{where}.schema_version: expected {SCHEMA_VERSION}, got {version!r}")
    ignored = [k for k in doc if k not in KNOWN_FIELDS]
    kind = _get(doc, "kind", where)
    if kind not in KINDS:
        raise _malformed(f"{where}.kind: expected one of {', '.join(KINDS)}, got {kind!r}")
    ahd_version = _check(doc, "ahd_version", where, _nonempty, "a non-empty string")
    commit = _check(
        doc, "ahd_commit", where, lambda v: v is None or isinstance(v, str), "a string or null"
    )
    if commit is not None and not _COMMIT.fullmatch(commit):
        raise _malformed(
            f"{where}.ahd_commit: expected 40 lower-case hex (a full git SHA) or null, "
            f"got {commit[:80]!r}"
        )
    dirty = _check(
        doc, "git_dirty", where, lambda v: v is None or isinstance(v, bool), "a boolean or null"
    )
    if commit is None and dirty is not None:
        raise _malformed(
            f"{where}.git_dirty: must be null when ahd_commit is null, got {str(dirty).lower()}"
        )
    if commit is not None and dirty is None:
        raise _malformed(f"{where}.git_dirty: expected a boolean when ahd_commit is set, got null")
    _check(doc, "node_version", where, _nonempty, "a non-empty string")
    _check(doc, "platform", where, _nonempty, "a non-empty string")
    invoked_at = _get(doc, "invoked_at", where)
    if not _datetime_ok(invoked_at):
        raise _malformed(f"{where}.invoked_at: invoked_at must be an ISO-8601 datetime string")
    _check(doc, "argv", where, _str_list, "an array of strings")
    token = _input(doc, "token", where, ignored)
    assert token is not None
    brief = _input(doc, "brief", where, ignored)
    sampling = _object(_get(doc, "sampling", where), f"{where}.sampling")
    w = f"{where}.sampling"
    _check(sampling, "n", w, lambda v: _is_int(v) and v > 0, "a positive integer")
    _check(sampling, "temperature", w, lambda v: v is None or _is_number(v), "a number or null")
    _check(sampling, "seed", w, lambda v: v is None or _is_int(v), "an integer or null")
    ignored.extend(f"sampling.{k}" for k in sampling if k not in ("n", "temperature", "seed"))
    models = _check(doc, "models", where, lambda v: isinstance(v, list), "an array")
    for i, item in enumerate(models):
        w = f"{where}.models[{i}]"
        model = _object(item, w)
        _check(model, "id", w, _nonempty, "a non-empty string")
        _check(model, "provider", w, _nonempty, "a non-empty string")
        _check(model, "provider_request_ids", w, _str_list, "an array of strings")
        known = ("id", "provider", "provider_request_ids")
        ignored.extend(f"models[{i}].{k}" for k in model if k not in known)
    conditions = _object(_get(doc, "conditions", where), f"{where}.conditions")
    w = f"{where}.conditions"
    _check(conditions, "requested", w, _str_list, "an array of strings")
    _check(conditions, "effective", w, _str_list, "an array of strings")
    ignored.extend(f"conditions.{k}" for k in conditions if k not in ("requested", "effective"))
    backfilled = doc.get("backfilled", False)
    if not isinstance(backfilled, bool):
        raise _malformed(f"{where}.backfilled: expected a boolean, got {_type_name(backfilled)}")
    return Sidecar(
        kind=kind,
        ahd_version=ahd_version,
        ahd_commit=commit,
        git_dirty=dirty,
        invoked_at=invoked_at,
        backfilled=backfilled,
        token=token,
        brief=brief,
        ignored=tuple(ignored),
        document=doc,
    )


# --- the inputs --------------------------------------------------------------------------


def hash_structured(text: str) -> str:
    """AHD ``hashJsonCanonical(parseYaml(text))``: js-sorted JSON of the YAML 1.2 value."""
    return "sha256:" + hashlib.sha256(js_sorted(load(text))).hexdigest()


def hash_raw(text: str) -> str:
    """AHD ``hashBytes(readFileSync(path, "utf8"))``: the file's text, re-encoded as UTF-8."""
    return "sha256:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


class Unreadable(Exception):
    """An input the verifier will not read; the message says only why, never what is there."""


def _inside(path: str, directory: str) -> bool:
    return os.path.commonpath([path, directory]) == directory


@dataclass(frozen=True)
class Checkout:
    """Where inputs may be read: the checkout root (links resolved), minus the server's own
    data directories that lie inside it (the database, blobs, uploads in flight)."""

    root: Path
    real: str
    excluded: tuple[str, ...] = ()
    max_input_bytes: int = MAX_INPUT_BYTES

    @classmethod
    def at(
        cls,
        root: Path,
        *,
        excluded: tuple[str | os.PathLike[str], ...] = (),
        max_input_bytes: int = MAX_INPUT_BYTES,
    ) -> Checkout:
        real = os.path.realpath(root)
        # an excluded directory that holds the whole checkout (a test's /tmp) excludes nothing
        kept = tuple(d for d in (os.path.realpath(e) for e in excluded) if not _inside(real, d))
        return cls(Path(root), real, kept, max_input_bytes)

    def allows(self, path: str | os.PathLike[str]) -> bool:
        """Whether ``path``, once every link is resolved, lies inside the checkout and
        outside every excluded directory. Nothing is opened."""
        return self.allows_real(os.path.realpath(path))

    def allows_real(self, real: str) -> bool:
        """:meth:`allows` for a path whose links are already resolved (``realpath``)."""
        return _inside(real, self.real) and not any(_inside(real, d) for d in self.excluded)


def read_bounded(fh: Any, limit: int, chunk: int = 1024**2) -> bytes:
    """At most ``limit`` + 1 bytes of a stream, read a chunk at a time (one ``read(limit +
    1)`` would set aside a buffer of the whole limit for every small file)."""
    chunks = []
    size = 0
    while size <= limit:
        part = fh.read(min(chunk, limit + 1 - size))
        if not part:
            break
        chunks.append(part)
        size += len(part)
    return b"".join(chunks)


def _read_input(path: Path, checkout: Checkout) -> str:
    """``readFileSync(path, "utf8")`` of a regular file inside the checkout, at most
    ``max_input_bytes``: invalid UTF-8 becomes U+FFFD, a BOM is kept.

    The file is checked before it is opened (a FIFO would block the open) and again through
    the descriptor (a file swapped in between): the open never follows a final link and never
    blocks, and only a regular file is read.
    """
    limit = checkout.max_input_bytes
    st = os.lstat(path)
    if not stat.S_ISREG(st.st_mode):
        raise Unreadable("not a regular file; not read")
    if st.st_size > limit:
        raise Unreadable(f"over {limit} bytes; not read")
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags)
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise Unreadable("not a regular file; not read")
        # as much as the file holds (not a buffer of the whole limit per file), and on, still
        # bounded, if it grew since
        want = min(limit, st.st_size) + 1
        data = fh.read(want)
        if len(data) == want and want <= limit:
            data += fh.read(limit + 1 - want)
    if len(data) > limit:
        raise Unreadable(f"over {limit} bytes; not read")
    return data.decode("utf-8", "replace")


def _is_absolute(recorded: str) -> bool:
    return recorded.startswith("/") or _WINDOWS_ABS.match(recorded) is not None


@dataclass(frozen=True)
class Located:
    """Where a recorded path is read (``path``), a note when it was not portable, or why it
    is not read at all (``refused``: it leads outside the checkout)."""

    path: Path
    note: str | None = None
    refused: str | None = None


def resolve_input(recorded: str, checkout: Checkout | Path) -> Located:
    """Where to read a recorded path, and a note when the recorded path was not portable.

    Every path is read inside the checkout, after resolving links, or not at all. A relative
    path resolves against the root (``path.resolve(root, p)``); one that leads outside (``..``,
    or a link out of the checkout) is refused without looking at what it names. An absolute
    path inside the checkout is used as it is. Any other absolute path (a CI runner's
    ``/home/runner/work/ahd/ahd/tokens/x.yml``, a Windows path, or a file of this server
    outside the checkout) is looked up under the root by its longest trailing part that
    exists there (``tokens/x.yml``); parts with ``..`` are never tried, and whether the path
    exists outside the checkout changes nothing in the answer.
    """
    if isinstance(checkout, Path):
        checkout = Checkout.at(checkout)
    root = checkout.root
    if not _is_absolute(recorded):
        path = Path(os.path.normpath(os.path.join(root, recorded)))
        if not checkout.allows(path):
            return Located(path, refused=f"the recorded path {recorded} is outside the checkout")
        return Located(path)
    windows = _WINDOWS_ABS.match(recorded) is not None
    if not windows:
        path = Path(posixpath.normpath(recorded))
        if checkout.allows(path) and os.path.lexists(path):
            return Located(path)
        parts = PurePosixPath(path).parts[1:]
    else:
        parts = PureWindowsPath(ntpath.normpath(recorded)).parts[1:]
    for i in range(len(parts)):
        tail = parts[i:]
        if ".." in tail:
            continue
        candidate = root.joinpath(*tail)
        if checkout.allows(candidate) and os.path.lexists(candidate):
            rel = "/".join(tail)
            return Located(
                candidate,
                f"the recorded path {recorded} is not portable (an absolute path on the "
                f"machine that wrote the sidecar); resolved as {rel} under the checkout root",
            )
    return Located(
        Path(recorded),
        f"the recorded path {recorded} is not portable (an absolute path on the machine that "
        "wrote the sidecar) and no file under the checkout root matches its trailing parts",
    )


@dataclass
class FieldResult:
    field: str
    ok: bool
    expected: str
    actual: str | None
    reason: str | None
    code: str | None
    note: str | None
    detail: str

    def check(self) -> Check:
        return Check(self.field, self.ok, self.detail)


def _result(
    entry: Input,
    actual: str | None,
    *,
    reason: str | None = None,
    code: str | None = None,
    note: str | None = None,
    how: str = "",
) -> FieldResult:
    ok = reason is None
    if ok:
        detail = f"hash matches {entry.hash}{how}"
    else:
        detail = f"{reason}; expected {entry.hash}, actual {actual or '<none>'}"
    if note:
        detail += f"; {note}"
    return FieldResult(entry.field, ok, entry.hash, actual, reason, code, note, detail)


def _input_text(entry: Input, checkout: Checkout) -> tuple[str, str | None] | FieldResult:
    """The text of a recorded input and its not-portable note, or the failed check.

    Only a regular file inside the checkout is read; a path leading outside is refused with
    the same words whatever is there (MALFORMED_TRACE: the sidecar names what may not be
    read), and nothing about such a file (existence, hash, parse errors) reaches the report.
    """
    located = resolve_input(entry.path, checkout)
    path, note = located.path, located.note
    if located.refused is not None:
        return _result(
            entry, None, reason=f"{located.refused}; not read", code=errors.MALFORMED_TRACE
        )
    real = os.path.realpath(path)  # resolved once: what is checked is what is read
    if not checkout.allows_real(real) or not os.path.lexists(path):
        return _result(
            entry,
            None,
            reason=f"{entry.field} file not found at {path}",
            code=errors.MISSING_SNAPSHOT,
            note=note,
        )
    try:
        return _read_input(Path(real), checkout), note
    except Unreadable as exc:
        reason = f"{entry.field} file at {path} is {exc}"
    except OSError as exc:
        reason = f"failed to read {entry.field} at {path}: {_reason(exc)}"
    return _result(entry, None, reason=reason, code=errors.INTEGRITY_FAILURE, note=note)


def verify_token(entry: Input, checkout: Checkout | Path) -> FieldResult:
    """``verifyReplayInputs`` for the token: canonical JSON of the parsed YAML only."""
    if isinstance(checkout, Path):
        checkout = Checkout.at(checkout)
    read = _input_text(entry, checkout)
    if isinstance(read, FieldResult):
        return read
    text, note = read
    try:
        actual = hash_structured(text)
    except (YAML12Error, CanonicalError) as exc:
        path = resolve_input(entry.path, checkout).path
        reason = f"failed to parse token at {path}: {_reason(exc)}"
        return _result(entry, None, reason=reason, code=errors.INTEGRITY_FAILURE, note=note)
    if actual != entry.hash:
        reason = "token contents have changed since the run; re-hash differs"
        return _result(entry, actual, reason=reason, code=errors.INTEGRITY_FAILURE, note=note)
    return _result(entry, actual, note=note, how=" (canonical JSON of the parsed YAML)")


def verify_brief(entry: Input, checkout: Checkout | Path) -> FieldResult:
    """The brief: raw-bytes hash first (markdown briefs), then canonical JSON of the YAML."""
    if isinstance(checkout, Path):
        checkout = Checkout.at(checkout)
    read = _input_text(entry, checkout)
    if isinstance(read, FieldResult):
        return read
    text, note = read
    raw = hash_raw(text)
    if raw == entry.hash:
        return _result(entry, raw, note=note, how=" (raw bytes)")
    try:
        actual: str | None = hash_structured(text)
    except (YAML12Error, CanonicalError) as exc:
        actual = None
        reason = (
            "brief is not valid YAML and the raw-bytes hash does not match: "
            f"{_reason(exc)} (raw-bytes hash {raw})"
        )
    else:
        if actual == entry.hash:
            return _result(entry, actual, note=note, how=" (canonical JSON of the parsed YAML)")
        reason = (
            "brief contents have changed since the run (neither raw-bytes nor canonical-YAML "
            f"hash matches; raw-bytes hash {raw})"
        )
    return _result(entry, actual, reason=reason, code=errors.INTEGRITY_FAILURE, note=note)


def _reason(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc)


# --- the whole verification ----------------------------------------------------------------


def _describe(sidecar: Sidecar, sidecar_path: Path) -> str:
    parts = [
        f"AHD replay sidecar {sidecar_path.name}: schema_version {SCHEMA_VERSION}",
        f"kind {sidecar.kind}",
        f"ahd_version {sidecar.ahd_version}",
    ]
    if sidecar.ahd_commit:
        parts.append(f"ahd_commit {sidecar.ahd_commit}{' (dirty)' if sidecar.git_dirty else ''}")
    parts.append(f"invoked_at {sidecar.invoked_at}")
    if sidecar.backfilled:
        parts.append("backfilled")
    if sidecar.brief is None:
        parts.append("no brief recorded")
    text = ", ".join(parts)
    if sidecar.ignored:
        text += f"; ignored unknown fields: {', '.join(sidecar.ignored)}"
    return text


def _report(mode: str) -> ReplayReport:
    report = ReplayReport(trace_id=None, format=FORMAT, mode=mode)
    report.unprotected_fields = list(UNPROTECTED_FIELDS)
    return report


@dataclass(frozen=True)
class NoCheckout:
    """Why a sidecar's inputs can be read nowhere: the root check's refusal
    (``MISSING_SNAPSHOT``, naming ``broke_at``)."""

    message: str
    broke_at: str


#: where a sidecar's inputs are read: the checkout and how it was found, or why there is none
Locate = Callable[[Sidecar], "tuple[Checkout, str] | NoCheckout"]


@dataclass(slots=True)
class _Verify:
    """The state one sidecar's checks share (`pipeline.run` over `_CHECKS`)."""

    report: ReplayReport
    #: what the format check calls the sidecar (its file name)
    name: str
    locate: Locate
    #: the sidecar's bytes, or the sidecar already parsed, or why there is none to read
    data: bytes | None = None
    sidecar: Sidecar | None = None
    absent: str | None = None
    checkout: Checkout | None = None
    results: list[FieldResult] = field(default_factory=list)

    def failed(self, check: str, code: str, message: str, **where: Any) -> Refusal:
        self.report.checks.append(Check(check, False, message))
        return Refusal(code, message, where)


def run_checks(
    name: str,
    locate: Locate,
    *,
    mode: str = AUDIT,
    data: bytes | None = None,
    sidecar: Sidecar | None = None,
    absent: str | None = None,
) -> tuple[ReplayReport, Checkout | None]:
    """A sidecar's checks (`_CHECKS`, run by :func:`core.replay.pipeline.run`): the format
    (``data`` parsed, or the ``sidecar`` given; ``absent`` says why there is none), the root
    (``locate``), the token, the brief, then AHD's verdict. The report, and the checkout the
    inputs were read from (None: the checks stopped before)."""
    state = _Verify(_report(mode), name, locate, data, sidecar, absent)
    report: ReplayReport = pipeline.run(_CHECKS, state)
    return report, state.checkout


def _format(run: _Verify) -> Refusal | None:
    """The sidecar's schema (ReplaySchema); unknown top-level fields are unprotected."""
    if run.absent is not None:
        return run.failed("format", errors.MALFORMED_TRACE, run.absent)
    sidecar = run.sidecar
    if sidecar is None:
        data = run.data if run.data is not None else b""
        try:
            if len(data) > MAX_SIDECAR_BYTES:
                raise _malformed(f"{run.name}: larger than {MAX_SIDECAR_BYTES} bytes")
            sidecar = parse_sidecar(data, where=run.name)
        except ReplayError as exc:
            return run.failed(
                "format", exc.code, exc.message, expected=exc.expected, observed=exc.observed
            )
        run.sidecar = sidecar
    run.report.checks.append(Check("format", True, _describe(sidecar, Path(run.name))))
    run.report.unprotected_fields += [f for f in sidecar.ignored if "." not in f]
    return None


def _root(run: _Verify) -> Refusal | None:
    """The checkout the inputs are read from (``locate``), or the refusal that there is none."""
    assert run.sidecar is not None
    located = run.locate(run.sidecar)
    if isinstance(located, NoCheckout):
        return run.failed(
            "root", errors.MISSING_SNAPSHOT, located.message, broke_at=located.broke_at
        )
    run.checkout, how = located
    run.report.checks.append(Check("root", True, f"checkout root {run.checkout.root} ({how})"))
    return None


def _token(run: _Verify) -> None:
    """The token re-hashed (its result is AHD's ok / FAIL line; the verdict decides)."""
    assert run.sidecar is not None
    assert run.checkout is not None
    _field(run, verify_token(run.sidecar.token, run.checkout))


def _brief(run: _Verify) -> None:
    """The brief re-hashed, when the run recorded one (a critique run does not)."""
    assert run.sidecar is not None
    assert run.checkout is not None
    if run.sidecar.brief is not None:
        _field(run, verify_brief(run.sidecar.brief, run.checkout))


def _field(run: _Verify, result: FieldResult) -> None:
    run.results.append(result)
    run.report.checks.append(result.check())


def _verdict(run: _Verify) -> Refusal | None:
    """AHD's verdict after every field is listed: the first field that failed names the
    report's code (no line of its own in the report)."""
    failed = next((r for r in run.results if not r.ok), None)
    run.report.replayable = failed is None
    if failed is None:
        return None
    assert failed.code is not None
    return Refusal(
        failed.code,
        f"{failed.field}: {failed.reason}",
        {"broke_at": failed.field, "expected": failed.expected, "observed": failed.actual},
    )


#: one sidecar's verification, in AHD's order; the first refusal ends it (the token and the
#: brief never refuse: AHD lists both, then its verdict names the first that failed)
_CHECKS: tuple[pipeline.Check[_Verify], ...] = (
    pipeline.Check("format", _format),
    pipeline.Check("root", _root),
    pipeline.Check("token", _token),
    pipeline.Check("brief", _brief),
    pipeline.Check("verdict", _verdict),
)


def verify_path(
    path: Path,
    *,
    root: Path | None = None,
    mode: str = AUDIT,
    excluded: tuple[str | os.PathLike[str], ...] = (),
    max_input_bytes: int = MAX_INPUT_BYTES,
) -> ReplayReport:
    """Verify an AHD sidecar (``*.replay.json``) or the report ``*.md`` beside it.

    Inputs are read only inside the checkout, never under an ``excluded`` directory (the
    server's data: its database, blobs and uploads), and at most ``max_input_bytes`` each.

    Raises :class:`AhdRootNotFound` when ``root`` is not given and no AHD checkout root is
    found above the file, or when the given root is not a directory (usage errors). Every
    other outcome is a report.
    """
    sidecar_path = sidecar_path_for(path)
    data: bytes | None = None
    absent: str | None = None
    if not sidecar_path.is_file():
        absent = (
            f"No replay sidecar found at {sidecar_path}. Re-run the report-producing "
            "command at v0.10+, which emits the sidecar alongside the markdown, or pass "
            "the sidecar path directly."
        )
    else:
        with sidecar_path.open("rb") as fh:
            data = read_bounded(fh, MAX_SIDECAR_BYTES)

    def locate(_sidecar: Sidecar) -> tuple[Checkout, str]:
        if root is not None:
            if not Path(root).is_dir():
                raise AhdRootNotFound(f"--root {root}: not a directory")
            checkout = Checkout.at(
                Path(os.path.abspath(root)), excluded=excluded, max_input_bytes=max_input_bytes
            )
            return checkout, "given with --root"
        start = Path(os.path.abspath(path)).parent
        found = find_root(start)
        if found is None:
            raise AhdRootNotFound(
                f"{path}: no AHD checkout root found (no package.json named {PACKAGE_NAME} in "
                f"{start} or its {ROOT_SEARCH_DIRS - 1} parent directories); pass the "
                "checkout with --root DIR"
            )
        checkout = Checkout.at(found, excluded=excluded, max_input_bytes=max_input_bytes)
        return checkout, f"found by walking up to the package.json named {PACKAGE_NAME}"

    report, _checkout = run_checks(sidecar_path.name, locate, mode=mode, data=data, absent=absent)
    return report


def _paths_hidden(report: ReplayReport, root: Path) -> ReplayReport:
    """The report with the server's checkout path written as REPLAY_AHD_ROOT: an uploader
    sees paths relative to the checkout, not where it lives on the server."""
    where = str(root)

    def hide(text: str) -> str:
        return text.replace(where, "REPLAY_AHD_ROOT")

    report.checks = [Check(c.name, c.ok, hide(c.detail)) for c in report.checks]
    report.message = hide(report.message)
    return report


NO_CHECKOUT_MESSAGE = (
    "{name}: this server keeps no AHD checkout to re-hash {inputs} against; set "
    "REPLAY_AHD_ROOT to the checkout they come from, or run "
    "`manage.py verify {name} --root CHECKOUT` where they are"
)
REPORT_ALONE_MESSAGE = (
    "{name} is an AHD eval report: upload its replay sidecar ({sidecar}), which records the "
    "hashes to check"
)


def verify_upload(
    data: bytes,
    name: str,
    *,
    root: Path | None,
    mode: str = AUDIT,
    excluded: tuple[str | os.PathLike[str], ...] = (),
    max_input_bytes: int = MAX_INPUT_BYTES,
) -> ReplayReport:
    """A sidecar that arrived on its own (the console's upload), verified against ``root``,
    the AHD checkout the server keeps (``REPLAY_AHD_ROOT``). Without one, the sidecar's form
    is still checked and the report says which inputs could not be re-hashed
    (MISSING_SNAPSHOT: the inputs are not where the verifier can read them)."""
    absent = None
    if not name.lower().endswith(SIDECAR_SUFFIX) and name.lower().endswith((".md", ".markdown")):
        absent = REPORT_ALONE_MESSAGE.format(name=name, sidecar=sidecar_path_for(Path(name)).name)
    kept = root is not None and Path(root).is_dir()
    absolute = Path(os.path.abspath(root)) if root is not None and kept else None

    def locate(sidecar: Sidecar) -> tuple[Checkout, str] | NoCheckout:
        if absolute is not None:
            checkout = Checkout.at(absolute, excluded=excluded, max_input_bytes=max_input_bytes)
            return checkout, "the AHD checkout this server keeps"
        inputs = f"the token {sidecar.token.path}"
        if sidecar.brief is not None:
            inputs += f" and the brief {sidecar.brief.path}"
        return NoCheckout(NO_CHECKOUT_MESSAGE.format(name=name, inputs=inputs), "token")

    report, checkout = run_checks(name, locate, mode=mode, data=data, absent=absent)
    if checkout is not None and absolute is not None:
        return _paths_hidden(report, absolute)
    return report


def verdict_line(report: dict[str, Any]) -> str:
    """AHD's last line: ``verdict: replay inputs intact`` or ``verdict: drift detected``."""
    if report.get("status") == "ok":
        return "verdict: replay inputs intact"
    fields = {"token", "brief"}
    if any(c["name"] in fields and not c["ok"] for c in report.get("checks", [])):
        return "verdict: drift detected"
    return "verdict: not verified"
