"""The bounded reader of an archive of AHD inputs (``core.formats.archive``), and the sidecar
schema as strict as AHD's hash contract (``sha256:`` + 64 lower-case hex, ``ahd_commit`` a
full lower-case SHA or null, ``git_dirty`` null exactly when the commit is).

Every archive here is generated with the stdlib writers (tarfile, zipfile, gzip); every
expected message was produced by running the reader once and reviewed."""

from __future__ import annotations

import gzip
import io
import json
import stat
import tarfile
import zipfile

import pytest

from core.errors import MALFORMED_TRACE, ReplayError
from core.formats import ahd
from core.formats import archive as ar
from tests.published import PUBLISHED

FIXTURES = PUBLISHED
CHECKOUT = FIXTURES / "ahd" / "checkout"
SWISS = CHECKOUT / "docs" / "evals" / "2026-04-21-swiss.replay.json"
TOKEN = CHECKOUT / "tokens" / "swiss-editorial.yml"
BRIEF = CHECKOUT / "briefs" / "landing.yml"
REFUSED = "; the archive is refused and nothing from it is used"


def member(name, data=b"", kind=tarfile.REGTYPE, link=""):
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = link
    info.size = len(data) if kind == tarfile.REGTYPE else 0
    return info, (io.BytesIO(data) if kind == tarfile.REGTYPE else None)


def tgz(*members):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for info, body in members:
            tar.addfile(info, body)
    return buf.getvalue()


