"""An upload on the append-only S3 store: privacy stores the file sealed (the personal values
cut out) before anything else reaches the bucket, since the application's keys cannot replace
an object afterwards, and the console reads the whole file back."""

from __future__ import annotations

import hashlib

from privacy.models import SealedBlob
from replay.storage import blob_open
from tests.console.conftest import ingest, trace_key  # noqa: F401 - the console's fixtures

ADA = b"ada.lovelace@example.org"
ADA_NAME = b"Ada Lovelace"


def _bucket(store) -> dict[str, bytes]:
    admin = store.client("admin")
    keys = [
        o["Key"]
        for o in admin.list_objects_v2(Bucket=store.bucket).get("Contents", [])
        if not o["Key"].startswith(("healthz/", "aa/bb/"))
    ]
    return {k: admin.get_object(Bucket=store.bucket, Key=k)["Body"].read() for k in keys}


def test_an_upload_is_sealed_before_it_reaches_the_bucket(s3_blobs, ingest):  # noqa: F811
    trace = ingest("ok")
    name = trace.blob.storage_name
    assert SealedBlob.objects.filter(sha256=trace.blob.sha256).exists()
    at_rest = _bucket(s3_blobs)[name]
    assert ADA not in at_rest
    assert ADA_NAME not in at_rest
    assert hashlib.sha256(at_rest).hexdigest() != trace.blob.sha256  # the sealed cut
    with blob_open(name) as fh:
        whole = fh.read()
    assert hashlib.sha256(whole).hexdigest() == trace.blob.sha256
    assert ADA in whole
    again = ingest("ok")  # the same file again: the same sealed object, nothing replaced
    assert again.blob.storage_name == name
    assert _bucket(s3_blobs)[name] == at_rest
