"""The console benchmark still runs (small sizes): figures are printed, not asserted."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.skipif(
        connection.vendor != "postgresql",
        reason="the benchmark creates a scratch database on a PostgreSQL server",
    ),
]


def test_it_prints_the_pages_and_upload_tables_in_a_small_run():
    db = settings.DATABASES["default"]
    auth = db["USER"] + (f":{db['PASSWORD']}" if db.get("PASSWORD") else "")
    server = f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/postgres"
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "bench_console.py"),
            "--traces",
            "500",
            "--requests",
            "3",
            "--upload-mb",
            "1",
            "--database-url",
            server,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "trace list, deep cursor page" in done.stdout
    assert "trace page (random trace)" in done.stdout
    assert "server RSS before" in done.stdout


def test_the_pages_bench_measures_every_page_on_both_servers(tmp_path):
    """bench_pages --tiny: the stack and runserver on a scratch database, every page of
    issue 23 answered 200 to a signed-in auditor (legal staff for the legal requests) at 1 and 2
    clients."""
    import json

    db = settings.DATABASES["default"]
    auth = db["USER"] + (f":{db['PASSWORD']}" if db.get("PASSWORD") else "")
    figures = tmp_path / "pages.json"
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "bench_pages.py"),
            "--tiny",
            "--pg",
            f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}",
            "--json",
            str(figures),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    rows = json.loads(figures.read_text())["rows"]
    pages = {r["page"] for r in rows}
    assert {
        "trace list, page 1",
        "run report",
        "event payload",
        "API trace detail",
        "compare two small traces",
        "legal requests list",
        "legal request detail",
    } <= pages
    assert any(p.startswith("small trace (") for p in pages)
    assert {(r["server"], r["clients"]) for r in rows} == {
        ("stack", 1), ("stack", 2), ("dev", 1), ("dev", 2)
    }  # fmt: skip
    assert [r for r in rows if r["errors"]] == []
    assert "p95 ms" in done.stdout
    assert "load" in done.stdout


def test_the_otlp_bench_sends_exports_and_hostile_bodies_to_the_stack(tmp_path):
    """bench_otlp --tiny: the stack on a scratch database, two exporters sending GenAI span
    batches to /otlp/v1/traces with an API token, every one answered 200 and visible as an
    open trace; the hostile bodies refused (the gzip bomb) or accepted, each with a peak."""
    import json

    db = settings.DATABASES["default"]
    auth = db["USER"] + (f":{db['PASSWORD']}" if db.get("PASSWORD") else "")
    figures = tmp_path / "otlp.json"
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "bench_otlp.py"),
            "--tiny",
            "--pg",
            f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}",
            "--json",
            str(figures),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(figures.read_text())
    (run,) = found["runs"]
    for phase in ("paced", "saturated"):
        assert run[phase]["requests"] == run[phase]["ok"] == 4
        assert run[phase]["errors"] == 0
        assert run[phase]["not_visible"] == 0
        assert run[phase]["spans_accepted"] == 4 * 32
    assert run["visible_alone_s"] > 0
    answers = {h["shape"].split(",")[0]: (h["status"], h["code"]) for h in found["hostile"]}
    assert answers["gzip bomb"] == (413, "BODY_TOO_LARGE")
    assert all(h["web_peak_over_idle_mib"] > 0 for h in found["hostile"])
    assert "spans/s accepted" in done.stdout
    assert "load" in done.stdout
