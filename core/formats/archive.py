"""One archive of an AHD run's inputs (``.tar.gz`` / ``.tgz`` / ``.zip``), read in memory.

An auditor may drop one archive holding the token and brief files a sidecar names instead of
the loose files. The archive is a hostile input: it is read here by a pure, bounded reader
(stdlib ``tarfile`` / ``zipfile`` over bytes in memory; nothing is ever extracted to disk)
that returns the regular files it holds, by path, or refuses the whole archive with
``MALFORMED_TRACE`` and a message naming the entry (``broke_at`` is the entry's name):

- an absolute path (``/x``, ``C:\\x``, ``\\\\host\\x``) or a ``..`` component;
- anything but a regular file or a directory: a symbolic link, a hard link, a device, a
  FIFO (tar member types; a zip entry's Unix mode);
- a decompression bomb: an entry larger than ``max_entry_bytes`` uncompressed, entries
  totalling more than ``max_total_bytes``, an entry (zip) or the whole stream (tar.gz)
  expanding more than ``max_ratio`` times once it is larger than ``ratio_floor_bytes``; a
  gzip stream is inflated with a hard cap, so a tar header that lies about sizes changes
  nothing;
- more than ``max_entries`` entries, or two entries with one name (``./a`` and ``a`` are
  one name);
- an encrypted zip entry, a corrupt archive, or a file that is no archive at all;
- an archive inside the archive (by its name, or by its first bytes: gzip, zip, bzip2, xz,
  7z, a tar header): nested archives are never opened.

An archive may also be **one AHD run handed over whole** (``run.tar.gz``): the sidecar
(``*.replay.json``) together with the token and brief it names. :func:`read_run` reads it
as the sidecar and its inputs, or says why it is not one (no sidecar, several).

Pure: no Django, no I/O.
"""

from __future__ import annotations

import io
import stat
import tarfile
import zipfile
import zlib
from collections.abc import Mapping
from dataclasses import dataclass

from core import errors
from core.errors import ReplayError

SUFFIXES = (".tar.gz", ".tgz", ".zip")
#: names of archives and compressed files an archive may not hold (nested archives)
NESTED_SUFFIXES = (*SUFFIXES, ".tar", ".gz", ".bz2", ".xz", ".zst", ".7z", ".rar", ".tbz2", ".txz")
#: first bytes of the same: gzip, zip (and its empty and spanned forms), bzip2, xz, 7z, zstd
NESTED_MAGIC = (
    b"\x1f\x8b",
    b"PK\x03\x04",
    b"PK\x05\x06",
    b"PK\x07\x08",
    b"BZh",
    b"\xfd7zXZ\x00",
    b"7z\xbc\xaf\x27\x1c",
    b"\x28\xb5\x2f\xfd",
)
#: an AHD sidecar's name: what makes an archive one whole run rather than a sidecar's inputs
SIDECAR_SUFFIX = ".replay.json"
#: Tar headers and padding on top of each member's own bytes, and the end-of-archive blocks
#: padded to a 20-block record.
_TAR_OVERHEAD_PER_ENTRY = 3 * 512
_TAR_RECORD = 20 * 512


@dataclass(frozen=True)
class ArchiveLimits:
    max_archive_bytes: int = 64 * 1024**2
    max_entries: int = 256
    max_entry_bytes: int = 64 * 1024**2
    max_total_bytes: int = 128 * 1024**2
    max_ratio: int = 200
    ratio_floor_bytes: int = 1024**2


DEFAULT_LIMITS = ArchiveLimits()


def is_archive(filename: str) -> bool:
    """Whether a file name says it is an archive of inputs."""
    return filename.lower().endswith(SUFFIXES)


def _refuse(archive: str, entry: str | None, what: str) -> ReplayError:
    where = f"{archive}: entry {entry!r}" if entry is not None else archive
    return ReplayError(
        errors.MALFORMED_TRACE,
        f"{where} {what}; the archive is refused and nothing from it is used",
        broke_at=entry if entry is not None else archive,
        detail={"archive": archive, "entry": entry, "reason": what},
    )


def _clean_name(archive: str, raw: str) -> str:
    """The entry's path, ``/``-separated without ``./`` parts; refuses what leads out."""
    name = raw.replace("\\", "/")
    if name.startswith("/") or (len(name) > 1 and name[1] == ":" and name[0].isalpha()):
        raise _refuse(archive, raw, "has an absolute path")
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise _refuse(archive, raw, "has a '..' component")
    return "/".join(parts)


