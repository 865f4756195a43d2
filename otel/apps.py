from __future__ import annotations

from django.apps import AppConfig


class OtelConfig(AppConfig):
    name = "otel"
    verbose_name = "OpenTelemetry ingestion"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from otel import erasure, facts
        from replay.signals import trace_stored

        # an otel-genai trace's facts (what the trace list filters it by) are written with
        # it, in the transaction that stores it, whichever path stored it
        trace_stored.connect(facts.on_trace_stored, dispatch_uid="otel.facts")
        # an erasure of a subject in an otel-genai trace reaches the raw bodies and span rows
        erasure.register()
