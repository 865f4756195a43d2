from __future__ import annotations

# === console: Celery in tests (owner: the console engineer; keep other blocks apart) =========
# Tasks run in-process (eager) in every test, even when CELERY_BROKER_URL is set for the CI run
# on Redis, so a test's outcome never depends on which run it is. Tests marked
# `celery_worker` opt out and use the session's real worker (`celery_worker` fixture below):
# it is started only when CELERY_BROKER_URL is set and the database is PostgreSQL (a worker
# process cannot share SQLite's in-memory test database), pointed at pytest-django's test
# database, and stopped at the end of the session.
import os
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

_ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _celery_eager_unless_marked(request):
    from config.celery import app

    if request.node.get_closest_marker("celery_worker"):
        yield
        return
    previous = app.conf.task_always_eager
    app.conf.task_always_eager = True
    yield
    app.conf.task_always_eager = previous


@dataclass
class CeleryWorker:
    process: subprocess.Popen
    name: str
    var_dir: Path
    log: Path

    def pool_children(self) -> list[int]:
        """Pids of the prefork pool processes that execute tasks."""
        path = Path(f"/proc/{self.process.pid}/task/{self.process.pid}/children")
        return [int(pid) for pid in path.read_text().split()] if path.exists() else []

    def output(self) -> str:
        return self.log.read_text(errors="replace")


def _database_url(db: dict) -> str:
    auth = db["USER"] + (f":{db['PASSWORD']}" if db.get("PASSWORD") else "")
    return f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


@pytest.fixture(scope="session")
def celery_worker(django_db_setup, django_db_blocker, tmp_path_factory):
    from django.conf import settings

    from config.celery import app

    if not os.environ.get("CELERY_BROKER_URL"):
        pytest.skip("needs a broker: set CELERY_BROKER_URL (CI uses redis://127.0.0.1:6379/15)")
    db = settings.DATABASES["default"]
    if db["ENGINE"] != "django.db.backends.postgresql":
        pytest.skip("needs DATABASE_URL=postgres://...: a worker cannot share SQLite's test db")
    var_dir = tmp_path_factory.mktemp("celery-worker-var")
    log = var_dir / "worker.log"
    name = f"pytest-{uuid.uuid4().hex[:8]}@%h"
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings_test",
        "DATABASE_URL": _database_url(db),  # NAME is the test database's by now
        "REPLAY_VAR_DIR": str(var_dir),
        # the same keys as this process, or the worker could not read what tests store
        "DJANGO_SECRET_KEY": settings.SECRET_KEY,
        "REPLAY_KEY_ENCRYPTION_KEY": settings.REPLAY_KEY_ENCRYPTION_KEY,
    }
    app.control.purge()  # leftovers of an earlier, interrupted run
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "config",
                "worker",
                "--loglevel=INFO",
                "--pool=prefork",
                "--concurrency=1",
                "-n",
                name,
                "--without-gossip",
                "--without-mingle",
                "--without-heartbeat",
            ],
            cwd=_ROOT,
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    worker = CeleryWorker(process, name.replace("%h", os.uname().nodename), var_dir, log)
    deadline = time.monotonic() + 60
    while " ready." not in worker.output():
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            pytest.fail(f"the Celery worker did not start:\n{worker.output()}")
        time.sleep(0.2)
    yield worker
    process.terminate()
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=10)


_GUARDED_TABLES_SQL = {
    # append-only tables carry these triggers (replay.dbguards)
    "sqlite": "SELECT DISTINCT tbl_name FROM sqlite_master "
    "WHERE type = 'trigger' AND name LIKE '%\\_no\\_delete' ESCAPE '\\'",
    "postgresql": "SELECT DISTINCT c.relname FROM pg_trigger t "
    "JOIN pg_class c ON c.oid = t.tgrelid "
    "WHERE NOT t.tgisinternal AND t.tgname LIKE '%\\_no\\_rewrite'",
}


_TRIGGER_SQL = {
    # the exact statements that made a table's triggers, to put them back as they were
    "sqlite": "SELECT sql FROM sqlite_master WHERE type = 'trigger' AND tbl_name = %s "
    "AND name IN (tbl_name || '_no_update', tbl_name || '_no_delete')",
    "postgresql": "SELECT pg_get_triggerdef(t.oid) FROM pg_trigger t "
    "JOIN pg_class c ON c.oid = t.tgrelid WHERE NOT t.tgisinternal AND c.relname = %s "
    "AND t.tgname IN (c.relname || '_no_rewrite', c.relname || '_no_truncate')",
}


@pytest.fixture
def flushable_transactional_db(transactional_db):
    """`transactional_db` for tests that need it (a live server, a worker process).

    Such a test ends with a flush of every table, which the append-only triggers rightly
    refuse. The triggers are lifted while the test runs (the model-level guard still holds)
    and put back, exactly as they were (a guard narrowed to a decision's updates stays
    narrowed), by the `post_migrate` signal that the flush itself sends when it is done, so
    the order in which pytest tears fixtures down does not matter.
    """
    from django.db import connection
    from django.db.models.signals import post_migrate

    from replay.dbguards import drop_append_only_sql

    with connection.cursor() as cur:
        cur.execute(_GUARDED_TABLES_SQL[connection.vendor])
        lifted = sorted(row[0] for row in cur.fetchall())
        made: list[str] = []
        for table in lifted:
            cur.execute(_TRIGGER_SQL[connection.vendor], [table])
            made += [row[0] for row in cur.fetchall()]
            for sql in drop_append_only_sql(connection.vendor, table):
                cur.execute(sql)

    def restore(**kwargs) -> None:
        post_migrate.disconnect(dispatch_uid="tests.restore_append_only")
        with connection.cursor() as cur:
            for sql in made:
                cur.execute(sql)

    post_migrate.connect(restore, dispatch_uid="tests.restore_append_only", weak=False)


# === end of the console block =================================================================


# === formats: every code a format's report carries is one it declares (owner: fmtcodes) ======
# Whatever a test runs (verify, ingest, upload, the API, a governed replay), a report of a
# registered format that fails with a code its adapter does not declare (`codes`, besides the
# console's own `protocol.CONSOLE_CODES`) fails the test at teardown, naming the format and the
# code: a format's codes are what its tests observe. Reports of formats no registry knows
# (a test's made-up name) are not checked.
@pytest.fixture(autouse=True)
def format_codes_undeclared(monkeypatch):
    from core.formats import protocol
    from core.replay.report import ReplayReport

    undeclared: list[str] = []
    fail = ReplayReport.fail

    def observed(self, code, message, **where):
        fmt = protocol.default_formats().get(self.format) if self.format else None
        if fmt is not None and not protocol.declares(fmt, code):
            undeclared.append(f"{self.format} reported {code}, which it does not declare")
        return fail(self, code, message, **where)

    monkeypatch.setattr(ReplayReport, "fail", observed)
    yield undeclared  # a test of this check reads (and empties) it
    assert not undeclared, "; ".join(dict.fromkeys(undeclared))


# === end of the formats block ===================================================================