class _Budget:
    """Counts entries and uncompressed bytes against the limits."""

    def __init__(self, archive: str, limits: ArchiveLimits) -> None:
        self.archive = archive
        self.limits = limits
        self.entries = 0
        self.total = 0
        self.names: set[str] = set()

    def entry(self, raw: str, *, directory: bool = False) -> str:
        """The entry's clean name ("" for the archive's root directory)."""
        self.entries += 1
        if self.entries > self.limits.max_entries:
            raise _refuse(
                self.archive,
                raw,
                f"is one entry too many (at most {self.limits.max_entries} entries)",
            )
        name = _clean_name(self.archive, raw)
        if directory:
            return name
        if not name:
            raise _refuse(self.archive, raw, "has an empty name")
        if name in self.names:
            raise _refuse(self.archive, raw, f"names {name} a second time (duplicate name)")
        self.names.add(name)
        return name

    def size(self, raw: str, size: int) -> None:
        limit = self.limits.max_entry_bytes
        if size > limit:
            raise _refuse(
                self.archive,
                raw,
                f"is {size} bytes uncompressed, over the limit of {limit} bytes per entry "
                "(decompression bomb)",
            )
        self.total += size
        if self.total > self.limits.max_total_bytes:
            raise _refuse(
                self.archive,
                raw,
                f"brings the entries to {self.total} bytes uncompressed, over the limit of "
                f"{self.limits.max_total_bytes} bytes in all (decompression bomb)",
            )

    def ratio(self, raw: str | None, size: int, compressed: int) -> None:
        limits = self.limits
        if size > limits.ratio_floor_bytes and size > limits.max_ratio * max(compressed, 1):
            raise _refuse(
                self.archive,
                raw,
                f"expands to {size} bytes from {compressed} compressed, more than "
                f"{limits.max_ratio} times (decompression bomb)",
            )


def _nested(archive: str, raw: str, name: str, body: bytes) -> None:
    """Refuses an entry that is itself an archive or a compressed file."""
    if name.lower().endswith(NESTED_SUFFIXES):
        raise _refuse(
            archive, raw, "is itself an archive by its name (nested archives are refused)"
        )
    tar_header = len(body) >= 262 and body[257:262] == b"ustar"
    if body.startswith(NESTED_MAGIC) or tar_header:
        raise _refuse(
            archive, raw, "is itself an archive by its first bytes (nested archives are refused)"
        )


def read_archive(
    data: bytes, filename: str, limits: ArchiveLimits = DEFAULT_LIMITS
) -> dict[str, bytes]:
    """The regular files of an archive, by path (directories are skipped), or a refusal."""
    if len(data) > limits.max_archive_bytes:
        raise _refuse(filename, None, f"is larger than {limits.max_archive_bytes} bytes compressed")
    lower = filename.lower()
    if lower.endswith(".zip"):
        return _read_zip(data, filename, limits)
    if lower.endswith((".tar.gz", ".tgz")):
        return _read_tar_gz(data, filename, limits)
    raise _refuse(filename, None, "is not a .tar.gz, .tgz or .zip archive")


def _inflate_gzip(data: bytes, filename: str, limits: ArchiveLimits) -> bytes:
    """The gzip stream inflated, never beyond the limits (a bomb stops here)."""
    cap = limits.max_total_bytes + _TAR_OVERHEAD_PER_ENTRY * limits.max_entries + _TAR_RECORD
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        out = inflater.decompress(data, cap + 1)
    except zlib.error as exc:
        raise _refuse(filename, None, f"is not a readable gzip stream ({exc})") from None
    if len(out) > cap:
        raise _refuse(
            filename,
            None,
            f"inflates to more than {cap} bytes, over the limit for {limits.max_entries} "
            f"entries of {limits.max_total_bytes} bytes in all (decompression bomb)",
        )
    if not inflater.eof:
        raise _refuse(filename, None, "is a truncated gzip stream")
    if inflater.unused_data:
        raise _refuse(filename, None, "holds data after its gzip stream")
    budget = _Budget(filename, limits)
    budget.ratio(None, len(out), len(data))
    return out


def _read_tar_gz(data: bytes, filename: str, limits: ArchiveLimits) -> dict[str, bytes]:
    tar_bytes = _inflate_gzip(data, filename, limits)
    budget = _Budget(filename, limits)
    files: dict[str, bytes] = {}
    try:
        with tarfile.open(fileobj=io.BytesIO(tar_bytes), mode="r:") as tar:
            while True:
                member = tar.next()
                if member is None:
                    break
                raw = member.name
                name = budget.entry(raw, directory=member.isdir())
                if member.issym():
                    raise _refuse(filename, raw, f"is a symbolic link (to {member.linkname!r})")
                if member.islnk():
                    raise _refuse(filename, raw, f"is a hard link (to {member.linkname!r})")
                if member.isdir():
                    continue
                if not member.isreg():
                    raise _refuse(filename, raw, "is a device or FIFO, not a regular file")
                budget.size(raw, member.size)
                fh = tar.extractfile(member)
                body = fh.read(member.size + 1) if fh is not None else b""
                if len(body) != member.size:
                    raise _refuse(filename, raw, "is truncated")
                _nested(filename, raw, name, body)
                files[name] = body
    except tarfile.TarError as exc:
        raise _refuse(filename, None, f"is not a readable tar archive ({exc})") from None
    return files


