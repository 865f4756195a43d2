"""The tiny test overlay: fast password hashing, tasks inline unless a broker is set."""

from __future__ import annotations

import os

from config.settings import *  # noqa: F403
from config.settings import REPLAY_TASK_RUNNER

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

# Deterministic tests: without a broker, queued work runs inline (eager), not on the thread
# pool; tests/console/test_background.py switches the pool back on to prove the default.
if REPLAY_TASK_RUNNER == "thread":
    REPLAY_TASK_RUNNER = "eager"
    CELERY_TASK_ALWAYS_EAGER = True

# the local witness `make run` configures under var/ is no test's (a test names its own)
if "GOVERNANCE_WITNESSES" not in os.environ:
    GOVERNANCE_WITNESSES = []

# Mails stay in memory (django.core.mail.outbox), in Celery workers the tests start too.
EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
# the serving process's periodic jobs (replay/background.py) would run against test databases
REPLAY_PERIODIC_IN_PROCESS = False

# pytest-xdist: every test process (gw0, gw1, ...) that starts a Celery worker (tests/conftest.py)
# has a queue of its own on the shared broker, or one process's tasks could run on the other's
# worker, against the other's test database. The worker inherits PYTEST_XDIST_WORKER.
if os.environ.get("PYTEST_XDIST_WORKER"):
    CELERY_TASK_DEFAULT_QUEUE = f"replay-tests-{os.environ['PYTEST_XDIST_WORKER']}"
