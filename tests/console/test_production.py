"""The production stack's pieces, through the layers that serve them: /healthz (database,
broker, blob store, ledger head; 503 naming what failed), request ids and the JSON access
log, static files compressed and cache-busted by collectstatic, and plain http on localhost
only where REPLAY_INSECURE_LOCALHOST=1 may say so."""

from __future__ import annotations

import json
import logging
import os
import re
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

from governance.models import GovernanceEvent
from tests.console.personas import persona, sign_in

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]


def production_env(tmp_path, **extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DATABASE_URL", "CELERY_BROKER_URL", "DJANGO_ALLOW_ASYNC_UNSAFE")
    }
    env.update(
        DJANGO_SETTINGS_MODULE="config.settings",
        DJANGO_DEBUG="0",
        DJANGO_SECRET_KEY=secrets.token_urlsafe(60),
        REPLAY_KEY_ENCRYPTION_KEY="x",
        DJANGO_ALLOWED_HOSTS="example.com",
        REPLAY_VAR_DIR=str(tmp_path),
    )
    env.update(extra)
    return env


def python(code: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", "import django; django.setup(); " + code],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


# --- /healthz -----------------------------------------------------------------------------------


MONITORING_TOKEN = "a test monitoring token, not a secret"


@pytest.fixture
def monitor(client, settings):
    """A monitor holding the configured token."""
    settings.REPLAY_MONITORING_TOKEN = MONITORING_TOKEN
    client.defaults["HTTP_AUTHORIZATION"] = f"Bearer {MONITORING_TOKEN}"
    return client


def test_healthz_answers_ok_with_the_ledger_head(monitor, replayed):
    replayed("ok", by="alice")
    head = GovernanceEvent.objects.order_by("-seq").first()
    response = monitor.get("/healthz")
    assert response.status_code == 200
    assert response["Cache-Control"] == "max-age=0, no-cache, no-store, must-revalidate, private"
    body = json.loads(response.content)
    assert (body["status"], body["failed"]) == ("ok", [])
    checks = body["checks"]
    assert list(checks) == ["database", "broker", "blobs", "ledger"]
    assert all(check["ok"] for check in checks.values())
    assert checks["database"]["vendor"] in ("sqlite", "postgresql")
    assert (checks["ledger"]["seq"], checks["ledger"]["hash"]) == (head.seq, head.hash)
    assert checks["blobs"]["backend"] == "FileSystemStorage"


def test_healthz_tells_an_anonymous_caller_the_status_only(client, settings, replayed):
    settings.REPLAY_MONITORING_TOKEN = MONITORING_TOKEN
    replayed("ok", by="alice")
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response["Cache-Control"] == "max-age=0, no-cache, no-store, must-revalidate, private"
    assert response.content == b'{"status": "ok"}'
    for wrong in (f"Bearer {MONITORING_TOKEN}x", f"Token {MONITORING_TOKEN}", "Bearer ", ""):
        refused = client.get("/healthz", HTTP_AUTHORIZATION=wrong)
        assert refused.content == b'{"status": "ok"}', wrong


def test_healthz_gives_no_details_to_any_token_when_none_is_configured(client, settings):
    settings.REPLAY_MONITORING_TOKEN = ""
    assert client.get("/healthz", HTTP_AUTHORIZATION="Bearer ").content == b'{"status": "ok"}'


def test_healthz_gives_the_details_to_a_signed_in_admin_only(client):
    from console.roles import ADMIN, ROLES
    from tests.console.personas import BY_ROLE

    for role in ROLES:
        signed_in = sign_in(client, persona(BY_ROLE[role]))
        body = json.loads(signed_in.get("/healthz").content)
        if role == ADMIN:
            assert list(body) == ["status", "failed", "checks"], role
            assert list(body["checks"]) == ["database", "broker", "blobs", "ledger"]
        else:
            assert body == {"status": "ok"}, role
        client.logout()
    # an admin whose second factor is not verified is sent to enter it first
    unverified = sign_in(client, persona("adam"), verified=False).get("/healthz")
    assert (unverified.status_code, unverified.content) == (302, b"")


def test_healthz_tells_an_anonymous_caller_it_is_failing_and_nothing_else(client, settings):
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:1/0"  # nothing listens on port 1
    response = client.get("/healthz")
    assert response.status_code == 503
    assert response.content == b'{"status": "failing"}'


def test_healthz_answers_503_naming_the_blob_store_it_cannot_write(monitor, settings, tmp_path):
    not_a_directory = tmp_path / "a-file"
    not_a_directory.write_text("")
    settings.STORAGES = {
        **settings.STORAGES,
        "blobs": {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": str(not_a_directory / "blobs")},
        },
    }
    response = monitor.get("/healthz")
    assert response.status_code == 503
    body = json.loads(response.content)
    assert (body["status"], body["failed"]) == ("failing", ["blobs"])
    assert body["checks"]["blobs"] == {
        "ok": False,
        "error": "NotADirectoryError",
        "ms": body["checks"]["blobs"]["ms"],
    }
    assert body["checks"]["ledger"]["ok"] is True


def test_healthz_answers_503_naming_the_broker_it_cannot_reach(monitor, settings):
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:1/0"  # nothing listens on port 1
    response = monitor.get("/healthz")
    assert response.status_code == 503
    body = json.loads(response.content)
    assert body["failed"] == ["broker"]
    assert body["checks"]["broker"]["ok"] is False


def test_healthz_reports_the_embedded_runner_without_a_broker(monitor, settings):
    settings.CELERY_BROKER_URL = ""
    settings.REPLAY_TASK_RUNNER = "thread"
    broker = json.loads(monitor.get("/healthz").content)["checks"]["broker"]
    assert (broker["ok"], broker["runner"], broker["broker"]) == (True, "thread", "none configured")


def test_healthz_refuses_a_post(client):
    assert client.post("/healthz").status_code == 405


# --- request ids and the access log ---------------------------------------------------------------


def test_a_sane_incoming_request_id_is_kept_echoed_and_logged(client, caplog):
    sign_in(client, persona("alice"))
    with caplog.at_level(logging.INFO, logger="console.access"):
        response = client.get("/traces/", HTTP_X_REQUEST_ID="lb-7f3a.2:9")
    assert response["X-Request-ID"] == "lb-7f3a.2:9"
    [record] = [r for r in caplog.records if r.name == "console.access"]
    assert record.getMessage() == "GET /traces/ 200"
    assert (record.request_id, record.method, record.path, record.status, record.user) == (
        "lb-7f3a.2:9",
        "GET",
        "/traces/",
        200,
        "alice",
    )


@pytest.mark.parametrize("incoming", ["", "a b", "x" * 129, "<script>", "é"])
def test_it_replaces_an_insane_request_id_with_a_fresh_one(client, incoming):
    response = client.get("/accounts/login/", HTTP_X_REQUEST_ID=incoming)
    assert re.fullmatch(r"[0-9a-f]{32}", response["X-Request-ID"])


def test_each_request_gets_its_own_id(client):
    first = client.get("/accounts/login/")["X-Request-ID"]
    assert first != client.get("/accounts/login/")["X-Request-ID"]


def test_production_logs_are_one_json_object_a_line_with_the_request_id(tmp_path):
    code = (
        "import logging; from console.requestlog import request_id; request_id.set('rid-1'); "
        "logging.getLogger('console.access').info('GET / 200', extra={'status': 200}); "
        "logging.getLogger('replay').warning('in a request')"
    )
    done = python(code, production_env(tmp_path))
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stderr.splitlines()]
    assert [(x["level"], x["logger"], x["message"], x["request_id"]) for x in lines] == [
        ("INFO", "console.access", "GET / 200", "rid-1"),
        ("WARNING", "replay", "in a request", "rid-1"),
    ]
    assert lines[0]["status"] == 200
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}", lines[0]["time"])