def _zip_kind(info: zipfile.ZipInfo) -> str:
    """What a zip entry is: its Unix file type where a Unix zip records one, else a file
    (or a directory, by its trailing ``/``)."""
    mode = info.external_attr >> 16
    kind = stat.S_IFMT(mode)
    if info.is_dir() or (info.create_system == 3 and stat.S_ISDIR(mode)):
        return "dir"
    if info.create_system != 3 or kind == 0 or stat.S_ISREG(mode):
        return "file"
    if stat.S_ISLNK(mode):
        return "symlink"
    return "special"


def _read_zip(data: bytes, filename: str, limits: ArchiveLimits) -> dict[str, bytes]:
    budget = _Budget(filename, limits)
    files: dict[str, bytes] = {}
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            infos = zf.infolist()
            for info in infos:
                raw = info.filename
                kind = _zip_kind(info)
                name = budget.entry(raw, directory=kind == "dir")
                if kind == "symlink":
                    raise _refuse(filename, raw, "is a symbolic link")
                if kind == "special":
                    raise _refuse(filename, raw, "is a device or FIFO, not a regular file")
                if kind == "dir":
                    continue
                if info.flag_bits & 0x1:
                    raise _refuse(filename, raw, "is encrypted")
                budget.size(raw, info.file_size)
                budget.ratio(raw, info.file_size, info.compress_size)
                with zf.open(info) as fh:
                    body = fh.read(info.file_size + 1)  # a lying header cannot inflate more
                if len(body) != info.file_size:
                    raise _refuse(filename, raw, "does not hold the size its header declares")
                _nested(filename, raw, name, body)
                files[name] = body
    except zipfile.BadZipFile as exc:
        raise _refuse(filename, None, f"is not a readable zip archive ({exc})") from None
    except (zlib.error, EOFError, NotImplementedError) as exc:
        raise _refuse(filename, None, f"cannot be read ({exc})") from None
    return files


def _by_path_and_name(files: Mapping[str, bytes]) -> dict[str, bytes]:
    """Each file by its path in the archive and, where no other file has it, by its file
    name (what a sidecar's recorded path is matched against)."""
    basenames: dict[str, list[str]] = {}
    for path in files:
        basenames.setdefault(path.rsplit("/", 1)[-1], []).append(path)
    out = dict(files)
    for base, paths in basenames.items():
        if len(paths) == 1:
            out.setdefault(base, files[paths[0]])
    return out


@dataclass(frozen=True)
class ArchivedRun:
    """One AHD run handed over as one archive: its sidecar and the other files it holds."""

    archive: str
    sidecar_path: str  # the sidecar's path in the archive
    sidecar: bytes
    #: every other file, by its path in the archive and by its file name where unique
    inputs: dict[str, bytes]

    @property
    def sidecar_name(self) -> str:
        return self.sidecar_path.rsplit("/", 1)[-1]


NO_SIDECAR = (
    "{archive} is an archive of AHD inputs; drop it together with the sidecar "
    "(*{suffix}) that names the files it holds"
)
SEVERAL_SIDECARS = (
    "holds {count} AHD sidecars ({names}); an archive is one run: its sidecar with the "
    "token and brief it names"
)


def read_run(data: bytes, filename: str, limits: ArchiveLimits = DEFAULT_LIMITS) -> ArchivedRun:
    """An archive read as one AHD run (``run.tar.gz`` holding ``*.replay.json`` and the token
    and brief it names), refused as :func:`read_archive` refuses, or with ``MALFORMED_TRACE``
    when it holds no sidecar (then it can only be a sidecar's inputs) or several."""
    files = read_archive(data, filename, limits)
    sidecars = sorted(p for p in files if p.lower().endswith(SIDECAR_SUFFIX))
    if not sidecars:
        raise ReplayError(
            errors.MALFORMED_TRACE,
            NO_SIDECAR.format(archive=filename, suffix=SIDECAR_SUFFIX),
            detail={"archive": filename, "reason": "no sidecar"},
        )
    if len(sidecars) > 1:
        raise _refuse(
            filename, None, SEVERAL_SIDECARS.format(count=len(sidecars), names=", ".join(sidecars))
        )
    path = sidecars[0]
    rest = {p: body for p, body in files.items() if p != path}
    return ArchivedRun(filename, path, files[path], _by_path_and_name(rest))


def expand_inputs(
    inputs: Mapping[str, bytes], limits: ArchiveLimits = DEFAULT_LIMITS
) -> dict[str, bytes]:
    """Uploaded inputs with every archive among them replaced by the files it holds: each
    by its path in the archive and, where no other file has it, by its file name (what a
    sidecar's recorded path is matched against). A loose file wins over an archived one of
    the same name. Refuses (``ReplayError``) as :func:`read_archive` does."""
    loose = {name: body for name, body in inputs.items() if not is_archive(name)}
    expanded: dict[str, bytes] = {}
    for name, body in inputs.items():
        if not is_archive(name):
            continue
        files = read_archive(body, name, limits)
        for path, content in files.items():
            expanded.setdefault(path, content)
        for path, content in _by_path_and_name(files).items():
            expanded.setdefault(path, content)
    return {**expanded, **loose}
