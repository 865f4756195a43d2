"""Blobs on a real S3 server (SeaweedFS, started by deploy/seaweed.py): the console stores and
reads them through its own code, and the append-only and owner-only promises hold there: the
application's keys can neither delete nor overwrite a blob nor change the bucket's rules, an
upload cut off mid-way stores nothing, and the launcher's files are owner-only."""

from __future__ import annotations

import hashlib
import io
import socket
import stat
import tempfile
import threading

import pytest
from botocore.exceptions import ClientError
from django.core.files import File
from django.core.files.base import ContentFile
from django.core.files.storage import storages

from console.blobstore import AppendOnlyS3Storage
from console.health import BLOB_PROBE, check_blobs
from replay.expiry import blob_content_remove
from replay.storage import blob_name, blob_open, blob_put, spool
from tests.storage.conftest import storage_options


def _stored(store, key: str) -> bytes | None:
    """The object's bytes as the admin sees them, or None."""
    admin = store.client("admin")
    listed = admin.list_objects_v2(Bucket=store.bucket, Prefix=key).get("Contents", [])
    if key not in [o["Key"] for o in listed]:
        return None
    return admin.get_object(Bucket=store.bucket, Key=key)["Body"].read()


EMPTY_POLICY = '{"Version":"2012-10-17","Statement":[]}'


def _put(data: bytes) -> str:
    spooled = spool(io.BytesIO(data), limit=1 << 30)
    try:
        return blob_put(spooled)
    finally:
        spooled.discard()


def _code(err: pytest.ExceptionInfo) -> str:
    return err.value.response["Error"]["Code"]


def test_a_blob_is_stored_under_its_digest_and_read_back(s3_blobs):
    data = b'{"trace": "stored on SeaweedFS"}\n'
    sha = hashlib.sha256(data).hexdigest()
    name = _put(data)
    assert name == f"{sha[:2]}/{sha[2:4]}/{sha}" == blob_name(sha)
    with blob_open(name) as fh:
        assert fh.read() == data
    assert _stored(s3_blobs, name) == data
    assert _put(data) == name  # the same file again: the same object, stored once


def test_the_application_keys_cannot_delete_a_blob(s3_blobs):
    data = b"evidence the app may not destroy\n"
    name = _put(data)
    with pytest.raises(ClientError) as refused:
        storages["blobs"].delete(name)
    assert _code(refused) == "AccessDenied"
    app = s3_blobs.client("app")
    with pytest.raises(ClientError) as refused:
        app.delete_object(Bucket=s3_blobs.bucket, Key=name)
    assert _code(refused) == "AccessDenied"
    bulk = app.delete_objects(Bucket=s3_blobs.bucket, Delete={"Objects": [{"Key": name}]})
    assert [(e["Key"], e["Code"]) for e in bulk["Errors"]] == [(name, "AccessDenied")]
    assert "Deleted" not in bulk
    assert _stored(s3_blobs, name) == data


def test_the_application_never_overwrites_a_blob(s3_blobs):
    data = b"the first bytes under this name\n"
    name = _put(data)
    # the storage's own save: a conditional PUT, refused by the server as existing
    assert storages["blobs"].save(name, ContentFile(b"other bytes")) == name
    assert _stored(s3_blobs, name) == data
    with pytest.raises(ClientError) as refused:
        s3_blobs.client("app").put_object(
            Bucket=s3_blobs.bucket, Key=name, Body=b"other bytes", IfNoneMatch="*"
        )
    assert _code(refused) == "PreconditionFailed"
    assert _stored(s3_blobs, name) == data


@pytest.mark.parametrize(
    "change",
    [
        lambda c, b: c.put_bucket_lifecycle_configuration(
            Bucket=b,
            LifecycleConfiguration={
                "Rules": [
                    {"ID": "x", "Status": "Enabled", "Filter": {"Prefix": ""},
                     "Expiration": {"Days": 1}}
                ]
            },
        ),
        lambda c, b: c.put_bucket_versioning(
            Bucket=b, VersioningConfiguration={"Status": "Suspended"}
        ),
        lambda c, b: c.put_bucket_policy(Bucket=b, Policy=EMPTY_POLICY),
        lambda c, b: c.delete_bucket_policy(Bucket=b),
        lambda c, b: c.delete_bucket(Bucket=b),
        lambda c, b: c.create_bucket(Bucket="replay-other"),
    ],
    ids=["lifecycle", "versioning", "policy", "policy-delete", "bucket-delete", "bucket-create"],
)  # fmt: skip
def test_the_application_keys_cannot_change_the_bucket(s3_blobs, change):
    with pytest.raises(ClientError) as refused:
        change(s3_blobs.client("app"), s3_blobs.bucket)
    assert _code(refused) == "AccessDenied"


