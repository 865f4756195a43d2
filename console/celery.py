"""The Celery app. With CELERY_BROKER_URL unset, queued work runs on a thread pool in the web
process instead (replay/background.py); the task code is the same."""

from __future__ import annotations

import os

from celery import Celery
from celery.signals import before_task_publish, task_prerun

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")

app = Celery("console")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@before_task_publish.connect
def _carry_request_id(headers=None, **kwargs):
    """A task queued during a request carries its id to the worker (a message header)."""
    from console.requestlog import NO_REQUEST, request_id

    rid = request_id.get()
    if headers is not None and rid != NO_REQUEST:
        headers.setdefault("request_id", rid)


@task_prerun.connect
def _take_request_id(task=None, **kwargs):
    """On the worker, the task's log records carry the id of the request that queued it (the
    success record too, logged after the task body). Inline (eager) runs keep the caller's."""
    from console.requestlog import NO_REQUEST, request_id

    if task is None or task.request.is_eager:
        return
    request_id.set(getattr(task.request, "request_id", None) or NO_REQUEST)
