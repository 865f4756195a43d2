"""The upload page groups a drop by the formats' companion rules it is given as data: a format
the page's script has never heard of (the toy format of `tests/toyformat/`, installed through
the entry-point group) gets its note sent with it, and nothing else; a MACE log takes the
snapshot files its fields name (a rule by content, read from the file before it is sent), as
the server groups them."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace

import pytest

from core.formats import protocol
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


MACE = Path(__file__).resolve().parents[1] / "replay" / "fixtures" / "mace"


def test_a_mace_log_goes_with_the_snapshot_files_it_names_before_it_is_sent(
    new_context, shots, tmp_path
):
    from replay.keys import key_add_hmac
    from tests.replay import mace_reference as ref

    key_add_hmac(key_id=ref.KEY_ID, secret=ref.SECRET, valid_from=datetime(2000, 1, 1, tzinfo=UTC))
    persona("alice")
    log = json.loads((MACE / "log_s1.json").read_bytes())
    named = [log[f"{kind}_snapshot_id"] + ".json" for kind in ref.KINDS]
    drop = []
    for name in reversed(named):  # the snapshot files first: the order of a drop is no rule
        (tmp_path / name).write_bytes((MACE / name).read_bytes())
        drop.append(tmp_path / name)
    (tmp_path / "log_s1.json").write_bytes((MACE / "log_s1.json").read_bytes())
    drop.append(tmp_path / "log_s1.json")
    stray = tmp_path / "unnamed.json"  # a .json the log does not name: sent on its own
    stray.write_bytes(b"{}")
    drop.append(stray)

    page = sign_in(new_context, "alice")
    page.goto("/traces/upload/")
    page.wait_for_selector("form.enhanced")
    page.set_input_files("#upload-input", [str(p) for p in drop])
    uploads_settled(page, done=1, failed=1)
    rows = page.locator(".upload-file .filename").all_inner_texts()
    assert rows == [f"log_s1.json (with {', '.join(named)})", "unnamed.json"]
    stored = " ".join(page.locator(".upload-file.done").first.inner_text().split())
    assert "Stored as log_s1 · mace-reflective-log" in stored
    assert "Verified on upload: ok" in stored
    shots(page, "upload-mace-log-with-its-snapshots")
    no_console_errors(page)
    assert list(Trace.objects.values_list("trace_id", flat=True)) == ["log_s1"]
