"""deploy/gunicorn.conf.py imports the application once, in the master (``preload_app``),
and each worker forks from it; a worker refuses to start if the master ever opened a
database connection, which the worker would then share (tests/browser/test_stack.py runs
the real stack with it)."""

from __future__ import annotations

import runpy
from pathlib import Path
from types import SimpleNamespace

import pytest
from django.db import connections

CONF = Path(__file__).resolve().parents[2] / "deploy" / "gunicorn.conf.py"


def test_the_application_is_imported_once_in_the_master():
    conf = runpy.run_path(str(CONF))
    assert conf["preload_app"] is True
    assert conf["worker_class"] == "sync"
    assert conf["max_requests"] == 2000


def test_a_worker_starts_when_the_master_holds_no_database_connection(monkeypatch):
    post_fork = runpy.run_path(str(CONF))["post_fork"]
    idle = [SimpleNamespace(alias="default", connection=None)]
    monkeypatch.setattr(connections, "all", lambda initialized_only=False: idle)
    post_fork(None, None)


def test_a_worker_refuses_the_masters_database_connection(monkeypatch):
    post_fork = runpy.run_path(str(CONF))["post_fork"]
    opened = [
        SimpleNamespace(alias="default", connection=None),
        SimpleNamespace(alias="replica", connection=object()),
    ]
    monkeypatch.setattr(connections, "all", lambda initialized_only=False: opened)
    with pytest.raises(RuntimeError) as refused:
        post_fork(None, None)
    assert str(refused.value) == "the master opened database connection 'replica'"
