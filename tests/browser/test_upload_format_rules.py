"""The upload page groups a drop by the formats' companion rules it is given as data: a format
the page's script has never heard of (the toy format of `tests/toyformat/`, installed through
the entry-point group) gets its note sent with it, and nothing else."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from replay.formats import protocol
from replay.models import Trace
from tests.browser.test_journeys import no_console_errors, sign_in, uploads_settled
from tests.console.personas import persona
from tests.toyformat import adapter as toy

pytestmark = pytest.mark.usefixtures("flushable_transactional_db")


@pytest.fixture
def toy_installed(monkeypatch):
    ep = SimpleNamespace(name="toy", group=protocol.ENTRY_POINT_GROUP, load=lambda: toy.register)
    monkeypatch.setattr(protocol, "entry_points", lambda group: [ep])
    monkeypatch.setattr(protocol, "_default", None)


def toy_log(toy_id: str, values: list[int]) -> bytes:
    return json.dumps({"toy": toy_id, "job": "j", "values": values, "sum": sum(values)}).encode()


def test_a_toy_log_goes_with_its_note_by_the_rule_the_page_is_given(
    new_context, shots, tmp_path, toy_installed
):
    persona("alice")
    first = tmp_path / "a.toy.json"
    first.write_bytes(toy_log("a", [1, 2]))
    note = tmp_path / "a.note.txt"
    note.write_bytes(b"seven b")
    other_note = tmp_path / "c.note.txt"  # no c.toy.json in the drop: sent on its own
    other_note.write_bytes(b"alone")
    second = tmp_path / "b.toy.json"
    second.write_bytes(toy_log("b", [3]))

    page = sign_in(new_context, "alice")
    page.goto("/traces/upload/")
    page.wait_for_selector("form.enhanced")
    page.set_input_files("#upload-input", [str(p) for p in (first, note, other_note, second)])
    uploads_settled(page, done=2, failed=1)
    rows = page.locator(".upload-file .filename").all_inner_texts()
    assert rows == [f"{first.name} (with {note.name})", other_note.name, second.name]
    stored = page.locator(".upload-file.done").first.inner_text()
    assert "Stored as a · toy-log" in stored
    assert "Verified on upload: ok" in stored
    shots(page, "upload-toy-format-by-rule")
    no_console_errors(page)
    assert sorted(Trace.objects.values_list("trace_id", flat=True)) == ["a", "b"]