def zipped(*entries):
    """(name, data, unix mode or 0) -> the bytes of a deflated zip."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data, mode in entries:
            info = zipfile.ZipInfo(name)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.create_system = 3
            if mode:
                info.external_attr = mode << 16
            zf.writestr(info, data)
    return buf.getvalue()


def refusal(data, name, limits=ar.DEFAULT_LIMITS):
    with pytest.raises(ReplayError) as refused:
        ar.read_archive(data, name, limits)
    exc = refused.value
    assert exc.code == MALFORMED_TRACE
    return exc.message, exc.broke_at


# --- reading --------------------------------------------------------------------------------


def test_a_tar_gz_of_the_inputs_reads_as_its_files_by_path():
    data = tgz(
        member("./", kind=tarfile.DIRTYPE),
        member("./tokens", kind=tarfile.DIRTYPE),
        member("./tokens/swiss-editorial.yml", TOKEN.read_bytes()),
        member("briefs/landing.yml", BRIEF.read_bytes()),
    )
    assert ar.read_archive(data, "inputs.tar.gz") == {
        "tokens/swiss-editorial.yml": TOKEN.read_bytes(),
        "briefs/landing.yml": BRIEF.read_bytes(),
    }


def test_a_zip_of_the_inputs_reads_as_its_files_by_path():
    data = zipped(
        ("tokens/", b"", stat.S_IFDIR | 0o755),
        ("tokens/swiss-editorial.yml", TOKEN.read_bytes(), stat.S_IFREG | 0o644),
        ("briefs/landing.yml", BRIEF.read_bytes(), 0),
    )
    assert ar.read_archive(data, "inputs.zip") == {
        "tokens/swiss-editorial.yml": TOKEN.read_bytes(),
        "briefs/landing.yml": BRIEF.read_bytes(),
    }


def test_expanded_inputs_are_found_by_path_and_by_a_file_name_no_other_entry_has():
    data = tgz(
        member("ahd/tokens/swiss-editorial.yml", TOKEN.read_bytes()),
        member("a/landing.yml", b"one"),
        member("b/landing.yml", b"two"),
    )
    expanded = ar.expand_inputs({"in.tgz": data, "landing.yml": b"loose"})
    assert expanded == {
        "ahd/tokens/swiss-editorial.yml": TOKEN.read_bytes(),
        "swiss-editorial.yml": TOKEN.read_bytes(),
        "a/landing.yml": b"one",
        "b/landing.yml": b"two",
        "landing.yml": b"loose",
    }


# --- refusals, each naming the entry ---------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "data", "message", "broke_at"),
    [
        (
            "x.tar.gz",
            tgz(member("/etc/swiss-editorial.yml", b"a: 1\n")),
            "x.tar.gz: entry '/etc/swiss-editorial.yml' has an absolute path",
            "/etc/swiss-editorial.yml",
        ),
        (
            "x.zip",
            zipped(("C:/tokens/t.yml", b"a", 0)),
            "x.zip: entry 'C:/tokens/t.yml' has an absolute path",
            "C:/tokens/t.yml",
        ),
        (
            "x.tar.gz",
            tgz(member("tokens/../../swiss-editorial.yml", b"a: 1\n")),
            "x.tar.gz: entry 'tokens/../../swiss-editorial.yml' has a '..' component",
            "tokens/../../swiss-editorial.yml",
        ),
        (
            "x.zip",
            zipped(("..\\tokens\\t.yml", b"a", 0)),
            "x.zip: entry '..\\\\tokens\\\\t.yml' has a '..' component",
            "..\\tokens\\t.yml",
        ),
        (
            "x.tar.gz",
            tgz(member("tokens/swiss-editorial.yml", kind=tarfile.SYMTYPE, link="/etc/passwd")),
            "x.tar.gz: entry 'tokens/swiss-editorial.yml' is a symbolic link (to '/etc/passwd')",
            "tokens/swiss-editorial.yml",
        ),
        (
            "x.zip",
            zipped(("tokens/t.yml", b"/etc/passwd", stat.S_IFLNK | 0o777)),
            "x.zip: entry 'tokens/t.yml' is a symbolic link",
            "tokens/t.yml",
        ),
        (
            "x.tgz",
            tgz(
                member("a.yml", b"x"),
                member("tokens/t.yml", kind=tarfile.LNKTYPE, link="a.yml"),
            ),
            "x.tgz: entry 'tokens/t.yml' is a hard link (to 'a.yml')",
            "tokens/t.yml",
        ),
        (
            "x.tgz",
            tgz(member("tokens/t.yml", kind=tarfile.CHRTYPE)),
            "x.tgz: entry 'tokens/t.yml' is a device or FIFO, not a regular file",
            "tokens/t.yml",
        ),
        (
            "x.tgz",
            tgz(member("tokens/t.yml", kind=tarfile.FIFOTYPE)),
            "x.tgz: entry 'tokens/t.yml' is a device or FIFO, not a regular file",
            "tokens/t.yml",
        ),
        (
            "x.tar.gz",
            tgz(member("tokens/t.yml", b"a"), member("./tokens/t.yml", b"b")),
            "x.tar.gz: entry './tokens/t.yml' names tokens/t.yml a second time (duplicate name)",
            "./tokens/t.yml",
        ),
        (
            "x.zip",
            zipped(("tokens/t.yml", b"\0" * (2 * 1024**2), 0)),
            "x.zip: entry 'tokens/t.yml' expands to 2097152 bytes from 2049 compressed, more "
            "than 200 times (decompression bomb)",
            "tokens/t.yml",
        ),
        (
            "x.tgz",
            tgz(member("tokens/t.yml", b"\0" * (2 * 1024**2))),
            "x.tgz expands to 2099200 bytes from 2125 compressed, more than 200 times "
            "(decompression bomb)",
            "x.tgz",
        ),
        (
            "x.zip",
            b"PK\x03\x04 not really",
            "x.zip is not a readable zip archive (File is not a zip file)",
            "x.zip",
        ),
        (
            "x.tgz",
            b"hello",
            "x.tgz is not a readable gzip stream (Error -3 while decompressing data: incorrect "
            "header check)",
            "x.tgz",
        ),
        (
            "x.tgz",
            tgz(member("t.yml", b"a"))[:-12],
            "x.tgz is a truncated gzip stream",
            "x.tgz",
        ),
        ("x.rar", b"Rar!", "x.rar is not a .tar.gz, .tgz or .zip archive", "x.rar"),
    ],
    ids=[
        "absolute",
        "absolute-windows",
        "dotdot",
        "dotdot-backslash",
        "symlink",
        "zip-symlink",
        "hardlink",
        "device",
        "fifo",
        "duplicate",
        "zip-ratio-bomb",
        "tar-ratio-bomb",
        "not-zip",
        "not-gzip",
        "truncated",
        "not-an-archive",
    ],
)
def test_a_hostile_archive_is_refused_naming_the_entry(name, data, message, broke_at):
    assert refusal(data, name) == (message + REFUSED, broke_at)


SMALL = ar.ArchiveLimits(max_entries=2, max_entry_bytes=10, max_total_bytes=15)


def test_too_many_entries_are_refused():
    data = zipped(("a", b"1", 0), ("b", b"2", 0), ("c", b"3", 0))
    assert refusal(data, "x.zip", SMALL) == (
        "x.zip: entry 'c' is one entry too many (at most 2 entries)" + REFUSED,
        "c",
    )


def test_an_entry_over_the_size_limit_is_refused_before_it_is_read():
    data = zipped(("a", b"1" * 11, 0))
    assert refusal(data, "x.zip", SMALL) == (
        "x.zip: entry 'a' is 11 bytes uncompressed, over the limit of 10 bytes per entry "
        "(decompression bomb)" + REFUSED,
        "a",
    )


def test_entries_over_the_total_limit_are_refused():
    data = tgz(member("a", b"1" * 8), member("b", b"2" * 8))
    assert refusal(data, "x.tar.gz", SMALL) == (
        "x.tar.gz: entry 'b' brings the entries to 16 bytes uncompressed, over the limit of 15 "
        "bytes in all (decompression bomb)" + REFUSED,
        "b",
    )


def test_a_gzip_stream_is_never_inflated_past_the_cap_whatever_its_headers_say():
    data = gzip.compress(b"\0" * 20000)
    assert refusal(data, "x.tar.gz", SMALL) == (
        "x.tar.gz inflates to more than 13327 bytes, over the limit for 2 entries of 15 bytes "
        "in all (decompression bomb)" + REFUSED,
        "x.tar.gz",
    )


def test_an_archive_larger_than_the_limit_is_refused_unread():
    limits = ar.ArchiveLimits(max_archive_bytes=100)
    assert refusal(b"\0" * 101, "x.zip", limits) == (
        "x.zip is larger than 100 bytes compressed" + REFUSED,
        "x.zip",
    )


def test_an_encrypted_zip_entry_is_refused():
    data = bytearray(zipped(("t.yml", b"a: 1\n", 0)))
    # set the "encrypted" flag bit in the local header and the central directory
    data[6] |= 1
    central = data.index(b"PK\x01\x02")
    data[central + 8] |= 1
    assert refusal(bytes(data), "x.zip") == ("x.zip: entry 't.yml' is encrypted" + REFUSED, "t.yml")


# --- the sidecar schema, strict as the hash contract --------------------------------------------


def edited(edit):
    doc = json.loads(SWISS.read_bytes())
    edit(doc)
    return json.dumps(doc).encode()


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            lambda d: d["token"].update(
                hash=d["token"]["hash"].upper().replace("SHA256", "sha256")
            ),
            "x.token.hash: expected sha256:<64 lower-case hex>, got "
            "'sha256:380A3D833D9463DBC681DF7465993AB6413D8E77188F55F97359F60DC4B746B1'",
        ),
        (
            lambda d: d["brief"].update(hash=d["brief"]["hash"][:-1]),
            "x.brief.hash: expected sha256:<64 lower-case hex>, got "
            "'sha256:8b7d4275964399a91e6ddec525151ba672ed9c4721279a37ec16ab3450493a4'",
        ),
        (
            lambda d: d["token"].update(hash="SHA256:" + d["token"]["hash"][7:]),
            "x.token.hash: expected sha256:<64 lower-case hex>, got "
            "'SHA256:380a3d833d9463dbc681df7465993ab6413d8e77188f55f97359f60dc4b746b1'",
        ),
        (
            lambda d: d.update(ahd_commit="4813E2C5A429BDE5FE19F2D11891AF13FD325CC3"),
            "x.ahd_commit: expected 40 lower-case hex (a full git SHA) or null, got "
            "'4813E2C5A429BDE5FE19F2D11891AF13FD325CC3'",
        ),
        (
            lambda d: d.update(ahd_commit="4813e2c"),
            "x.ahd_commit: expected 40 lower-case hex (a full git SHA) or null, got '4813e2c'",
        ),
        (
            lambda d: d.update(ahd_commit=None),
            "x.git_dirty: must be null when ahd_commit is null, got false",
        ),
        (
            lambda d: d.update(ahd_commit=None, git_dirty=True),
            "x.git_dirty: must be null when ahd_commit is null, got true",
        ),
        (
            lambda d: d.update(git_dirty=None),
            "x.git_dirty: expected a boolean when ahd_commit is set, got null",
        ),
        (
            lambda d: d.update(git_dirty="false"),
            "x.git_dirty: expected a boolean or null, got a string",
        ),
        (
            lambda d: d.update(ahd_commit=40),
            "x.ahd_commit: expected a string or null, got a number",
        ),
    ],
    ids=[
        "upper-hex",
        "short-hash",
        "upper-prefix",
        "upper-commit",
        "short-commit",
        "dirty-without-commit",
        "dirty-true-without-commit",
        "commit-without-dirty",
        "dirty-string",
        "commit-number",
    ],
)
def test_a_sidecar_outside_the_hash_contract_is_malformed(edit, message):
    with pytest.raises(ReplayError) as refused:
        ahd.parse_sidecar(edited(edit), where="x")
    assert (refused.value.code, refused.value.message) == (MALFORMED_TRACE, message)


def test_a_sidecar_outside_a_git_repo_records_null_commit_and_null_dirty():
    sidecar = ahd.parse_sidecar(edited(lambda d: d.update(ahd_commit=None, git_dirty=None)))
    assert (sidecar.ahd_commit, sidecar.git_dirty) == (None, None)


# --- nested archives, and one archive read as a whole AHD run ---------------------------------


def plain_tar(name, data):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info, body = member(name, data)
        tar.addfile(info, body)
    return buf.getvalue()


@pytest.mark.parametrize(
    ("entry", "data", "why"),
    [
        ("inner.zip", b"not even a zip", "by its name"),
        ("notes/inner.tar", b"plain", "by its name"),
        ("token.yml", gzip.compress(b"a: 1\n", mtime=0), "by its first bytes"),
        ("token.yml", zipped(("a.yml", b"a: 1\n", 0)), "by its first bytes"),
        ("token.yml", plain_tar("a.yml", b"a: 1\n"), "by its first bytes"),
        ("token.yml", b"BZh91AY&SY", "by its first bytes"),
    ],
)
def test_an_archive_inside_an_archive_is_refused_naming_the_entry(entry, data, why):
    for outer, name in (
        (tgz(member(entry, data)), "run.tar.gz"),
        (zipped((entry, data, 0)), "run.zip"),
    ):
        with pytest.raises(ReplayError) as refused:
            ar.read_archive(outer, name)
        assert (refused.value.code, refused.value.message, refused.value.broke_at) == (
            MALFORMED_TRACE,
            f"{name}: entry {entry!r} is itself an archive {why} (nested archives are refused)"
            + REFUSED,
            entry,
        )


def test_one_archive_is_read_as_a_run_its_sidecar_and_inputs():
    data = tgz(
        member("run/docs/evals/2026-04-21-swiss.replay.json", SWISS.read_bytes()),
        member("run/tokens/swiss-editorial.yml", TOKEN.read_bytes()),
        member("run/briefs/landing.yml", BRIEF.read_bytes()),
    )
    run = ar.read_run(data, "run.tar.gz")
    assert (run.sidecar_path, run.sidecar_name, run.sidecar) == (
        "run/docs/evals/2026-04-21-swiss.replay.json",
        "2026-04-21-swiss.replay.json",
        SWISS.read_bytes(),
    )
    assert run.inputs == {
        "run/tokens/swiss-editorial.yml": TOKEN.read_bytes(),
        "run/briefs/landing.yml": BRIEF.read_bytes(),
        "swiss-editorial.yml": TOKEN.read_bytes(),
        "landing.yml": BRIEF.read_bytes(),
    }


def test_an_archive_with_no_sidecar_or_two_is_not_a_run():
    inputs_only = tgz(member("tokens/swiss-editorial.yml", TOKEN.read_bytes()))
    with pytest.raises(ReplayError) as none:
        ar.read_run(inputs_only, "inputs.tgz")
    assert none.value.message == (
        "inputs.tgz is an archive of AHD inputs; drop it together with the sidecar "
        "(*.replay.json) that names the files it holds"
    )
    two = tgz(member("a.replay.json", b"{}"), member("b/b.replay.json", b"{}"))
    with pytest.raises(ReplayError) as several:
        ar.read_run(two, "run.tgz")
    assert (several.value.code, several.value.message) == (
        MALFORMED_TRACE,
        "run.tgz holds 2 AHD sidecars (a.replay.json, b/b.replay.json); an archive is one run: "
        "its sidecar with the token and brief it names" + REFUSED,
    )