def test_the_access_log_masks_every_query_value_but_paging_and_filters(client, caplog):
    sign_in(client, persona("alice"))
    with caplog.at_level(logging.INFO, logger="console.access"):
        client.get(
            "/traces/?verdict=diverged&q=Alice+Smith&token=s3cret&page=2&reason=because+I+said"
            "&verdict=ok&empty="
        )
    [record] = [r for r in caplog.records if r.name == "console.access"]
    assert record.path == "/traces/"
    assert record.query == "verdict=diverged&q=*&token=*&page=2&reason=*&verdict=ok&empty=*"
    assert record.getMessage() == "GET /traces/ 200"


def test_production_logs_keep_no_query_value_outside_the_allow_list(tmp_path):
    """Both records a refused request makes in production (the access record and Django's
    own 405, whose `request` field printed the full path) mask the query's values."""
    code = (
        "from django.test import Client; "
        "Client().post('/healthz?reason=Alice+Smith&api_key=s3cret&cursor=abc&seq=7', "
        "HTTP_HOST='example.com', secure=True)"
    )
    done = python(code, production_env(tmp_path))
    assert done.returncode == 0, done.stderr
    assert "Alice" not in done.stderr
    assert "s3cret" not in done.stderr
    lines = {x["logger"]: x for x in map(json.loads, done.stderr.splitlines())}
    assert lines["django.request"]["message"] == "Method Not Allowed (POST): /healthz"
    assert lines["django.request"]["request"] == (
        "<WSGIRequest: POST '/healthz?reason=*&api_key=*&cursor=abc&seq=7'>"
    )
    access = lines["console.access"]
    assert (access["path"], access["query"], access["status"]) == (
        "/healthz",
        "reason=*&api_key=*&cursor=abc&seq=7",
        405,
    )


