"""Where queued work runs: Celery workers, a thread pool inside this process, or inline.

The one runner of every background job: replays, ledger verifications, legal-request
bundles, retention. With no broker configured nothing is ever published to Celery's default
broker (config/celery.py routes a stray ``delay`` here and refuses broker connections).

``settings.REPLAY_TASK_RUNNER`` decides (config/settings.py):

- ``"celery"`` (CELERY_BROKER_URL is set): ``task.delay(...)``, a worker runs it;
- ``"thread"`` (the embedded default, no broker to install): a small
  ``concurrent.futures.ThreadPoolExecutor`` in the web process runs the task body, so the
  request that queued it returns at once and the progress page shows the run advancing;
- ``"eager"`` (the test overlay): ``task.delay(...)`` with Celery's ``task_always_eager``.

Periodic jobs (``CELERY_BEAT_SCHEDULE``: retention, drift sampling) are run by Celery beat
with a broker; under the thread runner, a serving process runs them itself: its first request
starts one daemon thread (:func:`periodic_start`) that hands each entry to the pool every
``schedule`` seconds, the first time one interval after it started, as beat does
(``REPLAY_PERIODIC_IN_PROCESS=0`` turns it off; the test overlay does).

Whatever the runner, the work is handed over on commit: the row it reads exists by then. A
Celery app forced eager (``task_always_eager``, as the tests do) runs inline under every runner.
The same task code runs in each; a task body run in a thread closes its database connections
when it ends. Work queued in a thread when the process stops is lost with it: the run stays
queued (use a broker where that matters; docs/deployment.md).
"""

from __future__ import annotations

import contextvars
import importlib
import logging
import threading
import time
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from django.db import close_old_connections, connections, transaction

from replay import conf

logger = logging.getLogger(__name__)

CELERY = "celery"
THREAD = "thread"
EAGER = "eager"
RUNNERS = (CELERY, THREAD, EAGER)

_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None


def runner() -> str:
    return conf.task_runner()


def pool() -> ThreadPoolExecutor:
    """The process's pool, made on first use with ``REPLAY_TASK_THREADS`` threads."""
    global _pool  # noqa: PLW0603 (one pool per process, made lazily)
    with _lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(
                max_workers=conf.task_threads(),
                thread_name_prefix="replay-task",
            )
        return _pool


def pool_shutdown(*, wait: bool = True) -> None:
    """Stop the pool (the next `enqueue` makes a new one); tests use it to start clean."""
    global _pool
    with _lock:
        current, _pool = _pool, None
    if current is not None:
        current.shutdown(wait=wait)


def _run(task: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    close_old_connections()
    try:
        return task(*args, **kwargs)
    except Exception:
        logger.exception("background task %s%r failed", task.name, args)
        raise
    finally:
        connections.close_all()  # this thread's connections only


def submit(task: Any, *args: Any, **kwargs: Any) -> Future:
    """Run ``task(*args, **kwargs)`` on the pool now (not on commit); its future. The task
    runs in a copy of the caller's context, so its log records carry the request's id."""
    return pool().submit(contextvars.copy_context().run, _run, task, args, kwargs)


PUBLISH_FAILED = (
    "could not queue %s%r (the broker did not take it: %s); its row stays queued, and its page "
    "shows it stale, with a button to queue it again, once the stale limit has passed"
)


def publish(task: Any, *args: Any) -> None:
    """``task.delay(*args)``; a broker that is down is logged, not raised: the request that
    queued the job has committed, and the job's row says it is queued (then stale)."""
    try:
        task.delay(*args)
    except Exception as exc:  # kombu's OperationalError, a refused connection, a timeout
        logger.error(PUBLISH_FAILED, task.name, args, type(exc).__name__, exc_info=True)


def enqueue(task: Any, *args: Any) -> None:
    """Hand ``task(*args)`` to the configured runner when the current transaction commits."""
    if runner() == THREAD and not task.app.conf.task_always_eager:
        transaction.on_commit(lambda: submit(task, *args))
    else:
        transaction.on_commit(lambda: publish(task, *args))


# --- periodic jobs under the thread runner ----------------------------------------------------

PERIODIC_TICK_SECONDS = 1.0
_periodic: threading.Thread | None = None
_periodic_stop = threading.Event()


def periodic_due(
    schedule: Mapping[str, Mapping[str, Any]], last: dict[str, float], now: float
) -> list[str]:
    """The entries of ``schedule`` due at ``now``: ``schedule`` seconds since they last ran
    (an entry never seen counts from ``now``). Marks those as run at ``now`` in ``last``."""
    due = []
    for name, entry in schedule.items():
        if now - last.setdefault(name, now) >= float(entry["schedule"]):
            last[name] = now
            due.append(name)
    return due


def _periodic_loop(stop: threading.Event) -> None:
    from celery import current_app as app  # the project's app (made on Django's start)

    last: dict[str, float] = {}
    while not stop.wait(PERIODIC_TICK_SECONDS):
        schedule = conf.beat_schedule()
        for name in periodic_due(schedule, last, time.monotonic()):
            entry = schedule[name]
            try:  # a task module is imported on first use, as a worker would
                importlib.import_module(entry["task"].rsplit(".", 1)[0])
                task = app.tasks[entry["task"]]
                submit(task, *entry.get("args", ()), **entry.get("kwargs", {}))
            except Exception:  # one bad entry does not stop the others
                logger.exception("periodic %s: %s could not be queued", name, entry["task"])
            else:
                logger.info("periodic %s: %s queued in this process", name, entry["task"])


def periodic_start() -> bool:
    """Start this process's periodic thread once; whether this call started it."""
    global _periodic  # noqa: PLW0603 (one thread per process)
    with _lock:
        if _periodic is not None and _periodic.is_alive():
            return False
        _periodic_stop.clear()
        _periodic = threading.Thread(
            target=_periodic_loop, args=(_periodic_stop,), name="replay-periodic", daemon=True
        )
        _periodic.start()
        return True


def periodic_stop() -> None:
    """Stop the periodic thread (tests)."""
    global _periodic
    with _lock:
        current, _periodic = _periodic, None
    _periodic_stop.set()
    if current is not None:
        current.join(timeout=10)


def periodic_on_request(**kwargs: Any) -> None:
    """``request_started``: a serving process under the thread runner runs the schedule."""
    if _periodic is not None or runner() != THREAD:
        return
    if not conf.periodic_in_process():
        return
    from celery import current_app

    if not current_app.conf.task_always_eager:
        periodic_start()
