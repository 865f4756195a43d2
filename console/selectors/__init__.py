"""The console's read queries, by concern.

- `listing`: the trace list, its filters, sorting and keyset (cursor) paging;
- `detail`: one trace's page (outline, snapshots, format panel, related traces, compare);
- `opened`: a stored trace opened once per request, its windows of events and steps, and the
  building and queueing of its index;
- `budget`: what a page may read of a stored file.

Callers import from `console.selectors`; the names below are the package's surface.
"""

from __future__ import annotations

from console.selectors.budget import (
    page_budget_message,
    page_read_limit,
)
from console.selectors.detail import (
    Comparison,
    FormatPanel,
    Outline,
    SnapshotLine,
    artifact_versions,
    brief_step,
    failed_check,
    trace_compare,
    trace_copies,
    trace_outline,
    trace_outline_empty,
    trace_panel,
    traces_same_artifact,
    traces_same_job,
)
from console.selectors.listing import (
    MAX_PAGE_SIZE,
    PAGE_SIZE,
    SORT_CHOICES,
    SORT_DEFAULT,
    SORT_UNKNOWN_MESSAGE,
    SORTS,
    VERDICT_ALIASES,
    CursorError,
    SortError,
    TraceFilters,
    TracePage,
    cursor_decode,
    cursor_encode,
    sort_ordering,
    sort_parse,
    trace_formats,
    trace_page,
    trace_queryset,
    traces_mark_replayable,
    traces_mark_shared_ids,
)
from console.selectors.opened import (
    INDEX_BUILD_STALE,
    MAX_WINDOW_SIZE,
    WINDOW_SIZE,
    IndexPending,
    OpenedTrace,
    TraceUnreadable,
    index_inline_records,
    trace_event,
    trace_index,
    trace_index_build,
    trace_index_queue,
    trace_privacy_policy,
    trace_recorded_outputs,
    trace_window,
)

__all__ = [
    "INDEX_BUILD_STALE",
    "MAX_PAGE_SIZE",
    "MAX_WINDOW_SIZE",
    "PAGE_SIZE",
    "SORTS",
    "SORT_CHOICES",
    "SORT_DEFAULT",
    "SORT_UNKNOWN_MESSAGE",
    "VERDICT_ALIASES",
    "WINDOW_SIZE",
    "Comparison",
    "CursorError",
    "FormatPanel",
    "IndexPending",
    "OpenedTrace",
    "Outline",
    "SnapshotLine",
    "SortError",
    "TraceFilters",
    "TracePage",
    "TraceUnreadable",
    "artifact_versions",
    "brief_step",
    "cursor_decode",
    "cursor_encode",
    "failed_check",
    "index_inline_records",
    "page_budget_message",
    "page_read_limit",
    "sort_ordering",
    "sort_parse",
    "trace_compare",
    "trace_copies",
    "trace_event",
    "trace_formats",
    "trace_index",
    "trace_index_build",
    "trace_index_queue",
    "trace_outline",
    "trace_outline_empty",
    "trace_page",
    "trace_panel",
    "trace_privacy_policy",
    "trace_queryset",
    "trace_recorded_outputs",
    "trace_window",
    "traces_mark_replayable",
    "traces_mark_shared_ids",
    "traces_same_artifact",
    "traces_same_job",
]