def _versions(store, key: str) -> list[tuple[str, bytes | None]]:
    """Every version of the object as the admin sees it, oldest first (S3 lists a key's
    versions newest first), then its delete markers: (version id, bytes; None for a marker)."""
    admin = store.client("admin")
    listed = admin.list_object_versions(Bucket=store.bucket, Prefix=key)
    versions = [v["VersionId"] for v in listed.get("Versions", []) if v["Key"] == key]
    markers = [m["VersionId"] for m in listed.get("DeleteMarkers", []) if m["Key"] == key]
    return [
        (v, admin.get_object(Bucket=store.bucket, Key=key, VersionId=v)["Body"].read())
        for v in reversed(versions)
    ] + [(m, None) for m in markers]


def test_the_bucket_is_versioned_by_the_launcher(s3_blobs):
    admin = s3_blobs.client("admin")
    assert admin.get_bucket_versioning(Bucket=s3_blobs.bucket)["Status"] == "Enabled"
    # the launcher's own probe left no version behind
    assert _versions(s3_blobs, ".launcher-probe") == []


def test_an_overwrite_with_stolen_app_keys_keeps_the_earlier_bytes(s3_blobs):
    """The application never overwrites (conditional PUTs), but its keys could: the earlier
    bytes stay readable by the admin identity, and the app's keys cannot delete them."""
    data = b"the evidence as stored\n"
    name = _put(data)
    app = s3_blobs.client("app")
    app.put_object(Bucket=s3_blobs.bucket, Key=name, Body=b"forged bytes")  # unconditional

    assert _stored(s3_blobs, name) == b"forged bytes"
    versions = _versions(s3_blobs, name)
    assert [body for _v, body in versions] == [data, b"forged bytes"]
    earlier = versions[0][0]
    admin = s3_blobs.client("admin")
    got = admin.get_object(Bucket=s3_blobs.bucket, Key=name, VersionId=earlier)
    assert got["Body"].read() == data
    assert hashlib.sha256(data).hexdigest() == name.rsplit("/", 1)[1]
    with pytest.raises(ClientError) as refused:
        app.delete_object(Bucket=s3_blobs.bucket, Key=name, VersionId=earlier)
    assert _code(refused) == "AccessDenied"
    with pytest.raises(ClientError) as refused:
        storages["blobs"].delete(name)  # every version: refused too
    assert _code(refused) == "AccessDenied"
    assert [body for _v, body in _versions(s3_blobs, name)] == [data, b"forged bytes"]


def test_the_app_keys_cannot_suspend_versioning(s3_blobs):
    app = s3_blobs.client("app")
    for status in ("Suspended", "Enabled"):
        with pytest.raises(ClientError) as refused:
            app.put_bucket_versioning(
                Bucket=s3_blobs.bucket, VersioningConfiguration={"Status": status}
            )
        assert _code(refused) == "AccessDenied"
    admin = s3_blobs.client("admin")
    assert admin.get_bucket_versioning(Bucket=s3_blobs.bucket)["Status"] == "Enabled"


def test_retention_deletes_every_version_of_an_expired_blob(s3_blobs):
    data = b"an expired trace, overwritten once\n"
    name = _put(data)
    s3_blobs.client("app").put_object(Bucket=s3_blobs.bucket, Key=name, Body=b"second")
    assert len(_versions(s3_blobs, name)) == 2

    assert blob_content_remove(name) is True

    assert _versions(s3_blobs, name) == []
    assert _stored(s3_blobs, name) is None


def test_retention_deletes_with_its_own_keys_only(s3_blobs, settings):
    name = _put(b"a trace whose time is up\n")
    settings.STORAGES = {k: v for k, v in settings.STORAGES.items() if k != "blobs_retention"}
    assert blob_content_remove(name) is False  # the app's keys: refused, left for the sweep
    assert _stored(s3_blobs, name) == b"a trace whose time is up\n"
    settings.STORAGES = {
        **settings.STORAGES,
        "blobs_retention": {
            "BACKEND": "console.blobstore.AppendOnlyS3Storage",
            "OPTIONS": storage_options(s3_blobs, "retention"),
        },
    }
    assert blob_content_remove(name) is True
    assert _stored(s3_blobs, name) is None
    assert _versions(s3_blobs, name) == []  # no version kept behind a delete marker
    assert blob_content_remove(name) is False  # gone already


