from __future__ import annotations

from django.apps import AppConfig


class ConsoleConfig(AppConfig):
    name = "console"
    verbose_name = "Replay Audit Console"

    def ready(self) -> None:
        from django.core.signals import request_started

        from replay.background import periodic_on_request

        # no broker: the serving process runs the periodic jobs itself (replay/background.py)
        request_started.connect(periodic_on_request, dispatch_uid="replay.background.periodic")

        from replay.signals import trace_stored

        trace_stored.connect(_index_at_ingest, dispatch_uid="console.trace_index")


def _index_at_ingest(sender: object, trace: object, **kwargs: object) -> None:
    """A stored trace's index (a native trace's, or any format's records) is built in the
    background once its upload commits, so no page request builds it (a large trace's takes
    seconds)."""
    from console.selectors import trace_index_queue
    from console.selectors.opened import records_format
    from core.formats import native

    if getattr(trace, "format", None) == native.FORMAT or records_format(trace) is not None:  # type: ignore[arg-type]
        trace_index_queue(trace)  # type: ignore[arg-type]
