"""Gunicorn for the console (deploy/stack.py starts it; any deployment can use it as is).

Workers: WEB_CONCURRENCY (gunicorn reads it), default 2 per core + 1. Django writes the access
log itself (console.access, with the request id); gunicorn's own records are JSON too.
"""

from __future__ import annotations

import multiprocessing
import os

wsgi_app = "config.wsgi:application"
bind = os.environ.get("GUNICORN_BIND", "127.0.0.1:8080")
workers = int(os.environ.get("WEB_CONCURRENCY", 2 * multiprocessing.cpu_count() + 1))
worker_class = "sync"
# uploads stream to disk and replays run on workers: a request is short, except a large upload
timeout = int(os.environ.get("GUNICORN_TIMEOUT", "300"))
graceful_timeout = 30
keepalive = 5
max_requests = 2000  # recycle workers now and then
max_requests_jitter = 200
# The application is imported once, in the master, and each worker forks from it: a worker
# recycled by max_requests (or restarted after a crash) serves at once, where importing the
# application again cost it a second or more of CPU on a busy machine (three with no
# bytecode cache), taken from the requests being served then. Nothing opens a database
# connection or a thread at import (post_fork checks the first; each process opens its own
# lazily). Code changes then need a restart, not a HUP.
preload_app = True


def post_fork(server: object, worker: object) -> None:
    """A worker must not share a database connection with the master (none is expected)."""
    from django.db import connections

    for conn in connections.all(initialized_only=True):
        if conn.connection is not None:
            raise RuntimeError(f"the master opened database connection {conn.alias!r}")


accesslog = None
errorlog = "-"
if os.environ.get("GUNICORN_CONTROL_SOCKET"):  # one per stack, not one per user
    control_socket = os.environ["GUNICORN_CONTROL_SOCKET"]
forwarded_allow_ips = os.environ.get("FORWARDED_ALLOW_IPS", "127.0.0.1")
logconfig_dict = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "json": {
            "()": "pythonjsonlogger.json.JsonFormatter",
            "fmt": "%(asctime)s %(levelname)s %(name)s %(message)s",
            "rename_fields": {"asctime": "time", "levelname": "level", "name": "logger"},
        }
    },
    "handlers": {
        "stderr": {
            "class": "logging.StreamHandler",
            "formatter": "json",
            "stream": "ext://sys.stderr",
        }
    },
    "root": {"handlers": ["stderr"], "level": "WARNING"},
    "loggers": {
        "gunicorn.error": {"handlers": ["stderr"], "level": "INFO", "propagate": False},
        "gunicorn.access": {"handlers": ["stderr"], "level": "INFO", "propagate": False},
    },
}
