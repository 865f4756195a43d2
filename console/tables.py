"""Rows written in Python: the trace list's, and the trace page's windows of events and
steps. The exact markup the templates' loops wrote (tests/console/test_trace_list_rows.py
and test_trace_window_rows.py render both and compare), without the template engine's
per-cell cost (a variable lookup, a filter, a ``{% url %}`` reversal per cell was 62% of
the list's time, and most of a trace page's rendering). Escaped as the templates escaped
them."""

from __future__ import annotations

import html
from collections.abc import Iterable
from typing import Any
from urllib.parse import quote

from django.conf import settings
from django.template.defaultfilters import capfirst, filesizeformat
from django.urls import reverse
from django.utils import dateformat
from django.utils.formats import localize
from django.utils.html import conditional_escape
from django.utils.safestring import SafeString, mark_safe
from django.utils.text import Truncator, slugify
from django.utils.timezone import template_localtime  # type: ignore[attr-defined]  # stubs lack it
from django.utils.translation import pgettext

from replay.models import Trace

_LABELS = dict(Trace.Status.choices)
_SHA = "0" * 64


def _e(value: Any) -> str:
    return str(conditional_escape(value))


def uploader_words(t: Trace) -> str:
    """Who stored a trace, in words (unescaped): the person who uploaded it, else what loaded
    it (``Trace.uploaded_label``: "loaded by the demo"), else "nobody on record" (a file
    ``manage.py ingest`` stored, or one whose uploader was deleted)."""
    if t.uploaded_by_id:
        return f"uploaded by {t.uploaded_by.get_username()}"  # type: ignore[union-attr]
    if t.uploaded_label:
        return f"loaded by {t.uploaded_label}"
    return "uploaded by nobody on record"


#: the badge of a trace whose verdict is tamper_detected: "replayable" says that every file a
#: replay needs is stored, which means nothing for a file that failed its integrity check
NOT_INTACT_TITLE = (
    "the file failed its integrity check (tamper detected): a replay stops there, "
    "whatever is stored, so replayable does not apply"
)


def _replayable_badge(t: Trace) -> str:
    if t.expired_at:
        return (
            f'<span class="badge no" title="expired by retention: {_e(t.expiry_rule)}">'
            "expired</span>"
        )
    if t.last_status == Trace.Status.TAMPER_DETECTED:
        return f'<span class="badge not-intact" title="{NOT_INTACT_TITLE}">not intact</span>'
    if getattr(t, "replayable", False):
        return '<span class="badge yes">replayable</span>'
    return '<span class="badge no">not replayable</span>'


def replayable_badge(t: Trace) -> SafeString:
    """The list's (and the upload page's) replayability badge of a trace: expired, not
    intact (a tampered file: never "replayable", whatever it has stored), replayable (every
    snapshot and output a production replay needs is stored: ``trace.replayable``, set by
    ``traces_mark_replayable``) or not replayable."""
    return mark_safe(_replayable_badge(t))  # noqa: S308 - escaped


def contents_words(
    event_count: int, step_count: int, words: tuple[str, str] = ("event", "step")
) -> str:
    """A stored file's counts in words, each only when there is one to count: "12 events,
    3 steps", "5 steps" (a Paxman artifact's fields), "" (an AHD sidecar, a MACE log as
    MACE's writer persists it: formats whose files have neither, whose facts the format's
    panel shows). ``words``: what the format counts (``TraceFormat.counts``: an OTel trace's
    spans and calls). Localised as ``{{ value }}`` writes a number."""
    parts = [
        f"{localize(n)} {word if n == 1 else word + 's'}"
        for n, word in ((event_count, words[0]), (step_count, words[1]))
        if n
    ]
    return ", ".join(parts)


#: how many of an OpenTelemetry trace's services or models its row names (then "+N more")
OTEL_SHOWN = 3


def _otel_links(list_url: str, name: str, values: list[str]) -> str:
    """Values as links to the list filtered by each (``?service=``, ``?model=``)."""
    links = ", ".join(
        f'<a href="{list_url}?{name}={_e(quote(v, safe=""))}">{_e(v)}</a>'
        for v in values[:OTEL_SHOWN]
    )
    more = len(values) - OTEL_SHOWN
    return links + (f" +{more} more" if more > 0 else "")


