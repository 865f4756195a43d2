"""CONTRIBUTING's "Add a trace format" is true: a format from a package outside the console
(`tests/toyformat/`), registered only through the entry-point group `replay_console.formats`,
goes through `manage.py verify`, `manage.py ingest`, the upload page (with its companion file
grouped by its own rule, and said in its rule's words), the API (verify and upload), the
list's format filter, the trace page (its code in its own words beside the console's), a
replay's report page (its own part, a template from its own package) and compare, with no
file of the console changed."""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command

from core.errors import INTEGRITY_FAILURE
from core.formats import detect_format, format_names, protocol
from replay.models import Trace
from replay.services import inputs_beside
from tests.console.formats import (
    api_client,
    compare_page,
    listed,
    replay_page,
    stored_as_input,
    stored_as_inputs,
    trace_page,
    upload_api,
    upload_page,
    verify_api,
)
from tests.toyformat import adapter as toy

pytestmark = pytest.mark.django_db

TOY_INPUT = "a toy log's note"  # the upload page's words, its companion rule's
TOY_TEMPLATES = Path(toy.__file__).with_name("templates")


@pytest.fixture(autouse=True)
def toy_installed(monkeypatch):
    """The toy package "installed": its entry point is the one the group lists."""
    ep = SimpleNamespace(name="toy", group=protocol.ENTRY_POINT_GROUP, load=lambda: toy.register)

    def entry_points(group):
        return [ep] if group == protocol.ENTRY_POINT_GROUP else []

    monkeypatch.setattr(protocol, "entry_points", entry_points)
    monkeypatch.setattr(protocol, "_default", None)  # rebuilt with the toy, restored after


def toy_bytes(toy_id: str, values: list[int], total: int | None = None) -> bytes:
    doc = {"toy": toy_id, "job": "toy-job", "values": values, "sum": sum(values)}
    if total is not None:
        doc["sum"] = total
    return json.dumps(doc).encode()


def test_the_toy_is_registered_through_the_entry_point_group_and_detected():
    assert format_names()[-1] == toy.FORMAT
    assert detect_format(b"{}", "a.toy.json") == toy.FORMAT
    assert detect_format(b'{"toy": "x"}', "a.json") == toy.FORMAT


def test_manage_py_verify_reads_a_toy_log(tmp_path, capsys):
    good = tmp_path / "a.toy.json"
    good.write_bytes(toy_bytes("a", [1, 2]))
    call_command("verify", str(good), "--json")
    report = json.loads(capsys.readouterr().out)
    assert (report["format"], report["status"], report["trace_id"]) == (toy.FORMAT, "ok", "a")
    bad = tmp_path / "b.toy.json"
    bad.write_bytes(toy_bytes("b", [1, 2], total=4))
    with pytest.raises(SystemExit) as exited:
        call_command("verify", str(bad), "--json")
    assert exited.value.code == 1
    report = json.loads(capsys.readouterr().out)
    assert (report["status"], report["error_code"], report["message"]) == (
        "tamper_detected",
        INTEGRITY_FAILURE,
        "sum is 4, not 3",
    )


def test_manage_py_ingest_stores_a_toy_log_with_the_note_beside_it(tmp_path, capsys):
    path = tmp_path / "a.toy.json"
    path.write_bytes(toy_bytes("a", [1, 2]))
    (tmp_path / "a.note.txt").write_bytes(b"seven b")
    (tmp_path / "b.note.txt").write_bytes(b"another log's")
    assert inputs_beside(path) == {"a.note.txt": b"seven b"}
    call_command("ingest", str(path))
    trace = Trace.objects.get()
    assert (trace.format, trace.trace_id, trace.job_id) == (toy.FORMAT, "a", "toy-job")
    assert capsys.readouterr().out.startswith("a toy-log ")


def test_the_upload_page_stores_a_toy_log_with_its_note_and_the_list_filters_it(as_persona):
    client = as_persona("alice")
    files = [
        SimpleUploadedFile("a.toy.json", toy_bytes("a", [1, 2])),
        SimpleUploadedFile("a.note.txt", b"seven b"),
    ]
    body = upload_page(client, files).content.decode()
    assert "Stored as an input of <code>a.toy.json</code>" in body
    assert stored_as_inputs(body) == [stored_as_input("a.toy.json", TOY_INPUT)]
    trace = Trace.objects.get()
    assert (trace.format, trace.trace_id) == (toy.FORMAT, "a")
    assert trace.ingest_report["status"] == "ok"
    page = client.get("/traces/upload/").content.decode()
    assert '"trace": "\\\\.toy\\\\.json$"' in page  # its companion rule, as data
    assert "; a toy log, with its input files: each is verified" in page  # the drop zone
    results, list_page = listed(client, toy.FORMAT)
    assert [r["trace_id"] for r in results] == ["a"]
    assert trace.blob.sha256 in list_page


