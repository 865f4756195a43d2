from __future__ import annotations

from django.apps import AppConfig


class OtelConfig(AppConfig):
    name = "otel"
    verbose_name = "OpenTelemetry ingestion"
    default_auto_field = "django.db.models.BigAutoField"