def _otel_line(t: Trace, list_url: str) -> str:
    """An OpenTelemetry trace's services and models under its job (``trace.otel``, set by
    ``traces_mark_otel``), each a link to the list filtered by it; "" for another format."""
    facts = getattr(t, "otel", None)
    if facts is None:
        return ""
    parts = []
    if facts.service_names:
        word = "service" if len(facts.service_names) == 1 else "services"
        parts.append(f"{word} {_otel_links(list_url, 'service', facts.service_names)}")
    if facts.model_names:
        word = "model" if len(facts.model_names) == 1 else "models"
        parts.append(f"{word} {_otel_links(list_url, 'model', facts.model_names)}")
    if not parts:
        return ""
    return '<br><span class="otel-facts">' + " · ".join(parts) + "</span>"


def _row(t: Trace, detail_prefix: str, detail_suffix: str, list_url: str = "") -> str:
    sha = t.blob.sha256
    href = f"{detail_prefix}{_e(sha)}{detail_suffix}"
    twin = ""
    if getattr(t, "shares_trace_id", False):
        # rows of one trace id (the demo's six files of one job, a re-run, a re-export): the
        # file name is their link too, with what else tells them apart
        twin = (
            f'\n          <br><span class="trace-twin"><a href="{href}">{_e(t.filename)}</a> · '
            f"{_e(filesizeformat(t.blob.size))} · <code>{_e(sha[:12])}</code> · "
            f"{_e(uploader_words(t))}</span>"
        )
    when = template_localtime(t.created_at)
    status = t.last_status
    return (
        "\n      <tr>\n"
        f'        <td><a href="{href}"><code>{_e(t.trace_id)}'
        f"</code></a>{twin}</td>\n"
        f"        <td>{_e(t.format)}</td>\n"
        f"        <td>{_e(t.job_id or '—')}{_otel_line(t, list_url)}</td>\n"
        f'        <td><span class="badge verdict-{_e(status)}">'
        f"{_e(_LABELS.get(status, status))}</span></td>\n"
        f"        <td>{_replayable_badge(t)}</td>\n"
        f'        <td><time datetime="{_e(when.isoformat())}">'
        f"{when:%Y-%m-%d %H:%M}</time></td>\n"
        "      </tr>\n    "
    )


def trace_rows_html(traces: Iterable[Trace]) -> SafeString:
    """The ``<tr>`` of each trace of a page of the list, as the row loop wrote them."""
    prefix, _, suffix = reverse("trace-detail", args=[_SHA]).partition(_SHA)
    list_url = reverse("trace-list")
    return mark_safe("".join(_row(t, prefix, suffix, list_url) for t in traces))  # noqa: S308


# --- the trace page's windows: its events and its steps -------------------------------------

_SEQ = 987654321  # a seq that stands for each row's in the reversed event link


def _v(value: Any, thousands: bool) -> str:
    """A value as ``{{ value }}`` writes it: localised, then escaped (a whole number needs no
    locale unless thousands are separated). A missing key writes "" (``.get(key, "")``)."""
    if type(value) is int and not thousands:
        return str(value)
    return str(conditional_escape(localize(value)))


def trace_event_items_html(
    records: Iterable[dict[str, Any]], *, sha256: str, broke_at: int | None
) -> SafeString:
    """The ``<li>`` of each event of a window of the trace page (``seq`` and ``type``), as the
    template loop wrote them; the one where the chain broke is marked."""
    url = _e(reverse("trace-event", args=[sha256, _SEQ]))
    prefix, _, suffix = url.rpartition(str(_SEQ))
    thousands = settings.USE_THOUSAND_SEPARATOR
    items = []
    for e in records:
        seq = e.get("seq")
        link = f"{prefix}{_v(seq, False)}{suffix}"  # a path parameter is never localised
        marked = ' class="diverged"' if seq == broke_at else ""
        label = f"seq {_v(e.get('seq', ''), thousands)}: {_v(e.get('type', ''), thousands)}"
        items.append(
            f'<li{marked}><a href="{link}" hx-get="{link}" hx-target="#event-payload" '
            f'hx-swap="outerHTML">{label}</a></li>'
        )
    return mark_safe("".join(items) or '<li class="empty">No events here.</li>')  # noqa: S308


def _h(value: Any) -> str:
    """A plain value (a string, a number) escaped as ``{{ value }}`` escapes it, without the
    lazy-string machinery ``conditional_escape`` goes through (thousands of cells a page)."""
    return html.escape(str(value))


def _num(value: Any) -> str:
    """A bar's coordinate as ``{{ value }}`` writes it (no thousands separator, en's point)."""
    return str(value) if isinstance(value, int | float) and not isinstance(value, bool) else ""


