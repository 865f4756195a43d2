"""Content-Security-Policy, no inline script or style, and production settings."""

from __future__ import annotations

import os
import re
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

from tests.console.personas import persona, sign_in

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]


#: the policy, directive by directive (django-csp writes them in no fixed order)
POLICY = {
    "default-src": "'self'",
    "script-src": "'self' 'nonce-{nonce}'",
    "style-src": "'self'",
    "img-src": "'self' data:",
    "object-src": "'none'",
    "base-uri": "'none'",
    "frame-ancestors": "'none'",
    "form-action": "'self'",
}


def directives(response) -> dict[str, str]:
    parts = [p.strip().split(" ", 1) for p in response["Content-Security-Policy"].split(";")]
    return dict(parts)


def nonce_of(response) -> str:
    policy = directives(response)
    match = re.fullmatch(r"'self' 'nonce-(?P<nonce>[A-Za-z0-9+/=_-]+)'", policy["script-src"])
    assert match, response["Content-Security-Policy"]
    assert policy == {**POLICY, "script-src": POLICY["script-src"].format(nonce=match["nonce"])}
    return match["nonce"]


def assert_no_inline_code(html: str, nonce: str) -> None:
    """Every script is an external file carrying the nonce; no style, no event handlers."""
    scripts = re.findall(r"<script\b[^>]*>", html)
    assert scripts, "the page loads htmx"
    for tag in scripts:
        assert re.search(r'\ssrc="/static/', tag), tag
        assert f'nonce="{nonce}"' in tag, tag
    assert not re.search(r"<script\b[^>]*>(?!</script>)", html), "inline script body"
    assert "<style" not in html
    assert not re.search(r"\sstyle\s*=", html)
    assert not re.search(r"\son[a-z]+\s*=", html)
    assert "javascript:" not in html


def test_every_response_carries_a_strict_policy_with_a_fresh_nonce(client):
    first = client.get("/accounts/login/")
    second = client.get("/accounts/login/")
    policy = first["Content-Security-Policy"]
    for directive in [
        "default-src 'self'",
        "style-src 'self'",
        "object-src 'none'",
        "base-uri 'none'",
        "frame-ancestors 'none'",
        "form-action 'self'",
    ]:
        assert directive in policy
    assert "unsafe-inline" not in policy
    assert "unsafe-eval" not in policy
    assert nonce_of(first) != nonce_of(second)


def test_a_response_that_draws_no_script_names_no_nonce(client):
    sign_in(client, persona("alice"))
    response = client.get("/api/traces/")
    assert directives(response) == {**POLICY, "script-src": "'self'"}


def test_the_login_page_has_no_inline_code_and_htmx_is_local(client):
    response = client.get("/accounts/login/")
    html = response.content.decode()
    assert_no_inline_code(html, nonce_of(response))
    assert "/static/django_htmx/htmx-2.min.js" in html
    # nothing loads from another host (a bare "cdn" test failed whenever a random nonce or
    # CSRF token happened to contain those letters)
    assert re.findall(r'(?:src|href)="((?:https?:)?//[^"]*)"', html) == []


def test_the_trace_list_has_no_inline_code(client):
    sign_in(client, persona("alice"))
    response = client.get("/traces/")
    assert_no_inline_code(response.content.decode(), nonce_of(response))


def test_the_csrf_header_is_set_once_on_body(client):
    sign_in(client, persona("alice"))
    html = client.get("/traces/").content.decode()
    assert len(re.findall(r"hx-headers='\{\"X-CSRFToken\": \"[A-Za-z0-9]+\"\}'", html)) == 1
    assert re.search(r"<body hx-headers=", html)


def test_missing_csrf_token_is_refused_with_403():
    from django.test import Client

    strict = Client(enforce_csrf_checks=True)
    persona("alice")
    response = strict.post("/accounts/login/", {"username": "alice", "password": "x"})
    assert response.status_code == 403
    assert "CSRF_FAILED" in response.content.decode()


def test_check_deploy_is_clean_with_production_settings(tmp_path):
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "DJANGO_DEBUG": "0",
        "DJANGO_SECRET_KEY": secrets.token_urlsafe(60),
        "REPLAY_KEY_ENCRYPTION_KEY": "x",
        "REPLAY_PRIVACY_MASTER_KEY": secrets.token_urlsafe(48),
        "REPLAY_PRIVACY_SECRET": secrets.token_urlsafe(48),
        "DJANGO_ALLOWED_HOSTS": "example.com",
        "REPLAY_VAR_DIR": str(tmp_path),
    }
    for name in ("DATABASE_URL", "CELERY_BROKER_URL", "DJANGO_ALLOW_ASYNC_UNSAFE"):
        env.pop(name, None)
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues (0 silenced)." in result.stdout
    assert "WARNINGS" not in result.stderr + result.stdout
