"""The project's configuration: settings, the root URLconf, WSGI, ASGI and the Celery app.

Loaded first by every process (``DJANGO_SETTINGS_MODULE=config.settings``,
``config.wsgi:application``, ``celery -A config``), so the Celery app exists before any task
module is imported."""

from __future__ import annotations

from config.celery import app as celery_app

__all__ = ["celery_app"]