def trace_record_rows_html(
    rows: Iterable[dict[str, Any]], *, sha256: str, bars: bool
) -> SafeString:
    """The ``<tr>`` of each record of a window of the trace page (``recordview.row``): its
    position, kind, label (indented by depth, a link to its value) and location, and, when
    the records are placed in time (``bars``), what it is, when it starts, how long it takes
    and its bar: the markup a template loop wrote, at a quarter of its cost."""
    url = _e(reverse("trace-record", args=[sha256, _SEQ]))
    prefix, _, suffix = url.rpartition(str(_SEQ))
    thousands = settings.USE_THOUSAND_SEPARATOR
    out = []
    for row in rows:
        position = row["position"]
        kind = str(row["kind"])
        summary = row["summary"]
        link = f"{prefix}{position}{suffix}"
        css = f' class="{slugify(kind)}-{slugify(summary["kind"])}"' if summary.get("kind") else ""
        cells = (
            f'<td class="num">{_v(position, thousands)}</td><td>{_h(kind)}</td>'
            f'<td><span class="waterfall-indent">{row["indent"]}</span><a href="{link}" '
            f'hx-get="{link}" hx-target="#record-value" hx-swap="outerHTML">'
            f"{_h(row['label'])}</a></td><td><code>{_h(row['location'])}</code></td>"
        )
        if bars:
            what = _h(summary.get("operation") or "—")
            if summary.get("model"):
                what += f" · <code>{_h(summary['model'])}</code>"
            offset, duration = _h(summary.get("offset", "")), _h(summary.get("duration", ""))
            bar = ""
            if summary.get("width") is not None:
                bar = (
                    '<svg class="waterfall-bar" viewBox="0 0 1000 10" '
                    'preserveAspectRatio="none" role="img" '
                    f'aria-label="{offset} to {duration} later"><rect '
                    f'class="bar-{_h(summary.get("kind", ""))}" x="{_num(summary["x"])}" '
                    f'y="1" width="{_num(summary["width"])}" height="8"></rect></svg>'
                )
            cells += (
                f'<td>{what}</td><td class="num">{offset}</td><td class="num">{duration}</td>'
                f'<td class="waterfall-axis">{bar}</td>'
            )
        out.append(f'\n      <tr id="{slugify(kind)}-{position}"{css}>{cells}</tr>')
    return mark_safe("".join(out))  # noqa: S308


def trace_step_rows_html(
    records: Iterable[dict[str, Any]], report: dict[str, Any] | None
) -> SafeString:
    """The ``<tr>`` of each step of a window of the trace page (:func:`brief_step`'s fields),
    as the template loop wrote them; the step a replay diverged at is marked."""
    report = report or {}
    diverged_at = report.get("broke_at")
    diverged = report.get("error_code") == "REPLAY_DIVERGENCE"
    thousands = settings.USE_THOUSAND_SEPARATOR
    rows = []
    for st in records:
        marked = ' class="diverged"' if diverged and st.get("seq") == diverged_at else ""
        ref = st.get("output_ref")
        output = f"<code>{_v(ref, thousands)}</code>" if ref else ""
        rows.append(
            f"\n      <tr{marked}>\n"
            f"        <td>{_v(st.get('seq', ''), thousands)}</td>"
            f"<td><code>{_v(st.get('step_id', ''), thousands)}</code></td>"
            f"<td>{_v(st.get('kind', ''), thousands)}</td>"
            f"<td><code>{_v(st.get('fn', ''), thousands)}</code></td><td>{output}</td>\n"
            "      </tr>\n    "
        )
    if not rows:
        return mark_safe('\n      <tr><td colspan="5" class="empty">No steps.</td></tr>\n    ')
    return mark_safe("".join(rows))  # noqa: S308 - escaped


# --- the comparison of two native traces ------------------------------------------------------


def _side(side: Any) -> str:
    return f'<pre class="value">{_e(side.text)}</pre>' if side.present else "—"


