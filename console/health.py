"""What /healthz checks: the database, the broker (when configured), the blob store and the
ledger head. Each check answers ``{"ok": bool, ...}``; a failed one names the exception's
type (the endpoint is public: the message and traceback go to the log). The view answers
200 when every check passed, else 503 naming the failed ones."""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.core.files.base import ContentFile
from django.core.files.storage import storages
from django.db import connection

from replay import conf as replay_conf

BROKER_TIMEOUT_SECONDS = 2.0
logger = logging.getLogger(__name__)


def check_database() -> dict[str, Any]:
    with connection.cursor() as cur:
        cur.execute("SELECT 1")
        cur.fetchone()
    return {"ok": True, "vendor": connection.vendor}


def check_broker() -> dict[str, Any]:
    url = replay_conf.broker_url()
    if not url:
        return {"ok": True, "runner": settings.REPLAY_TASK_RUNNER, "broker": "none configured"}
    from celery import current_app as app  # the project's (config.celery, made on start)

    with app.connection_for_write(url) as conn:
        conn.ensure_connection(max_retries=1, timeout=BROKER_TIMEOUT_SECONDS)
        transport = conn.transport_cls
    return {"ok": True, "runner": settings.REPLAY_TASK_RUNNER, "broker": str(transport)}


#: what an append-only store's probe holds (stored once, then only read back)
BLOB_PROBE = b"replay-console healthz probe\n"


def check_blobs() -> dict[str, Any]:
    """Write, read back and delete a small object in the blob store. A store the
    application may not delete from (``append_only``, S3) gets the same fixed probe each
    time instead: a conditional write (stored once, refused as existing after that, both only
    once the credentials are accepted) and a read back."""
    store = storages["blobs"]
    if getattr(store, "append_only", False):
        token = BLOB_PROBE
        name = store.save("healthz/probe", ContentFile(token))
        with store.open(name, "rb") as fh:
            read = fh.read()
    else:
        token = uuid.uuid4().hex.encode()
        name = store.save(f"healthz/{token.decode()}", ContentFile(token))
        try:
            with store.open(name, "rb") as fh:
                read = fh.read()
        finally:
            store.delete(name)
    if read != token:
        return {"ok": False, "error": "the blob store returned other bytes than were written"}
    return {"ok": True, "backend": type(store).__name__}


def check_ledger() -> dict[str, Any]:
    from governance.ledger import head_row

    head = head_row()
    if head is None:
        return {"ok": True, "seq": None, "hash": None}
    return {"ok": True, "seq": head.seq, "hash": head.hash}


CHECKS: dict[str, Callable[[], dict[str, Any]]] = {
    "database": check_database,
    "broker": check_broker,
    "blobs": check_blobs,
    "ledger": check_ledger,
}


def health() -> dict[str, Any]:
    """Every check, each timed; ``failed`` names those that did not pass."""
    results: dict[str, Any] = {}
    for name, check in CHECKS.items():
        started = time.monotonic()
        try:
            result = check()
        except Exception as exc:  # a check that raises has failed: the log says how
            logger.warning("health check %s failed", name, exc_info=True)
            result = {"ok": False, "error": type(exc).__name__}
        result["ms"] = round((time.monotonic() - started) * 1000, 1)
        results[name] = result
    failed = [name for name, result in results.items() if not result["ok"]]
    return {"status": "ok" if not failed else "failing", "failed": failed, "checks": results}
