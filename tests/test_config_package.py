"""The project configuration is the `config` package (settings, root URLconf, WSGI, ASGI,
Celery app), `console.settings` a one-release alias of its settings; each app reads its
settings through its own `conf.py` accessors, at call time, with one default each."""

from __future__ import annotations

import importlib
import sys

import pytest
from django.conf import settings as django_settings

from console import conf as console_conf
from core.formats import native
from core.formats.ahd import MAX_INPUT_BYTES
from governance import conf as governance_conf
from replay import conf as replay_conf


def test_the_project_is_configured_from_the_config_package():
    assert django_settings.ROOT_URLCONF == "config.urls"
    assert django_settings.WSGI_APPLICATION == "config.wsgi.application"
    assert django_settings.ASGI_APPLICATION == "config.asgi.application"
    assert type(importlib.import_module("config.asgi").application).__name__ == "ASGIHandler"
    assert type(importlib.import_module("config.wsgi").application).__name__ == "WSGIHandler"
    from config import celery_app

    assert celery_app.main == "config"
    assert "console.tasks.drift_sample" in {e["task"] for e in replay_conf.beat_schedule().values()}


def test_the_old_settings_module_is_a_deprecated_alias_of_the_new():
    sys.modules.pop("console.settings", None)
    with pytest.warns(DeprecationWarning, match="use config.settings"):
        old = importlib.import_module("console.settings")
    new = importlib.import_module("config.settings")
    sys.modules.pop("console.settings", None)

    names = {n for n in dir(new) if n.isupper() and not n.startswith("_")}
    assert names == {n for n in dir(old) if n.isupper()}
    assert all(getattr(old, n) is getattr(new, n) for n in names)


# (accessor, setting, its default when the settings do not name it, a value set, read back)
ACCESSORS = [
    (replay_conf.max_upload_bytes, "REPLAY_MAX_UPLOAD_BYTES", 2 * 1024**3, 10, 10),
    (replay_conf.ahd_max_input_bytes, "REPLAY_AHD_MAX_INPUT_BYTES", MAX_INPUT_BYTES, 7, 7),
    (replay_conf.task_threads, "REPLAY_TASK_THREADS", 2, 0, 1),
    (replay_conf.stale_seconds, "REPLAY_STALE_SECONDS", 900, 60, 60),
    (replay_conf.periodic_in_process, "REPLAY_PERIODIC_IN_PROCESS", True, False, False),
    (replay_conf.broker_url, "CELERY_BROKER_URL", "", "redis://x:1/2", "redis://x:1/2"),
    (console_conf.page_read_bytes, "REPLAY_PAGE_READ_BYTES", 64 * 1024**2, 5, 5),
    (console_conf.index_inline_records, "REPLAY_INDEX_INLINE_RECORDS", 5000, 3, 3),
    (console_conf.monitoring_token, "REPLAY_MONITORING_TOKEN", "", "t0k", "t0k"),
    (
        governance_conf.tlog_origin,
        "GOVERNANCE_TLOG_ORIGIN",
        "replay-audit-console.localhost/ledger",
        "example.org/log",
        "example.org/log",
    ),
    (governance_conf.retention_holds, "REPLAY_RETENTION_HOLDS", [], ["a.b"], ["a.b"]),
]


@pytest.mark.parametrize("case", ACCESSORS, ids=[a[1] for a in ACCESSORS])
def test_an_accessor_reads_its_setting_at_call_time(settings, case):
    accessor, name, default, value, read = case
    setattr(settings, name, value)
    assert accessor() == read
    delattr(settings, name)
    assert not hasattr(django_settings, name)
    assert accessor() == default


def test_the_upload_limits_default_to_the_native_formats_own(settings):
    for name in (
        "REPLAY_MAX_DECOMPRESSED_BYTES",
        "REPLAY_MAX_GZIP_RATIO",
        "REPLAY_GZIP_RATIO_FLOOR_BYTES",
        "REPLAY_MAX_BLANK_LINES",
        "REPLAY_MAX_JSON_KEYS",
        "REPLAY_MAX_OBJECT_KEYS",
    ):
        if hasattr(settings, name):
            delattr(settings, name)
    assert replay_conf.upload_limits() == native.DEFAULT_LIMITS
    settings.REPLAY_MAX_GZIP_RATIO = 3
    assert replay_conf.upload_limits().max_ratio == 3


def test_the_ahd_archive_limits_follow_the_input_limit(settings):
    settings.REPLAY_AHD_MAX_INPUT_BYTES = 100
    for name in ("REPLAY_AHD_MAX_ARCHIVE_BYTES", "REPLAY_AHD_ARCHIVE_MAX_TOTAL_BYTES"):
        if hasattr(settings, name):
            delattr(settings, name)
    limits = replay_conf.ahd_archive_limits()
    assert (limits.max_archive_bytes, limits.max_entry_bytes, limits.max_total_bytes) == (
        100,
        100,
        200,
    )
