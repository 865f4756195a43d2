"""Rows of the trace list written in Python: the exact markup the template's row loop wrote
(tests/console/test_trace_list_rows.py renders both and compares), without the template
engine's per-cell cost (a variable lookup, a filter, a ``{% url %}`` reversal per cell was
62% of the list's time). Escaped as the template escaped them."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.template.defaultfilters import filesizeformat
from django.urls import reverse
from django.utils.html import conditional_escape
from django.utils.safestring import SafeString, mark_safe
from django.utils.timezone import template_localtime  # type: ignore[attr-defined]  # stubs lack it

from replay.models import Trace

_LABELS = dict(Trace.Status.choices)
_SHA = "0" * 64


def _e(value: Any) -> str:
    return str(conditional_escape(value))


def _row(t: Trace, detail_prefix: str, detail_suffix: str) -> str:
    sha = t.blob.sha256
    twin = ""
    if getattr(t, "shares_trace_id", False):
        by = (
            _e(t.uploaded_by.get_username()) if t.uploaded_by_id else "nobody on record"  # type: ignore[union-attr]
        )
        twin = (
            f'\n          <br><span class="trace-twin">{_e(t.filename)} · '
            f"{_e(filesizeformat(t.blob.size))} · <code>{_e(sha[:12])}</code> · "
            f"uploaded by {by}</span>"
        )
    if t.expired_at:
        replayable = (
            f'<span class="badge no" title="expired by retention: {_e(t.expiry_rule)}">'
            "expired</span>"
        )
    elif getattr(t, "replayable", False):
        replayable = '<span class="badge yes">replayable</span>'
    else:
        replayable = '<span class="badge no">not replayable</span>'
    when = template_localtime(t.created_at)
    status = t.last_status
    return (
        "\n      <tr>\n"
        f'        <td><a href="{detail_prefix}{_e(sha)}{detail_suffix}"><code>{_e(t.trace_id)}'
        f"</code></a>{twin}</td>\n"
        f"        <td>{_e(t.format)}</td>\n"
        f"        <td>{_e(t.job_id or '—')}</td>\n"
        f'        <td><span class="badge verdict-{_e(status)}">'
        f"{_e(_LABELS.get(status, status))}</span></td>\n"
        f"        <td>{replayable}</td>\n"
        f'        <td><time datetime="{_e(when.isoformat())}">'
        f"{when:%Y-%m-%d %H:%M}</time></td>\n"
        "      </tr>\n    "
    )


def trace_rows_html(traces: Iterable[Trace]) -> SafeString:
    """The ``<tr>`` of each trace of a page of the list, as the row loop wrote them."""
    prefix, _, suffix = reverse("trace-detail", args=[_SHA]).partition(_SHA)
    return mark_safe("".join(_row(t, prefix, suffix) for t in traces))  # noqa: S308 - escaped
