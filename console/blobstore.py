"""The blob store on S3 (django-storages), append-only from the application's side.

Blob names are content-addressed (``replay.storage.blob_name``: the SHA-256 of the bytes), so
a name that exists already holds those bytes. Every write is one conditional PUT
(``If-None-Match: *``): the server stores it whole or not at all (a PUT cut off mid-way leaves
nothing, there is no multipart upload to leave parts behind), and refuses it with 412 when the
name exists, so the application never overwrites an object, not even two workers storing the
same file at once. The application's credentials cannot delete (the bucket policy
``deploy/seaweed.py`` sets denies it): the bytes of expired traces are deleted through a
second storage, ``blobs_retention``, whose credentials only the Celery worker and beat have.

The bucket is versioned (``deploy/seaweed.py`` turns it on with the admin identity), so an
overwrite by someone holding the application's credentials (an unconditional PUT) leaves the
earlier bytes as a non-current version. A deletion here therefore deletes every version of
the name: an expired trace's bytes are gone, not kept behind a delete marker.
"""

from __future__ import annotations

import os

from botocore.exceptions import ClientError
from django.core.files import File
from storages.backends.s3 import S3Storage
from storages.utils import clean_name

#: the largest object one PUT may carry (S3's limit); the upload limits are far below it
MAX_PUT_BYTES = 5 * 1024**3


class AppendOnlyS3Storage(S3Storage):
    #: /healthz writes a fixed probe instead of writing and deleting one
    append_only = True

    def get_available_name(self, name, max_length=None):
        """The name itself: an existing name holds the same bytes (content-addressed), and the
        PUT below is conditional, so nothing is overwritten however the names race."""
        return self.generate_filename(clean_name(name))

    def _save(self, name, content):
        cleaned = clean_name(name)
        key = self._normalize_name(cleaned)
        params = self._get_write_parameters(key, content)
        if hasattr(content, "seek"):
            content.seek(0, os.SEEK_SET)
        size = getattr(content, "size", None)
        if size is not None and size > MAX_PUT_BYTES:
            raise ValueError(f"{name}: {size} bytes is more than one PUT may store")
        body = content
        while isinstance(body, File):  # the stream itself: botocore mis-sends a File's bytes
            body = body.file
        try:
            self.connection.meta.client.put_object(
                Bucket=self.bucket_name, Key=key, Body=body, IfNoneMatch="*", **params
            )
        except ClientError as err:
            if err.response.get("Error", {}).get("Code") != "PreconditionFailed":
                raise
            # stored already, by this or another process: the same bytes (its name says so)
        return cleaned

    def delete(self, name):
        """Delete every version and delete marker of the object (a plain DELETE in a
        versioned bucket only hides the bytes behind a delete marker); nothing when there is
        no such object. Refused (``AccessDenied``) for the application's credentials."""
        key = self._normalize_name(clean_name(name))
        client = self.connection.meta.client
        versions = []
        for page in client.get_paginator("list_object_versions").paginate(
            Bucket=self.bucket_name, Prefix=key
        ):
            listed = [*page.get("Versions", []), *page.get("DeleteMarkers", [])]
            versions += [v["VersionId"] for v in listed if v["Key"] == key]
        if not versions:
            super().delete(name)  # a store that lists no versions: the plain DELETE
            return
        for version in versions:
            client.delete_object(Bucket=self.bucket_name, Key=key, VersionId=version)