def test_the_api_verifies_and_stores_a_toy_log(as_persona):
    client = api_client("alice")
    checked = verify_api(client, SimpleUploadedFile("b.toy.json", toy_bytes("b", [5], 6)))
    assert checked.status_code == 200
    assert checked.json()["format"] == toy.FORMAT
    assert checked.json()["report"]["error_code"] == INTEGRITY_FAILURE
    assert not Trace.objects.exists()
    stored = upload_api(client, SimpleUploadedFile("a.toy.json", toy_bytes("a", [1, 2])))
    assert stored.status_code == 201
    assert (stored.json()["format"], stored.json()["trace_id"]) == (toy.FORMAT, "a")


def test_the_trace_page_shows_the_toy_panel_and_compare_lists_the_difference(as_persona):
    client = api_client("alice")
    upload_api(client, SimpleUploadedFile("a.toy.json", toy_bytes("a", [1, 2])))
    upload_api(client, SimpleUploadedFile("a2.toy.json", toy_bytes("a", [1, 3])))
    first, second = Trace.objects.order_by("id")
    page = as_persona("alice")
    body = trace_page(page, first).content.decode()
    assert "1, 2" in body
    assert "toy id" in body
    response = compare_page(page, first, second)
    assert response.status_code == 200
    body = response.content.decode()
    assert '<td class="path"><code>/values/1</code></td><td>changed</td>' in body
    assert '<td class="path"><code>/sum</code></td><td>changed</td>' in body


def test_the_trace_page_gives_a_wrong_sum_in_the_toys_own_words(as_persona):
    upload_api(api_client("alice"), SimpleUploadedFile("b.toy.json", toy_bytes("b", [5], 6)))
    body = trace_page(as_persona("alice"), Trace.objects.get()).content.decode()
    verdict = re.search(r'<p id="format-verdict">.*?</p>', body, re.S)
    assert verdict is not None
    assert verdict[0] == (
        '<p id="format-verdict"><span class="badge verdict-tamper_detected">tamper_detected'
        '</span> <code class="code">INTEGRITY_FAILURE</code> (toy: <code>bad_sum</code>) '
        "sum is 6, not 5</p>"
    )


def test_a_replay_report_shows_the_toys_own_part_from_its_package(
    as_persona, django_capture_on_commit_callbacks
):
    from django.template.loader import get_template

    template = get_template("formats/toy-log/report.html")
    assert template.origin.name == str(TOY_TEMPLATES / "report.html")
    upload_api(api_client("alice"), SimpleUploadedFile("a.toy.json", toy_bytes("a", [1, 2])))
    client = as_persona("alice")
    with django_capture_on_commit_callbacks(execute=True):
        response = replay_page(client, Trace.objects.get())
    assert response.status_code == 303
    page = client.get(response["Location"]).content.decode()
    assert '<p id="toy-sum">Toy sum: the values add up to 3</p>' in page


def test_a_format_with_versions_lists_them_on_its_trace_page_in_its_own_words(
    as_persona, monkeypatch
):
    # versions are a format's own (`protocol.ArtifactVersions`, Paxman's): the toy declares
    # none, so two toy logs with one id are not versions of one artifact until it does
    client = api_client("alice")
    upload_api(client, SimpleUploadedFile("a.toy.json", toy_bytes("a", [1, 2])))
    upload_api(client, SimpleUploadedFile("a2.toy.json", toy_bytes("a", [1, 3])))
    first, second = Trace.objects.order_by("id")
    page = as_persona("alice")
    assert 'id="artifact-history"' not in trace_page(page, second).content.decode()

    words = protocol.ArtifactVersions(
        title="Earlier toy logs", started="toy started", version="toy version"
    )
    monkeypatch.setattr(toy.ToyFormat, "versions", words, raising=False)
    body = trace_page(page, second).content.decode()
    assert (
        '<h3>Earlier toy logs</h3>\n  <table id="artifact-history">\n'
        "    <thead><tr><th>File</th><th>toy started</th><th>toy version</th>"
    ) in body
    history = body[body.index('<table id="artifact-history">') :]
    history = history[: history.index("</table>")]
    assert f'<a href="/traces/{first.blob.sha256}/">a.toy.json</a>' in history
    assert history.count("<tr>") == 2  # the header and the one other version