class _CuttingProxy:
    """A TCP proxy to the S3 gateway that drops each connection after ``cut`` bytes sent."""

    def __init__(self, port: int, cut: int):
        self.target, self.cut = port, cut
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.forwarded: list[int] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._pipe, args=(client,), daemon=True).start()

    def _pipe(self, client: socket.socket) -> None:
        upstream = socket.create_connection(("127.0.0.1", self.target))
        sent = 0
        try:
            while sent < self.cut:
                chunk = client.recv(min(65536, self.cut - sent))
                if not chunk:
                    break
                upstream.sendall(chunk)
                sent += len(chunk)
        finally:
            self.forwarded.append(sent)
            for s in (client, upstream):
                s.shutdown(socket.SHUT_RDWR) if s.fileno() != -1 else None
                s.close()

    def close(self) -> None:
        self.listener.close()


def test_an_upload_cut_off_mid_way_stores_nothing(s3_blobs):
    data = bytes(range(256)) * (12 * 1024)  # 3 MiB
    sha = hashlib.sha256(data).hexdigest()
    proxy = _CuttingProxy(s3_blobs.ports.s3, cut=1024 * 1024)
    try:
        cut_store = AppendOnlyS3Storage(
            **{**storage_options(s3_blobs), "endpoint_url": f"http://127.0.0.1:{proxy.port}"}
        )
        with pytest.raises(Exception) as failed:  # noqa: PT011 - whatever the client raises
            cut_store.save(blob_name(sha), ContentFile(data))
        assert not isinstance(failed.value, AssertionError)
    finally:
        proxy.close()
    assert proxy.forwarded
    assert max(proxy.forwarded) == 1024 * 1024
    assert _stored(s3_blobs, blob_name(sha)) is None
    admin = s3_blobs.client("admin")
    listed = admin.list_objects_v2(Bucket=s3_blobs.bucket, Prefix=sha[:2])
    assert [o["Key"] for o in listed.get("Contents", [])] == []
    assert admin.list_multipart_uploads(Bucket=s3_blobs.bucket).get("Uploads", []) == []
    # and the same upload, not cut, is stored whole
    assert storages["blobs"].save(blob_name(sha), ContentFile(data)) == blob_name(sha)
    assert _stored(s3_blobs, blob_name(sha)) == data


def test_health_checks_the_store_without_deleting(s3_blobs):
    assert check_blobs() == {"ok": True, "backend": "AppendOnlyS3Storage"}
    assert check_blobs() == {"ok": True, "backend": "AppendOnlyS3Storage"}
    assert _stored(s3_blobs, "healthz/probe") == BLOB_PROBE


def test_the_launcher_keeps_its_files_owner_only(seaweed):
    root = seaweed.directory
    assert stat.S_IMODE(root.stat().st_mode) == 0o700
    loose = []
    for path in [root, *root.rglob("*")]:
        mode = stat.S_IMODE(path.lstat().st_mode)
        if mode & 0o077:
            loose.append((str(path.relative_to(root)), oct(mode)))
    assert loose == []
    assert {p.name for p in (root / "secrets").iterdir()} == {
        f"s3_{who}_{what}"
        for who in ("admin", "app", "retention")
        for what in ("access_key", "secret_key")
    }
    assert (root / "s3.json").exists()
    assert (root / "weed.log").exists()
    assert any((root / "data").iterdir())  # the volumes and the filer's store live here


def test_a_spooled_file_is_stored_byte_for_byte(s3_blobs):
    """What privacy stores sealed: a Django File over a SpooledTemporaryFile (botocore sent
    a File's bytes other than its MD5 said, and the server refused them as BadDigest)."""
    data = b'{"sealed": true}\n' * 100
    with tempfile.SpooledTemporaryFile(max_size=1 << 20) as cut:
        cut.write(data)
        cut.seek(0)
        assert storages["blobs"].save("aa/bb/spooled", File(cut)) == "aa/bb/spooled"
    assert _stored(s3_blobs, "aa/bb/spooled") == data