def test_it_refuses_an_unknown_log_format(tmp_path):
    done = python("", production_env(tmp_path, REPLAY_LOG_FORMAT="xml"))
    assert done.returncode == 1
    assert "REPLAY_LOG_FORMAT='xml': use json or text" in done.stderr


# --- static files ---------------------------------------------------------------------------------


def test_collectstatic_writes_compressed_cache_busted_files_in_production(tmp_path):
    env = production_env(tmp_path)
    done = subprocess.run(
        [sys.executable, "manage.py", "collectstatic", "--noinput", "-v", "0"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    manifest = json.loads((tmp_path / "staticfiles" / "staticfiles.json").read_text())
    hashed = manifest["paths"]["css/console.css"]
    assert re.fullmatch(r"css/console\.[0-9a-f]{12}\.css", hashed)
    assert (tmp_path / "staticfiles" / f"{hashed}.gz").exists()
    rendered = python(
        "from django.templatetags.static import static; print(static('css/console.css'))", env
    )
    assert rendered.stdout.strip() == f"/static/{hashed}"


# --- plain http on localhost, and nowhere else ----------------------------------------------------

SECURITY = (
    "from django.conf import settings as s; print(s.SESSION_COOKIE_SECURE, s.CSRF_COOKIE_SECURE, "
    "s.SECURE_SSL_REDIRECT, s.SECURE_HSTS_SECONDS)"
)


def test_insecure_localhost_allows_plain_http_on_the_loopback_host_only(tmp_path):
    local = production_env(
        tmp_path, REPLAY_INSECURE_LOCALHOST="1", DJANGO_ALLOWED_HOSTS="127.0.0.1,localhost"
    )
    assert python(SECURITY, local).stdout.strip() == "False False False 0"
    assert python(SECURITY, production_env(tmp_path)).stdout.strip() == "True True True 31536000"


def test_it_refuses_insecure_localhost_for_a_public_host(tmp_path):
    env = production_env(tmp_path, REPLAY_INSECURE_LOCALHOST="1")
    done = python("", env)
    assert done.returncode == 1
    assert (
        "REPLAY_INSECURE_LOCALHOST=1 is only honoured when DJANGO_ALLOWED_HOSTS names nothing but "
        "127.0.0.1, localhost or [::1] (it names example.com)"
    ) in done.stderr


def test_the_record_django_makes_of_a_refused_request_carries_its_id(client):
    from console.requestlog import RequestIdFilter

    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    handler.addFilter(RequestIdFilter())
    logger = logging.getLogger("django.request")
    logger.addHandler(handler)
    try:
        client.get("/no/such/page/", HTTP_X_REQUEST_ID="rid-404")
    finally:
        logger.removeHandler(handler)
    assert [(r.getMessage(), r.request_id) for r in records] == [
        ("Not Found: /no/such/page/", "rid-404")
    ]