def compare_sections_html(sections: Iterable[Any], *, before: str, after: str) -> SafeString:
    """Each section of a page of a native comparison (``diffview.CompareSection``) with its
    rows, as the template loop wrote them; ``before`` and ``after``: the two files' names."""
    head = (
        "<thead><tr><th>Field (JSON pointer)</th><th>Change</th>"
        f"<th>{_e(before)}</th><th>{_e(after)}</th></tr></thead>"
    )
    out = []
    for counter, s in enumerate(sections, start=1):
        rows = "".join(
            f'\n        <tr><td class="path"><code>{_e(r.path)}</code></td><td>{_e(r.kind)}</td>'
            f"<td>{_side(r.before)}</td><td>{_side(r.after)}</td></tr>\n      "
            for r in s.rows
        )
        out.append(
            f'\n  <section class="compare-section compare-{_e(s.kind)}" id="compare-{counter}">\n'
            f"    <h3>{_e(capfirst(s.title))} <code>{_e(s.path)}</code></h3>\n"
            "    <table>\n"
            f"      {head}\n"
            f"      <tbody>\n      {rows}\n      </tbody>\n"
            "    </table>\n"
            "  </section>\n  "
        )
    return mark_safe("".join(out))  # noqa: S308 - escaped


_PROOF_TITLE = (
    "this event's inclusion proof in the signed checkpoint (python -m tlog check-inclusion)"
)
_SIG_CLASS = {"verified": "ok", "broken": "bad"}


def ledger_rows_html(rows: Iterable[dict[str, Any]]) -> SafeString:
    """The ledger page's table rows (``{"event", "status", "payload", "links"}`` each, as
    ``console.views.governance._ledger_rows`` makes them), as the template loop wrote them
    (its ``{% empty %}`` row is the template's still)."""
    thousands = settings.USE_THOUSAND_SEPARATOR
    proof = reverse("api-tlog-inclusion")
    out = []
    for row in rows:
        event = row["event"]
        seq = _v(event.seq, thousands)
        actor = _e(event.actor.get_username() if event.actor_id else event.actor_label)
        keys = f"server <code>{_e(event.server_key_id)}</code>"
        if event.actor_key_id:
            keys += f"; actor <code>{_e(event.actor_key_id)}</code>"
        status = row["status"]
        badge = (
            f'<span class="badge sig-{_SIG_CLASS.get(status, "unknown")}">{_e(status)}</span>'
            if status
            else ""
        )
        links = row["links"]
        listed = (
            '<ul class="event-links">'
            + "".join(f'<li><a href="{_e(url)}">{_e(label)}</a></li>' for label, url in links)
            + "</ul>"
            if links
            else ""
        )
        when = dateformat.format(template_localtime(event.created_at), "Y-m-d H:i:s")
        out.append(
            "\n      <tr>\n"
            f'        <td>{seq} <a class="proof-link" id="proof-{seq}" href="{proof}?seq={seq}" '
            f'title="{_PROOF_TITLE}">proof</a></td>\n'
            f"        <td>{_e(when)}</td>\n"
            f"        <td><code>{_v(event.code, thousands)} {_e(event.type)}</code></td>\n"
            f"        <td>{actor}</td>\n"
            f"        <td>{keys}\n          {badge}</td>\n"
            f"        <td>{listed}\n"
            "          <details><summary>payload</summary>"
            f"<pre>{_e(row['payload'])}</pre></details></td>\n"
            "      </tr>\n    "
        )
    return mark_safe("".join(out))  # noqa: S308 - escaped


def _truncatechars(value: Any, length: int) -> str:
    """``{{ value|truncatechars:length }}``'s text (unescaped): an ASCII string needs none of
    Truncator's Unicode work (NFC, combining characters), the rest gets Truncator itself."""
    text = str(value)
    if text.isascii():
        if len(text) <= length:
            return text
        ellipsis = pgettext("String to return when truncating text", "%(truncated_text)s…")
        if ellipsis == "%(truncated_text)s…":  # not translated otherwise: one character
            return text[: length - 1] + "…"
    return Truncator(text).chars(length)


def not_replayable_rows_html(rows: Iterable[tuple[Trace, list[str]]]) -> SafeString:
    """The operations page's "not replayable" rows (a trace and what it misses), as the
    template loop wrote them (its ``{% empty %}`` row is the template's still)."""
    prefix, _, suffix = reverse("trace-detail", args=[_SHA]).partition(_SHA)
    out = []
    for t, missing in rows:
        listed = "".join(f"<li><code>{_e(m)}</code></li>" for m in missing)
        out.append(
            f'\n      <tr><td><a href="{prefix}{_e(t.blob.sha256)}{suffix}"><code>'
            f"{_e(_truncatechars(t.trace_id, 20))}</code></a></td><td>{_e(t.job_id)}</td>\n"
            f"        <td><ul>{listed}</ul></td></tr>\n    "
        )
    return mark_safe("".join(out))  # noqa: S308 - escaped
