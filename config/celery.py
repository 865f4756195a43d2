"""The Celery app. With CELERY_BROKER_URL unset, queued work runs on a thread pool in the web
process instead (replay/background.py); the task code is the same.

Never a default broker: Celery, given no broker, would publish to whatever answers on
``amqp://localhost:5672`` (another service's RabbitMQ, with no worker of ours), and the job
would wait there forever. So with no broker configured a task's ``delay``/``apply_async``
hands the job to the in-process runner (:func:`replay.background.submit`), and any attempt to
open a broker connection (a worker or beat started anyway, ``app.control``) is refused with
:data:`NO_BROKER_MESSAGE`."""

from __future__ import annotations

import os
from typing import Any

from celery import Celery, Task
from celery.signals import before_task_publish, task_prerun
from django.core.exceptions import ImproperlyConfigured

from replay import conf as replay_conf

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

NO_BROKER_MESSAGE = (
    "no Celery broker is configured (CELERY_BROKER_URL is unset): background work runs in "
    "this process (REPLAY_TASK_RUNNER=thread), never on a default broker"
)


def broker_configured() -> str:
    return replay_conf.broker_url()


class RoutedTask(Task):
    """A task that, with no broker configured, runs on the in-process runner when queued."""

    def apply_async(self, args: Any = None, kwargs: Any = None, *rest: Any, **options: Any) -> Any:
        if broker_configured() or self.app.conf.task_always_eager:
            return super().apply_async(args, kwargs, *rest, **options)
        from replay.background import submit

        return submit(self, *(args or ()), **(kwargs or {}))


class ConsoleCelery(Celery):
    def _connection(self, url: Any, *args: Any, **kwargs: Any) -> Any:
        if not (url or self.conf.broker_url):
            if not self.conf.task_always_eager:
                raise ImproperlyConfigured(NO_BROKER_MESSAGE)
            # tasks run inline (the test overlay); Celery still takes a producer it never
            # publishes with: an in-memory one, never a connection to a default broker
            url = "memory://"
        return super()._connection(url, *args, **kwargs)


app = ConsoleCelery("config", task_cls=RoutedTask)
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
