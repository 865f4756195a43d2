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
    """A stored native trace's index, and a large file's index of records (any other
    format's, past REPLAY_INDEX_INLINE_RECORDS), is built in the background once its upload
    commits, so no page request builds it (a large trace's takes seconds). A small file's
    records are indexed by the first page that shows them: building it at every upload
    would parse each stored file once more in the process that took it."""
    from console.selectors import trace_index_queue
    from console.selectors.opened import _builds_inline, records_format
    from core.formats import native

    native_trace = getattr(trace, "format", None) == native.FORMAT
    large_records = records_format(trace) is not None and not _builds_inline(trace)  # type: ignore[arg-type]
    if native_trace or large_records:
        trace_index_queue(trace)  # type: ignore[arg-type]
