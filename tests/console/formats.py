"""What the per-format console tests (AHD and Paxman, Verist, MACE, ContextOS) share: storing a
file, uploading it through the page and the API, opening and listing it, and re-verifying it as
a governed replay. Each helper answers with the response or the row; the tests assert."""

from __future__ import annotations

import html
import io
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from django.core.files.uploadedfile import SimpleUploadedFile

from core.errors import FORCE_HALT_ACTIVE
from governance.models import GovernanceEvent
from governance.selectors import halts_active_map
from governance.services import replay_request, replay_run_govern
from replay.models import ReplayRun, Trace
from replay.services import trace_ingest
from tests.console.personas import persona

# --- storing (services) ----------------------------------------------------------------------


def ingest_file(path: Path) -> Trace:
    """The file at ``path`` stored as one trace under its own name (no inputs beside it)."""
    return trace_ingest(source=io.BytesIO(path.read_bytes()), filename=path.name).trace


def first_stored(outcomes: Iterable[Any]) -> Trace:
    """The trace a batch upload stored (its inputs are stored as snapshots, not traces)."""
    return next(o.result.trace for o in outcomes if o.result is not None)


def governed(trace: Trace, actor: str = "alice") -> ReplayRun:
    """A finished, governed audit replay of ``trace`` asked for by ``actor``."""
    run = replay_request(trace=trace, mode="audit", actor=persona(actor), enqueue=False)
    return replay_run_govern(run_id=run.id)


def event_types() -> list[str]:
    """Every governance event's type, in ledger order."""
    return list(GovernanceEvent.objects.order_by("seq").values_list("type", flat=True))


def assert_halted_alone(tampered: Trace, clean: Trace) -> ReplayRun:
    """An integrity failure halted ``tampered`` and not ``clean``: re-verifying the one is
    refused with FORCE_HALT_ACTIVE, the other is ok. Answers the refused run."""
    halted = halts_active_map()
    assert tampered.blob.sha256 in halted
    assert clean.blob.sha256 not in halted
    again = governed(tampered)
    assert again.error_code == FORCE_HALT_ACTIVE
    assert governed(clean).status == "ok"
    return again


# --- uploading (HTTP) ------------------------------------------------------------------------


def upload_of(path: Path) -> SimpleUploadedFile:
    return SimpleUploadedFile(path.name, path.read_bytes())


def uploads(pairs: Iterable[tuple[str, bytes]]) -> list[SimpleUploadedFile]:
    return [SimpleUploadedFile(name, data) for name, data in pairs]


def api_client(name: str) -> Any:
    """A DRF test client authenticated as ``name`` (no session, no second factor)."""
    from rest_framework.test import APIClient

    client = APIClient()
    client.force_authenticate(persona(name))
    return client


def upload_page(client: Any, files: list[SimpleUploadedFile]) -> Any:
    """The upload page's form, with ``files`` dropped on it together."""
    return client.post("/traces/upload/", {"files": files})


def stored_as_inputs(body: str) -> list[str]:
    """What the upload page's outcomes say of each file stored as another's input, each line
    whole, its character references read (``&#x27;`` is ``'``)."""
    found = re.findall(r'<p class="verdict">Stored as an input of .*?</p>', body, re.S)
    return [html.unescape(line) for line in found]


def stored_as_input(owner: str, words: str) -> str:
    """The outcome line of a file stored as an input of ``owner``, ``words`` its hint."""
    return (
        f'<p class="verdict">Stored as an input of <code>{owner}</code> '
        f'<span class="hint">({words})</span></p>'
    )


def upload_api(client: Any, file: SimpleUploadedFile, inputs: list | None = None) -> Any:
    """``POST /api/traces/upload/``: one trace file and, if given, the inputs it names."""
    return client.post("/api/traces/upload/", _with_inputs(file, inputs))


def verify_api(client: Any, file: SimpleUploadedFile, inputs: list | None = None) -> Any:
    """``POST /api/traces/verify/``: checks the file (and its inputs) and stores nothing."""
    return client.post("/api/traces/verify/", _with_inputs(file, inputs))


def _with_inputs(file: SimpleUploadedFile, inputs: list | None) -> dict[str, Any]:
    return {"file": file} if inputs is None else {"file": file, "inputs": inputs}


# --- listing, opening, re-verifying (HTTP) ---------------------------------------------------


def listed(client: Any, fmt: str) -> tuple[list[dict[str, Any]], str]:
    """The API's trace list and the list page, both filtered by ``fmt`` (the list's format
    filter offers it)."""
    assert f'<option value="{fmt}"' in client.get("/traces/").content.decode()
    results = client.get("/api/traces/", {"format": fmt}).json()["results"]
    return results, client.get("/traces/", {"format": fmt}).content.decode()


def trace_page(client: Any, trace: Trace) -> Any:
    return client.get(f"/traces/{trace.blob.sha256}/")


def compare_page(client: Any, a: Trace, b: Trace) -> Any:
    return client.get(f"/traces/{a.blob.sha256}/compare/{b.blob.sha256}/")


def replay_page(client: Any, trace: Trace) -> Any:
    """The trace page's form asking for an audit replay (303 to the run's page)."""
    return client.post(f"/traces/{trace.blob.sha256}/replay/", {"mode": "audit"})


def replay_api(client: Any, trace: Trace) -> Any:
    """``POST /api/replays/`` asking for an audit replay (202)."""
    return client.post("/api/replays/", {"trace": trace.blob.sha256, "mode": "audit"})


def replayed_by_page_and_api(client: Any, trace: Trace, capture: Any) -> list[ReplayRun]:
    """An audit replay asked for through the trace page (303) and one through the API (202),
    their tasks run (``capture`` is pytest-django's ``django_capture_on_commit_callbacks``);
    both finish ok. Answers the two runs, oldest first."""
    with capture(execute=True):
        page = replay_page(client, trace)
        api = replay_api(client, trace)
    assert (page.status_code, api.status_code) == (303, 202)
    runs = list(trace.runs.order_by("created_at"))
    assert [(r.state, r.status, r.error_code) for r in runs] == [("done", "ok", "")] * 2
    return runs
