"""The legal-request list's rows are written in Python (dsr.tables), not by a template loop
whose per-cell cost made 1,000 requests ~100 ms of CPU a page (issue 23): the markup is the
loop's, byte for byte, and the page's queries do not grow with the requests."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.template import Context, Template
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from dsr.models import LegalRequest
from dsr.tables import ListRow, legal_rows_html, list_rows
from tests.console.personas import client_for, persona

#: the row loop the list's template used (kept to compare)
TEMPLATE_LOOP = """{% for row in rows %}
    <tr>
      <td><a href="{% url 'dsr-detail' row.r.id %}">{{ row.r.created_at|date:"Y-m-d H:i" }}</a></td>
      <td>{{ row.r.kind }}</td>
      <td>{{ row.r.subject_refs|length }}</td>
      <td>{{ row.r.requested_by.get_username }}</td>
      <td><span class="badge">{{ row.r.get_state_display }}</span></td>
      <td>{{ row.r.due_date|date:"Y-m-d" }} {% if not row.r.is_closed %}<span class="countdown{% if row.days_left < 0 %} no{% endif %}" data-days-left="{{ row.days_left }}">{% if row.days_left < 0 %}overdue by {{ row.overdue }} day(s){% elif row.days_left == 0 %}due today{% else %}{{ row.days_left }} day(s) left{% endif %}</span>{% endif %}</td>
    </tr>
  {% endfor %}"""  # noqa: E501

TODAY = date(2026, 3, 10)


def _row_of(r: LegalRequest) -> ListRow:
    """The row of a request built in memory, as ``list_rows`` reads one from the database."""
    return ListRow(
        r.id, r.created_at, r.kind, r.subject_refs, r.state, r.due_date,
        r.requested_by.get_username(),
    )  # fmt: skip


def _requests() -> list[LegalRequest]:
    lena, odd = User(username="lena"), User(username='<b>"o&d"</b>')
    cases = [
        ("access", "open", date(2026, 3, 20), lena, ["a"]),
        ("erasure", "in_progress", TODAY, lena, ["a", "b"]),
        ("both", "open", date(2026, 3, 1), odd, []),
        ("both", "fulfilled", date(2026, 2, 1), lena, ["a", "b", "c"]),
        ("access", "refused", date(2026, 4, 1), lena, ["a"]),
        ('<kind "x">', "no-such-state", date(2026, 3, 11), odd, ["a"]),
    ]
    return [
        LegalRequest(
            kind=kind,
            state=state,
            due_date=due,
            requested_by=by,
            subject_refs=refs,
            legal_basis="GDPR",
            created_at=datetime(2026, 1, 2 + i, 23, 30 + i, 5, tzinfo=UTC),
        )
        for i, (kind, state, due, by, refs) in enumerate(cases)
    ]


@pytest.mark.parametrize("zone", ["UTC", "Europe/Berlin"])
def test_the_rows_are_the_markup_the_template_loop_wrote(zone):
    found = _requests()
    rows = [
        {"r": r, "days_left": r.days_left(TODAY), "overdue": -r.days_left(TODAY)} for r in found
    ]
    with timezone.override(zone):
        expected = Template(TEMPLATE_LOOP).render(Context({"rows": rows}))
        written = legal_rows_html([_row_of(r) for r in found], TODAY)
    assert written == expected
    assert "overdue by 9 day(s)" in written
    assert "due today" in written
    assert "&lt;b&gt;&quot;o&amp;d&quot;&lt;/b&gt;" in written


def _open(n: int) -> None:
    lena = persona("lena")
    LegalRequest.objects.bulk_create(
        LegalRequest(
            kind="access", legal_basis="GDPR", due_date=TODAY, requested_by=lena, subject_refs=[]
        )
        for _ in range(n)
    )


@pytest.mark.django_db
def test_the_list_queries_do_not_grow_with_the_requests():
    client = client_for("lena")
    _open(2)
    client.get(reverse("dsr-list"))  # the session and roles warmed
    with CaptureQueriesContext(connection) as few:
        assert client.get(reverse("dsr-list")).status_code == 200
    _open(60)
    with CaptureQueriesContext(connection) as many:
        body = client.get(reverse("dsr-list")).content.decode()
    assert body.count('<td><a href="/dsr/') == 62
    assert len(many) == len(few) <= 6


@pytest.mark.django_db
@pytest.mark.parametrize("zone", ["UTC", "Europe/Berlin"])
def test_the_rows_read_as_tuples_are_the_markup_the_loop_wrote_over_the_models(zone):
    for r in _requests():
        r.requested_by, _ = User.objects.get_or_create(username=r.requested_by.username)
        r.save()
    ordered = LegalRequest.objects.order_by("due_date", "created_at")
    models = list(ordered.select_related("requested_by"))
    rows = [
        {"r": r, "days_left": r.days_left(TODAY), "overdue": -r.days_left(TODAY)} for r in models
    ]
    with timezone.override(zone):
        expected = Template(TEMPLATE_LOOP).render(Context({"rows": rows}))
        written = legal_rows_html(list_rows(ordered), TODAY)
    assert written == expected
    assert written.count("<tr>") == 6
