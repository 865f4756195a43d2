"""Golden tests REPLAY-01 … REPLAY-07 (seed 003 §11) on the checked-in fixtures.

Each golden trace goes through the services (ingest, then a replay run) and the command line,
and each test asserts the exact error string, the canonical (`mace-v1`) serialised diff, where
it broke and the expected/observed values; the whole report must equal the reviewed
`*.report.json` fixture byte for byte.

REPLAY-06 (force-continue requires an admin and a council approval) needs the governance
council; it lives with the governance tests in tests/governance/.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from subprocess import PIPE

import pytest
from django.conf import settings
from django.core.management import call_command

from core.canonical import mace_v1
from core.errors import (
    INTEGRITY_FAILURE,
    MISSING_PERSISTED_AGENT_OUTPUT,
    MISSING_SNAPSHOT,
    REPLAY_DIVERGENCE,
    RESULT_MISMATCH,
)
from core.formats.native import engine
from replay.models import ReplayRun, Snapshot, Trace
from replay.selectors import trace_is_replayable, trace_missing
from replay.services import (
    replay_run_create,
    replay_run_execute,
    snapshot_remove,
    trace_ingest,
)
from tests.replay.fixtures.make_golden import golden_files
from tests.replay.helpers import (
    GOLDEN_DIR,
    canonical_report,
    golden,
    golden_report,
)

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("var_dirs", "golden_key")]

ROUTER_S2 = "sha256:adb2fb4d99cfda37d88db6981c062ae5084d71a24cfa542dc559bd65dcc9071c"


def ingest(name: str) -> Trace:
    with golden(name).open("rb") as fh:
        return trace_ingest(source=fh, filename=name).trace


def replay_stored(trace: Trace, mode: str) -> ReplayRun:
    """A replay as governance runs it, in a world whose ledger has no active halt."""
    run = replay_run_create(trace=trace, mode=mode)
    return replay_run_execute(run_id=run.id, halted={})


def replay_command(target: str, mode: str, *extra: str) -> tuple[int, str]:
    """`manage.py replay TARGET --mode MODE [--json]` in-process: (exit code, stdout)."""
    out = io.StringIO()
    try:
        call_command("replay", target, "--mode", mode, *extra, stdout=out, stderr=io.StringIO())
    except SystemExit as exc:
        return int(exc.code), out.getvalue()
    return 0, out.getvalue()


def failing_checks(report: dict) -> list[dict]:
    return [c for c in report["checks"] if not c["ok"]]


def test_it_still_records_the_golden_fixtures_byte_for_byte():
    on_disk = {p.name: p.read_bytes() for p in GOLDEN_DIR.iterdir() if p.name != "KEY.md"}
    produced = golden_files()
    assert sorted(produced) == sorted(on_disk)
    changed = [name for name in produced if produced[name] != on_disk[name]]
    assert changed == [], "recorder or engine output changed; regenerate only on purpose"


def test_REPLAY_01_full_replay_equality():
    trace = ingest("ok.trace.json")
    assert trace.ingest_report["status"] == engine.OK
    assert trace_is_replayable(trace)

    run = replay_stored(trace, engine.PRODUCTION)

    report = run.report
    assert (run.status, run.error_code, run.authoritative) == ("ok", "", True)
    assert report["status"] == "ok"
    assert report["error_code"] is None
    assert report["authoritative"] is True
    assert mace_v1(report["divergences"]) == b"[]"
    assert (report["broke_at"], report["expected"], report["observed"]) == (None, None, None)
    assert failing_checks(report) == []
    assert [c["name"] for c in report["checks"]] == list(engine.CHECK_ORDER)
    assert report["checks"][-1]["detail"] == "recomputed final answer equals the stored one"
    stored = json.loads(golden("ok.trace.json").read_bytes())["final_answer"]
    assert mace_v1(stored) == b'{"answer":"plan:7d3245080967d0a8","route":"plan","steps":9}'
    assert canonical_report(report) == golden_report("ok", engine.PRODUCTION)

    code, out = replay_command(trace.trace_id, engine.PRODUCTION, "--json")
    assert code == 0
    assert canonical_report(json.loads(out)) == golden_report("ok", engine.PRODUCTION)


def test_it_replays_the_jsonl_spelling_of_the_golden_trace_identically():
    json_run = replay_stored(ingest("ok.trace.json"), engine.PRODUCTION)
    jsonl_run = replay_stored(ingest("ok.trace.jsonl"), engine.PRODUCTION)

    assert jsonl_run.report["checks"][0]["detail"] == (
        "replay-trace v1 (jsonl): 11 events, 9 steps, 3 outputs"
    )
    assert json_run.report["checks"][0]["detail"] == (
        "replay-trace v1 (json): 11 events, 9 steps, 3 outputs"
    )
    jsonl_run.report["checks"][0] = json_run.report["checks"][0]
    assert mace_v1(jsonl_run.report) == mace_v1(json_run.report)


def test_REPLAY_02_missing_snapshot_fails():
    retained = ingest("retained.trace.json")  # carries every body: the store keeps them
    dependent = ingest("missing_snapshot.trace.json")  # refers to the router body by id
    assert dependent.trace_id == retained.trace_id
    assert dependent.ingest_report["status"] == engine.OK
    assert trace_missing(dependent) == []

    # retention removes the router snapshot from the store (deletes its Snapshot row)
    assert snapshot_remove(snapshot_id=ROUTER_S2) == 2  # both stored files reference it
    assert not Snapshot.objects.filter(snapshot_id=ROUTER_S2).exists()

    expected_missing = f"snapshot:router {ROUTER_S2} (not retained)"
    assert trace_missing(dependent) == [expected_missing]
    assert not trace_is_replayable(dependent)
    run = replay_stored(dependent, engine.AUDIT)
    report = run.report
    assert (run.status, run.error_code) == ("refused", MISSING_SNAPSHOT)
    assert report["error_code"] == "MISSING_SNAPSHOT"
    assert report["message"] == f"missing required snapshots: {expected_missing}"
    assert report["missing"] == [expected_missing]
    assert report["replayable"] is False
    assert mace_v1(report["divergences"]) == b"[]"
    assert (report["broke_at"], report["expected"], report["observed"]) == (None, None, None)
    assert failing_checks(report) == [
        {"name": "required_snapshots", "ok": False, "detail": expected_missing}
    ]
    assert canonical_report(report) == golden_report("missing_snapshot", engine.AUDIT)

    # two stored files carry this trace id: the command is told which one, by upload id
    code, out = replay_command(dependent.trace_id, engine.AUDIT, "--json")
    assert (code, json.loads(out)["error_code"]) == (2, "AMBIGUOUS_TRACE_ID")
    code, out = replay_command(f"upload:{dependent.pk}", engine.AUDIT, "--json")
    assert code == 1
    assert canonical_report(json.loads(out)) == golden_report("missing_snapshot", engine.AUDIT)

    # retention decides for every stored trace, even one whose file carries the body
    assert trace_missing(retained) == [expected_missing]
    assert replay_stored(retained, engine.AUDIT).error_code == MISSING_SNAPSHOT


def test_it_refuses_the_bodiless_golden_trace_when_no_store_has_its_snapshot():
    with golden("missing_snapshot.trace.json").open("rb") as fh:
        trace = trace_ingest(source=fh, filename="missing_snapshot.trace.json").trace

    assert trace.ingest_report["error_code"] == MISSING_SNAPSHOT
    assert trace.last_status == "refused"
    assert Snapshot.objects.filter(snapshot_id=ROUTER_S2).exists() is False


def test_REPLAY_03_signature_mismatch():
    trace = ingest("tampered_snapshot.trace.json")
    assert trace.last_status == "tamper_detected"  # stored as evidence, with its verdict

    run = replay_stored(trace, engine.AUDIT)

    report = run.report
    assert (run.status, run.error_code) == ("tamper_detected", INTEGRITY_FAILURE)
    assert report["error_code"] == "INTEGRITY_FAILURE"
    assert report["message"] == "snapshot brainstate: its body does not hash to its snapshot_id"
    assert report["broke_at"] == 1
    assert report["expected"] == (
        "sha256:967fba59ab8dba0311b171961ca4a36124e02c951f51800d30cbcec4d1eb44e6"
    )
    assert report["observed"] == (
        "sha256:3a7622250d5e628d2a4d335a8a2a7fe4e433450b73621f10ab845446a0629f88"
    )
    assert mace_v1(report["divergences"]) == b"[]"
    # the job halts: nothing after the snapshot check runs
    assert [c["name"] for c in report["checks"]] == [
        "format",
        "halts",
        "required_snapshots",
        "snapshots",
    ]
    assert canonical_report(report) == golden_report("tampered_snapshot", engine.AUDIT)

    code, out = replay_command(trace.trace_id, engine.PRODUCTION, "--json")
    assert code == 1
    assert json.loads(out)["error_code"] == "INTEGRITY_FAILURE"


def test_it_detects_one_flipped_byte_of_a_snapshot_signature(tmp_path):
    data = golden("ok.trace.json").read_bytes()
    doc = json.loads(data)
    signature = doc["snapshots"][0]["signature"]["value"]
    flipped = signature[:-1] + ("0" if signature[-1] != "0" else "1")
    path = tmp_path / "flipped.trace.json"
    path.write_bytes(data.replace(signature.encode(), flipped.encode(), 1))

    code, out = replay_command(str(path), engine.AUDIT, "--json")

    report = json.loads(out)
    assert code == 1
    assert report["error_code"] == "INTEGRITY_FAILURE"
    assert report["message"] == "snapshot selfrep: HMAC-SHA256 by golden does not verify"
    assert (report["broke_at"], report["expected"], report["observed"]) == (0, signature, flipped)


def test_it_detects_an_event_edited_after_the_fact():
    run = replay_stored(ingest("broken_chain.trace.json"), engine.AUDIT)

    report = run.report
    assert report["error_code"] == "INTEGRITY_FAILURE"
    assert report["message"] == (
        "event 4: the chain hash does not verify (the event or one before it changed)"
    )
    assert report["broke_at"] == 4
    assert report["expected"] == (
        "sha256:543068a41451c4dc18aafda6ca9f302700f8db25d5d1704cbc768e6cf5d7cfd9"
    )
    assert report["observed"] == (
        "sha256:f8aa95dc5fc12e77d06c507bfa903d34acbb27ed596038c29178d33586a5e3bb"
    )
    assert canonical_report(report) == golden_report("broken_chain", engine.AUDIT)


def test_REPLAY_04_missing_persisted_agent_output():
    trace = ingest("missing_output.trace.json")
    assert trace.missing_outputs == ["out-0001"]
    assert trace_missing(trace) == ["output:out-0001 (not persisted)"]

    run = replay_stored(trace, engine.PRODUCTION)

    report = run.report
    assert (run.status, run.error_code) == ("refused", MISSING_PERSISTED_AGENT_OUTPUT)
    assert report["error_code"] == "MISSING_PERSISTED_AGENT_OUTPUT"
    assert report["message"] == (
        "external output 'out-0001' (step 4) was not persisted; production replay never "
        "calls live services"
    )
    assert report["broke_at"] == 4
    assert (report["expected"], report["observed"]) == (None, None)
    assert mace_v1(report["divergences"]) == b"[]"
    assert failing_checks(report) == [
        {
            "name": "persisted_outputs",
            "ok": False,
            "detail": "external output 'out-0001' (step 4) was not persisted",
        }
    ]
    # the deterministic steps never ran: production replay halted before re-execution
    assert "steps" not in [c["name"] for c in report["checks"]]
    assert canonical_report(report) == golden_report("missing_output", engine.PRODUCTION)

    code, out = replay_command(trace.trace_id, engine.PRODUCTION, "--json")
    assert code == 1
    assert canonical_report(json.loads(out)) == golden_report("missing_output", engine.PRODUCTION)

    # audit replay re-executes the deterministic steps only, so it needs no agent output
    assert replay_stored(trace, engine.AUDIT).report["status"] == "ok"


def test_REPLAY_05_replay_divergence_detection():
    trace = ingest("diverged.trace.json")

    run = replay_stored(trace, engine.AUDIT)

    report = run.report
    assert (run.status, run.error_code) == ("diverged", REPLAY_DIVERGENCE)
    assert report["error_code"] == "REPLAY_DIVERGENCE"
    assert report["message"] == (
        "step 3 (route-1, router.decide@1): the recomputed output differs from the recorded one"
    )
    assert mace_v1(report["divergences"]) == (
        b'[{"after":"search","before":"write","path":"/route","step":3,"step_id":"route-1"}]'
    )
    assert report["broke_at"] == 3
    scores = (
        b'"scores":{"math":0.270393727,"plan":0.475642142,"search":0.484014838,"write":0.352921306}'
    )
    assert report["expected"].encode() == b'{"route":"write",' + scores + b"}"
    assert report["observed"].encode() == b'{"route":"search",' + scores + b"}"
    assert canonical_report(report) == golden_report("diverged", engine.AUDIT)
    trace.refresh_from_db()
    assert trace.last_status == "diverged"

    code, out = replay_command(trace.trace_id, engine.AUDIT, "--json")
    assert code == 1
    assert canonical_report(json.loads(out)) == golden_report("diverged", engine.AUDIT)


def test_it_reports_a_wrong_final_answer_as_RESULT_MISMATCH():
    run = replay_stored(ingest("result_mismatch.trace.json"), engine.AUDIT)

    report = run.report
    assert (run.status, run.error_code) == ("diverged", RESULT_MISMATCH)
    assert report["message"] == "the recomputed final answer differs from the stored final_answer"
    assert mace_v1(report["divergences"]) == (
        b'[{"after":"plan:7d3245080967d0a8","before":"search:0000000000000000","path":"/answer",'
        b'"step":"final_answer","step_id":"final_answer"}]'
    )
    assert report["broke_at"] == "final_answer"
    assert report["expected"] == '{"answer":"search:0000000000000000","route":"plan","steps":9}'
    assert report["observed"] == '{"answer":"plan:7d3245080967d0a8","route":"plan","steps":9}'
    assert canonical_report(report) == golden_report("result_mismatch", engine.AUDIT)


# REPLAY-06 (force-continue requires admin + council, and stays non-authoritative) needs the
# governance council: see tests/governance/.


def test_REPLAY_07_sandbox_run_is_non_authoritative():
    trace = ingest("unpersisted.trace.json")

    run = replay_stored(trace, engine.SANDBOX)

    report = run.report
    assert (run.status, run.error_code, run.authoritative) == ("ok", "", False)
    assert report["authoritative"] is False
    # the reference mock reproduces the recorder's stand-in agent, so its outputs, which feed
    # the steps that consumed them, have the recorded hashes
    recorded = json.loads(golden("unpersisted.trace.json").read_bytes())["outputs"]
    assert report["substituted"] == [
        {"output_ref": ref, "step": step, "hash": recorded[ref]["hash"], "matches_recorded": True}
        for ref, step in (("out-0000", 1), ("out-0001", 4), ("out-0002", 7))
    ]
    assert report["checks"][-2] == {
        "name": "steps",
        "ok": True,
        "detail": "9 steps replayed; sandbox mocks stood in for out-0000 (step 1), out-0001 "
        "(step 4), out-0002 (step 7) and fed the steps that consumed them (non-authoritative)",
    }
    assert mace_v1(report["divergences"]) == b"[]"
    assert canonical_report(report) == golden_report("unpersisted", engine.SANDBOX)

    code, out = replay_command(trace.trace_id, engine.SANDBOX)
    assert code == 0
    assert out.splitlines()[0] == "ok (non-authoritative)"

    # the same trace in production is refused: nothing was persisted to replay from
    production = replay_stored(trace, engine.PRODUCTION)
    assert production.error_code == MISSING_PERSISTED_AGENT_OUTPUT
    assert production.authoritative is False  # refused: no verdict, nothing to rely on


def test_it_marks_even_a_fully_persisted_sandbox_replay_non_authoritative():
    run = replay_stored(ingest("ok.trace.json"), engine.SANDBOX)

    assert (run.status, run.authoritative) == ("ok", False)
    assert run.report["substituted"] == []


# --- the real command line, in a subprocess --------------------------------------------------

# migrates a fresh database and registers the golden key, in one process (set-up, not under test)
SETUP = """
import django
django.setup()
from django.core.management import call_command
from tests.replay.helpers import register_golden_key
call_command("migrate", verbosity=0, interactive=False, skip_checks=True)
register_golden_key()
"""


@pytest.fixture
def manage(tmp_path):
    """Start `manage.py` commands in parallel subprocesses, each on its own copy of a migrated
    SQLite database; `manage(*argvs)` returns their CompletedProcess results in order."""
    root = Path(settings.BASE_DIR)
    template = tmp_path / "cli.sqlite3"

    def env(db: Path) -> dict[str, str]:
        return {
            **os.environ,
            "DATABASE_URL": f"sqlite:///{db}",
            "REPLAY_VAR_DIR": str(db.with_suffix(".var")),
            "DJANGO_SETTINGS_MODULE": "config.settings",
            # every copy of the database must decrypt the golden key's stored secret
            "REPLAY_KEY_ENCRYPTION_KEY": "tests/replay cli key-encryption key",
        }

    ready = subprocess.run(
        [sys.executable, "-c", SETUP],
        cwd=root,
        env=env(template),
        capture_output=True,
        text=True,
        check=False,
    )
    assert ready.returncode == 0, ready.stderr

    def run(*argvs: list[str]) -> list[subprocess.CompletedProcess[str]]:
        started = []
        for i, argv in enumerate(argvs):
            db = tmp_path / f"cli-{i}.sqlite3"
            shutil.copyfile(template, db)
            args = [sys.executable, str(root / "manage.py"), *argv]
            started.append(
                (
                    args,
                    subprocess.Popen(
                        args, cwd=root, env=env(db), stdout=PIPE, stderr=PIPE, text=True
                    ),
                )
            )
        done = []
        for args, proc in started:
            out, err = proc.communicate(timeout=120)
            done.append(subprocess.CompletedProcess(args, proc.returncode, out, err))
        return done

    return run


def test_it_prints_exactly_the_report_and_exits_0_1_or_2(manage):
    ok, diverged, usage = manage(
        ["replay", str(golden("ok.trace.json")), "--mode", "production", "--json"],
        ["replay", str(golden("diverged.trace.json")), "--json"],
        ["replay", str(golden("ok.trace.json")), "--mode", "live", "--json"],
    )

    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.endswith("}\n")
    assert ok.stdout.count("\n") == 1
    assert canonical_report(json.loads(ok.stdout)) == golden_report("ok", engine.PRODUCTION)

    assert diverged.returncode == 1, diverged.stderr
    assert canonical_report(json.loads(diverged.stdout)) == golden_report("diverged", engine.AUDIT)

    assert usage.returncode == 2
    assert usage.stdout == ""
    assert "argument --mode: invalid choice: 'live'" in usage.stderr
